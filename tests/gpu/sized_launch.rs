//! Sized launch (`SizedLaunch`): the body of the count's size class runs with that class's
//! grid and no other body runs; every class boundary; counts past the capacity, negative ones;
//! a loop of launches with no host synchronization between them, whose counts a kernel writes
//! on the device; a recording into a stream capture replayed with changing counts; bad
//! configurations and bodies that fail to record as typed errors; every count type; a ticket
//! whose status entry was reused; a wait that times out; enqueues from several threads.
use anyhow::{bail, ensure, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use sized_readback::testing::{
    driver_has_conditionals, launch_sized_body, CapturedGraph, Kernel, Kernels,
};
use sized_readback::{Error, RawCount, SizedLaunch};
use std::sync::Arc;
use test_support::producers::build_beside_other_work;
use test_support::{SubjectContext, Test};

// Every test runs alone: building a sized launch captures its bodies (see the harness's
// `exclusive`).
pub const TESTS: &[Test] = test_support::tests![
    every_class_boundary_runs_its_body_alone.exclusive(),
    counts_past_the_capacity_or_negative_run_nothing.exclusive(),
    a_loop_of_device_counts_with_no_host_sync.exclusive(),
    a_recording_in_a_capture_runs_each_replays_class.exclusive(),
    bad_configurations_and_bodies_are_typed_errors.exclusive(),
    every_count_type_is_read_as_its_type.exclusive(),
    a_ticket_256_launches_old_is_an_overrun.exclusive(),
    a_wait_times_out_behind_a_slow_producer.exclusive(),
    enqueues_from_several_threads_each_get_their_outcome.exclusive(),
    a_count_of_another_kind_of_memory_is_refused.exclusive(),
    building_waits_for_no_other_work.exclusive(),
    a_stream_kept_past_the_build_stays_usable.exclusive(),
];

pub(crate) fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

/// The test body's threads per block.
pub(crate) const THREADS: u32 = sized_readback::testing::SIZED_BODY_BLOCK;
pub(crate) const SENTINEL: u64 = 0xDEAD_BEEF;

/// The device side of one test: the count, the body's output and its meta words (also the
/// exact-grid form's tests', `sized_grid.rs`).
pub(crate) struct Bench {
    pub(crate) stream: Arc<CudaStream>,
    count: CudaSlice<i32>,
    pub(crate) out: CudaSlice<u64>,
    pub(crate) meta: CudaSlice<u64>,
    body: Kernel,
}

impl Bench {
    pub(crate) fn new(capacity: usize) -> Result<Self> {
        let ctx = ctx();
        let stream = ctx.new_stream()?;
        Ok(Bench {
            count: stream.alloc_zeros::<i32>(1)?,
            out: stream.clone_htod(&vec![SENTINEL; capacity + 64])?,
            meta: stream.alloc_zeros::<u64>(4)?,
            body: Kernels::load(&ctx)?.function("srb_test_sized_body")?,
            stream,
        })
    }
    pub(crate) fn ptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        s.device_ptr(&self.stream).0
    }
    pub(crate) fn raw_count(&self) -> RawCount {
        RawCount::i32(self.ptr(&self.count))
    }
    /// A sized launch over `classes` whose bodies launch srb_test_sized_body with n_max threads.
    pub(crate) fn build(&self, classes: &[u64]) -> sized_readback::Result<SizedLaunch> {
        self.build_counted(self.raw_count(), classes)
    }
    /// As `build`, sized by `raw` (the body reads its first 4 bytes as an i32: the counts
    /// that run a body are below 2^31).
    fn build_counted(&self, raw: RawCount, classes: &[u64]) -> sized_readback::Result<SizedLaunch> {
        self.build_in(&ctx(), raw, classes)
    }
    /// As `build_counted`, in the context object `in_ctx`.
    fn build_in(
        &self,
        in_ctx: &Arc<CudaContext>,
        raw: RawCount,
        classes: &[u64],
    ) -> sized_readback::Result<SizedLaunch> {
        let capacity = *classes.last().unwrap();
        let launch = SizedLaunch::builder(raw, capacity)
            .classes(classes.iter().copied())
            .build(in_ctx, |class| self.record(class, raw))?;
        Ok(launch)
    }
    /// Records `class`'s body: srb_test_sized_body with n_max threads, counted by `raw`.
    pub(crate) fn record(
        &self,
        class: &sized_readback::SizeClass<'_>,
        raw: RawCount,
    ) -> sized_readback::Result<()> {
        let (out, meta) = (self.ptr(&self.out), self.ptr(&self.meta));
        // SAFETY: the test body; out holds the capacity + 64 words (every class's n_max is at
        // most the capacity), meta 4; the stream is the class's, of this context.
        unsafe {
            launch_sized_body(
                &self.body,
                class.stream().cu_stream(),
                raw.ptr(),
                class.n_max(),
                class.index() as u32,
                out,
                meta,
            )
        }
    }
    pub(crate) fn set_count(&mut self, n: i32) -> Result<()> {
        self.stream.memcpy_htod(&[n], &mut self.count)?;
        Ok(())
    }
    pub(crate) fn reset_outputs(&mut self, capacity: usize) -> Result<()> {
        self.stream
            .memcpy_htod(&vec![SENTINEL; capacity + 64], &mut self.out)?;
        self.stream.memset_zeros(&mut self.meta)?;
        Ok(())
    }
    /// Checks that exactly one body ran, class `class` of `classes`, for count `n`.
    fn check_ran(&self, classes: &[u64], class: usize, n: usize) -> Result<()> {
        let meta = self.stream.clone_dtoh(&self.meta)?;
        let out = self.stream.clone_dtoh(&self.out)?;
        let n_max = classes[class];
        ensure!(meta[3] == 1, "count {n}: {} bodies ran, not 1", meta[3]);
        ensure!(
            meta[2] == class as u64,
            "count {n}: class {} ran, not {class}",
            meta[2]
        );
        ensure!(meta[0] == n_max, "count {n}: n_max {} != {n_max}", meta[0]);
        let threads = n_max.div_ceil(THREADS as u64) * THREADS as u64;
        ensure!(
            meta[1] == threads,
            "count {n}: {} threads, not {threads}",
            meta[1]
        );
        check_rows(&out, n)
    }
}

