//! Creating a readback: `srb_create` (the pack), `srb_create_append` (append kernels) and
//! `srb_create_buckets` (bucketed), with their flags; every argument is checked before the
//! device is opened.
use crate::boundary::{guard, invalid, Failure};
use crate::codes::SRB_OK;
use crate::handle::{srb_readback, Inner};
use crate::types::SRB_MAX_COLUMNS;
use srb::{
    AppendReadback, BucketReadback, ColumnReadback, ColumnSchema, Error, GraphReadback,
    ReadbackConfig, StagedCopy, Transport,
};
use std::sync::{Arc, Mutex};

/// `srb_create` flag: the staged transport (device slot, then one fixed-size copy) instead
/// of mapped pinned memory.
pub const SRB_FLAG_STAGED: u32 = 1;
/// `srb_create` flag: a device-sequenced readback for CUDA graph capture and replay
/// (`srb_record` / `srb_next`). Not with `SRB_FLAG_STAGED`.
pub const SRB_FLAG_GRAPH: u32 = 2;
/// `srb_create_buckets` flag: the buckets are filled by append kernels (`srb_append_begin`),
/// not by the bucket pack (`srb_enqueue_buckets`).
pub const SRB_FLAG_APPEND: u32 = 4;
/// With `SRB_FLAG_STAGED`: always copy the whole slot (one fixed-size copy), even where the
/// sized copy is available. Without either of the two copy flags the staged transport takes
/// the sized copy where the driver (CUDA 12.8+) and the readback (a pack of one bucket) allow
/// it, else the whole slot; `srb_staged_copy` says which.
pub const SRB_FLAG_STAGED_WHOLE: u32 = 8;
/// With `SRB_FLAG_STAGED`: the sized copy (the copy's size follows the count, picked on the
/// device through a CUDA graph's SWITCH node), or `SRB_ERR_SIZED_COPY_UNAVAILABLE` where the
/// driver is older than CUDA 12.8 or the readback is an append or bucketed one.
pub const SRB_FLAG_STAGED_SIZED: u32 = 16;

/// `srb_create` flag: the auto transport (`Transport::Auto`): mapped slots, and staged slots
/// beside them where a count within the capacity can nearly fill a large slot; each enqueue
/// goes to the set the count read back last chooses (the thresholds: the Rust crate's
/// `sized_readback::auto`, measured in committed runs). Not with `SRB_FLAG_STAGED` or
/// `SRB_FLAG_GRAPH`; `SRB_FLAG_STAGED_SIZED` makes the staged slots' copy the sized one,
/// which is otherwise the whole slot (they serve nearly full slots).
pub const SRB_FLAG_AUTO: u32 = 32;

/// Both copy flags of the staged transport.
const STAGED_COPY: u32 = SRB_FLAG_STAGED_WHOLE | SRB_FLAG_STAGED_SIZED;

