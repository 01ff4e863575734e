//! Fuzz target: see `tessera_tests::fuzz::metaimage_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_tests::fuzz::metaimage_file(data));
