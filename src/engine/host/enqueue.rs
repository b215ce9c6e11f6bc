//! The enqueue path of a host-sequenced readback, in the order it runs: checks, joining the
//! producer's event, the capture check, taking a slot, ordering after the slot's previous
//! readback, the pack kernel, the staged copy and the slot's event.
use super::HostEngine;
use crate::config::Transport;
use crate::engine::ring::Lease;
use crate::engine::ticket::{Fill, TicketCore};
use crate::error::{Error, Result};
use crate::raw::driver;
use crate::source::{ColumnSource, RawCount};
use cudarc::driver::sys::{CUevent, CUstream};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl HostEngine {
    /// Binds the context, makes `stream` wait for `after` (if any), then errors if `stream` is
    /// capturing a CUDA graph. The wait comes first: if `after` was recorded in a stream under
    /// capture, it joins `stream` to that capture, and the check refuses it instead of
    /// recording a ticket's readback into a graph. The safe enqueues call this before cudarc's
    /// event tracking touches the stream, so a stream joined that way gets no tracking events.
    ///
    /// # Safety
    /// `stream` and `after` are live handles of this readback's context.
    pub(crate) unsafe fn prepare(&self, stream: CUstream, after: Option<CUevent>) -> Result<()> {
        driver::bind(self.context())?;
        if let Some(e) = after {
            // SAFETY: per the contract.
            unsafe { driver::stream_wait_event(stream, e)? };
        }
        // SAFETY: per the contract.
        if unsafe { driver::stream_is_capturing(stream)? } {
            return Err(Error::StreamCapturing);
        }
        Ok(())
    }

    /// Enqueues one pack of `sources` sized by `count` on a stream that [`Self::prepare`] has
    /// just prepared, and returns the slot it took.
    ///
    /// # Safety
    /// - `sources` and `count` passed [`super::Slots::check_sources`];
    /// - `stream` is live, of this context, prepared; the context is bound;
    /// - each source addresses at least `len` elements of its column's size in device memory of
    ///   this context, and `count` a count of its kind; that memory stays allocated, and is not
    ///   written, until the readback completes (the lease's event), which the caller orders its
    ///   later work after.
    pub(crate) unsafe fn enqueue_prepared(
        &self,
        stream: CUstream,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<Lease> {
        let launch = |lease: &Lease| {
            let p = self
                .slots
                .pack_params(sources, count, lease.seq, lease.slot);
            // SAFETY: per this function's contract; the lease is held.
            unsafe { self.slots.launch_pack(stream, p) }
        };
        // SAFETY: per this function's contract; the launch is the pack into the leased slot.
        unsafe { self.enqueue_launch(stream, launch) }
    }

    /// What every pack enqueue does around its launch: takes a slot, orders `stream` after the
    /// slot's previous readback, runs `launch`, records the slot's completion (even if the
    /// launch failed: the slot's next user, or the engine's drop, waits for its event, which
    /// must cover whatever did get enqueued), and gives the slot back on an error.
    ///
    /// # Safety
    /// `stream` is live, of this context, prepared; the context is bound; `launch` enqueues on
    /// `stream` only work that writes the leased slot (as the pack kernels do).
    unsafe fn enqueue_launch(
        &self,
        stream: CUstream,
        launch: impl FnOnce(&Lease) -> Result<()>,
    ) -> Result<Lease> {
        let lease = self.acquire()?;
        let result = (|| {
            // SAFETY: per this function's contract; the lease is held.
            let id = unsafe { self.order_after_previous(stream, &lease)? };
            let launched = launch(&lease);
            // SAFETY: as above; recorded after the launch.
            let completed = unsafe { self.complete(stream, &lease, id, launched.is_ok()) };
            launched.and(completed)
        })();
        if result.is_err() {
            self.release(&lease);
        }
        result.map(|()| lease)
    }

    /// The whole raw-pointer enqueue (the C API's and the unsafe Rust one's): every check, then
    /// the pack.
    ///
    /// # Safety
    /// As [`Self::enqueue_prepared`] for the memory; `stream` (null: the legacy stream) and
    /// `after` are live handles.
    pub(crate) unsafe fn enqueue_raw(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<Lease> {
        self.slots.check_sources(sources, count)?;
        // SAFETY: per the contract.
        unsafe { self.slots.check_raw_stream(stream)? };
        self.slots.check_raw_sources(sources, count)?;
        // SAFETY: per the contract; the stream is of this context (checked).
        unsafe {
            self.prepare(stream, after)?;
            self.enqueue_prepared(stream, sources, count)
        }
    }

    /// The slot's previous readback (and copy) may still run on another stream: orders work
    /// enqueued next on `stream` after it. On the same stream, stream order already does, and
    /// leaving the wait out keeps nothing between the producer kernel and the pack, so
    /// programmatic dependent launch can overlap them. (Measured on the H200: cuStreamWaitEvent
    /// 0.26 µs, cuEventQuery 1.35 µs, so no query either.) Streams are told apart by their id,
    /// not their handle: a destroyed stream's handle may be reused while its work still runs.
    /// The null, legacy and per-thread handles always get the wait. Returns the stream's key
    /// for [`Self::complete`].
    ///
    /// # Safety
    /// `stream` is live and of this context, which is bound; `lease` is held.
    pub(super) unsafe fn order_after_previous(
        &self,
        stream: CUstream,
        lease: &Lease,
    ) -> Result<u64> {
        let id = if stream as usize > 2 {
            // SAFETY: per the contract.
            unsafe { driver::stream_id(stream)? }.wrapping_add(1)
        } else {
            0
        };
        let previous = self.state[lease.slot].stream.load(Ordering::Relaxed);
        if lease.reused && (id == 0 || previous != id) {
            // SAFETY: per the contract; a live event of this engine.
            unsafe { driver::stream_wait_event(stream, self.events[lease.slot])? };
        }
        Ok(id)
    }

    /// After the slot's kernel: the staged copy, then the slot's event, then the stream's key
    /// (0, unknown, when the event does not cover the readback, so the next user waits).
    ///
    /// # Safety
    /// As [`Self::order_after_previous`].
    pub(super) unsafe fn complete(
        &self,
        stream: CUstream,
        lease: &Lease,
        id: u64,
        copy: bool,
    ) -> Result<()> {
        let copied = match (&self.slots.staging, copy) {
            (Some(dev), true) => {
                let off = lease.slot * self.slots.layout.slot_stride();
                // SAFETY: both ranges lie inside their allocations of `total` bytes; the host
                // range belongs to this lease's slot, which no one reads until the event
                // completes.
                unsafe {
                    driver::memcpy_dtoh_async(
                        self.slots.host.host_ptr().add(off),
                        dev.ptr() + off as u64,
                        self.slots.layout.slot_bytes(),
                        stream,
                    )
                }
            }
            _ => Ok(()),
        };
        // Recorded even if the copy failed: the kernel is in flight, and the slot's next user
        // (or the engine's drop) must be able to wait for it through this event.
        // SAFETY: per the contract; a live event of this engine.
        let recorded = unsafe { driver::event_record(self.events[lease.slot], stream) };
        let known = if recorded.is_ok() { id } else { 0 };
        self.state[lease.slot]
            .stream
            .store(known, Ordering::Relaxed);
        copied.and(recorded)
    }

    /// Enqueues one bucket pack on a prepared stream: `sources` partitioned into this
    /// readback's k buckets by `counts` and `offsets` (k each, of `counts`' kind, device
    /// memory). Returns the slot it took.
    ///
    /// # Safety
    /// As [`Self::enqueue_prepared`]; `offsets` addresses k naturally aligned values of the
    /// counts' kind in device memory of this context, allocated and unwritten meanwhile.
    pub(crate) unsafe fn enqueue_buckets_prepared(
        &self,
        stream: CUstream,
        sources: &[ColumnSource],
        counts: RawCount,
        offsets: u64,
    ) -> Result<Lease> {
        let launch = |lease: &Lease| {
            let p = self
                .slots
                .pack_buckets_params(sources, counts, offsets, lease.seq, lease.slot);
            // SAFETY: per this function's contract; the lease is held.
            unsafe { self.slots.launch_pack_buckets(stream, p) }
        };
        // SAFETY: per this function's contract; the launch is the bucket pack into the slot.
        unsafe { self.enqueue_launch(stream, launch) }
    }

    /// The whole raw-pointer bucket pack (C API, unsafe Rust): every check, then the pack.
    ///
    /// # Safety
    /// As [`Self::enqueue_buckets_prepared`]; `stream` (null: the legacy stream) and `after`
    /// are live handles.
    pub(crate) unsafe fn enqueue_buckets_raw(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        sources: &[ColumnSource],
        counts: RawCount,
        offsets: u64,
    ) -> Result<Lease> {
        self.slots.check_sources(sources, counts)?;
        if offsets == 0 || !offsets.is_multiple_of(counts.kind().size() as u64) {
            return Err(Error::BadPointer {
                what: "the offsets",
                addr: offsets,
                align: counts.kind().size(),
            });
        }
        // SAFETY: per the contract.
        unsafe { self.slots.check_raw_stream(stream)? };
        self.slots.check_raw_sources(sources, counts)?;
        self.slots.check_raw_pointer("the offsets", offsets)?;
        // SAFETY: per the contract; the stream is of this context (checked).
        unsafe {
            self.prepare(stream, after)?;
            self.enqueue_buckets_prepared(stream, sources, counts, offsets)
        }
    }

    /// Wraps `lease` of this engine, filled as `fill`, in a ticket.
    pub(crate) fn ticket(self: &Arc<Self>, lease: Lease, fill: Fill) -> TicketCore {
        TicketCore::new(self.clone(), lease, fill)
    }

    /// The transport in use.
    pub(crate) fn transport(&self) -> Transport {
        self.slots.transport()
    }
}
