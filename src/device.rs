//! Opening a device without the panics of a missing driver.
use crate::error::{Error, Result};
use crate::raw::driver;
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
