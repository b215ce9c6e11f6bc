//! The sized launch's exact-grid form (`SizedLaunchBuilder::exact_grid`): the one body kernel
//! runs with ceil(count / items per block) blocks, set on the device; not at all for a count of
//! 0, past the capacity or negative, and again at the next count that fits; the same in a
//! recording replayed with changing counts; bodies other than one kernel launch are typed
//! errors.
use crate::sized_launch::{check_rows, unavailable_here, Bench, SENTINEL, THREADS};
use anyhow::{ensure, Result};
use sized_readback::testing::CapturedGraph;
use sized_readback::{Error, SizedLaunch};
use test_support::Test;

pub const TESTS: &[Test] = test_support::tests![
    the_body_runs_with_the_counts_grid.exclusive(),
    a_recording_sizes_each_replays_grid.exclusive(),
    bodies_other_than_one_kernel_are_refused.exclusive(),
];

/// The exact grid's items per block: the test body's block, one item a thread.
const PER_BLOCK: u64 = THREADS as u64;

impl Bench {
    /// The exact-grid form over the test body, recorded for the capacity.
    fn build_exact(&self, capacity: u64) -> sized_readback::Result<SizedLaunch> {
        let raw = self.raw_count();
        SizedLaunch::builder(raw, capacity)
            .exact_grid(PER_BLOCK)
            .build(&crate::sized_launch::ctx(), |class| self.record(class, raw))
    }

    /// Checks that the body ran once with the grid for `n` and wrote rows 0..n and no more,
    /// or, for `ran == false`, that it did not run at all.
    fn check_grid(&self, n: usize, ran: bool) -> Result<()> {
        let meta = self.stream.clone_dtoh(&self.meta)?;
        let out = self.stream.clone_dtoh(&self.out)?;
        if !ran {
            ensure!(meta[3] == 0, "count {n}: the body ran {} times", meta[3]);
            ensure!(out[0] == SENTINEL, "count {n}: out[0] written");
            return Ok(());
        }
        ensure!(meta[3] == 1, "count {n}: {} bodies ran, not 1", meta[3]);
        let threads = (n as u64).div_ceil(PER_BLOCK) * PER_BLOCK;
        ensure!(
            meta[1] == threads,
            "count {n}: {} threads launched, not {threads}",
            meta[1]
        );
        check_rows(&out, n)
    }
}

fn the_body_runs_with_the_counts_grid() -> Result<()> {
    const CAPACITY: u64 = 20000;
    let mut b = Bench::new(CAPACITY as usize)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let launch = b.build_exact(CAPACITY)?;
    ensure!(launch.classes() == [CAPACITY] && launch.capacity() == CAPACITY);
    // A count of 0 and one past the capacity disable the body; the next one enables it again.
    for n in [
        1u64,
        255,
        256,
        257,
        0,
        1000,
        CAPACITY + 1,
        19999,
        CAPACITY,
        3,
    ] {
        b.reset_outputs(CAPACITY as usize)?;
        b.set_count(n as i32)?;
        let t = launch.enqueue(&b.stream)?;
        match t.wait() {
            Ok(done) => {
                ensure!(n <= CAPACITY, "count {n} past the capacity ran: {done:?}");
                ensure!(
                    done.count() == n && done.class() == 0,
                    "count {n}: {done:?}"
                );
                b.check_grid(n as usize, n > 0)?;
            }
            Err(Error::CountExceedsCapacity { count, capacity }) => {
                ensure!(n > CAPACITY && count == n && capacity as u64 == CAPACITY);
                b.check_grid(n as usize, false)?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    b.reset_outputs(CAPACITY as usize)?;
    b.set_count(-5)?;
    let refused = launch.enqueue(&b.stream)?.wait();
    ensure!(
        matches!(refused, Err(Error::NegativeCount { count: -5 })),
        "a negative count: {refused:?}"
    );
    b.check_grid(0, false)
}

fn a_recording_sizes_each_replays_grid() -> Result<()> {
    const CAPACITY: u64 = 5000;
    let mut b = Bench::new(CAPACITY as usize)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let launch = b.build_exact(CAPACITY)?;
    let s = b.stream.cu_stream();
    // SAFETY: the stream's context is bound (Bench::new); the sized launch outlives the graph
    // (declared after `launch`, so dropped first). CapturedGraph uploads after instantiating,
    // as a graph with device-updatable nodes needs.
    let graph = unsafe { CapturedGraph::capture(&b.stream, || launch.record(s))? };
    for n in [7u64, 0, 4999, 5000, 256, 1] {
        b.reset_outputs(CAPACITY as usize)?;
        b.set_count(n as i32)?;
        graph.launch()?;
        b.stream.synchronize()?;
        let done = launch
            .recorded_outcome()?
            .expect("an outcome after a replay");
        ensure!(
            done.count() == n && done.class() == 0,
            "replay of {n}: {done:?}"
        );
        b.check_grid(n as usize, n > 0)?;
    }
    Ok(())
}

fn bodies_other_than_one_kernel_are_refused() -> Result<()> {
    let b = Bench::new(64)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let raw = b.raw_count();
    let ctx = crate::sized_launch::ctx();
    let refused = |r: sized_readback::Result<SizedLaunch>, what: &str| -> Result<()> {
        match r {
            Err(Error::BodyRecording {
                class: 0, reason, ..
            }) => {
                ensure!(reason.contains(what), "{reason}");
                Ok(())
            }
            other => anyhow::bail!("expected a body-recording error ({what}): {other:?}"),
        }
    };
    let nothing = |_: &sized_readback::SizeClass<'_>| -> Result<(), String> { Ok(()) };
    refused(
        SizedLaunch::builder(raw, 64)
            .exact_grid(32)
            .build(&ctx, nothing),
        "recorded nothing",
    )?;
    let twice = |class: &sized_readback::SizeClass<'_>| {
        b.record(class, raw)?;
        b.record(class, raw)
    };
    refused(
        SizedLaunch::builder(raw, 64)
            .exact_grid(32)
            .build(&ctx, twice),
        "recorded 2 operations",
    )?;
    let zero = SizedLaunch::builder(raw, 64)
        .exact_grid(0)
        .build(&ctx, nothing);
    ensure!(
        matches!(zero, Err(Error::InvalidConfig { .. })),
        "0 items per block: {zero:?}"
    );
    Ok(())
}
