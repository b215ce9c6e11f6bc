//! Thin checked calls into the CUDA driver API: each wraps one `sys` call, turns its status
//! into an [`Error`] naming the call, and states its safety conditions. Nothing here keeps
//! state; the owning types live in [`super::buffer`], [`super::event`] and [`super::module`].
use crate::error::{Error, Result};
use cudarc::driver::sys::{self, CUdeviceptr, CUevent, CUstream};
use cudarc::driver::CudaContext;
use std::ffi::c_void;

/// Turns a driver status into `Ok` or an [`Error::Cuda`] naming `call`.
pub(crate) fn check(status: sys::CUresult, call: &'static str) -> Result<()> {
    status.result().map_err(Error::cuda(call))
}

/// Checks that the driver library can be loaded and initialized. cudarc panics on its first
/// call when `libcuda` is missing; everything in this crate that starts CUDA work calls this
/// first, so a missing driver is an [`Error::DriverNotFound`] instead.
pub(crate) fn ensure_driver() -> Result<()> {
    // SAFETY: only tries to dlopen the library; no CUDA state is touched.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::DriverNotFound);
    }
    // SAFETY: cuInit has no preconditions and is idempotent.
    match unsafe { sys::cuInit(0) } {
        sys::CUresult::CUDA_SUCCESS => {
            LOADED.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        }
        // A driver without a GPU.
        sys::CUresult::CUDA_ERROR_NO_DEVICE => Err(Error::NoDevice {
            ordinal: 0,
            available: 0,
        }),
        // The toolkit's stub libcuda: no real driver is installed.
        sys::CUresult::CUDA_ERROR_STUB_LIBRARY => Err(Error::DriverNotFound),
        other => check(other, "cuInit"),
    }
}

