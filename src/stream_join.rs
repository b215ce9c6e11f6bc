//! Ordering one stream after others on raw driver handles: [`StreamJoin`].
use crate::error::Result;
use crate::raw::driver;
use crate::raw::event::Event;
use cudarc::driver::sys::CUstream;
use cudarc::driver::CudaContext;
use std::sync::{Arc, Mutex};

/// Makes work enqueued next on one stream wait for the work already on another, on raw
/// `CUstream` handles (a framework's streams: PyTorch's current stream, a DLPack producer's):
/// an owned event, recorded on the producer's stream and waited for on the consumer's. The
/// raw enqueues take one event to wait for ([`crate::ColumnReadback::enqueue_raw_stream`]'s
/// `after`); a readback whose columns come from several producer streams joins the rest with
/// this first. One join serves any number of producers in turn: a stream's wait takes the
/// event's state at the time of the wait. Joins from several threads take turns (a record and
/// its wait are one step: another thread's record between them would make the consumer wait
/// for the wrong producer).
#[derive(Debug)]
pub struct StreamJoin {
    event: Mutex<Event>,
}

impl StreamJoin {
    /// A join of `ctx`'s streams (its event made now, with timing disabled).
    ///
    /// Errors: [`crate::Error::DriverNotFound`] without a driver, [`crate::Error::Cuda`] where
    /// the driver cannot make the event.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        driver::ensure_driver()?;
        Ok(StreamJoin {
            event: Mutex::new(Event::new(ctx)?),
        })
    }

    /// Makes work enqueued next on `consumer` wait for the work enqueued so far on `producer`
    /// (`cuEventRecord` on `producer`, `cuStreamWaitEvent` on `consumer`). Binds nothing: the
    /// context is current (e.g. [`crate::device::bind`]).
    ///
    /// Errors: [`crate::Error::Cuda`] where the driver refuses the record or the wait.
    ///
    /// # Safety
    /// `producer` and `consumer` are live streams of this join's context (or the legacy or
    /// per-thread default stream's handle), and that context is current on this thread.
    pub unsafe fn join(&self, consumer: CUstream, producer: CUstream) -> Result<()> {
        // A poisoned lock guards no broken state: the event is only recorded and waited on.
        let event = self.event.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: per the contract; the event is live and of the streams' context, and no
        // other join records it until this one's wait is enqueued (the lock).
        unsafe {
            event.record(producer)?;
            driver::stream_wait_event(consumer, event.raw())
        }
    }

    /// Records the work enqueued so far on `stream` (`cuEventRecord` alone), e.g. to time what
    /// one record costs beside the library's calls.
    ///
    /// Errors: [`crate::Error::Cuda`] where the driver refuses the record.
    ///
    /// # Safety
    /// As [`StreamJoin::join`], for `stream`.
    pub unsafe fn record(&self, stream: CUstream) -> Result<()> {
        let event = self.event.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: per the contract.
        unsafe { event.record(stream) }
    }
}

// Joins are shared between threads: each join holds the event's lock from record to wait.
const _: () = {
    const fn send_sync<X: Send + Sync>() {}
    send_sync::<StreamJoin>();
};
