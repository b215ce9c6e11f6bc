//! Device-side append: user kernels (csrc/testing/append.cu) that append through the shipped
//! header `include/sized_readback/append.cuh`. Rows come back in no particular order, so every
//! test compares them with the host's as multisets, byte by byte.
use anyhow::{bail, ensure, Context as _, Result};
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaContext, CudaStream, LaunchConfig, PushKernelArg};
use sized_readback::testing::{pattern, DeviceBuffer, Kernel, Kernels};
use sized_readback::{
    AppendDesc, AppendReadback, ColumnReadout, ColumnSchema, Error, GraphReadback, ReadbackConfig,
    Transport,
};
use std::ffi::c_void;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use test_support::source_root::source_root;
use test_support::{SubjectContext, Test, TRANSPORTS};

pub const TESTS: &[Test] = test_support::tests![
    counts_at_the_edges,
    element_sizes,
    block_sizes_and_grids,
    several_columns_and_3d_shapes,
    many_cycles_random_counts,
    a_kernel_that_does_not_finish,
    misuse_is_reported,
    nvrtc_kernel_through_the_header,
    // Alone: each captures a stream and drops a graph readback, whose drop synchronizes the
    // context, which the driver refuses (and which invalidates the capture) while another
    // test's stream captures.
    graph_replay.exclusive(),
    graph_replay_overflow.exclusive(),
    header_is_shipped.cpu(),
];

/// This subject's context of device 0 (see `test_support::device`).
fn ctx() -> Arc<CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

fn kernels() -> Kernels {
    static K: OnceLock<Kernels> = OnceLock::new();
    K.get_or_init(|| Kernels::load(&ctx()).expect("the test kernels"))
        .clone()
}

fn sms() -> u32 {
    ctx()
        .attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )
        .expect("SM count") as u32
}

/// A prime above every candidate count: `i -> i * P % n` permutes `0..n`.
const P: u64 = 2_147_483_647;

/// The bytes of column `c` of row `i` for `seed`, `size` bytes (csrc/testing/append.cu's
/// srbt_value).
fn value(seed: u64, i: u64, c: u64, size: usize) -> Vec<u8> {
    let mut w = pattern::mix(seed.wrapping_add(8 * i + c))
        .to_le_bytes()
        .to_vec();
    w.extend(pattern::mix(seed.wrapping_add(8 * i + c + 0x100_0000)).to_le_bytes());
    w.truncate(size);
    w
}

/// The rows the kernel keeps for (n, count, seed): candidate i iff i * P % n < count; each
/// row the concatenated bytes of its columns.
fn expected_rows(n: u64, count: u64, seed: u64, sizes: &[usize]) -> Vec<Vec<u8>> {
    let mut rows: Vec<Vec<u8>> = (0..n)
        .filter(|&i| (i as u128 * P as u128 % n as u128) < count as u128)
        .map(|i| {
            sizes
                .iter()
                .enumerate()
                .flat_map(|(c, &s)| value(seed, i, c as u64, s))
                .collect()
        })
        .collect();
    rows.sort_unstable();
    rows
}

/// The rows of a readout, each the concatenated bytes of its columns, sorted.
fn rows_of(out: &ColumnReadout<'_>, sizes: &[usize]) -> Result<Vec<Vec<u8>>> {
    let cols: Vec<&[u8]> = (0..sizes.len())
        .map(|c| out.column_bytes(c))
        .collect::<sized_readback::Result<_>>()?;
    let mut rows: Vec<Vec<u8>> = (0..out.count())
        .map(|r| {
            cols.iter()
                .zip(sizes)
                .flat_map(|(col, &s)| col[r * s..(r + 1) * s].to_vec())
                .collect()
        })
        .collect();
    rows.sort_unstable();
    Ok(rows)
}

fn schema_of(sizes: &[usize]) -> ColumnSchema {
    let mut s = ColumnSchema::new();
    for &size in sizes {
        s.raw_column(size);
    }
    s
}

/// One launch of an append test kernel: `name(desc, n, count, p, seed, early)`.
struct Launch<'a> {
    kernel: &'a Kernel,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    n: u64,
    count: u64,
    seed: u64,
    early: u32,
}

impl Launch<'_> {
    fn run(
        &self,
        stream: &CudaStream,
        desc: &AppendDesc,
    ) -> Result<(), cudarc::driver::DriverError> {
        let mut d = *desc;
        let (mut n, mut count, mut p, mut seed, mut early) =
            (self.n, self.count, P, self.seed, self.early);
        let mut args: [*mut c_void; 6] = [
            (&mut d as *mut AppendDesc).cast(),
            (&mut n as *mut u64).cast(),
            (&mut count as *mut u64).cast(),
            (&mut p as *mut u64).cast(),
            (&mut seed as *mut u64).cast(),
            (&mut early as *mut u32).cast(),
        ];
        // SAFETY: srbt_append_*(srb_append_desc, uint64_t, uint64_t, uint64_t, uint64_t,
        // unsigned) with matching argument types; the kernel touches only the readback's slot,
        // scratch and spill through the descriptor.
        unsafe {
            self.kernel
                .launch_3d(stream.cu_stream(), self.grid, self.block, &mut args)
        }
        .map_err(|e| match e {
            Error::Cuda { source, .. } => source,
            other => panic!("launch: {other}"),
        })
    }
}

