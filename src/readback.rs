//! The readback: a ring of slots, the pack kernel that fills them, and the tickets the host
//! waits on.
//!
//! The engine (crate-private) is column-agnostic and works on raw addresses; [`Readback<T>`]
//! is its typed, single-column face, and the multi-column and graph APIs build on the same
//! engine.
use crate::abi;
use crate::driver;
use crate::element::{CountKind, CountType, Element};
use crate::error::{Error, Result};
use crate::kernels::{Kernel, LaunchShape, Module};
use crate::layout::{decode_trailer, SlotLayout, Trailer};
use crate::pinned::{DeviceBuffer, PinnedBuffer};
use crate::ring::{Lease, Ring};
use cudarc::driver::sys::{self, CUdeviceptr, CUevent, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DevicePtr};
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::atomic::{fence, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How the slot reaches the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Transport {
    /// The pack kernel writes count and data straight into pinned, device-mapped host memory:
    /// only the `count` elements and the trailer cross the bus. The default.
    #[default]
    Mapped,
    /// The pack kernel packs into a device-side slot, then one fixed-size device-to-host copy
    /// moves the whole slot (capacity elements plus trailer) into pinned host memory. Costs a
    /// capacity-sized copy; for hosts or setups where mapped memory is unavailable or slow.
    Staged,
}

/// How a ticket waits for its readback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WaitMode {
    /// [`WaitMode::Trailer`] for the mapped transport, [`WaitMode::Event`] for the staged one.
    #[default]
    Auto,
    /// Spin on the trailer's sequence number in mapped memory (lowest latency; one CPU core
    /// busy while waiting). The slot's event is queried now and then, so device errors end
    /// the wait. Mapped transport only.
    Trailer,
    /// `cuEventSynchronize` on the event recorded after the readback (with a timeout: polls
    /// `cuEventQuery`). Whether it spins or sleeps follows the context's scheduling flags.
    Event,
}

/// Settings of a readback. `ReadbackConfig::new(capacity)` gives 2 slots, the mapped
/// transport and automatic choices for the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadbackConfig {
    /// Elements (per column) one slot holds. At least 1.
    pub capacity: usize,
    /// Readbacks that can be in flight or held at once. At least 1.
    pub slots: usize,
    /// See [`Transport`].
    pub transport: Transport,
    /// See [`WaitMode`].
    pub wait: WaitMode,
    /// Launch the pack kernel with programmatic dependent launch, so it starts while the
    /// producer kernel before it in the stream drains. `None`: on when the device has compute
    /// capability 9.0+ and the loaded pack kernel was compiled for compute_90+ (so it waits
    /// for the producer with `griddepcontrol.wait`), unless the environment variable
    /// `SIZED_READBACK_PDL` is `0` (an escape hatch for tools such as compute-sanitizer's
    /// racecheck, which lost track of such launches on the H200). `Some(true)` on a pack
    /// kernel without the wait is an [`Error::InvalidConfig`].
    pub programmatic_launch: Option<bool>,
    /// Most blocks of one pack launch. `None`: 4 per multiprocessor.
    pub max_blocks: Option<u32>,
}

impl ReadbackConfig {
    /// `capacity` elements per slot, 2 slots, mapped transport, automatic wait and launch.
    pub fn new(capacity: usize) -> Self {
        ReadbackConfig {
            capacity,
            slots: 2,
            transport: Transport::Mapped,
            wait: WaitMode::Auto,
            programmatic_launch: None,
            max_blocks: None,
        }
    }
    /// Sets the number of slots.
    pub fn slots(mut self, slots: usize) -> Self {
        self.slots = slots;
        self
    }
    /// Sets the transport.
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }
    /// Sets the wait mode.
    pub fn wait(mut self, wait: WaitMode) -> Self {
        self.wait = wait;
        self
    }
    /// Forces programmatic dependent launch on or off.
    pub fn programmatic_launch(mut self, on: bool) -> Self {
        self.programmatic_launch = Some(on);
        self
    }
    /// Caps the blocks of one pack launch.
    pub fn max_blocks(mut self, blocks: u32) -> Self {
        self.max_blocks = Some(blocks);
        self
    }
}

/// One source column of an enqueue: a device address and the elements readable there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSource {
    /// Device address of element 0.
    pub ptr: CUdeviceptr,
    /// Elements readable from `ptr`.
    pub len: usize,
}

/// The column-agnostic core shared by every readback type.
#[derive(Debug)]
pub(crate) struct Engine {
    ctx: Arc<CudaContext>,
    kernel: Kernel,
    layout: SlotLayout,
    transport: Transport,
    wait: WaitMode,
    host: PinnedBuffer,
    staging: Option<DeviceBuffer>,
    slot_sync: DeviceBuffer,
    events: Vec<CUevent>,
    ring: Mutex<Ring>,
    shape: LaunchShape,
    /// The settings it was made with (for `grow`).
    config: ReadbackConfig,
    /// Per slot: 1 + the id (`cuStreamGetId`) of the stream its last pack was enqueued on,
    /// 0 if none or unknown. Written only by the holder of the slot's lease.
    slot_streams: Vec<std::sync::atomic::AtomicU64>,
    /// Device-sequenced mode (graph replay): the device's sequence counter and the mapped
    /// control words. `None` for host-sequenced readbacks.
    device_seq: Option<DeviceSeq>,
}

