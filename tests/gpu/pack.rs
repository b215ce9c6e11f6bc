//! The pack readback of one element type (`Readback<T>`): every element size and alignment,
//! counts at the edges and past them, every count type, bad input, foreign contexts, raw
//! pointers after an event, slots, polling and timeouts, drops in flight, programmatic launch,
//! graph capture refused.
use anyhow::{bail, ensure, Context as _, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView, DevicePtr};
use sized_readback::testing::pattern;
use sized_readback::testing::Kernels as Module;
use sized_readback::{CountType, Element, Error, Readback, ReadbackConfig, Transport, WaitMode};
use std::sync::Arc;
use std::time::Duration;
use test_support::check::{as_bytes, expect_err};
use test_support::producers::{busy_then_count, launch};
use test_support::{SubjectContext, Test, TRANSPORTS};

pub const TESTS: &[Test] = test_support::tests![
    element_sizes_and_unaligned_views,
    counts_at_the_edges,
    large_counts_use_many_blocks,
    every_count_type,
    bad_counts,
    over_capacity_then_grow,
    configuration_errors,
    foreign_context_is_rejected,
    bad_raw_pointers,
    raw_pointers_after_an_event,
    slots_exhausted_then_reused,
    // Timing: a readback still in flight behind a busy producer.
    polling_and_timeouts.exclusive(),
    drop_everything_in_flight,
    random_cycles,
    programmatic_launch_on_and_off,
    // Graph capture; it drains cudarc's per-context error record, which other tests read.
    capture_is_refused_and_long_timeouts_work.exclusive(),
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

/// Device bytes filled with pattern(seed), and the same bytes on the host.
fn pattern_bytes(
    stream: &Arc<CudaStream>,
    n: usize,
    seed: u64,
) -> Result<(CudaSlice<u8>, Vec<u8>)> {
    let host = pattern::bytes(seed, n);
    let dev = stream.clone_htod(&host)?;
    Ok((dev, host))
}

fn count_buf<K: CountType + cudarc::driver::DeviceRepr>(
    stream: &Arc<CudaStream>,
    v: K,
) -> Result<CudaSlice<K>> {
    Ok(stream.clone_htod(&[v])?)
}

/// Reads back `count` elements of T from a view that starts `offset` bytes into a patterned
/// buffer of `len` elements, and checks every byte.
fn roundtrip<T: Element>(
    transport: Transport,
    capacity: usize,
    len: usize,
    offset: usize,
    count: u64,
    seed: u64,
) -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let size = std::mem::size_of::<T>();
    let (dev, host) = pattern_bytes(&stream, offset + len * size, seed)?;
    let view: CudaView<'_, u8> = dev.slice(offset..);
    // SAFETY: the view holds len * size bytes; T is valid for any bits.
    let typed: CudaView<'_, T> = unsafe { view.transmute::<T>(len) }.context("transmute")?;
    let cnt = count_buf(&stream, count as i64)?;
    let rb = Readback::<T>::with_config(&ctx, ReadbackConfig::new(capacity).transport(transport))?;
    let ticket = rb.enqueue(&stream, &typed, &cnt)?;
    let out = ticket.wait()?;
    ensure!(
        out.count() as u64 == count,
        "count {} != {count}",
        out.count()
    );
    ensure!(out.len() == out.count());
    let want = &host[offset..offset + count as usize * size];
    if as_bytes(out.as_slice()) != want {
        let first = as_bytes(out.as_slice())
            .iter()
            .zip(want)
            .position(|(a, b)| a != b);
        bail!("data mismatch at byte {first:?} (size {size}, offset {offset}, count {count})");
    }
    Ok(())
}

