//! The slots every readback has: pinned memory laid out by its [`SlotLayout`], the pack
//! kernels that fill them, the per-slot device scratch, and the checks of what an enqueue or
//! a recording is given.
use super::sized_copy::{self, SizedCopy};
use super::spill::SpillRegion;
use super::trailer::{self, Trailer};
use crate::config::{ReadbackConfig, StagedCopy, Transport, WaitMode};
use crate::error::{Error, Result};
use crate::info::ReadbackInfo;
use crate::launch::LaunchShape;
use crate::layout::{BucketTable, SlotLayout, MAX_COLUMNS};
use crate::raw::abi;
use crate::raw::buffer::{DeviceBuffer, PinnedBuffer};
use crate::raw::driver;
use crate::raw::module::{Kernel, Module};
use crate::raw::switch_graph;
use crate::source::{ColumnSource, RawCount};
use cudarc::driver::sys::{self, CUdeviceptr, CUevent, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What one pack reads: the sources, the count (a bucket pack's k counts) and, for a bucket
/// pack, the device address of its k offsets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pack<'a> {
    pub(crate) sources: &'a [ColumnSource],
    pub(crate) count: RawCount,
    pub(crate) offsets: Option<CUdeviceptr>,
}

/// Which slot a pack writes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SlotAt {
    /// Slot `slot`, leased by the host for readback `seq`.
    Host { seq: u64, slot: usize },
    /// The slot the kernel takes on the device from the sequence counter at `counter`, if the
    /// ring control at `ctl` says it is released (graph replay).
    Device {
        counter: CUdeviceptr,
        ctl: CUdeviceptr,
    },
}

/// What fills the slots: a pack kernel (of one bucket or k), or the user's append kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filler {
    Pack,
    Append,
}

/// The staged copy a readback's settings ask for, before the driver is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopyPlan {
    /// Mapped: no copy.
    None,
    Whole,
    /// Sized if the driver allows it; `required`: else an error (else the whole slot).
    Sized {
        required: bool,
    },
}

impl CopyPlan {
    /// The staged copy in use (`None`: mapped) on a driver whose version `driver_version` gives
    /// (`cuDriverGetVersion`), asked only where the sized copy is planned: the sized copy where
    /// the driver has it, else the whole slot or, where it was required, an error.
    pub(crate) fn resolve(
        self,
        driver_version: impl FnOnce() -> Result<i32>,
    ) -> Result<Option<StagedCopy>> {
        Ok(match self {
            CopyPlan::None => None,
            CopyPlan::Whole => Some(StagedCopy::Whole),
            CopyPlan::Sized { required } => {
                let version = driver_version()?;
                if sized_copy::driver_supports(version) {
                    Some(StagedCopy::Sized)
                } else if !required {
                    Some(StagedCopy::Whole)
                } else {
                    return Err(Error::SizedCopyUnavailable {
                        reason: format!(
                            "the driver supports CUDA {}.{} and graph conditionals set from a \
                             kernel need CUDA 12.8 (cuDriverGetVersion {version} < 12080)",
                            version / 1000,
                            version % 1000 / 10
                        ),
                    });
                }
            }
        })
    }
}

/// Whether a readback's host slots are device-mapped: the mapped transport's kernels write
/// them, and the sized copy's graphs copy into them (a conditional body's copies may only reach
/// device-mapped host memory: on devices with unified addressing all pinned memory is, the
/// flag says so everywhere); the whole-slot copy needs only pinned memory.
fn host_mapped(transport: Transport, staged_copy: Option<StagedCopy>) -> bool {
    transport == Transport::Mapped || staged_copy == Some(StagedCopy::Sized)
}

/// Who picks each readback's slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sequencing {
    /// The host, from its ring ([`super::host::HostEngine`]).
    Host,
    /// The pack on the device, from a counter (graph replay, [`super::device::DeviceEngine`]):
    /// it runs without programmatic dependent launch and needs the mapped transport.
    Device,
}

