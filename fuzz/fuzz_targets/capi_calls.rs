//! Fuzzes every C entry point that takes a readback handle, with a null one (no handle exists
//! without a GPU): `checks/capi_calls.rs` says what is covered and checked.
#![no_main]

#[allow(dead_code)]
#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::capi_calls::check(data));
