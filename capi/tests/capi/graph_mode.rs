//! Graph mode through the C ABI: one consumer, and several consumer threads.
use super::{ctx, last_error};
use anyhow::{ensure, Context as _, Result};
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{CudaGraph, CudaStream};
use sized_readback_capi as capi;
use std::sync::Arc;
use std::time::{Duration, Instant};
use test_support::step::*;

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

pub(crate) fn capi_graph_mode() -> Result<()> {
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
pub(crate) fn capi_graph_concurrent_consumers() -> Result<()> {
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
