//! The host's view of one complete slot: its rows, column by column, in pinned memory.
use super::Slots;

/// `rows` rows of every column of slot `slot`, readback `seq`. Made only for a complete
/// readback whose slot stays held for `'a`.
#[derive(Debug)]
pub(crate) struct SlotView<'a> {
    slots: &'a Slots,
    slot: usize,
    rows: usize,
    seq: u64,
}

impl<'a> SlotView<'a> {
    /// `rows` must be at most the capacity, the readback complete (acquire taken), and the
    /// slot held by the caller for `'a`.
    pub(crate) fn new(slots: &'a Slots, slot: usize, rows: usize, seq: u64) -> Self {
        debug_assert!(rows <= slots.layout().capacity());
        SlotView {
            slots,
            slot,
            rows,
            seq,
        }
    }

    /// The same view for a shorter borrow.
    pub(crate) fn reborrow(&self) -> SlotView<'_> {
        SlotView { ..*self }
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// Column `col`'s `rows * elem_size` bytes; `None` if there is no such column.
    pub(crate) fn column_bytes(&self, col: usize) -> Option<&'a [u8]> {
        let size = *self.slots.layout().elem_sizes().get(col)?;
        let ptr = self.slots.column_host_ptr(self.slot, col);
        // SAFETY: the readback is complete (acquire taken by the wait), the slot holds `rows`
        // <= capacity rows of the column, and it stays held (unwritten) for 'a.
        Some(unsafe { std::slice::from_raw_parts(ptr, self.rows * size) })
    }

    /// Column `col` as `rows` values of `T`.
    ///
    /// # Safety
    /// `T` is valid for any bits, has the column's element size, and an alignment of at most
    /// 16 (the column's region is 16-byte aligned, and element sizes are multiples of the
    /// alignment).
    pub(crate) unsafe fn column<T>(&self, col: usize) -> &'a [T] {
        let ptr = self.slots.column_host_ptr(self.slot, col).cast::<T>();
        // SAFETY: as in column_bytes, and T per the contract.
        unsafe { std::slice::from_raw_parts(ptr, self.rows) }
    }
}

impl Clone for SlotView<'_> {
    fn clone(&self) -> Self {
        SlotView { ..*self }
    }
}
