//! Bad input: every kind of bad argument is the expected error value, and the readback works
//! after each.
use super::{ctx, expect_err, BAD_INPUTS};
use anyhow::{ensure, Result};
use cudarc::driver::{CudaContext, DevicePtr};
use sized_readback::testing::DeviceBuffer;
use sized_readback::{Error, Readback, ReadbackConfig, Transport, WaitMode};
use std::sync::atomic::Ordering;
use test_support::Test;

pub const TESTS: &[Test] = test_support::tests![bad_inputs_are_errors];

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
    ensure!(
        rb.info().capacity == 4,
        "a failed grow changed the readback"
    );
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
