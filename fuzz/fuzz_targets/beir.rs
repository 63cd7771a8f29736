//! Fuzz target: st5_eval::fuzzing::beir (what it reads is documented there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| st5_eval::fuzzing::beir(data));
