//! Sized launch: a GPU step sized by a device-resident count (`srb_sized_launch_*`). One body
//! per size class, recorded once through the caller's callback; at each launch the device
//! picks the count's class and runs its body, with no host round trip.
use crate::args::{stream_of, timeout};
use crate::boundary::{guard, invalid, Failure};
use crate::codes::{count_of_error, SRB_NOT_READY, SRB_OK};
use crate::types::{parse_count_kind, srb_devptr, CUstream_st};
use srb::{LaunchOutcome, RawCount, SizeClass, SizedLaunch, SizedLaunchBuilder, SizedTicket};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::Mutex;

/// Tickets of a sized launch kept for `srb_sized_launch_wait`: the newest this many (an older
/// one's status entry has been reused anyway).
const KEPT: usize = 256;

/// A sized launch (opaque): from `srb_sized_launch_create`, destroyed by
/// `srb_sized_launch_destroy`.
pub struct srb_sized_launch {
    launch: SizedLaunch,
    /// The pending tickets, oldest first, and the newest number handed out.
    tickets: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    pending: VecDeque<SizedTicket>,
    newest: u64,
}

impl Kept {
    /// Keeps `t`, letting go of the oldest beyond [`KEPT`].
    fn keep(&mut self, t: SizedTicket) {
        self.newest = self.newest.max(t.seq());
        self.pending.push_back(t);
        while self.pending.len() > KEPT {
            self.pending.pop_front();
        }
    }
}

/// The body callback of a sized launch: called once per size class at creation, smallest
/// first, with `stream` capturing into that class's body. Enqueue the body's work on `stream`
/// (a kernel with a grid for `n_max` items, a CUB call or a GEMM of `n_max`), reading the true
/// count at the device address `count` to bound it. Return 0, or non-zero to fail the creation
/// (`SRB_ERR_BODY_RECORDING`). `user` is what `srb_sized_launch_create` was given. `stream`
/// is the library's, made for this creation and destroyed when it returns: do not keep it.
pub type srb_sized_body = Option<
    unsafe extern "C" fn(
        user: *mut c_void,
        stream: *mut CUstream_st,
        class_index: u32,
        n_max: u64,
        count: srb_devptr,
    ) -> i32,
>;

/// Creates a sized launch in the primary context of device `device`: the count is the value of
/// kind `count_kind` (`SRB_COUNT_*`) at device address `count`; the size classes are
/// `n_max[0..num_classes]` (ascending, the last one `capacity`, at most 32) or, with
/// `num_classes` 0 and `n_max` null, 1024, 4096, ... up to `capacity`. `body` records each
/// class's work (see `srb_sized_body`). Needs a CUDA 12.8 driver. On success stores the handle
/// in `*out`.
///
/// Returns `SRB_OK`; `SRB_ERR_INVALID_ARGUMENT` for a null `out` or `body`, a null `n_max`
/// with classes, an unknown count kind or a negative device; `SRB_ERR_INVALID_CONFIG` for a
/// capacity of 0 or classes that are not ascending or do not end at the capacity;
/// `SRB_ERR_BAD_POINTER` for a null or misaligned count; `SRB_ERR_BODY_RECORDING` when the
/// callback returns non-zero or its work cannot be captured (the message names the class);
/// `SRB_ERR_SIZED_LAUNCH_UNAVAILABLE` on a driver older than CUDA 12.8; `SRB_ERR_DRIVER_NOT_FOUND`,
/// `SRB_ERR_NO_DEVICE`, `SRB_ERR_CUDA`.
///
/// # Safety
/// `n_max` points to `num_classes` values (or is null with 0); `out` is writable; `body` may be
/// called with `user` during this call only; what the bodies read and write stays valid while
/// the sized launch is launched.
#[no_mangle]
pub unsafe extern "C" fn srb_sized_launch_create(
    device: i32,
    count: srb_devptr,
    count_kind: u32,
    capacity: u64,
    n_max: *const u64,
    num_classes: u32,
    body: srb_sized_body,
    user: *mut c_void,
    out: *mut *mut srb_sized_launch,
) -> i32 {
    guard(|| {
        if out.is_null() {
            return Err(invalid("srb_sized_launch_create: out is null"));
        }
        let Some(body) = body else {
            return Err(invalid("srb_sized_launch_create: body is null"));
        };
        if num_classes > 0 && n_max.is_null() {
            return Err(invalid("srb_sized_launch_create: n_max is null"));
        }
        let kind = parse_count_kind(count_kind)?;
        let mut builder = SizedLaunch::builder(RawCount::new(count, kind), capacity);
        if num_classes > 0 {
            // SAFETY: per the contract.
            let given = unsafe { std::slice::from_raw_parts(n_max, num_classes as usize) };
            builder = builder.classes(given.iter().copied());
        }
        // SAFETY: per the contract.
        unsafe { build_into(device, builder, body, user, out) }
    })
}

