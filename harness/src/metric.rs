//! What a target measures. A [`TargetId`] names one comparison, its parameters being the
//! approaches compared; it gives the target's name (the `name` in the report and the JSON:
//! a comparison keeps its name from run to run, so committed runs stay comparable) and
//! computes the target's value from a run's [`Measurements`].
use crate::costs;
use crate::data::{self, size, Measurements, Point, PointResult, M};
use crate::select::{self, Sel};
use crate::sweep::{self, Approach, SMALL_NS};
use std::fmt;

/// The crate's default mode: "crate" in the targets' names.
pub const CRATE: Approach = Approach::MappedTrailer;

/// The counts of the n <= 64K ratios (capacity 1M).
pub const UP_TO_64K: [usize; 5] = [1, 16, 256, 4096, 65536];

/// The counts a realistic-producer ratio is taken over (its worst).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counts {
    /// n = 1, 16, 256, 4096.
    Small,
    /// n = 64K.
    At64K,
}

impl Counts {
    /// The counts.
    pub fn ns(self) -> &'static [usize] {
        match self {
            Counts::Small => &SMALL_NS,
            Counts::At64K => &[65536],
        }
    }
}

/// One comparison of a run's measurements: what a target measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetId {
    /// p50 of `.0` over p50 of `.1`, the worst over n = 1..4096 at capacity 1M.
    SmallN(Approach, Approach),
    /// p50 of `.0` over p50 of `.1`, the worst over n = 1..64K at capacity 1M.
    UpTo64K(Approach, Approach),
    /// p50 of `.0` minus p50 of `.1`, the worst (largest) over n = 1..64K at capacity 1M, µs:
    /// a distance to a floor measured in the same run.
    UpTo64KOver(Approach, Approach),
    /// over_copy's p50 over the crate's at n = 4096, capacity 16M.
    OverCopy,
    /// Bandwidth of `.0` over the oracle's at n = 16M (capacity 16M).
    Bandwidth16M(Approach),
    /// Bandwidth of `.0` over `.1`'s at n = 16M (capacity 16M).
    Bandwidth16MOver(Approach, Approach),
    /// The seed loop's cycles/s with `.0` over sync's, kernels of `.1` µs, CPU work of `.2` µs.
    SeedLoop(Approach, u32, u32),
    /// The realistic producer: p50 of `.0` over p50 of `.1`, the worst over the counts `.2`.
    Realistic(Sel, Sel, Counts),
    /// The realistic producer: bandwidth of `.0` over the oracle's at n = 16M of 16M.
    RealisticBandwidth(Sel),
    /// Host cost p50 of one append reservation + completion, µs.
    AppendHostCost,
    /// The worst enqueue p50 of `.0` over n = 1..4096 at capacity 1M in the sweep, µs.
    EnqueueInSweep(Approach),
    /// The worst enqueue p50 of `.0` over n = 1..4096 at capacity 1M in the sweep, minus the
    /// worst of `.1` in the same run, µs (`.1` = [`CRATE`]: the crate's default mode).
    EnqueueOver(Approach, Approach),
    /// The safe enqueue alone on an idle stream minus its driver calls' floor, p50 µs.
    EnqueueOverFloor,
    /// The safe enqueue alone on an idle stream, p50 µs.
    EnqueueAlone,
    /// The safe enqueue on the staged readback with the sized copy, alone on an idle stream,
    /// minus its driver calls' floor (the bare sized graph's launch among them), p50 µs.
    EnqueueSizedOverFloor,
    /// The oracle measured the harness's way and the criterion bench's way: the larger p50
    /// over the smaller, worst point.
    OracleAgreement,
    /// The seed's loop with its next step sized by the device count, at capacity `.2`: p50 per
    /// step of way `.0` over way `.1` (ways of `sized_readback::testing::SIZED_LOOP_WAYS`).
    SizedStep(&'static str, &'static str, u64),
}

/// A target's value, and the numbers behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// The ratio (or µs) compared with the limit.
    pub measured: f64,
    /// The numbers it comes from.
    pub detail: String,
}

/// How a crate approach is named in a target: "crate" for the default mode.
fn short(a: Approach) -> &'static str {
    if a == CRATE {
        "crate"
    } else {
        a.name()
    }
}

