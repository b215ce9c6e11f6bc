//! The sized launch's exact-grid form through the C ABI (`srb_sized_launch_create_exact_grid`):
//! the body kernel runs with ceil(count / items per block) blocks, not at all for 0 or past the
//! capacity; launches wait as the SWITCH form's do; bad arguments are typed errors, with or
//! without a GPU.
use super::last_error;
use super::sized_launch::{record_body, unavailable, Rig};
use anyhow::{ensure, Result};
use sized_readback_capi as capi;

/// The argument checks that need no GPU: each create must fail with its code and store nothing.
pub(crate) fn capi_sized_grid_arguments() -> Result<()> {
    const COUNT: capi::srb_devptr = 0x1000;
    let body: capi::srb_sized_body = Some(record_body);
    // (what, count, capacity, items per block, body, give out, the code)
    let cases: [(
        &str,
        capi::srb_devptr,
        u64,
        u64,
        capi::srb_sized_body,
        bool,
        i32,
    ); 8] = [
        (
            "a null body",
            COUNT,
            64,
            32,
            None,
            true,
            capi::SRB_ERR_INVALID_ARGUMENT,
        ),
        (
            "a null out",
            COUNT,
            64,
            32,
            body,
            false,
            capi::SRB_ERR_INVALID_ARGUMENT,
        ),
        (
            "0 items per block",
            COUNT,
            64,
            0,
            body,
            true,
            capi::SRB_ERR_INVALID_CONFIG,
        ),
        (
            "capacity 0",
            COUNT,
            0,
            32,
            body,
            true,
            capi::SRB_ERR_INVALID_CONFIG,
        ),
        (
            "a grid past 2^31 - 1 blocks",
            COUNT,
            u64::MAX,
            1,
            body,
            true,
            capi::SRB_ERR_INVALID_CONFIG,
        ),
        (
            "a grid whose arithmetic passes 2^64",
            COUNT,
            u64::MAX,
            1 << 40,
            body,
            true,
            capi::SRB_ERR_INVALID_CONFIG,
        ),
        (
            "a null count",
            0,
            64,
            32,
            body,
            true,
            capi::SRB_ERR_BAD_POINTER,
        ),
        (
            "a misaligned count",
            0x1002,
            64,
            32,
            body,
            true,
            capi::SRB_ERR_BAD_POINTER,
        ),
    ];
    for (what, count, capacity, per_block, body, give_out, want) in cases {
        let mut out: *mut capi::srb_sized_launch = std::ptr::null_mut();
        let out_arg = if give_out {
            &mut out as *mut _
        } else {
            std::ptr::null_mut()
        };
        // SAFETY: every pointer is null or valid for the call; the body is never called (each
        // case fails before the build).
        let code = unsafe {
            capi::srb_sized_launch_create_exact_grid(
                0,
                count,
                capi::SRB_COUNT_I32,
                capacity,
                per_block,
                body,
                std::ptr::null_mut(),
                out_arg,
            )
        };
        ensure!(code == want, "{what}: {code} {}", last_error());
        ensure!(out.is_null(), "{what}: a failed create stored a handle");
    }
    Ok(())
}

pub(crate) fn capi_sized_grid() -> Result<()> {
    let capacity = 5000u64;
    let mut rig = Rig::new(capacity as usize)?;
    let mut l: *mut capi::srb_sized_launch = std::ptr::null_mut();
    // SAFETY: valid pointers; the rig's body outlives the call. Items per block: the test
    // body's block.
    let code = unsafe {
        capi::srb_sized_launch_create_exact_grid(
            0,
            rig.count_ptr(),
            capi::SRB_COUNT_I32,
            capacity,
            srb::testing::SIZED_BODY_BLOCK as u64,
            Some(record_body),
            rig.user(),
            &mut l,
        )
    };
    if unavailable(code)? {
        return Ok(());
    }
    ensure!(code == capi::SRB_OK, "create: {code} {}", last_error());
    ensure!(
        rig.body.calls == 1,
        "the callback ran {} times, not once",
        rig.body.calls
    );
    let result = (|| -> Result<()> {
        let mut got = [0u64; 2];
        // SAFETY: a live handle; room for 2.
        ensure!(unsafe { capi::srb_sized_launch_classes(l, got.as_mut_ptr(), 2) } == 1);
        ensure!(got[0] == capacity);
        // The last count that runs is 257: 2 blocks, 512 threads, not the 20 blocks (5120
        // threads) the body was recorded with; 0 and 5001 run nothing.
        let counts = [0i32, 1, 256, 5000, 5001, 257];
        let seqs = rig.enqueue_counts(l, &counts)?;
        for (&seq, &n) in seqs.iter().zip(&counts) {
            let (mut c, mut k) = (0u64, u32::MAX);
            // SAFETY: a live handle; out-pointers.
            let code = unsafe { capi::srb_sized_launch_wait(l, seq, -1, &mut c, &mut k) };
            if n as u64 > capacity {
                ensure!(
                    code == capi::SRB_ERR_COUNT_EXCEEDS_CAPACITY && c == n as u64,
                    "{n}: {code} {c}"
                );
            } else {
                ensure!(
                    code == capi::SRB_OK && c == n as u64 && k == 0,
                    "{n}: {code} {c} class {k} {}",
                    last_error()
                );
            }
        }
        let m = rig.stream.clone_dtoh(&rig.meta)?;
        ensure!(
            m[3] == 4,
            "{} bodies ran for 4 counts from 1 to the capacity",
            m[3]
        );
        ensure!(m[1] == 512, "the last body ran {} threads, not 512", m[1]);
        Ok(())
    })();
    // SAFETY: created above, destroyed once.
    unsafe { capi::srb_sized_launch_destroy(l) };
    result
}
