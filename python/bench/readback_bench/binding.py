"""The binding's own cost: host time of one call on an idle stream."""

import gc
import sys
import time

from .summary import summary


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
