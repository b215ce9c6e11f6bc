//! Device-side append: the user's kernel writes its rows and the count straight into a slot,
//! through the CUDA header `sized_readback/append.cuh`. No count in device memory, no pack
//! kernel, no second launch.
//!
//! The kernel side (one readback per grid; see the header for the exact rules):
//!
//! ```cuda
//! #include <sized_readback/append.cuh>
//! extern "C" __global__ void left_box(srb_append_desc d, const double* x, long long n, double L) {
//!     using Append = srb::BlockAppend<256, double, long long>;
//!     __shared__ Append::TempStorage tmp;
//!     Append app(tmp, d);
//!     for (long long b = (long long)blockIdx.x * 256; b < n; b += (long long)gridDim.x * 256) {
//!         long long i = b + threadIdx.x;
//!         bool out = i < n && (x[i] < 0 || x[i] >= L);
//!         app.append(out, out ? x[i] : 0.0, i);
//!     }
//!     app.finish();
//! }
//! ```
//!
//! The host side: [`AppendReadback::append`] reserves a slot, hands its [`AppendDesc`] to a
//! closure that launches the kernel on the stream, records the slot's completion, and returns
//! an [`AppendTicket`], waited on like any ticket:
//!
//! ```no_run
//! # use sized_readback::{AppendReadback, ColumnSchema, ReadbackConfig};
//! # use cudarc::driver::{LaunchConfig, PushKernelArg};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let ctx = sized_readback::device::open(0)?;
//! # let stream = ctx.new_stream()?;
//! # let f = ctx.load_module(sized_readback::append::compile(&ctx, "", &[])?)?.load_function("left_box")?;
//! # let (x, n, l) = (stream.alloc_zeros::<f64>(1024)?, 1024i64, 1.0f64);
//! let mut schema = ColumnSchema::new();
//! let pos = schema.column::<f64>();
//! let id = schema.column::<i64>();
//! let rb = AppendReadback::new(&ctx, &schema, ReadbackConfig::new(1 << 16))?;
//! let ticket = rb.append(&stream, |desc| {
//!     let mut b = stream.launch_builder(&f);
//!     b.arg(desc).arg(&x).arg(&n).arg(&l);
//!     // SAFETY: left_box(srb_append_desc, const double*, long long, double), 256 threads.
//!     unsafe { b.launch(LaunchConfig { grid_dim: (132, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 }) }
//!         .map(drop)
//! })?;
//! let out = ticket.wait()?;                      // the rows, in no particular order
//! println!("{} left: {:?}", out.count(), &out.column(id)[..out.count().min(4)]);
//! # let _ = pos; Ok(()) }
//! ```
//!
//! # Compiling the kernel
//! With nvcc, add `-I` [`INCLUDE_DIR`] (`DEP_SIZED_READBACK_INCLUDE` in a dependent's build
//! script). With NVRTC at run time, the `nvrtc` feature's `append::compile` takes the same source
//! (`#include <sized_readback/append.cuh>` and all) and returns a module for the device:
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let ctx = sized_readback::device::open(0)?;
//! # let my_kernel_source = "#include <sized_readback/append.cuh>\n";
//! let module = ctx.load_module(sized_readback::append::compile(&ctx, my_kernel_source, &[])?)?;
//! let f = module.load_function("left_box")?;
//! # let _ = f; Ok(()) }
//! ```
//!
//! It compiles **straight to machine code for the device it runs on**
//! (`--gpu-architecture=sm_XY` from [`crate::device::compute_capability`], then
//! `nvrtcGetCUBIN`): the driver loads a cubin and JIT-compiles no PTX, so the PTX ISA version
//! the driver accepts no longer matters (the usual `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` when
//! NVRTC is newer than the driver). Two limits remain: an NVRTC older than the device does not
//! know `sm_XY` (`nvrtcGetSupportedArchs` lists what it knows; compile for the newest
//! `compute_*` below the device then, as PTX), and a cubin of a newer CUDA major version than
//! the driver's does not load. With your own NVRTC calls, prepend [`HEADER`] to the source (or
//! hand it to `nvrtcCreateProgram` as the header `sized_readback/append.cuh`) and do the same.
//!
//! `append::cubin_for` gives the machine code as bytes, for a cache on disk. CI compiles the
//! kernel above with NVRTC 12.0 (sm_70, sm_90) and 12.8 (sm_120) (`cargo xtask user-kernel`), and
//! through `append::cubin_for` with NVRTC 12.0 (sm_70, sm_90) in `append::compile`'s tests; the
//! GPU suite and the `left_box` example run kernels built by `append::compile`. CuPy's `RawKernel` and `RawModule` compile to machine code
//! by themselves where their NVRTC knows the device.
//!
//! # Why a closure
//! The slot must be reserved before the launch (its descriptor is a kernel parameter) and its
//! completion recorded right after it, on the same stream, whatever the launch did. A closure
//! makes that pairing impossible to get wrong; [`AppendReadback::begin`] gives the same two
//! halves separately ([`PendingAppend`]) for code that launches elsewhere, and finishing it is
//! still guaranteed by its `Drop`.
//!
//! # Overflow
//! The kernel keeps counting past the capacity: rows past it go to a device-side spill region
//! (`ReadbackConfig::spill` rows per slot, by default as many as the capacity), and beyond
//! that are dropped but counted. The wait then returns [`Error::AppendOverflow`] with the true
//! count; [`AppendTicket::partial`] still gives the `capacity` rows in the slot, and
//! [`AppendTicket::fetch_spill`] brings the spilled ones back with one pack. Past the spill,
//! grow the readback to the true count and run the kernel again.
use crate::config::{ReadbackConfig, Transport, WaitMode};
use crate::engine::host::HostEngine;
use crate::engine::ring::Lease;
use crate::engine::ticket::TicketCore;
use crate::engine::trailer::Fill;
use crate::error::{Error, Result};
use crate::info::ReadbackInfo;
use crate::layout::SlotLayout;
use crate::raw::abi;
use crate::schema::ColumnSchema;
use crate::ticket::{ColumnReadout, ColumnTicket};
use cudarc::driver::sys::{CUevent, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, DeviceRepr, DriverError};
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

