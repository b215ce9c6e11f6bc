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
use crate::step::step_count;
use anyhow::{Context as _, Result};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaGraph, CudaSlice, CudaStream, CudaView};
use sized_readback::testing::{pattern, DeviceBuffer, Kernel, Kernels};
use sized_readback::{
    AppendDesc, AppendReadback, AppendTicket, ColumnReadout, ColumnSchema, ColumnSource, CountKind,
    Element, Error, GraphReadback, RawCount, Readback, ReadbackConfig, Readout, Ticket, Transport,
    WaitMode,
};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// SplitMix64 stream: reproducible, no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A stream from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        pattern::mix(self.0)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// One of `items`.
    pub fn pick<'a, X>(&mut self, items: &'a [X]) -> &'a X {
        &items[self.below(items.len() as u64) as usize]
    }
    /// True with probability 1/n.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// The outcome the host reference predicts for one readback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// `n` elements, equal to the source's bytes.
    Data(usize),
    /// `Error::NegativeCount { count }`.
    Negative(i64),
    /// `Error::CountExceedsCapacity { count, capacity }`.
    OverCapacity(u64, usize),
    /// `Error::CountExceedsSource { count, column: 0, source_len }`.
    OverSource(u64, usize),
}

/// What the pack kernel must report for the count `value` (stored as `kind`), a slot of
/// `capacity` and a source of `source_len` elements: the host reference.
pub fn expected(kind: CountKind, value: i64, capacity: usize, source_len: usize) -> Expected {
    // The kind's size() low bytes of `value`, read as the kind's signedness says.
    let shift = 64 - 8 * kind.size() as u32;
    let n: u64 = if kind.is_signed() {
        let v = (value << shift) >> shift;
        if v < 0 {
            return Expected::Negative(v);
        }
        v as u64
    } else {
        ((value as u64) << shift) >> shift
    };
    if n > capacity as u64 {
        Expected::OverCapacity(n, capacity)
    } else if n > source_len as u64 {
        Expected::OverSource(n, source_len)
    } else {
        Expected::Data(n as usize)
    }
}

/// Random count values for a slot of `cap` elements: the edges and random ones.
pub fn count_values(rng: &mut Rng, cap: usize, n: usize) -> Vec<i64> {
    let cap = cap as i64;
    (0..n)
        .map(|_| match rng.below(16) {
            0 => 0,
            1 => 1,
            2 => cap,
            3 => cap + 1,
            4 => cap - 1,
            5 => -1,
            6 => -(rng.below(1 << 40) as i64) - 1,
            7 => *rng.pick(&[i32::MIN as i64, i64::MIN, i32::MAX as i64, u32::MAX as i64]),
            8 => *rng.pick(&[i64::MAX, 1 << 32, (1 << 32) + 3, cap + 1 + (1 << 32)]),
            9 => cap + 1 + rng.below(1 << 20) as i64,
            _ => rng.below(cap as u64 + 1) as i64,
        })
        .collect()
}

/// Device copies of one lane's count table, in all four count types.
struct Counts {
    values: Vec<i64>,
    i32: CudaSlice<i32>,
    u32: CudaSlice<u32>,
    i64: CudaSlice<i64>,
    u64: CudaSlice<u64>,
}

impl Counts {
    fn new(stream: &Arc<CudaStream>, values: Vec<i64>) -> Result<Self> {
        let i32v: Vec<i32> = values.iter().map(|&v| v as i32).collect();
        let u32v: Vec<u32> = values.iter().map(|&v| v as u32).collect();
        let u64v: Vec<u64> = values.iter().map(|&v| v as u64).collect();
        Ok(Counts {
            i32: stream.clone_htod(&i32v)?,
            u32: stream.clone_htod(&u32v)?,
            i64: stream.clone_htod(&values)?,
            u64: stream.clone_htod(&u64v)?,
            values,
        })
    }
}

/// A worker thread's patterned source buffers.
struct Sources {
    dev: Vec<CudaSlice<u8>>,
    host: Vec<Vec<u8>>,
}

const SOURCE_BYTES: usize = 80 * 1024;
const CAPACITIES: [usize; 8] = [1, 2, 7, 64, 333, 1024, 2500, 4096];

struct InFlight<T: Element> {
    ticket: Ticket<T>,
    expected: Expected,
    source: usize,
    offset: usize,
    /// Keeps the source-length-limited view's provenance for messages.
    what: String,
}

