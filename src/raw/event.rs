//! Owned events: created with timing disabled (cheaper to record and to wait on), destroyed on
//! drop with their context bound, like the owned buffers.
use super::driver::check;
use crate::error::Result;
use cudarc::driver::sys::{self, CUevent, CUstream};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// An event of one context, from `cuEventCreate`; destroyed when dropped.
#[derive(Debug)]
pub(crate) struct Event {
    ctx: Arc<CudaContext>,
    event: CUevent,
}

// SAFETY: a CUevent handle may be used from any thread; the driver synchronizes its use.
// Destruction happens once, in Drop, which needs `&mut self`.
unsafe impl Send for Event {}
// SAFETY: as above; shared references only record, query and wait.
unsafe impl Sync for Event {}

impl Event {
    /// A new event of `ctx` (binds it).
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        super::driver::bind(ctx)?;
        let mut event: CUevent = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: event is a valid out-pointer; the context is current.
        let status = unsafe { sys::cuEventCreate(&mut event, flags) };
        check(status, "cuEventCreate")?;
        Ok(Event {
            ctx: ctx.clone(),
            event,
        })
    }

    /// The driver handle, for calls that take another context's events too.
    pub(crate) fn raw(&self) -> CUevent {
        self.event
    }

    /// `cuEventRecord` on `stream`.
    ///
    /// # Safety
    /// `stream` is a live stream of this event's context.
    pub(crate) unsafe fn record(&self, stream: CUstream) -> Result<()> {
        // SAFETY: a live event; the stream per the contract.
        let status = unsafe { sys::cuEventRecord(self.event, stream) };
        check(status, "cuEventRecord")
    }

    /// `cuEventQuery`: `Ok(true)` when complete (or never recorded), `Ok(false)` while
    /// pending, `Err` on a device error.
    pub(crate) fn query(&self) -> Result<bool> {
        // SAFETY: a live event.
        match unsafe { sys::cuEventQuery(self.event) } {
            sys::CUresult::CUDA_SUCCESS => Ok(true),
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => check(other, "cuEventQuery").map(|()| false),
        }
    }

    /// `cuEventSynchronize`: blocks until the work the event last recorded is complete.
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: a live event.
        let status = unsafe { sys::cuEventSynchronize(self.event) };
        check(status, "cuEventSynchronize")
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; a failed destroy leaks the handle.
        let _ = super::driver::bind(&self.ctx);
        // SAFETY: created in new, destroyed once; owners wait for the work it tracks first.
        let _ = unsafe { sys::cuEventDestroy_v2(self.event) };
    }
}
