//! Graph mode: `srb_record` records a pack into a capture, `srb_next` takes each replay by
//! number.
use crate::args::{event_of, sources, stream_of, timeout};
use crate::boundary::{guard, invalid, Failure};
use crate::codes::{SRB_NOT_READY, SRB_OK};
use crate::handle::{handle, srb_readback, Inner};
use crate::held::{hold, Held};
use crate::types::{parse_count_kind, srb_devptr, CUevent_st, CUstream_st};
use crate::wait::answer_with_count;
use srb::RawCount;
use std::sync::Mutex;

/// Graph mode: records one pack into `stream` (normally a stream under capture), with the
/// same arguments as `srb_enqueue`. Every replay of the graph produces readback number
/// 1, 2, 3, ... in turn; take them with `srb_next`. The sources must be valid and unwritten
/// whenever the pack runs, and the readback must outlive every replay. Every recording of
/// one readback uses the same `count_kind` and `lens` as its first (the host cannot tell
/// which recording produced a replay): a different one is refused with
/// `SRB_ERR_RECORDING_MISMATCH` and records nothing.
///
/// Returns `SRB_OK`; `SRB_ERR_INVALID_ARGUMENT` for a null handle or array, an unknown
/// `count_kind`, or a readback made without `SRB_FLAG_GRAPH`; `SRB_ERR_BAD_POINTER` for a
/// null or misaligned count;
/// `SRB_ERR_FOREIGN_CONTEXT` for a stream or event of another context;
/// `SRB_ERR_RECORDING_MISMATCH`; `SRB_ERR_CUDA` on a driver error (e.g. from the capture).
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
            g.record_raw_stream(
                stream_of(stream),
                event_of(after),
                src.as_slice(),
                RawCount::new(count, kind),
            )?
        };
        Ok(SRB_OK)
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
/// different replay. The count errors are those of `srb_wait`, in the same order of
/// precedence: a count above both the capacity and a source's length is
/// `SRB_ERR_COUNT_EXCEEDS_CAPACITY`. Also `SRB_ERR_CORRUPT` and `SRB_ERR_CUDA` as `srb_wait`
/// (each consumes the replay), and `SRB_ERR_INVALID_ARGUMENT` for a null handle or a readback
/// made without `SRB_FLAG_GRAPH`.
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
            hold(held, Held::Replay(Mutex::new(None), replay));
        }
        if !seq_out.is_null() {
            // SAFETY: per the contract.
            unsafe { *seq_out = seq };
        }
        // SAFETY: per the contract.
        unsafe { answer_with_count(result, count_out) }
    })
}