/// One readback of one element type and transport, with its tickets in flight.
struct Lane<T: Element> {
    name: String,
    rb: Readback<T>,
    counts: Counts,
    inflight: VecDeque<InFlight<T>>,
}

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

fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: Element types are plain old data; reading their bytes is always valid.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), std::mem::size_of_val(s)) }
}

impl<T: Element> Lane<T> {
    fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        rng: &mut Rng,
        transport: Transport,
    ) -> Result<Self> {
        let cap = *rng.pick(&CAPACITIES);
        let slots = 1 + rng.below(4) as usize;
        let wait = match transport {
            Transport::Mapped | Transport::Auto => {
                *rng.pick(&[WaitMode::Trailer, WaitMode::Event, WaitMode::Auto])
            }
            Transport::Staged => *rng.pick(&[WaitMode::Event, WaitMode::Auto]),
        };
        let pdl = rng.one_in(2);
        let config = ReadbackConfig::new(cap)
            .slots(slots)
            .transport(transport)
            .wait(wait)
            .programmatic_launch(pdl);
        let rb = Readback::<T>::with_config(ctx, config)?;
        let name = format!(
            "{}x{}B cap {cap} slots {slots} {transport:?}/{:?} pdl={pdl}",
            std::any::type_name::<T>(),
            std::mem::size_of::<T>(),
            rb.info().wait_mode
        );
        let values = count_values(rng, cap, 256);
        Ok(Lane {
            name,
            rb,
            counts: Counts::new(stream, values)?,
            inflight: VecDeque::new(),
        })
    }

    fn enqueue(&mut self, w: &mut Worker) -> Result<()> {
        let size = std::mem::size_of::<T>();
        let cap = self.rb.info().capacity;
        let source = w.rng.below(w.sources.dev.len() as u64) as usize;
        let offset = w.rng.below(16) as usize;
        let room = (SOURCE_BYTES - offset) / size;
        let source_len = if w.rng.one_in(8) {
            w.rng.below(cap as u64) as usize // shorter than the slot: over-source possible
        } else {
            cap + w.rng.below(3) as usize
        }
        .min(room);
        let j = w.rng.below(self.counts.values.len() as u64) as usize;
        let kind = *w.rng.pick(&[
            CountKind::I32,
            CountKind::U32,
            CountKind::I64,
            CountKind::U64,
        ]);
        let expected = expected(kind, self.counts.values[j], cap, source_len);
        let bytes = w.sources.dev[source].slice(offset..offset + source_len * size);
        // SAFETY: the view holds source_len * size bytes; T is valid for any bits.
        let view: CudaView<'_, T> =
            unsafe { bytes.transmute::<T>(source_len) }.context("transmute to the element type")?;
        let c = &self.counts;
        let stream = &w.stream;
        let ticket = match kind {
            CountKind::I32 => self.rb.enqueue(stream, &view, &c.i32.slice(j..j + 1)),
            CountKind::U32 => self.rb.enqueue(stream, &view, &c.u32.slice(j..j + 1)),
            CountKind::I64 => self.rb.enqueue(stream, &view, &c.i64.slice(j..j + 1)),
            // U64: the soak picks the four kinds above, none other.
            _ => self.rb.enqueue(stream, &view, &c.u64.slice(j..j + 1)),
        };
        let ticket = match ticket {
            Ok(t) => t,
            Err(e) => {
                w.mismatch(format!("{}: enqueue failed: {e}", self.name));
                return Ok(());
            }
        };
        w.report.enqueued += 1;
        self.inflight.push_back(InFlight {
            ticket,
            expected,
            source,
            offset,
            what: format!("count {} as {kind:?}, source_len {source_len}", c.values[j]),
        });
        Ok(())
    }

    fn finish(&mut self, w: &mut Worker, f: InFlight<T>, may_drop: bool) {
        if may_drop && w.rng.one_in(64) {
            w.report.dropped_unwaited += 1;
            drop(f); // the slot is reused at once; its next pack waits for this one on the device
            return;
        }
        let timeout = Duration::from_secs(60);
        let result = match w.rng.below(3) {
            0 => f.ticket.wait(),
            1 => f.ticket.wait_timeout(timeout),
            _ => {
                let deadline = Instant::now() + timeout;
                loop {
                    match f.ticket.try_wait() {
                        Ok(Some(out)) => break Ok(out),
                        Ok(None) if Instant::now() < deadline => std::hint::spin_loop(),
                        Ok(None) => break Err(Error::Timeout { waited: timeout }),
                        Err(e) => break Err(e),
                    }
                }
            }
        };
        match check(&result, f.expected, &w.sources.host[f.source][f.offset..]) {
            Ok(bytes) => {
                let r = &mut w.report;
                r.verified += 1;
                r.bytes_compared += bytes;
                match f.expected {
                    Expected::Data(_) => r.verified_data += 1,
                    Expected::Negative(_) => r.negative += 1,
                    Expected::OverCapacity(..) => r.over_capacity += 1,
                    Expected::OverSource(..) => r.over_source += 1,
                }
                if !matches!(f.expected, Expected::Data(_)) {
                    r.verified_status += 1;
                }
                match f.ticket.transport() {
                    Transport::Staged => r.staged += 1,
                    Transport::Mapped | Transport::Auto => r.mapped += 1,
                }
            }
            Err(why) => {
                let msg = format!(
                    "{} seq {} ({}): expected {:?}: {why}",
                    self.name,
                    f.ticket.seq(),
                    f.what,
                    f.expected
                );
                w.mismatch(msg);
            }
        }
    }
}

