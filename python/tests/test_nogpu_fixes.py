"""Regression tests, without a GPU, for the fixes of the python-fixes review: each test names
the finding it guards."""

import numpy as np
import pytest

import sized_readback as srb
from sized_readback import _native


@pytest.mark.parametrize(
    "dtype",
    [
        np.dtype([("o", object)]),
        np.dtype([("x", "f8"), ("o", object)]),
        np.dtype([("inner", [("o", object)])]),
        np.dtype((np.dtype([("o", object)]), 2)),
        object,
    ],
)
def test_dtypes_holding_objects_are_refused(dtype):
    # Review 1: a structured dtype with an object field was accepted as kind V, and numpy()
    # then read slot bytes as PyObject* (a segfault).
    a = np.zeros(4, "V8")
    a.view(np.uint64)[:] = 0xDEADBEEF
    with pytest.raises(srb.ConfigError, match="Python objects"):
        _native._host_readout([a], 2, dtype=dtype)
    with pytest.raises(ValueError):
        srb.Readback(4, dtype=dtype)
    with pytest.raises(ValueError):
        srb.Readback(4, columns={"a": "f8", "b": dtype})
