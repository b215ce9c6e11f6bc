//! Reliability (issue 4): a short soak, several host threads, timeouts, drops while work is in
//! flight, leaks, bad input, device faults, two GPUs. Their figures are in RELIABILITY.md.
//!
//! A device fault (illegal address) is a *sticky* error: it poisons the whole CUDA context, so
//! every fault scenario runs in a child process ([`faults`]). The test binary re-executes
//! itself with `SRB_RELIABILITY_SCENARIO=<name>`; the child runs the scenario, prints
//! `SCENARIO OK` and exits 0, and the parent checks the exit status and the output within a
//! timeout (a hang fails the test instead of hanging it).
//!
//! The suite's tally (bad inputs tried, faults survived) is printed at the end of a run that
//! ran any of these tests ([`tally`]). Tests that measure device memory or time run alone
//! (`exclusive`), so nothing else allocates or frees while they measure.
use anyhow::{ensure, Result};
use cudarc::driver::{CudaContext, CudaStream};
use sized_readback::testing::Kernels as Module;
use sized_readback::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
pub(crate) use test_support::producers::busy_then_count as busy;
use test_support::producers::launch;
use test_support::{soak, SubjectContext};

pub mod bad_input;
pub mod faults;
pub mod lifecycle;
pub mod load;

/// The reliability tests' context of device 0 (see `test_support::device`).
pub(crate) fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

/// Bad inputs tried, each the expected error (RELIABILITY.md quotes it).
static BAD_INPUTS: AtomicU64 = AtomicU64::new(0);
/// Device faults injected in child processes and survived.
static FAULTS_SURVIVED: AtomicU64 = AtomicU64::new(0);

/// The tally line printed at the end of a run, if a reliability test counted anything.
pub fn tally() -> Option<String> {
    let (bad, faults) = (
        BAD_INPUTS.load(Ordering::Relaxed),
        FAULTS_SURVIVED.load(Ordering::Relaxed),
    );
    (bad + faults > 0).then(|| {
        format!(
            "reliability tally: bad inputs tried {bad} (each the expected error), device faults \
             injected and survived {faults}"
        )
    })
}

/// `srb_fault`: a store to address 0x8 (illegal address).
pub(crate) fn fault(module: &Module, stream: &CudaStream) -> Result<()> {
    let mut off = 0u64;
    launch(
        module,
        "srb_fault",
        stream,
        1,
        32,
        &mut [(&mut off as *mut u64).cast()],
    )
}

/// [`expect_err`](test_support::check::expect_err), counted in the tally.
pub(crate) fn expect_err<T>(
    r: Result<T, Error>,
    what: &str,
    ok: impl Fn(&Error) -> bool,
) -> Result<()> {
    BAD_INPUTS.fetch_add(1, Ordering::Relaxed);
    test_support::check::expect_err(r, what, ok)
}

pub(crate) fn soak_check(r: &soak::SoakReport) -> Result<()> {
    for m in &r.first_mismatches {
        eprintln!("mismatch: {m}");
    }
    ensure!(r.mismatches == 0, "{} mismatches", r.mismatches);
    ensure!(
        r.verified + r.dropped_unwaited == r.enqueued,
        "lost readbacks"
    );
    ensure!(r.verified_data > 0 && r.negative > 0 && r.over_capacity > 0 && r.over_source > 0);
    ensure!(r.mapped > 0 && r.staged > 0);
    Ok(())
}

/// Under compute-sanitizer, launches return only once the kernel has run, so "still in
/// flight" checks cannot hold; sanitize.sh sets SRB_TIMING_ASSERT=0 to skip them.
pub(crate) fn timing_asserts() -> bool {
    env_u64("SRB_TIMING_ASSERT", 1) != 0
}

pub(crate) fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
