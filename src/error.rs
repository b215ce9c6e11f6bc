//! The error type of every fallible call in this crate.
use cudarc::driver::DriverError;
use std::time::Duration;

/// Everything that can go wrong in a readback, as a value with its context.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
    /// A CUDA driver call failed.
    #[error("{call} failed: {source}")]
    Cuda {
        /// The driver call, e.g. `cuLaunchKernelEx`.
        call: &'static str,
        /// The driver's error code.
        #[source]
        source: DriverError,
    },
    /// The readback's configuration is unusable (zero capacity or slots, sizes that overflow).
    #[error("invalid readback configuration: {reason}")]
    InvalidConfig {
        /// What is wrong.
        reason: String,
    },
    /// The device-resident count was larger than the readback's capacity. Nothing was
    /// copied and the device data is untouched: grow the readback and read again.
    #[error("count {count} exceeds the readback capacity of {capacity} elements")]
    CountExceedsCapacity {
        /// The count the kernel read.
        count: u64,
        /// Elements one slot holds.
        capacity: usize,
    },
    /// The device-resident count was negative (signed count types).
    #[error("the device-resident count is negative ({count})")]
    NegativeCount {
        /// The count the kernel read.
        count: i64,
    },
    /// The count was larger than the source buffer: the kernel read nothing past the source.
    #[error("count {count} exceeds the source buffer's {source_len} elements (column {column})")]
    CountExceedsSource {
        /// The count the kernel read.
        count: u64,
        /// The column whose source is too short.
        column: usize,
        /// Elements in that source.
        source_len: usize,
    },
    /// A buffer, stream or event belongs to another CUDA context or device than the readback.
    #[error("{what} belongs to another CUDA context or device than this readback")]
    ForeignContext {
        /// Which argument.
        what: &'static str,
    },
    /// A pointer argument is null or not aligned as its type requires.
    #[error("{what} is null or not aligned to {align} bytes (address {addr:#x})")]
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
    /// A wait with a timeout ran out before the readback completed.
    #[error("the readback did not complete within {waited:?}")]
    Timeout {
        /// How long the wait lasted.
        waited: Duration,
    },
    /// A device-sequenced readback (graph replay) found its slot still held by the host and
    /// dropped this result rather than overwrite the slot.
    #[error("readback {seq} was dropped: its slot was still held by the host (ring overrun)")]
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
}
