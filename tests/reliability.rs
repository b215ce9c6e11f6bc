//! Reliability tests (issue 4): a short soak, device faults, timeouts, drops while work is in
//! flight, leaks, bad input, several host threads, two GPUs.
//!
//! A custom harness (libtest-mimic): with no CUDA driver or device every test is reported as
//! *ignored*; with a GPU, `cargo test --test reliability` runs them all. The two-GPU test is
//! ignored with fewer than two devices.
//!
//! A device fault (illegal address) is a *sticky* error: it poisons the whole CUDA context,
//! so every fault scenario runs in a child process. The test binary re-executes itself with
//! `SRB_RELIABILITY_SCENARIO=<name>`; the child runs the scenario, prints `SCENARIO OK` and
//! exits 0, and the parent checks the exit status and the output within a timeout (a hang
//! fails the test instead of hanging it).
use anyhow::{bail, ensure, Context as _, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use libtest_mimic::{Arguments, Failed, Trial};
use sized_readback::testing::DeviceBuffer;
use sized_readback::testing::Kernels as Module;
use sized_readback::LaunchShape;
use sized_readback::{
    AppendDesc, AppendReadback, BucketReadback, ColumnSchema, ColumnSource, Error, GraphReadback,
    RawCount, Readback, ReadbackConfig, Ticket, Transport, WaitMode,
};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

#[path = "common/child.rs"]
mod child;
#[path = "reliability/soak.rs"]
mod soak;

const SCENARIO_ENV: &str = "SRB_RELIABILITY_SCENARIO";
const TRANSPORTS: [Transport; 2] = [Transport::Mapped, Transport::Staged];

fn ctx() -> Arc<CudaContext> {
    static CTX: OnceLock<Arc<CudaContext>> = OnceLock::new();
    CTX.get_or_init(|| sized_readback::device::open(0).expect("a GPU (checked before the tests)"))
        .clone()
}

/// Tests that measure device memory or time take this lock exclusively; all others share
/// it, so nothing else allocates or frees while they measure.
fn exclusive() -> &'static RwLock<()> {
    static L: RwLock<()> = RwLock::new(());
    &L
}

/// Tally printed at the end (and grepped into RELIABILITY.md).
static BAD_INPUTS: AtomicU64 = AtomicU64::new(0);
static FAULTS_SURVIVED: AtomicU64 = AtomicU64::new(0);

fn launch(
    module: &Module,
    name: &str,
    stream: &CudaStream,
    grid: u32,
    args: &mut [*mut c_void],
) -> Result<()> {
    let k = module.function(name)?;
    // SAFETY: callers pass arguments matching the kernel's C signature (csrc/producers.cu).
    unsafe {
        k.launch(
            stream.cu_stream(),
            LaunchShape {
                grid,
                block: 32,
                programmatic: false,
            },
            args,
        )?
    };
    Ok(())
}

/// `srb_busy_then_count`: one thread busy for `ns`, then `*count = n`.
fn busy(module: &Module, stream: &CudaStream, count: u64, n: i32, ns: u64) -> Result<()> {
    let (mut c, mut nn, mut t) = (count, n, ns);
    launch(
        module,
        "srb_busy_then_count",
        stream,
        1,
        &mut [
            (&mut c as *mut u64).cast(),
            (&mut nn as *mut i32).cast(),
            (&mut t as *mut u64).cast(),
        ],
    )
}

/// `srb_fault`: a store to address 0x8 (illegal address).
fn fault(module: &Module, stream: &CudaStream) -> Result<()> {
    let mut off = 0u64;
    launch(
        module,
        "srb_fault",
        stream,
        1,
        &mut [(&mut off as *mut u64).cast()],
    )
}

fn expect_err<T>(r: Result<T, Error>, what: &str, ok: impl Fn(&Error) -> bool) -> Result<()> {
    BAD_INPUTS.fetch_add(1, Ordering::Relaxed);
    match r {
        Ok(_) => bail!("{what}: accepted"),
        Err(e) if ok(&e) => Ok(()),
        Err(e) => bail!("{what}: wrong error {e}"),
    }
}

// ---------------------------------------------------------------------------------------
// Soak and threads

fn soak_check(r: &soak::SoakReport) -> Result<()> {
    for m in &r.first_mismatches {
        eprintln!("mismatch: {m}");
    }
    ensure!(r.mismatches == 0, "{} mismatches", r.mismatches);
    ensure!(
        r.verified + r.dropped_unwaited == r.enqueued,
        "lost readbacks"
    );
    ensure!(r.verified_data > 0 && r.negative > 0 && r.over_capacity > 0 && r.over_source > 0);
    ensure!(r.mapped > 0 && r.staged > 0);
    Ok(())
}