impl fmt::Display for TargetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TargetId::SmallN(a, b) => write!(
                f,
                "n 1..4096, cap 1M: {} p50 / {} p50 (worst n)",
                short(a),
                b.name()
            ),
            TargetId::UpTo64K(a, b) => write!(
                f,
                "n 1..64K, cap 1M: {} p50 / {} p50 (worst n)",
                short(a),
                b.name()
            ),
            TargetId::UpTo64KOver(a, b) => write!(
                f,
                "n 1..64K, cap 1M: {} p50 minus {} p50, µs (worst n)",
                short(a),
                b.name()
            ),
            TargetId::OverCopy => write!(f, "n 4096, cap 16M: over_copy p50 / crate p50"),
            TargetId::Bandwidth16M(a) => write!(f, "n 16M: {} bandwidth / oracle", a.name()),
            TargetId::Bandwidth16MOver(a, b) => {
                write!(f, "n 16M: {} bandwidth / {}", a.name(), b.name())
            }
            TargetId::SeedLoop(a, k, c) => write!(
                f,
                "seed loop {k} µs kernel / {c} µs CPU: {} cycles/s / sync",
                a.name()
            ),
            TargetId::SizedStep(a, b, cap) => write!(
                f,
                "seed loop, next kernel sized by the device count, cap {}: {a} / {} p50 per step",
                size(cap as usize),
                match b {
                    "sync" => "host sync + exact launch",
                    "over" => "over-launch + early exit",
                    "over-graph" => "over-launch + early exit, recorded into a graph",
                    _ => b,
                }
            ),
            TargetId::Realistic(a, b, counts) => write!(
                f,
                "realistic producer (select n of 1M), {}: {} p50 / {} p50 (worst n)",
                match counts {
                    Counts::Small => "n 1..4096",
                    Counts::At64K => "n 64K",
                },
                a.name(),
                match b {
                    Sel::ProducerOnly => "producer alone + event",
                    _ => b.name(),
                }
            ),
            TargetId::RealisticBandwidth(a) => write!(
                f,
                "realistic producer, n 16M of 16M: {} bandwidth / oracle",
                a.name()
            ),
            TargetId::AppendHostCost => {
                write!(f, "one append reservation + completion, host cost p50 µs")
            }
            TargetId::EnqueueInSweep(a) => write!(f, "one enqueue, host cost p50 µs: {}", a.name()),
            TargetId::EnqueueOver(a, b) => write!(
                f,
                "one enqueue, host cost p50 µs: {} minus {} (same run)",
                a.name(),
                short(b)
            ),
            TargetId::EnqueueOverFloor => write!(
                f,
                "one enqueue alone: host cost over its driver floor, µs p50"
            ),
            TargetId::EnqueueAlone => {
                write!(f, "one enqueue, host cost p50 µs, alone (idle stream)")
            }
            TargetId::EnqueueSizedOverFloor => write!(
                f,
                "one sized staged enqueue alone: host cost over its driver floor, µs p50"
            ),
            TargetId::OracleAgreement => write!(
                f,
                "oracle p50: harness way vs criterion bench's way, larger / smaller (worst point)"
            ),
        }
    }
}

