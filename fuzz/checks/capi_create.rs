//! The create functions of the C API (`srb_create`, `srb_create_append`,
//! `srb_create_buckets`) with arguments from fuzz bytes: device, capacity, spill, slots,
//! buckets, `num_columns`, the element sizes (null, or a host array of exactly
//! `min(num_columns, SRB_MAX_COLUMNS)` values, so an over-read is out of bounds: AddressSanitizer
//! flags it under cargo-fuzz) and flags, with `out` null or one pointer between two canaries.
//!
//! Asserted: no panic (`SRB_ERR_PANIC`) and only a code the function documents; the code the
//! arguments call for where the arguments alone decide it (a null pointer, bad column count,
//! unknown flag or negative device is `SRB_ERR_INVALID_ARGUMENT`; a zero capacity, slot count
//! or element size, an element size above `UINT32_MAX`, flags that exclude each other, buckets
//! out of 1..=`SRB_MAX_BUCKETS` or a spill without `SRB_FLAG_APPEND` is
//! `SRB_ERR_INVALID_CONFIG`; the sized copy of an append or bucketed readback is
//! `SRB_ERR_SIZED_COPY_UNAVAILABLE`); a small valid configuration reaches the device (without a
//! GPU: `SRB_ERR_DRIVER_NOT_FOUND` or `SRB_ERR_NO_DEVICE`); `*out` null after every failure
//! and the canaries around it untouched; the element sizes unchanged; `srb_last_error` the
//! same thread buffer, non-empty after a failure, NUL-terminated within 1024 bytes, UTF-8.
//!
//! Needs a GPU (left to capi/tests/capi.rs and the GPU suites): what the device does with a
//! configuration that passes the checks. With a GPU a created readback is destroyed at once.
use super::input::Input;
use super::last_error::LastError;
use sized_readback_capi as capi;

const CANARY: usize = 0x5a5a_5a5a_5a5a_5a5a;

/// Which create function.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Function {
    Create,
    Append,
    Buckets,
}

/// Every known flag.
const KNOWN: u32 = capi::SRB_FLAG_STAGED
    | capi::SRB_FLAG_GRAPH
    | capi::SRB_FLAG_APPEND
    | capi::SRB_FLAG_STAGED_WHOLE
    | capi::SRB_FLAG_STAGED_SIZED;

