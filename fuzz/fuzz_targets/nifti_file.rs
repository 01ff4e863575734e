//! Fuzz target: see `tessera_tests::fuzz::nifti_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_tests::fuzz::nifti_file(data));
