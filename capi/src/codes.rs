//! The return codes of the C API, and the code of each kind of error.
use srb::Error;

/// Success.
pub const SRB_OK: i32 = 0;
/// The readback is still in flight (`srb_poll`, `srb_count`, `srb_data`), or `srb_next`
/// found another thread taking a replay (nothing consumed; call it again).
pub const SRB_NOT_READY: i32 = 1;
/// A wait ran out of time; the readback stays valid (wait again).
pub const SRB_TIMEOUT: i32 = 2;
/// A null pointer, an unknown sequence number, a column out of range, a flag the create
/// function does not take, or a call that does not fit the readback's kind (graph, append).
pub const SRB_ERR_INVALID_ARGUMENT: i32 = -1;
/// The CUDA driver library (libcuda) could not be loaded.
pub const SRB_ERR_DRIVER_NOT_FOUND: i32 = -2;
/// No CUDA device with that ordinal.
pub const SRB_ERR_NO_DEVICE: i32 = -3;
/// A CUDA driver call failed (the message names it), including device errors such as a
/// faulted kernel.
pub const SRB_ERR_CUDA: i32 = -4;
/// Unusable settings: zero capacity or slots, an element size of 0 or above `UINT32_MAX`,
/// sizes that overflow, and flags that do not go together: `SRB_FLAG_GRAPH` with
/// `SRB_FLAG_STAGED` or with buckets, `SRB_FLAG_STAGED_WHOLE` or `_SIZED` without
/// `SRB_FLAG_STAGED` or both at once, a spill without `SRB_FLAG_APPEND` (the create
/// functions check these before they open the device, so they are reported the same with or
/// without a GPU).
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
/// The columns do not match the readback. The C calls take as many columns as the readback
/// was created with, so no `srb_` call returns it today; the code is kept so that every error
/// kind has its own.
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
/// The staged transport's sized copy (`SRB_FLAG_STAGED_SIZED`) is unavailable: the driver is
/// older than CUDA 12.8 or failed to build its graphs, or the readback is an append or bucketed
/// one (the message says which, with the driver's error if one failed).
/// Create it without the flag to get the whole-slot copy there.
pub const SRB_ERR_SIZED_COPY_UNAVAILABLE: i32 = -26;
/// The pack kernel did not know the count kind it was given (its images are older than the
/// library's count kinds): it read no count and copied nothing. An unknown `count_kind`
/// argument is refused before any launch, with `SRB_ERR_INVALID_ARGUMENT`.
pub const SRB_ERR_UNKNOWN_COUNT_KIND: i32 = -27;
/// A sized launch cannot be built: its class setter needs a CUDA 12.8 driver (a SWITCH
/// conditional node set from a kernel), or the driver refused its graph (the message says
/// which).
pub const SRB_ERR_SIZED_LAUNCH_UNAVAILABLE: i32 = -28;
/// A sized launch's body callback returned non-zero for a size class, or what it enqueued could
/// not be captured into a CUDA graph (the message names the class and the reason). Nothing was
/// built.
pub const SRB_ERR_BODY_RECORDING: i32 = -29;
/// A Rust panic was caught at the boundary (a bug; please report it).
pub const SRB_ERR_PANIC: i32 = -100;

/// The code of each kind of error. Exhaustive (the core's `__internal-api` feature drops
/// `#[non_exhaustive]`): a new kind must get its own code here.
pub(crate) fn code_of(e: &Error) -> i32 {
    match e {
        Error::DriverNotFound => SRB_ERR_DRIVER_NOT_FOUND,
        Error::NoDevice { .. } => SRB_ERR_NO_DEVICE,
        Error::UnsupportedDevice { .. } => SRB_ERR_UNSUPPORTED_DEVICE,
        Error::Cuda { .. } => SRB_ERR_CUDA,
        Error::InvalidConfig { .. } => SRB_ERR_INVALID_CONFIG,
        Error::SizedCopyUnavailable { .. } => SRB_ERR_SIZED_COPY_UNAVAILABLE,
        Error::SizedLaunchUnavailable { .. } => SRB_ERR_SIZED_LAUNCH_UNAVAILABLE,
        Error::BodyRecording { .. } => SRB_ERR_BODY_RECORDING,
        Error::SchemaMismatch { .. } => SRB_ERR_SCHEMA_MISMATCH,
        Error::StreamCapturing => SRB_ERR_STREAM_CAPTURING,
        Error::NothingRecorded => SRB_ERR_NOTHING_RECORDED,
        Error::RecordingMismatch { .. } => SRB_ERR_RECORDING_MISMATCH,
        Error::CountExceedsCapacity { .. } => SRB_ERR_COUNT_EXCEEDS_CAPACITY,
        Error::NegativeCount { .. } => SRB_ERR_NEGATIVE_COUNT,
        Error::UnknownCountKind { .. } => SRB_ERR_UNKNOWN_COUNT_KIND,
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

/// The count an error carries for `*count_out`: a count past the capacity or a source, an
/// append's true count, or a negative count's bits (read them as `int64_t`).
pub(crate) fn count_of_error(e: &Error) -> Option<u64> {
    match e {
        Error::NegativeCount { count } => Some(*count as u64),
        e => e.count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            Error::InvalidConfig { reason: "x".into() },
            Error::SizedCopyUnavailable { reason: "x".into() },
            Error::SizedLaunchUnavailable { reason: "x".into() },
            Error::BodyRecording {
                class: 2,
                n_max: 4096,
                reason: "x".into(),
            },
            Error::SchemaMismatch { reason: "x".into() },
            Error::StreamCapturing,
            Error::NothingRecorded,
            Error::RecordingMismatch { reason: "x".into() },
            Error::CountExceedsCapacity {
                count: 9,
                capacity: 8,
            },
            Error::NegativeCount { count: -1 },
            Error::UnknownCountKind { kind: 9 },
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