fn kernel(name: &str) -> Result<Kernel> {
    Ok(kernels().function(name)?)
}

/// Appends `count` of `n` candidates with `kernel` of `sizes` into a fresh readback of `cap`
/// rows (`spill` rows of spill) over `transport`, and checks the outcome: every row exactly
/// once when it fits; the overflow error's numbers, the slot's rows and the spilled ones
/// otherwise.
#[allow(clippy::too_many_arguments)]
fn roundtrip(
    name: &str,
    sizes: &[usize],
    transport: Transport,
    cap: usize,
    spill: usize,
    n: u64,
    count: u64,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    seed: u64,
) -> Result<()> {
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let k = kernel(name)?;
    let rb = AppendReadback::new(
        &ctx,
        &schema_of(sizes),
        ReadbackConfig::new(cap).spill(spill).transport(transport),
    )?;
    let launch = Launch {
        kernel: &k,
        grid,
        block,
        n,
        count,
        seed,
        early: 0,
    };
    let ticket = rb.append(&stream, |d| launch.run(&stream, d))?;
    let want = expected_rows(n, count, seed, sizes);
    let what = format!(
        "{name} {transport:?} cap {cap} spill {spill} count {count} grid {grid:?} block {block:?}"
    );
    match ticket.wait() {
        Ok(out) => {
            ensure!(count as usize <= cap, "{what}: no overflow reported");
            ensure!(
                out.count() == count as usize,
                "{what}: count {}",
                out.count()
            );
            ensure!(rows_of(&out, sizes)? == want, "{what}: rows differ");
        }
        Err(Error::AppendOverflow {
            count: c,
            capacity,
            spilled,
            dropped,
        }) => {
            let over = count - cap as u64;
            ensure!(
                c == count && capacity == cap,
                "{what}: overflow says {c} / {capacity}"
            );
            ensure!(
                spilled == over.min(spill as u64) && dropped == over - spilled,
                "{what}: spilled {spilled}, dropped {dropped}"
            );
            // The slot's rows and the spilled ones are distinct rows of the expected set, and
            // with nothing dropped they are all of it.
            let mut got = rows_of(&ticket.partial()?, sizes)?;
            ensure!(got.len() == cap, "{what}: {} rows in the slot", got.len());
            // The raw-stream fetch (the C API's) on the staged transport, cudarc's on mapped.
            let fetched = match transport {
                // SAFETY: a live stream of the readback's context.
                Transport::Staged => unsafe { ticket.fetch_spill_raw_stream(stream.cu_stream())? },
                _ => ticket.fetch_spill(&stream)?,
            };
            match fetched {
                Some(t) => {
                    let s = t.wait()?;
                    ensure!(s.count() as u64 == spilled, "{what}: fetched {}", s.count());
                    got.extend(rows_of(&s, sizes)?);
                }
                None => ensure!(spilled == 0, "{what}: no spill fetched"),
            }
            got.sort_unstable();
            if dropped == 0 {
                ensure!(
                    got == want,
                    "{what}: slot + spill rows differ from the rows appended"
                );
            } else {
                ensure!(
                    got.windows(2).all(|w| w[0] != w[1])
                        && got.iter().all(|r| want.binary_search(r).is_ok()),
                    "{what}: a row twice, or one never appended"
                );
            }
        }
        Err(e) => bail!("{what}: {e}"),
    }
    Ok(())
}

