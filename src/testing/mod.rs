//! Test support, behind the `testing` feature: not part of the public API and not covered by
//! semver. The crate's own tests, examples, benches, fuzz targets and comparison harness use
//! it (the root package turns the feature on for its dev targets); users do not need it.
//!
//! - [`Kernels`]: the test kernels of `csrc/testing/` (producers, the seed program's kernel,
//!   append kernels of many shapes, a kernel that faults on purpose), in their own images;
//! - [`pattern`]: the byte pattern the producer kernels write, computed on the host;
//! - [`seed`]: the seed program, ported onto this crate;
//! - [`DeviceBuffer`], [`PinnedBuffer`], [`upload`] and [`decode_pack_trailer`]: raw memory and host logic that
//!   tests reach without a public API;
//! - [`pack_with_count_kind`]: the pack kernel given a count kind no host check saw;
//! - [`BareSizedCopy`]: the staged transport's sized-copy graph without the readback engine,
//!   the comparison harness's floor for the sized staged readback;
//! - [`sized_loop()`]: the seed's loop with its next step sized seven ways (the sized launch's
//!   example and the harness's sized-step rows);
//! - [`CapturedGraph`]: a stream capture instantiated, launched many times.
mod bare_sized_copy;
mod captured_graph;
pub mod pattern;
mod raw_kind;
pub mod seed;
mod sized_loop;

pub use bare_sized_copy::BareSizedCopy;
pub use captured_graph::CapturedGraph;
pub use raw_kind::pack_with_count_kind;
pub use sized_loop::{sized_loop, SizedLoop, SizedLoopWay, SIZED_LOOP_WAYS};

use crate::error::Result;
use crate::raw::{buffer, driver, images, module};
use crate::{KernelImage, LaunchShape};
use cudarc::driver::sys::{CUdeviceptr, CUstream};
use cudarc::driver::CudaContext;
use std::ffi::{c_void, CString};
use std::sync::Arc;

/// The test kernels, loaded into one context.
#[derive(Debug, Clone)]
pub struct Kernels(Arc<module::Module>, KernelImage);

impl Kernels {
    /// Loads the test kernels into `ctx`.
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self> {
        let (module, image) = module::Module::load_set(ctx, &images::TESTING)?;
        Ok(Kernels(module, image))
    }

    /// The image of the test kernels that was loaded (chosen as the library's is).
    pub fn image(&self) -> KernelImage {
        self.1
    }

    /// The `extern "C"` kernel `name`.
    pub fn function(&self, name: &str) -> Result<Kernel> {
        let name = CString::new(name).map_err(|_| crate::Error::config("a NUL in a name"))?;
        self.0.function(&name).map(Kernel)
    }
}

/// One test kernel.
#[derive(Debug, Clone)]
pub struct Kernel(module::Kernel);

impl Kernel {
    /// The virtual architecture the loaded code was compiled from, times ten
    /// (`CU_FUNC_ATTRIBUTE_PTX_VERSION`).
    pub fn ptx_version(&self) -> Result<i32> {
        self.0.ptx_version()
    }

    /// Launches the kernel on `stream`.
    ///
    /// # Safety
    /// As `cuLaunchKernelEx`: `params` points to one value of each parameter's exact type, the
    /// addresses passed are valid for what the kernel does with them, `stream` is a live
    /// stream of the kernel's context (bound on this thread).
    pub unsafe fn launch(
        &self,
        stream: CUstream,
        shape: LaunchShape,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: per the contract.
        unsafe { self.0.launch(stream, shape, params) }
    }

    /// Launches the kernel with a grid of `grid` = (x, y, z) blocks of `block` = (x, y, z)
    /// threads and `shared` bytes of dynamic shared memory.
    ///
    /// # Safety
    /// As [`Kernel::launch`].
    pub unsafe fn launch_3d(
        &self,
        stream: CUstream,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: per the contract.
        unsafe { self.0.launch_3d(stream, grid, block, params) }
    }
}

/// Device memory that cudarc does not track: zero-filled, freed on drop.
#[derive(Debug)]
pub struct DeviceBuffer(buffer::DeviceBuffer);

impl DeviceBuffer {
    /// `len` bytes of zeroed device memory in `ctx`.
    pub fn new_zeroed(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        buffer::DeviceBuffer::new_zeroed(ctx, len).map(DeviceBuffer)
    }
    /// Its device address.
    pub fn ptr(&self) -> CUdeviceptr {
        self.0.ptr()
    }
}

/// Page-locked host memory (cacheable, optionally mapped), zero-filled, freed on drop.
#[derive(Debug)]
pub struct PinnedBuffer(buffer::PinnedBuffer);

impl PinnedBuffer {
    /// `len` bytes of zeroed pinned memory, mapped into `ctx`'s address space if `mapped`.
    pub fn new(ctx: &Arc<CudaContext>, len: usize, mapped: bool) -> Result<Self> {
        buffer::PinnedBuffer::new(ctx, len, mapped).map(PinnedBuffer)
    }
    /// Host address of byte 0.
    pub fn host_ptr(&self) -> *mut u8 {
        self.0.host_ptr()
    }
    /// Device address of byte 0 (0 unless mapped).
    pub fn device_ptr(&self) -> CUdeviceptr {
        self.0.device_ptr()
    }
}