/// Creates a sized launch in its exact-grid form in the primary context of device `device`:
/// the count as for `srb_sized_launch_create`; one class, `capacity`, whose body `body` records
/// once and must be exactly one kernel launch, of a 1-D grid; at each launch the device sets
/// that kernel's grid to ceil(count / `items_per_block`) blocks, or skips it for a count of 0
/// or past the capacity, with no SWITCH node. A graph it is recorded into cannot be
/// instantiated twice, cloned or updated with `cuGraphExecUpdate`, and must be uploaded
/// (`cuGraphUpload`) before its first launch. Needs a CUDA 12.8 driver. On success stores the
/// handle in `*out`; it is used, waited and destroyed as `srb_sized_launch_create`'s.
///
/// Returns `SRB_OK`; `SRB_ERR_INVALID_ARGUMENT` for a null `out` or `body`, an unknown count
/// kind or a negative device; `SRB_ERR_INVALID_CONFIG` for a capacity or `items_per_block` of
/// 0, or a capacity whose grid passes 2^31 - 1 blocks; `SRB_ERR_BAD_POINTER` for a null or
/// misaligned count; `SRB_ERR_BODY_RECORDING` when the callback returns non-zero, its work
/// cannot be captured, or it is other than one kernel launch of a 1-D grid;
/// `SRB_ERR_SIZED_LAUNCH_UNAVAILABLE`
/// on a driver without device-updatable graph nodes or older than CUDA 12.8;
/// `SRB_ERR_DRIVER_NOT_FOUND`, `SRB_ERR_NO_DEVICE`, `SRB_ERR_CUDA`.
///
/// # Safety
/// `out` is writable; `body` may be called with `user` during this call only; what the body
/// reads and writes stays valid while the sized launch is launched.
#[no_mangle]
pub unsafe extern "C" fn srb_sized_launch_create_exact_grid(
    device: i32,
    count: srb_devptr,
    count_kind: u32,
    capacity: u64,
    items_per_block: u64,
    body: srb_sized_body,
    user: *mut c_void,
    out: *mut *mut srb_sized_launch,
) -> i32 {
    guard(|| {
        if out.is_null() {
            return Err(invalid("srb_sized_launch_create_exact_grid: out is null"));
        }
        let Some(body) = body else {
            return Err(invalid("srb_sized_launch_create_exact_grid: body is null"));
        };
        let kind = parse_count_kind(count_kind)?;
        let builder =
            SizedLaunch::builder(RawCount::new(count, kind), capacity).exact_grid(items_per_block);
        // SAFETY: per the contract.
        unsafe { build_into(device, builder, body, user, out) }
    })
}

/// What both creates share once their arguments are read: the device, the plan checked before
/// it (a bad one is the same error with or without a GPU), the build over `body`, the handle
/// stored in `*out`.
///
/// # Safety
/// `out` is non-null and writable; `body` may be called with `user` during this call only.
unsafe fn build_into(
    device: i32,
    builder: SizedLaunchBuilder,
    body: unsafe extern "C" fn(*mut c_void, *mut CUstream_st, u32, u64, srb_devptr) -> i32,
    user: *mut c_void,
    out: *mut *mut srb_sized_launch,
) -> Result<i32, Failure> {
    let ordinal =
        usize::try_from(device).map_err(|_| invalid(format!("device {device} is negative")))?;
    builder.plan()?;
    let ctx = srb::device::open(ordinal)?;
    // SAFETY: per the contract.
    let launch = builder.build(&ctx, unsafe { record_with(body, user) })?;
    let h = srb_sized_launch {
        launch,
        tickets: Mutex::default(),
    };
    // SAFETY: per the contract.
    unsafe { *out = Box::into_raw(Box::new(h)) };
    Ok(SRB_OK)
}