/// What every readback has: the slots and their layout, the pack kernel, the device scratch.
#[derive(Debug)]
pub(crate) struct Slots {
    ctx: Arc<CudaContext>,
    pack: Kernel,
    pack_buckets: Kernel,
    pub(super) layout: SlotLayout,
    transport: Transport,
    wait: WaitMode,
    num_slots: usize,
    /// [`StagedCopy::Sized`]: each slot's graph of the pack and its sized copy, whose copies
    /// address `host` and `staging` (so it is declared, and dropped, before them).
    sized: Option<SizedCopy>,
    /// The slots as the host reads them (mapped: also what the device writes).
    pub(super) host: PinnedBuffer,
    /// Staged transport: the device-side slots the kernels write, copied into `host`.
    pub(super) staging: Option<DeviceBuffer>,
    /// Staged transport: the copy in use.
    staged_copy: Option<StagedCopy>,
    /// `num_slots` [`abi::srb_slot_sync`] records.
    sync: DeviceBuffer,
    shape: LaunchShape,
    config: ReadbackConfig,
}

impl Slots {
    /// Allocates `cfg.slots` slots of `cfg.capacity` rows of `elem_sizes`, with a bucket table
    /// as `table` says, and loads the pack kernels.
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        elem_sizes: &[usize],
        cfg: &ReadbackConfig,
        sequencing: Sequencing,
        table: BucketTable,
        filler: Filler,
    ) -> Result<Self> {
        let (layout, total, copy) = Self::plan(elem_sizes, cfg, sequencing, table, filler)?;
        let device_sequenced = sequencing == Sequencing::Device;
        let mapped = cfg.transport == Transport::Mapped;
        driver::ensure_driver()?;
        driver::bind(ctx)?;
        // Before any allocation: whether the host slots are device-mapped follows the copy.
        let staged_copy = copy.resolve(switch_graph::driver_version)?;
        let module = Module::library(ctx)?;
        let pack = module.function(c"srb_pack")?;
        let pack_buckets = module.function(c"srb_pack_buckets")?;
        let grid = pack_grid(ctx, &layout, cfg.max_blocks)?;
        let (major, _) = ctx
            .compute_capability()
            .map_err(Error::cuda("cuDeviceGetAttribute"))?;
        // Programmatic dependent launch is safe only if the loaded pack kernel waits for the
        // producer (griddepcontrol.wait), which its source holds for compute_90 and newer only;
        // the driver loads the sm_70 to sm_80 images on older GPUs, which have no such launch.
        // CU_FUNC_ATTRIBUTE_PTX_VERSION says which image was loaded. A device-sequenced pack
        // never uses it (`plan` refuses it).
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
                !device_sequenced
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
        let host = PinnedBuffer::new(ctx, total, host_mapped(cfg.transport, staged_copy))?;
        let staging = if mapped {
            None
        } else {
            Some(DeviceBuffer::new_zeroed(ctx, total)?)
        };
        let sync =
            DeviceBuffer::new_zeroed(ctx, cfg.slots * std::mem::size_of::<abi::srb_slot_sync>())?;
        let wait = match cfg.wait {
            WaitMode::Auto if mapped => WaitMode::Trailer,
            WaitMode::Auto => WaitMode::Event,
            w => w,
        };
        let mut slots = Slots {
            ctx: ctx.clone(),
            pack,
            pack_buckets,
            layout,
            transport: cfg.transport,
            wait,
            num_slots: cfg.slots,
            sized: None,
            host,
            staging,
            staged_copy,
            sync,
            shape,
            config: cfg.clone(),
        };
        if let (Some(StagedCopy::Sized), Some(staging)) = (staged_copy, &slots.staging) {
            // A graph's kernel node follows the stream's earlier work as a whole.
            let graph_shape = LaunchShape {
                programmatic: false,
                ..shape
            };
            let sized = SizedCopy::new(
                ctx,
                &slots.layout,
                slots.num_slots,
                graph_shape,
                &slots.host,
                staging,
                |slot| {
                    slots.pack_params(
                        &[],
                        RawCount::new(0, crate::element::CountKind::U64),
                        SlotAt::Host { seq: 0, slot },
                    )
                },
            );
            match sized.map_err(sized_copy::unavailable) {
                // Every pack of the readback runs in the graphs: `info()` reports their shape.
                Ok(sized) => {
                    slots.sized = Some(sized);
                    slots.shape = graph_shape;
                }
                // Auto promises a working readback: where the driver refuses the switch image
                // or the graph, it takes the whole-slot copy, and `info()` says so. An explicit
                // Sized gets the refusal, with the driver's error.
                Err(Error::SizedCopyUnavailable { .. }) if cfg.staged_copy == StagedCopy::Auto => {
                    slots.staged_copy = Some(StagedCopy::Whole)
                }
                Err(e) => return Err(e),
            }
        }
        Ok(slots)
    }

    /// Which staged copy `cfg` asks for, given the readback's kind: the sized copy serves the
    /// host-sequenced pack of one bucket (its kernel sets the size class); appends, bucket
    /// packs and graph replay keep the whole-slot copy (or none, mapped).
    fn copy_plan(
        layout: &SlotLayout,
        cfg: &ReadbackConfig,
        sequencing: Sequencing,
        filler: Filler,
    ) -> Result<CopyPlan> {
        let unavailable = |reason: &str| {
            if cfg.staged_copy == StagedCopy::Sized {
                Err(Error::SizedCopyUnavailable {
                    reason: reason.into(),
                })
            } else {
                Ok(CopyPlan::Whole)
            }
        };
        if cfg.transport == Transport::Mapped {
            return if cfg.staged_copy == StagedCopy::Sized {
                Err(Error::SizedCopyUnavailable {
                    reason: "the mapped transport copies nothing (ask for the staged transport)"
                        .into(),
                })
            } else {
                Ok(CopyPlan::None)
            };
        }
        match cfg.staged_copy {
            StagedCopy::Whole => Ok(CopyPlan::Whole),
            _ if sequencing == Sequencing::Device => unavailable("graph readbacks"),
            _ if filler == Filler::Append => unavailable(
                "append readbacks copy the whole slot (the user's kernel cannot set the size class)",
            ),
            _ if layout.buckets() > 1 || layout.has_bucket_table() => {
                unavailable("bucketed readbacks copy the whole slot")
            }
            // The sized copy's pack runs in a graph, which starts after the stream's earlier
            // work as a whole and so cannot overlap the producer: where programmatic launch is
            // asked for, the whole-slot copy (whose pack is launched on its own) serves it.
            _ if cfg.programmatic_launch == Some(true) => unavailable(
                "it cannot launch the pack programmatically, as asked (the pack runs in a CUDA \
                 graph, which starts only after the stream's earlier work)",
            ),
            StagedCopy::Auto => Ok(CopyPlan::Sized { required: false }),
            StagedCopy::Sized => Ok(CopyPlan::Sized { required: true }),
        }
    }

    /// What [`Slots::new`] checks before it touches the driver: the layout and the total size
    /// of the slots, and the settings that do not go together. Returns the layout, the bytes
    /// of every slot and the staged copy the settings ask for.
    pub(crate) fn plan(
        elem_sizes: &[usize],
        cfg: &ReadbackConfig,
        sequencing: Sequencing,
        table: BucketTable,
        filler: Filler,
    ) -> Result<(SlotLayout, usize, CopyPlan)> {
        let layout = SlotLayout::with_buckets(cfg.capacity, elem_sizes, cfg.buckets, table)?;
        let device_sequenced = sequencing == Sequencing::Device;
        let total = layout.total_bytes(cfg.slots)?;
        if device_sequenced && cfg.buckets > 1 {
            return Err(Error::config(
                "graph readbacks have one bucket: use a ticket-based bucketed readback",
            ));
        }
        // A host-sequenced pack copies at most the capacity and counts the rest, so it has no
        // spill region: a spill asked of one is a mistake to report, not a setting to drop.
        // (A graph readback's spill serves the append kernels recorded into it.)
        if let Some(rows @ 1..) = cfg.spill {
            if !device_sequenced && filler == Filler::Pack {
                return Err(Error::config(format!(
                    "a spill of {rows} rows on a pack readback: only append readbacks and graph \
                     readbacks have a spill region; a pack counts the rows past the capacity"
                )));
            }
        }
        if cfg.max_blocks == Some(0) {
            return Err(Error::config(
                "a maximum of 0 blocks per pack launch: a pack launch needs at least one block",
            ));
        }
        if cfg.slots > u32::MAX as usize {
            return Err(Error::config(format!(
                "at most {} slots, not {}",
                u32::MAX,
                cfg.slots
            )));
        }
        let mapped = cfg.transport == Transport::Mapped;
        if !mapped && cfg.wait == WaitMode::Trailer {
            return Err(Error::config(
                "trailer waiting needs the mapped transport: a staged slot arrives by DMA in no \
                 guaranteed byte order, so only its event says it is complete",
            ));
        }
        if device_sequenced && !mapped {
            return Err(Error::config(
                "graph replay needs the mapped transport: the slot is chosen on the device, so \
                 a staged copy's host-side parameters cannot follow it",
            ));
        }
        if device_sequenced && cfg.wait == WaitMode::Event {
            return Err(Error::config(
                "graph replay waits on the trailer: no per-slot event is recorded in a graph",
            ));
        }
        if device_sequenced && cfg.programmatic_launch == Some(true) {
            // One pack's counter store must be visible to the next pack's load, which only a
            // full kernel boundary guarantees.
            return Err(Error::config(
                "programmatic launch is not available for graph readbacks: consecutive packs \
                 must not overlap",
            ));
        }
        let copy = Self::copy_plan(&layout, cfg, sequencing, filler)?;
        Ok((layout, total, copy))
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    pub(crate) fn layout(&self) -> &SlotLayout {
        &self.layout
    }
    pub(crate) fn transport(&self) -> Transport {
        self.transport
    }
    pub(crate) fn wait_mode(&self) -> WaitMode {
        self.wait
    }
    /// Staged transport: the copy in use (never `Auto`); `None` mapped.
    pub(crate) fn staged_copy(&self) -> Option<StagedCopy> {
        self.staged_copy
    }
    pub(crate) fn num_slots(&self) -> usize {
        self.num_slots
    }
    pub(crate) fn launch_shape(&self) -> LaunchShape {
        self.shape
    }
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
            transport: self.transport,
            staged_copy: self.staged_copy,
            wait_mode: self.wait,
            layout: self.layout.clone(),
            launch_shape: self.shape,
            context: self.ctx.clone(),
        }
    }

    /// Device-visible address of slot 0: where the kernels write.
    fn device_slots(&self) -> CUdeviceptr {
        match &self.staging {
            Some(dev) => dev.ptr(),
            None => self.host.device_ptr(),
        }
    }

    /// Device address of slot `slot`'s scratch record.
    pub(super) fn sync_ptr(&self, slot: usize) -> CUdeviceptr {
        self.sync.ptr() + (slot * std::mem::size_of::<abi::srb_slot_sync>()) as u64
    }

    /// Host address of column `col` of `slot`.
    pub(crate) fn column_host_ptr(&self, slot: usize, col: usize) -> *const u8 {
        let off = slot * self.layout.slot_stride() + self.layout.column_offsets()[col];
        // SAFETY: in bounds of the host buffer (total_bytes covers every slot).
        unsafe { self.host.host_ptr().add(off) }
    }

    fn trailer_ptr(&self, slot: usize) -> *const Trailer {
        let off = slot * self.layout.slot_stride() + self.layout.trailer_offset();
        // SAFETY: in bounds of the host buffer (total_bytes covers every slot's trailer).
        unsafe { self.host.host_ptr().add(off).cast::<Trailer>() }
    }

    /// Sets every byte of every host slot to `byte`.
    ///
    /// # Safety
    /// No readback of these slots is in flight or held (nothing writes or reads them).
    #[cfg(feature = "testing")]
    pub(crate) unsafe fn fill_host(&self, byte: u8) {
        let len = self.layout.slot_stride() * self.num_slots;
        // SAFETY: the host buffer holds every slot; per the contract nothing else uses it.
        unsafe { std::ptr::write_bytes(self.host.host_ptr(), byte, len) };
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
    pub(crate) fn bucket_table(&self, slot: usize) -> trailer::BucketTable {
        let k = self.layout.buckets();
        let off = slot * self.layout.slot_stride() + self.layout.bucket_table_offset();
        // SAFETY: the table's 4 + k words lie in bounds of the host buffer (the layout reserves
        // them before the trailer), 8-byte aligned; the kernel wrote them before the trailer's
        // fence, and the caller took the acquire.
        let words = unsafe {
            let p = self.host.host_ptr().add(off).cast::<u64>();
            (0..4 + k)
                .map(|i| std::ptr::read_volatile(p.add(i)))
                .collect::<Vec<u64>>()
        };
        trailer::BucketTable {
            bad_rows: words[0],
            bad_bucket: words[1],
            bad_offset: words[2],
            bad_limit: words[3],
            counts: words[4..].to_vec(),
        }
    }

    /// Errors unless `stream` belongs to this readback's context.
    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if stream.context().cu_ctx() != self.ctx.cu_ctx() {
            return Err(Error::ForeignContext { what: "the stream" });
        }
        Ok(())
    }

    /// Errors unless `event` belongs to this readback's context.
    pub(crate) fn check_event(&self, event: &CudaEvent) -> Result<CUevent> {
        if event.context().cu_ctx() != self.ctx.cu_ctx() {
            return Err(Error::ForeignContext { what: "the event" });
        }
        Ok(event.cu_event())
    }

    /// Errors unless the raw stream `stream` belongs to this readback's context (the null
    /// stream stands for the current context's legacy stream). Binds the context.
    ///
    /// # Safety
    /// `stream` is a live stream handle or null.
    pub(crate) unsafe fn check_raw_stream(&self, stream: CUstream) -> Result<()> {
        driver::bind(&self.ctx)?;
        // SAFETY: per the contract.
        let owner = unsafe { driver::stream_context(stream)? };
        if owner != self.ctx.cu_ctx() {
            return Err(Error::ForeignContext { what: "the stream" });
        }
        Ok(())
    }

    /// Errors unless the raw device address `ptr` is memory of this readback's context. The
    /// context must be bound.
    pub(crate) fn check_raw_pointer(&self, what: &'static str, ptr: CUdeviceptr) -> Result<()> {
        // SAFETY: only queries the driver's bookkeeping for the address.
        match unsafe { driver::pointer_owner(ptr)? } {
            None => Err(Error::BadPointer {
                what,
                addr: ptr,
                align: 1,
            }),
            Some((ctx, ordinal)) => {
                let same_ctx = ctx.is_null() || ctx == self.ctx.cu_ctx();
                if same_ctx && ordinal as usize == self.ctx.ordinal() {
                    Ok(())
                } else {
                    Err(Error::ForeignContext { what })
                }
            }
        }
    }

    /// The raw-pointer checks of an enqueue: every non-empty column and the count are device
    /// memory of this context. Binds the context.
    pub(crate) fn check_raw_sources(
        &self,
        sources: &[ColumnSource],
        count: RawCount,
    ) -> Result<()> {
        driver::bind(&self.ctx)?;
        let what = if sources.len() == 1 {
            "the data"
        } else {
            "a column's data"
        };
        for s in sources {
            if s.len > 0 {
                self.check_raw_pointer(what, s.ptr)?;
            }
        }
        if count.ptr() != 0 {
            self.check_raw_pointer("the count", count.ptr())?;
        }
        Ok(())
    }

    /// Errors unless `columns` match the layout and the count address suits its kind. Pure
    /// host logic.
    pub(crate) fn check_sources(&self, columns: &[ColumnSource], count: RawCount) -> Result<()> {
        let want = self.layout.elem_sizes().len();
        if columns.len() != want {
            return Err(Error::schema(format!(
                "this readback has {want} column(s), the enqueue gave {}",
                columns.len()
            )));
        }
        if count.ptr() == 0 || !count.ptr().is_multiple_of(count.kind().size() as u64) {
            return Err(Error::BadPointer {
                what: "the count",
                addr: count.ptr(),
                align: count.kind().size(),
            });
        }
        if columns.iter().any(|c| c.ptr == 0 && c.len != 0) {
            return Err(Error::BadPointer {
                what: "a column's data",
                addr: 0,
                align: 1,
            });
        }
        Ok(())
    }

    /// Launches the pack kernel (the bucket pack, one block per bucket, with offsets) for
    /// `pack` into the slot `at` says.
    ///
    /// # Safety
    /// The context is bound, `stream` is a live stream of it, and the memory `pack` addresses
    /// is valid per the enqueue's contract until the pack has run; a host-sequenced slot is
    /// held by the caller.
    pub(super) unsafe fn launch(&self, stream: CUstream, pack: Pack<'_>, at: SlotAt) -> Result<()> {
        match (pack.offsets, &self.sized, at) {
            (None, Some(sized), SlotAt::Host { slot, .. }) => {
                let p = self.pack_params(pack.sources, pack.count, at);
                // SAFETY: per this function's contract: the caller holds the slot, so no one
                // else launches its graph; the graph's copies follow the pack.
                unsafe { sized.launch(stream, slot, p) }
            }
            (None, _, _) => {
                let mut p = self.pack_params(pack.sources, pack.count, at);
                let mut args = [(&mut p as *mut abi::srb_pack_params).cast::<c_void>()];
                // SAFETY: one parameter of type srb_pack_params (bindgen from the kernel's
                // header); the slots and sync records belong to self; the sources per the
                // contract; the kernel starts with griddepcontrol.wait when launched
                // programmatically.
                unsafe { self.pack.launch(stream, self.shape, &mut args) }
            }
            (Some(offsets), _, _) => {
                let mut p = self.pack_buckets_params(pack.sources, pack.count, offsets, at);
                let mut args = [(&mut p as *mut abi::srb_pack_buckets_params).cast::<c_void>()];
                let shape = LaunchShape {
                    grid: p.num_buckets.max(1),
                    ..self.shape
                };
                // SAFETY: one parameter of type srb_pack_buckets_params (bindgen from the
                // kernel's header); the rest as above, for the counts, offsets and sources.
                unsafe { self.pack_buckets.launch(stream, shape, &mut args) }
            }
        }
    }

    /// The pack kernel's parameter for `columns` and `count`, into the slot `at` says.
    fn pack_params(
        &self,
        columns: &[ColumnSource],
        count: RawCount,
        at: SlotAt,
    ) -> abi::srb_pack_params {
        pack_params(
            &self.layout,
            PackTarget {
                slots: self.device_slots(),
                slot_sync: self.sync.ptr(),
                num_slots: self.num_slots,
            },
            columns,
            count,
            at,
        )
    }

    /// The bucket pack kernel's parameter for `columns` (each a source of `len` elements that
    /// the k buckets partition), `counts` and `offsets` (k each, of `counts`' kind), into the
    /// host-sequenced slot `at` says (bucket packs are never device-sequenced).
    fn pack_buckets_params(
        &self,
        columns: &[ColumnSource],
        counts: RawCount,
        offsets: CUdeviceptr,
        at: SlotAt,
    ) -> abi::srb_pack_buckets_params {
        debug_assert!(matches!(at, SlotAt::Host { .. }));
        let (seq, slot) = match at {
            SlotAt::Host { seq, slot } => (seq, slot),
            SlotAt::Device { .. } => (0, 0),
        };
        abi::srb_pack_buckets_params {
            counts_ptr: counts.ptr(),
            offsets_ptr: offsets,
            slots: self.device_slots(),
            slot_stride: self.layout.slot_stride() as u64,
            trailer_offset: self.layout.trailer_offset() as u64,
            bucket_table: self.layout.bucket_table_offset() as u64,
            capacity: self.layout.capacity() as u64,
            seq,
            slot_sync: self.sync.ptr(),
            slot: slot as u32,
            num_slots: self.num_slots as u32,
            count_kind: counts.kind().abi(),
            num_buckets: self.layout.buckets() as u32,
            num_columns: columns.len() as u32,
            reserved: 0,
            columns: abi_columns(&self.layout, columns),
        }
    }

    /// The append descriptor's fields every engine fills alike: the slots, their layout and
    /// columns, and the spill region if
    /// any. The engine adds how the kernel takes its slot (host- or device-sequenced) and the
    /// buckets.
    pub(super) fn append_desc(&self, spill: Option<&SpillRegion>) -> abi::srb_append_desc {
        let mut d = abi::srb_append_desc {
            slots: self.device_slots(),
            slot_stride: self.layout.slot_stride() as u64,
            trailer_offset: self.layout.trailer_offset() as u64,
            capacity: self.layout.capacity() as u64,
            slot_sync: self.sync.ptr(),
            num_slots: self.num_slots as u32,
            num_columns: self.layout.elem_sizes().len() as u32,
            ..Default::default()
        };
        for (i, (&off, &size)) in self
            .layout
            .column_offsets()
            .iter()
            .zip(self.layout.elem_sizes())
            .enumerate()
        {
            d.column_offset[i] = off as u64;
            d.elem_size[i] = size as u32;
        }
        if let Some(spill) = spill {
            d.spill = spill.buffer.ptr();
            d.spill_stride = spill.layout.slot_stride() as u64;
            d.spill_capacity = spill.rows as u64;
            for (i, &off) in spill.layout.column_offsets().iter().enumerate() {
                d.spill_offset[i] = off as u64;
            }
        }
        d
    }
}

