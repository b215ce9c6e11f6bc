"""The benchmark's targets from synthetic measurements (no GPU): the restated targets of
issue 20, each computed as documented, with its verdict and the JSON fields the bench writes."""

import importlib.util
import json
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench" / "bench.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("srb_bench", BENCH)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


CAP = 1 << 20


def point(n, **p50s):
    return dict(
        capacity=CAP,
        n=n,
        auto_transports={"staged": 9, "mapped": 1} if n == CAP else {"mapped": 10},
        approaches={
            a: dict(latency_us=dict(samples=10 if v is not None else 0, p50=v or 0.0, p99=v or 0.0), correct=10, checked=10, error=None if v is not None else "boom")
            for a, v in p50s.items()
        }
        | {"sized_readback": dict(latency_us=dict(samples=10, p50=p50s["sized_readback"], p99=0.0), enqueue_us=dict(p50=3.0), wait_us=dict(p50=4.0), correct=10, checked=10, error=None)},
    )


def run(bench, sweep, binding=None, loops=(), compiled=None, auto_staged_from=912262):
    return {t["name"].split(":")[0]: t for t in bench.targets_of(sweep, list(loops), binding, compiled, CAP, 200.0, 5.0, auto_staged_from)}


def test_latency_beyond_the_producer_and_at_1m(bench):
    sweep = [
        point(16, producer_only=60.0, item_pinned=84.0, sized_readback=70.0),  # 10 / 24 = 0.417
        point(4096, producer_only=59.2, item_pinned=83.7, sized_readback=88.5),  # 29.3 / 24.5 = 1.196
        point(CAP, producer_only=53.6, item_pinned=228.8, sized_readback=279.5, sized_readback_staged=250.0, sized_readback_auto=220.0),
    ]
    t = run(bench, sweep)
    small = t["n 1..4096, cap 1M"]
    assert small["measured"] == pytest.approx(29.3 / 24.5) and not small["holds"] and small["limit"] == 0.5
    assert "n=4K" in small["why"]
    big = t["n 1M, cap 1M"]
    assert big["measured"] == pytest.approx(220.0 / 228.8) and big["holds"] and big["comparison"] == "<="
    assert "staged" in big["detail"] and "GB/s" in big["detail"]
    sweep[1] = point(4096, producer_only=59.2, item_pinned=83.7, sized_readback=65.0)
    assert run(bench, sweep)["n 1..4096, cap 1M"]["holds"]


def test_the_auto_miss_says_which_set_auto_had(bench):
    sweep = [point(CAP, producer_only=53.6, item_pinned=228.8, sized_readback=279.5, sized_readback_staged=250.0, sized_readback_auto=240.0)]
    staged = run(bench, sweep)["n 1M, cap 1M"]
    assert not staged["holds"] and "from 912262 rows" in staged["why"]
    # No staged slots at this capacity (1M f64 rows is below the core's thresholds): auto is mapped.
    mapped = run(bench, sweep, auto_staged_from=None)["n 1M, cap 1M"]
    assert not mapped["holds"] and "no staged slots" in mapped["why"] and "None" not in mapped["why"]


def test_a_failed_approach_is_a_missed_target_not_a_crash(bench):
    sweep = [point(CAP, producer_only=53.6, item_pinned=228.8, sized_readback=279.5, sized_readback_auto=None)]
    big = run(bench, sweep)["n 1M, cap 1M"]
    assert not big["holds"] and "boom" in big["why"]


