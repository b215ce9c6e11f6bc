"""Readbacks inside ``torch.compile``: the custom op ``torch.ops.sized_readback.enqueue`` and
``CompiledReadback``, which serves it in eager mode, under ``torch.compile(fullgraph=True)``
and under ``mode="reduce-overhead"`` (CUDA graphs).

::

    import torch
    from sized_readback.torch_ops import CompiledReadback

    cr = CompiledReadback(1 << 16, dtype=torch.float32)

    @torch.compile(fullgraph=True, mode="reduce-overhead")
    def step(x):
        y = x * 2
        keep = y > 1
        n = keep.sum(dtype=torch.int32)
        data = y[torch.argsort((~keep).to(torch.int8), stable=True)]
        cr.enqueue(data, n)          # no graph break, no host synchronization
        return y

    for x in batches:
        step(x)
        with cr.next() as out:       # this step's count and rows, in pinned host memory
            use(out.count, out.numpy())

The op takes the columns, the count and the readback's key; it returns nothing and is
registered as side-effecting, so no compiler pass removes or reorders it across the work that
produces its inputs. Its fake (meta) implementation does nothing, so it traces anywhere,
CPU included. What the real implementation does depends on the stream it runs on:

- not capturing (eager, ``torch.compile`` without CUDA graphs, and the warm-up runs of
  ``reduce-overhead``): the readback is enqueued on torch's current stream, keeping no
  reference to the op's inputs, and the ticket waits in ``CompiledReadback`` for ``next()``.
  No reference is needed: the inputs are made on that stream, and PyTorch's caching allocator
  hands their memory to later work only in that stream's order, after the pack. And none may
  be held: the warm-up runs of ``reduce-overhead`` allocate from the CUDA graph's pool, whose
  recording refuses to start while a block of it is alive and not an output of the step;
- capturing (``reduce-overhead`` recording its graph): ``GraphReadback.record`` of the pack into
  the graph, once; every replay of the graph packs again, and ``next()`` takes that replay's
  readout. A readback has no data-dependent output shape, so the op stays inside the graph
  (no partition, no ``cudagraph_skips``).

Call ``next()`` once per step, in order (one readout per step in every mode).

Limit of ``reduce-overhead``: every graph that records into one ``CompiledReadback`` must pack
the same count dtype and the same source lengths (rows of each column). The graph readback
decodes every replay with those, and replays of graphs recorded into different graph
readbacks could not be put back in step order by ``next()`` (a replay does not call Python).
A step recorded again for new shapes (a new batch size, say) therefore raises
``RuntimeError`` naming this limit, at the recording. Keep the shapes the op sees fixed (pad
the data to a fixed number of rows: the count says how many are real), use one
``CompiledReadback`` per shape, or compile without ``mode="reduce-overhead"`` (every other
mode enqueues per call and has no such limit).
"""

import collections
import itertools
import threading
import weakref
from typing import Any, Optional, Sequence, Union

import torch

from . import _native
from ._steps import next_step

__all__ = ["CompiledReadback", "enqueue"]

# The readbacks the op can reach, by key (the op's arguments must be tensors and numbers).
_SINKS: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
_KEYS = itertools.count(1)
_LOCK = threading.Lock()


def _register(sink: Any) -> int:
    """Makes `sink` (with ``_on_enqueue(columns, count)``) reachable from the op; returns its
    key. Held weakly: the op raises for a key whose readback is gone."""
    with _LOCK:
        key = next(_KEYS)
        _SINKS[key] = sink
    return key


@torch.library.custom_op("sized_readback::enqueue", mutates_args=())
def enqueue(columns: list[torch.Tensor], count: torch.Tensor, key: int) -> None:
    """Enqueues the readback of ``count`` rows of ``columns`` on the readback ``key``
    (``CompiledReadback.key``)."""
    sink = _SINKS.get(key)
    if sink is None:
        raise RuntimeError(f"sized_readback::enqueue: no readback has key {key} (was it freed?)")
    sink._on_enqueue(columns, count)


@enqueue.register_fake
def _(columns: list[torch.Tensor], count: torch.Tensor, key: int) -> None:
    return None


