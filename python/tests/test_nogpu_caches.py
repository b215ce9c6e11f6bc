"""The binding's per-type caches and numpy C-API views, without a GPU: what is cached is how a
type is read (never what an object says), so an object that changes, a type or object freed
and its address reused, and objects of other devices all read right."""

import gc
import weakref

import numpy as np
import pytest

import sized_readback as srb
from sized_readback import _native

from test_nogpu_arguments import CAI, FakeDLPack, parse


class PropCAI:
    """A device array whose class defines __cuda_array_interface__ (a property), as CuPy's
    and Numba's do: the per-type fast path."""

    def __init__(self, shape, typestr, ptr, stream=None):
        self.shape, self.typestr, self.ptr, self.stream = shape, typestr, ptr, stream

    @property
    def __cuda_array_interface__(self):
        d = dict(shape=self.shape, typestr=self.typestr, data=(self.ptr, False), strides=None, version=3)
        if self.stream is not None:
            d["stream"] = self.stream
        return d


class PropStream:
    def __init__(self, h):
        self.h = h

    @property
    def cuda_stream(self):
        return self.h


def test_the_protocol_is_decided_per_type_from_the_class():
    assert _native._type_facts(PropCAI((4,), "<f8", 0x1000)) == ("other", "cai", "probe")
    assert _native._type_facts(FakeDLPack((4,), 2, 64))[1] == "dlpack"
    # Set on the instance only: the class says nothing, so every call probes the object.
    assert _native._type_facts(CAI((4,), "<f8"))[1] == "probe"
    assert _native._type_facts(PropStream(5))[2] == "cuda_stream"
    assert _native._type_facts(7)[2] == "int"
    assert _native._type_facts(True)[2] == "int"  # and refused as a bool, every time
    with pytest.raises(TypeError):
        _native._stream_handle(True)


def test_what_an_object_says_is_read_on_every_call():
    data = PropCAI((100,), "<f8", 0x1000)
    count = PropCAI((), "<i4", 0x2000)
    d = parse(data, count)
    assert (d["ptrs"], d["rows"], d["count_ptr"], d["count_kind"]) == ([0x1000], [100], 0x2000, "i32")
    # The same objects, re-pointed and reshaped (as a tensor after resize_ or set_).
    data.ptr, data.shape, count.typestr, count.ptr = 0x5000, (7,), "<i8", 0x6000
    d = parse(data, count)
    assert (d["ptrs"], d["rows"], d["count_ptr"], d["count_kind"]) == ([0x5000], [7], 0x6000, "i64")
    # Every check still runs on a cached type.
    data.typestr = "<f4"
    with pytest.raises(ValueError, match="float32"):
        parse(data, count)
    data.typestr, data.shape = "<f8", (-1,)
    with pytest.raises(ValueError, match="dimensions are 0 or more"):
        parse(data, count)


def test_the_cai_stream_is_read_once_and_chooses_the_stream():
    reads = []

    class Counting(PropCAI):
        @property
        def __cuda_array_interface__(self):
            reads.append(1)
            return PropCAI.__cuda_array_interface__.fget(self)

    d = parse(Counting((10,), "<f8", 0x1000, stream=0x9000), PropCAI((), "<i4", 0x2000))
    assert d["stream"] == 0x9000 and d["afters"][0] == ("stream", 0x9000)
    assert len(reads) == 1, "the interface that chose the stream is the one read for the data"
    assert parse(Counting((10,), "<f8", 0x1000, stream=1), PropCAI((), "<i4", 0x2000))["stream"] == 0
    assert parse(Counting((10,), "<f8", 0x1000), PropCAI((), "<i4", 0x2000))["stream"] == 0


def test_stream_handles_are_read_on_every_call():
    s = PropStream(0x1111)
    assert _native._stream_handle(s) == 0x1111
    s.h = 0x2222
    assert _native._stream_handle(s) == 0x2222
    assert parse(PropCAI((4,), "<f8", 0x1000), PropCAI((), "<i4", 0x2000), stream=s)["stream"] == 0x2222
    # A freed stream object and a new one, likely at the same address: its own handle.
    for h in range(0x3000, 0x3040):
        s = PropStream(h)
        assert _native._stream_handle(s) == h
        del s


