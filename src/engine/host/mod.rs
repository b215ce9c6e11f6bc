//! Host-sequenced readbacks: the host picks each readback's slot and sequence number from a
//! ring, records one event per slot after the readback, and hands out a ticket that holds the
//! slot. By phase: `enqueue.rs` (the safe and the raw enqueue, the pack into a slot),
//! `append.rs` (a slot for the user's kernel, and the fetch of its spill), `wait.rs`.
use super::plan::{Filler, Sequencing, SlotPlan};
use super::ring::{Lease, Ring};
use super::slots::Slots;
use super::spill::{SpillPlan, SpillRegion};
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
pub(crate) mod spill_fetch;
mod wait;

/// A spill region whose fetch is a host engine.
pub(crate) type Spill = SpillRegion<HostEngine>;

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
    pub(super) spill: Option<Spill>,
    /// Bucketed append: per slot, the buckets' counters and their spilled rows (2 k u64).
    pub(super) bucket_counts: Option<DeviceBuffer>,
}

/// What an append readback will be: its slots and its spill region.
#[derive(Debug)]
pub(crate) struct AppendPlan {
    slots: SlotPlan,
    spill: Option<SpillPlan>,
}

impl HostEngine {
    /// The slots of a readback of `cfg.slots` slots of `cfg.capacity` rows of `elem_sizes` that
    /// the pack kernels fill (the bucket pack, whose slots always have a bucket table),
    /// checked before any driver call.
    pub(crate) fn plan_packs(
        elem_sizes: &[usize],
        cfg: &ReadbackConfig,
        table: BucketTable,
    ) -> Result<SlotPlan> {
        SlotPlan::new(elem_sizes, cfg, Sequencing::Host, table, Filler::Pack)
    }

    /// The pack readback `plan` describes.
    pub(crate) fn packs(ctx: &Arc<CudaContext>, plan: SlotPlan) -> Result<Arc<Self>> {
        let slots = Slots::new(ctx, plan)?;
        Self::with_slots(ctx, slots, None, None)
    }

    /// An append readback of `cfg.slots` slots of `cfg.capacity` rows of `elem_sizes` that the
    /// user's kernels fill, with a spill region of `cfg.spill_rows()` rows per slot (per
    /// bucket), checked before any driver call.
    pub(crate) fn plan_appends(elem_sizes: &[usize], cfg: &ReadbackConfig) -> Result<AppendPlan> {
        let slots = SlotPlan::new(
            elem_sizes,
            cfg,
            Sequencing::Host,
            BucketTable::IfBucketed,
            Filler::Append,
        )?;
        let spill = Spill::plan(elem_sizes, cfg, cfg.buckets)?;
        Ok(AppendPlan { slots, spill })
    }

    /// The append readback `plan` describes: its slots, its spill region and, bucketed, the
    /// buckets' counters.
    pub(crate) fn appends(ctx: &Arc<CudaContext>, plan: AppendPlan) -> Result<Arc<Self>> {
        let (num_slots, k) = (plan.slots.config.slots, plan.slots.config.buckets);
        let slots = Slots::new(ctx, plan.slots)?;
        let spill = plan
            .spill
            .map(|p| SpillRegion::new(ctx, p, num_slots))
            .transpose()?;
        let bucket_counts = if k > 1 {
            Some(DeviceBuffer::new_zeroed(ctx, 16 * k * num_slots)?)
        } else {
            None
        };
        Self::with_slots(ctx, slots, spill, bucket_counts)
    }

    fn with_slots(
        ctx: &Arc<CudaContext>,
        slots: Slots,
        spill: Option<Spill>,
        bucket_counts: Option<DeviceBuffer>,
    ) -> Result<Arc<Self>> {
        let n = slots.num_slots();
        let events = (0..n)
            .map(|_| Event::new(ctx))
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(HostEngine {
            events,
            slots,
            ring: Mutex::new(Ring::new(n)),
            state: (0..n).map(|_| SlotState::default()).collect(),
            spill,
            bucket_counts,
        }))
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
        self.spill.as_ref().map_or(0, Spill::rows)
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
