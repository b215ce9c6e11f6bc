//! The C ABI's tests, through the `srb_*` functions themselves, on the GPU tests' harness
//! (`test_support::harness`): without a CUDA driver or device every GPU test is reported as
//! *ignored*; the argument checks, which need no GPU, run everywhere.
extern crate srb as sized_readback;

use anyhow::{ensure, Context as _, Result};
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{CudaGraph, CudaStream};
use sized_readback_capi as capi;
use std::ffi::CStr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use test_support::step::*;
use test_support::{child, SubjectContext, Test};

/// The GPU tests run alone, one at a time: graph capture, and waits they time.
const TESTS: &[Test] = test_support::tests![
    capi_argument_errors.cpu(),
    seed_capi_expected_output.cpu(),
    capi_host_mode.exclusive(),
    capi_append.exclusive(),
    capi_graph_mode.exclusive(),
    capi_graph_concurrent_consumers.exclusive(),
    capi_wait_after_a_fault.exclusive(),
];

/// The C API tests' context of device 0 (see `test_support::device`).
fn ctx() -> Arc<cudarc::driver::CudaContext> {
    static CONTEXT: SubjectContext = SubjectContext::new();
    CONTEXT.get()
}

fn last_error() -> String {
    // SAFETY: srb_last_error returns a NUL-terminated string owned by this thread.
    unsafe { CStr::from_ptr(capi::srb_last_error()) }
        .to_string_lossy()
        .into_owned()
}

