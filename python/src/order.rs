//! Ordering an enqueue after the streams of the arrays' producers: the streams a DLPack or CUDA
//! Array Interface producer (or PyTorch's current stream) reports, which are not the enqueue
//! stream. The core's raw enqueue waits for at most one event, recorded by its caller; an
//! enqueue here may have one producer stream per column and one for the count.
use crate::driver::Event;
use crate::stream::same_stream;
use pyo3::prelude::*;
use srb::cudarc::driver::sys::CUcontext;
use std::sync::Mutex;

/// One event per readback, made on first need, recorded on each producer stream in turn.
#[derive(Default)]
pub(crate) struct Order(Mutex<Option<Event>>);

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
        ctx: CUcontext,
        producers: &[usize],
        stream: usize,
    ) -> PyResult<()> {
        let mut done: Vec<usize> = Vec::new();
        for &p in producers {
            if same_stream(p, stream) || done.iter().any(|&d| same_stream(d, p)) {
                continue;
            }
            done.push(p);
            let mut ev = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if ev.is_none() {
                *ev = Some(Event::new(py, ctx)?);
            }
            let Some(e) = ev.as_ref() else {
                unreachable!("made above")
            };
            // SAFETY: per the contract. A wait takes the event's state at the time of the
            // call, so the one event serves every producer in turn.
            unsafe {
                e.record(py, p)?;
                e.wait_on(py, stream)?;
            }
        }
        Ok(())
    }

    /// Destroys the event, if made (binding its context: call under a `CtxGuard`).
    pub(crate) fn clear(&mut self) {
        drop(self.0.get_mut().unwrap_or_else(|p| p.into_inner()).take());
    }
}
