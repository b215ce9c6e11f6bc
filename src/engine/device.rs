//! Device-sequenced readbacks, for CUDA graph replay. A graph freezes kernel parameters, so
//! every run of a recorded pack (or append kernel) reads a device-resident counter (the
//! sequence number of the previous readback), takes `seq = counter + 1` and `slot = (seq - 1)
//! % slots`, writes only if the host has released readback `seq - slots`, and stores `seq`
//! back when it is done. The host takes readbacks in sequence order ([`DeviceEngine::take`]).
use super::backoff::{Backoff, Deadline, Pause, QUERY_PERIOD};
use super::host::spill_fetch;
use super::host::Spill;
use super::pack_params::{Pack, SlotAt};
use super::plan::{Filler, Sequencing, SlotPlan};
use super::slots::Slots;
use super::spill::{SpillPlan, SpillRegion};
use super::ticket::TicketCore;
use super::trailer::{Fill, Lens};
use super::view::SlotView;
use crate::config::ReadbackConfig;
use crate::error::{Error, Result};
use crate::info::ReadbackInfo;
use crate::layout::BucketTable;
use crate::raw::abi;
use crate::raw::buffer::{DeviceBuffer, PinnedBuffer};
use crate::raw::driver;
use crate::raw::event::Event;
use crate::source::{ColumnSource, RawCount};
use cudarc::driver::sys::{CUevent, CUstream};
use cudarc::driver::CudaContext;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

/// What one attempt to take the next replay came to.
#[derive(Debug)]
pub(crate) enum Take {
    /// Another thread was taking a replay until the deadline: nothing was looked at. Holds
    /// the [`Error::Timeout`] for the whole wait.
    Busy(Error),
    /// Replay `seq`'s outcome: `Ok((slot, rows))`, now held; `Err(Timeout)`, nothing
    /// consumed; any other error consumed it.
    Seq(u64, Result<(usize, usize)>),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its data consistent, so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A ring of device-sequenced slots.
#[derive(Debug)]
pub(crate) struct DeviceEngine {
    /// An event never recorded: querying it reports a sticky device error without waiting.
    /// Destroyed first, as before the buffers are freed.
    probe: Event,
    slots: Slots,
    /// The `u64` sequence number of the newest finished readback (device memory).
    counter: DeviceBuffer,
    /// The mapped [`abi::srb_ring_ctl`].
    ctl: PinnedBuffer,
    /// Append recordings: the spill region, or none.
    spill: Option<Spill>,
    /// Serializes the consumers, so readbacks are taken in order.
    consumer: Mutex<()>,
    /// Replays taken and not yet released, with their rows. `cursor` changes under it too.
    held: Mutex<BTreeMap<u64, usize>>,
    /// The next sequence number `take` returns.
    cursor: AtomicU64,
    /// How the recordings fill the slots (they must agree: the host cannot tell which
    /// recording produced a replay, and decodes each the same way); `None` until the first.
    recording: Mutex<Option<Fill>>,
}

/// What a graph readback will be: its slots and its spill region.
#[derive(Debug)]
pub(crate) struct DevicePlan {
    slots: SlotPlan,
    spill: Option<SpillPlan>,
}

impl DeviceEngine {
    /// The slots of `cfg.slots` device-sequenced slots of `cfg.capacity` rows of `elem_sizes`,
    /// with a spill region of `cfg.spill_rows()` rows per slot for append recordings, checked
    /// before any driver call.
    pub(crate) fn plan(elem_sizes: &[usize], cfg: &ReadbackConfig) -> Result<DevicePlan> {
        let slots = SlotPlan::new(
            elem_sizes,
            cfg,
            Sequencing::Device,
            BucketTable::IfBucketed,
            Filler::Pack,
        )?;
        let spill = Spill::plan(elem_sizes, cfg, 1)?;
        Ok(DevicePlan { slots, spill })
    }

