//! Host-sequenced readbacks: the host picks each readback's slot and sequence number from a
//! ring, records one event per slot after the readback, and hands out a ticket that holds the
//! slot. By phase: `enqueue.rs` (the safe and the raw enqueue, the pack into a slot),
//! `append.rs` (a slot for the user's kernel, and the fetch of its spill), `wait.rs`.
use super::ring::{Lease, Ring};
use super::slots::{Filler, Sequencing, Slots};
use super::spill::SpillRegion;
use crate::config::ReadbackConfig;
use crate::error::Result;
use crate::info::ReadbackInfo;
use crate::layout::BucketTable;
use crate::raw::abi;
use crate::raw::buffer::DeviceBuffer;
use crate::raw::driver;
use crate::raw::event::Event;
use cudarc::driver::CudaContext;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

mod append;
mod enqueue;
mod wait;

/// Per-slot host state, written only by the holder of the slot's lease (the ring's mutex orders
/// one holder's writes before the next holder's reads).
#[derive(Debug, Default)]
pub(super) struct SlotState {
    /// 1 + the id (`cuStreamGetId`) of the stream the slot's last readback was enqueued on, 0
    /// if none or unknown (then the next readback of the slot waits for its event).
    pub(super) stream: AtomicU64,
    /// Append: the slot's device scratch may hold a count or departures of an append that
    /// never finished (or was never confirmed to), so the next append resets it first.
    pub(super) scratch_dirty: AtomicBool,
}

/// A ring of host-sequenced slots with one event each.
#[derive(Debug)]
pub(crate) struct HostEngine {
    /// One per slot, recorded after each readback. Before `slots`, so that they are destroyed
    /// before the memory is freed.
    pub(super) events: Vec<Event>,
    pub(super) slots: Slots,
    pub(super) ring: Mutex<Ring>,
    pub(super) state: Vec<SlotState>,
    pub(super) spill: Option<SpillRegion>,
    /// Bucketed append: per slot, the buckets' counters and their spilled rows (2 k u64).
    pub(super) bucket_counts: Option<DeviceBuffer>,
}

impl HostEngine {
    /// A readback of `cfg.slots` slots of `cfg.capacity` rows of `elem_sizes` that the pack
    /// kernels fill (the bucket pack, whose slots always have a bucket table).
    pub(crate) fn packs(
        ctx: &Arc<CudaContext>,
        elem_sizes: &[usize],
        cfg: &ReadbackConfig,
        table: BucketTable,
    ) -> Result<Arc<Self>> {
        let slots = Slots::new(ctx, elem_sizes, cfg, Sequencing::Host, table, Filler::Pack)?;
        Self::with_slots(ctx, slots, cfg, None, None)
    }

    /// A readback of `cfg.slots` slots of `cfg.capacity` rows of `elem_sizes` that the user's
    /// append kernels fill: with a spill region of `cfg.spill_rows()` rows per slot (per
    /// bucket) and, bucketed, the buckets' counters.
    pub(crate) fn appends(
        ctx: &Arc<CudaContext>,
        elem_sizes: &[usize],
        cfg: &ReadbackConfig,
    ) -> Result<Arc<Self>> {
        let plan = SpillRegion::plan(elem_sizes, cfg, cfg.buckets)?;
        let slots = Slots::new(
            ctx,
            elem_sizes,
            cfg,
            Sequencing::Host,
            BucketTable::IfBucketed,
            Filler::Append,
        )?;
        let spill = plan
            .map(|p| SpillRegion::new(ctx, p, cfg.slots))
            .transpose()?;
        let k = cfg.buckets;
        let bucket_counts = if k > 1 {
            Some(DeviceBuffer::new_zeroed(ctx, 16 * k * cfg.slots)?)
        } else {
            None
        };
        Self::with_slots(ctx, slots, cfg, spill, bucket_counts)
    }