/// Argument checks that need no GPU: they run (and must pass) everywhere.
fn capi_argument_errors() -> Result<()> {
    let sizes = [8usize, 4];
    let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
    // SAFETY: valid pointers, or nulls the API must reject.
    unsafe {
        ensure!(
            capi::srb_create(0, 16, 2, 2, sizes.as_ptr(), 0, std::ptr::null_mut())
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        ensure!(
            last_error().contains("out is null"),
            "message: {}",
            last_error()
        );
        ensure!(
            capi::srb_create(0, 16, 2, 0, sizes.as_ptr(), 0, &mut rb)
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        ensure!(
            last_error().contains("num_columns"),
            "message: {}",
            last_error()
        );
        ensure!(
            capi::srb_create(0, 16, 2, 2, std::ptr::null(), 0, &mut rb)
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        ensure!(
            capi::srb_create(0, 16, 2, 2, sizes.as_ptr(), 0x80, &mut rb)
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        ensure!(
            capi::srb_create(-1, 16, 2, 2, sizes.as_ptr(), 0, &mut rb)
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        // Unusable configurations are refused before the device is opened: the same code
        // with or without a GPU.
        let too_big = [u32::MAX as usize + 1];
        let zero = [8usize, 0];
        let graph_staged = capi::SRB_FLAG_GRAPH | capi::SRB_FLAG_STAGED;
        for (what, capacity, slots, sizes, flags) in [
            ("zero capacity", 0, 2, &sizes[..], 0),
            ("zero slots", 16, 0, &sizes[..], 0),
            ("SIZE_MAX capacity", usize::MAX, 2, &sizes[..], 0),
            ("slots overflow", usize::MAX / 64, u32::MAX, &sizes[..1], 0),
            ("element size 0", 16, 2, &zero[..], 0),
            ("element size above u32::MAX", 1, 1, &too_big[..], 0),
            ("graph and staged", 16, 2, &sizes[..], graph_staged),
        ] {
            let n = sizes.len() as u32;
            let code = capi::srb_create(0, capacity, slots, n, sizes.as_ptr(), flags, &mut rb);
            ensure!(
                code == capi::SRB_ERR_INVALID_CONFIG && rb.is_null(),
                "{what}: code {code} ({})",
                last_error()
            );
        }
        ensure!(rb.is_null());
        // The message pointer stays the same across failures (C code may read it after its
        // next call).
        let before = capi::srb_last_error();
        ensure!(
            capi::srb_poll(std::ptr::null(), 1) == capi::SRB_ERR_INVALID_ARGUMENT,
            "poll on null"
        );
        ensure!(capi::srb_last_error() == before && last_error().contains("null"));
        ensure!(
            capi::srb_wait(std::ptr::null(), 1, 0, std::ptr::null_mut())
                == capi::SRB_ERR_INVALID_ARGUMENT
        );
        ensure!(capi::srb_data(std::ptr::null(), 1, 0).is_null());
        ensure!(
            last_error().contains("handle is null"),
            "message: {}",
            last_error()
        );
        ensure!(capi::srb_last_error() == before, "the message moved");
        capi::srb_destroy(std::ptr::null_mut());
        // A well-formed create: succeeds with a GPU, else says why not.
        let code = capi::srb_create(0, 16, 2, 2, sizes.as_ptr(), 0, &mut rb);
        if test_support::harness::gpu_present() {
            ensure!(
                code == capi::SRB_OK && !rb.is_null(),
                "create: {code} {}",
                last_error()
            );
            capi::srb_destroy(rb);
        } else {
            ensure!(
                code == capi::SRB_ERR_DRIVER_NOT_FOUND || code == capi::SRB_ERR_NO_DEVICE,
                "create without a GPU: {code} {}",
                last_error()
            );
            ensure!(!last_error().is_empty());
        }
    }
    Ok(())
}

/// Host-sequenced mode through the C ABI, both transports: enqueue/poll/wait/count/data/
/// release, and the errors a C caller sees.
fn capi_host_mode() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 2000;
    let b = StepBuffers::new(&ctx, cap)?;
    let sizes = [8usize, 4, 12];
    let ptrs: Vec<CUdeviceptr> = b.sources().iter().map(|s| s.ptr).collect();
    let lens = [cap; 3];
    let raw = stream.cu_stream().cast();
    // The staged transport's copies: sized where the driver has graph conditionals (CUDA
    // 12.8+; the GPU host's R580 has), else the whole slot, and an explicit sized one refused.
    let mut version = 0;
    // SAFETY: an out-pointer; the driver is loaded (the context is open).
    let conditionals = unsafe { sys::cuDriverGetVersion(&mut version) }
        == sys::CUresult::CUDA_SUCCESS
        && version >= 12080;
    let (staged, whole, sized) = (
        capi::SRB_FLAG_STAGED,
        capi::SRB_FLAG_STAGED | capi::SRB_FLAG_STAGED_WHOLE,
        capi::SRB_FLAG_STAGED | capi::SRB_FLAG_STAGED_SIZED,
    );
    let auto = if conditionals {
        capi::SRB_COPY_SIZED
    } else {
        capi::SRB_COPY_WHOLE
    };
    for (flags, copy) in [
        (0, capi::SRB_COPY_NONE),
        (staged, auto),
        (whole, capi::SRB_COPY_WHOLE),
        (sized, capi::SRB_COPY_SIZED),
    ] {
        let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
        // SAFETY: every pointer below is valid for the call; buffers outlive the readback.
        unsafe {
            let code = capi::srb_create(0, cap, 2, 3, sizes.as_ptr(), flags, &mut rb);
            if flags == sized && !conditionals {
                ensure!(
                    code == capi::SRB_ERR_SIZED_COPY_UNAVAILABLE,
                    "sized on driver {version}: {code} {}",
                    last_error()
                );
                continue;
            }
            ensure!(code == capi::SRB_OK, "create: {code} {}", last_error());
            ensure!(capi::srb_capacity(rb) == cap);
            ensure!(
                capi::srb_staged_copy(rb) == copy,
                "flags {flags:#x}: copy {} != {copy}",
                capi::srb_staged_copy(rb)
            );
            for key in [1u64, 4, 9] {
                let step = key / 2;
                srb::testing::upload(&ctx, b.step.ptr(), &step.to_le_bytes())?;
                k.step(&stream, &b, (key % 2) as u32)?;
                let mut seq = 0;
                let code = capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    b.count.ptr(),
                    capi::SRB_COUNT_I32,
                    &mut seq,
                );
                ensure!(code == capi::SRB_OK, "enqueue: {code} {}", last_error());
                let mut n = u64::MAX;
                let code = capi::srb_wait(rb, seq, 10_000_000_000, &mut n);
                ensure!(code == capi::SRB_OK, "wait: {code} {}", last_error());
                ensure!(n as i64 == step_count(key, cap as u64), "count {n}");
                ensure!(capi::srb_poll(rb, seq) == capi::SRB_OK);
                let mut n2 = 0;
                ensure!(capi::srb_count(rb, seq, &mut n2) == capi::SRB_OK && n2 == n);
                let n = n as usize;
                let pos = std::slice::from_raw_parts(capi::srb_data(rb, seq, 0).cast::<f64>(), n);
                let id = std::slice::from_raw_parts(capi::srb_data(rb, seq, 1).cast::<i32>(), n);
                let vel =
                    std::slice::from_raw_parts(capi::srb_data(rb, seq, 2).cast::<[f32; 3]>(), n);
                for i in 0..n {
                    ensure!(
                        pos[i] == i as f64 + 0.25 * key as f64
                            && id[i] == (key * 7 + i as u64) as i32
                            && vel[i] == [i as f32, key as f32, (key % 2) as f32],
                        "key {key} row {i}"
                    );
                }
                ensure!(
                    capi::srb_data(rb, seq, 3).is_null(),
                    "column 3 does not exist"
                );
                ensure!(capi::srb_release(rb, seq) == capi::SRB_OK);
                ensure!(
                    capi::srb_release(rb, seq) == capi::SRB_ERR_INVALID_ARGUMENT,
                    "double release"
                );
                ensure!(capi::srb_data(rb, seq, 0).is_null(), "released");
            }
            // Over capacity: the count comes back with the error.
            let big = stream.clone_htod(&[cap as i64 + 7])?;
            let (big_ptr, _g) = cudarc::driver::DevicePtr::device_ptr(&big, &stream);
            let mut seq = 0;
            ensure!(
                capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    big_ptr,
                    capi::SRB_COUNT_I64,
                    &mut seq
                ) == capi::SRB_OK
            );
            let mut n = 0;
            ensure!(
                capi::srb_wait(rb, seq, -1, &mut n) == capi::SRB_ERR_COUNT_EXCEEDS_CAPACITY
                    && n == cap as u64 + 7,
                "over capacity: n {n}"
            );
            ensure!(
                last_error().contains("exceeds the readback capacity"),
                "message: {}",
                last_error()
            );
            // Two slots: a third enqueue while two are held fails.
            let mut s2 = 0;
            ensure!(
                capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    b.count.ptr(),
                    capi::SRB_COUNT_I32,
                    &mut s2
                ) == capi::SRB_OK
            );
            let mut s3 = 0;
            ensure!(
                capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    b.count.ptr(),
                    capi::SRB_COUNT_I32,
                    &mut s3
                ) == capi::SRB_ERR_SLOTS_EXHAUSTED
            );
            ensure!(
                capi::srb_release(rb, seq) == capi::SRB_OK
                    && capi::srb_release(rb, s2) == capi::SRB_OK
            );
            // A misaligned count, an unknown count kind, a graph call on a host readback.
            ensure!(
                capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    b.count.ptr() + 1,
                    capi::SRB_COUNT_I32,
                    &mut s3
                ) == capi::SRB_ERR_BAD_POINTER
            );
            ensure!(
                capi::srb_enqueue(
                    rb,
                    raw,
                    std::ptr::null_mut(),
                    ptrs.as_ptr(),
                    lens.as_ptr(),
                    b.count.ptr(),
                    9,
                    &mut s3
                ) == capi::SRB_ERR_INVALID_ARGUMENT
            );
            ensure!(
                capi::srb_next(rb, 0, std::ptr::null_mut(), std::ptr::null_mut())
                    == capi::SRB_ERR_INVALID_ARGUMENT
            );
            ensure!(
                capi::srb_wait(rb, 12345, 0, std::ptr::null_mut())
                    == capi::SRB_ERR_INVALID_ARGUMENT
            );
            capi::srb_destroy(rb);
        }
    }
    stream.synchronize()?;
    Ok(())
}

