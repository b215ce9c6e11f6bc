//! Thin checked calls into the CUDA driver API: each wraps one `sys` call, turns its status
//! into an [`Error`] naming the call, and states its safety conditions. Nothing here keeps
//! state; the owning types live in [`crate::pinned`], [`crate::kernels`] and
//! [`crate::readback`].
use crate::error::{Error, Result};
use cudarc::driver::sys::{self, CUdeviceptr, CUevent, CUstream};
use std::ffi::c_void;

/// Checks that the driver library can be loaded and initialized. cudarc panics on its first
/// call when `libcuda` is missing; everything public in this crate that starts CUDA work calls
/// this first, so a missing driver is an [`Error::DriverNotFound`] instead.
pub fn ensure_driver() -> Result<()> {
    // SAFETY: only tries to dlopen the library; no CUDA state is touched.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::DriverNotFound);
    }
    // SAFETY: cuInit has no preconditions and is idempotent.
    match unsafe { sys::cuInit(0) } {
        sys::CUresult::CUDA_SUCCESS => Ok(()),
        // A driver without a GPU.
        sys::CUresult::CUDA_ERROR_NO_DEVICE => Err(Error::NoDevice {
            ordinal: 0,
            available: 0,
        }),
        // The toolkit's stub libcuda: no real driver is installed.
        sys::CUresult::CUDA_ERROR_STUB_LIBRARY => Err(Error::DriverNotFound),
        other => Err(Error::cuda("cuInit")(other.result().unwrap_err())),
    }
}

/// Number of CUDA devices, or an error if the driver is missing.
pub fn device_count() -> Result<usize> {
    match ensure_driver() {
        Err(Error::NoDevice { .. }) => return Ok(0),
        other => other?,
    }
    let mut n = 0;
    // SAFETY: n is a valid out-pointer.
    unsafe { sys::cuDeviceGetCount(&mut n) }
        .result()
        .map_err(Error::cuda("cuDeviceGetCount"))?;
    Ok(n.max(0) as usize)
}

/// `cuMemHostAlloc`: page-locked host memory with `flags` (`CU_MEMHOSTALLOC_*`).
///
/// # Safety
/// A context must be current on this thread. The memory is uninitialized.
pub unsafe fn host_alloc(bytes: usize, flags: u32) -> Result<*mut u8> {
    let mut p: *mut c_void = std::ptr::null_mut();
    sys::cuMemHostAlloc(&mut p, bytes, flags)
        .result()
        .map_err(Error::cuda("cuMemHostAlloc"))?;
    Ok(p.cast())
}

/// `cuMemFreeHost`.
///
/// # Safety
/// `p` came from [`host_alloc`], is freed once, and no device work still accesses it.
pub unsafe fn host_free(p: *mut u8) -> Result<()> {
    sys::cuMemFreeHost(p.cast())
        .result()
        .map_err(Error::cuda("cuMemFreeHost"))
}

/// `cuMemHostGetDevicePointer`: the device-side address of mapped host memory.
///
/// # Safety
/// `p` points into memory allocated with `CU_MEMHOSTALLOC_DEVICEMAP`; a context is current.
pub unsafe fn host_device_pointer(p: *mut u8) -> Result<CUdeviceptr> {
    let mut d: CUdeviceptr = 0;
    sys::cuMemHostGetDevicePointer_v2(&mut d, p.cast(), 0)
        .result()
        .map_err(Error::cuda("cuMemHostGetDevicePointer"))?;
    Ok(d)
}

/// `cuMemAlloc`, then `cuMemsetD8` to zero (so no byte is ever read uninitialized), waited
/// for before returning.
///
/// # Safety
/// A context must be current on this thread.
pub unsafe fn device_alloc_zeroed(bytes: usize) -> Result<CUdeviceptr> {
    let mut d: CUdeviceptr = 0;
    sys::cuMemAlloc_v2(&mut d, bytes)
        .result()
        .map_err(Error::cuda("cuMemAlloc"))?;
    // cuMemsetD8 on device memory is asynchronous with respect to the host and runs in the
    // legacy default stream, which does not order work in non-blocking streams (cudarc's
    // streams are all non-blocking): without the wait, a pack launched at once could run
    // before the zeroing and have its slot or its block counter overwritten (seen under
    // compute-sanitizer synccheck as a trailer of zeros). Waiting here costs only creation.
    let zeroed = sys::cuMemsetD8_v2(d, 0, bytes)
        .result()
        .map_err(Error::cuda("cuMemsetD8"))
        .and_then(|()| {
            sys::cuStreamSynchronize(std::ptr::null_mut())
                .result()
                .map_err(Error::cuda("cuStreamSynchronize"))
        });
    if let Err(e) = zeroed {
        let _ = sys::cuMemFree_v2(d);
        return Err(e);
    }
    Ok(d)
}

/// `cuMemFree`.
///
/// # Safety
/// `d` came from [`device_alloc_zeroed`], is freed once, and no device work still uses it.
pub unsafe fn device_free(d: CUdeviceptr) -> Result<()> {
    sys::cuMemFree_v2(d)
        .result()
        .map_err(Error::cuda("cuMemFree"))
}