/// The test body's rows for count `n`: `out[i] = 2i + 1` below it, the sentinel at `out[n]`.
pub(crate) fn check_rows(out: &[u64], n: usize) -> Result<()> {
    for (i, &v) in out[..n].iter().enumerate() {
        ensure!(v == 2 * i as u64 + 1, "count {n}: out[{i}] = {v}");
    }
    ensure!(
        out[n] == SENTINEL,
        "count {n}: out[{n}] written past the count"
    );
    Ok(())
}

/// The class of count `n`: the first whose n_max holds it.
fn class_of(classes: &[u64], n: u64) -> usize {
    classes.iter().position(|&c| n <= c).unwrap()
}

/// Skips (by passing with nothing to check) where the driver has no conditionals, after
/// checking that building says so.
pub(crate) fn unavailable_here(b: &Bench) -> Result<bool> {
    if driver_has_conditionals() {
        return Ok(false);
    }
    match b.build(&[16]) {
        Err(Error::SizedLaunchUnavailable { .. }) => Ok(true),
        other => bail!("a pre-12.8 driver built a sized launch: {other:?}"),
    }
}

fn every_class_boundary_runs_its_body_alone() -> Result<()> {
    let classes = [1024u64, 4096, 16384, 20000];
    let mut b = Bench::new(20000)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let launch = b.build(&classes)?;
    ensure!(launch.classes() == classes && launch.capacity() == 20000);
    for n in [
        0u64, 1, 1023, 1024, 1025, 4096, 4097, 16384, 16385, 19999, 20000,
    ] {
        b.reset_outputs(20000)?;
        b.set_count(n as i32)?;
        let t = launch.enqueue(&b.stream)?;
        let done = t.wait()?;
        ensure!(done.count() == n, "outcome count {} != {n}", done.count());
        let k = class_of(&classes, n);
        ensure!(
            done.class() == k,
            "count {n}: outcome class {} != {k}",
            done.class()
        );
        b.check_ran(&classes, k, n as usize)?;
    }
    Ok(())
}

