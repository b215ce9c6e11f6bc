//! What the harness measures and concludes, as plain data: the raw samples of a sweep point,
//! their summaries, every section's results ([`Measurements`]) and the targets. Measuring
//! modules produce these, the targets and the report read them; this module imports no other
//! module of the harness but [`crate::stats`], so the imports form no cycle.
use crate::stats::Summary;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

/// 2^20 elements: the small capacity, and a point of the sweep.
pub const M: usize = 1 << 20;

/// Human size of an element count: 1, 16, 4096, 64K, 1M, 16M.
pub fn size(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}M", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

/// Raw timings and correctness of one approach at one sweep point.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    /// Producer launch to host holding count and data, µs.
    pub latency: Vec<f64>,
    /// Time the readback's enqueue calls kept the host thread (µs): before it returns, the
    /// host can launch nothing else.
    pub enqueue: Vec<f64>,
    /// Time spent waiting for the result after the enqueue returned, µs.
    pub wait: Vec<f64>,
    /// Cycles whose count and data matched the host reference.
    pub correct: usize,
    /// Cycles checked.
    pub checked: usize,
    /// First error, if a cycle failed with one.
    pub error: Option<String>,
}

impl Samples {
    /// One timed cycle: the producer's launch at `t0`, the enqueue from `t1` to `t2`, the host
    /// holding the result at `t3`, and whether the result was right.
    pub fn record(&mut self, t0: Instant, t1: Instant, t2: Instant, t3: Instant, ok: bool) {
        let us = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e6;
        self.record_us(us(t0, t3), us(t1, t2), us(t2, t3), ok);
    }

    /// One timed cycle given as its latency, enqueue and wait times in µs.
    pub fn record_us(&mut self, latency: f64, enqueue: f64, wait: f64, ok: bool) {
        self.latency.push(latency);
        self.enqueue.push(enqueue);
        self.wait.push(wait);
        self.checked += 1;
        self.correct += usize::from(ok);
    }

    /// The summaries of these samples, for `n` f64 elements per cycle (the bandwidth).
    pub fn summarize(&self, n: usize) -> PointResult {
        let latency_us = Summary::of(&self.latency);
        PointResult {
            latency_us,
            enqueue_us: Summary::of(&self.enqueue),
            wait_us: Summary::of(&self.wait),
            correct: self.correct,
            checked: self.checked,
            error: self.error.clone(),
            gbps: if latency_us.p50 > 0.0 {
                (n * 8) as f64 / (latency_us.p50 * 1e-6) / 1e9
            } else {
                0.0
            },
        }
    }
}

/// One approach at one sweep point.
#[derive(Debug, Clone, Serialize)]
pub struct PointResult {
    /// Producer launch to host holding count and data, µs.
    pub latency_us: Summary,
    /// Host thread inside the enqueue calls (cannot launch other work), µs.
    pub enqueue_us: Summary,
    /// Host waiting after the enqueue returned, µs.
    pub wait_us: Summary,
    /// Cycles whose count and data matched the host reference.
    pub correct: usize,
    /// Cycles run.
    pub checked: usize,
    /// First error seen, if any.
    pub error: Option<String>,
    /// n * 8 bytes / p50 latency, GB/s.
    pub gbps: f64,
}

impl PointResult {
    /// Whether any cycle was timed (an approach skipped on this machine has none: its
    /// summaries are zeros, which no target or table may read as a measurement).
    pub fn measured(&self) -> bool {
        self.latency_us.samples > 0
    }
}

/// One sweep point: every approach.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Elements per slot / copy-based capacity.
    pub capacity: usize,
    /// Nominal count (cycles alternate n and n - 1 for n >= 2).
    pub n: usize,
    /// Per approach, by name.
    pub approaches: BTreeMap<&'static str, PointResult>,
}

/// The result of approach `name` at (`capacity`, `n`) among `points`.
pub fn at<'a>(
    points: &'a [Point],
    capacity: usize,
    n: usize,
    name: &str,
) -> Option<&'a PointResult> {
    points
        .iter()
        .find(|p| p.capacity == capacity && p.n == n)
        .and_then(|p| p.approaches.get(name))
}