/// Compares a wait's result with the reference. `Ok(bytes compared)` or what differed.
fn check<T: Element>(
    result: &Result<Readout<'_, T>, Error>,
    want: Expected,
    source: &[u8],
) -> Result<u64, String> {
    let size = std::mem::size_of::<T>();
    match (result, want) {
        (Ok(out), Expected::Data(n)) => {
            if out.count() != n || out.len() != n {
                return Err(format!("count {} (len {})", out.count(), out.len()));
            }
            let got = as_bytes(out.as_slice());
            let want = &source[..n * size];
            if got != want {
                let at = got.iter().zip(want).position(|(a, b)| a != b);
                return Err(format!("data differs, first at byte {at:?}"));
            }
            Ok((n * size) as u64)
        }
        (Err(Error::NegativeCount { count }), Expected::Negative(v)) if *count == v => Ok(0),
        (Err(Error::CountExceedsCapacity { count, capacity }), Expected::OverCapacity(n, c))
            if *count == n && *capacity == c =>
        {
            Ok(0)
        }
        (
            Err(Error::CountExceedsSource {
                count,
                column: 0,
                source_len,
            }),
            Expected::OverSource(n, l),
        ) if *count == n && *source_len == l => Ok(0),
        (Ok(out), _) => Err(format!("got {} elements", out.count())),
        (Err(e), _) => Err(format!("got error {e}")),
    }
}

impl<T: Element> Step for Lane<T> {
    fn step(&mut self, w: &mut Worker) -> Result<()> {
        if self.inflight.len() == self.rb.info().slots {
            let f = self.inflight.pop_front().expect("a ticket in flight");
            self.finish(w, f, true);
        }
        self.enqueue(w)
    }

    fn drain(&mut self, w: &mut Worker) -> Result<()> {
        while let Some(f) = self.inflight.pop_front() {
            self.finish(w, f, false);
        }
        Ok(())
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

// ---------------------------------------------------------------------------------------
// Append lanes

/// A prime above every candidate count: `i -> i * P % n` permutes `0..n`.
const P: u64 = 2_147_483_647;

/// The rows `srbt_append_u64` appends for (n, count, seed): one u64 per kept candidate, sorted.
fn append_rows(n: u64, count: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n)
        .filter(|&i| (i as u128 * P as u128 % n as u128) < count as u128)
        .map(|i| pattern::mix(seed.wrapping_add(8 * i)))
        .collect();
    v.sort_unstable();
    v
}

fn sorted_column(out: &ColumnReadout<'_>) -> Result<Vec<u64>> {
    let mut v = out.column_as::<u64>(0)?.to_vec();
    v.sort_unstable();
    Ok(v)
}

/// Launches `srbt_append_u64(desc, n, count, P, seed, 0)` on `stream` with `grid` blocks.
fn launch_append(
    k: &Kernel,
    stream: &CudaStream,
    desc: &AppendDesc,
    grid: u32,
    n: u64,
    count: u64,
    seed: u64,
) -> std::result::Result<(), cudarc::driver::DriverError> {
    let mut d = *desc;
    let (mut nn, mut c, mut p, mut s, mut e) = (n, count, P, seed, 0u32);
    let mut args: [*mut c_void; 6] = [
        (&mut d as *mut AppendDesc).cast(),
        (&mut nn as *mut u64).cast(),
        (&mut c as *mut u64).cast(),
        (&mut p as *mut u64).cast(),
        (&mut s as *mut u64).cast(),
        (&mut e as *mut u32).cast(),
    ];
    // SAFETY: srbt_append_u64(srb_append_desc, uint64_t x4, unsigned), 256 threads per block as
    // its BlockAppend; it touches only the readback's memory, through the descriptor.
    unsafe { k.launch_3d(stream.cu_stream(), (grid, 1, 1), (256, 1, 1), &mut args) }.map_err(|e| {
        match e {
            Error::Cuda { source, .. } => source,
            _ => {
                cudarc::driver::DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_LAUNCH_FAILED)
            }
        }
    })
}