/// What a device-sequenced engine adds: a device-resident counter of finished packs (the
/// sequence number of the newest readback) and the mapped [`abi::srb_ring_ctl`].
#[derive(Debug)]
pub(crate) struct DeviceSeq {
    counter: DeviceBuffer,
    ctl: PinnedBuffer,
}

impl DeviceSeq {
    /// Device address of the `u64` counter: the sequence number of the newest finished pack.
    pub(crate) fn counter_ptr(&self) -> CUdeviceptr {
        self.counter.ptr()
    }

    fn ctl_word(&self, offset: usize) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: the control words are two naturally aligned u64 at the start of a live,
        // page-aligned pinned allocation owned by self; the device accesses them only with
        // whole-word volatile loads and stores, so atomics are the right host view.
        unsafe {
            &*self
                .ctl
                .host_ptr()
                .add(offset)
                .cast::<std::sync::atomic::AtomicU64>()
        }
    }

    /// Tells the device that every readback up to `seq` has been released (Release order:
    /// the host's reads of those slots happen before the device may overwrite them).
    pub(crate) fn set_released(&self, seq: u64) {
        self.ctl_word(std::mem::offset_of!(abi::srb_ring_ctl, released_seq))
            .store(seq, Ordering::Release);
    }

    /// The newest sequence number the device dropped for a held slot (0: none).
    pub(crate) fn overrun_seq(&self) -> u64 {
        self.ctl_word(std::mem::offset_of!(abi::srb_ring_ctl, overrun_seq))
            .load(Ordering::Acquire)
    }
}

// SAFETY: CUevent handles and the buffers' addresses may be used from any thread that binds
// the context (every method does). The only mutable host state, the ring, is behind a Mutex.
// A slot's host memory is read only through the ticket that holds the slot, and the device
// writes it only while that ticket's readback is in flight.
unsafe impl Send for Engine {}
// SAFETY: as above.
unsafe impl Sync for Engine {}

fn bind(ctx: &CudaContext) -> Result<()> {
    ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))
}

impl Engine {
    pub(crate) fn new(
        ctx: &Arc<CudaContext>,
        elem_sizes: &[usize],
        cfg: &ReadbackConfig,
    ) -> Result<Arc<Self>> {
        let layout = SlotLayout::new(cfg.capacity, elem_sizes)?;
        let total = layout.total_bytes(cfg.slots)?;
        if cfg.slots > u32::MAX as usize {
            return Err(Error::config("more than 2^32 slots"));
        }
        if cfg.transport == Transport::Staged && cfg.wait == WaitMode::Trailer {
            return Err(Error::config(
                "WaitMode::Trailer needs the mapped transport: a staged slot arrives by DMA in no \
                 guaranteed byte order, so only its event says it is complete",
            ));
        }
        driver::ensure_driver()?;
        bind(ctx)?;
        let module = Module::load(ctx)?;
        let kernel = module.function("srb_pack")?;
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(Error::cuda("cuDeviceGetAttribute"))?;
        let (major, _) = ctx
            .compute_capability()
            .map_err(Error::cuda("cuDeviceGetAttribute"))?;
        let max_blocks = cfg.max_blocks.unwrap_or((sms.max(1) as u32) * 4).max(1);
        let per_block = abi::SRB_BYTES_PER_BLOCK as usize;
        let want = layout
            .row_bytes()
            .saturating_mul(layout.capacity())
            .div_ceil(per_block);
        // Programmatic dependent launch is safe only if the loaded pack kernel waits for the
        // producer (griddepcontrol.wait), which it is compiled with for compute_90 and newer
        // only: a binary built without sm_90 (SIZED_READBACK_CUDA_ARCHS=80) runs on an H200
        // as compute_80 PTX without the wait. CU_FUNC_ATTRIBUTE_PTX_VERSION says which.
        let pack_waits = kernel.ptx_version()? >= 90;
        let programmatic =
            match cfg.programmatic_launch {
                Some(true) if !pack_waits => return Err(Error::config(
                    "programmatic launch needs the pack kernel compiled for compute_90 or newer \
                     (rebuild with 90 in SIZED_READBACK_CUDA_ARCHS)",
                )),
                Some(on) => on,
                None => {
                    major >= 9
                        && pack_waits
                        && std::env::var_os("SIZED_READBACK_PDL").is_none_or(|v| v != "0")
                }
            };
        let shape = LaunchShape {
            grid: want.clamp(1, max_blocks.min(i32::MAX as u32) as usize) as u32,
            block: abi::SRB_PACK_THREADS,
            programmatic,
        };
        let mapped = cfg.transport == Transport::Mapped;
        let host = PinnedBuffer::new(ctx, total, mapped)?;
        let staging = if mapped {
            None
        } else {
            Some(DeviceBuffer::new_zeroed(ctx, total)?)
        };
        let slot_sync =
            DeviceBuffer::new_zeroed(ctx, cfg.slots * std::mem::size_of::<abi::srb_slot_sync>())?;
        let mut events = Vec::with_capacity(cfg.slots);
        for _ in 0..cfg.slots {
            // SAFETY: the context is current.
            match unsafe { driver::event_create() } {
                Ok(e) => events.push(e),
                Err(err) => {
                    for e in events {
                        // SAFETY: created above, never recorded.
                        let _ = unsafe { driver::event_destroy(e) };
                    }
                    return Err(err);
                }
            }
        }
        let wait = match cfg.wait {
            WaitMode::Auto if mapped => WaitMode::Trailer,
            WaitMode::Auto => WaitMode::Event,
            w => w,
        };
        Ok(Arc::new(Engine {
            ctx: ctx.clone(),
            kernel,
            layout,
            transport: cfg.transport,
            wait,
            host,
            staging,
            slot_sync,
            events,
            ring: Mutex::new(Ring::new(cfg.slots)),
            shape,
            config: cfg.clone(),
            slot_streams: (0..cfg.slots).map(|_| Default::default()).collect(),
            device_seq: None,
        }))
    }

