"""Where the host time of one ``rb.enqueue(x, count)`` and one ``ticket.wait()`` + ``numpy()``
goes, phase by phase (see python/PERF.md).

On a GPU (PyTorch): the phases timed inside the binding by ``Readback._profile`` (context
save/restore, the sweep of dropped tickets, reading the arrays and the stream, PyTorch's
current stream alone, binding the context and ordering after producers, the core's enqueue,
the ticket object, and one ``cuEventRecord`` for reference), beside the whole calls timed from
Python: ``rb.enqueue``, ``rb._enqueue_raw`` on pre-read addresses, ``x.add_(1)``, and the wait
and view of a complete readback; the Python-to-native call itself is what the whole call has
beyond the sum of its phases. Each enqueue is timed twice: on an idle stream, and right after
the benchmark's producer (a 1M-element write and a mask's count) was launched, as in
bench.py's latency loop.

Without a GPU (``--mock``): what runs without a driver, with mock arrays that have a
``__cuda_array_interface__``: reading them as an enqueue does (``_parse_inputs``), stream
objects, numpy views of a readout over host memory; plus a cProfile of the same loop.

    python python/bench/profile_binding.py                 # GPU: table on stdout, JSON with --out
    python python/bench/profile_binding.py --mock          # anywhere
"""

import argparse
import cProfile
import gc
import io
import json
import pstats
import sys
import time
from pathlib import Path

import numpy as np


def p50_ns(f, reps, warmup=200):
    ts = []
    for i in range(warmup + reps):
        t0 = time.perf_counter_ns()
        f()
        dt = time.perf_counter_ns() - t0
        if i >= warmup:
            ts.append(dt)
    return float(np.median(ts))


class MockCAI:
    """A device array as CuPy and Numba present one: the interface is a property of the class."""

    def __init__(self, shape, typestr, ptr, stream=None):
        self.shape, self.typestr, self.ptr, self.stream = shape, typestr, ptr, stream

    @property
    def __cuda_array_interface__(self):
        d = dict(shape=self.shape, typestr=self.typestr, data=(self.ptr, False), strides=None, version=3)
        if self.stream is not None:
            d["stream"] = self.stream
        return d


class InstanceCAI:
    """The interface as an instance attribute (the per-type cache cannot tell: probed)."""

    def __init__(self, shape, typestr, ptr):
        self.__cuda_array_interface__ = dict(shape=shape, typestr=typestr, data=(ptr, False), strides=None, version=3)


class MockStream:
    def __init__(self, h):
        self.h = h

    @property
    def cuda_stream(self):
        return self.h


def mock(reps):
    from sized_readback import _native

    data = MockCAI((4096,), "<f8", 0x7F00_0000_0000)
    count = MockCAI((), "<i4", 0x7F00_0001_0000)
    idata = InstanceCAI((4096,), "<f8", 0x7F00_0000_0000)
    icount = InstanceCAI((), "<i4", 0x7F00_0001_0000)
    s = MockStream(0x5000)
    host = np.arange(4096, dtype=np.float64)
    out = _native._host_readout([host], 100, dtype="f8")
    res = {}
    if hasattr(_native, "_time_parse"):  # timed inside the binding: the enqueue's own reading
        res["inside_parse_cai_class_interface_ns"] = _native._time_parse(data, count, reps=reps)
        res["inside_parse_cai_stream_obj_ns"] = _native._time_parse(data, count, stream=s, reps=reps)
        res["inside_parse_cai_instance_interface_ns"] = _native._time_parse(idata, icount, reps=reps)
    res |= {
        # From Python through the test hook, which also parses the dtype on each call.
        "parse_cai_class_interface_ns": p50_ns(lambda: _native._parse_inputs(data, count), reps),
        "parse_cai_class_interface_stream_obj_ns": p50_ns(lambda: _native._parse_inputs(data, count, stream=s), reps),
        "parse_cai_instance_interface_ns": p50_ns(lambda: _native._parse_inputs(idata, icount), reps),
        "stream_handle_obj_ns": p50_ns(lambda: _native._stream_handle(s), reps),
        "stream_handle_int_ns": p50_ns(lambda: _native._stream_handle(0x5000), reps),
        "cai_property_read_python_ns": p50_ns(lambda: data.__cuda_array_interface__, reps),
        "readout_numpy_view_ns": p50_ns(lambda: out.numpy(), reps),
        "np_asarray_of_interface_ns": p50_ns(lambda: np.asarray(_Iface(host)), reps),
        "numpy_c_api": getattr(_native, "_numpy_capi", lambda: False)(),
    }
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(reps):
        _native._parse_inputs(data, count)
        out.numpy()
    pr.disable()
    buf = io.StringIO()
    pstats.Stats(pr, stream=buf).sort_stats("tottime").print_stats(8)
    res["cprofile_top"] = buf.getvalue().strip().splitlines()[-12:]
    return res


