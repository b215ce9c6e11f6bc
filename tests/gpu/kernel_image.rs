//! The kernel image the library loads on this device.
use anyhow::{ensure, Result};
use cudarc::driver::CudaContext;
use sized_readback::testing::Kernels;
use sized_readback::{ImageKind, KernelImage};
use std::sync::Arc;
use test_support::{SubjectContext, Test};

pub const TESTS: &[Test] = test_support::tests![for_this_device];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

/// The library names the image this device runs, as chosen for its compute capability and
/// `CUDA_FORCE_PTX_JIT` (gpu-verify's `ptx` phase runs this suite with it set), and the code the
/// driver loaded was compiled for that architecture.
fn for_this_device() -> Result<()> {
    let ctx = ctx();
    let (major, minor) = sized_readback::device::compute_capability(&ctx)?;
    let forced = std::env::var("CUDA_FORCE_PTX_JIT").is_ok_and(|v| !v.is_empty() && v != "0");
    let image = KernelImage::for_context(&ctx)?;
    eprintln!("device {major}.{minor}, CUDA_FORCE_PTX_JIT={forced}: {image}");
    ensure!(
        image == KernelImage::choose(major, minor, forced)?,
        "{image}"
    );
    if forced {
        ensure!(
            image.kind() == ImageKind::Ptx,
            "{image} under CUDA_FORCE_PTX_JIT"
        );
    } else if (major, minor) == (9, 0) {
        ensure!(
            (image.kind(), image.arch()) == (ImageKind::MachineCode, 90),
            "{image}"
        );
    }
    let kernels = Kernels::load(&ctx)?;
    ensure!(
        kernels.image().kind() == image.kind(),
        "test kernels: {}",
        kernels.image()
    );
    let loaded = kernels.function("srb_fill_pattern")?.ptx_version()?;
    ensure!(
        loaded == image.arch() as i32,
        "the loaded code was compiled from compute_{loaded}, the image is {image}"
    );
    Ok(())
}
