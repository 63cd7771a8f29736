//! Fuzz target: st5_format::fuzzing::search_filter (what it reads is documented there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| st5_format::fuzzing::search_filter(data));
