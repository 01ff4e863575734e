//! Fuzz target: see `tessera_tests::fuzz::dicom_series`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_tests::fuzz::dicom_series(data));
