//! Fuzzes `srb_create`, `srb_create_append` and `srb_create_buckets`: `checks/capi_create.rs`
//! says what is covered and checked, and what is left to the GPU tests.
#![no_main]

#[allow(dead_code)]
#[path = "../checks/mod.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::capi_create::check(data));