fn counts_at_the_edges() -> Result<()> {
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

fn element_sizes() -> Result<()> {
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

fn block_sizes_and_grids() -> Result<()> {
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

fn several_columns_and_3d_shapes() -> Result<()> {
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
fn many_cycles_random_counts() -> Result<()> {
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
fn a_kernel_that_does_not_finish() -> Result<()> {
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
fn misuse_is_reported() -> Result<()> {
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

/// `source` compiled by NVRTC straight to machine code for `ctx`'s device (`sm_XY` from its
/// compute capability), as the append docs recommend: no PTX reaches the driver, so the NVRTC's
/// version never has to be one the driver can JIT.
fn nvrtc_cubin(ctx: &Arc<CudaContext>, source: &str) -> Result<cudarc::nvrtc::Ptx> {
    use cudarc::nvrtc::{result, sys};
    let (major, minor) = sized_readback::device::compute_capability(ctx)?;
    let src = std::ffi::CString::new(source)?;
    let prog = result::create_program(&src, None)?;
    let opts = [
        format!("--gpu-architecture=sm_{major}{minor}"),
        "-std=c++17".into(),
    ];
    // SAFETY: prog is a live program; the options are plain strings.
    if let Err(e) = unsafe { result::compile_program(prog, &opts) } {
        // SAFETY: as above.
        let log = unsafe { result::get_program_log(prog) }.unwrap_or_default();
        let log: Vec<u8> = log.iter().map(|&c| c as u8).collect();
        bail!("NVRTC: {e:?}: {}", String::from_utf8_lossy(&log));
    }
    let mut size = 0usize;
    // SAFETY: prog compiled for a real architecture, so it holds a cubin; size is an
    // out-pointer, and the buffer has the size NVRTC reported.
    let cubin = unsafe {
        sys::nvrtcGetCUBINSize(prog, &mut size).result()?;
        let mut cubin = vec![0u8; size];
        sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()).result()?;
        result::destroy_program(prog)?;
        cubin
    };
    ensure!(cubin.starts_with(b"\x7fELF"), "NVRTC gave no cubin");
    Ok(cudarc::nvrtc::Ptx::from_binary(cubin))
}

/// A kernel compiled at run time with NVRTC from the header, straight to machine code for this
/// device (the path the append docs recommend to users).
fn nvrtc_kernel_through_the_header() -> Result<()> {
    const KERNEL: &str = r#"
extern "C" __global__ void odd(srb_append_desc d, const unsigned long long* x, unsigned long long n) {
    using Append = srb::BlockAppend<128, unsigned long long>;
    __shared__ Append::TempStorage tmp;
    Append app(tmp, d);
    for (unsigned long long b = (unsigned long long)blockIdx.x * 128; b < n; b += (unsigned long long)gridDim.x * 128) {
        unsigned long long i = b + threadIdx.x;
        bool keep = i < n && (x[i] & 1);
        app.append(keep, keep ? x[i] : 0ull);
    }
    app.finish();
}
"#;
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let src = format!("{}\n{KERNEL}", sized_readback::append::HEADER);
    let f = ctx
        .load_module(nvrtc_cubin(&ctx, &src)?)?
        .load_function("odd")?;
    let host: Vec<u64> = (0..100_000u64).map(pattern::mix).collect();
    let x = stream.clone_htod(&host)?;
    let n = host.len() as u64;
    let rb = AppendReadback::new(&ctx, &schema_of(&[8]), ReadbackConfig::new(host.len()))?;
    let ticket = rb.append(&stream, |d| {
        let mut b = stream.launch_builder(&f);
        b.arg(d).arg(&x).arg(&n);
        let cfg = LaunchConfig {
            grid_dim: (50, 1, 1),
            block_dim: (128, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: odd(srb_append_desc, const unsigned long long*, unsigned long long), 128
        // threads per block as its BlockAppend.
        unsafe { b.launch(cfg) }.map(drop)
    })?;
    let out = ticket.wait()?;
    let mut got: Vec<u64> = out.column_as::<u64>(0)?.to_vec();
    got.sort_unstable();
    let mut want: Vec<u64> = host.iter().copied().filter(|v| v & 1 == 1).collect();
    want.sort_unstable();
    ensure!(got == want, "{} rows, {} expected", got.len(), want.len());
    Ok(())
}

/// A graph whose append kernel and a step counter are captured once and replayed: every
/// replay's rows come back in order of replays, with the overrun rules of graph readbacks.
fn graph_replay() -> Result<()> {
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
fn graph_replay_overflow() -> Result<()> {
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

/// The header's own rules, checked on the host side: it compiles as a self-contained source
/// (HEADER) and its include directory holds both files.
fn header_is_shipped() -> Result<()> {
    // INCLUDE_DIR is the build machine's path (for dependents' build scripts); the files are
    // looked for in this copy of the tree.
    ensure!(sized_readback::append::INCLUDE_DIR.ends_with("/include"));
    let dir = source_root().join("include");
    for f in ["sized_readback/append.cuh", "sized_readback/slot.h"] {
        ensure!(dir.join(f).is_file(), "{f} missing from {}", dir.display());
    }
    // The one system include (C's <stdint.h>) is the non-NVRTC branch of slot.h.
    let h = sized_readback::append::HEADER;
    let includes: Vec<&str> = h
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("#include <"))
        .collect();
    ensure!(
        includes == ["#include <stdint.h>"],
        "system includes {includes:?}"
    );
    let rtc = h
        .find("#if defined(__CUDACC_RTC__)")
        .context("no NVRTC branch")?;
    let other = rtc + h[rtc..].find("#else").context("no #else")?;
    let std = h.find("#include <stdint.h>").context("stdint")?;
    ensure!(other < std && std < other + h[other..].find("#endif").context("#endif")?);
    Ok(())
}
