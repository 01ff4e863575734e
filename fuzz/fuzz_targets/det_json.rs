//! Fuzz target: see `tessera_tests::fuzz::det_json`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_tests::fuzz::det_json(data));
