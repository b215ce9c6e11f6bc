//! The committed kernel images (`kernels/`, made by `cargo xtask regen`), embedded, and the
//! choice of one for a device: machine code of the same major architecture and the newest
//! minor not above the device's, else the newest PTX not above the device (JIT-compiled by the
//! driver). `CUDA_FORCE_PTX_JIT=1` picks the PTX, as the driver does for a fatbin.
//!
//! Why images per target and not one fatbin: choosing here lets [`crate::KernelImage`] name
//! exactly what a device runs, and refuses a device below 7.0 with a typed error before any
//! load, instead of `CUDA_ERROR_NO_BINARY_FOR_GPU` at the first launch.
use crate::error::{Error, Result};
use crate::kernel_image::{ImageKind, KernelImage};

/// 16-byte alignment for an embedded image: cuModuleLoadData reads it in place.
#[repr(C, align(16))]
pub(crate) struct Aligned<B: ?Sized>(pub(crate) B);

/// Machine code for one architecture (`sm_<arch>`).
pub(crate) struct Cubin {
    pub(crate) arch: u32,
    pub(crate) bytes: &'static Aligned<[u8]>,
}

/// PTX for one virtual architecture (`compute_<arch>`), NUL-terminated.
pub(crate) struct Ptx {
    pub(crate) arch: u32,
    pub(crate) text: &'static str,
}

/// Every image of one translation unit (the library's kernels, or the test kernels).
pub(crate) struct ImageSet {
    pub(crate) cubins: &'static [Cubin],
    pub(crate) ptx: &'static [Ptx],
}

include!("generated/images.rs");

/// The oldest compute capability the images serve, times ten.
pub(crate) const MIN_ARCH: u32 = 70;

impl ImageSet {
    /// The image for a device of compute capability `major.minor`.
    pub(crate) fn select(
        &'static self,
        major: u32,
        minor: u32,
        force_ptx: bool,
    ) -> Result<(KernelImage, &'static [u8])> {
        // Architectures compare as (major, minor) pairs: no arithmetic on the device's values.
        let device = (major, minor);
        let split = |arch: u32| (arch / 10, arch % 10);
        if device < split(MIN_ARCH) {
            return Err(Error::UnsupportedDevice { major, minor });
        }
        if !force_ptx {
            // A cubin runs on its own major architecture, at its minor or a newer one.
            let cubin = self
                .cubins
                .iter()
                .filter(|c| split(c.arch).0 == major && split(c.arch) <= device)
                .max_by_key(|c| c.arch);
            if let Some(c) = cubin {
                let image = KernelImage::new(ImageKind::MachineCode, c.arch, c.bytes.0.len());
                return Ok((image, &c.bytes.0));
            }
        }
        let p = self
            .ptx
            .iter()
            .filter(|p| split(p.arch) <= device)
            .max_by_key(|p| p.arch)
            .expect("PTX for the oldest supported architecture is embedded");
        // The length without the terminating NUL, as the committed file.
        let image = KernelImage::new(ImageKind::Ptx, p.arch, p.text.len() - 1);
        Ok((image, p.text.as_bytes()))
    }
}

/// Whether the driver is told to JIT PTX rather than load machine code (`CUDA_FORCE_PTX_JIT`
/// set to anything but 0, as the driver reads it).
pub(crate) fn force_ptx_jit() -> bool {
    std::env::var("CUDA_FORCE_PTX_JIT").is_ok_and(|v| !v.is_empty() && v != "0")
}