fn soak_short() -> Result<()> {
    let cfg = soak::SoakConfig {
        readbacks: env_u64("SRB_SOAK_READBACKS", 20_000),
        threads: 2,
        seed: 0x5eed,
        progress_every: 0,
    };
    let r = soak::run(&ctx(), &cfg)?;
    println!("soak_short:\n{}", r.summary());
    soak_check(&r)
}

/// Eight host threads, each with its own readbacks (16 lanes) and stream on one context.
fn threads_each_with_own_readback() -> Result<()> {
    let cfg = soak::SoakConfig {
        readbacks: env_u64("SRB_THREADS_READBACKS", 8 * 1000),
        threads: 8,
        seed: 0x7417,
        progress_every: 0,
    };
    let r = soak::run(&ctx(), &cfg)?;
    println!("threads_each_with_own_readback:\n{}", r.summary());
    soak_check(&r)
}

/// One readback shared by four enqueuing threads (`Readback: Sync`), tickets sent to a
/// fifth thread that waits and verifies (`Ticket: Send`).
fn shared_readback_across_threads() -> Result<()> {
    let ctx = ctx();
    let cap = 1024usize;
    let rb = Readback::<u32>::with_config(&ctx, ReadbackConfig::new(cap).slots(6))?;
    let per_thread = 300u64;
    let (tx, rx) = mpsc::sync_channel::<(Ticket<u32>, usize, Arc<Vec<u32>>)>(64);
    let exhausted = AtomicU64::new(0);
    let verified = std::thread::scope(|s| -> Result<u64> {
        let verifier = s.spawn(move || -> Result<u64> {
            let mut n_ok = 0;
            for (tk, n, host) in rx {
                let out = tk.wait()?;
                ensure!(out.count() == n, "count {} != {n}", out.count());
                ensure!(out.as_slice() == &host[..n], "data of seq {}", tk.seq());
                n_ok += 1;
            }
            Ok(n_ok)
        });
        let mut producers = Vec::new();
        for id in 0..4u64 {
            let (ctx, rb, tx, exhausted) = (&ctx, &rb, tx.clone(), &exhausted);
            producers.push(s.spawn(move || -> Result<()> {
                let stream = ctx.new_stream()?;
                let host: Arc<Vec<u32>> = Arc::new(
                    (0..cap as u32)
                        .map(|i| (id as u32) << 24 | i ^ 0x5a5a)
                        .collect(),
                );
                let data = stream.clone_htod(host.as_slice())?;
                let mut rng = soak::Rng::new(id);
                let counts: Vec<i32> = (0..64).map(|_| rng.below(cap as u64 + 1) as i32).collect();
                let dcounts = stream.clone_htod(&counts)?;
                for _ in 0..per_thread {
                    let j = rng.below(64) as usize;
                    let c = dcounts.slice(j..j + 1);
                    let tk = loop {
                        match rb.enqueue(&stream, &data, &c) {
                            Ok(t) => break t,
                            Err(Error::SlotsExhausted { .. }) => {
                                exhausted.fetch_add(1, Ordering::Relaxed);
                                std::thread::yield_now();
                            }
                            Err(e) => return Err(e.into()),
                        }
                    };
                    tx.send((tk, counts[j] as usize, host.clone()))
                        .map_err(|_| anyhow::anyhow!("verifier gone"))?;
                }
                // Keep `data` alive until this thread's tickets are waited: cudarc's event
                // tracking orders its free after the packs anyway.
                stream.synchronize()?;
                Ok(())
            }));
        }
        drop(tx);
        for p in producers {
            p.join()
                .map_err(|_| anyhow::anyhow!("producer panicked"))??;
        }
        verifier
            .join()
            .map_err(|_| anyhow::anyhow!("verifier panicked"))?
    })?;
    println!(
        "shared_readback_across_threads: {verified} verified, {} enqueues met SlotsExhausted",
        exhausted.load(Ordering::Relaxed)
    );
    ensure!(verified == 4 * per_thread);
    Ok(())
}

