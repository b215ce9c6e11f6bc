//! Slot layout arithmetic and trailer decoding: pure host logic, no GPU needed.
//!
//! A slot holds `capacity` elements of every column, each column starting at a multiple of
//! [`COLUMN_ALIGN`] bytes, then the [`Trailer`] at the next multiple of 16; slots are
//! [`SLOT_ALIGN`]-byte aligned. The constants come from `csrc/sized_readback.h` through bindgen.
use crate::abi;
use crate::element::CountKind;
use crate::error::{Error, Result};

/// Each column's region starts at a multiple of this many bytes.
pub const COLUMN_ALIGN: usize = abi::SRB_COLUMN_ALIGN as usize;
/// Each slot starts at a multiple of this many bytes.
pub const SLOT_ALIGN: usize = abi::SRB_SLOT_ALIGN as usize;
/// Most columns one readback can carry.
pub const MAX_COLUMNS: usize = abi::SRB_MAX_COLUMNS as usize;
/// Bytes of a trailer.
pub const TRAILER_BYTES: usize = std::mem::size_of::<abi::srb_trailer>();

/// The trailer at the end of every slot, as the kernel wrote it.
pub type Trailer = abi::srb_trailer;

/// Where each column and the trailer sit inside a slot, in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotLayout {
    capacity: usize,
    elem_sizes: Vec<usize>,
    offsets: Vec<usize>,
    trailer_offset: usize,
    stride: usize,
}

fn round_up(x: usize, to: usize) -> Option<usize> {
    x.checked_add(to - 1).map(|v| v / to * to)
}

impl SlotLayout {
    /// Lays out `capacity` elements of each column (given by element size in bytes).
    ///
    /// Errors: zero capacity, no columns, more than [`MAX_COLUMNS`], an element size of 0 or
    /// above `u32::MAX`, or a slot whose byte size overflows `usize`.
    pub fn new(capacity: usize, elem_sizes: &[usize]) -> Result<Self> {
        if capacity == 0 {
            return Err(Error::config("capacity must be at least 1 element"));
        }
        if elem_sizes.is_empty() || elem_sizes.len() > MAX_COLUMNS {
            return Err(Error::config(format!(
                "a readback carries 1 to {MAX_COLUMNS} columns, not {}",
                elem_sizes.len()
            )));
        }
        let overflow = || {
            Error::config(format!(
                "a slot of {capacity} elements of {elem_sizes:?} bytes overflows the address space"
            ))
        };
        let mut offsets = Vec::with_capacity(elem_sizes.len());
        let mut at = 0usize;
        for &size in elem_sizes {
            if size == 0 {
                return Err(Error::config(
                    "element size 0 (zero-sized types cannot be read back)",
                ));
            }
            if size > u32::MAX as usize {
                // srb_column.elem_size, the kernel's field, is 32 bits.
                return Err(Error::config(format!(
                    "element size {size} exceeds the kernel's limit of {} bytes",
                    u32::MAX
                )));
            }
            offsets.push(at);
            let bytes = capacity.checked_mul(size).ok_or_else(overflow)?;
            at = at
                .checked_add(bytes)
                .and_then(|v| round_up(v, COLUMN_ALIGN))
                .ok_or_else(overflow)?;
        }
        let trailer_offset = at;
        let stride = trailer_offset
            .checked_add(TRAILER_BYTES)
            .and_then(|v| round_up(v, SLOT_ALIGN))
            .ok_or_else(overflow)?;
        // Device addresses and the kernel's arithmetic are 64-bit; so is every supported host.
        Ok(SlotLayout {
            capacity,
            elem_sizes: elem_sizes.to_vec(),
            offsets,
            trailer_offset,
            stride,
        })
    }

