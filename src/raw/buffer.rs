//! Owned buffers: pinned host memory (optionally mapped into the device's address space) and
//! device memory. Both free themselves on drop with their context bound.
use super::driver;
use super::stream::Stream;
use crate::allocations::{DEVICE, PINNED};
use crate::error::Result;
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// Page-locked host memory from `cuMemHostAlloc`, zero-filled.
///
/// Plain pinned memory, cacheable for the CPU (not write-combined, which the CPU reads very
/// slowly). With `mapped`, it is also mapped into the device's address space
/// (`CU_MEMHOSTALLOC_DEVICEMAP`), and `PORTABLE` makes it usable from every context.
#[derive(Debug)]
pub(crate) struct PinnedBuffer {
    ctx: Arc<CudaContext>,
    host: *mut u8,
    device: CUdeviceptr,
    len: usize,
}

// SAFETY: the buffer is plain memory owned by this value; the raw pointer is only an address.
// Concurrent access is coordinated by the owners (the slot ring), not by this type.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as above; shared references hand out addresses only.
unsafe impl Sync for PinnedBuffer {}

impl PinnedBuffer {
    /// Allocates `len` bytes (at least 1), zero-filled.
    pub(crate) fn new(ctx: &Arc<CudaContext>, len: usize, mapped: bool) -> Result<Self> {
        driver::bind(ctx)?;
        let mut flags = sys::CU_MEMHOSTALLOC_PORTABLE;
        if mapped {
            flags |= sys::CU_MEMHOSTALLOC_DEVICEMAP;
        }
        let len = len.max(1);
        // SAFETY: the context is current; the memory is initialized below before any use.
        let host = unsafe { driver::host_alloc(len, flags)? };
        PINNED.made(len);
        // SAFETY: host points to len writable bytes just allocated.
        unsafe { std::ptr::write_bytes(host, 0, len) };
        let mut buf = PinnedBuffer {
            ctx: ctx.clone(),
            host,
            device: 0,
            len,
        };
        if mapped {
            // SAFETY: host was allocated with DEVICEMAP in the current context.
            buf.device = unsafe { driver::host_device_pointer(host)? };
        }
        Ok(buf)
    }

    /// Host address of byte 0.
    pub(crate) fn host_ptr(&self) -> *mut u8 {
        self.host
    }
    /// Device address of byte 0 (0 when not mapped).
    pub(crate) fn device_ptr(&self) -> CUdeviceptr {
        self.device
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; a failed free leaks rather than crashes.
        let _ = driver::bind(&self.ctx);
        // SAFETY: allocated by host_alloc, freed once; owners wait for device work first.
        let _ = unsafe { driver::host_free(self.host) };
        PINNED.freed(self.len);
    }
}

/// Device memory from `cuMemAlloc`, zero-filled.
#[derive(Debug)]
pub(crate) struct DeviceBuffer {
    ctx: Arc<CudaContext>,
    ptr: CUdeviceptr,
    len: usize,
}

impl DeviceBuffer {
    /// Allocates `len` bytes (at least 1), zero-filled before it returns, so that no byte is
    /// ever read uninitialized and no pack launched at once can run before the zeroing.
    pub(crate) fn new_zeroed(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        Self::new_with(ctx, len, &[])
    }

    /// Allocates `len` bytes (at least 1, and at least `init.len()`): `init`, then zeros, in
    /// place before it returns.
    ///
    /// The writes run on a stream of their own: on the legacy default stream (`cuMemsetD8`,
    /// `cuMemcpyHtoD`) they would wait for every blocking stream of the context, such as a C
    /// caller's `cudaStreamCreate` streams.
    pub(crate) fn new_with(ctx: &Arc<CudaContext>, len: usize, init: &[u8]) -> Result<Self> {
        driver::bind(ctx)?;
        let len = len.max(init.len()).max(1);
        // SAFETY: the context is current.
        let ptr = unsafe { driver::device_alloc(len)? };
        DEVICE.made(len);
        // Owned from here: an error below frees it, once no write is pending.
        let buf = DeviceBuffer {
            ctx: ctx.clone(),
            ptr,
            len,
        };
        let writes = Stream::new(ctx)?;
        // SAFETY: `len` bytes just allocated, which no other work can know of yet, and `init`
        // fits in them; `writes` is a live stream of the context, synchronized below, before
        // `init`'s borrow ends and before `buf` can be freed, whether these succeed or not.
        let enqueued = unsafe {
            driver::memset_zero_async(ptr, len, writes.raw()).and_then(|()| {
                if init.is_empty() {
                    Ok(())
                } else {
                    driver::memcpy_htod_async(ptr, init, writes.raw())
                }
            })
        };
        let synced = writes.synchronize();
        enqueued.and(synced)?;
        Ok(buf)
    }

    /// Device address of byte 0.
    pub(crate) fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        let _ = driver::bind(&self.ctx);
        // SAFETY: allocated by device_alloc, freed once; owners wait for device work first.
        let _ = unsafe { driver::device_free(self.ptr) };
        DEVICE.freed(self.len);
    }
}
