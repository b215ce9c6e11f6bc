//! The C API of sized-readback as C libraries: `libsized_readback.a` and `libsized_readback.so`
//! (SONAME `libsized_readback.so.0`), declared by `capi/include/sized_readback.h`. The `srb_*`
//! functions are those of `sized-readback-capi` (`capi/src/`); this crate only links them into
//! C libraries, under the name C programs link.
pub use capi::*;