/// Where a pack writes: the device address of slot 0 (the staging buffer, or the mapped host
/// slots), the device address of the slots' [`abi::srb_slot_sync`] records, and how many slots
/// there are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PackTarget {
    pub(crate) slots: CUdeviceptr,
    pub(crate) slot_sync: CUdeviceptr,
    pub(crate) num_slots: usize,
}

/// The pack kernel's parameter for `columns` and `count`, into the slot `at` says of slots laid
/// out by `layout` at `target`: the one place the engine (and the testing module's bare sized
/// copy) builds an [`abi::srb_pack_params`].
pub(crate) fn pack_params(
    layout: &SlotLayout,
    target: PackTarget,
    columns: &[ColumnSource],
    count: RawCount,
    at: SlotAt,
) -> abi::srb_pack_params {
    let (seq, slot, seq_counter, ring_ctl) = match at {
        SlotAt::Host { seq, slot } => (seq, slot, 0, 0),
        SlotAt::Device { counter, ctl } => (0, 0, counter, ctl),
    };
    abi::srb_pack_params {
        count_ptr: count.ptr(),
        slots: target.slots,
        slot_stride: layout.slot_stride() as u64,
        trailer_offset: layout.trailer_offset() as u64,
        capacity: layout.capacity() as u64,
        seq,
        seq_counter,
        ring_ctl,
        slot_sync: target.slot_sync,
        slot: slot as u32,
        num_slots: target.num_slots as u32,
        count_kind: count.kind().abi(),
        num_columns: columns.len() as u32,
        columns: abi_columns(layout, columns),
    }
}

