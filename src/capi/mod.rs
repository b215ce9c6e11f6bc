//! The C ABI, behind the `capi` feature; the crate in `capi/` builds it into
//! `libsized_readback.{a,so}`, and its header `sized_readback.h` is generated from this file by
//! cbindgen (`capi/cbindgen.toml`; `capi/tests/c_header.rs` fails when the checked-in header is
//! stale).
//!
//! Handles are raw driver-API values, equal to the runtime API's in the same context: a device
//! pointer is an `unsigned long long` (`CUdeviceptr`), a stream a `struct CUstream_st *`
//! (`CUstream`, `cudaStream_t`), an event a `struct CUevent_st *` (`CUevent`, `cudaEvent_t`),
//! so the header needs no CUDA header. A readback lives in the *primary* context of its
//! device, the one the CUDA runtime uses.
//!
//! Every function returns an `SRB_*` code (0 success, > 0 "not yet", < 0 an error, one code
//! per kind of error); after an error, `srb_last_error()` gives this thread's message (valid
//! until this thread's next failing `srb_` call). No Rust panic crosses the boundary: one
//! becomes `SRB_ERR_PANIC`. Every function may be called from any thread.
//!
//! A readback made without `SRB_FLAG_GRAPH` is *host-sequenced*: `srb_enqueue` (or
//! `srb_append_begin`) returns the readback's sequence number, which `srb_poll`, `srb_wait`,
//! `srb_count`, `srb_data` and `srb_release` take. One made with `SRB_FLAG_GRAPH` is
//! *device-sequenced*, for CUDA graphs: `srb_record` records the pack into a capturing stream
//! (or kernels use `srb_append_desc_graph`'s descriptor), and `srb_next` returns the next
//! replay's sequence number, which `srb_count`, `srb_data` and `srb_release` take.
#![allow(non_camel_case_types)]
use crate::raw::abi;
use crate::{
    AppendReadback, AppendTicket, BucketReadback, ColumnReadback, ColumnSchema, ColumnSource,
    ColumnTicket, CountKind, Error, GraphReadback, OwnedReplay, RawCount, ReadbackConfig,
    Transport, MAX_COLUMNS,
};
use cudarc::driver::sys;
use std::cell::Cell;
use std::ffi::{c_char, c_ulonglong, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The driver API's stream object (`CUstream` and `cudaStream_t` point to it); opaque.
pub struct CUstream_st {
    _opaque: [u8; 0],
}
/// The driver API's event object (`CUevent` and `cudaEvent_t` point to it); opaque.
pub struct CUevent_st {
    _opaque: [u8; 0],
}

/// A device address, as `CUdeviceptr` (a runtime-API device pointer cast to an integer).
pub type srb_devptr = c_ulonglong;

/// The append descriptor (declared for C by `sized_readback/slot.h`).
pub use crate::raw::abi::srb_append_desc;

/// Success.
pub const SRB_OK: i32 = 0;
/// The readback is still in flight (`srb_poll`, `srb_count`, `srb_data`), or `srb_next`
/// found another thread taking a replay (nothing consumed; call it again).
pub const SRB_NOT_READY: i32 = 1;
/// A wait ran out of time; the readback stays valid (wait again).
pub const SRB_TIMEOUT: i32 = 2;
/// A null pointer, an unknown sequence number, a column out of range, or a call that does
/// not fit the readback's kind (graph, append).
pub const SRB_ERR_INVALID_ARGUMENT: i32 = -1;
/// The CUDA driver library (libcuda) could not be loaded.
pub const SRB_ERR_DRIVER_NOT_FOUND: i32 = -2;
/// No CUDA device with that ordinal.
pub const SRB_ERR_NO_DEVICE: i32 = -3;
/// A CUDA driver call failed (the message names it), including device errors such as a
/// faulted kernel.
pub const SRB_ERR_CUDA: i32 = -4;
/// Unusable settings: zero capacity or slots, an element size of 0 or above `UINT32_MAX`,
/// sizes that overflow, `SRB_FLAG_GRAPH` with `SRB_FLAG_STAGED` (`srb_create` checks these
/// before it opens the device, so they are reported the same with or without a GPU).
pub const SRB_ERR_INVALID_CONFIG: i32 = -5;
/// The device-resident count exceeded the capacity; nothing was copied. `srb_wait` and
/// `srb_next` store the count in `*count_out`, so the caller can make a larger readback.
pub const SRB_ERR_COUNT_EXCEEDS_CAPACITY: i32 = -6;
/// The device-resident count was negative (signed count kinds). `srb_wait` and `srb_next`
/// store its bits in `*count_out`: read them as `int64_t`.
pub const SRB_ERR_NEGATIVE_COUNT: i32 = -7;
/// The count exceeded a column's source length; nothing was copied.
pub const SRB_ERR_COUNT_EXCEEDS_SOURCE: i32 = -8;
/// A stream or pointer belongs to another context or device.
pub const SRB_ERR_FOREIGN_CONTEXT: i32 = -9;
/// A null or misaligned device pointer (the count must be aligned to its size), or an address
/// the driver does not know.
pub const SRB_ERR_BAD_POINTER: i32 = -10;
/// Every slot is held: release one first (`srb_release`).
pub const SRB_ERR_SLOTS_EXHAUSTED: i32 = -11;
/// Graph mode: this replay was dropped because the host held its slot (it fell more than
/// `slots` replays behind). The replay is consumed; call `srb_next` again for the next one.
pub const SRB_ERR_OVERRUN: i32 = -12;
/// A slot's trailer did not match: a bug or memory corruption.
pub const SRB_ERR_CORRUPT: i32 = -13;
/// The column arrays given do not match the readback (their number).
pub const SRB_ERR_SCHEMA_MISMATCH: i32 = -14;
/// A host-sequenced enqueue or append was given a stream that is capturing a CUDA graph: use a
/// readback created with `SRB_FLAG_GRAPH` for captures.
pub const SRB_ERR_STREAM_CAPTURING: i32 = -15;
/// Graph mode: `srb_next` before anything was recorded.
pub const SRB_ERR_NOTHING_RECORDED: i32 = -16;
/// Graph mode: a recording whose count kind or source lengths differ from the readback's
/// first (the host cannot tell recordings apart), or packs mixed with append kernels.
pub const SRB_ERR_RECORDING_MISMATCH: i32 = -17;
/// An append kernel appended more rows than the capacity: `*count_out` holds the true count;
/// the slot's `capacity` rows stay readable (`srb_count`, `srb_data`) until `srb_release`,
/// and `srb_fetch_spill` brings back the rows that went to the spill region.
pub const SRB_ERR_APPEND_OVERFLOW: i32 = -18;
/// An append kernel's stream finished without the trailer: a block did not call finish().
pub const SRB_ERR_APPEND_UNFINISHED: i32 = -19;
/// An append kernel's BlockAppend did not match the readback (block size or columns).
pub const SRB_ERR_APPEND_MISUSE: i32 = -20;
/// A bucketed append named a bucket out of range: those rows were dropped (counted); the
/// other buckets' rows are readable until `srb_release`.
pub const SRB_ERR_BAD_BUCKET: i32 = -21;
/// A bucket pack found a bucket's count above a bucket's capacity; nothing was copied.
/// `*count_out` holds that bucket's count.
pub const SRB_ERR_BUCKET_OVER_CAPACITY: i32 = -22;
/// A bucket pack found a bucket's range past its source's end or into the next bucket's (the
/// offsets must rise); nothing was copied.
pub const SRB_ERR_BUCKET_RANGE: i32 = -23;
/// The device's compute capability is below 7.0 (Volta), the oldest the kernels support.
pub const SRB_ERR_UNSUPPORTED_DEVICE: i32 = -24;
/// A device buffer holds fewer values than the readback reads from it (an empty count buffer,
/// fewer counts or offsets than buckets).
pub const SRB_ERR_BUFFER_TOO_SHORT: i32 = -25;
/// A Rust panic was caught at the boundary (a bug; please report it).
pub const SRB_ERR_PANIC: i32 = -100;

/// `srb_create` flag: the staged transport (device slot, then one fixed-size copy) instead
/// of mapped pinned memory.
pub const SRB_FLAG_STAGED: u32 = 1;
/// `srb_create` flag: a device-sequenced readback for CUDA graph capture and replay
/// (`srb_record` / `srb_next`). Not with `SRB_FLAG_STAGED`.
pub const SRB_FLAG_GRAPH: u32 = 2;
/// `srb_create_buckets` flag: the buckets are filled by append kernels (`srb_append_begin`),
/// not by the bucket pack (`srb_enqueue_buckets`).
pub const SRB_FLAG_APPEND: u32 = 4;

/// Most buckets of one bucketed readback.
pub const SRB_MAX_BUCKETS: u32 = 256;

/// Count kind: `int32_t` (as in `int* d_size`).
pub const SRB_COUNT_INT32: u32 = 0;
/// Count kind: `uint32_t`.
pub const SRB_COUNT_UINT32: u32 = 1;
/// Count kind: `int64_t`.
pub const SRB_COUNT_INT64: u32 = 2;
/// Count kind: `uint64_t`.
pub const SRB_COUNT_UINT64: u32 = 3;

/// Most columns of one readback.
pub const SRB_MAX_COLUMNS: u32 = 8;

// The C API's constants are the slot header's.
const _: () = {
    assert!(SRB_COUNT_INT32 == abi::SRB_COUNT_I32);
    assert!(SRB_COUNT_UINT32 == abi::SRB_COUNT_U32);
    assert!(SRB_COUNT_INT64 == abi::SRB_COUNT_I64);
    assert!(SRB_COUNT_UINT64 == abi::SRB_COUNT_U64);
    assert!(SRB_MAX_COLUMNS == abi::SRB_MAX_COLUMNS);
    assert!(SRB_MAX_BUCKETS == abi::SRB_MAX_BUCKETS);
};

/// An opaque readback handle, from `srb_create` or `srb_create_append`, freed by
/// `srb_destroy`.
pub struct srb_readback {
    inner: Inner,
}

/// One readback the caller holds, by sequence number, until `srb_release`.
enum Held {
    Pack(ColumnTicket),
    /// An append, and the fetch of its spill once asked for.
    Append(AppendTicket, Mutex<Option<Arc<ColumnTicket>>>),
    /// A replay taken by `srb_next`, and the fetch of its spill once asked for.
    Replay(Mutex<Option<Arc<ColumnTicket>>>, OwnedReplay),
}

/// The readbacks the caller holds. Host-sequenced: at most one per slot (a slot is not handed
/// out again until released); graph: every replay taken and not released.
type HeldTable = Mutex<Vec<Arc<Held>>>;

enum Inner {
    Host {
        rb: ColumnReadback,
        held: HeldTable,
    },
    Buckets {
        rb: BucketReadback,
        held: HeldTable,
    },
    Append {
        rb: AppendReadback,
        held: HeldTable,
        /// Appends begun and not ended (the caller keeps their streams alive meanwhile).
        pending: Mutex<Vec<crate::PendingAppend<'static>>>,
    },
    Graph {
        g: Arc<GraphReadback>,
        held: HeldTable,
    },
}

/// Bytes of the per-thread error buffer, NUL included: longer messages are truncated.
const LAST_ERROR_BYTES: usize = 1024;

thread_local! {
    /// This thread's last error message, NUL-terminated. A fixed buffer, so the address
    /// `srb_last_error` hands out stays valid for the thread's life: a later error rewrites
    /// the text in place instead of freeing it. `const`-initialized and without a
    /// destructor, so it is usable even while the thread's other locals are torn down.
    static LAST_ERROR: Cell<[u8; LAST_ERROR_BYTES]> = const { Cell::new([0; LAST_ERROR_BYTES]) };
}

/// `msg` as a NUL-terminated C string in a `LAST_ERROR_BYTES` buffer: interior NULs become
/// spaces, and a message too long is cut at a UTF-8 character boundary.
fn c_message(msg: &str) -> [u8; LAST_ERROR_BYTES] {
    let mut end = msg.len().min(LAST_ERROR_BYTES - 1);
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    let mut buf = [0u8; LAST_ERROR_BYTES];
    for (dst, &b) in buf.iter_mut().zip(&msg.as_bytes()[..end]) {
        *dst = if b == 0 { b' ' } else { b };
    }
    buf
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The tables are consistent between statements, so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn set_last_error(msg: &str) {
    // Fails only if the thread-local is gone (thread teardown): the message is dropped.
    let _ = LAST_ERROR.try_with(|e| e.set(c_message(msg)));
}

/// What went wrong in a C call: an `SRB_*` code and its message.
#[derive(Debug)]
struct Failure {
    code: i32,
    message: String,
}

/// The code of each kind of error.
fn code_of(e: &Error) -> i32 {
    match e {
        Error::DriverNotFound => SRB_ERR_DRIVER_NOT_FOUND,
        Error::NoDevice { .. } => SRB_ERR_NO_DEVICE,
        Error::UnsupportedDevice { .. } => SRB_ERR_UNSUPPORTED_DEVICE,
        Error::Cuda { .. } => SRB_ERR_CUDA,
        Error::InvalidConfig { .. } => SRB_ERR_INVALID_CONFIG,
        Error::SchemaMismatch { .. } => SRB_ERR_SCHEMA_MISMATCH,
        Error::StreamCapturing => SRB_ERR_STREAM_CAPTURING,
        Error::NothingRecorded => SRB_ERR_NOTHING_RECORDED,
        Error::RecordingMismatch { .. } => SRB_ERR_RECORDING_MISMATCH,
        Error::CountExceedsCapacity { .. } => SRB_ERR_COUNT_EXCEEDS_CAPACITY,
        Error::NegativeCount { .. } => SRB_ERR_NEGATIVE_COUNT,
        Error::CountExceedsSource { .. } => SRB_ERR_COUNT_EXCEEDS_SOURCE,
        Error::AppendOverflow { .. } => SRB_ERR_APPEND_OVERFLOW,
        Error::AppendUnfinished { .. } => SRB_ERR_APPEND_UNFINISHED,
        Error::AppendMisuse { .. } => SRB_ERR_APPEND_MISUSE,
        Error::BadBucket { .. } => SRB_ERR_BAD_BUCKET,
        Error::BucketOverCapacity { .. } => SRB_ERR_BUCKET_OVER_CAPACITY,
        Error::BucketOutOfRange { .. } => SRB_ERR_BUCKET_RANGE,
        Error::ForeignContext { .. } => SRB_ERR_FOREIGN_CONTEXT,
        Error::BufferTooShort { .. } => SRB_ERR_BUFFER_TOO_SHORT,
        Error::BadPointer { .. } => SRB_ERR_BAD_POINTER,
        Error::SlotsExhausted { .. } => SRB_ERR_SLOTS_EXHAUSTED,
        Error::Timeout { .. } => SRB_TIMEOUT,
        Error::Overrun { .. } => SRB_ERR_OVERRUN,
        Error::CorruptTrailer { .. } => SRB_ERR_CORRUPT,
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure {
            code: code_of(&e),
            message: e.to_string(),
        }
    }
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure {
        code: SRB_ERR_INVALID_ARGUMENT,
        message: message.into(),
    }
}

/// Runs `f`, turning an error or a panic into a code and this thread's last error.
fn guard(f: impl FnOnce() -> Result<i32, Failure>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code)) => code,
        Ok(Err(fail)) => {
            set_last_error(&fail.message);
            fail.code
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(&format!("internal error (Rust panic): {what}"));
            SRB_ERR_PANIC
        }
    }
}

