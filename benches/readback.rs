//! Criterion benches: readback throughput (elements and bytes per second) of each transport
//! against the oracle copy (the host already knows n: one cuMemcpyDtoHAsync + event), over
//! the sweep of the comparison harness. One iteration: producer kernel, readback, host holds
//! count and data.
//!
//! Group `sized_step` (issue 36): the step after the producer processes its n items, sized
//! four ways: `sync` (the count read to the host, then the exact grid), `over` (the
//! capacity's grid, extra blocks exiting), `sized` (a `SizedLaunch` over the default classes)
//! and `sized-grid` (its exact-grid form: the grid set on the device, 256 items a block); one
//! iteration is producer + step + the host knowing it ran.
//!
//! `cargo bench --bench readback`. Without a GPU it prints why and exits successfully.
use criterion::{BenchmarkId, Criterion, Throughput};
use sized_readback::cudarc::driver::sys::{self, CUdeviceptr, CUresult, CUstream};
use sized_readback::cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use sized_readback::testing::{launch_sized_body, DeviceBuffer, Kernel, Kernels, PinnedBuffer};
use sized_readback::{
    LaunchShape, RawCount, Readback, ReadbackConfig, SizedLaunch, StagedCopy, Transport, WaitMode,
};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Duration;

const M: usize = 1 << 20;
/// Counts of the sweep (f64 elements).
const SWEEP: [usize; 5] = [1, 4096, 65536, M, 16 * M];

fn check(r: CUresult, what: &str) {
    assert!(r == CUresult::CUDA_SUCCESS, "{what} failed: {r:?}");
}

struct Rig {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    produce: Kernel,
    sms: u32,
    d_data: DeviceBuffer,
    d_count: DeviceBuffer,
    h_data: PinnedBuffer,
    done: CudaEvent,
    /// The sized step's body kernel (srb_test_sized_body) and its buffers.
    body: Kernel,
    d_out: DeviceBuffer,
    d_meta: DeviceBuffer,
}

impl Rig {
    fn produce(&self, n: usize) {
        let (mut d, mut c, mut nn, mut cy) =
            (self.d_data.ptr(), self.d_count.ptr(), n as u64, 1u64);
        let mut args = [
            (&mut d as *mut CUdeviceptr).cast::<c_void>(),
            (&mut c as *mut CUdeviceptr).cast(),
            (&mut nn as *mut u64).cast(),
            (&mut cy as *mut u64).cast(),
        ];
        let shape = LaunchShape {
            grid: (n as u64).div_ceil(256).clamp(1, u64::from(self.sms) * 8) as u32,
            block: 256,
            programmatic: false,
        };
        // SAFETY: srb_produce_f64(double*, int32_t*, uint64_t, uint64_t); the buffers hold
        // 16M doubles and one count.
        unsafe { self.produce.launch(self.s(), shape, &mut args) }.expect("producer launch");
    }
    fn s(&self) -> CUstream {
        self.stream.cu_stream()
    }
    /// The step: srb_test_sized_body over n_max threads on `stream`, bounded by the count.
    fn step(&self, stream: CUstream, n_max: u64) -> sized_readback::Result<()> {
        // SAFETY: the test body; d_count holds an i32, d_out M + 64 words, d_meta 4; a live
        // stream of the context.
        unsafe {
            launch_sized_body(
                &self.body,
                stream,
                self.d_count.ptr(),
                n_max,
                0,
                self.d_out.ptr(),
                self.d_meta.ptr(),
            )
        }
    }
    /// Producer, then the step sized by `way`; returns once the host knows the step ran.
    fn sized_step(&self, way: &str, launches: &[Option<SizedLaunch>; 2], n: usize) -> u64 {
        self.produce(n);
        match way {
            "sync" => {
                // SAFETY: 4 bytes of the count into pinned memory, then synchronized.
                let read = unsafe {
                    check(
                        sys::cuMemcpyDtoHAsync_v2(
                            self.h_data.host_ptr().cast(),
                            self.d_count.ptr(),
                            4,
                            self.s(),
                        ),
                        "cuMemcpyDtoHAsync",
                    );
                    self.stream.synchronize().expect("synchronize");
                    *(self.h_data.host_ptr() as *const i32) as u64
                };
                self.step(self.s(), read).expect("step");
            }
            "over" => self.step(self.s(), M as u64).expect("step"),
            _ => {
                let launch = launches[usize::from(way == "sized-grid")]
                    .as_ref()
                    .expect("the way's sized launch was built");
                let t = launch.enqueue(&self.stream).expect("sized enqueue");
                return t.wait().expect("sized wait").count();
            }
        }
        self.done.record(&self.stream).expect("cuEventRecord");
        self.done.synchronize().expect("cuEventSynchronize");
        n as u64
    }
    fn oracle(&self, n: usize) -> f64 {
        self.produce(n);
        // SAFETY: h_data holds 16M pinned doubles, d_data 16M device doubles.
        unsafe {
            check(
                sys::cuMemcpyDtoHAsync_v2(
                    self.h_data.host_ptr().cast(),
                    self.d_data.ptr(),
                    n * 8,
                    self.s(),
                ),
                "cuMemcpyDtoHAsync",
            );
            self.done.record(&self.stream).expect("cuEventRecord");
            self.done.synchronize().expect("cuEventSynchronize");
            let h = self.h_data.host_ptr().cast::<f64>();
            if n > 0 {
                std::ptr::read_volatile(h.add(n - 1))
            } else {
                0.0
            }
        }
    }
    fn readback(&self, rb: &Readback<f64>, n: usize) -> f64 {
        self.produce(n);
        // SAFETY: d_data holds 16M doubles and d_count one i32 of this context, rewritten
        // only by the next producer on the same stream.
        let t = unsafe {
            rb.enqueue_raw(
                &self.stream,
                None,
                self.d_data.ptr(),
                16 * M,
                RawCount::i32(self.d_count.ptr()),
            )
        }
        .expect("enqueue");
        let r = t.wait().expect("readback");
        assert_eq!(r.count(), n, "readback count");
        r.last().copied().unwrap_or(0.0)
    }
}

