"""Everything that needs no GPU: construction errors, argument parsing as an enqueue does it,
the no-driver error, readouts and their release rule over host memory, DLPack export."""

import ctypes
import gc

import numpy as np
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


# --- streams ----------------------------------------------------------------------------------


class TorchLikeStream:
    cuda_stream = 0x5000


class CupyLikeStream:
    ptr = 0x6000


class ProtocolStream:
    def __cuda_stream__(self):
        return (0, 0x7000)


class CtypesHandle:
    value = 0x8000


class NumbaLikeStream:
    handle = CtypesHandle()


class NumbaDefaultStream:
    handle = ctypes.c_void_p(None)


def test_stream_arguments():
    h = _native._stream_handle
    assert h(0) == 0 and h(1) == 1 and h(2) == 2 and h(0x1234) == 0x1234
    assert h(TorchLikeStream()) == 0x5000
    assert h(CupyLikeStream()) == 0x6000
    assert h(ProtocolStream()) == 0x7000
    assert h(NumbaLikeStream()) == 0x8000
    assert h(NumbaDefaultStream()) == 0
    with pytest.raises(TypeError):
        h(True)
    with pytest.raises(TypeError, match="stream must be"):
        h("default")
    with pytest.raises(ValueError):
        h(-1)


# --- device arrays as an enqueue reads them ---------------------------------------------------


class CAI:
    """A device array known only by its __cuda_array_interface__."""

    def __init__(self, shape, typestr, ptr=0x7F00_0000_0000, strides=None, stream=None, version=3, **extra):
        self.__cuda_array_interface__ = dict(
            shape=tuple(shape), typestr=typestr, data=(ptr, False), strides=strides, version=version, **extra
        )
        if stream is not None:
            self.__cuda_array_interface__["stream"] = stream


def parse(data, count, **kw):
    return _native._parse_inputs(data, count, **kw)


def test_cuda_array_interface_data_and_count():
    d = parse(CAI((100,), "<f8", ptr=0x1000), CAI((), "<i4", ptr=0x2000))
    assert d["ptrs"] == [0x1000] and d["rows"] == [100]
    assert d["count_ptr"] == 0x2000 and d["count_kind"] == "i32"
    assert d["stream"] == 0 and d["afters"] == [None, None]
    for typestr, kind in [("<i8", "i64"), ("<u4", "u32"), ("<u8", "u64")]:
        assert parse(CAI((4,), "<f8"), CAI((1,), typestr))["count_kind"] == kind


def test_cai_stream_is_the_default_stream_and_is_ordered_after():
    d = parse(CAI((10,), "<f8", stream=0x9000), CAI((), "<i4", stream=0x9000))
    assert d["stream"] == 0x9000
    assert d["afters"] == [("stream", 0x9000), ("stream", 0x9000)]
    d = parse(CAI((10,), "<f8", stream=1), CAI((), "<i4"), stream=CupyLikeStream())
    assert d["stream"] == 0x6000 and d["afters"][0] == ("stream", 1)
    with pytest.raises(ValueError, match="disallows"):
        parse(CAI((10,), "<f8", stream=0), CAI((), "<i4"))


def test_negative_dimensions_are_refused():
    # A shape of -1 would otherwise become a huge source length and switch off the check that
    # the count fits the source.
    with pytest.raises(ValueError, match="dimensions are 0 or more"):
        parse(CAI((-1,), "<f8"), CAI((), "<i4"))
    with pytest.raises(ValueError, match="dimensions are 0 or more"):
        parse(CAI((10,), "<f8"), CAI((-1, -1), "<i4"))


def test_rows_of_subarray_columns():
    d = parse(CAI((50, 3), "<f4"), CAI((), "<i8"), dtype=("f4", 3))
    assert d["rows"] == [50]
    with pytest.raises(ValueError, match=r"rows of shape"):
        parse(CAI((50, 4), "<f4"), CAI((), "<i8"), dtype=("f4", 3))
    with pytest.raises(ValueError, match="0-dimensional"):
        parse(CAI((), "<f4"), CAI((), "<i8"))


def test_wrong_dtypes_are_value_errors():
    with pytest.raises(ValueError, match="holds float32"):
        parse(CAI((8,), "<f4"), CAI((), "<i4"), dtype="f8")
    with pytest.raises(ValueError, match=r"must be (u?int\d+, )+u?int\d+ or u?int\d+, not"):
        parse(CAI((8,), "<f8"), CAI((), "<f4"))
    with pytest.raises(ValueError, match=r"must be (u?int\d+, )+u?int\d+ or u?int\d+, not"):
        parse(CAI((8,), "<f8"), CAI((), "<i2"))
    with pytest.raises(ValueError, match="one element"):
        parse(CAI((8,), "<f8"), CAI((2,), "<i4"))
    with pytest.raises(ValueError, match="little-endian"):
        parse(CAI((8,), ">f8"), CAI((), "<i4"))