fn element_sizes_and_unaligned_views() -> Result<()> {
    for t in TRANSPORTS {
        for (i, offset) in [0usize, 1, 3, 8].into_iter().enumerate() {
            let s = 100 + i as u64;
            roundtrip::<u8>(t, 1000, 999, offset, 777, s)?;
            roundtrip::<u16>(t, 1000, 999, offset, 513, s)?;
            roundtrip::<f32>(t, 1000, 999, offset, 999, s)?;
            roundtrip::<f64>(t, 1000, 999, offset, 999, s)?;
            roundtrip::<[f32; 3]>(t, 1000, 999, offset, 321, s)?;
            roundtrip::<[u64; 2]>(t, 1000, 999, offset, 998, s)?;
        }
    }
    Ok(())
}

fn counts_at_the_edges() -> Result<()> {
    let cap = 4096;
    for t in TRANSPORTS {
        for count in [0u64, 1, 2, 15, 16, 17, cap as u64 - 1, cap as u64] {
            roundtrip::<f64>(t, cap, cap + 10, 0, count, count)?;
        }
        match roundtrip::<f64>(t, cap, cap + 10, 0, cap as u64 + 1, 1) {
            Err(e) => match e.downcast_ref::<Error>() {
                Some(Error::CountExceedsCapacity { count, capacity })
                    if *count == cap as u64 + 1 && *capacity == cap => {}
                _ => bail!("capacity + 1 gave {e:#}"),
            },
            Ok(()) => bail!("capacity + 1 was accepted"),
        }
    }
    Ok(())
}

fn large_counts_use_many_blocks() -> Result<()> {
    for t in TRANSPORTS {
        roundtrip::<f64>(t, 1 << 20, 1 << 20, 0, 300_007, 5)?;
        roundtrip::<u8>(t, 3 << 20, 3 << 20, 1, (3 << 20) - 1, 6)?;
        roundtrip::<[f32; 3]>(t, 1 << 20, 1 << 20, 4, 1 << 20, 7)?;
    }
    Ok(())
}

fn every_count_type() -> Result<()> {
    fn one<K: CountType + cudarc::driver::DeviceRepr>(
        t: Transport,
        v: K,
        want: usize,
    ) -> Result<()> {
        let ctx = ctx();
        let stream = ctx.new_stream()?;
        let (dev, host) = pattern_bytes(&stream, 64 * 4, 9)?;
        // SAFETY: 256 bytes hold 64 u32.
        let data = unsafe { dev.transmute::<u32>(64) }.context("transmute")?;
        let cnt = count_buf(&stream, v)?;
        let rb = Readback::<u32>::with_config(&ctx, ReadbackConfig::new(64).transport(t))?;
        let ticket = rb.enqueue(&stream, &data, &cnt)?;
        let out = ticket.wait()?;
        ensure!(out.count() == want);
        ensure!(as_bytes(out.as_slice()) == &host[..want * 4]);
        Ok(())
    }
    for t in TRANSPORTS {
        one(t, 17i32, 17)?;
        one(t, 33u32, 33)?;
        one(t, 64i64, 64)?;
        one(t, 0u64, 0)?;
    }
    Ok(())
}

fn bad_counts() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    for t in TRANSPORTS {
        let rb = Readback::<f64>::with_config(&ctx, ReadbackConfig::new(16).transport(t))?;
        let data = stream.clone_htod(&[1.5f64; 16])?;
        let neg = count_buf(&stream, -3i32)?;
        let tk = rb.enqueue(&stream, &data, &neg)?;
        expect_err(tk.wait(), "negative i32", |e| {
            matches!(e, Error::NegativeCount { count: -3 })
        })?;
        drop(tk);
        let neg64 = count_buf(&stream, i64::MIN)?;
        let tk = rb.enqueue(&stream, &data, &neg64)?;
        expect_err(
            tk.wait(),
            "negative i64",
            |e| matches!(e, Error::NegativeCount { count } if *count == i64::MIN),
        )?;
        drop(tk);
        let huge = count_buf(&stream, u64::MAX)?;
        let tk = rb.enqueue(&stream, &data, &huge)?;
        expect_err(
            tk.wait(),
            "u64::MAX",
            |e| matches!(e, Error::CountExceedsCapacity { count, capacity: 16 } if *count == u64::MAX),
        )?;
        drop(tk);
        let eleven = count_buf(&stream, 11u32)?;
        let short = data.slice(0..10);
        let tk = rb.enqueue(&stream, &short, &eleven)?;
        expect_err(tk.wait(), "count past the source", |e| {
            matches!(
                e,
                Error::CountExceedsSource {
                    count: 11,
                    column: 0,
                    source_len: 10
                }
            )
        })?;
        drop(tk);
        // The readback still works after errors.
        let ten = count_buf(&stream, 10u32)?;
        let tk = rb.enqueue(&stream, &short, &ten)?;
        let out = tk.wait()?;
        ensure!(out.as_slice() == [1.5f64; 10]);
    }
    Ok(())
}