/// Runs one create call from `data` and checks its answer.
pub fn check(data: &[u8]) {
    let last = LastError::new();
    let mut r = Input::new(data);
    let function = match r.byte() % 3 {
        0 => Function::Create,
        1 => Function::Append,
        _ => Function::Buckets,
    };
    let device = if r.bool() { r.i32() } else { 0 };
    // Mostly small values, so that valid configurations get through too.
    let small = |r: &mut Input, max: u64| -> u64 {
        if r.bool() {
            u64::from(r.byte()) % (max + 1)
        } else {
            r.u64()
        }
    };
    let capacity = small(&mut r, 4096) as usize;
    let spill = if r.bool() {
        0
    } else {
        small(&mut r, 4096) as usize
    };
    let slots = small(&mut r, 8) as u32;
    let buckets = small(&mut r, 300) as u32;
    let num_columns = match r.byte() % 4 {
        0 => r.u32(),
        _ => u32::from(r.byte() % 11),
    };
    let sizes_null = r.byte().is_multiple_of(16);
    let sizes: Vec<usize> = (0..num_columns.min(capi::SRB_MAX_COLUMNS))
        .map(|_| match r.byte() % 4 {
            0 => r.usize(),
            _ => [1, 2, 4, 8, 16, 3, 12, 0][r.byte() as usize % 8],
        })
        .collect();
    let flags = match r.byte() % 4 {
        0 => r.u32(),
        _ => u32::from(r.byte()) & KNOWN,
    };
    let out_null = r.byte().is_multiple_of(16);

    let sizes_before = sizes.clone();
    let mut out: [*mut capi::srb_readback; 3] = [
        CANARY as *mut _,
        0x1234 as *mut capi::srb_readback,
        CANARY as *mut _,
    ];
    let out_ptr = if out_null {
        std::ptr::null_mut()
    } else {
        &mut out[1] as *mut _
    };
    let sizes_ptr = if sizes_null {
        std::ptr::null()
    } else {
        sizes.as_ptr()
    };
    // SAFETY: `sizes_ptr` is null or points to min(num_columns, SRB_MAX_COLUMNS) values (the
    // API must refuse more columns before it reads them); `out_ptr` is null or writable.
    let code = unsafe {
        match function {
            Function::Create => capi::srb_create(
                device,
                capacity,
                slots,
                num_columns,
                sizes_ptr,
                flags,
                out_ptr,
            ),
            Function::Append => capi::srb_create_append(
                device,
                capacity,
                spill,
                slots,
                num_columns,
                sizes_ptr,
                flags,
                out_ptr,
            ),
            Function::Buckets => capi::srb_create_buckets(
                device,
                buckets,
                capacity,
                spill,
                slots,
                num_columns,
                sizes_ptr,
                flags,
                out_ptr,
            ),
        }
    };
    let what = || {
        format!(
            "{function:?} device {device} capacity {capacity} spill {spill} slots {slots} \
             buckets {buckets} columns {num_columns} sizes {sizes:?} (null {sizes_null}) \
             flags {flags:#x} out null {out_null}: code {code} ({})",
            last.text()
        )
    };
    assert_eq!(out[0] as usize, CANARY, "{}", what());
    assert_eq!(out[2] as usize, CANARY, "{}", what());
    assert_eq!(sizes, sizes_before, "{}", what());
    if code == capi::SRB_OK {
        assert!(!out[1].is_null(), "{}", what());
        // SAFETY: a handle just created, destroyed once.
        unsafe { capi::srb_destroy(out[1]) };
    } else {
        last.check_failure(&what);
        if !out_null {
            assert!(out[1].is_null(), "*out not nulled: {}", what());
        }
    }
    last.check_stable();

    let driver_stage = [
        capi::SRB_OK,
        capi::SRB_ERR_DRIVER_NOT_FOUND,
        capi::SRB_ERR_NO_DEVICE,
        capi::SRB_ERR_UNSUPPORTED_DEVICE,
        capi::SRB_ERR_CUDA,
        capi::SRB_ERR_SIZED_COPY_UNAVAILABLE,
    ];
    let config_stage = [
        capi::SRB_ERR_INVALID_CONFIG,
        capi::SRB_ERR_SIZED_COPY_UNAVAILABLE,
    ];
    let allowed = match function {
        Function::Buckets => KNOWN,
        _ => KNOWN & !capi::SRB_FLAG_APPEND,
    };
    let staged = flags & capi::SRB_FLAG_STAGED != 0;
    let graph = flags & capi::SRB_FLAG_GRAPH != 0;
    let append = flags & capi::SRB_FLAG_APPEND != 0;
    let whole = flags & capi::SRB_FLAG_STAGED_WHOLE != 0;
    let sized = flags & capi::SRB_FLAG_STAGED_SIZED != 0;
    let argument_error = out_null
        || sizes_null
        || num_columns == 0
        || num_columns > capi::SRB_MAX_COLUMNS
        || flags & !allowed != 0
        || device < 0;
    if argument_error {
        assert_eq!(code, capi::SRB_ERR_INVALID_ARGUMENT, "{}", what());
        return;
    }
    // What `create_config` refuses, and a bucketed graph readback, found first.
    let config_error = capacity == 0
        || slots == 0
        || sizes.iter().any(|&s| s == 0 || s > u32::MAX as usize)
        || (graph && staged)
        || ((whole || sized) && !staged)
        || (whole && sized)
        || (function == Function::Buckets && graph);
    if config_error {
        assert_eq!(code, capi::SRB_ERR_INVALID_CONFIG, "{}", what());
        return;
    }
    // Small enough that no size can overflow: the checks pass, and the device decides.
    let fits =
        capacity <= 4096 && spill <= 4096 && slots <= 8 && sizes.iter().all(|&s| s <= 1 << 16);
    // Then the readback kind's own checks and the sizes' arithmetic, which may find any of
    // these first.
    let kind_error = function == Function::Buckets
        && (buckets == 0 || buckets > capi::SRB_MAX_BUCKETS || (spill > 0 && !append));
    let no_sized = sized && function != Function::Create;
    match (kind_error, no_sized) {
        (true, true) => assert!(config_stage.contains(&code), "{}", what()),
        (true, false) => assert_eq!(code, capi::SRB_ERR_INVALID_CONFIG, "{}", what()),
        (false, true) if fits => {
            assert_eq!(code, capi::SRB_ERR_SIZED_COPY_UNAVAILABLE, "{}", what())
        }
        (false, true) => assert!(config_stage.contains(&code), "{}", what()),
        (false, false) => {}
    }
    if kind_error || no_sized {
        return;
    }
    if fits {
        assert!(driver_stage.contains(&code), "{}", what());
        if !sized {
            assert_ne!(code, capi::SRB_ERR_SIZED_COPY_UNAVAILABLE, "{}", what());
        }
    } else {
        assert!(
            driver_stage.contains(&code) || config_stage.contains(&code),
            "{}",
            what()
        );
    }
}