class _Iface:
    """What views were made through before: numpy.asarray over an __array_interface__ dict."""

    def __init__(self, a):
        self.__array_interface__ = dict(shape=(100,), typestr="<f8", data=(a.__array_interface__["data"][0], True), strides=None, version=3)


def gpu(reps):
    """The profile on PyTorch's default stream (the legacy NULL stream, where bench.py runs),
    then on a stream of its own: the core treats the legacy stream apart (it waits on the
    slot's event at every reuse of a slot, since the NULL handle says nothing of which stream
    ran the slot's last readback)."""
    import torch

    dev = torch.device("cuda:0")
    torch.cuda.set_device(dev)
    res = {"default_stream": gpu_on(reps)}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        res["own_stream"] = gpu_on(reps)
    torch.cuda.synchronize()
    return res


def gpu_on(reps):
    import torch

    import sized_readback as srb

    dev = torch.device("cuda:0")
    x = torch.zeros(4096, device=dev, dtype=torch.float64)
    cnt = torch.full((), 100, dtype=torch.int32, device=dev)
    rb = srb.Readback(4096, dtype=torch.float64, slots=2)
    stream = torch.cuda.current_stream()
    ev = torch.cuda.Event()
    raw = ([x.data_ptr()], [4096], cnt.data_ptr(), "int32", stream.cuda_stream)
    torch.cuda.synchronize()
    # The benchmark's producer (python/bench/bench.py): 1M f64 written, then a mask's count.
    src = torch.arange(1 << 20, device=dev, dtype=torch.float64)
    big = torch.empty(1 << 20, device=dev, dtype=torch.float64)
    mask = torch.arange(1 << 20, device=dev) < 100

    def producer():
        torch.add(src, 1, out=big)
        mask.sum(dtype=torch.int32)

    gc.disable()
    try:
        inside = rb._profile(x, cnt, reps)
        inside_busy = rb._profile(x, cnt, reps, before=producer)

        def timed(call):
            def once():
                t0 = time.perf_counter_ns()
                t = call()
                dt = time.perf_counter_ns() - t0
                t.wait().release()
                return dt
            return once

        def whole(f):
            ts = [f() for _ in range(reps + 200)][200:]
            return float(np.median(ts))

        def add_once():
            t0 = time.perf_counter_ns()
            x.add_(1)
            dt = time.perf_counter_ns() - t0
            ev.record(stream)
            ev.synchronize()
            return dt

        def wait_parts():
            t = rb.enqueue(x, cnt)
            ev.record(stream)
            ev.synchronize()
            t0 = time.perf_counter_ns()
            out = t.wait()
            t1 = time.perf_counter_ns()
            v = out.numpy()
            t2 = time.perf_counter_ns()
            del v
            out.release()
            return t1 - t0, t2 - t1

        parts = [wait_parts() for _ in range(reps + 200)][200:]
        def busy(call):
            def once():
                producer()
                t0 = time.perf_counter_ns()
                t = call()
                dt = time.perf_counter_ns() - t0
                t.wait().release()
                return dt
            return once

        res = {
            "inside_enqueue_ns": inside,
            "inside_enqueue_behind_producer_ns": inside_busy,
            "enqueue_behind_producer_ns": whole(busy(lambda: rb.enqueue(x, cnt))),
            "enqueue_raw_behind_producer_ns": whole(busy(lambda: rb._enqueue_raw(*raw))),
            "enqueue_ns": whole(timed(lambda: rb.enqueue(x, cnt))),
            "enqueue_raw_ns": whole(timed(lambda: rb._enqueue_raw(*raw))),
            "add_ns": whole(add_once),
            "wait_complete_ns": float(np.median([p[0] for p in parts])),
            "numpy_view_ns": float(np.median([p[1] for p in parts])),
            "torch_current_stream_python_ns": p50_ns(lambda: torch._C._cuda_getCurrentRawStream(0), reps),
            "tensor_data_ptr_python_ns": p50_ns(x.data_ptr, reps),
        }
    finally:
        gc.enable()
    phases = sum(v for k, v in inside.items() if k not in ("reps", "stream_lookup", "event_record"))
    res["enqueue_beyond_phases_ns"] = res["enqueue_ns"] - phases
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mock", action="store_true", help="no GPU: mock arrays and host readouts")
    ap.add_argument("--reps", type=int, default=5000)
    ap.add_argument("--out", type=Path, help="write the result as JSON here")
    args = ap.parse_args(argv)
    res = mock(args.reps) if args.mock else gpu(args.reps)
    show(res, "")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=2) + "\n")
    return 0


def show(res, indent):
    for k, v in res.items():
        if isinstance(v, dict):
            print(f"{indent}{k}:")
            show(v, indent + "  ")
        elif isinstance(v, list):
            print(f"{indent}{k}:")
            for line in v:
                print(f"{indent}  {line}")
        else:
            print(f"{indent}{k:38s} {v:.0f}" if isinstance(v, float) else f"{indent}{k:38s} {v}")


if __name__ == "__main__":
    sys.exit(main())
