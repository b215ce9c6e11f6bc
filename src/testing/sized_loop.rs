//! The seed's loop with its next step sized by the device count (issue 36), measured seven ways
//! in one run: the measurement behind `examples/sized_loop.rs` and the comparison harness's
//! sized-step rows.
//!
//! Each of `steps` steps a producer writes a count (log-uniform in [1, capacity], a new one
//! every step) and the next kernel (the sized launch's test body) processes that many items:
//!
//! - `sync`: the count copied to pinned memory, the stream synchronized, the kernel launched
//!   with the exact grid (what `.item()` or `cudaStreamSynchronize` code does);
//! - `over`: the kernel launched with the capacity's grid, its extra blocks exiting at once;
//! - `sized`: a [`SizedLaunch`] enqueued each step: the device picks the class's grid;
//! - `sized-grid`: a [`SizedLaunch`] in the exact-grid form enqueued each step: the device sets
//!   the kernel's grid to the count's (256 items a block), with no SWITCH;
//! - `over-graph`, `sized-graph` and `sized-grid-graph`: the whole loop (producer and step,
//!   every step) recorded once into a CUDA graph (with [`SizedLaunch::record`] for the sized
//!   ones) and launched once per loop, so each graph way has a rival that is a graph too.
//!
//! A loop's time over its steps, p50 and p99 over `repeats` loops after 3 warm-up loops. Every
//! way is then checked: its items written and none past them, which body ran with which
//! `n_max` (the body's meta words), and for the sized ways the outcome the launch reports.
use super::{launch_sized_body, CapturedGraph, DeviceBuffer, Kernel, Kernels, PinnedBuffer};
use crate::error::{Error, Result};
use crate::raw::driver::{self, check};
use crate::{LaunchShape, RawCount, SizedLaunch};
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaStream};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

/// The ways, in the order they are measured and reported.
pub const SIZED_LOOP_WAYS: [&str; 7] = [
    "sync",
    "over",
    "sized",
    "sized-grid",
    "over-graph",
    "sized-graph",
    "sized-grid-graph",
];

/// The exact-grid ways' items per block: the test body's block, one item a thread.
const PER_BLOCK: u64 = super::SIZED_BODY_BLOCK as u64;

/// One way's time per step, µs.
#[derive(Debug, Clone, PartialEq)]
pub struct SizedLoopWay {
    /// One of [`SIZED_LOOP_WAYS`].
    pub way: &'static str,
    /// p50 over the loops of a loop's time over its steps.
    pub p50_us: f64,
    /// p99 of the same.
    pub p99_us: f64,
}

/// One run of the sized loop.
#[derive(Debug, Clone, PartialEq)]
pub struct SizedLoop {
    /// The largest count, and the over-launch's grid.
    pub capacity: u64,
    /// Steps per loop.
    pub steps: usize,
    /// Timed loops per way.
    pub repeats: usize,
    /// The median of the loop's counts.
    pub median_count: u64,
    /// The sized launch's classes.
    pub classes: usize,
    /// How long building the sized launch took, µs.
    pub build_us: f64,
    /// Every way measured, in [`SIZED_LOOP_WAYS`] order (the exact grid's are left out where
    /// the driver refused the form; `wrong` says why).
    pub ways: Vec<SizedLoopWay>,
    /// Each way whose check found something wrong, with what (empty: all right).
    pub wrong: Vec<String>,
}

impl SizedLoop {
    /// p50 per step of `way`, µs.
    pub fn p50(&self, way: &str) -> Option<f64> {
        self.ways.iter().find(|w| w.way == way).map(|w| w.p50_us)
    }
}

/// Counts log-uniform in [1, capacity], a fixed sequence.
fn counts(steps: usize, capacity: u64) -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..steps)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            ((capacity as f64).powf(u).round() as u64).clamp(1, capacity)
        })
        .collect()
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

struct Rig {
    stream: Arc<CudaStream>,
    count: DeviceBuffer,
    out: DeviceBuffer,
    meta: DeviceBuffer,
    store: Kernel,
    body: Kernel,
    host_count: PinnedBuffer,
    capacity: u64,
}

