//! Graph append readbacks: replays in order, and an overflowing replay with its spill.
use super::ctx;
use super::roundtrip::{kernel, Launch};
use super::rows::{expected_rows, rows_of, schema_of, P};
use anyhow::{bail, ensure, Context as _, Result};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use sized_readback::testing::{pattern, DeviceBuffer};
use sized_readback::{AppendDesc, Error, GraphReadback, ReadbackConfig};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Duration;

/// A graph whose append kernel and a step counter are captured once and replayed: every
/// replay's rows come back in order of replays, with the overrun rules of graph readbacks.
pub(super) fn graph_replay() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let k = kernel("srbt_append_step")?;
    let advance = kernel("srbe_advance")?;
    let cap = 5000usize;
    let sizes = [8usize, 4];
    let g = GraphReadback::new(&ctx, &schema_of(&sizes), ReadbackConfig::new(cap).slots(4))?;
    let desc = g.append_desc()?;
    let step = DeviceBuffer::new_zeroed(&ctx, 8)?;
    let (n, max_count) = (20_000u64, cap as u64);
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    {
        let mut d = desc;
        let (mut nn, mut mc, mut p, mut sp) = (n, max_count, P, step.ptr());
        let mut args: [*mut c_void; 5] = [
            (&mut d as *mut AppendDesc).cast(),
            (&mut nn as *mut u64).cast(),
            (&mut mc as *mut u64).cast(),
            (&mut p as *mut u64).cast(),
            (&mut sp as *mut u64).cast(),
        ];
        // SAFETY: srbt_append_step(srb_append_desc, uint64_t, uint64_t, uint64_t, const
        // uint64_t*); the step buffer outlives the graph's launches (synchronized below).
        unsafe { k.launch_3d(stream.cu_stream(), (30, 1, 1), (256, 1, 1), &mut args)? };
        let mut sp = step.ptr();
        let mut args: [*mut c_void; 1] = [(&mut sp as *mut u64).cast()];
        // SAFETY: srbe_advance(uint64_t*) on the 8-byte step buffer.
        unsafe { advance.launch_3d(stream.cu_stream(), (1, 1, 1), (32, 1, 1), &mut args)? };
    }
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))?
        .context("an empty capture")?;
    let replays: u64 = 300;
    for r in 0..replays {
        graph.launch()?;
        // Keep at most three replays ahead of the host (4 slots: no overrun).
        if r >= 2 {
            let seq = g.next_seq();
            let rp = g.next_timeout(Duration::from_secs(10))?;
            ensure!(rp.seq() == seq);
            let s = seq - 1;
            let count = pattern::mix(s) % (max_count + 1);
            ensure!(
                rp.count() as u64 == count,
                "replay {seq}: {} rows, want {count}",
                rp.count()
            );
            ensure!(
                rows_of(&rp.readout(), &sizes)? == expected_rows(n, count, s, &sizes),
                "replay {seq}: rows differ"
            );
        }
    }
    while g.next_seq() <= replays {
        let seq = g.next_seq();
        let rp = g.next_timeout(Duration::from_secs(10))?;
        let count = pattern::mix(seq - 1) % (max_count + 1);
        ensure!(
            rows_of(&rp.readout(), &sizes)? == expected_rows(n, count, seq - 1, &sizes),
            "replay {seq}"
        );
    }
    // Overrun: hold one replay and run five more; the ring of 4 drops the ones it cannot
    // place, and reports each.
    graph.launch()?;
    let held = g.next_timeout(Duration::from_secs(10))?;
    for _ in 0..5 {
        graph.launch()?;
    }
    stream.synchronize()?;
    ensure!(g.last_overrun() > 0, "no overrun recorded");
    let held_seq = held.seq();
    drop(held);
    let mut overruns = 0;
    for _ in 0..5 {
        match g.next_timeout(Duration::from_secs(10)) {
            Ok(rp) => {
                let count = pattern::mix(rp.seq() - 1) % (max_count + 1);
                ensure!(
                    rows_of(&rp.readout(), &sizes)?
                        == expected_rows(n, count, rp.seq() - 1, &sizes)
                );
            }
            Err(Error::Overrun { seq }) => {
                ensure!(seq > held_seq + 3, "replay {seq} dropped with a free slot");
                overruns += 1;
            }
            Err(e) => bail!("after the overrun: {e}"),
        }
    }
    ensure!(
        overruns == 2,
        "{overruns} overruns, want 2 (slots for three of five)"
    );
    drop(graph);
    stream.synchronize()?;
    // Packs cannot be recorded on a readback that append kernels fill.
    let count = DeviceBuffer::new_zeroed(&ctx, 8)?;
    // SAFETY: refused before anything is launched.
    let r = unsafe {
        g.record(
            &stream,
            None,
            &[
                sized_readback::ColumnSource {
                    ptr: step.ptr(),
                    len: 1,
                },
                sized_readback::ColumnSource {
                    ptr: step.ptr(),
                    len: 1,
                },
            ],
            sized_readback::RawCount::u64(count.ptr()),
        )
    };
    ensure!(matches!(r, Err(Error::RecordingMismatch { .. })), "{r:?}");
    Ok(())
}

