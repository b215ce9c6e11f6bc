//! Embedding tests: several columns with one count, CUDA graph capture and replay, and the
//! C ABI. A custom harness (libtest-mimic): without a CUDA driver or device every GPU test is
//! reported as *ignored*; the C ABI's argument checks run everywhere.
//!
//! Tests run one at a time unless `--test-threads` says otherwise: graph capture and the
//! context-wide synchronization a graph readback's drop performs should not interleave with
//! other tests' work.
use anyhow::{bail, ensure, Context as _, Result};
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView};
use libtest_mimic::{Arguments, Failed, Trial};
use sized_readback::capi;
use sized_readback::testing::{Kernel, Kernels as Module};
use sized_readback::LaunchShape;
use sized_readback::testing::DeviceBuffer;
use sized_readback::{
    pattern, Column, ColumnReadback, ColumnReadout, ColumnSchema, ColumnSource, Element, Error,
    GraphReadback, ReadbackConfig, Transport,
};
use std::ffi::{c_void, CStr};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

fn ctx() -> Arc<CudaContext> {
    static CTX: OnceLock<Arc<CudaContext>> = OnceLock::new();
    CTX.get_or_init(|| sized_readback::device::open(0).expect("a GPU (checked before the tests)"))
        .clone()
}

fn gpu_present() -> bool {
    matches!(sized_readback::device::count(), Ok(n) if n > 0)
}

const TRANSPORTS: [Transport; 2] = [Transport::Mapped, Transport::Staged];

fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: Element types are plain old data.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

