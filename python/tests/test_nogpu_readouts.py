"""Readouts over host memory, with no GPU: views, copies, the release rule, DLPack export."""

import gc

import numpy as np
import pytest

from sized_readback import _native


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
