//! Which of the embedded kernel images a device runs.
//!
//! The library's kernels ship precompiled (by NVRTC 12.0 and 12.8, committed in `kernels/`):
//! machine code for every GPU generation from Volta to Blackwell, and PTX (`.version 8.0`,
//! which drivers from R525 on compile) for the others. Nothing is compiled when this crate is
//! built, and nothing but `libcuda` is needed when it runs.
use crate::device::compute_capability;
use crate::error::Result;
use crate::raw::images;
use cudarc::driver::CudaContext;
use std::fmt;

/// The targets the embedded kernels hold machine code for (`sm_*`) and the PTX they carry
/// (`compute_*`, JIT-compiled by the driver for any other device from compute capability 7.0).
pub const KERNEL_TARGETS: &str = images::TARGETS;

/// What a device loads of the embedded kernels: machine code, or PTX that the driver compiles
/// when the module is loaded (the first readback in a context; the driver caches the result).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageKind {
    /// `sm_XX` machine code, run as it is.
    MachineCode,
    /// `compute_XX` PTX, compiled by the driver's JIT.
    Ptx,
}

/// One embedded kernel image, as chosen for a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelImage {
    kind: ImageKind,
    arch: u32,
    bytes: usize,
}

impl KernelImage {
    pub(crate) fn new(kind: ImageKind, arch: u32, bytes: usize) -> Self {
        KernelImage { kind, arch, bytes }
    }

    /// Machine code or PTX.
    pub fn kind(&self) -> ImageKind {
        self.kind
    }

    /// The architecture times ten: 90 for `sm_90` or `compute_90`.
    pub fn arch(&self) -> u32 {
        self.arch
    }

    /// The image's size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The image the library loads on a device of compute capability `major.minor`, with
    /// `CUDA_FORCE_PTX_JIT` as the environment has it now. [`crate::Error::UnsupportedDevice`] below
    /// compute capability 7.0.
    ///
    /// ```
    /// use sized_readback::{ImageKind, KernelImage};
    /// let v100 = KernelImage::for_compute_capability(7, 0)?;
    /// assert_eq!((v100.kind(), v100.arch()), (ImageKind::MachineCode, 70));
    /// let pascal = KernelImage::for_compute_capability(6, 1);
    /// assert!(matches!(pascal, Err(sized_readback::Error::UnsupportedDevice { major: 6, minor: 1 })));
    /// # Ok::<(), sized_readback::Error>(())
    /// ```
    pub fn for_compute_capability(major: u32, minor: u32) -> Result<Self> {
        Self::choose(major, minor, images::force_ptx_jit())
    }

    /// As [`KernelImage::for_compute_capability`], with the PTX path forced or not.
    pub fn choose(major: u32, minor: u32, force_ptx: bool) -> Result<Self> {
        images::LIBRARY
            .select(major, minor, force_ptx)
            .map(|(image, _)| image)
    }

    /// The image the library would load in `ctx`'s device now, from its compute capability and
    /// `CUDA_FORCE_PTX_JIT` as the environment has it now. A context that loaded the kernels
    /// under another environment runs the image it loaded then: a readback's
    /// [`crate::ReadbackInfo::kernel_image`] names that one.
    pub fn for_context(ctx: &CudaContext) -> Result<Self> {
        let (major, minor) = compute_capability(ctx)?;
        Self::for_compute_capability(major, minor)
    }
}

impl fmt::Display for KernelImage {
    /// E.g. `sm_90 (machine code, N bytes)` or `compute_90 (PTX, JIT-compiled, N bytes)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ImageKind::MachineCode => {
                write!(f, "sm_{} (machine code, {} bytes)", self.arch, self.bytes)
            }
            ImageKind::Ptx => write!(
                f,
                "compute_{} (PTX, JIT-compiled, {} bytes)",
                self.arch, self.bytes
            ),
        }
    }
}
