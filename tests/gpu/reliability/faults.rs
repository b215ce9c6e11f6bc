//! Device faults, each in a child process (a fault poisons the whole context): on every path
//! (pack readbacks on both transports and wait modes, other streams, drops, a second context;
//! append, bucket pack and bucketed append, graph replay) the wait returns the CUDA error
//! within its timeout, never hangs, never returns wrong data, and every drop returns.
use super::{busy, ctx, fault, FAULTS_SURVIVED};
use anyhow::{bail, ensure, Context as _, Result};
use cudarc::driver::{CudaContext, CudaStream, DevicePtr};
use sized_readback::testing::DeviceBuffer;
use sized_readback::testing::Kernels as Module;
use sized_readback::LaunchShape;
use sized_readback::{
    AppendDesc, AppendReadback, BucketReadback, ColumnSchema, ColumnSource, Error, GraphReadback,
    RawCount, Readback, ReadbackConfig, Transport, WaitMode,
};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use test_support::{child, Test, TRANSPORTS};

pub const TESTS: &[Test] = test_support::tests![
    fault_same_stream_wait_errors,
    fault_spreads_to_other_streams_of_the_context,
    fault_then_drop_in_flight,
    fault_and_a_second_context,
    fault_append_wait_errors,
    fault_bucket_wait_errors,
    fault_graph_replay_wait_errors,
    fault_then_every_call_errs,
];

/// The variable that makes the test binary a child running one scenario (the faults here and
/// the lifecycle's device reset).
pub const SCENARIO_ENV: &str = "SRB_RELIABILITY_SCENARIO";

/// If this process is a child (`SRB_RELIABILITY_SCENARIO` set), runs its scenario and exits.
pub fn run_scenario_if_child() {
    if let Ok(name) = std::env::var(SCENARIO_ENV) {
        scenario_main(&name);
    }
}

fn fault_same_stream_wait_errors() -> Result<()> {
    faults(&[
        "fault_mapped_trailer",
        "fault_mapped_event",
        "fault_staged_event",
        "fault_staged_timeout",
    ])
}

fn fault_spreads_to_other_streams_of_the_context() -> Result<()> {
    faults(&["fault_other_stream"])
}

fn fault_then_drop_in_flight() -> Result<()> {
    faults(&["fault_drop_in_flight"])
}

fn fault_and_a_second_context() -> Result<()> {
    faults(&["fault_other_context"])
}

fn fault_append_wait_errors() -> Result<()> {
    faults(&["fault_append_producer", "fault_append_kernel"])
}

fn fault_bucket_wait_errors() -> Result<()> {
    faults(&["fault_bucket_pack", "fault_bucket_append"])
}

fn fault_graph_replay_wait_errors() -> Result<()> {
    faults(&["fault_graph_replay"])
}

fn fault_then_every_call_errs() -> Result<()> {
    faults(&["fault_every_call"])
}

fn scenario_main(name: &str) -> ! {
    child::scenario_exit(name, || match name {
        "fault_mapped_trailer" => fault_then_wait(Transport::Mapped, WaitMode::Trailer, false),
        "fault_mapped_event" => fault_then_wait(Transport::Mapped, WaitMode::Event, true),
        "fault_staged_event" => fault_then_wait(Transport::Staged, WaitMode::Event, false),
        "fault_staged_timeout" => fault_then_wait(Transport::Staged, WaitMode::Event, true),
        "fault_other_stream" => fault_other_stream(),
        "fault_drop_in_flight" => fault_drop_in_flight(),
        "fault_other_context" => fault_other_context(),
        "fault_append_producer" => fault_append(AppendFault::Producer),
        "fault_append_kernel" => fault_append(AppendFault::Kernel),
        "fault_bucket_pack" => fault_bucket_pack(),
        "fault_bucket_append" => fault_bucket_append(),
        "fault_graph_replay" => fault_graph_replay(),
        "fault_every_call" => fault_every_call(),
        "device_reset_then_build" => super::lifecycle::device_reset_then_build(),
        other => Err(anyhow::anyhow!("unknown scenario {other}")),
    })
}

fn is_cuda_err(e: &Error) -> bool {
    matches!(e, Error::Cuda { .. })
}