impl TargetId {
    /// The target's value in run `m`; `None` where the run lacks a measurement it needs (the
    /// target is then left out, as a section that failed to measure it has nothing to say).
    pub fn measure(self, m: &Measurements) -> Option<Value> {
        let value = |measured: f64, detail: String| Some(Value { measured, detail });
        let sweep = |cap: usize, n: usize, a: Approach| data::at(&m.sweep, cap, n, a.name());
        match self {
            TargetId::SmallN(a, b) => {
                let (worst, d) =
                    worst_ratio(SMALL_NS.iter().map(|&n| (n, sweep(M, n, a), sweep(M, n, b))));
                if a == CRATE {
                    value(
                        worst,
                        format!("crate = crate_mapped_trailer (default mode, safe enqueue); {d}"),
                    )
                } else {
                    value(worst, d)
                }
            }
            TargetId::UpTo64K(a, b) => {
                let (worst, d) = worst_ratio(
                    UP_TO_64K
                        .iter()
                        .map(|&n| (n, sweep(M, n, a), sweep(M, n, b))),
                );
                // A run without the approach (one from before it existed) has no such target.
                if d.is_empty() {
                    return None;
                }
                value(worst, d)
            }
            TargetId::UpTo64KOver(a, b) => {
                let (worst, d) = worst_difference(
                    UP_TO_64K
                        .iter()
                        .map(|&n| (n, sweep(M, n, a), sweep(M, n, b))),
                )?;
                value(worst, d)
            }
            TargetId::OverCopy => {
                let o = sweep(16 * M, 4096, Approach::OverCopy)?.latency_us.p50;
                let c = sweep(16 * M, 4096, CRATE)?.latency_us.p50;
                value(o / c, format!("{o:.1} / {c:.2} µs"))
            }
            TargetId::Bandwidth16M(a) => {
                let bw = sweep::bandwidth_16m(&m.sweep);
                bandwidth_ratio(*bw.get(a.name())?, *bw.get(Approach::Oracle.name())?)
            }
            TargetId::Bandwidth16MOver(a, b) => {
                let bw = sweep::bandwidth_16m(&m.sweep);
                bandwidth_ratio(*bw.get(a.name())?, *bw.get(b.name())?)
            }
            TargetId::SizedStep(a, b, cap) => {
                let (x, y) = (m.sized_step_p50(cap, a)?, m.sized_step_p50(cap, b)?);
                value(x / y, format!("{x:.2} / {y:.2} µs"))
            }
            TargetId::SeedLoop(a, k, c) => {
                let (k, c) = (f64::from(k), f64::from(c));
                let x = m.loop_rate(a.name(), k, c)?;
                let s = m.loop_rate(Approach::Sync.name(), k, c)?;
                value(x / s, format!("{x:.0} / {s:.0} cycles/s"))
            }
            TargetId::Realistic(a, b, counts) => {
                let (worst, d) = worst_ratio(counts.ns().iter().map(|&n| {
                    (n, m.realistic_at(n, a.name()), m.realistic_at(n, b.name()))
                }));
                value(worst, d)
            }
            TargetId::RealisticBandwidth(a) => {
                let bw = select::bandwidth_16m(&m.realistic);
                bandwidth_ratio(*bw.get(a.name())?, *bw.get(Sel::Oracle.name())?)
            }
            TargetId::AppendHostCost => value(
                m.append_cost.p50,
                format!(
                    "AppendReadback::begin + PendingAppend::launched, the kernel launch left out, {} appends, p99 {:.2} µs",
                    m.append_cost.samples, m.append_cost.p99
                ),
            ),
            TargetId::EnqueueInSweep(a) => value(
                sweep::enqueue_cost_small_n(&m.sweep).get(a.name())?.max,
                "worst p50 of the safe enqueue call over n = 1..4096 at cap 1M, in the sweep"
                    .into(),
            ),
            TargetId::EnqueueOver(a, b) => {
                let costs = sweep::enqueue_cost_small_n(&m.sweep);
                // A skipped approach has no enqueue to compare.
                let worst = |a: Approach| costs.get(a.name()).filter(|s| s.samples > 0);
                let (x, c) = (worst(a)?.max, worst(b)?.max);
                value(
                    x - c,
                    format!(
                        "{x:.2} - {c:.2} µs: worst p50 of the safe enqueue over n = 1..4096 at cap \
                         1M in the sweep, {} against {}",
                        a.name(),
                        b.name()
                    ),
                )
            }
            TargetId::EnqueueOverFloor => over_floor(
                m,
                costs::ENQUEUE,
                costs::DRIVER_FLOOR,
                "the driver calls it makes",
            ),
            TargetId::EnqueueSizedOverFloor => over_floor(
                m,
                costs::ENQUEUE_SIZED,
                costs::SIZED_DRIVER_FLOOR,
                "the driver calls of a sized staged enqueue",
            ),
            TargetId::EnqueueAlone => {
                let s = m.costs.calls.get(costs::ENQUEUE)?;
                value(
                    s.p50,
                    format!(
                        "safe enqueue, {} calls, p99 {:.2} µs; breakdown in enqueue_cost_breakdown",
                        s.samples, s.p99
                    ),
                )
            }
            TargetId::OracleAgreement => {
                let g = oracle_agreement(m);
                value(
                    g.worst,
                    format!(
                        "oracle / oracle_criterion_way p50, larger over smaller; {}",
                        g.detail
                    ),
                )
            }
        }
    }
}