fn expect_err<T>(r: Result<T, Error>, what: &str, ok: impl Fn(&Error) -> bool) -> Result<()> {
    match r {
        Ok(_) => bail!("{what}: accepted"),
        Err(e) if ok(&e) => Ok(()),
        Err(e) => bail!("{what}: wrong error {e}"),
    }
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
        ensure!(rb.layout().column_offsets().len() == 4);
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
/// enqueue must still refuse a buffer whose element type is not the column's (the review's
/// case: a `u8` buffer bound to a `[f64; 4]` column would make the kernel read 32 times the
/// buffer's length). Also: `wait_timeout(Duration::MAX)` means no limit.
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

// ---------------------------------------------------------------------------------------
// The simulation step of csrc/embedding.cu, mirrored on the host.

/// The count `srbe_step` writes for `key` (csrc/embedding.cu's srbe_count).
fn step_count(key: u64, cap: u64) -> i64 {
    if key % 997 == 13 {
        cap as i64 + 1
    } else if key % 991 == 7 {
        -3
    } else {
        (pattern::mix(key) % (cap + 1)) as i64
    }
}

/// Device buffers of one `srbe_step` output (pos f64, id i32, vel [f32; 3], count i32) and
/// its step counter.
struct StepBuffers {
    pos: DeviceBuffer,
    id: DeviceBuffer,
    vel: DeviceBuffer,
    count: DeviceBuffer,
    step: DeviceBuffer,
    cap: usize,
}

impl StepBuffers {
    fn new(ctx: &Arc<CudaContext>, cap: usize) -> Result<Self> {
        Ok(StepBuffers {
            pos: DeviceBuffer::new_zeroed(ctx, cap * 8)?,
            id: DeviceBuffer::new_zeroed(ctx, cap * 4)?,
            vel: DeviceBuffer::new_zeroed(ctx, cap * 12)?,
            count: DeviceBuffer::new_zeroed(ctx, 8)?,
            step: DeviceBuffer::new_zeroed(ctx, 8)?,
            cap,
        })
    }
    fn sources(&self) -> [ColumnSource; 3] {
        [
            ColumnSource {
                ptr: self.pos.ptr(),
                len: self.cap,
            },
            ColumnSource {
                ptr: self.id.ptr(),
                len: self.cap,
            },
            ColumnSource {
                ptr: self.vel.ptr(),
                len: self.cap,
            },
        ]
    }
}

struct StepKernels {
    step: Kernel,
    advance: Kernel,
}

impl StepKernels {
    fn load(ctx: &Arc<CudaContext>) -> Result<Self> {
        let m = Module::load(ctx)?;
        Ok(StepKernels {
            step: m.function("srbe_step")?,
            advance: m.function("srbe_advance")?,
        })
    }
    fn step(&self, stream: &CudaStream, b: &StepBuffers, tag: u32) -> Result<()> {
        let (mut pos, mut id, mut vel, mut count, mut step) = (
            b.pos.ptr(),
            b.id.ptr(),
            b.vel.ptr(),
            b.count.ptr(),
            b.step.ptr(),
        );
        let (mut tag, mut cap) = (tag, b.cap as u64);
        let mut args: [*mut c_void; 7] = [
            (&mut pos as *mut u64).cast(),
            (&mut id as *mut u64).cast(),
            (&mut vel as *mut u64).cast(),
            (&mut count as *mut u64).cast(),
            (&mut step as *mut u64).cast(),
            (&mut tag as *mut u32).cast(),
            (&mut cap as *mut u64).cast(),
        ];
        let shape = LaunchShape {
            grid: 16,
            block: 256,
            programmatic: false,
        };
        // SAFETY: srbe_step(double*, int32_t*, float*, int32_t*, const uint64_t*, uint32_t,
        // uint64_t) with matching argument types; the buffers hold cap rows.
        unsafe { self.step.launch(stream.cu_stream(), shape, &mut args)? };
        Ok(())
    }
    fn advance(&self, stream: &CudaStream, b: &StepBuffers) -> Result<()> {
        let mut step = b.step.ptr();
        let mut args: [*mut c_void; 1] = [(&mut step as *mut u64).cast()];
        let shape = LaunchShape {
            grid: 1,
            block: 32,
            programmatic: false,
        };
        // SAFETY: srbe_advance(uint64_t*) on an 8-byte buffer.
        unsafe { self.advance.launch(stream.cu_stream(), shape, &mut args)? };
        Ok(())
    }
}

/// The handles of the step's columns: pos, id, vel.
type StepColumns = (Column<f64>, Column<i32>, Column<[f32; 3]>);

fn step_schema() -> (ColumnSchema, StepColumns) {
    let mut s = ColumnSchema::new();
    let cols = (s.column::<f64>(), s.column::<i32>(), s.column::<[f32; 3]>());
    (s, cols)
}

/// Checks a readback of `srbe_step` with `key` and `tag`, whose result was `r`. Returns
/// whether it was an (expected) count error.
fn check_step(
    r: std::result::Result<&ColumnReadout<'_>, Error>,
    cols: StepColumns,
    key: u64,
    tag: u32,
    cap: usize,
) -> Result<bool> {
    let want = step_count(key, cap as u64);
    let out = match r {
        Err(Error::CountExceedsCapacity { count, capacity })
            if want == cap as i64 + 1 && count == want as u64 && capacity == cap =>
        {
            return Ok(true)
        }
        Err(Error::NegativeCount { count: -3 }) if want == -3 => return Ok(true),
        Err(e) => bail!("key {key}: {e} (expected count {want})"),
        Ok(out) => out,
    };
    ensure!(
        out.count() as i64 == want,
        "key {key}: count {} != {want}",
        out.count()
    );
    let (pos, id, vel) = (out.column(cols.0), out.column(cols.1), out.column(cols.2));
    for i in 0..out.count() {
        let ok = pos[i] == i as f64 + 0.25 * key as f64
            && id[i] == (key * 7 + i as u64) as i32
            && vel[i] == [i as f32, key as f32, tag as f32];
        ensure!(ok, "key {key} row {i}: {} {} {:?}", pos[i], id[i], vel[i]);
    }
    Ok(false)
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
        unsafe { sized_readback::driver::memcpy_htod(b.step.ptr(), &step.to_le_bytes())? };
        k.step(&compute, &b, (key % 2) as u32)?;
        done.record(&compute)?;
        // SAFETY: the buffers outlive the wait below; `done` orders the pack after the
        // producer, and the next producer runs only after this wait.
        let tk = unsafe { rb.enqueue_raw(&copy, Some(&done), &b.sources(), sized_readback::RawCount::i32(b.count.ptr()))? };
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

/// `Error` is not `Clone`; tests pass errors by value to `check_step`.
fn clone_err(e: &Error) -> Error {
    match e {
        Error::CountExceedsCapacity { count, capacity } => Error::CountExceedsCapacity {
            count: *count,
            capacity: *capacity,
        },
        Error::NegativeCount { count } => Error::NegativeCount { count: *count },
        Error::Overrun { seq } => Error::Overrun { seq: *seq },
        other => Error::InvalidConfig {
            reason: other.to_string(),
        },
    }
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
    ensure!(g.slots() == slots);

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
                sized_readback::RawCount::i32(bufs[b].count.ptr()),)?
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
            let r2 = r.as_ref().map(|rp| &**rp).map_err(clone_err);
            if let Ok(rp) = &r {
                ensure!(rp.seq() == seq, "replay numbered {} != {seq}", rp.seq());
            }
            errors += check_step(r2, cols, key, tag, cap)? as u64;
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
    unsafe { g.record(&stream, None, &b.sources(), sized_readback::RawCount::i32(b.count.ptr()))? };
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
    check(&first, 0)?; // untouched while held, though four replays ran
    drop(first);
    let second = g.next_timeout(Duration::from_secs(10))?;
    ensure!(second.seq() == 2);
    check(&second, 1)?;
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
    check(&sixth, 5)?;
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
        unsafe { g.record(&stream, None, &b.sources(), sized_readback::RawCount::i32(b.count.ptr()))? };
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

/// Misuse a graph readback reports at once: taking before any recording (which used to
/// wait forever for a trailer), and recordings that disagree with the first on the count
/// type or the source lengths (which used to make count errors name the wrong column).
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
    unsafe { g.record(&stream, None, &b.sources(), sized_readback::RawCount::i32(b.count.ptr()))? };
    let mut short = b.sources();
    short[2].len = cap - 1;
    let is_config = |e: &Error| matches!(e, Error::RecordingMismatch { .. });
    // SAFETY: as above; both are refused before anything is recorded.
    unsafe {
        expect_err(
            g.record(&stream, None, &short, sized_readback::RawCount::i32(b.count.ptr())),
            "other source lengths",
            is_config,
        )?;
        expect_err(
            g.record(&stream, None, &b.sources(), sized_readback::RawCount::u32(b.count.ptr())),
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

// ---------------------------------------------------------------------------------------
// The C ABI.

fn last_error() -> String {
    // SAFETY: srb_last_error returns a NUL-terminated string owned by this thread.
    unsafe { CStr::from_ptr(capi::srb_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Argument checks that need no GPU: they run (and must pass) everywhere.
fn capi_argument_errors() -> Result<()> {
    let sizes = [8usize, 4];
    let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
    // SAFETY: valid pointers, or nulls the API must reject.
    unsafe {
        ensure!(
            capi::srb_create(0, 16, 2, 2, sizes.as_ptr(), 0, std::ptr::null_mut())
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        ensure!(
            last_error().contains("out is null"),
            "message: {}",
            last_error()
        );
        ensure!(
            capi::srb_create(0, 16, 2, 0, sizes.as_ptr(), 0, &mut rb)
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        ensure!(
            last_error().contains("num_columns"),
            "message: {}",
            last_error()
        );
        ensure!(
            capi::srb_create(0, 16, 2, 2, std::ptr::null(), 0, &mut rb)
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        ensure!(
            capi::srb_create(0, 16, 2, 2, sizes.as_ptr(), 0x80, &mut rb)
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        ensure!(
            capi::srb_create(-1, 16, 2, 2, sizes.as_ptr(), 0, &mut rb)
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        // Unusable configurations are refused before the device is opened: the same code
        // with or without a GPU.
        let too_big = [u32::MAX as usize + 1];
        let zero = [8usize, 0];
        let graph_staged = capi::SRB_FLAG_GRAPH | capi::SRB_FLAG_STAGED;
        for (what, capacity, slots, sizes, flags) in [
            ("zero capacity", 0, 2, &sizes[..], 0),
            ("zero slots", 16, 0, &sizes[..], 0),
            ("SIZE_MAX capacity", usize::MAX, 2, &sizes[..], 0),
            ("slots overflow", usize::MAX / 64, u32::MAX, &sizes[..1], 0),
            ("element size 0", 16, 2, &zero[..], 0),
            ("element size above u32::MAX", 1, 1, &too_big[..], 0),
            ("graph and staged", 16, 2, &sizes[..], graph_staged),
        ] {
            let n = sizes.len() as u32;
            let code = capi::srb_create(0, capacity, slots, n, sizes.as_ptr(), flags, &mut rb);
            ensure!(
                code == capi::SRB_ERR_INVALID_CONFIG && rb.is_null(),
                "{what}: code {code} ({})",
                last_error()
            );
        }
        ensure!(rb.is_null());
        // The message pointer stays the same across failures (it used to be freed by the
        // next one).
        let before = capi::srb_last_error();
        ensure!(
            capi::srb_poll(std::ptr::null(), 1) == capi::SRB_ERR_INVALID_ARGUMENT,
            "poll on null"
        );
        ensure!(capi::srb_last_error() == before && last_error().contains("null"));
        ensure!(
            capi::srb_wait(std::ptr::null(), 1, 0, std::ptr::null_mut())
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        ensure!(capi::srb_data(std::ptr::null(), 1, 0).is_null());
        ensure!(last_error().contains("null"), "message: {}", last_error());
        capi::srb_destroy(std::ptr::null_mut());
        // A well-formed create: succeeds with a GPU, else says why not.
        let code = capi::srb_create(0, 16, 2, 2, sizes.as_ptr(), 0, &mut rb);
        if gpu_present() {
            ensure!(
                code == capi::SRB_OK && !rb.is_null(),
                "create: {code} {}",
                last_error()
            );
            capi::srb_destroy(rb);
        } else {
            ensure!(
                code == capi::SRB_ERR_DRIVER_NOT_FOUND || code == capi::SRB_ERR_NO_DEVICE,
                "create without a GPU: {code} {}",
                last_error()
            );
            ensure!(!last_error().is_empty());
        }
    }
    Ok(())
}

/// Host-sequenced mode through the C ABI, both transports: enqueue/poll/wait/count/data/
/// release, and the errors a C caller sees.
fn capi_host_mode() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 2000;
    let b = StepBuffers::new(&ctx, cap)?;
    let sizes = [8usize, 4, 12];
    let ptrs: Vec<CUdeviceptr> = b.sources().iter().map(|s| s.ptr).collect();
    let lens = [cap; 3];
    let raw = stream.cu_stream();
    for flags in [0, capi::SRB_FLAG_STAGED] {
        let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
        // SAFETY: every pointer below is valid for the call; buffers outlive the readback.
        unsafe {
            let code = capi::srb_create(0, cap, 2, 3, sizes.as_ptr(), flags, &mut rb);
            ensure!(code == capi::SRB_OK, "create: {code} {}", last_error());
            ensure!(capi::srb_capacity(rb) == cap);
            for key in [1u64, 4, 9] {
                let step = key / 2;
                sized_readback::driver::memcpy_htod(b.step.ptr(), &step.to_le_bytes())?;
                k.step(&stream, &b, (key % 2) as u32)?;
                let mut seq = 0;
                let code = capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    b.count.ptr(),
                    capi::SRB_COUNT_INT32,
                    &mut seq,
                );
                ensure!(code == capi::SRB_OK, "enqueue: {code} {}", last_error());
                let mut n = u64::MAX;
                let code = capi::srb_wait(rb, seq, 10_000_000_000, &mut n);
                ensure!(code == capi::SRB_OK, "wait: {code} {}", last_error());
                ensure!(n as i64 == step_count(key, cap as u64), "count {n}");
                ensure!(capi::srb_poll(rb, seq) == capi::SRB_OK);
                let mut n2 = 0;
                ensure!(capi::srb_count(rb, seq, &mut n2) == capi::SRB_OK && n2 == n);
                let n = n as usize;
                let pos = std::slice::from_raw_parts(capi::srb_data(rb, seq, 0).cast::<f64>(), n);
                let id = std::slice::from_raw_parts(capi::srb_data(rb, seq, 1).cast::<i32>(), n);
                let vel =
                    std::slice::from_raw_parts(capi::srb_data(rb, seq, 2).cast::<[f32; 3]>(), n);
                for i in 0..n {
                    ensure!(
                        pos[i] == i as f64 + 0.25 * key as f64
                            && id[i] == (key * 7 + i as u64) as i32
                            && vel[i] == [i as f32, key as f32, (key % 2) as f32],
                        "key {key} row {i}"
                    );
                }
                ensure!(
                    capi::srb_data(rb, seq, 3).is_null(),
                    "column 3 does not exist"
                );
                ensure!(capi::srb_release(rb, seq) == capi::SRB_OK);
                ensure!(
                    capi::srb_release(rb, seq) == capi::SRB_ERR_INVALID_ARGUMENT,
                    "double release"
                );
                ensure!(capi::srb_data(rb, seq, 0).is_null(), "released");
            }
            // Over capacity: the count comes back with the error.
            let big = stream.clone_htod(&[cap as i64 + 7])?;
            let (big_ptr, _g) = cudarc::driver::DevicePtr::device_ptr(&big, &stream);
            let mut seq = 0;
            ensure!(
                capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    big_ptr,
                    capi::SRB_COUNT_INT64,
                    &mut seq
                ) == capi::SRB_OK
            );
            let mut n = 0;
            ensure!(
                capi::srb_wait(rb, seq, -1, &mut n) == capi::SRB_ERR_COUNT_EXCEEDS_CAPACITY
                    && n == cap as u64 + 7,
                "over capacity: n {n}"
            );
            ensure!(
                last_error().contains("exceeds the readback capacity"),
                "message: {}",
                last_error()
            );
            // Two slots: a third enqueue while two are held fails.
            let mut s2 = 0;
            ensure!(
                capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    b.count.ptr(),
                    capi::SRB_COUNT_INT32,
                    &mut s2
                ) == capi::SRB_OK
            );
            let mut s3 = 0;
            ensure!(
                capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    b.count.ptr(),
                    capi::SRB_COUNT_INT32,
                    &mut s3
                ) == capi::SRB_ERR_SLOTS_EXHAUSTED
            );
            ensure!(
                capi::srb_release(rb, seq) == capi::SRB_OK
                    && capi::srb_release(rb, s2) == capi::SRB_OK
            );
            // A misaligned count, an unknown count kind, a graph call on a host readback.
            ensure!(
                capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    b.count.ptr() + 1,
                    capi::SRB_COUNT_INT32,
                    &mut s3
                ) == capi::SRB_ERR_BAD_POINTER
            );
            ensure!(
                capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    b.count.ptr(),
                    9,
                    &mut s3
                ) == capi::SRB_ERR_INVALID_ARGUMENT
            );
            ensure!(
                capi::srb_next(rb, 0, std::ptr::null_mut(), std::ptr::null_mut())
                    == capi::SRB_ERR_INVALID_ARGUMENT
            );
            ensure!(
                capi::srb_wait(rb, 12345, 0, std::ptr::null_mut())
                    == capi::SRB_ERR_INVALID_ARGUMENT
            );
            capi::srb_destroy(rb);
        }
    }
    stream.synchronize()?;
    Ok(())
}

/// Graph mode through the C ABI: record into a capture with raw handles, replay, consume
/// with srb_next.
fn capi_graph_mode() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 1500;
    let b = StepBuffers::new(&ctx, cap)?;
    let sizes = [8usize, 4, 12];
    let ptrs: Vec<CUdeviceptr> = b.sources().iter().map(|s| s.ptr).collect();
    let lens = [cap; 3];
    let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
    let replays = 500u64;
    // SAFETY: valid pointers; the buffers and the readback outlive the graph's replays
    // (the stream is synchronized before they drop).
    unsafe {
        ensure!(
            capi::srb_create(
                0,
                cap,
                4,
                3,
                sizes.as_ptr(),
                capi::SRB_FLAG_GRAPH | capi::SRB_FLAG_STAGED,
                &mut rb
            ) == capi::SRB_ERR_INVALID_CONFIG
        );
        let code = capi::srb_create(0, cap, 4, 3, sizes.as_ptr(), capi::SRB_FLAG_GRAPH, &mut rb);
        ensure!(code == capi::SRB_OK, "create: {code} {}", last_error());
        let mut seq = 0;
        ensure!(
            capi::srb_enqueue(
                rb,
                stream.cu_stream(),
                std::ptr::null_mut(),
                ptrs.as_ptr(),
                lens.as_ptr(),
                b.count.ptr(),
                capi::SRB_COUNT_INT32,
                &mut seq
            ) == capi::SRB_ERR_INVALID_ARGUMENT
        );
        stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        k.step(&stream, &b, 1)?;
        let code = capi::srb_record(
            rb,
            stream.cu_stream(),
            std::ptr::null_mut(),
            ptrs.as_ptr(),
            lens.as_ptr(),
            b.count.ptr(),
            capi::SRB_COUNT_INT32,
        );
        ensure!(code == capi::SRB_OK, "record: {code} {}", last_error());
        k.advance(&stream, &b)?;
        let graph = stream
            .end_capture(sys::CUgraphInstantiate_flags(0))?
            .context("no graph")?;
        let mut errors = 0;
        for r in 0..replays {
            graph.launch()?;
            let key = 2 * r + 1;
            let mut n = 0;
            let code = capi::srb_next(rb, 10_000_000_000, &mut seq, &mut n);
            ensure!(seq == r + 1, "seq {seq}");
            let want = step_count(key, cap as u64);
            if want < 0 || want > cap as i64 {
                let expected = if want < 0 {
                    capi::SRB_ERR_NEGATIVE_COUNT
                } else {
                    capi::SRB_ERR_COUNT_EXCEEDS_CAPACITY
                };
                ensure!(code == expected, "key {key}: code {code} (want {expected})");
                errors += 1;
                continue;
            }
            ensure!(code == capi::SRB_OK, "next: {code} {}", last_error());
            ensure!(n as i64 == want, "key {key}: count {n} != {want}");
            let id =
                std::slice::from_raw_parts(capi::srb_data(rb, seq, 1).cast::<i32>(), n as usize);
            ensure!(
                id.iter()
                    .enumerate()
                    .all(|(i, v)| *v == (key * 7 + i as u64) as i32),
                "key {key}: ids"
            );
            ensure!(capi::srb_release(rb, seq) == capi::SRB_OK);
        }
        ensure!(errors > 0, "keys below 1000 include error keys");
        stream.synchronize()?;
        drop(graph);
        capi::srb_destroy(rb);
    }
    Ok(())
}

/// Graph mode through the C ABI with several consumer threads: `srb_next` before any
/// recording errs at once; with `timeout_ns` 0 it does not wait for a consumer blocked in
/// another thread (`SRB_NOT_READY`); and concurrent callers each report a different replay
/// number (the number used to be read before the consumer lock was taken).
fn capi_graph_concurrent_consumers() -> Result<()> {
    const REPLAYS: u64 = 64;
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 1000;
    let b = StepBuffers::new(&ctx, cap)?;
    let sizes = [8usize, 4, 12];
    let ptrs: Vec<CUdeviceptr> = b.sources().iter().map(|s| s.ptr).collect();
    let lens = [cap; 3];
    let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
    // SAFETY: valid pointers; the buffers and the readback outlive the graph's replays (the
    // stream is synchronized before they drop); the handle is shared with scoped threads
    // only while it lives.
    unsafe {
        let code = capi::srb_create(
            0,
            cap,
            REPLAYS as u32,
            3,
            sizes.as_ptr(),
            capi::SRB_FLAG_GRAPH,
            &mut rb,
        );
        ensure!(code == capi::SRB_OK, "create: {code} {}", last_error());
        let (mut seq, mut n) = (u64::MAX, u64::MAX);
        let t = Instant::now();
        let code = capi::srb_next(rb, 5_000_000_000, &mut seq, &mut n);
        ensure!(
            code == capi::SRB_ERR_INVALID_CONFIG && t.elapsed() < Duration::from_secs(1),
            "next before a recording: {code} after {:?} ({})",
            t.elapsed(),
            last_error()
        );
        ensure!(seq == u64::MAX, "nothing taken, no number stored");

        stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        k.step(&stream, &b, 1)?;
        let code = capi::srb_record(
            rb,
            stream.cu_stream(),
            std::ptr::null_mut(),
            ptrs.as_ptr(),
            lens.as_ptr(),
            b.count.ptr(),
            capi::SRB_COUNT_INT32,
        );
        ensure!(code == capi::SRB_OK, "record: {code} {}", last_error());
        k.advance(&stream, &b)?;
        let graph = stream
            .end_capture(sys::CUgraphInstantiate_flags(0))?
            .context("no graph")?;

        let handle = rb as usize;
        let next = move |timeout_ns: i64| {
            let (mut seq, mut n) = (u64::MAX, u64::MAX);
            let code = capi::srb_next(handle as *const _, timeout_ns, &mut seq, &mut n);
            (code, seq, n)
        };
        // One consumer blocks for 2 s (nothing launched yet); a look with timeout 0 from
        // this thread returns at once with SRB_NOT_READY, storing no number.
        std::thread::scope(|scope| -> Result<()> {
            let blocked = scope.spawn(|| next(2_000_000_000));
            std::thread::sleep(Duration::from_millis(300));
            let t = Instant::now();
            let (code, seq, _) = next(0);
            ensure!(
                code == capi::SRB_NOT_READY && seq == u64::MAX,
                "look while another thread waits: {code}, seq {seq}"
            );
            ensure!(
                t.elapsed() < Duration::from_millis(500),
                "timeout 0 waited {:?}",
                t.elapsed()
            );
            let (code, seq, _) = blocked.join().expect("consumer panicked");
            ensure!(
                code == capi::SRB_TIMEOUT && seq == 1,
                "blocked consumer: {code}, seq {seq}"
            );
            Ok(())
        })?;

        for _ in 0..REPLAYS {
            graph.launch()?;
        }
        stream.synchronize()?;
        // Four threads take the replays concurrently; each number must come out once.
        let taken: Vec<(i32, u64, u64)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let (code, seq, n) = next(200_000_000);
                            match code {
                                capi::SRB_NOT_READY => continue,
                                capi::SRB_TIMEOUT => break,
                                capi::SRB_OK => {
                                    let released = capi::srb_release(handle as *const _, seq);
                                    mine.push((code, seq, n));
                                    if released != capi::SRB_OK {
                                        mine.push((released, seq, 0));
                                    }
                                }
                                _ => mine.push((code, seq, n)),
                            }
                        }
                        mine
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("consumer panicked"))
                .collect()
        });
        let mut seqs: Vec<u64> = taken.iter().map(|t| t.1).collect();
        seqs.sort_unstable();
        ensure!(
            seqs == (1..=REPLAYS).collect::<Vec<_>>(),
            "replay numbers taken: {seqs:?}"
        );
        for &(code, seq, n) in &taken {
            let key = 2 * (seq - 1) + 1;
            let want = step_count(key, cap as u64);
            let expected = if want < 0 {
                capi::SRB_ERR_NEGATIVE_COUNT
            } else if want > cap as i64 {
                capi::SRB_ERR_COUNT_EXCEEDS_CAPACITY
            } else {
                ensure!(n as i64 == want, "seq {seq}: count {n} != {want}");
                capi::SRB_OK
            };
            ensure!(code == expected, "seq {seq}: code {code} (want {expected})");
        }
        ensure!(
            taken.iter().any(|t| t.0 != capi::SRB_OK),
            "keys 7 and 13 are count errors"
        );
        drop(graph);
        capi::srb_destroy(rb);
    }
    Ok(())
}

/// examples/seed_capi.expected (what scripts/build-seed-capi.sh --run compares the C++
/// program's output with) must be the seed's expected output of src/seed.rs.
fn seed_capi_expected_output() -> Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/seed_capi.expected");
    let text = std::fs::read_to_string(path).context("examples/seed_capi.expected")?;
    ensure!(
        text == sized_readback::testing::seed::EXPECTED,
        "examples/seed_capi.expected differs from seed::EXPECTED"
    );
    Ok(())
}