/// Graph mode through the C ABI: record into a capture with raw handles, replay, consume
/// with srb_next.
/// Captures one step of the test kernels, `srb_record` of its three sources and the move to
/// the next step into a graph.
///
/// # Safety
/// `rb` is a live graph readback of `ptrs.len()` columns; `ptrs` and `lens` are `b`'s sources.
unsafe fn capture_recorded_step(
    rb: *mut capi::srb_readback,
    stream: &Arc<CudaStream>,
    k: &StepKernels,
    b: &StepBuffers,
    ptrs: &[CUdeviceptr],
    lens: &[usize],
) -> Result<CudaGraph> {
    stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    k.step(stream, b, 1)?;
    // SAFETY: per the contract.
    let code = unsafe {
        capi::srb_record(
            rb,
            stream.cu_stream().cast(),
            std::ptr::null_mut(),
            ptrs.as_ptr(),
            lens.as_ptr(),
            b.count.ptr(),
            capi::SRB_COUNT_I32,
        )
    };
    ensure!(code == capi::SRB_OK, "record: {code} {}", last_error());
    k.advance(stream, b)?;
    stream
        .end_capture(sys::CUgraphInstantiate_flags(0))?
        .context("no graph")
}

fn capi_graph_mode() -> Result<()> {
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 1500;
    let b = StepBuffers::new(&ctx, cap)?;
    let sizes = [8usize, 4, 12];
    let ptrs: Vec<CUdeviceptr> = b.sources().iter().map(|s| s.ptr).collect();
    let lens = [cap; 3];
    let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
    let replays = 500u64;
    // SAFETY: valid pointers; the buffers and the readback outlive the graph's replays
    // (the stream is synchronized before they drop).
    unsafe {
        ensure!(
            capi::srb_create(
                0,
                cap,
                4,
                3,
                sizes.as_ptr(),
                capi::SRB_FLAG_GRAPH | capi::SRB_FLAG_STAGED,
                &mut rb
            ) == capi::SRB_ERR_INVALID_CONFIG
        );
        let code = capi::srb_create(0, cap, 4, 3, sizes.as_ptr(), capi::SRB_FLAG_GRAPH, &mut rb);
        ensure!(code == capi::SRB_OK, "create: {code} {}", last_error());
        let mut seq = 0;
        ensure!(
            capi::srb_enqueue(
                rb,
                stream.cu_stream().cast(),
                std::ptr::null_mut(),
                ptrs.as_ptr(),
                lens.as_ptr(),
                b.count.ptr(),
                capi::SRB_COUNT_I32,
                &mut seq
            ) == capi::SRB_ERR_INVALID_ARGUMENT
        );
        let graph = capture_recorded_step(rb, &stream, &k, &b, &ptrs, &lens)?;
        let mut errors = 0;
        for r in 0..replays {
            graph.launch()?;
            let key = 2 * r + 1;
            let mut n = 0;
            let code = capi::srb_next(rb, 10_000_000_000, &mut seq, &mut n);
            ensure!(seq == r + 1, "seq {seq}");
            let want = step_count(key, cap as u64);
            if want < 0 || want > cap as i64 {
                let expected = if want < 0 {
                    capi::SRB_ERR_NEGATIVE_COUNT
                } else {
                    capi::SRB_ERR_COUNT_EXCEEDS_CAPACITY
                };
                ensure!(code == expected, "key {key}: code {code} (want {expected})");
                errors += 1;
                continue;
            }
            ensure!(code == capi::SRB_OK, "next: {code} {}", last_error());
            ensure!(n as i64 == want, "key {key}: count {n} != {want}");
            let id =
                std::slice::from_raw_parts(capi::srb_data(rb, seq, 1).cast::<i32>(), n as usize);
            ensure!(
                id.iter()
                    .enumerate()
                    .all(|(i, v)| *v == (key * 7 + i as u64) as i32),
                "key {key}: ids"
            );
            ensure!(capi::srb_release(rb, seq) == capi::SRB_OK);
        }
        ensure!(errors > 0, "keys below 1000 include error keys");
        stream.synchronize()?;
        drop(graph);
        capi::srb_destroy(rb);
    }
    Ok(())
}

