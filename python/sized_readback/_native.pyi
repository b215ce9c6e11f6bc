"""Type stubs of sized_readback._native, the compiled part of sized_readback."""

from types import TracebackType
from typing import Any, Callable, Mapping, Optional, Sequence, Tuple, Type, Union

import numpy as np

#: A stream: a ``torch.cuda.Stream``, a CuPy stream, any object with ``__cuda_stream__``
#: (returning ``(version, handle)``), a Numba stream, or a raw ``CUstream`` handle (0: the
#: legacy default stream, 1 ``cudaStreamLegacy``, 2 ``cudaStreamPerThread``).
StreamLike = Any
#: A CUDA device array: any object with ``__dlpack__`` or ``__cuda_array_interface__``.
DeviceArray = Any
DTypeLike = Any
Columns = Union[Sequence[DTypeLike], Mapping[str, DTypeLike]]
ColumnKey = Union[int, str, None]

KERNEL_TARGETS: str
"""GPU targets the embedded pack kernel holds machine code (and PTX) for."""
APPEND_HEADER: str
APPEND_DESC_SIZE: int
MAX_COLUMNS: int
AUTO_STAGED_MIN_BYTES: int
AUTO_STAGED_MIN_FILL: float
__version__: str

def device_count() -> int:
    """Number of CUDA devices; raises ``DriverNotFoundError`` without a CUDA driver."""

def is_available() -> bool:
    """Whether a CUDA driver and at least one device are present (never raises)."""

