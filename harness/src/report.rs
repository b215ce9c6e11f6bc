//! What the harness writes: the aligned table, the targets and the SVG plot.
use crate::stats::Summary;
use crate::sweep::Approach;
use anyhow::{anyhow, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

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

/// One sweep point: every approach.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Elements per slot / copy-based capacity.
    pub capacity: usize,
    /// Nominal count (cycles alternate n and n - 1 for n >= 2).
    pub n: usize,
    /// Per approach.
    pub approaches: BTreeMap<&'static str, PointResult>,
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

impl Target {
    /// A target `measured <= limit`.
    pub fn at_most(name: impl Into<String>, measured: f64, limit: f64, detail: String) -> Target {
        let holds = measured <= limit;
        Target {
            name: name.into(),
            measured,
            limit,
            comparison: "<=",
            holds,
            miss_by: if holds { 0.0 } else { measured / limit - 1.0 },
            detail,
            why: None,
        }
    }
    /// A target `measured >= limit`.
    pub fn at_least(name: impl Into<String>, measured: f64, limit: f64, detail: String) -> Target {
        let holds = measured >= limit;
        Target {
            name: name.into(),
            measured,
            limit,
            comparison: ">=",
            holds,
            miss_by: if holds { 0.0 } else { 1.0 - measured / limit },
            detail,
            why: None,
        }
    }
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

fn fmt_us(x: f64) -> String {
    if x >= 1000.0 {
        format!("{x:.0}")
    } else if x >= 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Lays out rows of cells with right-aligned columns (first column left-aligned).
pub fn align(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut w = vec![0; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        for (i, c) in r.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i == 0 {
                let _ = write!(out, "{c}{}", " ".repeat(pad));
            } else {
                let _ = write!(out, "  {}{c}", " ".repeat(pad));
            }
        }
        out.push('\n');
        if ri == 0 {
            let total = w.iter().sum::<usize>() + 2 * cols.saturating_sub(1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

/// The names of the main sweep's approaches, in table order.
pub fn sweep_names() -> Vec<&'static str> {
    Approach::ALL.iter().map(|a| a.name()).collect()
}

/// The latency table: p50/p99 per approach (`names`, in order), a `!` after any cell with a
/// wrong cycle.
pub fn latency_table(points: &[Point], names: &[&'static str]) -> String {
    let mut rows = vec![{
        let mut h = vec!["cap/n (p50/p99 µs)".to_string()];
        h.extend(names.iter().map(|a| a.to_string()));
        h
    }];
    for p in points {
        let mut r = vec![format!("{}/{}", size(p.capacity), size(p.n))];
        for a in names {
            r.push(match p.approaches.get(a) {
                Some(x) => format!(
                    "{}/{}{}",
                    fmt_us(x.latency_us.p50),
                    fmt_us(x.latency_us.p99),
                    if x.correct < x.checked { " !" } else { "" }
                ),
                None => "-".into(),
            });
        }
        rows.push(r);
    }
    align(&rows)
}

/// Correctness over the whole sweep, and the host-thread cost at small n.
pub fn host_table(
    points: &[Point],
    names: &[&'static str],
    small: &dyn Fn(&Point) -> bool,
) -> String {
    let mut rows = vec![vec![
        "approach".to_string(),
        "correct cycles".into(),
        "enqueue p50 µs".into(),
        "enqueue p99 µs".into(),
        "wait p50 µs".into(),
        "first error".into(),
    ]];
    for a in names {
        let (mut ok, mut all) = (0, 0);
        let mut err = None;
        let (mut enq50, mut enq99, mut w50) = (Vec::new(), Vec::new(), Vec::new());
        for p in points {
            if let Some(x) = p.approaches.get(a) {
                ok += x.correct;
                all += x.checked;
                if err.is_none() {
                    err = x.error.clone();
                }
                if small(p) {
                    enq50.push(x.enqueue_us.p50);
                    enq99.push(x.enqueue_us.p99);
                    w50.push(x.wait_us.p50);
                }
            }
        }
        let med = |v: &[f64]| Summary::of(v).p50;
        rows.push(vec![
            a.to_string(),
            format!(
                "{ok}/{all}{}",
                if ok < all {
                    format!(
                        " WRONG {:.0}%",
                        100.0 * (all - ok) as f64 / all.max(1) as f64
                    )
                } else {
                    String::new()
                }
            ),
            fmt_us(med(&enq50)),
            fmt_us(med(&enq99)),
            fmt_us(med(&w50)),
            err.unwrap_or_default(),
        ]);
    }
    align(&rows)
}

/// The reasons given for missed targets, one line each.
pub fn misses(targets: &[Target]) -> String {
    let mut out = String::new();
    for t in targets.iter().filter(|t| !t.holds) {
        let _ = writeln!(
            out,
            "- {} (misses by {:.1}%): {}",
            t.name,
            100.0 * t.miss_by,
            t.why.as_deref().unwrap_or("no reason recorded")
        );
    }
    out
}

/// The targets as a table.
pub fn targets_table(targets: &[Target]) -> String {
    let mut rows = vec![vec![
        "target".to_string(),
        "measured".into(),
        "limit".into(),
        "holds".into(),
    ]];
    for t in targets {
        rows.push(vec![
            t.name.clone(),
            format!("{:.3}", t.measured),
            format!("{} {}", t.comparison, t.limit),
            if t.holds {
                "yes".into()
            } else {
                format!("NO (misses by {:.1}%)", 100.0 * t.miss_by)
            },
        ]);
    }
    align(&rows)
}

/// One panel of the plot: its title, points and approaches (in legend order).
pub struct Panel<'a> {
    /// Caption.
    pub title: String,
    /// Its points (one capacity, or one producer).
    pub points: Vec<&'a Point>,
    /// The approaches drawn.
    pub names: Vec<&'static str>,
}

/// The library's own approaches: drawn thick, in strong colours.
fn is_library(name: &str) -> bool {
    name == "crate_mapped_trailer" || name == "crate_pack" || name == "crate_append"
}

/// Log-log plot of p50 latency against n, one panel per `panels` entry, one line per approach.
/// The library's default paths stand out (thick lines); an approach that got any cycle wrong is
/// drawn dashed grey and labelled "(WRONG)"; the x ticks are 1, 16, 256, 4K, 64K, 1M, 16M.
pub fn plot(path: &Path, panels: &[Panel<'_>], title: &str) -> Result<()> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Debug| anyhow!("plotting: {e:?}");
    let root = SVGBackend::new(path, (640 * panels.len().max(1) as u32, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 18))
        .map_err(|e| err(&e))?;
    let areas = root.split_evenly((1, panels.len().max(1)));
    let lat = |p: &Point, a: &str| p.approaches.get(a).map(|x| x.latency_us.p50);
    let wrong = |pts: &[&Point], a: &str| {
        pts.iter()
            .any(|p| p.approaches.get(a).is_some_and(|x| x.correct < x.checked))
    };
    let all: Vec<f64> = panels
        .iter()
        .flat_map(|pl| {
            pl.points
                .iter()
                .flat_map(|p| pl.names.iter().filter_map(|&a| lat(p, a)))
                .collect::<Vec<_>>()
        })
        .filter(|&x| x > 0.0)
        .collect();
    let ymin = all.iter().copied().fold(f64::INFINITY, f64::min).max(0.1) * 0.7;
    let ymax = all.iter().copied().fold(0.0, f64::max).max(ymin * 10.0) * 1.5;
    let ticks: Vec<f64> = (0..=12)
        .step_by(2)
        .map(|k| (1u64 << (2 * k)) as f64)
        .collect();
    for (area, pl) in areas.iter().zip(panels) {
        let xmax = pl.points.iter().map(|p| p.n).max().unwrap_or(1) as f64 * 2.0;
        let keys: Vec<f64> = ticks.iter().copied().filter(|&t| t <= xmax).collect();
        let mut chart = ChartBuilder::on(area)
            .caption(&pl.title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(
                (0.7f64..xmax).log_scale().with_key_points(keys),
                (ymin..ymax).log_scale(),
            )
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("n (rows read back)")
            .y_desc("p50 latency, µs (producer launch to host holding count and data)")
            .x_label_formatter(&|x| size(x.round() as usize))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(|e| err(&e))?;
        for (i, &a) in pl.names.iter().enumerate() {
            let series: Vec<(f64, f64)> = pl
                .points
                .iter()
                .filter_map(|p| lat(p, a).map(|y| (p.n as f64, y)))
                .collect();
            if series.is_empty() {
                continue;
            }
            let is_wrong = wrong(&pl.points, a);
            let (color, width) = if is_wrong {
                (RGBColor(150, 150, 150).to_rgba(), 1)
            } else if is_library(a) {
                (Palette99::pick(i).to_rgba(), 4)
            } else {
                (Palette99::pick(i).mix(0.55), 1)
            };
            let label = if is_wrong {
                format!("{a} (WRONG: stale size)")
            } else if is_library(a) {
                format!("{a} (this library)")
            } else {
                a.to_string()
            };
            let style = color.stroke_width(width);
            if is_wrong {
                chart
                    .draw_series(DashedLineSeries::new(series.clone(), 6, 4, style))
                    .map_err(|e| err(&e))?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            } else {
                chart
                    .draw_series(LineSeries::new(series.clone(), style))
                    .map_err(|e| err(&e))?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
            }
            chart
                .draw_series(
                    series
                        .iter()
                        .map(|&p| Circle::new(p, if width > 1 { 4 } else { 2 }, color.filled())),
                )
                .map_err(|e| err(&e))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