/// The schema and configuration `srb_create` asks for, checked without the driver: the
/// flags' combination, the columns, and the slot layout and total size.
fn create_config(
    capacity: usize,
    slots: u32,
    elem_sizes: &[usize],
    flags: u32,
) -> Result<(ColumnSchema, ReadbackConfig), Failure> {
    if flags & SRB_FLAG_GRAPH != 0 && flags & SRB_FLAG_STAGED != 0 {
        return Err(invalid_config(
            "SRB_FLAG_GRAPH needs the mapped transport, not SRB_FLAG_STAGED: a graph readback \
             chooses its slot on the device",
        ));
    }
    let mut schema = ColumnSchema::new();
    for &size in elem_sizes {
        schema.raw_column(size);
    }
    if flags & SRB_FLAG_AUTO != 0 && flags & (SRB_FLAG_STAGED | SRB_FLAG_GRAPH) != 0 {
        return Err(invalid_config(
            "SRB_FLAG_AUTO chooses the transport per enqueue: not with SRB_FLAG_STAGED or \
             SRB_FLAG_GRAPH",
        ));
    }
    let copy_flags = flags & (SRB_FLAG_STAGED_WHOLE | SRB_FLAG_STAGED_SIZED);
    if copy_flags != 0 && flags & (SRB_FLAG_STAGED | SRB_FLAG_AUTO) == 0 {
        return Err(invalid_config(
            "SRB_FLAG_STAGED_WHOLE and SRB_FLAG_STAGED_SIZED choose the staged transport's copy: \
             they need SRB_FLAG_STAGED (or, for srb_create, SRB_FLAG_AUTO)",
        ));
    }
    let staged_copy = match copy_flags {
        0 => StagedCopy::Auto,
        SRB_FLAG_STAGED_WHOLE => StagedCopy::Whole,
        SRB_FLAG_STAGED_SIZED => StagedCopy::Sized,
        _ => {
            return Err(invalid_config(
                "SRB_FLAG_STAGED_WHOLE and SRB_FLAG_STAGED_SIZED exclude each other",
            ))
        }
    };
    let transport = if flags & SRB_FLAG_STAGED != 0 {
        Transport::Staged
    } else if flags & SRB_FLAG_AUTO != 0 {
        Transport::Auto
    } else {
        Transport::Mapped
    };
    let config = ReadbackConfig::new(capacity)
        .slots(slots as usize)
        .transport(transport)
        .staged_copy(staged_copy);
    // The pack's slots: what every create function's readback needs at least.
    ColumnReadback::check(&schema, &config)?;
    Ok((schema, config))
}

/// `SRB_ERR_INVALID_CONFIG` with the core's message for it.
fn invalid_config(reason: &str) -> Failure {
    Error::InvalidConfig {
        reason: reason.into(),
    }
    .into()
}

/// The flags a create function was given, and the ones it takes.
struct Flags {
    function: &'static str,
    allowed: u32,
    given: u32,
}

/// The checks of `srb_create`'s arguments that need no driver.
///
/// # Safety
/// `elem_sizes` is null or points to `num_columns` values; `out` is null or writable.
unsafe fn create_args(
    flags: Flags,
    device: i32,
    capacity: usize,
    slots: u32,
    num_columns: u32,
    elem_sizes: *const usize,
    out: *mut *mut srb_readback,
) -> Result<(usize, ColumnSchema, ReadbackConfig), Failure> {
    let Flags {
        function,
        allowed,
        given: flags,
    } = flags;
    if out.is_null() {
        return Err(invalid("out is null"));
    }
    // SAFETY: per the contract.
    unsafe { *out = std::ptr::null_mut() };
    if elem_sizes.is_null() {
        return Err(invalid("elem_sizes is null"));
    }
    if num_columns == 0 || num_columns > SRB_MAX_COLUMNS {
        return Err(invalid(format!(
            "num_columns must be 1 to {SRB_MAX_COLUMNS}, not {num_columns}"
        )));
    }
    if flags & !allowed != 0 {
        let names: Vec<&str> = [
            (SRB_FLAG_STAGED, "SRB_FLAG_STAGED"),
            (SRB_FLAG_GRAPH, "SRB_FLAG_GRAPH"),
            (SRB_FLAG_APPEND, "SRB_FLAG_APPEND"),
            (SRB_FLAG_STAGED_WHOLE, "SRB_FLAG_STAGED_WHOLE"),
            (SRB_FLAG_STAGED_SIZED, "SRB_FLAG_STAGED_SIZED"),
            (SRB_FLAG_AUTO, "SRB_FLAG_AUTO"),
        ]
        .iter()
        .filter(|(f, _)| allowed & f != 0)
        .map(|&(_, n)| n)
        .collect();
        return Err(invalid(format!(
            "flags {flags:#x} include ones {function} does not take (it takes {})",
            names.join(", ")
        )));
    }
    let ordinal =
        usize::try_from(device).map_err(|_| invalid(format!("device {device} is negative")))?;
    // SAFETY: per the contract.
    let sizes = unsafe { std::slice::from_raw_parts(elem_sizes, num_columns as usize) };
    let (schema, config) = create_config(capacity, slots, sizes, flags)?;
    Ok((ordinal, schema, config))
}