    /// The graph readback `plan` describes.
    pub(crate) fn new(ctx: &Arc<CudaContext>, plan: DevicePlan) -> Result<Self> {
        let slots = Slots::new(ctx, plan.slots)?;
        let counter = DeviceBuffer::new_zeroed(ctx, std::mem::size_of::<u64>())?;
        let ctl = PinnedBuffer::new(ctx, std::mem::size_of::<abi::srb_ring_ctl>(), true)?;
        // The fetch waits for its readback, so two slots serve it.
        let spill = plan
            .spill
            .map(|p| SpillRegion::new(ctx, p, 2))
            .transpose()?;
        let probe = Event::new(ctx)?;
        Ok(DeviceEngine {
            probe,
            slots,
            counter,
            ctl,
            spill,
            consumer: Mutex::new(()),
            held: Mutex::new(BTreeMap::new()),
            cursor: AtomicU64::new(1),
            recording: Mutex::new(None),
        })
    }

    pub(crate) fn slots(&self) -> &Slots {
        &self.slots
    }
    pub(crate) fn counter_ptr(&self) -> u64 {
        self.counter.ptr()
    }
    pub(crate) fn next_seq(&self) -> u64 {
        self.cursor.load(Ordering::Acquire)
    }

    fn ctl_word(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: the control words are two naturally aligned u64 at the start of a live,
        // page-aligned pinned allocation owned by self; the device accesses them only with
        // whole-word acquire loads and single-copy-atomic stores, so atomics are the host view.
        unsafe { &*self.ctl.host_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// Tells the device that every readback up to `seq` has been released (Release: the
    /// host's reads of those slots happen before the device may overwrite them; the device
    /// reads it with ld.acquire.sys).
    fn set_released(&self, seq: u64) {
        self.ctl_word(std::mem::offset_of!(abi::srb_ring_ctl, released_seq))
            .store(seq, Ordering::Release);
    }

    /// The newest sequence number the device dropped for a held slot (0: none).
    pub(crate) fn overrun_seq(&self) -> u64 {
        self.ctl_word(std::mem::offset_of!(abi::srb_ring_ctl, overrun_seq))
            .load(Ordering::Acquire)
    }

    /// Errors unless `r` agrees with the recording `old` (`None` before the first).
    fn check_agrees(old: Option<Fill>, r: Fill) -> Result<()> {
        let Some(old) = old else { return Ok(()) };
        if old == r {
            return Ok(());
        }
        Err(Error::RecordingMismatch {
            reason: match (old, r) {
                (Fill::Pack { kind: a, .. }, Fill::Pack { kind: b, .. }) if a != b => {
                    format!(
                        "the count type was {} before and is {} now",
                        a.name(),
                        b.name()
                    )
                }
                (Fill::Pack { lens: a, .. }, Fill::Pack { lens: b, .. }) => format!(
                    "the source lengths were {} before and are {} now",
                    list(a.as_slice()),
                    list(b.as_slice())
                ),
                _ => {
                    "pack recordings and append kernels cannot share one graph readback".to_string()
                }
            },
        })
    }

    /// Records one device-sequenced pack on `stream` (usually a stream being captured), after
    /// `after` if given. Records no event and takes no slot on the host.
    ///
    /// # Safety
    /// For every run of the pack: the sources and count are valid, allocated and unwritten
    /// while it runs; this engine outlives every run; the device-sequenced readbacks of one
    /// engine run one at a time. `stream` and `after` are live handles of this context.
    pub(crate) unsafe fn record_pack(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<()> {
        self.slots.check_sources(sources, count)?;
        // SAFETY: per the contract.
        unsafe { self.slots.check_raw_stream(stream)? };
        let recording = Fill::Pack {
            kind: count.kind(),
            lens: Lens::of(sources),
        };
        // Held across the launch, so that concurrent recordings agree too.
        let mut recorded = lock(&self.recording);
        Self::check_agrees(*recorded, recording)?;
        if let Some(e) = after {
            // SAFETY: per the contract.
            unsafe { driver::stream_wait_event(stream, e)? };
        }
        let pack = Pack {
            sources,
            count,
            offsets: None,
        };
        let at = SlotAt::Device {
            counter: self.counter.ptr(),
            ctl: self.ctl.device_ptr(),
        };
        // SAFETY: per the contract; programmatic launch is off for device-sequenced packs.
        unsafe { self.slots.launch(stream, pack, at)? };
        *recorded = Some(recording);
        Ok(())
    }

    /// The append descriptor of this readback, valid for every run of every kernel recorded
    /// with it (seq 0: the kernel decides seq and slot on the device).
    pub(crate) fn append_desc(&self) -> Result<abi::srb_append_desc> {
        {
            let mut recorded = lock(&self.recording);
            let append = Fill::Append {
                spill_rows: self.spill_rows(),
            };
            Self::check_agrees(*recorded, append)?;
            *recorded = Some(append);
        }
        Ok(abi::srb_append_desc {
            seq: 0,
            seq_counter: self.counter.ptr(),
            ring_ctl: self.ctl.device_ptr(),
            ..self
                .slots
                .append_desc(self.spill.as_ref().map(|s| s.area()))
        })
    }

    /// Takes the consumer lock: blocking without a deadline, else trying until it passes
    /// ([`Error::Timeout`]).
    fn lock_consumer(&self, deadline: Option<Deadline>) -> Result<MutexGuard<'_, ()>> {
        if deadline.is_none() {
            return Ok(lock(&self.consumer));
        }
        let try_lock = || match self.consumer.try_lock() {
            Ok(guard) => Ok(Some(guard)),
            Err(TryLockError::Poisoned(p)) => Ok(Some(p.into_inner())),
            Err(TryLockError::WouldBlock) => Ok(None),
        };
        // Another consumer is waiting for its replay: yield a little, then nap.
        let backoff = Backoff {
            spins: 1,
            period: Duration::MAX,
            pause: Pause::YieldThenSleep {
                yields: 64,
                sleep: Duration::from_micros(20),
            },
        };
        backoff.run(deadline, try_lock, || Ok(None))
    }

    /// Waits for readback `next_seq()` under the consumer lock; on success marks it held.
    /// Reports the number it waited for with every outcome (see [`Take`]); errs at once,
    /// consuming nothing, when nothing was recorded.
    pub(crate) fn take(&self, deadline: Option<Deadline>) -> Result<Take> {
        let Some(recording) = *lock(&self.recording) else {
            return Err(Error::NothingRecorded);
        };
        let _consumer = match self.lock_consumer(deadline) {
            Ok(guard) => guard,
            Err(timeout) => return Ok(Take::Busy(timeout)),
        };
        let seq = self.cursor.load(Ordering::Acquire);
        let slot = self.slot_of(seq);
        let outcome = self.wait_for(seq, slot, deadline);
        if let Err(e @ Error::Timeout { .. }) = outcome {
            return Ok(Take::Seq(seq, Err(e)));
        }
        let capacity = self.slots.layout().capacity();
        let decoded = outcome.and_then(|()| Ok(recording.decode(&self.slots, slot, seq)?.rows()));
        let mut held = lock(&self.held);
        match &decoded {
            Ok(rows) => {
                held.insert(seq, *rows);
            }
            // An overflowed append keeps its slot: its rows stay readable (and its spill).
            Err(Error::AppendOverflow { .. }) => {
                held.insert(seq, capacity);
            }
            Err(_) => {}
        }
        self.cursor.store(seq + 1, Ordering::Release);
        self.publish_released(&held);
        Ok(Take::Seq(seq, decoded.map(|rows| (slot, rows))))
    }

    fn slot_of(&self, seq: u64) -> usize {
        ((seq - 1) % self.slots.num_slots() as u64) as usize
    }

    fn wait_for(&self, seq: u64, slot: usize, deadline: Option<Deadline>) -> Result<()> {
        let trailer = || {
            // The overrun word first: if a readback numbered >= seq has finished, readback
            // `seq` finished before it (they run one at a time, and the overrun store is
            // ordered after every earlier trailer), so its trailer is final.
            let overrun = self.overrun_seq();
            if self.slots.seq_visible(slot, seq) {
                return Ok(Some(()));
            }
            if overrun >= seq {
                return Err(Error::Overrun { seq });
            }
            Ok(None)
        };
        // A device-error check costs an event query: not after every spin.
        let backoff = Backoff {
            spins: 256,
            period: QUERY_PERIOD,
            pause: Pause::None,
        };
        backoff.run(deadline, trailer, || self.check_device().map(|()| None))
    }

    /// Reports a sticky device error (a faulted kernel) without waiting.
    pub(crate) fn check_device(&self) -> Result<()> {
        driver::bind(self.slots.context())?;
        self.probe.query().map(|_| ())
    }

    /// Releases a held replay (in any order). Returns false if `seq` was not held.
    pub(crate) fn release(&self, seq: u64) -> bool {
        let mut held = lock(&self.held);
        let was = held.remove(&seq).is_some();
        self.publish_released(&held);
        was
    }

    /// The view of held replay `seq`; `None` if it is not held.
    pub(crate) fn held_view(&self, seq: u64) -> Option<SlotView<'_>> {
        let rows = lock(&self.held).get(&seq).copied()?;
        Some(self.view(seq, rows))
    }

    /// The view of replay `seq` with `rows` rows, which the caller holds.
    pub(crate) fn view(&self, seq: u64, rows: usize) -> SlotView<'_> {
        SlotView::new(&self.slots, self.slot_of(seq), rows, seq)
    }