def test_raw_byte_columns_take_any_type_with_the_row_size():
    d = parse(CAI((20, 12), "|u1"), CAI((), "<i4"), dtype="V12")
    assert d["rows"] == [20]
    d = parse(CAI((20, 3), "<f4"), CAI((), "<i4"), dtype="V12")
    assert d["rows"] == [20]
    with pytest.raises(ValueError):
        parse(CAI((20, 2), "<f4"), CAI((), "<i4"), dtype="V12")


def test_non_contiguous_and_masked_arrays_are_refused():
    with pytest.raises(ValueError, match="C-contiguous"):
        parse(CAI((10, 2), "<f8", strides=(8, 80)), CAI((), "<i4"), dtype=("f8", 2))
    d = parse(CAI((10, 2), "<f8", strides=(16, 8)), CAI((), "<i4"), dtype=("f8", 2))
    assert d["rows"] == [10]
    with pytest.raises(ValueError, match="masked"):
        parse(CAI((10,), "<f8", mask=CAI((10,), "|b1")), CAI((), "<i4"))


def test_columns_as_tuple_list_or_dict():
    cols = {"pos": ("f8", 3), "id": "i4", "alive": "?"}
    data = (CAI((9, 3), "<f8", ptr=0x10), CAI((9,), "<i4", ptr=0x20), CAI((9,), "|b1", ptr=0x30))
    d = parse(data, CAI((), "<u4"), columns=cols)
    assert d["ptrs"] == [0x10, 0x20, 0x30] and d["rows"] == [9, 9, 9]
    d = parse(list(data), CAI((), "<u4"), columns=cols)
    assert d["ptrs"] == [0x10, 0x20, 0x30]
    d = parse(dict(zip(["alive", "id", "pos"], data[::-1])), CAI((), "<u4"), columns=cols)
    assert d["ptrs"] == [0x10, 0x20, 0x30]
    with pytest.raises(ValueError, match="2 arrays for 3 columns"):
        parse(data[:2], CAI((), "<u4"), columns=cols)
    with pytest.raises(TypeError, match="tuple"):
        parse(data[0], CAI((), "<u4"), columns=cols)
    with pytest.raises(ValueError, match="column \"id\""):
        parse((data[0], data[0], data[2]), CAI((), "<u4"), columns=cols)
    with pytest.raises(TypeError, match="named columns"):
        parse({"a": data[1]}, CAI((), "<u4"), columns=["i4"])


def test_host_arrays_and_other_objects_are_refused():
    with pytest.raises(ValueError, match="not in CUDA device memory"):
        parse(np.zeros(4), CAI((), "<i4"))
    with pytest.raises(TypeError, match="CUDA device array"):
        parse([1.0, 2.0], CAI((), "<i4"))
    with pytest.raises(TypeError, match="CUDA device array"):
        parse(CAI((4,), "<f8"), 3)


# A DLPack producer made with ctypes: a DLManagedTensor in a "dltensor" capsule, claiming
# CUDA device memory (the parser only reads the struct).
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeDLPack:
    def __init__(self, shape, code, bits, ptr=0x7E00_0000_0000, strides=None, device=(2, 0), offset=0, old=False):
        self.device = device
        self.shape = (ctypes.c_int64 * max(1, len(shape)))(*shape)
        self.strides = (ctypes.c_int64 * len(strides))(*strides) if strides else None
        self.t = DLManagedTensor()
        self.t.dl_tensor.data = ptr
        self.t.dl_tensor.device = DLDevice(*device)
        self.t.dl_tensor.ndim = len(shape)
        self.t.dl_tensor.dtype = DLDataType(code, bits, 1)
        self.t.dl_tensor.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        if self.strides is not None:
            self.t.dl_tensor.strides = ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
        self.t.dl_tensor.byte_offset = offset
        self.asked = []
        self.old = old

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kw):
        if self.old and kw:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'stream'")
        self.asked.append(kw.get("stream"))
        return _capsule_new(ctypes.addressof(self.t), b"dltensor", None)