/// The p50 of the costs section's call `enqueue` minus that of `floor`, the driver calls it
/// makes (`calls` names them in the detail); `None` where either was not timed.
fn over_floor(m: &Measurements, enqueue: &str, floor: &str, calls: &str) -> Option<Value> {
    let e = m.costs.calls.get(enqueue)?.p50;
    let f = m.costs.calls.get(floor)?.p50;
    Some(Value {
        measured: e - f,
        detail: format!("{e:.2} - {f:.2} µs: what the crate adds to {calls}"),
    })
}

/// The ratio of two bandwidths, with the detail the bandwidth targets give (none where the
/// second is not positive).
fn bandwidth_ratio(x: f64, y: f64) -> Option<Value> {
    (y > 0.0).then(|| Value {
        measured: x / y,
        detail: format!("{x:.2} / {y:.2} GB/s (128 MiB over p50 latency, producer included)"),
    })
}

/// The worst (largest) p50 ratio x/y over the counts that have both, and each count's
/// `n=N: x/y µs = r`, `; `-separated (0 and "" with none).
fn worst_ratio<'a>(
    pairs: impl Iterator<Item = (usize, Option<&'a PointResult>, Option<&'a PointResult>)>,
) -> (f64, String) {
    let mut worst = 0.0f64;
    let mut d = Vec::new();
    for (n, x, y) in pairs {
        if let (Some(x), Some(y)) = (x.filter(|x| x.measured()), y.filter(|y| y.measured())) {
            let r = x.latency_us.p50 / y.latency_us.p50;
            worst = worst.max(r);
            d.push(format!(
                "n={n}: {:.2}/{:.2} µs = {r:.3}",
                x.latency_us.p50, y.latency_us.p50
            ));
        }
    }
    (worst, d.join("; "))
}

/// The worst (largest) p50 difference x - y, µs, over the counts that have both measured, and
/// each count's `n=N: x - y µs = d`, `; `-separated; `None` with no such count.
fn worst_difference<'a>(
    pairs: impl Iterator<Item = (usize, Option<&'a PointResult>, Option<&'a PointResult>)>,
) -> Option<(f64, String)> {
    let mut worst: Option<f64> = None;
    let mut d = Vec::new();
    for (n, x, y) in pairs {
        if let (Some(x), Some(y)) = (x.filter(|x| x.measured()), y.filter(|y| y.measured())) {
            let (x, y) = (x.latency_us.p50, y.latency_us.p50);
            let diff = x - y;
            worst = Some(worst.map_or(diff, |w| w.max(diff)));
            d.push(format!("n={n}: {x:.2} - {y:.2} µs = {diff:.2}"));
        }
    }
    Some((worst?, d.join("; ")))
}

/// How far two approaches' p50 latencies are apart over a sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    /// The largest ratio of the larger p50 to the smaller over the points that have both
    /// (infinite where one is zero or a ratio is undefined; 0 with no such point).
    pub worst: f64,
    /// (capacity, n) of the worst point.
    pub at: (usize, usize),
    /// `cap/n: a/b µs = ratio` for every point, `; `-separated.
    pub detail: String,
}

/// The agreement of approaches `a` and `b` over `points` (by p50 latency).
pub fn agreement(points: &[Point], a: &str, b: &str) -> Agreement {
    let mut out = Agreement {
        worst: 0.0,
        at: (0, 0),
        detail: String::new(),
    };
    let mut d = Vec::new();
    for p in points {
        if let (Some(x), Some(y)) = (p.approaches.get(a), p.approaches.get(b)) {
            let (x, y) = (x.latency_us.p50, y.latency_us.p50);
            let r = x.max(y) / x.min(y);
            let r = if r.is_nan() { f64::INFINITY } else { r };
            if r > out.worst || d.is_empty() {
                out.worst = r;
                out.at = (p.capacity, p.n);
            }
            d.push(format!(
                "{}/{}: {x:.2}/{y:.2} µs = {r:.3}",
                size(p.capacity),
                size(p.n)
            ));
        }
    }
    out.detail = d.join("; ");
    out
}