/// A producer that faults before the pack on the same stream: the wait returns the device
/// error (no hang, no timeout), later work in the context fails, and dropping everything
/// returns.
fn fault_then_wait(t: Transport, w: WaitMode, with_timeout: bool) -> Result<()> {
    let ctx = sized_readback::device::open(0)?;
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[6i64; 32])?;
    let cnt = stream.clone_htod(&[32u32])?;
    let rb = Readback::<i64>::with_config(&ctx, ReadbackConfig::new(32).transport(t).wait(w))?;
    ensure!(
        rb.enqueue(&stream, &data, &cnt)?.wait()?.as_slice() == [6; 32],
        "healthy first"
    );
    fault(&module, &stream)?;
    let t0 = Instant::now();
    let tk = rb.enqueue(&stream, &data, &cnt);
    match &tk {
        Err(e) if is_cuda_err(e) => println!("  {t:?}/{w:?}: enqueue after the fault failed: {e}"),
        Err(e) => bail!("{t:?}/{w:?}: enqueue after the fault: unexpected {e}"),
        Ok(tk) => {
            let r = if with_timeout {
                tk.wait_timeout(Duration::from_secs(20))
            } else {
                tk.wait()
            };
            match r.map(|o| o.count()) {
                Err(e) if is_cuda_err(&e) => println!(
                    "  {t:?}/{w:?}: wait{} returned after {:?}: {e}",
                    if with_timeout { "_timeout(20 s)" } else { "" },
                    t0.elapsed()
                ),
                Err(e) => bail!("{t:?}/{w:?}: wait gave {e}, expected the device error"),
                Ok(n) => bail!("{t:?}/{w:?}: wait succeeded ({n}) after a fault"),
            }
        }
    }
    // Sticky: new work in the context fails too (at enqueue or at its wait).
    let again = rb
        .enqueue(&stream, &data, &cnt)
        .and_then(|t| t.wait().map(|o| o.count()));
    match again {
        Err(e) if is_cuda_err(&e) => println!("  later readback in the context: {e}"),
        Err(e) => bail!("later readback: unexpected {e}"),
        Ok(n) => bail!("later readback succeeded ({n}) in a faulted context"),
    }
    let t1 = Instant::now();
    drop(tk);
    drop(rb);
    drop(data);
    drop(cnt);
    drop(stream);
    println!("  dropping everything took {:?}", t1.elapsed());
    Ok(())
}

/// After a device fault the context is lost (CUDA's sticky error): every call of the API on it
/// returns a typed error, within the wait's bound, and none panics or hangs; only what reads
/// host state (`info`, a ticket's `seq`) still answers. What a user does next is in
/// RELIABILITY.md: drop everything of the context, then make a new process or reset the device.
fn fault_every_call() -> Result<()> {
    let ctx = sized_readback::device::open(0)?;
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[4u64; 64])?;
    let cnt = stream.clone_htod(&[64u32])?;
    let auto = ReadbackConfig::new(64).transport(Transport::Auto);
    let rb = Readback::<u64>::with_config(&ctx, auto.clone())?;
    let staged =
        Readback::<u64>::with_config(&ctx, ReadbackConfig::new(64).transport(Transport::Staged))?;
    let held = rb.enqueue(&stream, &data, &cnt)?;
    ensure!(held.wait()?.count() == 64, "healthy first");
    let mut schema = ColumnSchema::new();
    schema.column::<u64>();
    let graph = GraphReadback::new(&ctx, &schema, ReadbackConfig::new(64))?;
    fault(&module, &stream)?;
    // The wait that meets the fault first, on a readback enqueued behind it.
    let t0 = Instant::now();
    let r = staged
        .enqueue(&stream, &data, &cnt)
        .and_then(|t| t.wait_timeout(FAULT_WAIT).map(|o| o.count()));
    expect_device_error("the first wait", t0, r)?;
    let typed = |what: &str, r: sized_readback::Result<()>| -> Result<()> {
        let t0 = Instant::now();
        match r {
            Err(e) => {
                println!("  {what}: {e}");
                ensure!(t0.elapsed() < FAULT_WAIT, "{what} took {:?}", t0.elapsed());
                Ok(())
            }
            Ok(()) => bail!("{what} succeeded on a lost context"),
        }
    };
    let cfg = ReadbackConfig::new(64);
    typed("Readback::new", Readback::<u64>::new(&ctx, 64).map(drop))?;
    typed(
        "Readback::with_config (auto)",
        Readback::<u64>::with_config(&ctx, auto).map(drop),
    )?;
    typed(
        "AppendReadback::new",
        AppendReadback::new(&ctx, &schema, cfg.clone()).map(drop),
    )?;
    typed(
        "BucketReadback::new",
        BucketReadback::new(&ctx, &schema, cfg.clone().buckets(2)).map(drop),
    )?;
    typed(
        "GraphReadback::new",
        GraphReadback::new(&ctx, &schema, cfg.clone()).map(drop),
    )?;
    // An event is a host-side driver object: the driver may still make one (it needs no
    // device work); either answer is fine, a panic or hang is not.
    match sized_readback::StreamJoin::new(&ctx) {
        Ok(_) => println!("  StreamJoin::new: made (no device work)"),
        Err(e) => println!("  StreamJoin::new: {e}"),
    }
    typed(
        "enqueue, then wait",
        rb.enqueue(&stream, &data, &cnt)
            .and_then(|t| t.wait().map(drop)),
    )?;
    typed(
        "enqueue_raw, then wait_timeout",
        // SAFETY: the buffers are device memory of ctx, alive until this returns.
        unsafe {
            let (d, _gd) = data.device_ptr(&stream);
            let (c, _gc) = cnt.device_ptr(&stream);
            rb.enqueue_raw(&stream, None, d, 64, RawCount::u32(c))
        }
        .and_then(|t| t.wait_timeout(FAULT_WAIT).map(drop)),
    )?;
    typed("grow", rb.grow(128))?;
    typed(
        "GraphReadback::next_timeout",
        graph.next_timeout(FAULT_WAIT).map(drop),
    )?;
    // Host state still answers: a ticket made before the fault, the settings.
    ensure!(held.seq() == 1 && rb.info().capacity == 64);
    let t1 = Instant::now();
    drop((held, rb, staged, graph, data, cnt, stream));
    ensure!(
        t1.elapsed() < FAULT_WAIT,
        "the drops took {:?}",
        t1.elapsed()
    );
    println!("  dropping everything took {:?}", t1.elapsed());
    Ok(())
}

