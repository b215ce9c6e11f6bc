"""torch.compile of a step that enqueues a readback: fullgraph and reduce-overhead."""

import sys
import time

import numpy as np

from .summary import summary


def compile_checks(torch, dev, steps):
    """A step that enqueues a readback through sized_readback.torch_ops, compiled with
    fullgraph=True (against eager, step by step) and with mode="reduce-overhead" (CUDA graphs,
    every replay's readout checked)."""
    from sized_readback.torch_ops import CompiledReadback

    n_rows, thr = 4096, 10.0

    def step_for(cr):
        def step(idx, k):
            y = (idx * 7 + k) % 101 - 50
            keep = y > thr
            n = keep.sum(dtype=torch.int32)
            data = y[torch.argsort((~keep).to(torch.int8), stable=True)]
            cr.enqueue(data, n)
            return n

        return step

    def expected(k):
        y = ((np.arange(n_rows, dtype=np.float64) * 7 + k) % 101 - 50).astype(np.float32)
        return y[y > thr]

    k_of = lambda i: float((i * 37) % 1000)
    idx = torch.arange(n_rows, device=dev, dtype=torch.float32)
    res = {}

    fg = dict(steps_wanted=steps, steps=0, mismatched_steps=0, error=None)
    try:
        torch._dynamo.reset()
        fg["graph_breaks"] = torch._dynamo.explain(step_for(CompiledReadback(n_rows, dtype=torch.float32, graphs=False)))(
            idx, torch.zeros((), device=dev)).graph_break_count
        eager_cr = CompiledReadback(n_rows, dtype=torch.float32, graphs=False)
        comp_cr = CompiledReadback(n_rows, dtype=torch.float32, graphs=False)
        eager, compiled = step_for(eager_cr), torch.compile(step_for(comp_cr), fullgraph=True)
        dts = []
        for i in range(steps):
            k = torch.full((), k_of(i), device=dev)
            eager(idx, k)
            t0 = time.perf_counter_ns()
            compiled(idx, k)
            dts.append((time.perf_counter_ns() - t0) / 1e3)
            want = expected(k_of(i))
            with eager_cr.next(timeout=60) as a, comp_cr.next(timeout=60) as b:
                same = a.count == b.count == len(want) and np.array_equal(a.numpy(), b.numpy()) and np.array_equal(b.numpy(), want)
            fg["steps"] += 1
            fg["mismatched_steps"] += not same
        fg["step_us_p50"] = round(summary(dts[10:])["p50"], 2)
    except Exception as e:
        fg["error"] = f"{type(e).__name__}: {e}"
    res["fullgraph"] = fg

    ro = dict(steps_wanted=steps, steps=0, wrong_replays=0, error=None)
    try:
        import torch._inductor.config as iconfig

        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        cr = CompiledReadback(n_rows, dtype=torch.float32, slots=4)
        with iconfig.patch({"triton.cudagraph_or_error": True}):
            step = torch.compile(step_for(cr), fullgraph=True, mode="reduce-overhead")
            dts = []
            for i in range(steps):
                k = torch.full((), k_of(i), device=dev)
                t0 = time.perf_counter_ns()
                step(idx, k)
                dts.append((time.perf_counter_ns() - t0) / 1e3)
                want = expected(k_of(i))
                with cr.next(timeout=60) as out:
                    ok = out.count == len(want) and np.array_equal(out.numpy(), want)
                ro["steps"] += 1
                ro["wrong_replays"] += not ok
        ro["cudagraph_skips"] = int(torch._dynamo.utils.counters["inductor"]["cudagraph_skips"])
        ro["recordings"] = cr.recordings
        ro["graph_readouts"] = cr.graph.next_seq - 1
        ro["overruns"] = cr.graph.last_overrun
        ro["step_us_p50"] = round(summary(dts[10:])["p50"], 2)
        torch.cuda.synchronize()
        cr.close()
    except Exception as e:
        ro["error"] = f"{type(e).__name__}: {e}"
    res["reduce_overhead"] = ro
    print(f"  torch.compile: fullgraph {fg}; reduce-overhead {ro}", file=sys.stderr)
    return res