def test_dlpack_data_and_count():
    data = FakeDLPack((64,), 2, 64, ptr=0x10000, offset=16)
    count = FakeDLPack((), 0, 32, ptr=0x20000)
    d = parse(data, count)
    assert d["ptrs"] == [0x10010], "byte_offset is added"
    assert d["rows"] == [64] and d["count_kind"] == "i32" and d["count_ptr"] == 0x20000
    assert d["afters"] == [None, None], "the producer ordered itself through stream="
    assert data.asked == [1] and count.asked == [1], "the legacy default stream is 1 for DLPack"
    d = parse(FakeDLPack((8, 2), 1, 8), FakeDLPack((1,), 1, 64), stream=0x4444, dtype=("u1", 2))
    assert d["stream"] == 0x4444 and d["count_kind"] == "u64"


def test_dlpack_producers_without_the_stream_argument_are_ordered_after_the_legacy_stream():
    d = parse(FakeDLPack((8,), 2, 64, old=True), FakeDLPack((), 0, 64), stream=0x4444)
    assert d["afters"] == [("stream", 0), None]


def test_dlpack_device_and_layout_checks():
    with pytest.raises(ValueError, match="kDLCUDA"):
        parse(FakeDLPack((8,), 2, 64, device=(1, 0)), FakeDLPack((), 0, 32))
    with pytest.raises(ValueError, match="CUDA managed"):
        parse(FakeDLPack((8,), 2, 64, device=(13, 0)), FakeDLPack((), 0, 32))
    with pytest.raises(srb.ForeignDeviceError, match="device 1"):
        parse(FakeDLPack((8,), 2, 64, device=(2, 1)), FakeDLPack((), 0, 32))
    with pytest.raises(ValueError, match="C-contiguous"):
        parse(FakeDLPack((8, 2), 2, 64, strides=(1, 8)), FakeDLPack((), 0, 32), dtype=("f8", 2))
    d = parse(FakeDLPack((8, 2), 2, 64, strides=(2, 1)), FakeDLPack((), 0, 32), dtype=("f8", 2))
    assert d["rows"] == [8]
    with pytest.raises(ValueError, match="holds bfloat16"):
        parse(FakeDLPack((8,), 4, 16), FakeDLPack((), 0, 32), dtype="f2")
    assert parse(FakeDLPack((8,), 4, 16), FakeDLPack((), 0, 32), dtype="V2")["rows"] == [8]
    assert parse(FakeDLPack((8,), 6, 8), FakeDLPack((), 0, 32), dtype="?")["rows"] == [8]
    with pytest.raises(ValueError, match="int32"):
        parse(FakeDLPack((8,), 2, 64), FakeDLPack((), 2, 32))


def test_jax_host_arrays_are_refused():
    jax = pytest.importorskip("jax")
    x = jax.device_put(jax.numpy.arange(4.0), jax.devices("cpu")[0])
    with pytest.raises(ValueError, match="not in CUDA device memory"):
        parse(x, CAI((), "<i4"))


def test_torch_dtypes_name_columns_when_torch_is_installed():
    torch = pytest.importorskip("torch")
    assert parse(CAI((4,), "<f4"), CAI((), "<i4"), dtype=torch.float32)["rows"] == [4]
    assert parse(CAI((4,), "|b1"), CAI((), "<i4"), dtype=torch.bool)["rows"] == [4]
    assert parse(FakeDLPack((4,), 4, 16), CAI((), "<i4"), dtype=torch.bfloat16)["rows"] == [4]
    with pytest.raises(ValueError):
        parse(CAI((4,), "<f8"), CAI((), "<i4"), dtype=torch.float32)


# --- readouts over host memory: views, copies, the release rule, DLPack ----------------------


def host_readout(arrays, count, **kw):
    return _native._host_readout(arrays, count, **kw)


def test_host_readout_refuses_a_count_whose_bytes_overflow():
    with pytest.raises(ValueError):
        host_readout([np.zeros(1)], 2**61 + 1, dtype="f8")


def test_numpy_views_are_zero_copy_read_only_and_of_count_rows():
    src = np.arange(10, dtype=np.float64)
    out = host_readout([src], 4)
    v = out.numpy()
    assert v.shape == (4,) and v.dtype == np.float64 and not v.flags.writeable
    np.testing.assert_array_equal(v, [0, 1, 2, 3])
    src[1] = 42.0
    assert v[1] == 42.0, "a view, not a copy"
    c = out.copy()
    src[2] = -1.0
    assert c[2] == 2.0 and c.flags.writeable
    assert len(out) == out.count == 4


