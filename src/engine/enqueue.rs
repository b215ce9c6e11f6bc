//! The enqueue path of a host-sequenced readback, in the order it runs: checks, joining the
//! producer's event, the capture check, taking a slot, ordering after the slot's previous
//! readback, the kernel (the pack, or the user's append kernel between `append_begin` and
//! `append_end`), the staged copy and the slot's event.
use super::host::{Filled, HostEngine};
use super::ring::Lease;
use super::ticket::{Fill, TicketCore};
use super::Sources;
use crate::config::Transport;
use crate::error::{Error, Result};
use crate::raw::abi;
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
    unsafe fn order_after_previous(&self, stream: CUstream, lease: &Lease) -> Result<u64> {
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
    unsafe fn complete(&self, stream: CUstream, lease: &Lease, id: u64, copy: bool) -> Result<()> {
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

    /// Reserves a slot for an append kernel on `stream` (after `after`, if given) and returns
    /// it with the kernel's descriptor. The caller launches the kernel on `stream`, then calls
    /// [`Self::append_end`] whatever happened.
    ///
    /// # Safety
    /// `stream` and `after` are live handles of this context.
    pub(crate) unsafe fn append_begin(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
    ) -> Result<(Lease, abi::srb_append_desc, u64)> {
        // SAFETY: per the contract.
        unsafe { self.prepare(stream, after)? };
        let lease = self.acquire()?;
        let result = (|| {
            // SAFETY: per the contract; the lease is held.
            let id = unsafe { self.order_after_previous(stream, &lease)? };
            if self.state[lease.slot].scratch_dirty.load(Ordering::Relaxed) {
                // An earlier append into this slot never finished (or was dropped before it was
                // seen to): its count and departures may still be in the scratch.
                // SAFETY: the slot's records, ordered after their previous use by the wait above.
                unsafe {
                    driver::memset_zero_async(self.sync_ptr(lease.slot), Self::SYNC_BYTES, stream)?;
                    if let Some((ptr, bytes)) = self.bucket_counts_of(lease.slot) {
                        driver::memset_zero_async(ptr, bytes, stream)?;
                    }
                }
            }
            // Unconfirmed until a wait sees this append's trailer.
            self.mark_scratch(lease.slot, true);
            Ok((self.append_desc(&lease), id))
        })();
        match result {
            Ok((desc, id)) => Ok((lease, desc, id)),
            Err(e) => {
                self.release(&lease);
                Err(e)
            }
        }
    }

    /// Completes the append of [`Self::append_begin`] after the user's launch: the staged copy
    /// and the slot's event. `launched` is the user's outcome; on an error the slot's scratch
    /// is reset before its next append and the lease given back.
    ///
    /// # Safety
    /// `stream` is the one `append_begin` was given; `lease` came from it.
    pub(crate) unsafe fn append_end(
        &self,
        stream: CUstream,
        lease: &Lease,
        id: u64,
        launched: Result<()>,
    ) -> Result<()> {
        // SAFETY: per the contract.
        let completed = unsafe { self.complete(stream, lease, id, launched.is_ok()) };
        let result = launched.and(completed);
        if result.is_err() {
            self.mark_scratch(lease.slot, true);
            self.release(lease);
        }
        result
    }

    /// The append descriptor of `lease`'s slot.
    fn append_desc(&self, lease: &Lease) -> abi::srb_append_desc {
        let layout = &self.slots.layout;
        let spill = self.spill.as_ref().map(|s| (s.rows, &s.buffer, &s.layout));
        abi::srb_append_desc {
            seq: lease.seq,
            slot: lease.slot as u32,
            num_buckets: layout.buckets() as u32,
            bucket_table: layout.bucket_table_offset() as u64,
            bucket_counts: self.bucket_counts.as_ref().map_or(0, |b| b.ptr()),
            ..self.slots.append_desc(spill)
        }
    }

    /// Brings back the rows that the append in `lease`'s slot wrote to the spill region: a pack
    /// from the spill region into the spill readback, ordered after the append, with the
    /// slot's event moved past it (so the slot's next append waits for the fetch). `None`
    /// when the readback has no spill region.
    ///
    /// # Safety
    /// `stream` and `after` are live handles of this context; `lease` is held by the caller,
    /// and its append is complete.
    pub(crate) unsafe fn fetch_spill(
        &self,
        stream: CUstream,
        lease: &Lease,
    ) -> Result<Option<TicketCore>> {
        let Some(spill) = &self.spill else {
            return Ok(None);
        };
        let fetch = match spill.fetch.get() {
            Some(f) => f.clone(),
            None => {
                let mut cfg = self.slots.config().clone();
                cfg.capacity = spill.rows;
                let engine = HostEngine::new(
                    self.context(),
                    spill.layout.elem_sizes(),
                    &cfg,
                    if spill.layout.buckets() > 1 {
                        Filled::BucketPack
                    } else {
                        Filled::Pack
                    },
                )?;
                spill.fetch.get_or_init(|| engine).clone()
            }
        };
        let base = spill.buffer.ptr() + (lease.slot * spill.layout.slot_stride()) as u64;
        let k = spill.layout.buckets();
        let cols: Vec<ColumnSource> = spill
            .layout
            .column_offsets()
            .iter()
            .map(|&off| ColumnSource {
                ptr: base + off as u64,
                len: spill.rows * k,
            })
            .collect();
        let sources = Sources::new(&cols);
        // The rows each bucket spilled: the append's last block kept them.
        let count = match self.bucket_counts_of(lease.slot) {
            Some((ptr, bytes)) => RawCount::u64(ptr + (bytes / 2) as u64),
            None => RawCount::u64(
                self.sync_ptr(lease.slot)
                    + std::mem::offset_of!(abi::srb_slot_sync, spilled) as u64,
            ),
        };
        // SAFETY: per the contract; the spill region and the counters belong to this engine
        // and stay unwritten while the lease is held and its append is complete; the slot's
        // event is recorded after the fetch below, so the next append waits for it.
        let fetched = unsafe {
            self.prepare(stream, Some(self.events[lease.slot]))?;
            match &spill.offsets {
                Some(offsets) => fetch.enqueue_buckets_prepared(
                    stream,
                    sources.as_slice(),
                    count,
                    offsets.ptr(),
                )?,
                None => fetch.enqueue_prepared(stream, sources.as_slice(), count)?,
            }
        };
        // SAFETY: live event of this engine; the lease is held.
        unsafe { driver::event_record(self.events[lease.slot], stream)? };
        self.state[lease.slot].stream.store(0, Ordering::Relaxed);
        Ok(Some(TicketCore::new(
            fetch,
            fetched,
            Fill::Pack {
                kind: count.kind(),
                lens: sources.lens(),
            },
        )))
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
