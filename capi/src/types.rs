//! The C types of the API (the driver's opaque stream and event, device addresses, the append
//! descriptor), the count kinds and the limits.
use crate::boundary::{invalid, Failure};
use srb::CountKind;
use std::ffi::c_ulonglong;

/// The driver API's stream object (`CUstream` and `cudaStream_t` point to it); opaque.
pub struct CUstream_st {
    _opaque: [u8; 0],
}
/// The driver API's event object (`CUevent` and `cudaEvent_t` point to it); opaque.
pub struct CUevent_st {
    _opaque: [u8; 0],
}

/// A device address, as `CUdeviceptr` (a runtime-API device pointer cast to an integer).
pub type srb_devptr = c_ulonglong;

/// The append descriptor (declared for C by `sized_readback/slot.h`).
pub use srb::__internal::srb_append_desc;

/// Most buckets of one bucketed readback.
pub const SRB_MAX_BUCKETS: u32 = 256;

/// The first count kinds: `sized_readback/slot.h`'s `srb_count_kind` (`SRB_COUNT_I32` for
/// `int32_t`, as in `int* d_size`; `SRB_COUNT_U32`, `SRB_COUNT_I64`, `SRB_COUNT_U64`; the
/// table `xtask/src/count_kinds.rs` holds every one), which C sees through that header.
pub use srb::__internal::{SRB_COUNT_I32, SRB_COUNT_I64, SRB_COUNT_U32, SRB_COUNT_U64};

/// Deprecated: `SRB_COUNT_I32` (the same value), the one spelling of the count kinds. Kept so
/// that sources written against the first release compile.
#[deprecated(note = "use SRB_COUNT_I32")]
pub const SRB_COUNT_INT32: u32 = SRB_COUNT_I32;
/// Deprecated: `SRB_COUNT_U32`.
#[deprecated(note = "use SRB_COUNT_U32")]
pub const SRB_COUNT_UINT32: u32 = SRB_COUNT_U32;
/// Deprecated: `SRB_COUNT_I64`.
#[deprecated(note = "use SRB_COUNT_I64")]
pub const SRB_COUNT_INT64: u32 = SRB_COUNT_I64;
/// Deprecated: `SRB_COUNT_U64`.
#[deprecated(note = "use SRB_COUNT_U64")]
pub const SRB_COUNT_UINT64: u32 = SRB_COUNT_U64;

/// Most columns of one readback.
pub const SRB_MAX_COLUMNS: u32 = 8;

// The C API's limits are the library's.
const _: () = {
    assert!(SRB_MAX_COLUMNS as usize == srb::MAX_COLUMNS);
    assert!(SRB_MAX_BUCKETS as usize == srb::MAX_BUCKETS);
    // `AppendDesc` is a transparent wrapper of the C struct.
    assert!(std::mem::size_of::<srb_append_desc>() == std::mem::size_of::<srb::AppendDesc>());
};

/// The count kind `SRB_COUNT_*` names: any value the count kinds' table does not hold is
/// refused here, before a launch could hand it to the kernel.
pub(crate) fn parse_count_kind(kind: u32) -> Result<CountKind, Failure> {
    srb::__internal::count_kind_from_abi(kind)
        .ok_or_else(|| invalid(format!("unknown count kind {kind}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::SRB_ERR_INVALID_ARGUMENT;

    /// Every kind of the table parses to itself; any other value is refused on the host, so an
    /// int from C never reaches the kernel as a kind it does not know.
    #[test]
    fn count_kinds_parse_as_the_table_says_and_others_are_refused() {
        for (i, kind) in CountKind::ALL.iter().enumerate() {
            assert_eq!(parse_count_kind(i as u32).ok(), Some(*kind));
        }
        assert_eq!(parse_count_kind(SRB_COUNT_I32).ok(), Some(CountKind::I32));
        assert_eq!(parse_count_kind(SRB_COUNT_U64).ok(), Some(CountKind::U64));
        for bad in [CountKind::ALL.len() as u32, 99, u32::MAX] {
            let f = parse_count_kind(bad).unwrap_err();
            assert_eq!(f.code, SRB_ERR_INVALID_ARGUMENT);
            assert_eq!(f.message, format!("unknown count kind {bad}"));
        }
    }
}
