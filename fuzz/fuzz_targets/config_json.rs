//! Fuzz target: st5_format::fuzzing::config_json (what it reads is documented there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| st5_format::fuzzing::config_json(data));
