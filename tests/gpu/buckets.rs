//! Bucketed readbacks: append kernels that name a bucket per row (`srbt_append_buckets`,
//! through `srb::BlockAppendTo`), and the bucket pack of device data the user already
//! partitioned (counts and offsets). Every bucket is checked row by row (appends as multisets,
//! since their rows come in no particular order; packs in order).
use anyhow::{bail, ensure, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr};
use sized_readback::testing::{pattern, Kernel, Kernels};
use sized_readback::{
    AppendDesc, AppendReadback, BucketReadback, ColumnReadout, ColumnSchema, CountType, Error,
    ReadbackConfig, Transport,
};
use std::ffi::c_void;
use std::sync::Arc;
use test_support::{SubjectContext, Test, TRANSPORTS};

pub const TESTS: &[Test] = test_support::tests![
    append_into_buckets,
    bad_buckets_and_overflow,
    many_cycles_random_bucket_counts,
    pack_partitioned_data,
    pack_bad_inputs,
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

fn kernel() -> Result<Kernel> {
    Ok(Kernels::load(&ctx())?.function("srbt_append_buckets")?)
}

/// A prime above every candidate count: `i -> i * P % n` permutes `0..n`.
const P: u64 = 2_147_483_647;

/// Column c of row i for `seed` (csrc/testing/append.cu's srbt_value, first 8 / 4 bytes).
fn value(seed: u64, i: u64, c: u64) -> u64 {
    pattern::mix(seed.wrapping_add(8 * i + c))
}

/// The bucket srbt_append_buckets gives row i.
fn bucket_of(seed: u64, i: u64, named: u64) -> u64 {
    pattern::mix(seed.wrapping_add(0x5555 + i)) % named
}

/// Per bucket (0..named), the sorted rows (u64, u32) the kernel appends.
fn expected(n: u64, count: u64, seed: u64, named: u64) -> Vec<Vec<(u64, u32)>> {
    let mut out = vec![Vec::new(); named as usize];
    for i in (0..n).filter(|&i| (i as u128 * P as u128 % n as u128) < count as u128) {
        out[bucket_of(seed, i, named) as usize].push((value(seed, i, 0), value(seed, i, 1) as u32));
    }
    for b in &mut out {
        b.sort_unstable();
    }
    out
}

fn bucket_rows(out: &ColumnReadout<'_>, b: usize) -> Result<Vec<(u64, u32)>> {
    let a = out.bucket_column_as::<u64>(0, b)?;
    let c = out.bucket_column_as::<u32>(1, b)?;
    let mut v: Vec<(u64, u32)> = a.iter().copied().zip(c.iter().copied()).collect();
    v.sort_unstable();
    Ok(v)
}

fn schema() -> ColumnSchema {
    let mut s = ColumnSchema::new();
    s.column::<u64>();
    s.column::<u32>();
    s
}

#[allow(clippy::too_many_arguments)]
fn launch(
    k: &Kernel,
    stream: &CudaStream,
    d: &AppendDesc,
    grid: u32,
    n: u64,
    count: u64,
    seed: u64,
    named: u32,
) -> std::result::Result<(), cudarc::driver::DriverError> {
    let mut d = *d;
    let (mut nn, mut c, mut p, mut s, mut nm) = (n, count, P, seed, named);
    let mut args: [*mut c_void; 6] = [
        (&mut d as *mut AppendDesc).cast(),
        (&mut nn as *mut u64).cast(),
        (&mut c as *mut u64).cast(),
        (&mut p as *mut u64).cast(),
        (&mut s as *mut u64).cast(),
        (&mut nm as *mut u32).cast(),
    ];
    // SAFETY: srbt_append_buckets(srb_append_desc, uint64_t x4, unsigned), 256 threads per
    // block as its BlockAppendTo; it touches only the readback's memory through the descriptor.
    unsafe { k.launch_3d(stream.cu_stream(), (grid, 1, 1), (256, 1, 1), &mut args) }.map_err(|e| {
        match e {
            Error::Cuda { source, .. } => source,
            other => panic!("launch: {other}"),
        }
    })
}

/// Appends `count` of `n` candidates into `k` buckets of `cap` rows (`spill` each) and checks
/// every bucket; rows naming a bucket in `k..named` must be reported as bad and dropped.
#[allow(clippy::too_many_arguments)]
fn append_case(
    t: Transport,
    k: usize,
    cap: usize,
    spill: usize,
    n: u64,
    count: u64,
    named: u32,
    seed: u64,
) -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let kern = kernel()?;
    let rb = AppendReadback::new(
        &ctx,
        &schema(),
        ReadbackConfig::new(cap)
            .buckets(k)
            .spill(spill)
            .transport(t),
    )?;
    let want = expected(n, count, seed, u64::from(named));
    let ticket = rb.append(&stream, |d| {
        launch(&kern, &stream, d, 30, n, count, seed, named)
    })?;
    let what = format!("{t:?} k {k} cap {cap} spill {spill} count {count} named {named}");
    let bad: usize = want[k.min(want.len())..].iter().map(Vec::len).sum();
    let over = want[..k].iter().any(|b| b.len() > cap);
    match ticket.wait() {
        Ok(out) => {
            ensure!(bad == 0 && !over, "{what}: no error reported");
            ensure!(out.buckets() == k, "{what}: {} buckets", out.buckets());
            for (b, w) in want.iter().enumerate().take(k) {
                ensure!(
                    out.bucket_count(b) == Some(w.len()),
                    "{what}: bucket {b} count"
                );
                ensure!(&bucket_rows(&out, b)? == w, "{what}: bucket {b} rows");
            }
            ensure!(out.count() == want.iter().map(Vec::len).sum::<usize>());
            ensure!(
                out.column_as::<u64>(0).is_err(),
                "a bucketed readout is read by bucket"
            );
        }
        Err(Error::BadBucket {
            bucket,
            buckets,
            rows,
        }) => {
            ensure!(bad > 0, "{what}: bad bucket reported without one");
            ensure!(
                rows == bad as u64 && buckets == k && (bucket as usize) >= k,
                "{what}: bad bucket {bucket} of {buckets}, {rows} rows (want {bad})"
            );
            let out = ticket.partial()?;
            for (b, w) in want.iter().enumerate().take(k) {
                if w.len() <= cap {
                    ensure!(
                        &bucket_rows(&out, b)? == w,
                        "{what}: bucket {b} next to bad rows"
                    );
                }
            }
        }
        Err(Error::AppendOverflow {
            count: c,
            capacity,
            spilled,
            dropped,
        }) => {
            ensure!(over && bad == 0, "{what}: overflow without one");
            ensure!(capacity == cap && c == count, "{what}: overflow numbers");
            let want_spilled: usize = want[..k]
                .iter()
                .map(|w| w.len().saturating_sub(cap).min(spill))
                .sum();
            let want_over: usize = want[..k].iter().map(|w| w.len().saturating_sub(cap)).sum();
            ensure!(
                spilled as usize == want_spilled && dropped as usize == want_over - want_spilled,
                "{what}: spilled {spilled} dropped {dropped}"
            );
            let out = ticket.partial()?;
            let spilled_out = ticket.fetch_spill(&stream)?;
            let spill_view = match &spilled_out {
                Some(t) => Some(t.wait()?),
                None => None,
            };
            for (b, w) in want.iter().enumerate().take(k) {
                let mut got = bucket_rows(&out, b)?;
                ensure!(
                    got.len() == w.len().min(cap),
                    "{what}: bucket {b} slot rows"
                );
                if let Some(s) = &spill_view {
                    got.extend(bucket_rows(s, b)?);
                }
                got.sort_unstable();
                if w.len() <= cap + spill {
                    ensure!(&got == w, "{what}: bucket {b} slot + spill rows");
                } else {
                    ensure!(
                        got.windows(2).all(|p| p[0] != p[1])
                            && got.iter().all(|r| w.binary_search(r).is_ok()),
                        "{what}: bucket {b}: a row twice or never appended"
                    );
                }
            }
        }
        Err(e) => bail!("{what}: {e}"),
    }
    Ok(())
}

