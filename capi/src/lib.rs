//! The C API of sized-readback as a C library: `libsized_readback.a` and `libsized_readback.so`
//! (SONAME `libsized_readback.so.0`), declared by `include/sized_readback.h`. The functions
//! live in the main crate behind its `capi` feature (`src/capi/`); this crate only links them
//! into C libraries, so Rust dependents of `sized-readback` build no C library of their own.
pub use srb::capi::*;
