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

impl CountKind {
    /// `raw`, a count of this kind as the pack kernel widened it to 64 bits, as a signed
    /// value: sign-extended from the kind's width for a signed kind, so a negative count reads
    /// negative whatever the width (an unsigned kind's values up to `i64::MAX` are unchanged).
    pub(crate) const fn signed_value(self, raw: u64) -> i64 {
        let shift = 64 - 8 * self.size() as u32;
        if self.is_signed() {
            ((raw << shift) as i64) >> shift
        } else {
            raw as i64
        }
    }
}

/// Integer types a device-resident count may have: the primitive each [`CountKind`] names.
pub trait CountType: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The matching [`CountKind`].
    const KIND: CountKind;
}

// `CountKind` (its sizes, signedness, names and C values) and the `CountType` impls, one per
// row of the count types' table (xtask/src/count_kinds.rs), made by `cargo xtask regen`.
include!("raw/generated/count_kinds.rs");
