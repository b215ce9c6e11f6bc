//! Owned streams for the library's own work: the writes that zero (or fill) its new device
//! buffers, the uploads of a staged sized copy's graphs and the captures of a sized launch's
//! bodies.
//!
//! Created with `cuStreamCreate`, not cudarc's `CudaContext::new_stream`: the latter calls
//! `cuCtxSynchronize` when its context object has no live stream yet, and C and Python callers
//! reach the library with a fresh context object for every build, their own streams being raw
//! handles. Through cudarc, every such build would wait until the whole device was idle, and
//! would invalidate a capture running on any stream of the context.
use super::driver::{bind, check};
use crate::error::Result;
use cudarc::driver::sys::{self, CUstream};
use cudarc::driver::{CudaContext, CudaStream};
use std::sync::Arc;

/// A non-blocking stream of one context; destroyed when dropped.
#[derive(Debug)]
pub(crate) struct Stream {
    ctx: Arc<CudaContext>,
    stream: CUstream,
}

impl Stream {
    /// A new non-blocking stream of `ctx` (binds it): it neither waits for nor holds up the
    /// legacy default stream.
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        bind(ctx)?;
        let mut stream: CUstream = std::ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: stream is a valid out-pointer; the context is current.
        let status = unsafe { sys::cuStreamCreate(&mut stream, flags) };
        check(status, "cuStreamCreate")?;
        Ok(Stream {
            ctx: ctx.clone(),
            stream,
        })
    }

    /// The driver handle.
    pub(crate) fn raw(&self) -> CUstream {
        self.stream
    }

    /// `cuStreamSynchronize`: blocks until the work enqueued so far is done.
    pub(crate) fn synchronize(&self) -> Result<()> {
        // SAFETY: a live stream.
        let status = unsafe { sys::cuStreamSynchronize(self.stream) };
        check(status, "cuStreamSynchronize")
    }

    /// Drops this without destroying the stream, whose handle must outlive it; the context
    /// object is released as usual.
    fn leak_handle(mut self) {
        self.stream = std::ptr::null_mut();
    }

    /// This stream as a cudarc stream, for a caller's closure to enqueue on: see
    /// [`LentStream`].
    pub(crate) fn lend(self) -> LentStream {
        // SAFETY: a live stream of `ctx`, which the LentStream keeps alive as long as any clone
        // of the wrapper lives (its Drop); the closure orders its own work on it.
        let cuda = unsafe { self.ctx.wrap_borrowed_stream(self.stream) };
        LentStream(Some((self, cuda)))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.stream.is_null() {
            return; // its handle was leaked
        }
        // Errors cannot be returned from drop; a failed destroy leaks the handle. Work still
        // enqueued finishes first: the driver releases the stream once it is idle.
        let _ = bind(&self.ctx);
        // SAFETY: created in new, destroyed once.
        let _ = unsafe { sys::cuStreamDestroy_v2(self.stream) };
    }
}

/// A [`Stream`] lent out as a cudarc stream that does not own it. A caller's closure may keep
/// a clone of the `Arc` past the lending; then the stream is never destroyed (a leak of one
/// stream) rather than destroyed under the clone.
#[derive(Debug)]
pub(crate) struct LentStream(Option<(Stream, Arc<CudaStream>)>);

impl LentStream {
    fn parts(&self) -> &(Stream, Arc<CudaStream>) {
        self.0.as_ref().expect("taken only in drop")
    }

    /// The cudarc stream to hand to the caller.
    pub(crate) fn cuda(&self) -> &Arc<CudaStream> {
        &self.parts().1
    }

    /// The driver handle.
    pub(crate) fn raw(&self) -> CUstream {
        self.parts().0.raw()
    }

    /// `cuStreamSynchronize`: blocks until the work enqueued so far is done.
    pub(crate) fn synchronize(&self) -> Result<()> {
        self.parts().0.synchronize()
    }
}

impl Drop for LentStream {
    fn drop(&mut self) {
        let Some((stream, cuda)) = self.0.take() else {
            return;
        };
        // `into_inner` succeeds only for the last strong reference, and no weak one can be
        // upgraded after it: where it fails, a clone is alive and the stream must outlive it.
        match Arc::into_inner(cuda) {
            Some(_) => drop(stream),
            None => stream.leak_handle(),
        }
    }
}