#[cfg(feature = "nvrtc")]
mod compile;
#[cfg(feature = "nvrtc")]
pub use compile::{compile, compile_for, cubin_for, CompileError};

/// The append header and the slot header it includes, as one source for NVRTC: prepend it to
/// a kernel's source (or pass it as the header `sized_readback/append.cuh`).
pub const HEADER: &str = concat!(
    include_str!("../include/sized_readback/slot.h"),
    "\n",
    include_str!("../include/sized_readback/append.cuh")
);

/// The directory that holds `sized_readback/append.cuh` and `sized_readback/slot.h`, for
/// `nvcc -I`. Dependents' build scripts get it as `DEP_SIZED_READBACK_INCLUDE`.
pub const INCLUDE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/include");

/// The descriptor of one append readback slot: a kernel's `srb_append_desc` parameter, passed
/// by value (it is `DeviceRepr`, so `launch_builder(..).arg(&desc)` works). Made only by the
/// readback; valid for the one grid it is handed to.
#[derive(Debug, Clone, Copy)]
#[repr(transparent)]
pub struct AppendDesc(pub(crate) abi::srb_append_desc);

// SAFETY: repr(transparent) over srb_append_desc, a repr(C) struct of integers that the
// kernel's header declares with the same layout (bindgen's layout tests check it).
unsafe impl DeviceRepr for AppendDesc {}

impl AppendDesc {
    pub(crate) fn new(d: abi::srb_append_desc) -> Self {
        AppendDesc(d)
    }
    /// The readback's sequence number this descriptor appends as (0: decided on the device,
    /// for graph replay).
    pub fn seq(&self) -> u64 {
        self.0.seq
    }
    /// Its bytes, as the kernel parameter (for C launches through `cuLaunchKernel`).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: a plain repr(C) struct of integers without padding bytes read as u8.
        unsafe {
            std::slice::from_raw_parts(
                (self as *const Self).cast::<u8>(),
                std::mem::size_of::<Self>(),
            )
        }
    }
}

/// A readback whose slots are filled by the user's kernels through the append header. `Send`
/// and `Sync`; each append takes its own slot, as enqueues do.
#[derive(Debug)]
pub struct AppendReadback {
    engine: RwLock<Arc<HostEngine>>,
    schema: Arc<ColumnSchema>,
}

