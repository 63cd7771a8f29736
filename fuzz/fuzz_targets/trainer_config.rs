//! Fuzz target: st5_trainer::fuzzing::trainer_config (what it reads is documented there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| st5_trainer::fuzzing::trainer_config(data));
