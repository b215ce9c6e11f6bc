//! The long soak: a million readbacks (or as many as asked) with random counts (0, 1,
//! capacity, capacity + 1, negative, huge, random), eight element sizes, both transports,
//! every wait mode and several slots in flight, every status and every byte checked against
//! a host reference. Exits non-zero on any mismatch.
//!
//! ```text
//! cargo run --release --example soak -- --readbacks 1000000
//! ```
//! The same code (`test_support::soak`) runs, shorter, in the GPU test binary
//! (`reliability::load::soak_short`).
use anyhow::{bail, Context as _};
use clap::Parser;
use test_support::soak;

/// Runs the soak and prints readbacks verified and mismatches.
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// Readbacks to enqueue in total.
    #[arg(long, default_value_t = 1_000_000)]
    readbacks: u64,
    /// Worker threads, each with its own stream and readbacks on the one context.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Seed of the random choices.
    #[arg(long, default_value_t = 0x5eed)]
    seed: u64,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Print progress every this many readbacks per thread (0: never).
    #[arg(long, default_value_t = 0)]
    progress_every: u64,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let ctx = sized_readback::device::open(args.device).context("opening the CUDA device")?;
    let cfg = soak::SoakConfig {
        readbacks: args.readbacks,
        threads: args.threads,
        seed: args.seed,
        progress_every: args.progress_every,
        pause: None,
    };
    println!(
        "soak: {} readbacks, {} threads, seed {:#x}, device {}",
        cfg.readbacks, cfg.threads, cfg.seed, args.device
    );
    let report = soak::run(&ctx, &cfg)?;
    println!("{}", report.summary());
    for m in &report.first_mismatches {
        println!("mismatch: {m}");
    }
    if report.mismatches != 0 {
        bail!("{} mismatches", report.mismatches);
    }
    if report.verified + report.dropped_unwaited != report.enqueued {
        bail!(
            "{} enqueued but {} verified + {} dropped",
            report.enqueued,
            report.verified,
            report.dropped_unwaited
        );
    }
    Ok(())
}
