//! Load: the short soak, several host threads on one context (each with its own readbacks, or
//! sharing one), library errors on one stream while others work, and two GPUs at once.
use super::{busy, ctx, env_u64, expect_err, soak_check, timing_asserts};
use anyhow::{bail, ensure, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use sized_readback::testing::Kernels as Module;
use sized_readback::{Error, Readback, ReadbackConfig, Ticket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, RwLock};
use std::time::{Duration, Instant};
use test_support::{soak, Test};

pub const TESTS: &[Test] = test_support::tests![
    // Their graph lanes capture, and drop graph readbacks (a context synchronization).
    soak_short.exclusive(),
    threads_each_with_own_readback.exclusive(),
    shared_readback_across_threads,
    // Its timeout check, as lifecycle::wait_timeout_returns_timeout's.
    library_errors_do_not_poison_other_streams.exclusive(),
    // Its soak's graph lanes capture on device 0, as soak_short's do.
    two_gpus.gpus(2).exclusive(),
];

fn soak_short() -> Result<()> {
    let cfg = soak::SoakConfig {
        readbacks: env_u64("SRB_SOAK_READBACKS", 20_000),
        threads: 2,
        seed: 0x5eed,
        progress_every: 0,
        pause: None,
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
        pause: None,
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

/// The producer's length: the wait that follows must time out long before it ends.
const PRODUCER: Duration = Duration::from_millis(100);

/// A readback behind a 100 ms producer: `wait_timeout(200 µs)` times out, then `wait` gets the
/// rows. Rows cannot exist before the producer has run its 100 ms, so rows that come back at
/// all from the timed wait fail the test.
///
/// Taken with `pause` held exclusively, so no soak step runs beside it. That is the cause of the
/// flakes this check had (it failed at `538ce8a` and `2fafcc6`, and a retry rule hid it): the
/// soak's workers make device-synchronizing driver calls (the pinned slots of their lanes
/// allocated as they start and freed as they end, a spill fetch's readback made on first use),
/// which wait for every kernel of the device, this 100 ms producer included, and hold the
/// driver's lock meanwhile, so this thread's enqueue or its wait's event query returned only
/// after the producer had finished, with the rows (the H200 showed the rows 100.27 ms after the
/// launch, the stream idle 9.6 µs later). With no such call beside it,
/// the wait's queries answer at once, and a wait that ignored its deadline (a planted fault:
/// the closing note names its branch) returns the rows 100 ms later and fails.
fn timeout_behind_producer(
    module: &Module,
    stream: &Arc<CudaStream>,
    busy_count: u64,
    rb: &Readback<f64>,
    data: &CudaSlice<f64>,
    ok: &CudaSlice<i32>,
    pause: &RwLock<()>,
) -> Result<()> {
    let _quiet = pause.write().unwrap_or_else(|e| e.into_inner());
    let launched = Instant::now();
    busy(module, stream, busy_count, 0, PRODUCER.as_nanos() as u64)?;
    let t = rb.enqueue(stream, data, ok)?;
    let waiting = launched.elapsed();
    let r = t.wait_timeout(Duration::from_micros(200));
    let seen = launched.elapsed();
    if timing_asserts() {
        if let Ok(out) = &r {
            bail!(
                "wait_timeout(200 µs), begun {waiting:?} after a {PRODUCER:?} producer was \
                 launched, returned {} rows {seen:?} after it: no timeout",
                out.count()
            );
        }
        expect_err(r, "timeout", |e| matches!(e, Error::Timeout { .. }))?;
    }
    ensure!(t.wait()?.as_slice() == [2.5; 8], "after a timeout");
    Ok(())
}

/// Library errors on one stream leave other streams' readbacks (and the erring readback
/// itself) working: only CUDA's sticky context errors spread (see the fault scenarios).
fn library_errors_do_not_poison_other_streams() -> Result<()> {
    let ctx = ctx();
    let module = Module::load(&ctx)?;
    // Held shared by each soak step, exclusively by the timeout checks.
    let pause = Arc::new(RwLock::new(()));
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
                    timeout_behind_producer(&module, &stream, bc, &rb, &data, &ok, &pause)
                        .map_err(|e| e.context(format!("iteration {i}")))?;
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
                pause: Some(pause.clone()),
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

fn two_gpus() -> Result<()> {
    let c0 = sized_readback::device::open(0)?;
    let c1 = sized_readback::device::open(1)?;
    let cfg = soak::SoakConfig {
        readbacks: 4000,
        threads: 2,
        seed: 0x2,
        progress_every: 0,
        pause: None,
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
