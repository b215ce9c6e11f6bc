"""A device fault before a readback: the wait raises ``CudaError`` (CUDA_ERROR_ILLEGAL_ADDRESS)
within its timeout, never hangs, on both transports. A fault poisons the whole CUDA context,
so the scenario runs in a child process (CuPy's RawKernel makes the fault), killed if it hangs."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu
pytest.importorskip("cupy")

SCENARIO = textwrap.dedent(
    """
    import time
    import cupy as cp
    import numpy as np
    import sized_readback as srb

    readbacks = [srb.Readback(64, dtype=np.float64, transport=t) for t in ("mapped", "staged")]
    data = cp.full(64, 2.5, dtype=cp.float64)
    count = cp.asarray(40, dtype=cp.int32)
    for rb in readbacks:  # healthy first
        with rb.enqueue(data, count).wait(timeout=20) as out:
            assert out.count == 40 and float(out.numpy().sum()) == 100.0
    fault = cp.RawKernel('extern "C" __global__ void srb_py_fault() { *(volatile int*)8 = 1; }', "srb_py_fault")
    fault((1,), (1,), ())
    for rb in readbacks:
        t0 = time.monotonic()
        try:
            rb.enqueue(data, count).wait(timeout=20)
        except srb.CudaError as e:
            took = time.monotonic() - t0
            assert e.name == "CUDA_ERROR_ILLEGAL_ADDRESS", (e.name, str(e))
            assert took < 20, took
            print(f"{rb.info['transport']}: CudaError after {took:.3f} s: {e}")
        else:
            raise AssertionError("a readback after a device fault succeeded")
    print("SCENARIO OK")
    """
)


def test_wait_after_a_device_fault_raises_cuda_error():
    r = subprocess.run([sys.executable, "-c", SCENARIO], capture_output=True, text=True, timeout=90)
    assert r.returncode == 0 and "SCENARIO OK" in r.stdout, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert r.stdout.count("CudaError after") == 2, r.stdout


EVERY_CALL = textwrap.dedent(
    """
    import time
    import cupy as cp
    import numpy as np
    import sized_readback as srb

    rb = srb.Readback(64, dtype=np.float64, transport="auto")
    data = cp.full(64, 2.5, dtype=cp.float64)
    count = cp.asarray(40, dtype=cp.int32)
    with rb.enqueue(data, count).wait(timeout=20) as out:  # healthy first
        assert out.count == 40
    fault = cp.RawKernel('extern "C" __global__ void srb_py_fault() { *(volatile int*)8 = 1; }', "srb_py_fault")
    fault((1,), (1,), ())
    calls = {
        "enqueue + wait": lambda: rb.enqueue(data, count).wait(timeout=20),
        "Readback()": lambda: srb.Readback(64, dtype=np.float64),
        "Readback(staged)": lambda: srb.Readback(64, dtype=np.float64, transport="staged"),
        "AppendReadback()": lambda: srb.AppendReadback(64, dtype=np.float64),
        "GraphReadback()": lambda: srb.GraphReadback(64, dtype=np.float64),
        "grow": lambda: rb.grow(128),
    }
    for name, call in calls.items():
        t0 = time.monotonic()
        try:
            call()
        except srb.CudaError as e:
            took = time.monotonic() - t0
            assert took < 20, (name, took)
            print(f"{name}: CudaError after {took:.3f} s: {e.name}")
        else:
            raise AssertionError(f"{name} succeeded after a device fault")
    assert rb.info["capacity"] == 64  # host state still answers
    del rb
    print("SCENARIO OK")
    """
)


def test_every_call_after_a_device_fault_raises():
    """After a fault the context is lost: every call that reaches the device raises ``CudaError``
    (a ``ReadbackError``), none hangs or crashes; ``info`` (host state) still answers."""
    r = subprocess.run([sys.executable, "-c", EVERY_CALL], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "SCENARIO OK" in r.stdout, f"rc {r.returncode}\n{r.stdout}\n{r.stderr}"
    assert r.stdout.count("CudaError after") == 6, r.stdout
