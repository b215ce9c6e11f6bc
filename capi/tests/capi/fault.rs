//! A device fault before `srb_enqueue`: the errors a C caller sees, in a child process.
use super::{last_error, SCENARIO_ENV};
use anyhow::{ensure, Result};
use sized_readback_capi as capi;
use std::time::{Duration, Instant};
use test_support::child;

/// A producer that faults before `srb_enqueue` on the same stream: the enqueue or `srb_wait`
/// (with a 20 s timeout) returns `SRB_ERR_CUDA` naming the illegal address, in well under the
/// timeout, on both transports; `srb_destroy` returns.
pub(crate) fn capi_wait_after_a_fault() -> Result<()> {
    child::run_child(SCENARIO_ENV, "capi_fault_wait", Duration::from_secs(90)).map(drop)
}

pub(crate) fn capi_fault_wait() -> Result<()> {
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
        // Every later call on the lost context: a code (SRB_ERR_CUDA where it reaches the
        // device), within the wait's bound, never a hang or a crash.
        let t2 = Instant::now();
        let mut seq = 0;
        let again = enqueue(rb, &mut seq);
        let polled = if again == capi::SRB_OK {
            // SAFETY: as above.
            unsafe { capi::srb_poll(rb, seq) }
        } else {
            again
        };
        ensure!(
            polled == capi::SRB_ERR_CUDA || polled == capi::SRB_NOT_READY,
            "flags {flags}: the enqueue or poll after the fault gave {polled} ({})",
            last_error()
        );
        if again == capi::SRB_OK {
            let mut n = 0;
            // SAFETY: as above.
            let code = unsafe { capi::srb_wait(rb, seq, 20_000_000_000, &mut n) };
            ensure!(
                code == capi::SRB_ERR_CUDA,
                "flags {flags}: a later wait gave {code}"
            );
        }
        for (name, code) in creates_after_a_fault(&sizes) {
            ensure!(
                code == capi::SRB_ERR_CUDA,
                "flags {flags}: {name} on a lost context gave {code} ({})",
                last_error()
            );
        }
        ensure!(
            t2.elapsed() < Duration::from_secs(20),
            "flags {flags}: the later calls took {:?}",
            t2.elapsed()
        );
        println!(
            "  flags {flags}: every later call returned its code after {:?}",
            t2.elapsed()
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

/// Each create function on device 0 (its primary context, lost), with its result code; a
/// readback that was made anyway is destroyed.
fn creates_after_a_fault(sizes: &[usize]) -> Vec<(&'static str, i32)> {
    let mut out = Vec::new();
    let mut rb: *mut capi::srb_readback = std::ptr::null_mut();
    let mut keep = |name, code: i32, rb: &mut *mut capi::srb_readback| {
        if !rb.is_null() {
            // SAFETY: made by the create just called; destroyed once.
            unsafe { capi::srb_destroy(*rb) };
            *rb = std::ptr::null_mut();
        }
        out.push((name, code));
    };
    // SAFETY: valid sizes and out pointer.
    unsafe {
        let code = capi::srb_create(0, 16, 2, 1, sizes.as_ptr(), 0, &mut rb);
        keep("srb_create", code, &mut rb);
        let code = capi::srb_create(0, 16, 2, 1, sizes.as_ptr(), capi::SRB_FLAG_AUTO, &mut rb);
        keep("srb_create (auto)", code, &mut rb);
        let code = capi::srb_create_append(0, 16, 0, 2, 1, sizes.as_ptr(), 0, &mut rb);
        keep("srb_create_append", code, &mut rb);
        let code = capi::srb_create_buckets(0, 2, 16, 0, 2, 1, sizes.as_ptr(), 0, &mut rb);
        keep("srb_create_buckets", code, &mut rb);
    }
    out
}
