//! What every multi-column façade hands out: the [`ColumnTicket`] that holds an enqueued
//! readback's slot, and the [`ColumnReadout`] of a completed one, which borrows what holds the
//! slot (a ticket, an append ticket or a replay).
use crate::element::Element;
use crate::engine::ticket::TicketCore;
use crate::engine::view::SlotView;
use crate::error::{Error, Result};
use crate::schema::{Column, ColumnSchema};
use std::sync::Arc;
use std::time::Duration;

/// One enqueued multi-column readback; holds its slot until dropped.
///
/// Wait on it ([`ColumnTicket::wait`]) or poll it ([`ColumnTicket::try_wait`]), then read the
/// count and columns through the [`ColumnReadout`] it returns, which borrows the ticket: the
/// slot is not reused until the ticket is dropped, so a readout's data can never be
/// overwritten. Dropping a ticket without waiting is fine: the slot's next use waits on the
/// device for this one, and the memory is freed only after it completes.
#[derive(Debug)]
pub struct ColumnTicket {
    pub(crate) core: TicketCore,
    pub(crate) schema: Arc<ColumnSchema>,
}

impl ColumnTicket {
    pub(crate) fn from_core(core: TicketCore, schema: Arc<ColumnSchema>) -> Self {
        ColumnTicket { core, schema }
    }

    /// Sequence number of this readback (unique within its readback, from 1).
    pub fn seq(&self) -> u64 {
        self.core.seq()
    }
    /// The slot it occupies: the next free one after the previous enqueue's, round robin.
    pub fn slot(&self) -> usize {
        self.core.slot()
    }
    /// The transport of the slots this readback went to: the readback's, or under
    /// [`crate::Transport::Auto`] the set its enqueue chose (`Mapped` or `Staged`).
    pub fn transport(&self) -> crate::Transport {
        self.core.transport()
    }

    /// Blocks until the readback is complete, then returns its count and columns.
    ///
    /// Errors: the count's errors ([`Error::NegativeCount`], [`Error::CountExceedsCapacity`],
    /// [`Error::CountExceedsSource`]; a bucket pack's, [`Error::NegativeCount`],
    /// [`Error::BucketOverCapacity`] and [`Error::BucketOutOfRange`]), with nothing copied; an
    /// append's (the ticket of an [`crate::AppendTicket`]): [`Error::AppendOverflow`],
    /// [`Error::AppendUnfinished`], [`Error::AppendMisuse`], [`Error::BadBucket`];
    /// [`Error::CorruptTrailer`] if the slot does not hold this readback (a bug or memory
    /// corruption); [`Error::Cuda`] when the device reports an error (e.g. the producer kernel
    /// faulted), never a hang.
    ///
    /// A count that is wrong in several ways is reported once, in this order:
    /// [`Error::NegativeCount`], then [`Error::CountExceedsCapacity`], then [`Error::CountExceedsSource`]
    /// (the first short column): a count above both the capacity and a source's length is
    /// `CountExceedsCapacity`, the error [`crate::ColumnReadback::grow`] answers. The pack kernel checks
    /// in that order and copies nothing; the host decodes the trailer in the same order.
    /// A bucket pack reports one bucket: of the buckets with a bad count or range, the first
    /// with a negative count, else the first over the capacity, else the first out of range.
    pub fn wait(&self) -> Result<ColumnReadout<'_>> {
        let view = self.core.wait_until(None)?;
        Ok(ColumnReadout::new(view, &self.schema))
    }

    /// Like [`ColumnTicket::wait`], giving up with [`Error::Timeout`] after `timeout`; the
    /// ticket stays valid. A timeout too large to add to the current time (e.g.
    /// `Duration::MAX`) means no limit. Other errors as [`ColumnTicket::wait`].
    pub fn wait_timeout(&self, timeout: Duration) -> Result<ColumnReadout<'_>> {
        let view = self.core.wait_timeout(timeout)?;
        Ok(ColumnReadout::new(view, &self.schema))
    }

    /// The readout if the readback is complete, `None` while it is in flight. Never blocks.
    /// Errors as [`ColumnTicket::wait`], once complete.
    pub fn try_wait(&self) -> Result<Option<ColumnReadout<'_>>> {
        Ok(self
            .core
            .try_wait()?
            .map(|v| ColumnReadout::new(v, &self.schema)))
    }
}

/// The host's view of a completed multi-column readback: the count and every column as a
/// slice of exactly that many elements, in pinned host memory. Borrows what holds the slot
/// (a [`ColumnTicket`], an [`crate::AppendTicket`] or a [`crate::Replay`]), so no slice of it
/// outlives the slot. Not `Copy`: it is the borrow.
#[derive(Debug)]
pub struct ColumnReadout<'a> {
    view: SlotView<'a>,
    schema: &'a ColumnSchema,
}

impl<'a> ColumnReadout<'a> {
    pub(crate) fn new(view: SlotView<'a>, schema: &'a ColumnSchema) -> Self {
        ColumnReadout { view, schema }
    }

