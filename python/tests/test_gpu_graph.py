"""GraphReadback inside torch.cuda.graph(...), consumed with next() after each
torch.cuda.CUDAGraph.replay(): replays ahead of the host, overruns, count errors."""

import numpy as np
import pytest

import sized_readback as srb

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

DEV = "cuda:0"


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    yield
    torch.cuda.synchronize()


def capture(gr, cap, count_dtype=torch.int32):
    """A graph whose every replay computes data = i * a + b (i < cap) and count = n from the
    static tensors a, b, n, and reads them back through `gr`."""
    idx = torch.arange(cap, device=DEV, dtype=torch.float64)
    a = torch.zeros((), device=DEV, dtype=torch.float64)
    b = torch.zeros((), device=DEV, dtype=torch.float64)
    n = torch.zeros((), device=DEV, dtype=count_dtype)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as torch recommends
        for _ in range(2):
            _ = idx * a + b
            _ = n + 0
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        data = idx * a + b
        count = n + 0
        gr.record(data, count)  # stream=None: torch's current stream, the capture stream
    return g, a, b, n


def replay(g, a, b, n, ai, bi, ni):
    a.fill_(float(ai))
    b.fill_(float(bi))
    n.fill_(int(ni))
    g.replay()


def test_graph_replays_with_replays_in_flight():
    cap = 4096
    gr = srb.GraphReadback(cap, dtype=torch.float64, slots=8)
    try:
        g, a, b, n = capture(gr, cap)
        rng = np.random.default_rng(3)
        seq = 0
        for _ in range(60):
            params = []
            for _ in range(int(rng.integers(1, 9))):  # up to `slots` replays ahead of the host
                p = (int(rng.integers(-5, 6)), int(rng.integers(-1000, 1000)), int(rng.choice([0, 1, cap, rng.integers(0, cap)])))
                replay(g, a, b, n, *p)
                params.append(p)
            for ai, bi, ni in params:
                seq += 1
                with gr.next(timeout=30) as out:
                    assert out.seq == seq and out.count == ni
                    np.testing.assert_array_equal(out.numpy(), np.arange(ni) * float(ai) + bi)
        assert gr.next_seq == seq + 1 and gr.last_overrun == 0
    finally:
        torch.cuda.synchronize()
        gr.close()


def test_overruns_and_count_errors_are_reported_per_replay():
    cap = 256
    gr = srb.GraphReadback(cap, dtype=torch.float64, slots=2)
    try:
        g, a, b, n = capture(gr, cap)
        for k in range(4):  # the host takes none: replays 3 and 4 find both slots held
            replay(g, a, b, n, 1, k, 10 + k)
        torch.cuda.synchronize()
        for k in range(2):
            with gr.next(timeout=30) as out:
                assert (out.seq, out.count) == (k + 1, 10 + k)
                assert out.numpy()[0] == k
        for s in (3, 4):
            with pytest.raises(srb.OverrunError) as e:
                gr.next(timeout=30)
            assert e.value.seq == s
        assert gr.last_overrun == 4
        replay(g, a, b, n, 2, 0, cap + 1)
        with pytest.raises(srb.CountExceedsCapacityError) as e:
            gr.next(timeout=30)
        assert (e.value.count, e.value.capacity) == (cap + 1, cap)
        replay(g, a, b, n, 2, 0, cap)
        with gr.next(timeout=30) as out:
            assert (out.seq, out.count) == (6, cap)
            np.testing.assert_array_equal(out.numpy(), np.arange(cap) * 2.0)
        assert gr.try_next() is None
    finally:
        torch.cuda.synchronize()
        gr.close()


def test_graph_readback_of_columns_and_every_count_dtype():
    cap = 512
    for cd in (torch.int32, torch.int64):
        gr = srb.GraphReadback(cap, columns={"v": torch.float64, "i": torch.int64}, slots=4)
        try:
            idx = torch.arange(cap, device=DEV, dtype=torch.float64)
            n = torch.zeros((), device=DEV, dtype=cd)
            k = torch.zeros((), device=DEV, dtype=torch.float64)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                v = idx + k
                i = (idx * 2).to(torch.int64)
                c = n + 0
                gr.record({"v": v, "i": i}, c)
            for r in range(20):
                n.fill_(r * 7)
                k.fill_(float(r))
                g.replay()
                with gr.next(timeout=30) as out:
                    vv, ii = out.numpy()
                    assert out.count == r * 7
                    np.testing.assert_array_equal(vv, np.arange(r * 7) + float(r))
                    np.testing.assert_array_equal(ii, np.arange(r * 7) * 2)
                    del vv, ii
        finally:
            torch.cuda.synchronize()
            gr.close()


def test_next_before_any_recording_and_timeouts():
    gr = srb.GraphReadback(16, dtype=torch.float64)
    with pytest.raises(srb.NothingRecordedError):
        gr.next(timeout=1)
    gr.close()
    assert gr.closed
