//! Checked driver calls the harness makes itself (the approaches it compares with), and the
//! producer kernels. Every CUDA return code goes through [`check`].
use anyhow::{bail, Result};
use sized_readback::cudarc::driver::sys::{self, CUdeviceptr, CUevent, CUresult, CUstream};
use sized_readback::testing::Kernel;
use sized_readback::LaunchShape;
use std::ffi::{c_void, CStr};

/// The driver's name for a result code (`CUDA_ERROR_NOT_PERMITTED`, ...).
pub fn error_name(r: CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: p is a valid out-pointer; the driver returns a static string or fails.
    let ok = unsafe { sys::cuGetErrorName(r, &mut p) } == CUresult::CUDA_SUCCESS;
    if ok && !p.is_null() {
        // SAFETY: a NUL-terminated static string from the driver.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    } else {
        format!("{r:?}")
    }
}

/// Turns a CUDA result into an error naming the call.
pub fn check(r: CUresult, what: &str) -> Result<()> {
    if r != CUresult::CUDA_SUCCESS {
        bail!("{what} failed: {}", error_name(r));
    }
    Ok(())
}

/// `cuStreamSynchronize`.
pub fn stream_sync(s: CUstream) -> Result<()> {
    // SAFETY: s is a live stream of the current context.
    check(
        unsafe { sys::cuStreamSynchronize(s) },
        "cuStreamSynchronize",
    )
}

/// `cuMemcpyDtoHAsync`.
///
/// # Safety
/// `dst` is pinned host memory of `bytes` bytes and `src` device memory of `bytes` bytes,
/// both alive until the copy completes.
pub unsafe fn dtoh(dst: *mut u8, src: CUdeviceptr, bytes: usize, s: CUstream) -> Result<()> {
    // SAFETY: per the contract.
    let status = unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, s) };
    check(status, "cuMemcpyDtoHAsync")
}

/// `cuEventRecord` then nothing else.
pub fn record(e: CUevent, s: CUstream) -> Result<()> {
    // SAFETY: live event and stream of the current context.
    check(unsafe { sys::cuEventRecord(e, s) }, "cuEventRecord")
}

/// `cuEventSynchronize`.
pub fn event_sync(e: CUevent) -> Result<()> {
    // SAFETY: live event.
    check(unsafe { sys::cuEventSynchronize(e) }, "cuEventSynchronize")
}

/// `cuStreamWaitEvent`.
pub fn stream_wait(s: CUstream, e: CUevent) -> Result<()> {
    // SAFETY: live stream and event.
    check(
        unsafe { sys::cuStreamWaitEvent(s, e, 0) },
        "cuStreamWaitEvent",
    )
}

/// `cuLaunchHostFunc`.
///
/// # Safety
/// `f` may run on a driver thread at any time until the stream reaches it; `data` must stay
/// valid until then, and `f` must not call CUDA (unless it is meant to show that it fails).
pub unsafe fn host_func(
    s: CUstream,
    f: unsafe extern "C" fn(*mut c_void),
    data: *mut c_void,
) -> Result<()> {
    // SAFETY: per the contract.
    let status = unsafe { sys::cuLaunchHostFunc(s, Some(f), data) };
    check(status, "cuLaunchHostFunc")
}

/// `cuEventCreate` with timing disabled.
///
/// # Safety
/// A context is current on this thread.
pub unsafe fn event_create() -> Result<CUevent> {
    let mut e: CUevent = std::ptr::null_mut();
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    // SAFETY: e is a valid out-pointer; a context is current per the contract.
    let status = unsafe { sys::cuEventCreate(&mut e, flags) };
    check(status, "cuEventCreate")?;
    Ok(e)
}

/// `cuEventDestroy`.
///
/// # Safety
/// `e` is a live event, destroyed once.
pub unsafe fn event_destroy(e: CUevent) -> Result<()> {
    // SAFETY: per the contract.
    let status = unsafe { sys::cuEventDestroy_v2(e) };
    check(status, "cuEventDestroy")
}

/// `cuEventQuery`: whether the event completed.
///
/// # Safety
/// `e` is a live event.
pub unsafe fn event_query(e: CUevent) -> Result<bool> {
    // SAFETY: per the contract.
    match unsafe { sys::cuEventQuery(e) } {
        CUresult::CUDA_SUCCESS => Ok(true),
        CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        other => check(other, "cuEventQuery").map(|()| false),
    }
}

/// `cuPointerGetAttributes` for the context: `Some` if the driver knows the address.
///
/// # Safety
/// A context is current on this thread.
pub unsafe fn pointer_owner(ptr: CUdeviceptr) -> Result<Option<sys::CUcontext>> {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    let mut attr = [sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT];
    let mut data: [*mut c_void; 1] = [(&mut ctx as *mut sys::CUcontext).cast()];
    // SAFETY: one attribute with an out-pointer of its type; the address is only looked up.
    match unsafe { sys::cuPointerGetAttributes(1, attr.as_mut_ptr(), data.as_mut_ptr(), ptr) } {
        CUresult::CUDA_SUCCESS => Ok(Some(ctx)),
        CUresult::CUDA_ERROR_INVALID_VALUE => Ok(None),
        other => check(other, "cuPointerGetAttributes").map(|()| None),
    }
}