/// [`guard`] for the calls that return a pointer: the pointer `f` gives, or null (with this
/// thread's last error set) on an error or a panic.
fn guard_ptr(f: impl FnOnce() -> Result<*const c_void, Failure>) -> *const c_void {
    let mut ptr = std::ptr::null();
    match guard(|| {
        ptr = f()?;
        Ok(SRB_OK)
    }) {
        SRB_OK => ptr,
        _ => std::ptr::null(),
    }
}

/// `SRB_NOT_READY` for readback `seq`.
fn in_flight(seq: u64) -> Failure {
    Failure {
        code: SRB_NOT_READY,
        message: format!("readback {seq} is still in flight"),
    }
}

fn parse_count_kind(kind: u32) -> Result<CountKind, Failure> {
    Ok(match kind {
        SRB_COUNT_INT32 => CountKind::I32,
        SRB_COUNT_UINT32 => CountKind::U32,
        SRB_COUNT_INT64 => CountKind::I64,
        SRB_COUNT_UINT64 => CountKind::U64,
        other => return Err(invalid(format!("unknown count kind {other}"))),
    })
}

/// # Safety
/// `rb` is null or a live handle from `srb_create`.
unsafe fn handle<'a>(rb: *const srb_readback) -> Result<&'a srb_readback, Failure> {
    // SAFETY: per the contract.
    unsafe { rb.as_ref() }.ok_or_else(|| invalid("the readback handle is null"))
}

