"""Benchmark of sized_readback in PyTorch against what PyTorch offers, in one run.

Latency: host clock from before the producer's launch to the host holding the count and the
data, with Python overhead included, f64 data, capacity 1M (`--capacity`). Every approach runs
the same producer (one elementwise kernel writes the data, one reduction of a device mask writes
the count) and every cycle's result is checked against the host's expectation:

- ``item_pinned``: ``n = count.item()`` (a synchronization), then ``data[:n]`` copied with
  ``non_blocking=True`` into a pinned buffer, then a stream synchronization;
- ``mask_cpu``: ``data[mask].cpu()`` (PyTorch synchronizes for the count inside);
- ``nonzero_static``: ``data[torch.nonzero_static(mask, size=capacity)]`` and the count copied
  into pinned memory, one event: no synchronization before the copy, but it copies ``size``
  rows whatever the count and truncates silently when the count exceeds ``size``;
- ``sized_readback``: ``rb.enqueue(data, count)``, ``ticket.wait()``, ``out.numpy()`` (the
  default mapped transport); ``sized_readback_auto`` the same with ``transport="auto"``, and
  ``sized_readback_staged`` (at n = capacity) with the staged transport.

The binding's own cost is measured on an idle stream, interleaved in one run: ``rb.enqueue(x,
count)``, the same enqueue through ``rb._enqueue_raw`` on pre-read addresses, and one
``x.add_(1)`` (the cost of launching one PyTorch kernel from Python).

``torch.compile``: a step that enqueues a readback through ``sized_readback.torch_ops``
compiled with ``fullgraph=True`` (graph breaks counted, 1,000 steps compared with eager) and
with ``mode="reduce-overhead"`` (CUDA graphs: 1,000 replays, each readout checked,
``cudagraph_skips`` counted).

Approaches run interleaved (one cycle of each in turn), after a warm-up. The seed's loop
(shared/seed: two compute streams, a copy stream, the readback of cycle k-1 while kernel k runs,
then CPU work) is timed in cycles per second with ``count.item()`` (the seed's Solution 1) and
with this library.

    python python/bench/bench.py                      # table on stdout, JSON under results/python/
    python python/bench/bench.py --quick --out /tmp/b.json
    python python/bench/bench.py --parts binding,compile      # some parts only
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import gc
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def summary(xs):
    if not xs:
        return dict(samples=0, p50=0.0, p99=0.0, mean=0.0, min=0.0, max=0.0)
    v = np.sort(np.asarray(xs, dtype=np.float64))
    rank = lambda q: float(v[min(len(v) - 1, max(0, int(np.ceil(q * len(v))) - 1))])  # nearest rank
    return dict(samples=len(v), p50=float(np.median(v)), p99=rank(0.99), mean=float(v.mean()), min=float(v[0]), max=float(v[-1]))


def size_name(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return str(n)


def commit():
    for var in ("SRB_COMMIT", "GIT_COMMIT", "COMMIT"):
        if os.environ.get(var):
            return os.environ[var]
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return None


def driver_version():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
            return f"{v.value // 1000}.{v.value % 1000 // 10}"
    except OSError:
        pass
    return None


def machine(torch, srb):
    p = torch.cuda.get_device_properties(0)
    cpu = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    smi = None
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        ).stdout.strip() or None
    except Exception:
        pass
    return dict(
        gpu=torch.cuda.get_device_name(0),
        compute_capability=f"{p.major}.{p.minor}",
        multiprocessors=p.multi_processor_count,
        cuda_driver_api=driver_version(),
        nvidia_smi=smi,
        torch=torch.__version__,
        torch_cuda=torch.version.cuda,
        python=platform.python_version(),
        numpy=np.__version__,
        sized_readback=srb.__version__,
        kernel_targets=srb.KERNEL_TARGETS,
        host_cpus=os.cpu_count(),
        host_cpu_model=cpu,
    )


class Target(dict):
    @staticmethod
    def make(name, measured, limit, comparison, detail, why=None):
        holds = measured <= limit if comparison == "<=" else measured >= limit
        if holds:
            miss = 0.0
        elif limit == 0:  # a count that must be zero: missed by the count itself
            miss = float(measured)
        else:
            miss = measured / limit - 1.0 if comparison == "<=" else 1.0 - measured / limit
        return Target(name=name, measured=measured, limit=limit, comparison=comparison, holds=holds, miss_by=miss, detail=detail, why=None if holds else why)


def p50(point, a):
    return point["approaches"][a]["latency_us"]["p50"]


def targets_of(sweep, loops, binding, compiled, cap, kernel_us, cpu_us, auto_staged_from):
    """The targets (Target records) of one run's measurements."""
    small = [p for p in sweep if p["n"] <= 4096]
    big = [p for p in sweep if p["n"] == cap]
    targets = []

    def failed(points, names, label, limit, comparison):
        missing = [(p["n"], a) for p in points for a in names if not p["approaches"][a]["latency_us"]["samples"]]
        if missing:
            errs = "; ".join(f"n={size_name(n)} {a}: {next(p for p in points if p['n'] == n)['approaches'][a]['error']}" for n, a in missing)
            targets.append(Target.make(label, float("inf") if comparison == "<=" else 0.0, limit, comparison, "no samples", f"an approach failed: {errs}"))
        return bool(missing)

    def cost_of(p):
        a = p["approaches"]["sized_readback"]
        return (f"enqueue {a['enqueue_us']['p50']:.1f} µs of host time, wait + view {a['wait_us']['p50']:.1f}")

    # Latency beyond the producer at small n: what each approach adds to the producer alone.
    label = "n 1..4096, cap 1M: (sized_readback - producer alone) / (count.item() + pinned copy - producer alone), p50 (worst n)"
    if small and not failed(small, ("sized_readback", "item_pinned", "producer_only"), label, 0.5, "<="):
        rows = []
        for p in small:
            prod = p50(p, "producer_only")
            rows.append(((p50(p, "sized_readback") - prod) / max(1e-9, p50(p, "item_pinned") - prod), p))
        worst, wp = max(rows, key=lambda r: r[0])
        detail = "; ".join(
            f"n={size_name(p['n'])}: ({p50(p, 'sized_readback'):.2f} - {p50(p, 'producer_only'):.2f}) / ({p50(p, 'item_pinned'):.2f} - {p50(p, 'producer_only'):.2f}) = {r:.3f}"
            for r, p in rows
        )
        prod = p50(wp, "producer_only")
        why = (
            f"at n={size_name(wp['n'])}: producer alone {prod:.1f} µs p50, sized_readback {p50(wp, 'sized_readback'):.1f} ({cost_of(wp)}), "
            f"count.item() + pinned copy {p50(wp, 'item_pinned'):.1f}: the target leaves {0.5 * (p50(wp, 'item_pinned') - prod):.1f} µs beyond the producer "
            f"for the enqueue, the pack and the wait; see the binding section for the enqueue's own cost"
        )
        targets.append(Target.make(label, worst, 0.5, "<=", detail, why))

    # At 1M: the transport="auto" readback (staged once the count fills the slot) against the copy.
    label = "n 1M, cap 1M: sized_readback (transport='auto') p50 / (count.item() + pinned copy) p50"
    if big and not failed(big, ("sized_readback_auto", "item_pinned", "producer_only"), label, 1.0, "<="):
        wp = big[0]
        ratio = p50(wp, "sized_readback_auto") / p50(wp, "item_pinned")
        mb = wp["n"] * 8 / 1e6
        rate = lambda a: mb * 1e-3 / max(1e-9, (p50(wp, a) - p50(wp, "producer_only")) * 1e-6)
        rates = {a: rate(a) for a in ("sized_readback", "sized_readback_staged", "sized_readback_auto", "item_pinned")
                 if wp["approaches"].get(a, {}).get("latency_us", {}).get("samples")}
        detail = (
            f"{p50(wp, 'sized_readback_auto'):.1f} / {p50(wp, 'item_pinned'):.1f} µs; mapped {p50(wp, 'sized_readback'):.1f}, "
            + (f"staged {p50(wp, 'sized_readback_staged'):.1f}; " if "sized_readback_staged" in rates else "")
            + f"auto took {wp.get('auto_transports')}; beyond the producer: "
            + ", ".join(f"{a} {r:.1f} GB/s" for a, r in rates.items())
        )
        why = (f"{mb:.1f} MB cross the bus either way; count.item() + copy uses the copy engine after a synchronization; "
               f"auto goes staged (a device slot and one copy; at this fill the sized copy takes its top class, the whole slot) from {auto_staged_from} rows: if mapped beats staged here, raise "
               f"AUTO_STAGED_MIN_FILL (python/src/readback.rs)")
        targets.append(Target.make(label, ratio, 1.0, "<=", detail, why))

    if binding:
        b = binding["p50_us"]
        over = b["enqueue"] - b["enqueue_raw"]
        targets.append(Target.make(
            "binding overhead: p50 rb.enqueue(x, count) - p50 rb._enqueue_raw(pre-read addresses), idle stream, same run (µs)",
            over, 1.5, "<=",
            f"enqueue {b['enqueue']:.2f} µs, _enqueue_raw {b['enqueue_raw']:.2f}, x.add_(1) {b['add_']:.2f}; wait + view {b['wait_view']:.2f}",
            "the difference is reading two tensors through PyTorch's accessors and its current stream; python/bench/profile_binding.py breaks it down",
        ))
        targets.append(Target.make(
            "binding: p50 rb.enqueue(x, count) / p50 x.add_(1), idle stream, same run",
            b["enqueue"] / b["add_"], 1.0, "<=",
            f"enqueue {b['enqueue']:.2f} µs, x.add_(1) {b['add_']:.2f} µs",
            "the core's enqueue (its pointer, stream and capture checks, the launch and the slot's event) is in both; see profile_binding.py",
        ))

    if loops:
        cps = lambda mode: float(np.median([r["cycles_per_s"] for r in loops if r["approach"] == mode]))
        loop_ratio = cps("sized_readback") / cps("sync")
        targets.append(
            Target.make(
                f"seed loop in PyTorch (kernel {kernel_us:g} µs, CPU {cpu_us:g} µs): sized_readback / sync cycles per s (median of 3)",
                loop_ratio,
                1.9,
                ">=",
                f"{cps('sized_readback'):.0f} / {cps('sync'):.0f} cycles per s",
                f"per cycle: sync {1e6 / cps('sync'):.0f} µs, sized_readback {1e6 / cps('sized_readback'):.0f} µs, kernel {kernel_us:g} µs on two "
                f"streams (two kernels can overlap only when the host launches the next one before the previous finishes)",
            )
        )

    if compiled:
        fg, ro = compiled["fullgraph"], compiled["reduce_overhead"]
        bad = fg.get("graph_breaks", 1) + fg.get("mismatched_steps", fg.get("steps_wanted", 1)) + (0 if fg.get("error") is None else 1)
        targets.append(Target.make(
            f"torch.compile(fullgraph=True) step with a readback: graph breaks + steps differing from eager, over {fg.get('steps_wanted')} steps",
            float(bad), 0.0, "<=",
            f"graph breaks {fg.get('graph_breaks')}, steps compared {fg.get('steps')}, differing {fg.get('mismatched_steps')}, step p50 {fg.get('step_us_p50')} µs",
            f"error: {fg.get('error')}",
        ))
        bad = ro.get("wrong_replays", ro.get("steps_wanted", 1)) + ro.get("cudagraph_skips", 1) + (0 if ro.get("error") is None else 1)
        bad += 0 if ro.get("recordings") == 1 else 1
        targets.append(Target.make(
            f"torch.compile(mode='reduce-overhead') step with a readback: wrong readouts + cudagraph skips, over {ro.get('steps_wanted')} replays each checked",
            float(bad), 0.0, "<=",
            f"steps {ro.get('steps')}, replays read {ro.get('graph_readouts')}, wrong {ro.get('wrong_replays')}, cudagraph_skips {ro.get('cudagraph_skips')}, "
            f"recordings {ro.get('recordings')}, step p50 {ro.get('step_us_p50')} µs",
            f"error: {ro.get('error')}",
        ))
    return targets