/// The kernels' column records: each source, and where its column sits in a slot of `layout`.
fn abi_columns(layout: &SlotLayout, columns: &[ColumnSource]) -> [abi::srb_column; MAX_COLUMNS] {
    let mut out: [abi::srb_column; MAX_COLUMNS] = Default::default();
    for (i, c) in columns.iter().enumerate() {
        out[i] = abi::srb_column {
            src: c.ptr,
            src_len: c.len as u64,
            dst_offset: layout.column_offsets()[i] as u64,
            elem_size: layout.elem_sizes()[i] as u32,
            reserved: 0,
        };
    }
    out
}

/// The pack's grid for slots laid out by `layout` on `ctx`'s device: a block per
/// [`abi::SRB_BYTES_PER_BLOCK`] bytes of a full slot, at least one, at most `max_blocks` (by
/// default four per multiprocessor).
pub(crate) fn pack_grid(
    ctx: &Arc<CudaContext>,
    layout: &SlotLayout,
    max_blocks: Option<u32>,
) -> Result<u32> {
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(Error::cuda("cuDeviceGetAttribute"))?;
    let max_blocks = max_blocks.unwrap_or((sms.max(1) as u32) * 4).max(1);
    let want = layout
        .row_bytes()
        .saturating_mul(layout.capacity())
        .div_ceil(abi::SRB_BYTES_PER_BLOCK as usize);
    Ok(want.clamp(1, max_blocks.min(i32::MAX as u32) as usize) as u32)
}

