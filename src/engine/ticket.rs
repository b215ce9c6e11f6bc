//! What every ticket is made of: a held slot of a host-sequenced readback, how it was filled
//! (so its trailer can be decoded), and the release of the slot when it drops.
use super::backoff::Deadline;
use super::host::HostEngine;
use super::ring::Lease;
use super::trailer::Fill;
use super::view::SlotView;
use crate::error::{Error, Result};
use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A readback of two slot sets ([`crate::Transport::Auto`]): the ticket's number across both
/// sets, and where a wait leaves the count it read back, which chooses the next enqueue's set.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub(crate) seq: u64,
    pub(crate) last_count: Arc<AtomicUsize>,
}

/// A held slot of a host-sequenced readback. Releases the slot when dropped.
#[derive(Debug)]
pub(crate) struct TicketCore {
    engine: Arc<HostEngine>,
    lease: Lease,
    fill: Fill,
    observed: Option<Observed>,
}

impl TicketCore {
    pub(crate) fn new(engine: Arc<HostEngine>, lease: Lease, fill: Fill) -> Self {
        TicketCore {
            engine,
            lease,
            fill,
            observed: None,
        }
    }

    /// The same ticket, numbered and observed as `observed` says.
    pub(crate) fn observed(mut self, observed: Observed) -> Self {
        self.observed = Some(observed);
        self
    }

    /// The readback's number: the readback's own across both slot sets of an observed ticket,
    /// else its slot set's.
    pub(crate) fn seq(&self) -> u64 {
        self.observed.as_ref().map_or(self.lease.seq, |o| o.seq)
    }

    /// The transport of the slot set this ticket holds a slot of.
    pub(crate) fn transport(&self) -> crate::config::Transport {
        self.engine.transport()
    }
    pub(crate) fn slot(&self) -> usize {
        self.lease.slot
    }

    /// Blocks until complete (at most until `deadline`), then decodes the trailer.
    pub(crate) fn wait_until(&self, deadline: Option<Deadline>) -> Result<SlotView<'_>> {
        self.engine.wait(&self.lease, deadline)?;
        self.decode()
    }

    /// [`Self::wait_until`] with a timeout; a timeout too large to add to the current time
    /// means no limit.
    pub(crate) fn wait_timeout(&self, timeout: Duration) -> Result<SlotView<'_>> {
        self.wait_until(Deadline::after(timeout))
    }

    /// The view if complete, `None` while in flight.
    pub(crate) fn try_wait(&self) -> Result<Option<SlotView<'_>>> {
        if self.engine.is_complete(&self.lease)? {
            self.decode().map(Some)
        } else {
            Ok(None)
        }
    }

    /// The rows the trailer of this complete readback reports, or its error.
    fn decode(&self) -> Result<SlotView<'_>> {
        let view = self
            .fill
            .decode(self.engine.slots(), self.lease.slot, self.lease.seq);
        let unfinished = matches!(view, Err(Error::AppendUnfinished { .. }));
        if matches!(self.fill, Fill::Append { .. }) && !unfinished {
            // The append finished: its scratch is reset.
            self.engine.mark_scratch_clean(self.lease.slot);
        }
        match (&self.observed, view) {
            (Some(o), Ok(view)) => {
                o.last_count.store(view.rows(), Ordering::Relaxed);
                Ok(view.renumbered(o.seq))
            }
            // A count past the capacity chooses as a full slot would.
            (Some(o), Err(e @ Error::CountExceedsCapacity { count, .. })) => {
                let count = usize::try_from(count).unwrap_or(usize::MAX);
                o.last_count.store(count, Ordering::Relaxed);
                Err(e)
            }
            (_, view) => view,
        }
    }

    /// Append: the rows that reached the slot, also after an [`Error::AppendOverflow`] (then
    /// `capacity` rows, or per bucket at most `capacity`) or an [`Error::BadBucket`]. Waits for
    /// the readback first; other errors as [`Self::wait_until`].
    pub(crate) fn partial(&self) -> Result<SlotView<'_>> {
        let slots = self.engine.slots();
        match self.wait_until(None) {
            Err(Error::AppendOverflow { .. } | Error::BadBucket { .. })
                if slots.layout().has_bucket_table() =>
            {
                let table = slots.bucket_table(self.lease.slot);
                let cap = slots.layout().capacity() as u64;
                let rows = table.counts.iter().map(|&c| c.min(cap) as usize).collect();
                Ok(SlotView::with_buckets(
                    slots,
                    self.lease.slot,
                    rows,
                    self.lease.seq,
                ))
            }
            Err(Error::AppendOverflow { capacity, .. }) => Ok(SlotView::new(
                slots,
                self.lease.slot,
                capacity,
                self.lease.seq,
            )),
            other => other,
        }
    }

    /// Append: enqueues the fetch of the rows that went to the spill region, on `stream`.
    /// `None` when nothing spilled (or the readback has no spill region).
    pub(crate) fn fetch_spill(&self, stream: &CudaStream) -> Result<Option<TicketCore>> {
        self.engine.slots().check_stream(stream)?;
        // SAFETY: the stream is live and of this context (checked).
        unsafe { self.fetch_spill_raw(stream.cu_stream()) }
    }

    /// [`Self::fetch_spill`] on a raw stream.
    ///
    /// # Safety
    /// `stream` is a live stream of this readback's context.
    pub(crate) unsafe fn fetch_spill_raw(&self, stream: CUstream) -> Result<Option<TicketCore>> {
        match self.wait_until(None) {
            Err(Error::AppendOverflow { spilled, .. }) if spilled > 0 => {}
            Err(Error::AppendOverflow { .. }) | Ok(_) => return Ok(None),
            Err(e) => return Err(e),
        }
        // SAFETY: per the contract; the lease is held by self and its append complete
        // (waited above).
        unsafe { self.engine.fetch_spill(stream, &self.lease) }
    }
}

impl TicketCore {
    /// Errors unless the raw `stream` belongs to this ticket's context.
    ///
    /// # Safety
    /// `stream` is a live stream handle (or null).
    pub(crate) unsafe fn check_raw_stream(&self, stream: CUstream) -> Result<()> {
        // SAFETY: per the contract.
        unsafe { self.engine.slots().check_raw_stream(stream) }
    }
}

impl Drop for TicketCore {
    fn drop(&mut self) {
        self.engine.release(&self.lease);
    }
}
