//! Host-sequenced mode: `srb_poll` and `srb_wait` on a readback's number.
use crate::args::timeout;
use crate::boundary::{guard, Failure};
use crate::codes::{count_of_error, SRB_NOT_READY, SRB_OK};
use crate::handle::{handle, srb_readback, waitable};

/// Host-sequenced mode: `SRB_OK` if readback `seq` is complete (its count is good),
/// `SRB_NOT_READY` if it is in flight, or the count's error. Never blocks. Errors as
/// `srb_wait`.
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

/// Host-sequenced mode: waits for readback `seq`, at most `timeout_ns` nanoseconds (< 0:
/// no limit), then stores its count in `*count_out` (may be null). Returns `SRB_OK`,
/// `SRB_TIMEOUT` (wait again later) or an error; after `SRB_ERR_COUNT_EXCEEDS_CAPACITY`,
/// `SRB_ERR_COUNT_EXCEEDS_SOURCE` or `SRB_ERR_APPEND_OVERFLOW` the true count is in
/// `*count_out`, after `SRB_ERR_BUCKET_OVER_CAPACITY` that bucket's count, after
/// `SRB_ERR_NEGATIVE_COUNT` its bits. The slot stays held until
/// `srb_release`.
///
/// Errors: `SRB_ERR_INVALID_ARGUMENT` for a null handle, a graph readback, or a `seq` not
/// held; the count's errors (`SRB_ERR_NEGATIVE_COUNT`, `SRB_ERR_COUNT_EXCEEDS_CAPACITY`,
/// `SRB_ERR_COUNT_EXCEEDS_SOURCE`; a bucket pack's `SRB_ERR_NEGATIVE_COUNT`,
/// `SRB_ERR_BUCKET_OVER_CAPACITY`, `SRB_ERR_BUCKET_RANGE`), with nothing copied; an
/// append's (`SRB_ERR_APPEND_OVERFLOW`, `SRB_ERR_APPEND_UNFINISHED`, `SRB_ERR_APPEND_MISUSE`,
/// `SRB_ERR_BAD_BUCKET`); `SRB_ERR_CORRUPT` if the slot does not hold this readback (a bug or
/// memory corruption); `SRB_ERR_CUDA` when the device reports an error (e.g. the producer
/// kernel faulted), never a hang.
/// A count wrong in several ways gets one code, in this order: `SRB_ERR_NEGATIVE_COUNT`, then
/// `SRB_ERR_COUNT_EXCEEDS_CAPACITY`, then `SRB_ERR_COUNT_EXCEEDS_SOURCE`: a count above both
/// the capacity and a source's length is `SRB_ERR_COUNT_EXCEEDS_CAPACITY`.
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
        let result = t.wait(timeout(timeout_ns));
        // SAFETY: per the contract.
        unsafe { answer_with_count(result, count_out) }
    })
}

/// A wait's answer (`srb_wait`, `srb_next`): `SRB_OK` or the error's code, with the count,
/// or the count the error carries, stored in `*count_out` where it is not null.
///
/// # Safety
/// `count_out` is null or writable.
pub(crate) unsafe fn answer_with_count(
    result: srb::Result<usize>,
    count_out: *mut u64,
) -> Result<i32, Failure> {
    let n = match &result {
        Ok(n) => Some(*n as u64),
        Err(e) => count_of_error(e),
    };
    if let (Some(n), false) = (n, count_out.is_null()) {
        // SAFETY: per the contract.
        unsafe { *count_out = n };
    }
    result.map(|_| SRB_OK).map_err(Failure::from)
}