/// `timeout_ns` from now; `None` (no limit) when negative or past what `Instant` can hold.
fn deadline(timeout_ns: i64) -> Option<Instant> {
    timeout(timeout_ns).and_then(|t| Instant::now().checked_add(t))
}

/// `timeout_ns` as a duration; `None` (no limit) when negative.
fn timeout(timeout_ns: i64) -> Option<Duration> {
    u64::try_from(timeout_ns).ok().map(Duration::from_nanos)
}

fn stream_of(s: *mut CUstream_st) -> sys::CUstream {
    s.cast()
}

fn event_of(e: *mut CUevent_st) -> Option<sys::CUevent> {
    (!e.is_null()).then_some(e.cast())
}

/// The first `n` (at most [`MAX_COLUMNS`]) columns and lengths, without allocating.
struct Sources {
    cols: [ColumnSource; MAX_COLUMNS],
    n: usize,
}

impl Sources {
    fn as_slice(&self) -> &[ColumnSource] {
        &self.cols[..self.n]
    }
}

/// # Safety
/// `columns` and `lens` are null or point to `n` readable values.
unsafe fn sources(
    columns: *const srb_devptr,
    lens: *const usize,
    n: usize,
) -> Result<Sources, Failure> {
    if columns.is_null() || lens.is_null() {
        return Err(invalid("the column or length array is null"));
    }
    let n = n.min(MAX_COLUMNS);
    // SAFETY: per the contract.
    let (ptrs, lens) = unsafe {
        (
            std::slice::from_raw_parts(columns, n),
            std::slice::from_raw_parts(lens, n),
        )
    };
    let mut cols = [ColumnSource::default(); MAX_COLUMNS];
    for (c, (&ptr, &len)) in cols.iter_mut().zip(ptrs.iter().zip(lens)) {
        *c = ColumnSource { ptr, len };
    }
    Ok(Sources { cols, n })
}

/// The schema and configuration `srb_create` asks for, checked without the driver: the
/// flags' combination, the columns, and the slot layout and total size.
fn create_config(
    capacity: usize,
    slots: u32,
    elem_sizes: &[usize],
    flags: u32,
) -> Result<(ColumnSchema, ReadbackConfig), Failure> {
    if flags & SRB_FLAG_GRAPH != 0 && flags & SRB_FLAG_STAGED != 0 {
        return Err(Error::config(
            "SRB_FLAG_GRAPH needs the mapped transport, not SRB_FLAG_STAGED: a graph readback \
             chooses its slot on the device",
        )
        .into());
    }
    let mut schema = ColumnSchema::new();
    for &size in elem_sizes {
        schema.raw_column(size);
    }
    let transport = if flags & SRB_FLAG_STAGED != 0 {
        Transport::Staged
    } else {
        Transport::Mapped
    };
    let config = ReadbackConfig::new(capacity)
        .slots(slots as usize)
        .transport(transport);
    // The pack's slots: what every create function's readback needs at least.
    ColumnReadback::check(&schema, &config)?;
    Ok((schema, config))
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
/// the pack kernel (`srb_enqueue`, `srb_record`). `flags`: 0, `SRB_FLAG_STAGED`, or
/// `SRB_FLAG_GRAPH`. On success stores the handle in `*out`. The arguments are checked before
/// the device is opened: a bad one gives `SRB_ERR_INVALID_ARGUMENT` or `SRB_ERR_INVALID_CONFIG`
/// with or without a GPU.
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
                    allowed: SRB_FLAG_STAGED | SRB_FLAG_GRAPH,
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
        let ctx = crate::device::open(ordinal)?;
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
                    allowed: SRB_FLAG_STAGED | SRB_FLAG_GRAPH,
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
        let ctx = crate::device::open(ordinal)?;
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
                    allowed: SRB_FLAG_STAGED | SRB_FLAG_GRAPH | SRB_FLAG_APPEND,
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
            return Err(Error::config("bucketed readbacks are not recorded into graphs").into());
        }
        let config = config.buckets(buckets as usize);
        let append = flags & SRB_FLAG_APPEND != 0;
        if append {
            AppendReadback::check(&schema, &config.clone().spill(spill))?;
        } else {
            BucketReadback::check(&schema, &config)?;
            if spill > 0 {
                return Err(invalid(
                    "spill needs SRB_FLAG_APPEND: a bucket pack copies nothing past a bucket's \
                     capacity, so it has no spill region",
                ));
            }
        }
        let ctx = crate::device::open(ordinal)?;
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

