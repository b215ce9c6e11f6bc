//! A dependent of the packaged crate, built by `cargo xtask dependent` with no CUDA toolkit
//! and no libclang reachable. Without a driver it prints the library's error and exits 0; with
//! a GPU it names the kernel image its device runs and reads back one count and its rows.
use sized_readback::{KernelImage, Readback, ReadbackConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ctx = match sized_readback::device::open(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            println!("dependent: {e}");
            return Ok(());
        }
    };
    println!(
        "dependent: device 0 runs {}",
        KernelImage::for_context(&ctx)?
    );
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[1.5f64, 2.5, 3.5, 4.5])?;
    let count = stream.clone_htod(&[3i32])?;
    let rb = Readback::<f64>::with_config(&ctx, ReadbackConfig::new(4))?;
    let ticket = rb.enqueue(&stream, &data, &count)?;
    let out = ticket.wait()?;
    assert_eq!(&out[..], &[1.5, 2.5, 3.5]);
    println!("dependent: read back {} rows: {:?}", out.count(), &out[..]);
    Ok(())
}
