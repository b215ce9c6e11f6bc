//! A BFS whose every level's expand is sized by the device count of the previous frontier
//! (issue 36's real consumer), on the library's [`SizedLaunch`], against the ways users size it
//! today, checked against a host BFS on every vertex. The kernels are the testing images'
//! `srbt_bfs_expand` (`csrc/testing/bfs.cu`: top-down, edge-balanced; a frontier's count word
//! is vertices << 32 | edges, and its low half, the edge count E, sizes the expand).
//!
//! The graph: R-MAT with Graph500's parameters (a = 0.57, b = 0.19, c = 0.19, d = 0.05, edge
//! factor 16, vertex ids scrambled), 2^scale vertices, undirected, as CSR, generated on the
//! host from a fixed seed (splitmix64; the edges in 64 chunks of their own seeds, made in
//! parallel). The ways per level, each in a loop that never reads the host in between:
//!
//! - `sync`: E copied to pinned memory, the stream synchronized, ceil(E / 2048) blocks;
//! - `over`: every level, the grid that covers every edge of the graph (the top class's, 16,384
//!   blocks of grid-stride tiles; blocks past E exit);
//! - `sized`: two `SizedLaunch`es (one per frontier buffer) over 7 classes of E (8192 x 4^c
//!   edges; the last class every edge, its grid 16384 blocks, several passes): the device
//!   picks each level's grid; each level enqueued from the host;
//! - `sized-grid`: two `SizedLaunch`es in the exact-grid form (`exact_grid(2048)`): no
//!   classes; the device sets each level's expand to ceil(E / 2048) blocks, as `sync` launches;
//! - `over-graph`, `sized-graph` and `sized-grid-graph`: the same three, every level recorded
//!   once into one CUDA graph (`SizedLaunch::record` for the sized ones), the whole BFS one
//!   graph launch.
//!
//! `over` and `sized` take the number of levels from the host BFS (no read in the loop); a
//! BFS that does not know its depth would put the level in a WHILE node. Per level: the time
//! between consecutive level starts, p50 over `--repeats`, read from the device clock by each
//! level's prepare kernel (`--timing stamps`, the default: it adds no work) or from events
//! recorded before each level (`--timing events`: a stream event, or in the graph ways an
//! event-record node, work the BFS itself would not have). The level of the median frontier
//! is the issue's yardstick, each sized way against the best of its rivals. `--only WAY` runs
//! one way (to count its driver calls). Writes a JSON record (`--out`).
//!
//! ```text
//! cargo run --release --example bfs -- --scale 22 --out results/mine/bfs.json
//! ```
#[path = "../support/record.rs"]
mod record;

use anyhow::{ensure, Context, Result};
use clap::Parser;
use cudarc::driver::sys;
use cudarc::driver::CudaEvent;
use record::{round, Target};
use serde::Serialize;
use sized_readback::testing::{upload, DeviceBuffer, Kernels, PinnedBuffer};
use sized_readback::{RawCount, SizedLaunch};
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// log2 of the vertex count.
    #[arg(long, default_value_t = 22)]
    scale: u32,
    /// Timed BFS runs per way (after 2 warm-ups).
    #[arg(long, default_value_t = 10)]
    repeats: usize,
    /// Where to write the JSON record.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Run only this way (sync, over, sized, sized-grid, over-graph, sized-graph,
    /// sized-grid-graph).
    #[arg(long)]
    only: Option<String>,
    /// How a level is timed: `stamps`, the device clock read by each level's prepare kernel
    /// (adds no work); `events`, an event recorded before each level (a stream event, or an
    /// event-record node in the graph ways: work the BFS would not have).
    #[arg(long, default_value = "stamps", value_parser = ["stamps", "events"])]
    timing: String,
}

mod gpu;
mod graph;

use gpu::{capture_levels, Dev, Gpu, MAX_GRID, TILE};
use graph::{host_bfs, rmat};
use sized_readback::testing::CapturedGraph;

fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * q).round() as usize]
}