    /// A device-sequenced engine, for CUDA graph replay: every pack takes its sequence number
    /// from a device-resident counter and its slot from that number, and writes only if the
    /// host has released the slot's previous readback (else it records an overrun). Needs the
    /// mapped transport; the pack never uses programmatic dependent launch.
    pub(crate) fn new_device_sequenced(
        ctx: &Arc<CudaContext>,
        elem_sizes: &[usize],
        cfg: &ReadbackConfig,
    ) -> Result<Arc<Self>> {
        if cfg.transport != Transport::Mapped {
            return Err(Error::config(
                "graph replay needs the mapped transport: the slot is chosen on the device, so \
                 a staged copy's host-side parameters cannot follow it",
            ));
        }
        if cfg.wait == WaitMode::Event {
            return Err(Error::config(
                "graph replay waits on the trailer: no per-slot event is recorded in a graph",
            ));
        }
        // Kernel boundaries, not griddepcontrol.wait, order one pack's counter store before
        // the next pack's load; a programmatic edge would let them overlap.
        let cfg = cfg.clone().programmatic_launch(false);
        let mut engine = Engine::new(ctx, elem_sizes, &cfg)?;
        let counter = DeviceBuffer::new_zeroed(ctx, std::mem::size_of::<u64>())?;
        let ctl = PinnedBuffer::new(ctx, std::mem::size_of::<abi::srb_ring_ctl>(), true)?;
        Arc::get_mut(&mut engine)
            .expect("a new engine has one owner")
            .device_seq = Some(DeviceSeq { counter, ctl });
        Ok(engine)
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
    pub(crate) fn slots(&self) -> usize {
        self.events.len()
    }
    pub(crate) fn launch_shape(&self) -> LaunchShape {
        self.shape
    }
    pub(crate) fn config(&self) -> &ReadbackConfig {
        &self.config
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // The ring's invariants hold between calls, so a panic elsewhere cannot poison them.
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Errors unless `stream` belongs to this readback's context.
    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if stream.context().cu_ctx() != self.ctx.cu_ctx() {
            return Err(Error::ForeignContext { what: "the stream" });
        }
        Ok(())
    }

    /// Errors unless the raw stream `stream` belongs to this readback's context (the null
    /// stream stands for the current context's legacy stream; the context is bound first).
    pub(crate) fn check_raw_stream(&self, stream: CUstream) -> Result<()> {
        bind(&self.ctx)?;
        // SAFETY: the caller passes a live stream handle (or null).
        let owner = unsafe { driver::stream_context(stream)? };
        if owner != self.ctx.cu_ctx() {
            return Err(Error::ForeignContext { what: "the stream" });
        }
        Ok(())
    }

    /// Reports a device error (a sticky context error such as a faulted kernel) without
    /// waiting: queries an event that is never recorded in device-sequenced mode.
    pub(crate) fn check_device(&self) -> Result<()> {
        bind(&self.ctx)?;
        // SAFETY: live event of this engine.
        unsafe { driver::event_query(self.events[0]) }.map(|_| ())
    }

    /// Makes `stream` wait for `after` (if any), then errors if `stream` is capturing a CUDA
    /// graph. The wait comes first: if `after` was recorded in a stream under capture, it
    /// joins `stream` to that capture, and the check refuses it instead of recording a
    /// ticket's pack into a graph. The safe enqueues call this before cudarc's event tracking
    /// touches the stream, so a stream joined that way gets no tracking events either.
    pub(crate) fn join_after_and_check(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
    ) -> Result<()> {
        bind(&self.ctx)?;
        if let Some(e) = after {
            // SAFETY: callers pass a live stream and event of this context.
            unsafe { driver::stream_wait_event(stream, e)? };
        }
        self.check_not_capturing(stream)
    }

    /// Errors if `stream` is capturing a CUDA graph. A ticket's pack captured into a graph
    /// would replay with its frozen slot and sequence number long after the ticket is gone;
    /// graph capture goes through `GraphReadback`, whose packs are sequenced on the device.
    pub(crate) fn check_not_capturing(&self, stream: CUstream) -> Result<()> {
        bind(&self.ctx)?;
        // SAFETY: callers pass a live stream of this context.
        if unsafe { driver::stream_is_capturing(stream)? } {
            return Err(Error::config(
                "the stream is capturing a CUDA graph: a ticket-based readback cannot be replayed \
                 (record a GraphReadback instead)",
            ));
        }
        Ok(())
    }

    /// Errors unless the raw device address `ptr` is memory of this readback's context.
    pub(crate) fn check_raw_pointer(&self, what: &'static str, ptr: CUdeviceptr) -> Result<()> {
        bind(&self.ctx)?;
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

    /// Enqueues one pack of `columns` (as many as the layout has) sized by the count at
    /// `count_ptr`, after `after` (if any) and the work already in `stream`.
    ///
    /// # Safety
    /// - `stream` (and `after`) are live and belong to this readback's context;
    /// - each column's `ptr` addresses at least `len` elements of that column's size in
    ///   device memory of this context, and `count_ptr` a count of kind `kind`;
    /// - that memory stays allocated, and is not written, until the readback completes
    ///   (the returned lease's event), which the caller orders its later work after.
    pub(crate) unsafe fn enqueue(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        columns: &[ColumnSource],
        count_ptr: CUdeviceptr,
        kind: CountKind,
    ) -> Result<Lease> {
        self.check_enqueue(columns, count_ptr, kind)?;
        self.join_after_and_check(stream, after)?;
        self.acquire_and_launch(stream, columns, count_ptr, kind)
    }

    /// [`Engine::enqueue`] for callers that have just called
    /// [`Engine::join_after_and_check`] on `stream` themselves (the safe enqueues, which must
    /// do it before cudarc's event tracking touches the stream), so the capture check is not
    /// paid twice.
    ///
    /// # Safety
    /// As [`Engine::enqueue`], with `after` already waited for.
    pub(crate) unsafe fn enqueue_joined(
        &self,
        stream: CUstream,
        columns: &[ColumnSource],
        count_ptr: CUdeviceptr,
        kind: CountKind,
    ) -> Result<Lease> {
        self.check_enqueue(columns, count_ptr, kind)?;
        bind(&self.ctx)?;
        self.acquire_and_launch(stream, columns, count_ptr, kind)
    }

    /// Errors unless this is a host-sequenced engine and the sources suit it.
    fn check_enqueue(
        &self,
        columns: &[ColumnSource],
        count_ptr: CUdeviceptr,
        kind: CountKind,
    ) -> Result<()> {
        if self.device_seq.is_some() {
            return Err(Error::config(
                "a device-sequenced (graph) readback is recorded, not enqueued with a lease",
            ));
        }
        self.check_sources(columns, count_ptr, kind)
    }

    /// Takes a slot and launches its pack; gives the slot back if the launch fails.
    ///
    /// # Safety
    /// As [`Engine::enqueue`]; the context is bound and `stream` checked not to capture.
    unsafe fn acquire_and_launch(
        &self,
        stream: CUstream,
        columns: &[ColumnSource],
        count_ptr: CUdeviceptr,
        kind: CountKind,
    ) -> Result<Lease> {
        let lease = self.ring().acquire().ok_or(Error::SlotsExhausted {
            slots: self.slots(),
        })?;
        let result = self.launch_pack(stream, columns, count_ptr, kind, &lease);
        if result.is_err() {
            self.release(&lease);
        }
        result.map(|()| lease)
    }

    /// Errors unless `columns` match the layout and the count address suits `kind`.
    fn check_sources(
        &self,
        columns: &[ColumnSource],
        count_ptr: CUdeviceptr,
        kind: CountKind,
    ) -> Result<()> {
        if columns.len() != self.layout.elem_sizes().len() {
            return Err(Error::config(format!(
                "this readback has {} column(s), the enqueue gave {}",
                self.layout.elem_sizes().len(),
                columns.len()
            )));
        }
        if count_ptr == 0 || !count_ptr.is_multiple_of(kind.size() as u64) {
            return Err(Error::BadPointer {
                what: "the count",
                addr: count_ptr,
                align: kind.size(),
            });
        }
        for c in columns {
            if c.ptr == 0 && c.len != 0 {
                return Err(Error::BadPointer {
                    what: "a data column",
                    addr: 0,
                    align: 1,
                });
            }
        }
        Ok(())
    }

    /// Records one device-sequenced pack on `stream` (usually a stream being captured into a
    /// CUDA graph): its sequence number, slot and permission to write are decided on the
    /// device each time it runs. Records no event and takes no slot on the host.
    ///
    /// # Safety
    /// As [`Engine::enqueue`], for every time the pack runs (every replay of a graph that
    /// holds it): the sources stay allocated and unwritten while it runs, and this engine
    /// outlives every run. The device-sequenced packs of one engine run one after another
    /// (one stream, or ordered by events): two at once would take the same number.
    pub(crate) unsafe fn enqueue_device_seq(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
        columns: &[ColumnSource],
        count_ptr: CUdeviceptr,
        kind: CountKind,
    ) -> Result<()> {
        let Some(ds) = &self.device_seq else {
            return Err(Error::config(
                "not a device-sequenced readback: enqueue it instead of recording it",
            ));
        };
        self.check_sources(columns, count_ptr, kind)?;
        bind(&self.ctx)?;
        if let Some(e) = after {
            driver::stream_wait_event(stream, e)?;
        }
        let mut p = self.pack_params(columns, count_ptr, kind, 0, 0);
        p.seq_counter = ds.counter.ptr();
        p.ring_ctl = ds.ctl.device_ptr();
        let mut args = [(&mut p as *mut abi::srb_pack_params).cast::<c_void>()];
        // SAFETY: one parameter of type srb_pack_params; the counter, control words, slots and
        // sync records belong to this engine, the sources are valid per the contract; no
        // programmatic launch (new_device_sequenced turned it off).
        self.kernel.launch(stream, self.shape, &mut args)
    }

    /// The device-sequenced state, if this engine has it.
    pub(crate) fn device_seq(&self) -> Option<&DeviceSeq> {
        self.device_seq.as_ref()
    }

    fn pack_params(
        &self,
        columns: &[ColumnSource],
        count_ptr: CUdeviceptr,
        kind: CountKind,
        seq: u64,
        slot: usize,
    ) -> abi::srb_pack_params {
        let stride = self.layout.slot_stride();
        let slots_base = match &self.staging {
            Some(dev) => dev.ptr(),
            None => self.host.device_ptr(),
        };
        let mut p = abi::srb_pack_params {
            count_ptr,
            slots: slots_base,
            slot_stride: stride as u64,
            trailer_offset: self.layout.trailer_offset() as u64,
            capacity: self.layout.capacity() as u64,
            seq,
            seq_counter: 0,
            ring_ctl: 0,
            slot_sync: self.slot_sync.ptr(),
            slot: slot as u32,
            num_slots: self.slots() as u32,
            count_kind: kind.abi(),
            num_columns: columns.len() as u32,
            columns: Default::default(),
        };
        for (i, c) in columns.iter().enumerate() {
            p.columns[i] = abi::srb_column {
                src: c.ptr,
                src_len: c.len as u64,
                dst_offset: self.layout.column_offsets()[i] as u64,
                elem_size: self.layout.elem_sizes()[i] as u32,
                reserved: 0,
            };
        }
        p
    }

    /// Launches the pack (and, staged, the slot copy) for `lease` and records the slot's event.
    ///
    /// # Safety
    /// As [`Engine::enqueue`]; `lease` is held by the caller and came from this engine's ring.
    unsafe fn launch_pack(
        &self,
        stream: CUstream,
        columns: &[ColumnSource],
        count_ptr: CUdeviceptr,
        kind: CountKind,
        lease: &Lease,
    ) -> Result<()> {
        let event = self.events[lease.slot];
        // The slot's previous pack (and copy) may still run on another stream: order this one
        // after it. On the same stream, stream order already does, and leaving the wait out
        // keeps nothing between the producer kernel and the pack, so programmatic dependent
        // launch can overlap them. (Measured on the H200: cuStreamWaitEvent 0.26 µs,
        // cuEventQuery 1.35 µs, so no query either.) Streams are told apart by their id, not
        // their handle: a destroyed stream's handle may be reused while its work still runs.
        // The null, legacy and per-thread handles always get the wait.
        let id = if stream as usize > 2 {
            driver::stream_id(stream)?.wrapping_add(1)
        } else {
            0
        };
        let previous = self.slot_streams[lease.slot].load(Ordering::Relaxed);
        if lease.reused && (id == 0 || previous != id) {
            driver::stream_wait_event(stream, event)?;
        }
        let stride = self.layout.slot_stride();
        let mut p = self.pack_params(columns, count_ptr, kind, lease.seq, lease.slot);
        let mut args = [(&mut p as *mut abi::srb_pack_params).cast::<c_void>()];
        // SAFETY: one parameter of type srb_pack_params (bindgen from the kernel's header);
        // the slots, sync records and sources are valid per this function's contract; the
        // kernel starts with griddepcontrol.wait.
        self.kernel.launch(stream, self.shape, &mut args)?;
        let copied = match &self.staging {
            Some(dev) => {
                let off = lease.slot * stride;
                // SAFETY: both ranges lie inside their allocations of `total` bytes; the host
                // range belongs to this lease's slot, which no one reads until the event
                // completes.
                driver::memcpy_dtoh_async(
                    self.host.host_ptr().add(off),
                    dev.ptr() + off as u64,
                    self.layout.slot_bytes(),
                    stream,
                )
            }
            None => Ok(()),
        };
        // Recorded even if the copy failed: the kernel is in flight, and the slot's next user
        // (or the engine's drop) must be able to wait for it through this event.
        let recorded = driver::event_record(event, stream);
        // The lease holds the slot, so no one else touches this entry meanwhile; the ring's
        // mutex orders it before the next holder's read. Unknown (0) when the event does not
        // cover this pack, so the next user waits.
        let known = if recorded.is_ok() { id } else { 0 };
        self.slot_streams[lease.slot].store(known, Ordering::Relaxed);
        copied.and(recorded)
    }

    fn trailer_ptr(&self, slot: usize) -> *const Trailer {
        let off = slot * self.layout.slot_stride() + self.layout.trailer_offset();
        // SAFETY: in bounds of the host buffer (total_bytes covers every slot's trailer).
        unsafe { self.host.host_ptr().add(off).cast::<Trailer>() }
    }

    pub(crate) fn seq_visible(&self, slot: usize, seq: u64) -> bool {
        // SAFETY: the word is 8-byte aligned (16-byte trailer offset in a page-aligned
        // buffer) and in bounds, and lives as long as self. The device stores it with one
        // whole-word store; the host only loads it, so an atomic view is the right one.
        let word = unsafe {
            std::sync::atomic::AtomicU64::from_ptr(
                std::ptr::addr_of!((*self.trailer_ptr(slot)).seq).cast_mut(),
            )
        };
        // Acquire: everything the kernel stored before `seq` (after its system fence) is
        // visible once `seq` is.
        word.load(Ordering::Acquire) == seq
    }

    pub(crate) fn read_trailer(&self, slot: usize) -> Trailer {
        // SAFETY: as in seq_visible; called once the readback is complete.
        unsafe { std::ptr::read_volatile(self.trailer_ptr(slot)) }
    }

    /// Blocks until the lease's readback is complete, or the deadline passes.
    pub(crate) fn wait(&self, lease: &Lease, deadline: Option<Instant>) -> Result<()> {
        bind(&self.ctx)?;
        let start = Instant::now();
        let event = self.events[lease.slot];
        let timed_out = || Error::Timeout {
            waited: start.elapsed(),
        };
        match self.wait {
            WaitMode::Trailer => loop {
                for _ in 0..256 {
                    if self.seq_visible(lease.slot, lease.seq) {
                        return Ok(());
                    }
                    std::hint::spin_loop();
                }
                // SAFETY: live event of this engine.
                if unsafe { driver::event_query(event)? } {
                    // Complete: the trailer must be there now (decode reports it if not).
                    fence(Ordering::Acquire);
                    return Ok(());
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(timed_out());
                }
            },
            _ => match deadline {
                // SAFETY: live event of this engine.
                None => {
                    unsafe { driver::event_synchronize(event) }.map(|()| fence(Ordering::Acquire))
                }
                Some(d) => loop {
                    // SAFETY: live event of this engine.
                    if unsafe { driver::event_query(event)? } {
                        fence(Ordering::Acquire);
                        return Ok(());
                    }
                    if Instant::now() >= d {
                        return Err(timed_out());
                    }
                    std::thread::yield_now();
                },
            },
        }
    }

    /// Whether the lease's readback is complete, without blocking.
    pub(crate) fn is_complete(&self, lease: &Lease) -> Result<bool> {
        bind(&self.ctx)?;
        if self.wait == WaitMode::Trailer && self.seq_visible(lease.slot, lease.seq) {
            return Ok(true);
        }
        // SAFETY: live event of this engine.
        let done = unsafe { driver::event_query(self.events[lease.slot])? };
        if done {
            fence(Ordering::Acquire);
        }
        Ok(done)
    }

    /// The count of a completed readback, or the error its trailer reports.
    pub(crate) fn decode(
        &self,
        lease: &Lease,
        kind: CountKind,
        sources: &[usize],
    ) -> Result<usize> {
        decode_trailer(
            &self.read_trailer(lease.slot),
            lease.seq,
            lease.slot,
            kind,
            self.layout.capacity(),
            sources,
        )
    }

    /// Host address of column `col` of `slot`.
    pub(crate) fn column_host_ptr(&self, slot: usize, col: usize) -> *const u8 {
        let off = slot * self.layout.slot_stride() + self.layout.column_offsets()[col];
        // SAFETY: in bounds of the host buffer.
        unsafe { self.host.host_ptr().add(off) }
    }

    pub(crate) fn release(&self, lease: &Lease) {
        self.ring().release(lease.slot, lease.seq);
    }

    /// Slots currently held by tickets.
    pub(crate) fn held(&self) -> usize {
        self.ring().held()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // No ticket is alive (each holds an Arc to self), but packs whose tickets were dropped
        // unwaited may still write the slots: wait for every slot's last event before the
        // buffers are freed. A device error here (sticky context error) leaves nothing to wait
        // for; the memory is freed all the same.
        let _ = self.ctx.bind_to_thread();
        if self.device_seq.is_some() {
            // Graph replays record no event: wait for all of the context's work instead.
            let _ = self.ctx.synchronize();
        }
        for &e in &self.events {
            // SAFETY: live events of this engine, destroyed once, after their work.
            unsafe {
                let _ = driver::event_synchronize(e);
                let _ = driver::event_destroy(e);
            }
        }
    }
}

/// Reads back a device-resident count and that many elements of `T`, without the host reading
/// the count first. See the crate documentation for an example.
///
/// `Readback` is `Send` and `Sync`: enqueues from several threads each get their own slot
/// (the slot ring is behind a mutex), and tickets can be waited on from any thread.
#[derive(Debug)]
pub struct Readback<T: Element> {
    engine: Arc<Engine>,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> Readback<T> {
    /// A readback of `capacity` elements per slot with default settings
    /// ([`ReadbackConfig::new`]).
    pub fn new(ctx: &Arc<CudaContext>, capacity: usize) -> Result<Self> {
        Self::with_config(ctx, ReadbackConfig::new(capacity))
    }

    /// A readback with explicit settings.
    ///
    /// Errors: [`Error::InvalidConfig`] for zero capacity or slots, sizes that overflow, or
    /// an element type aligned to more than 16 bytes; [`Error::Cuda`] if the driver cannot
    /// allocate the slots or load the kernel.
    pub fn with_config(ctx: &Arc<CudaContext>, config: ReadbackConfig) -> Result<Self> {
        if std::mem::align_of::<T>() > crate::layout::COLUMN_ALIGN {
            return Err(Error::config("element alignment above 16 bytes"));
        }
        Ok(Readback {
            engine: Engine::new(ctx, &[std::mem::size_of::<T>()], &config)?,
            _t: PhantomData,
        })
    }

    /// Elements one slot holds.
    pub fn capacity(&self) -> usize {
        self.engine.layout().capacity()
    }
    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.engine.slots()
    }
    /// Slots currently held by tickets.
    pub fn slots_in_use(&self) -> usize {
        self.engine.held()
    }
    /// The transport.
    pub fn transport(&self) -> Transport {
        self.engine.transport()
    }
    /// The wait mode in effect (never `Auto`).
    pub fn wait_mode(&self) -> WaitMode {
        self.engine.wait_mode()
    }
    /// The slot layout.
    pub fn layout(&self) -> &SlotLayout {
        self.engine.layout()
    }
    /// The pack kernel's launch shape (grid from the capacity, block, programmatic launch).
    pub fn launch_shape(&self) -> LaunchShape {
        self.engine.launch_shape()
    }
    /// The context.
    pub fn context(&self) -> &Arc<CudaContext> {
        self.engine.context()
    }

    /// Replaces the slots with ones of `capacity` elements, keeping the other settings.
    /// Tickets already handed out keep the old slots alive until they are dropped.
    /// Use after [`Error::CountExceedsCapacity`]: the device data is untouched, so
    /// enqueue again.
    pub fn grow(&mut self, capacity: usize) -> Result<()> {
        let config = ReadbackConfig {
            capacity,
            ..self.engine.config().clone()
        };
        *self = Self::with_config(self.context(), config)?;
        Ok(())
    }

    /// Enqueues a readback of `data[..count]` on `stream`, after the work already in it.
    /// Returns at once: no host synchronization, no host read of the count.
    ///
    /// cudarc's event tracking orders the kernel after the last writes to `data` and `count`
    /// made through cudarc, and later cudarc writes after this read.
    ///
    /// Errors: [`Error::SlotsExhausted`] when every slot is held; [`Error::ForeignContext`]
    /// when a buffer or the stream belongs to another context; [`Error::Cuda`] on a driver
    /// error. Errors about the count itself come from the ticket's wait.
    pub fn enqueue<D, C, K>(&self, stream: &CudaStream, data: &D, count: &C) -> Result<Ticket<T>>
    where
        D: DevicePtr<T>,
        C: DevicePtr<K>,
        K: CountType,
    {
        self.enqueue_inner(stream, None, data, count)
    }

    /// Like [`Readback::enqueue`], but the readback also waits for `after` (e.g. the seed's
    /// `compute_done` event recorded on a compute stream), so `stream` can be a copy stream.
    pub fn enqueue_after<D, C, K>(
        &self,
        stream: &CudaStream,
        after: &CudaEvent,
        data: &D,
        count: &C,
    ) -> Result<Ticket<T>>
    where
        D: DevicePtr<T>,
        C: DevicePtr<K>,
        K: CountType,
    {
        if after.context().cu_ctx() != self.engine.context().cu_ctx() {
            return Err(Error::ForeignContext { what: "the event" });
        }
        self.enqueue_inner(stream, Some(after.cu_event()), data, count)
    }

    fn enqueue_inner<D, C, K>(
        &self,
        stream: &CudaStream,
        after: Option<CUevent>,
        data: &D,
        count: &C,
    ) -> Result<Ticket<T>>
    where
        D: DevicePtr<T>,
        C: DevicePtr<K>,
        K: CountType,
    {
        self.engine.check_stream(stream)?;
        // Before cudarc's event tracking puts its waits into a capture.
        self.engine
            .join_after_and_check(stream.cu_stream(), after)?;
        let ctx = self.engine.context().cu_ctx();
        if data.stream().context().cu_ctx() != ctx {
            return Err(Error::ForeignContext { what: "the data" });
        }
        if count.stream().context().cu_ctx() != ctx {
            return Err(Error::ForeignContext { what: "the count" });
        }
        if count.len() == 0 {
            return Err(Error::BadPointer {
                what: "the count (an empty buffer)",
                addr: 0,
                align: K::KIND.size(),
            });
        }
        let len = data.len();
        // The guards make `stream` wait for earlier cudarc writes now, and record this read
        // when they drop, after the launch.
        let (dptr, _data_read) = data.device_ptr(stream);
        let (cptr, _count_read) = count.device_ptr(stream);
        let columns = [ColumnSource { ptr: dptr, len }];
        // SAFETY: the stream and buffers belong to this context (checked above); cudarc keeps
        // them allocated while borrowed, and its event tracking orders later writes after
        // this read; `len` is the view's true length.
        let lease = unsafe {
            self.engine
                .enqueue_joined(stream.cu_stream(), &columns, cptr, K::KIND)?
        };
        Ok(Ticket::new(self.engine.clone(), lease, K::KIND, len))
    }

    /// Enqueues a readback from raw device addresses, for buffers owned by C/C++ code or
    /// written by kernels that cudarc does not track.
    ///
    /// `after` is the event that marks the producer done (recorded by the caller after the
    /// kernels that write `data` and `count`); pass `None` only if those writes were enqueued
    /// on `stream` itself. The addresses are checked to be device memory of this context.
    ///
    /// # Safety
    /// - `data` addresses at least `len` elements of `T`, and `count` one naturally aligned
    ///   count of type `K`, in device memory of this readback's context;
    /// - both stay allocated, and unwritten, until the ticket's readback completes; work that
    ///   writes them next must be ordered after it (e.g. enqueued on `stream`);
    /// - `after`, if given, belongs to this context.
    pub unsafe fn enqueue_raw<K: CountType>(
        &self,
        stream: &CudaStream,
        after: Option<&CudaEvent>,
        data: CUdeviceptr,
        len: usize,
        count: CUdeviceptr,
    ) -> Result<Ticket<T>> {
        self.engine.check_stream(stream)?;
        if let Some(e) = after {
            if e.context().cu_ctx() != self.engine.context().cu_ctx() {
                return Err(Error::ForeignContext { what: "the event" });
            }
        }
        if len > 0 {
            self.engine.check_raw_pointer("the data", data)?;
        }
        if count != 0 {
            self.engine.check_raw_pointer("the count", count)?;
        }
        let columns = [ColumnSource { ptr: data, len }];
        let lease = self.engine.enqueue(
            stream.cu_stream(),
            after.map(|e| e.cu_event()),
            &columns,
            count,
            K::KIND,
        )?;
        Ok(Ticket::new(self.engine.clone(), lease, K::KIND, len))
    }
}

/// One enqueued readback. Wait on it ([`Ticket::wait`]), poll it ([`Ticket::try_wait`]),
/// then read the count and data through the [`Readout`] it returns.
///
/// The ticket holds its slot: the slot is not reused until the ticket is dropped, so a
/// `Readout` (which borrows the ticket) can never see its data overwritten. Dropping a ticket
/// without waiting is fine: the slot's next use waits on the device for this one, and the
/// memory is freed only after it completes.
#[derive(Debug)]
pub struct Ticket<T: Element> {
    engine: Arc<Engine>,
    lease: Lease,
    kind: CountKind,
    source_len: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T: Element> Ticket<T> {
    fn new(engine: Arc<Engine>, lease: Lease, kind: CountKind, source_len: usize) -> Self {
        Ticket {
            engine,
            lease,
            kind,
            source_len,
            _t: PhantomData,
        }
    }

    /// Sequence number of this readback (unique within its readback, from 1).
    pub fn seq(&self) -> u64 {
        self.lease.seq
    }
    /// The slot it occupies.
    pub fn slot(&self) -> usize {
        self.lease.slot
    }

    /// Blocks until the readback is complete, then returns its count and data.
    ///
    /// Errors: the count's errors ([`Error::CountExceedsCapacity`], [`Error::NegativeCount`],
    /// [`Error::CountExceedsSource`]); [`Error::Cuda`] when the device reports an error (e.g.
    /// the producer kernel faulted), never a hang.
    pub fn wait(&self) -> Result<Readout<'_, T>> {
        self.engine.wait(&self.lease, None)?;
        self.readout()
    }

    /// Like [`Ticket::wait`], but gives up with [`Error::Timeout`] after `timeout`. The
    /// ticket stays valid: wait again later.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<Readout<'_, T>> {
        self.engine
            .wait(&self.lease, Instant::now().checked_add(timeout))?;
        self.readout()
    }

    /// Returns the readout if the readback is complete, `None` if it is still in flight.
    pub fn try_wait(&self) -> Result<Option<Readout<'_, T>>> {
        if self.engine.is_complete(&self.lease)? {
            self.readout().map(Some)
        } else {
            Ok(None)
        }
    }