/// Creates a readback in the primary context of device `device` (the CUDA runtime's), for
/// `num_columns` columns whose element sizes in bytes are `elem_sizes[0..num_columns]`, with
/// `capacity` rows per slot and `slots` slots (at least 1; 2 for double buffering), filled by
/// the pack kernel (`srb_enqueue`, `srb_record`). `flags`: 0, `SRB_FLAG_STAGED` (with
/// `SRB_FLAG_STAGED_WHOLE` or `SRB_FLAG_STAGED_SIZED` to choose its copy), `SRB_FLAG_AUTO`
/// (mapped and staged slots, chosen per enqueue by the count read back last; the copy flags
/// then choose the staged slots' copy), or `SRB_FLAG_GRAPH`. On success stores the handle in `*out`. The arguments are checked before
/// the device is opened: a bad one gives `SRB_ERR_INVALID_ARGUMENT` or `SRB_ERR_INVALID_CONFIG`
/// with or without a GPU.
///
/// Returns `SRB_OK`; `SRB_ERR_INVALID_ARGUMENT` for a null `elem_sizes` or `out`, no columns
/// or more than `SRB_MAX_COLUMNS`, unknown flags or a negative device; `SRB_ERR_INVALID_CONFIG`
/// for a zero capacity or slot count, a zero element size, sizes that overflow, or flags that
/// do not go together; `SRB_ERR_SIZED_COPY_UNAVAILABLE` for `SRB_FLAG_STAGED_SIZED` where the
/// driver (older than CUDA 12.8) or the readback cannot have it; `SRB_ERR_DRIVER_NOT_FOUND`,
/// `SRB_ERR_NO_DEVICE`, `SRB_ERR_UNSUPPORTED_DEVICE` (below compute capability 7.0);
/// `SRB_ERR_CUDA` if the driver cannot allocate the slots or load the kernel.
///
/// # Safety
/// `elem_sizes` points to `num_columns` values; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn srb_create(
    device: i32,
    capacity: usize,
    slots: u32,
    num_columns: u32,
    elem_sizes: *const usize,
    flags: u32,
    out: *mut *mut srb_readback,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let (ordinal, schema, config) = unsafe {
            create_args(
                Flags {
                    function: "srb_create",
                    allowed: SRB_FLAG_STAGED | SRB_FLAG_GRAPH | SRB_FLAG_AUTO | STAGED_COPY,
                    given: flags,
                },
                device,
                capacity,
                slots,
                num_columns,
                elem_sizes,
                out,
            )?
        };
        let ctx = srb::device::open(ordinal)?;
        let inner = if flags & SRB_FLAG_GRAPH != 0 {
            Inner::Graph {
                g: Arc::new(GraphReadback::new(&ctx, &schema, config.spill(0))?),
                held: Mutex::default(),
            }
        } else {
            Inner::Host {
                rb: ColumnReadback::new(&ctx, &schema, config)?,
                held: Mutex::default(),
            }
        };
        // SAFETY: per the contract.
        unsafe { *out = Box::into_raw(Box::new(srb_readback { inner })) };
        Ok(SRB_OK)
    })
}

