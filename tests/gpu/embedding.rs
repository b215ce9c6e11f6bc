//! Embedding in a simulation loop: several columns with one count, and CUDA graph capture and
//! replay (the C API's are in `capi/tests/capi.rs`).
//!
//! The graph tests run alone: graph capture and the context-wide synchronization a graph
//! readback's drop performs should not interleave with other tests' work, and they time their
//! waits.
use anyhow::{bail, ensure, Context as _, Result};
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView};
use sized_readback::testing::pattern;
use sized_readback::{
    ColumnReadback, ColumnReadout, ColumnSchema, Element, Error, GraphReadback, ReadbackConfig,
    Transport,
};
use std::sync::Arc;
use std::time::{Duration, Instant};
use test_support::check::{as_bytes, expect_err};
use test_support::step::*;
use test_support::{SubjectContext, Test, TRANSPORTS};

pub const TESTS: &[Test] = test_support::tests![
    columns_mixed_types,
    columns_count_rules,
    columns_api_misuse,
    columns_cloned_schema_types_are_checked,
    columns_raw_after_an_event,
    graph_replays_the_seed_loop.exclusive(),
    graph_overrun_is_detected.exclusive(),
    graph_record_without_capture.exclusive(),
    graph_misuse_is_reported_at_once.exclusive(),
    graph_take_numbers_every_outcome.exclusive(),
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

// ---------------------------------------------------------------------------------------
// Several columns, one count.

/// A patterned device buffer of `len` elements of T starting `offset` bytes in (so the
/// column's source may be unaligned), and its bytes on the host.
struct Patterned {
    dev: CudaSlice<u8>,
    host: Vec<u8>,
    offset: usize,
    len: usize,
}

impl Patterned {
    fn new<T: Element>(
        stream: &Arc<CudaStream>,
        len: usize,
        offset: usize,
        seed: u64,
    ) -> Result<Self> {
        let host = pattern::bytes(seed, offset + len * std::mem::size_of::<T>());
        let dev = stream.clone_htod(&host)?;
        Ok(Patterned {
            dev,
            host,
            offset,
            len,
        })
    }
    fn view<T: Element>(&self) -> Result<CudaView<'_, T>> {
        // SAFETY: the buffer holds offset + len * size_of::<T>() bytes; T is valid for any bits.
        unsafe { self.dev.slice(self.offset..).transmute::<T>(self.len) }.context("transmute")
    }
    fn want<T>(&self, count: usize) -> &[u8] {
        &self.host[self.offset..self.offset + count * std::mem::size_of::<T>()]
    }
}

fn columns_mixed_types() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cap = 3000;
    let mut schema = ColumnSchema::new();
    let pos = schema.column::<f64>();
    let id = schema.column::<i32>();
    let vel = schema.column::<[f32; 3]>();
    let flag = schema.column::<u8>();
    let p = Patterned::new::<f64>(&stream, cap, 0, 11)?;
    let i = Patterned::new::<i32>(&stream, cap + 5, 4, 12)?;
    let v = Patterned::new::<[f32; 3]>(&stream, cap, 1, 13)?; // unaligned source
    let f = Patterned::new::<u8>(&stream, cap, 3, 14)?;
    let (pv, iv, vv, fv) = (
        p.view::<f64>()?,
        i.view::<i32>()?,
        v.view::<[f32; 3]>()?,
        f.view::<u8>()?,
    );
    for t in TRANSPORTS {
        let rb = ColumnReadback::new(&ctx, &schema, ReadbackConfig::new(cap).transport(t))?;
        ensure!(rb.info().layout.column_offsets().len() == 4);
        for count in [0usize, 1, 17, 1000, 2999, 3000] {
            let n = stream.clone_htod(&[count as u64])?;
            // Bound in another order than declared: the handles say which column is which.
            let sources = [
                vel.source(&vv),
                pos.source(&pv),
                flag.source(&fv),
                id.source(&iv),
            ];
            let ticket = rb.enqueue(&stream, &sources, &n)?;
            let out = ticket.wait()?;
            ensure!(
                out.count() == count,
                "{t:?}: count {} != {count}",
                out.count()
            );
            ensure!(
                as_bytes(out.column(pos)) == p.want::<f64>(count),
                "{t:?} {count}: pos"
            );
            ensure!(
                as_bytes(out.column(id)) == i.want::<i32>(count),
                "{t:?} {count}: id"
            );
            ensure!(
                as_bytes(out.column(vel)) == v.want::<[f32; 3]>(count),
                "{t:?} {count}: vel"
            );
            ensure!(
                as_bytes(out.column(flag)) == f.want::<u8>(count),
                "{t:?} {count}: flag"
            );
            ensure!(out.column_as::<i32>(1)?.len() == count);
            ensure!(out.column_bytes(2)?.len() == 12 * count);
        }
    }
    Ok(())
}