class Readback:
    """Reads back a device-resident count and that many rows, without a host synchronization.

    ``dtype=`` declares one column (``enqueue`` takes one array, ``numpy()`` returns one);
    ``columns=`` several sharing one count (a list of dtypes, or a dict of names to dtypes;
    ``enqueue`` takes a tuple or dict, ``numpy()`` returns a tuple). A dtype is a numpy
    dtype-like or a torch dtype; a subarray dtype such as ``("f8", 3)`` makes rows of 3 values
    (the arrays then have shape ``(N, 3)``). Neither given: one float64 column.

    ``transport``: ``"mapped"`` (the pack writes exactly ``count`` rows into pinned host
    memory), ``"staged"`` (a device slot, then one copy: of the rows the count needs where the
    driver has CUDA 12.8 graph conditionals, else of the whole slot; ``staged_copy=``) or
    ``"auto"``: a set
    of slots of each, an enqueue going staged when the last count read back filled at least
    ``AUTO_STAGED_MIN_BYTES`` and ``AUTO_STAGED_MIN_FILL`` of the capacity
    (``auto_staged_from`` rows), mapped otherwise; when the chosen set has no free slot and
    the other has one, the enqueue takes the other. ``slots`` is per set under ``"auto"``.

    Raises ``ConfigError``/``TypeError`` for bad settings (checked before the device is
    opened), ``DriverNotFoundError`` without a CUDA driver, ``NoDeviceError`` without the device.
    """

    def __init__(
        self,
        capacity: int,
        dtype: DTypeLike = None,
        columns: Optional[Columns] = None,
        slots: int = 2,
        device: int = 0,
        transport: str = "mapped",
        staged_copy: str = "auto",
    ) -> None: ...
    def _enqueue_raw(
        self, ptrs: Sequence[int], rows: Sequence[int], count_ptr: int,
        count_kind: str = "int32", stream: int = 0,
    ) -> Ticket:
        """The enqueue on pre-read device addresses (one per column), for measuring the
        binding's own cost and for callers that hold raw handles. Nothing is kept alive and
        no producer stream is waited for: the caller keeps the memory allocated and unwritten
        until the readback completes, and enqueues on the producer's stream (an int
        ``cudaStream_t``). The core checks only that the count's address and each column's first
        address are device memory of this context, and the stream's context; nothing checks
        that ``rows[i]`` rows fit in the allocation at ``ptrs[i]``."""
    def _profile(
        self, data: DeviceArray, count: DeviceArray, reps: int = 1000,
        before: Optional[Callable[[], Any]] = None,
    ) -> dict[str, int]:
        """Measurement only (python/bench/profile_binding.py): median ns per enqueue phase."""
    def enqueue(
        self, data: Union[DeviceArray, Sequence[DeviceArray], Mapping[str, DeviceArray]],
        count: DeviceArray, stream: StreamLike = None, keep: bool = True,
    ) -> Ticket:
        """Enqueues the readback of ``count`` rows of ``data`` and returns at once.

        ``data``: a C-contiguous device array of the column's dtype with rows along axis 0
        (its length is the source length; a count above it is ``CountExceedsSourceError``), or
        one per column. ``count``: a one-element int32/int64/uint32/uint64 device array.
        ``stream``: where the pack runs, after the work already there; ``None``: the current
        stream of the framework that owns ``data`` (PyTorch's or CuPy's current stream, the
        stream a CUDA Array Interface names, else the legacy default stream). Work the arrays'
        producers report on other streams is waited for on the device. The arrays are kept
        alive until the readback is known complete; ``keep=False`` keeps no reference to them
        (or to the stream): then the caller keeps their memory allocated and unwritten until
        the pack has read it, as PyTorch's caching allocator does for tensors made on the
        enqueue stream (``CompiledReadback`` enqueues so).

        Returns without waiting for the device, with one exception: when every slot is held
        and some are held by tickets dropped before their readback completed, it blocks (GIL
        released, Ctrl-C raising ``KeyboardInterrupt``) until the oldest of those completes,
        then takes its slot. Keep tickets (or wait on them) to never block here.

        Raises ``ValueError`` for arrays of other dtypes or shapes, non-contiguous ones, host
        memory, or another device (``ForeignDeviceError``); ``SlotsExhaustedError`` when every
        slot is held by live tickets, readouts or views; ``StreamCapturingError`` on a
        capturing stream (use ``GraphReadback``).
        Errors about the count itself come from ``Ticket.wait()``.
        """
    def grow(self, capacity: int) -> None:
        """Replaces the slots with ones of ``capacity`` rows (after a
        ``CountExceedsCapacityError``: the device data is untouched, enqueue again)."""
    @property
    def capacity(self) -> int: ...
    @property
    def slots(self) -> int:
        """Slots of one set (``transport="auto"`` has a set of each transport)."""
    @property
    def slots_in_use(self) -> int:
        """Slots held now: by tickets, readouts and their views, and by tickets dropped while
        their readback was in flight until the next enqueue sees it complete. Under
        ``transport="auto"``, of both sets together (up to ``2 * slots``)."""
    @property
    def device(self) -> int: ...
    @property
    def transport(self) -> str: ...
    @property
    def auto_staged_from(self) -> Optional[int]:
        """``transport="auto"``: the count from which enqueues go staged; else None. Above
        ``capacity``, no staged slots are allocated (``info["auto_staged_slots"]`` is 0)
        until a ``grow`` brings it within reach."""
    @property
    def staged_copy(self) -> Optional[str]:
        """The staged transport's copy in use: ``"sized"`` (what the count needs, picked on
        the device; CUDA 12.8+ drivers), ``"whole"`` (the whole slot), ``None`` (mapped, or
        ``transport="auto"`` with no staged slots allocated). ``staged_copy="auto"`` (the default) takes ``"sized"`` where available; ``"sized"``
        where it is not raises ``SizedCopyUnavailableError``."""
    @property
    def info(self) -> dict[str, Any]:
        """The settings in effect and the slot layout: ``capacity``, ``slots``, ``buckets``,
        ``spill_capacity``, ``transport``, ``staged_copy``, ``wait_mode``, ``device``, ``slot_bytes``,
        ``column_offsets``, ``trailer_offset``, ``programmatic_launch``."""
    @property
    def dtypes(self) -> Tuple[np.dtype, ...]: ...
    @property
    def names(self) -> list[Optional[str]]: ...