/// An event with timing disabled, destroyed on drop.
#[derive(Debug)]
pub struct Event(pub CUevent);

impl Event {
    /// Creates one in the current context.
    pub fn new() -> Result<Self> {
        // SAFETY: the caller's context is current (the harness binds it once on this thread).
        Ok(Event(unsafe { crate::cuda::event_create()? }))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once; owners synchronize before dropping.
        let _ = unsafe { crate::cuda::event_destroy(self.0) };
    }
}

// SAFETY: an event handle may be used from any thread with the context bound.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

/// Blocks for a grid-stride kernel over `n` elements: at least 1, at most 8 per SM.
pub fn grid_for(n: u64, sms: u32) -> u32 {
    n.div_ceil(256).clamp(1, u64::from(sms) * 8) as u32
}

/// `hx_produce_f64(double* data, int32_t* count, uint64_t n, uint64_t cycle, int trigger)`:
/// data[i] = i + 0.5 * cycle for i < n, then *count = n; with `trigger` the kernel signals
/// programmatic launch completion first, so a pack launched after it may start early.
#[allow(clippy::too_many_arguments)]
pub fn produce(
    k: &Kernel,
    s: CUstream,
    sms: u32,
    data: CUdeviceptr,
    count: CUdeviceptr,
    n: u64,
    cycle: u64,
    trigger: bool,
) -> Result<()> {
    let (mut d, mut c, mut nn, mut cy) = (data, count, n, cycle);
    let mut t = i32::from(trigger);
    let mut args = [
        (&mut d as *mut u64).cast::<c_void>(),
        (&mut c as *mut u64).cast(),
        (&mut nn as *mut u64).cast(),
        (&mut cy as *mut u64).cast(),
        (&mut t as *mut i32).cast(),
    ];
    let shape = LaunchShape {
        grid: grid_for(n, sms),
        block: 256,
        programmatic: false,
    };
    // SAFETY: the argument types match the kernel's signature; data holds >= n doubles and
    // count one i32 (the callers allocate the largest n of the run).
    unsafe { k.launch(s, shape, &mut args)? };
    Ok(())
}

/// `srb_produce_f64(double* data, int32_t* count, uint64_t n, uint64_t cycle)`: the criterion
/// bench's producer (benches/readback.rs), launched as the bench launches it (the grid of
/// [`grid_for`], 256 threads, no attribute). Same stores as `hx_produce_f64`, no trigger.
pub fn produce_bench(
    k: &Kernel,
    s: CUstream,
    sms: u32,
    data: CUdeviceptr,
    count: CUdeviceptr,
    n: u64,
    cycle: u64,
) -> Result<()> {
    let (mut d, mut c, mut nn, mut cy) = (data, count, n, cycle);
    let mut args = [
        (&mut d as *mut u64).cast::<c_void>(),
        (&mut c as *mut u64).cast(),
        (&mut nn as *mut u64).cast(),
        (&mut cy as *mut u64).cast(),
    ];
    let shape = LaunchShape {
        grid: grid_for(n, sms),
        block: 256,
        programmatic: false,
    };
    // SAFETY: the argument types match the kernel's signature; data holds >= n doubles and
    // count one i32 (the callers allocate the largest n of the run).
    unsafe { k.launch(s, shape, &mut args)? };
    Ok(())
}

/// `hx_busy_produce(double* data, int32_t* count, uint64_t n, uint64_t cycle, uint64_t ns)`:
/// one block; thread 0 busy for `ns` before it stores the count.
#[allow(clippy::too_many_arguments)]
pub fn busy_produce(
    k: &Kernel,
    s: CUstream,
    data: CUdeviceptr,
    count: CUdeviceptr,
    n: u64,
    cycle: u64,
    ns: u64,
) -> Result<()> {
    let (mut d, mut c, mut nn, mut cy, mut t) = (data, count, n, cycle, ns);
    let mut args = [
        (&mut d as *mut u64).cast::<c_void>(),
        (&mut c as *mut u64).cast(),
        (&mut nn as *mut u64).cast(),
        (&mut cy as *mut u64).cast(),
        (&mut t as *mut u64).cast(),
    ];
    let shape = LaunchShape {
        grid: 1,
        block: 256,
        programmatic: false,
    };
    // SAFETY: the argument types match the kernel's signature; data holds >= n doubles.
    unsafe { k.launch(s, shape, &mut args)? };
    Ok(())
}

/// The value the producers write at index `i` in cycle `cycle`.
pub fn expected(i: usize, cycle: u64) -> f64 {
    i as f64 + 0.5 * cycle as f64
}

/// Whether a readback holds exactly the cycle's count and values.
pub fn is_correct(count: usize, data: &[f64], want_n: usize, cycle: u64) -> bool {
    count == want_n
        && data.len() >= want_n
        && data[..want_n]
            .iter()
            .enumerate()
            .all(|(i, &v)| v == expected(i, cycle))
}
