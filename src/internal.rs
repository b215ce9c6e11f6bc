//! For the C API crate (`capi/`) only, behind the feature `__internal-api`: not public API,
//! and without a semver promise. The C header declares the append descriptor and the count
//! kinds through `sized_readback/slot.h`; these are the same definitions, generated from it.
use crate::append::AppendDesc;
pub use crate::raw::abi::{
    srb_append_desc, SRB_COUNT_I32, SRB_COUNT_I64, SRB_COUNT_U32, SRB_COUNT_U64,
};

/// The count kind an `srb_count_kind` value names, if any (the C API's `count_kind`
/// arguments).
pub fn count_kind_from_abi(value: u32) -> Option<crate::CountKind> {
    crate::CountKind::from_abi(value)
}

/// `d` as the kernel parameter's C struct (`AppendDesc` is a transparent wrapper of it).
pub fn raw_append_desc(d: &AppendDesc) -> srb_append_desc {
    d.0
}