def binding_costs(torch, srb, dev, args):
    """Host time of one call, on an idle stream, interleaved in one run: rb.enqueue(x, count),
    the same enqueue on pre-read addresses (rb._enqueue_raw), one x.add_(1); and ticket.wait()
    + out.numpy() of a complete readback."""
    x = torch.zeros(4096, device=dev, dtype=torch.float64)
    cnt = torch.full((), 100, dtype=torch.int32, device=dev)
    rb = srb.Readback(4096, dtype=torch.float64, slots=2)
    stream = torch.cuda.current_stream()
    raw = ([x.data_ptr()], [x.shape[0]], cnt.data_ptr(), "int32", stream.cuda_stream)
    ev = torch.cuda.Event()
    times = {"enqueue": [], "enqueue_raw": [], "add_": [], "wait_view": []}
    ns = time.perf_counter_ns

    def enqueue():
        t0 = ns()
        t = rb.enqueue(x, cnt)
        t1 = ns()
        t.wait().release()
        return t1 - t0

    def enqueue_raw():
        t0 = ns()
        t = rb._enqueue_raw(*raw)
        t1 = ns()
        t.wait().release()
        return t1 - t0

    def add_():
        t0 = ns()
        x.add_(1)
        t1 = ns()
        ev.record(stream)
        ev.synchronize()
        return t1 - t0

    def wait_view():
        t = rb.enqueue(x, cnt)
        ev.record(stream)
        ev.synchronize()  # complete before the clock starts: the host's share alone
        t0 = ns()
        out = t.wait()
        v = out.numpy()
        t1 = ns()
        assert len(v) == 100
        del v
        out.release()
        return t1 - t0

    calls = [("enqueue", enqueue), ("enqueue_raw", enqueue_raw), ("add_", add_), ("wait_view", wait_view)]
    torch.cuda.synchronize()
    gc.disable()
    try:
        for i in range(args.warmup + args.binding_reps):
            for name, f in calls[i % len(calls):] + calls[: i % len(calls)]:
                dt = f() / 1e3
                if i >= args.warmup:
                    times[name].append(dt)
            if i % 256 == 0:
                gc.collect()
    finally:
        gc.enable()
    stats = {k: summary(v) for k, v in times.items()}
    p50s = {k: v["p50"] for k, v in stats.items()}
    print("  binding p50 µs: " + ", ".join(f"{k} {v:.2f}" for k, v in p50s.items()), file=sys.stderr)
    return dict(p50_us=p50s, stats_us=stats, n=100, rows=4096)


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "python" / "bench.json", help="JSON path (a .md table is written beside it)")
    ap.add_argument("--capacity", type=int, default=1 << 20)
    ap.add_argument("--sizes", default="1,16,256,4096,65536,1048576")
    ap.add_argument("--reps", type=int, default=2000, help="timed cycles per approach and size (a quarter of it at n >= 256K)")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--loop-cycles", type=int, default=600)
    ap.add_argument("--kernel-us", type=float, default=200.0, help="seed loop: kernel time")
    ap.add_argument("--cpu-us", type=float, default=5.0, help="seed loop: host work per cycle")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    ap.add_argument("--parts", default="binding,sweep,seed,compile", help="comma-separated: binding, sweep, seed, compile")
    ap.add_argument("--binding-reps", type=int, default=5000)
    ap.add_argument("--compile-steps", type=int, default=1000)
    ap.add_argument("--own-stream", action="store_true", help="run on a stream of its own instead of PyTorch's default (legacy NULL) stream")
    args = ap.parse_args(argv)
    if args.quick:
        args.reps, args.warmup, args.loop_cycles, args.binding_reps = 200, 20, 100, 500
    parts = set(args.parts.split(","))

    import torch

    import sized_readback as srb

    if not torch.cuda.is_available():
        sys.exit("bench.py: PyTorch sees no CUDA device")
    started = time.perf_counter()
    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    if args.own_stream:
        torch.cuda.set_stream(torch.cuda.Stream())
    cap = args.capacity
    sizes = [int(s) for s in args.sizes.split(",")]
    f64 = torch.float64

    src = torch.arange(cap, device=dev, dtype=f64)
    src_h = np.arange(cap, dtype=np.float64)
    data = torch.empty(cap, device=dev, dtype=f64)
    idx = torch.arange(cap, device=dev)
    masks = {n: idx < n for n in sizes}
    pinned = torch.empty(cap, dtype=f64, pin_memory=True)
    count_pinned = torch.empty((), dtype=torch.int32, pin_memory=True)
    ev = torch.cuda.Event()
    rb = srb.Readback(cap, dtype=f64, slots=2)
    rb_staged = srb.Readback(cap, dtype=f64, slots=2, transport="staged")
    rb_auto = srb.Readback(cap, dtype=f64, slots=2, transport="auto")
    stream = torch.cuda.current_stream()
    torch.cuda.synchronize()

    def produce(k, n):
        torch.add(src, k, out=data)
        return masks[n].sum(dtype=torch.int32)

    def check(host, m, n, k):
        if m != n or len(host) != n:
            return False
        if n <= 65536:
            return bool(np.array_equal(host, src_h[:n] + k))
        pick = np.r_[0, n - 1, np.random.default_rng(int(k) % 1000).integers(0, n, 64)]
        return bool(np.array_equal(host[pick], src_h[pick] + k))

    # Each returns (µs, correct, extra) for one cycle; extra holds component timings.
    def producer_only(n, k):
        t0 = time.perf_counter_ns()
        produce(k, n)
        ev.record(stream)
        ev.synchronize()
        return (time.perf_counter_ns() - t0) / 1e3, True, None

    def item_pinned(n, k):
        t0 = time.perf_counter_ns()
        count = produce(k, n)
        m = int(count.item())
        pinned[:m].copy_(data[:m], non_blocking=True)
        stream.synchronize()
        t1 = time.perf_counter_ns()
        return (t1 - t0) / 1e3, check(pinned[:m].numpy(), m, n, k), None

    def mask_cpu(n, k):
        t0 = time.perf_counter_ns()
        produce(k, n)
        h = data[masks[n]].cpu()
        t1 = time.perf_counter_ns()
        return (t1 - t0) / 1e3, check(h.numpy(), h.numel(), n, k), None

    nz_ok = hasattr(torch, "nonzero_static")

    def nonzero_static(n, k):
        t0 = time.perf_counter_ns()
        count = produce(k, n)
        rows = data[torch.nonzero_static(masks[n], size=cap).squeeze(1)]  # size rows, -1 pads
        pinned.copy_(rows, non_blocking=True)
        count_pinned.copy_(count, non_blocking=True)
        ev.record(stream)
        ev.synchronize()
        t1 = time.perf_counter_ns()
        m = int(count_pinned)
        return (t1 - t0) / 1e3, check(pinned[: min(m, cap)].numpy(), m, n, k), None

    def library(n, k):
        t0 = time.perf_counter_ns()
        count = produce(k, n)
        t1 = time.perf_counter_ns()
        ticket = rb.enqueue(data, count)
        t2 = time.perf_counter_ns()
        out = ticket.wait()
        view = out.numpy()
        t3 = time.perf_counter_ns()
        ok = check(view, out.count, n, k)
        del view
        out.release()
        return (t3 - t0) / 1e3, ok, ((t2 - t1) / 1e3, (t3 - t2) / 1e3)

    def library_staged(n, k):  # informational: a device slot, then one capacity-sized copy
        t0 = time.perf_counter_ns()
        count = produce(k, n)
        out = rb_staged.enqueue(data, count).wait()
        view = out.numpy()
        t1 = time.perf_counter_ns()
        ok = check(view, out.count, n, k)
        del view
        out.release()
        return (t1 - t0) / 1e3, ok, None

    auto_took = {}

    def library_auto(n, k):
        t0 = time.perf_counter_ns()
        count = produce(k, n)
        ticket = rb_auto.enqueue(data, count)
        out = ticket.wait()
        view = out.numpy()
        t1 = time.perf_counter_ns()
        auto_took[ticket.transport] = auto_took.get(ticket.transport, 0) + 1
        ok = check(view, out.count, n, k)
        del view
        out.release()
        return (t1 - t0) / 1e3, ok, None

    approaches = {"producer_only": producer_only, "item_pinned": item_pinned, "mask_cpu": mask_cpu, "sized_readback": library}
    if nz_ok:
        approaches["nonzero_static"] = nonzero_static
    approaches["sized_readback_staged"] = library_staged
    approaches["sized_readback_auto"] = library_auto
    order = list(approaches)

    # --- the binding's own cost, on an idle stream -------------------------------------------
    binding = binding_costs(torch, srb, dev, args) if "binding" in parts else None

    sweep = []
    gc.disable()
    try:
        k = 0
        for n in (sizes if "sweep" in parts else []):
            reps = args.reps if n < (1 << 18) else max(50, args.reps // 4)
            samples = {a: [] for a in order}
            correct = {a: 0 for a in order}
            errors = {}
            enq, wait = [], []
            for rep in range(args.warmup + reps):
                rot = order[rep % len(order):] + order[: rep % len(order)]
                for a in rot:
                    if a in errors or (a == "sized_readback_staged" and n != cap):
                        continue
                    k += 1
                    try:
                        us, ok, extra = approaches[a](n, float(k % 4096))
                    except Exception as e:  # e.g. nonzero_static unsupported here
                        errors[a] = f"{type(e).__name__}: {e}"
                        continue
                    if rep >= args.warmup:
                        samples[a].append(us)
                        correct[a] += ok
                        if extra:
                            enq.append(extra[0])
                            wait.append(extra[1])
                if rep % 64 == 0:
                    gc.collect()
            point = dict(capacity=cap, n=n, approaches={}, auto_transports=dict(auto_took))
            auto_took.clear()
            for a in order:
                point["approaches"][a] = dict(latency_us=summary(samples[a]), correct=correct[a], checked=len(samples[a]), error=errors.get(a))
            point["approaches"]["sized_readback"]["enqueue_us"] = summary(enq)
            point["approaches"]["sized_readback"]["wait_us"] = summary(wait)
            sweep.append(point)
            print(f"  n={size_name(n)}: " + ", ".join(f"{a} {point['approaches'][a]['latency_us']['p50']:.1f}" for a in order if samples[a]), file=sys.stderr)
    finally:
        gc.enable()

    # --- the seed's loop ---------------------------------------------------------------------
    def calibrate_sleep():
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1_000_000)
        s.record()
        torch.cuda._sleep(10_000_000)
        e.record()
        e.synchronize()
        return 10_000_000 / (s.elapsed_time(e) * 1e3)  # cycles per µs

    cycles_per_us = calibrate_sleep() if "seed" in parts else 0.0
    N = 1000

    def seed_loop(mode, cycles):
        compute = [torch.cuda.Stream(), torch.cuda.Stream()]
        copy = torch.cuda.Stream()
        done = [torch.cuda.Event(), torch.cuda.Event()]
        copy_done = torch.cuda.Event()
        buf = [torch.zeros(N, device=dev, dtype=f64) for _ in range(2)]
        cnt = [torch.zeros((), device=dev, dtype=torch.int32) for _ in range(2)]
        base = torch.arange(N, device=dev, dtype=f64)
        h = torch.empty(N, dtype=f64, pin_memory=True)
        loop_rb = srb.Readback(N, dtype=f64, slots=2)
        sleep = int(args.kernel_us * cycles_per_us)
        n_of = lambda k: N - 1 - (k % 7)  # the count changes every cycle, as in the seed

        def kernel(k):
            s = compute[k % 2]
            with torch.cuda.stream(s):
                torch.cuda._sleep(sleep)
                torch.add(base, float(k), out=buf[k % 2])
                cnt[k % 2].fill_(n_of(k))
                done[k % 2].record(s)

        def cpu_work(k, host, n):
            t_end = time.perf_counter_ns() + args.cpu_us * 1e3
            ok = n == n_of(k) and host[0] == k and host[n - 1] == n - 1 + k
            while time.perf_counter_ns() < t_end:
                pass
            return ok

        torch.cuda.synchronize()
        good = 0
        t0 = time.perf_counter()
        kernel(0)
        for k in range(1, cycles + 1):
            b = (k - 1) % 2
            if mode == "sync":
                with torch.cuda.stream(copy):
                    copy.wait_event(done[b])
                    n = int(cnt[b].item())  # the seed's Solution 1: the host waits here
                    h[:n].copy_(buf[b][:n], non_blocking=True)
                    copy_done.record(copy)
                if k < cycles:
                    kernel(k)
                copy_done.synchronize()
                good += cpu_work(k - 1, h.numpy(), n)
            else:
                copy.wait_event(done[b])
                ticket = loop_rb.enqueue(buf[b], cnt[b], stream=copy)
                if k < cycles:
                    kernel(k)  # starts at once: nothing waited for the count
                out = ticket.wait()
                good += cpu_work(k - 1, out.numpy(), out.count)
                out.release()
        seconds = time.perf_counter() - t0
        torch.cuda.synchronize()
        return dict(approach=mode, kernel_us=args.kernel_us, cpu_us=args.cpu_us, cycles=cycles, seconds=seconds, cycles_per_s=cycles / seconds, correct=good)

    loops = []
    if "seed" in parts:
        gc.disable()
        try:
            seed_loop("sync", 20)
            seed_loop("sized_readback", 20)  # warm-up
            for rep in range(3):
                for mode in ("sync", "sized_readback"):
                    loops.append(seed_loop(mode, args.loop_cycles))
        finally:
            gc.enable()

    compiled = compile_checks(torch, dev, args.compile_steps) if "compile" in parts else None

    # --- targets -----------------------------------------------------------------------------
    targets = targets_of(sweep, loops, binding, compiled, cap, args.kernel_us, args.cpu_us, rb_auto.auto_staged_from)
    informational = []
    for p in sweep:
        for base in ("mask_cpu", "nonzero_static"):
            if base in p["approaches"] and p["approaches"][base]["latency_us"]["samples"]:
                informational.append(
                    dict(n=p["n"], versus=base, ratio=p50(p, "sized_readback") / p50(p, base))
                )

    out = dict(
        date=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        commit=commit(),
        command=" ".join([Path(sys.executable).name] + sys.argv),
        machine=machine(torch, srb),
        settings=dict(own_stream=args.own_stream, capacity=cap, sizes=sizes, reps=args.reps, warmup=args.warmup, loop_cycles=args.loop_cycles, kernel_us=args.kernel_us, cpu_us=args.cpu_us, sleep_cycles_per_us=cycles_per_us),
        binding=binding,
        sweep=sweep,
        seed_loop=loops,
        torch_compile=compiled,
        ratios_versus_other_baselines=informational,
        targets=targets,
        notes=[
            "latency: host clock (time.perf_counter_ns) from before the producer's launch to the host holding count and data (a numpy view for sized_readback, the pinned or CPU tensor otherwise); Python overhead included",
            "producer (every approach): torch.add(src, k, out=data) over the capacity, then mask.sum(dtype=torch.int32) of a device mask of n True values; producer_only is that plus one event synchronization",
            "nonzero_static copies `size` (= capacity) rows every cycle whatever the count, and truncates silently when the count exceeds size: it cannot report more rows than it was sized for",
            "approaches run interleaved, one cycle each in turn; the garbage collector is off while timing",
            "sized_readback_staged (n = capacity only): the staged transport, a device-side slot and one capacity-sized copy; sized_readback_auto: transport='auto', which goes staged when the last count filled the slot (auto_transports counts what it took at each n)",
            "binding: on an idle stream (each timed call starts after the previous readback was waited for), interleaved: rb.enqueue(x, count), rb._enqueue_raw on pre-read addresses, x.add_(1); x is 4K f64",
            "every cycle is checked against the host's expectation (every element up to n = 64K, 66 sampled elements above)",
        ],
        elapsed_s=time.perf_counter() - started,
    )

    table = render(out, order)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # NumPy scalars (counts, sums) as the Python numbers they hold.
    as_json = lambda o: o.item() if isinstance(o, np.generic) else str(o)
    args.out.write_text(json.dumps(out, indent=2, default=as_json) + "\n")
    args.out.with_suffix(".md").write_text(table)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}", file=sys.stderr)
    # A missed target is a measurement (holds: false in the JSON), not a failure of the run;
    # a wrong readout is.
    misses = [t["name"] for t in targets if not t["holds"]]
    if misses:
        print(f"bench.py: {len(misses)} target(s) missed, recorded in the JSON: {'; '.join(misses)}", file=sys.stderr)
    wrong = [f"{a} at n={p['n']}" for p in out["sweep"] for a, r in p["approaches"].items()
             if r["correct"] != r["checked"]]
    wrong += [f"seed loop {r['approach']}" for r in out["seed_loop"] if r["correct"] != r["cycles"]]
    tc = out["torch_compile"] or {}
    if tc.get("fullgraph", {}).get("mismatched_steps"):
        wrong.append("torch.compile fullgraph")
    if tc.get("reduce_overhead", {}).get("wrong_replays"):
        wrong.append("torch.compile reduce-overhead")
    if wrong:
        print(f"bench.py: wrong readouts: {', '.join(wrong)}", file=sys.stderr)
    return 1 if wrong else 0


