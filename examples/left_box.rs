//! Particles leaving a periodic box, read back without a count in device memory: each step a
//! push kernel (compiled at run time with NVRTC against the crate's append header) moves 1M
//! particles, appends the ones that crossed the box's boundary (position, velocity, id) straight
//! into a pinned slot, and wraps them back in. The host checks every step against a model of
//! the same arithmetic.
//!
//! ```text
//! cargo run --release --example left_box                 # 1M particles, 20 steps
//! cargo run --release --example left_box -- --steps 200 --particles 4000000
//! ```
use anyhow::{ensure, Context, Result};
use clap::Parser;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use sized_readback::testing::pattern;
use sized_readback::{AppendReadback, ColumnSchema, ReadbackConfig};

/// The kernel, compiled with `sized_readback::append::compile`, which hands NVRTC the header.
const KERNEL: &str = r#"
#include <sized_readback/append.cuh>
struct P3 { double x, y, z; };
__device__ double wrap(double a) { return a - floor(a); }
extern "C" __global__ void push(srb_append_desc d, P3* x, const P3* v, unsigned long long n, double dt) {
    using Append = srb::BlockAppend<256, P3, P3, long long>;
    __shared__ Append::TempStorage tmp;
    Append app(tmp, d);                                   // every block, every thread
    for (unsigned long long b = blockIdx.x * 256ull; b < n; b += gridDim.x * 256ull) {
        unsigned long long i = b + threadIdx.x;
        P3 p = {0, 0, 0}, u = {0, 0, 0};
        bool left = false;
        if (i < n) {
            p = x[i]; u = v[i];
            p.x += u.x * dt; p.y += u.y * dt; p.z += u.z * dt;
            left = p.x < 0 || p.x >= 1 || p.y < 0 || p.y >= 1 || p.z < 0 || p.z >= 1;
            x[i] = P3{wrap(p.x), wrap(p.y), wrap(p.z)};
        }
        app.append(left, p, u, (long long)i);            // rows in no particular order
    }
    app.finish();                                         // count and trailer, last block
}
"#;

/// Moves particles through a periodic unit box and reads back the ones that left each step.
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// Particles.
    #[arg(long, default_value_t = 1 << 20)]
    particles: usize,
    /// Steps.
    #[arg(long, default_value_t = 20)]
    steps: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

fn unit(seed: u64) -> f64 {
    (pattern::mix(seed) >> 11) as f64 / (1u64 << 53) as f64
}

fn main() -> Result<()> {
    let args = Args::parse();
    let ctx = sized_readback::device::open(args.device).context("opening the CUDA device")?;
    let stream = ctx.new_stream()?;
    let push = ctx
        // NVRTC, straight to machine code for this device; fmad off so that the host model's
        // `x + v * dt` rounds the same way.
        .load_module(sized_readback::append::compile(
            &ctx,
            KERNEL,
            &["--fmad=false"],
        )?)?
        .load_function("push")?;

    let n = args.particles;
    let mut x: Vec<[f64; 3]> = (0..n as u64)
        .map(|i| [unit(3 * i), unit(3 * i + 1), unit(3 * i + 2)])
        .collect();
    let v: Vec<[f64; 3]> = (0..n as u64)
        .map(|i| [0, 1, 2].map(|c| unit((1 << 40) + 3 * i + c) - 0.5))
        .collect();
    let d_x = stream.clone_htod(&x.concat())?;
    let d_v = stream.clone_htod(&v.concat())?;
    let dt = 0.02f64;

    let mut schema = ColumnSchema::new();
    let pos = schema.column::<[f64; 3]>();
    let vel = schema.column::<[f64; 3]>();
    let id = schema.column::<i64>();
    let rb = AppendReadback::new(&ctx, &schema, ReadbackConfig::new(n / 16 + 1024))?;
    let (blocks, nn) = ((n as u32).div_ceil(256).min(8192), n as u64);
    for step in 0..args.steps {
        let ticket = rb.append(&stream, |desc| {
            let mut b = stream.launch_builder(&push);
            b.arg(desc).arg(&d_x).arg(&d_v).arg(&nn).arg(&dt);
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (256, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: push(srb_append_desc, P3*, const P3*, unsigned long long, double) with
            // 256 threads per block as its BlockAppend; x and v hold n particles.
            unsafe { b.launch(cfg) }.map(drop)
        })?;
        // The host model of the step, while the kernel runs.
        let mut want: Vec<(i64, [f64; 3])> = Vec::new();
        for (i, (p, u)) in x.iter_mut().zip(&v).enumerate() {
            let q = [0, 1, 2].map(|c| p[c] + u[c] * dt);
            if q.iter().any(|&c| !(0.0..1.0).contains(&c)) {
                want.push((i as i64, q));
            }
            *p = q.map(|c| c - c.floor());
        }
        let out = ticket.wait()?;
        let mut got: Vec<(i64, [f64; 3])> = out
            .column(id)
            .iter()
            .zip(out.column(pos))
            .map(|(&i, &p)| (i, p))
            .collect();
        got.sort_by_key(|r| r.0);
        ensure!(
            got.len() == want.len() && got.iter().zip(&want).all(|(a, b)| a == b),
            "step {step}: {} particles left on the GPU, {} in the host model",
            got.len(),
            want.len()
        );
        ensure!(
            out.column(id)
                .iter()
                .zip(out.column(vel))
                .all(|(&i, u)| *u == v[i as usize]),
            "step {step}: a velocity differs"
        );
        println!(
            "step {step}: {} of {n} particles left the box (host model agrees)",
            out.count()
        );
    }
    Ok(())
}
