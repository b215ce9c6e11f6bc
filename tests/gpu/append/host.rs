//! Host-sequenced appends: counts at the edges, element sizes, shapes, many cycles, a kernel
//! that does not finish, misuse.
use super::roundtrip::{kernel, roundtrip, Launch};
use super::rows::{expected_rows, rows_of, schema_of};
use super::{ctx, sms};
use anyhow::{bail, ensure, Context as _, Result};
use sized_readback::testing::pattern;
use sized_readback::{AppendReadback, Error, ReadbackConfig, Transport};
use std::time::Duration;
use test_support::TRANSPORTS;

pub(super) fn counts_at_the_edges() -> Result<()> {
    let (cap, spill) = (4096usize, 1024usize);
    for t in TRANSPORTS {
        for count in [
            0,
            1,
            cap as u64 - 1,
            cap as u64,
            cap as u64 + 1,
            (cap + spill) as u64,
            (cap + spill) as u64 + 1,
            3 * cap as u64,
        ] {
            roundtrip(
                "srbt_append_u64",
                &[8],
                t,
                cap,
                spill,
                20_000,
                count,
                (40, 1, 1),
                (256, 1, 1),
                count,
            )?;
        }
        // No spill region: everything past the capacity is dropped, and counted.
        roundtrip(
            "srbt_append_u64",
            &[8],
            t,
            cap,
            0,
            20_000,
            cap as u64 + 100,
            (40, 1, 1),
            (256, 1, 1),
            7,
        )?;
    }
    Ok(())
}

pub(super) fn element_sizes() -> Result<()> {
    for (name, size) in [
        ("srbt_append_u8", 1usize),
        ("srbt_append_u16", 2),
        ("srbt_append_u32", 4),
        ("srbt_append_u64", 8),
        ("srbt_append_b12", 12),
        ("srbt_append_b16", 16),
    ] {
        for t in TRANSPORTS {
            roundtrip(
                name,
                &[size],
                t,
                50_000,
                50_000,
                100_000,
                33_333,
                (64, 1, 1),
                (256, 1, 1),
                11,
            )?;
        }
    }
    Ok(())
}

pub(super) fn block_sizes_and_grids() -> Result<()> {
    let sms = sms();
    for (name, b) in [
        ("srbt_append_u64_b32", 32u32),
        ("srbt_append_u64_b64", 64),
        ("srbt_append_u64_b128", 128),
        ("srbt_append_u64", 256),
        ("srbt_append_u64_b512", 512),
        ("srbt_append_u64_b1024", 1024),
    ] {
        for grid in [1, 7, sms, 8 * sms] {
            roundtrip(
                name,
                &[8],
                Transport::Mapped,
                1 << 18,
                0,
                300_000,
                150_001,
                (grid, 1, 1),
                (b, 1, 1),
                u64::from(b + grid),
            )?;
        }
    }
    Ok(())
}

pub(super) fn several_columns_and_3d_shapes() -> Result<()> {
    let sizes = [8usize, 4, 12, 1];
    for t in TRANSPORTS {
        for (grid, block) in [
            ((32, 1, 1), (256, 1, 1)),
            ((4, 3, 2), (8, 8, 4)),
            ((2, 2, 2), (16, 16, 1)),
        ] {
            roundtrip(
                "srbt_append_mixed",
                &sizes,
                t,
                100_000,
                1000,
                150_000,
                77_777,
                grid,
                block,
                5,
            )?;
        }
        roundtrip(
            "srbt_append_mixed",
            &sizes,
            t,
            1000,
            500,
            150_000,
            1400,
            (32, 1, 1),
            (256, 1, 1),
            6,
        )?;
    }
    Ok(())
}

