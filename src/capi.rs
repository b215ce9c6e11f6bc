//! The C ABI: `include/sized_readback.h` is generated from this file by cbindgen (see
//! `cbindgen.toml`; `tests/c_header.rs` fails when the checked-in header is stale).
//!
//! Handles are raw driver-API values, equal to the runtime API's in the same context:
//! `CUdeviceptr` is a device pointer cast to an integer, `CUstream` a `cudaStream_t`, `CUevent`
//! a `cudaEvent_t`. A readback lives in the *primary* context of its device, the one the CUDA
//! runtime uses.
//!
//! Every function returns an `SRB_*` code (0 success, > 0 "not yet", < 0 an error); after an
//! error, `srb_last_error()` gives this thread's message (valid until this thread's next
//! failing `srb_` call). No Rust panic crosses the boundary:
//! one becomes `SRB_ERR_PANIC`. Every function may be called from any thread.
//!
//! A readback made without `SRB_FLAG_GRAPH` is *host-sequenced*: `srb_enqueue` returns the
//! readback's sequence number, which `srb_poll`, `srb_wait`, `srb_count`, `srb_data` and
//! `srb_release` take. One made with `SRB_FLAG_GRAPH` is *device-sequenced*, for CUDA graphs:
//! `srb_record` records the pack into a capturing stream, and `srb_next` returns the next
//! replay's sequence number, which `srb_count`, `srb_data` and `srb_release` take.
#![allow(non_camel_case_types)]
use crate::columns::{ColumnReadback, ColumnSchema, ColumnTicket};
use crate::element::CountKind;
use crate::error::Error;
use crate::graph::{GraphReadback, Take};
use crate::layout::SlotLayout;
use crate::readback::{ColumnSource, ReadbackConfig, Transport};
use cudarc::driver::sys::{CUdeviceptr, CUevent, CUstream};
use std::cell::Cell;
use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Success.
pub const SRB_OK: i32 = 0;
/// The readback is still in flight (`srb_poll`, `srb_count`, `srb_data`), or `srb_next`
/// found another thread taking a replay (nothing consumed; call it again).
pub const SRB_NOT_READY: i32 = 1;
/// A wait ran out of time; the readback stays valid (wait again).
pub const SRB_TIMEOUT: i32 = 2;
/// A null pointer, an unknown sequence number, a column out of range, or a call that does
/// not fit the readback's mode.
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
/// before it opens the device, so they are reported the same with or without a GPU); a
/// graph recording whose count kind or lengths differ from the readback's first; a graph
/// readback taken (`srb_next`) before anything was recorded.
pub const SRB_ERR_INVALID_CONFIG: i32 = -5;
/// The device-resident count exceeded the capacity; nothing was copied. `srb_wait` and
/// `srb_next` store the count in `*count_out`, so the caller can make a larger readback.
pub const SRB_ERR_COUNT_EXCEEDS_CAPACITY: i32 = -6;
/// The device-resident count was negative (signed count kinds).
pub const SRB_ERR_NEGATIVE_COUNT: i32 = -7;
/// The count exceeded a column's source length; nothing was copied.
pub const SRB_ERR_COUNT_EXCEEDS_SOURCE: i32 = -8;
/// A stream or pointer belongs to another context or device.
pub const SRB_ERR_FOREIGN_CONTEXT: i32 = -9;
/// A null or misaligned device pointer (the count must be aligned to its size).
pub const SRB_ERR_BAD_POINTER: i32 = -10;
/// Every slot is held: release one first (`srb_release`).
pub const SRB_ERR_SLOTS_EXHAUSTED: i32 = -11;
/// Graph mode: this replay was dropped because the host held its slot (it fell more than
/// `slots` replays behind). The replay is consumed; call `srb_next` again for the next one.
pub const SRB_ERR_OVERRUN: i32 = -12;
/// A slot's trailer did not match: a bug or memory corruption.
pub const SRB_ERR_CORRUPT: i32 = -13;
/// A Rust panic was caught at the boundary (a bug; please report it).
pub const SRB_ERR_PANIC: i32 = -100;

