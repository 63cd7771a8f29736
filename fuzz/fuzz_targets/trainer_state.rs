//! Fuzz target: st5_trainer::fuzzing::trainer_state (what it reads is documented there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| st5_trainer::fuzzing::trainer_state(data));
