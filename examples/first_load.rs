//! The cost of the first readback in a fresh process: opening the device, then creating the
//! first readback (which loads the library's kernel image into the context: machine code, or PTX
//! the driver JIT-compiles; and allocates its slots), then a second one (its slots alone: the
//! image is loaded). The `*_readback_us` fields time those creations, not a readback's latency;
//! one readback then checks that the loaded image runs. Prints one JSON line;
//! scripts/gpu-verify.sh (`load` phase) runs it in many fresh processes, with machine code and
//! with `CUDA_FORCE_PTX_JIT=1 CUDA_CACHE_DISABLE=1`, and reports the medians.
use anyhow::{Context, Result};
use sized_readback::{KernelImage, Readback, ReadbackConfig};
use std::time::Instant;

fn main() -> Result<()> {
    let t0 = Instant::now();
    let ctx = sized_readback::device::open(0).context("opening device 0")?;
    let open_us = t0.elapsed().as_secs_f64() * 1e6;
    let t1 = Instant::now();
    let first = Readback::<u32>::with_config(&ctx, ReadbackConfig::new(1024))?;
    let first_us = t1.elapsed().as_secs_f64() * 1e6;
    let t2 = Instant::now();
    let second = Readback::<u32>::with_config(&ctx, ReadbackConfig::new(1024))?;
    let second_us = t2.elapsed().as_secs_f64() * 1e6;
    // One readback, so the loaded image is known to run.
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[7u32, 8, 9])?;
    let count = stream.clone_htod(&[2i32])?;
    let ticket = first.enqueue(&stream, &data, &count)?;
    let out = ticket.wait()?;
    anyhow::ensure!(out[..] == [7, 8], "read back {:?}", &out[..]);
    drop((out, second));
    println!(
        "{{\"image\": \"{}\", \"open_us\": {open_us:.1}, \"first_readback_us\": {first_us:.1}, \"second_readback_us\": {second_us:.1}}}",
        KernelImage::for_context(&ctx)?
    );
    Ok(())
}
