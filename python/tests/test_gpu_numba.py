"""Numba producers: device arrays through __cuda_array_interface__ (v3, with its stream), a
@cuda.jit kernel on a Numba stream, every count dtype."""

import numpy as np
import pytest

import sized_readback as srb

pytestmark = pytest.mark.gpu
numba_cuda = pytest.importorskip("numba.cuda")
cuda = numba_cuda

# numba-cuda 0.30 (the GPU host's) calls np.row_stack while it compiles its first kernel
# (numba/cuda/extending.py, through its fp16/bf16 typing), which NumPy 2.x no longer has: it
# is np.vstack under its old name. Without this alias no @cuda.jit kernel compiles there.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

CAP = 2048


@pytest.fixture(autouse=True)
def _cuda():
    if not cuda.is_available():
        pytest.skip("Numba sees no CUDA device")
    yield
    cuda.synchronize()


@pytest.mark.parametrize("count_dtype", [np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("n", [0, 1, CAP, CAP + 1])
def test_numba_arrays_every_count_dtype_and_edge_count(count_dtype, n):
    rb = srb.Readback(CAP, dtype=np.int32)
    data = cuda.to_device(np.arange(CAP + 4, dtype=np.int32) * 5)
    count = cuda.to_device(np.array(n, dtype=count_dtype))
    t = rb.enqueue(data, count)
    if n > CAP:
        with pytest.raises(srb.CountExceedsCapacityError):
            t.wait(timeout=30)
        return
    with t.wait(timeout=30) as out:
        assert out.count == n
        np.testing.assert_array_equal(out.numpy(), np.arange(n, dtype=np.int32) * 5)


@pytest.fixture(scope="module")
def produce():
    try:

        @cuda.jit
        def produce(out, count, n, k):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = i * k
            if i == 0:
                count[0] = n

        # Compile now: a missing NVVM is the environment, not this package.
        produce[1, 32](cuda.device_array(32, np.float64), cuda.device_array(1, np.int64), 0, 1.0)
        cuda.synchronize()
    except Exception as e:
        if "nvvm" in str(e).lower():
            pytest.skip(f"Numba cannot compile kernels here: {e}")
        raise
    return produce


def test_a_numba_kernel_on_a_numba_stream(produce):
    rb = srb.Readback(CAP, dtype=np.float64, slots=4)
    s = cuda.stream()
    pending = []
    for r in range(30):
        out_d = cuda.device_array(CAP, dtype=np.float64, stream=s)
        count = cuda.device_array(1, dtype=np.int64, stream=s)
        produce[(CAP + 127) // 128, 128, s](out_d, count, 10 * r, float(r))
        # stream=None: the arrays name stream s (CUDA Array Interface v3), so the pack runs there
        pending.append((rb.enqueue(out_d, count), r))
        if len(pending) == 4:
            for t, k in pending:
                with t.wait(timeout=30) as o:
                    assert o.count == 10 * k
                    np.testing.assert_array_equal(o.numpy(), np.arange(10 * k) * float(k))
            pending = []
    # an explicit Numba stream object
    out_d = cuda.device_array(CAP, dtype=np.float64, stream=s)
    count = cuda.device_array(1, dtype=np.int64, stream=s)
    produce[(CAP + 127) // 128, 128, s](out_d, count, 9, 2.0)
    assert rb.enqueue(out_d, count, stream=s).wait(timeout=30).numpy()[-1] == 16.0