/// Library errors on one stream leave other streams' readbacks (and the erring readback
/// itself) working: only CUDA's sticky context errors spread (see the fault scenarios).
fn library_errors_do_not_poison_other_streams() -> Result<()> {
    // Alone, for its timeout check (see wait_timeout_returns_timeout).
    let _x = exclusive().write().unwrap_or_else(|p| p.into_inner());
    let ctx = ctx();
    let module = Module::load(&ctx)?;
    std::thread::scope(|s| -> Result<()> {
        let bad = s.spawn(|| -> Result<u64> {
            let stream = ctx.new_stream()?;
            let other = CudaContext::new_non_primary(0, 0)?;
            let foreign = other.new_stream()?.clone_htod(&[1.0f64; 8])?;
            ctx.bind_to_thread()?;
            let rb = Readback::<f64>::with_config(&ctx, ReadbackConfig::new(8).slots(1))?;
            let data = stream.clone_htod(&[2.5f64; 8])?;
            let neg = stream.clone_htod(&[-7i32])?;
            let big = stream.clone_htod(&[9u64])?;
            let ok = stream.clone_htod(&[8i32])?;
            let busy_count = stream.alloc_zeros::<i32>(1)?;
            let (bc, _g) = busy_count.device_ptr(&stream);
            let mut errors = 0u64;
            for i in 0..200 {
                let t = rb.enqueue(&stream, &data, &neg)?;
                expect_err(t.wait(), "negative", |e| {
                    matches!(e, Error::NegativeCount { count: -7 })
                })?;
                let held = t; // holds the only slot
                expect_err(rb.enqueue(&stream, &data, &ok), "exhausted", |e| {
                    matches!(e, Error::SlotsExhausted { slots: 1 })
                })?;
                drop(held);
                let t = rb.enqueue(&stream, &data, &big)?;
                expect_err(t.wait(), "over capacity", |e| {
                    matches!(e, Error::CountExceedsCapacity { count: 9, .. })
                })?;
                drop(t);
                expect_err(rb.enqueue(&stream, &foreign, &ok), "foreign", |e| {
                    matches!(e, Error::ForeignContext { .. })
                })?;
                if i % 50 == 0 {
                    busy(&module, &stream, bc, 0, 100_000_000)?;
                    let t = rb.enqueue(&stream, &data, &ok)?;
                    let r = t.wait_timeout(Duration::from_micros(200));
                    if timing_asserts() {
                        expect_err(r, "timeout", |e| matches!(e, Error::Timeout { .. }))?;
                    }
                    ensure!(t.wait()?.as_slice() == [2.5; 8], "after a timeout");
                    errors += 1;
                }
                // The erring readback itself still works.
                ensure!(rb.enqueue(&stream, &data, &ok)?.wait()?.as_slice() == [2.5; 8]);
                errors += 4;
            }
            Ok(errors)
        });
        let good = s.spawn(|| -> Result<u64> {
            let cfg = soak::SoakConfig {
                readbacks: env_u64("SRB_OTHER_STREAMS_READBACKS", 4000),
                threads: 2,
                seed: 0xbad,
                progress_every: 0,
            };
            let r = soak::run(&ctx, &cfg)?;
            soak_check(&r)?;
            Ok(r.verified)
        });
        let errors = bad.join().map_err(|_| anyhow::anyhow!("panicked"))??;
        let verified = good.join().map_err(|_| anyhow::anyhow!("panicked"))??;
        println!(
            "library_errors_do_not_poison_other_streams: {errors} library errors on one \
             stream, {verified} readbacks verified on others meanwhile"
        );
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------
// Timeouts, drops in flight, leaks

fn wait_timeout_returns_timeout() -> Result<()> {
    // Alone: a free elsewhere in the process (cuMemFree, cuMemFreeHost) can stall this
    // thread's enqueue until the busy producer ends (seen on the H200 host).
    let _x = exclusive().write().unwrap_or_else(|p| p.into_inner());
    let ctx = ctx();
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[4u16; 16])?;
    let cnt = stream.alloc_zeros::<i32>(1)?;
    stream.synchronize()?;
    let (c, _g) = cnt.device_ptr(&stream);
    let modes = [
        (Transport::Mapped, WaitMode::Trailer),
        (Transport::Mapped, WaitMode::Event),
        (Transport::Staged, WaitMode::Event),
    ];
    for (t, w) in modes {
        let rb = Readback::<u16>::with_config(&ctx, ReadbackConfig::new(16).transport(t).wait(w))?;
        busy(&module, &stream, c, 16, 300_000_000)?;
        let tk = rb.enqueue(&stream, &data, &cnt)?;
        for ms in [0u64, 1, 20] {
            let t0 = Instant::now();
            match tk.wait_timeout(Duration::from_millis(ms)) {
                Err(Error::Timeout { waited }) => {
                    // The call lasted the timeout at least; `waited` is measured from a
                    // moment inside it, so it may read up to a few microseconds short.
                    let took = t0.elapsed();
                    ensure!(
                        took >= Duration::from_millis(ms),
                        "{t:?}/{w:?}: gave up early"
                    );
                    ensure!(
                        waited + Duration::from_millis(1) >= Duration::from_millis(ms),
                        "{t:?}/{w:?}: waited {waited:?}"
                    );
                    ensure!(
                        took < Duration::from_millis(ms + 250),
                        "late timeout: {took:?}"
                    );
                }
                Err(e) => bail!("{t:?}/{w:?}: {e}"),
                Ok(_) => bail!("{t:?}/{w:?}: complete while the producer is busy"),
            }
            BAD_INPUTS.fetch_add(1, Ordering::Relaxed);
        }
        ensure!(tk.try_wait()?.is_none());
        let out = tk.wait_timeout(Duration::from_secs(30))?;
        ensure!(
            out.as_slice() == [4u16; 16],
            "{t:?}/{w:?}: data after timeouts"
        );
    }
    Ok(())
}

/// Dropping tickets and the readback while its packs wait behind a 200 ms producer: the last
/// drop blocks until the device is done with the slots (it frees nothing the device writes).
/// Dropping the *source* buffers in flight: cudarc frees them after the pack, so overwriting
/// freshly allocated memory does not change what the readback returns.
fn drop_in_flight_frees_nothing_early() -> Result<()> {
    let _x = exclusive().write().unwrap_or_else(|p| p.into_inner());
    let ctx = ctx();
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let alloc_stream = ctx.new_stream()?;
    let busy_cnt = stream.alloc_zeros::<i32>(1)?;
    stream.synchronize()?;
    let (bc, _g) = busy_cnt.device_ptr(&stream);
    let n = 1 << 18;
    let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    for t in TRANSPORTS {
        // 1. The readback's own memory.
        let data = stream.clone_htod(&values)?;
        let cnt = stream.clone_htod(&[n as i32])?;
        let rb = Readback::<f32>::with_config(&ctx, ReadbackConfig::new(n).transport(t).slots(3))?;
        busy(&module, &stream, bc, 0, 200_000_000)?;
        let t0 = Instant::now();
        let a = rb.enqueue(&stream, &data, &cnt)?;
        let b = rb.enqueue(&stream, &data, &cnt)?;
        let c = rb.enqueue(&stream, &data, &cnt)?;
        ensure!(
            a.try_wait()?.is_none() || !timing_asserts(),
            "{t:?}: complete too early"
        );
        drop(a);
        drop(rb);
        drop(b);
        let before_last = t0.elapsed();
        drop(c); // last owner of the slots
        let dropped = t0.elapsed();
        println!("{t:?}: last drop returned after {dropped:?} (producer busy 200 ms)");
        ensure!(
            before_last < Duration::from_millis(100) || !timing_asserts(),
            "{t:?}: dropping non-last owners blocked ({before_last:?})"
        );
        ensure!(
            dropped >= Duration::from_millis(120),
            "{t:?}: the last drop returned after {dropped:?}, before the device was done"
        );
        // 2. The caller's buffers, allocated on another stream, dropped in flight.
        let data = alloc_stream.clone_htod(&values)?;
        let cnt = alloc_stream.clone_htod(&[(n - 3) as i32])?;
        let rb = Readback::<f32>::with_config(&ctx, ReadbackConfig::new(n).transport(t))?;
        busy(&module, &stream, bc, 0, 100_000_000)?;
        let tk = rb.enqueue(&stream, &data, &cnt)?;
        drop(data);
        drop(cnt);
        let junk: Vec<CudaSlice<u8>> = (0..8)
            .map(|_| alloc_stream.clone_htod(&vec![0xffu8; n * 4]))
            .collect::<Result<_, _>>()?;
        let out = tk.wait()?;
        ensure!(out.count() == n - 3, "{t:?}: count {}", out.count());
        ensure!(
            out.as_slice() == &values[..n - 3],
            "{t:?}: source freed under the pack"
        );
        drop(junk);
    }
    stream.synchronize()?;
    ctx.check_err()?;
    Ok(())
}

/// Under compute-sanitizer, launches return only once the kernel has run, so "still in
/// flight" checks cannot hold; sanitize.sh sets SRB_TIMING_ASSERT=0 to skip them.
fn timing_asserts() -> bool {
    env_u64("SRB_TIMING_ASSERT", 1) != 0
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss_bytes() -> Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm.split_whitespace().nth(1).context("statm")?.parse()?;
    Ok(pages * 4096)
}

/// Create, enqueue, drop (in every order, with work in flight) many times: device memory and
/// resident host memory (pinned slots count there) must come back.
fn create_enqueue_drop_loop_leaks_nothing() -> Result<()> {
    let _x = exclusive().write().unwrap_or_else(|p| p.into_inner());
    let ctx = ctx();
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 1 << 18; // 1 MiB of u32 per slot
    let host: Vec<u32> = (0..cap as u32)
        .map(|i| i.wrapping_mul(2654435761))
        .collect();
    let data = stream.clone_htod(&host)?;
    let cnt = stream.clone_htod(&[(cap - 1) as i32])?;
    let busy_cnt = stream.alloc_zeros::<i32>(1)?;
    stream.synchronize()?;
    let (bc, _g) = busy_cnt.device_ptr(&stream);
    let iters = env_u64("SRB_LEAK_ITERS", 300);
    let mut rng = soak::Rng::new(99);
    let mut waited = 0u64;
    let mut one = |rng: &mut soak::Rng| -> Result<()> {
        let t = *rng.pick(&TRANSPORTS);
        let slots = 1 + rng.below(3) as usize;
        let rb =
            Readback::<u32>::with_config(&ctx, ReadbackConfig::new(cap).transport(t).slots(slots))?;
        if rng.one_in(2) {
            busy(&module, &stream, bc, 0, 200_000)?;
        }
        let tickets: Vec<Ticket<u32>> = (0..1 + rng.below(slots as u64))
            .map(|_| rb.enqueue(&stream, &data, &cnt))
            .collect::<Result<_, _>>()?;
        match rng.below(4) {
            0 => {
                drop(rb);
                drop(tickets);
            }
            1 => {
                let out = tickets[0].wait()?;
                ensure!(out.count() == cap - 1 && out[cap - 2] == host[cap - 2]);
                waited += 1;
                drop(tickets);
            }
            2 => {
                drop(tickets);
                drop(rb);
            }
            _ => {
                drop(rb);
                for tk in &tickets {
                    ensure!(tk.wait()?.as_slice() == &host[..cap - 1]);
                    waited += 1;
                }
            }
        }
        Ok(())
    };
    for _ in 0..10 {
        one(&mut rng)?;
    }
    stream.synchronize()?;
    let (free0, _) = ctx.mem_get_info()?;
    let rss0 = rss_bytes()?;
    let t0 = Instant::now();
    for _ in 0..iters {
        one(&mut rng)?;
    }
    stream.synchronize()?;
    let (free1, total) = ctx.mem_get_info()?;
    let rss1 = rss_bytes()?;
    let mib = |b: i64| b as f64 / (1 << 20) as f64;
    let dev_lost = free0 as i64 - free1 as i64;
    let rss_gain = rss1 as i64 - rss0 as i64;
    println!(
        "create_enqueue_drop_loop: {iters} readbacks of 1 MiB slots created and dropped in {:?} \
         ({waited} waits); device free memory change {:+.1} MiB of {:.0} MiB, resident host \
         memory change {:+.1} MiB",
        t0.elapsed(),
        -mib(dev_lost),
        mib(total as i64),
        mib(rss_gain)
    );
    // Device free memory is device-wide: other processes on the GPU (e.g. the sanitizer runs
    // of scripts/sanitize.sh, which run side by side) move it too. SRB_MEM_ASSERT=0 reports
    // it without asserting; the plain run of the suite asserts it.
    let assert_device = !matches!(std::env::var("SRB_MEM_ASSERT").as_deref(), Ok("0"));
    ensure!(
        !assert_device || dev_lost < 64 << 20,
        "device memory leaked: {:.1} MiB",
        mib(dev_lost)
    );
    ensure!(
        rss_gain < 64 << 20,
        "host memory leaked: {:.1} MiB",
        mib(rss_gain)
    );
    ctx.check_err()?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Bad input

fn bad_inputs_are_errors() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cfg_err = |e: &Error| matches!(e, Error::InvalidConfig { .. });
    expect_err(Readback::<u8>::new(&ctx, 0), "capacity 0", cfg_err)?;
    expect_err(
        Readback::<u8>::with_config(&ctx, ReadbackConfig::new(4).slots(0)),
        "0 slots",
        cfg_err,
    )?;
    expect_err(
        Readback::<u128>::new(&ctx, usize::MAX / 8),
        "bytes overflow",
        cfg_err,
    )?;
    expect_err(
        Readback::<u8>::new(&ctx, usize::MAX),
        "capacity usize::MAX",
        cfg_err,
    )?;
    expect_err(
        Readback::<u8>::with_config(&ctx, ReadbackConfig::new(1 << 20).slots(usize::MAX / 1024)),
        "slots overflow",
        cfg_err,
    )?;
    expect_err(
        Readback::<u8>::with_config(
            &ctx,
            ReadbackConfig::new(4)
                .transport(Transport::Staged)
                .wait(WaitMode::Trailer),
        ),
        "staged with trailer polling",
        cfg_err,
    )?;
    expect_err(
        sized_readback::device::open(usize::MAX),
        "ordinal MAX",
        |e| matches!(e, Error::NoDevice { .. }),
    )?;

    let rb = Readback::<f64>::with_config(&ctx, ReadbackConfig::new(4).slots(1))?;
    expect_err(rb.grow(0), "grow to 0", cfg_err)?;
    ensure!(rb.capacity() == 4, "a failed grow changed the readback");
    let data = stream.clone_htod(&[1.0f64, 2.0, 3.0, 4.0])?;
    let cnt = stream.clone_htod(&[3i32, 3, 3, 3])?;
    let cnt64 = stream.clone_htod(&[3u64, 3])?;
    let empty = cnt.slice(0..0);
    expect_err(
        rb.enqueue(&stream, &data, &empty),
        "empty count buffer",
        |e| {
            matches!(
                e,
                Error::BufferTooShort {
                    what: "the count",
                    len: 0,
                    need: 1
                }
            )
        },
    )?;
    let (d, _g) = data.device_ptr(&stream);
    let (c, _g2) = cnt.device_ptr(&stream);
    let (c64, _g3) = cnt64.device_ptr(&stream);
    let pinned_host = [0u64; 8];
    let hp = pinned_host.as_ptr() as u64;
    let freed = {
        let b = DeviceBuffer::new_zeroed(&ctx, 4096)?;
        b.ptr()
    };
    let bad_ptr = |e: &Error| matches!(e, Error::BadPointer { .. });
    // SAFETY: every call below must be rejected before any device work, except the last two,
    // whose addresses are live device memory of this context.
    unsafe {
        expect_err(
            rb.enqueue_raw(&stream, None, d, 4, sized_readback::RawCount::i32(0)),
            "null count",
            bad_ptr,
        )?;
        for (k, off) in [(4usize, 1u64), (4, 2), (4, 3)] {
            expect_err(
                rb.enqueue_raw(&stream, None, d, 4, sized_readback::RawCount::i32(c + off)),
                "misaligned i32 count",
                |e| matches!(e, Error::BadPointer { align, .. } if *align == k),
            )?;
        }
        for off in [1u64, 4] {
            expect_err(
                rb.enqueue_raw(
                    &stream,
                    None,
                    d,
                    4,
                    sized_readback::RawCount::u64(c64 + off),
                ),
                "misaligned u64 count",
                |e| matches!(e, Error::BadPointer { align: 8, .. }),
            )?;
            expect_err(
                rb.enqueue_raw(
                    &stream,
                    None,
                    d,
                    4,
                    sized_readback::RawCount::i64(c64 + off),
                ),
                "misaligned i64 count",
                |e| matches!(e, Error::BadPointer { align: 8, .. }),
            )?;
        }
        expect_err(
            rb.enqueue_raw(&stream, None, hp, 4, sized_readback::RawCount::i32(c)),
            "host data",
            bad_ptr,
        )?;
        expect_err(
            rb.enqueue_raw(&stream, None, d, 4, sized_readback::RawCount::i32(hp)),
            "host count",
            bad_ptr,
        )?;
        expect_err(
            rb.enqueue_raw(&stream, None, 0, 4, sized_readback::RawCount::i32(c)),
            "null data",
            bad_ptr,
        )?;
        expect_err(
            rb.enqueue_raw(&stream, None, freed, 4, sized_readback::RawCount::i32(c)),
            "freed data",
            bad_ptr,
        )?;
        expect_err(
            rb.enqueue_raw(&stream, None, d, 4, sized_readback::RawCount::i32(freed)),
            "freed count",
            bad_ptr,
        )?;
        expect_err(
            rb.enqueue_raw(&stream, None, 0x1000, 4, sized_readback::RawCount::i32(c)),
            "wild data address",
            bad_ptr,
        )?;
        // A null source of length 0 is fine; a positive count then exceeds it.
        let t = rb.enqueue_raw(&stream, None, 0, 0, sized_readback::RawCount::i32(c))?;
        expect_err(t.wait(), "count past an empty source", |e| {
            matches!(
                e,
                Error::CountExceedsSource {
                    count: 3,
                    source_len: 0,
                    ..
                }
            )
        })?;
        drop(t);
        let t = rb.enqueue_raw(&stream, None, d, 4, sized_readback::RawCount::i32(c + 4))?;
        ensure!(t.wait()?.as_slice() == [1.0, 2.0, 3.0]);
    }
    // Foreign context: stream, data, count, event, raw pointer.
    let other = CudaContext::new_non_primary(0, 0)?;
    let os = other.new_stream()?;
    let odata = os.clone_htod(&[1.0f64; 4])?;
    let ocnt = os.clone_htod(&[1i32])?;
    let oevent = other.new_event(None)?;
    let oraw = DeviceBuffer::new_zeroed(&other, 64)?;
    ctx.bind_to_thread()?;
    let foreign = |what: &'static str| move |e: &Error| matches!(e, Error::ForeignContext { what: w } if *w == what);
    expect_err(
        rb.enqueue(&os, &data, &cnt),
        "foreign stream",
        foreign("the stream"),
    )?;
    expect_err(
        rb.enqueue(&stream, &odata, &cnt),
        "foreign data",
        foreign("the data"),
    )?;
    expect_err(
        rb.enqueue(&stream, &data, &ocnt),
        "foreign count",
        foreign("the count"),
    )?;
    expect_err(
        rb.enqueue_after(&stream, &oevent, &data, &cnt),
        "foreign event",
        foreign("the event"),
    )?;
    // SAFETY: rejected before any device work.
    let r = unsafe {
        rb.enqueue_raw(
            &stream,
            None,
            oraw.ptr(),
            4,
            sized_readback::RawCount::i32(c),
        )
    };
    expect_err(r, "foreign raw data", foreign("the data"))?;
    // Slots exhausted, then fine again.
    let held = rb.enqueue(&stream, &data, &cnt)?;
    expect_err(rb.enqueue(&stream, &data, &cnt), "no free slot", |e| {
        matches!(e, Error::SlotsExhausted { slots: 1 })
    })?;
    drop(held);
    ensure!(rb.enqueue(&stream, &data, &cnt)?.wait()?.as_slice() == [1.0, 2.0, 3.0]);
    println!(
        "bad_inputs_are_errors: {} bad inputs so far in this process, each the right error",
        BAD_INPUTS.load(Ordering::Relaxed)
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Device faults, each in a child process

/// A child process's scenario (see tests/common/child.rs).
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

fn faults(names: &'static [&'static str]) -> impl Fn() -> Result<()> {
    move || {
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
            &format!("{how:?} fault, {:?} append", rb.transport()),
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
            rb.transport()
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

// ---------------------------------------------------------------------------------------
// Two GPUs

fn two_gpus() -> Result<()> {
    let c0 = sized_readback::device::open(0)?;
    let c1 = sized_readback::device::open(1)?;
    let cfg = soak::SoakConfig {
        readbacks: 4000,
        threads: 2,
        seed: 0x2,
        progress_every: 0,
    };
    let (r0, r1) = std::thread::scope(|s| {
        let a = s.spawn(|| soak::run(&c0, &cfg));
        let b = s.spawn(|| soak::run(&c1, &cfg));
        (a.join(), b.join())
    });
    let r0 = r0.map_err(|_| anyhow::anyhow!("panicked"))??;
    let r1 = r1.map_err(|_| anyhow::anyhow!("panicked"))??;
    soak_check(&r0)?;
    soak_check(&r1)?;
    println!(
        "two_gpus: {} + {} readbacks verified at once on devices 0 and 1",
        r0.verified, r1.verified
    );
    let s0 = c0.new_stream()?;
    let s1 = c1.new_stream()?;
    let d0 = s0.clone_htod(&[1.0f32; 8])?;
    let n0 = s0.clone_htod(&[8i32])?;
    let d1 = s1.clone_htod(&[2.0f32; 8])?;
    let n1 = s1.clone_htod(&[8i32])?;
    let rb0 = Readback::<f32>::new(&c0, 8)?;
    let f = |e: &Error| matches!(e, Error::ForeignContext { .. });
    expect_err(rb0.enqueue(&s0, &d1, &n0), "device 1 data", f)?;
    expect_err(rb0.enqueue(&s0, &d0, &n1), "device 1 count", f)?;
    expect_err(rb0.enqueue(&s1, &d0, &n0), "device 1 stream", f)?;
    let (p1, _g) = d1.device_ptr(&s1);
    let (p0, _g0) = n0.device_ptr(&s0);
    // SAFETY: must be rejected before any device work.
    let r = unsafe { rb0.enqueue_raw(&s0, None, p1, 8, sized_readback::RawCount::i32(p0)) };
    expect_err(r, "device 1 raw pointer", |e| {
        matches!(e, Error::ForeignContext { what: "the data" })
    })?;
    ensure!(rb0.enqueue(&s0, &d0, &n0)?.wait()?.as_slice() == [1.0; 8]);
    Ok(())
}

// ---------------------------------------------------------------------------------------

type TestFn = Box<dyn Fn() -> Result<()> + Send + Sync>;

fn main() {
    if let Ok(name) = std::env::var(SCENARIO_ENV) {
        scenario_main(&name);
    }
    let args = Arguments::from_args();
    let devices = sized_readback::device::count().unwrap_or(0);
    let gpu = devices > 0;
    let tests: Vec<(&str, TestFn, bool)> = vec![
        ("soak_short", Box::new(soak_short), gpu),
        (
            "threads_each_with_own_readback",
            Box::new(threads_each_with_own_readback),
            gpu,
        ),
        (
            "shared_readback_across_threads",
            Box::new(shared_readback_across_threads),
            gpu,
        ),
        (
            "library_errors_do_not_poison_other_streams",
            Box::new(library_errors_do_not_poison_other_streams),
            gpu,
        ),
        (
            "wait_timeout_returns_timeout",
            Box::new(wait_timeout_returns_timeout),
            gpu,
        ),
        (
            "drop_in_flight_frees_nothing_early",
            Box::new(drop_in_flight_frees_nothing_early),
            gpu,
        ),
        (
            "create_enqueue_drop_loop_leaks_nothing",
            Box::new(create_enqueue_drop_loop_leaks_nothing),
            gpu,
        ),
        (
            "bad_inputs_are_errors",
            Box::new(bad_inputs_are_errors),
            gpu,
        ),
        (
            "fault_same_stream_wait_errors",
            Box::new(faults(&[
                "fault_mapped_trailer",
                "fault_mapped_event",
                "fault_staged_event",
                "fault_staged_timeout",
            ])),
            gpu,
        ),
        (
            "fault_spreads_to_other_streams_of_the_context",
            Box::new(faults(&["fault_other_stream"])),
            gpu,
        ),
        (
            "fault_then_drop_in_flight",
            Box::new(faults(&["fault_drop_in_flight"])),
            gpu,
        ),
        (
            "fault_and_a_second_context",
            Box::new(faults(&["fault_other_context"])),
            gpu,
        ),
        (
            "fault_append_wait_errors",
            Box::new(faults(&["fault_append_producer", "fault_append_kernel"])),
            gpu,
        ),
        (
            "fault_bucket_wait_errors",
            Box::new(faults(&["fault_bucket_pack", "fault_bucket_append"])),
            gpu,
        ),
        (
            "fault_graph_replay_wait_errors",
            Box::new(faults(&["fault_graph_replay"])),
            gpu,
        ),
    ];
    let mut trials: Vec<Trial> = tests
        .into_iter()
        .map(|(name, f, runnable)| {
            let exclusive_test = [
                "create_enqueue",
                "drop_in",
                "wait_timeout",
                "library_errors",
            ]
            .iter()
            .any(|p| name.starts_with(p));
            Trial::test(name, move || {
                // Memory-measuring tests hold the lock exclusively (they take it themselves).
                let _shared = if exclusive_test {
                    None
                } else {
                    Some(exclusive().read().unwrap_or_else(|p| p.into_inner()))
                };
                f().map_err(|e| Failed::from(format!("{e:#}")))
            })
            .with_kind("gpu")
            .with_ignored_flag(!runnable)
        })
        .collect();
    // Ignored with fewer than two devices, and still ignored (at run time, with the reason)
    // when forced with --include-ignored on such a host.
    trials.push(
        Trial::ignorable_test("two_gpus", move || {
            if devices < 2 {
                return Ok(libtest_mimic::Completion::ignored_with(format!(
                    "needs 2 CUDA devices, {devices} present"
                )));
            }
            let _shared = exclusive().read().unwrap_or_else(|p| p.into_inner());
            two_gpus()
                .map(|()| libtest_mimic::Completion::Completed)
                .map_err(|e| Failed::from(format!("{e:#}")))
        })
        .with_kind("gpu")
        .with_ignored_flag(devices < 2),
    );
    if !gpu {
        eprintln!("no CUDA driver or device: GPU tests are reported as ignored");
    }
    let conclusion = libtest_mimic::run(&args, trials);
    if gpu {
        println!(
            "reliability tally: bad inputs tried {} (each the expected error), device faults \
             injected and survived {}",
            BAD_INPUTS.load(Ordering::Relaxed),
            FAULTS_SURVIVED.load(Ordering::Relaxed)
        );
    }
    conclusion.exit();
}