struct AppendInFlight {
    ticket: AppendTicket,
    n: u64,
    count: u64,
    seed: u64,
}

/// An append readback of one u64 column with a random capacity, spill, slot count and wait
/// mode, filled by `srbt_append_u64` with random counts and grids.
struct AppendLane {
    name: String,
    rb: AppendReadback,
    kernel: Kernel,
    cap: usize,
    spill: usize,
    transport: Transport,
    inflight: VecDeque<AppendInFlight>,
}

impl AppendLane {
    fn new(
        ctx: &Arc<CudaContext>,
        rng: &mut Rng,
        transport: Transport,
        k: &Kernels,
    ) -> Result<Self> {
        let cap = *rng.pick(&[1usize, 7, 64, 1000, 4096]);
        let spill = *rng.pick(&[0usize, 1, cap, 2 * cap]);
        let slots = 1 + rng.below(3) as usize;
        let wait = match transport {
            Transport::Mapped | Transport::Auto => *rng.pick(&[WaitMode::Trailer, WaitMode::Event]),
            Transport::Staged => WaitMode::Event,
        };
        let mut schema = ColumnSchema::new();
        schema.column::<u64>();
        let cfg = ReadbackConfig::new(cap)
            .spill(spill)
            .slots(slots)
            .transport(transport)
            .wait(wait);
        Ok(AppendLane {
            name: format!("append cap {cap} spill {spill} slots {slots} {transport:?}/{wait:?}"),
            rb: AppendReadback::new(ctx, &schema, cfg)?,
            kernel: k.function("srbt_append_u64")?,
            cap,
            spill,
            transport,
            inflight: VecDeque::new(),
        })
    }

    fn enqueue(&mut self, w: &mut Worker) -> Result<()> {
        let cap = self.cap as u64;
        let n = 1 + w.rng.below(3 * cap + 64);
        let count = match w.rng.below(8) {
            0 => 0,
            1 => 1,
            2 => cap,
            3 => cap + 1,
            4 => cap + self.spill as u64,
            5 => cap + self.spill as u64 + 1,
            _ => w.rng.below(n + 1),
        }
        .min(n);
        let grid = 1 + w.rng.below(40) as u32;
        let seed = w.rng.next_u64();
        let stream = &w.stream;
        let k = &self.kernel;
        match self.rb.append(stream, |d| {
            launch_append(k, stream, d, grid, n, count, seed)
        }) {
            Ok(ticket) => {
                w.report.enqueued += 1;
                self.inflight.push_back(AppendInFlight {
                    ticket,
                    n,
                    count,
                    seed,
                });
            }
            Err(e) => w.mismatch(format!("{}: append failed: {e}", self.name)),
        }
        Ok(())
    }

