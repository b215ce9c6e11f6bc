//! Slot layout arithmetic: pure host logic, no GPU needed.
//!
//! A slot holds `capacity` elements of every column, each column starting at a multiple of
//! [`COLUMN_ALIGN`] bytes, then the trailer at the next multiple of 16; slots are
//! [`SLOT_ALIGN`]-byte aligned. The constants come from `include/sized_readback/slot.h`
//! through bindgen.
use crate::error::{Error, Result};
use crate::raw::abi;

/// Each column's region starts at a multiple of this many bytes.
pub(crate) const COLUMN_ALIGN: usize = abi::SRB_COLUMN_ALIGN as usize;
/// Each slot starts at a multiple of this many bytes.
pub(crate) const SLOT_ALIGN: usize = abi::SRB_SLOT_ALIGN as usize;
/// Most columns one readback can carry.
pub const MAX_COLUMNS: usize = abi::SRB_MAX_COLUMNS as usize;
/// Most buckets of one bucketed readback.
pub const MAX_BUCKETS: usize = abi::SRB_MAX_BUCKETS as usize;
/// Bytes of a trailer.
pub(crate) const TRAILER_BYTES: usize = std::mem::size_of::<abi::srb_trailer>();

/// Where each column and the trailer sit inside a slot, in bytes: what the pack kernel and
/// the append header write, and what the host reads. Every column region starts 16-byte
/// aligned; the 32-byte trailer follows the last column, 16-byte aligned; slots are 128-byte
/// aligned (`include/sized_readback/slot.h` draws it). A bucketed layout gives each column one
/// region of `capacity` rows per bucket and puts the bucket table before the trailer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotLayout {
    capacity: usize,
    buckets: usize,
    table: bool,
    elem_sizes: Vec<usize>,
    offsets: Vec<usize>,
    table_offset: usize,
    trailer_offset: usize,
    stride: usize,
}

/// Whether a slot has a bucket table (the counts of each bucket, before the trailer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BucketTable {
    /// Only with more than one bucket.
    IfBucketed,
    /// Also with one bucket: the bucket pack writes one.
    Always,
}

/// Bytes of a bucket table of `k` buckets: four header words and one count per bucket.
pub(crate) fn table_bytes(k: usize) -> usize {
    8 * (4 + k)
}

fn round_up(x: usize, to: usize) -> Option<usize> {
    x.checked_add(to - 1).map(|v| v / to * to)
}