class Ticket:
    """One enqueued readback. It holds its slot until the readout (and its views) are done.

    When a dropped ticket frees its slot:

    - waited on (``wait()`` returned): the slot is the ``Readout``'s, which the ticket keeps
      (``wait()`` returns the same one): freed once the ticket, the readout and every view
      and DLPack export of it are gone, or at ``readout.release()`` if no view is alive;
    - never waited on, its readback complete when it is dropped: freed at the drop;
    - dropped while its readback is in flight, from ``enqueue`` with ``keep=True`` (the
      default): the slot and the arrays stay held until the readback of that same readback
      object is seen complete by its next ``enqueue`` (or ``_enqueue_raw``), by an enqueue
      that finds every slot held (it waits for the oldest such ticket), or when the readback
      is freed (which waits); ``slots_in_use`` counts it until then;
    - dropped in flight otherwise (``keep=False``, ``_enqueue_raw``, append tickets): freed at
      the drop (the core orders the slot's reuse after the readback);
    - a failed wait freed the slot already, except after ``AppendOverflowError`` (kept for
      ``partial()``, freed at the drop).
    """

    def wait(self, timeout: Optional[float] = None) -> Readout:
        """Blocks (releasing the GIL) until the readback is complete; returns its ``Readout``
        (the same one on every call). ``timeout`` in seconds: ``ReadbackTimeoutError`` after it,
        the ticket stays valid. Raises the count's errors: ``CountExceedsCapacityError``
        (``.count``, ``.capacity``), ``NegativeCountError``, ``CountExceedsSourceError``; and
        ``CudaError`` when the device faulted. Never hangs on a dead context."""
    def done(self) -> bool:
        """Whether the readback is complete (``wait()`` then returns or raises at once)."""
    def partial(self) -> Readout:
        """Append tickets after ``AppendOverflowError``: the first ``capacity`` rows."""
    @property
    def transport(self) -> str:
        """``"mapped"`` or ``"staged"``: the slots this readback took (``transport="auto"``
        chooses per enqueue)."""
    @property
    def seq(self) -> int:
        """1, 2, 3, ... per readback object, in enqueue order (one numbering for both sets of
        ``transport="auto"``); the readout has the same."""
    @property
    def slot(self) -> Optional[int]:
        """The slot held, within the set named by ``transport`` (None once released)."""