    fn finish(&mut self, w: &mut Worker, f: AppendInFlight, may_drop: bool) {
        if may_drop && w.rng.one_in(64) {
            w.report.dropped_unwaited += 1;
            return; // dropped unwaited: the slot's next append resets its scratch first
        }
        let want = append_rows(f.n, f.count, f.seed);
        let what = format!(
            "{} seq {} count {} of {}",
            self.name,
            f.ticket.seq(),
            f.count,
            f.n
        );
        let outcome = (|| -> std::result::Result<bool, String> {
            match f.ticket.wait() {
                Ok(out) => {
                    let got = sorted_column(&out).map_err(|e| e.to_string())?;
                    if out.count() as u64 != f.count || got != want {
                        return Err(format!("{} rows back", out.count()));
                    }
                    Ok(true)
                }
                Err(Error::AppendOverflow {
                    count,
                    capacity,
                    spilled,
                    dropped,
                }) => {
                    let over = f.count.saturating_sub(self.cap as u64);
                    let s = over.min(self.spill as u64);
                    if count != f.count
                        || capacity != self.cap
                        || spilled != s
                        || dropped != over - s
                    {
                        return Err(format!(
                            "overflow said {count}/{capacity}/{spilled}/{dropped}"
                        ));
                    }
                    // The slot's rows, and now and then the spilled ones, are rows appended.
                    let mut got = sorted_column(&f.ticket.partial().map_err(|e| e.to_string())?)
                        .map_err(|e| e.to_string())?;
                    if w.rng.one_in(4) {
                        if let Some(t) =
                            f.ticket.fetch_spill(&w.stream).map_err(|e| e.to_string())?
                        {
                            let r = t.wait().map_err(|e| e.to_string())?;
                            got.extend(sorted_column(&r).map_err(|e| e.to_string())?);
                            got.sort_unstable();
                            if dropped == 0 && got != want {
                                return Err("slot + spill rows differ".into());
                            }
                        }
                    }
                    if got.windows(2).any(|p| p[0] == p[1])
                        || got.iter().any(|r| want.binary_search(r).is_err())
                    {
                        return Err("a row twice, or one never appended".into());
                    }
                    Ok(false)
                }
                Err(e) => Err(format!("error {e}")),
            }
        })();
        match outcome {
            Ok(data) => {
                w.report.appends += 1;
                w.verified(self.transport, data, (want.len() * 8) as u64);
            }
            Err(why) => w.mismatch(format!("{what}: {why}")),
        }
    }
}

impl Step for AppendLane {
    fn step(&mut self, w: &mut Worker) -> Result<()> {
        if self.inflight.len() == self.rb.info().slots {
            let f = self.inflight.pop_front().expect("an append in flight");
            self.finish(w, f, true);
        }
        self.enqueue(w)
    }

