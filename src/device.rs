//! Opening a device without the panics of a missing driver, and what it is.
use crate::error::{Error, Result};
use crate::raw::driver;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// The primary context of device `ordinal`.
///
/// The library's kernels, once loaded in a primary context, stay loaded (and the context
/// retained) until the process ends, as the CUDA runtime keeps its own: a kernel load waits for
/// every kernel running in the context, so loading them again at a later build would wait for
/// the caller's other streams. Dropping every readback and context object therefore leaves the
/// primary context active; a device reset (`cuDevicePrimaryCtxReset`, `cudaDeviceReset`) still
/// destroys it, and the next build loads the kernels into its successor.
///
/// Unlike `CudaContext::new`, which panics when `libcuda` cannot be loaded, this returns
/// [`Error::DriverNotFound`]; with no such device, [`Error::NoDevice`].
pub fn open(ordinal: usize) -> Result<Arc<CudaContext>> {
    // A driver without a GPU (cuInit: CUDA_ERROR_NO_DEVICE) counts as 0 devices.
    let available = driver::device_count()?;
    if ordinal >= available {
        return Err(Error::NoDevice { ordinal, available });
    }
    CudaContext::new(ordinal).map_err(Error::cuda("cuDevicePrimaryCtxRetain"))
}

/// Number of CUDA devices; an error (not a panic) when the driver is missing.
pub fn count() -> Result<usize> {
    driver::device_count()
}

/// The compute capability of `ctx`'s device, e.g. `(9, 0)` for an H100 or H200.
pub fn compute_capability(ctx: &CudaContext) -> Result<(u32, u32)> {
    driver::ensure_driver()?;
    let get = |a| {
        ctx.attribute(a)
            .map(|v| v.max(0) as u32)
            .map_err(Error::cuda("cuDeviceGetAttribute"))
    };
    Ok((
        get(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        get(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    ))
}

/// Makes `ctx` current on this thread, as every call of the library does before its driver
/// calls (and leaves it current after). For callers that make driver calls of their own on
/// `ctx`'s handles between the library's.
pub fn bind(ctx: &CudaContext) -> Result<()> {
    driver::ensure_driver()?;
    driver::bind(ctx)
}

/// Restores the thread's current CUDA context when dropped.
///
/// The library's calls make their readback's context current and leave it so; frameworks that
/// take their current device from the current context (PyTorch, CuPy, the CUDA runtime after a
/// `cudaSetDevice` of another device) want theirs back. Hold a guard across the calls:
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let ctx = sized_readback::device::open(0)?;
/// let rb = sized_readback::Readback::<f64>::new(&ctx, 1024)?;
/// {
///     let _restore = sized_readback::device::ContextGuard::save_unless(&ctx);
///     // ... enqueue, wait: the library binds `ctx` ...
/// } // the context current before is current again
/// # drop(rb); Ok(()) }
/// ```
///
/// A guard made before the driver is loaded (no context opened yet) restores nothing. The
/// saved context must outlive the guard: a caller that destroys it meanwhile (a context of its
/// own, not a device's primary one) forgets the guard (`std::mem::forget`) instead of dropping
/// it.
#[derive(Debug)]
pub struct ContextGuard {
    /// The context to make current again (null: none), if any.
    saved: Option<cudarc::driver::sys::CUcontext>,
}

impl ContextGuard {
    /// Saves the thread's current context (`cuCtxGetCurrent`), made current again on drop if
    /// another is current then.
    pub fn save() -> Self {
        ContextGuard {
            // SAFETY: the driver is loaded (checked).
            saved: driver::driver_loaded().then(|| unsafe { driver::current_context() }),
        }
    }

    /// [`ContextGuard::save`] for calls that bind `ours` at most (those of a readback of
    /// `ours`): where `ours` is current already, nothing will need restoring, and the drop
    /// makes no driver call.
    pub fn save_unless(ours: &CudaContext) -> Self {
        let mut guard = Self::save();
        if guard.saved == Some(ours.cu_ctx()) {
            guard.saved = None;
        }
        guard
    }
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        let Some(saved) = self.saved else { return };
        // SAFETY: `saved` was made only with the driver loaded; it was current on this thread
        // (a context this thread may bind again) or null (unbinds).
        unsafe {
            if driver::current_context() != saved {
                driver::set_current_context(saved);
            }
        }
    }
}