/// Bucket mode: enqueues the readback of every bucket of device data already partitioned:
/// bucket b's rows are rows `offsets[b] .. offsets[b] + counts[b]` of every column's source
/// (`columns[i]`, `lens[i]` elements readable), where `counts` and `offsets` are device arrays
/// of one value per bucket of kind `count_kind`, the offsets rising (as CUB's DevicePartition or
/// an exclusive scan of the counts leaves them). Otherwise as `srb_enqueue`. Errors about the
/// counts or offsets come from `srb_wait` (`SRB_ERR_BUCKET_OVER_CAPACITY`,
/// `SRB_ERR_BUCKET_RANGE`, `SRB_ERR_NEGATIVE_COUNT`), with nothing copied.
///
/// # Safety
/// As `srb_enqueue`; `counts` and `offsets` address one value per bucket.
#[no_mangle]
pub unsafe extern "C" fn srb_enqueue_buckets(
    rb: *const srb_readback,
    stream: *mut CUstream_st,
    after: *mut CUevent_st,
    columns: *const srb_devptr,
    lens: *const usize,
    counts: srb_devptr,
    offsets: srb_devptr,
    count_kind: u32,
    seq_out: *mut u64,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let Inner::Buckets { rb, held } = &unsafe { handle(rb)? }.inner else {
            return Err(invalid(
                "srb_enqueue_buckets needs a readback created with srb_create_buckets without \
                 SRB_FLAG_APPEND",
            ));
        };
        if seq_out.is_null() {
            return Err(invalid("seq_out is null"));
        }
        let kind = parse_count_kind(count_kind)?;
        // SAFETY: per the contract.
        let src = unsafe { sources(columns, lens, rb.schema().len())? };
        // SAFETY: per this function's contract; every address and the stream are checked.
        let ticket = unsafe {
            rb.enqueue_raw_stream(
                stream_of(stream),
                event_of(after),
                src.as_slice(),
                RawCount::new(counts, kind),
                offsets,
            )?
        };
        let seq = ticket.seq();
        lock(held).push(Arc::new(Held::Pack(ticket)));
        // SAFETY: per the contract.
        unsafe { *seq_out = seq };
        Ok(SRB_OK)
    })
}

/// Buckets of the readback (1 unless bucketed; 0 if `rb` is null).
///
/// # Safety
/// `rb` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_buckets(rb: *const srb_readback) -> u32 {
    // SAFETY: per the contract.
    match unsafe { rb.as_ref() }.map(|h| &h.inner) {
        Some(Inner::Buckets { rb, .. }) => rb.buckets() as u32,
        Some(Inner::Append { rb, .. }) => rb.layout().buckets() as u32,
        Some(_) => 1,
        None => 0,
    }
}

/// Destroys a readback (null is ignored). Waits for its readbacks still in flight (for a
/// graph readback, for all of the context's work); appends begun and not ended are ended as
/// failed first. Launching a graph that recorded it afterwards is undefined behaviour.
///
/// # Safety
/// `rb` is null or a handle from `srb_create`, destroyed once and not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn srb_destroy(rb: *mut srb_readback) {
    if !rb.is_null() {
        guard(|| {
            // SAFETY: per the contract.
            drop(unsafe { Box::from_raw(rb) });
            Ok(SRB_OK)
        });
    }
}

/// Host-sequenced mode: enqueues a readback of `columns[i]` (device pointers, `lens[i]`
/// elements readable at each) sized by the count at `count` (of kind `count_kind`), on
/// `stream`, after `after` (an event recorded after the producer; may be null if the
/// producer ran on `stream`). Returns at once; stores the readback's sequence number in
/// `*seq_out`. The sources must stay allocated and unwritten until the readback completes.
///
/// # Safety
/// `columns` and `lens` point to one value per column; `seq_out` is writable; `stream` and
/// `after` are live handles of the readback's context; the device pointers address memory
/// as described.
#[no_mangle]
pub unsafe extern "C" fn srb_enqueue(
    rb: *const srb_readback,
    stream: *mut CUstream_st,
    after: *mut CUevent_st,
    columns: *const srb_devptr,
    lens: *const usize,
    count: srb_devptr,
    count_kind: u32,
    seq_out: *mut u64,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let Inner::Host { rb, held } = &unsafe { handle(rb)? }.inner else {
            return Err(invalid(
                "srb_enqueue needs a readback created with srb_create without SRB_FLAG_GRAPH",
            ));
        };
        if seq_out.is_null() {
            return Err(invalid("seq_out is null"));
        }
        let kind = parse_count_kind(count_kind)?;
        // SAFETY: per the contract.
        let src = unsafe { sources(columns, lens, rb.schema().len())? };
        let count = RawCount::new(count, kind);
        // SAFETY: per this function's contract; every address and the stream are checked.
        let ticket = unsafe {
            rb.enqueue_raw_stream(stream_of(stream), event_of(after), src.as_slice(), count)?
        };
        let seq = ticket.seq();
        lock(held).push(Arc::new(Held::Pack(ticket)));
        // SAFETY: per the contract.
        unsafe { *seq_out = seq };
        Ok(SRB_OK)
    })
}

/// Append mode: reserves a slot for one append kernel on `stream` (after `after`, if not
/// null), stores its descriptor in `*desc_out` (pass it by value to the kernel, which appends
/// through `srb::BlockAppend`) and its sequence number in `*seq_out`. Launch exactly one grid
/// with the descriptor on `stream`, then call `srb_append_end` whatever the launch did.
///
/// # Safety
/// `desc_out` and `seq_out` are writable; `stream` and `after` are live handles of the
/// readback's context.
#[no_mangle]
pub unsafe extern "C" fn srb_append_begin(
    rb: *const srb_readback,
    stream: *mut CUstream_st,
    after: *mut CUevent_st,
    desc_out: *mut abi::srb_append_desc,
    seq_out: *mut u64,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let Inner::Append { rb, pending, .. } = &unsafe { handle(rb)? }.inner else {
            return Err(invalid(
                "srb_append_begin needs a readback created with srb_create_append without \
                 SRB_FLAG_GRAPH (graph appends use srb_append_desc_graph)",
            ));
        };
        if desc_out.is_null() || seq_out.is_null() {
            return Err(invalid("desc_out or seq_out is null"));
        }
        // SAFETY: per the contract (the caller keeps the stream alive until srb_append_end).
        let p = unsafe { rb.begin_raw_stream(stream_of(stream), event_of(after))? };
        // SAFETY: per the contract.
        unsafe {
            *desc_out = *p.desc().raw();
            *seq_out = p.seq();
        }
        lock(pending).push(p);
        Ok(SRB_OK)
    })
}