/// Graph mode through the C ABI with several consumer threads: `srb_next` before any
/// recording errs at once; with `timeout_ns` 0 it does not wait for a consumer blocked in
/// another thread (`SRB_NOT_READY`); and concurrent callers each report a different replay
/// number (each number is read under the consumer lock, by the take itself).
fn capi_graph_concurrent_consumers() -> Result<()> {
    const REPLAYS: u64 = 64;
    let ctx = ctx();
    let k = StepKernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let cap = 1000;
    let b = StepBuffers::new(&ctx, cap)?;
    let sizes = [8usize, 4, 12];
    let ptrs: Vec<CUdeviceptr> = b.sources().iter().map(|s| s.ptr).collect();
    let lens = [cap; 3];
    let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
    // SAFETY: valid pointers; the buffers and the readback outlive the graph's replays (the
    // stream is synchronized before they drop); the handle is shared with scoped threads
    // only while it lives.
    unsafe {
        let code = capi::srb_create(
            0,
            cap,
            REPLAYS as u32,
            3,
            sizes.as_ptr(),
            capi::SRB_FLAG_GRAPH,
            &mut rb,
        );
        ensure!(code == capi::SRB_OK, "create: {code} {}", last_error());
        let (mut seq, mut n) = (u64::MAX, u64::MAX);
        let t = Instant::now();
        let code = capi::srb_next(rb, 5_000_000_000, &mut seq, &mut n);
        ensure!(
            code == capi::SRB_ERR_NOTHING_RECORDED && t.elapsed() < Duration::from_secs(1),
            "next before a recording: {code} after {:?} ({})",
            t.elapsed(),
            last_error()
        );
        ensure!(seq == u64::MAX, "nothing taken, no number stored");

        let graph = capture_recorded_step(rb, &stream, &k, &b, &ptrs, &lens)?;

        let handle = rb as usize;
        let next = move |timeout_ns: i64| {
            let (mut seq, mut n) = (u64::MAX, u64::MAX);
            let code = capi::srb_next(handle as *const _, timeout_ns, &mut seq, &mut n);
            (code, seq, n)
        };
        // One consumer blocks for 2 s (nothing launched yet); a look with timeout 0 from
        // this thread returns at once with SRB_NOT_READY, storing no number.
        std::thread::scope(|scope| -> Result<()> {
            let blocked = scope.spawn(|| next(2_000_000_000));
            std::thread::sleep(Duration::from_millis(300));
            let t = Instant::now();
            let (code, seq, _) = next(0);
            ensure!(
                code == capi::SRB_NOT_READY && seq == u64::MAX,
                "look while another thread waits: {code}, seq {seq}"
            );
            ensure!(
                t.elapsed() < Duration::from_millis(500),
                "timeout 0 waited {:?}",
                t.elapsed()
            );
            let (code, seq, _) = blocked.join().expect("consumer panicked");
            ensure!(
                code == capi::SRB_TIMEOUT && seq == 1,
                "blocked consumer: {code}, seq {seq}"
            );
            Ok(())
        })?;

        for _ in 0..REPLAYS {
            graph.launch()?;
        }
        stream.synchronize()?;
        // Four threads take the replays concurrently; each number must come out once.
        let taken: Vec<(i32, u64, u64)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let (code, seq, n) = next(200_000_000);
                            match code {
                                capi::SRB_NOT_READY => continue,
                                capi::SRB_TIMEOUT => break,
                                capi::SRB_OK => {
                                    let released = capi::srb_release(handle as *const _, seq);
                                    mine.push((code, seq, n));
                                    if released != capi::SRB_OK {
                                        mine.push((released, seq, 0));
                                    }
                                }
                                _ => mine.push((code, seq, n)),
                            }
                        }
                        mine
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("consumer panicked"))
                .collect()
        });
        let mut seqs: Vec<u64> = taken.iter().map(|t| t.1).collect();
        seqs.sort_unstable();
        ensure!(
            seqs == (1..=REPLAYS).collect::<Vec<_>>(),
            "replay numbers taken: {seqs:?}"
        );
        for &(code, seq, n) in &taken {
            let key = 2 * (seq - 1) + 1;
            let want = step_count(key, cap as u64);
            let expected = if want < 0 {
                capi::SRB_ERR_NEGATIVE_COUNT
            } else if want > cap as i64 {
                capi::SRB_ERR_COUNT_EXCEEDS_CAPACITY
            } else {
                ensure!(n as i64 == want, "seq {seq}: count {n} != {want}");
                capi::SRB_OK
            };
            ensure!(code == expected, "seq {seq}: code {code} (want {expected})");
        }
        ensure!(
            taken.iter().any(|t| t.0 != capi::SRB_OK),
            "keys 7 and 13 are count errors"
        );
        drop(graph);
        capi::srb_destroy(rb);
    }
    Ok(())
}