def test_columns_of_mixed_dtypes_and_names():
    pos = np.arange(30, dtype=np.float32).reshape(10, 3)
    ids = np.arange(10, dtype=np.int64) * 7
    alive = np.arange(10) % 2 == 0
    out = host_readout([pos, ids, alive], 5, columns={"pos": ("f4", 3), "id": "i8", "alive": "?"})
    p, i, a = out.numpy()
    assert p.shape == (5, 3) and p.dtype == np.float32
    np.testing.assert_array_equal(p, pos[:5])
    np.testing.assert_array_equal(i, ids[:5])
    np.testing.assert_array_equal(a, alive[:5])
    np.testing.assert_array_equal(out.numpy("id"), ids[:5])
    np.testing.assert_array_equal(out.numpy(-1), alive[:5])
    with pytest.raises(KeyError):
        out.numpy("nope")
    with pytest.raises(IndexError):
        out.numpy(3)
    assert isinstance(out.copy(), tuple) and len(out.copy()) == 3


def test_structured_and_raw_columns():
    rec = np.dtype([("x", "<f4"), ("n", "<i4")])
    src = np.zeros(6, dtype=rec)
    src["x"] = np.arange(6)
    src["n"] = -np.arange(6)
    out = host_readout([src], 3, dtype=rec)
    v = out.numpy()
    assert v.dtype == rec
    np.testing.assert_array_equal(v["n"], [0, -1, -2])
    raw = np.arange(24, dtype=np.uint8)
    out = host_readout([raw], 4, dtype="V6")
    assert out.numpy().dtype == np.dtype("V6") and out.numpy().shape == (4,)
    assert out.numpy().tobytes() == bytes(range(24))


def test_release_with_live_views_raises_buffer_error():
    out = host_readout([np.arange(8.0)], 8)
    v = out.numpy()
    w = v[2:5]  # derived views hold the slot too
    assert out.exports == 1
    with pytest.raises(BufferError, match="alive"):
        out.release()
    del v
    gc.collect()
    with pytest.raises(BufferError):
        out.release()
    del w
    gc.collect()
    assert out.exports == 0
    out.release()
    assert out.released
    with pytest.raises(ValueError, match="released"):
        out.numpy()
    out.release()  # again: nothing


def test_with_releases_and_views_that_escape_keep_the_slot():
    with host_readout([np.arange(8.0)], 3) as out:
        total = out.numpy().sum()
    assert total == 3.0 and out.released
    with host_readout([np.arange(8.0)], 3) as out:
        kept = out.numpy()
    assert out.released and out.exports == 0
    assert kept[2] == 2.0, "the view still holds the memory"
    with pytest.raises(ValueError, match="released"):
        out.numpy()
    with pytest.raises(KeyError):
        with host_readout([np.arange(8.0)], 3) as out:
            raise KeyError("mine")
    assert out.released


def test_views_keep_the_memory_of_a_dropped_readout():
    src = np.arange(16.0)
    out = host_readout([src], 16)
    v = out.numpy()
    del out, src
    gc.collect()
    assert v.sum() == 120.0


def test_dlpack_export_to_numpy():
    src = np.arange(12, dtype=np.int32).reshape(6, 2)
    out = host_readout([src], 4, dtype=("i4", 2))
    assert out.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(out)
    np.testing.assert_array_equal(a, src[:4])
    src[0, 0] = 99
    assert a[0, 0] == 99, "zero-copy"
    assert out.exports == 1
    with pytest.raises(BufferError):
        out.release()
    del a
    gc.collect()
    assert out.exports == 0
    cap = out.__dlpack__(copy=True)
    assert out.exports == 0, "a copy holds no slot"
    del cap
    with pytest.raises(BufferError, match="no stream"):
        out.__dlpack__(stream=5)
    with pytest.raises(BufferError):
        out.__dlpack__(dl_device=(2, 0))


def test_dlpack_export_versioned_and_legacy_capsules():
    out = host_readout([np.arange(5.0)], 5)
    cap = out.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(cap)
    cap2 = out.__dlpack__()
    assert '"dltensor"' in repr(cap2)
    assert out.exports == 2
    del cap, cap2
    gc.collect()
    assert out.exports == 0, "unconsumed capsules run their deleter"


def test_dlpack_export_refuses_several_columns_and_raw_bytes():
    out = host_readout([np.arange(4.0), np.arange(4)], 2, columns=["f8", "i8"])
    with pytest.raises(BufferError, match="several columns"):
        out.__dlpack__()
    out = host_readout([np.zeros(8, np.uint8)], 2, dtype="V4")
    with pytest.raises(BufferError, match="raw bytes"):
        out.__dlpack__()


def test_torch_takes_a_readout_through_dlpack():
    torch = pytest.importorskip("torch")
    out = host_readout([np.arange(6.0)], 4)
    t = torch.from_dlpack(out)
    assert t.device.type == "cpu" and t.tolist() == [0.0, 1.0, 2.0, 3.0]


# --- PyTorch tensors through their own accessors (a stand-in torch, in a subprocess) ----------