fn counts_past_the_capacity_or_negative_run_nothing() -> Result<()> {
    let classes = [64u64, 256, 1000];
    let mut b = Bench::new(1000)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let launch = b.build(&classes)?;
    for (n, want) in [
        (1001i32, "over"),
        (i32::MAX, "over"),
        (-3, "negative"),
        (-1, "negative"),
    ] {
        b.reset_outputs(1000)?;
        b.set_count(n)?;
        let got = launch.enqueue(&b.stream)?.wait();
        match (want, got) {
            ("over", Err(Error::CountExceedsCapacity { count, capacity })) => {
                ensure!(
                    count == n as u64 && capacity == 1000,
                    "{count} of {capacity}"
                )
            }
            ("negative", Err(Error::NegativeCount { count })) => {
                ensure!(count == n as i64, "negative count {count} != {n}")
            }
            (_, other) => bail!("count {n}: expected the {want} error, got {other:?}"),
        }
        let meta = b.stream.clone_dtoh(&b.meta)?;
        ensure!(meta[3] == 0, "count {n}: {} bodies ran", meta[3]);
        ensure!(
            b.stream.clone_dtoh(&b.out)?[0] == SENTINEL,
            "count {n}: out written"
        );
    }
    // And the launch still works afterwards.
    b.reset_outputs(1000)?;
    b.set_count(300)?;
    ensure!(launch.enqueue(&b.stream)?.wait()?.class() == 2);
    b.check_ran(&classes, 2, 300)
}

fn a_loop_of_device_counts_with_no_host_sync() -> Result<()> {
    // 200 launches, each after a count written on the stream; the host waits only at the end,
    // each ticket then telling its own count and class (the ring holds 256).
    let classes = [32u64, 128, 512, 2048];
    let mut b = Bench::new(2048)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let launch = b.build(&classes)?;
    let counts: Vec<i32> = (0..200).map(|i: i32| (i * 977 + 13) % 2049).collect();
    let mut tickets = Vec::new();
    for &n in &counts {
        b.set_count(n)?; // an async copy on the stream, ordered before the launch
        tickets.push(launch.enqueue(&b.stream)?);
    }
    for (t, &n) in tickets.iter().zip(&counts) {
        let done = t.wait()?;
        ensure!(done.count() == n as u64, "count {} != {n}", done.count());
        ensure!(
            done.class() == class_of(&classes, n as u64),
            "count {n}: class {}",
            done.class()
        );
    }
    let meta = b.stream.clone_dtoh(&b.meta)?;
    ensure!(
        meta[3] == counts.len() as u64,
        "{} bodies ran for {} launches",
        meta[3],
        counts.len()
    );
    Ok(())
}

fn a_recording_in_a_capture_runs_each_replays_class() -> Result<()> {
    let classes = [100u64, 1000, 5000];
    let mut b = Bench::new(5000)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let launch = b.build(&classes)?;
    ensure!(
        launch.recorded_outcome()?.is_none(),
        "an outcome before any replay"
    );
    let s = b.stream.cu_stream();
    let mut refused = None;
    // SAFETY: the stream's context is bound (Bench::new); the sized launch outlives the graph
    // (declared after `launch`, so dropped first).
    let graph = unsafe {
        CapturedGraph::capture(&b.stream, || -> Result<()> {
            refused = Some(launch.enqueue(&b.stream));
            launch.record(s)?;
            Ok(())
        })?
    };
    ensure!(
        matches!(refused, Some(Err(Error::StreamCapturing))),
        "enqueue on a capturing stream: {refused:?}"
    );
    for n in [0u64, 99, 100, 101, 4999, 5000] {
        b.reset_outputs(5000)?;
        b.set_count(n as i32)?;
        graph.launch()?;
        b.stream.synchronize()?;
        let done = launch
            .recorded_outcome()?
            .expect("an outcome after a replay");
        let k = class_of(&classes, n);
        ensure!(
            done.count() == n && done.class() == k,
            "replay of {n}: {done:?}"
        );
        b.check_ran(&classes, k, n as usize)?;
    }
    b.set_count(5001)?;
    graph.launch()?;
    b.stream.synchronize()?;
    ensure!(
        matches!(
            launch.recorded_outcome(),
            Err(Error::CountExceedsCapacity { count: 5001, .. })
        ),
        "replay past the capacity"
    );
    Ok(())
}

