//! For the C API crate (`capi/`) only, behind the feature `__internal-api`: not public API,
//! and without a semver promise. The C header declares the append descriptor and the count
//! kinds through `sized_readback/slot.h`; these are the same definitions, generated from it.
use crate::append::AppendDesc;
pub use crate::raw::abi::{
    srb_append_desc, SRB_COUNT_I32, SRB_COUNT_I64, SRB_COUNT_U32, SRB_COUNT_U64,
};

/// `d` as the kernel parameter's C struct (`AppendDesc` is a transparent wrapper of it).
pub fn raw_append_desc(d: &AppendDesc) -> srb_append_desc {
    d.0
}
