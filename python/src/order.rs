//! Ordering an enqueue after the streams of the arrays' producers: the streams a DLPack or CUDA
//! Array Interface producer (or PyTorch's current stream) reports, which are not the enqueue
//! stream. The core's raw enqueue waits for at most one event, recorded by its caller; an
//! enqueue here may have one producer stream per column and one for the count.
use crate::errors::to_py;
use crate::stream::same_stream;
use pyo3::prelude::*;
use srb::cudarc::driver::sys::CUstream;
use srb::cudarc::driver::CudaContext;
use srb::StreamJoin;
use std::sync::{Arc, Mutex};

/// One core `StreamJoin` per readback, made on first need, serving each producer stream in turn.
#[derive(Default)]
pub(crate) struct Order(Mutex<Option<StreamJoin>>);

impl Order {
    /// Makes work enqueued next on `stream` wait for the work already on each of `producers`
    /// (those that are not `stream` itself).
    ///
    /// # Safety
    /// Every handle is a live stream of context `ctx` (or a legacy/per-thread handle), and
    /// `ctx` is bound on this thread.
    pub(crate) unsafe fn after(
        &self,
        py: Python<'_>,
        ctx: &Arc<CudaContext>,
        producers: &[usize],
        stream: usize,
    ) -> PyResult<()> {
        let mut done: Vec<usize> = Vec::new();
        for &p in producers {
            if same_stream(p, stream) || done.iter().any(|&d| same_stream(d, p)) {
                continue;
            }
            done.push(p);
            let mut join = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if join.is_none() {
                *join = Some(StreamJoin::new(ctx).map_err(|e| to_py(py, e))?);
            }
            let Some(j) = join.as_ref() else {
                unreachable!("made above")
            };
            // SAFETY: per the contract (both streams of `ctx`, which is bound).
            unsafe { j.join(stream as CUstream, p as CUstream) }.map_err(|e| to_py(py, e))?;
        }
        Ok(())
    }

    /// Destroys the event, if made (binding its context: call under a `CtxGuard`).
    pub(crate) fn clear(&mut self) {
        drop(self.0.get_mut().unwrap_or_else(|p| p.into_inner()).take());
    }
}