    fn with_slots(
        ctx: &Arc<CudaContext>,
        slots: Slots,
        cfg: &ReadbackConfig,
        spill: Option<SpillRegion>,
        bucket_counts: Option<DeviceBuffer>,
    ) -> Result<Arc<Self>> {
        let events = (0..cfg.slots)
            .map(|_| Event::new(ctx))
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(HostEngine {
            events,
            slots,
            ring: Mutex::new(Ring::new(cfg.slots)),
            state: (0..cfg.slots).map(|_| SlotState::default()).collect(),
            spill,
            bucket_counts,
        }))
    }

    /// What [`Self::packs`] checks before it touches the driver: the slots' settings and
    /// sizes.
    pub(crate) fn check_packs(
        elem_sizes: &[usize],
        cfg: &ReadbackConfig,
        table: BucketTable,
    ) -> Result<()> {
        Slots::plan(elem_sizes, cfg, Sequencing::Host, table, Filler::Pack)?;
        Ok(())
    }

    /// What [`Self::appends`] checks before it touches the driver: the slots' settings and
    /// sizes, and those of the spill region.
    pub(crate) fn check_appends(elem_sizes: &[usize], cfg: &ReadbackConfig) -> Result<()> {
        Slots::plan(
            elem_sizes,
            cfg,
            Sequencing::Host,
            BucketTable::IfBucketed,
            Filler::Append,
        )?;
        SpillRegion::plan(elem_sizes, cfg, cfg.buckets)?;
        Ok(())
    }

    pub(crate) fn slots(&self) -> &Slots {
        &self.slots
    }
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        self.slots.context()
    }
    /// The readback's settings and layout.
    pub(crate) fn info(&self) -> ReadbackInfo {
        self.slots.info(self.spill_rows())
    }
    /// Rows of spill per slot (0 without a spill region).
    pub(crate) fn spill_rows(&self) -> usize {
        self.spill.as_ref().map_or(0, SpillRegion::rows)
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // The ring's invariants hold between calls, so a panic elsewhere cannot poison them.
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Gives `lease`'s slot back.
    pub(crate) fn release(&self, lease: &Lease) {
        self.ring().release(lease.slot, lease.seq);
    }

    /// Marks `slot`'s append scratch as needing a reset before the next append (or not).
    pub(super) fn mark_scratch(&self, slot: usize, dirty: bool) {
        self.state[slot]
            .scratch_dirty
            .store(dirty, Ordering::Relaxed);
    }

    /// A wait saw the slot's append finish: its scratch needs no reset.
    pub(super) fn mark_scratch_clean(&self, slot: usize) {
        self.mark_scratch(slot, false);
    }

    /// Slots currently held by tickets.
    pub(crate) fn held(&self) -> usize {
        self.ring().held()
    }

    /// Device address of `slot`'s [`abi::srb_slot_sync`] record.
    pub(super) fn sync_ptr(&self, slot: usize) -> u64 {
        self.slots.sync_ptr(slot)
    }

    /// Bucketed append: device address of `slot`'s 2 k counters (the buckets' counts, then
    /// their spilled rows), and their bytes.
    pub(super) fn bucket_counts_of(&self, slot: usize) -> Option<(u64, usize)> {
        let k = self.slots.layout().buckets();
        self.bucket_counts
            .as_ref()
            .map(|b| (b.ptr() + (slot * 16 * k) as u64, 16 * k))
    }

    /// Bytes of one [`abi::srb_slot_sync`] record.
    pub(super) const SYNC_BYTES: usize = std::mem::size_of::<abi::srb_slot_sync>();
}

impl Drop for HostEngine {
    fn drop(&mut self) {
        // No ticket is alive (each holds an Arc to self), but readbacks whose tickets were
        // dropped unwaited may still write the slots: wait for every slot's last event before
        // the events are destroyed and the buffers freed (the fields, after this). A device
        // error here (sticky context error) leaves nothing to wait for; the memory is freed
        // all the same.
        let _ = driver::bind(self.context());
        for e in &self.events {
            let _ = e.synchronize();
        }
    }
}

// The engine is shared between threads as it is: every field is Send and Sync.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<HostEngine>();
};
