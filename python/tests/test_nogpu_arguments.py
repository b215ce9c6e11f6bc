"""Argument parsing as an enqueue does it, with no GPU: streams, __cuda_array_interface__,
DLPack producers, and PyTorch tensors and CuPy arrays through their own accessors (stand-ins
in a subprocess)."""

import ctypes

import numpy as np
import pytest

import sized_readback as srb
from sized_readback import _native


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
    def __init__(self, shape, dtype, ptr, cuda=True, device=0, contiguous=True, conj=False, neg=False, xpu=False):
        self.shape, self.dtype, self._ptr = Size(shape), dtype, ptr
        self.is_cuda, self._dev, self._contig = cuda and not xpu, device, contiguous
        self._conj, self._neg, self._xpu = conj, neg, xpu
        self.device = "xpu:%d" % device if xpu else "cuda:%d" % device if cuda else "cpu"
    def get_device(self):
        # As ATen's: the index for any device type but the CPU's.
        return self._dev if self.is_cuda or self._xpu else -1
    def is_contiguous(self):
        return self._contig
    def is_conj(self):
        return self._conj
    def is_neg(self):
        return self._neg
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
for dev in (0, 1):
    try:
        _native._parse_inputs(T((8,), torch.float64, 0x10, xpu=True, device=dev), T((), torch.int32, 0x20))
        raise SystemExit("a tensor of xpu:%d was accepted" % dev)
    except ValueError as e:
        assert ("on xpu:%d, not on a CUDA device" % dev) in str(e), e
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
# One element is read the same whatever its strides say.
d = _native._parse_inputs(T((8,), torch.float64, 0x10), T((1, 1), torch.int32, 0x20, contiguous=False))
assert d["ptrs"] == [0x10] and d["count_kind"] == "i32", d
for data, dt, view in [(T((8,), torch.complex128, 0x10, conj=True), "c16", "conjugate"),
                       (T((8,), torch.complex64, 0x10, neg=True), "c8", "negation"),
                       (T((8,), torch.float32, 0x10, neg=True), "f4", "negation")]:
    try:
        _native._parse_inputs(data, T((), torch.int32, 0x20), dtype=dt)
        raise SystemExit("a lazy %s view was accepted" % view)
    except ValueError as e:
        assert ("lazy %s view" % view) in str(e) and "resolve_conj" in str(e), e
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


# --- SizedLaunch's arguments, checked before any driver call ----------------------------------


def test_sized_launch_bad_classes_are_config_errors():
    count = CAI((1,), "<i4")
    for capacity, classes in [(0, None), (64, []), (64, [32, 16, 64]), (64, [16, 32])]:
        with pytest.raises(srb.ConfigError):
            srb.SizedLaunch(count, capacity, lambda c: None, classes=classes)
    with pytest.raises(ValueError, match="one element"):
        srb.SizedLaunch(CAI((2,), "<i4"), 64, lambda c: None)
    with pytest.raises((TypeError, ValueError)):
        srb.SizedLaunch(CAI((1,), "<f4"), 64, lambda c: None)
    with pytest.raises(srb.ConfigError, match="device"):
        srb.SizedLaunch(count, 64, lambda c: None, device=-1)
    with pytest.raises(TypeError, match="callable"):
        srb.SizedLaunch(count, 64, 42)
    with pytest.raises(srb.BadPointerError):
        srb.SizedLaunch(CAI((1,), "<i4", ptr=0x7F00_0000_0002), 64, lambda c: None)


def test_sized_launch_exact_grid_arguments_are_config_errors():
    """The exact-grid form (items_per_block): at least 1 item per block, no classes beside it,
    and a capacity whose grid fits gridDim.x; all before any driver call."""
    count = CAI((1,), "<i4")
    body = lambda c: None
    for bad in [0, -3]:
        with pytest.raises(srb.ConfigError, match="items_per_block must be at least 1"):
            srb.SizedLaunch(count, 64, body, items_per_block=bad)
    with pytest.raises(srb.ConfigError, match="give no classes"):
        srb.SizedLaunch(count, 64, body, classes=[16, 64], items_per_block=16)
    with pytest.raises(srb.ConfigError, match="gridDim.x's limit"):
        srb.SizedLaunch(count, 2**40, body, items_per_block=1)
    with pytest.raises(TypeError):
        srb.SizedLaunch(count, 64, body, items_per_block=True)


def test_sized_launch_out_of_range_numbers_are_config_errors():
    """Negative or oversized numbers are the readbacks' ConfigError, naming the rule, not a
    bare OverflowError from the conversion."""
    count = CAI((1,), "<i4")
    body = lambda c: None
    with pytest.raises(srb.ConfigError, match="capacity must be at least 1 row, not -5"):
        srb.SizedLaunch(count, -5, body)
    with pytest.raises(srb.ConfigError, match="range of a 64-bit integer"):
        srb.SizedLaunch(count, 2**64, body)
    with pytest.raises(srb.ConfigError, match="size class must be at least 1 row, not -1"):
        srb.SizedLaunch(count, 4096, body, classes=[-1, 4096])
    with pytest.raises(srb.ConfigError, match="device must be a CUDA device ordinal"):
        srb.SizedLaunch(count, 64, body, device=2**40)
    with pytest.raises(TypeError):
        srb.SizedLaunch(count, True, body)
