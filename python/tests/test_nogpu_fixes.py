"""Regression tests, without a GPU, for the fixes of the python-fixes review: each test names
the finding it guards."""

import numpy as np
import pytest

import sized_readback as srb
from sized_readback import _native


@pytest.mark.parametrize(
    "dtype",
    [
        np.dtype([("o", object)]),
        np.dtype([("x", "f8"), ("o", object)]),
        np.dtype([("inner", [("o", object)])]),
        np.dtype((np.dtype([("o", object)]), 2)),
        object,
    ],
)
def test_dtypes_holding_objects_are_refused(dtype):
    # Review 1: a structured dtype with an object field was accepted as kind V, and numpy()
    # then read slot bytes as PyObject* (a segfault).
    a = np.zeros(4, "V8")
    a.view(np.uint64)[:] = 0xDEADBEEF
    with pytest.raises(srb.ConfigError, match="Python objects"):
        _native._host_readout([a], 2, dtype=dtype)
    with pytest.raises(ValueError):
        srb.Readback(4, dtype=dtype)
    with pytest.raises(ValueError):
        srb.Readback(4, columns={"a": "f8", "b": dtype})


def _cai(shape=(4,), typestr="<f8", ptr=0x1000):
    return dict(shape=shape, typestr=typestr, data=(ptr, False), strides=None, version=3)


def _count():
    class Count:
        __cuda_array_interface__ = _cai((), "<i4", 0x2000)

    return Count()


def test_a_class_whose_protocol_goes_away_is_probed_again():
    # Review 7: the protocol is cached per class; a class changed later was read the old way.
    class Changing:
        @property
        def __cuda_array_interface__(self):
            return _cai()

    obj = Changing()
    assert _native._type_facts(obj)[1] == "cai"
    assert _native._parse_inputs(obj, _count())["ptrs"] == [0x1000]
    del Changing.__cuda_array_interface__
    obj.__cuda_array_interface__ = _cai(ptr=0x3000)  # now an instance attribute only
    assert _native._parse_inputs(obj, _count())["ptrs"] == [0x3000]
    other = Changing()  # neither on the class nor on the object: the cached accessor fails
    with pytest.raises(TypeError, match="must be a CUDA device array"):
        _native._parse_inputs(other, _count())
    assert _native._type_facts(obj)[1] == "probe"  # the class was decided again
    assert _native._parse_inputs(obj, _count())["ptrs"] == [0x3000]


def test_a_class_property_raising_attribute_error_gives_the_documented_type_error():
    class Broken:
        @property
        def __cuda_array_interface__(self):
            raise AttributeError("not on this device today")

    for _ in range(3):  # cached or not
        with pytest.raises(TypeError, match="must be a CUDA device array") as e:
            _native._parse_inputs(Broken(), _count())
        assert isinstance(e.value.__cause__, AttributeError)
    with pytest.raises(TypeError, match="must be a CUDA device array"):
        _native._parse_inputs(Broken(), _count(), stream=0)
    # A property's other errors are its own.

    class Failing:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        _native._parse_inputs(Failing(), _count())


def test_a_stream_class_whose_accessor_goes_away_is_probed_again():
    class S:
        @property
        def cuda_stream(self):
            return 0x55

    s = S()
    assert _native._stream_handle(s) == 0x55
    del S.cuda_stream
    s.ptr = 0x66
    assert _native._stream_handle(s) == 0x66

    class Broken:
        @property
        def __cuda_stream__(self):
            raise AttributeError("gone")

    for _ in range(2):
        with pytest.raises(TypeError, match="stream must be") as e:
            _native._stream_handle(Broken())
        assert isinstance(e.value.__cause__, AttributeError)
