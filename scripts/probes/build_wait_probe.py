#!/usr/bin/env python3
"""Which allocation makes a readback's build wait for other work on the device?

From Python, a `Readback` of 64K f64 rows returned only when 0.3 s of work on another stream
had ended, where a `SizedLaunch` did not wait
(results/2026-12-04/build-beside-work-c6d1a4c/). This takes it apart: each trial spins 0.2 s
on a blocking CuPy stream (the device idle before), makes one allocation or build, and reports
whether the spin was still running when it returned.

- `cudaHostAlloc` with the library's flags (portable | mapped) and portable alone, at sizes
  from 4 KiB to 64 MiB; `cudaMalloc` at the same sizes; `cudaHostRegister` of a numpy array;
- `cuModuleLoadData` of a no-op kernel's PTX and `cuModuleUnload` of it, through ctypes;
- `sized_readback.Readback` (mapped, staged) at capacities from 1,000 to 1M f64 rows, twice
  over, and the drop of a readback built before the spin;
- what a drop does, one call at a time, on objects made before the spin: `cudaFree`,
  `cudaFreeHost`, `cudaHostUnregister`, `cudaFreeAsync` (on another stream), `cudaStreamDestroy`,
  `cudaEventDestroy`, `cuGraphExecDestroy` and `cuGraphDestroy` (one empty node).

Each allocation is freed after the spin has ended (a free may synchronize on its own).

    PYTHONPATH=<installed package> python3 scripts/probes/build_wait_probe.py   # GPU, CuPy

With arguments `readback CAPACITY TRANSPORT` it makes that one trial only (for a trace of the
driver calls behind it).
"""

import ctypes
import sys
import time

import cupy as cp
import numpy as np

SPIN = r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""
NOOP_PTX = b""".version 7.0
.target sm_70
.address_size 64
.visible .entry noop() { ret; }
"""
SPIN_NS = 200_000_000
PORTABLE, MAPPED = 1, 2


def main():
    rt = cp.cuda.runtime
    spin = cp.RawKernel(SPIN, "spin")
    spin.compile()
    busy = cp.cuda.Stream(non_blocking=False)

    def trial(name, make, free=None):
        cp.cuda.Device().synchronize()
        with busy:
            spin((1,), (1,), (np.uint64(SPIN_NS),))
        t0 = time.perf_counter()
        x = make()
        dt = time.perf_counter() - t0
        waited = busy.done
        busy.synchronize()
        if free is not None:
            free(x)
        print(f"{name:44s} {'WAITED' if waited else 'did not wait'}  {dt * 1e3:8.2f} ms", flush=True)

    if sys.argv[1:2] == ["readback"]:
        import sized_readback as srb

        srb.Readback(1000, dtype=np.float64)
        cap, transport = int(sys.argv[2]), sys.argv[3]
        trial(f"Readback {cap} f64 {transport}", lambda: srb.Readback(cap, dtype=np.float64, transport=transport))
        return

    sizes = [4 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 8 << 20, 64 << 20]
    for size in sizes:
        trial(f"cudaHostAlloc portable|mapped {size >> 10} KiB", lambda: rt.hostAlloc(size, PORTABLE | MAPPED), rt.freeHost)
        trial(f"cudaHostAlloc portable {size >> 10} KiB", lambda: rt.hostAlloc(size, PORTABLE), rt.freeHost)
        trial(f"cudaHostAlloc default {size >> 10} KiB", lambda: rt.hostAlloc(size, 0), rt.freeHost)
        trial(f"cudaMalloc {size >> 10} KiB", lambda: rt.malloc(size), rt.free)
    for size in (64 << 10, 1 << 20, 8 << 20):
        a = np.zeros(size, dtype=np.uint8)

        def register(a=a):
            rt.hostRegister(a.ctypes.data, a.nbytes, PORTABLE | MAPPED)
            return a.ctypes.data

        trial(f"cudaHostRegister {size >> 10} KiB", register, rt.hostUnregister)

    cuda = ctypes.CDLL("libcuda.so.1")

    def module_load():
        m = ctypes.c_void_p()
        status = cuda.cuModuleLoadData(ctypes.byref(m), NOOP_PTX)
        assert status == 0, f"cuModuleLoadData: {status}"
        return m

    module_load()  # the PTX JIT-compiled (and cached by the driver) before the trials
    trial("cuModuleLoadData (no-op kernel, PTX)", module_load, cuda.cuModuleUnload)
    loaded = module_load()
    trial("cuModuleUnload (no-op kernel)", lambda: cuda.cuModuleUnload(loaded))

    # What a drop does, one call at a time, on objects made while the device was idle.
    for size in (64 << 10, 8 << 20):
        ptr = rt.malloc(size)
        trial(f"cudaFree {size >> 10} KiB", lambda: rt.free(ptr))
        ptr = rt.hostAlloc(size, PORTABLE | MAPPED)
        trial(f"cudaFreeHost portable|mapped {size >> 10} KiB", lambda: rt.freeHost(ptr))
        a = np.zeros(size, dtype=np.uint8)
        rt.hostRegister(a.ctypes.data, a.nbytes, PORTABLE | MAPPED)
        trial(f"cudaHostUnregister {size >> 10} KiB", lambda: rt.hostUnregister(a.ctypes.data))
        other = rt.streamCreateWithFlags(1)  # non-blocking
        ptr = rt.mallocAsync(size, other)
        rt.streamSynchronize(other)
        trial(f"cudaFreeAsync {size >> 10} KiB (another stream)", lambda: rt.freeAsync(ptr, other))
        rt.streamSynchronize(other)
        rt.streamDestroy(other)
    stream = rt.streamCreateWithFlags(1)
    trial("cudaStreamDestroy (non-blocking, idle)", lambda: rt.streamDestroy(stream))
    event = rt.eventCreateWithFlags(2)  # disable timing
    trial("cudaEventDestroy (never recorded)", lambda: rt.eventDestroy(event))
    graph, exe, node = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    assert cuda.cuGraphCreate(ctypes.byref(graph), 0) == 0
    assert cuda.cuGraphAddEmptyNode(ctypes.byref(node), graph, None, ctypes.c_size_t(0)) == 0
    assert cuda.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, ctypes.c_ulonglong(0)) == 0
    trial("cuGraphExecDestroy (one empty node)", lambda: cuda.cuGraphExecDestroy(exe))
    trial("cuGraphDestroy (one empty node)", lambda: cuda.cuGraphDestroy(graph))

    try:
        import sized_readback as srb
    except ImportError:
        print("sized_readback not importable: readback trials skipped")
        return
    srb.Readback(1000, dtype=np.float64)  # the library's modules loaded before any trial (kept since)
    # Twice over: a wait in the first round only is a first use in the process (a module or a
    # driver-internal kernel loaded), not a wait every build makes.
    for again in ("", " again"):
        for cap in (1000, 4096, 16384, 1 << 16, 1 << 20):
            for transport in ("mapped", "staged"):
                trial(
                    f"Readback {cap} f64 {transport}{again}",
                    lambda: srb.Readback(cap, dtype=np.float64, transport=transport),
                )
    for transport in ("mapped", "staged"):
        held = [srb.Readback(1 << 16, dtype=np.float64, transport=transport)]
        trial(f"drop a Readback 65536 f64 {transport}", held.clear)


if __name__ == "__main__":
    main()
