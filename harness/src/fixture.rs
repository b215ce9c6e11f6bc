//! Synthetic measurements for the tests, no GPU needed: every section of a default run, with
//! every point and approach of the plan, and plausible H200-like numbers.
use crate::data::{
    Costs, GridProbe, LoopResult, LoopTrace, Machine, Measurements, Point, Samples, SeedCallback,
    SizedStep, Span,
};
use crate::plan::Args;
use crate::stats::Summary;
use crate::{costs, pipeline, select, sweep};
use clap::Parser;

/// p50 latency (µs) of approach `name` at capacity `cap`, count `n`: a fixed cost and a copy
/// at 54 GB/s (of the capacity for the approaches that copy all of it). The sized staged
/// readback and its floor, the bare graph, are about 1.8x the oracle at small n, as on the
/// H200.
pub fn latency(name: &str, cap: usize, n: usize) -> f64 {
    let copy = |k: usize| k as f64 * 8.0 / 54e3;
    match name {
        "producer_only" => 10.0,
        "naive" => 16.0 + copy(n),
        "sync" => 21.0 + copy(n),
        "callback_worker" => 110.0 + copy(n),
        "over_copy" | "crate_staged" | "crate_pack_staged" | "crate_append_staged" => {
            12.0 + copy(cap)
        }
        "oracle" => 14.0 + copy(n),
        "oracle_criterion_way" => 13.6 + copy(n),
        "oracle_after_host_read" => 14.5 + copy(n),
        "crate_append" => 9.6 + copy(n),
        "crate_staged_sized" | "crate_pack_staged_sized" => 25.0 + 1.01 * copy(n),
        "bare_sized_graph" => 23.5 + copy(n),
        _ => 14.6 + 1.01 * copy(n),
    }
}

/// p50 host time (µs) of approach `name`'s enqueue at every point: the staged enqueues cost
/// more than the mapped one, the sized one most (its graph's two driver calls).
pub fn enqueue(name: &str) -> f64 {
    match name {
        "crate_staged_sized" | "crate_pack_staged_sized" => 4.1,
        "bare_sized_graph" => 3.4,
        "crate_staged" => 3.0,
        _ => 1.0,
    }
}