fn columns_count_rules() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cap = 64;
    let mut schema = ColumnSchema::new();
    let a = schema.column::<f64>();
    let b = schema.column::<u16>();
    let c = schema.column::<[u8; 3]>();
    let pa = Patterned::new::<f64>(&stream, cap, 0, 1)?;
    let pb = Patterned::new::<u16>(&stream, 40, 2, 2)?; // the short column
    let pc = Patterned::new::<[u8; 3]>(&stream, cap, 0, 3)?;
    let (va, vb, vc) = (pa.view::<f64>()?, pb.view::<u16>()?, pc.view::<[u8; 3]>()?);
    for t in TRANSPORTS {
        let rb = ColumnReadback::new(&ctx, &schema, ReadbackConfig::new(cap).transport(t))?;
        let src = || [a.source(&va), b.source(&vb), c.source(&vc)];
        let over = stream.clone_htod(&[65i64])?;
        let tk = rb.enqueue(&stream, &src(), &over)?;
        expect_err(tk.wait(), "over capacity", |e| {
            matches!(
                e,
                Error::CountExceedsCapacity {
                    count: 65,
                    capacity: 64
                }
            )
        })?;
        drop(tk);
        let neg = stream.clone_htod(&[-5i32])?;
        let tk = rb.enqueue(&stream, &src(), &neg)?;
        expect_err(tk.wait(), "negative", |e| {
            matches!(e, Error::NegativeCount { count: -5 })
        })?;
        drop(tk);
        let past = stream.clone_htod(&[41u32])?;
        let tk = rb.enqueue(&stream, &src(), &past)?;
        expect_err(tk.wait(), "past the short column", |e| {
            matches!(
                e,
                Error::CountExceedsSource {
                    count: 41,
                    column: 1,
                    source_len: 40
                }
            )
        })?;
        drop(tk);
        let fits = stream.clone_htod(&[40u64])?;
        let tk = rb.enqueue(&stream, &src(), &fits)?;
        let out = tk.wait()?;
        ensure!(out.count() == 40);
        ensure!(as_bytes(out.column(a)) == pa.want::<f64>(40));
        ensure!(as_bytes(out.column(b)) == pb.want::<u16>(40));
        ensure!(as_bytes(out.column(c)) == pc.want::<[u8; 3]>(40));
    }
    Ok(())
}

fn columns_api_misuse() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    expect_err(
        ColumnReadback::new(&ctx, &ColumnSchema::new(), ReadbackConfig::new(8)),
        "no columns",
        |e| matches!(e, Error::InvalidConfig { .. }),
    )?;
    let mut nine = ColumnSchema::new();
    for _ in 0..9 {
        nine.column::<u8>();
    }
    expect_err(
        ColumnReadback::new(&ctx, &nine, ReadbackConfig::new(8)),
        "nine columns",
        |e| matches!(e, Error::InvalidConfig { .. }),
    )?;
    let mut schema = ColumnSchema::new();
    let x = schema.column::<f32>();
    let y = schema.column::<i64>();
    let mut other = ColumnSchema::new();
    let z = other.column::<f32>();
    let rb = ColumnReadback::new(&ctx, &schema, ReadbackConfig::new(8))?;
    let dx = stream.clone_htod(&[1.5f32; 8])?;
    let dy = stream.clone_htod(&[7i64; 8])?;
    let n = stream.clone_htod(&[3i32])?;
    let is_config = |e: &Error| matches!(e, Error::SchemaMismatch { .. });
    expect_err(
        rb.enqueue(&stream, &[x.source(&dx)], &n),
        "missing column",
        is_config,
    )?;
    expect_err(
        rb.enqueue(&stream, &[x.source(&dx), x.source(&dx), y.source(&dy)], &n),
        "column bound twice",
        is_config,
    )?;
    expect_err(
        rb.enqueue(&stream, &[z.source(&dx), y.source(&dy)], &n),
        "another schema's handle",
        is_config,
    )?;
    let tk = rb.enqueue(&stream, &[y.source(&dy), x.source(&dx)], &n)?;
    let out = tk.wait()?;
    ensure!(out.column(x) == [1.5f32; 3]);
    ensure!(out.column(y) == [7i64; 3]);
    expect_err(out.column_as::<u32>(0), "f32 column as u32", is_config)?;
    expect_err(out.column_as::<f64>(1), "i64 column as f64", is_config)?;
    expect_err(out.column_as::<f32>(2), "no column 2", is_config)?;
    expect_err(out.try_column(z), "foreign handle", is_config)?;
    ensure!(out.column_bytes(1)?.len() == 24);
    Ok(())
}

