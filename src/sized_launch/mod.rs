//! Sized launch: a GPU step sized by a device-resident count, with no host round trip.
//!
//! [`SizedLaunch`] is a CUDA graph `[class setter] -> SWITCH(body 0, ..., body k-1)`. The setter,
//! one thread of `srb_size_switch` (`csrc/switch/size_switch.cu`), reads the count and picks the
//! first size class whose `n_max` holds it; the SWITCH node runs that class's body and no other.
//! Each body is what the caller's closure enqueued, captured once at build time for its
//! class's `n_max`: a kernel with that class's grid, a CUB call or a GEMM of that size. The
//! body's work reads the true count from the device ([`SizeClass::count`]) to bound itself.
//! The exact-grid form ([`SizedLaunchBuilder::exact_grid`]) has one class and no SWITCH: its
//! body is one kernel whose grid `srb_size_grid` sets from the count through a device-updatable
//! node (`flavor.rs`). The design and the probes behind it: `docs/design/sized-launch.md`.
mod flavor;
mod params;
mod plan;

use crate::element::CountKind;
use crate::engine::backoff::{Backoff, Deadline, Pause};
use crate::error::{Error, Result};
use crate::launch::LaunchShape;
use crate::raw::abi;
use crate::raw::buffer::PinnedBuffer;
use crate::raw::driver;
use crate::raw::event::Event;
use crate::raw::stream::Stream;
use crate::raw::switch_graph::{self, GraphGuard};
use crate::source::RawCount;
use cudarc::driver::sys::{self, CUgraph};
use cudarc::driver::{CudaContext, CudaStream};
use flavor::Flavor;
use params::{SizeStatus, SizeSwitchParams, CLASSES_MAX};
use plan::ClassPlan;
use std::fmt::Display;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Status entries of launches enqueued on a stream, reused in turn: a ticket is waited within
/// this many later launches of the same `SizedLaunch`, or its wait reports [`Error::Overrun`].
const RING: u64 = 256;

/// The class setter's launch: one thread works (a warp launched).
const SETTER_SHAPE: LaunchShape = LaunchShape {
    grid: 1,
    block: 32,
    programmatic: false,
};

/// One size class, as the body closure sees it while it records.
#[derive(Debug)]
pub struct SizeClass<'a> {
    index: usize,
    n_max: u64,
    count: RawCount,
    stream: &'a Arc<CudaStream>,
}

impl SizeClass<'_> {
    /// Which class, from 0 (the smallest).
    pub fn index(&self) -> usize {
        self.index
    }
    /// The largest count this body runs for: size its grid or its library call for it.
    pub fn n_max(&self) -> u64 {
        self.n_max
    }
    /// The device-resident count, as the sized launch was built with: the body's kernels read
    /// it to bound their work (it is at most `n_max` whenever this body runs).
    pub fn count(&self) -> RawCount {
        self.count
    }
    /// The stream to enqueue the body's work on. It is capturing into the class's body graph:
    /// kernel launches, library calls and copies are recorded, not run; a synchronizing call
    /// or an allocation fails the capture ([`Error::BodyRecording`]).
    ///
    /// The stream is the library's, made for this build. A clone kept past the build stays a
    /// usable stream, but then the library never destroys it: keep none.
    pub fn stream(&self) -> &Arc<CudaStream> {
        self.stream
    }
}

/// How a sized launch's classes are chosen, before it is built. See [`SizedLaunch::builder`].
#[derive(Debug, Clone)]
pub struct SizedLaunchBuilder {
    count: RawCount,
    capacity: u64,
    plan: ClassPlan,
}