/// Creates an append readback: its slots are filled by the caller's kernels through
/// `sized_readback/append.cuh` (`srb_append_begin` / `srb_append_end`; with `SRB_FLAG_GRAPH`,
/// kernels captured into graphs with the descriptor of `srb_append_desc_graph`). Arguments as
/// `srb_create`, plus `spill`: rows per slot of the device-side region that takes the rows
/// appended past `capacity` (0: none, such rows are dropped but counted).
///
/// Returns as `srb_create` (`SRB_ERR_INVALID_CONFIG` for a spill region too large too;
/// `SRB_ERR_SIZED_COPY_UNAVAILABLE` for `SRB_FLAG_STAGED_SIZED`, which appends do not have).
///
/// # Safety
/// As `srb_create`.
#[no_mangle]
pub unsafe extern "C" fn srb_create_append(
    device: i32,
    capacity: usize,
    spill: usize,
    slots: u32,
    num_columns: u32,
    elem_sizes: *const usize,
    flags: u32,
    out: *mut *mut srb_readback,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let (ordinal, schema, config) = unsafe {
            create_args(
                Flags {
                    function: "srb_create_append",
                    allowed: SRB_FLAG_STAGED | SRB_FLAG_GRAPH | STAGED_COPY,
                    given: flags,
                },
                device,
                capacity,
                slots,
                num_columns,
                elem_sizes,
                out,
            )?
        };
        let config = config.spill(spill);
        let graph = flags & SRB_FLAG_GRAPH != 0;
        if graph {
            GraphReadback::check(&schema, &config)?;
        } else {
            AppendReadback::check(&schema, &config)?;
        }
        let ctx = srb::device::open(ordinal)?;
        let inner = if graph {
            Inner::Graph {
                g: Arc::new(GraphReadback::new(&ctx, &schema, config)?),
                held: Mutex::default(),
            }
        } else {
            Inner::Append {
                rb: AppendReadback::new(&ctx, &schema, config)?,
                held: Mutex::default(),
                pending: Mutex::default(),
            }
        };
        // SAFETY: per the contract.
        unsafe { *out = Box::into_raw(Box::new(srb_readback { inner })) };
        Ok(SRB_OK)
    })
}

