//! The slots every readback has: pinned memory laid out by its [`SlotLayout`] and reached by
//! its [`Delivery`], the pack kernels that fill them and their launch, the per-slot device
//! scratch, and the host's reads of a slot (its columns, trailer and bucket table). What the
//! settings are checked against is in `plan.rs`, what an enqueue is checked against in
//! `checks.rs`, the kernels' parameters in `pack_params.rs`.
use super::delivery::Delivery;
use super::pack_params::{self, Pack, PackTarget, SlotAt, SpillArea};
use super::plan::{Sequencing, SlotPlan};
use crate::config::{ReadbackConfig, StagedCopy, Transport, WaitMode};
use crate::error::{Error, Result};
use crate::info::ReadbackInfo;
use crate::kernel_image::KernelImage;
use crate::launch::LaunchShape;
use crate::layout::SlotLayout;
use crate::raw::abi;
use crate::raw::buffer::DeviceBuffer;
use crate::raw::driver;
use crate::raw::module::{Kernel, Module};
use cudarc::driver::sys::{CUdeviceptr, CUstream};
use cudarc::driver::CudaContext;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The trailer at the end of every slot, as a kernel wrote it.
pub(crate) type Trailer = abi::srb_trailer;

/// The bucket table of a bucketed slot, as the host read it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct BucketTable {
    pub(crate) bad_rows: u64,
    pub(crate) bad_bucket: u64,
    pub(crate) bad_offset: u64,
    pub(crate) bad_limit: u64,
    /// Each bucket's true count (as read, for a bucket pack: sign-extended).
    pub(crate) counts: Vec<u64>,
}

/// What every readback has: the slots and their layout, the pack kernels, the device scratch.
#[derive(Debug)]
pub(crate) struct Slots {
    ctx: Arc<CudaContext>,
    pack: Kernel,
    pack_buckets: Kernel,
    layout: SlotLayout,
    /// How the slots reach the host, and the memory they are. Its graphs (the sized copy)
    /// address `sync`, so it is declared, and dropped, before it.
    delivery: Delivery,
    /// `num_slots` [`abi::srb_slot_sync`] records.
    sync: DeviceBuffer,
    wait: WaitMode,
    num_slots: usize,
    shape: LaunchShape,
    config: ReadbackConfig,
    /// The library's image loaded in the context (the pack kernels'), as the driver has it.
    image: KernelImage,
}