/// A readback in flight on stream A (behind a busy producer) while a kernel on stream B
/// faults: the context is lost, so A's wait returns the error too (no hang, no wrong data).
fn fault_other_stream() -> Result<()> {
    let ctx = sized_readback::device::open(0)?;
    let module = Module::load(&ctx)?;
    let a = ctx.new_stream()?;
    let b = ctx.new_stream()?;
    let data = a.clone_htod(&[1u8; 64])?;
    let cnt = a.alloc_zeros::<i32>(1)?;
    a.synchronize()?;
    let (c, _g) = cnt.device_ptr(&a);
    let mapped = Readback::<u8>::with_config(&ctx, ReadbackConfig::new(64))?;
    let staged =
        Readback::<u8>::with_config(&ctx, ReadbackConfig::new(64).transport(Transport::Staged))?;
    busy(&module, &a, c, 64, 500_000_000)?;
    let tk = mapped.enqueue(&a, &data, &cnt)?;
    fault(&module, &b)?;
    match tk.wait() {
        Err(e) if is_cuda_err(&e) => println!("  readback on stream A while stream B faulted: {e}"),
        Err(e) => bail!("stream A: unexpected {e}"),
        Ok(out) => {
            ensure!(
                out.count() == 64 && out.iter().all(|&x| x == 1),
                "wrong data"
            );
            println!("  readback on stream A completed before the fault spread")
        }
    }
    let r = staged
        .enqueue(&a, &data, &cnt)
        .and_then(|t| t.wait().map(|o| o.count()));
    match r {
        Err(e) if is_cuda_err(&e) => println!("  new readback on stream A: {e}"),
        other => bail!("new readback on stream A after the fault: {other:?}"),
    }
    Ok(())
}

