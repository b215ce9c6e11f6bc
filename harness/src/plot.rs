//! The SVG plot: p50 latency against n, log-log, one panel per producer and capacity.
use crate::data::{size, Measurements, Point, M};
use crate::{select, sweep};
use anyhow::{anyhow, Result};
use std::path::Path;

/// The plot of run `m` (dated `date`) into `path`: the main sweep at each capacity, and the
/// realistic producer.
pub fn latency(path: &Path, m: &Measurements, date: &str) -> Result<()> {
    let mut panels: Vec<Panel<'_>> = [M, 16 * M]
        .iter()
        .map(|&cap| Panel {
            title: format!("one-thread producer, capacity {}", size(cap)),
            points: m.sweep.iter().filter(|p| p.capacity == cap).collect(),
            names: sweep::names(),
        })
        .collect();
    panels.push(Panel {
        title: "realistic producer: select n of 1M (16M of 16M)".into(),
        points: m.realistic.iter().collect(),
        names: select::names(),
    });
    plot(
        path,
        &panels,
        &format!("p50 readback latency, {} ({date})", m.machine.gpu),
    )
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
    let lat = |p: &Point, a: &str| {
        p.approaches
            .get(a)
            .filter(|x| x.measured())
            .map(|x| x.latency_us.p50)
    };
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
    use crate::fixture;

    #[test]
    fn the_plot_draws_every_panel_and_approach() {
        let m = fixture::measurements();
        let path = std::env::temp_dir().join(format!("srb-plot-{}.svg", std::process::id()));
        latency(&path, &m, "2026-12-03").expect("plots");
        let svg = std::fs::read_to_string(&path).expect("written");
        let _ = std::fs::remove_file(&path);
        assert!(svg.contains("one-thread producer, capacity 1M"));
        assert!(svg.contains("one-thread producer, capacity 16M"));
        assert!(svg.contains("realistic producer: select n of 1M"));
        assert!(svg.contains("crate_mapped_trailer (this library)"));
        assert!(svg.contains("oracle_criterion_way"));
        assert!(svg.contains("crate_append (this library)"));
    }
}