fn setup() -> Result<Rig, String> {
    let ctx = sized_readback::device::open(0).map_err(|e| e.to_string())?;
    ctx.bind_to_thread().map_err(|e| e.to_string())?;
    let module = Kernels::load(&ctx).map_err(|e| e.to_string())?;
    let produce = module
        .function("srb_produce_f64")
        .map_err(|e| e.to_string())?;
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| e.to_string())? as u32;
    let stream = ctx.new_stream().map_err(|e| e.to_string())?;
    let done = ctx.new_event(None).map_err(|e| e.to_string())?;
    let body = module
        .function("srb_test_sized_body")
        .map_err(|e| e.to_string())?;
    Ok(Rig {
        body,
        d_out: DeviceBuffer::new_zeroed(&ctx, (M + 64) * 8).map_err(|e| e.to_string())?,
        d_meta: DeviceBuffer::new_zeroed(&ctx, 32).map_err(|e| e.to_string())?,
        d_data: DeviceBuffer::new_zeroed(&ctx, 16 * M * 8).map_err(|e| e.to_string())?,
        d_count: DeviceBuffer::new_zeroed(&ctx, 8).map_err(|e| e.to_string())?,
        h_data: PinnedBuffer::new(&ctx, 16 * M * 8, false).map_err(|e| e.to_string())?,
        ctx,
        stream,
        produce,
        sms: sms.max(1),
        done,
    })
}

fn main() {
    let rig = match setup() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("readback bench: no usable CUDA device ({e}); skipping.");
            return;
        }
    };
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(800))
        .configure_from_args();
    // "staged" copies the whole slot (as it measured before the sized copy existed),
    // "staged_sized" what the count needs (a driver of CUDA 12.8+; elsewhere it is the whole
    // slot again, as StagedCopy::Auto falls back).
    let transports = [
        (
            "mapped_trailer",
            Transport::Mapped,
            WaitMode::Trailer,
            StagedCopy::Auto,
        ),
        (
            "mapped_event",
            Transport::Mapped,
            WaitMode::Event,
            StagedCopy::Auto,
        ),
        (
            "staged",
            Transport::Staged,
            WaitMode::Event,
            StagedCopy::Whole,
        ),
        (
            "staged_sized",
            Transport::Staged,
            WaitMode::Event,
            StagedCopy::Auto,
        ),
    ];
    for cap in [M, 16 * M] {
        let rbs: Vec<(&str, Readback<f64>)> = transports
            .iter()
            .map(|&(name, t, w, copy)| {
                let cfg = ReadbackConfig::new(cap)
                    .slots(2)
                    .transport(t)
                    .wait(w)
                    .staged_copy(copy);
                (
                    name,
                    Readback::<f64>::with_config(&rig.ctx, cfg).expect("readback"),
                )
            })
            .collect();
        let mut g = c.benchmark_group(format!("readback_cap_{}M", cap / M));
        for &n in SWEEP
            .iter()
            .filter(|&&n| if cap == M { n <= M } else { n > M })
        {
            g.throughput(Throughput::ElementsAndBytes {
                elements: n as u64,
                bytes: (n * 8) as u64,
            });
            g.bench_with_input(BenchmarkId::new("oracle", n), &n, |b, &n| {
                b.iter(|| rig.oracle(n))
            });
            for (name, rb) in &rbs {
                g.bench_with_input(BenchmarkId::new(*name, n), &n, |b, &n| {
                    b.iter(|| rig.readback(rb, n))
                });
            }
        }
        g.finish();
    }
    // The sized step, where the driver has SWITCH conditionals set from a kernel (CUDA 12.8+):
    // over the default classes, and in the exact-grid form where the driver takes it.
    let count = RawCount::i32(rig.d_count.ptr());
    let record =
        |class: &sized_readback::SizeClass<'_>| rig.step(class.stream().cu_stream(), class.n_max());
    let built = SizedLaunch::builder(count, M as u64).build(&rig.ctx, record);
    match built {
        Ok(sized) => {
            let grid = SizedLaunch::builder(count, M as u64)
                .exact_grid(sized_readback::testing::SIZED_BODY_BLOCK as u64)
                .build(&rig.ctx, record)
                .inspect_err(|e| eprintln!("readback bench: sized-grid skipped: {e}"))
                .ok();
            let launches = [Some(sized), grid];
            let mut g = c.benchmark_group("sized_step_cap_1M");
            for n in [1usize, 4096, 65536, M] {
                for way in ["sync", "over", "sized", "sized-grid"] {
                    if way == "sized-grid" && launches[1].is_none() {
                        continue;
                    }
                    g.bench_with_input(BenchmarkId::new(way, n), &n, |b, &n| {
                        b.iter(|| rig.sized_step(way, &launches, n))
                    });
                }
            }
            g.finish();
        }
        Err(e) => eprintln!("readback bench: sized_step skipped: {e}"),
    }
    c.final_summary();
}
