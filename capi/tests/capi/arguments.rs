//! The argument checks that need no GPU.
use super::last_error;
use anyhow::{ensure, Result};
use sized_readback_capi as capi;

/// Argument checks that need no GPU: they run (and must pass) everywhere.
pub(crate) fn capi_argument_errors() -> Result<()> {
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