FAKE_TORCH = '''
class dtype:
    def __init__(self, name):
        self.name = name
    def __repr__(self):
        return "torch." + self.name
    __str__ = __repr__

for _n in ["bool", "uint8", "int8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
           "float16", "bfloat16", "float32", "float64", "complex64", "complex128"]:
    globals()[_n] = dtype(_n)

class _C:
    asked = []
    @staticmethod
    def _cuda_getCurrentRawStream(device):
        _C.asked.append(device)
        return 0xC0FFEE

class Size(tuple):
    pass

class Tensor:
    def __init__(self, shape, dtype, ptr, cuda=True, device=0, contiguous=True):
        self.shape, self.dtype, self._ptr = Size(shape), dtype, ptr
        self.is_cuda, self._dev, self._contig = cuda, device, contiguous
        self.device = "cuda:%d" % device if cuda else "cpu"
    def get_device(self):
        return self._dev if self.is_cuda else -1
    def is_contiguous(self):
        return self._contig
    def data_ptr(self):
        return self._ptr
'''

FAKE_TORCH_CHECKS = '''
import torch, sized_readback as srb
from sized_readback import _native
T = torch.Tensor
d = _native._parse_inputs(T((100, 3), torch.float32, 0x1000), T((), torch.int64, 0x2000), dtype=("f4", 3))
assert d["stream"] == 0xC0FFEE, d            # stream=None: torch's current stream
assert d["ptrs"] == [0x1000] and d["rows"] == [100] and d["count_kind"] == "i64", d
assert d["afters"] == [("torch", 0), ("torch", 0)], d
assert d["kept"] == 2, d
d = _native._parse_inputs(T((8,), torch.bfloat16, 0x10), T((1,), torch.uint32, 0x20), stream=5, dtype="V2")
assert d["stream"] == 5 and d["count_kind"] == "u32", d
try:
    _native._parse_inputs(T((8,), torch.float64, 0x10, cuda=False), T((), torch.int32, 0x20))
    raise SystemExit("a CPU tensor was accepted")
except ValueError as e:
    assert "not on a CUDA device" in str(e), e
try:
    _native._parse_inputs(T((8,), torch.float64, 0x10, device=1), T((), torch.int32, 0x20))
    raise SystemExit("a tensor of device 1 was accepted")
except srb.ForeignDeviceError as e:
    assert "device 1" in str(e), e
try:
    _native._parse_inputs(T((8, 2), torch.float64, 0x10, contiguous=False), T((), torch.int32, 0x20), dtype=("f8", 2))
    raise SystemExit("a non-contiguous tensor was accepted")
except ValueError as e:
    assert "contiguous" in str(e), e
try:
    _native._parse_inputs(T((8,), torch.float64, 0x10), T((), torch.float32, 0x20))
    raise SystemExit("a float count was accepted")
except ValueError as e:
    assert "int32" in str(e), e
assert torch._C.asked and set(torch._C.asked) == {0}
print("ok")
'''


def test_torch_tensors_are_read_through_their_accessors(tmp_path):
    import subprocess
    import sys

    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(FAKE_TORCH)
    import os

    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", FAKE_TORCH_CHECKS], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


FAKE_CUPY = '''
class ndarray:
    def __init__(self, shape, typestr, ptr):
        self.__cuda_array_interface__ = dict(shape=shape, typestr=typestr, data=(ptr, False), version=3, stream=1)
'''
FAKE_CUPY_CUDA = '''
class Stream:
    def __init__(self, ptr):
        self.ptr = ptr
current = Stream(0xBEEF)
def get_current_stream():
    return current
'''
FAKE_CUPY_CHECKS = '''
import cupy, cupy.cuda
from sized_readback import _native
a = cupy.ndarray((10,), "<f8", 0x100)
c = cupy.ndarray((), "<i4", 0x200)
d = _native._parse_inputs(a, c)
assert d["stream"] == 0xBEEF, d              # stream=None: CuPy's current stream
assert d["afters"] == [("stream", 1), ("stream", 1)], d
assert d["kept"] == 3, d                     # the stream object, the array, the count
cupy.cuda.current = cupy.cuda.Stream(0)
assert _native._parse_inputs(a, c)["stream"] == 0
print("ok")
'''


def test_cupy_arrays_run_on_cupys_current_stream(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "cupy" / "cuda").mkdir(parents=True)
    (tmp_path / "cupy" / "__init__.py").write_text(FAKE_CUPY)
    (tmp_path / "cupy" / "cuda" / "__init__.py").write_text(FAKE_CUPY_CUDA)
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", FAKE_CUPY_CHECKS], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


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