/// Append mode: the kernel of append `seq` was launched (`launch_status` 0: records the
/// readback's completion on the stream `srb_append_begin` was given; then wait on `seq` as on
/// any readback) or its launch failed (`launch_status` != 0: the slot is given back, and `seq`
/// is no readback any more). Returns `SRB_OK` in both cases, unless `seq` was not begun.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_append_end(
    rb: *const srb_readback,
    seq: u64,
    launch_status: i32,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let Inner::Append { pending, held, .. } = &unsafe { handle(rb)? }.inner else {
            return Err(invalid("srb_append_end needs an append readback"));
        };
        let p = {
            let mut pending = lock(pending);
            let at = pending
                .iter()
                .position(|p| p.seq() == seq)
                .ok_or_else(|| invalid(format!("no append {seq} was begun")))?;
            pending.swap_remove(at)
        };
        if launch_status != 0 {
            // Dropping the pending append records the slot as failed and gives it back.
            drop(p);
            return Ok(SRB_OK);
        }
        let ticket = p.launched()?;
        lock(held).push(Arc::new(Held::Append(ticket, Mutex::new(None))));
        Ok(SRB_OK)
    })
}

/// Graph append mode (a readback from `srb_create_append` with `SRB_FLAG_GRAPH`): the
/// descriptor that every captured append kernel of this readback takes, for every replay.
///
/// # Safety
/// `desc_out` is writable.
#[no_mangle]
pub unsafe extern "C" fn srb_append_desc_graph(
    rb: *const srb_readback,
    desc_out: *mut abi::srb_append_desc,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let Inner::Graph { g, .. } = &unsafe { handle(rb)? }.inner else {
            return Err(invalid(
                "srb_append_desc_graph needs a readback created with SRB_FLAG_GRAPH",
            ));
        };
        if desc_out.is_null() {
            return Err(invalid("desc_out is null"));
        }
        let d = g.append_desc()?;
        // SAFETY: per the contract.
        unsafe { *desc_out = *d.raw() };
        Ok(SRB_OK)
    })
}

/// Graph mode: records one pack into `stream` (normally a stream under capture), with the
/// same arguments as `srb_enqueue`. Every replay of the graph produces readback number
/// 1, 2, 3, ... in turn; take them with `srb_next`. The sources must be valid and unwritten
/// whenever the pack runs, and the readback must outlive every replay. Every recording of
/// one readback uses the same `count_kind` and `lens` as its first (the host cannot tell
/// which recording produced a replay): a different one is refused with
/// `SRB_ERR_RECORDING_MISMATCH` and records nothing.
///
/// # Safety
/// As `srb_enqueue`, for every replay.
#[no_mangle]
pub unsafe extern "C" fn srb_record(
    rb: *const srb_readback,
    stream: *mut CUstream_st,
    after: *mut CUevent_st,
    columns: *const srb_devptr,
    lens: *const usize,
    count: srb_devptr,
    count_kind: u32,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let Inner::Graph { g, .. } = &unsafe { handle(rb)? }.inner else {
            return Err(invalid(
                "srb_record needs a readback created with SRB_FLAG_GRAPH",
            ));
        };
        let kind = parse_count_kind(count_kind)?;
        // SAFETY: per the contract.
        let src = unsafe { sources(columns, lens, g.schema().len())? };
        // SAFETY: per the contract.
        unsafe {
            g.record_raw(
                stream_of(stream),
                event_of(after),
                src.as_slice(),
                RawCount::new(count, kind),
            )?
        };
        Ok(SRB_OK)
    })
}

/// The table of the readbacks `h`'s caller holds.
fn table(h: &srb_readback) -> &HeldTable {
    match &h.inner {
        Inner::Host { held, .. }
        | Inner::Append { held, .. }
        | Inner::Buckets { held, .. }
        | Inner::Graph { held, .. } => held,
    }
}

/// The held readback (or replay) `seq`, cloned out of the table.
fn held_of(h: &srb_readback, seq: u64) -> Result<Arc<Held>, Failure> {
    lock(table(h))
        .iter()
        .find(|t| t.seq() == seq)
        .cloned()
        .ok_or_else(|| match &h.inner {
            Inner::Graph { .. } => invalid(format!("replay {seq} is not held")),
            _ => invalid(format!(
                "no readback {seq} is held (released, or never enqueued)"
            )),
        })
}

/// Host-sequenced mode: the held readback `seq`, for the calls that wait on a number.
fn waitable(h: &srb_readback, seq: u64) -> Result<Arc<Held>, Failure> {
    if let Inner::Graph { .. } = h.inner {
        return Err(invalid(
            "a graph readback is consumed with srb_next, not by waiting on a number",
        ));
    }
    held_of(h, seq)
}

impl Held {
    fn seq(&self) -> u64 {
        match self {
            Held::Pack(t) => t.seq(),
            Held::Append(t, _) => t.seq(),
            Held::Replay(_, r) => r.seq(),
        }
    }
    /// Whether complete; its count (rows in the slot) or error.
    fn poll(&self) -> crate::Result<Option<usize>> {
        match self {
            Held::Pack(t) => Ok(t.try_wait()?.map(|r| r.count())),
            Held::Append(t, _) => Ok(t.try_wait()?.map(|r| r.count())),
            Held::Replay(_, r) => Ok(Some(r.count())),
        }
    }
    /// Rows in the slot over every bucket, once complete.
    fn rows(&self) -> crate::Result<usize> {
        let rows = |r: crate::ColumnReadout<'_>| r.count();
        match self {
            Held::Replay(_, r) => Ok(r.count()),
            Held::Pack(t) => Ok(t.try_wait()?.map(rows).unwrap_or(0)),
            Held::Append(t, _) => match t.try_wait() {
                Ok(r) => Ok(r.map(rows).unwrap_or(0)),
                Err(Error::AppendOverflow { .. } | Error::BadBucket { .. }) => {
                    Ok(rows(t.partial()?))
                }
                Err(e) => Err(e),
            },
        }
    }

    fn wait(&self, timeout: Option<Duration>) -> crate::Result<usize> {
        match (self, timeout) {
            (Held::Pack(t), None) => t.wait().map(|r| r.count()),
            (Held::Pack(t), Some(d)) => t.wait_timeout(d).map(|r| r.count()),
            (Held::Append(t, _), None) => t.wait().map(|r| r.count()),
            (Held::Append(t, _), Some(d)) => t.wait_timeout(d).map(|r| r.count()),
            (Held::Replay(_, r), _) => Ok(r.count()),
        }
    }
    /// The address of `column`'s rows of bucket `bucket` once complete (an overflowed append:
    /// its slot rows), and their count; `None` while in flight.
    fn data(&self, column: usize, bucket: usize) -> crate::Result<Option<(*const u8, usize)>> {
        let bytes = |r: crate::ColumnReadout<'_>| {
            let n = r.bucket_count(bucket).unwrap_or(0);
            r.bucket_column_bytes(column, bucket)
                .map(|b| (b.as_ptr(), n))
        };
        match self {
            Held::Replay(_, r) => bytes(r.readout()).map(Some),
            Held::Pack(t) => t.try_wait()?.map(bytes).transpose(),
            Held::Append(t, _) => match t.try_wait() {
                Ok(None) => Ok(None),
                Ok(Some(r)) => bytes(r).map(Some),
                Err(Error::AppendOverflow { .. } | Error::BadBucket { .. }) => {
                    bytes(t.partial()?).map(Some)
                }
                Err(e) => Err(e),
            },
        }
    }
}

