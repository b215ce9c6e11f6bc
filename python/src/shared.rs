//! What every ticket of a readback shares with it: the context and device, the ordering
//! event, the dropped tickets whose readback may still run, and the count read back last.
use crate::deferred::Deferred;
use crate::driver::{bind, CtxGuard};
use crate::errors::IntoPy;
use crate::order::Order;
use crate::spec::ColSpec;
use pyo3::prelude::*;
use srb::cudarc::driver::CudaContext;
use srb::ColumnSchema;
use std::sync::Arc;

pub(crate) struct Shared {
    /// Joins producers' streams into an enqueue's stream.
    order: Order,
    /// Dropped tickets still in flight (see [`Deferred`]).
    pub(crate) deferred: Deferred,
    pub(crate) device: i32,
    /// Last: the context outlives the event and the tickets above.
    pub(crate) ctx: Arc<CudaContext>,
}

impl Shared {
    pub(crate) fn new(ctx: Arc<CudaContext>, device: i32) -> Arc<Self> {
        Arc::new(Shared {
            order: Order::default(),
            deferred: Deferred::default(),
            device,
            ctx,
        })
    }

    /// Makes the readback's context current on this thread.
    pub(crate) fn bind(&self, py: Python<'_>) -> PyResult<()> {
        bind(py, &self.ctx)
    }

    /// Makes work enqueued next on `stream` wait for the work already on each of `producers`
    /// (those that are not `stream` itself). The context must be bound.
    ///
    /// # Safety
    /// Every handle is a live stream of this context (or a legacy/per-thread handle).
    pub(crate) unsafe fn order_after(
        &self,
        py: Python<'_>,
        producers: &[usize],
        stream: usize,
    ) -> PyResult<()> {
        // SAFETY: per the contract; the caller bound the context.
        unsafe { self.order.after(py, &self.ctx, producers, stream) }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let _restore = CtxGuard::save();
        self.deferred.drain();
        self.order.clear();
    }
}

/// Opens the device (`DriverNotFoundError`, `NoDeviceError` when there is none) and the
/// schema of raw columns for `specs`. The guard puts the caller's current context back: keep
/// it until the readback is made.
pub(crate) fn open(
    py: Python<'_>,
    device: i32,
    specs: &[ColSpec],
    check: impl FnOnce(&ColumnSchema) -> srb::Result<()>,
) -> PyResult<(Arc<Shared>, ColumnSchema, CtxGuard)> {
    let schema = schema_of(specs);
    // The settings as the core checks them, before any driver call: the same ConfigError with
    // or without a GPU.
    check(&schema).py_err(py)?;
    // The driver's presence first (an error, not cudarc's panic), then the guard's query.
    srb::device::count().py_err(py)?;
    let restore = CtxGuard::save();
    let ctx = srb::device::open(device as usize).py_err(py)?;
    Ok((Shared::new(ctx, device), schema, restore))
}

/// The schema of raw columns for `specs`.
pub(crate) fn schema_of(specs: &[ColSpec]) -> ColumnSchema {
    let mut schema = ColumnSchema::new();
    for s in specs {
        schema.raw_column(s.elem_size);
    }
    schema
}