/// One point: each of `names` with three timed cycles around its [`latency`], all correct.
fn point(cap: usize, n: usize, names: &[&'static str]) -> Point {
    let approaches = names
        .iter()
        .map(|&a| {
            let mut s = Samples::default();
            let l = latency(a, cap, n);
            for f in [0.99, 1.0, 1.01] {
                s.record_us(f * l, enqueue(a), f * l - 2.0, true);
            }
            (a, s.summarize(n))
        })
        .collect();
    Point {
        capacity: cap,
        n,
        approaches,
    }
}

/// A summary of `samples` samples around `p50`.
fn summary(samples: usize, p50: f64) -> Summary {
    Summary {
        samples,
        p50,
        p99: 2.0 * p50,
        mean: 1.1 * p50,
        min: 0.9 * p50,
        max: 3.0 * p50,
    }
}

/// A default run's measurements.
pub fn measurements() -> Measurements {
    let args = Args::parse_from(["compare"]);
    let sweep_names = sweep::names();
    let sel_names = select::names();
    let rate = |a: &str| match a {
        "sync" => 4500.0,
        "callback_worker" => 3000.0,
        "crate_append" => 8900.0,
        "crate_staged" => 8400.0,
        _ => 8800.0,
    };
    let seed_loop = Args::LOOP_RATIOS
        .iter()
        .flat_map(|&(kernel_us, cpu_us)| {
            pipeline::APPROACHES.iter().map(move |a| LoopResult {
                approach: a.name(),
                kernel_us,
                cpu_us,
                cycles: 600,
                seconds: 600.0 / rate(a.name()),
                cycles_per_s: rate(a.name()),
                correct: 600,
            })
        })
        .collect();
    // Six cycles per traced strategy: kernels of 200 µs, a readback of 12 µs after each; the
    // synchronizing one launches kernel k only after readback k-1, the others at once.
    let seed_trace = pipeline::Loop::TRACED
        .iter()
        .map(|a| {
            let gap = if *a == sweep::Approach::Sync {
                230.0
            } else {
                205.0
            };
            let mut spans = Vec::new();
            for k in 0..6 {
                let ks = k as f64 * gap;
                let lane = if k % 2 == 0 {
                    "compute stream 0"
                } else {
                    "compute stream 1"
                };
                let span = |lane, label: String, start_us, end_us| Span {
                    lane,
                    label,
                    start_us,
                    end_us,
                };
                spans.push(span(lane, format!("kernel {k}"), ks, ks + 200.0));
                spans.push(span(
                    "copy stream",
                    format!("readback {k}"),
                    ks + 200.0,
                    ks + 212.0,
                ));
                spans.push(span("host", format!("launch {k}"), ks - 4.0, ks));
                spans.push(span("host", format!("wait {k}"), ks + 4.0, ks + 214.0));
                spans.push(span(
                    "host",
                    format!("CPU work {k}"),
                    ks + 214.0,
                    ks + 219.0,
                ));
            }
            LoopTrace {
                approach: a.name(),
                kernel_us: 200.0,
                cpu_us: 5.0,
                correct: if *a == sweep::Approach::Naive { 3 } else { 6 },
                cycles: 6,
                spans,
            }
        })
        .collect();
    let costs = Costs {
        calls: costs::CALLS
            .iter()
            .map(|&k| {
                let p50 = match k {
                    costs::ENQUEUE => 3.0,
                    costs::ENQUEUE_AFTER_LAUNCH => 4.0,
                    costs::DRIVER_FLOOR => 2.7,
                    costs::ENQUEUE_SIZED => 4.3,
                    costs::SIZED_DRIVER_FLOOR => 3.9,
                    _ => 0.5,
                };
                (k, summary(400, p50))
            })
            .collect(),
    };
    let probe = args
        .probe_points(132)
        .into_iter()
        .flat_map(|(n, grids)| {
            grids.into_iter().map(move |max_blocks| {
                let p50_us = 8.0 + n as f64 * 8.0 / 30e3;
                GridProbe {
                    n,
                    max_blocks,
                    p50_us,
                    gbps: n as f64 * 8.0 / p50_us / 1e3,
                }
            })
        })
        .collect();
    Measurements {
        seed_trace,
        machine: Machine {
            gpu: "NVIDIA H200".into(),
            compute_capability: "9.0".into(),
            multiprocessors: 132,
            pci_bus_id: "0000:00:06.0".into(),
            cuda_driver_api: "13.0".into(),
            nvidia_smi: Some("NVIDIA H200, 580.159.04, 5, 16, 5, 16".into()),
            pcie_link: Some("Gen5 x16 (max Gen5 x16)".into()),
            host_cpus: 16,
            host_cpu_model: Some("Intel(R) Xeon(R) Processor".into()),
            fatbin_targets: sized_readback::KERNEL_TARGETS,
            kernel_image: "sm_90 (machine code, 43736 bytes)".into(),
        },
        reps: args.reps(),
        sweep: args
            .sweep_points()
            .into_iter()
            .map(|(cap, n)| point(cap, n, &sweep_names))
            .collect(),
        realistic: args
            .realistic_points()
            .into_iter()
            .map(|(cap, _, n)| point(cap, n as usize, &sel_names))
            .collect(),
        append_cost: summary(1000, 0.53),
        probe,
        shape16: "LaunchShape { grid: 528, block: 256, programmatic: true }".into(),
        costs,
        seed_loop,
        seed_callback: SeedCallback {
            cycles: 10,
            callback_ran: 10,
            copy_call_returned: vec!["CUDA_ERROR_NOT_PERMITTED".into()],
            data_arrived: 0,
            hung: false,
        },
        sized_step: [
            (1u64 << 14, 19.0, 8.0, 13.5, 9.0),
            (1 << 20, 22.0, 11.5, 14.0, 10.5),
        ]
        .into_iter()
        .map(|(capacity, sync, over, sized, graph)| SizedStep {
            capacity,
            steps: 64,
            repeats: 30,
            median_count: capacity / 40,
            classes: 8,
            p50_us: [
                ("sync", sync),
                ("over", over),
                ("sized", sized),
                ("sized-grid", sized - 2.0),
                ("over-graph", over - 1.0),
                ("sized-graph", graph),
                ("sized-grid-graph", graph - 3.0),
            ]
            .into_iter()
            .collect(),
            p99_us: [
                ("sync", sync + 1.0),
                ("over", over + 1.0),
                ("sized", sized + 1.0),
                ("sized-grid", sized - 1.0),
                ("over-graph", over),
                ("sized-graph", graph + 1.0),
                ("sized-grid-graph", graph - 2.0),
            ]
            .into_iter()
            .collect(),
            wrong: Vec::new(),
        })
        .collect(),
    }
}