/// `srb_create` flag: the staged transport (device slot, then one fixed-size copy) instead
/// of mapped pinned memory.
pub const SRB_FLAG_STAGED: u32 = 1;
/// `srb_create` flag: a device-sequenced readback for CUDA graph capture and replay
/// (`srb_record` / `srb_next`). Not with `SRB_FLAG_STAGED`.
pub const SRB_FLAG_GRAPH: u32 = 2;

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

/// An opaque readback handle, from `srb_create`, freed by `srb_destroy`.
pub struct srb_readback {
    inner: Inner,
}

enum Inner {
    Host {
        rb: ColumnReadback,
        /// The ticket of each slot's readback, until `srb_release`.
        tickets: Mutex<Vec<Option<Arc<ColumnTicket>>>>,
    },
    Graph(GraphReadback),
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
    // The table is consistent between statements, so a poisoned lock is still usable.
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

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let code = match &e {
            Error::DriverNotFound => SRB_ERR_DRIVER_NOT_FOUND,
            Error::NoDevice { .. } => SRB_ERR_NO_DEVICE,
            Error::Cuda { .. } => SRB_ERR_CUDA,
            Error::InvalidConfig { .. } => SRB_ERR_INVALID_CONFIG,
            Error::CountExceedsCapacity { .. } => SRB_ERR_COUNT_EXCEEDS_CAPACITY,
            Error::NegativeCount { .. } => SRB_ERR_NEGATIVE_COUNT,
            Error::CountExceedsSource { .. } => SRB_ERR_COUNT_EXCEEDS_SOURCE,
            Error::ForeignContext { .. } => SRB_ERR_FOREIGN_CONTEXT,
            Error::BadPointer { .. } => SRB_ERR_BAD_POINTER,
            Error::SlotsExhausted { .. } => SRB_ERR_SLOTS_EXHAUSTED,
            Error::Timeout { .. } => SRB_TIMEOUT,
            Error::Overrun { .. } => SRB_ERR_OVERRUN,
            Error::CorruptTrailer { .. } => SRB_ERR_CORRUPT,
        };
        Failure {
            code,
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
    rb.as_ref()
        .ok_or_else(|| invalid("the readback handle is null"))
}

/// `timeout_ns` from now; `None` (no limit) when negative or past what `Instant` can hold.
fn deadline(timeout_ns: i64) -> Option<Instant> {
    u64::try_from(timeout_ns)
        .ok()
        .and_then(|ns| Instant::now().checked_add(Duration::from_nanos(ns)))
}

/// # Safety
/// `columns` and `lens` are null or point to `n` readable values.
unsafe fn sources(
    columns: *const CUdeviceptr,
    lens: *const usize,
    n: usize,
) -> Result<Vec<ColumnSource>, Failure> {
    if columns.is_null() || lens.is_null() {
        return Err(invalid("the column or length array is null"));
    }
    let ptrs = std::slice::from_raw_parts(columns, n);
    let lens = std::slice::from_raw_parts(lens, n);
    Ok(ptrs
        .iter()
        .zip(lens)
        .map(|(&ptr, &len)| ColumnSource { ptr, len })
        .collect())
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
    schema.validate()?;
    SlotLayout::new(capacity, &schema.elem_sizes())?.total_bytes(slots as usize)?;
    let transport = if flags & SRB_FLAG_STAGED != 0 {
        Transport::Staged
    } else {
        Transport::Mapped
    };
    let config = ReadbackConfig::new(capacity)
        .slots(slots as usize)
        .transport(transport);
    Ok((schema, config))
}

/// Creates a readback in the primary context of device `device` (the CUDA runtime's), for
/// `num_columns` columns whose element sizes in bytes are `elem_sizes[0..num_columns]`, with
/// `capacity` rows per slot and `slots` slots (at least 1; 2 for double buffering). `flags`:
/// 0, `SRB_FLAG_STAGED`, or `SRB_FLAG_GRAPH`. On success stores the handle in `*out`.
/// The arguments are checked before the device is opened: a bad one gives
/// `SRB_ERR_INVALID_ARGUMENT` or `SRB_ERR_INVALID_CONFIG` with or without a GPU.
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
        if out.is_null() {
            return Err(invalid("out is null"));
        }
        *out = std::ptr::null_mut();
        if elem_sizes.is_null() {
            return Err(invalid("elem_sizes is null"));
        }
        if num_columns == 0 || num_columns > SRB_MAX_COLUMNS {
            return Err(invalid(format!(
                "num_columns must be 1 to {SRB_MAX_COLUMNS}, not {num_columns}"
            )));
        }
        if flags & !(SRB_FLAG_STAGED | SRB_FLAG_GRAPH) != 0 {
            return Err(invalid(format!("unknown flags {flags:#x}")));
        }
        let ordinal =
            usize::try_from(device).map_err(|_| invalid(format!("device {device} is negative")))?;
        let sizes = std::slice::from_raw_parts(elem_sizes, num_columns as usize);
        // Everything that needs no driver first, so these errors do not depend on a GPU.
        let (schema, config) = create_config(capacity, slots, sizes, flags)?;
        let ctx = crate::device::open(ordinal)?;
        let inner = if flags & SRB_FLAG_GRAPH != 0 {
            Inner::Graph(GraphReadback::new(&ctx, &schema, config)?)
        } else {
            let rb = ColumnReadback::new(&ctx, &schema, config)?;
            let tickets = Mutex::new(vec![None; rb.slots()]);
            Inner::Host { rb, tickets }
        };
        *out = Box::into_raw(Box::new(srb_readback { inner }));
        Ok(SRB_OK)
    })
}

