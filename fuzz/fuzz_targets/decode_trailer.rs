//! Fuzzes the pack trailer's decoding: `checks/trailer.rs` says what is checked.
#![no_main]

#[allow(dead_code)]
#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::trailer::check(data));
