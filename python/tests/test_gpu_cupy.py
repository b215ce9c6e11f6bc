"""CuPy producers: arrays and RawKernels, every count dtype, CuPy streams (current and
explicit), columns, and a RawKernel that appends through the append header."""

import os
import sys

import numpy as np
import pytest

import sized_readback as srb

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

CAP = 4096


@pytest.fixture(autouse=True)
def _cuda(cupy_device):
    yield


def compiled(kernel):
    """`kernel`, compiled; skips the test when CuPy cannot load NVRTC at all (the environment,
    not this package). A compile error of the source itself fails the test."""
    try:
        kernel.compile()
    except cp.cuda.compiler.CompileException:
        raise
    except Exception as e:
        if "nvrtc" in str(e).lower():
            pytest.skip(f"CuPy cannot compile kernels here: {e}")
        raise
    return kernel


def rawkernel(source, name, **kw):
    return compiled(cp.RawKernel(source, name, **kw))


@pytest.mark.parametrize("count_dtype", [cp.int32, cp.int64, cp.uint32, cp.uint64])
@pytest.mark.parametrize("n", [0, 1, CAP, CAP + 1])
def test_cupy_arrays_every_count_dtype_and_edge_count(count_dtype, n):
    rb = srb.Readback(CAP, dtype=np.float32)
    data = cp.arange(CAP + 4, dtype=cp.float32) * 2 - 7
    count = cp.asarray(n, dtype=count_dtype)
    t = rb.enqueue(data, count)
    if n > CAP:
        with pytest.raises(srb.CountExceedsCapacityError) as e:
            t.wait(timeout=30)
        assert (e.value.count, e.value.capacity) == (n, CAP)
        return
    with t.wait(timeout=30) as out:
        assert out.count == n
        np.testing.assert_array_equal(out.numpy(), np.arange(n, dtype=np.float32) * 2 - 7)


def test_cupy_streams_current_and_explicit():
    rb = srb.Readback(CAP, dtype=np.int64, slots=8)
    s1 = cp.cuda.Stream(non_blocking=True)
    s2 = cp.cuda.Stream(non_blocking=True)
    tickets = []
    with s1:
        a = cp.arange(CAP, dtype=cp.int64) * 3
        na = cp.asarray(100, dtype=cp.int32)
        tickets.append((rb.enqueue(a, na), 100, 3))  # on s1, CuPy's current stream
    with s2:
        b = cp.arange(CAP, dtype=cp.int64) * 5
        nb = cp.asarray(200, dtype=cp.int64)
    tickets.append((rb.enqueue(b, nb, stream=s2), 200, 5))
    tickets.append((rb.enqueue(b, nb, stream=s2.ptr), 200, 5))
    s2.synchronize()
    tickets.append((rb.enqueue(b, nb, stream=s1), 200, 5))
    tickets.append((rb.enqueue(b, nb, stream=cp.cuda.Stream.null), 200, 5))
    for t, n, k in tickets:
        with t.wait(timeout=30) as out:
            np.testing.assert_array_equal(out.numpy(), np.arange(n) * k)


SELECT = r"""
extern "C" __global__ void select(const float* x, int n, float thr, float* out, int* count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > thr) {
        int at = atomicAdd(count, 1);
        out[at] = x[i];
    }
}
"""


def test_a_rawkernel_producer_writes_the_count():
    rb = srb.Readback(CAP, dtype=np.float32, slots=2)
    kernel = rawkernel(SELECT, "select")
    rng = np.random.default_rng(5)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        for _ in range(50):
            host = rng.standard_normal(CAP).astype(np.float32)
            x = cp.asarray(host)
            out_d = cp.zeros(CAP, dtype=cp.float32)
            count = cp.zeros((), dtype=cp.int32)
            kernel(((CAP + 255) // 256,), (256,), (x, np.int32(CAP), np.float32(0.5), out_d, count))
            with rb.enqueue(out_d, count).wait(timeout=30) as out:
                want = np.sort(host[host > 0.5])
                assert out.count == len(want)
                np.testing.assert_array_equal(np.sort(out.numpy()), want)


def test_cupy_columns_of_mixed_dtypes():
    rb = srb.Readback(CAP, columns=[("f8", 2), np.int16, np.bool_], slots=2)
    i = cp.arange(CAP)
    xy = cp.stack([i * 0.5, -i * 1.0], axis=1)
    k = (i % 300).astype(cp.int16)
    f = (i % 2) == 0
    with rb.enqueue((xy, k, f), cp.asarray(CAP - 1, dtype=cp.uint64)).wait(timeout=30) as out:
        a, b, c = out.numpy()
        ih = np.arange(CAP - 1)
        np.testing.assert_array_equal(a, np.stack([ih * 0.5, -ih * 1.0], 1))
        np.testing.assert_array_equal(b, (ih % 300).astype(np.int16))
        np.testing.assert_array_equal(c, ih % 2 == 0)
        del a, b, c


def test_cupy_wrong_dtype_and_host_arrays():
    rb = srb.Readback(CAP, dtype=np.float64)
    with pytest.raises(ValueError):
        rb.enqueue(cp.zeros(CAP, dtype=cp.float32), cp.asarray(1, dtype=cp.int32))
    with pytest.raises(ValueError):
        rb.enqueue(cp.zeros(CAP), cp.asarray(1.0))
    with pytest.raises(ValueError):
        rb.enqueue(np.zeros(CAP), cp.asarray(1, dtype=cp.int32))


def test_the_append_example():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    try:
        import cupy_append
    finally:
        sys.path.pop(0)
    compiled(cupy_append.compile_kernel())
    # A small capacity: the later steps overflow it, grow the readback and run again.
    rows = cupy_append.run(n=1 << 18, steps=6, capacity=512, quiet=True)
    assert rows > 512


def test_append_context_manager_and_cancel():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    try:
        import cupy_append
    finally:
        sys.path.pop(0)
    kernel = compiled(cupy_append.compile_kernel())
    rb = srb.AppendReadback(1 << 12, columns=[np.float64, np.int64])
    s = cp.cuda.Stream(non_blocking=True)
    x = cp.asarray(np.linspace(-0.5, 1.5, 1000))
    with s:
        with rb.begin(s) as p:
            kernel((4,), (256,), (p.desc, x, np.int64(1000), np.float64(0.0), np.float64(1.0)))
        out = p.ticket.wait(timeout=30)
        host = cp.asnumpy(x)
        assert out.count == int(((host < 0) | (host >= 1)).sum())
        out.release()
        with pytest.raises(KeyError):
            with rb.begin(s) as p:
                raise KeyError("launch failed")
        assert p.ticket is None
        assert rb.slots_in_use == 0
    assert p.desc.dtype == srb.APPEND_DESC_DTYPE and p.desc.shape == (1,)
