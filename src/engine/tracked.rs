//! The safe enqueue's cudarc glue: device buffers with their element type erased, which
//! [`super::host::HostEngine::enqueue_tracked`] binds through cudarc's event tracking.
use cudarc::driver::sys::{CUcontext, CUdeviceptr};
use cudarc::driver::{CudaStream, DevicePtr, SyncOnDrop};
use std::marker::PhantomData;

/// A cudarc device buffer with its element type erased (the handle checked it).
pub(crate) trait ErasedDevicePtr {
    fn len(&self) -> usize;
    fn context(&self) -> CUcontext;
    fn device_ptr<'s>(&'s self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>);
}

pub(crate) struct Typed<'a, T, D>(pub(crate) &'a D, pub(crate) PhantomData<fn() -> T>);

impl<T, D: DevicePtr<T>> ErasedDevicePtr for Typed<'_, T, D> {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn context(&self) -> CUcontext {
        self.0.stream().context().cu_ctx()
    }
    fn device_ptr<'s>(&'s self, stream: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
        self.0.device_ptr(stream)
    }
}

/// A placeholder for the unused entries of the erased-source array.
pub(crate) struct NoBuffer;
impl ErasedDevicePtr for NoBuffer {
    fn len(&self) -> usize {
        0
    }
    fn context(&self) -> CUcontext {
        std::ptr::null_mut()
    }
    fn device_ptr<'s>(&'s self, _: &'s CudaStream) -> (CUdeviceptr, SyncOnDrop<'s>) {
        unreachable!("placeholders are never bound")
    }
}