fn append_into_buckets() -> Result<()> {
    for t in TRANSPORTS {
        for k in [2usize, 8, 64, 256] {
            append_case(
                t,
                k,
                1000,
                0,
                40_000,
                20_000.min(1000 * k as u64 / 2),
                k as u32,
                k as u64,
            )?;
        }
    }
    Ok(())
}

fn bad_buckets_and_overflow() -> Result<()> {
    for t in TRANSPORTS {
        // Rows naming buckets 8..10 of a readback of 8.
        append_case(t, 8, 2000, 0, 30_000, 9000, 10, 1)?;
        // Buckets over capacity: into the spill, and past it.
        append_case(t, 8, 500, 200, 30_000, 5000, 8, 2)?;
        append_case(t, 8, 500, 800, 30_000, 5000, 8, 3)?;
        append_case(t, 4, 100, 0, 30_000, 1000, 4, 4)?;
    }
    Ok(())
}

fn many_cycles_random_bucket_counts() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let kern = kernel()?;
    let (k, cap) = (16usize, 3000usize);
    let rb = AppendReadback::new(
        &ctx,
        &schema(),
        ReadbackConfig::new(cap).buckets(k).slots(2),
    )?;
    let cycles: u64 = std::env::var("SRB_BUCKET_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let mut pending = None;
    for cyc in 0..cycles {
        let n = 1000 + pattern::mix(cyc) % 30_000;
        let count = pattern::mix(cyc + 7) % (n + 1);
        let t = rb.append(&stream, |d| {
            launch(
                &kern,
                &stream,
                d,
                1 + (cyc % 50) as u32,
                n,
                count,
                cyc,
                k as u32,
            )
        })?;
        if let Some((t, n, count, seed)) = pending.replace((t, n, count, cyc)) {
            check_cycle(&t, n, count, seed, k)?;
        }
    }
    if let Some((t, n, count, seed)) = pending {
        check_cycle(&t, n, count, seed, k)?;
    }
    Ok(())
}

