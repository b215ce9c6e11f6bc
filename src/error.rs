//! The error type of every fallible call in this crate.
use cudarc::driver::DriverError;
use std::time::Duration;

/// Everything that can go wrong in a readback, as a value with its context.
///
/// Each variant is one kind of failure; the C API gives each its own `SRB_ERR_*` code.
#[derive(Debug, thiserror::Error)]
// The C API crate matches it exhaustively (feature `__internal-api`), so that a new kind gets
// its own C code rather than falling into a generic one.
#[cfg_attr(not(feature = "__internal-api"), non_exhaustive)]
pub enum Error {
    /// The CUDA driver library (`libcuda.so`, `nvcuda.dll`) could not be loaded.
    #[error("the CUDA driver library (libcuda) was not found: install an NVIDIA driver")]
    DriverNotFound,
    /// The driver loaded, but there is no device with this ordinal.
    #[error("no CUDA device with ordinal {ordinal}: {available} device(s) present")]
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices the driver reports.
        available: usize,
    },
    /// The device is older than the embedded kernels support (compute capability 7.0, Volta).
    #[error(
        "the device's compute capability {major}.{minor} is not supported: the kernels run on \
         7.0 (Volta) and newer"
    )]
    UnsupportedDevice {
        /// The device's compute capability, major part.
        major: u32,
        /// The minor part.
        minor: u32,
    },
    /// A CUDA driver call failed.
    ///
    /// Where the driver's error is a sticky one (an illegal address, an illegal instruction, an
    /// unspecified launch failure, ...: a kernel faulted), the context is lost, as CUDA says:
    /// every later call on it returns this error too, none hangs. Drop the context's tickets and
    /// readbacks (their drops return), then restart the process (RELIABILITY.md, "Faults").
    #[error("{call} failed: {}", driver_message(source))]
    Cuda {
        /// The driver call, e.g. `cuLaunchKernelEx`.
        call: &'static str,
        /// The driver's error code.
        #[source]
        source: DriverError,
    },
    /// The settings of a readback or a sized launch are unusable: zero capacity or slots,
    /// sizes that overflow, too many or no columns, an element aligned to more than 16 bytes,
    /// size classes out of order, an option the device or the embedded kernels cannot honour.
    #[error("invalid configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
    /// The buffers bound to an enqueue, or a column read from a readout, do not match the
    /// readback's columns (missing, doubled, of another schema, of another element type, out of
    /// range). Checked before any driver call.
    #[error("the columns do not match the readback: {reason}")]
    SchemaMismatch {
        /// What does not match.
        reason: String,
    },
    /// [`crate::StagedCopy::Sized`] was asked for where it cannot be had: a driver older than
    /// CUDA 12.8 (no graph conditionals set from a kernel), or one that failed to build its
    /// kernel image or graphs, or a readback whose slots the pack of one bucket does not fill
    /// (appends, bucket packs), or the mapped transport.
    #[error(
        "the staged transport's sized copy is unavailable: {reason}; ask for the automatic or the \
         whole-slot copy instead"
    )]
    SizedCopyUnavailable {
        /// Why: the driver's version or error, or the kind of readback.
        reason: String,
    },
    /// A [`crate::SizedLaunch`] cannot be built here: its class setter sets a SWITCH
    /// conditional node from a kernel, which needs a CUDA 12.8 driver, or the driver refused
    /// the graph (the reason says which, with the driver's error).
    #[error("sized launches are unavailable: {reason}")]
    SizedLaunchUnavailable {
        /// The driver's version or error.
        reason: String,
    },
    /// The body recorded for one size class of a [`crate::SizedLaunch`] failed: the closure (C:
    /// the callback) returned an error, or what it enqueued could not be captured into a CUDA
    /// graph (a synchronizing call, an allocation, work on another stream not joined back).
    /// Nothing was built.
    #[error("the body of size class {class} (n_max {n_max}) failed to record: {reason}")]
    BodyRecording {
        /// The size class, from 0 (the smallest).
        class: usize,
        /// The largest count that class's body was recorded for.
        n_max: u64,
        /// The closure's error or the driver's.
        reason: String,
    },
    /// A ticket-based enqueue was given a stream that is capturing a CUDA graph. Its pack would
    /// replay with a frozen slot and sequence number long after the ticket is gone: record a
    /// [`crate::GraphReadback`] instead.
    #[error(
        "the stream is capturing a CUDA graph: a ticket-based readback cannot be replayed \
         (record a graph readback instead)"
    )]
    StreamCapturing,
    /// A graph readback was asked for a replay before anything was recorded into it.
    #[error("nothing was recorded on this graph readback: record it before taking replays")]
    NothingRecorded,
    /// A graph recording differs from the readback's earlier ones in count type or source
    /// lengths (the host decodes every replay with the same ones): use a graph readback per
    /// shape.
    #[error("every recording of one graph readback is alike: {reason}")]
    RecordingMismatch {
        /// What differs.
        reason: String,
    },
    /// The device-resident count was larger than the readback's capacity. Nothing was
    /// copied and the device data is untouched: grow the readback and read again.
    #[error("count {count} exceeds the readback capacity of {capacity} rows")]
    CountExceedsCapacity {
        /// The count the kernel read.
        count: u64,
        /// Rows one slot holds.
        capacity: usize,
    },
    /// The device-resident count was negative (signed count types).
    #[error("the device-resident count is negative ({count})")]
    NegativeCount {
        /// The count the kernel read.
        count: i64,
    },
    /// The pack kernel does not know the count kind it was given, so it read no count and
    /// copied nothing: the kernel images are older than the library's count types (a build
    /// that skipped `cargo xtask regen`), or a raw kind value that no count type has.
    #[error("the pack kernel does not know count kind {kind}: its images and the library's count types disagree")]
    UnknownCountKind {
        /// The `srb_count_kind` value the kernel was given.
        kind: u32,
    },
    /// The count was larger than a source buffer: the kernel read nothing past the source. A
    /// count above the capacity too is [`Error::CountExceedsCapacity`], and a negative one
    /// [`Error::NegativeCount`]: those come first.
    #[error("count {count} exceeds the {source_len} elements of column {column}'s source")]
    CountExceedsSource {
        /// The count the kernel read.
        count: u64,
        /// The first column whose source is too short.
        column: usize,
        /// Elements in that source.
        source_len: usize,
    },
    /// An append kernel appended more rows than one slot holds. The first `capacity` rows are
    /// in the slot (readable through the ticket), the next `spilled` in the device-side spill
    /// region (fetch them with the ticket), and `dropped` rows beyond the spill were lost:
    /// create it again with a capacity (or a spill) that holds `count` rows, or grow it where
    /// the type has `grow`, and run the kernel again.
    #[error(
        "the kernel appended {count} rows: {capacity} are in the slot, {spilled} in the spill \
         region and {dropped} were dropped"
    )]
    AppendOverflow {
        /// Rows the kernel appended (its true count).
        count: u64,
        /// Rows in the slot.
        capacity: usize,
        /// Rows in the spill region.
        spilled: u64,
        /// Rows lost (beyond capacity plus spill capacity).
        dropped: u64,
    },
    /// The append kernel's stream finished but the readback's trailer was never written: a
    /// block returned without calling `finish()`, or the kernel used another descriptor.
    #[error(
        "append {seq} never finished: its stream is done but no block wrote the trailer (every \
         block must call finish() once, with this readback's descriptor)"
    )]
    AppendUnfinished {
        /// The readback's sequence number.
        seq: u64,
    },
    /// A block of the append kernel did not match the readback (block size other than its
    /// `BlockAppend`'s, or columns of other number or sizes) and appended nothing.
    #[error(
        "the append kernel does not match the readback: a block's BlockAppend has another block \
         size or other columns than the readback's {columns} column(s) of {sizes} bytes"
    )]
    AppendMisuse {
        /// Columns of the readback.
        columns: usize,
        /// The readback's element sizes, as "8, 4".
        sizes: String,
    },
    /// A bucketed append kernel named a bucket out of range for `rows` rows (they were dropped;
    /// the other buckets' rows are in the slot).
    #[error("{rows} row(s) named bucket {bucket} (or another out of range) of a readback of {buckets} buckets")]
    BadBucket {
        /// One bucket index out of range.
        bucket: u64,
        /// Buckets of the readback.
        buckets: usize,
        /// Rows dropped for naming a bucket out of range.
        rows: u64,
    },
    /// A bucket pack found a bucket's count above the capacity of a bucket. Nothing was copied
    /// and the device data is untouched: create the readback again with larger buckets and
    /// read again (a [`crate::BucketReadback`] does not grow).
    #[error("bucket {bucket} holds {count} rows, more than a bucket's capacity of {capacity}")]
    BucketOverCapacity {
        /// The first such bucket.
        bucket: usize,
        /// Its count.
        count: u64,
        /// Rows a bucket holds.
        capacity: usize,
    },
    /// A bucket pack found a bucket's range `[offset, offset + count)` past `limit`: the end of
    /// its source, or the next bucket's offset (the ranges overlap, or the offsets do not rise).
    /// Nothing was copied.
    #[error("bucket {bucket}'s rows {offset}..{offset}+{count} run past {limit} (the source's end or the next bucket's offset)")]
    BucketOutOfRange {
        /// The first such bucket.
        bucket: usize,
        /// Its offset.
        offset: u64,
        /// Its count.
        count: u64,
        /// What its range may not pass.
        limit: u64,
    },
    /// A buffer, stream or event belongs to another CUDA context or device than the readback.
    #[error("{what} belongs to another CUDA context or device than this readback")]
    ForeignContext {
        /// Which argument.
        what: &'static str,
    },
    /// A device buffer holds fewer values than the enqueue reads from it: an empty count
    /// buffer, or fewer counts or offsets than a bucketed readback has buckets.
    #[error("{what} holds {len} value(s), fewer than the {need} the readback reads")]
    BufferTooShort {
        /// Which argument.
        what: &'static str,
        /// Values the buffer holds.
        len: usize,
        /// Values the readback reads from it.
        need: usize,
    },
    /// A pointer argument is null, not aligned as its type requires, or not device memory the
    /// driver knows.
    #[error("{what} is null, misaligned (needs {align}-byte alignment) or unknown to the driver (address {addr:#x})")]
    BadPointer {
        /// Which argument.
        what: &'static str,
        /// The address given.
        addr: u64,
        /// The alignment required.
        align: usize,
    },
    /// Every slot is held by a ticket or view; release one (drop its ticket) first.
    #[error(
        "all {slots} slots are in use: drop a ticket (or create the readback with more slots)"
    )]
    SlotsExhausted {
        /// Slots the readback has.
        slots: usize,
    },
    /// A wait with a timeout ran out before the readback or sized launch completed (the
    /// ticket stays valid; wait again).
    #[error("not complete within {} us: the work waited for is still running", waited.as_micros())]
    Timeout {
        /// How long the wait lasted.
        waited: Duration,
    },
    /// A result no longer there to read: a device-sequenced readback (graph replay) found its
    /// slot still held by the host and dropped this result rather than overwrite the slot; or
    /// a sized launch's ticket waited on after 256 later launches of it, which reuse its
    /// status entry.
    #[error(
        "result {seq} is gone: its slot or status entry was taken by a later one (ring overrun)"
    )]
    Overrun {
        /// The sequence number that was dropped.
        seq: u64,
    },
    /// The slot's trailer does not belong to the readback waited for: a bug or memory corruption.
    #[error("slot {slot}: trailer holds sequence {found} (magic {magic:#x}), expected {expected}")]
    CorruptTrailer {
        /// The slot.
        slot: usize,
        /// The sequence number expected.
        expected: u64,
        /// The sequence number found.
        found: u64,
        /// The magic word found.
        magic: u32,
    },
}