/// The build's closure over the caller's body callback: a non-zero return is the class's
/// recording error.
///
/// # Safety
/// `body` may be called with `user` while the closure lives (the create call).
unsafe fn record_with(
    body: unsafe extern "C" fn(*mut c_void, *mut CUstream_st, u32, u64, srb_devptr) -> i32,
    user: *mut c_void,
) -> impl FnMut(&SizeClass<'_>) -> Result<(), String> {
    move |class| {
        // SAFETY: the caller's callback with its own user pointer, during the create call.
        let rc = unsafe {
            body(
                user,
                class.stream().cu_stream().cast(),
                class.index() as u32,
                class.n_max(),
                class.count().ptr(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(format!("the body callback returned {rc}"))
        }
    }
}

/// Launches it on `stream` after the work already there (the count's producer): the device
/// picks the count's class and runs its body. Stores the launch's number in `*seq_out` (may be
/// null) for `srb_sized_launch_wait`. On a capturing stream the sized launch is recorded into
/// the graph instead (`*seq_out` = 0; after a replay, `srb_sized_launch_recorded`); a
/// recording that fails invalidates the capture (ending it fails).
///
/// Returns `SRB_OK`; `SRB_ERR_INVALID_ARGUMENT` for a null handle; `SRB_ERR_FOREIGN_CONTEXT`
/// for a stream of another context; `SRB_ERR_CUDA`.
///
/// # Safety
/// `l` is a live handle; `stream` a live stream (null: the legacy default stream);
/// `seq_out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn srb_sized_launch_enqueue(
    l: *const srb_sized_launch,
    stream: *mut CUstream_st,
    seq_out: *mut u64,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let h = unsafe { handle(l)? };
        // SAFETY: per the contract.
        let seq = match unsafe { h.launch.enqueue_raw(stream_of(stream)) } {
            Ok(t) => {
                let seq = t.seq();
                h.tickets.lock().unwrap_or_else(|e| e.into_inner()).keep(t);
                seq
            }
            Err(srb::Error::StreamCapturing) => {
                // SAFETY: a capturing stream; the caller keeps the handle alive while the
                // graph is launched (srb_sized_launch_destroy's contract).
                unsafe { h.launch.record(stream_of(stream)) }?;
                0
            }
            Err(e) => return Err(e.into()),
        };
        if !seq_out.is_null() {
            // SAFETY: per the contract.
            unsafe { *seq_out = seq };
        }
        Ok(SRB_OK)
    })
}

/// Waits for launch `seq` (its body included), at most `timeout_ns` nanoseconds (< 0: no limit), and stores the
/// count it read in `*count_out` and the class that ran in `*class_out` (either may be null;
/// when no body ran, `*class_out` is the number of classes, and `*count_out` is written only
/// for the count's own errors).
/// Returns `SRB_OK`, `SRB_TIMEOUT` (wait again), or the error that ran no body:
/// `SRB_ERR_COUNT_EXCEEDS_CAPACITY` (the true count in `*count_out`), `SRB_ERR_NEGATIVE_COUNT`
/// (its bits), `SRB_ERR_OVERRUN` (256 or more later launches were enqueued before this wait,
/// reusing its status), `SRB_ERR_CUDA`;
/// `SRB_ERR_INVALID_ARGUMENT` for a null handle or a `seq` not pending (waited already).
///
/// # Safety
/// `l` is a live handle; `count_out` and `class_out` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn srb_sized_launch_wait(
    l: *const srb_sized_launch,
    seq: u64,
    timeout_ns: i64,
    count_out: *mut u64,
    class_out: *mut u32,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let h = unsafe { handle(l)? };
        let ticket = {
            let mut kept = h.tickets.lock().unwrap_or_else(|e| e.into_inner());
            match kept.pending.iter().position(|t| t.seq() == seq) {
                Some(i) => kept.pending.remove(i).expect("found"),
                // Let go of once KEPT later launches were enqueued: its status is gone.
                None if seq > 0 && seq + KEPT as u64 <= kept.newest => {
                    return Err(srb::Error::Overrun { seq }.into());
                }
                None => return Err(invalid(format!("sized launch {seq} is not pending"))),
            }
        };
        let result = match timeout(timeout_ns) {
            Some(d) => ticket.wait_timeout(d),
            None => ticket.wait(),
        };
        if matches!(result, Err(srb::Error::Timeout { .. })) {
            // Still pending: waited again later (as the oldest, then trimmed like any).
            let mut kept = h.tickets.lock().unwrap_or_else(|e| e.into_inner());
            kept.pending.push_front(ticket);
            while kept.pending.len() > KEPT {
                kept.pending.pop_front();
            }
        }
        // SAFETY: per the contract.
        unsafe {
            answer(
                result,
                h.launch.classes().len() as u32,
                count_out,
                class_out,
            )
        }
    })
}

