"""The readback op inside torch.compile on the GPU: fullgraph=True with no graph break and the
same readouts as eager over 1,000 steps; mode="reduce-overhead" running the step as a CUDA
graph (cudagraph_or_error, no cudagraph_skips) with the pack recorded once and 1,000 replays,
each replay's readout checked."""

import gc

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

import sized_readback as srb  # noqa: E402
from sized_readback.torch_ops import CompiledReadback  # noqa: E402

DEV = "cuda:0"
N = 4096
STEPS = 1000
THRESHOLD = 10.0


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    # Readbacks left by earlier tests are freed here, not by a collection during this test's
    # captures: freeing a graph readback synchronizes the context, which a capture refuses.
    gc.collect()
    torch.cuda.synchronize()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch.cuda.synchronize()
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.synchronize()


def step_for(cr):
    def step(idx, k):
        # Integers in float32: every backend computes them exactly.
        y = (idx * 7 + k) % 101 - 50
        keep = y > THRESHOLD
        n = keep.sum(dtype=torch.int32)
        data = y[torch.argsort((~keep).to(torch.int8), stable=True)]
        cr.enqueue(data, n)
        return n

    return step


def expected(k):
    y = ((np.arange(N, dtype=np.float64) * 7 + k) % 101 - 50).astype(np.float32)
    return y[y > THRESHOLD]


def k_of(i):
    return float((i * 37) % 1000)


def test_fullgraph_has_no_graph_break_and_matches_eager_over_1000_steps():
    idx = torch.arange(N, device=DEV, dtype=torch.float32)
    eager_cr = CompiledReadback(N, dtype=torch.float32, graphs=False)
    comp_cr = CompiledReadback(N, dtype=torch.float32, graphs=False)
    eager = step_for(eager_cr)
    explain = torch._dynamo.explain(step_for(CompiledReadback(N, dtype=torch.float32, graphs=False)))(
        idx, torch.zeros((), device=DEV)
    )
    assert explain.graph_break_count == 0 and explain.graph_count == 1
    compiled = torch.compile(step_for(comp_cr), fullgraph=True)
    for i in range(STEPS):
        k = torch.full((), k_of(i), device=DEV)
        eager(idx, k)
        compiled(idx, k)
        want = expected(k_of(i))
        with eager_cr.next(timeout=60) as a, comp_cr.next(timeout=60) as b:
            assert a.count == b.count == len(want), i
            np.testing.assert_array_equal(b.numpy(), a.numpy())
            np.testing.assert_array_equal(b.numpy(), want)
    assert comp_cr.recordings == 0, "no CUDA graph in this mode: every step enqueued"


def test_reduce_overhead_runs_the_step_as_a_cuda_graph_and_reads_every_replay():
    import torch._inductor.config as iconfig

    idx = torch.arange(N, device=DEV, dtype=torch.float32)
    cr = CompiledReadback(N, dtype=torch.float32, slots=4)
    with iconfig.patch({"triton.cudagraph_or_error": True}):
        step = torch.compile(step_for(cr), fullgraph=True, mode="reduce-overhead")
        for i in range(STEPS):
            k = torch.full((), k_of(i), device=DEV)
            step(idx, k)
            want = expected(k_of(i))
            with cr.next(timeout=60) as out:
                assert out.count == len(want), i
                np.testing.assert_array_equal(out.numpy(), want)
    assert torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] == 0
    assert cr.recordings == 1, "the pack is recorded into the graph once"
    # Warm-up steps ran as kernels; every later step was a replay of the graph.
    replays = cr.graph.next_seq - 1
    assert STEPS - 5 <= replays <= STEPS, replays
    assert cr.graph.last_overrun == 0
    torch.cuda.synchronize()
    cr.close()


def test_reduce_overhead_replays_ahead_of_the_host_up_to_the_slots():
    idx = torch.arange(N, device=DEV, dtype=torch.float32)
    cr = CompiledReadback(N, dtype=torch.float32, slots=4)
    step = torch.compile(step_for(cr), fullgraph=True, mode="reduce-overhead")
    ks = []
    for i in range(8):  # warm up and record, reading each step
        ks.append(k_of(i))
        step(idx, torch.full((), ks[-1], device=DEV))
        with cr.next(timeout=60) as out:
            np.testing.assert_array_equal(out.numpy(), expected(ks[-1]))
    for r in range(50):
        batch = [k_of(100 + 4 * r + j) for j in range(4)]
        for k in batch:  # four replays before the host reads any
            step(idx, torch.full((), k, device=DEV))
        for k in batch:
            with cr.next(timeout=60) as out:
                np.testing.assert_array_equal(out.numpy(), expected(k))
    assert cr.graph.last_overrun == 0
    torch.cuda.synchronize()
    cr.close()


@pytest.mark.parametrize("mode", [None, "reduce-overhead"])
def test_a_strided_column_is_read_in_order(mode):
    cr = CompiledReadback(N, dtype=torch.float32, slots=4)

    def step(idx, k):
        y = idx * 2 + k
        cr.enqueue(y[::2], (y[::2] < 100).sum(dtype=torch.int32))  # a strided view
        return y

    f = torch.compile(step, fullgraph=True, mode=mode)
    idx = torch.arange(N, device=DEV, dtype=torch.float32)
    for i in range(6):
        f(idx, torch.full((), float(i), device=DEV))
        want = (np.arange(N, dtype=np.float32) * 2 + i)[::2]
        want = want[: int((want < 100).sum())]
        with cr.next(timeout=60) as out:
            np.testing.assert_array_equal(out.numpy(), want)
    torch.cuda.synchronize()
    cr.close()


def test_next_after_a_timeout_returns_that_same_step():
    # A timed-out next() leaves its step for the next call (it used to be lost).
    cr = CompiledReadback(N, dtype=torch.float32, graphs=False)
    idx = torch.arange(N, device=DEV, dtype=torch.float32)
    step = step_for(cr)
    torch.cuda._sleep(200_000_000)  # ~100 ms before the step's kernels
    step(idx, k_of(1))
    step(idx, k_of(2))
    with pytest.raises(TimeoutError):
        cr.next(timeout=0.001)
    for k in (k_of(1), k_of(2)):
        with cr.next() as out:
            np.testing.assert_array_equal(out.numpy(), expected(k))
    with pytest.raises(srb.NothingRecordedError, match="no step"):
        cr.next()


def test_reduce_overhead_with_new_shapes_raises_naming_the_limit():
    # One CompiledReadback's graphs must all pack the same source lengths: a step recorded
    # again for a new length raises at the recording, naming the limit.
    cr = CompiledReadback(2 * N, dtype=torch.float32, slots=4)

    @torch.compile(fullgraph=True, mode="reduce-overhead")
    def step(x):
        keep = x > 0.5
        n = keep.sum(dtype=torch.int32)
        cr.enqueue(x[torch.argsort((~keep).to(torch.int8), stable=True)], n)
        return x * 2

    for _ in range(3):
        x = torch.rand(N, device=DEV)
        step(x)
        with cr.next() as out:
            assert out.count == int((x > 0.5).sum())
    with pytest.raises(Exception, match="same count dtype and source lengths"):
        for _ in range(3):
            step(torch.rand(2 * N, device=DEV))
            cr.next(timeout=10)
    cr.close()