impl SizedLaunchBuilder {
    /// Classes `smallest`, `smallest * growth`, ... up to the capacity (default: 1024 by 4).
    pub fn ladder(mut self, smallest: u64, growth: u64) -> Self {
        self.plan = ClassPlan::Ladder { smallest, growth };
        self
    }
    /// The classes' `n_max` one by one: ascending, non-zero, the last one the capacity, at
    /// most 32.
    pub fn classes(mut self, n_max: impl IntoIterator<Item = u64>) -> Self {
        self.plan = ClassPlan::Given(n_max.into_iter().collect());
        self
    }
    /// The exact-grid form: one class, the capacity, whose body must be one kernel launch;
    /// at each launch the device sets that kernel's grid to ceil(count / `items_per_block`)
    /// blocks (`gridDim.x`), or skips it for a count of 0, with no SWITCH node. For a kernel
    /// whose block handles `items_per_block` items, launched with a 1-D grid; a body of
    /// anything else (a library call, two kernels, a grid with `y` or `z` other than 1) is
    /// [`Error::BodyRecording`] at build.
    /// Needs a driver with device-updatable graph nodes (CUDA 12.4; 12.8 as every sized
    /// launch). A graph it is recorded into cannot be instantiated twice, cloned or updated
    /// with `cuGraphExecUpdate`, and must be uploaded (`cuGraphUpload`) before its first launch.
    pub fn exact_grid(mut self, items_per_block: u64) -> Self {
        self.plan = ClassPlan::ExactGrid { items_per_block };
        self
    }
    /// The classes' `n_max` this builder would build, checked: [`Error::BadPointer`] for a null
    /// or misaligned count; [`Error::InvalidConfig`] for a capacity of 0, no class, classes
    /// not ascending, a last class other than the capacity, or more than 32. Needs no GPU.
    pub fn plan(&self) -> Result<Vec<u64>> {
        self.count.check_address()?;
        plan::bounds(&self.plan, self.capacity)
    }

