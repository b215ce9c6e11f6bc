//! Launches of the test producer kernels (`csrc/testing/producers.cu`), shared by the GPU
//! test subjects that need a producer ahead of a readback, and other work for a build to run
//! beside.
use anyhow::Result;
use cudarc::driver::{sys, CudaContext, CudaStream, DevicePtr};
use sized_readback::testing::Kernels;
use sized_readback::LaunchShape;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Launches kernel `name` of the test module on `stream`: `grid` blocks of `block` threads.
pub fn launch(
    module: &Kernels,
    name: &str,
    stream: &CudaStream,
    grid: u32,
    block: u32,
    args: &mut [*mut c_void],
) -> Result<()> {
    let k = module.function(name)?;
    // SAFETY: callers pass arguments matching the kernel's C signature (csrc/testing/producers.cu).
    unsafe {
        k.launch(
            stream.cu_stream(),
            LaunchShape {
                grid,
                block,
                programmatic: false,
            },
            args,
        )?
    };
    Ok(())
}

/// `srb_busy_then_count(count, n, ns)`: one thread busy for `ns` nanoseconds, then
/// `*count = n` (the kernel's other threads return at once, so one warp is launched).
pub fn busy_then_count(
    module: &Kernels,
    stream: &CudaStream,
    count: u64,
    n: i32,
    ns: u64,
) -> Result<()> {
    let (mut c, mut nn, mut t) = (count, n, ns);
    launch(
        module,
        "srb_busy_then_count",
        stream,
        1,
        32,
        &mut [
            (&mut c as *mut u64).cast(),
            (&mut nn as *mut i32).cast(),
            (&mut t as *mut u64).cast(),
        ],
    )
}

/// What [`build_beside_other_work`] saw.
#[derive(Debug)]
pub struct BesideOtherWork {
    /// How long the measured build took.
    pub took: Duration,
    /// Whether the other work was still running when the build returned: if the build had
    /// waited for it (a context synchronization, or the legacy stream), it would be done.
    pub other_work_still_running: bool,
}

/// How long long-running work on the other stream keeps the device busy: far longer than a
/// warm build takes.
const OTHER_WORK_NS: u64 = 500_000_000;

/// Runs `build` on a context object of its own, which holds no cudarc stream (as a C or
/// Python caller's does), while other work of 0.5 s runs on a blocking stream of `ctx` (a C
/// caller's `cudaStreamCreate` stream). `build` runs once before, so that the kernel images'
/// first load in the process stays outside the measured build, and that result is dropped before
/// the other work starts: a build after the last of its kind went must not wait either (the
/// library keeps its images loaded in a primary context; loading one waits for every kernel).
pub fn build_beside_other_work<T>(
    ctx: &Arc<CudaContext>,
    mut build: impl FnMut(&Arc<CudaContext>) -> Result<T>,
) -> Result<BesideOtherWork> {
    let own = sized_readback::device::open(0)?;
    drop(build(&own)?);
    let kernels = Kernels::load(ctx)?;
    let flag = ctx.default_stream().alloc_zeros::<i32>(1)?;
    ctx.default_stream().synchronize()?;
    ctx.bind_to_thread()?;
    let mut raw: sys::CUstream = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; `ctx` is current. Flags 0: a blocking stream, ordered with
    // the legacy default stream.
    unsafe { sys::cuStreamCreate(&mut raw, 0) }.result()?;
    // SAFETY: `raw` is a live stream of `ctx`, destroyed below after this wrapper's last use.
    let other = unsafe { ctx.wrap_borrowed_stream(raw) };
    let ptr = flag.device_ptr(&other).0;
    let seen = (|| -> Result<BesideOtherWork> {
        busy_then_count(&kernels, &other, ptr, 1, OTHER_WORK_NS)?;
        let t = Instant::now();
        let built = build(&own)?;
        let took = t.elapsed();
        // SAFETY: a live stream.
        let query = unsafe { sys::cuStreamQuery(raw) };
        let other_work_still_running = query == sys::CUresult::CUDA_ERROR_NOT_READY;
        if !other_work_still_running {
            query.result()?;
        }
        drop(built);
        Ok(BesideOtherWork {
            took,
            other_work_still_running,
        })
    })();
    drop(other);
    let bound = ctx.bind_to_thread();
    // SAFETY: a live stream, destroyed once; the synchronize ends its work first.
    let (synced, destroyed) = unsafe {
        (
            sys::cuStreamSynchronize(raw).result(),
            sys::cuStreamDestroy_v2(raw).result(),
        )
    };
    bound?;
    synced?;
    destroyed?;
    seen
}
