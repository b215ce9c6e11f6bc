#!/usr/bin/env python3
"""Does a free on one thread stall another thread's enqueue?

A readback's drop waits for the device because its frees do (`cudaFree`, `cudaFreeHost`,
`cudaHostUnregister`: results/2026-12-04/build-wait-probe-735d5cf/). An older, uncommitted run
saw an enqueue stall while other threads freed memory (results/HISTORY.md, 2026-11-30). This
asks whether the two are one: each trial spins 0.3 s on a blocking CuPy stream (the device
idle before), a second thread starts a free 20 ms in (a driver call through ctypes, so the GIL
is released while it waits), and 40 ms later this thread times one enqueue on a non-blocking
stream, reporting whether it returned while the spin still ran.

Frees: none (the control), `cuMemFree` of 8 MiB, `cuMemFreeHost` of 8 MiB pinned,
`cuMemHostUnregister` of 8 MiB, dropping a `sized_readback.Readback` (64K f64, mapped).
Enqueues: a kernel launch (CuPy), `cuMemcpyDtoHAsync` of 8 bytes to pinned memory,
`cuEventRecord`, `sized_readback.Readback.enqueue` (mapped, 4K rows).

    PYTHONPATH=<installed package> python3 scripts/probes/free_stall_probe.py   # GPU, CuPy
"""

import ctypes
import threading
import time

import cupy as cp
import numpy as np

SPIN = r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
extern "C" __global__ void noop() {}
"""
SPIN_NS = 300_000_000
SIZE = 8 << 20


def main():
    import sized_readback as srb

    cuda = ctypes.CDLL("libcuda.so.1")
    mod = cp.RawModule(code=SPIN)
    spin, noop = mod.get_function("spin"), mod.get_function("noop")
    busy = cp.cuda.Stream(non_blocking=False)
    side = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    ctx = ctypes.c_void_p()
    assert cuda.cuCtxGetCurrent(ctypes.byref(ctx)) == 0 and ctx.value

    def check(status, call):
        assert status == 0, f"{call}: {status}"

    # What each free needs, made while the device is idle; None for the control.
    def make_free(kind):
        if kind == "none":
            return lambda: None
        if kind == "cuMemFree 8 MiB":
            p = ctypes.c_uint64()
            check(cuda.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(SIZE)), "cuMemAlloc")
            return lambda: check(cuda.cuMemFree_v2(p), "cuMemFree")
        if kind == "cuMemFreeHost 8 MiB":
            p = ctypes.c_void_p()
            check(cuda.cuMemHostAlloc(ctypes.byref(p), ctypes.c_size_t(SIZE), 3), "cuMemHostAlloc")
            return lambda: check(cuda.cuMemFreeHost(p), "cuMemFreeHost")
        if kind == "cuMemHostUnregister 8 MiB":
            a = np.zeros(SIZE, dtype=np.uint8)
            check(cuda.cuMemHostRegister_v2(ctypes.c_void_p(a.ctypes.data), ctypes.c_size_t(SIZE), 3), "register")
            return lambda: check(cuda.cuMemHostUnregister(ctypes.c_void_p(a.ctypes.data)), "unregister")
        if kind == "drop a Readback":
            held = [srb.Readback(1 << 16, dtype=np.float64, transport="mapped")]
            return held.clear
        raise ValueError(kind)

    pinned = ctypes.c_void_p()
    check(cuda.cuMemHostAlloc(ctypes.byref(pinned), ctypes.c_size_t(8), 3), "cuMemHostAlloc")
    dev8 = cp.zeros(1, dtype=np.uint64)
    event = ctypes.c_void_p()
    check(cuda.cuEventCreate(ctypes.byref(event), 2), "cuEventCreate")
    data = cp.arange(4096, dtype=np.float64)
    count = cp.full(1, 4096, dtype=np.int32)
    rb = srb.Readback(4096, dtype=np.float64, transport="mapped")
    tickets = []

    def enqueue(kind):
        if kind == "kernel launch":
            noop((1,), (1,), (), stream=side)
        elif kind == "cuMemcpyDtoHAsync 8 B":
            check(cuda.cuMemcpyDtoHAsync_v2(pinned, ctypes.c_uint64(dev8.data.ptr), ctypes.c_size_t(8),
                                             ctypes.c_void_p(side.ptr)), "cuMemcpyDtoHAsync")
        elif kind == "cuEventRecord":
            check(cuda.cuEventRecord(event, ctypes.c_void_p(side.ptr)), "cuEventRecord")
        elif kind == "Readback.enqueue":
            tickets.append(rb.enqueue(data, count, stream=side))
        else:
            raise ValueError(kind)

    frees = ["none", "cuMemFree 8 MiB", "cuMemFreeHost 8 MiB", "cuMemHostUnregister 8 MiB", "drop a Readback"]
    enqueues = ["kernel launch", "cuMemcpyDtoHAsync 8 B", "cuEventRecord", "Readback.enqueue"]
    for e in enqueues:  # every path warmed before the trials
        enqueue(e)
    side.synchronize()
    tickets.clear()
    for free_kind in frees:
        for enq in enqueues:
            free = make_free(free_kind)
            cp.cuda.Device().synchronize()
            with busy:
                spin((1,), (1,), (np.uint64(SPIN_NS),))
            t0 = time.perf_counter()

            def other():
                check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
                time.sleep(0.02)
                free()

            th = threading.Thread(target=other)
            th.start()
            time.sleep(0.06)
            t1 = time.perf_counter()
            enqueue(enq)
            dt = time.perf_counter() - t1
            stalled = busy.done
            th.join()
            busy.synchronize()
            side.synchronize()
            for t in tickets:
                t.wait()
            tickets.clear()
            verdict = "STALLED" if stalled else "did not stall"
            print(f"{free_kind:28s} | {enq:24s} {verdict:14s} {dt * 1e3:9.3f} ms "
                  f"(the trial: {time.perf_counter() - t0:6.3f} s)", flush=True)


if __name__ == "__main__":
    main()