    /// Builds the sized launch in `ctx`: `record` is called once per class, smallest first,
    /// with the class's stream capturing into its body; what it enqueues there is the body.
    /// A closure that returns an error, or work that cannot be captured, ends the build with
    /// [`Error::BodyRecording`] naming the class.
    ///
    /// Needs a CUDA 12.8 driver ([`Error::SizedLaunchUnavailable`] otherwise). The count's
    /// address must be non-null and aligned to its type, and memory the driver knows
    /// ([`Error::BadPointer`]) of `ctx` ([`Error::ForeignContext`]).
    pub fn build<E: Display>(
        self,
        ctx: &Arc<CudaContext>,
        mut record: impl FnMut(&SizeClass<'_>) -> std::result::Result<(), E>,
    ) -> Result<SizedLaunch> {
        let classes = self.plan()?;
        let count = self.count;
        driver::ensure_driver()?;
        let version = switch_graph::driver_version()?;
        if !crate::engine::sized_copy::driver_supports(version) {
            return Err(Error::SizedLaunchUnavailable {
                reason: format!(
                    "the driver is CUDA {}.{}; a SWITCH node set from a kernel needs 12.8",
                    version / 1000,
                    version % 1000 / 10
                ),
            });
        }
        driver::bind(ctx)?;
        crate::engine::checks::check_pointer_of(ctx, "the count", count.ptr())?;
        let items_per_block = match self.plan {
            ClassPlan::ExactGrid { items_per_block } => {
                Some(plan::setter_items_per_block(items_per_block, self.capacity))
            }
            _ => None,
        };
        // The setter before the bodies: a GPU or driver that cannot load it fails the build
        // before the closure runs.
        let kernel = flavor::setter(ctx, items_per_block.is_some())?;
        // Entries 0..RING for enqueues, entry RING for recordings into a capture.
        let status = PinnedBuffer::new(ctx, (RING as usize + 1) * size_of::<SizeStatus>(), true)?;
        let mut n_max = [0u64; CLASSES_MAX];
        n_max[..classes.len()].copy_from_slice(&classes);
        let mut params = SizeSwitchParams {
            count_ptr: count.ptr(),
            status_ptr: status.device_ptr() + RING * size_of::<SizeStatus>() as u64,
            seq: u64::MAX,
            count_kind: count.kind().abi(),
            classes: classes.len() as u32,
            n_max,
        };
        // A stream of the library's own, lent to the closure (not cudarc's `new_stream`, which
        // can synchronize the context: `raw::stream`).
        let capture = Stream::new(ctx)?.lend();
        let mut bodies = Vec::with_capacity(classes.len());
        for (i, &n_max) in classes.iter().enumerate() {
            let class = SizeClass {
                index: i,
                n_max,
                count,
                stream: capture.cuda(),
            };
            bodies.push(capture_body(&class, &mut record)?);
        }
        // SAFETY: the context is bound; params addresses the status buffer, kept with the
        // flavor in the Launch; the bodies are kept there too; `capture` is of the context.
        let flavor = unsafe {
            Flavor::build(
                ctx,
                kernel,
                &classes,
                items_per_block,
                &mut params,
                &bodies,
                capture.raw(),
            )?
        };
        capture.synchronize()?;
        Ok(SizedLaunch(Arc::new(Launch {
            ctx: ctx.clone(),
            count,
            classes,
            bodies,
            flavor,
            params: Mutex::new(params),
            // From 1: a status entry never written reads seq 0.
            next_seq: AtomicU64::new(1),
            status,
        })))
    }
}

/// Runs the closure with `class`'s stream capturing into a graph of its own: the body, or
/// `None` where it enqueued nothing. A closure's error, or a capture that cannot end (the
/// closure synchronized, allocated, or left work on another stream), is the class's
/// [`Error::BodyRecording`].
fn capture_body<E: Display>(
    class: &SizeClass<'_>,
    record: &mut impl FnMut(&SizeClass<'_>) -> std::result::Result<(), E>,
) -> Result<Option<GraphGuard>> {
    let body_error = |reason: String| Error::BodyRecording {
        class: class.index,
        n_max: class.n_max,
        reason,
    };
    let s = class.stream.cu_stream();
    let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    // SAFETY: a live stream of the bound context, not capturing; the capture ends below on
    // this thread, or in the guard's drop if the closure panics.
    let status = unsafe { sys::cuStreamBeginCapture_v2(s, mode) };
    driver::check(status, "cuStreamBeginCapture")?;
    let mut capturing = Capturing(Some(s));
    let recorded = record(class).map_err(|e| body_error(e.to_string()));
    let (ended, body) = capturing.end();
    recorded?;
    driver::check(ended, "cuStreamEndCapture").map_err(|e| body_error(e.to_string()))?;
    let mut nodes = 0usize;
    // SAFETY: a live graph; a null array asks for the count only.
    let status = unsafe { sys::cuGraphGetNodes(body.0, std::ptr::null_mut(), &mut nodes) };
    driver::check(status, "cuGraphGetNodes")?;
    Ok((nodes > 0).then_some(body))
}

/// A stream capturing a body's graph: ended (and what it captured destroyed) on drop, so that
/// a closure that panics leaves no stream capturing.
struct Capturing(Option<sys::CUstream>);

impl Capturing {
    /// Ends the capture: the driver's status, and what was captured (null on a failure).
    fn end(&mut self) -> (sys::CUresult, GraphGuard) {
        let s = self.0.take().expect("ended once");
        let mut out: CUgraph = std::ptr::null_mut();
        // SAFETY: the capture begun on this thread on s; out is an out-pointer.
        let status = unsafe { sys::cuStreamEndCapture(s, &mut out) };
        (status, GraphGuard(out))
    }
}

impl Drop for Capturing {
    fn drop(&mut self) {
        if self.0.is_some() {
            drop(self.end());
        }
    }
}

/// A GPU step sized by a device-resident count: one body recorded per size class, the body
/// of the count's class run at each launch, chosen on the device.
///
/// ```no_run
/// # fn main() -> sized_readback::Result<()> {
/// use cudarc::driver::{LaunchConfig, PushKernelArg};
/// use sized_readback::{RawCount, SizedLaunch};
/// let ctx = sized_readback::device::open(0)?;
/// let stream = ctx.default_stream();
/// # let d_count: u64 = 0; let expand: cudarc::driver::CudaFunction = unimplemented!();
/// // d_count: an int32 the previous kernel wrote, at most 1 << 22.
/// let step = SizedLaunch::builder(RawCount::i32(d_count), 1 << 22).build(&ctx, |class| {
///     let grid = class.n_max().div_ceil(256) as u32;
///     let mut launch = class.stream().launch_builder(&expand);
///     let count = class.count().ptr();
///     launch.arg(&count);
///     // SAFETY: expand(const int* count) reads at most *count items.
///     unsafe { launch.launch(LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 }) }
///         .map(drop)
/// })?;
/// let ticket = step.enqueue(&stream)?; // no host synchronization: the device picks the grid
/// let done = ticket.wait()?;          // when the host wants to know: the count and the class
/// assert!(done.count() <= 1 << 22);
/// # Ok(()) }
/// ```
///
/// Whatever the bodies read or write (the count, the kernels' buffers, library handles and
/// workspaces) must stay valid for as long as the sized launch is enqueued.
///
/// Building captures each body on a stream of its own, and dropping the last handle
/// synchronizes the context (`cuCtxSynchronize`): recorded launches record no event, so only
/// that says none still writes the status memory it frees. Do either while no other thread
/// synchronizes the context or captures on it: the driver refuses a context synchronization
/// while any of its streams is capturing, and invalidates that capture.
#[derive(Debug)]
pub struct SizedLaunch(Arc<Launch>);

/// What a sized launch and its tickets share.
#[derive(Debug)]
struct Launch {
    ctx: Arc<CudaContext>,
    count: RawCount,
    classes: Vec<u64>,
    /// Each class's body as captured (`None`: the closure enqueued nothing); the graphs hold
    /// clones of them (the exact-grid form: a node made from its parameters).
    bodies: Vec<Option<GraphGuard>>,
    /// The setter and the graph it launches in: a SWITCH, or the exact grid.
    flavor: Flavor,
    /// The setter's parameter; locked across each launch, which sets it on the graph.
    params: Mutex<SizeSwitchParams>,
    next_seq: AtomicU64,
    /// Mapped status entries: RING for enqueues, one for recordings.
    status: PinnedBuffer,
}

impl SizedLaunch {
    /// A builder for a sized launch whose count is `count` and whose largest class is
    /// `capacity` (the largest count any body runs for).
    pub fn builder(count: RawCount, capacity: u64) -> SizedLaunchBuilder {
        SizedLaunchBuilder {
            count,
            capacity,
            plan: ClassPlan::default(),
        }
    }

    /// The classes' `n_max`, ascending; the last one is the capacity.
    pub fn classes(&self) -> &[u64] {
        &self.0.classes
    }
    /// The largest count a body runs for.
    pub fn capacity(&self) -> u64 {
        self.0.capacity()
    }
    /// The device-resident count it reads.
    pub fn count(&self) -> RawCount {
        self.0.count
    }

    /// Launches it on `stream`, after the work already there (the count's producer): the
    /// device reads the count and runs its class's body. Returns at once; the ticket tells,
    /// when waited, which count and class ran, or that none ran (a count past the capacity,
    /// negative, or of an unknown kind: as a readback reports it). A capturing `stream` is
    /// [`Error::StreamCapturing`]: record into a capture with [`SizedLaunch::record`].
    ///
    /// Launches of one sized launch run one at a time (one graph), whatever their streams.
    pub fn enqueue(&self, stream: &CudaStream) -> Result<SizedTicket> {
        // SAFETY: a live stream of the caller's.
        unsafe { self.enqueue_raw(stream.cu_stream()) }
    }

    /// As [`Self::enqueue`], on a raw stream handle (the C API's and Python's way in).
    ///
    /// # Safety
    /// `stream` is a live stream (or the legacy or per-thread default stream's handle).
    pub unsafe fn enqueue_raw(&self, stream: sys::CUstream) -> Result<SizedTicket> {
        Launch::enqueue(&self.0, stream)
    }

    /// Records it into the graph `stream` is capturing, after the work captured there: each
    /// replay of that graph reads the count and runs its class's body, and
    /// [`SizedLaunch::recorded_outcome`] tells the newest replay's outcome once it completed.
    /// An error while recording (the driver refusing a node or a body in this graph) is
    /// returned and invalidates the capture: ending it then fails, so no graph holding part of
    /// a sized launch is instantiated. Errors found before anything is added (a stream that is
    /// not capturing, of another context) leave the capture as it was.
    ///
    /// # Safety
    /// `stream` is a live stream of this context, capturing; this sized launch (its status
    /// memory and class setter) outlives every launch of every graph it is recorded into, as
    /// does what its bodies read and write.
    pub unsafe fn record(&self, stream: sys::CUstream) -> Result<()> {
        driver::bind(&self.0.ctx)?;
        // SAFETY: per the contract.
        if !unsafe { driver::stream_is_capturing(stream)? } {
            return Err(Error::config(
                "record() takes a capturing stream: enqueue() launches on a stream",
            ));
        }
        // SAFETY: per the contract.
        unsafe { self.0.record_into_capture(stream) }
    }

    /// The context it was built in.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.0.ctx
    }

    /// After a replay of a graph this was recorded into has completed (the caller
    /// synchronized it): the count and class of the newest replay, `Ok(None)` before any.
    pub fn recorded_outcome(&self) -> Result<Option<LaunchOutcome>> {
        self.0.recorded_outcome()
    }
}

impl Launch {
    fn capacity(&self) -> u64 {
        *self.classes.last().expect("at least one class")
    }

