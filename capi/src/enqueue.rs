//! Host-sequenced packs: `srb_enqueue` (one count) and `srb_enqueue_buckets` (a count and an
//! offset per bucket), on the library's raw-stream enqueues.
use crate::args::{event_of, sources, stream_of};
use crate::boundary::{guard, invalid};
use crate::codes::SRB_OK;
use crate::handle::{handle, srb_readback, Inner};
use crate::held::{hold, Held};
use crate::types::{parse_count_kind, srb_devptr, CUevent_st, CUstream_st};
use srb::RawCount;

/// Host-sequenced mode: enqueues a readback of `columns[i]` (device pointers, `lens[i]`
/// elements readable at each) sized by the count at `count` (of kind `count_kind`), on
/// `stream`, after `after` (an event recorded after the producer; may be null if the
/// producer ran on `stream`). Returns at once; stores the readback's sequence number in
/// `*seq_out`. The sources must stay allocated and unwritten until the readback completes.
///
/// Returns `SRB_OK`; `SRB_ERR_INVALID_ARGUMENT` for a null handle, array or `seq_out`, an
/// unknown `count_kind`, or a graph, bucketed or append readback; `SRB_ERR_BAD_POINTER` for a null,
/// misaligned or unknown address; `SRB_ERR_FOREIGN_CONTEXT` for memory, a stream or an event
/// of another context; `SRB_ERR_STREAM_CAPTURING`; `SRB_ERR_SLOTS_EXHAUSTED` when every slot
/// is held (release one); `SRB_ERR_CUDA` on a driver error. The count's own errors come from
/// `srb_wait`.
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
        hold(held, Held::Pack(ticket));
        // SAFETY: per the contract.
        unsafe { *seq_out = seq };
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
        hold(held, Held::Pack(ticket));
        // SAFETY: per the contract.
        unsafe { *seq_out = seq };
        Ok(SRB_OK)
    })
}