impl Rig {
    fn s(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }
    /// The producer: srb_store_count(count, kind 0 (i32), n).
    fn produce(&self, n: u64) -> Result<()> {
        let (mut c, mut kind, mut v) = (self.count.ptr(), 0i32, n);
        let mut args: [*mut c_void; 3] = [
            (&mut c as *mut u64).cast(),
            (&mut kind as *mut i32).cast(),
            (&mut v as *mut u64).cast(),
        ];
        let shape = LaunchShape {
            grid: 1,
            block: 32,
            programmatic: false,
        };
        // SAFETY: srb_store_count(void*, int, uint64_t); the count buffer holds one i32; a
        // live (or capturing) stream of the context.
        unsafe { self.store.launch(self.s(), shape, &mut args) }
    }
    /// The step: srb_test_sized_body with n_max threads, on `stream`.
    fn body_on(&self, stream: sys::CUstream, n_max: u64, class: u32) -> Result<()> {
        // SAFETY: the test body; out holds capacity + 64 words, meta 4; the count one i32; a
        // live (or capturing) stream of the context.
        unsafe {
            launch_sized_body(
                &self.body,
                stream,
                self.count.ptr(),
                n_max,
                class,
                self.out.ptr(),
                self.meta.ptr(),
            )
        }
    }
    /// The sync way's read of the count: D2H into pinned memory, the stream synchronized.
    fn read_count(&self) -> Result<u64> {
        // SAFETY: 4 bytes from the count into pinned memory, on a live stream; synchronized
        // before they are read.
        unsafe {
            check(
                sys::cuMemcpyDtoHAsync_v2(
                    self.host_count.host_ptr().cast(),
                    self.count.ptr(),
                    4,
                    self.s(),
                ),
                "cuMemcpyDtoHAsync",
            )?;
        }
        self.synchronize()?;
        // SAFETY: the copy above completed.
        Ok(unsafe { *(self.host_count.host_ptr() as *const i32) } as u64)
    }
    fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(Error::cuda("cuStreamSynchronize"))
    }
    /// One step of `way` after the producer wrote `n`: `launch` is the sized ways' sized
    /// launch, `grid` the exact-grid ways'.
    fn step(
        &self,
        way: &str,
        launch: &SizedLaunch,
        grid: Option<&SizedLaunch>,
        n: u64,
    ) -> Result<()> {
        self.produce(n)?;
        match way {
            "sync" => {
                let m = self.read_count()?;
                self.body_on(self.s(), m, 0)
            }
            "over" => self.body_on(self.s(), self.capacity, 0),
            "sized-grid" => grid
                .ok_or_else(|| Error::config("the exact-grid form was not built"))?
                .enqueue(&self.stream)
                .map(drop),
            _ => launch.enqueue(&self.stream).map(drop),
        }
    }
}

impl Rig {
    /// The whole loop of `seq` captured on the rig's stream: each step the producer, then
    /// `step` (which enqueues the step on the capturing stream).
    ///
    /// # Safety
    /// What `step` records (a sized launch, its buffers) outlives every launch of the graph.
    unsafe fn record_loop(
        &self,
        seq: &[u64],
        mut step: impl FnMut() -> Result<()>,
    ) -> Result<CapturedGraph> {
        let record = || {
            seq.iter().try_for_each(|&n| {
                self.produce(n)?;
                step()
            })
        };
        // SAFETY: the rig's stream, of the bound context; per the contract for what `step`
        // records, and the rig's buffers outlive the graph (the caller drops it first).
        unsafe { CapturedGraph::capture(&self.stream, record) }
    }
}