fn check_cycle(
    t: &sized_readback::AppendTicket,
    n: u64,
    count: u64,
    seed: u64,
    k: usize,
) -> Result<()> {
    let out = t.wait()?;
    let want = expected(n, count, seed, k as u64);
    for (b, w) in want.iter().enumerate() {
        ensure!(&bucket_rows(&out, b)? == w, "cycle {seed}: bucket {b}");
    }
    Ok(())
}

/// Host data partitioned into k buckets (each bucket's rows contiguous, offsets the exclusive
/// scan of the counts), uploaded; and the bucket readback of it.
struct Partitioned {
    a: CudaSlice<u64>,
    b: CudaSlice<u32>,
    host_a: Vec<u64>,
    host_b: Vec<u32>,
    counts: Vec<u64>,
    offsets: Vec<u64>,
}

fn partitioned(
    stream: &Arc<CudaStream>,
    counts: &[u64],
    seed: u64,
    slack: usize,
) -> Result<Partitioned> {
    let total: u64 = counts.iter().sum();
    let offsets: Vec<u64> = counts
        .iter()
        .scan(0u64, |acc, &c| {
            let o = *acc;
            *acc += c;
            Some(o)
        })
        .collect();
    let len = total as usize + slack;
    let host_a: Vec<u64> = (0..len as u64).map(|i| value(seed, i, 0)).collect();
    let host_b: Vec<u32> = (0..len as u64).map(|i| value(seed, i, 1) as u32).collect();
    Ok(Partitioned {
        a: stream.clone_htod(&host_a)?,
        b: stream.clone_htod(&host_b)?,
        host_a,
        host_b,
        counts: counts.to_vec(),
        offsets,
    })
}