/// Destroys a readback (null is ignored). Waits for its readbacks still in flight (for a
/// graph readback, for all of the context's work); launching a graph that recorded it
/// afterwards is undefined behaviour.
///
/// # Safety
/// `rb` is null or a handle from `srb_create`, destroyed once and not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn srb_destroy(rb: *mut srb_readback) {
    if !rb.is_null() {
        guard(|| {
            drop(Box::from_raw(rb));
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
    stream: CUstream,
    after: CUevent,
    columns: *const CUdeviceptr,
    lens: *const usize,
    count: CUdeviceptr,
    count_kind: u32,
    seq_out: *mut u64,
) -> i32 {
    guard(|| {
        let Inner::Host { rb, tickets } = &handle(rb)?.inner else {
            return Err(invalid("a graph readback is recorded with srb_record"));
        };
        if seq_out.is_null() {
            return Err(invalid("seq_out is null"));
        }
        let kind = parse_count_kind(count_kind)?;
        let src = sources(columns, lens, rb.schema().len())?;
        let engine = rb.engine();
        engine.check_raw_stream(stream)?;
        for s in &src {
            if s.len > 0 {
                engine.check_raw_pointer("a column's data", s.ptr)?;
            }
        }
        if count != 0 {
            engine.check_raw_pointer("the count", count)?;
        }
        let after = (!after.is_null()).then_some(after);
        // SAFETY: per this function's contract; addresses and stream checked above.
        let lease = engine.enqueue(stream, after, &src, count, kind)?;
        let ticket = Arc::new(rb.ticket(lease, kind, &src));
        let seq = ticket.seq();
        let slot = ticket.slot();
        lock(tickets)[slot] = Some(ticket);
        *seq_out = seq;
        Ok(SRB_OK)
    })
}

/// Graph mode: records one pack into `stream` (normally a stream under capture), with the
/// same arguments as `srb_enqueue`. Every replay of the graph produces readback number
/// 1, 2, 3, ... in turn; take them with `srb_next`. The sources must be valid and unwritten
/// whenever the pack runs, and the readback must outlive every replay. Every recording of
/// one readback uses the same `count_kind` and `lens` as its first (the host cannot tell
/// which recording produced a replay): a different one is refused with
/// `SRB_ERR_INVALID_CONFIG` and records nothing.
///
/// # Safety
/// As `srb_enqueue`, for every replay.
#[no_mangle]
pub unsafe extern "C" fn srb_record(
    rb: *const srb_readback,
    stream: CUstream,
    after: CUevent,
    columns: *const CUdeviceptr,
    lens: *const usize,
    count: CUdeviceptr,
    count_kind: u32,
) -> i32 {
    guard(|| {
        let Inner::Graph(g) = &handle(rb)?.inner else {
            return Err(invalid(
                "srb_record needs a readback created with SRB_FLAG_GRAPH",
            ));
        };
        let kind = parse_count_kind(count_kind)?;
        let src = sources(columns, lens, g.schema().len())?;
        let after = (!after.is_null()).then_some(after);
        g.record_raw(stream, after, &src, count, kind)?;
        Ok(SRB_OK)
    })
}

/// Host-sequenced mode: the readback's ticket, cloned out of the table.
fn ticket(h: &srb_readback, seq: u64) -> Result<Arc<ColumnTicket>, Failure> {
    let Inner::Host { tickets, .. } = &h.inner else {
        return Err(invalid(
            "a graph readback is consumed with srb_next, not by waiting on a number",
        ));
    };
    lock(tickets)
        .iter()
        .flatten()
        .find(|t| t.seq() == seq)
        .cloned()
        .ok_or_else(|| {
            invalid(format!(
                "no readback {seq} is held (released, or never enqueued)"
            ))
        })
}

/// Host-sequenced mode: `SRB_OK` if readback `seq` is complete (its count is good),
/// `SRB_NOT_READY` if it is in flight, or the count's error. Never blocks.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_poll(rb: *const srb_readback, seq: u64) -> i32 {
    guard(|| {
        let t = ticket(handle(rb)?, seq)?;
        let done = t.try_wait()?.is_some();
        Ok(if done { SRB_OK } else { SRB_NOT_READY })
    })
}

fn count_of_error(e: &Error) -> Option<u64> {
    match e {
        Error::CountExceedsCapacity { count, .. } | Error::CountExceedsSource { count, .. } => {
            Some(*count)
        }
        _ => None,
    }
}

/// Host-sequenced mode: waits for readback `seq`, at most `timeout_ns` nanoseconds (< 0:
/// no limit), then stores its count in `*count_out` (may be null). Returns `SRB_OK`,
/// `SRB_TIMEOUT` (wait again later) or an error; after `SRB_ERR_COUNT_EXCEEDS_CAPACITY` or
/// `SRB_ERR_COUNT_EXCEEDS_SOURCE` the offending count is in `*count_out`. The slot stays
/// held until `srb_release`.
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
        let t = ticket(handle(rb)?, seq)?;
        let result = match deadline(timeout_ns) {
            None => t.wait().map(|r| r.count()),
            Some(d) => t
                .wait_timeout(d.saturating_duration_since(Instant::now()))
                .map(|r| r.count()),
        };
        let n = match &result {
            Ok(n) => Some(*n as u64),
            Err(e) => count_of_error(e),
        };
        if let (Some(n), false) = (n, count_out.is_null()) {
            *count_out = n;
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
/// in `*seq_out`), each of which consumes the replay; `SRB_ERR_INVALID_CONFIG` at once when
/// nothing was recorded. Concurrent callers each get a different replay.
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
        let Inner::Graph(g) = &handle(rb)?.inner else {
            return Err(invalid(
                "srb_next needs a readback created with SRB_FLAG_GRAPH",
            ));
        };
        // The number comes from the take itself, under its lock: another thread's call
        // cannot slip in between.
        let (seq, result) = match g.take(deadline(timeout_ns))? {
            Take::Busy => {
                return Err(Failure {
                    code: SRB_NOT_READY,
                    message: "another thread is taking a replay; nothing was consumed".into(),
                })
            }
            Take::Seq(seq, result) => (seq, result),
        };
        if !seq_out.is_null() {
            *seq_out = seq;
        }
        let n = match &result {
            Ok((_, n)) => Some(*n as u64),
            Err(e) => count_of_error(e),
        };
        if let (Some(n), false) = (n, count_out.is_null()) {
            *count_out = n;
        }
        result.map(|_| SRB_OK).map_err(Failure::from)
    })
}