def render(out, order):
    m = out["machine"]
    lines = [
        f"# sized_readback in PyTorch: {out['date']}, {m['gpu']} (sm_{m['compute_capability'].replace('.', '')}), driver {m['cuda_driver_api']}, torch {m['torch']}, commit {out['commit']}",
        "",
        f"p50 µs (p99) from the producer's launch to the host holding count and data, f64, capacity {size_name(out['settings']['capacity'])}; every cycle checked.",
        "",
        "| n | " + " | ".join(order) + " |",
        "|---:|" + "---:|" * len(order),
    ]
    for p in out["sweep"]:
        cells = []
        for a in order:
            r = p["approaches"][a]
            if r["error"] or not r["latency_us"]["samples"]:
                cells.append("n/a" if r["error"] else "")
                continue
            s = r["latency_us"]
            bad = "" if r["correct"] == r["checked"] else f" ({r['checked'] - r['correct']} wrong)"
            cell = f"{s['p50']:.1f} ({s['p99']:.1f}){bad}"
            cells.append(f"**{cell}**" if a == "sized_readback" else cell)
        lines.append(f"| {size_name(p['n'])} | " + " | ".join(cells) + " |")
    if out.get("binding"):
        b = out["binding"]["p50_us"]
        lines += ["", "Binding, host µs p50 on an idle stream: " + ", ".join(f"{k} {v:.2f}" for k, v in b.items())]
    lines += ["", "Seed loop (cycles per second):", "", "| approach | kernel µs | CPU µs | cycles/s | correct |", "|---|---:|---:|---:|---:|"]
    for r in out["seed_loop"]:
        lines.append(f"| {r['approach']} | {r['kernel_us']:g} | {r['cpu_us']:g} | {r['cycles_per_s']:.0f} | {r['correct']}/{r['cycles']} |")
    if out.get("torch_compile"):
        for mode, r in out["torch_compile"].items():
            lines.append(f"\ntorch.compile {mode}: " + ", ".join(f"{k}={v}" for k, v in r.items()))
    lines += ["", "| target | measured | limit | holds |", "|---|---:|---:|---|"]
    for t in out["targets"]:
        lines.append(f"| {t['name']} | {t['measured']:.3f} | {t['comparison']} {t['limit']} | {'yes' if t['holds'] else 'NO'} |")
    for t in out["targets"]:
        if not t["holds"]:
            lines.append(f"\n- missed by {t['miss_by'] * 100:.1f}%: {t['name']}: {t['why']}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