fn over_capacity_then_grow() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let values: Vec<f64> = (0..20).map(|i| i as f64 * 0.25).collect();
    let data = stream.clone_htod(&values)?;
    let cnt = count_buf(&stream, 20i32)?;
    for t in TRANSPORTS {
        let rb = Readback::<f64>::with_config(&ctx, ReadbackConfig::new(8).transport(t))?;
        {
            let tk = rb.enqueue(&stream, &data, &cnt)?;
            expect_err(tk.wait(), "over capacity", |e| {
                matches!(
                    e,
                    Error::CountExceedsCapacity {
                        count: 20,
                        capacity: 8
                    }
                )
            })?;
        }
        rb.grow(20)?;
        ensure!(rb.info().capacity == 20);
        let tk = rb.enqueue(&stream, &data, &cnt)?;
        ensure!(tk.wait()?.as_slice() == values.as_slice());
    }
    Ok(())
}

fn configuration_errors() -> Result<()> {
    let ctx = ctx();
    let bad = |r: Result<Readback<f64>, Error>, what: &str| {
        expect_err(r, what, |e| matches!(e, Error::InvalidConfig { .. }))
    };
    bad(Readback::<f64>::new(&ctx, 0), "capacity 0")?;
    bad(
        Readback::<f64>::with_config(&ctx, ReadbackConfig::new(8).slots(0)),
        "0 slots",
    )?;
    bad(
        Readback::<f64>::new(&ctx, usize::MAX / 4),
        "byte size overflow",
    )?;
    bad(
        Readback::<f64>::with_config(&ctx, ReadbackConfig::new(8).slots(usize::MAX / 64)),
        "slot count overflow",
    )?;
    bad(
        Readback::<f64>::with_config(
            &ctx,
            ReadbackConfig::new(8)
                .transport(Transport::Staged)
                .wait(WaitMode::Trailer),
        ),
        "staged with trailer polling",
    )?;
    expect_err(sized_readback::device::open(10_000), "device 10000", |e| {
        matches!(
            e,
            Error::NoDevice {
                ordinal: 10_000,
                ..
            }
        )
    })
}

