//! The types a readback can carry: elements ([`Element`]) and device-resident counts
//! ([`CountType`]).
use crate::raw::abi;

/// A type whose values can be read back: the host views the bytes the device wrote as `[Self]`.
///
/// Implemented for the primitive integers and floats and for arrays of them (so
/// `[f32; 3]`, 12 bytes, is a 3-vector). Element sizes from 1 to any number of bytes work;
/// the kernel copies bytes and picks the widest access the source alignment allows.
///
/// # Safety
/// Implement it only for `#[repr(C)]` or `#[repr(transparent)]` plain-old-data types for which
/// every bit pattern of `size_of::<Self>()` bytes is a valid value (no `bool`, `char`, enums,
/// references or pointers to host memory), and whose alignment is at most 16 bytes.
pub unsafe trait Element: Copy + Send + Sync + 'static {}

macro_rules! element {
    ($($t:ty),*) => { $(
        // SAFETY: primitive numbers: every bit pattern is valid, alignment <= 16.
        unsafe impl Element for $t {}
    )* };
}
element!(u8, i8, u16, i16, u32, i32, u64, i64, u128, i128, f32, f64);
// SAFETY: an array of valid-for-any-bits elements is valid for any bits; same alignment as T.
unsafe impl<T: Element, const N: usize> Element for [T; N] {}

/// How a device-resident count is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CountKind {
    /// `i32`, as in the seed program (`int* d_size`).
    I32,
    /// `u32`.
    U32,
    /// `i64`.
    I64,
    /// `u64`.
    U64,
}

impl CountKind {
    /// Bytes of one count (also its required alignment).
    pub const fn size(self) -> usize {
        match self {
            CountKind::I32 | CountKind::U32 => 4,
            CountKind::I64 | CountKind::U64 => 8,
        }
    }

    /// Whether the count type is signed (so a negative count is an error).
    pub const fn is_signed(self) -> bool {
        matches!(self, CountKind::I32 | CountKind::I64)
    }

    /// The Rust name of the count type (`"i32"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            CountKind::I32 => "i32",
            CountKind::U32 => "u32",
            CountKind::I64 => "i64",
            CountKind::U64 => "u64",
        }
    }

    pub(crate) const fn abi(self) -> u32 {
        match self {
            CountKind::I32 => abi::SRB_COUNT_I32,
            CountKind::U32 => abi::SRB_COUNT_U32,
            CountKind::I64 => abi::SRB_COUNT_I64,
            CountKind::U64 => abi::SRB_COUNT_U64,
        }
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for i32 {}
    impl Sealed for u32 {}
    impl Sealed for i64 {}
    impl Sealed for u64 {}
}

/// Integer types a device-resident count may have: `i32`, `u32`, `i64`, `u64`.
pub trait CountType: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The matching [`CountKind`].
    const KIND: CountKind;
}
impl CountType for i32 {
    const KIND: CountKind = CountKind::I32;
}
impl CountType for u32 {
    const KIND: CountKind = CountKind::U32;
}
impl CountType for i64 {
    const KIND: CountKind = CountKind::I64;
}
impl CountType for u64 {
    const KIND: CountKind = CountKind::U64;
}