/// examples/seed_capi.expected (what scripts/build-seed-capi.sh --run and gpu-verify.sh compare
/// the seed programs' output with) must be the seed's expected output of src/testing/seed.rs,
/// and examples/seed_naive.expected what the seed reports its naive version prints.
fn seed_capi_expected_output() -> Result<()> {
    for (file, want) in [
        ("seed_capi.expected", srb::testing::seed::EXPECTED),
        ("seed_naive.expected", srb::testing::seed::NAIVE),
    ] {
        let path = test_support::source_root::source_root()
            .join("examples")
            .join(file);
        let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
        ensure!(
            text == want,
            "examples/{file} differs from the seed module's text"
        );
    }
    Ok(())
}

/// The C API's append path: `srb_append_begin` hands out the descriptor, a kernel appends
/// through it (`srbt_append_u64` of the test kernels), `srb_append_end` records it; an
/// overflow keeps the slot's rows readable and `srb_fetch_spill` brings the rest; a graph
/// append readback's descriptor serves a device-sequenced kernel.
fn capi_append() -> Result<()> {
    use std::ffi::c_void;
    const P: u64 = 2_147_483_647;
    let ctx = ctx();
    let stream = ctx.new_stream()?;
    let raw: *mut capi::CUstream_st = stream.cu_stream().cast();
    let kernel = srb::testing::Kernels::load(&ctx)?.function("srbt_append_u64")?;
    let n = 20_000u64;
    // The rows srbt_append_u64 appends for (n, count, seed): one u64 per kept candidate.
    let want = |count: u64, seed: u64| -> Vec<u64> {
        let mut v: Vec<u64> = (0..n)
            .filter(|&i| (i as u128 * P as u128 % n as u128) < count as u128)
            .map(|i| srb::testing::pattern::mix(seed.wrapping_add(8 * i)))
            .collect();
        v.sort_unstable();
        v
    };
    let launch = |desc: &mut capi::srb_append_desc, count: u64, seed: u64| -> Result<()> {
        let (mut nn, mut c, mut p, mut s, mut e) = (n, count, P, seed, 0u32);
        let mut args: [*mut c_void; 6] = [
            (desc as *mut capi::srb_append_desc).cast(),
            (&mut nn as *mut u64).cast(),
            (&mut c as *mut u64).cast(),
            (&mut p as *mut u64).cast(),
            (&mut s as *mut u64).cast(),
            (&mut e as *mut u32).cast(),
        ];
        // SAFETY: srbt_append_u64(srb_append_desc, uint64_t x4, unsigned), 256 threads.
        unsafe { kernel.launch_3d(stream.cu_stream(), (40, 1, 1), (256, 1, 1), &mut args)? };
        Ok(())
    };
    let sizes = [8usize];
    // SAFETY: every pointer below is valid for its call; the stream outlives the readbacks.
    unsafe {
        let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
        let code = capi::srb_create_append(0, 5000, 1000, 2, 1, sizes.as_ptr(), 0, &mut rb);
        ensure!(
            code == capi::SRB_OK,
            "create_append: {code} {}",
            last_error()
        );
        ensure!(capi::srb_capacity(rb) == 5000);
        let slice = |p: *const c_void, k: u64| -> Vec<u64> {
            let mut v = std::slice::from_raw_parts(p.cast::<u64>(), k as usize).to_vec();
            v.sort_unstable();
            v
        };
        for (count, seed) in [(0u64, 1u64), (1, 2), (4999, 3), (5000, 4)] {
            let mut desc = std::mem::zeroed::<capi::srb_append_desc>();
            let mut seq = 0;
            let code = capi::srb_append_begin(rb, raw, std::ptr::null_mut(), &mut desc, &mut seq);
            ensure!(code == capi::SRB_OK, "begin: {code} {}", last_error());
            launch(&mut desc, count, seed)?;
            ensure!(
                capi::srb_append_end(rb, seq, 0) == capi::SRB_OK,
                "end: {}",
                last_error()
            );
            let mut got = 0;
            let code = capi::srb_wait(rb, seq, 10_000_000_000, &mut got);
            ensure!(
                code == capi::SRB_OK && got == count,
                "wait: {code} {got} {}",
                last_error()
            );
            ensure!(
                slice(capi::srb_data(rb, seq, 0), got) == want(count, seed),
                "rows of {count}"
            );
            ensure!(capi::srb_release(rb, seq) == capi::SRB_OK);
        }
        // Overflow: 5500 rows, 5000 in the slot, 500 in the spill.
        let mut desc = std::mem::zeroed::<capi::srb_append_desc>();
        let mut seq = 0;
        ensure!(
            capi::srb_append_begin(rb, raw, std::ptr::null_mut(), &mut desc, &mut seq)
                == capi::SRB_OK
        );
        launch(&mut desc, 5500, 5)?;
        ensure!(capi::srb_append_end(rb, seq, 0) == capi::SRB_OK);
        let mut got = 0;
        let code = capi::srb_wait(rb, seq, -1, &mut got);
        ensure!(
            code == capi::SRB_ERR_APPEND_OVERFLOW && got == 5500,
            "overflow: {code} {got}"
        );
        let mut in_slot = 0;
        ensure!(capi::srb_count(rb, seq, &mut in_slot) == capi::SRB_OK && in_slot == 5000);
        let mut rows = slice(capi::srb_data(rb, seq, 0), in_slot);
        let mut spilled = 0;
        let code = capi::srb_fetch_spill(rb, seq, raw, -1, &mut spilled);
        ensure!(
            code == capi::SRB_OK && spilled == 500,
            "fetch_spill: {code} {spilled} {}",
            last_error()
        );
        let spill_rows = capi::srb_spill_data(rb, seq, 0);
        // A second fetch gives the first one's rows back: its pointer stays valid.
        let mut again = 0;
        let code = capi::srb_fetch_spill(rb, seq, raw, -1, &mut again);
        ensure!(
            code == capi::SRB_OK && again == 500,
            "second fetch_spill: {code} {again}"
        );
        ensure!(
            capi::srb_spill_data(rb, seq, 0) == spill_rows,
            "a second fetch kept the first fetch's rows"
        );
        rows.extend(slice(spill_rows, spilled));
        rows.sort_unstable();
        ensure!(rows == want(5500, 5), "slot + spill rows");
        ensure!(capi::srb_release(rb, seq) == capi::SRB_OK);
        // A failed launch reported by the caller gives the slot back.
        ensure!(
            capi::srb_append_begin(rb, raw, std::ptr::null_mut(), &mut desc, &mut seq)
                == capi::SRB_OK
        );
        ensure!(capi::srb_append_end(rb, seq, 1) == capi::SRB_OK);
        ensure!(
            capi::srb_wait(rb, seq, 0, std::ptr::null_mut()) == capi::SRB_ERR_INVALID_ARGUMENT,
            "no readback held"
        );
        // Pack calls are refused on an append readback, and append calls on a pack one.
        let cols = [0u64];
        let lens = [0usize];
        ensure!(
            capi::srb_enqueue(
                rb,
                raw,
                std::ptr::null_mut(),
                cols.as_ptr(),
                lens.as_ptr(),
                0,
                0,
                &mut seq
            ) == capi::SRB_ERR_INVALID_ARGUMENT
        );
        capi::srb_destroy(rb);

        // Graph mode: the descriptor serves a device-sequenced kernel (here not captured: it
        // runs once, as readback 1).
        let mut g: *mut capi::srb_readback = std::ptr::null_mut();
        let code = capi::srb_create_append(
            0,
            5000,
            0,
            2,
            1,
            sizes.as_ptr(),
            capi::SRB_FLAG_GRAPH,
            &mut g,
        );
        ensure!(
            code == capi::SRB_OK,
            "graph create_append: {code} {}",
            last_error()
        );
        let mut desc = std::mem::zeroed::<capi::srb_append_desc>();
        ensure!(
            capi::srb_append_desc_graph(g, &mut desc) == capi::SRB_OK,
            "{}",
            last_error()
        );
        ensure!(
            desc.seq == 0 && desc.seq_counter != 0,
            "a device-sequenced descriptor"
        );
        launch(&mut desc, 777, 6)?;
        let (mut seq, mut got) = (0, 0);
        let code = capi::srb_next(g, 10_000_000_000, &mut seq, &mut got);
        ensure!(
            code == capi::SRB_OK && seq == 1 && got == 777,
            "next: {code} {seq} {got} {}",
            last_error()
        );
        ensure!(
            slice(capi::srb_data(g, seq, 0), got) == want(777, 6),
            "graph rows"
        );
        ensure!(capi::srb_release(g, seq) == capi::SRB_OK);
        capi::srb_destroy(g);
    }
    Ok(())
}