fn foreign_context_is_rejected() -> Result<()> {
    let ctx = ctx();
    let other = CudaContext::new_non_primary(0, 0)?;
    let other_stream = other.new_stream()?;
    let foreign_data = other_stream.clone_htod(&[1.0f64; 4])?;
    let foreign_count = other_stream.clone_htod(&[2i32])?;
    ctx.bind_to_thread()?;
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[1.0f64; 4])?;
    let cnt = stream.clone_htod(&[2i32])?;
    let rb = Readback::<f64>::new(&ctx, 4)?;
    expect_err(
        rb.enqueue(&stream, &foreign_data, &cnt),
        "foreign data",
        |e| matches!(e, Error::ForeignContext { what: "the data" }),
    )?;
    expect_err(
        rb.enqueue(&stream, &data, &foreign_count),
        "foreign count",
        |e| matches!(e, Error::ForeignContext { what: "the count" }),
    )?;
    expect_err(
        rb.enqueue(&other_stream, &data, &cnt),
        "foreign stream",
        |e| matches!(e, Error::ForeignContext { what: "the stream" }),
    )?;
    // Context-bound memory (cuMemAlloc) of the other context. Stream-ordered (pool)
    // allocations are device-scoped, report no context, and are accepted on the same device.
    let foreign_raw = sized_readback::testing::DeviceBuffer::new_zeroed(&other, 64)?;
    ctx.bind_to_thread()?;
    let fptr = foreign_raw.ptr();
    let (cptr, _g2) = cnt.device_ptr(&stream);
    // SAFETY: the call must reject the foreign address before any device work.
    let r = unsafe { rb.enqueue_raw(&stream, None, fptr, 4, sized_readback::RawCount::i32(cptr)) };
    expect_err(r, "foreign raw pointer", |e| {
        matches!(e, Error::ForeignContext { .. })
    })?;
    // And the readback still works.
    ensure!(rb.enqueue(&stream, &data, &cnt)?.wait()?.as_slice() == [1.0, 1.0]);
    Ok(())
}

fn bad_raw_pointers() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let rb = Readback::<f64>::new(&ctx, 4)?;
    let data = stream.clone_htod(&[1.0f64; 4])?;
    let cnt = stream.clone_htod(&[2i32, 2])?;
    let (d, _g) = data.device_ptr(&stream);
    let (c, _g2) = cnt.device_ptr(&stream);
    let host = [0u8; 64];
    // SAFETY: each call must be rejected before any device work.
    unsafe {
        expect_err(
            rb.enqueue_raw(&stream, None, d, 4, sized_readback::RawCount::i32(0)),
            "null count",
            |e| matches!(e, Error::BadPointer { .. }),
        )?;
        expect_err(
            rb.enqueue_raw(&stream, None, d, 4, sized_readback::RawCount::i32(c + 2)),
            "misaligned count",
            |e| matches!(e, Error::BadPointer { align: 4, .. }),
        )?;
        expect_err(
            rb.enqueue_raw(
                &stream,
                None,
                host.as_ptr() as u64,
                4,
                sized_readback::RawCount::i32(c),
            ),
            "host address",
            |e| matches!(e, Error::BadPointer { .. }),
        )?;
        expect_err(
            rb.enqueue_raw(&stream, None, 0, 4, sized_readback::RawCount::i32(c)),
            "null data",
            |e| matches!(e, Error::BadPointer { .. }),
        )?;
        let t = rb.enqueue_raw(&stream, None, d, 4, sized_readback::RawCount::i32(c + 4))?;
        ensure!(t.wait()?.as_slice() == [1.0, 1.0]);
    }
    Ok(())
}

/// `srb_produce_f64(data, count, n, cycle)`: n doubles `i + 0.5 * cycle`, then the count.
fn produce_f64(
    module: &Module,
    stream: &CudaStream,
    grid: u32,
    mut data: u64,
    mut count: u64,
    mut n: u64,
    mut cycle: u64,
) -> Result<()> {
    launch(
        module,
        "srb_produce_f64",
        stream,
        grid,
        256,
        &mut [
            (&mut data as *mut u64).cast(),
            (&mut count as *mut u64).cast(),
            (&mut n as *mut u64).cast(),
            (&mut cycle as *mut u64).cast(),
        ],
    )
}