/// A driver error as the driver names and describes it, e.g. `CUDA_ERROR_ILLEGAL_ADDRESS (an
/// illegal memory access was encountered)`; cudarc's own `Display` is its `Debug` form.
fn driver_message(e: &DriverError) -> String {
    // SAFETY: only asks whether libcuda can be loaded; cudarc's lookups of cuGetErrorName and
    // cuGetErrorString would panic without it (an error built before any driver call).
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return format!("CUDA error {}", e.0 as u32);
    }
    let name = e.error_name().map(|c| c.to_string_lossy().into_owned());
    let text = e.error_string().map(|c| c.to_string_lossy().into_owned());
    match (name, text) {
        (Ok(n), Ok(t)) => format!("{n} ({t})"),
        (Ok(n), Err(_)) => n,
        _ => format!("CUDA error {}", e.0 as u32),
    }
}

/// Shorthand for `Result<T, sized_readback::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn cuda(call: &'static str) -> impl FnOnce(DriverError) -> Error {
        move |source| Error::Cuda { call, source }
    }

    pub(crate) fn config(reason: impl Into<String>) -> Error {
        Error::InvalidConfig {
            reason: reason.into(),
        }
    }

    pub(crate) fn schema(reason: impl Into<String>) -> Error {
        Error::SchemaMismatch {
            reason: reason.into(),
        }
    }

    /// The count the error reports, if it carries a non-negative one (a count past the
    /// capacity or a source, an append overflow): past the capacity, what a caller grows the
    /// readback to; past a source, how many rows the count asked for.
    pub fn count(&self) -> Option<u64> {
        match self {
            Error::CountExceedsCapacity { count, .. }
            | Error::CountExceedsSource { count, .. }
            | Error::AppendOverflow { count, .. }
            | Error::BucketOverCapacity { count, .. } => Some(*count),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::CUresult;

    #[test]
    fn messages_name_settings_in_words_every_binding_shares() {
        let sized = Error::SizedCopyUnavailable {
            reason: "a reason".into(),
        };
        for e in [sized, Error::StreamCapturing] {
            let text = e.to_string();
            for item in ["::", "Readback", "StagedCopy"] {
                assert!(!text.contains(item), "{text}");
            }
        }
    }

    #[test]
    fn driver_errors_read_as_the_driver_names_them() {
        let e = Error::Cuda {
            call: "cuEventQuery",
            source: DriverError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        };
        let text = e.to_string();
        assert!(text.starts_with("cuEventQuery failed: "), "{text}");
        assert!(!text.contains("DriverError"), "{text}");
        assert!(
            text.contains("CUDA_ERROR_ILLEGAL_ADDRESS (") || text.ends_with("CUDA error 700"),
            "{text}"
        );
    }
}