/// Tickets dropped unwaited after a fault, then the readback: nothing hangs (the engine's
/// drop waits on events that report the error) and nothing crashes.
fn fault_drop_in_flight() -> Result<()> {
    let ctx = sized_readback::device::open(0)?;
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[9u32; 1 << 16])?;
    let cnt = stream.clone_htod(&[1i32 << 16])?;
    let rbs = TRANSPORTS
        .iter()
        .map(|&t| {
            Readback::<u32>::with_config(&ctx, ReadbackConfig::new(1 << 16).transport(t).slots(3))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let first: Vec<_> = rbs
        .iter()
        .map(|rb| rb.enqueue(&stream, &data, &cnt))
        .collect::<Result<_, _>>()?;
    fault(&module, &stream)?;
    let mut held = Vec::new();
    for (rb, t1) in rbs.into_iter().zip(first) {
        let t2 = rb.enqueue(&stream, &data, &cnt);
        let t3 = rb.enqueue(&stream, &data, &cnt);
        drop(t1);
        held.push((rb, t2, t3));
    }
    let t0 = Instant::now();
    for (rb, t2, t3) in held {
        drop(t2);
        drop(rb);
        drop(t3);
    }
    println!(
        "  dropped 2 readbacks with 6 tickets after a fault in {:?}",
        t0.elapsed()
    );
    Ok(())
}

/// A fault in the primary context, a readback in a second (non-primary) context of the same
/// device and process. CUDA documents illegal-address errors as corrupting the process's
/// CUDA state; this records what the driver does (no hang, no wrong data either way).
fn fault_other_context() -> Result<()> {
    let ctx = sized_readback::device::open(0)?;
    let other = CudaContext::new_non_primary(0, 0)?;
    let os = other.new_stream()?;
    let odata = os.clone_htod(&[3u32; 128])?;
    let ocnt = os.clone_htod(&[100i32])?;
    let orb = Readback::<u32>::new(&other, 128)?;
    ensure!(
        orb.enqueue(&os, &odata, &ocnt)?.wait()?.len() == 100,
        "healthy first"
    );
    ctx.bind_to_thread()?;
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[1u32; 8])?;
    let cnt = stream.clone_htod(&[8i32])?;
    let rb = Readback::<u32>::new(&ctx, 8)?;
    fault(&module, &stream)?;
    match rb
        .enqueue(&stream, &data, &cnt)
        .and_then(|t| t.wait().map(|o| o.count()))
    {
        Err(e) if is_cuda_err(&e) => println!("  faulted context: {e}"),
        other => bail!("faulted context: {other:?}"),
    }
    match orb.enqueue(&os, &odata, &ocnt).and_then(|t| {
        t.wait()
            .map(|o| o.iter().all(|&x| x == 3) && o.len() == 100)
    }) {
        Ok(true) => println!("  OTHER CONTEXT: unaffected, readback verified"),
        Ok(false) => bail!("other context: wrong data"),
        Err(e) => println!("  OTHER CONTEXT: also failed: {e}"),
    }
    Ok(())
}

/// Runs each scenario in a child process, then checks that this process's context still works.
fn faults(names: &[&str]) -> Result<()> {
    for n in names {
        child::run_child(SCENARIO_ENV, n, Duration::from_secs(90))?;
        FAULTS_SURVIVED.fetch_add(1, Ordering::Relaxed);
    }
    // This process's context is untouched by its children's faults.
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[5u8; 10])?;
    let cnt = stream.clone_htod(&[10u64])?;
    let rb = Readback::<u8>::new(&ctx, 10)?;
    ensure!(rb.enqueue(&stream, &data, &cnt)?.wait()?.as_slice() == [5; 10]);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Device faults on the other paths: append, buckets (pack and append), graph replay

/// How long a wait after a fault may take at most: the error must end it long before.
const FAULT_WAIT: Duration = Duration::from_secs(20);

/// `r` (an enqueue and its wait, as one result) must be the device's error: not another
/// error kind, not data. A hang is caught by the parent's timeout.
fn expect_device_error<T>(what: &str, t0: Instant, r: sized_readback::Result<T>) -> Result<()> {
    match r {
        Err(e) if is_cuda_err(&e) => {
            println!("  {what}: {e} (after {:?})", t0.elapsed());
            ensure!(
                t0.elapsed() < FAULT_WAIT,
                "{what}: the error took the whole timeout"
            );
            Ok(())
        }
        Err(e) => bail!("{what}: {e}, expected the device error"),
        Ok(_) => bail!("{what}: succeeded after a fault"),
    }
}

fn append_schema() -> ColumnSchema {
    let mut s = ColumnSchema::new();
    s.column::<u64>();
    s.column::<u32>();
    s
}

