//! The host's view of one complete slot: its rows, column by column, in pinned memory.
use super::slots::Slots;

/// `rows` rows of every column of slot `slot`, readback `seq` (bucketed: `buckets[b]` rows of
/// bucket b, `rows` their sum). Made only for a complete readback whose slot stays held for
/// `'a`.
#[derive(Debug)]
pub(crate) struct SlotView<'a> {
    slots: &'a Slots,
    slot: usize,
    rows: usize,
    seq: u64,
    buckets: Vec<usize>,
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
            buckets: Vec::new(),
        }
    }

    /// The view of a bucketed slot with `buckets[b]` (<= capacity) rows in bucket b.
    pub(crate) fn with_buckets(
        slots: &'a Slots,
        slot: usize,
        buckets: Vec<usize>,
        seq: u64,
    ) -> Self {
        debug_assert!(buckets.iter().all(|&r| r <= slots.layout().capacity()));
        SlotView {
            slots,
            slot,
            rows: buckets.iter().sum(),
            seq,
            buckets,
        }
    }

    /// The same view for a shorter borrow.
    pub(crate) fn reborrow(&self) -> SlotView<'_> {
        SlotView {
            buckets: self.buckets.clone(),
            ..*self
        }
    }

    /// Buckets of the slot (1 unless bucketed).
    pub(crate) fn buckets(&self) -> usize {
        self.buckets.len().max(1)
    }
    /// Rows of bucket `b` (`None` past the last bucket).
    pub(crate) fn bucket_rows(&self, b: usize) -> Option<usize> {
        if self.buckets.is_empty() {
            (b == 0).then_some(self.rows)
        } else {
            self.buckets.get(b).copied()
        }
    }

    /// Column `col`'s rows of bucket `b`; `None` if there is no such column or bucket.
    pub(crate) fn bucket_bytes(&self, col: usize, b: usize) -> Option<&'a [u8]> {
        let size = *self.slots.layout().elem_sizes().get(col)?;
        let rows = self.bucket_rows(b)?;
        let start = b * self.slots.layout().capacity() * size;
        // SAFETY: bucket b's region of the column lies in the slot (the layout gives every
        // column buckets * capacity rows); the readback is complete and the slot held for 'a.
        Some(unsafe {
            std::slice::from_raw_parts(
                self.slots.column_host_ptr(self.slot, col).add(start),
                rows * size,
            )
        })
    }

    /// Column `col`'s rows of bucket `b` as values of `T`.
    ///
    /// # Safety
    /// As [`SlotView::column`]; `b` is a bucket of the slot.
    pub(crate) unsafe fn bucket_column<T>(&self, col: usize, b: usize) -> &'a [T] {
        let rows = self.bucket_rows(b).unwrap_or(0);
        let start = b * self.slots.layout().capacity();
        let ptr = self.slots.column_host_ptr(self.slot, col).cast::<T>();
        // SAFETY: per the contract and as in bucket_bytes.
        unsafe { std::slice::from_raw_parts(ptr.add(start), rows) }
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// The same view, numbered `seq` (a readback of two slot sets numbers its readbacks
    /// across both).
    pub(crate) fn renumbered(self, seq: u64) -> Self {
        SlotView { seq, ..self }
    }

    /// Column `col`'s `capacity * elem_size` bytes, past the count too (what a staged copy
    /// wrote there, or what was there before); `None` if there is no such column.
    #[cfg(feature = "testing")]
    pub(crate) fn column_capacity_bytes(&self, col: usize) -> Option<&'a [u8]> {
        let size = *self.slots.layout().elem_sizes().get(col)?;
        let ptr = self.slots.column_host_ptr(self.slot, col);
        // SAFETY: the column's region holds capacity rows (times the buckets) in the host
        // buffer; the readback is complete and the slot held for 'a, so nothing writes it.
        Some(unsafe { std::slice::from_raw_parts(ptr, self.slots.layout().capacity() * size) })
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
        SlotView {
            buckets: self.buckets.clone(),
            ..*self
        }
    }
}
