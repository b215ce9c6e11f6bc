//! Opening a device without the panics of a missing driver, and what it is.
use crate::error::{Error, Result};
use crate::raw::driver;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// The primary context of device `ordinal`.
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
