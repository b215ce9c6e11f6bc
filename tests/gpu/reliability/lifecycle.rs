//! Lifecycle: timeouts, drops while work is in flight, and create/enqueue/drop loops that leak
//! nothing. Each runs alone: a free elsewhere in the process (cuMemFree, cuMemFreeHost) can
//! stall an enqueue until a busy producer ends (seen on the H200 host), and the leak check
//! reads process-wide memory.
use super::faults::SCENARIO_ENV;
use super::{busy, ctx, env_u64, timing_asserts, BAD_INPUTS};
use anyhow::{bail, ensure, Context as _, Result};
use cudarc::driver::{CudaSlice, DevicePtr};
use sized_readback::testing::Kernels as Module;
use sized_readback::{Error, Readback, ReadbackConfig, Ticket, Transport, WaitMode};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use test_support::producers::build_beside_other_work;
use test_support::{child, soak, Test, TRANSPORTS};

pub const TESTS: &[Test] = test_support::tests![
    wait_timeout_returns_timeout.exclusive(),
    drop_in_flight_frees_nothing_early.exclusive(),
    create_enqueue_drop_loop_leaks_nothing.exclusive(),
    building_after_the_last_drop_waits_for_no_other_work.exclusive(),
    device_reset_then_build_reads_back,
];

fn wait_timeout_returns_timeout() -> Result<()> {
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
                    // The call lasted the timeout at least, and `waited` says so: it runs
                    // from the moment the deadline was set, inside the call.
                    let took = t0.elapsed();
                    ensure!(
                        took >= Duration::from_millis(ms),
                        "{t:?}/{w:?}: gave up early"
                    );
                    ensure!(
                        waited >= Duration::from_millis(ms) && waited <= took,
                        "{t:?}/{w:?}: waited {waited:?}, the call took {took:?}"
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

fn rss_bytes() -> Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm.split_whitespace().nth(1).context("statm")?.parse()?;
    Ok(pages * 4096)
}

/// Create, enqueue, drop (in every order, with work in flight) many times: device memory and
/// resident host memory (pinned slots count there) must come back.
fn create_enqueue_drop_loop_leaks_nothing() -> Result<()> {
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

/// A readback built when every earlier one of the context is gone, while another stream runs
/// long work, returns before that work ends (the kernel images stay loaded: loading them again
/// would wait for it), in every transport; one built there reads back.
fn building_after_the_last_drop_waits_for_no_other_work() -> Result<()> {
    for t in TRANSPORTS {
        let cfg = ReadbackConfig::new(1 << 16).transport(t);
        let seen = build_beside_other_work(&ctx(), |own| {
            Ok(Readback::<f64>::with_config(own, cfg.clone())?)
        })?;
        println!(
            "{t:?}: built in {:?}, the other work still running: {}",
            seen.took, seen.other_work_still_running
        );
        // Under a sanitizer the instrumented build outlasts the other work: no timing there.
        ensure!(
            seen.other_work_still_running || !timing_asserts(),
            "{t:?}: the build waited for other work: it took {:?}",
            seen.took
        );
        let own = sized_readback::device::open(0)?;
        let rb = Readback::<f64>::with_config(&own, cfg)?;
        let stream = own.new_stream()?;
        let data = stream.clone_htod(&[2.5f64; 1 << 16])?;
        let cnt = stream.clone_htod(&[9i32])?;
        ensure!(
            rb.enqueue(&stream, &data, &cnt)?.wait()?.as_slice() == [2.5; 9],
            "{t:?}: wrong rows"
        );
    }
    Ok(())
}

/// A device reset (`cuDevicePrimaryCtxReset`, what `cudaDeviceReset` does) after readbacks were
/// built, then readbacks built in the reset device's new primary context read back, in each
/// transport: the kernels kept for the destroyed context are not handed to its successor (the
/// cache is keyed by `cuCtxGetId`, and the successor has the same handle). In a child process,
/// since the reset destroys every context object of the process's primary context.
fn device_reset_then_build_reads_back() -> Result<()> {
    let out = child::run_child(
        SCENARIO_ENV,
        "device_reset_then_build",
        Duration::from_secs(90),
    )?;
    print!("{out}");
    Ok(())
}

/// The child's side of [`device_reset_then_build_reads_back`].
pub(super) fn device_reset_then_build() -> Result<()> {
    let roundtrip = |t: Transport, v: u32| -> Result<()> {
        let ctx = sized_readback::device::open(0)?;
        let stream = ctx.new_stream()?;
        let data = stream.clone_htod(&[v; 128])?;
        let cnt = stream.clone_htod(&[100i32])?;
        let rb = Readback::<u32>::with_config(&ctx, ReadbackConfig::new(128).transport(t))?;
        let ticket = rb.enqueue(&stream, &data, &cnt)?;
        let out = ticket.wait()?;
        ensure!(
            out.as_slice() == [v; 100],
            "{t:?}: wrong rows ({} of them)",
            out.count()
        );
        Ok(())
    };
    for t in TRANSPORTS {
        roundtrip(t, 1)?;
    }
    let dev = sized_readback::device::open(0)?.cu_device();
    // SAFETY: every object this process made in the context (readbacks, streams, buffers) is
    // dropped; what the library keeps for it (its kernels, a retain) it never uses again.
    unsafe { cudarc::driver::sys::cuDevicePrimaryCtxReset_v2(dev) }.result()?;
    for t in TRANSPORTS {
        roundtrip(t, 2).with_context(|| format!("{t:?}: after the device reset"))?;
    }
    println!("  readbacks built after a device reset read back, mapped and staged");
    Ok(())
}