/// Many appends of random counts into one readback of three slots, several in flight, on two
/// streams: the slots are reused (scratch reset by the kernels themselves) and every row of
/// every append comes back exactly once.
pub(super) fn many_cycles_random_counts() -> Result<()> {
    let ctx = ctx();
    let streams = [ctx.new_stream()?, ctx.new_stream()?];
    let k = kernel("srbt_append_u64")?;
    let cap = 10_000usize;
    let rb = AppendReadback::new(&ctx, &schema_of(&[8]), ReadbackConfig::new(cap).slots(3))?;
    let cycles: u64 = std::env::var("SRB_APPEND_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let mut pending = std::collections::VecDeque::new();
    for cyc in 0..cycles {
        let count = pattern::mix(cyc) % (cap as u64 + 1);
        let stream = &streams[(cyc % 2) as usize];
        let launch = Launch {
            kernel: &k,
            grid: (1 + (pattern::mix(cyc + 99) % 200) as u32, 1, 1),
            block: (256, 1, 1),
            n: 20_000,
            count,
            seed: cyc,
            early: 0,
        };
        pending.push_back((rb.append(stream, |d| launch.run(stream, d))?, count, cyc));
        if pending.len() == 3 {
            let (t, count, seed) = pending.pop_front().expect("three pending");
            let out = t.wait()?;
            ensure!(
                rows_of(&out, &[8])? == expected_rows(20_000, count, seed, &[8]),
                "cycle {seed}: rows differ"
            );
        }
    }
    for (t, count, seed) in pending {
        let out = t.wait()?;
        ensure!(
            rows_of(&out, &[8])? == expected_rows(20_000, count, seed, &[8]),
            "cycle {seed}"
        );
    }
    Ok(())
}

/// A kernel whose block returns before finish(): the wait reports it once the stream is done
/// (never a hang), and the slot's next append works (its scratch is reset first).
pub(super) fn a_kernel_that_does_not_finish() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let k = kernel("srbt_append_u64")?;
    for t in TRANSPORTS {
        let rb = AppendReadback::new(
            &ctx,
            &schema_of(&[8]),
            ReadbackConfig::new(5000).slots(1).transport(t),
        )?;
        let mut launch = Launch {
            kernel: &k,
            grid: (16, 1, 1),
            block: (256, 1, 1),
            n: 10_000,
            count: 3000,
            seed: 1,
            early: 5,
        };
        let ticket = rb.append(&stream, |d| launch.run(&stream, d))?;
        match ticket.wait_timeout(Duration::from_secs(20)) {
            Err(Error::AppendUnfinished { seq }) if seq == ticket.seq() => {}
            Err(e) => bail!("{t:?}: unfinished kernel gave {e}"),
            Ok(_) => bail!("{t:?}: unfinished kernel gave a readout"),
        }
        drop(ticket);
        launch.early = 0;
        let ticket = rb.append(&stream, |d| launch.run(&stream, d))?;
        let out = ticket.wait()?;
        ensure!(
            rows_of(&out, &[8])? == expected_rows(10_000, 3000, 1, &[8]),
            "{t:?}: the append after an unfinished one is wrong"
        );
    }
    Ok(())
}

/// A kernel whose BlockAppend does not match the readback appends nothing and is reported.
pub(super) fn misuse_is_reported() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let k = kernel("srbt_append_u64")?;
    let launch = |block: u32| Launch {
        kernel: &k,
        grid: (4, 1, 1),
        block: (block, 1, 1),
        n: 4000,
        count: 100,
        seed: 2,
        early: 0,
    };
    // Launched with 128 threads for a BlockAppend<256>.
    let rb = AppendReadback::new(&ctx, &schema_of(&[8]), ReadbackConfig::new(1000))?;
    let l = launch(128);
    let t = rb.append(&stream, |d| l.run(&stream, d))?;
    ensure!(
        matches!(t.wait(), Err(Error::AppendMisuse { columns: 1, .. })),
        "block size"
    );
    drop(t);
    // A readback of one 4-byte column filled by a kernel of one 8-byte column.
    let rb4 = AppendReadback::new(&ctx, &schema_of(&[4]), ReadbackConfig::new(1000))?;
    let l = launch(256);
    let t = rb4.append(&stream, |d| l.run(&stream, d))?;
    let e = t.wait().err().context("wrong column size accepted")?;
    ensure!(e.to_string().contains("1 column(s) of 4 bytes"), "{e}");
    drop(t);
    // The same readback then works with a matching kernel.
    let t = rb.append(&stream, |d| launch(256).run(&stream, d))?;
    ensure!(rows_of(&t.wait()?, &[8])? == expected_rows(4000, 100, 2, &[8]));
    // A launch error is the append's error, and gives the slot back.
    let r = rb.append(&stream, |_| {
        Err(cudarc::driver::DriverError(
            cudarc::driver::sys::CUresult::CUDA_ERROR_INVALID_VALUE,
        ))
    });
    ensure!(
        matches!(
            r,
            Err(Error::Cuda {
                call: "the append kernel's launch",
                ..
            })
        ),
        "{r:?}"
    );
    ensure!(rb.slots_in_use() == 1, "a failed launch kept a slot");
    Ok(())
}