/// `cuMemcpyDtoHAsync`.
///
/// # Safety
/// `dst` is pinned host memory of at least `bytes` bytes that stays alive and unread until the
/// copy completes; `src` is device memory of at least `bytes` bytes; `stream` is valid.
pub unsafe fn memcpy_dtoh_async(
    dst: *mut u8,
    src: CUdeviceptr,
    bytes: usize,
    stream: CUstream,
) -> Result<()> {
    sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, bytes, stream)
        .result()
        .map_err(Error::cuda("cuMemcpyDtoHAsync"))
}

/// `cuEventCreate` with timing disabled (cheaper to record and to wait on).
///
/// # Safety
/// A context must be current on this thread.
pub unsafe fn event_create() -> Result<CUevent> {
    cudarc::driver::result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
        .map_err(Error::cuda("cuEventCreate"))
}

/// `cuEventDestroy`.
///
/// # Safety
/// `e` is a live event, destroyed once.
pub unsafe fn event_destroy(e: CUevent) -> Result<()> {
    cudarc::driver::result::event::destroy(e).map_err(Error::cuda("cuEventDestroy"))
}

/// `cuEventRecord`.
///
/// # Safety
/// `e` and `stream` are live and belong to the same context.
pub unsafe fn event_record(e: CUevent, stream: CUstream) -> Result<()> {
    sys::cuEventRecord(e, stream)
        .result()
        .map_err(Error::cuda("cuEventRecord"))
}

/// `cuEventQuery`: `Ok(true)` when complete, `Ok(false)` while pending, `Err` on a device error.
///
/// # Safety
/// `e` is a live event.
pub unsafe fn event_query(e: CUevent) -> Result<bool> {
    match sys::cuEventQuery(e) {
        sys::CUresult::CUDA_SUCCESS => Ok(true),
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        other => Err(Error::cuda("cuEventQuery")(other.result().unwrap_err())),
    }
}

/// `cuEventSynchronize`.
///
/// # Safety
/// `e` is a live event.
pub unsafe fn event_synchronize(e: CUevent) -> Result<()> {
    sys::cuEventSynchronize(e)
        .result()
        .map_err(Error::cuda("cuEventSynchronize"))
}

/// `cuStreamWaitEvent`: work enqueued on `stream` after this waits for `e`.
///
/// # Safety
/// `stream` and `e` are live.
pub unsafe fn stream_wait_event(stream: CUstream, e: CUevent) -> Result<()> {
    sys::cuStreamWaitEvent(stream, e, 0)
        .result()
        .map_err(Error::cuda("cuStreamWaitEvent"))
}

/// `cuStreamIsCapturing`: whether work enqueued on `stream` is being captured into a graph.
///
/// # Safety
/// `stream` is live.
pub unsafe fn stream_is_capturing(stream: CUstream) -> Result<bool> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    sys::cuStreamIsCapturing(stream, &mut status)
        .result()
        .map_err(Error::cuda("cuStreamIsCapturing"))?;
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// `cuStreamGetId`: the stream's unique id (never reused for another stream in the process,
/// unlike a destroyed stream's handle).
///
/// # Safety
/// `stream` is live.
pub unsafe fn stream_id(stream: CUstream) -> Result<u64> {
    let mut id: std::ffi::c_ulonglong = 0;
    sys::cuStreamGetId(stream, &mut id)
        .result()
        .map_err(Error::cuda("cuStreamGetId"))?;
    Ok(id)
}

/// `cuStreamGetCtx`: the context a stream belongs to.
///
/// # Safety
/// `stream` is live (the legacy and per-thread default streams resolve to the current context).
pub unsafe fn stream_context(stream: CUstream) -> Result<sys::CUcontext> {
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    sys::cuStreamGetCtx(stream, &mut ctx)
        .result()
        .map_err(Error::cuda("cuStreamGetCtx"))?;
    Ok(ctx)
}

/// The context and device ordinal that own a device address, via `cuPointerGetAttributes`.
/// `None` when the driver does not know the address (not device memory of any context).
///
/// # Safety
/// None beyond a current context; unknown addresses are reported, not dereferenced.
pub unsafe fn pointer_owner(ptr: CUdeviceptr) -> Result<Option<(sys::CUcontext, i32)>> {
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
    match sys::cuPointerGetAttributes(2, attrs.as_mut_ptr(), data.as_mut_ptr(), ptr) {
        sys::CUresult::CUDA_SUCCESS if ordinal >= 0 => Ok(Some((ctx, ordinal))),
        sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_INVALID_VALUE => Ok(None),
        other => Err(Error::cuda("cuPointerGetAttributes")(
            other.result().unwrap_err(),
        )),
    }
}

/// `cuMemcpyHtoD` (synchronous).
///
/// # Safety
/// `dst` is device memory of at least `src.len()` bytes in the current context.
pub unsafe fn memcpy_htod(dst: CUdeviceptr, src: &[u8]) -> Result<()> {
    sys::cuMemcpyHtoD_v2(dst, src.as_ptr().cast(), src.len())
        .result()
        .map_err(Error::cuda("cuMemcpyHtoD"))
}