/// The count of complete readback `seq` (host mode: `SRB_NOT_READY` while in flight; graph
/// mode: a replay held since `srb_next`).
///
/// # Safety
/// `rb` is a live handle; `count_out` is writable.
#[no_mangle]
pub unsafe extern "C" fn srb_count(rb: *const srb_readback, seq: u64, count_out: *mut u64) -> i32 {
    guard(|| {
        if count_out.is_null() {
            return Err(invalid("count_out is null"));
        }
        let h = handle(rb)?;
        let n = match &h.inner {
            Inner::Graph(g) => g
                .held_readout(seq)
                .ok_or_else(|| invalid(format!("replay {seq} is not held")))?
                .count(),
            Inner::Host { .. } => match ticket(h, seq)?.try_wait()? {
                Some(r) => r.count(),
                None => return Ok(SRB_NOT_READY),
            },
        };
        *count_out = n as u64;
        Ok(SRB_OK)
    })
}

/// Host address of column `column` of complete readback `seq` in pinned memory: its count
/// elements, 16-byte aligned, valid until `srb_release(rb, seq)`. Null if the readback is
/// not complete or held, or on an error (see `srb_last_error`).
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_data(rb: *const srb_readback, seq: u64, column: u32) -> *const c_void {
    let mut ptr: *const c_void = std::ptr::null();
    let code = guard(|| {
        let h = handle(rb)?;
        let bytes_ptr = match &h.inner {
            Inner::Graph(g) => g
                .held_readout(seq)
                .ok_or_else(|| invalid(format!("replay {seq} is not held")))?
                .column_bytes(column as usize)
                .map_err(|e| invalid(e.to_string()))?
                .as_ptr(),
            Inner::Host { .. } => {
                let t = ticket(h, seq)?;
                let Some(r) = t.try_wait()? else {
                    return Err(Failure {
                        code: SRB_NOT_READY,
                        message: format!("readback {seq} is still in flight"),
                    });
                };
                r.column_bytes(column as usize)
                    .map_err(|e| invalid(e.to_string()))?
                    .as_ptr()
            }
        };
        ptr = bytes_ptr.cast();
        Ok(SRB_OK)
    });
    if code == SRB_OK {
        ptr
    } else {
        std::ptr::null()
    }
}

/// Releases readback `seq`'s slot for reuse; its data pointers become invalid. A readback
/// released before it completes is still waited for on the device before its slot is reused.
///
/// # Safety
/// `rb` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_release(rb: *const srb_readback, seq: u64) -> i32 {
    guard(|| {
        match &handle(rb)?.inner {
            Inner::Graph(g) => {
                if !g.release(seq) {
                    return Err(invalid(format!("replay {seq} is not held")));
                }
            }
            Inner::Host { tickets, .. } => {
                let mut table = lock(tickets);
                let entry = table
                    .iter_mut()
                    .find(|t| t.as_ref().is_some_and(|t| t.seq() == seq))
                    .ok_or_else(|| invalid(format!("no readback {seq} is held")))?;
                *entry = None;
            }
        }
        Ok(SRB_OK)
    })
}

/// Rows per slot of the readback (0 if `rb` is null).
///
/// # Safety
/// `rb` is null or a live handle.
#[no_mangle]
pub unsafe extern "C" fn srb_capacity(rb: *const srb_readback) -> usize {
    match rb.as_ref().map(|h| &h.inner) {
        Some(Inner::Host { rb, .. }) => rb.capacity(),
        Some(Inner::Graph(g)) => g.capacity(),
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
}
