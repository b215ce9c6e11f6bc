"""Shared set-up of the Python tests.

Tests marked ``gpu`` need a CUDA device and are skipped (reported as skipped) without one; a
test that needs a framework (PyTorch, CuPy, JAX, Numba) skips when it is not installed.
"""

import os

# JAX preallocates most of the GPU's memory at its first use; the suite shares the GPU
# between PyTorch, CuPy, JAX and Numba.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import gc
import sys

import pytest

import sized_readback as srb

HAVE_GPU = srb.is_available()

# Under compute-sanitizer's leak check (scripts/sanitize.sh sets this), device memory still
# allocated when the process exits is reported as leaked. What the tests left behind is
# collected before the exit and the frameworks' pools give their free blocks back, so that what
# leaks after that is a real leak. (PyTorch's pool cannot be switched off instead: without it,
# an allocation inside a graph capture calls cudaMalloc, which a capture refuses.)
RELEASE_AT_EXIT = os.environ.get("SRB_RELEASE_AT_EXIT") == "1"


def pytest_sessionfinish(session, exitstatus):
    if not RELEASE_AT_EXIT:
        return
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU (or no CUDA driver) on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"sized_readback {srb.__version__}: CUDA GPU {'present' if HAVE_GPU else 'absent'}"