fn bad_configurations_and_bodies_are_typed_errors() -> Result<()> {
    let b = Bench::new(64)?;
    let count = b.raw_count();
    let cfg =
        |r: sized_readback::Result<SizedLaunch>| matches!(r, Err(Error::InvalidConfig { .. }));
    let nothing = |_: &sized_readback::SizeClass<'_>| -> Result<(), String> { Ok(()) };
    ensure!(
        cfg(SizedLaunch::builder(count, 0).build(&ctx(), nothing)),
        "capacity 0"
    );
    ensure!(
        cfg(SizedLaunch::builder(count, 64)
            .classes([])
            .build(&ctx(), nothing)),
        "no class"
    );
    ensure!(cfg(SizedLaunch::builder(count, 64)
        .classes([32, 16, 64])
        .build(&ctx(), nothing)));
    ensure!(cfg(SizedLaunch::builder(count, 64)
        .classes([16, 32])
        .build(&ctx(), nothing)));
    let misaligned = RawCount::i32(count.ptr() + 1);
    ensure!(matches!(
        SizedLaunch::builder(misaligned, 64).build(&ctx(), nothing),
        Err(Error::BadPointer { .. })
    ));
    if unavailable_here(&b)? {
        return Ok(());
    }
    // A body that returns an error: the class is named, nothing is built.
    let failing = SizedLaunch::builder(count, 64)
        .classes([8, 64])
        .build(&ctx(), |class| {
            if class.index() == 1 {
                Err("no workspace")
            } else {
                Ok(())
            }
        });
    match failing {
        Err(Error::BodyRecording {
            class: 1,
            n_max: 64,
            reason,
        }) => {
            ensure!(reason.contains("no workspace"), "{reason}")
        }
        other => bail!("a failing body built: {other:?}"),
    }
    // A body that synchronizes its capturing stream: the capture fails, typed.
    let syncing =
        SizedLaunch::builder(count, 64).build(&ctx(), |class| class.stream().synchronize());
    ensure!(
        matches!(syncing, Err(Error::BodyRecording { class: 0, .. })),
        "a synchronizing body: {syncing:?}"
    );
    // The context is still usable: a good launch builds and runs.
    let mut b = b;
    let launch = b.build(&[64])?;
    b.set_count(5)?;
    ensure!(launch.enqueue(&b.stream)?.wait()?.count() == 5);
    Ok(())
}

