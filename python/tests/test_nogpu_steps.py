"""Without a GPU or PyTorch: which step CompiledReadback.next() reads, and its error with
nothing pending."""

import collections
import warnings

import pytest

import sized_readback as srb
from sized_readback._steps import next_step


def test_next_with_nothing_pending_raises_nothing_recorded():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for graph, recordings in [(None, 0), (object(), 0)]:
            with pytest.raises(srb.NothingRecordedError, match="no step has enqueued") as e:
                next_step(collections.deque(), graph, recordings, None)
            assert isinstance(e.value, srb.ReadbackError) and isinstance(e.value, RuntimeError)


def test_next_takes_the_oldest_ticket_then_the_graph():
    class Ticket:
        def __init__(self, out):
            self.out = out

        def wait(self, timeout):
            return self.out

    class Graph:
        def next(self, timeout):
            return ("replay", timeout)

    tickets = collections.deque([Ticket("a"), Ticket("b")])
    assert next_step(tickets, Graph(), 1, None) == "a"
    assert next_step(tickets, Graph(), 1, None) == "b"
    assert next_step(tickets, Graph(), 1, 0.5) == ("replay", 0.5)