class Readout:
    """The count and rows of a completed readback, in pinned host memory.

    The slot is held by the readout and by every ``numpy()`` view and DLPack export of it; it
    is reused only after all are gone. ``release()`` (or leaving ``with``) drops the readout's
    hold and raises ``BufferError`` while views are alive; afterwards ``numpy()`` raises
    ``ValueError``.
    """

    @property
    def count(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def released(self) -> bool: ...
    @property
    def exports(self) -> int:
        """Live numpy views and DLPack exports (each holds the slot)."""
    def __len__(self) -> int: ...
    def numpy(self, column: ColumnKey = None) -> Any:
        """Zero-copy read-only view(s) of the slot: an array of shape ``(count, *row_shape)``,
        or a tuple of them for a readback of columns (``column=`` picks one by index or name)."""
    def copy(self, column: ColumnKey = None) -> Any:
        """Like ``numpy()``, as copies that hold no slot."""
    def release(self) -> None: ...
    def __enter__(self) -> Readout: ...
    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
    def __dlpack__(
        self, *, stream: Any = None, max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None, copy: Optional[bool] = None,
    ) -> Any:
        """DLPack capsule of a one-column readout on the host (kDLCPU); zero-copy (the export
        holds the slot) unless ``copy=True``. For ``numpy.from_dlpack`` and
        ``torch.from_dlpack``."""
    def __dlpack_device__(self) -> Tuple[int, int]: ...

class SlotView:
    """The owner (``base``) of one numpy view's memory; holds the slot."""

    @property
    def __array_interface__(self) -> dict[str, Any]: ...

class GraphReadback:
    """A readback recorded into a CUDA graph and consumed once per replay.

    Make it before the capture; ``record()`` it inside (e.g. ``with torch.cuda.graph(g):``);
    after each ``g.replay()`` take the readout with ``next()``. Readback ``seq`` lands in slot
    ``(seq - 1) % slots``; up to ``slots`` replays may run ahead of the host, beyond that the
    device drops the readback and ``next()`` raises ``OverrunError`` for it. Launch the graphs
    that hold it on one stream. A graph readback that recorded anything is freed only by
    ``close()`` (its graphs may outlive it): call that once no graph will replay it.
    """

    def __init__(
        self,
        capacity: int,
        dtype: DTypeLike = None,
        columns: Optional[Columns] = None,
        slots: int = 8,
        device: int = 0,
    ) -> None: ...
    def record(
        self, data: Union[DeviceArray, Sequence[DeviceArray], Mapping[str, DeviceArray]],
        count: DeviceArray, stream: StreamLike = None, keep: bool = True,
    ) -> None:
        """Records the pack (inside a capture; outside, it runs once and counts as a replay).
        Every recording must use the same count dtype and source lengths. ``keep=False``
        keeps no reference to the arrays: for memory the graph itself keeps allocated (a
        ``torch.compile`` CUDA graph's private pool)."""
    def next(self, timeout: Optional[float] = None) -> Readout:
        """The next replay's readout (blocks, releasing the GIL)."""
    def try_next(self) -> Optional[Readout]: ...
    def append_desc(self) -> np.ndarray:
        """The descriptor for append kernels recorded into graphs with this readback."""
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def capacity(self) -> int: ...
    @property
    def slots(self) -> int: ...
    @property
    def next_seq(self) -> int: ...
    @property
    def last_overrun(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def info(self) -> dict[str, Any]:
        """As ``Readback.info``."""

class AppendReadback:
    """Slots filled by your own kernel through ``sized_readback/append.cuh``: no count in device
    memory, no second kernel. Rows arrive in no particular order.

    ``ticket = rb.append(lambda desc: kernel(grid, block, (desc, ...)), stream=s)`` or::

        with rb.begin(stream) as p:
            kernel(grid, block, (p.desc, ...))
        out = p.ticket.wait()
    """

    def __init__(
        self,
        capacity: int,
        dtype: DTypeLike = None,
        columns: Optional[Columns] = None,
        slots: int = 2,
        device: int = 0,
        transport: str = "mapped",
        spill: Optional[int] = None,
        staged_copy: str = "auto",
    ) -> None: ...
    def begin(self, stream: StreamLike) -> PendingAppend: ...
    def append(self, launch: Callable[[np.ndarray], Any], stream: StreamLike) -> Ticket: ...
    def grow(self, capacity: int) -> None: ...
    @property
    def capacity(self) -> int: ...
    @property
    def spill_capacity(self) -> int: ...
    @property
    def slots(self) -> int: ...
    @property
    def slots_in_use(self) -> int: ...
    @property
    def device(self) -> int: ...
    @property
    def transport(self) -> str: ...
    @property
    def staged_copy(self) -> Optional[str]:
        """``"whole"`` (staged: an append kernel cannot pick the copy's size) or ``None``."""
    @property
    def info(self) -> dict[str, Any]:
        """As ``Readback.info``."""

class PendingAppend:
    """A reserved append slot: launch one grid with ``desc`` on its stream, then
    ``launched()``; as a context manager, leaving the block calls ``launched()`` (or, on an
    exception, ``cancel()``)."""

    @property
    def desc(self) -> np.ndarray:
        """One ``APPEND_DESC_DTYPE`` element: the kernel's ``srb_append_desc`` by value."""
    def launched(self) -> Ticket: ...
    def cancel(self) -> None: ...
    @property
    def ticket(self) -> Optional[Ticket]: ...
    def __enter__(self) -> PendingAppend: ...
    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