/// Measures the sized loop in `ctx` at `capacity`: `steps` steps per loop, `repeats` timed
/// loops per way after 3 warm-ups. Needs a CUDA 12.8 driver
/// ([`Error::SizedLaunchUnavailable`] otherwise); [`Error::InvalidConfig`] for no step, no
/// repeat or a capacity of 0.
pub fn sized_loop(
    ctx: &Arc<CudaContext>,
    capacity: u64,
    steps: usize,
    repeats: usize,
) -> Result<SizedLoop> {
    if steps == 0 || repeats == 0 || capacity == 0 {
        return Err(Error::config(
            "the sized loop needs at least one step, one repeat and a capacity",
        ));
    }
    driver::bind(ctx)?;
    let kernels = Kernels::load(ctx)?;
    let rig = Rig {
        stream: ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?,
        count: DeviceBuffer::new_zeroed(ctx, 8)?,
        out: DeviceBuffer::new_zeroed(ctx, 8 * (capacity as usize + 64))?,
        meta: DeviceBuffer::new_zeroed(ctx, 32)?,
        store: kernels.function("srb_store_count")?,
        body: kernels.function("srb_test_sized_body")?,
        host_count: PinnedBuffer::new(ctx, 64, false)?,
        capacity,
    };
    let t0 = Instant::now();
    let launch = SizedLaunch::builder(RawCount::i32(rig.count.ptr()), capacity)
        .build(ctx, |c| {
            rig.body_on(c.stream().cu_stream(), c.n_max(), c.index() as u32)
        })?;
    let build_us = t0.elapsed().as_secs_f64() * 1e6;
    // The exact-grid form: the body recorded for the capacity, its grid set per count. Where
    // the driver refuses it, its ways are left out (the others still measured) and the run
    // says why in `wrong`.
    let mut wrong = Vec::new();
    let grid = SizedLaunch::builder(RawCount::i32(rig.count.ptr()), capacity)
        .exact_grid(PER_BLOCK)
        .build(ctx, |c| rig.body_on(c.stream().cu_stream(), c.n_max(), 0))
        .inspect_err(|e| wrong.push(format!("sized-grid, sized-grid-graph: not built: {e}")))
        .ok();
    let seq = counts(steps, capacity);
    let mut sorted = seq.clone();
    sorted.sort_unstable();
    let median_count = sorted[seq.len() / 2];
    let s = rig.s();
    // SAFETY: the graphs are dropped before `launch` and `grid` (declared after them) and `rig`.
    let sized_graph = unsafe { rig.record_loop(&seq, || launch.record(s))? };
    let grid_graph = match &grid {
        // SAFETY: as above; CapturedGraph uploads the graph, as the exact grid's node needs.
        Some(g) => Some(unsafe { rig.record_loop(&seq, || g.record(s))? }),
        None => None,
    };
    // SAFETY: as above; the step launches the rig's body.
    let over_graph = unsafe { rig.record_loop(&seq, || rig.body_on(s, capacity, 0))? };
    let graph_of = |way: &str| match way {
        "sized-graph" => Some(&sized_graph),
        "sized-grid-graph" => grid_graph.as_ref(),
        "over-graph" => Some(&over_graph),
        _ => None,
    };
    let exact_grid = |way: &str| way.starts_with("sized-grid");
    // The ways this run measures: all but the exact grid's where it was not built.
    let measured = |way: &str| grid.is_some() || !exact_grid(way);

    let mut per_step: Vec<Vec<f64>> = vec![Vec::new(); SIZED_LOOP_WAYS.len()];
    for rep in 0..repeats + 3 {
        for (w, way) in SIZED_LOOP_WAYS.iter().enumerate() {
            if !measured(way) {
                continue;
            }
            rig.synchronize()?;
            let t = Instant::now();
            if let Some(graph) = graph_of(way) {
                graph.launch()?;
            } else {
                for &n in &seq {
                    rig.step(way, &launch, grid.as_ref(), n)?;
                }
            }
            rig.synchronize()?;
            if rep >= 3 {
                per_step[w].push(t.elapsed().as_secs_f64() * 1e6 / seq.len() as f64);
            }
        }
    }

    // Correctness, once per way, on a zeroed output and zeroed meta words: the items of the
    // step's count written and none past them (the over-launch's extra blocks exit, the sized
    // body bounds its grid by the device count), the body that ran and its n_max, and for the
    // sized ways the count and class the launch reports. A stream way runs one step of the
    // median count; a graph way its whole loop, whose last count is the one reported.
    let classes = launch.classes().to_vec();
    let class_of = |n: u64| classes.iter().position(|&c| n <= c).expect("n <= capacity");
    let last = *seq.last().expect("at least one step");
    let largest = *sorted.last().expect("at least one step");
    let out_len = capacity as usize + 64;
    let mut got = vec![0u64; out_len];
    let mut meta = [0u64; 4];
    for way in SIZED_LOOP_WAYS.into_iter().filter(|w| measured(w)) {
        for (buf, len) in [(&rig.out, 8 * out_len), (&rig.meta, 32)] {
            // SAFETY: the buffer's bytes, on the rig's stream; synchronized below.
            let status = unsafe { sys::cuMemsetD8Async(buf.ptr(), 0, len, rig.s()) };
            check(status, "cuMemsetD8Async")?;
        }
        let mut reported = None;
        let (n, bodies) = match (way, graph_of(way)) {
            (_, Some(graph)) => {
                graph.launch()?;
                (last, seq.len() as u64)
            }
            ("sized" | "sized-grid", None) => {
                rig.produce(median_count)?;
                let l = match (exact_grid(way), &grid) {
                    (true, Some(g)) => g,
                    _ => &launch,
                };
                let done = l.enqueue(&rig.stream)?.wait()?;
                reported = Some((done.count(), done.class()));
                (median_count, 1)
            }
            (_, None) => {
                rig.step(way, &launch, grid.as_ref(), median_count)?;
                (median_count, 1)
            }
        };
        rig.synchronize()?;
        if way == "sized-graph" {
            reported = launch.recorded_outcome()?.map(|o| (o.count(), o.class()));
        }
        if let ("sized-grid-graph", Some(g)) = (way, &grid) {
            reported = g.recorded_outcome()?.map(|o| (o.count(), o.class()));
        }
        // SAFETY: out_len u64 and the four meta words into host memory; synchronized above.
        unsafe {
            let status = sys::cuMemcpyDtoH_v2(got.as_mut_ptr().cast(), rig.out.ptr(), 8 * out_len);
            check(status, "cuMemcpyDtoH")?;
            let status = sys::cuMemcpyDtoH_v2(meta.as_mut_ptr().cast(), rig.meta.ptr(), 32);
            check(status, "cuMemcpyDtoH")?;
        }
        // A graph way's earlier steps wrote their items too: past the loop's largest count
        // nothing may be written.
        let bound = if graph_of(way).is_some() { largest } else { n } as usize;
        let n_max = match way {
            "sync" => n,
            "over" | "over-graph" => capacity,
            w if exact_grid(w) => capacity,
            _ => classes[class_of(n)],
        };
        // The class a sized way reports: the exact-grid form has one.
        let class = if exact_grid(way) { 0 } else { class_of(n) };
        let mut what = Vec::new();
        if !got[..n as usize]
            .iter()
            .enumerate()
            .all(|(i, &v)| v == 2 * i as u64 + 1)
        {
            what.push(format!("the {n} items are not all written"));
        }
        if got[bound] != 0 {
            what.push(format!("item {bound}, past the count, written"));
        }
        if meta[3] != bodies || meta[0] != n_max {
            what.push(format!(
                "{} bodies ran, the last with n_max {}, not {bodies} and {n_max}",
                meta[3], meta[0]
            ));
        }
        if way.starts_with("sized") && reported != Some((n, class)) {
            what.push(format!(
                "the launch reported {reported:?}, not count {n} in class {class}"
            ));
        }
        // The exact grid: the (last) body ran ceil(n / 256) blocks, not its recorded grid.
        if exact_grid(way) && meta[1] != n.div_ceil(PER_BLOCK) * PER_BLOCK {
            what.push(format!(
                "the body ran {} threads, not the {} of count {n}'s grid",
                meta[1],
                n.div_ceil(PER_BLOCK) * PER_BLOCK
            ));
        }
        if !what.is_empty() {
            wrong.push(format!("{way}: {}", what.join("; ")));
        }
    }
    drop(sized_graph);
    drop(grid_graph);
    drop(over_graph);

    let ways = SIZED_LOOP_WAYS
        .iter()
        .zip(per_step)
        .filter(|(way, _)| measured(way))
        .map(|(&way, mut v)| {
            v.sort_by(f64::total_cmp);
            SizedLoopWay {
                way,
                p50_us: percentile(&v, 0.5),
                p99_us: percentile(&v, 0.99),
            }
        })
        .collect();
    Ok(SizedLoop {
        capacity,
        steps,
        repeats,
        median_count,
        classes: launch.classes().len(),
        build_us,
        ways,
        wrong,
    })
}
