//! Runs every section of the comparison on one GPU, in order: the latency sweep, the grid
//! probe, the enqueue cost breakdown, the realistic producer, the sized step, the seed's loop
//! and, last, the seed's own callback (it may leave its stream stuck).
use crate::data::{self, LoopResult, LoopTrace, Measurements, Point, Samples, SizedStep, M};
use crate::plan::{Args, CAPACITIES};
use crate::schedule::{self, Schedule};
use crate::sweep::{self, Approach, Rig};
use crate::{costs, machine, pipeline, seed_callback, select, worker};
use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use sized_readback::cudarc::driver::CudaContext;
use sized_readback::testing::Kernels;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every section, as `args` plans them, on the current context `ctx`.
pub fn run(ctx: &Arc<CudaContext>, args: &Args) -> Result<Measurements> {
    // SAFETY: the harness orders all of its work itself (one stream per section, explicit
    // events in the seed loop); buffers allocated from here on carry no cudarc events, so the
    // crate's safe enqueue is measured without cudarc's per-buffer event records.
    unsafe { ctx.disable_event_tracking() };
    let machine = machine::describe(ctx)?;
    eprintln!(
        "compare: {} (sm_{}), {} SMs, driver API {}, PCIe {}",
        machine.gpu,
        machine.compute_capability.replace('.', ""),
        machine.multiprocessors,
        machine.cuda_driver_api,
        machine.pcie_link.as_deref().unwrap_or("?")
    );
    let module = Kernels::load(ctx)?;
    let sms = machine.multiprocessors.max(1) as u32;
    let produce = module.function("hx_produce_f64")?;
    let produce_bench = module.function("srb_produce_f64")?;
    let mut rig = Rig::new(ctx, produce, produce_bench, sms, 16 * M, &CAPACITIES)?;
    let sweep = latency_sweep(&mut rig, args)?;

    // Evidence for the pack kernel's launch shape: the mapped pack alone, by grid cap.
    eprintln!("compare: mapped grid probe");
    let mut probe = Vec::new();
    for (n, grids) in args.probe_points(sms) {
        probe.extend(sweep::grid_probe(
            ctx,
            &mut rig,
            n,
            &grids,
            args.probe_reps(n),
        )?);
    }
    let shape16 = format!(
        "{:?}",
        sized_readback::Readback::<f64>::new(ctx, 16 * M)?
            .info()
            .launch_shape
    );

    eprintln!("compare: enqueue cost breakdown");
    let floor = module.function("hx_param408_kernel")?;
    let costs = costs::measure(&mut rig, M, args.cost_reps(), &floor)?;

    eprintln!("compare: realistic producer");
    let (select_dev, select_append) = (
        module.function("hx_select_dev")?,
        module.function("hx_select_append")?,
    );
    let mut srig = select::SelectRig::new(ctx, select_dev, select_append, &CAPACITIES)?;
    let reps_at = |n: u64| args.reps_at(n as usize);
    let realistic = select::sweep(
        &mut srig,
        &args.realistic_points(),
        args.schedule(),
        &reps_at,
    )?;
    let append_cost = srig.append_host_cost(M, args.append_reps())?;
    drop(srig);

    eprintln!("compare: sized step");
    let sized_step = sized_step(ctx, args)?;

    eprintln!("compare: seed loop");
    let (busy, busy_append) = (
        module.function("hx_busy_produce")?,
        module.function("hx_busy_append")?,
    );
    let mut lp = pipeline::Loop::new(ctx, busy, busy_append)?;
    let seed_loop = seed_loop(&mut lp, ctx, args)?;
    let seed_trace = seed_trace(&mut lp, ctx)?;

    eprintln!("compare: the seed's callback");
    let seed_callback = seed_callback::measure(&mut rig, 4096, 10)?;
    if seed_callback.hung {
        // The stream the seed's callback ran on never finished: skip the rig's destructors.
        std::mem::forget(rig);
    }
    Ok(Measurements {
        machine,
        reps: args.reps(),
        sweep,
        realistic,
        append_cost,
        probe,
        shape16,
        costs,
        seed_loop,
        seed_trace,
        seed_callback,
        sized_step,
    })
}

/// The seed's loop with its next step sized four ways, at each of the plan's capacities;
/// nothing where the driver cannot build a sized launch.
fn sized_step(ctx: &Arc<CudaContext>, args: &Args) -> Result<Vec<SizedStep>> {
    let mut out = Vec::new();
    for cap in Args::SIZED_STEP_CAPACITIES {
        let run = match sized_readback::testing::sized_loop(ctx, cap, 64, args.sized_step_repeats())
        {
            Ok(run) => run,
            Err(sized_readback::Error::SizedLaunchUnavailable { reason }) => {
                eprintln!("compare: sized step skipped: {reason}");
                break;
            }
            Err(e) => return Err(e.into()),
        };
        out.push(SizedStep {
            capacity: run.capacity,
            steps: run.steps,
            repeats: run.repeats,
            median_count: run.median_count,
            classes: run.classes,
            p50_us: run.ways.iter().map(|w| (w.way, w.p50_us)).collect(),
            p99_us: run.ways.iter().map(|w| (w.way, w.p99_us)).collect(),
            wrong: run.wrong,
        });
    }
    Ok(out)
}

