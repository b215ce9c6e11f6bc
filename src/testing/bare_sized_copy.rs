//! The staged transport's sized copy without the readback around it: a floor for the
//! comparison harness. [`BareSizedCopy`] is the library's own graph (`[srb_pack_switch] ->
//! SWITCH`, body `k` copying `min(2^k, capacity)` rows and the trailer device -> host) and
//! kernel, built by [`SizedCopy::new`] for the slots of one `f64` column, with the pack
//! parameters and grid the engine computes (`pack_params::pack_params`, `pack_params::pack_grid`).
//! Launches take the slots in turn, as a readback's ring does, so the floor's copies land in as
//! much host memory as the readback's. What it leaves out is the readback engine: no ring
//! bookkeeping, no tickets, no event per slot, no trailer or sequence wait, no checks of what a
//! launch is given. The caller launches it, waits for it however it likes, then reads the count
//! and the rows.
use crate::element::CountKind;
use crate::engine::pack_params::{self, PackTarget, SlotAt};
use crate::engine::plan::CopyPlan;
use crate::engine::sized_copy::{self, SizedCopy};
use crate::engine::slots::Trailer;
use crate::engine::trailer::{self, Fill, Lens};
use crate::error::Result;
use crate::launch::LaunchShape;
use crate::layout::SlotLayout;
use crate::raw::abi;
use crate::raw::buffer::{DeviceBuffer, PinnedBuffer};
use crate::raw::{driver, switch_graph};
use crate::source::{ColumnSource, RawCount};
use cudarc::driver::sys::{CUdeviceptr, CUstream};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// Slots of `capacity` `f64` rows, copied back by the library's sized-copy graph alone.
///
/// Built as a sized readback builds its slots: device staging slots the pack writes,
/// device-mapped pinned host slots the graphs' bodies copy into, one `srb_slot_sync` record per
/// slot (the pack's scratch), and the engine's sized-copy graph per slot with the launch shape
/// the engine gives a readback of this capacity (the pack's grid by the same function, without
/// programmatic launch, as every graph's kernel node).
#[derive(Debug)]
pub struct BareSizedCopy {
    ctx: Arc<CudaContext>,
    layout: SlotLayout,
    shape: LaunchShape,
    /// The graphs, whose copies address `host` and `staging` (so they are declared, and
    /// dropped, before them).
    sized: SizedCopy,
    host: PinnedBuffer,
    staging: DeviceBuffer,
    sync: DeviceBuffer,
    num_slots: usize,
    /// The slot the next launch takes.
    next: usize,
    /// The sequence number, source length and slot of the last launch (`(0, 0, 0)` before the
    /// first).
    last: (u64, usize, usize),
}

impl BareSizedCopy {
    /// `num_slots` slots of `capacity` rows in `ctx` (a readback's
    /// [`crate::ReadbackConfig::slots`]), and their graphs, built and uploaded.
    ///
    /// Errors with [`crate::Error::InvalidConfig`] for no slots or a capacity a readback refuses,
    /// and with [`crate::Error::SizedCopyUnavailable`] on a driver older than CUDA 12.8 (the
    /// check a readback asking for [`crate::StagedCopy::Sized`] makes), or where the driver
    /// refuses the switch image or the graph, as such a readback does.
    pub fn new(ctx: &Arc<CudaContext>, capacity: usize, num_slots: usize) -> Result<Self> {
        driver::ensure_driver()?;
        driver::bind(ctx)?;
        CopyPlan::Sized { required: true }.resolve(switch_graph::driver_version)?;
        let layout = SlotLayout::new(capacity, &[8])?;
        let total = layout.total_bytes(num_slots)?;
        // Device-mapped, as a sized readback's host slots are: a conditional body's copies may
        // only reach device-mapped host memory.
        let host = PinnedBuffer::new(ctx, total, true)?;
        let staging = DeviceBuffer::new_zeroed(ctx, total)?;
        let sync =
            DeviceBuffer::new_zeroed(ctx, num_slots * std::mem::size_of::<abi::srb_slot_sync>())?;
        let shape = LaunchShape {
            grid: pack_params::pack_grid(ctx, &layout, None)?,
            block: abi::SRB_PACK_THREADS,
            programmatic: false,
        };
        let sized = SizedCopy::new(ctx, &layout, num_slots, shape, &host, &staging, sync.ptr())
            .map_err(sized_copy::unavailable)?;
        Ok(BareSizedCopy {
            ctx: ctx.clone(),
            layout,
            shape,
            sized,
            host,
            staging,
            sync,
            num_slots,
            next: 0,
            last: (0, 0, 0),
        })
    }

    /// Rows per slot.
    pub fn capacity(&self) -> usize {
        self.layout.capacity()
    }

    /// The launch shape of the graph's kernel node.
    pub fn launch_shape(&self) -> LaunchShape {
        self.shape
    }