/// The oracle, the harness's way against the criterion bench's, over the main sweep.
pub fn oracle_agreement(m: &Measurements) -> Agreement {
    agreement(
        &m.sweep,
        Approach::Oracle.name(),
        Approach::OracleCriterionWay.name(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    fn point(capacity: usize, n: usize, p50s: &[(&'static str, f64)]) -> Point {
        let approaches = p50s
            .iter()
            .map(|&(a, p50)| {
                let latency_us = Summary {
                    samples: 1,
                    p50,
                    ..Summary::default()
                };
                (
                    a,
                    PointResult {
                        latency_us,
                        enqueue_us: Summary::default(),
                        wait_us: Summary::default(),
                        correct: 1,
                        checked: 1,
                        error: None,
                        gbps: 0.0,
                    },
                )
            })
            .collect();
        Point {
            capacity,
            n,
            approaches,
        }
    }

    #[test]
    fn agreement_is_the_worst_larger_over_smaller() {
        let pts = [
            point(1 << 20, 1, &[("a", 10.0), ("b", 11.0)]),
            point(1 << 20, 65536, &[("a", 36.0), ("b", 24.0)]),
            point(1 << 24, 4096, &[("a", 12.0), ("b", 13.0)]),
            point(1 << 24, 65536, &[("a", 30.0)]),
        ];
        let g = agreement(&pts, "a", "b");
        assert_eq!(g.worst, 1.5);
        assert_eq!(g.at, (1 << 20, 65536));
        assert_eq!(g.detail.matches("µs =").count(), 3);
        assert!(g.detail.contains("1M/64K: 36.00/24.00 µs = 1.500"));
        // Either way round, the same ratio.
        assert_eq!(agreement(&pts, "b", "a").worst, 1.5);
        // A missing measurement (p50 0) cannot pass for agreement.
        let bad = [point(1 << 20, 1, &[("a", 0.0), ("b", 11.0)])];
        assert!(agreement(&bad, "a", "b").worst.is_infinite());
        let none = [point(1 << 20, 1, &[("a", 0.0), ("b", 0.0)])];
        assert!(agreement(&none, "a", "b").worst.is_infinite());
        assert_eq!(agreement(&pts, "a", "c").worst, 0.0);
    }

    #[test]
    fn the_worst_difference_skips_counts_without_both_measured() {
        let x = point(M, 1, &[("a", 30.0), ("b", 20.0)]);
        let y = point(M, 16, &[("a", 10.0), ("b", 12.5)]);
        let mut z = point(M, 256, &[("a", 90.0), ("b", 20.0)]);
        // Skipped (no samples): not a measurement of 0 µs.
        if let Some(b) = z.approaches.get_mut("b") {
            b.latency_us = Summary::default();
        }
        fn pairs<'a>(
            pts: &[&'a Point],
        ) -> impl Iterator<Item = (usize, Option<&'a PointResult>, Option<&'a PointResult>)>
        {
            pts.iter()
                .map(|p| (p.n, p.approaches.get("a"), p.approaches.get("b")))
                .collect::<Vec<_>>()
                .into_iter()
        }
        let (w, d) = worst_difference(pairs(&[&x, &y, &z])).expect("two counts have both");
        assert_eq!(w, 10.0);
        assert_eq!(
            d,
            "n=1: 30.00 - 20.00 µs = 10.00; n=16: 10.00 - 12.50 µs = -2.50"
        );
        // A floor faster everywhere still gives its largest (least negative) distance.
        assert_eq!(worst_difference(pairs(&[&y])).map(|(w, _)| w), Some(-2.5));
        assert!(worst_difference(pairs(&[&z])).is_none());
        let (r, _) = worst_ratio(pairs(&[&x, &z]));
        assert_eq!(r, 1.5, "the skipped count is left out of a ratio too");
    }

    #[test]
    fn the_worst_ratio_skips_counts_without_both() {
        let x = point(M, 1, &[("a", 30.0), ("b", 20.0)]);
        let y = point(M, 16, &[("a", 10.0), ("b", 20.0)]);
        let (w, d) = worst_ratio(
            [
                (1, x.approaches.get("a"), x.approaches.get("b")),
                (16, y.approaches.get("a"), y.approaches.get("b")),
                (256, y.approaches.get("a"), None),
            ]
            .into_iter(),
        );
        assert_eq!(w, 1.5);
        assert_eq!(
            d,
            "n=1: 30.00/20.00 µs = 1.500; n=16: 10.00/20.00 µs = 0.500"
        );
    }
}
