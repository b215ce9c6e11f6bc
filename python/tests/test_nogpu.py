"""The basics that need no GPU: the error classes, construction errors, the no-driver error,
the module's facts, wait timeouts. Argument parsing is in test_nogpu_arguments.py, readouts over
host memory and DLPack export in test_nogpu_readouts.py."""

import pytest

import sized_readback as srb
from sized_readback import _native

from conftest import HAVE_GPU

no_gpu = pytest.mark.skipif(HAVE_GPU, reason="a CUDA device is present")


# --- errors -----------------------------------------------------------------------------------


def test_every_error_is_a_readback_error_and_its_builtin():
    pairs = {
        srb.CountExceedsCapacityError: OverflowError,
        srb.AppendOverflowError: OverflowError,
        srb.NegativeCountError: ValueError,
        srb.CountExceedsSourceError: ValueError,
        srb.ForeignDeviceError: ValueError,
        srb.BadPointerError: ValueError,
        srb.BufferTooShortError: ValueError,
        srb.SizedCopyUnavailableError: RuntimeError,
        srb.ConfigError: ValueError,
        srb.SchemaError: ValueError,
        srb.ReadbackTimeoutError: TimeoutError,
        srb.DriverNotFoundError: RuntimeError,
        srb.NoDeviceError: RuntimeError,
        srb.CudaError: RuntimeError,
        srb.SlotsExhaustedError: RuntimeError,
        srb.OverrunError: RuntimeError,
        srb.UnknownCountKindError: RuntimeError,
    }
    for cls, builtin in pairs.items():
        assert issubclass(cls, srb.ReadbackError) and issubclass(cls, builtin), cls
    e = srb.CountExceedsCapacityError("too many", count=9, capacity=8)
    assert (e.count, e.capacity, str(e)) == (9, 8, "too many")
    assert issubclass(srb.AppendOverflowError, srb.CountExceedsCapacityError)
    t = srb.ReadbackTimeoutError("late", waited=0.5)
    assert isinstance(t, TimeoutError) and t.waited == 0.5


# --- construction -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, text",
    [
        (dict(capacity=0), srb.ConfigError, "capacity"),
        (dict(capacity=-5), ValueError, "capacity"),
        (dict(capacity=8, slots=0), srb.ConfigError, "slots"),
        (dict(capacity=8, device=-1), ValueError, "device"),
        (dict(capacity=8, transport="pcie"), ValueError, "transport"),
        (dict(capacity=8, staged_copy="half"), ValueError, "staged_copy"),
        (dict(capacity=8, dtype="U4"), ValueError, "not a number"),
        (dict(capacity=8, dtype="object"), ValueError, "holds Python objects"),
        (dict(capacity=8, dtype=">f8"), ValueError, "big-endian"),
        (dict(capacity=8, dtype="not a dtype"), TypeError, "not a numpy dtype"),
        (dict(capacity=8, dtype="f8", columns=["f8"]), TypeError, "not both"),
        (dict(capacity=8, columns=[]), ValueError, "1 to 8 columns"),
        (dict(capacity=8, columns=["f4"] * 9), ValueError, "1 to 8 columns"),
        (dict(capacity=8, columns="f8"), TypeError, "list"),
        (dict(capacity=8, columns={1: "f8"}), TypeError, "names"),
    ],
)
@pytest.mark.parametrize("cls", [srb.Readback, srb.AppendReadback])
def test_bad_settings_are_refused_before_the_device_is_opened(cls, kwargs, error, text):
    with pytest.raises(error, match=text):
        cls(**kwargs)


@pytest.mark.parametrize(
    "cls, kwargs",
    [
        (srb.Readback, dict(capacity=2**62, dtype="f8")),
        (srb.Readback, dict(capacity=16, slots=2**33)),
        (srb.AppendReadback, dict(capacity=16, spill=2**62)),
        (srb.GraphReadback, dict(capacity=2**62, dtype="f8")),
    ],
)
def test_settings_the_core_refuses_are_config_errors_with_or_without_a_gpu(cls, kwargs):
    # The core's own checks run before the driver is opened, so the error does not depend on
    # whether a GPU is there.
    with pytest.raises(srb.ConfigError):
        cls(**kwargs)


def test_graph_readback_refuses_bad_settings_too():
    with pytest.raises(srb.ConfigError):
        srb.GraphReadback(0)
    with pytest.raises(srb.ConfigError):
        srb.GraphReadback(8, slots=0)