    fn readout(&self) -> Result<Readout<'_, T>> {
        let count = self
            .engine
            .decode(&self.lease, self.kind, &[self.source_len])?;
        let ptr = self.engine.column_host_ptr(self.lease.slot, 0).cast::<T>();
        // SAFETY: the readback is complete (acquire fence taken), the slot holds `count` <=
        // capacity elements of T at a 16-byte-aligned offset, T is valid for any bits
        // (Element), and the slot is not written again while this ticket lives.
        let data = unsafe { std::slice::from_raw_parts(ptr, count) };
        Ok(Readout {
            count,
            seq: self.lease.seq,
            data,
        })
    }
}

impl<T: Element> Drop for Ticket<T> {
    fn drop(&mut self) {
        self.engine.release(&self.lease);
    }
}

/// The host's view of a completed readback: the count and exactly that many elements, in
/// pinned host memory. Borrows its [`Ticket`], so the slot stays reserved while it lives.
#[derive(Debug, Clone, Copy)]
pub struct Readout<'a, T> {
    count: usize,
    seq: u64,
    data: &'a [T],
}

impl<'a, T> Readout<'a, T> {
    /// The count the device held.
    pub fn count(&self) -> usize {
        self.count
    }
    /// The readback's sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// The `count` elements.
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }
}

impl<T> std::ops::Deref for Readout<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

// Compile-time proof of the thread-safety claims in the docs.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<Readback<f64>>();
    send_sync::<Ticket<f64>>();
    send_sync::<Readout<'static, f64>>();
};
