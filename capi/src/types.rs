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

/// The count kinds: `sized_readback/slot.h`'s `srb_count_kind` (`SRB_COUNT_I32` for `int32_t`,
/// as in `int* d_size`; `SRB_COUNT_U32`, `SRB_COUNT_I64`, `SRB_COUNT_U64`), which C sees
/// through that header.
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

/// The count kind `SRB_COUNT_*` names.
pub(crate) fn parse_count_kind(kind: u32) -> Result<CountKind, Failure> {
    Ok(match kind {
        SRB_COUNT_I32 => CountKind::I32,
        SRB_COUNT_U32 => CountKind::U32,
        SRB_COUNT_I64 => CountKind::I64,
        SRB_COUNT_U64 => CountKind::U64,
        other => return Err(invalid(format!("unknown count kind {other}"))),
    })
}