fn main() -> Result<()> {
    let args = Args::parse();
    let t0 = Instant::now();
    let g = rmat(args.scale, 16, 0x5eed);
    let m = g.off[g.n] as u64;
    ensure!(
        m < 1 << 32,
        "{m} directed edges: the count word's edge half holds fewer than 2^32"
    );
    let root = (0..g.n)
        .find(|&v| g.off[v + 1] > g.off[v])
        .context("no vertex with edges")?;
    let want = host_bfs(&g, root);
    let depth_max = *want.iter().max().unwrap() as usize;
    let levels = depth_max + 1;
    let mut frontier = vec![0u64; levels];
    for &l in want.iter().filter(|&&l| l >= 0) {
        frontier[l as usize] += 1;
    }
    let mut sorted = frontier.clone();
    sorted.sort_unstable();
    let median_level = frontier
        .iter()
        .position(|&f| f == sorted[sorted.len() / 2])
        .unwrap();
    let built_s = t0.elapsed().as_secs_f64();
    println!(
        "R-MAT scale {}: {} vertices, {m} directed edges, root {root}, {levels} levels, built in {built_s:.1} s",
        args.scale, g.n
    );
    println!("frontier per level: {frontier:?}; median frontier: level {median_level}");

    let ctx = sized_readback::device::open(0)?;
    let stream = ctx.new_stream()?;
    let kernels = Kernels::load(&ctx)?;
    let n = g.n;
    let sizes = [
        8 * (n + 1),
        4 * m as usize,
        4 * n,
        8 * n,
        8 * n,
        8 * n,
        8 * n,
        8,
        8,
        4,
    ];
    let buffers: Vec<DeviceBuffer> = sizes
        .iter()
        .map(|&b| DeviceBuffer::new_zeroed(&ctx, b))
        .collect::<sized_readback::Result<_>>()?;
    let mut dev = Dev([0; 10]);
    for (i, b) in buffers.iter().enumerate() {
        dev.0[i] = b.ptr();
    }
    // SAFETY: the CSR into the buffers sized for it.
    unsafe {
        upload(
            &ctx,
            dev.0[0],
            std::slice::from_raw_parts(g.off.as_ptr().cast(), 8 * (n + 1)),
        )?;
        upload(
            &ctx,
            dev.0[1],
            std::slice::from_raw_parts(g.adj.as_ptr().cast(), 4 * m as usize),
        )?;
    }
    let gpu = Gpu {
        expand: kernels.function("srbt_bfs_expand")?,
        prepare: kernels.function("srbt_bfs_prepare")?,
        host_count: PinnedBuffer::new(&ctx, 64, false)?,
        stamps: DeviceBuffer::new_zeroed(&ctx, 8 * (levels + 1))?,
        stamps_len: 8 * (levels + 1),
        ctx: ctx.clone(),
        stream,
        dev,
        _buffers: buffers,
    };
    // The sized expands: E is the count word's low half (its first 4 bytes), a u32.
    let classes: Vec<u64> = (0..6)
        .map(|c| 8192u64 << (2 * c))
        .chain([m.max(8192 << 12)])
        .collect();
    let t1 = Instant::now();
    let sized: Vec<SizedLaunch> = (0..2)
        .map(|p| {
            SizedLaunch::builder(RawCount::u32(gpu.count(p)), *classes.last().unwrap())
                .classes(classes.iter().copied())
                .build(&ctx, |c| {
                    let grid = c.n_max().div_ceil(TILE).min(MAX_GRID);
                    gpu.launch_expand(c.stream().cu_stream(), p as i32, grid)
                })
        })
        .collect::<sized_readback::Result<_>>()?;
    let sized_build_us = t1.elapsed().as_secs_f64() * 1e6;
    // The exact-grid expands: recorded with the over-launch's grid, which the device replaces
    // by ceil(E / TILE) blocks at each launch.
    let t1 = Instant::now();
    let built: sized_readback::Result<Vec<SizedLaunch>> = (0..2)
        .map(|p| {
            SizedLaunch::builder(RawCount::u32(gpu.count(p)), m.max(1))
                .exact_grid(TILE)
                .build(&ctx, |c| {
                    let g = m.div_ceil(TILE).clamp(1, MAX_GRID);
                    gpu.launch_expand(c.stream().cu_stream(), p as i32, g)
                })
        })
        .collect();
    let grid_build_us = t1.elapsed().as_secs_f64() * 1e6;
    // Where the driver refuses the exact-grid form, its ways are left out and the others run.
    let grid = built.unwrap_or_else(|e| {
        eprintln!("the sized-grid ways are left out: {e}");
        Vec::new()
    });

    // The over-launch's grid: the top class's (every edge, in grid-stride tiles), so that it
    // pays for the same blocks as the sized way at its largest, not one block per tile.
    let over_grid = m.div_ceil(TILE).min(MAX_GRID);
    let all_ways = [
        "sync",
        "over",
        "sized",
        "sized-grid",
        "over-graph",
        "sized-graph",
        "sized-grid-graph",
    ];
    let ways: Vec<&str> = all_ways
        .iter()
        .copied()
        .filter(|w| args.only.as_deref().is_none_or(|o| o == *w))
        .filter(|w| !grid.is_empty() || !w.starts_with("sized-grid"))
        .collect();
    ensure!(!ways.is_empty(), "--only takes one of {all_ways:?}");
    let events = args.timing == "events";
    let timing = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let new_marks = || -> Result<Vec<CudaEvent>> {
        Ok((0..=levels)
            .map(|_| ctx.new_event(timing))
            .collect::<Result<_, _>>()?)
    };
    // The graph ways: every level recorded once (with `--timing events`, their marks are the
    // graphs' event-record nodes). Declared after `sized` and `gpu`, so dropped before them,
    // as `capture_levels`'s contract asks.
    let mut replays: Vec<Option<(CapturedGraph, Vec<CudaEvent>)>> = Vec::new();
    for way in &ways {
        let marks = if events { new_marks()? } else { Vec::new() };
        let node_marks = events.then_some(marks.as_slice());
        replays.push(match *way {
            "over-graph" => {
                // SAFETY: the graph is dropped before `gpu` (declared after it).
                let r = unsafe {
                    capture_levels(&gpu, levels, node_marks, |p| {
                        gpu.launch_expand(gpu.stream.cu_stream(), p as i32, over_grid)
                    })?
                };
                Some((r, marks))
            }
            "sized-graph" => {
                let s = gpu.stream.cu_stream();
                // SAFETY: `s` is capturing (inside capture_levels); the sized launches and the
                // BFS buffers their bodies use outlive the graph (dropped after `replays`).
                let r =
                    unsafe { capture_levels(&gpu, levels, node_marks, |p| sized[p].record(s))? };
                Some((r, marks))
            }
            "sized-grid-graph" => {
                let s = gpu.stream.cu_stream();
                // SAFETY: as for sized-graph; CapturedGraph uploads the graph after
                // instantiating it, as its device-updatable nodes need.
                let r = unsafe { capture_levels(&gpu, levels, node_marks, |p| grid[p].record(s))? };
                Some((r, marks))
            }
            _ => None,
        });
    }
    let mut stamps = vec![0u64; levels + 1];
    // The device clock's step: the gcd of every level's time in ns (1000 if it ticks in µs).
    let mut clock_step_ns = 0u64;
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut per_level: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); levels]; ways.len()];
    let mut whole: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    let mut wrong = 0usize;
    for rep in 0..args.repeats + 2 {
        for (w, way) in ways.iter().enumerate() {
            gpu.reset(&g, root)?;
            let stream_marks;
            let marks: &[CudaEvent] = match &replays[w] {
                Some((replay, marks)) => {
                    replay.launch()?;
                    marks
                }
                None => {
                    stream_marks = if events { new_marks()? } else { Vec::new() };
                    let mut p = 0usize;
                    for l in 0..levels {
                        // Empty unless timed by events.
                        if let Some(mark) = stream_marks.get(l) {
                            mark.record(&gpu.stream)?;
                        }
                        gpu.prepare(1 - p, l as i32)?;
                        match *way {
                            "sync" => {
                                let e = gpu.read_edges(p)?;
                                gpu.launch_expand(
                                    gpu.stream.cu_stream(),
                                    p as i32,
                                    e.div_ceil(TILE),
                                )?;
                            }
                            "over" => {
                                gpu.launch_expand(gpu.stream.cu_stream(), p as i32, over_grid)?
                            }
                            "sized-grid" => drop(grid[p].enqueue(&gpu.stream)?),
                            _ => drop(sized[p].enqueue(&gpu.stream)?),
                        }
                        p = 1 - p;
                    }
                    gpu.prepare(1 - p, levels as i32)?;
                    if let Some(mark) = stream_marks.get(levels) {
                        mark.record(&gpu.stream)?;
                    }
                    &stream_marks
                }
            };
            gpu.stream.synchronize()?;
            // SAFETY: levels + 1 u64 stamps into `stamps`; the stream synchronized above.
            unsafe {
                sys::cuMemcpyDtoH_v2(
                    stamps.as_mut_ptr().cast(),
                    gpu.stamps.ptr(),
                    8 * (levels + 1),
                )
                .result()?
            };
            for d in stamps.windows(2).map(|t| t[1].wrapping_sub(t[0])) {
                ensure!(d < 1 << 40, "level stamps out of order: {stamps:?}");
                clock_step_ns = gcd(clock_step_ns, d);
            }
            if rep >= 2 {
                for l in 0..levels {
                    per_level[w][l].push(if events {
                        marks[l].elapsed_ms(&marks[l + 1])? as f64 * 1e3
                    } else {
                        (stamps[l + 1] - stamps[l]) as f64 * 1e-3
                    });
                }
                whole[w].push(if events {
                    marks[0].elapsed_ms(&marks[levels])? as f64 * 1e3
                } else {
                    (stamps[levels] - stamps[0]) as f64 * 1e-3
                });
            }
            let mut got = vec![0i32; n];
            // SAFETY: n i32 levels at dev.0[2] into `got`; the stream synchronized above.
            unsafe { sys::cuMemcpyDtoH_v2(got.as_mut_ptr().cast(), gpu.dev.0[2], 4 * n).result()? };
            let bad = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            if bad > 0 {
                eprintln!("{way}: {bad} vertices at the wrong level");
            }
            wrong += bad;
        }
    }
    let p50 = |w: usize, l: usize| percentile(&per_level[w][l], 0.5);
    if !events {
        println!("device clock step {clock_step_ns} ns (the gcd of every level's time)");
    }
    for (w, way) in ways.iter().enumerate() {
        let row: Vec<String> = (0..levels).map(|l| format!("{:.2}", p50(w, l))).collect();
        println!(
            "{way:6} per level p50 us: {}  whole BFS p50 {:.1} us",
            row.join(" "),
            percentile(&whole[w], 0.5)
        );
    }
    let at_median = |way: &str| {
        ways.iter()
            .position(|w| *w == way)
            .map(|w| p50(w, median_level))
    };
    let line: Vec<String> = ways
        .iter()
        .map(|w| format!("{w} {:.2}", at_median(w).unwrap()))
        .collect();
    println!(
        "median level {median_level}: {} us; wrong levels {wrong}",
        line.join(", ")
    );
    // Each sized way against host sync and against the better over-launch.
    let best_over = match (at_median("over"), at_median("over-graph")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    // Why a ratio misses, where it does: the step costs measured by the probes
    // (results/2026-12-04/probe-sized-step-hops-1e59097).
    const SWITCH_COST: &str = "the SWITCH's device-side launch of its body costs about 7 us a step on driver 580 (probe-sized-step-hops-1e59097), and the setter about 1 more";
    // The exact-grid form has no SWITCH: its step is a grid setter node and the device-side
    // update of the expand's grid (scripts/probes/sized_grid_probe.cu measures both).
    const GRID_COST: &str = "the exact-grid form's step is its grid setter's kernel node and the device-side update of the expand's grid";
    let cost = |way: &str| {
        if way.starts_with("sized-grid") {
            GRID_COST
        } else {
            SWITCH_COST
        }
    };
    let why_sync = |way: &str| {
        let what = match way {
            "sized" | "sized-grid" => "each level enqueued from the host is its own graph launch, whose device-side start costs more than the round trip it replaces",
            _ => "the sized step's own cost is most of the host round trip it removes",
        };
        format!("{what}; {}", cost(way))
    };
    let why_over = |way: &str| {
        format!("a capped over-launch's idle blocks exit in about 2 us a step, less than the sized step; {}", cost(way))
    };
    let mut targets = vec![Target::new(
        "vertices at a level other than the host BFS's, over every run of every way",
        wrong as f64,
        0.0,
        "<=",
        Some("a vertex's level differs from the host BFS's".into()),
    )];
    for sized_way in ["sized", "sized-graph", "sized-grid", "sized-grid-graph"] {
        let Some(sz) = at_median(sized_way) else {
            continue;
        };
        if let Some(sync) = at_median("sync") {
            targets.push(Target::new(
                format!(
                    "time per level at the median frontier: {sized_way} / host sync + exact launch"
                ),
                sz / sync,
                0.8,
                "<=",
                Some(why_sync(sized_way)),
            ));
        }
        if let Some(over) = best_over {
            targets.push(Target::new(
                format!("time per level at the median frontier: {sized_way} / over-launch + early exit (the better of over and over-graph)"),
                sz / over,
                1.0,
                "<=",
                Some(why_over(sized_way)),
            ));
        }
    }
    // The ratios, after the vertex check.
    for t in &targets[1..] {
        println!("{}: {:.3}", t.name, t.measured);
    }
    let rows: Vec<Way> = ways
        .iter()
        .enumerate()
        .map(|(w, way)| Way {
            way,
            whole_p50_us: round(percentile(&whole[w], 0.5), 1),
            whole_p99_us: round(percentile(&whole[w], 0.99), 1),
            per_level: (0..levels)
                .map(|l| Level {
                    p50_us: round(p50(w, l), 3),
                    p99_us: round(percentile(&per_level[w][l], 0.99), 3),
                })
                .collect(),
        })
        .collect();
    if let Some(p) = args.out {
        let only = args
            .only
            .as_deref()
            .map(|o| format!(" --only {o}"))
            .unwrap_or_default();
        let (scale, repeats, timing) = (args.scale, args.repeats, args.timing);
        let command =
            format!("example-bfs --scale {scale} --repeats {repeats} --timing {timing}{only}");
        let how = if events {
            "the time between consecutive level-start events (stream events; event-record nodes in the graph ways)".to_string()
        } else {
            format!("the time between consecutive level starts read from the device clock (%globaltimer, step {clock_step_ns} ns) by each level's prepare kernel, which every way runs, so timing adds no work; a last prepare after the last level stamps the end")
        };
        let note = format!(
            "R-MAT scale {scale} (Graph500 parameters, edge factor 16, seed 0x5eed, 64 generator chunks), {m} directed edges, root {root}, frontier per level {frontier:?}, median frontier at level {median_level}; the expand sized per level by the device count of the previous frontier's edges (sync: count to the host and exact grid; over: the grid covering every edge, the top class's ({over_grid} blocks of grid-stride tiles); sized: the library's SizedLaunch over classes {classes:?}, two of them built in {sized_build_us:.0} us, enqueued per level; sized-grid: SizedLaunch's exact-grid form, ceil(E / {TILE}) blocks set on the device, two built in {grid_build_us:.0} us, enqueued per level; over-graph, sized-graph and sized-grid-graph: the same, every level recorded once into one CUDA graph, one launch per BFS); per level {how}, p50 over {repeats} BFS runs after 2 warm-ups; every vertex's level checked against a host BFS in every run."
        );
        record::write(&p, &command, &note, &rows, &targets)?;
    }
    ensure!(wrong == 0, "{wrong} vertices at the wrong level");
    Ok(())
}

/// One way's row of the record.
#[derive(Serialize)]
struct Way<'a> {
    way: &'a str,
    whole_p50_us: f64,
    whole_p99_us: f64,
    per_level: Vec<Level>,
}

/// One level's time, p50 and p99 over the runs (µs).
#[derive(Serialize)]
struct Level {
    p50_us: f64,
    p99_us: f64,
}
