//! The text report: the latency and host-cost tables of both sweeps, the bandwidth, the grid
//! probe, the seed's loop and callback, single calls' cost, and the targets with the reason
//! for each miss. Written to stdout and to `table.txt`.
use crate::data::{size, Evaluation, Measurements, Point, Target, M};
use crate::select;
use crate::stats::Summary;
use crate::sweep::{self, Approach};
use std::fmt::Write as _;

/// The whole report of run `m` with its targets `e`.
pub fn text(m: &Measurements, e: &Evaluation) -> String {
    let mc = &m.machine;
    let mut text = format!(
        "sized-readback compare: {} ({}), {}, PCIe {}, {} host CPUs; {} cycles per point (n <= 64K)\n\n",
        mc.gpu,
        mc.compute_capability,
        mc.nvidia_smi.as_deref().unwrap_or("nvidia-smi n/a"),
        mc.pcie_link.as_deref().unwrap_or("?"),
        mc.host_cpus,
        m.reps
    );
    text.push_str(
        "Latency, producer launch to host holding count and data (µs; ! = some cycles wrong)\n",
    );
    let names = sweep::names();
    text.push_str(&latency_table(&m.sweep, &names));
    text.push_str("\nCorrectness over the whole sweep; host thread cost at n = 1..4096, cap 1M\n");
    text.push_str(&host_table(&m.sweep, &names, &|p: &Point| {
        p.capacity == M && p.n <= 4096
    }));
    let snames = select::names();
    text.push_str(
        "\nRealistic producer: select n of 1M candidates (all of 16M at cap 16M), block-aggregated, one wave of grid-stride blocks; \
         latency p50/p99 µs\n",
    );
    text.push_str(&latency_table(&m.realistic, &snames));
    text.push_str("\nRealistic producer: correctness; host thread cost at n = 1..4096\n");
    text.push_str(&host_table(&m.realistic, &snames, &|p: &Point| p.n <= 4096));
    let _ = writeln!(
        text,
        "\nOne append reservation + completion (kernel launch left out): p50 {:.2} µs, p99 {:.2} µs",
        m.append_cost.p50, m.append_cost.p99
    );
    text.push_str("\nBandwidth at n = 16M (GB/s, 128 MiB / p50 latency)\n");
    text.push_str(&align(
        &std::iter::once(vec!["approach".to_string(), "GB/s".into()])
            .chain(
                sweep::bandwidth_16m(&m.sweep)
                    .iter()
                    .map(|(k, v)| vec![k.to_string(), format!("{v:.2}")]),
            )
            .collect::<Vec<_>>(),
    ));
    let _ = writeln!(
        text,
        "\nMapped pack kernel alone by grid cap (p50 µs, GB/s); shape in use at cap 16M: {}",
        m.shape16
    );
    let mut rows = vec![vec![
        "n".to_string(),
        "max_blocks".into(),
        "p50 µs".into(),
        "GB/s".into(),
    ]];
    for g in &m.probe {
        rows.push(vec![
            size(g.n),
            g.max_blocks.to_string(),
            format!("{:.2}", g.p50_us),
            format!("{:.2}", g.gbps),
        ]);
    }
    text.push_str(&align(&rows));
    text.push_str(
        "\nThe seed's loop (two compute streams, readback, CPU work), cycles per second\n",
    );
    let mut rows = vec![vec![
        "kernel µs / CPU µs".to_string(),
        "approach".into(),
        "cycles/s".into(),
        "x sync".into(),
        "correct".into(),
    ]];
    for r in &m.seed_loop {
        let s = m
            .loop_rate(Approach::Sync.name(), r.kernel_us, r.cpu_us)
            .unwrap_or(f64::NAN);
        rows.push(vec![
            format!("{:.0} / {:.0}", r.kernel_us, r.cpu_us),
            r.approach.to_string(),
            format!("{:.0}", r.cycles_per_s),
            format!("{:.2}", r.cycles_per_s / s),
            format!("{}/{}", r.correct, r.cycles),
        ]);
    }
    text.push_str(&align(&rows));
    if !m.sized_step.is_empty() {
        text.push_str(
            "\nThe seed's loop with its next kernel sized by the device count (64 steps, counts \
             log-uniform in [1, cap]): µs per step, p50/p99\n",
        );
        let ways = sized_readback::testing::SIZED_LOOP_WAYS;
        let mut rows = vec![std::iter::once("cap (median count)".to_string())
            .chain(ways.iter().map(|w| w.to_string()))
            .chain(["check".to_string()])
            .collect::<Vec<_>>()];
        for s in &m.sized_step {
            let mut row = vec![format!(
                "{} ({})",
                size(s.capacity as usize),
                s.median_count
            )];
            for w in ways {
                row.push(format!(
                    "{:.2}/{:.2}",
                    s.p50_us.get(w).copied().unwrap_or(f64::NAN),
                    s.p99_us.get(w).copied().unwrap_or(f64::NAN)
                ));
            }
            row.push(if s.wrong.is_empty() {
                "right".into()
            } else {
                s.wrong.join("; ")
            });
            rows.push(row);
        }
        text.push_str(&align(&rows));
    }
    let cb = &m.seed_callback;
    let _ = writeln!(
        text,
        "\nThe seed's callback (host function calling cuMemcpyDtoHAsync), {} cycles at n = 4096: \
         the call returned {:?}; data arrived in {} of {} cycles{}",
        cb.cycles,
        cb.copy_call_returned,
        cb.data_arrived,
        cb.cycles,
        if cb.hung { " (the stream hung)" } else { "" }
    );
    text.push_str("\nHost cost of one call, alone on an idle stream (µs)\n");
    let mut rows = vec![vec!["call".to_string(), "p50".into(), "p99".into()]];
    for (k, v) in &m.costs.calls {
        rows.push(vec![
            k.to_string(),
            format!("{:.2}", v.p50),
            format!("{:.2}", v.p99),
        ]);
    }
    text.push_str(&align(&rows));
    text.push_str("\nTargets (crate = crate_mapped_trailer, the default)\n");
    text.push_str(&targets_table(&e.targets));
    text.push_str(&misses(&e.targets));
    text.push_str("\nThe same ratios for the other modes, and comparisons kept on record beside a target (informational)\n");
    text.push_str(&targets_table(&e.variants));
    text
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{fixture, targets};

    #[test]
    fn the_report_lists_every_table_and_target() {
        let m = fixture::measurements();
        let e = targets::evaluate(&m);
        let t = text(&m, &e);
        for heading in [
            "Latency, producer launch to host holding count and data",
            "Realistic producer: correctness",
            "Bandwidth at n = 16M",
            "Mapped pack kernel alone by grid cap",
            "The seed's loop",
            "The seed's callback",
            "Host cost of one call",
            "Targets (crate = crate_mapped_trailer, the default)",
            "The same ratios for the other modes, and comparisons kept on record beside a target (informational)",
        ] {
            assert!(t.contains(heading), "{heading}");
        }
        for x in e.targets.iter().chain(&e.variants) {
            assert!(t.contains(&x.name), "{}", x.name);
        }
        // Every miss is listed with its reason.
        for x in e.targets.iter().filter(|x| !x.holds) {
            assert!(
                t.contains(&format!("- {} (misses by", x.name)),
                "{}",
                x.name
            );
        }
        assert!(!t.contains("no reason recorded"));
        assert!(t.contains("1M/16  "), "a latency row per point");
    }
}
