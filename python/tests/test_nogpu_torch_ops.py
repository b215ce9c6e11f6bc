"""The torch.compile custom op without a GPU: it traces (fake implementation), survives
dead-code elimination with no output, and compiles with fullgraph=True and no graph break,
on CPU tensors delivered to a stand-in for the readback. The GPU half is test_gpu_compile.py."""

import gc
import shutil

import pytest

torch = pytest.importorskip("torch")

# Inductor compiles CPU kernels with the host's C++ compiler.
HAVE_CXX = any(shutil.which(c) for c in ("g++", "c++", "clang++"))

from sized_readback import torch_ops  # noqa: E402


class Sink(torch_ops.CompiledReadback):
    """CompiledReadback's enqueue (what the step traces), with a host stand-in behind the op."""

    def __init__(self, names=None):
        self._columns = names is not None
        self._names = names
        self.calls = []
        self.key = torch_ops._register(self)

    def _on_enqueue(self, columns, count):
        self.calls.append(([c.clone() for c in columns], int(count)))


def step_for(sink, thr=3.0):
    def step(x, k):
        y = (x * 7 + k) % 101 - 50
        keep = y > thr
        n = keep.sum(dtype=torch.int32)
        data = y[torch.argsort((~keep).to(torch.int8), stable=True)]
        sink.enqueue(data, n)  # the result is unused: only the side effect keeps the op
        return y + 1

    return step


def expected(x, k, thr=3.0):
    y = (x * 7 + k) % 101 - 50
    return y[y > thr]


@pytest.mark.parametrize(
    "backend",
    ["aot_eager", pytest.param("inductor", marks=pytest.mark.skipif(not HAVE_CXX, reason="no C++ compiler for Inductor's CPU kernels"))],
)
def test_fullgraph_compiles_with_the_op_and_no_graph_break(backend):
    torch._dynamo.reset()
    sink = Sink()
    step = step_for(sink)
    x = torch.arange(64, dtype=torch.float32)
    assert torch._dynamo.explain(step)(x, torch.tensor(0.0)).graph_break_count == 0
    sink.calls.clear()
    f = torch.compile(step, fullgraph=True, backend=backend)
    for k in range(20):
        kt = torch.tensor(float(k))
        torch.testing.assert_close(f(x, kt), step(x, kt), rtol=0, atol=0)
    assert len(sink.calls) == 40, "every compiled and every eager step reached the op"
    for i, (cols, n) in enumerate(sink.calls):
        want = expected(x, float(i // 2))
        assert n == len(want)
        torch.testing.assert_close(cols[0][:n], want, rtol=0, atol=0)


def test_the_op_is_registered_as_side_effecting_with_a_fake():
    op = torch.ops.sized_readback.enqueue.default
    from torch._library.utils import is_impure

    assert is_impure(op)
    assert not op._schema.is_mutable, "it declares no mutation: cudagraphs see no mutated input"
    with torch._subclasses.fake_tensor.FakeTensorMode():
        t = torch.empty(8)
        assert torch.ops.sized_readback.enqueue([t], torch.empty((), dtype=torch.int32), 0) is None


def test_columns_as_tuple_or_dict_in_a_compiled_step():
    torch._dynamo.reset()
    sink = Sink(names=["v", "i"])

    def step(x):
        n = (x > 2).sum(dtype=torch.int32)
        sink.enqueue({"v": x * 2, "i": x.to(torch.int64)}, n)
        sink.enqueue((x * 3, x.to(torch.int64) + 1), n)
        return x

    torch.compile(step, fullgraph=True, backend="aot_eager")(torch.arange(6.0))
    (a, n1), (b, n2) = sink.calls
    assert n1 == n2 == 3
    assert a[0].tolist() == [0, 2, 4, 6, 8, 10] and a[1].tolist() == [0, 1, 2, 3, 4, 5]
    assert b[0].tolist() == [0, 3, 6, 9, 12, 15] and b[1].tolist() == [1, 2, 3, 4, 5, 6]


def test_a_freed_readback_is_an_error_not_a_crash():
    sink = Sink()
    key = sink.key
    del sink
    gc.collect()
    with pytest.raises(RuntimeError, match="no readback has key"):
        torch.ops.sized_readback.enqueue([torch.zeros(2)], torch.zeros((), dtype=torch.int32), key)


class _Ticket:
    """A stand-in ticket: times out while `ready` is False, then returns its readout or raises
    `error`."""

    def __init__(self, name, error=None):
        self.name, self.error, self.ready = name, error, False

    def wait(self, timeout=None):
        if not self.ready:
            from sized_readback import ReadbackTimeoutError

            raise ReadbackTimeoutError("ran out")
        if self.error is not None:
            raise self.error
        return self.name


def test_next_after_a_timeout_returns_the_same_step():
    # Review 3: next() popped the ticket before waiting, so a timeout lost that step.
    import collections

    cr = object.__new__(torch_ops.CompiledReadback)
    cr._graph, cr.recordings = None, 0
    a, b, c = _Ticket("a"), _Ticket("b", error=ValueError("bad count")), _Ticket("c")
    cr._tickets = collections.deque([a, b, c])
    with pytest.raises(TimeoutError):
        cr.next(timeout=0.001)
    a.ready = b.ready = c.ready = True
    assert cr.next() == "a"
    with pytest.raises(ValueError):  # any other error consumes its step
        cr.next()
    assert cr.next() == "c"
    assert not cr._tickets


class _FakeGraph:
    def __init__(self):
        self.records = []

    def record(self, data, count, keep=True):
        self.records.append((data, count))


def test_a_recording_with_new_shapes_raises_naming_the_limit(monkeypatch):
    # Review 4: a graph re-recorded for new shapes recorded into the same graph readback,
    # whose recordings must share count dtype and source lengths.
    import collections

    cr = object.__new__(torch_ops.CompiledReadback)
    cr._columns, cr._names, cr._graph = False, None, _FakeGraph()
    cr._tickets, cr.recordings, cr._recorded_as = collections.deque(), 0, None
    monkeypatch.setattr(torch_ops, "_capturing", lambda: True)
    n32 = torch.tensor(3, dtype=torch.int32)
    cr._on_enqueue([torch.zeros(8)], n32)
    cr._on_enqueue([torch.zeros(8)], n32)  # alike: a second graph of the same shapes
    assert cr.recordings == 2
    with pytest.raises(RuntimeError, match="same count dtype and source lengths"):
        cr._on_enqueue([torch.zeros(16)], n32)
    with pytest.raises(RuntimeError, match="same count dtype and source lengths"):
        cr._on_enqueue([torch.zeros(8)], torch.tensor(3, dtype=torch.int64))
    assert cr.recordings == 2 and len(cr._graph.records) == 2