/// Host-sequenced mode: `SRB_OK` if readback `seq` is complete (its count is good),
/// `SRB_NOT_READY` if it is in flight, or the count's error. Never blocks.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_poll(rb: *const srb_readback, seq: u64) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let t = waitable(unsafe { handle(rb)? }, seq)?;
        Ok(if t.poll()?.is_some() {
            SRB_OK
        } else {
            SRB_NOT_READY
        })
    })
}

/// The count an error carries for `*count_out`: a count past the capacity or a source, an
/// append's true count, or a negative count's bits (read them as `int64_t`).
fn count_of_error(e: &Error) -> Option<u64> {
    match e {
        Error::NegativeCount { count } => Some(*count as u64),
        e => e.count(),
    }
}

/// Host-sequenced mode: waits for readback `seq`, at most `timeout_ns` nanoseconds (< 0:
/// no limit), then stores its count in `*count_out` (may be null). Returns `SRB_OK`,
/// `SRB_TIMEOUT` (wait again later) or an error; after `SRB_ERR_COUNT_EXCEEDS_CAPACITY`,
/// `SRB_ERR_COUNT_EXCEEDS_SOURCE` or `SRB_ERR_APPEND_OVERFLOW` the true count is in
/// `*count_out`, after `SRB_ERR_NEGATIVE_COUNT` its bits. The slot stays held until
/// `srb_release`.
///
/// # Safety
/// `rb` is a live handle; `count_out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn srb_wait(
    rb: *const srb_readback,
    seq: u64,
    timeout_ns: i64,
    count_out: *mut u64,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let t = waitable(unsafe { handle(rb)? }, seq)?;
        let result =
            t.wait(deadline(timeout_ns).map(|d| d.saturating_duration_since(Instant::now())));
        let n = match &result {
            Ok(n) => Some(*n as u64),
            Err(e) => count_of_error(e),
        };
        if let (Some(n), false) = (n, count_out.is_null()) {
            // SAFETY: per the contract.
            unsafe { *count_out = n };
        }
        result.map(|_| SRB_OK).map_err(Failure::from)
    })
}

/// Graph mode: waits, at most `timeout_ns` nanoseconds (< 0: no limit; 0: just look, never
/// blocking), for the next replay's readback, then stores its sequence number in `*seq_out`
/// and its count in `*count_out` (either may be null) and holds its slot until
/// `srb_release`. Returns `SRB_OK`; `SRB_TIMEOUT` (nothing consumed; `*seq_out` is the
/// number waited for); `SRB_NOT_READY` when another thread was taking a replay for the
/// whole timeout (nothing consumed, `*seq_out` untouched); `SRB_ERR_OVERRUN` (that replay
/// was dropped; its number is in `*seq_out`) or a count error for that replay (its number
/// in `*seq_out`), each of which consumes the replay; `SRB_ERR_APPEND_OVERFLOW` (the true
/// count in `*count_out`; the replay stays held with its `capacity` rows: release it);
/// `SRB_ERR_NOTHING_RECORDED` at once when nothing was recorded. Concurrent callers each get a
/// different replay.
///
/// # Safety
/// `rb` is a live handle; `seq_out` and `count_out` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn srb_next(
    rb: *const srb_readback,
    timeout_ns: i64,
    seq_out: *mut u64,
    count_out: *mut u64,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let Inner::Graph { g, held } = &unsafe { handle(rb)? }.inner else {
            return Err(invalid(
                "srb_next needs a readback created with SRB_FLAG_GRAPH",
            ));
        };
        // The number comes from the take itself, under its lock: another thread's call
        // cannot slip in between.
        let Some(taken) = g.take(timeout(timeout_ns))? else {
            return Err(Failure {
                code: SRB_NOT_READY,
                message: "another thread is taking a replay; nothing was consumed".into(),
            });
        };
        let (seq, result) = (taken.seq, taken.result);
        if let Some(replay) = taken.replay {
            lock(held).push(Arc::new(Held::Replay(Mutex::new(None), replay)));
        }
        if !seq_out.is_null() {
            // SAFETY: per the contract.
            unsafe { *seq_out = seq };
        }
        let n = match &result {
            Ok(n) => Some(*n as u64),
            Err(e) => count_of_error(e),
        };
        if let (Some(n), false) = (n, count_out.is_null()) {
            // SAFETY: per the contract.
            unsafe { *count_out = n };
        }
        result.map(|_| SRB_OK).map_err(Failure::from)
    })
}

/// The rows in the slot of complete readback `seq`: its count, or after an append overflow
/// the capacity (host mode: `SRB_NOT_READY` while in flight; graph mode: a replay held since
/// `srb_next`).
///
/// # Safety
/// `rb` is a live handle; `count_out` is writable.
#[no_mangle]
pub unsafe extern "C" fn srb_count(rb: *const srb_readback, seq: u64, count_out: *mut u64) -> i32 {
    guard(|| {
        if count_out.is_null() {
            return Err(invalid("count_out is null"));
        }
        // SAFETY: per the contract.
        let h = unsafe { handle(rb)? };
        let t = held_of(h, seq)?;
        let n = match t.data(0, 0)? {
            // The total over the buckets (each bucket's rows: srb_bucket_data).
            Some(_) => t.rows()?,
            None => return Ok(SRB_NOT_READY),
        };
        // SAFETY: per the contract.
        unsafe { *count_out = n as u64 };
        Ok(SRB_OK)
    })
}

/// Host address of column `column` of complete readback `seq` in pinned memory: its rows
/// (`srb_count` of them), 16-byte aligned, valid until `srb_release(rb, seq)`. Null if the
/// readback is not complete or held, or on an error (see `srb_last_error`). Bucketed readbacks
/// are read bucket by bucket with `srb_bucket_data`.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_data(rb: *const srb_readback, seq: u64, column: u32) -> *const c_void {
    guard_ptr(|| {
        // SAFETY: per the contract.
        let h = unsafe { handle(rb)? };
        let t = held_of(h, seq)?;
        if column as usize >= schema_len(h) {
            return Err(invalid(format!("column {column} does not exist")));
        }
        // SAFETY: h is a live handle.
        let k = unsafe { srb_buckets(h) };
        if k > 1 {
            return Err(invalid(format!(
                "the readback has {k} buckets: read each with srb_bucket_data"
            )));
        }
        let bytes_ptr = t.data(column as usize, 0)?.ok_or_else(|| in_flight(seq))?.0;
        Ok(bytes_ptr.cast())
    })
}