    /// [`SizedLaunch::enqueue`].
    fn enqueue(this: &Arc<Self>, s: sys::CUstream) -> Result<SizedTicket> {
        driver::bind(&this.ctx)?;
        // SAFETY: a live stream of the caller's.
        let ctx_of = unsafe { driver::stream_context(s)? };
        if ctx_of != this.ctx.cu_ctx() {
            return Err(Error::ForeignContext { what: "the stream" });
        }
        // SAFETY: as above.
        if unsafe { driver::stream_is_capturing(s)? } {
            return Err(Error::StreamCapturing);
        }
        let mut p = this.params.lock().unwrap_or_else(|e| e.into_inner());
        let seq = this.next_seq.fetch_add(1, Ordering::AcqRel);
        p.seq = seq;
        p.status_ptr = this.entry_device(seq % RING);
        let event = Event::new(&this.ctx)?;
        // SAFETY: the context is bound; the parameter is srb_size_switch_params and addresses
        // the status buffer, which lives as long as self; the lock keeps other launches off
        // the graph meanwhile.
        unsafe { this.flavor.launch(s, &mut p)? };
        // SAFETY: a live stream of the event's context.
        unsafe { event.record(s)? };
        Ok(SizedTicket {
            launch: this.clone(),
            seq,
            event,
        })
    }

