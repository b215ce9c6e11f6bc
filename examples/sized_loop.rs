//! The seed's loop with its next step sized by the device count: each of `--steps` steps a
//! producer writes a count (log-uniform in [1, capacity], a new one every step) and the next
//! kernel processes that many items. Three ways of sizing that kernel, timed in one run:
//!
//! - `sync`: the count copied to pinned memory, the stream synchronized, the kernel launched
//!   with the exact grid (what `.item()` or `cudaStreamSynchronize` code does);
//! - `over`: the kernel launched with the capacity's grid, its extra blocks exiting at once;
//! - `sized`: a [`SizedLaunch`] whose bodies hold the kernel at each class's grid: the device
//!   picks the class, the host never waits inside the loop.
//!
//! Every step's output is checked after the loop (the count's items written, the rest not).
//! Writes a JSON record (`--out`) with p50 and p99 per step of each way over `--repeats` loops,
//! and the issue's ratios as targets (issue 36: sized <= 0.8x sync, <= 1.0x over).
//!
//! ```text
//! cargo run --release --example sized_loop -- --out results/mine/sized_loop.json
//! ```
use anyhow::{ensure, Context, Result};
use clap::Parser;
use cudarc::driver::sys;
use sized_readback::testing::{launch_sized_body, Kernel, Kernels, PinnedBuffer};
use sized_readback::{LaunchShape, RawCount, SizedLaunch};
use std::ffi::c_void;
use std::time::Instant;

#[derive(Parser)]
struct Args {
    /// Steps per timed loop.
    #[arg(long, default_value_t = 64)]
    steps: usize,
    /// Timed loops per way (after 3 warm-up loops).
    #[arg(long, default_value_t = 30)]
    repeats: usize,
    /// The largest count (and the over-launch's grid).
    #[arg(long, default_value_t = 1 << 20)]
    capacity: u64,
    /// Where to write the JSON record.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

struct Bench {
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    count: cudarc::driver::CudaSlice<i32>,
    out: cudarc::driver::CudaSlice<u64>,
    meta: cudarc::driver::CudaSlice<u64>,
    store: Kernel,
    body: Kernel,
    host_count: PinnedBuffer,
}

impl Bench {
    fn ptrs(&self) -> (u64, u64, u64) {
        use cudarc::driver::DevicePtr;
        (
            self.count.device_ptr(&self.stream).0,
            self.out.device_ptr(&self.stream).0,
            self.meta.device_ptr(&self.stream).0,
        )
    }
    /// The producer: srb_store_count(count, kind 0 (i32), n).
    fn produce(&self, n: u64) -> Result<()> {
        let (mut c, _, _) = self.ptrs();
        let (mut kind, mut v) = (0i32, n);
        let mut args: [*mut c_void; 3] = [
            (&mut c as *mut u64).cast(),
            (&mut kind as *mut i32).cast(),
            (&mut v as *mut u64).cast(),
        ];
        let shape = LaunchShape {
            grid: 1,
            block: 32,
            programmatic: false,
        };
        // SAFETY: srb_store_count(void*, int, uint64_t); the count buffer holds one i32.
        unsafe {
            self.store
                .launch(self.stream.cu_stream(), shape, &mut args)?
        };
        Ok(())
    }
    /// srb_test_sized_body with n_max threads, on `stream`.
    fn body_on(&self, stream: sys::CUstream, n_max: u64, class: u32) -> sized_readback::Result<()> {
        let (c, o, m) = self.ptrs();
        // SAFETY: the test body; out holds capacity + 64 words, meta 4; a live stream of the
        // context.
        unsafe { launch_sized_body(&self.body, stream, c, n_max, class, o, m) }
    }