/// After a replay of a graph the sized launch was recorded into has completed: the count and
/// class of the newest replay, as `srb_sized_launch_wait` stores them; `SRB_NOT_READY` before
/// any replay.
///
/// # Safety
/// `l` is a live handle; `count_out` and `class_out` are null or writable.
#[no_mangle]
pub unsafe extern "C" fn srb_sized_launch_recorded(
    l: *const srb_sized_launch,
    count_out: *mut u64,
    class_out: *mut u32,
) -> i32 {
    guard(|| {
        // SAFETY: per the contract.
        let h = unsafe { handle(l)? };
        let no_body = h.launch.classes().len() as u32;
        match h.launch.recorded_outcome() {
            Ok(None) => Ok(SRB_NOT_READY),
            // SAFETY: per the contract.
            Ok(Some(o)) => unsafe { answer(Ok(o), no_body, count_out, class_out) },
            // SAFETY: per the contract.
            Err(e) => unsafe { answer(Err(e), no_body, count_out, class_out) },
        }
    })
}

/// The number of size classes (0 for a null handle), their `n_max` written to
/// `n_max_out[0..min(classes, len)]` (`n_max_out` may be null).
///
/// # Safety
/// `l` is null or a live handle; `n_max_out` is null or has room for `len` values.
#[no_mangle]
pub unsafe extern "C" fn srb_sized_launch_classes(
    l: *const srb_sized_launch,
    n_max_out: *mut u64,
    len: u32,
) -> u32 {
    // SAFETY: per the contract.
    let Some(h) = (unsafe { l.as_ref() }) else {
        return 0;
    };
    let classes = h.launch.classes();
    if !n_max_out.is_null() {
        for (i, &c) in classes.iter().take(len as usize).enumerate() {
            // SAFETY: per the contract (i < len).
            unsafe { *n_max_out.add(i) = c };
        }
    }
    classes.len() as u32
}

/// Destroys a sized launch (null is ignored), after its launches in flight: it synchronizes the
/// context, so call it while no stream of the context is capturing, in any thread (the driver
/// refuses the synchronization then, and invalidates that capture). Launching a graph it was
/// recorded into afterwards is undefined behaviour.
///
/// # Safety
/// `l` is null or a handle from `srb_sized_launch_create`, destroyed once.
#[no_mangle]
pub unsafe extern "C" fn srb_sized_launch_destroy(l: *mut srb_sized_launch) {
    if !l.is_null() {
        guard(|| {
            // SAFETY: per the contract.
            drop(unsafe { Box::from_raw(l) });
            Ok(SRB_OK)
        });
    }
}

/// The handle, or `SRB_ERR_INVALID_ARGUMENT` for null.
///
/// # Safety
/// `l` is null or a live handle.
unsafe fn handle<'a>(l: *const srb_sized_launch) -> Result<&'a srb_sized_launch, Failure> {
    // SAFETY: per the contract.
    unsafe { l.as_ref() }.ok_or_else(|| invalid("the sized launch handle is null"))
}

/// A wait's answer: `SRB_OK` or the error's code; the count (or the error's) and the class
/// stored where the pointers are not null.
///
/// # Safety
/// `count_out` and `class_out` are null or writable.
unsafe fn answer(
    result: srb::Result<LaunchOutcome>,
    no_body: u32,
    count_out: *mut u64,
    class_out: *mut u32,
) -> Result<i32, Failure> {
    let n = match &result {
        Ok(o) => Some(o.count()),
        Err(e) => count_of_error(e),
    };
    if let (Some(n), false) = (n, count_out.is_null()) {
        // SAFETY: per the contract.
        unsafe { *count_out = n };
    }
    if !class_out.is_null() {
        // SAFETY: per the contract.
        unsafe { *class_out = result.as_ref().map_or(no_body, |o| o.class() as u32) };
    }
    result.map(|_| SRB_OK).map_err(Failure::from)
}
