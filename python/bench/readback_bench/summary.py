"""How the benchmark writes a measurement (a summary of samples) and a size (1M, 4K)."""

import numpy as np


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