/// Loads the switch image set (the staged sized copy's `srb_pack_switch`, which needs a CUDA
/// 12.8 driver) into `ctx`, as a sized readback does, and says which image it loaded and the
/// PTX version its kernel was compiled from: a load the driver refuses fails here with the
/// driver's own error, apart from building the graphs.
pub fn load_switch_image(ctx: &Arc<CudaContext>) -> Result<(KernelImage, i32)> {
    let (m, image) = module::Module::load_set(ctx, &images::SWITCH)?;
    let ptx = m.function(c"srb_pack_switch")?.ptx_version()?;
    Ok((image, ptx))
}

/// Whether this driver sets graph conditionals from a kernel (CUDA 12.8+), as the staged
/// sized copy and sized launches need: the library's own test of the driver's version. False
/// where the driver cannot be asked.
pub fn driver_has_conditionals() -> bool {
    driver::ensure_driver().is_ok()
        && crate::raw::switch_graph::driver_version()
            .is_ok_and(crate::engine::sized_copy::driver_supports)
}

/// The threads per block [`launch_sized_body`] launches `srb_test_sized_body` with (one item
/// a thread).
pub const SIZED_BODY_BLOCK: u32 = 256;

/// Launches the sized launch's test body, `srb_test_sized_body` of `body`
/// ([`Kernels::function`]), with `n_max` threads (whole blocks of [`SIZED_BODY_BLOCK`]) on
/// `stream`: it writes `out[i] = 2i + 1` for `i < min(*count, n_max)` and, from thread 0,
/// `meta[0..4]` = `n_max`, the threads launched, `class`, and one more body run.
///
/// # Safety
/// `body` is that kernel; `count` addresses an `int32_t`, `out` at least `n_max` (and the
/// count's) `u64` values and `meta` four, all of `stream`'s context; `stream` is live (or
/// capturing).
#[allow(clippy::too_many_arguments)]
pub unsafe fn launch_sized_body(
    body: &Kernel,
    stream: CUstream,
    count: CUdeviceptr,
    n_max: u64,
    class: u32,
    out: CUdeviceptr,
    meta: CUdeviceptr,
) -> Result<()> {
    let (mut c, mut n, mut k, mut o, mut m) = (count, n_max, class, out, meta);
    let mut args: [*mut c_void; 5] = [
        (&mut c as *mut CUdeviceptr).cast(),
        (&mut n as *mut u64).cast(),
        (&mut k as *mut u32).cast(),
        (&mut o as *mut CUdeviceptr).cast(),
        (&mut m as *mut CUdeviceptr).cast(),
    ];
    let shape = LaunchShape {
        grid: n_max.max(1).div_ceil(SIZED_BODY_BLOCK as u64) as u32,
        block: SIZED_BODY_BLOCK,
        programmatic: false,
    };
    // SAFETY: per the contract: the kernel's five parameters, in order.
    unsafe { body.launch(stream, shape, &mut args) }
}

/// Sets every byte of `rb`'s host slots to `byte`, so that a test can tell which bytes a
/// staged copy wrote.
///
/// # Safety
/// No readback of `rb` is in flight or held.
pub unsafe fn fill_host_slots(rb: &crate::ColumnReadback, byte: u8) {
    // SAFETY: per the contract.
    unsafe { rb.engine().slots().fill_host(byte) }
}

/// Column `col`'s bytes of `out`'s slot for the whole capacity, past the count too: what the
/// staged copy wrote there, or what was there before. `None` for a column out of range.
pub fn column_capacity_bytes<'a>(out: &crate::ColumnReadout<'a>, col: usize) -> Option<&'a [u8]> {
    out.view().column_capacity_bytes(col)
}

/// Copies `bytes` to device address `dst` of `ctx` (`cuMemcpyHtoD` from pageable memory):
/// returns once `bytes` are staged for the copy, which may land later; work on a non-blocking
/// stream is not ordered after it. Synchronize the context before such work reads `dst`.
///
/// # Safety
/// `dst` is device memory of `ctx` with room for `bytes.len()` bytes, not used by running work.
pub unsafe fn upload(ctx: &Arc<CudaContext>, dst: CUdeviceptr, bytes: &[u8]) -> Result<()> {
    driver::bind(ctx)?;
    // SAFETY: per the contract.
    unsafe { driver::memcpy_htod(dst, bytes) }
}

/// The pack decode of a trailer given as its 32 bytes (the fuzz target's entry point).
pub fn decode_pack_trailer(
    bytes: &[u8; 32],
    expected: u64,
    kind: crate::CountKind,
    capacity: usize,
    lens: &[usize],
) -> Result<usize> {
    let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    let t = crate::engine::slots::Trailer {
        count_raw: word(0),
        count_copied: word(8),
        status: u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")),
        magic: u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes")),
        seq: word(24),
    };
    let fill = crate::engine::trailer::Fill::Pack {
        kind,
        lens: crate::engine::trailer::Lens::new(lens),
    };
    crate::engine::trailer::decode(&t, expected, 0, capacity, &fill, &[])
}

/// While on, readbacks made settle [`crate::StagedCopy::Auto`] on the whole-slot copy, as a
/// driver older than CUDA 12.8 makes them (the fallback no driver of the GPU test host takes);
/// an explicit [`crate::StagedCopy::Sized`] keeps its driver check. On the calling thread
/// only (readbacks made on other threads, such as parallel tests', are not affected); a test
/// that turns it on turns it off before it returns.
pub fn force_whole_slot_fallback(on: bool) {
    crate::engine::delivery::force_whole_slot_fallback(on);
}
