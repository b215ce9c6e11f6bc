//! Launches of the test producer kernels (`csrc/testing/producers.cu`), shared by the GPU
//! test subjects that need a producer ahead of a readback.
use anyhow::Result;
use cudarc::driver::CudaStream;
use sized_readback::testing::Kernels;
use sized_readback::LaunchShape;
use std::ffi::c_void;

/// Launches kernel `name` of the test module on `stream`: `grid` blocks of `block` threads.
pub fn launch(
    module: &Kernels,
    name: &str,
    stream: &CudaStream,
    grid: u32,
    block: u32,
    args: &mut [*mut c_void],
) -> Result<()> {
    let k = module.function(name)?;
    // SAFETY: callers pass arguments matching the kernel's C signature (csrc/testing/producers.cu).
    unsafe {
        k.launch(
            stream.cu_stream(),
            LaunchShape {
                grid,
                block,
                programmatic: false,
            },
            args,
        )?
    };
    Ok(())
}

/// `srb_busy_then_count(count, n, ns)`: one thread busy for `ns` nanoseconds, then
/// `*count = n` (the kernel's other threads return at once, so one warp is launched).
pub fn busy_then_count(
    module: &Kernels,
    stream: &CudaStream,
    count: u64,
    n: i32,
    ns: u64,
) -> Result<()> {
    let (mut c, mut nn, mut t) = (count, n, ns);
    launch(
        module,
        "srb_busy_then_count",
        stream,
        1,
        32,
        &mut [
            (&mut c as *mut u64).cast(),
            (&mut nn as *mut i32).cast(),
            (&mut t as *mut u64).cast(),
        ],
    )
}
