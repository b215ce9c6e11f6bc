//! CUDA graph capture and replay.
use super::ctx;
use anyhow::{bail, ensure, Context as _, Result};
use cudarc::driver::sys;
use sized_readback::{ColumnReadout, Error, GraphReadback, ReadbackConfig, Transport};
use std::sync::Arc;
use std::time::{Duration, Instant};
use test_support::check::expect_err;
use test_support::step::*;

const REPLAYS: u64 = 10_000;

/// The seed's loop body, captured once: two producers on two compute streams (the seed's
/// kernels `k % 2`), each followed by a readback on the copy stream after its `compute_done`
/// event, then the step counters move on. Replayed REPLAYS times; every readback verified.
pub(super) fn graph_replays_the_seed_loop() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let compute = [ctx.new_stream()?, ctx.new_stream()?];
    let copy = ctx.new_stream()?;
    let fork = ctx.new_event(None)?;
    let compute_done = [ctx.new_event(None)?, ctx.new_event(None)?];
    let cap = 4096;
    let bufs = [StepBuffers::new(&ctx, cap)?, StepBuffers::new(&ctx, cap)?];
    let (schema, cols) = step_schema();
    let slots = 8;
    let g = GraphReadback::new(&ctx, &schema, ReadbackConfig::new(cap).slots(slots))?;
    ensure!(g.info().slots == slots);

    copy.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    fork.record(&copy)?;
    for b in 0..2 {
        compute[b].wait(&fork)?;
        k.step(&compute[b], &bufs[b], b as u32)?;
        compute_done[b].record(&compute[b])?;
    }
    for b in 0..2 {
        // SAFETY: the buffers and `g` outlive every replay (the graph is dropped first and
        // the stream synchronized); the packs run in order on `copy`; compute_done[b] orders
        // each after its producer, and the next replay's producers after this replay.
        unsafe {
            g.record(
                &copy,
                Some(&compute_done[b]),
                &bufs[b].sources(),
                sized_readback::RawCount::i32(bufs[b].count.ptr()),
            )?
        };
        k.advance(&copy, &bufs[b])?;
    }
    let graph = copy
        .end_capture(sys::CUgraphInstantiate_flags(0))?
        .context("the capture produced no graph")?;
    ensure!(
        g.try_next()?.is_none(),
        "nothing may be there before a replay"
    );

    let t0 = Instant::now();
    let (mut errors, mut checked, mut max_lag) = (0u64, 0u64, 0u64);
    let mut consume = |upto: u64| -> Result<()> {
        while g.next_seq() <= upto {
            let seq = g.next_seq();
            let (replay, tag) = ((seq - 1) / 2, ((seq - 1) % 2) as u32);
            let key = 2 * replay + tag as u64;
            let r = g.next_timeout(Duration::from_secs(10));
            let readout = r.as_ref().map(|rp| rp.readout()).map_err(clone_err);
            if let Ok(rp) = &r {
                ensure!(rp.seq() == seq, "replay numbered {} != {seq}", rp.seq());
            }
            errors += check_step(readout.as_ref().map_err(clone_err), cols, key, tag, cap)? as u64;
            checked += 1;
        }
        Ok(())
    };
    for r in 0..REPLAYS {
        graph.launch()?;
        // Stay at most 2 replays (4 readbacks) behind the launches, within the 8 slots.
        if r >= 2 {
            let lag = 2 * (r + 1) - (g.next_seq() - 1);
            max_lag = max_lag.max(lag);
            consume(2 * (r - 2) + 2)?;
        }
    }
    consume(2 * REPLAYS)?;
    let elapsed = t0.elapsed();
    copy.synchronize()?;
    ensure!(checked == 2 * REPLAYS, "checked {checked}");
    ensure!(g.last_overrun() == 0, "overrun at {}", g.last_overrun());
    let want_errors = (0..2 * REPLAYS)
        .filter(|&k| {
            let c = step_count(k, cap as u64);
            c < 0 || c > cap as i64
        })
        .count() as u64;
    ensure!(
        errors == want_errors && errors > 0,
        "errors {errors} != {want_errors}"
    );
    drop(graph);
    println!(
        "graph replay: {REPLAYS} replays, {checked} readbacks verified ({errors} expected count \
         errors), {:.1} us per replay, host lag <= {max_lag} readbacks",
        elapsed.as_secs_f64() * 1e6 / REPLAYS as f64
    );
    Ok(())
}