/// A clone of a schema shares its identity, so its handles pass the identity check; the
/// enqueue must still refuse a buffer whose element type is not the column's (a `u8` buffer
/// bound to a `[f64; 4]` column would make the kernel read 32 times the buffer's length).
/// Also: `wait_timeout(Duration::MAX)` means no limit.
fn columns_cloned_schema_types_are_checked() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cap = 64;
    let mut a = ColumnSchema::new();
    let mut b = a.clone();
    let wide = a.column::<[f64; 4]>();
    let narrow = b.column::<u8>();
    let rb = ColumnReadback::new(&ctx, &a, ReadbackConfig::new(cap))?;
    let d_u8 = stream.alloc_zeros::<u8>(cap)?;
    let n = stream.clone_htod(&[cap as i32])?;
    expect_err(
        rb.enqueue(&stream, &[narrow.source(&d_u8)], &n),
        "u8 buffer for a [f64; 4] column",
        |e| matches!(e, Error::SchemaMismatch { reason } if reason.contains("[f64; 4]")),
    )?;
    ensure!(rb.slots_in_use() == 0, "a refused enqueue holds no slot");
    // Same size, other type: refused as well.
    let mut d = ColumnSchema::new();
    let mut d_clone = d.clone();
    let _ = d.column::<[f64; 4]>();
    let as_u64 = d_clone.column::<[u64; 4]>(); // column 0 of the same identity
    let rb_d = ColumnReadback::new(&ctx, &d, ReadbackConfig::new(cap))?;
    let d_u64 = stream.alloc_zeros::<[u64; 4]>(cap)?;
    expect_err(
        rb_d.enqueue(&stream, &[as_u64.source(&d_u64)], &n),
        "[u64; 4] buffer for a [f64; 4] column",
        |e| matches!(e, Error::SchemaMismatch { reason } if reason.contains("[u64; 4]")),
    )?;
    // A clone that declares more columns: the original's handle of column 0 and the clone's
    // of column 1, each with its column's type, are accepted; b's u8 handle is refused.
    let mut c = a.clone();
    let flag = c.column::<u8>();
    let rb_c = ColumnReadback::new(&ctx, &c, ReadbackConfig::new(cap))?;
    let rows: Vec<[f64; 4]> = (0..cap).map(|i| [i as f64, 0.5, -1.0, 1e300]).collect();
    let d_wide = stream.clone_htod(&rows)?;
    let d_flag = stream.clone_htod(&vec![7u8; cap])?;
    expect_err(
        rb_c.enqueue(&stream, &[narrow.source(&d_u8), flag.source(&d_flag)], &n),
        "b's u8 handle for c's [f64; 4] column 0",
        |e| matches!(e, Error::SchemaMismatch { reason } if reason.contains("column 0")),
    )?;
    let tk = rb_c.enqueue(&stream, &[wide.source(&d_wide), flag.source(&d_flag)], &n)?;
    let out = tk.wait_timeout(Duration::MAX)?;
    ensure!(out.count() == cap, "count {}", out.count());
    ensure!(out.column(wide) == rows.as_slice(), "wide column");
    ensure!(out.column(flag) == vec![7u8; cap].as_slice(), "flag column");
    Ok(())
}

fn columns_raw_after_an_event() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let compute = ctx.new_stream()?;
    let copy = ctx.new_stream()?;
    let done = ctx.new_event(None)?;
    let (schema, cols) = step_schema();
    let cap = 5000;
    let b = StepBuffers::new(&ctx, cap)?;
    let rb = ColumnReadback::new(&ctx, &schema, ReadbackConfig::new(cap).slots(3))?;
    let mut errors = 0;
    for key in 0..200u64 {
        // The producer's tag is the key's parity and its step key / 2: set the step counter.
        let step = key / 2;
        // SAFETY: 8-byte device buffer of this context; compute is idle (waited below).
        unsafe { sized_readback::testing::upload(&ctx, b.step.ptr(), &step.to_le_bytes())? };
        // The upload may still be landing, and `compute` (non-blocking) is not ordered after it:
        // without this the producer read the previous step's counter once under synccheck
        // (key 16 read back key 14's count, 560).
        ctx.synchronize()?;
        k.step(&compute, &b, (key % 2) as u32)?;
        done.record(&compute)?;
        // SAFETY: the buffers outlive the wait below; `done` orders the pack after the
        // producer, and the next producer runs only after this wait.
        let tk = unsafe {
            rb.enqueue_raw(
                &copy,
                Some(&done),
                &b.sources(),
                sized_readback::RawCount::i32(b.count.ptr()),
            )?
        };
        let r = tk.wait();
        errors += check_step(
            r.as_ref().map_err(clone_err),
            cols,
            key,
            (key % 2) as u32,
            cap,
        )? as usize;
    }
    // Keys 7 (negative) and 13 (over capacity) are error keys; check_step matched each.
    let want = (0..200u64)
        .filter(|&k| !(0..=cap as i64).contains(&step_count(k, cap as u64)))
        .count();
    ensure!(
        errors == want && want == 2,
        "count errors {errors} != {want}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// CUDA graph capture and replay.

const REPLAYS: u64 = 10_000;

/// The seed's loop body, captured once: two producers on two compute streams (the seed's
/// kernels `k % 2`), each followed by a readback on the copy stream after its `compute_done`
/// event, then the step counters move on. Replayed REPLAYS times; every readback verified.
fn graph_replays_the_seed_loop() -> Result<()> {
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
fn graph_overrun_is_detected() -> Result<()> {
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
fn graph_record_without_capture() -> Result<()> {
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
fn graph_misuse_is_reported_at_once() -> Result<()> {
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
fn graph_take_numbers_every_outcome() -> Result<()> {
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
