"""The exceptions of sized_readback.

Every one derives from :class:`ReadbackError` and from the builtin that fits it, so generic
handlers work: a count past the capacity is an ``OverflowError``, bad arguments, negative
counts and foreign devices are ``ValueError``, a wait that runs out is a ``TimeoutError``,
a missing driver or device is a ``RuntimeError``. The facts of each error are attributes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ReadbackError",
    "DriverNotFoundError",
    "NoDeviceError",
    "UnsupportedDeviceError",
    "CudaError",
    "ConfigError",
    "SchemaError",
    "StreamCapturingError",
    "NothingRecordedError",
    "RecordingMismatchError",
    "CountExceedsCapacityError",
    "AppendOverflowError",
    "NegativeCountError",
    "CountExceedsSourceError",
    "AppendUnfinishedError",
    "AppendMisuseError",
    "ForeignDeviceError",
    "BadPointerError",
    "BufferTooShortError",
    "SlotsExhaustedError",
    "ReadbackTimeoutError",
    "OverrunError",
    "CorruptTrailerError",
    "UnknownCountKindError",
    "SizedCopyUnavailableError",
    "SizedLaunchUnavailableError",
    "BodyRecordingError",
]


class ReadbackError(Exception):
    """Base class of every error raised by sized_readback; the keyword arguments become
    attributes (the facts of the error)."""

    def __init__(self, message: str = "", **facts: Any) -> None:
        super().__init__(message)
        for name, value in facts.items():
            setattr(self, name, value)


class DriverNotFoundError(ReadbackError, RuntimeError):
    """The CUDA driver library (libcuda) could not be loaded: no NVIDIA driver is installed."""


class NoDeviceError(ReadbackError, RuntimeError):
    """The driver loaded but there is no CUDA device with that ordinal."""

    ordinal: int
    """The device ordinal asked for."""
    available: int
    """Devices the driver reports."""


class UnsupportedDeviceError(ReadbackError, RuntimeError):
    """The device's compute capability is below 7.0 (Volta), the oldest the kernels support."""

    major: int
    """The device's compute capability, major part."""
    minor: int
    """Its minor part."""


class CudaError(ReadbackError, RuntimeError):
    """A CUDA driver call failed, including device errors such as a faulted kernel."""

    call: str
    """The driver call, e.g. ``cuLaunchKernelEx``."""
    code: int
    """The driver's CUresult value."""
    name: str
    """The CUresult's name, e.g. ``CUDA_ERROR_ILLEGAL_ADDRESS``."""


class ConfigError(ReadbackError, ValueError):
    """Unusable settings: zero capacity or slots, sizes that overflow, a bad transport."""


class SchemaError(ReadbackError, ValueError):
    """The arrays given do not match the readback's columns."""


class StreamCapturingError(ReadbackError, RuntimeError):
    """A ticket-based enqueue on a stream that is capturing a CUDA graph: use a
    :class:`~sized_readback.GraphReadback` inside captures."""


class NothingRecordedError(ReadbackError, RuntimeError):
    """``GraphReadback.next()`` before anything was recorded, or
    ``torch_ops.CompiledReadback.next()`` with no step enqueued since the last ``next()``."""


class RecordingMismatchError(ReadbackError, ValueError):
    """A graph recording whose count dtype or source lengths differ from the first one's (use
    one GraphReadback per shape)."""


class CountExceedsCapacityError(ReadbackError, OverflowError):
    """The device-resident count was larger than the capacity. Nothing was copied and the
    device data is untouched: ``rb.grow(e.count)`` and enqueue again."""

    count: int
    """The count the device held."""
    capacity: int
    """Rows one slot holds."""


class AppendOverflowError(CountExceedsCapacityError):
    """An append kernel appended more rows than one slot holds. ``ticket.partial()`` gives the
    first ``capacity`` rows; grow the readback to ``count`` and run the kernel again."""

    spilled: int
    """Rows that went to the device-side spill region."""
    dropped: int
    """Rows lost beyond the spill region."""


class NegativeCountError(ReadbackError, ValueError):
    """The device-resident count was negative (signed count dtypes)."""

    count: int
    """The count the device held."""


class CountExceedsSourceError(ReadbackError, ValueError):
    """The count was larger than a column's source array: nothing was read past it."""

    count: int
    column: int
    """The first column whose source is too short."""
    source_len: int
    """Rows of that source."""


class AppendUnfinishedError(ReadbackError, RuntimeError):
    """An append kernel's stream finished but no block wrote the trailer (every block must
    call ``finish()`` once)."""

    seq: int


class AppendMisuseError(ReadbackError, ValueError):
    """An append kernel's ``BlockAppend`` did not match the readback (block size or columns)."""


class ForeignDeviceError(ReadbackError, ValueError):
    """An array, stream or event belongs to another CUDA device or context than the
    readback."""

    what: str


class BadPointerError(ReadbackError, ValueError):
    """A pointer is null, misaligned (a count must be aligned to its size) or unknown to the
    driver."""

    what: str
    address: int
    alignment: int


class BufferTooShortError(ReadbackError, ValueError):
    """A device buffer holds fewer values than the readback reads from it (an empty count
    array, fewer counts or offsets than buckets)."""

    what: str
    len: int
    """Values the buffer holds."""
    need: int
    """Values the readback reads from it."""


class SlotsExhaustedError(ReadbackError, RuntimeError):
    """Every slot is held by a live ticket, readout or view: release one (or make the readback
    with more slots). Slots held only by tickets dropped in flight do not raise this: the
    enqueue waits for the oldest of those instead. Under ``transport="auto"`` it is raised
    only when both slot sets are full (``slots`` is then the set tried first's)."""

    slots: int


class ReadbackTimeoutError(ReadbackError, TimeoutError):
    """A wait with a timeout ran out; the ticket stays valid (wait again)."""

    waited: float
    """Seconds waited."""


class OverrunError(ReadbackError, RuntimeError):
    """A graph replay's readback was dropped because the host held its slot (it fell more than
    ``slots`` replays behind); the replay is consumed."""

    seq: int


class CorruptTrailerError(ReadbackError, RuntimeError):
    """A slot's trailer did not match its readback: a bug or memory corruption."""


class UnknownCountKindError(ReadbackError, RuntimeError):
    """The pack kernel did not know the count's kind (its images are older than the library's
    count types): it read no count and copied nothing. A bug of the build."""

    kind: int
    """The kind value the kernel was given."""


class SizedCopyUnavailableError(ReadbackError, RuntimeError):
    """``staged_copy="sized"`` where the sized copy cannot be had: a driver older than CUDA
    12.8 or one that failed to build its graphs, an append or bucketed readback, or the mapped
    transport (the message says which, with the driver's error if one failed).
    ``staged_copy="auto"`` takes the whole-slot copy there."""


class SizedLaunchUnavailableError(ReadbackError, RuntimeError):
    """A ``SizedLaunch`` cannot be built here: its class setter sets a SWITCH conditional node
    from a kernel, which needs a CUDA 12.8 driver, or the driver refused its graph (the
    message says which)."""


class BodyRecordingError(ReadbackError, RuntimeError):
    """The body of one size class of a ``SizedLaunch`` failed to record: the body callable
    raised (the exception is the ``__cause__``), or its work could not be captured into a CUDA
    graph (a synchronizing call, an allocation, work on another stream). Nothing was built."""

    index: int
    """The size class, from 0 (the smallest)."""
    n_max: int
    """The largest count that class's body was recorded for."""
