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
# allocated when the process exits is reported as leaked. The frameworks' memory pools keep
# freed blocks until then, so the pools are switched off (PyTorch's through
# PYTORCH_NO_CUDA_MEMORY_CACHING, set by the script), and what the tests left behind is
# collected before the exit: what leaks after that is a real leak.
RELEASE_AT_EXIT = os.environ.get("SRB_RELEASE_AT_EXIT") == "1"
if RELEASE_AT_EXIT:
    try:
        import cupy

        cupy.cuda.set_allocator(None)
        cupy.cuda.set_pinned_memory_allocator(None)
    except ImportError:
        pass


def pytest_sessionfinish(session, exitstatus):
    if not RELEASE_AT_EXIT:
        return
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU (or no CUDA driver) on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"sized_readback {srb.__version__}: CUDA GPU {'present' if HAVE_GPU else 'absent'}"
