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
  default mapped transport); ``sized_readback_auto`` the same with ``transport="auto"`` (which
  makes no staged slots at the default capacity: see ``auto_staged_from`` in the output), and
  ``sized_readback_staged`` (at n = capacity) with the staged transport.

The binding's own cost is measured on an idle stream, interleaved in one run: ``rb.enqueue(x,
count)``, the same enqueue through ``rb._enqueue_raw`` on pre-read addresses, and one
``x.add_(1)`` (the cost of launching one PyTorch kernel from Python).

``torch.compile``: a step that enqueues a readback through ``sized_readback.torch_ops``
compiled with ``fullgraph=True`` (graph breaks counted, 1,000 steps compared with eager) and
with ``mode="reduce-overhead"`` (CUDA graphs: 1,000 replays, each readout checked,
``cudagraph_skips`` counted).

Approaches run interleaved (one cycle of each per rep, in a fresh seeded order every rep), after a warm-up. The seed's loop
(shared/seed: two compute streams, a copy stream, the readback of cycle k-1 while kernel k runs,
then CPU work) is timed in cycles per second with ``count.item()`` (the seed's Solution 1) and
with this library.

    python python/bench/bench.py                      # table on stdout, JSON under results/python/
    python python/bench/bench.py --quick --out /tmp/b.json
    python python/bench/bench.py --parts binding,compile      # some parts only
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

# The benchmark's parts, in the package beside this script (importable however it is loaded).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from readback_bench.binding import binding_costs  # noqa: E402
from readback_bench.machine import commit, machine  # noqa: E402
from readback_bench.report import render  # noqa: E402
from readback_bench.summary import size_name, summary  # noqa: E402
from readback_bench.targets import Target, p50, targets_of  # noqa: E402
from readback_bench.torch_compile import compile_checks  # noqa: E402

__all__ = ["Target", "binding_costs", "commit", "compile_checks", "machine", "main", "p50", "render", "size_name", "summary", "targets_of"]

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
            # A fresh order every rep: what a cycle leaves behind (mask_cpu's 8 MiB pageable
            # copy delays the next cycle's host work by about 33 µs at 1M, traced) falls on
            # every approach alike, where a fixed rotation gives each the same predecessor.
            shuffle = random.Random(n).shuffle
            for rep in range(args.warmup + reps):
                rot = list(order)
                shuffle(rot)
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
        settings=dict(own_stream=args.own_stream, capacity=cap, sizes=sizes, reps=args.reps, warmup=args.warmup, loop_cycles=args.loop_cycles, kernel_us=args.kernel_us, cpu_us=args.cpu_us, sleep_cycles_per_us=cycles_per_us, auto_staged_from=rb_auto.auto_staged_from),
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
            "approaches run interleaved, one cycle each per rep in an order shuffled every rep (seeded by n: every run draws the same orders); the garbage collector is off while timing",
            "sized_readback_staged (n = capacity only): the staged transport, a device-side slot and one capacity-sized copy; sized_readback_auto: transport='auto', which goes staged when the last count read back reached settings.auto_staged_from rows (None: no staged slots at this capacity; auto_transports counts what it took at each n)",
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

if __name__ == "__main__":
    sys.exit(main())
