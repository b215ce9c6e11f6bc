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


def test_require_gpu_turns_skipped_gpu_tests_into_failures(tmp_path):
    # Review 10: a GPU run could pass with its GPU tests skipped.
    import pathlib
    import shutil
    import subprocess
    import sys

    here = pathlib.Path(__file__).parent
    shutil.copy(here / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_gpu_a.py").write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.gpu\n"
        "def test_needs_the_gpu():\n"
        "    pytest.skip('PyTorch sees no CUDA device')\n"
        "@pytest.mark.multi_gpu\n"
        "def test_needs_two():\n"
        "    pytest.skip('one GPU')\n"
    )
    (tmp_path / "test_gpu_b.py").write_text(
        "import pytest\npytestmark = pytest.mark.gpu\npytest.importorskip('no_such_framework_here')\n"
    )
    (tmp_path / "test_plain.py").write_text(
        "import pytest\ndef test_other():\n    pytest.skip('not a gpu test')\n"
    )

    def run(require):
        env = dict(__import__("os").environ, SRB_REQUIRE_GPU="1" if require else "0")
        r = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tmp_path)],
            capture_output=True, text=True, env=env, cwd=tmp_path,
        )
        return r.returncode, r.stdout

    rc, out = run(False)
    assert rc == 0, out
    assert "4 skipped" in out, out
    rc, out = run(True)
    assert rc != 0, out
    # A skip at setup (the no-GPU marker) reports as an error, one in the test as a failure.
    assert ("1 failed" in out or "1 error" in out) and "3 skipped" in out, out
    assert "but this GPU test skipped:" in out
    assert "a GPU test module skipped: test_gpu_b.py" in out


class P:
    """A CUDA Array Interface array (class property: the cached path)."""

    def __init__(self, shape, typestr, ptr=0x1000):
        self.shape, self.typestr, self.ptr = shape, typestr, ptr

    @property
    def __cuda_array_interface__(self):
        return _cai(self.shape, self.typestr, self.ptr)


def test_shapes_whose_size_overflows_are_refused():
    # Review 11: 3 * 6148914691236517206 wraps to 2, and 8 * 2 matched a 16-byte column.
    cnt = _count()
    with pytest.raises(ValueError, match="overflows"):
        _native._parse_inputs(P(shape=(10, 3, 6148914691236517206), typestr="<V8"), cnt, dtype="V16")
    with pytest.raises(ValueError, match="overflows"):  # hidden behind a zero dimension
        _native._parse_inputs(P(shape=(0, 3, 6148914691236517206), typestr="<V8"), cnt, dtype="V16")
    with pytest.raises(ValueError, match="overflows"):
        _native._parse_inputs(P(shape=(4,), typestr="<f8"), P(shape=(1 << 62, 4), typestr="<i4"))
    with pytest.raises(ValueError, match="0 or more"):
        _native._parse_inputs(P(shape=(4, -2), typestr="<V8"), cnt, dtype="V16")
    # Large but representable shapes still read.
    d = _native._parse_inputs(P(shape=(10, 2), typestr="<V8"), cnt, dtype="V16")
    assert d["rows"] == [10]