# Side-effecting: with no output, dead-code elimination (FX's, AOT autograd's, Inductor's
# scheduler's) would otherwise drop it. A plain side effect, not torch's effect tokens: tokens
# thread extra graph inputs and outputs through the compiled step, which is not needed here
# (the op's data dependencies already order it after its producers, and it writes no tensor).
torch.fx.node.has_side_effect(torch.ops.sized_readback.enqueue.default)


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class CompiledReadback:
    """A readback for compiled (or eager) PyTorch steps: ``enqueue`` inside the step,
    ``next()`` after it. Holds a ``Readback`` for steps that run as kernels and a
    ``GraphReadback`` for steps captured into a CUDA graph (``mode="reduce-overhead"``).

    ``capacity``, ``dtype`` / ``columns``, ``device``: as ``Readback``. ``slots``: of each;
    steps may run that many ahead of ``next()``. ``transport``: of the eager readback.
    ``graphs=False`` leaves out the graph readback (and its slots) for steps never captured.
    The graph readback is made here, not at the capture: allocating during a capture would
    invalidate it. Freeing it synchronizes the context, which would invalidate a capture in
    progress: let a ``CompiledReadback`` go (or ``close()`` it) outside any capture, e.g. not
    in a garbage collection that may run while another graph is being recorded. One whose
    graph readback recorded a step is never freed unless closed (its graph may replay).
    """

    def __init__(
        self,
        capacity: int,
        dtype: Any = None,
        columns: Any = None,
        slots: int = 4,
        device: int = 0,
        transport: str = "mapped",
        graphs: bool = True,
    ) -> None:
        self._device = device
        self._columns = columns is not None
        self._names = list(columns) if isinstance(columns, dict) else None
        self.readback = _native.Readback(capacity, dtype=dtype, columns=columns, slots=slots,
                                         device=device, transport=transport)
        self._graph: Optional[_native.GraphReadback] = None
        if graphs:
            self._graph = _native.GraphReadback(capacity, dtype=dtype, columns=columns,
                                                slots=max(slots, 2), device=device)
        self._tickets: "collections.deque[Any]" = collections.deque()
        self.recordings = 0
        # (count dtype, rows of each column) of the first recording: every later one must match.
        self._recorded_as: Optional[tuple] = None
        self.key = _register(self)

    @property
    def graph(self) -> Optional[_native.GraphReadback]:
        """The graph readback (None with ``graphs=False``)."""
        return self._graph

    def enqueue(self, data: Union[torch.Tensor, Sequence[torch.Tensor], dict], count: torch.Tensor) -> None:
        """Inside the step: the readback of ``count`` rows of ``data`` (one tensor, or one per
        column as ``Readback.enqueue`` takes them). Traceable: no graph break."""
        if isinstance(data, torch.Tensor):
            cols = [data]
        elif isinstance(data, dict):
            cols = [data[n] for n in self._names]
        else:
            cols = list(data)
        torch.ops.sized_readback.enqueue(cols, count, self.key)

    def _on_enqueue(self, columns: list[torch.Tensor], count: torch.Tensor) -> None:
        # A compiler may hand over any layout; the pack reads rows as one block. The copy, if
        # any, runs on the same stream before the pack, and its memory is reused only by work
        # ordered after it (the caching allocator is stream-ordered; in a graph, so is replay).
        columns = [c if c.is_contiguous() else c.contiguous() for c in columns]
        data = tuple(columns) if self._columns else columns[0]
        if _capturing():
            if self._graph is None:
                raise RuntimeError("a step was captured into a CUDA graph: make the "
                                   "CompiledReadback with graphs=True")
            sig = (count.dtype, tuple(int(c.shape[0]) if c.dim() else 1 for c in columns))
            if self._recorded_as is None:
                self._recorded_as = sig
            elif sig != self._recorded_as:
                raise RuntimeError(
                    "CompiledReadback: a CUDA graph (mode=\"reduce-overhead\") recorded the "
                    f"readback with count dtype {sig[0]} and source lengths {list(sig[1])}, but "
                    f"its earlier recordings had count dtype {self._recorded_as[0]} and source "
                    f"lengths {list(self._recorded_as[1])}: every graph recorded into one "
                    "CompiledReadback must pack the same count dtype and source lengths (its "
                    "graph readback decodes every replay with them, and next() could not order "
                    "replays across several). Pad the data to fixed rows, use one "
                    "CompiledReadback per shape, or compile without mode=\"reduce-overhead\"."
                )
            # The graph's memory pool keeps the arrays for as long as the graph lives; a
            # reference held here would upset the pool's accounting of live blocks.
            self._graph.record(data, count, keep=False)
            self.recordings += 1
        else:
            # On torch's current stream, holding no reference to the inputs (see the module's
            # docs for why that is safe, and needed).
            stream = torch.cuda.current_stream(self._device)
            self._tickets.append(self.readback.enqueue(data, count, stream, keep=False))

    def next(self, timeout: Optional[float] = None) -> _native.Readout:
        """The readout of the oldest step not yet read: a waiting eager ticket's, else the
        next graph replay's. Blocks (without the GIL) until it is there. A
        ``ReadbackTimeoutError`` (or a Ctrl-C) leaves that step unread: the next ``next()``
        returns it; any other error consumes it.

        Raises ``NothingRecordedError`` (a ``RuntimeError``) when no step enqueued a readback
        since the last ``next()``; ``ReadbackTimeoutError`` after ``timeout`` seconds; the
        count's errors for that step (``CountExceedsCapacityError``, ``NegativeCountError``,
        ``CountExceedsSourceError``); ``OverrunError`` for a graph replay the device dropped
        (the host fell more than ``slots`` replays behind); ``CudaError`` when the device
        faulted."""
        return next_step(self._tickets, self._graph, self.recordings, timeout)

    def close(self) -> None:
        """Frees the graph readback, outside any capture, and only once no graph that recorded
        it will replay (the compiled step is not called again, or ``torch._dynamo.reset()``
        dropped its graphs). Tickets still waiting for ``next()`` are dropped."""
        self._tickets.clear()
        if self._graph is not None:
            self._graph.close()