@no_gpu
@pytest.mark.parametrize("cls", [srb.Readback, srb.GraphReadback, srb.AppendReadback])
def test_without_a_driver_construction_raises_a_clear_runtime_error(cls):
    with pytest.raises(RuntimeError, match="CUDA driver|no CUDA device") as e:
        cls(16, columns={"pos": ("f8", 3), "id": "i4"})
    assert isinstance(e.value, (srb.DriverNotFoundError, srb.NoDeviceError))


@no_gpu
def test_device_queries_without_a_driver():
    assert srb.is_available() is False
    assert srb.live_allocations() == {"device": 0, "device_bytes": 0, "pinned": 0, "pinned_bytes": 0}
    assert srb.release_retired() == 0 and srb._native.retired_count() == 0
    try:
        assert srb.device_count() == 0
    except srb.DriverNotFoundError as e:
        assert "libcuda" in str(e)


def test_module_facts():
    assert srb.MAX_COLUMNS == 8
    assert "sm_90" in srb.KERNEL_TARGETS
    assert srb.APPEND_DESC_DTYPE.itemsize == _native.APPEND_DESC_SIZE == 280
    assert "srb_append_desc" in srb.append_header()
    import os

    inc = os.path.join(srb.include_dir(), "sized_readback")
    for h in ("append.cuh", "slot.h"):
        with open(os.path.join(inc, h)) as f:
            assert "sized_readback" in f.read(200)


@no_gpu
def test_auto_transport_passes_an_explicit_sized_copy_to_its_staged_slots_only():
    # Under transport="auto" the mapped slots copy nothing: staged_copy="sized" is the staged
    # set's, and the construction gets as far as the driver (the mapped set used to refuse it).
    with pytest.raises(RuntimeError, match="CUDA driver|no CUDA device") as e:
        srb.Readback(1 << 20, dtype="f8", transport="auto", staged_copy="sized")
    assert isinstance(e.value, (srb.DriverNotFoundError, srb.NoDeviceError))
    # A plain mapped readback asked for a sized copy is still refused, before the driver.
    with pytest.raises(srb.SizedCopyUnavailableError, match="mapped transport"):
        srb.Readback(1 << 20, dtype="f8", staged_copy="sized")


@pytest.mark.parametrize(
    "timeout, limit",
    [(None, None), (0, 0.0), (0.25, 0.25), (float("inf"), None), (1e20, None), (1e300, None)],
)
def test_wait_timeouts_too_large_for_the_clock_mean_no_limit(timeout, limit):
    # Ticket.wait and GraphReadback.next: a finite timeout past what a Duration holds (1e20
    # seconds) raised a PanicException instead of waiting without a limit, as infinity does.
    got = _native._wait_limit(timeout)
    if limit is None:
        assert got is None
    else:
        assert got == pytest.approx(limit, abs=1e-9)


@pytest.mark.parametrize("timeout", [-1.0, -0.001, float("-inf"), float("nan")])
def test_wait_timeouts_below_zero_or_nan_are_refused(timeout):
    with pytest.raises(ValueError, match="non-negative number of seconds"):
        _native._wait_limit(timeout)


def test_settings_past_64_bits_are_config_errors():
    # Python ints have no bound: one past i64 is refused by the setting's own rule, naming it.
    for kw in (dict(capacity=2**64), dict(capacity=8, slots=2**70), dict(capacity=8, device=-(2**80))):
        with pytest.raises(srb.ConfigError) as e:
            srb.Readback(dtype="f8", **kw)
        assert not isinstance(e.value, OverflowError), e.value
    with pytest.raises(srb.ConfigError, match=str(2**65)):
        srb.AppendReadback(8, dtype="f8", spill=2**65)
    with pytest.raises(srb.ConfigError, match=f"{2**70} is past the range"):
        srb.Readback(2**70, dtype="f8")
    with pytest.raises(srb.ConfigError):
        srb.GraphReadback(2**63, dtype="f8")
    with pytest.raises(TypeError):
        srb.Readback("8", dtype="f8")


def test_a_negative_spill_and_a_bool_setting_are_refused_before_the_driver():
    with pytest.raises(srb.ConfigError, match="spill must be 0 or more rows, not -1"):
        srb.AppendReadback(8, dtype="f8", spill=-1)
    for kw in (dict(capacity=True), dict(capacity=8, slots=False)):
        with pytest.raises(TypeError, match="not a bool"):
            srb.Readback(dtype="f8", **kw)


def test_constructor_signatures_show_their_defaults():
    import inspect

    assert str(inspect.signature(srb.Readback)) == (
        "(capacity, dtype=None, columns=None, slots=2, device=0, transport='mapped', staged_copy='auto')"
    )
    assert "slots=8, device=0" in str(inspect.signature(srb.GraphReadback))
    assert "spill=None" in str(inspect.signature(srb.AppendReadback))
