"""The library's own allocations (``live_allocations()``) come back to where they were once
every readback, ticket and readout is gone, for every kind of readback and both transports;
graph readbacks dropped after recording are kept until ``release_retired()`` (at exit)."""

import gc

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


def settled():
    """The library's live allocations once everything unreachable is collected."""
    gc.collect()
    return srb.live_allocations()


def readback_cycle(make):
    data = torch.arange(1000, device=DEV, dtype=torch.float64)
    n = torch.tensor(700, device=DEV, dtype=torch.int32)
    rb = make()
    t1 = rb.enqueue(data, n)
    t2 = rb.enqueue(data, n)  # dropped unwaited: deferred until it completes
    with t1.wait(timeout=30) as out:
        assert out.count == 700
        view = out.numpy()
        np.testing.assert_array_equal(view, np.arange(700, dtype=np.float64))
    del t2, view


@pytest.mark.parametrize(
    "make",
    [
        lambda: srb.Readback(1 << 12, dtype=torch.float64),
        lambda: srb.Readback(1 << 12, dtype=torch.float64, transport="staged"),
        lambda: srb.Readback(1 << 12, dtype=torch.float64, transport="staged", staged_copy="whole"),
        lambda: srb.Readback(1 << 12, dtype=torch.float64, transport="auto"),
    ],
    ids=["mapped", "staged", "staged-whole", "auto"],
)
def test_a_readback_leaves_nothing_allocated(make):
    before = settled()
    readback_cycle(make)
    torch.cuda.synchronize()
    assert settled() == before


def test_a_readback_in_a_reference_cycle_is_collected():
    before = settled()

    class Holder:
        pass

    h = Holder()
    h.rb = srb.Readback(1 << 10, dtype=torch.float64)
    h.ticket = h.rb.enqueue(torch.zeros(1 << 10, device=DEV, dtype=torch.float64), torch.tensor(3, device=DEV, dtype=torch.int32))
    h.self = h
    h.ticket.wait(timeout=30)
    assert srb.live_allocations()["pinned"] > before["pinned"]
    del h
    assert settled() == before


def test_a_graph_readback_dropped_after_recording_is_kept_until_release_retired():
    srb.release_retired()  # what earlier tests retired
    before = settled()
    cap = 1 << 12
    gr = srb.GraphReadback(cap, dtype=torch.float64, slots=2)
    made = srb.live_allocations()
    assert made["pinned"] > before["pinned"]
    idx = torch.arange(cap, device=DEV, dtype=torch.float64)
    n = torch.zeros((), device=DEV, dtype=torch.int32)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        count = n + 0
        gr.record(idx, count)
    n.fill_(10)
    g.replay()
    with gr.next(timeout=30) as out:
        assert out.count == 10
    del gr, out
    # The graph may still replay into the slots: they stay, and a replay stays safe.
    assert settled() == made
    assert srb._native.retired_count() >= 1
    g.replay()
    torch.cuda.synchronize()
    assert srb.release_retired() >= 1
    assert srb._native.retired_count() == 0
    assert settled() == before
    del g  # never launched again


def test_a_closed_graph_readback_frees_at_once():
    before = settled()
    gr = srb.GraphReadback(1 << 10, dtype=torch.float64, slots=2)
    g = torch.cuda.CUDAGraph()
    n = torch.full((), 5, device=DEV, dtype=torch.int32)
    idx = torch.arange(1 << 10, device=DEV, dtype=torch.float64)
    with torch.cuda.graph(g):
        count = n + 0
        gr.record(idx, count)
    g.replay()
    with gr.next(timeout=30) as out:
        assert out.count == 5
    del out
    torch.cuda.synchronize()
    gr.close()
    del gr, g
    assert settled() == before


def test_a_failed_ticket_raising_twice_leaves_nothing_allocated():
    # The raised error's traceback holds the frame that holds the ticket: the ticket must not
    # keep that very exception, or the cycle (invisible to gc through the native ticket) keeps
    # the readback's slots allocated to the end of the process.
    before = settled()

    def fail():
        rb = srb.Readback(16, dtype=torch.float64)
        t = rb.enqueue(torch.zeros(32, device=DEV, dtype=torch.float64), torch.tensor(17, device=DEV, dtype=torch.int32))
        with pytest.raises(srb.CountExceedsCapacityError):
            t.wait(timeout=30)
        with pytest.raises(srb.CountExceedsCapacityError) as again:
            t.wait(timeout=30)
        assert (again.value.count, again.value.capacity) == (17, 16)

    fail()
    assert settled() == before