    /// Elements of each column one slot holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Bytes per element of each column.
    pub fn elem_sizes(&self) -> &[usize] {
        &self.elem_sizes
    }
    /// Byte offset of each column within a slot.
    pub fn column_offsets(&self) -> &[usize] {
        &self.offsets
    }
    /// Byte offset of the trailer within a slot.
    pub fn trailer_offset(&self) -> usize {
        self.trailer_offset
    }
    /// Bytes from one slot to the next.
    pub fn slot_stride(&self) -> usize {
        self.stride
    }
    /// Bytes one slot's data and trailer occupy (what the staged transport copies).
    pub fn slot_bytes(&self) -> usize {
        self.trailer_offset + TRAILER_BYTES
    }
    /// Bytes of one row (one element of every column).
    pub fn row_bytes(&self) -> usize {
        self.elem_sizes.iter().sum()
    }
    /// Bytes of `slots` slots, or an error if that overflows.
    pub fn total_bytes(&self, slots: usize) -> Result<usize> {
        if slots == 0 {
            return Err(Error::config("a readback needs at least 1 slot"));
        }
        self.stride.checked_mul(slots).ok_or_else(|| {
            Error::config(format!("{slots} slots of {} bytes overflow", self.stride))
        })
    }
}

/// Decodes a trailer read from slot `slot` for the readback with sequence number `expected`.
///
/// `source_lens` are the lengths of the columns' sources, to name the column that was too
/// short. Returns the count on success, or the error the kernel's status bits stand for.
pub fn decode_trailer(
    t: &Trailer,
    expected: u64,
    slot: usize,
    kind: CountKind,
    capacity: usize,
    source_lens: &[usize],
) -> Result<usize> {
    if t.seq != expected || t.magic != abi::SRB_TRAILER_MAGIC {
        return Err(Error::CorruptTrailer {
            slot,
            expected,
            found: t.seq,
            magic: t.magic,
        });
    }
    let count = t.count_raw;
    if t.status & abi::SRB_STATUS_NEGATIVE != 0 {
        return Err(Error::NegativeCount {
            count: count as i64,
        });
    }
    if t.status & abi::SRB_STATUS_OVER_CAPACITY != 0 {
        return Err(Error::CountExceedsCapacity { count, capacity });
    }
    if t.status & abi::SRB_STATUS_OVER_SOURCE != 0 {
        let column = source_lens
            .iter()
            .position(|&len| (len as u64) < count)
            .unwrap_or(0);
        return Err(Error::CountExceedsSource {
            count,
            column,
            source_len: source_lens.get(column).copied().unwrap_or(0),
        });
    }
    if t.status != abi::SRB_STATUS_OK || t.count_copied != count || count > capacity as u64 {
        return Err(Error::CorruptTrailer {
            slot,
            expected,
            found: t.seq,
            magic: t.magic,
        });
    }
    if kind.is_signed() && (count as i64) < 0 {
        return Err(Error::NegativeCount {
            count: count as i64,
        });
    }
    Ok(count as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trailer(raw: u64, copied: u64, status: u32, seq: u64) -> Trailer {
        Trailer {
            count_raw: raw,
            count_copied: copied,
            status,
            magic: abi::SRB_TRAILER_MAGIC,
            seq,
        }
    }

    #[test]
    fn trailer_is_32_bytes_and_matches_the_header() {
        assert_eq!(TRAILER_BYTES, 32);
        assert_eq!(std::mem::offset_of!(Trailer, seq), 24);
        assert_eq!(std::mem::size_of::<abi::srb_column>(), 32);
        assert_eq!(COLUMN_ALIGN, 16);
        assert_eq!(SLOT_ALIGN, 128);
    }

    #[test]
    fn single_column_layout() {
        let l = SlotLayout::new(5, &[8]).unwrap();
        assert_eq!(l.column_offsets(), &[0]);
        assert_eq!(l.trailer_offset(), 48); // 40 bytes rounded up to 16
        assert_eq!(l.slot_bytes(), 80);
        assert_eq!(l.slot_stride(), 128);
        assert_eq!(l.total_bytes(3).unwrap(), 384);
    }

    #[test]
    fn columns_are_aligned_and_packed_in_order() {
        let l = SlotLayout::new(3, &[8, 4, 12, 1]).unwrap();
        assert_eq!(l.column_offsets(), &[0, 32, 48, 96]);
        assert_eq!(l.trailer_offset(), 112);
        assert_eq!(l.row_bytes(), 25);
        assert_eq!(l.slot_stride(), 256);
    }

    #[test]
    fn configuration_errors() {
        assert!(matches!(
            SlotLayout::new(0, &[8]),
            Err(Error::InvalidConfig { .. })
        ));
        assert!(matches!(
            SlotLayout::new(4, &[]),
            Err(Error::InvalidConfig { .. })
        ));
        assert!(matches!(
            SlotLayout::new(4, &[0]),
            Err(Error::InvalidConfig { .. })
        ));
        assert!(matches!(
            SlotLayout::new(4, &[1; 9]),
            Err(Error::InvalidConfig { .. })
        ));
        assert!(matches!(
            SlotLayout::new(1, &[1 << 32]),
            Err(Error::InvalidConfig { .. })
        ));
        assert!(matches!(
            SlotLayout::new(usize::MAX / 4, &[8]),
            Err(Error::InvalidConfig { .. })
        ));
        assert!(matches!(
            SlotLayout::new(usize::MAX - 20, &[1]),
            Err(Error::InvalidConfig { .. })
        ));
        let l = SlotLayout::new(1 << 20, &[8]).unwrap();
        assert!(matches!(l.total_bytes(0), Err(Error::InvalidConfig { .. })));
        assert!(matches!(
            l.total_bytes(usize::MAX),
            Err(Error::InvalidConfig { .. })
        ));
    }

    #[test]
    fn decodes_a_good_trailer() {
        let t = trailer(5, 5, 0, 7);
        assert_eq!(
            decode_trailer(&t, 7, 0, CountKind::I32, 8, &[10]).unwrap(),
            5
        );
        let empty = trailer(0, 0, 0, 1);
        assert_eq!(
            decode_trailer(&empty, 1, 0, CountKind::U64, 8, &[0]).unwrap(),
            0
        );
    }

    #[test]
    fn maps_status_bits_to_errors() {
        let neg = trailer((-3i64) as u64, 0, abi::SRB_STATUS_NEGATIVE, 2);
        assert!(matches!(
            decode_trailer(&neg, 2, 0, CountKind::I32, 8, &[8]),
            Err(Error::NegativeCount { count: -3 })
        ));
        let over = trailer(9, 0, abi::SRB_STATUS_OVER_CAPACITY, 2);
        assert!(matches!(
            decode_trailer(&over, 2, 0, CountKind::I32, 8, &[100]),
            Err(Error::CountExceedsCapacity {
                count: 9,
                capacity: 8
            })
        ));
        let short = trailer(6, 0, abi::SRB_STATUS_OVER_SOURCE, 2);
        assert!(matches!(
            decode_trailer(&short, 2, 0, CountKind::I32, 8, &[10, 5]),
            Err(Error::CountExceedsSource {
                count: 6,
                column: 1,
                source_len: 5
            })
        ));
    }

    #[test]
    fn stale_or_garbled_trailers_are_corrupt() {
        let stale = trailer(5, 5, 0, 6);
        assert!(matches!(
            decode_trailer(&stale, 7, 3, CountKind::I32, 8, &[8]),
            Err(Error::CorruptTrailer {
                slot: 3,
                expected: 7,
                found: 6,
                ..
            })
        ));
        let mut bad_magic = trailer(5, 5, 0, 7);
        bad_magic.magic = 0;
        assert!(decode_trailer(&bad_magic, 7, 0, CountKind::I32, 8, &[8]).is_err());
        let mismatch = trailer(5, 4, 0, 7);
        assert!(decode_trailer(&mismatch, 7, 0, CountKind::I32, 8, &[8]).is_err());
        let too_big = trailer(9, 9, 0, 7);
        assert!(decode_trailer(&too_big, 7, 0, CountKind::I32, 8, &[9]).is_err());
    }
}
