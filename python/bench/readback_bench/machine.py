"""The machine a run measured: commit, driver, GPU, versions."""

import ctypes
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]


def commit():
    for var in ("SRB_COMMIT", "GIT_COMMIT", "COMMIT"):
        if os.environ.get(var):
            return os.environ[var]
    # A staged tree (scripts/gpu-stage.sh) names the commit its binaries and wheel were built
    # at; the checkout's HEAD there may be another.
    staged = ROOT / ".gpu" / "COMMIT"
    if staged.is_file():
        return staged.read_text().strip()
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
