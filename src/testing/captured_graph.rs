//! A stream capture's graph, instantiated and uploaded: what a test, an example or a
//! measurement records once and launches many times (a sized launch recorded with
//! [`crate::SizedLaunch::record`], a loop of kernels).
use crate::error::{Error, Result};
use crate::raw::driver::check;
use cudarc::driver::sys;
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// A captured, instantiated and uploaded graph, launched on the stream it was captured on.
/// Dropping it waits for that stream's work, then destroys the graph.
#[derive(Debug)]
pub struct CapturedGraph {
    stream: Arc<CudaStream>,
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl CapturedGraph {
    /// Captures (thread-locally) what `record` enqueues on `stream`, instantiates the graph and
    /// uploads it on `stream`. The capture is ended on every path; `record`'s error comes
    /// first.
    ///
    /// # Safety
    /// `stream` is a stream of the context bound on this thread. What `record` enqueues (the
    /// buffers its kernels use, a sized launch it records) stays valid for as long as the
    /// graph is launched: drop the graph first.
    pub unsafe fn capture<E: From<Error>>(
        stream: &Arc<CudaStream>,
        record: impl FnOnce() -> std::result::Result<(), E>,
    ) -> std::result::Result<Self, E> {
        let s = stream.cu_stream();
        let mut g = CapturedGraph {
            stream: stream.clone(),
            graph: std::ptr::null_mut(),
            exec: std::ptr::null_mut(),
        };
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: a live stream of the bound context (the contract); ended below on every path.
        let begun = unsafe { sys::cuStreamBeginCapture_v2(s, mode) };
        check(begun, "cuStreamBeginCapture")?;
        let recorded = record();
        // SAFETY: the capture begun above; its graph is owned by `g` (destroyed on drop).
        let ended = unsafe { sys::cuStreamEndCapture(s, &mut g.graph) };
        recorded?;
        check(ended, "cuStreamEndCapture")?;
        // SAFETY: a graph just captured; the executable is owned by `g`.
        let status = unsafe { sys::cuGraphInstantiateWithFlags(&mut g.exec, g.graph, 0) };
        check(status, "cuGraphInstantiate")?;
        // SAFETY: a live executable graph and a live stream of its context.
        let status = unsafe { sys::cuGraphUpload(g.exec, s) };
        check(status, "cuGraphUpload")?;
        Ok(g)
    }

    /// Launches the graph on the stream it was captured on.
    pub fn launch(&self) -> Result<()> {
        // SAFETY: a live executable graph and a live stream of its context.
        let status = unsafe { sys::cuGraphLaunch(self.exec, self.stream.cu_stream()) };
        check(status, "cuGraphLaunch")
    }
}

impl Drop for CapturedGraph {
    fn drop(&mut self) {
        // Its launches run on `stream`: wait for them, on every path (errors too).
        let _ = self.stream.synchronize();
        // SAFETY: owned handles, null or live; no launch of them is in flight (above).
        unsafe {
            if !self.exec.is_null() {
                sys::cuGraphExecDestroy(self.exec);
            }
            if !self.graph.is_null() {
                sys::cuGraphDestroy(self.graph);
            }
        }
    }
}