/// The latency sweep: every approach at every point of the plan, a settle cycle and a timed
/// one per approach and repetition, in the order of [`schedule`], after three untimed
/// repetitions at every point.
fn latency_sweep(rig: &mut Rig, args: &Args) -> Result<Vec<Point>> {
    let plan = args.sweep_points();
    for (i, &(cap, n)) in plan.iter().enumerate() {
        let mut junk: BTreeMap<Approach, Samples> = BTreeMap::new();
        for k in 0..3 {
            repetition(
                rig,
                args.schedule(),
                (cap, n),
                schedule::seed(i, k),
                k,
                &mut junk,
            )?;
        }
    }
    let total: u64 = plan
        .iter()
        .map(|&(_, n)| (args.reps_at(n) * Approach::ALL.len()) as u64)
        .sum();
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} cycles, eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut points = Vec::new();
    for (i, &(cap, n)) in plan.iter().enumerate() {
        bar.set_message(format!("{}/{}", data::size(cap), data::size(n)));
        let mut samples: BTreeMap<Approach, Samples> = BTreeMap::new();
        for k in 0..args.reps_at(n) as u64 {
            // Seeds past the warm-up's, so no repetition replays a warm-up's order.
            let seed = schedule::seed(i, 3 + k);
            repetition(rig, args.schedule(), (cap, n), seed, k, &mut samples)?;
            bar.inc(Approach::ALL.len() as u64);
        }
        let approaches = samples
            .iter()
            .map(|(a, s)| (a.name(), s.summarize(n)))
            .collect();
        points.push(Point {
            capacity: cap,
            n,
            approaches,
        });
    }
    bar.finish_and_clear();
    rig.drain()?;
    Ok(points)
}

/// Repetition `k` at (`cap`, `n`): every approach once, in `sched`'s order for `seed`, its
/// settle cycles (the other count of the n / n - 1 alternation, so a stale size stays stale)
/// then a timed one into `samples`. A failed approach counts a wrong cycle, its first error
/// kept; one the rig cannot run here ([`Rig::unavailable`]) runs no cycle and keeps the
/// reason as its error (no samples: the targets that need it are left out).
fn repetition(
    rig: &mut Rig,
    sched: Schedule,
    (cap, n): (usize, usize),
    seed: u64,
    k: u64,
    samples: &mut BTreeMap<Approach, Samples>,
) -> Result<()> {
    for i in sched.order(Approach::ALL.len(), seed) {
        let a = Approach::ALL[i];
        let s = samples.entry(a).or_default();
        if let Some(why) = rig.unavailable(a, cap) {
            // Skipped on this machine: no cycle, the reason kept as the approach's error.
            s.error.get_or_insert(why);
            continue;
        }
        let pair = (0..sched.settle)
            .try_for_each(|_| rig.cycle(a, a.count_at(n, k + 1), cap, None))
            .and_then(|()| rig.cycle(a, a.count_at(n, k), cap, Some(&mut *s)));
        if let Err(e) = pair {
            s.error.get_or_insert(format!("{e:#}"));
            s.checked += 1;
            rig.drain()?;
        }
    }
    Ok(())
}

/// A few cycles of the seed's loop per traced strategy (200 µs kernels, 5 µs of CPU work), after
/// a warm-up: the timeline picture's source, not a measurement of rates.
fn seed_trace(lp: &mut pipeline::Loop, ctx: &Arc<CudaContext>) -> Result<Vec<LoopTrace>> {
    let mut worker = worker::Worker::start(ctx.clone());
    let mut out = Vec::new();
    for a in pipeline::Loop::TRACED {
        lp.trace(a, 200.0, 5.0, 8, &mut worker)?; // warm-up
        out.push(lp.trace(a, 200.0, 5.0, 6, &mut worker)?);
    }
    Ok(out)
}

/// The seed's loop at each kernel/CPU ratio: a warm-up of every approach, then rounds in which
/// the approaches take turns; each approach's rounds summed.
fn seed_loop(
    lp: &mut pipeline::Loop,
    ctx: &Arc<CudaContext>,
    args: &Args,
) -> Result<Vec<LoopResult>> {
    let mut worker = worker::Worker::start(ctx.clone());
    let rounds = Args::LOOP_ROUNDS;
    let mut out = Vec::new();
    for &(kus, cus) in &Args::LOOP_RATIOS {
        let cycles = args.loop_cycles(kus);
        for a in lp.approaches() {
            lp.run(a, kus, cus, 20, &mut worker)?; // warm-up
        }
        let mut acc: BTreeMap<&'static str, LoopResult> = BTreeMap::new();
        for _ in 0..rounds {
            for a in lp.approaches() {
                let r = lp.run(a, kus, cus, cycles / rounds, &mut worker)?;
                let e = acc.entry(r.approach).or_insert(LoopResult {
                    cycles: 0,
                    seconds: 0.0,
                    correct: 0,
                    cycles_per_s: 0.0,
                    ..r.clone()
                });
                e.cycles += r.cycles;
                e.seconds += r.seconds;
                e.correct += r.correct;
                e.cycles_per_s = e.cycles as f64 / e.seconds;
            }
        }
        out.extend(
            pipeline::APPROACHES
                .iter()
                .filter_map(|a| acc.remove(a.name())),
        );
    }
    Ok(out)
}