/// Creates a bucketed readback: each slot holds `buckets` buckets (1 to `SRB_MAX_BUCKETS`, e.g.
/// one per MPI neighbour) of `capacity` rows of every column, each with its own count. Filled by
/// the bucket pack (`srb_enqueue_buckets`, from device data already partitioned) or, with
/// `SRB_FLAG_APPEND`, by append kernels (`srb_append_begin`; the kernel uses
/// `srb::BlockAppendTo`), which put rows past a bucket's capacity into its `spill` rows (0:
/// none). Read a bucket with `srb_bucket_data`. Other arguments and flags as `srb_create`
/// (`SRB_FLAG_STAGED`; not `SRB_FLAG_GRAPH`).
///
/// Returns as `srb_create` (`SRB_ERR_INVALID_CONFIG` for 0 or more than `SRB_MAX_BUCKETS`
/// buckets, `SRB_FLAG_GRAPH`, or a spill without `SRB_FLAG_APPEND` too;
/// `SRB_ERR_SIZED_COPY_UNAVAILABLE` for `SRB_FLAG_STAGED_SIZED`, which bucketed readbacks do
/// not have).
///
/// # Safety
/// As `srb_create`.
#[no_mangle]
pub unsafe extern "C" fn srb_create_buckets(
    device: i32,
    buckets: u32,
    capacity: usize,
    spill: usize,
    slots: u32,
    num_columns: u32,
    elem_sizes: *const usize,
    flags: u32,
    out: *mut *mut srb_readback,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let (ordinal, schema, config) = unsafe {
            create_args(
                Flags {
                    function: "srb_create_buckets",
                    allowed: SRB_FLAG_STAGED | SRB_FLAG_GRAPH | SRB_FLAG_APPEND | STAGED_COPY,
                    given: flags,
                },
                device,
                capacity,
                slots,
                num_columns,
                elem_sizes,
                out,
            )?
        };
        if flags & SRB_FLAG_GRAPH != 0 {
            return Err(invalid_config(
                "bucketed readbacks are not recorded into graphs",
            ));
        }
        let config = config.buckets(buckets as usize);
        let append = flags & SRB_FLAG_APPEND != 0;
        if append {
            AppendReadback::check(&schema, &config.clone().spill(spill))?;
        } else {
            BucketReadback::check(&schema, &config)?;
            if spill > 0 {
                return Err(invalid_config(
                    "spill needs SRB_FLAG_APPEND: a bucket pack copies nothing past a bucket's \
                     capacity, so it has no spill region",
                ));
            }
        }
        let ctx = srb::device::open(ordinal)?;
        let inner = if append {
            Inner::Append {
                rb: AppendReadback::new(&ctx, &schema, config.spill(spill))?,
                held: Mutex::default(),
                pending: Mutex::default(),
            }
        } else {
            Inner::Buckets {
                rb: BucketReadback::new(&ctx, &schema, config)?,
                held: Mutex::default(),
            }
        };
        // SAFETY: per the contract.
        unsafe { *out = Box::into_raw(Box::new(srb_readback { inner })) };
        Ok(SRB_OK)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::{SRB_ERR_INVALID_ARGUMENT, SRB_ERR_INVALID_CONFIG};
    use crate::last_error::srb_last_error;
    use std::ffi::CStr;

    fn last_error() -> String {
        // SAFETY: srb_last_error returns this thread's NUL-terminated buffer.
        unsafe { CStr::from_ptr(srb_last_error()) }
            .to_str()
            .expect("UTF-8")
            .to_owned()
    }

    #[test]
    fn create_config_checks_without_a_driver() {
        let config_error = |capacity, slots, sizes: &[usize], flags| match create_config(
            capacity, slots, sizes, flags,
        ) {
            Ok(_) => panic!("{capacity} {slots} {sizes:?} {flags} accepted"),
            Err(f) => f.code,
        };
        let bad = SRB_ERR_INVALID_CONFIG;
        assert_eq!(config_error(0, 2, &[8], 0), bad, "zero capacity");
        assert_eq!(config_error(16, 0, &[8], 0), bad, "zero slots");
        assert_eq!(
            config_error(usize::MAX, 2, &[8], 0),
            bad,
            "capacity overflows"
        );
        assert_eq!(
            config_error(1 << 40, u32::MAX, &[8], 0),
            bad,
            "total overflows"
        );
        assert_eq!(config_error(16, 2, &[8, 0], 0), bad, "element size 0");
        let both = SRB_FLAG_GRAPH | SRB_FLAG_STAGED;
        assert_eq!(config_error(16, 2, &[8], both), bad, "graph and staged");
        let (schema, config) = create_config(16, 3, &[8, 4], SRB_FLAG_STAGED).unwrap();
        let sizes: Vec<usize> = schema.columns().iter().map(|c| c.elem_size).collect();
        assert_eq!(sizes, [8, 4]);
        assert_eq!((config.capacity, config.slots), (16, 3));
        assert_eq!(config.transport, Transport::Staged);
        assert_eq!(config.staged_copy, StagedCopy::Auto);
        // The copy flags: with SRB_FLAG_STAGED only, one at a time.
        let (whole, sized) = (SRB_FLAG_STAGED_WHOLE, SRB_FLAG_STAGED_SIZED);
        assert_eq!(config_error(16, 2, &[8], whole), bad, "whole, mapped");
        assert_eq!(config_error(16, 2, &[8], sized), bad, "sized, mapped");
        let staged = SRB_FLAG_STAGED;
        assert_eq!(
            config_error(16, 2, &[8], staged | whole | sized),
            bad,
            "both copies"
        );
        for (flag, want) in [(whole, StagedCopy::Whole), (sized, StagedCopy::Sized)] {
            let (_, config) = create_config(16, 2, &[8], staged | flag).unwrap();
            assert_eq!(config.staged_copy, want);
        }
        // The auto transport: alone or with a copy flag (its staged slots' copy), never with
        // the staged or graph flag.
        let auto = SRB_FLAG_AUTO;
        let (_, config) = create_config(1 << 20, 2, &[8], auto).unwrap();
        assert_eq!(config.transport, Transport::Auto);
        let (_, config) = create_config(1 << 20, 2, &[8], auto | whole).unwrap();
        assert_eq!(
            (config.transport, config.staged_copy),
            (Transport::Auto, StagedCopy::Whole)
        );
        assert_eq!(
            config_error(16, 2, &[8], auto | staged),
            bad,
            "auto, staged"
        );
        assert_eq!(
            config_error(16, 2, &[8], auto | SRB_FLAG_GRAPH),
            bad,
            "auto, graph"
        );
    }

    /// An explicit sized copy where the readback cannot have one is its own code, found before
    /// the device is opened: appends and bucket packs copy the whole slot.
    #[test]
    fn sized_copy_of_appends_and_buckets_is_refused() {
        use crate::codes::SRB_ERR_SIZED_COPY_UNAVAILABLE;
        let sizes = [8usize];
        let mut out = std::ptr::null_mut();
        let flags = SRB_FLAG_STAGED | SRB_FLAG_STAGED_SIZED;
        // SAFETY: valid sizes and out pointer; refused before any driver call.
        let code = unsafe { srb_create_append(0, 16, 0, 2, 1, sizes.as_ptr(), flags, &mut out) };
        assert_eq!(code, SRB_ERR_SIZED_COPY_UNAVAILABLE, "{}", last_error());
        assert!(
            last_error().contains("append readbacks"),
            "{}",
            last_error()
        );
        // SAFETY: as above.
        let code =
            unsafe { srb_create_buckets(0, 4, 16, 0, 2, 1, sizes.as_ptr(), flags, &mut out) };
        assert_eq!(code, SRB_ERR_SIZED_COPY_UNAVAILABLE, "{}", last_error());
        assert!(last_error().contains("bucketed"), "{}", last_error());
        assert!(out.is_null());
    }

    /// Each create function takes only its own flags (a flag it does not take is a bad
    /// argument), and a spill only where append kernels can spill (settings that do not go
    /// together are a bad configuration); both are refused before the device is opened (the
    /// same answer without a GPU).
    #[test]
    fn create_functions_take_only_their_flags() {
        let sizes = [8usize];
        let mut out = std::ptr::null_mut();
        // SAFETY: valid sizes and out pointer; the flags are refused before any driver call.
        let code = unsafe { srb_create(0, 16, 2, 1, sizes.as_ptr(), SRB_FLAG_APPEND, &mut out) };
        assert_eq!(code, SRB_ERR_INVALID_ARGUMENT);
        assert_eq!(
            last_error(),
            "flags 0x4 include ones srb_create does not take (it takes SRB_FLAG_STAGED, \
             SRB_FLAG_GRAPH, SRB_FLAG_STAGED_WHOLE, SRB_FLAG_STAGED_SIZED, SRB_FLAG_AUTO)"
        );
        assert!(out.is_null());
        // SAFETY: as above.
        let code =
            unsafe { srb_create_append(0, 16, 0, 2, 1, sizes.as_ptr(), SRB_FLAG_APPEND, &mut out) };
        assert_eq!(code, SRB_ERR_INVALID_ARGUMENT, "{}", last_error());
        // The auto transport is srb_create's: appends have one slot set.
        // SAFETY: as above.
        let code =
            unsafe { srb_create_append(0, 16, 0, 2, 1, sizes.as_ptr(), SRB_FLAG_AUTO, &mut out) };
        assert_eq!(code, SRB_ERR_INVALID_ARGUMENT, "{}", last_error());
        // SAFETY: as above.
        let code = unsafe { srb_create_buckets(0, 4, 16, 8, 2, 1, sizes.as_ptr(), 0, &mut out) };
        assert_eq!(code, SRB_ERR_INVALID_CONFIG);
        assert!(
            last_error().contains("spill needs SRB_FLAG_APPEND"),
            "{}",
            last_error()
        );
        // SAFETY: as above; the spill's size overflows, found before the device is opened.
        let code = unsafe {
            srb_create_buckets(
                0,
                4,
                16,
                usize::MAX,
                2,
                1,
                sizes.as_ptr(),
                SRB_FLAG_APPEND,
                &mut out,
            )
        };
        assert_eq!(code, SRB_ERR_INVALID_CONFIG, "{}", last_error());
        // SAFETY: as above.
        let code = unsafe { srb_create(0, 16, 2, 1, [0usize].as_ptr(), 0, &mut out) };
        assert_eq!(code, SRB_ERR_INVALID_CONFIG);
        assert_eq!(
            last_error(),
            "invalid configuration: column 0 has elements of 0 bytes: an element \
             needs at least 1 byte"
        );
    }
}