impl AppendReadback {
    /// An append readback of the columns of `schema`, `config.capacity` rows per slot and
    /// `config.spill` rows of spill per slot (default: the capacity).
    ///
    /// Errors as [`crate::ColumnReadback::new`] (more than one bucket and a spill are
    /// allowed; [`Error::InvalidConfig`] for a spill region too large);
    /// [`Error::SizedCopyUnavailable`] for [`crate::StagedCopy::Sized`], which appends do not
    /// have (`Auto` takes the whole-slot copy).
    pub fn new(
        ctx: &Arc<CudaContext>,
        schema: &ColumnSchema,
        config: ReadbackConfig,
    ) -> Result<Self> {
        schema.validate()?;
        let plan = HostEngine::plan_appends(&schema.elem_sizes(), &config)?;
        Ok(AppendReadback {
            engine: RwLock::new(HostEngine::appends(ctx, plan)?),
            schema: Arc::new(schema.clone()),
        })
    }

    /// The checks [`AppendReadback::new`] makes before it touches the driver (the spill
    /// region's size among them), as [`crate::ColumnReadback::check`].
    pub fn check(schema: &ColumnSchema, config: &ReadbackConfig) -> Result<()> {
        schema.validate()?;
        HostEngine::plan_appends(&schema.elem_sizes(), config).map(drop)
    }

    fn engine(&self) -> Arc<HostEngine> {
        self.engine
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The columns.
    pub fn schema(&self) -> &ColumnSchema {
        &self.schema
    }
    /// The readback's settings in effect and its slot layout, in one value: the one place to
    /// read them.
    pub fn info(&self) -> ReadbackInfo {
        self.engine().info()
    }
    /// Rows one slot holds.
    #[deprecated(since = "0.2.0", note = "use `info().capacity`")]
    pub fn capacity(&self) -> usize {
        self.engine().slots().layout().capacity()
    }
    /// Rows of spill per slot.
    #[deprecated(since = "0.2.0", note = "use `info().spill_capacity`")]
    pub fn spill_capacity(&self) -> usize {
        self.engine().spill_rows()
    }
    /// Number of slots.
    #[deprecated(since = "0.2.0", note = "use `info().slots`")]
    pub fn slots(&self) -> usize {
        self.engine().slots().num_slots()
    }
    /// Slots currently held by tickets: live state, not a setting, so not in
    /// [`AppendReadback::info`].
    pub fn slots_in_use(&self) -> usize {
        self.engine().held()
    }
    /// The transport.
    #[deprecated(since = "0.2.0", note = "use `info().transport`")]
    pub fn transport(&self) -> Transport {
        self.engine().transport()
    }
    /// The wait mode in effect (never `Auto`).
    #[deprecated(since = "0.2.0", note = "use `info().wait_mode`")]
    pub fn wait_mode(&self) -> WaitMode {
        self.engine().slots().wait_mode()
    }
    /// The slot layout.
    #[deprecated(since = "0.2.0", note = "use `info().layout`")]
    pub fn layout(&self) -> SlotLayout {
        self.engine().slots().layout().clone()
    }
    /// The context.
    #[deprecated(since = "0.2.0", note = "use `info().context`")]
    pub fn context(&self) -> Arc<CudaContext> {
        self.engine().context().clone()
    }

    /// Replaces the slots with ones of `capacity` rows (and, unless `spill` was set, as many
    /// rows of spill). Tickets already handed out keep the old slots until they drop.
    ///
    /// Errors as [`AppendReadback::new`]; after one the readback keeps its old slots.
    pub fn grow(&self, capacity: usize) -> Result<()> {
        let old = self.engine();
        let mut config = old.slots().config().clone();
        config.capacity = capacity;
        let plan = HostEngine::plan_appends(&self.schema.elem_sizes(), &config)?;
        let new = HostEngine::appends(old.context(), plan)?;
        *self.engine.write().unwrap_or_else(|p| p.into_inner()) = new;
        Ok(())
    }

    /// Reserves a slot, calls `launch` with its descriptor (which must launch exactly one
    /// grid that appends through it, on `stream`), then records the slot's completion on
    /// `stream` and returns the ticket. Returns at once: nothing waits for the kernel.
    ///
    /// Errors: [`Error::SlotsExhausted`], [`Error::StreamCapturing`] (capture a
    /// [`crate::GraphReadback::append_desc`] instead), [`Error::ForeignContext`],
    /// [`Error::Cuda`] (the launch's error is reported as the call "the append kernel's
    /// launch"). After a failed launch the slot is given back.
    pub fn append<F>(&self, stream: &CudaStream, launch: F) -> Result<AppendTicket>
    where
        F: FnOnce(&AppendDesc) -> std::result::Result<(), DriverError>,
    {
        let pending = self.begin(stream, None)?;
        let launched = launch(pending.desc()).map_err(Error::cuda("the append kernel's launch"));
        pending.finish(launched)
    }

    /// Like [`AppendReadback::append`], after `after` (an event recorded after the work the
    /// kernel depends on, on another stream). Errors as [`AppendReadback::append`]
    /// ([`Error::ForeignContext`] for an event of another context too).
    pub fn append_after<F>(
        &self,
        stream: &CudaStream,
        after: &CudaEvent,
        launch: F,
    ) -> Result<AppendTicket>
    where
        F: FnOnce(&AppendDesc) -> std::result::Result<(), DriverError>,
    {
        let pending = self.begin(stream, Some(after))?;
        let launched = launch(pending.desc()).map_err(Error::cuda("the append kernel's launch"));
        pending.finish(launched)
    }

    /// The first half of [`AppendReadback::append`]: reserves a slot on `stream` (after
    /// `after`) and returns its descriptor. Launch the kernel on `stream`, then call
    /// [`PendingAppend::launched`]; dropping it instead records the slot as failed.
    ///
    /// Errors: [`Error::ForeignContext`] for a stream or event of another context;
    /// [`Error::StreamCapturing`]; [`Error::SlotsExhausted`]; [`Error::Cuda`].
    pub fn begin<'s>(
        &self,
        stream: &'s CudaStream,
        after: Option<&CudaEvent>,
    ) -> Result<PendingAppend<'s>> {
        let engine = self.engine();
        engine.slots().check_stream(stream)?;
        let after = after.map(|e| engine.slots().check_event(e)).transpose()?;
        // SAFETY: the stream and event are of this context (checked); the pending append
        // borrows the stream.
        unsafe { self.begin_raw(engine, stream.cu_stream(), after) }
    }

    /// [`AppendReadback::begin`] with raw driver handles (a `CUstream` and a `CUevent` made
    /// by other code, e.g. a Python framework's stream; null `stream` is the legacy default
    /// stream), after checking that `stream` belongs to this readback's context. The C API's
    /// path (`srb_append_begin`), for bindings that hold driver handles rather than cudarc
    /// streams.
    ///
    /// # Safety
    /// `stream` and `after` are live handles, `after` of this readback's context; `stream`
    /// outlives the returned value (and its kernel's launch).
    pub unsafe fn begin_raw_stream<'s>(
        &self,
        stream: CUstream,
        after: Option<CUevent>,
    ) -> Result<PendingAppend<'s>> {
        let engine = self.engine();
        // SAFETY: per the contract.
        unsafe {
            engine.slots().check_raw_stream(stream)?;
            self.begin_raw(engine, stream, after)
        }
    }

    /// # Safety
    /// `stream` and `after` are live handles of this context; `stream` outlives `'s`.
    unsafe fn begin_raw<'s>(
        &self,
        engine: Arc<HostEngine>,
        stream: CUstream,
        after: Option<CUevent>,
    ) -> Result<PendingAppend<'s>> {
        // SAFETY: per the contract.
        let (lease, desc, id) = unsafe { engine.append_begin(stream, after)? };
        Ok(PendingAppend {
            engine,
            schema: self.schema.clone(),
            stream,
            _stream: PhantomData,
            lease: Some(lease),
            desc: AppendDesc(desc),
            id,
        })
    }
}