    /// Enqueues the next slot's graph on `stream` (the slots are taken in turn): the pack
    /// reads the `i32` count at `count` and copies that many of the `len` `f64` rows at `rows`
    /// into the staging slot, with trailer sequence number `seq`; the SWITCH node then copies
    /// the count's size class of rows, and the trailer, into the host slot. Sets the graph's
    /// kernel node parameters and launches the graph: the driver calls of a sized readback's
    /// enqueue, nothing else. Dropping `self` waits for a launch still in flight (it
    /// synchronizes the whole context).
    ///
    /// # Safety
    /// - `self`'s context is current on this thread and `stream` is a live stream of it;
    /// - `rows` holds `len` `f64` and `count` one `i32`, device memory of that context, and
    ///   both stay valid, and unwritten by other work, until the launch has run;
    /// - no other launch of `self` is in flight (wait for each launch before the next): the
    ///   pack's scratch record and the slots are reused without the ring's checks.
    pub unsafe fn launch(
        &mut self,
        stream: CUstream,
        rows: CUdeviceptr,
        len: usize,
        count: CUdeviceptr,
        seq: u64,
    ) -> Result<()> {
        let slot = self.next;
        let mut p = pack_params::pack_params(
            &self.layout,
            self.target(),
            &[ColumnSource { ptr: rows, len }],
            RawCount::i32(count),
            SlotAt::Host { seq, slot },
        );
        // SAFETY: per this function's contract: the context is current, `stream` is its,
        // nothing else launches the slot's graph, and the rows and count stay valid until the
        // pack has run; the slots and sync records are self's.
        unsafe {
            let param = (&mut p as *mut abi::srb_pack_params).cast::<std::ffi::c_void>();
            self.sized.graph(slot).launch(stream, param)?
        };
        self.last = (seq, len, slot);
        self.next = (slot + 1) % self.num_slots;
        Ok(())
    }

    /// The count the last launch read back, decoded from its host slot's trailer as a
    /// readback's is (its sequence number, magic and status checked): the errors a readback's
    /// wait would give for it (a negative count, one over the capacity or the source).
    ///
    /// Meaningful only once the last launch's completion was waited for (an event recorded
    /// after it, synchronized): before that the trailer may be the previous launch's, or be
    /// landing. Safe all the same: the trailer is read as the engine polls a slot's, as plain
    /// integers by volatile reads, and a trailer read too early gives a wrong count or an error.
    pub fn count(&self) -> Result<usize> {
        let (seq, len, slot) = self.last;
        let fill = Fill::Pack {
            kind: CountKind::I32,
            lens: Lens::new(&[len]),
        };
        let t = self.trailer(slot);
        trailer::decode(
            &t,
            seq,
            slot,
            self.capacity(),
            &fill,
            self.layout.elem_sizes(),
        )
    }

    /// The first [`Self::count`] rows of the last launch's host slot (at most the capacity),
    /// or the count's error.
    ///
    /// # Safety
    /// The last launch (if any) has completed: an event recorded after it on its stream, or
    /// the stream, was synchronized. Before that the graph's copy may still be writing the rows
    /// the slice would borrow.
    pub unsafe fn rows(&self) -> Result<&[f64]> {
        let n = self.count()?.min(self.capacity());
        let p = self.slot_ptr(self.last.2).cast::<f64>();
        // SAFETY: the column starts at offset 0 of the slot (the stride is a multiple of
        // SLOT_ALIGN, 128, and the pinned buffer starts page-aligned, so 8-byte aligned) and
        // holds `capacity` >= n f64; the memory lives as long as self; no copy is writing it
        // (the last launch completed, per the contract), and `launch` takes `&mut self`, so
        // none is enqueued while the slice is borrowed.
        Ok(unsafe { std::slice::from_raw_parts(p, n) })
    }

    /// The slot the last launch took (0 before the first): launches take the slots in turn.
    pub fn last_slot(&self) -> usize {
        self.last.2
    }

    /// The staging slots and sync records the packs write.
    fn target(&self) -> PackTarget {
        PackTarget {
            slots: self.staging.ptr(),
            slot_sync: self.sync.ptr(),
            num_slots: self.num_slots,
        }
    }

    /// The start of host slot `slot` (< `num_slots`).
    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        debug_assert!(slot < self.num_slots);
        // SAFETY: slot < num_slots, and total_bytes(num_slots) covers every slot's stride.
        unsafe { self.host.host_ptr().add(slot * self.layout.slot_stride()) }
    }

    fn trailer(&self, slot: usize) -> Trailer {
        let off = self.layout.trailer_offset();
        // SAFETY: the trailer lies inside the host slot (total_bytes covers it), 16-byte
        // aligned; its fields are plain integers, read as the engine reads a slot's.
        unsafe { std::ptr::read_volatile(self.slot_ptr(slot).add(off).cast::<Trailer>()) }
    }
}

impl Drop for BareSizedCopy {
    fn drop(&mut self) {
        // A launch still in flight would copy into the buffers freed next: wait for it first,
        // by synchronizing the whole context (all of its work, not only this copy's: a test
        // floor may be heavy-handed); an error leaves nothing better to do.
        let _ = driver::bind(&self.ctx);
        let _ = self.ctx.synchronize();
    }
}
