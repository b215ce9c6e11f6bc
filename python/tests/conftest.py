"""Shared set-up of the Python tests.

Tests marked ``gpu`` need a CUDA device and are skipped (reported as skipped) without one; a
test that needs a framework (PyTorch, CuPy, JAX, Numba) skips when it is not installed.

``SRB_REQUIRE_GPU=1`` (scripts/gpu-verify.sh sets it) turns every skip of a ``gpu`` test, and
the skip of a whole ``test_gpu_*.py`` module at collection (a framework not installed), into a
failure, so a GPU run cannot pass with its GPU tests skipped. Tests also marked ``multi_gpu``
(they need two devices) still skip on a one-GPU host.
"""

import os

# JAX preallocates most of the GPU's memory at its first use; the suite shares the GPU
# between PyTorch, CuPy, JAX and Numba.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import gc
import sys

import pytest

import sized_readback as srb

HAVE_GPU = srb.is_available()

# Under compute-sanitizer's leak check (scripts/sanitize.sh sets this), device memory still
# allocated when the process exits is reported as leaked. What the tests left behind is
# collected before the exit and the frameworks' pools give their free blocks back, so that what
# leaks after that is a real leak. (PyTorch's pool cannot be switched off instead: without it,
# an allocation inside a graph capture calls cudaMalloc, which a capture refuses.)
RELEASE_AT_EXIT = os.environ.get("SRB_RELEASE_AT_EXIT") == "1"

REQUIRE_GPU = os.environ.get("SRB_REQUIRE_GPU") == "1"

# SRB_ALLOC_REPORT=path: after each test (and a gc pass), the library's own live allocations
# (sized_readback.live_allocations()) and its retired graph readbacks, written to path as JSON
# at the end: which test left what behind, for the leak check.
ALLOC_REPORT = os.environ.get("SRB_ALLOC_REPORT")
_ALLOCS = []


def _settled_allocations():
    """The library's live allocations and retired graph readbacks once a gc pass has run."""
    gc.collect()
    return {**srb.live_allocations(), "retired": srb._native.retired_count()}


def _describe(o):
    """A short name for an object holding a readback: a frame by its code, a dict by its keys."""
    if isinstance(o, type(sys._getframe())):
        return f"frame {o.f_code.co_name} ({o.f_code.co_filename.rsplit('/', 1)[-1]}:{o.f_lineno})"
    if isinstance(o, dict):
        return f"dict keys {sorted(map(str, o))[:8]}"
    return type(o).__qualname__


def _holders(limit=6):
    """Who holds the library's live objects: for each readback, ticket or readout still alive,
    the containers referring to it and, one level up, what refers to those (gc's view; the
    library's objects are not tracked themselves, their holders are)."""
    kinds = tuple(getattr(srb, k) for k in ("Readback", "Ticket", "Readout", "GraphReadback") if hasattr(srb, k))
    found = []
    tracked = gc.get_objects()
    for o in tracked:
        for r in gc.get_referents(o):
            if isinstance(r, kinds):
                up = [_describe(u) for u in gc.get_referrers(o) if u is not tracked and u is not found][:4]
                found.append(f"{type(r).__name__} held by {_describe(o)} <- {up}")
                if len(found) >= limit:
                    return found
    return found


@pytest.fixture
def cupy_device():
    """CuPy, with a CUDA device it can use (the test skips otherwise); synchronized after."""
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("CuPy sees no CUDA device")
    except cp.cuda.runtime.CUDARuntimeError as e:
        pytest.skip(f"CuPy sees no CUDA device: {e}")
    yield cp
    cp.cuda.Device().synchronize()


@pytest.fixture(autouse=True)
def _library_allocations(request):
    before = srb.live_allocations() if ALLOC_REPORT else None
    yield
    if ALLOC_REPORT:
        now = _settled_allocations()
        entry = {"test": request.node.nodeid, **now}
        if now["pinned"] > before["pinned"] or now["device"] > before["device"]:
            entry["holders"] = _holders()
        _ALLOCS.append(entry)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpu: needs a CUDA device (skipped without one; a failure under SRB_REQUIRE_GPU=1)",
    )
    config.addinivalue_line(
        "markers",
        "multi_gpu: needs two CUDA devices (skips on one GPU, even under SRB_REQUIRE_GPU=1)",
    )


def _skip_reason(rep):
    if isinstance(rep.longrepr, tuple) and len(rep.longrepr) == 3:
        return rep.longrepr[2]
    return str(rep.longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if (
        REQUIRE_GPU
        and rep.skipped
        and not hasattr(rep, "wasxfail")
        and "gpu" in item.keywords
        and "multi_gpu" not in item.keywords
    ):
        rep.outcome = "failed"
        rep.longrepr = f"SRB_REQUIRE_GPU=1, but this GPU test skipped: {_skip_reason(rep)}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    rep = outcome.get_result()
    if (
        REQUIRE_GPU
        and rep.skipped
        and isinstance(collector, pytest.Module)
        and collector.path.name.startswith("test_gpu_")
    ):
        # Reported as skipped (a collection error would stop the whole run), and the session
        # fails at its end (pytest_sessionfinish).
        _SKIPPED_GPU_MODULES.append(f"{collector.path.name}: {_skip_reason(rep)}")


_SKIPPED_GPU_MODULES = []


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for m in _SKIPPED_GPU_MODULES:
        terminalreporter.write_line(f"SRB_REQUIRE_GPU=1, but a GPU test module skipped: {m}", red=True)


def pytest_sessionfinish(session, exitstatus):
    if _SKIPPED_GPU_MODULES and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if ALLOC_REPORT:
        import json

        with open(ALLOC_REPORT, "w") as f:
            json.dump({"after_each_test": _ALLOCS, "at_session_end": _settled_allocations()}, f, indent=1)
    if not RELEASE_AT_EXIT:
        return
    # The graph readbacks the tests dropped after recording, and the framework arrays they
    # kept, first (the package would free them at exit, after the pools below were emptied).
    srb.release_retired()
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()
        # cuBLAS's workspaces are live blocks of PyTorch's pool, kept per stream and handle.
        torch._C._cuda_clearCublasWorkspaces()
        torch.cuda.empty_cache()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU (or no CUDA driver) on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"sized_readback {srb.__version__}: CUDA GPU {'present' if HAVE_GPU else 'absent'}"