    /// The sync way's read of the count: D2H into pinned memory, then the stream synchronized.
    fn read_count(&self) -> Result<u64> {
        let (c, _, _) = self.ptrs();
        // SAFETY: 4 bytes from the count to pinned memory, on a live stream; synchronized next.
        unsafe {
            sys::cuMemcpyDtoHAsync_v2(
                self.host_count.host_ptr().cast(),
                c,
                4,
                self.stream.cu_stream(),
            )
            .result()?;
        }
        self.stream.synchronize()?;
        // SAFETY: the copy above completed.
        Ok(unsafe { *(self.host_count.host_ptr() as *const i32) } as u64)
    }
}

/// Counts log-uniform in [1, capacity], a fixed sequence.
fn counts(steps: usize, capacity: u64) -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..steps)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            ((capacity as f64).powf(u).round() as u64).clamp(1, capacity)
        })
        .collect()
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() -> Result<()> {
    let args = Args::parse();
    let ctx = sized_readback::device::open(0)?;
    let stream = ctx.new_stream()?;
    let kernels = Kernels::load(&ctx)?;
    let cap = args.capacity;
    let mut b = Bench {
        count: stream.alloc_zeros::<i32>(1)?,
        out: stream.alloc_zeros::<u64>(cap as usize + 64)?,
        meta: stream.alloc_zeros::<u64>(4)?,
        store: kernels.function("srb_store_count")?,
        body: kernels.function("srb_test_sized_body")?,
        host_count: PinnedBuffer::new(&ctx, 64, false)?,
        stream,
    };
    let (count_ptr, _, _) = b.ptrs();
    let t0 = Instant::now();
    let launch = SizedLaunch::builder(RawCount::i32(count_ptr), cap).build(&ctx, |c| {
        b.body_on(c.stream().cu_stream(), c.n_max(), c.index() as u32)
    })?;
    let build_us = t0.elapsed().as_secs_f64() * 1e6;
    let seq = counts(args.steps, cap);
    let mut median_count = seq.clone();
    median_count.sort_unstable();
    let median_count = median_count[seq.len() / 2];

    let ways = ["sync", "over", "sized"];
    let mut per_step: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    let s = b.stream.cu_stream();
    for rep in 0..args.repeats + 3 {
        for (w, name) in ways.iter().enumerate() {
            b.stream.synchronize()?;
            let t = Instant::now();
            for &n in &seq {
                b.produce(n)?;
                match *name {
                    "sync" => {
                        let n = b.read_count()?;
                        b.body_on(s, n, 0)?;
                    }
                    "over" => b.body_on(s, cap, 0)?,
                    _ => drop(launch.enqueue(&b.stream)?),
                }
            }
            b.stream.synchronize()?;
            let us = t.elapsed().as_secs_f64() * 1e6 / seq.len() as f64;
            if rep >= 3 {
                per_step[w].push(us);
            }
        }
    }
    // Correctness, once per way: one step of the median count on a zeroed output, its items
    // written and none past them (the over-launch's extra blocks exit, the sized body bounds
    // its grid by the device count).
    let n = median_count as usize;
    for name in ways {
        b.stream.memset_zeros(&mut b.out)?;
        b.produce(n as u64)?;
        match name {
            "sync" => {
                let m = b.read_count()?;
                b.body_on(s, m, 0)?;
            }
            "over" => b.body_on(s, cap, 0)?,
            _ => {
                let done = launch.enqueue(&b.stream)?.wait()?;
                ensure!(
                    done.count() == n as u64,
                    "sized read {} not {n}",
                    done.count()
                );
            }
        }
        let got = b.stream.clone_dtoh(&b.out)?;
        ensure!(
            got[..n]
                .iter()
                .enumerate()
                .all(|(i, &v)| v == 2 * i as u64 + 1)
                && got[n] == 0,
            "{name}: a step of {n} items wrote the wrong items"
        );
    }

    let mut rows = Vec::new();
    let mut p50 = Vec::new();
    for (w, name) in ways.iter().enumerate() {
        let mut v = per_step[w].clone();
        v.sort_by(f64::total_cmp);
        let (a, z) = (percentile(&v, 0.5), percentile(&v, 0.99));
        p50.push(a);
        println!("{name:6} per step: p50 {a:8.2} us  p99 {z:8.2} us");
        rows.push(format!(
            r#"{{"way": "{name}", "p50_us": {a:.3}, "p99_us": {z:.3}}}"#
        ));
    }
    let (sync, over, sized) = (p50[0], p50[1], p50[2]);
    println!(
        "sized / sync {:.3}, sized / over {:.3}; build {:.0} us, {} classes",
        sized / sync,
        sized / over,
        build_us,
        launch.classes().len()
    );
    let target = |name: &str, measured: f64, limit: f64| {
        format!(
            r#"{{"name": "{name}", "measured": {measured:.3}, "limit": {limit}, "comparison": "<=", "holds": {}, "why": null}}"#,
            measured <= limit
        )
    };
    let record = format!(
        r#"{{
 "date": "{date}",
 "commit": "{commit}",
 "machine": "{machine}",
 "command": "example-sized_loop --steps {steps} --repeats {repeats} --capacity {cap}",
 "note": "The seed's loop with its next kernel sized by the device count: per step a producer writes a count log-uniform in [1, {cap}] (median {median_count}) and a kernel writes that many items. sync: count to pinned memory, stream synchronized, exact grid; over: the capacity's grid with early exit; sized: a SizedLaunch over {classes} classes (built in {build_us:.0} us). Per-step time over loops of {steps} steps, p50 and p99 of {repeats} loops after 3 warm-ups.",
 "ways": [{rows}],
 "targets": [{t1}, {t2}]
}}
"#,
        date = std::env::var("SRB_DATE").unwrap_or_default(),
        commit = std::env::var("SRB_COMMIT").unwrap_or_else(|_| "unknown".into()),
        machine = std::env::var("SRB_MACHINE").unwrap_or_default(),
        steps = args.steps,
        repeats = args.repeats,
        classes = launch.classes().len(),
        rows = rows.join(", "),
        t1 = target("seed loop, next kernel sized by the device count: sized / host sync + exact launch, p50 per step", sized / sync, 0.8),
        t2 = target("seed loop, next kernel sized by the device count: sized / over-launch + early exit, p50 per step", sized / over, 1.0),
    );
    if let Some(p) = args.out {
        std::fs::write(&p, record).with_context(|| p.display().to_string())?;
    }
    Ok(())
}