impl Slots {
    /// Allocates the slots `plan` describes and loads the pack kernels.
    pub(crate) fn new(ctx: &Arc<CudaContext>, plan: SlotPlan) -> Result<Self> {
        let cfg = &plan.config;
        driver::ensure_driver()?;
        driver::bind(ctx)?;
        let module = Module::library(ctx)?;
        let image = module.image();
        let pack = module.function(c"srb_pack")?;
        let pack_buckets = module.function(c"srb_pack_buckets")?;
        let grid = pack_params::pack_grid(ctx, &plan.layout, cfg.max_blocks)?;
        let (major, _) = ctx
            .compute_capability()
            .map_err(Error::cuda("cuDeviceGetAttribute"))?;
        // Programmatic dependent launch is safe only if the loaded pack kernel waits for the
        // producer (griddepcontrol.wait), which its source holds for compute_90 and newer only;
        // the driver loads the sm_70 to sm_80 images on older GPUs, which have no such launch.
        // CU_FUNC_ATTRIBUTE_PTX_VERSION says which image was loaded. A device-sequenced pack
        // never uses it (the plan refuses it).
        let pack_waits = pack.ptx_version()? >= 90;
        let programmatic = match cfg.programmatic_launch {
            Some(true) if !pack_waits => {
                return Err(Error::config(
                    "programmatic launch needs a GPU of compute capability 9.0 or newer (the \
                     pack kernel this GPU loaded was compiled for an older one, without the \
                     wait for the producer)",
                ))
            }
            Some(on) => on,
            None => {
                plan.sequencing == Sequencing::Host
                    && major >= 9
                    && pack_waits
                    && std::env::var_os("SIZED_READBACK_PDL").is_none_or(|v| v != "0")
            }
        };
        let shape = LaunchShape {
            grid,
            block: abi::SRB_PACK_THREADS,
            programmatic,
        };
        let sync =
            DeviceBuffer::new_zeroed(ctx, cfg.slots * std::mem::size_of::<abi::srb_slot_sync>())?;
        // Every pack of the readback runs as the delivery launches it: `info()` reports that
        // shape.
        let (delivery, shape) = Delivery::new(ctx, &plan, sync.ptr(), shape)?;
        let wait = match cfg.wait {
            WaitMode::Auto => delivery.default_wait(),
            w => w,
        };
        Ok(Slots {
            ctx: ctx.clone(),
            pack,
            pack_buckets,
            num_slots: cfg.slots,
            layout: plan.layout,
            delivery,
            sync,
            wait,
            shape,
            config: plan.config,
            image,
        })
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    pub(crate) fn layout(&self) -> &SlotLayout {
        &self.layout
    }
    pub(crate) fn transport(&self) -> Transport {
        self.delivery.transport()
    }
    pub(crate) fn wait_mode(&self) -> WaitMode {
        self.wait
    }
    /// Staged transport: the copy in use (never `Auto`); `None` mapped.
    pub(crate) fn staged_copy(&self) -> Option<StagedCopy> {
        self.delivery.staged_copy()
    }
    pub(crate) fn num_slots(&self) -> usize {
        self.num_slots
    }
    pub(crate) fn launch_shape(&self) -> LaunchShape {
        self.shape
    }
    /// The settings in effect ([`Transport::Auto`] resolved).
    pub(crate) fn config(&self) -> &ReadbackConfig {
        &self.config
    }
    /// The readback's [`ReadbackInfo`], with `spill_rows` rows of spill per slot.
    pub(crate) fn info(&self, spill_rows: usize) -> ReadbackInfo {
        ReadbackInfo {
            capacity: self.layout.capacity(),
            slots: self.num_slots,
            buckets: self.layout.buckets(),
            spill_capacity: spill_rows,
            transport: self.transport(),
            staged_copy: self.staged_copy(),
            wait_mode: self.wait,
            layout: self.layout.clone(),
            launch_shape: self.shape,
            context: self.ctx.clone(),
            auto_staged_from: None,
            kernel_image: self.image,
        }
    }

    /// Where the kernels write: the delivery's slots and the sync records.
    pub(crate) fn target(&self) -> PackTarget {
        PackTarget {
            slots: self.delivery.device_slots(),
            slot_sync: self.sync.ptr(),
            num_slots: self.num_slots,
        }
    }

    /// Device address of slot `slot`'s scratch record.
    pub(crate) fn sync_ptr(&self, slot: usize) -> CUdeviceptr {
        self.sync.ptr() + (slot * std::mem::size_of::<abi::srb_slot_sync>()) as u64
    }

    /// The append descriptor's fields every engine fills alike (see
    /// [`pack_params::append_desc`]), with the spill region `spill`.
    pub(crate) fn append_desc(&self, spill: Option<SpillArea<'_>>) -> abi::srb_append_desc {
        pack_params::append_desc(&self.layout, self.target(), spill)
    }

    /// Launches the pack kernel (the bucket pack, one block per bucket, with offsets) for
    /// `pack` into the slot `at` says: a host-sequenced pack of one bucket through the
    /// delivery's graph where it has one.
    ///
    /// # Safety
    /// The context is bound, `stream` is a live stream of it, and the memory `pack` addresses
    /// is valid per the enqueue's contract until the pack has run; a host-sequenced slot is
    /// held by the caller.
    pub(crate) unsafe fn launch(&self, stream: CUstream, pack: Pack<'_>, at: SlotAt) -> Result<()> {
        let target = self.target();
        match (pack.offsets, at) {
            (None, at) => {
                let mut p =
                    pack_params::pack_params(&self.layout, target, pack.sources, pack.count, at);
                match (self.delivery.pack_graphs(), at) {
                    (Some(graphs), SlotAt::Host { slot, .. }) => {
                        let param = (&mut p as *mut abi::srb_pack_params).cast::<c_void>();
                        // SAFETY: per this function's contract: the context is bound, the
                        // caller holds the slot, so no one else launches its graph, and the
                        // memory `pack` addresses is valid until the pack has run;
                        // srb_pack_switch takes srb_pack_params, then the handle.
                        unsafe { graphs.graph(slot).launch(stream, param) }
                    }
                    _ => {
                        let mut args = [(&mut p as *mut abi::srb_pack_params).cast::<c_void>()];
                        // SAFETY: one parameter of type srb_pack_params (bindgen from the
                        // kernel's header); the slots and sync records belong to self; the
                        // sources per the contract; the kernel starts with griddepcontrol.wait
                        // when launched programmatically.
                        unsafe { self.pack.launch(stream, self.shape, &mut args) }
                    }
                }
            }
            (Some(offsets), SlotAt::Host { seq, slot }) => {
                let mut p = pack_params::pack_buckets_params(
                    &self.layout,
                    target,
                    pack.sources,
                    pack.count,
                    offsets,
                    (seq, slot),
                );
                let mut args = [(&mut p as *mut abi::srb_pack_buckets_params).cast::<c_void>()];
                let shape = LaunchShape {
                    grid: p.num_buckets.max(1),
                    ..self.shape
                };
                // SAFETY: one parameter of type srb_pack_buckets_params (bindgen from the
                // kernel's header); the rest as above, for the counts, offsets and sources.
                unsafe { self.pack_buckets.launch(stream, shape, &mut args) }
            }
            (Some(_), SlotAt::Device { .. }) => Err(Error::config(
                "a bucket pack into a device-sequenced slot: graph readbacks have one bucket",
            )),
        }
    }

    /// What follows a kernel that filled slot `slot`: the delivery's copy to the host, if it
    /// has one.
    ///
    /// # Safety
    /// As [`Delivery::after_fill`].
    pub(crate) unsafe fn after_fill(&self, stream: CUstream, slot: usize) -> Result<()> {
        // SAFETY: per the contract.
        unsafe { self.delivery.after_fill(stream, &self.layout, slot) }
    }

    /// Host address of column `col` of `slot`.
    pub(crate) fn column_host_ptr(&self, slot: usize, col: usize) -> *const u8 {
        let off = slot * self.layout.slot_stride() + self.layout.column_offsets()[col];
        // SAFETY: in bounds of the host buffer (total_bytes covers every slot).
        unsafe { self.delivery.host().host_ptr().add(off) }
    }

    fn trailer_ptr(&self, slot: usize) -> *const Trailer {
        let off = slot * self.layout.slot_stride() + self.layout.trailer_offset();
        // SAFETY: in bounds of the host buffer (total_bytes covers every slot's trailer).
        unsafe { self.delivery.host().host_ptr().add(off).cast::<Trailer>() }
    }

    /// Sets every byte of every host slot to `byte`.
    ///
    /// # Safety
    /// No readback of these slots is in flight or held (nothing writes or reads them).
    #[cfg(feature = "testing")]
    pub(crate) unsafe fn fill_host(&self, byte: u8) {
        let len = self.layout.slot_stride() * self.num_slots;
        // SAFETY: the host buffer holds every slot; per the contract nothing else uses it.
        unsafe { std::ptr::write_bytes(self.delivery.host().host_ptr(), byte, len) };
    }

    /// Whether slot `slot`'s trailer holds `seq` (Acquire: then everything the kernel stored
    /// before `seq`, after its system fence, is visible too).
    pub(crate) fn seq_visible(&self, slot: usize, seq: u64) -> bool {
        // SAFETY: the word is 8-byte aligned (16-byte trailer offset in a page-aligned buffer)
        // and in bounds, and lives as long as self. The device stores it with one naturally
        // aligned 8-byte store, single-copy atomic; the host only loads it, so an atomic view
        // is the right one.
        let word = unsafe {
            AtomicU64::from_ptr(std::ptr::addr_of!((*self.trailer_ptr(slot)).seq).cast_mut())
        };
        word.load(Ordering::Acquire) == seq
    }

    /// The trailer of `slot`, read once the readback is complete.
    pub(crate) fn trailer(&self, slot: usize) -> Trailer {
        // SAFETY: as in seq_visible; the fields are plain integers.
        unsafe { std::ptr::read_volatile(self.trailer_ptr(slot)) }
    }

    /// The bucket table of `slot` (bucketed layouts), read once the readback is complete.
    pub(crate) fn bucket_table(&self, slot: usize) -> BucketTable {
        let k = self.layout.buckets();
        let off = slot * self.layout.slot_stride() + self.layout.bucket_table_offset();
        // SAFETY: the table's 4 + k words lie in bounds of the host buffer (the layout reserves
        // them before the trailer), 8-byte aligned; the kernel wrote them before the trailer's
        // fence, and the caller took the acquire.
        let words = unsafe {
            let p = self.delivery.host().host_ptr().add(off).cast::<u64>();
            (0..4 + k)
                .map(|i| std::ptr::read_volatile(p.add(i)))
                .collect::<Vec<u64>>()
        };
        BucketTable {
            bad_rows: words[0],
            bad_bucket: words[1],
            bad_offset: words[2],
            bad_limit: words[3],
            counts: words[4..].to_vec(),
        }
    }
}

// The slots are shared between threads as they are: every field is Send and Sync.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<Slots>();
};
