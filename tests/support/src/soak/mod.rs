//! The soak: many readbacks with random counts, element sizes, transports, wait modes and
//! slots in flight, each one checked against a host reference (every status, every byte).
//!
//! Shared by the GPU test binary's reliability tests (`tests/gpu/reliability/`, a short run)
//! and `examples/soak.rs` (the long run: `--readbacks 1000000`).
//!
//! Each worker thread owns one stream, three patterned source buffers (device and host
//! copies) and one *lane* per (element type, transport). A lane is a readback with a random
//! capacity, slot count, wait mode and launch mode, plus a table of device-resident counts of
//! all four count types (0, 1, capacity, capacity + 1, negative, huge, random). A step picks
//! a lane, waits for (or, now and then, drops unwaited) its oldest ticket once all its slots
//! are in flight, and enqueues a new readback of a random count from a random source at a
//! random byte offset (so unaligned sources too) with a random source length (sometimes
//! shorter than the count). The expected outcome is computed on the host from the stored
//! count value alone: data (`count` bytes-exact), `NegativeCount`, `CountExceedsCapacity` or
//! `CountExceedsSource`, with their fields.
//!
//! Besides the pack lanes, each worker has append lanes (the test kernel `srbt_append_u64`
//! appends a random count of rows, 0, 1, capacity, capacity + 1, past the spill or random,
//! into an `AppendReadback`; every row checked as a multiset, every overflow's numbers, the
//! slot's rows and the fetched spill) and graph lanes (a captured graph replayed again and
//! again: packs of the embedding step, and append kernels; every replay checked).
//!
//! Here: the configuration, the report, the worker and its run. The lanes are in
//! `pack`, `append` and `graph`; the host reference (random stream, expected
//! outcomes, the check of a readout) in `reference`.
use anyhow::{Context as _, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use sized_readback::testing::{pattern, Kernels};
use sized_readback::Transport;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod append;
mod graph;
mod pack;
mod reference;

use append::AppendLane;
use graph::{GraphAppendLane, GraphPackLane};
use pack::Lane;
pub use reference::{count_values, expected, Expected, Rng};

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakConfig {
    /// Readbacks to enqueue in total (over all threads).
    pub readbacks: u64,
    /// Worker threads, each with its own stream and readbacks.
    pub threads: usize,
    /// Seed of every random choice (runs are reproducible up to thread interleaving).
    pub seed: u64,
    /// Print a progress line every this many readbacks per thread (0: never).
    pub progress_every: u64,
    /// A worker holds this lock shared while it makes its lanes, for each step, and while it
    /// drops its lanes: a test that takes it exclusively runs with no soak driver call beside
    /// it (the soak's synchronizing calls, such as freeing pinned slots, wait for all of the
    /// device's work and hold other threads' driver calls meanwhile).
    pub pause: Option<std::sync::Arc<std::sync::RwLock<()>>>,
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    /// Readbacks enqueued.
    pub enqueued: u64,
    /// Readbacks waited on whose outcome was checked (data or error status).
    pub verified: u64,
    /// ... of which came back with data, every byte compared.
    pub verified_data: u64,
    /// ... of which came back with the expected error status.
    pub verified_status: u64,
    /// Errors by kind among `verified_status`: negative, over capacity, over source.
    pub negative: u64,
    /// See `negative`.
    pub over_capacity: u64,
    /// See `negative`.
    pub over_source: u64,
    /// Tickets dropped without waiting (their slots reused at once).
    pub dropped_unwaited: u64,
    /// ... of which were appends by a kernel (rows as multisets; overflows included).
    pub appends: u64,
    /// ... of which were graph replays (pack and append recordings).
    pub replays: u64,
    /// Verified readbacks per transport: mapped, staged.
    pub mapped: u64,
    /// See `mapped`.
    pub staged: u64,
    /// Bytes compared against the host reference.
    pub bytes_compared: u64,
    /// Outcomes that differed from the reference (must be 0).
    pub mismatches: u64,
    /// The first few mismatches, described.
    pub first_mismatches: Vec<String>,
    /// Wall time.
    pub elapsed: Duration,
}

impl SoakReport {
    fn add(&mut self, o: &SoakReport) {
        self.enqueued += o.enqueued;
        self.verified += o.verified;
        self.verified_data += o.verified_data;
        self.verified_status += o.verified_status;
        self.negative += o.negative;
        self.over_capacity += o.over_capacity;
        self.over_source += o.over_source;
        self.dropped_unwaited += o.dropped_unwaited;
        self.appends += o.appends;
        self.replays += o.replays;
        self.mapped += o.mapped;
        self.staged += o.staged;
        self.bytes_compared += o.bytes_compared;
        self.mismatches += o.mismatches;
        for m in &o.first_mismatches {
            if self.first_mismatches.len() < 20 {
                self.first_mismatches.push(m.clone());
            }
        }
    }

    /// One line per figure, for logs and RELIABILITY.md.
    pub fn summary(&self) -> String {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        format!(
            "readbacks enqueued: {}\nreadbacks verified: {} (data: {}, error status: {} = \
             negative {} + over capacity {} + over source {})\nof which appends: {}, graph \
             replays: {}\nby transport: mapped {}, staged \
             {}\ndropped unwaited (slot reused at once): {}\nbytes compared: {}\nmismatches: \
             {}\nelapsed: {:.1} s ({:.0} readbacks/s)",
            self.enqueued,
            self.verified,
            self.verified_data,
            self.verified_status,
            self.negative,
            self.over_capacity,
            self.over_source,
            self.appends,
            self.replays,
            self.mapped,
            self.staged,
            self.dropped_unwaited,
            self.bytes_compared,
            self.mismatches,
            secs,
            self.enqueued as f64 / secs,
        )
    }
}

/// A worker thread's patterned source buffers.
struct Sources {
    dev: Vec<CudaSlice<u8>>,
    host: Vec<Vec<u8>>,
}

const SOURCE_BYTES: usize = 80 * 1024;

trait Step {
    fn step(&mut self, w: &mut Worker) -> Result<()>;
    fn drain(&mut self, w: &mut Worker) -> Result<()>;
}

struct Worker {
    stream: Arc<CudaStream>,
    sources: Sources,
    rng: Rng,
    report: SoakReport,
}

impl Worker {
    /// Counts one verified readback of `transport`.
    fn verified(&mut self, transport: Transport, data: bool, bytes: u64) {
        let r = &mut self.report;
        r.verified += 1;
        r.bytes_compared += bytes;
        if data {
            r.verified_data += 1;
        } else {
            r.verified_status += 1;
        }
        match transport {
            Transport::Staged => r.staged += 1,
            Transport::Mapped | Transport::Auto => r.mapped += 1,
        }
    }
}

impl Worker {
    fn mismatch(&mut self, what: String) {
        self.report.mismatches += 1;
        if self.report.first_mismatches.len() < 20 {
            self.report.first_mismatches.push(what);
        }
    }
}

fn lanes(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    rng: &mut Rng,
) -> Result<Vec<Box<dyn Step>>> {
    let mut v: Vec<Box<dyn Step>> = Vec::new();
    let kernels = Kernels::load(ctx)?;
    for t in [Transport::Mapped, Transport::Staged] {
        for _ in 0..2 {
            v.push(Box::new(AppendLane::new(ctx, rng, t, &kernels)?));
        }
    }
    v.push(Box::new(GraphPackLane::new(ctx, stream, &kernels)?));
    v.push(Box::new(GraphAppendLane::new(ctx, stream, &kernels)?));
    for t in [Transport::Mapped, Transport::Staged] {
        v.push(Box::new(Lane::<u8>::new(ctx, stream, rng, t)?));
        v.push(Box::new(Lane::<u16>::new(ctx, stream, rng, t)?));
        v.push(Box::new(Lane::<[u8; 3]>::new(ctx, stream, rng, t)?));
        v.push(Box::new(Lane::<f32>::new(ctx, stream, rng, t)?));
        v.push(Box::new(Lane::<[u8; 7]>::new(ctx, stream, rng, t)?));
        v.push(Box::new(Lane::<f64>::new(ctx, stream, rng, t)?));
        v.push(Box::new(Lane::<[f32; 3]>::new(ctx, stream, rng, t)?));
        v.push(Box::new(Lane::<u128>::new(ctx, stream, rng, t)?));
    }
    Ok(v)
}

fn worker(ctx: Arc<CudaContext>, id: usize, n: u64, cfg: &SoakConfig) -> Result<SoakReport> {
    let stream = ctx.new_stream()?;
    let mut rng = Rng::new(cfg.seed ^ pattern::mix(id as u64 + 1));
    let mut sources = Sources {
        dev: Vec::new(),
        host: Vec::new(),
    };
    let shared = || {
        cfg.pause
            .as_ref()
            .map(|p| p.read().unwrap_or_else(|e| e.into_inner()))
    };
    let setup = shared();
    for s in 0..3u64 {
        let host = pattern::bytes(cfg.seed.wrapping_add(1000 * id as u64 + s), SOURCE_BYTES);
        sources.dev.push(stream.clone_htod(&host)?);
        sources.host.push(host);
    }
    let mut lanes = lanes(&ctx, &stream, &mut rng)?;
    stream.synchronize()?;
    drop(setup);
    let mut w = Worker {
        stream,
        sources,
        rng,
        report: SoakReport::default(),
    };
    for i in 0..n {
        let k = w.rng.below(lanes.len() as u64) as usize;
        let step = shared();
        lanes[k].step(&mut w)?;
        drop(step);
        if cfg.progress_every > 0 && (i + 1) % cfg.progress_every == 0 {
            eprintln!(
                "soak thread {id}: {} enqueued, {} verified, {} mismatches",
                w.report.enqueued, w.report.verified, w.report.mismatches
            );
        }
        if w.report.mismatches > 1000 {
            break; // something is badly wrong; the report says what
        }
    }
    let _teardown = shared();
    for l in &mut lanes {
        l.drain(&mut w)?;
    }
    drop(lanes);
    w.stream.synchronize()?;
    Ok(w.report)
}

/// Runs the soak on `ctx` and returns the summed report. Errors only on setup failures;
/// wrong outcomes are counted in `mismatches`.
pub fn run(ctx: &Arc<CudaContext>, cfg: &SoakConfig) -> Result<SoakReport> {
    let t0 = Instant::now();
    let threads = cfg.threads.max(1);
    let per = cfg.readbacks / threads as u64;
    let extra = cfg.readbacks % threads as u64;
    let reports: Vec<Result<SoakReport>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|id| {
                let ctx = ctx.clone();
                let n = per + u64::from((id as u64) < extra);
                s.spawn(move || worker(ctx, id, n, cfg))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("worker panicked")))
            })
            .collect()
    });
    let mut total = SoakReport::default();
    for r in reports {
        total.add(&r?);
    }
    ctx.check_err().context("a deferred cudarc error")?;
    total.elapsed = t0.elapsed();
    Ok(total)
}