/// The child-process scenarios of this binary (a device fault poisons the context).
const SCENARIO_ENV: &str = "SRB_CAPI_SCENARIO";

/// A producer that faults before `srb_enqueue` on the same stream: the enqueue or `srb_wait`
/// (with a 20 s timeout) returns `SRB_ERR_CUDA` naming the illegal address, in well under the
/// timeout, on both transports; `srb_destroy` returns.
fn capi_wait_after_a_fault() -> Result<()> {
    child::run_child(SCENARIO_ENV, "capi_fault_wait", Duration::from_secs(90)).map(drop)
}

fn capi_fault_wait() -> Result<()> {
    let ctx = srb::device::open(0)?;
    let kernels = srb::testing::Kernels::load(&ctx)?;
    let stream = ctx.new_stream()?;
    let raw = stream.cu_stream().cast();
    let data = stream.clone_htod(&[3.5f64; 16])?;
    let count = stream.clone_htod(&[16i32])?;
    let (dp, _gd) = cudarc::driver::DevicePtr::device_ptr(&data, &stream);
    let (cp, _gc) = cudarc::driver::DevicePtr::device_ptr(&count, &stream);
    let (sizes, lens) = ([8usize], [16usize]);
    // srb_enqueue of the 16 doubles and their count on `stream`.
    let enqueue = |rb: *mut capi::srb_readback, seq: &mut u64| {
        // SAFETY: rb is live (created below, destroyed last); the buffers outlive it.
        unsafe {
            capi::srb_enqueue(
                rb,
                raw,
                std::ptr::null_mut(),
                &dp,
                lens.as_ptr(),
                cp,
                capi::SRB_COUNT_I32,
                seq,
            )
        }
    };
    let mut readbacks = Vec::new();
    for flags in [0, capi::SRB_FLAG_STAGED] {
        let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
        // SAFETY: valid pointers; the buffers outlive the readbacks (destroyed below).
        unsafe {
            let code = capi::srb_create(0, 16, 2, 1, sizes.as_ptr(), flags, &mut rb);
            ensure!(code == capi::SRB_OK, "create: {code} {}", last_error());
            let mut seq = 0;
            let code = enqueue(rb, &mut seq);
            ensure!(
                code == capi::SRB_OK,
                "healthy enqueue: {code} {}",
                last_error()
            );
            let mut n = 0;
            let code = capi::srb_wait(rb, seq, 20_000_000_000, &mut n);
            ensure!(
                code == capi::SRB_OK && n == 16,
                "healthy wait: {code} {n} {}",
                last_error()
            );
            ensure!(capi::srb_release(rb, seq) == capi::SRB_OK);
        }
        readbacks.push((flags, rb));
    }
    let fault = kernels.function("srb_fault")?;
    let mut offset = 0u64;
    let shape = srb::LaunchShape {
        grid: 1,
        block: 32,
        programmatic: false,
    };
    // SAFETY: srb_fault(uint64_t) stores to address 0x8 on purpose: the fault under test.
    unsafe {
        fault.launch(
            stream.cu_stream(),
            shape,
            &mut [(&mut offset as *mut u64).cast()],
        )?
    };
    for (flags, rb) in readbacks {
        let t0 = Instant::now();
        let mut seq = 0;
        let code = enqueue(rb, &mut seq);
        let (code, at) = if code == capi::SRB_OK {
            let mut n = 0;
            // SAFETY: as above.
            (
                unsafe { capi::srb_wait(rb, seq, 20_000_000_000, &mut n) },
                "srb_wait",
            )
        } else {
            (code, "srb_enqueue")
        };
        let took = t0.elapsed();
        ensure!(
            code == capi::SRB_ERR_CUDA && last_error().contains("ILLEGAL_ADDRESS"),
            "flags {flags}: {at} gave {code} ({}), expected SRB_ERR_CUDA",
            last_error()
        );
        ensure!(
            took < Duration::from_secs(20),
            "flags {flags}: the error took {took:?}"
        );
        println!(
            "  flags {flags}: {at} returned SRB_ERR_CUDA after {took:?}: {}",
            last_error()
        );
        let t1 = Instant::now();
        // SAFETY: rb came from srb_create and is destroyed once.
        unsafe { capi::srb_destroy(rb) };
        println!(
            "  flags {flags}: srb_destroy returned after {:?}",
            t1.elapsed()
        );
    }
    Ok(())
}

fn main() {
    if let Ok(name) = std::env::var(SCENARIO_ENV) {
        child::scenario_exit(&name, || match name.as_str() {
            "capi_fault_wait" => capi_fault_wait(),
            other => anyhow::bail!("unknown scenario {other}"),
        });
    }
    test_support::run(TESTS).exit()
}