fn every_count_type_is_read_as_its_type() -> Result<()> {
    let classes = [100u64, 1000];
    let mut b = Bench::new(1000)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let mut word = b.stream.alloc_zeros::<u64>(1)?;
    let ptr = b.ptr(&word);
    // (count kind, the 8 bytes at the count, the outcome: Ok(count) or the error's count)
    type Want = std::result::Result<u64, (&'static str, i128)>;
    let cases: [(RawCount, u64, Want); 9] = [
        (RawCount::u32(ptr), 999, Ok(999)),
        // The high half is not the u32's: only the first 4 bytes are read.
        (RawCount::u32(ptr), (7 << 32) | 100, Ok(100)),
        (RawCount::u32(ptr), 0xFFFF_FFFF, Err(("over", 0xFFFF_FFFF))),
        (RawCount::i64(ptr), 101, Ok(101)),
        (RawCount::i64(ptr), -5i64 as u64, Err(("negative", -5))),
        (RawCount::i64(ptr), 1 << 40, Err(("over", 1 << 40))),
        (RawCount::u64(ptr), 1000, Ok(1000)),
        (RawCount::u64(ptr), 1001, Err(("over", 1001))),
        (
            RawCount::u64(ptr),
            u64::MAX,
            Err(("over", u64::MAX as i128)),
        ),
    ];
    for (raw, bytes, want) in cases {
        let launch = b.build_counted(raw, &classes)?;
        b.reset_outputs(1000)?;
        b.stream.memcpy_htod(&[bytes], &mut word)?;
        let got = launch.enqueue(&b.stream)?.wait();
        let what = format!("{:?} over {bytes:#x}", raw.kind());
        match (want, got) {
            (Ok(n), Ok(done)) => {
                ensure!(done.count() == n, "{what}: count {}", done.count());
                let k = class_of(&classes, n);
                ensure!(done.class() == k, "{what}: class {}", done.class());
                b.check_ran(&classes, k, n as usize)?;
            }
            (Err(("over", n)), Err(Error::CountExceedsCapacity { count, capacity })) => {
                ensure!(count as i128 == n && capacity == 1000, "{what}: {count}")
            }
            (Err(("negative", n)), Err(Error::NegativeCount { count })) => {
                ensure!(count as i128 == n, "{what}: {count}")
            }
            (want, got) => bail!("{what}: expected {want:?}, got {got:?}"),
        }
    }
    Ok(())
}

fn a_ticket_256_launches_old_is_an_overrun() -> Result<()> {
    // The boundary: 255 later launches leave a ticket readable; the 256th, which reuses its
    // status entry, makes it an overrun as soon as it is enqueued, before it has run (the
    // stream is held behind a slow kernel, so the entry still holds the old outcome).
    let b = Bench::new(64)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let launch = b.build(&[64])?;
    let kernels = Kernels::load(&ctx())?;
    let count = b.ptr(&b.count);
    test_support::producers::busy_then_count(&kernels, &b.stream, count, 9, 200_000_000)?;
    let first = launch.enqueue(&b.stream)?;
    let mut later = Vec::new();
    for _ in 0..255 {
        later.push(launch.enqueue(&b.stream)?);
    }
    let done = first.wait()?;
    ensure!(done.count() == 9, "255 launches later: {done:?}");
    test_support::producers::busy_then_count(&kernels, &b.stream, count, 9, 200_000_000)?;
    let reuser = launch.enqueue(&b.stream)?;
    ensure!(reuser.seq() == first.seq() + 256);
    let got = first.wait();
    ensure!(
        matches!(got, Err(Error::Overrun { seq }) if seq == first.seq()),
        "a ticket whose entry a queued launch will reuse: {got:?}"
    );
    ensure!(reuser.wait()?.count() == 9, "the reusing ticket");
    ensure!(later[254].wait()?.count() == 9, "the 255th later ticket");
    Ok(())
}

fn a_wait_times_out_behind_a_slow_producer() -> Result<()> {
    let mut b = Bench::new(64)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let launch = b.build(&[16, 64])?;
    let kernels = Kernels::load(&ctx())?;
    b.set_count(0)?;
    // 200 ms before the count becomes 21.
    test_support::producers::busy_then_count(
        &kernels,
        &b.stream,
        b.ptr(&b.count),
        21,
        200_000_000,
    )?;
    let launched = std::time::Instant::now();
    let t = launch.enqueue(&b.stream)?;
    let enqueued = launched.elapsed();
    let short = t.wait_timeout(std::time::Duration::from_millis(5));
    ensure!(
        matches!(short, Err(Error::Timeout { .. })),
        "a 5 ms wait behind 200 ms: {short:?}, the enqueue having taken {enqueued:?} and the \
         wait returned {:?} after the producer's launch",
        launched.elapsed()
    );
    let done = t.wait_timeout(std::time::Duration::from_secs(20))?;
    ensure!(done.count() == 21 && done.class() == 1, "{done:?}");
    b.check_ran(&[16, 64], 1, 21)
}

fn enqueues_from_several_threads_each_get_their_outcome() -> Result<()> {
    let classes = [64u64, 512, 4096];
    let mut b = Bench::new(4096)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let launch = b.build(&classes)?;
    b.set_count(300)?;
    b.stream.synchronize()?;
    let seqs = std::thread::scope(|sc| -> Result<Vec<u64>> {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let launch = &launch;
                sc.spawn(move || -> Result<Vec<u64>> {
                    let stream = ctx().new_stream()?;
                    let mut seqs = Vec::new();
                    for _ in 0..50 {
                        let t = launch.enqueue(&stream)?;
                        let done = t.wait()?;
                        ensure!(done.count() == 300 && done.class() == 1, "{done:?}");
                        seqs.push(t.seq());
                    }
                    Ok(seqs)
                })
            })
            .collect();
        let mut all = Vec::new();
        for w in workers {
            all.extend(
                w.join()
                    .map_err(|_| anyhow::anyhow!("a worker panicked"))??,
            );
        }
        Ok(all)
    })?;
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    sorted.dedup();
    ensure!(
        sorted.len() == 200,
        "{} distinct sequence numbers of 200",
        sorted.len()
    );
    // Launches of one sized launch run one at a time (one graph), whatever their streams:
    // every body ran, once each.
    let meta = b.stream.clone_dtoh(&b.meta)?;
    ensure!(meta[3] == 200, "{} bodies ran for 200 launches", meta[3]);
    let out = b.stream.clone_dtoh(&b.out)?;
    for (i, &v) in out[..300].iter().enumerate() {
        ensure!(v == 2 * i as u64 + 1, "out[{i}] = {v}");
    }
    ensure!(out[300] == SENTINEL, "out[300] written past the count");
    Ok(())
}

