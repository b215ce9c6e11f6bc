//! The seed's loop with its next step sized by the device count (issue 36), measured four ways
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
//! - `sized-graph`: the whole loop (producer and sized step, every step) recorded once into a
//!   CUDA graph with [`SizedLaunch::record`] and launched once per loop.
//!
//! A loop's time over its steps, p50 and p99 over `repeats` loops after 3 warm-up loops; every
//! way is then checked once on a step of the median count (its items written, none past them).
use super::{launch_sized_body, DeviceBuffer, Kernel, Kernels, PinnedBuffer};
use crate::error::{Error, Result};
use crate::raw::driver::{self, check};
use crate::{LaunchShape, RawCount, SizedLaunch};
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaStream};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Instant;

/// The four ways, in the order they are measured and reported.
pub const SIZED_LOOP_WAYS: [&str; 4] = ["sync", "over", "sized", "sized-graph"];

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
    /// Every way, in [`SIZED_LOOP_WAYS`] order.
    pub ways: Vec<SizedLoopWay>,
    /// Each way whose check step wrote the wrong items, with what was wrong (empty: all right).
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
    /// One step of `way` after the producer wrote `n`.
    fn step(&self, way: &str, launch: &SizedLaunch, n: u64) -> Result<()> {
        self.produce(n)?;
        match way {
            "sync" => {
                let m = self.read_count()?;
                self.body_on(self.s(), m, 0)
            }
            "over" => self.body_on(self.s(), self.capacity, 0),
            _ => launch.enqueue(&self.stream).map(drop),
        }
    }
}

/// A captured and instantiated graph of the whole loop, destroyed on drop.
struct LoopGraph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl LoopGraph {
    /// Records every step of `seq` (producer, then the sized step) on the rig's stream.
    ///
    /// # Safety
    /// `launch` outlives every launch of the graph (drop the graph first).
    unsafe fn record(rig: &Rig, launch: &SizedLaunch, seq: &[u64]) -> Result<Self> {
        let s = rig.s();
        let mut g = LoopGraph {
            graph: std::ptr::null_mut(),
            exec: std::ptr::null_mut(),
        };
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: a live stream of the bound context; ended below on every path.
        let begun = unsafe { sys::cuStreamBeginCapture_v2(s, mode) };
        check(begun, "cuStreamBeginCapture")?;
        let captured = seq.iter().try_for_each(|&n| {
            rig.produce(n)?;
            // SAFETY: `s` is capturing; per the contract, `launch` outlives the graph.
            unsafe { launch.record(s) }
        });
        // SAFETY: the capture begun above; the graph is owned by `g`.
        let ended = unsafe { sys::cuStreamEndCapture(s, &mut g.graph) };
        let ended = check(ended, "cuStreamEndCapture");
        captured?;
        ended?;
        // SAFETY: a graph just captured; the executable is owned by `g`.
        unsafe {
            check(
                sys::cuGraphInstantiateWithFlags(&mut g.exec, g.graph, 0),
                "cuGraphInstantiate",
            )?;
            check(sys::cuGraphUpload(g.exec, s), "cuGraphUpload")?;
        }
        Ok(g)
    }
    fn launch(&self, rig: &Rig) -> Result<()> {
        // SAFETY: a live executable graph and a live stream of its context.
        let status = unsafe { sys::cuGraphLaunch(self.exec, rig.s()) };
        check(status, "cuGraphLaunch")
    }
}

impl Drop for LoopGraph {
    fn drop(&mut self) {
        // SAFETY: owned handles, null or live; the caller synchronized the last launch.
        unsafe {
            if !self.exec.is_null() {
                sys::cuGraphExecDestroy(self.exec);
            }
            if !self.graph.is_null() {
                sys::cuGraphDestroy(self.graph);
            }
        }
    }
}

/// Measures the sized loop in `ctx` at `capacity`: `steps` steps per loop, `repeats` timed
/// loops per way after 3 warm-ups. Needs a CUDA 12.8 driver
/// ([`Error::SizedLaunchUnavailable`] otherwise).
pub fn sized_loop(
    ctx: &Arc<CudaContext>,
    capacity: u64,
    steps: usize,
    repeats: usize,
) -> Result<SizedLoop> {
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
    let seq = counts(steps, capacity);
    let mut sorted = seq.clone();
    sorted.sort_unstable();
    let median_count = sorted[seq.len() / 2];
    // SAFETY: `graph` is dropped before `launch` (declared after it).
    let graph = unsafe { LoopGraph::record(&rig, &launch, &seq)? };

    let mut per_step: Vec<Vec<f64>> = vec![Vec::new(); SIZED_LOOP_WAYS.len()];
    for rep in 0..repeats + 3 {
        for (w, way) in SIZED_LOOP_WAYS.iter().enumerate() {
            rig.synchronize()?;
            let t = Instant::now();
            if *way == "sized-graph" {
                graph.launch(&rig)?;
            } else {
                for &n in &seq {
                    rig.step(way, &launch, n)?;
                }
            }
            rig.synchronize()?;
            if rep >= 3 {
                per_step[w].push(t.elapsed().as_secs_f64() * 1e6 / seq.len() as f64);
            }
        }
    }

    // Correctness, once per way: a step of the median count on a zeroed output (for
    // sized-graph: the loop, whose last step's count is known), its items written and none
    // past them (the over-launch's extra blocks exit, the sized body bounds its grid by the
    // device count).
    let mut wrong = Vec::new();
    let out_len = capacity as usize + 64;
    let mut got = vec![0u64; out_len];
    for way in SIZED_LOOP_WAYS {
        // SAFETY: the output buffer's bytes, on the rig's stream; synchronized below.
        unsafe {
            check(
                sys::cuMemsetD8Async(rig.out.ptr(), 0, 8 * out_len, rig.s()),
                "cuMemsetD8Async",
            )?
        };
        let n = if way == "sized-graph" {
            graph.launch(&rig)?;
            *seq.last().expect("at least one step")
        } else {
            rig.step(way, &launch, median_count)?;
            median_count
        } as usize;
        rig.synchronize()?;
        // SAFETY: out_len u64 from the output buffer into `got`; the stream is synchronized.
        unsafe {
            check(
                sys::cuMemcpyDtoH_v2(got.as_mut_ptr().cast(), rig.out.ptr(), 8 * out_len),
                "cuMemcpyDtoH",
            )?
        };
        // sized-graph's earlier steps wrote their items too: only the last step's bound holds
        // for the items past the largest count, so check the last count's items and, when it
        // is the loop's largest, nothing past it.
        let right = got[..n]
            .iter()
            .enumerate()
            .all(|(i, &v)| v == 2 * i as u64 + 1);
        let bounded = if way == "sized-graph" {
            let max = *sorted.last().expect("at least one step") as usize;
            got[max] == 0
        } else {
            got[n] == 0
        };
        if !(right && bounded) {
            wrong.push(format!("{way}: a step of {n} items wrote the wrong items"));
        }
    }
    drop(graph);

    let ways = SIZED_LOOP_WAYS
        .iter()
        .zip(per_step)
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