/// One producer, one readback, one advance per replay, with 2 slots: the host holds replay
/// 1 while four more run; the device writes replay 2 and drops 3, 4 and 5; the host gets
/// them back as `Overrun`, then replay 6 arrives intact.
pub(super) fn graph_overrun_is_detected() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 1000;
    let b = StepBuffers::new(&ctx, cap)?;
    let (schema, cols) = step_schema();
    let g = GraphReadback::new(&ctx, &schema, ReadbackConfig::new(cap).slots(2))?;
    stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    k.step(&stream, &b, 0)?;
    // SAFETY: as in graph_replays_the_seed_loop; one stream.
    unsafe {
        g.record(
            &stream,
            None,
            &b.sources(),
            sized_readback::RawCount::i32(b.count.ptr()),
        )?
    };
    k.advance(&stream, &b)?;
    let graph = stream
        .end_capture(sys::CUgraphInstantiate_flags(0))?
        .context("no graph")?;
    // Replay r has step r, so key 2r and tag 0.
    let check = |rp: &ColumnReadout<'_>, replay: u64| check_step(Ok(rp), cols, 2 * replay, 0, cap);

    graph.launch()?;
    let first = g.next_timeout(Duration::from_secs(10))?;
    ensure!(first.seq() == 1);
    for _ in 0..4 {
        graph.launch()?;
    }
    stream.synchronize()?;
    ensure!(g.last_overrun() == 5, "last overrun {}", g.last_overrun());
    check(&first.readout(), 0)?; // untouched while held, though four replays ran
    drop(first);
    let second = g.next_timeout(Duration::from_secs(10))?;
    ensure!(second.seq() == 2);
    check(&second.readout(), 1)?;
    drop(second);
    for seq in 3..=5 {
        expect_err(
            g.next_timeout(Duration::from_secs(10)),
            "dropped replay",
            |e| matches!(e, Error::Overrun { seq: s } if *s == seq),
        )?;
    }
    ensure!(g.try_next()?.is_none(), "replay 6 has not run");
    expect_err(g.next_timeout(Duration::from_millis(20)), "timeout", |e| {
        matches!(e, Error::Timeout { .. })
    })?;
    graph.launch()?;
    let sixth = g.next_timeout(Duration::from_secs(10))?;
    ensure!(sixth.seq() == 6);
    check(&sixth.readout(), 5)?;
    drop(sixth);
    stream.synchronize()?;
    Ok(())
}

/// A graph readback recorded on a stream that is not capturing runs once per recording,
/// and is consumed the same way; the staged transport is refused.
pub(super) fn graph_record_without_capture() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 300;
    let b = StepBuffers::new(&ctx, cap)?;
    let (schema, cols) = step_schema();
    expect_err(
        GraphReadback::new(
            &ctx,
            &schema,
            ReadbackConfig::new(cap).transport(Transport::Staged),
        ),
        "staged graph readback",
        |e| matches!(e, Error::InvalidConfig { .. }),
    )?;
    let g = GraphReadback::new(&ctx, &schema, ReadbackConfig::new(cap).slots(4))?;
    for _ in 0..3 {
        k.step(&stream, &b, 1)?;
        // SAFETY: buffers outlive the synchronize below; one stream.
        unsafe {
            g.record(
                &stream,
                None,
                &b.sources(),
                sized_readback::RawCount::i32(b.count.ptr()),
            )?
        };
        k.advance(&stream, &b)?;
    }
    for step in 0..3u64 {
        let rp = g.next_timeout(Duration::from_secs(10))?;
        ensure!(rp.seq() == step + 1);
        check_step(Ok(&rp.readout()), cols, 2 * step + 1, 1, cap)?;
    }
    stream.synchronize()?;
    Ok(())
}