/// The GPU and host a run was made on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub gpu: String,
    pub compute_capability: String,
    pub multiprocessors: i32,
    pub pci_bus_id: String,
    pub cuda_driver_api: String,
    pub nvidia_smi: Option<String>,
    pub pcie_link: Option<String>,
    pub host_cpus: usize,
    pub host_cpu_model: Option<String>,
    /// The targets the embedded kernel images cover (the field kept its name from when they
    /// were one fatbin, so older runs stay comparable).
    pub fatbin_targets: &'static str,
    /// The image this device loaded, e.g. `sm_90 (machine code, 43736 bytes)`.
    pub kernel_image: String,
}

/// What the seed's callback (a host function calling cuMemcpyDtoHAsync) did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SeedCallback {
    pub cycles: usize,
    pub callback_ran: usize,
    /// What cuMemcpyDtoHAsync returned inside the callback (distinct values).
    pub copy_call_returned: Vec<String>,
    pub data_arrived: usize,
    pub hung: bool,
}

/// One measurement of the seed's loop.
/// One interval of a traced loop: on `lane` (the host thread, a compute stream, the copy
/// stream), `label` from `start_us` to `end_us`, µs after the trace's start.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    pub lane: &'static str,
    pub label: String,
    pub start_us: f64,
    pub end_us: f64,
}

/// A few cycles of the seed's loop for one strategy, each interval timed: the device's by
/// events (their offsets from one reference event), the host's by its clock (read when that
/// reference event completed, so both share an origin to within a few µs).
#[derive(Debug, Clone, Serialize)]
pub struct LoopTrace {
    pub approach: &'static str,
    pub kernel_us: f64,
    pub cpu_us: f64,
    /// Cycles whose readback held the right count and rows.
    pub correct: usize,
    pub cycles: usize,
    pub spans: Vec<Span>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LoopResult {
    /// Approach name.
    pub approach: &'static str,
    /// Kernel busy time, µs.
    pub kernel_us: f64,
    /// Host CPU work per cycle, µs.
    pub cpu_us: f64,
    /// Cycles run (readbacks received).
    pub cycles: usize,
    /// Wall time, s.
    pub seconds: f64,
    /// Cycles per second.
    pub cycles_per_s: f64,
    /// Readbacks whose count and data matched.
    pub correct: usize,
}

/// One grid-cap measurement of the mapped pack kernel alone.
#[derive(Debug, Clone, Serialize)]
pub struct GridProbe {
    /// Count copied.
    pub n: usize,
    /// `max_blocks` of the readback (the launch's grid, given enough bytes).
    pub max_blocks: u32,
    /// Enqueue to trailer seen, producer already finished: p50 µs.
    pub p50_us: f64,
    /// n * 8 bytes / p50, GB/s.
    pub gbps: f64,
}

/// Host cost of single calls, each timed alone on an idle stream: p50/p99 µs by call name
/// (the names are [`crate::costs`]' constants).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Costs {
    /// Per call.
    pub calls: BTreeMap<&'static str, Summary>,
}

impl Costs {
    /// The p50 of call `name` (NaN if it was not measured).
    pub fn p50(&self, name: &str) -> f64 {
        self.calls.get(name).map_or(f64::NAN, |s| s.p50)
    }
}

/// Everything one run measured, section by section.
#[derive(Debug, Clone)]
pub struct Measurements {
    pub machine: Machine,
    /// Timed cycles per approach at each point with n <= 64K.
    pub reps: usize,
    /// The one-thread producer, every approach, at every (capacity, n) of the plan.
    pub sweep: Vec<Point>,
    /// The realistic producer (select n of 1M candidates, block-aggregated), every approach.
    pub realistic: Vec<Point>,
    /// Host cost of one append reservation + completion (the kernel's launch left out), µs.
    pub append_cost: Summary,
    /// The mapped pack kernel alone, by grid cap.
    pub probe: Vec<GridProbe>,
    /// `Readback::launch_shape()` at capacity 16M.
    pub shape16: String,
    /// Single calls' host cost.
    pub costs: Costs,
    /// The seed's loop, every approach at every kernel/CPU ratio.
    pub seed_loop: Vec<LoopResult>,
    /// A few traced cycles of the seed's loop per strategy (the timeline picture's source).
    pub seed_trace: Vec<LoopTrace>,
    /// The seed's own callback.
    pub seed_callback: SeedCallback,
    /// The seed's loop with its next step sized by the device count (issue 36), per capacity;
    /// empty where the driver has no SWITCH nodes set from a kernel (before CUDA 12.8).
    pub sized_step: Vec<SizedStep>,
}