    fn drain(&mut self, w: &mut Worker) -> Result<()> {
        while let Some(f) = self.inflight.pop_front() {
            self.finish(w, f, false);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Graph lanes: a graph captured once, replayed at every step, each replay checked.

fn launch_step_advance(
    stream: &CudaStream,
    kernel: &Kernel,
    args: &mut [*mut c_void],
    advance: &Kernel,
    step: u64,
    grid: u32,
) -> Result<()> {
    // SAFETY: the callers pass the arguments of the kernel's C signature (csrc/testing/).
    unsafe { kernel.launch_3d(stream.cu_stream(), (grid, 1, 1), (256, 1, 1), args)? };
    let mut sp = step;
    let mut a: [*mut c_void; 1] = [(&mut sp as *mut u64).cast()];
    // SAFETY: srbe_advance(uint64_t*) on an 8-byte step counter.
    unsafe { advance.launch_3d(stream.cu_stream(), (1, 1, 1), (32, 1, 1), &mut a)? };
    Ok(())
}

/// Replays of a graph of `srbe_step` (three columns, a count that is sometimes negative or
/// over the capacity), a device-sequenced pack and the step counter's advance.
struct GraphPackLane {
    g: GraphReadback,
    graph: CudaGraph,
    _bufs: [DeviceBuffer; 5],
    cap: usize,
    launched: u64,
}

impl GraphPackLane {
    fn new(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>, k: &Kernels) -> Result<Self> {
        let cap = 700usize;
        let bufs = [
            DeviceBuffer::new_zeroed(ctx, cap * 8)?,
            DeviceBuffer::new_zeroed(ctx, cap * 4)?,
            DeviceBuffer::new_zeroed(ctx, cap * 12)?,
            DeviceBuffer::new_zeroed(ctx, 8)?,
            DeviceBuffer::new_zeroed(ctx, 8)?,
        ];
        let mut schema = ColumnSchema::new();
        schema.column::<f64>();
        schema.column::<i32>();
        schema.column::<[f32; 3]>();
        let g = GraphReadback::new(ctx, &schema, ReadbackConfig::new(cap).slots(3))?;
        let step = k.function("srbe_step")?;
        let advance = k.function("srbe_advance")?;
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let (mut pos, mut id, mut vel, mut count, mut sp) = (
            bufs[0].ptr(),
            bufs[1].ptr(),
            bufs[2].ptr(),
            bufs[3].ptr(),
            bufs[4].ptr(),
        );
        let (mut tag, mut c) = (0u32, cap as u64);
        let mut args: [*mut c_void; 7] = [
            (&mut pos as *mut u64).cast(),
            (&mut id as *mut u64).cast(),
            (&mut vel as *mut u64).cast(),
            (&mut count as *mut u64).cast(),
            (&mut sp as *mut u64).cast(),
            (&mut tag as *mut u32).cast(),
            (&mut c as *mut u64).cast(),
        ];
        // SAFETY: srbe_step(double*, int32_t*, float*, int32_t*, const uint64_t*, uint32_t,
        // uint64_t): the buffers hold cap rows.
        unsafe { step.launch_3d(stream.cu_stream(), (4, 1, 1), (256, 1, 1), &mut args)? };
        let src = |b: &DeviceBuffer| ColumnSource {
            ptr: b.ptr(),
            len: cap,
        };
        // SAFETY: the buffers live as long as the lane, which drops the graph first; one stream.
        unsafe {
            g.record(
                stream,
                None,
                &[src(&bufs[0]), src(&bufs[1]), src(&bufs[2])],
                RawCount::i32(bufs[3].ptr()),
            )?
        };
        let mut a: [*mut c_void; 1] = [(&mut sp as *mut u64).cast()];
        // SAFETY: srbe_advance(uint64_t*) on the step counter.
        unsafe { advance.launch_3d(stream.cu_stream(), (1, 1, 1), (32, 1, 1), &mut a)? };
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))?
            .context("an empty capture")?;
        Ok(GraphPackLane {
            g,
            graph,
            _bufs: bufs,
            cap,
            launched: 0,
        })
    }

    fn take(&mut self, w: &mut Worker) {
        let seq = self.g.next_seq();
        let key = 2 * (seq - 1);
        let want = step_count(key, self.cap as u64);
        let r = self.g.next_timeout(Duration::from_secs(60));
        let ok = match (&r, want) {
            (Err(Error::NegativeCount { count: -3 }), -3) => Ok(false),
            (Err(Error::CountExceedsCapacity { count, capacity }), _)
                if want == self.cap as i64 + 1
                    && *count == want as u64
                    && *capacity == self.cap =>
            {
                Ok(false)
            }
            (Ok(rp), _) if rp.count() as i64 == want => {
                let out = rp.readout();
                let pos: &[f64] = out.column_as(0).unwrap_or(&[]);
                let id: &[i32] = out.column_as(1).unwrap_or(&[]);
                let vel: &[[f32; 3]] = out.column_as(2).unwrap_or(&[]);
                let good = (0..out.count()).all(|i| {
                    pos[i] == i as f64 + 0.25 * key as f64
                        && id[i] == (key * 7 + i as u64) as i32
                        && vel[i] == [i as f32, key as f32, 0.0]
                });
                if good {
                    Ok(true)
                } else {
                    Err("rows differ".to_string())
                }
            }
            (Ok(rp), _) => Err(format!("{} rows, want {want}", rp.count())),
            (Err(e), _) => Err(format!("error {e}")),
        };
        match ok {
            Ok(data) => {
                w.report.replays += 1;
                w.verified(Transport::Mapped, data, 0);
            }
            Err(why) => w.mismatch(format!("graph pack replay {seq}: {why}")),
        }
    }
}

impl Step for GraphPackLane {
    fn step(&mut self, w: &mut Worker) -> Result<()> {
        // At most slots - 1 replays ahead of the host: none is dropped for a held slot.
        if self.launched >= self.g.next_seq() - 1 + 2 {
            self.take(w);
        }
        self.graph.launch()?;
        self.launched += 1;
        w.report.enqueued += 1;
        Ok(())
    }