/// `srbt_append_step(desc, n, max_count, p, step)`: appends rows of step `*step`; a `step`
/// address of 0x8 makes the append kernel itself fault.
fn append_step(
    module: &Module,
    stream: &CudaStream,
    d: &AppendDesc,
    step: u64,
) -> std::result::Result<(), cudarc::driver::DriverError> {
    let k = module
        .function("srbt_append_step")
        .expect("srbt_append_step");
    let (mut d, mut n, mut max, mut p, mut s) = (*d, 20_000u64, 5000u64, 2_147_483_647u64, step);
    let mut args: [*mut c_void; 5] = [
        (&mut d as *mut AppendDesc).cast(),
        (&mut n as *mut u64).cast(),
        (&mut max as *mut u64).cast(),
        (&mut p as *mut u64).cast(),
        (&mut s as *mut u64).cast(),
    ];
    // SAFETY: srbt_append_step(srb_append_desc, uint64_t x3, const uint64_t*), 256 threads per
    // block as its BlockAppend; `step` is a device address of a u64, or 0x8 to fault on purpose.
    unsafe { launch_append_kernel(&k, stream, 20, &mut args) }
}

/// Launches an append test kernel of 256 threads per block on `grid` blocks, with the
/// driver's error as the append closure wants it.
///
/// # Safety
/// As `Kernel::launch`: `args` match the kernel's parameters, which it uses as they allow.
unsafe fn launch_append_kernel(
    k: &sized_readback::testing::Kernel,
    stream: &CudaStream,
    grid: u32,
    args: &mut [*mut c_void],
) -> std::result::Result<(), cudarc::driver::DriverError> {
    let shape = LaunchShape {
        grid,
        block: 256,
        programmatic: false,
    };
    // SAFETY: per the contract.
    unsafe { k.launch(stream.cu_stream(), shape, args) }.map_err(|e| match e {
        Error::Cuda { source, .. } => source,
        other => panic!("launch: {other}"),
    })
}

#[derive(Debug, Clone, Copy)]
enum AppendFault {
    /// The producer before the append kernel faults.
    Producer,
    /// The append kernel itself faults (reads its step from an illegal address).
    Kernel,
}

/// An append readback whose producer, or whose own kernel, faults: the wait returns the
/// device error within its timeout, on both transports (the staged one waits on an event, the
/// mapped one on the trailer that the faulted kernel never writes), and later appends fail.
fn fault_append(how: AppendFault) -> Result<()> {
    let ctx = sized_readback::device::open(0)?;
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let step = stream.clone_htod(&[7u64])?;
    let (step_ptr, _g) = step.device_ptr(&stream);
    let readbacks = TRANSPORTS.map(|t| {
        AppendReadback::new(
            &ctx,
            &append_schema(),
            ReadbackConfig::new(5000).transport(t),
        )
    });
    for rb in &readbacks {
        let rb = rb.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
        let t = rb.append(&stream, |d| append_step(&module, &stream, d, step_ptr))?;
        t.wait_timeout(FAULT_WAIT).context("healthy append first")?;
    }
    if let AppendFault::Producer = how {
        fault(&module, &stream)?;
    }
    let bad_step = match how {
        AppendFault::Producer => step_ptr,
        AppendFault::Kernel => 0x8,
    };
    for rb in readbacks.iter().flatten() {
        let t0 = Instant::now();
        let r = rb
            .append(&stream, |d| append_step(&module, &stream, d, bad_step))
            .and_then(|t| t.wait_timeout(FAULT_WAIT).map(|o| o.count()));
        expect_device_error(
            &format!("{how:?} fault, {:?} append", rb.info().transport),
            t0,
            r,
        )?;
    }
    for rb in readbacks.iter().flatten() {
        let r = rb
            .append(&stream, |d| append_step(&module, &stream, d, step_ptr))
            .and_then(|t| t.wait_timeout(FAULT_WAIT).map(|o| o.count()));
        expect_device_error("a later append in the context", Instant::now(), r)?;
    }
    Ok(())
}

/// A bucket pack after a producer fault: its wait returns the device error, on both
/// transports.
fn fault_bucket_pack() -> Result<()> {
    let ctx = sized_readback::device::open(0)?;
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let mut schema = ColumnSchema::new();
    let col = schema.column::<u64>();
    let data = stream.clone_htod(&(0..64u64).collect::<Vec<_>>())?;
    let counts = stream.clone_htod(&[10u32, 20])?;
    let offsets = stream.clone_htod(&[0u32, 32])?;
    let readbacks: Vec<BucketReadback> = TRANSPORTS
        .iter()
        .map(|&t| {
            BucketReadback::new(
                &ctx,
                &schema,
                ReadbackConfig::new(32).buckets(2).transport(t),
            )
        })
        .collect::<sized_readback::Result<_>>()?;
    for rb in &readbacks {
        let t = rb.enqueue(&stream, &[col.source(&data)], &counts, &offsets)?;
        let out = t.wait_timeout(FAULT_WAIT)?;
        ensure!(out.bucket_column(col, 1) == (32..52u64).collect::<Vec<_>>().as_slice());
    }
    fault(&module, &stream)?;
    for rb in &readbacks {
        let t0 = Instant::now();
        let r = rb
            .enqueue(&stream, &[col.source(&data)], &counts, &offsets)
            .and_then(|t| t.wait_timeout(FAULT_WAIT).map(|o| o.count()));
        expect_device_error("bucket pack after a producer fault", t0, r)?;
    }
    Ok(())
}