/// A producer kernel on one stream, an event, the readback on another stream (the seed's shape).
fn raw_pointers_after_an_event() -> Result<()> {
    let ctx = ctx();
    let module = Module::load(&ctx)?;
    let compute = ctx.new_stream()?;
    let copy = ctx.new_stream()?;
    let done = ctx.new_event(None)?;
    let n = 100_000u64;
    let data = compute.alloc_zeros::<f64>(n as usize)?;
    let cnt = compute.alloc_zeros::<i32>(1)?;
    compute.synchronize()?;
    let (d, _g) = data.device_ptr(&compute);
    let (c, _g2) = cnt.device_ptr(&compute);
    for t in TRANSPORTS {
        let rb = Readback::<f64>::with_config(&ctx, ReadbackConfig::new(n as usize).transport(t))?;
        for cycle in 0..5u64 {
            let nn = n - cycle * 1000;
            produce_f64(&module, &compute, 128, d, c, nn, cycle)?;
            done.record(&compute)?;
            // SAFETY: both buffers live until the end of this function; the next producer
            // launch comes after this ticket is waited on.
            let tk = unsafe {
                rb.enqueue_raw(
                    &copy,
                    Some(&done),
                    d,
                    n as usize,
                    sized_readback::RawCount::i32(c),
                )?
            };
            let out = tk.wait()?;
            ensure!(out.count() as u64 == nn, "count {} != {nn}", out.count());
            for (i, v) in out.iter().enumerate() {
                ensure!(*v == i as f64 + 0.5 * cycle as f64, "element {i} = {v}");
            }
        }
    }
    Ok(())
}

fn slots_exhausted_then_reused() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[3.0f64; 8])?;
    let cnt = count_buf(&stream, 8i32)?;
    let rb = Readback::<f64>::with_config(&ctx, ReadbackConfig::new(8).slots(2))?;
    let a = rb.enqueue(&stream, &data, &cnt)?;
    let b = rb.enqueue(&stream, &data, &cnt)?;
    ensure!(rb.slots_in_use() == 2);
    expect_err(rb.enqueue(&stream, &data, &cnt), "third enqueue", |e| {
        matches!(e, Error::SlotsExhausted { slots: 2 })
    })?;
    ensure!(a.seq() == 1 && b.seq() == 2 && a.slot() != b.slot());
    let view_a = a.wait()?;
    ensure!(view_a.as_slice() == [3.0; 8]);
    drop(b); // unwaited: its slot is reused; the new pack waits for the old one on the device
    let c = rb.enqueue(&stream, &data, &cnt)?;
    ensure!(c.seq() == 3);
    ensure!(c.wait()?.as_slice() == [3.0; 8]);
    ensure!(view_a.as_slice() == [3.0; 8], "a held view changed");
    Ok(())
}

fn polling_and_timeouts() -> Result<()> {
    let ctx = ctx();
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[7i32; 32])?;
    let cnt = stream.alloc_zeros::<i32>(1)?;
    stream.synchronize()?;
    let (c, _g) = cnt.device_ptr(&stream);
    let modes = [
        (Transport::Mapped, WaitMode::Trailer),
        (Transport::Mapped, WaitMode::Event),
        (Transport::Staged, WaitMode::Event),
    ];
    for ((t, w), pdl) in modes.into_iter().flat_map(|m| [(m, false), (m, true)]) {
        let config = ReadbackConfig::new(32)
            .transport(t)
            .wait(w)
            .programmatic_launch(pdl);
        let rb = Readback::<i32>::with_config(&ctx, config)?;
        busy_then_count(&module, &stream, c, 21, 200_000_000)?; // 200 ms
        let t0 = std::time::Instant::now();
        let tk = rb.enqueue(&stream, &data, &cnt)?;
        let enqueue = t0.elapsed();
        ensure!(
            tk.try_wait()?.is_none(),
            "{t:?}/{w:?}/pdl={pdl}: ready while the producer runs (enqueue took {enqueue:?})"
        );
        expect_err(
            tk.wait_timeout(Duration::from_millis(5)),
            "short timeout",
            |e| matches!(e, Error::Timeout { .. }),
        )?;
        let out = tk.wait_timeout(Duration::from_secs(20))?;
        ensure!(out.count() == 21 && out.as_slice() == [7; 21]);
        ensure!(tk.try_wait()?.is_some());
    }
    Ok(())
}

