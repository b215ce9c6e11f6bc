"""Read back from a CUDA GPU a count that lives in device memory and exactly that many
elements, without the host synchronizing.

A kernel (PyTorch, CuPy, JAX, Numba, your own) writes a count and that many rows. Instead of
``n = count.item()`` (a synchronization) followed by ``x[:n].cpu()``, a readback enqueues a
small pack kernel that reads the count on the device and copies that many rows into a slot of
pinned host memory; the host waits for the slot only when it needs the data::

    import torch, sized_readback as srb

    rb = srb.Readback(1 << 20, dtype=torch.float64)  # 1M rows per slot, 2 slots
    x = torch.randn(1 << 20, device="cuda", dtype=torch.float64)
    keep = x > 1.0
    n = keep.sum(dtype=torch.int32)                  # the count: a 0-d device tensor (no sync)
    data = x[torch.argsort((~keep).to(torch.int8), stable=True)]  # data[:n]: the kept rows
    ticket = rb.enqueue(data, n)                     # returns at once, on torch's stream
    # ... launch the next kernels here: nothing waited for the count ...
    with ticket.wait() as out:                       # count and rows, in pinned host memory
        print(out.count, out.numpy()[:4])            # a zero-copy numpy view of the slot

Data are any objects with ``__dlpack__`` or ``__cuda_array_interface__`` (v3); streams are a
``torch.cuda.Stream``, a CuPy stream, anything with ``__cuda_stream__``, or an int handle;
``None`` is the current stream of the framework that owns the data. Inside ``torch.compile``
(and its CUDA graphs), enqueue through ``sized_readback.torch_ops.CompiledReadback``.

**Views and release.** ``out.numpy()`` is a read-only view of the pinned slot. The slot is
held by the readout and by every view (and DLPack export) made from it, and reused only once
all of them are gone: no view can ever see another readback's data. ``out.release()`` (or
leaving ``with``) lets go of the readout's hold and raises ``BufferError`` while views are
still alive, like ``memoryview.release()``; take ``out.copy()`` for data that must outlive the
slot.
"""

from __future__ import annotations

import atexit

from . import _native
from ._append import APPEND_DESC_DTYPE, append_header, include_dir
from . import _errors
from . import _info  # noqa: F401 (puts the deprecated shortcut getters on the classes)
from ._errors import *  # noqa: F403 (the exceptions: the names in _errors.__all__)
from ._native import (
    KERNEL_TARGETS,
    MAX_COLUMNS,
    AppendReadback,
    GraphReadback,
    PendingAppend,
    Readback,
    Readout,
    SizeClass,
    SizedLaunch,
    SizedTicket,
    LaunchOutcome,
    Ticket,
    device_count,
    is_available,
    live_allocations,
    release_retired,
)

__version__: str = _native.__version__

# Graph readbacks dropped after recording stay allocated (a graph may replay into them) until
# the interpreter exits; then, once their context has finished what was launched, they are
# freed, so that nothing the library allocated outlives it (compute-sanitizer's leak check).
atexit.register(release_retired)

__all__ = [
    "Readback",
    "Ticket",
    "Readout",
    "GraphReadback",
    "AppendReadback",
    "PendingAppend",
    "SizedLaunch",
    "SizedTicket",
    "SizeClass",
    "LaunchOutcome",
    "device_count",
    "is_available",
    "live_allocations",
    "release_retired",
    "include_dir",
    "append_header",
    "APPEND_DESC_DTYPE",
    "KERNEL_TARGETS",
    "MAX_COLUMNS",
]
__all__ += _errors.__all__