/// A bucketed append after a producer fault: its wait returns the device error.
fn fault_bucket_append() -> Result<()> {
    let ctx = sized_readback::device::open(0)?;
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let k = module.function("srbt_append_buckets")?;
    let launch = |d: &AppendDesc| {
        let (mut d, mut n, mut c, mut p, mut s, mut named) =
            (*d, 10_000u64, 3000u64, 2_147_483_647u64, 3u64, 4u32);
        let mut args: [*mut c_void; 6] = [
            (&mut d as *mut AppendDesc).cast(),
            (&mut n as *mut u64).cast(),
            (&mut c as *mut u64).cast(),
            (&mut p as *mut u64).cast(),
            (&mut s as *mut u64).cast(),
            (&mut named as *mut u32).cast(),
        ];
        // SAFETY: srbt_append_buckets(srb_append_desc, uint64_t x4, unsigned), 256 threads
        // per block as its BlockAppendTo; it touches only the readback's memory.
        unsafe { launch_append_kernel(&k, &stream, 10, &mut args) }
    };
    let readbacks: Vec<AppendReadback> = TRANSPORTS
        .iter()
        .map(|&t| {
            AppendReadback::new(
                &ctx,
                &append_schema(),
                ReadbackConfig::new(3000).buckets(4).transport(t),
            )
        })
        .collect::<sized_readback::Result<_>>()?;
    for rb in &readbacks {
        let healthy = rb.append(&stream, launch)?;
        let n = healthy.wait_timeout(FAULT_WAIT)?.count();
        ensure!(n == 3000, "healthy bucketed append: {n} rows");
    }
    fault(&module, &stream)?;
    for rb in &readbacks {
        let t0 = Instant::now();
        let r = rb
            .append(&stream, launch)
            .and_then(|t| t.wait_timeout(FAULT_WAIT).map(|o| o.count()));
        let what = format!(
            "{:?} bucketed append after a producer fault",
            rb.info().transport
        );
        expect_device_error(&what, t0, r)?;
    }
    Ok(())
}

/// A captured graph (producer, pack recorded into it) replayed after a fault on its stream:
/// the next replay's wait returns the device error within its timeout, not a hang.
fn fault_graph_replay() -> Result<()> {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let ctx = sized_readback::device::open(0)?;
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let mut schema = ColumnSchema::new();
    schema.column::<u64>();
    let g = GraphReadback::new(&ctx, &schema, ReadbackConfig::new(64).slots(2))?;
    let data = DeviceBuffer::new_zeroed(&ctx, 64 * 8)?;
    let count = DeviceBuffer::new_zeroed(&ctx, 8)?;
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    busy(&module, &stream, count.ptr(), 40, 1000)?;
    // SAFETY: the buffers outlive every replay (the graph is dropped first); one stream.
    let recorded = unsafe {
        g.record(
            &stream,
            None,
            &[ColumnSource {
                ptr: data.ptr(),
                len: 64,
            }],
            RawCount::i32(count.ptr()),
        )
    };
    let graph = stream
        .end_capture(CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)?
        .context("an empty capture")?;
    recorded?;
    graph.launch()?;
    let n = g.next_timeout(FAULT_WAIT)?.count();
    ensure!(n == 40, "healthy replay: {n} rows");
    fault(&module, &stream)?;
    let t0 = Instant::now();
    let r = graph
        .launch()
        .map_err(|e| Error::Cuda {
            call: "cuGraphLaunch",
            source: e,
        })
        .and_then(|()| g.next_timeout(FAULT_WAIT).map(|rp| rp.count()));
    expect_device_error("graph replay after a fault", t0, r)?;
    drop(graph);
    Ok(())
}