    /// The view of the slot (test support reads past the count through it).
    #[cfg(feature = "testing")]
    pub(crate) fn view(&self) -> &SlotView<'a> {
        &self.view
    }

    /// The count the device held (rows in every column).
    pub fn count(&self) -> usize {
        self.view.rows()
    }
    /// The readback's sequence number.
    pub fn seq(&self) -> u64 {
        self.view.seq()
    }
    /// The columns' declarations.
    pub fn schema(&self) -> &'a ColumnSchema {
        self.schema
    }

    /// Column `c` as `count` elements of `T`.
    ///
    /// # Panics
    /// If `c` is the handle of another schema's column (a programming error, like an index
    /// out of bounds). [`ColumnReadout::try_column`] returns an error instead.
    pub fn column<T: Element>(&self, c: Column<T>) -> &'a [T] {
        match self.try_column(c) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// Column `c` as `count` elements of `T`, or [`Error::SchemaMismatch`] if `c` belongs to
    /// another schema.
    pub fn try_column<T: Element>(&self, c: Column<T>) -> Result<&'a [T]> {
        self.schema.check_handle(c)?;
        self.column_as::<T>(c.index())
    }

    /// Column `index` as `count` elements of `T`, checked against the declared type (for a
    /// typed column) or element size (for a [`ColumnSchema::raw_column`]).
    ///
    /// Errors: [`Error::SchemaMismatch`] for another type or size, a column out of range, or a
    /// bucketed readback (whose buckets are separate: read them with
    /// [`ColumnReadout::bucket_column`]).
    pub fn column_as<T: Element>(&self, index: usize) -> Result<&'a [T]> {
        self.schema.check_type::<T>(index)?;
        self.whole()?;
        // SAFETY: T is the column's type (or, for raw columns, has its size and an alignment
        // <= 16) and valid for any bits (Element).
        Ok(unsafe { self.view.column::<T>(index) })
    }

    /// Column `index`'s `count * elem_size` bytes (not for bucketed readbacks).
    pub fn column_bytes(&self, index: usize) -> Result<&'a [u8]> {
        self.whole()?;
        self.view
            .column_bytes(index)
            .ok_or_else(|| self.no_column(index))
    }

    fn no_column(&self, index: usize) -> Error {
        Error::schema(format!(
            "column {index} does not exist: the readback has {} column(s)",
            self.schema.len()
        ))
    }

    /// Errors for a bucketed readout, whose columns are not one run of rows.
    fn whole(&self) -> Result<()> {
        match self.view.buckets() {
            1 => Ok(()),
            k => Err(Error::schema(format!(
                "the readback has {k} buckets: read each bucket's rows on their own"
            ))),
        }
    }

    /// Buckets of the readback (1 unless bucketed).
    pub fn buckets(&self) -> usize {
        self.view.buckets()
    }

    /// Rows of bucket `b` in the slot, or `None` past the last bucket. (For an overflowed
    /// append readout from `partial`, at most the capacity.)
    pub fn bucket_count(&self, b: usize) -> Option<usize> {
        self.view.bucket_rows(b)
    }

    /// Column `c`'s rows of bucket `b`, as `T`.
    ///
    /// # Panics
    /// If `c` belongs to another schema or `b` is past the last bucket (programming errors);
    /// [`ColumnReadout::try_bucket_column`] returns an error instead.
    pub fn bucket_column<T: Element>(&self, c: Column<T>, b: usize) -> &'a [T] {
        match self.try_bucket_column(c, b) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    /// Column `c`'s rows of bucket `b`, or [`Error::SchemaMismatch`].
    pub fn try_bucket_column<T: Element>(&self, c: Column<T>, b: usize) -> Result<&'a [T]> {
        self.schema.check_handle(c)?;
        self.bucket_column_as::<T>(c.index(), b)
    }

    /// Column `index`'s rows of bucket `b` as `T`, checked as [`ColumnReadout::column_as`].
    pub fn bucket_column_as<T: Element>(&self, index: usize, b: usize) -> Result<&'a [T]> {
        self.schema.check_type::<T>(index)?;
        self.check_bucket(b)?;
        // SAFETY: T is the column's type (checked) and valid for any bits; b is a bucket.
        Ok(unsafe { self.view.bucket_column::<T>(index, b) })
    }

    /// Column `index`'s bytes of bucket `b`.
    pub fn bucket_column_bytes(&self, index: usize, b: usize) -> Result<&'a [u8]> {
        self.check_bucket(b)?;
        self.view
            .bucket_bytes(index, b)
            .ok_or_else(|| self.no_column(index))
    }

    fn check_bucket(&self, b: usize) -> Result<()> {
        if b < self.view.buckets() {
            Ok(())
        } else {
            Err(Error::schema(format!(
                "bucket {b} does not exist: the readback has {} bucket(s)",
                self.view.buckets()
            )))
        }
    }
}

// Compile-time proof of the thread-safety claims in the docs.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<ColumnTicket>();
    send_sync::<ColumnReadout<'static>>();
};
