//! Fuzz target: see `tessera_tests::fuzz::model_card`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tessera_tests::fuzz::model_card(data));
