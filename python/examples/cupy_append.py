"""A CuPy RawKernel that appends its results straight into a readback slot through the append
header ``sized_readback/append.cuh``: no count in device memory, no second kernel, no
synchronization before the host holds the rows.

The kernel finds the particles that left the box [lo, hi) and appends each one's position and
index. ``python examples/cupy_append.py`` runs a few steps and checks every row against numpy.
"""

from __future__ import annotations

import argparse

import numpy as np

import sized_readback as srb

SOURCE = r"""
#include <sized_readback/append.cuh>

extern "C" __global__ void left_box(srb_append_desc d, const double* x, long long n,
                                    double lo, double hi) {
    using Append = srb::BlockAppend<256, double, long long>;   // one value per column
    __shared__ Append::TempStorage tmp;
    Append app(tmp, d);                                        // block-collective
    for (long long base = (long long)blockIdx.x * 256; base < n;
         base += (long long)gridDim.x * 256) {                 // the same trip count per block
        long long i = base + threadIdx.x;
        bool out = i < n && (x[i] < lo || x[i] >= hi);
        app.append(out, out ? x[i] : 0.0, i);                  // block-collective
    }
    app.finish();                                              // once, at the end
}
"""


def compile_kernel():
    import cupy as cp

    inc = srb.include_dir()
    options = ("--std=c++17", "-I" + inc, "-I" + inc + "/sized_readback")
    return cp.RawKernel(SOURCE, "left_box", options=options)


def run(n: int = 1 << 20, steps: int = 5, capacity: int = 1 << 14, seed: int = 0, quiet: bool = False) -> int:
    """Runs `steps` steps; returns the rows checked. Grows the readback when a step appends more
    than its capacity (AppendOverflowError), and runs that step again."""
    import cupy as cp

    kernel = compile_kernel()
    rb = srb.AppendReadback(capacity, columns={"x": np.float64, "index": np.int64}, slots=2)
    stream = cp.cuda.Stream(non_blocking=True)
    rng = cp.random.default_rng(seed)
    lo, hi = 0.0, 1.0
    checked = 0
    with stream:
        for step in range(steps):
            # A drift that takes a growing share of the particles out of the box.
            x = rng.uniform(-0.01 * step, 1.0 + 0.01 * step, n)

            def launch(desc):
                kernel((132,), (256,), (desc, x, np.int64(n), np.float64(lo), np.float64(hi)))

            ticket = rb.append(launch, stream=stream)
            # ... the next step's kernels could be launched here: nothing waited ...
            try:
                out = ticket.wait(timeout=60)
            except srb.AppendOverflowError as e:
                rb.grow(e.count)
                ticket = rb.append(launch, stream=stream)
                out = ticket.wait(timeout=60)
            with out:
                xs, idx = out.copy()  # copies: the check below outlives the slot
            host = cp.asnumpy(x)  # (the check's own synchronization)
            want = np.flatnonzero((host < lo) | (host >= hi))
            order = np.argsort(idx)  # appended rows come in no particular order
            np.testing.assert_array_equal(idx[order], want)
            np.testing.assert_array_equal(xs[order], host[want])
            checked += len(want)
            if not quiet:
                print(f"step {step}: {out.count} of {n} particles left the box (capacity {rb.info['capacity']})")
    return checked


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 20)
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    rows = run(args.n, args.steps)
    print(f"all {rows} appended rows match numpy")


if __name__ == "__main__":
    main()