/// A graph append that overflows: `next` reports it, `overflowed` hands out the replay with
/// its capacity rows and its spill.
pub(super) fn graph_replay_overflow() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let k = kernel("srbt_append_u64")?;
    let cap = 1000usize;
    let g = Arc::new(GraphReadback::new(
        &ctx,
        &schema_of(&[8]),
        ReadbackConfig::new(cap).slots(2).spill(600),
    )?);
    let desc = g.append_desc()?;
    let launch = Launch {
        kernel: &k,
        grid: (20, 1, 1),
        block: (256, 1, 1),
        n: 10_000,
        count: 1500,
        seed: 9,
        early: 0,
    };
    // Not capturing: the kernel runs once, device-sequenced.
    launch.run(&stream, &desc)?;
    match g.next_timeout(Duration::from_secs(10)) {
        Err(Error::AppendOverflow {
            count: 1500,
            capacity: 1000,
            spilled: 500,
            dropped: 0,
        }) => {}
        other => bail!("overflowed replay gave {:?}", other.map(|r| r.count())),
    }
    let rp = g.overflowed().context("the overflowed replay")?;
    let mut got = rows_of(&rp.readout(), &[8])?;
    let spill = rp.fetch_spill(&stream)?.context("a spill")?;
    got.extend(rows_of(&spill.wait()?, &[8])?);
    got.sort_unstable();
    ensure!(
        got == expected_rows(10_000, 1500, 9, &[8]),
        "slot + spill rows differ"
    );
    drop(rp);
    // The next replay works as usual.
    let launch = Launch {
        count: 10,
        seed: 10,
        ..launch
    };
    launch.run(&stream, &desc)?;
    let rp = g.next_timeout(Duration::from_secs(10))?;
    ensure!(rows_of(&rp.readout(), &[8])? == expected_rows(10_000, 10, 10, &[8]));
    drop(rp);
    // The same through `take`, the bindings' path: the overflowed replay comes owned, with its
    // number, and its spill is fetched on a raw stream.
    let launch = Launch {
        count: 1500,
        seed: 11,
        ..launch
    };
    launch.run(&stream, &desc)?;
    let t = g
        .take(Some(Duration::from_secs(10)))?
        .context("one consumer: never busy")?;
    ensure!(t.seq == 3, "seq {}", t.seq);
    ensure!(
        matches!(
            t.result,
            Err(Error::AppendOverflow {
                count: 1500,
                capacity: 1000,
                spilled: 500,
                dropped: 0,
            })
        ),
        "taken overflow: {:?}",
        t.result
    );
    let rp = t.replay.context("an overflowed replay stays held")?;
    ensure!(
        (rp.seq(), rp.count()) == (3, cap),
        "{} {}",
        rp.seq(),
        rp.count()
    );
    let mut got = rows_of(&rp.readout(), &[8])?;
    // SAFETY: a live stream of the readback's context.
    let spill = unsafe { rp.fetch_spill_raw_stream(stream.cu_stream())? }.context("a spill")?;
    got.extend(rows_of(&spill.wait()?, &[8])?);
    got.sort_unstable();
    ensure!(
        got == expected_rows(10_000, 1500, 11, &[8]),
        "owned replay: slot + spill rows differ"
    );
    Ok(())
}