fn pack_case<K: CountType + DeviceRepr>(
    rb: &BucketReadback,
    stream: &Arc<CudaStream>,
    p: &Partitioned,
    counts: &[K],
    offsets: &[K],
) -> sized_readback::Result<Vec<Vec<(u64, u32)>>> {
    let dc = stream.clone_htod(counts).expect("counts");
    let doff = stream.clone_htod(offsets).expect("offsets");
    // Raw pointers of cudarc buffers the stream orders (one stream, synchronized below).
    use cudarc::driver::DevicePtr;
    let (pa, _ga) = p.a.device_ptr(stream);
    let (pb, _gb) = p.b.device_ptr(stream);
    let (pc, _gc) = dc.device_ptr(stream);
    let (po, _go) = doff.device_ptr(stream);
    let sources = [
        sized_readback::ColumnSource {
            ptr: pa,
            len: p.host_a.len(),
        },
        sized_readback::ColumnSource {
            ptr: pb,
            len: p.host_b.len(),
        },
    ];
    // SAFETY: the buffers hold their lengths and live until the wait below returns; nothing
    // writes them meanwhile; one stream.
    let t = unsafe {
        rb.enqueue_raw(
            stream,
            None,
            &sources,
            sized_readback::RawCount::new(pc, K::KIND),
            po,
        )?
    };
    let out = t.wait()?;
    let mut all = Vec::new();
    for b in 0..rb.info().buckets {
        let a = out.bucket_column_as::<u64>(0, b)?;
        let c = out.bucket_column_as::<u32>(1, b)?;
        all.push(a.iter().copied().zip(c.iter().copied()).collect());
    }
    Ok(all)
}

fn partition_want(p: &Partitioned) -> Vec<Vec<(u64, u32)>> {
    p.counts
        .iter()
        .zip(&p.offsets)
        .map(|(&c, &o)| {
            (o..o + c)
                .map(|i| (p.host_a[i as usize], p.host_b[i as usize]))
                .collect()
        })
        .collect()
}

fn pack_partitioned_data() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    for t in TRANSPORTS {
        for k in [1usize, 3, 8, 64] {
            let cap = 700;
            let rb = BucketReadback::new(
                &ctx,
                &schema(),
                ReadbackConfig::new(cap).buckets(k).transport(t),
            )?;
            let counts: Vec<u64> = (0..k as u64)
                .map(|b| pattern::mix(b + 99) % (cap as u64 + 1))
                .collect();
            let p = partitioned(&stream, &counts, k as u64, 5)?;
            let want = partition_want(&p);
            let c32: Vec<u32> = counts.iter().map(|&c| c as u32).collect();
            let o32: Vec<u32> = p.offsets.iter().map(|&o| o as u32).collect();
            let ci64: Vec<i64> = counts.iter().map(|&c| c as i64).collect();
            let oi64: Vec<i64> = p.offsets.iter().map(|&o| o as i64).collect();
            ensure!(
                pack_case(&rb, &stream, &p, &counts, &p.offsets)? == want,
                "{t:?} k {k} u64"
            );
            ensure!(
                pack_case(&rb, &stream, &p, &c32, &o32)? == want,
                "{t:?} k {k} u32"
            );
            ensure!(
                pack_case(&rb, &stream, &p, &ci64, &oi64)? == want,
                "{t:?} k {k} i64"
            );
        }
    }
    Ok(())
}