    fn recorded_outcome(&self) -> Result<Option<LaunchOutcome>> {
        // The caller synchronized the replay: read after it.
        fence(Ordering::Acquire);
        let e = self.entry(RING);
        if e.seq != u64::MAX {
            return Ok(None);
        }
        self.decode(e, RING, u64::MAX).map(Some)
    }

    /// The status entry `i`, as the host reads it once an event after the launch completed
    /// (which made every store of the setter visible). The callers' acquire fence after the
    /// driver's call is a CPU barrier for weakly ordered hosts; the call itself is opaque to
    /// the compiler, so the reads cannot move before it.
    fn entry(&self, i: u64) -> SizeStatus {
        let base = self.status.host_ptr() as usize + i as usize * size_of::<SizeStatus>();
        // SAFETY: inside the status buffer (RING + 1 entries), 8-aligned (pinned memory is
        // page-aligned, entries 32 bytes); a volatile read, as the device may rewrite the
        // entry for a launch RING later (the caller checks for that).
        unsafe { std::ptr::read_volatile(base as *const SizeStatus) }
    }

    fn entry_device(&self, i: u64) -> u64 {
        self.status.device_ptr() + i * size_of::<SizeStatus>() as u64
    }

    /// An entry the kernel wrote, as an outcome or the error a readback would report.
    fn decode(&self, e: SizeStatus, slot: u64, seq: u64) -> Result<LaunchOutcome> {
        let raw = e.raw;
        if self.flavor.sets_grids() && e.reserved != 0 {
            // srb_size_grid's device update was refused: the body ran with an older grid.
            return Err(Error::SizedLaunchUnavailable {
                reason: format!(
                    "the device refused to set the body's grid (CUDA error {})",
                    e.reserved
                ),
            });
        }
        if e.status & abi::SRB_STATUS_BAD_COUNT_KIND != 0 {
            return Err(Error::UnknownCountKind { kind: raw as u32 });
        }
        if e.status & abi::SRB_STATUS_NEGATIVE != 0 {
            let count = match self.count.kind() {
                CountKind::I32 => raw as i32 as i64,
                _ => raw as i64,
            };
            return Err(Error::NegativeCount { count });
        }
        if e.status & abi::SRB_STATUS_OVER_CAPACITY != 0 {
            return Err(Error::CountExceedsCapacity {
                count: raw,
                capacity: usize::try_from(self.capacity()).unwrap_or(usize::MAX),
            });
        }
        if e.status != abi::SRB_STATUS_OK || e.class as usize >= self.classes.len() {
            // Not what the setter writes: a bug or memory corruption.
            return Err(Error::CorruptTrailer {
                slot: slot as usize,
                expected: seq,
                found: e.seq,
                magic: e.status,
            });
        }
        Ok(LaunchOutcome {
            count: raw,
            class: e.class as usize,
        })
    }