def test_a_cached_type_stays_alive_so_its_address_is_never_another_types():
    def make(kind):
        if kind == "cai":
            return type("T", (PropCAI,), {})
        return type("T", (object,), {"__dlpack_device__": lambda self: (2, 0)})

    T = make("cai")
    assert _native._type_facts(T((1,), "<f8", 1))[1] == "cai"
    alive = weakref.ref(T)
    del T
    gc.collect()
    assert alive() is not None, "the cache holds its types: their addresses cannot be reused"
    # Many new types after it, of the other protocol: each is read as what it is.
    for _ in range(50):
        U = make("dlpack")
        assert _native._type_facts(U())[1] == "dlpack"
        V = make("cai")
        assert _native._type_facts(V((1,), "<f8", 1))[1] == "cai"
    assert _native._clear_type_cache() >= 1
    gc.collect()
    assert alive() is None, "cleared: the type is freed"
    assert _native._type_cache_len() == 0


def test_the_cache_is_bounded():
    _native._clear_type_cache()
    for _ in range(600):
        T = type("T", (PropCAI,), {})
        assert _native._type_facts(T((1,), "<f8", 1))[1] == "cai"
    assert 0 < _native._type_cache_len() <= 256


def test_devices_are_checked_on_every_call_of_a_cached_type():
    on1 = FakeDLPack((), 0, 32, device=(2, 1))
    d = parse(FakeDLPack((8,), 2, 64, device=(2, 1)), on1, device=1)
    assert d["rows"] == [8]
    with pytest.raises(srb.ForeignDeviceError, match="device 1"):
        parse(FakeDLPack((8,), 2, 64, device=(2, 1)), FakeDLPack((), 0, 32), device=0)
    with pytest.raises(srb.ForeignDeviceError, match="device 0"):
        parse(FakeDLPack((8,), 2, 64, device=(2, 0)), on1, device=1)
    assert parse(FakeDLPack((8,), 2, 64, device=(2, 0)), FakeDLPack((), 0, 32), device=0)["rows"] == [8]


# --- numpy views through numpy's C API --------------------------------------------------------


def test_views_are_made_through_numpys_c_api():
    assert _native._numpy_capi()
    a = np.arange(12, dtype=np.float64)
    out = _native._host_readout([a], 5, dtype="f8")
    v = out.numpy()
    assert type(v) is np.ndarray and v.dtype == np.float64 and v.shape == (5,)
    assert not v.flags.writeable and v.flags.c_contiguous
    assert type(v.base).__name__ == "SlotView"
    assert v.__array_interface__["data"][0] == a.__array_interface__["data"][0], "zero-copy"
    np.testing.assert_array_equal(v, a[:5])
    with pytest.raises(ValueError):
        v[0] = 1.0
    assert out.exports == 1
    w = v[1:3]  # a view of the view holds the slot too
    del v
    gc.collect()
    assert out.exports == 1
    del w
    gc.collect()
    assert out.exports == 0
    out.release()


def test_c_api_views_of_every_column_kind():
    rec = np.dtype([("a", "<i4"), ("b", "<f8")])
    cols = {"v": ("f4", 3), "r": rec, "b": "?", "c": "c16", "raw": "V6"}
    arrays = [
        np.arange(30, dtype=np.float32).reshape(10, 3),
        np.array([(i, i / 2) for i in range(10)], dtype=rec),
        np.arange(10) % 2 == 0,
        np.arange(10) * (1 + 1j),
        np.frombuffer(bytes(range(60)), dtype="V6").copy(),
    ]
    out = _native._host_readout(arrays, 4, columns=cols)
    v, r, b, c, raw = out.numpy()
    assert v.shape == (4, 3) and v.dtype == np.float32
    np.testing.assert_array_equal(v, arrays[0][:4])
    assert r.dtype == rec and list(r["a"]) == [0, 1, 2, 3] and list(r["b"]) == [0, 0.5, 1, 1.5]
    np.testing.assert_array_equal(b, arrays[2][:4])
    np.testing.assert_array_equal(c, arrays[3][:4])
    assert raw.dtype == np.dtype("V6") and raw.tobytes() == bytes(range(24))
    assert out.count == 4 and out.numpy("v").shape == (4, 3)
    del v, r, b, c, raw
    gc.collect()
    out.release()
    zero = _native._host_readout([np.zeros(4)], 0, dtype="f8").numpy()
    assert zero.shape == (0,) and zero.dtype == np.float64


# --- transport="auto" -------------------------------------------------------------------------


def test_auto_transport_is_a_setting_of_readbacks_only():
    # The core's thresholds (sized_readback::auto), not the binding's own.
    assert _native.AUTO_STAGED_MIN_BYTES == 128 << 20 and _native.AUTO_STAGED_MIN_FILL == 0.981
    with pytest.raises(srb.ConfigError, match="auto"):
        srb.Readback(8, transport="pcie")
    with pytest.raises(srb.ConfigError, match="for a Readback"):
        srb.AppendReadback(8, transport="auto")
