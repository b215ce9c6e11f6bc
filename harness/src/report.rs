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
    /// Why it missed, from this run's own measurements (None when it holds).
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

/// Human size of an element count: 1, 16, 4096, 64K, 1M, 16M.
pub fn size(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}M", n >> 20)
    } else if n >= 1 << 14 && n.is_multiple_of(1 << 10) {
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

/// The latency table: p50/p99 per approach, a `!` after any cell with a wrong cycle.
pub fn latency_table(points: &[Point]) -> String {
    let mut rows = vec![{
        let mut h = vec!["cap/n (p50/p99 µs)".to_string()];
        h.extend(Approach::ALL.iter().map(|a| a.name().to_string()));
        h
    }];
    for p in points {
        let mut r = vec![format!("{}/{}", size(p.capacity), size(p.n))];
        for a in Approach::ALL {
            r.push(match p.approaches.get(a.name()) {
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
pub fn host_table(points: &[Point], small: &dyn Fn(&Point) -> bool) -> String {
    let mut rows = vec![vec![
        "approach".to_string(),
        "correct cycles".into(),
        "enqueue p50 µs".into(),
        "enqueue p99 µs".into(),
        "wait p50 µs".into(),
        "first error".into(),
    ]];
    for a in Approach::ALL {
        let (mut ok, mut all) = (0, 0);
        let mut err = None;
        let (mut enq50, mut enq99, mut w50) = (Vec::new(), Vec::new(), Vec::new());
        for p in points {
            if let Some(x) = p.approaches.get(a.name()) {
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
            a.name().into(),
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

/// Log-log plot of p50 latency against n, one panel per capacity, one line per approach.
pub fn plot(path: &Path, points: &[Point], title: &str) -> Result<()> {
    use plotters::prelude::*;
    let err = |e: &dyn std::fmt::Debug| anyhow!("plotting: {e:?}");
    let mut caps: Vec<usize> = points.iter().map(|p| p.capacity).collect();
    caps.sort_unstable();
    caps.dedup();
    let root = SVGBackend::new(path, (640 * caps.len().max(1) as u32, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let root = root
        .titled(title, ("sans-serif", 18))
        .map_err(|e| err(&e))?;
    let panels = root.split_evenly((1, caps.len().max(1)));
    let lat = |p: &Point, a: Approach| p.approaches.get(a.name()).map(|x| x.latency_us.p50);
    let all: Vec<f64> = points
        .iter()
        .flat_map(|p| Approach::ALL.iter().filter_map(|&a| lat(p, a)))
        .filter(|&x| x > 0.0)
        .collect();
    let ymin = all.iter().copied().fold(f64::INFINITY, f64::min).max(0.1) * 0.7;
    let ymax = all.iter().copied().fold(0.0, f64::max).max(ymin * 10.0) * 1.5;
    for (panel, &cap) in panels.iter().zip(&caps) {
        let pts: Vec<&Point> = points.iter().filter(|p| p.capacity == cap).collect();
        let xmax = pts.iter().map(|p| p.n).max().unwrap_or(1) as f64 * 2.0;
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("capacity {} f64", size(cap)), ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((0.7f64..xmax).log_scale(), (ymin..ymax).log_scale())
            .map_err(|e| err(&e))?;
        chart
            .configure_mesh()
            .x_desc("n (f64 elements)")
            .y_desc("p50 latency, µs")
            .x_label_formatter(&|x| size(x.round() as usize))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()
            .map_err(|e| err(&e))?;
        for (i, a) in Approach::ALL.iter().enumerate() {
            let series: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|p| lat(p, *a).map(|y| (p.n as f64, y)))
                .collect();
            if series.is_empty() {
                continue;
            }
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(series.clone(), color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(a.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(series.iter().map(|&p| Circle::new(p, 3, color.filled())))
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
