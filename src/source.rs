//! Raw device sources of an enqueue or a recording: a column's address and length, and a
//! device-resident count's address and kind.
use crate::element::CountKind;
use crate::error::{Error, Result};
use cudarc::driver::sys::CUdeviceptr;

/// One source column of an enqueue: a device address and the elements readable there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ColumnSource {
    /// Device address of element 0 (any alignment).
    pub ptr: CUdeviceptr,
    /// Elements readable from `ptr`.
    pub len: usize,
}

/// A device-resident count given by raw address: where it is and how it is stored.
///
/// ```
/// use sized_readback::RawCount;
/// let d_size: u64 = 0x7f00_0000_0000; // e.g. `(CUdeviceptr)d_size` of C code's `int* d_size`
/// let count = RawCount::i32(d_size);
/// assert_eq!(count.ptr(), d_size);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawCount {
    ptr: CUdeviceptr,
    kind: CountKind,
}

impl RawCount {
    /// A count of `kind` at `ptr`.
    pub fn new(ptr: CUdeviceptr, kind: CountKind) -> Self {
        RawCount { ptr, kind }
    }
    /// An `int32_t` count (C's `int* d_size`).
    pub fn i32(ptr: CUdeviceptr) -> Self {
        Self::new(ptr, CountKind::I32)
    }
    /// A `uint32_t` count.
    pub fn u32(ptr: CUdeviceptr) -> Self {
        Self::new(ptr, CountKind::U32)
    }
    /// An `int64_t` count.
    pub fn i64(ptr: CUdeviceptr) -> Self {
        Self::new(ptr, CountKind::I64)
    }
    /// A `uint64_t` count.
    pub fn u64(ptr: CUdeviceptr) -> Self {
        Self::new(ptr, CountKind::U64)
    }
    /// The device address.
    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    /// How the count is stored.
    pub fn kind(&self) -> CountKind {
        self.kind
    }

    /// Errors ([`Error::BadPointer`]) unless the address is non-null and aligned to the
    /// count's size. Pure host logic.
    pub(crate) fn check_address(&self) -> Result<()> {
        if self.ptr == 0 || !self.ptr.is_multiple_of(self.kind.size() as u64) {
            return Err(Error::BadPointer {
                what: "the count",
                addr: self.ptr,
                align: self.kind.size(),
            });
        }
        Ok(())
    }
}