fn drop_everything_in_flight() -> Result<()> {
    let ctx = ctx();
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[1u8; 1 << 16])?;
    let cnt = stream.alloc_zeros::<i32>(1)?;
    stream.synchronize()?;
    let (c, _g) = cnt.device_ptr(&stream);
    for t in TRANSPORTS {
        let rb =
            Readback::<u8>::with_config(&ctx, ReadbackConfig::new(1 << 16).transport(t).slots(3))?;
        busy_then_count(&module, &stream, c, 1 << 16, 50_000_000)?;
        let t1 = rb.enqueue(&stream, &data, &cnt)?;
        let t2 = rb.enqueue(&stream, &data, &cnt)?;
        drop(t1);
        drop(rb); // t2 keeps the slots alive
        let out = t2.wait()?;
        ensure!(out.count() == 1 << 16 && out.iter().all(|&b| b == 1));
        drop(t2); // last owner: waits for in-flight packs, then frees
    }
    stream.synchronize()?;
    ctx.check_err()?;
    Ok(())
}

fn random_cycles() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cap = 50_000usize;
    let (dev, host) = pattern_bytes(&stream, cap * 8, 42)?;
    // SAFETY: cap * 8 bytes hold cap f64.
    let data = unsafe { dev.transmute::<f64>(cap) }.context("transmute")?;
    let mut verified = 0u64;
    for t in TRANSPORTS {
        for slots in [1usize, 3] {
            let rb = Readback::<f64>::with_config(
                &ctx,
                ReadbackConfig::new(cap).transport(t).slots(slots),
            )?;
            let mut state = 0x1234u64 + slots as u64;
            let mut inflight = std::collections::VecDeque::new();
            for _ in 0..300 {
                state = pattern::mix(state);
                let n = match state % 8 {
                    0 => 0,
                    1 => 1,
                    2 => cap,
                    _ => (state >> 8) as usize % (cap + 1),
                };
                let cnt = count_buf(&stream, n as u64)?;
                if inflight.len() == slots {
                    let (tk, n, _c): (sized_readback::Ticket<f64>, usize, CudaSlice<u64>) =
                        inflight.pop_front().unwrap();
                    let out = tk.wait()?;
                    ensure!(out.count() == n);
                    ensure!(
                        as_bytes(out.as_slice()) == &host[..n * 8],
                        "{t:?}: data of a {n}-element readback"
                    );
                    verified += 1;
                }
                let tk = rb.enqueue(&stream, &data, &cnt)?;
                inflight.push_back((tk, n, cnt));
            }
            for (tk, n, _c) in inflight {
                let out = tk.wait()?;
                ensure!(out.count() == n && as_bytes(out.as_slice()) == &host[..n * 8]);
                verified += 1;
            }
        }
    }
    ensure!(verified == 4 * 300);
    Ok(())
}

fn programmatic_launch_on_and_off() -> Result<()> {
    let ctx = ctx();
    let module = Module::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let n = 4096u64;
    let data = stream.alloc_zeros::<f64>(n as usize)?;
    let cnt = stream.alloc_zeros::<i32>(1)?;
    stream.synchronize()?;
    let (d, _g) = data.device_ptr(&stream);
    let (c, _g2) = cnt.device_ptr(&stream);
    for pdl in [false, true] {
        let rb = Readback::<f64>::with_config(
            &ctx,
            ReadbackConfig::new(n as usize).programmatic_launch(pdl),
        )?;
        ensure!(rb.info().launch_shape.programmatic == pdl);
        for cycle in 0..50u64 {
            let nn = (cycle * 83) % (n + 1);
            produce_f64(&module, &stream, 16, d, c, nn, cycle)?;
            // SAFETY: same stream as the producer; buffers outlive the wait below.
            let tk = unsafe {
                rb.enqueue_raw(
                    &stream,
                    None,
                    d,
                    n as usize,
                    sized_readback::RawCount::i32(c),
                )?
            };
            let out = tk.wait()?;
            ensure!(
                out.count() as u64 == nn,
                "pdl={pdl}: count {} != {nn}",
                out.count()
            );
            ensure!(
                out.iter()
                    .enumerate()
                    .all(|(i, v)| *v == i as f64 + 0.5 * cycle as f64),
                "pdl={pdl}: data"
            );
        }
    }
    Ok(())
}