    /// Every number below the oldest held replay (or below the cursor, if none is held) has
    /// been released: the device may overwrite their slots.
    fn publish_released(&self, held: &BTreeMap<u64, usize>) {
        let cursor = self.cursor.load(Ordering::Acquire);
        let oldest = held.keys().next().copied().unwrap_or(cursor).min(cursor);
        self.set_released(oldest - 1);
    }

    /// Enqueues on `stream` the fetch of the rows that held replay `seq` spilled; `None`
    /// without a spill region. The caller waits for it before it releases the replay.
    ///
    /// # Safety
    /// `stream` is a live stream of this context; replay `seq` is held, so the device writes
    /// neither its spill region nor its count meanwhile.
    pub(crate) unsafe fn fetch_spill(
        &self,
        stream: CUstream,
        seq: u64,
    ) -> Result<Option<TicketCore>> {
        let Some(spill) = &self.spill else {
            return Ok(None);
        };
        let slot = self.slot_of(seq);
        let count = RawCount::u64(
            self.slots.sync_ptr(slot) + std::mem::offset_of!(abi::srb_slot_sync, spilled) as u64,
        );
        let ctx = self.slots.context();
        // SAFETY: per the contract; the append that wrote them finished (its replay was taken).
        unsafe { spill_fetch::fetch(spill, ctx, self.slots.config(), stream, None, slot, count) }
            .map(Some)
    }

    /// The readback's settings and layout.
    pub(crate) fn info(&self) -> ReadbackInfo {
        self.slots.info(self.spill_rows())
    }

    /// Rows of spill per slot (0: none).
    pub(crate) fn spill_rows(&self) -> usize {
        self.spill.as_ref().map_or(0, Spill::rows)
    }
}

fn list(v: &[usize]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Drop for DeviceEngine {
    fn drop(&mut self) {
        // Replays record no event, so nothing tells which of the context's work still writes
        // these slots: wait for all of it before the memory is freed.
        let _ = driver::bind(self.slots.context());
        let _ = self.slots.context().synchronize();
    }
}

// The engine is shared between threads as it is: every field is Send and Sync.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<DeviceEngine>();
};