    /// Adds the sized launch to `stream`'s capture after its current
    /// dependencies, writing its outcome to the recordings' entry.
    ///
    /// # Safety
    /// `stream` is a live stream of this context, capturing.
    unsafe fn record_into_capture(&self, stream: sys::CUstream) -> Result<()> {
        // Held to the end: two threads recording at once would clone the bodies together.
        let held = self.params.lock().unwrap_or_else(|e| e.into_inner());
        let mut p = *held;
        p.status_ptr = self.entry_device(RING);
        p.seq = u64::MAX;
        // SAFETY: the context is bound; a capturing stream of it per the contract; the
        // parameter as in build, addressing the recordings' entry of the status buffer; the
        // bodies are the captured ones, kept in self.
        unsafe {
            self.flavor
                .record(self.ctx.cu_ctx(), stream, &mut p, &self.bodies)
        }
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        // Launches still in flight write the status buffer: wait for them before it is freed.
        let _ = driver::bind(&self.ctx);
        let _ = self.ctx.synchronize();
    }
}

/// What one launch ran: the count the device read and the class whose body ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchOutcome {
    count: u64,
    class: usize,
}

impl LaunchOutcome {
    /// The count the device read.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// The class whose body ran (an index into [`SizedLaunch::classes`]).
    pub fn class(&self) -> usize {
        self.class
    }
}

/// One enqueued sized launch; waiting tells what ran. Dropping it waits for nothing.
#[derive(Debug)]
pub struct SizedTicket {
    launch: Arc<Launch>,
    seq: u64,
    event: Event,
}

impl SizedTicket {
    /// The launch's sequence number (1, 2, ... per sized launch).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Blocks until the launch has run; its outcome, or the error that kept every body from
    /// running ([`Error::CountExceedsCapacity`] with the true count, [`Error::NegativeCount`]).
    /// [`Error::Overrun`] once 256 later launches of the same sized launch were enqueued:
    /// the outcome's status entry is theirs.
    pub fn wait(&self) -> Result<LaunchOutcome> {
        self.wait_until(None)
    }

    /// As [`Self::wait`], giving up after `timeout` with [`Error::Timeout`] (the ticket
    /// stays valid).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<LaunchOutcome> {
        self.wait_until(Deadline::after(timeout))
    }

    fn wait_until(&self, deadline: Option<Deadline>) -> Result<LaunchOutcome> {
        let (seq, event) = (self.seq, &self.event);
        let l = &*self.launch;
        let slot = seq % RING;
        // Complete means the body too: the event follows the whole graph, while the setter
        // writes its entry before the SWITCH runs the body.
        let completed = || {
            if event.query()? {
                fence(Ordering::Acquire);
                return Ok(Some(l.entry(slot)));
            }
            Ok(None)
        };
        let e = match deadline {
            None => {
                event.synchronize()?;
                fence(Ordering::Acquire);
                l.entry(slot)
            }
            Some(_) => Backoff {
                spins: 0,
                period: Duration::ZERO,
                pause: Pause::Yield,
            }
            .run(deadline, || Ok(None), completed)?,
        };
        // A launch RING later reuses the entry and may have rewritten it while it was read
        // (a matching seq does not rule that out: the setter's stores have no order): once
        // such a launch was enqueued, the entry is no longer this one's. The fence keeps the
        // entry's reads before the counter's (a weakly ordered CPU could reorder them).
        fence(Ordering::Acquire);
        if e.seq != seq || l.next_seq.load(Ordering::Acquire) > seq + RING {
            return Err(Error::Overrun { seq });
        }
        l.decode(e, slot, seq)
    }
}

const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<SizedLaunch>();
    send_sync::<SizedTicket>();
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_builder_checks_its_classes_without_a_gpu() {
        let b = SizedLaunch::builder(RawCount::i32(0x1000), 1 << 20);
        assert_eq!(b.plan().unwrap().len(), 6);
        assert!(matches!(
            b.clone().classes([]).plan(),
            Err(Error::InvalidConfig { .. })
        ));
        assert!(matches!(
            SizedLaunch::builder(RawCount::i32(0x1000), 0).plan(),
            Err(Error::InvalidConfig { .. })
        ));
        assert_eq!(b.ladder(1, 2).plan().unwrap().len(), 21);
    }
}