/// A ticket-based readback enqueued into a stream under graph capture is refused (its frozen
/// slot and sequence number would be replayed after the ticket is gone), the capture stays
/// usable, and a wait with `Duration::MAX` means "no deadline", not an overflow.
fn capture_is_refused_and_long_timeouts_work() -> Result<()> {
    use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let data = stream.clone_htod(&[2.5f64; 8])?;
    let cnt = count_buf(&stream, 8i32)?;
    stream.synchronize()?;
    let (d, _g) = data.device_ptr(&stream);
    let (c, _g2) = cnt.device_ptr(&stream);
    let rb = Readback::<f64>::new(&ctx, 8)?;
    let capture = ctx.new_stream()?;
    capture.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    // SAFETY: must be refused before any device work is enqueued.
    let raw = unsafe { rb.enqueue_raw(&capture, None, d, 8, sized_readback::RawCount::i32(c)) };
    let safe = rb.enqueue(&capture, &data, &cnt);
    let graph = capture.end_capture(CUgraphInstantiate_flags(0))?;
    if let Some(g) = &graph {
        let mut nodes = 0usize;
        // SAFETY: a live graph; a null node array asks only for the count.
        unsafe {
            cudarc::driver::sys::cuGraphGetNodes(g.cu_graph(), std::ptr::null_mut(), &mut nodes)
        }
        .result()?;
        ensure!(nodes == 0, "{nodes} node(s) were captured");
    }
    expect_err(raw, "raw enqueue under capture", |e| {
        matches!(e, Error::StreamCapturing)
    })?;
    expect_err(safe, "enqueue under capture", |e| {
        matches!(e, Error::StreamCapturing)
    })?;
    ensure!(rb.slots_in_use() == 0, "a refused enqueue kept a slot");
    // An `after` event recorded inside a capture joins the waiting stream to that capture:
    // refused too, before anything is enqueued on it.
    let origin = ctx.new_stream()?;
    let joined = ctx.new_stream()?;
    let in_capture = ctx.new_event(None)?;
    origin.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    in_capture.record(&origin)?;
    let r = rb.enqueue_after(&joined, &in_capture, &data, &cnt);
    let ended = origin.end_capture(CUgraphInstantiate_flags(0));
    expect_err(r, "enqueue after an event of a capture", |e| {
        matches!(e, Error::StreamCapturing)
    })?;
    // Nothing of the readback's went into the graph (the driver accepts ending this capture:
    // the joined stream added no work).
    if let Ok(Some(g)) = &ended {
        let mut nodes = 0usize;
        // SAFETY: a live graph; a null node array asks only for the count.
        unsafe {
            cudarc::driver::sys::cuGraphGetNodes(g.cu_graph(), std::ptr::null_mut(), &mut nodes)
        }
        .result()?;
        ensure!(
            nodes == 0,
            "{nodes} node(s) were captured through the joined stream"
        );
    }
    ensure!(rb.slots_in_use() == 0, "a refused enqueue kept a slot");
    // Tearing these down may leave an error in cudarc's per-context record (the joined
    // stream's capture state); drain it here, while this test runs alone.
    drop((ended, in_capture, joined, origin));
    let _ = ctx.check_err();
    let t = rb.enqueue(&stream, &data, &cnt)?;
    ensure!(t.wait_timeout(Duration::MAX)?.as_slice() == [2.5; 8]);
    Ok(())
}