/// Misuse a graph readback reports at once: taking before any recording (which would wait
/// forever for a trailer), and recordings that disagree with the first on the count type or
/// the source lengths (whose count errors would name the wrong column).
/// Also: `next_timeout(Duration::MAX)` means no limit, and `try_next` does not wait for a
/// consumer blocked in another thread.
pub(super) fn graph_misuse_is_reported_at_once() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 400;
    let b = StepBuffers::new(&ctx, cap)?;
    let (schema, cols) = step_schema();
    let g = GraphReadback::new(&ctx, &schema, ReadbackConfig::new(cap).slots(4))?;
    let nothing = |e: &Error| matches!(e, Error::NothingRecorded);
    let t0 = Instant::now();
    expect_err(
        g.next_timeout(Duration::from_secs(5)),
        "next before a recording",
        nothing,
    )?;
    expect_err(g.try_next(), "try_next before a recording", nothing)?;
    ensure!(
        t0.elapsed() < Duration::from_secs(1),
        "took {:?}: the error must not wait for a trailer",
        t0.elapsed()
    );
    ensure!(g.next_seq() == 1, "nothing consumed");

    k.step(&stream, &b, 1)?;
    // SAFETY: the buffers outlive the synchronize below; one stream; not capturing, so the
    // pack runs once.
    unsafe {
        g.record(
            &stream,
            None,
            &b.sources(),
            sized_readback::RawCount::i32(b.count.ptr()),
        )?
    };
    let mut short = b.sources();
    short[2].len = cap - 1;
    let is_config = |e: &Error| matches!(e, Error::RecordingMismatch { .. });
    // SAFETY: as above; both are refused before anything is recorded.
    unsafe {
        expect_err(
            g.record(
                &stream,
                None,
                &short,
                sized_readback::RawCount::i32(b.count.ptr()),
            ),
            "other source lengths",
            is_config,
        )?;
        expect_err(
            g.record(
                &stream,
                None,
                &b.sources(),
                sized_readback::RawCount::u32(b.count.ptr()),
            ),
            "another count type",
            is_config,
        )?;
    }
    let rp = g.next_timeout(Duration::MAX)?;
    ensure!(rp.seq() == 1);
    check_step(Ok(&rp.readout()), cols, 1, 1, cap)?;
    drop(rp);
    stream.synchronize()?;
    ensure!(
        g.try_next()?.is_none(),
        "the refused recordings ran no pack"
    );

    // A consumer blocked in another thread holds the consumer lock for 2 s; try_next and a
    // short next_timeout give up at once, consuming nothing.
    std::thread::scope(|scope| -> Result<()> {
        let blocked = scope.spawn(|| g.next_timeout(Duration::from_secs(2)).map(|r| r.seq()));
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        ensure!(g.try_next()?.is_none(), "nothing to take");
        ensure!(
            t.elapsed() < Duration::from_millis(500),
            "try_next waited {:?} for the other consumer",
            t.elapsed()
        );
        let t = Instant::now();
        expect_err(
            g.next_timeout(Duration::from_millis(50)),
            "busy consumer",
            |e| matches!(e, Error::Timeout { .. }),
        )?;
        ensure!(
            t.elapsed() < Duration::from_millis(500),
            "next_timeout(50 ms) took {:?}",
            t.elapsed()
        );
        let r = blocked.join().expect("the blocked consumer panicked");
        ensure!(
            matches!(r, Err(Error::Timeout { .. })),
            "blocked consumer: {r:?}"
        );
        Ok(())
    })?;
    ensure!(g.next_seq() == 2, "no timeout consumed a replay");
    Ok(())
}