fn pack_bad_inputs() -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let cap = 100usize;
    let rb = BucketReadback::new(&ctx, &schema(), ReadbackConfig::new(cap).buckets(4))?;
    let counts = [10u64, 20, 30, 40];
    let p = partitioned(&stream, &counts, 9, 0)?;
    let o = p.offsets.clone();
    // A bucket over the capacity.
    let over = [10u64, 101, 30, 40];
    match pack_case(&rb, &stream, &p, &over, &o) {
        Err(Error::BucketOverCapacity {
            bucket: 1,
            count: 101,
            capacity: 100,
        }) => {}
        other => bail!("over capacity gave {other:?}"),
    }
    // Overlapping ranges: bucket 1 reaches into bucket 2.
    let overlap = [10u64, 25, 30, 40];
    match pack_case(&rb, &stream, &p, &overlap, &o) {
        Err(Error::BucketOutOfRange {
            bucket: 1,
            offset: 10,
            count: 25,
            limit: 30,
        }) => {}
        other => bail!("overlap gave {other:?}"),
    }
    // Past the source: the last bucket runs over its end (100 elements).
    let past = [10u64, 20, 30, 41];
    match pack_case(&rb, &stream, &p, &past, &o) {
        Err(Error::BucketOutOfRange {
            bucket: 3,
            offset: 60,
            count: 41,
            limit: 100,
        }) => {}
        other => bail!("past the source gave {other:?}"),
    }
    // Offsets that fall: bucket 0 starts after bucket 1.
    let falling = [30u64, 0, 30, 60];
    match pack_case(&rb, &stream, &p, &[10u64, 20, 30, 40], &falling) {
        Err(Error::BucketOutOfRange { bucket: 0, .. }) => {}
        other => bail!("falling offsets gave {other:?}"),
    }
    // A negative count (signed counts).
    match pack_case(&rb, &stream, &p, &[10i32, -5, 30, 40], &[0i32, 10, 30, 60]) {
        Err(Error::NegativeCount { count: -5 }) => {}
        other => bail!("a negative count gave {other:?}"),
    }
    // And then a good one again.
    ensure!(pack_case(&rb, &stream, &p, &counts, &o)? == partition_want(&p));
    // Too few counts for the buckets: refused at once by the safe enqueue.
    let short = stream.clone_htod(&[1u64, 2])?;
    let mut s = ColumnSchema::new();
    let (a, b) = (s.column::<u64>(), s.column::<u32>());
    let rb2 = BucketReadback::new(&ctx, &s, ReadbackConfig::new(cap).buckets(4))?;
    let r = rb2.enqueue(&stream, &[a.source(&p.a), b.source(&p.b)], &short, &short);
    ensure!(
        matches!(
            r,
            Err(Error::BufferTooShort {
                what: "the counts",
                len: 2,
                need: 4
            })
        ),
        "short counts: {:?}",
        r.err()
    );
    // The safe enqueue with good buffers.
    let dc = stream.clone_htod(&counts)?;
    let doff = stream.clone_htod(&o)?;
    let t = rb2.enqueue(&stream, &[a.source(&p.a), b.source(&p.b)], &dc, &doff)?;
    let out = t.wait()?;
    for (bk, w) in partition_want(&p).iter().enumerate() {
        let got: Vec<(u64, u32)> = out
            .bucket_column(a, bk)
            .iter()
            .copied()
            .zip(out.bucket_column(b, bk).iter().copied())
            .collect();
        ensure!(&got == w, "safe bucket enqueue, bucket {bk}");
    }
    // The raw-stream enqueue (the C API's srb_enqueue_buckets) of the same buffers.
    {
        use cudarc::driver::DevicePtr;
        let (pa, _ga) = p.a.device_ptr(&stream);
        let (pb, _gb) = p.b.device_ptr(&stream);
        let (pc, _gc) = dc.device_ptr(&stream);
        let (po, _go) = doff.device_ptr(&stream);
        let sources = [
            sized_readback::ColumnSource {
                ptr: pa,
                len: p.host_a.len(),
            },
            sized_readback::ColumnSource {
                ptr: pb,
                len: p.host_b.len(),
            },
        ];
        // SAFETY: the buffers hold their lengths and live until the wait below returns;
        // nothing writes them meanwhile; one live stream of the readback's context.
        let t = unsafe {
            rb2.enqueue_raw_stream(
                stream.cu_stream(),
                None,
                &sources,
                sized_readback::RawCount::u64(pc),
                po,
            )?
        };
        let out = t.wait()?;
        for (bk, w) in partition_want(&p).iter().enumerate() {
            let got: Vec<(u64, u32)> = out
                .bucket_column(a, bk)
                .iter()
                .copied()
                .zip(out.bucket_column(b, bk).iter().copied())
                .collect();
            ensure!(&got == w, "raw-stream bucket enqueue, bucket {bk}");
        }
    }
    // Configuration: buckets out of range.
    ensure!(matches!(
        BucketReadback::new(&ctx, &schema(), ReadbackConfig::new(8).buckets(0)),
        Err(Error::InvalidConfig { .. })
    ));
    ensure!(matches!(
        BucketReadback::new(&ctx, &schema(), ReadbackConfig::new(8).buckets(257)),
        Err(Error::InvalidConfig { .. })
    ));
    Ok(())
}