impl SlotLayout {
    /// Lays out `capacity` elements of each column (given by element size in bytes), one
    /// bucket, no table.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn new(capacity: usize, elem_sizes: &[usize]) -> Result<Self> {
        Self::with_buckets(capacity, elem_sizes, 1, BucketTable::IfBucketed)
    }

    /// Lays out `buckets` regions of `capacity` rows of each column (given by element size in
    /// bytes); the bucket table, if `table` asks for one, follows the columns.
    ///
    /// Errors: zero capacity, no columns, more than [`MAX_COLUMNS`], an element size of 0 or
    /// above `u32::MAX`, 0 or more than [`MAX_BUCKETS`] buckets, or a slot whose byte size
    /// overflows `usize`.
    pub(crate) fn with_buckets(
        capacity: usize,
        elem_sizes: &[usize],
        buckets: usize,
        table: BucketTable,
    ) -> Result<Self> {
        if capacity == 0 {
            return Err(Error::config("capacity must be at least 1 element"));
        }
        if buckets == 0 || buckets > MAX_BUCKETS {
            return Err(Error::config(format!(
                "a readback has 1 to {MAX_BUCKETS} buckets, not {buckets}"
            )));
        }
        if elem_sizes.is_empty() || elem_sizes.len() > MAX_COLUMNS {
            return Err(Error::config(format!(
                "a readback carries 1 to {MAX_COLUMNS} columns, not {}",
                elem_sizes.len()
            )));
        }
        let overflow = || {
            let row: u128 = elem_sizes.iter().map(|&s| s as u128).sum();
            Error::config(format!(
                "a slot of {capacity} rows of {row} bytes overflows the address space"
            ))
        };
        let mut offsets = Vec::with_capacity(elem_sizes.len());
        let mut at = 0usize;
        for (column, &size) in elem_sizes.iter().enumerate() {
            if size == 0 {
                return Err(Error::config(format!(
                    "column {column} has elements of 0 bytes: an element needs at least 1 byte"
                )));
            }
            if size > u32::MAX as usize {
                // srb_column.elem_size, the kernel's field, is 32 bits.
                return Err(Error::config(format!(
                    "element size {size} exceeds the kernel's limit of {} bytes",
                    u32::MAX
                )));
            }
            offsets.push(at);
            let bytes = capacity
                .checked_mul(buckets)
                .and_then(|r| r.checked_mul(size))
                .ok_or_else(overflow)?;
            at = at
                .checked_add(bytes)
                .and_then(|v| round_up(v, COLUMN_ALIGN))
                .ok_or_else(overflow)?;
        }
        let table_offset = at;
        let table = table == BucketTable::Always || buckets > 1;
        if table {
            at = at
                .checked_add(table_bytes(buckets))
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
            buckets,
            table,
            elem_sizes: elem_sizes.to_vec(),
            offsets,
            table_offset,
            trailer_offset,
            stride,
        })
    }

    /// Rows of each column one slot holds (per bucket, in a bucketed layout).
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Buckets (1 unless bucketed).
    pub fn buckets(&self) -> usize {
        self.buckets
    }
    /// Whether the slot has a bucket table (bucketed layouts).
    pub fn has_bucket_table(&self) -> bool {
        self.table
    }
    /// Byte offset of the bucket table within a slot (bucketed layouts; else the trailer's).
    pub fn bucket_table_offset(&self) -> usize {
        self.table_offset
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
    pub(crate) fn row_bytes(&self) -> usize {
        self.elem_sizes.iter().sum()
    }
    /// Bytes of `slots` slots, or an error if that overflows.
    pub(crate) fn total_bytes(&self, slots: usize) -> Result<usize> {
        if slots == 0 {
            return Err(Error::config("a readback needs at least 1 slot"));
        }
        self.stride.checked_mul(slots).ok_or_else(|| {
            Error::config(format!("{slots} slots of {} bytes overflow", self.stride))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_is_32_bytes_and_matches_the_header() {
        assert_eq!(TRAILER_BYTES, 32);
        assert_eq!(std::mem::offset_of!(abi::srb_trailer, seq), 24);
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
    fn bucketed_layout() {
        let l = SlotLayout::with_buckets(3, &[8, 4], 4, BucketTable::IfBucketed).unwrap();
        assert_eq!(l.column_offsets(), &[0, 96]);
        assert_eq!(l.bucket_table_offset(), 144);
        assert_eq!(l.trailer_offset(), 144 + 64); // 4 header words + 4 counts
        assert_eq!(l.buckets(), 4);
        assert_eq!(table_bytes(4), 64);
        assert!(SlotLayout::with_buckets(3, &[8], 0, BucketTable::IfBucketed).is_err());
        assert!(
            SlotLayout::with_buckets(3, &[8], MAX_BUCKETS + 1, BucketTable::IfBucketed).is_err()
        );
        assert!(
            SlotLayout::with_buckets(usize::MAX / 16, &[8], 256, BucketTable::IfBucketed).is_err()
        );
        // One bucket with a table (a bucket pack of one bucket).
        let one = SlotLayout::with_buckets(3, &[8], 1, BucketTable::Always).unwrap();
        assert!(one.has_bucket_table() && one.trailer_offset() == 32 + 48);
        assert!(!SlotLayout::new(3, &[8]).unwrap().has_bucket_table());
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
}