type TestFn = fn() -> Result<()>;

fn main() {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = Some(1);
    }
    let gpu = gpu_present();
    let gpu_tests: &[(&str, TestFn)] = &[
        ("columns_mixed_types", columns_mixed_types),
        ("columns_count_rules", columns_count_rules),
        ("columns_api_misuse", columns_api_misuse),
        (
            "columns_cloned_schema_types_are_checked",
            columns_cloned_schema_types_are_checked,
        ),
        ("columns_raw_after_an_event", columns_raw_after_an_event),
        ("graph_replays_the_seed_loop", graph_replays_the_seed_loop),
        ("graph_overrun_is_detected", graph_overrun_is_detected),
        ("graph_record_without_capture", graph_record_without_capture),
        (
            "graph_misuse_is_reported_at_once",
            graph_misuse_is_reported_at_once,
        ),
        ("capi_host_mode", capi_host_mode),
        ("capi_graph_mode", capi_graph_mode),
        (
            "capi_graph_concurrent_consumers",
            capi_graph_concurrent_consumers,
        ),
    ];
    let run = |f: TestFn| move || f().map_err(|e| Failed::from(format!("{e:#}")));
    let mut trials: Vec<Trial> = gpu_tests
        .iter()
        .map(|&(name, f)| {
            Trial::test(name, run(f))
                .with_kind("gpu")
                .with_ignored_flag(!gpu)
        })
        .collect();
    trials.push(Trial::test(
        "capi_argument_errors",
        run(capi_argument_errors),
    ));
    trials.push(Trial::test(
        "seed_capi_expected_output",
        run(seed_capi_expected_output),
    ));
    if !gpu {
        eprintln!("no CUDA driver or device: GPU tests are reported as ignored");
    }
    libtest_mimic::run(&args, trials).exit();
}
