//! The core's context calls as the binding uses them: no driver call of the binding's own.
//!
//! - [`CtxGuard`] (the core's `device::ContextGuard`): PyTorch and CuPy take their current
//!   device from the thread's current context, and the core leaves its readback's context
//!   current after every call; each call from Python that reaches the driver puts back the one
//!   it found.
//! - [`bind`]: the context current before the core's `StreamJoin` records and waits (`order.rs`),
//!   which bind nothing themselves.
use crate::errors::to_py;
use pyo3::prelude::*;
pub(crate) use srb::device::ContextGuard as CtxGuard;

/// Makes `ctx` current on this thread (the core's `device::bind`).
pub(crate) fn bind(py: Python<'_>, ctx: &srb::cudarc::driver::CudaContext) -> PyResult<()> {
    srb::device::bind(ctx).map_err(|e| to_py(py, e))
}
