//! The seed program (`sized_readback::testing::seed`, the loop this crate was made for) prints
//! its expected lines with every strategy that reads back correctly, and the naive strategy
//! reproduces the bug it was written to show.
use anyhow::{ensure, Result};
use cudarc::driver::CudaContext;
use sized_readback::testing::seed::{self, SeedOptions, SeedStrategy};
use std::sync::Arc;
use test_support::{SubjectContext, Test, TRANSPORTS};

pub const TESTS: &[Test] = test_support::tests![
    golden,
    // The naive strategy's bug shows only when the copy overtakes the kernel: timing.
    naive_reproduces_the_bug.exclusive(),
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

fn seed_output(strategy: SeedStrategy) -> Result<String> {
    let mut out = Vec::new();
    seed::run(
        &ctx(),
        SeedOptions {
            strategy,
            sleep_ms: 20,
            kernel_printf: false,
        },
        &mut out,
    )?;
    Ok(String::from_utf8(out)?)
}

fn golden() -> Result<()> {
    for t in TRANSPORTS {
        let got = seed_output(SeedStrategy::Readback(t))?;
        ensure!(got == seed::EXPECTED, "{t:?} printed:\n{got}");
    }
    let got = seed_output(SeedStrategy::Sync)?;
    ensure!(got == seed::EXPECTED, "sync printed:\n{got}");
    for t in TRANSPORTS {
        let got = seed_output(SeedStrategy::Append(t))?;
        ensure!(got == seed::EXPECTED, "append over {t:?} printed:\n{got}");
    }
    Ok(())
}

fn naive_reproduces_the_bug() -> Result<()> {
    let got = seed_output(SeedStrategy::Naive)?;
    ensure!(got == seed::NAIVE, "naive printed:\n{got}");
    Ok(())
}
