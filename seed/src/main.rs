//! The seed program (shared/seed/000_22854d1e0a2c547f.txt) on this crate.
//!
//! ```text
//! cargo run --release -p sized-readback-seed                      # prints the expected values
//! cargo run --release -p sized-readback-seed -- --strategy naive  # reproduces the stale-size bug
//! cargo run --release -p sized-readback-seed -- --strategy append # the kernel appends into the slot
//! ```
use anyhow::Context;
use clap::{Parser, ValueEnum};
use sized_readback::testing::seed::{self, SeedOptions, SeedStrategy};
use sized_readback::Transport;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Strategy {
    /// This crate, mapped transport (the kernel writes straight into pinned host memory).
    Mapped,
    /// This crate, staged transport (device slot, one fixed-size copy, an event).
    Staged,
    /// The seed's two back-to-back cudaMemcpyAsync: the second uses a stale size.
    Naive,
    /// The seed's "Solution 1": cudaStreamSynchronize between the two copies (blocks the host).
    Sync,
    /// The seed's kernel appends its results straight into the crate's mapped slot (no count in
    /// device memory, no copy, no second kernel).
    Append,
    /// As `append`, over the staged transport.
    AppendStaged,
}

/// Runs the seed's two-stream pipeline and prints what its cpuWork prints.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// How the count and the data come back.
    #[arg(long, value_enum, default_value_t = Strategy::Mapped)]
    strategy: Strategy,
    /// Milliseconds thread 0 of each kernel sleeps (the seed sleeps 3000).
    #[arg(long, default_value_t = 3000)]
    sleep_ms: u32,
    /// Silence the kernel's printf of d_size.
    #[arg(long)]
    no_kernel_printf: bool,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let ctx = sized_readback::device::open(args.device).context("opening the CUDA device")?;
    let strategy = match args.strategy {
        Strategy::Mapped => SeedStrategy::Readback(Transport::Mapped),
        Strategy::Staged => SeedStrategy::Readback(Transport::Staged),
        Strategy::Naive => SeedStrategy::Naive,
        Strategy::Sync => SeedStrategy::Sync,
        Strategy::Append => SeedStrategy::Append(Transport::Mapped),
        Strategy::AppendStaged => SeedStrategy::Append(Transport::Staged),
    };
    let opts = SeedOptions {
        strategy,
        sleep_ms: args.sleep_ms,
        kernel_printf: !args.no_kernel_printf,
    };
    let mut out = std::io::stdout().lock();
    seed::run(&ctx, opts, &mut out).context("running the seed pipeline")?;
    Ok(())
}