def test_binding_seed_loop_and_compile_targets(bench):
    binding = dict(p50_us=dict(enqueue=5.0, enqueue_raw=4.2, add_=8.4, wait_view=1.0))
    loops = [dict(approach="sync", cycles_per_s=2000.0), dict(approach="sized_readback", cycles_per_s=4000.0)] * 3
    compiled = dict(
        fullgraph=dict(steps_wanted=1000, steps=1000, mismatched_steps=0, graph_breaks=0, error=None, step_us_p50=50.0),
        reduce_overhead=dict(steps_wanted=1000, steps=1000, wrong_replays=0, cudagraph_skips=0, recordings=1, graph_readouts=999, error=None),
    )
    t = run(bench, [], binding, loops, compiled)
    over = t["binding overhead"]
    assert over["measured"] == pytest.approx(0.8) and over["holds"] and over["limit"] == 1.5
    ratio = t["binding"]
    assert ratio["measured"] == pytest.approx(5.0 / 8.4) and ratio["holds"]
    seed = t["seed loop in PyTorch (kernel 200 µs, CPU 5 µs)"]
    assert seed["measured"] == 2.0 and seed["holds"] and seed["limit"] == 1.9
    assert t["torch.compile(fullgraph=True) step with a readback"]["holds"]
    assert t["torch.compile(mode='reduce-overhead') step with a readback"]["holds"]
    compiled["reduce_overhead"] |= dict(cudagraph_skips=1, recordings=2)
    compiled["fullgraph"] |= dict(error="RuntimeError: x")
    t = run(bench, [], binding, loops, compiled)
    ro = t["torch.compile(mode='reduce-overhead') step with a readback"]
    assert not ro["holds"] and ro["measured"] == 2.0 and ro["miss_by"] == 2.0
    assert "RuntimeError" in t["torch.compile(fullgraph=True) step with a readback"]["why"]
    json.dumps(list(t.values()))  # as the bench writes them


def test_the_table_renders_every_section(bench):
    sweep = [point(CAP, producer_only=53.6, item_pinned=228.8, sized_readback=279.5, sized_readback_staged=250.0, sized_readback_auto=220.0)]
    binding = dict(p50_us=dict(enqueue=5.0, enqueue_raw=4.2, add_=8.4, wait_view=1.0))
    compiled = dict(fullgraph=dict(steps=3, error=None), reduce_overhead=dict(steps=3, error="E"))
    out = dict(
        date="d", commit="c", settings=dict(capacity=CAP),
        machine=dict(gpu="G", compute_capability="9.0", cuda_driver_api="13.0", torch="2.11"),
        binding=binding, sweep=sweep, torch_compile=compiled,
        seed_loop=[dict(approach="sync", kernel_us=200.0, cpu_us=5.0, cycles_per_s=2000.0, correct=3, cycles=3)],
        targets=bench.targets_of(sweep, [], binding, compiled, CAP, 200.0, 5.0, 912262),
    )
    table = bench.render(out, ["producer_only", "item_pinned", "sized_readback", "sized_readback_staged", "sized_readback_auto"])
    assert "**279.5" in table and "enqueue_raw 4.20" in table and "torch.compile reduce_overhead" in table
    assert "| NO |" in table and "missed by" in table


def test_the_compile_checks_on_cpu(bench, monkeypatch):
    """compile_checks' fullgraph half on CPU tensors, the readback replaced by a host stand-in
    behind the same op; its reduce-overhead half needs CUDA graphs and reports an error here."""
    torch = pytest.importorskip("torch")
    import shutil

    if not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        pytest.skip("no C++ compiler for Inductor's CPU kernels")
    from sized_readback import torch_ops

    class Out:
        def __init__(self, a):
            self.a, self.count = a, len(a)

        def numpy(self):
            return self.a

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    class HostReadback(torch_ops.CompiledReadback):
        def __init__(self, capacity, dtype=None, slots=4, graphs=True):
            self._columns, self._names, self._graph, self.recordings = False, None, None, 0
            self.queue = []
            self.key = torch_ops._register(self)

        def _on_enqueue(self, columns, count):
            self.queue.append(Out(columns[0][: int(count)].numpy().copy()))

        def next(self, timeout=None):
            return self.queue.pop(0)

    monkeypatch.setattr(torch_ops, "CompiledReadback", HostReadback)
    res = bench.compile_checks(torch, "cpu", 12)
    fg, ro = res["fullgraph"], res["reduce_overhead"]
    assert fg["error"] is None, fg
    assert (fg["graph_breaks"], fg["steps"], fg["mismatched_steps"]) == (0, 12, 0)
    assert ro["error"] is not None and ro["wrong_replays"] == 0
    t = {x["name"].split(" step")[0]: x for x in bench.targets_of([], [], None, res, CAP, 200.0, 5.0, 1)}
    assert t["torch.compile(fullgraph=True)"]["holds"] and not t["torch.compile(mode='reduce-overhead')"]["holds"]
