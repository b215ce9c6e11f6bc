//! Comparison harness: every way to read back a device-resident count and that many
//! elements, side by side on one producer kernel and the same data, and the speed targets.
//!
//! ```text
//! cargo run --release -p sized-readback-harness                          # well under 5 minutes
//! cargo run --release -p sized-readback-harness -- --quick               # a fifth of the cycles
//! cargo run --release -p sized-readback-harness -- --reps 3000 --out results/
//! ```
//!
//! (The binary is `compare`; `cargo xtask stage` stages it as `.gpu/bin/example-compare`.)
//!
//! A pipeline: [`measure`] runs every section on the GPU into [`data::Measurements`];
//! [`targets`] evaluates the table of targets over them; [`report`] writes the text, and
//! [`output`] the JSON record and the plot. The approaches are [`sweep::Approach`] (and
//! [`select::Sel`] for the realistic producer); the oracle is also measured the way the
//! criterion bench measures it, and a target checks that the two agree.
//!
//! A target is one row of [`targets::SPECS`]. To add a target for a new approach, once the
//! sweep measures it (an [`sweep::Approach`] variant and its arm in `Rig::cycle`), add this
//! one row, e.g. for a fused mode against the oracle at small n:
//!
//! ```text
//! variant(SmallN(A::Fused, A::Oracle), AtMost(1.10), W::SecondKernel),
//! ```
//!
//! Its name ("n 1..4096, cap 1M: crate_fused p50 / oracle p50 (worst n)"), value, limit and
//! explanation all come from that row.
//!
//! Latency: host clock from just before the producer's launch to the host holding count and
//! data; p50 and p99. After a warm-up, every repetition runs each approach once, in a shuffled
//! order, as an untimed settle cycle then a timed one ([`schedule`]): no approach is measured
//! in the wake of another. Every timed cycle's count and data are checked against the host
//! reference; wrong cycles are counted and shown.
//! Output: aligned tables on stdout, `compare.json`, `latency.svg` and `table.txt` in `--out`.
mod costs;
mod cuda;
mod data;
#[cfg(test)]
mod fixture;
mod machine;
mod measure;
mod metric;
mod output;
mod pipeline;
mod plan;
mod plot;
mod report;
mod schedule;
mod seed_callback;
mod select;
mod stats;
mod sweep;
mod targets;
mod why;
mod worker;

use anyhow::{Context, Result};
use clap::Parser;

fn main() -> Result<()> {
    let args = plan::Args::parse();
    let started = std::time::Instant::now();
    let ctx = match sized_readback::device::open(args.device) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("compare: no usable CUDA device ({e}); nothing to measure.");
            return Ok(());
        }
    };
    ctx.bind_to_thread().context("cuCtxSetCurrent")?;
    let m = measure::run(&ctx, &args)?;
    let e = targets::evaluate(&m);
    let text = report::text(&m, &e);
    print!("{text}");
    output::write(&args.out, &m, &e, &text, started)?;
    if m.seed_callback.hung {
        // The stream the seed's callback ran on never finished: skip the destructors.
        std::process::exit(0);
    }
    Ok(())
}
