//! Host-sequenced mode through the C ABI.
use super::{ctx, last_error};
use anyhow::{ensure, Result};
use cudarc::driver::sys::{self, CUdeviceptr};
use sized_readback_capi as capi;
use test_support::step::*;

/// Host-sequenced mode through the C ABI, both transports: enqueue/poll/wait/count/data/
/// release, and the errors a C caller sees.
pub(crate) fn capi_host_mode() -> Result<()> {
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
        // The test runs alone (exclusive): the library's allocations are this readback's.
        let before = live()?;
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
            let made = live()?;
            ensure!(
                made.pinned > before.pinned,
                "create: {before:?} -> {made:?}"
            );
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
        let after = live()?;
        ensure!(
            after == before,
            "flags {flags:#x}: destroy left {before:?} -> {after:?}"
        );
    }
    stream.synchronize()?;
    Ok(())
}

/// The library's allocations alive now, through the C API.
fn live() -> Result<capi::srb_allocations> {
    let mut a = capi::srb_allocations::default();
    // SAFETY: a writable local.
    let code = unsafe { capi::srb_live_allocations(&mut a) };
    ensure!(code == capi::SRB_OK, "srb_live_allocations: {code}");
    Ok(a)
}