/// The seed's loop with its next step sized by the device count, four ways, at one capacity
/// (`sized_readback::testing::sized_loop`).
#[derive(Debug, Clone, Serialize)]
pub struct SizedStep {
    /// The largest count, and the over-launch's grid.
    pub capacity: u64,
    /// Steps per loop.
    pub steps: usize,
    /// Timed loops per way.
    pub repeats: usize,
    /// The median of the loop's counts (log-uniform in [1, capacity]).
    pub median_count: u64,
    /// The sized launch's classes.
    pub classes: usize,
    /// p50 over the loops of a loop's time over its steps, µs, by way.
    pub p50_us: BTreeMap<&'static str, f64>,
    /// p99 of the same.
    pub p99_us: BTreeMap<&'static str, f64>,
    /// Each way whose check step wrote the wrong items.
    pub wrong: Vec<String>,
}

impl Measurements {
    /// p50 per step of the sized step's `way` at capacity `cap`, µs.
    pub fn sized_step_p50(&self, cap: u64, way: &str) -> Option<f64> {
        self.sized_step
            .iter()
            .find(|s| s.capacity == cap)
            .and_then(|s| s.p50_us.get(way).copied())
    }

    /// p50 latency of `name` at (`cap`, `n`) of the main sweep, NaN if absent.
    pub fn p50(&self, cap: usize, n: usize, name: &str) -> f64 {
        at(&self.sweep, cap, n, name).map_or(f64::NAN, |x| x.latency_us.p50)
    }

    /// The realistic sweep's point of count `n` (capacity 16M only for n = 16M).
    pub fn realistic_at(&self, n: usize, name: &str) -> Option<&PointResult> {
        self.realistic
            .iter()
            .find(|p| p.n == n && (n == 16 * M) == (p.capacity == 16 * M))
            .and_then(|p| p.approaches.get(name))
    }

    /// Cycles per second of the seed loop's `name` at `kernel_us` / `cpu_us`.
    pub fn loop_rate(&self, name: &str, kernel_us: f64, cpu_us: f64) -> Option<f64> {
        self.seed_loop
            .iter()
            .find(|r| r.approach == name && r.kernel_us == kernel_us && r.cpu_us == cpu_us)
            .map(|r| r.cycles_per_s)
    }
}

/// A speed target of the issue and whether it held.
#[derive(Debug, Clone, Serialize)]
pub struct Target {
    /// What is compared.
    pub name: String,
    /// Measured ratio (or µs).
    pub measured: f64,
    /// The limit.
    pub limit: f64,
    /// "<=" or ">=".
    pub comparison: &'static str,
    /// Whether measured satisfies the limit.
    pub holds: bool,
    /// By how much it misses (measured vs limit, as a fraction of the limit), 0 when it holds.
    pub miss_by: f64,
    /// The numbers behind it.
    pub detail: String,
    /// Why it missed, from this run's own measurements (None when it holds); a target that
    /// guards a measurement rather than a speed says what it guards here whether it holds.
    pub why: Option<String>,
}

/// The targets of one run: the issue's, and the same ratios for the crate's other modes.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// The targets (crate = the default mode).
    pub targets: Vec<Target>,
    /// The same ratios for the other modes, and comparisons kept on record beside a target
    /// (informational; `variant_ratios` in the JSON).
    pub variants: Vec<Target>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_summaries() {
        assert_eq!(size(1), "1");
        assert_eq!(size(4096), "4K");
        assert_eq!(size(65536), "64K");
        assert_eq!(size(16 * M), "16M");
        assert_eq!(size(1000), "1000");
        let mut s = Samples::default();
        s.record_us(10.0, 1.0, 8.0, true);
        s.record_us(30.0, 2.0, 9.0, false);
        let r = s.summarize(1 << 17);
        assert_eq!((r.correct, r.checked), (1, 2));
        assert_eq!(r.latency_us.p50, 20.0);
        // 1 MiB in 20 µs.
        assert!((r.gbps - 52.4288).abs() < 1e-9, "{}", r.gbps);
        assert_eq!(Samples::default().summarize(8).gbps, 0.0);
    }
}