/// A reserved append slot whose kernel is being launched: [`AppendReadback::begin`] made it,
/// [`PendingAppend::launched`] turns it into the ticket. Borrows the stream it was reserved on.
#[derive(Debug)]
pub struct PendingAppend<'s> {
    engine: Arc<HostEngine>,
    schema: Arc<ColumnSchema>,
    stream: CUstream,
    _stream: PhantomData<&'s CudaStream>,
    lease: Option<Lease>,
    desc: AppendDesc,
    id: u64,
}

// SAFETY: the stream handle may be used from any thread that binds the context (append_end
// does); the rest is Send.
unsafe impl Send for PendingAppend<'_> {}

impl PendingAppend<'_> {
    /// The descriptor to pass to the kernel.
    pub fn desc(&self) -> &AppendDesc {
        &self.desc
    }

    /// The sequence number of the readback this append fills.
    pub fn seq(&self) -> u64 {
        self.desc.0.seq
    }

    /// The kernel is launched on the stream: records the slot's completion and returns the
    /// ticket.
    ///
    /// Errors: [`Error::Cuda`] when the staged copy or the slot's completion event cannot be
    /// enqueued (the slot is given back).
    pub fn launched(self) -> Result<AppendTicket> {
        self.finish(Ok(()))
    }

    fn finish(mut self, launched: Result<()>) -> Result<AppendTicket> {
        let lease = self.lease.take().expect("finished once");
        // SAFETY: the stream is the one begin() reserved on (alive: borrowed for 's); the
        // lease came from it.
        unsafe {
            self.engine
                .append_end(self.stream, &lease, self.id, launched)?
        };
        let fill = Fill::Append {
            spill_rows: self.engine.spill_rows(),
        };
        let core = TicketCore::new(self.engine.clone(), lease, fill);
        Ok(AppendTicket {
            ticket: ColumnTicket::from_core(core, self.schema.clone()),
        })
    }
}