// The slots are shared between threads as they are: every field is Send and Sync.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<Slots>();
};

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(cfg: &ReadbackConfig, filler: Filler, table: BucketTable) -> Result<CopyPlan> {
        let (_, _, copy) = Slots::plan(&[8, 4], cfg, Sequencing::Host, table, filler)?;
        Ok(copy)
    }

    #[test]
    fn the_sized_copy_serves_staged_packs_of_one_bucket() {
        let staged = ReadbackConfig::new(1000).transport(Transport::Staged);
        let (pack, append) = (Filler::Pack, Filler::Append);
        let one = BucketTable::IfBucketed;
        assert_eq!(
            plan(&staged, pack, one).unwrap(),
            CopyPlan::Sized { required: false }
        );
        let sized = staged.clone().staged_copy(StagedCopy::Sized);
        assert_eq!(
            plan(&sized, pack, one).unwrap(),
            CopyPlan::Sized { required: true }
        );
        let whole = staged.clone().staged_copy(StagedCopy::Whole);
        assert_eq!(plan(&whole, pack, one).unwrap(), CopyPlan::Whole);
        // Appends and buckets copy the whole slot under Auto, and refuse an explicit Sized.
        assert_eq!(plan(&staged, append, one).unwrap(), CopyPlan::Whole);
        let bucketed = staged.clone().buckets(4);
        assert_eq!(plan(&bucketed, pack, one).unwrap(), CopyPlan::Whole);
        assert_eq!(
            plan(&staged, pack, BucketTable::Always).unwrap(),
            CopyPlan::Whole
        );
        for (cfg, filler) in [(sized.clone(), append), (sized.clone().buckets(4), pack)] {
            let e = plan(&cfg, filler, one).unwrap_err();
            assert!(matches!(e, Error::SizedCopyUnavailable { .. }), "{e:?}");
        }
        // Programmatic launch asked for: Auto takes the whole slot, which honours it; an
        // explicit Sized is refused. Asked off, or left to the device, it does not matter.
        let pdl = staged.clone().programmatic_launch(true);
        assert_eq!(plan(&pdl, pack, one).unwrap(), CopyPlan::Whole);
        match plan(&sized.clone().programmatic_launch(true), pack, one) {
            Err(Error::SizedCopyUnavailable { reason }) => {
                assert!(reason.contains("programmatically"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            plan(&staged.clone().programmatic_launch(false), pack, one).unwrap(),
            CopyPlan::Sized { required: false }
        );
        assert_eq!(
            plan(&sized.clone().programmatic_launch(false), pack, one).unwrap(),
            CopyPlan::Sized { required: true }
        );
        // Mapped copies nothing; an explicit Sized there is an error that says so.
        let mapped = ReadbackConfig::new(1000);
        assert_eq!(plan(&mapped, pack, one).unwrap(), CopyPlan::None);
        let e = plan(&mapped.staged_copy(StagedCopy::Sized), pack, one).unwrap_err();
        assert!(
            e.to_string()
                .contains("the mapped transport copies nothing"),
            "{e}"
        );
    }

    #[test]
    fn the_driver_decides_the_copy_before_the_host_slots_are_mapped() {
        let cuda_12_6 = || -> Result<i32> { Ok(12060) };
        let cuda_12_8 = || -> Result<i32> { Ok(12080) };
        let staged = |copy: Option<StagedCopy>| host_mapped(Transport::Staged, copy);
        // Auto on an older driver: the whole slot, in pinned host memory that is not mapped.
        let auto = CopyPlan::Sized { required: false };
        let copy = auto.resolve(cuda_12_6).unwrap();
        assert_eq!(copy, Some(StagedCopy::Whole));
        assert!(!staged(copy));
        let copy = auto.resolve(cuda_12_8).unwrap();
        assert_eq!(copy, Some(StagedCopy::Sized));
        assert!(staged(copy));
        // An explicit Sized on an older driver says which CUDA it has.
        let sized = CopyPlan::Sized { required: true };
        match sized.resolve(cuda_12_6) {
            Err(Error::SizedCopyUnavailable { reason }) => {
                assert!(
                    reason.contains("CUDA 12.6") && reason.contains("12060"),
                    "{reason}"
                )
            }
            other => panic!("{other:?}"),
        }
        // Without a sized copy planned the driver is not asked.
        let unasked = || -> Result<i32> { panic!("the driver was asked") };
        assert_eq!(
            CopyPlan::Whole.resolve(unasked).unwrap(),
            Some(StagedCopy::Whole)
        );
        assert!(!staged(Some(StagedCopy::Whole)));
        assert_eq!(CopyPlan::None.resolve(unasked).unwrap(), None);
        assert!(host_mapped(Transport::Mapped, None));
    }
}