/// Host address of column `column`'s rows of bucket `bucket` of complete readback `seq`, and
/// their number in `*count_out` (may be null): valid until `srb_release(rb, seq)`. For a
/// readback without buckets, bucket 0 is all of it. After `SRB_ERR_APPEND_OVERFLOW` or
/// `SRB_ERR_BAD_BUCKET`, the rows that reached the bucket. Null (and `*count_out` untouched) if
/// the readback is not complete or held, or on an error.
///
/// # Safety
/// `rb` is a live handle; `count_out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn srb_bucket_data(
    rb: *const srb_readback,
    seq: u64,
    bucket: u32,
    column: u32,
    count_out: *mut u64,
) -> *const c_void {
    guard_ptr(|| {
        // SAFETY: per the contract.
        let h = unsafe { handle(rb)? };
        let t = held_of(h, seq)?;
        if let Held::Replay(_, r) = &*t {
            // A graph readback has one bucket, and says so for every other index or column.
            let readout = r.readout();
            if readout.bucket_count(bucket as usize).is_none() {
                return Err(invalid(format!("bucket {bucket} does not exist")));
            }
            if column as usize >= schema_len(h) {
                return Err(invalid(format!("column {column} does not exist")));
            }
        }
        let (p, n) = t
            .data(column as usize, bucket as usize)?
            .ok_or_else(|| in_flight(seq))?;
        if !count_out.is_null() {
            // SAFETY: per the contract.
            unsafe { *count_out = n as u64 };
        }
        Ok(p.cast())
    })
}

fn schema_len(h: &srb_readback) -> usize {
    match &h.inner {
        Inner::Host { rb, .. } => rb.schema().len(),
        Inner::Buckets { rb, .. } => rb.schema().len(),
        Inner::Append { rb, .. } => rb.schema().len(),
        Inner::Graph { g, .. } => g.schema().len(),
    }
}

/// After `SRB_ERR_APPEND_OVERFLOW` for readback (or held replay) `seq`: brings back the rows
/// that went to the device-side spill region, on `stream`, waiting at most `timeout_ns`
/// (< 0: no limit), and stores their number in `*count_out`. Then `srb_spill_data` gives
/// each column's spilled rows, valid until `srb_release(rb, seq)`.
///
/// # Safety
/// `rb` is a live handle; `stream` a live stream of its context; `count_out` writable.
#[no_mangle]
pub unsafe extern "C" fn srb_fetch_spill(
    rb: *const srb_readback,
    seq: u64,
    stream: *mut CUstream_st,
    timeout_ns: i64,
    count_out: *mut u64,
) -> i32 {
    guard(|| {
        if count_out.is_null() {
            return Err(invalid("count_out is null"));
        }
        // SAFETY: per the contract.
        let h = unsafe { handle(rb)? };
        if let Inner::Host { .. } | Inner::Buckets { .. } = h.inner {
            return Err(invalid("srb_fetch_spill needs an append readback"));
        }
        let held = held_of(h, seq)?;
        let (fetched, spill) = match &*held {
            // SAFETY: a live stream, per the contract (checked to be of the context).
            Held::Replay(spill, r) => (
                unsafe { r.fetch_spill_raw_stream(stream_of(stream))? },
                spill,
            ),
            // SAFETY: as above.
            Held::Append(t, spill) => (
                unsafe { t.fetch_spill_raw_stream(stream_of(stream))? },
                spill,
            ),
            Held::Pack(_) => return Err(invalid("srb_fetch_spill needs an append readback")),
        };
        let fetched = fetched.map(Arc::new);
        *lock(spill) = fetched.clone();
        let n = match &fetched {
            None => 0,
            Some(t) => match deadline(timeout_ns) {
                None => t.wait()?.count(),
                Some(d) => t
                    .wait_timeout(d.saturating_duration_since(Instant::now()))?
                    .count(),
            },
        };
        // SAFETY: per the contract.
        unsafe { *count_out = n as u64 };
        Ok(SRB_OK)
    })
}

/// Column `column` of the spilled rows that `srb_fetch_spill` brought back for `seq` (of every
/// bucket: bucketed readbacks read them with `srb_spill_bucket_data`), valid until
/// `srb_release(rb, seq)`; null if none were fetched.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_spill_data(
    rb: *const srb_readback,
    seq: u64,
    column: u32,
) -> *const c_void {
    guard_ptr(|| {
        // SAFETY: per the contract.
        let t = unsafe { fetched_spill(rb, seq)? };
        let out = t.wait()?;
        Ok(out.column_bytes(column as usize)?.as_ptr().cast())
    })
}

/// Bucketed append: column `column`'s spilled rows of bucket `bucket` that `srb_fetch_spill`
/// brought back for `seq`, their number in `*count_out` (may be null); valid until
/// `srb_release(rb, seq)`; null if none were fetched.
///
/// # Safety
/// `rb` is a live handle; `count_out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn srb_spill_bucket_data(
    rb: *const srb_readback,
    seq: u64,
    bucket: u32,
    column: u32,
    count_out: *mut u64,
) -> *const c_void {
    guard_ptr(|| {
        // SAFETY: per the contract.
        let t = unsafe { fetched_spill(rb, seq)? };
        let out = t.wait()?;
        let n = out
            .bucket_count(bucket as usize)
            .ok_or_else(|| invalid(format!("bucket {bucket} does not exist")))?;
        let p = out
            .bucket_column_bytes(column as usize, bucket as usize)?
            .as_ptr();
        if !count_out.is_null() {
            // SAFETY: per the contract.
            unsafe { *count_out = n as u64 };
        }
        Ok(p.cast())
    })
}

/// The spill that `srb_fetch_spill` brought back for `seq` (a held replay's, or a held
/// append readback's).
///
/// # Safety
/// `rb` is null or a live handle.
unsafe fn fetched_spill(rb: *const srb_readback, seq: u64) -> Result<Arc<ColumnTicket>, Failure> {
    // SAFETY: per the contract.
    let h = unsafe { handle(rb)? };
    let ticket = match &*held_of(h, seq)? {
        Held::Append(_, spill) | Held::Replay(spill, _) => lock(spill).clone(),
        Held::Pack(_) => None,
    };
    ticket.ok_or_else(|| invalid(format!("no spill of {seq} was fetched")))
}

/// Releases readback `seq`'s slot for reuse; its data pointers become invalid. A readback
/// released before it completes is still waited for on the device before its slot is reused.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_release(rb: *const srb_readback, seq: u64) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let h = unsafe { handle(rb)? };
        let released = {
            let mut table = lock(table(h));
            let at = table.iter().position(|t| t.seq() == seq).ok_or_else(|| {
                invalid(match h.inner {
                    Inner::Graph { .. } => format!("replay {seq} is not held"),
                    _ => format!("no readback {seq} is held"),
                })
            })?;
            table.swap_remove(at)
        };
        // Outside the table's lock: the last hold of a replay or ticket gives its slot back.
        drop(released);
        Ok(SRB_OK)
    })
}

/// Rows per slot of the readback (0 if `rb` is null).
///
/// # Safety
/// `rb` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_capacity(rb: *const srb_readback) -> usize {
    // SAFETY: per the contract.
    match unsafe { rb.as_ref() }.map(|h| &h.inner) {
        Some(Inner::Host { rb, .. }) => rb.capacity(),
        Some(Inner::Buckets { rb, .. }) => rb.capacity(),
        Some(Inner::Append { rb, .. }) => rb.capacity(),
        Some(Inner::Graph { g, .. }) => g.capacity(),
        None => 0,
    }
}