    fn drain(&mut self, w: &mut Worker) -> Result<()> {
        while self.g.next_seq() <= self.launched {
            self.take(w);
        }
        Ok(())
    }
}

/// Replays of a graph of `srbt_append_step` (two columns, a count set by the step counter)
/// and the counter's advance.
struct GraphAppendLane {
    g: GraphReadback,
    graph: CudaGraph,
    _step: DeviceBuffer,
    cap: usize,
    launched: u64,
}

const GRAPH_APPEND_N: u64 = 3000;

impl GraphAppendLane {
    fn new(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>, k: &Kernels) -> Result<Self> {
        let cap = 2000usize;
        let mut schema = ColumnSchema::new();
        schema.column::<u64>();
        schema.column::<u32>();
        let g = GraphReadback::new(ctx, &schema, ReadbackConfig::new(cap).slots(3))?;
        let step = DeviceBuffer::new_zeroed(ctx, 8)?;
        let kernel = k.function("srbt_append_step")?;
        let advance = k.function("srbe_advance")?;
        let desc = g.append_desc()?;
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let mut d = desc;
        let (mut n, mut mc, mut p, mut sp) = (GRAPH_APPEND_N, cap as u64, P, step.ptr());
        let mut args: [*mut c_void; 5] = [
            (&mut d as *mut AppendDesc).cast(),
            (&mut n as *mut u64).cast(),
            (&mut mc as *mut u64).cast(),
            (&mut p as *mut u64).cast(),
            (&mut sp as *mut u64).cast(),
        ];
        launch_step_advance(stream, &kernel, &mut args, &advance, step.ptr(), 12)?;
        let graph = stream
            .end_capture(CUgraphInstantiate_flags(0))?
            .context("an empty capture")?;
        Ok(GraphAppendLane {
            g,
            graph,
            _step: step,
            cap,
            launched: 0,
        })
    }

    fn take(&mut self, w: &mut Worker) {
        let seq = self.g.next_seq();
        let s = seq - 1;
        let count = pattern::mix(s) % (self.cap as u64 + 1);
        let ok = match self.g.next_timeout(Duration::from_secs(60)) {
            Ok(rp) => {
                let out = rp.readout();
                let (a, b) = (
                    out.column_as::<u64>(0).unwrap_or(&[]),
                    out.column_as::<u32>(1).unwrap_or(&[]),
                );
                let mut got: Vec<(u64, u32)> = a.iter().copied().zip(b.iter().copied()).collect();
                got.sort_unstable();
                let mut want: Vec<(u64, u32)> = (0..GRAPH_APPEND_N)
                    .filter(|&i| (i as u128 * P as u128 % GRAPH_APPEND_N as u128) < count as u128)
                    .map(|i| {
                        (
                            pattern::mix(s.wrapping_add(8 * i)),
                            pattern::mix(s.wrapping_add(8 * i + 1)) as u32,
                        )
                    })
                    .collect();
                want.sort_unstable();
                if out.count() as u64 == count && got == want {
                    Ok(())
                } else {
                    Err(format!("{} rows, want {count}", out.count()))
                }
            }
            Err(e) => Err(format!("error {e}")),
        };
        match ok {
            Ok(()) => {
                w.report.replays += 1;
                w.report.appends += 1;
                w.verified(Transport::Mapped, true, count * 12);
            }
            Err(why) => w.mismatch(format!("graph append replay {seq}: {why}")),
        }
    }
}

impl Step for GraphAppendLane {
    fn step(&mut self, w: &mut Worker) -> Result<()> {
        if self.launched >= self.g.next_seq() - 1 + 2 {
            self.take(w);
        }
        self.graph.launch()?;
        self.launched += 1;
        w.report.enqueued += 1;
        Ok(())
    }

    fn drain(&mut self, w: &mut Worker) -> Result<()> {
        while self.g.next_seq() <= self.launched {
            self.take(w);
        }
        Ok(())
    }
}

fn worker(ctx: Arc<CudaContext>, id: usize, n: u64, cfg: &SoakConfig) -> Result<SoakReport> {
    let stream = ctx.new_stream()?;
    let mut rng = Rng::new(cfg.seed ^ pattern::mix(id as u64 + 1));
    let mut sources = Sources {
        dev: Vec::new(),
        host: Vec::new(),
    };
    for s in 0..3u64 {
        let host = pattern::bytes(cfg.seed.wrapping_add(1000 * id as u64 + s), SOURCE_BYTES);
        sources.dev.push(stream.clone_htod(&host)?);
        sources.host.push(host);
    }
    let mut lanes = lanes(&ctx, &stream, &mut rng)?;
    stream.synchronize()?;
    let mut w = Worker {
        stream,
        sources,
        rng,
        report: SoakReport::default(),
    };
    for i in 0..n {
        let k = w.rng.below(lanes.len() as u64) as usize;
        lanes[k].step(&mut w)?;
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
