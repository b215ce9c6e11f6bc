//! The CUDA driver calls the binding makes itself. Each is here because the core
//! (`sized_readback`) does not offer it publicly (its own `bind` and `Event` are
//! crate-private) and the binding needs it for something only Python callers have:
//!
//! - [`CtxGuard`]: PyTorch and CuPy take their current device from the thread's current
//!   context, and the core leaves its own context bound after every call; the binding puts
//!   back the caller's after each call that reaches the driver.
//! - [`bind`]: the context must be current before [`Event`]'s calls, which the core does not
//!   make for the binding.
//! - [`Event`]: producers' streams come from Python frameworks (the streams a DLPack or CUDA
//!   Array Interface producer reports), and the core's raw enqueue takes at most one event to
//!   wait for: the binding records on each producer stream and makes the enqueue stream wait
//!   (see `order.rs`). `_profile` times one record for reference.
use crate::errors::to_py;
use pyo3::prelude::*;
use srb::cudarc::driver::sys::{self, CUcontext, CUevent, CUresult, CUstream};

fn check(py: Python<'_>, status: CUresult, call: &'static str) -> PyResult<()> {
    status
        .result()
        .map_err(|source| to_py(py, srb::Error::Cuda { call, source }))
}

/// The thread's current context (null when none is, or the query fails).
fn current() -> CUcontext {
    let mut c: CUcontext = std::ptr::null_mut();
    // SAFETY: a valid out-pointer; the driver is loaded (the callers' contract).
    if unsafe { sys::cuCtxGetCurrent(&mut c) } != CUresult::CUDA_SUCCESS {
        c = std::ptr::null_mut();
    }
    c
}

/// Restores the thread's current CUDA context when dropped. The library's calls bind the
/// readback's context and leave it bound; PyTorch and CuPy take their current device from the
/// current context, so every call from Python that reaches the driver puts back the one it found
/// (one `cuCtxGetCurrent` on entry, one on exit). Make one only once the driver is loaded (a
/// readback exists): cudarc panics on a first driver call without it.
pub(crate) struct CtxGuard(Option<CUcontext>);

impl CtxGuard {
    pub(crate) fn save() -> Self {
        CtxGuard(Some(current()))
    }

    /// [`CtxGuard::save`] for a call that binds `ours` at most: when `ours` is already current
    /// (PyTorch and the readback on one device share its primary context), nothing will need
    /// restoring, and the drop makes no driver call.
    pub(crate) fn save_unless(ours: CUcontext) -> Self {
        let c = current();
        CtxGuard((c != ours).then_some(c))
    }
}

impl Drop for CtxGuard {
    fn drop(&mut self) {
        let Some(saved) = self.0 else { return };
        let mut now: CUcontext = std::ptr::null_mut();
        // SAFETY: valid out-pointer; `saved` was current on this thread (a context this
        // thread may bind again) or null (unbinds).
        unsafe {
            if sys::cuCtxGetCurrent(&mut now) == CUresult::CUDA_SUCCESS && now != saved {
                let _ = sys::cuCtxSetCurrent(saved);
            }
        }
    }
}

/// Makes `ctx` current on this thread (`cuCtxGetCurrent`, then `cuCtxSetCurrent` only if
/// another is current), as the core's calls do; unlike cudarc's `bind_to_thread` it leaves
/// alone an error cudarc may have stashed.
pub(crate) fn bind(py: Python<'_>, ctx: &srb::cudarc::driver::CudaContext) -> PyResult<()> {
    let mut now: CUcontext = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    let status = unsafe { sys::cuCtxGetCurrent(&mut now) };
    check(py, status, "cuCtxGetCurrent")?;
    if now != ctx.cu_ctx() {
        // SAFETY: the context is alive (`ctx` holds it).
        let status = unsafe { sys::cuCtxSetCurrent(ctx.cu_ctx()) };
        check(py, status, "cuCtxSetCurrent")?;
    }
    Ok(())
}

/// A CUDA event without timing, destroyed when dropped (the driver frees it once its last
/// record completes).
pub(crate) struct Event {
    ev: CUevent,
    ctx: CUcontext,
}

// SAFETY: a driver event handle may be used from any thread with its context bound; every
// use binds it first (the callers' contract, `bind`).
unsafe impl Send for Event {}
// SAFETY: as above; the owners serialize its records (a mutex, or one thread).
unsafe impl Sync for Event {}

impl Event {
    /// A new event of `ctx`, which must be bound on this thread.
    pub(crate) fn new(py: Python<'_>, ctx: CUcontext) -> PyResult<Self> {
        let mut ev: CUevent = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the caller bound the context.
        let status = unsafe {
            sys::cuEventCreate(&mut ev, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
        };
        check(py, status, "cuEventCreate")?;
        Ok(Event { ev, ctx })
    }

    /// Records the work queued on `stream` so far.
    ///
    /// # Safety
    /// `stream` is a live stream of the event's context (or a legacy/per-thread handle), and
    /// that context is bound.
    pub(crate) unsafe fn record(&self, py: Python<'_>, stream: usize) -> PyResult<()> {
        // SAFETY: per the contract; the event is live.
        let status = unsafe { sys::cuEventRecord(self.ev, stream as CUstream) };
        check(py, status, "cuEventRecord")
    }

    /// Makes work enqueued next on `stream` wait for the event's last record (as it was at
    /// this call: records after it do not change what the wait waits for).
    ///
    /// # Safety
    /// As [`Event::record`].
    pub(crate) unsafe fn wait_on(&self, py: Python<'_>, stream: usize) -> PyResult<()> {
        // SAFETY: per the contract; the event is live.
        let status = unsafe { sys::cuStreamWaitEvent(stream as CUstream, self.ev, 0) };
        check(py, status, "cuStreamWaitEvent")
    }
}

impl Drop for Event {
    /// Binds the event's context and leaves it bound: owners drop it under a [`CtxGuard`].
    fn drop(&mut self) {
        // SAFETY: a live event of the live context `ctx` (its owner keeps the context alive
        // longer than the event), no longer used by anyone else; a failed bind leaves the
        // destroy to fail harmlessly.
        unsafe {
            if sys::cuCtxSetCurrent(self.ctx) == CUresult::CUDA_SUCCESS {
                let _ = sys::cuEventDestroy_v2(self.ev);
            }
        }
    }
}