impl Drop for PendingAppend<'_> {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take() {
            // SAFETY: as in finish; a failure marks the scratch for reset and frees the slot.
            let _ = unsafe {
                self.engine.append_end(
                    self.stream,
                    &lease,
                    self.id,
                    Err(Error::config("the append was dropped before its launch")),
                )
            };
        }
    }
}

/// One append's ticket: a [`ColumnTicket`] (it derefs to one, for `seq`, `slot`, `wait`,
/// `wait_timeout` and `try_wait`) with the calls only an append has, [`AppendTicket::partial`]
/// and [`AppendTicket::fetch_spill`]. Holds its slot until dropped.
///
/// Its wait returns the kernel's rows (in no particular order), or: [`Error::AppendOverflow`]
/// when it appended more rows than the capacity (see [`AppendTicket::partial`] and
/// [`AppendTicket::fetch_spill`]); [`Error::AppendUnfinished`] when its stream finished without
/// the trailer; [`Error::AppendMisuse`]; [`Error::Cuda`] when the device reports an error.
/// Never a hang.
#[derive(Debug)]
pub struct AppendTicket {
    ticket: ColumnTicket,
}

impl std::ops::Deref for AppendTicket {
    type Target = ColumnTicket;
    fn deref(&self) -> &ColumnTicket {
        &self.ticket
    }
}

impl From<AppendTicket> for ColumnTicket {
    fn from(t: AppendTicket) -> ColumnTicket {
        t.ticket
    }
}

impl AppendTicket {
    /// The rows in the slot: all of them, or, after an [`Error::AppendOverflow`], the first
    /// `capacity` (in no particular order, like all rows); a bucketed append's after an
    /// [`Error::BadBucket`] too. Waits first; other errors as [`ColumnTicket::wait`].
    pub fn partial(&self) -> Result<ColumnReadout<'_>> {
        let v = self.ticket.core.partial()?;
        Ok(ColumnReadout::new(v, &self.ticket.schema))
    }

    /// After an [`Error::AppendOverflow`]: enqueues, on `stream`, the pack that brings back
    /// the rows that went to the device-side spill region, and returns its ticket (its count
    /// is the number of spilled rows). `None` when nothing spilled. The slot's next append
    /// waits for it on the device.
    ///
    /// Waits for the append first. Errors: [`Error::ForeignContext`] for a stream of another
    /// context; the append's errors other than [`Error::AppendOverflow`] (as
    /// [`ColumnTicket::wait`]); the fetch's enqueue errors ([`Error::StreamCapturing`],
    /// [`Error::Cuda`]).
    pub fn fetch_spill(&self, stream: &CudaStream) -> Result<Option<ColumnTicket>> {
        Ok(self
            .ticket
            .core
            .fetch_spill(stream)?
            .map(|core| ColumnTicket::from_core(core, self.ticket.schema.clone())))
    }

    /// [`AppendTicket::fetch_spill`] on a raw driver stream (a `CUstream` made by other code;
    /// null is the legacy default stream), checked to belong to the readback's context: the
    /// path of the C API's `srb_fetch_spill`.
    ///
    /// # Safety
    /// `stream` is a live stream handle or null.
    pub unsafe fn fetch_spill_raw_stream(&self, stream: CUstream) -> Result<Option<ColumnTicket>> {
        let core = &self.ticket.core;
        // SAFETY: per the contract; then the stream is of this context.
        let fetched = unsafe {
            core.check_raw_stream(stream)?;
            core.fetch_spill_raw(stream)?
        };
        Ok(fetched.map(|core| ColumnTicket::from_core(core, self.ticket.schema.clone())))
    }
}

// Compile-time proof of the thread-safety claims in the docs.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<AppendReadback>();
    send_sync::<AppendTicket>();
    send_sync::<AppendDesc>();
};