/// `take`, the by-number take of the bindings (the C API's `srb_next`): every replay comes
/// with its number and outcome, count errors included; an owned replay keeps its slot and its
/// rows after the loop that took it; a timeout reports the number waited for and consumes
/// nothing; a consumer blocked in another thread makes a look return `None`.
pub(super) fn graph_take_numbers_every_outcome() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 300;
    let b = StepBuffers::new(&ctx, cap)?;
    let (schema, cols) = step_schema();
    let g = Arc::new(GraphReadback::new(
        &ctx,
        &schema,
        ReadbackConfig::new(cap).slots(8),
    )?);
    expect_err(
        g.take(Some(Duration::from_secs(5))),
        "take before a recording",
        |e| matches!(e, Error::NothingRecorded),
    )?;
    // Eight packs, not captured, so each runs once: keys 1, 3, ..., 15 (key 7 holds a
    // negative count, key 13 one over the capacity).
    for _ in 0..8 {
        k.step(&stream, &b, 1)?;
        // SAFETY: the buffers outlive the synchronize below; one stream.
        unsafe {
            g.record(
                &stream,
                None,
                &b.sources(),
                sized_readback::RawCount::i32(b.count.ptr()),
            )?
        };
        k.advance(&stream, &b)?;
    }
    let mut held = Vec::new();
    for step in 0..8u64 {
        let key = 2 * step + 1;
        let t = g
            .take(Some(Duration::from_secs(10)))?
            .context("one consumer: never busy")?;
        ensure!(t.seq == step + 1, "key {key}: seq {}", t.seq);
        let readout = match (&t.result, &t.replay) {
            (Ok(n), Some(r)) => {
                ensure!(
                    (r.seq(), r.count()) == (t.seq, *n),
                    "key {key}: the replay says {} {}",
                    r.seq(),
                    r.count()
                );
                Ok(r.readout())
            }
            (Err(e), None) => Err(clone_err(e)),
            (result, replay) => bail!("key {key}: {result:?} with replay {replay:?}"),
        };
        let errored = check_step(readout.as_ref().map_err(clone_err), cols, key, 1, cap)?;
        ensure!(
            errored == matches!(key, 7 | 13),
            "key {key}: error {errored}"
        );
        held.extend(t.replay);
    }
    // The owned replays still hold their slots and rows.
    ensure!(held.len() == 6, "{} replays held", held.len());
    for r in &held {
        check_step(Ok(&r.readout()), cols, 2 * r.seq() - 1, 1, cap)?;
    }
    drop(held);
    stream.synchronize()?;
    let t = g
        .take(Some(Duration::from_millis(50)))?
        .context("one consumer: never busy")?;
    ensure!(
        t.seq == 9 && matches!(t.result, Err(Error::Timeout { .. })) && t.replay.is_none(),
        "timeout: seq {}, {:?}",
        t.seq,
        t.result
    );
    ensure!(g.next_seq() == 9, "a timeout consumed nothing");
    std::thread::scope(|scope| -> Result<()> {
        let blocked = scope.spawn(|| g.next_timeout(Duration::from_secs(2)).map(|r| r.seq()));
        std::thread::sleep(Duration::from_millis(300));
        let t = Instant::now();
        ensure!(
            g.take(Some(Duration::ZERO))?.is_none(),
            "a look while another thread takes"
        );
        ensure!(
            t.elapsed() < Duration::from_millis(500),
            "take(0) waited {:?} for the other consumer",
            t.elapsed()
        );
        let r = blocked.join().expect("the blocked consumer panicked");
        ensure!(
            matches!(r, Err(Error::Timeout { .. })),
            "blocked consumer: {r:?}"
        );
        Ok(())
    })?;
    Ok(())
}
