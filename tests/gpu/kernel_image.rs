//! The kernel image the library loads on this device.
use anyhow::{ensure, Result};
use cudarc::driver::CudaContext;
use sized_readback::testing::Kernels;
use sized_readback::{ImageKind, KernelImage, Readback};
use std::sync::Arc;
use test_support::{SubjectContext, Test};

pub const TESTS: &[Test] =
    test_support::tests![for_this_device, info_names_the_image_loaded.exclusive(),];

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

/// A readback's `info().kernel_image` is the image its context loaded, not the one the
/// environment would choose now: with `CUDA_FORCE_PTX_JIT` flipped after the load,
/// `KernelImage::for_context` changes and the readback's image does not. Exclusive: it sets a
/// process-wide variable (and puts it back).
fn info_names_the_image_loaded() -> Result<()> {
    let ctx = ctx();
    let rb = Readback::<f64>::new(&ctx, 64)?;
    let loaded = rb.info().kernel_image;
    ensure!(loaded == KernelImage::for_context(&ctx)?, "{loaded}");
    let before = std::env::var_os("CUDA_FORCE_PTX_JIT");
    let flipped = if loaded.kind() == ImageKind::Ptx {
        "0"
    } else {
        "1"
    };
    std::env::set_var("CUDA_FORCE_PTX_JIT", flipped);
    let now = KernelImage::for_context(&ctx);
    let again = Readback::<f64>::new(&ctx, 64).map(|r| r.info().kernel_image);
    match before {
        Some(v) => std::env::set_var("CUDA_FORCE_PTX_JIT", v),
        None => std::env::remove_var("CUDA_FORCE_PTX_JIT"),
    }
    let (now, again) = (now?, again?);
    ensure!(
        now.kind() != loaded.kind(),
        "the choice follows the environment: {now}"
    );
    ensure!(
        again == loaded && rb.info().kernel_image == loaded,
        "a readback of the same context runs the image loaded first ({loaded}), not {again}"
    );
    Ok(())
}