/// Set once [`ensure_driver`] found and initialized the driver: from then on cudarc's calls
/// cannot panic for want of it.
static LOADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the driver is loaded and initialized (an atomic load: cheap enough for every call).
pub(crate) fn driver_loaded() -> bool {
    LOADED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The thread's current context (null when none is, or the query fails).
///
/// # Safety
/// The driver is loaded ([`driver_loaded`]).
pub(crate) unsafe fn current_context() -> sys::CUcontext {
    let mut c: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; the driver is loaded, per the contract.
    if unsafe { sys::cuCtxGetCurrent(&mut c) } != sys::CUresult::CUDA_SUCCESS {
        c = std::ptr::null_mut();
    }
    c
}

/// Makes `ctx` (null: none) current on this thread, ignoring a failure (a guard's restore).
///
/// # Safety
/// The driver is loaded, and `ctx` is null or a live context that this thread may bind.
pub(crate) unsafe fn set_current_context(ctx: sys::CUcontext) {
    // SAFETY: per the contract.
    let _ = unsafe { sys::cuCtxSetCurrent(ctx) };
}

/// Number of CUDA devices, or an error if the driver is missing.
pub(crate) fn device_count() -> Result<usize> {
    match ensure_driver() {
        Err(Error::NoDevice { .. }) => return Ok(0),
        other => other?,
    }
    let mut n = 0;
    // SAFETY: n is a valid out-pointer; the driver is initialized.
    let status = unsafe { sys::cuDeviceGetCount(&mut n) };
    check(status, "cuDeviceGetCount")?;
    Ok(n.max(0) as usize)
}

/// Makes `ctx` current on this thread (`cuCtxGetCurrent`, then `cuCtxSetCurrent` only if
/// another context is current). Unlike `CudaContext::bind_to_thread`, it leaves an error that
/// cudarc stashed earlier where it is, so the call that caused it reports it.
pub(crate) fn bind(ctx: &CudaContext) -> Result<()> {
    let mut current: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: current is a valid out-pointer.
    let status = unsafe { sys::cuCtxGetCurrent(&mut current) };
    check(status, "cuCtxGetCurrent")?;
    if current != ctx.cu_ctx() {
        // SAFETY: the context is alive (ctx holds a reference to it).
        let status = unsafe { sys::cuCtxSetCurrent(ctx.cu_ctx()) };
        check(status, "cuCtxSetCurrent")?;
    }
    Ok(())
}

/// `cuMemHostAlloc`: page-locked host memory with `flags` (`CU_MEMHOSTALLOC_*`).
///
/// # Safety
/// A context must be current on this thread. The memory is uninitialized.
pub(crate) unsafe fn host_alloc(bytes: usize, flags: u32) -> Result<*mut u8> {
    let mut p: *mut c_void = std::ptr::null_mut();
    check(
        // SAFETY: p is a valid out-pointer; the caller made a context current.
        unsafe { sys::cuMemHostAlloc(&mut p, bytes, flags) },
        "cuMemHostAlloc",
    )?;
    Ok(p.cast())
}

/// `cuMemFreeHost`.
///
/// # Safety
/// `p` came from [`host_alloc`], is freed once, and no device work still accesses it.
pub(crate) unsafe fn host_free(p: *mut u8) -> Result<()> {
    // SAFETY: per the contract.
    let status = unsafe { sys::cuMemFreeHost(p.cast()) };
    check(status, "cuMemFreeHost")
}

/// `cuMemHostGetDevicePointer`: the device-side address of mapped host memory.
///
/// # Safety
/// `p` points into memory allocated with `CU_MEMHOSTALLOC_DEVICEMAP`; a context is current.
pub(crate) unsafe fn host_device_pointer(p: *mut u8) -> Result<CUdeviceptr> {
    let mut d: CUdeviceptr = 0;
    check(
        // SAFETY: d is a valid out-pointer; p is mapped per the contract.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut d, p.cast(), 0) },
        "cuMemHostGetDevicePointer",
    )?;
    Ok(d)
}

/// `cuMemAlloc`: uninitialized device memory.
///
/// # Safety
/// A context must be current on this thread.
pub(crate) unsafe fn device_alloc(bytes: usize) -> Result<CUdeviceptr> {
    let mut d: CUdeviceptr = 0;
    // SAFETY: d is a valid out-pointer; a context is current.
    let status = unsafe { sys::cuMemAlloc_v2(&mut d, bytes) };
    check(status, "cuMemAlloc")?;
    Ok(d)
}

/// `cuMemFree`.
///
/// # Safety
/// `d` came from [`device_alloc`], is freed once, and no device work still uses it.
pub(crate) unsafe fn device_free(d: CUdeviceptr) -> Result<()> {
    // SAFETY: per the contract.
    let status = unsafe { sys::cuMemFree_v2(d) };
    check(status, "cuMemFree")
}

/// `cuMemcpyDtoHAsync`.
///
/// # Safety
/// `dst` is pinned host memory of at least `bytes` bytes that stays alive and unread until the
/// copy completes; `src` is device memory of at least `bytes` bytes; `stream` is valid.
pub(crate) unsafe fn memcpy_dtoh_async(
    dst: *mut u8,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    check(
        // SAFETY: per the contract.
        unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, stream) },
        "cuMemcpyDtoHAsync",
    )
}

/// `cuMemcpyHtoDAsync` from `src`, which may be pageable.
///
/// # Safety
/// `dst` is device memory of at least `src.len()` bytes that no other work touches meanwhile;
/// `stream` is a live stream of the current context, synchronized before `src` is dropped or
/// written.
pub(crate) unsafe fn memcpy_htod_async(
    dst: CUdeviceptr,
    src: &[u8],
    stream: CUstream,
) -> Result<()> {
    check(
        // SAFETY: per the contract.
        unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr().cast(), src.len(), stream) },
        "cuMemcpyHtoDAsync",
    )
}

/// `cuMemsetD8Async` to zero.
///
/// # Safety
/// `dst` is device memory of at least `bytes` bytes that no other work touches meanwhile;
/// `stream` is valid.
pub(crate) unsafe fn memset_zero_async(
    dst: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    check(
        // SAFETY: per the contract.
        unsafe { sys::cuMemsetD8Async(dst, 0, bytes, stream) },
        "cuMemsetD8Async",
    )
}

