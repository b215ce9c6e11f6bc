//! The enqueue path of a host-sequenced readback, in the order it runs: the checks, joining the
//! producer's event, the capture check, binding the buffers through cudarc's event tracking
//! (the safe enqueue), taking a slot, ordering after the slot's previous readback, the pack
//! kernel, the staged copy and the slot's event.
use super::HostEngine;
use crate::config::Transport;
use crate::element::CountType;
use crate::engine::pack_params::{Pack, SlotAt};
use crate::engine::ring::Lease;
use crate::engine::ticket::TicketCore;
use crate::engine::tracked::ErasedDevicePtr;
use crate::engine::trailer::{Fill, Lens};

use crate::error::{Error, Result};
use crate::layout::MAX_COLUMNS;
use crate::raw::driver;
use crate::source::{ColumnSource, RawCount};
use cudarc::driver::sys::{CUevent, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DevicePtr, DriverError, SyncOnDrop};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl HostEngine {
    /// The safe enqueue shared by every façade: checks the stream, the buffers and `after`,
    /// joins `after`, refuses a capturing stream, then binds the buffers through cudarc's event
    /// tracking (which orders the pack after earlier cudarc writes, and later cudarc writes
    /// after it) and packs them. With `offsets` it is a bucket pack, and `count` holds k
    /// counts.
    pub(crate) fn enqueue_tracked<K: CountType, C: DevicePtr<K>, O: DevicePtr<K>>(
        self: &Arc<Self>,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        sources: &[&dyn ErasedDevicePtr],
        count: &C,
        offsets: Option<&O>,
    ) -> Result<TicketCore> {
        let slots = &self.slots;
        slots.check_stream(stream)?;
        let after = after.map(|e| slots.check_event(e)).transpose()?;
        slots.check_tracked(
            sources,
            (count.stream().context().cu_ctx(), count.len()),
            offsets.map(|o| (o.stream().context().cu_ctx(), o.len())),
        )?;
        // SAFETY: the stream and event belong to this context (checked above). Before cudarc's
        // event tracking (the guards below) can put its waits into a capture.
        unsafe { self.prepare(stream.cu_stream(), after)? };
        // An error cudarc stashed before this call is not this call's: set it aside; the
        // guard puts it back when it drops, on every path (declared before the buffers'
        // guards, it drops after them).
        let set_aside = SetAside::new(slots.context());
        // The guards make `stream` wait for earlier cudarc writes now, and record this read
        // when they drop, after the launch.
        let mut guards: [Option<SyncOnDrop<'_>>; MAX_COLUMNS + 2] = Default::default();
        let mut cols = [ColumnSource::default(); MAX_COLUMNS];
        for (i, s) in sources.iter().enumerate() {
            let (ptr, g) = s.device_ptr(stream);
            guards[i] = Some(g);
            cols[i] = ColumnSource { ptr, len: s.len() };
        }
        let (cptr, g) = count.device_ptr(stream);
        guards[MAX_COLUMNS] = Some(g);
        let offsets = offsets.map(|o| {
            let (p, g) = o.device_ptr(stream);
            guards[MAX_COLUMNS + 1] = Some(g);
            p
        });
        let sources = &cols[..sources.len()];
        let count = RawCount::new(cptr, K::KIND);
        slots.check_sources(sources, count)?;
        // SAFETY: the stream and buffers belong to this context (checked above); cudarc keeps
        // them allocated while borrowed, and its event tracking orders later writes after this
        // read (or, with tracking disabled, the caller promised cudarc to order them); each
        // length is the buffer's true length, and the counts and offsets hold k values.
        let lease = unsafe {
            self.pack(
                stream.cu_stream(),
                Pack {
                    sources,
                    count,
                    offsets,
                },
            )?
        };
        let fill = Fill::Pack {
            kind: K::KIND,
            lens: Lens::of(sources),
        };
        let ticket = TicketCore::new(self.clone(), lease, fill);
        // The guards record their events as they drop; cudarc stashes a failure there.
        drop(guards);
        set_aside.ours().map_err(Error::cuda(
            "cuEventRecord (cudarc's tracking of a source buffer)",
        ))?;
        Ok(ticket)
    }

    /// The raw-pointer enqueue (the C API's and the unsafe Rust one's): every check of the
    /// pointers and the stream, then the pack, and its ticket.
    ///
    /// # Safety
    /// - `stream` (null: the legacy stream) and `after` are live handles;
    /// - each source addresses at least `len` elements of its column's size in device memory of
    ///   this context, `count` a count of its kind (k of them for a bucket pack) and the
    ///   offsets k values of that kind; that memory stays allocated, and is not written, until
    ///   the readback completes (the ticket's wait), which the caller orders its later work
    ///   after.
    pub(crate) unsafe fn enqueue_raw(
        self: &Arc<Self>,
        stream: CUstream,
        after: Option<CUevent>,
        pack: Pack<'_>,
    ) -> Result<TicketCore> {
        let Pack {
            sources,
            count,
            offsets,
        } = pack;
        self.slots.check_sources(sources, count)?;
        self.slots.check_offsets(offsets, count)?;
        // SAFETY: per the contract.
        unsafe { self.slots.check_raw_stream(stream)? };
        self.slots.check_raw_sources(sources, count)?;
        if let Some(offsets) = offsets {
            self.slots.check_raw_pointer("the offsets", offsets)?;
        }
        // SAFETY: per the contract; the stream is of this context (checked).
        let lease = unsafe {
            self.prepare(stream, after)?;
            self.pack(stream, pack)?
        };
        let fill = Fill::Pack {
            kind: count.kind(),
            lens: Lens::of(sources),
        };
        Ok(TicketCore::new(self.clone(), lease, fill))
    }

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

    /// Packs into a slot on a stream that [`Self::prepare`] has just prepared: takes a slot,
    /// orders `stream` after the slot's previous readback, launches the pack (the bucket pack
    /// with offsets), records the slot's completion (even if the launch failed: the slot's
    /// next user, or the engine's drop, waits for its event, which must cover whatever did get
    /// enqueued), and gives the slot back on an error.
    ///
    /// # Safety
    /// - the sources and count of `pack` passed [`crate::engine::slots::Slots::check_sources`];
    /// - `stream` is live, of this context, prepared; the context is bound;
    /// - the memory of `pack` is valid as [`Self::enqueue_raw`] requires.
    pub(crate) unsafe fn pack(&self, stream: CUstream, pack: Pack<'_>) -> Result<Lease> {
        let lease = self.acquire()?;
        // SAFETY: per this function's contract; the lease is held.
        let result = match unsafe { self.order_after_previous(stream, &lease) } {
            Err(e) => Err(e),
            Ok(id) => {
                let at = SlotAt::Host {
                    seq: lease.seq,
                    slot: lease.slot,
                };
                // SAFETY: per this function's contract; the pack writes the leased slot.
                let launched = unsafe { self.slots.launch(stream, pack, at) };
                // SAFETY: as above; recorded after the launch.
                let completed = unsafe { self.complete(stream, &lease, id, launched.is_ok()) };
                launched.and(completed)
            }
        };
        if result.is_err() {
            self.release(&lease);
        }
        result.map(|()| lease)
    }

    /// Takes the next free slot (round robin), or [`Error::SlotsExhausted`].
    pub(super) fn acquire(&self) -> Result<Lease> {
        // The ring's invariants hold between calls, so a panic elsewhere cannot poison them.
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        ring.acquire().ok_or(Error::SlotsExhausted {
            slots: self.slots.num_slots(),
        })
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
            unsafe { driver::stream_wait_event(stream, self.events[lease.slot].raw())? };
        }
        Ok(id)
    }

    /// After the slot's kernel: the staged copy of the whole slot (the sized copy is part of
    /// the pack's graph), then the slot's event, then the stream's key
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
        // The delivery's copy to the host, if it has one, after a kernel that was enqueued.
        let copied = if copy {
            // SAFETY: per the contract; the lease is held, and no one reads its host slot
            // until the event below completes.
            unsafe { self.slots.after_fill(stream, lease.slot) }
        } else {
            Ok(())
        };
        // Recorded even if the copy failed: the kernel is in flight, and the slot's next user
        // (or the engine's drop) must be able to wait for it through this event.
        // SAFETY: per the contract.
        let recorded = unsafe { self.events[lease.slot].record(stream) };
        let known = if recorded.is_ok() { id } else { 0 };
        self.state[lease.slot]
            .stream
            .store(known, Ordering::Relaxed);
        copied.and(recorded)
    }

    /// The transport in use.
    pub(crate) fn transport(&self) -> Transport {
        self.slots.transport()
    }
}

/// An error cudarc stashed in a context before an enqueue, set aside while the enqueue's own
/// cudarc calls run, and put back when this drops (for whichever cudarc call reports it next):
/// errors of the enqueue's buffer tracking are the enqueue's, earlier ones are not.
struct SetAside<'a> {
    ctx: &'a CudaContext,
    earlier: std::result::Result<(), DriverError>,
}

impl<'a> SetAside<'a> {
    fn new(ctx: &'a CudaContext) -> Self {
        SetAside {
            ctx,
            earlier: ctx.check_err(),
        }
    }

    /// The error the enqueue's own cudarc calls stashed since, if any (taken).
    fn ours(&self) -> std::result::Result<(), DriverError> {
        self.ctx.check_err()
    }
}

impl Drop for SetAside<'_> {
    fn drop(&mut self) {
        // What the enqueue stashed and did not report is dropped with it: an enqueue that
        // failed reports its own error.
        let _ = self.ctx.check_err();
        self.ctx
            .record_err(std::mem::replace(&mut self.earlier, Ok(())));
    }
}
