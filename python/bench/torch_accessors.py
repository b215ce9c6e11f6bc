"""The host cost of each PyTorch accessor the binding reads a tensor with, from Python.

The binding reads a torch.Tensor through its own accessors (``python/src/array.rs``); each is
one Python call. This times each on a 4K f64 CUDA tensor, p50 of 20,000 calls after 500, minus
an empty call, beside ``torch._C._to_dlpack`` (one call that gives every fact at once, capsule
freed included), so the binding's share of ``rb.enqueue`` can be set against what the
accessors alone cost on the same host.

    python python/bench/torch_accessors.py          # needs a CUDA GPU and PyTorch
"""

import gc

import torch
from profile_binding import p50_ns  # this script's folder is first on sys.path

REPS, WARMUP = 20000, 500


def main():
    x = torch.zeros(4096, device="cuda", dtype=torch.float64)
    c = torch.full((), 100, dtype=torch.int32, device="cuda")
    calls = {
        "dtype": lambda: x.dtype,
        "get_device()": lambda: x.get_device(),
        "is_cuda": lambda: x.is_cuda,
        "is_contiguous()": lambda: x.is_contiguous(),
        "is_neg()": lambda: x.is_neg(),
        "shape": lambda: x.shape,
        "data_ptr()": lambda: x.data_ptr(),
        "device": lambda: x.device,
        "_to_dlpack (data)": lambda: torch._C._to_dlpack(x),
        "_to_dlpack (count)": lambda: torch._C._to_dlpack(c),
        "_cuda_getCurrentRawStream": lambda: torch._C._cuda_getCurrentRawStream(0),
    }
    gc.disable()
    empty = p50_ns(lambda: None, REPS, WARMUP)
    print(f"torch {torch.__version__}; an empty call {empty:.0f} ns, subtracted below")
    for name, f in calls.items():
        print(f"{name:28s} {p50_ns(f, REPS, WARMUP) - empty:6.0f} ns")


if __name__ == "__main__":
    main()