/// `cuStreamWaitEvent`: work enqueued on `stream` after this waits for `e`.
///
/// # Safety
/// `stream` and `e` are live.
pub(crate) unsafe fn stream_wait_event(stream: CUstream, e: CUevent) -> Result<()> {
    check(
        // SAFETY: per the contract.
        unsafe { sys::cuStreamWaitEvent(stream, e, 0) },
        "cuStreamWaitEvent",
    )
}

/// `cuStreamIsCapturing`: whether work enqueued on `stream` is being captured into a graph.
///
/// # Safety
/// `stream` is live.
pub(crate) unsafe fn stream_is_capturing(stream: CUstream) -> Result<bool> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    check(
        // SAFETY: per the contract; status is a valid out-pointer.
        unsafe { sys::cuStreamIsCapturing(stream, &mut status) },
        "cuStreamIsCapturing",
    )?;
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// `cuStreamGetId`: the stream's unique id (never reused for another stream in the process,
/// unlike a destroyed stream's handle).
///
/// # Safety
/// `stream` is live.
pub(crate) unsafe fn stream_id(stream: CUstream) -> Result<u64> {
    let mut id: std::ffi::c_ulonglong = 0;
    // SAFETY: per the contract; id is a valid out-pointer.
    let status = unsafe { sys::cuStreamGetId(stream, &mut id) };
    check(status, "cuStreamGetId")?;
    Ok(id)
}

/// `cuCtxGetId`: the context's unique id (never reused in the process, unlike the handle of a
/// destroyed context, or a primary context's handle after a device reset).
pub(crate) fn context_id(ctx: &CudaContext) -> Result<u64> {
    let mut id: std::ffi::c_ulonglong = 0;
    // SAFETY: the context is alive (ctx holds a reference to it); id is a valid out-pointer.
    let status = unsafe { sys::cuCtxGetId(ctx.cu_ctx(), &mut id) };
    check(status, "cuCtxGetId")?;
    Ok(id)
}

/// `cuStreamGetCtx`: the context a stream belongs to.
///
/// # Safety
/// `stream` is live (the legacy and per-thread default streams resolve to the current context).
pub(crate) unsafe fn stream_context(stream: CUstream) -> Result<sys::CUcontext> {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    check(
        // SAFETY: per the contract; ctx is a valid out-pointer.
        unsafe { sys::cuStreamGetCtx(stream, &mut ctx) },
        "cuStreamGetCtx",
    )?;
    Ok(ctx)
}

/// The context and device ordinal that own a device address, via `cuPointerGetAttributes`.
/// `None` when the driver does not know the address (not device memory of any context).
///
/// # Safety
/// None beyond a current context; unknown addresses are reported, not dereferenced.
pub(crate) unsafe fn pointer_owner(ptr: CUdeviceptr) -> Result<Option<(sys::CUcontext, i32)>> {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    let mut ordinal: i32 = -1;
    let mut attrs = [
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    ];
    let mut data: [*mut c_void; 2] = [
        (&mut ctx as *mut sys::CUcontext).cast(),
        (&mut ordinal as *mut i32).cast(),
    ];
    // SAFETY: two attributes with out-pointers of their types; the address is only looked up.
    match unsafe { sys::cuPointerGetAttributes(2, attrs.as_mut_ptr(), data.as_mut_ptr(), ptr) } {
        sys::CUresult::CUDA_SUCCESS if ordinal >= 0 => Ok(Some((ctx, ordinal))),
        sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_INVALID_VALUE => Ok(None),
        other => check(other, "cuPointerGetAttributes").map(|()| None),
    }
}

/// `cuMemcpyHtoD` (synchronous), for the testing module's fixtures: the library's own buffers
/// are written off the legacy stream ([`super::buffer::DeviceBuffer::new_with`]).
///
/// # Safety
/// `dst` is device memory of at least `src.len()` bytes in the current context.
#[cfg(feature = "testing")]
pub(crate) unsafe fn memcpy_htod(dst: CUdeviceptr, src: &[u8]) -> Result<()> {
    check(
        // SAFETY: per the contract.
        unsafe { sys::cuMemcpyHtoD_v2(dst, src.as_ptr().cast(), src.len()) },
        "cuMemcpyHtoD",
    )
}