/// This thread's message for its last failed call (empty if none), NUL-terminated, at most
/// 1023 bytes (longer messages are cut at a UTF-8 character boundary). The text is valid
/// until this thread's next failing `srb_` call, which overwrites it in place (the pointer
/// itself stays dereferenceable for the thread's life, so reading it after another call is
/// no use-after-free); copy it to keep it.
#[no_mangle]
pub extern "C" fn srb_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.as_ptr().cast::<c_char>().cast_const())
        // Only during thread teardown: no message then.
        .unwrap_or(c"".as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last_error() -> String {
        // SAFETY: srb_last_error returns this thread's NUL-terminated buffer.
        unsafe { CStr::from_ptr(srb_last_error()) }
            .to_str()
            .expect("UTF-8")
            .to_owned()
    }

    #[test]
    fn messages_are_nul_terminated_without_interior_nuls() {
        let buf = c_message("bad\0value");
        assert_eq!(&buf[..10], b"bad value\0");
        assert!(buf[10..].iter().all(|&b| b == 0));
        assert_eq!(c_message("")[0], 0);
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        // 1022 ASCII bytes then a 3-byte character: the character does not fit in 1023.
        let msg = format!("{}€tail", "x".repeat(LAST_ERROR_BYTES - 2));
        let buf = c_message(&msg);
        let text = CStr::from_bytes_until_nul(&buf).unwrap().to_str().unwrap();
        assert_eq!(text.len(), LAST_ERROR_BYTES - 2);
        assert!(text.bytes().all(|b| b == b'x'));
        // Exactly 1023 bytes fit whole.
        let fits = "y".repeat(LAST_ERROR_BYTES - 1);
        let buf = c_message(&fits);
        assert_eq!(
            CStr::from_bytes_until_nul(&buf).unwrap().to_str(),
            Ok(&*fits)
        );
    }

    /// The old code freed the previous message on the next failure; the pointer must now
    /// stay the same and readable, with the newest text.
    #[test]
    fn the_error_pointer_is_stable_across_failures() {
        // SAFETY: null handle and pointers, which the API rejects.
        let code = unsafe { srb_wait(std::ptr::null(), 1, 0, std::ptr::null_mut()) };
        assert_eq!(code, SRB_ERR_INVALID_ARGUMENT);
        let first = srb_last_error();
        assert!(last_error().contains("handle is null"), "{}", last_error());
        // SAFETY: as above.
        let data = unsafe { srb_data(std::ptr::null(), 1, 0) };
        assert!(data.is_null());
        let too_long = "z".repeat(5000);
        set_last_error(&too_long);
        assert_eq!(srb_last_error(), first, "same buffer");
        assert_eq!(last_error(), too_long[..LAST_ERROR_BYTES - 1]);
        // Another thread has its own buffer and message.
        let other = std::thread::spawn(|| {
            set_last_error("elsewhere");
            (srb_last_error() as usize, last_error())
        })
        .join()
        .unwrap();
        assert_ne!(other.0, first as usize);
        assert_eq!(other.1, "elsewhere");
        assert_eq!(last_error(), too_long[..LAST_ERROR_BYTES - 1]);
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
        assert_eq!(schema.elem_sizes(), [8, 4]);
        assert_eq!((config.capacity, config.slots), (16, 3));
        assert_eq!(config.transport, Transport::Staged);
    }

    /// Each create function takes only its own flags, and a spill only where append kernels
    /// can spill; both are refused before the device is opened (the same answer without a GPU).
    #[test]
    fn create_functions_take_only_their_flags() {
        let sizes = [8usize];
        let mut out = std::ptr::null_mut();
        // SAFETY: valid sizes and out pointer; the flags are refused before any driver call.
        let code = unsafe { srb_create(0, 16, 2, 1, sizes.as_ptr(), SRB_FLAG_APPEND, &mut out) };
        assert_eq!(code, SRB_ERR_INVALID_ARGUMENT);
        assert_eq!(
            last_error(),
            "flags 0x4 include ones srb_create does not take (it takes SRB_FLAG_STAGED, SRB_FLAG_GRAPH)"
        );
        assert!(out.is_null());
        // SAFETY: as above.
        let code =
            unsafe { srb_create_append(0, 16, 0, 2, 1, sizes.as_ptr(), SRB_FLAG_APPEND, &mut out) };
        assert_eq!(code, SRB_ERR_INVALID_ARGUMENT, "{}", last_error());
        // SAFETY: as above.
        let code = unsafe { srb_create_buckets(0, 4, 16, 8, 2, 1, sizes.as_ptr(), 0, &mut out) };
        assert_eq!(code, SRB_ERR_INVALID_ARGUMENT);
        assert!(
            last_error().starts_with("spill needs SRB_FLAG_APPEND"),
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
            "invalid readback configuration: column 0 has elements of 0 bytes: an element \
             needs at least 1 byte"
        );
    }

    /// Every error kind has its own code, and the messages say what happened in words (no
    /// Rust debug formatting).
    #[test]
    fn every_error_kind_has_its_own_code() {
        let errors = [
            Error::DriverNotFound,
            Error::NoDevice {
                ordinal: 1,
                available: 0,
            },
            Error::UnsupportedDevice { major: 6, minor: 1 },
            Error::config("x"),
            Error::schema("x"),
            Error::StreamCapturing,
            Error::NothingRecorded,
            Error::RecordingMismatch { reason: "x".into() },
            Error::CountExceedsCapacity {
                count: 9,
                capacity: 8,
            },
            Error::NegativeCount { count: -1 },
            Error::CountExceedsSource {
                count: 9,
                column: 1,
                source_len: 8,
            },
            Error::AppendOverflow {
                count: 20,
                capacity: 8,
                spilled: 8,
                dropped: 4,
            },
            Error::AppendUnfinished { seq: 3 },
            Error::AppendMisuse {
                columns: 2,
                sizes: "8, 4".into(),
            },
            Error::BadBucket {
                bucket: 9,
                buckets: 8,
                rows: 1,
            },
            Error::BucketOverCapacity {
                bucket: 1,
                count: 9,
                capacity: 8,
            },
            Error::BucketOutOfRange {
                bucket: 1,
                offset: 4,
                count: 9,
                limit: 10,
            },
            Error::ForeignContext { what: "the stream" },
            Error::BufferTooShort {
                what: "the counts",
                len: 2,
                need: 4,
            },
            Error::BadPointer {
                what: "the count",
                addr: 2,
                align: 4,
            },
            Error::SlotsExhausted { slots: 2 },
            Error::Overrun { seq: 5 },
            Error::CorruptTrailer {
                slot: 0,
                expected: 1,
                found: 2,
                magic: 0,
            },
        ];
        let mut codes: Vec<i32> = errors.iter().map(code_of).collect();
        assert!(codes.iter().all(|&c| c < 0));
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), errors.len(), "two kinds share a code");
        for e in &errors {
            let m = e.to_string();
            assert!(!m.contains('{') && !m.contains('['), "{m}");
        }
        assert_eq!(
            count_of_error(&Error::NegativeCount { count: -3 }),
            Some((-3i64) as u64)
        );
    }
}
