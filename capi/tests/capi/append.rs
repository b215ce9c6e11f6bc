//! The append path through the C ABI.
use super::{ctx, last_error};
use anyhow::{ensure, Result};
use sized_readback_capi as capi;

/// The C API's append path: `srb_append_begin` hands out the descriptor, a kernel appends
/// through it (`srbt_append_u64` of the test kernels), `srb_append_end` records it; an
/// overflow keeps the slot's rows readable and `srb_fetch_spill` brings the rest; a graph
/// append readback's descriptor serves a device-sequenced kernel.
pub(crate) fn capi_append() -> Result<()> {
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
