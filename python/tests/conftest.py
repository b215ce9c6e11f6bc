"""Shared set-up of the Python tests.

Tests marked ``gpu`` need a CUDA device and are skipped (reported as skipped) without one; a
test that needs a framework (PyTorch, CuPy, JAX, Numba) skips when it is not installed.
"""

import os

# JAX preallocates most of the GPU's memory at its first use; the suite shares the GPU
# between PyTorch, CuPy, JAX and Numba.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import pytest

import sized_readback as srb

HAVE_GPU = srb.is_available()


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU (or no CUDA driver) on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"sized_readback {srb.__version__}: CUDA GPU {'present' if HAVE_GPU else 'absent'}"