fn a_count_of_another_kind_of_memory_is_refused() -> Result<()> {
    let b = Bench::new(64)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let nothing = |_: &sized_readback::SizeClass<'_>| -> Result<(), String> { Ok(()) };
    // An aligned address no allocation holds.
    let stray = RawCount::i32(0x10_0000_0000);
    let got = SizedLaunch::builder(stray, 64).build(&ctx(), nothing);
    ensure!(
        matches!(got, Err(Error::BadPointer { .. })),
        "a count no allocation holds: {got:?}"
    );
    Ok(())
}

/// Building waits for no other work of the context, on a context object that holds no cudarc
/// stream (as a C or Python caller's does): the capture stream is the library's own, not
/// cudarc's `new_stream` (which synchronizes such a context), and its buffers are zeroed off
/// the legacy stream (which waits for every blocking stream). The launch built there runs.
fn building_waits_for_no_other_work() -> Result<()> {
    let classes = [1024u64, 4096];
    let mut b = Bench::new(4096)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let seen = build_beside_other_work(&ctx(), |own| {
        Ok(b.build_in(own, b.raw_count(), &classes)?)
    })?;
    ensure!(
        seen.other_work_still_running,
        "the build waited for other work: it took {:?}",
        seen.took
    );
    let own = sized_readback::device::open(0)?;
    let launch = b.build_in(&own, b.raw_count(), &classes)?;
    b.reset_outputs(4096)?;
    b.set_count(2000)?;
    ensure!(launch.enqueue(&b.stream)?.wait()?.count() == 2000);
    b.check_ran(&classes, 1, 2000)
}

/// A body closure that keeps a clone of its class's stream past the build can still use it:
/// the library does not destroy a stream it lent while a clone lives. A launch enqueued on
/// the kept stream runs its class.
fn a_stream_kept_past_the_build_stays_usable() -> Result<()> {
    let classes = [64u64, 256];
    let mut b = Bench::new(256)?;
    if unavailable_here(&b)? {
        return Ok(());
    }
    let mut kept: Vec<Arc<CudaStream>> = Vec::new();
    let count = b.raw_count();
    let launch = SizedLaunch::builder(count, 256)
        .classes(classes)
        .build(&ctx(), |class| {
            kept.push(class.stream().clone());
            b.record(class, count)
        })?;
    ensure!(kept.len() == 2, "{} bodies recorded", kept.len());
    b.reset_outputs(256)?;
    b.set_count(100)?;
    b.stream.synchronize()?;
    let stream = &kept[1];
    // SAFETY: the handle the test checks is live; were it destroyed, the driver would most
    // likely report an invalid handle here rather than fail later in a copy.
    let query = unsafe { cudarc::driver::sys::cuStreamQuery(stream.cu_stream()) };
    ensure!(
        query == cudarc::driver::sys::CUresult::CUDA_SUCCESS,
        "the kept stream: {query:?}"
    );
    // The kept stream is live and no longer capturing: a copy on it runs, and so does a launch.
    let words = stream.clone_htod(&[7u64, 8, 9])?;
    ensure!(stream.clone_dtoh(&words)? == [7, 8, 9]);
    ensure!(launch.enqueue(stream)?.wait()?.count() == 100);
    stream.synchronize()?;
    b.check_ran(&classes, 1, 100)
}
