"""The append descriptor for kernels that append through ``sized_readback/append.cuh``, and
where that header is."""

from __future__ import annotations

import os

import numpy as np

from . import _native

__all__ = ["APPEND_DESC_DTYPE", "include_dir", "append_header"]

_MAX = _native.MAX_COLUMNS

#: numpy dtype of ``srb_append_desc`` (``sized_readback/slot.h``): what an append kernel takes
#: by value. ``PendingAppend.desc`` is a one-element array of it, which CuPy's ``RawKernel``
#: passes as the struct parameter.
APPEND_DESC_DTYPE = np.dtype(
    [
        ("slots", "<u8"),
        ("slot_stride", "<u8"),
        ("trailer_offset", "<u8"),
        ("capacity", "<u8"),
        ("slot_sync", "<u8"),
        ("spill", "<u8"),
        ("spill_stride", "<u8"),
        ("spill_capacity", "<u8"),
        ("seq", "<u8"),
        ("seq_counter", "<u8"),
        ("ring_ctl", "<u8"),
        ("slot", "<u4"),
        ("num_slots", "<u4"),
        ("num_columns", "<u4"),
        ("num_buckets", "<u4"),
        ("bucket_table", "<u8"),
        ("bucket_counts", "<u8"),
        ("column_offset", "<u8", (_MAX,)),
        ("spill_offset", "<u8", (_MAX,)),
        ("elem_size", "<u4", (_MAX,)),
    ],
    align=True,
)

if APPEND_DESC_DTYPE.itemsize != _native.APPEND_DESC_SIZE:  # pragma: no cover
    raise ImportError(
        f"APPEND_DESC_DTYPE has {APPEND_DESC_DTYPE.itemsize} bytes but the library's "
        f"srb_append_desc has {_native.APPEND_DESC_SIZE}: the package is out of date"
    )


def _desc_array(raw: bytes) -> np.ndarray:
    """The descriptor's bytes as a one-element array (called by the native module)."""
    return np.frombuffer(raw, dtype=APPEND_DESC_DTYPE).copy()


def include_dir() -> str:
    """The directory holding ``sized_readback/append.cuh`` and ``sized_readback/slot.h``: pass
    it as ``-I`` to NVRTC (e.g. ``cupy.RawKernel(..., options=("-I" + include_dir(),))``) or
    nvcc, and ``#include <sized_readback/append.cuh>``."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def append_header() -> str:
    """``slot.h`` and ``append.cuh`` as one source text, for compilers that take no include
    path: prepend it to a kernel's source."""
    return _native.APPEND_HEADER
