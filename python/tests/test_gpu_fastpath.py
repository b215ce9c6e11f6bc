"""The binding's fast path on the GPU: caches stay right after grow, after arrays and streams
are freed and their addresses reused, and across devices; dropped tickets hold their slot
until done (no event per enqueue); the raw-address entry point; transport="auto"."""

import gc
import time
import weakref

import numpy as np
import pytest

import sized_readback as srb

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

DEV = "cuda:0"


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    yield
    torch.cuda.synchronize()


def n_of(k, dtype=torch.int32, device=DEV):
    return torch.full((), k, dtype=dtype, device=device)


def test_grow_with_the_same_arrays_and_types():
    rb = srb.Readback(100, dtype=torch.float64)
    data = torch.arange(1000, device=DEV, dtype=torch.float64)
    for cap in (100, 400, 1000):
        if cap != rb.info["capacity"]:
            rb.grow(cap)
        for n in (0, 1, cap // 2, cap):
            with rb.enqueue(data, n_of(n)).wait() as out:
                assert out.count == n
                np.testing.assert_array_equal(out.numpy(), np.arange(n, dtype=np.float64))
        with pytest.raises(srb.CountExceedsCapacityError):
            rb.enqueue(data, n_of(cap + 1)).wait()


def test_freed_arrays_and_reused_addresses():
    rb = srb.Readback(512, dtype=torch.float32)
    for k in range(50):
        # The caching allocator hands the same block to each new tensor: same address, other
        # dtype and shape every other time; every read must follow the tensor of the moment.
        if k % 2:
            wrong = torch.zeros(512, dtype=torch.float64, device=DEV)
            with pytest.raises(ValueError, match="float64"):
                rb.enqueue(wrong, n_of(3))
            del wrong
        x = torch.arange(512, device=DEV, dtype=torch.float32) + k
        with rb.enqueue(x, n_of(5 + k)).wait() as out:
            np.testing.assert_array_equal(out.numpy(), np.arange(5 + k, dtype=np.float32) + k)
        del x
        gc.collect()


def test_streams_freed_and_made_again():
    rb = srb.Readback(256, dtype=torch.int64)
    data = torch.arange(256, device=DEV)
    for k in range(40):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            n = n_of(k + 1)
        t = rb.enqueue(data, n, stream=s)
        assert t.wait(timeout=30).count == k + 1
        del s, t
        raw = torch.cuda.Stream()
        t = rb.enqueue(data, n_of(k), stream=raw.cuda_stream)  # the int handle path
        assert t.wait(timeout=30).count == k
        del raw, t


@pytest.mark.multi_gpu
def test_across_devices():
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    rb0 = srb.Readback(64, dtype=torch.float64, device=0)
    rb1 = srb.Readback(64, dtype=torch.float64, device=1)
    d0 = torch.arange(64, device="cuda:0", dtype=torch.float64)
    d1 = torch.arange(64, device="cuda:1", dtype=torch.float64) * 2
    for _ in range(3):
        with pytest.raises(srb.ForeignDeviceError):
            rb1.enqueue(d0, n_of(3, device="cuda:1"))
        with pytest.raises(srb.ForeignDeviceError):
            rb0.enqueue(d0, n_of(3, device="cuda:1"))
        with torch.cuda.device(1):
            assert list(rb1.enqueue(d1, n_of(3, device="cuda:1")).wait().numpy()) == [0, 2, 4]
        assert list(rb0.enqueue(d0, n_of(3)).wait().numpy()) == [0, 1, 2]
        assert torch.cuda.current_device() == 0


def test_dropped_tickets_hold_their_slot_until_done_and_an_enqueue_waits_for_the_oldest():
    rb = srb.Readback(1000, dtype=torch.float64, slots=2)
    refs, after = [], []
    for k in range(3):
        torch.cuda._sleep(100_000_000)  # ~50 ms: still in flight when dropped
        data = torch.arange(1000, device=DEV, dtype=torch.float64) + k
        refs.append(weakref.ref(data))
        # The third finds both slots held by dropped, unfinished tickets: it waits for the
        # oldest (not SlotsExhaustedError, and no overwrite of a slot still being written).
        n = n_of(1000)
        t0 = time.perf_counter()
        t = rb.enqueue(data, n)
        took = time.perf_counter() - t0
        ev = torch.cuda.Event()
        ev.record()  # after this readback's pack
        after.append(ev)
        if k < 2:
            del t
        assert rb.slots_in_use == (k + 1 if k < 2 else 2)
    # The third enqueue returned only once the first readback had completed (~50 ms of sleep
    # queued before it; its slot is the one the third took), and before the second had.
    assert took > 0.02, f"the third enqueue returned after {took * 1e3:.1f} ms: it did not wait"
    assert not after[1].query()
    assert not after[2].query()
    out = t.wait()
    assert out.count == 1000
    np.testing.assert_array_equal(out.numpy(), np.arange(1000, dtype=np.float64) + 2)
    del out, t, data
    torch.cuda.synchronize()
    assert rb.enqueue(torch.zeros(1, device=DEV, dtype=torch.float64), n_of(1)).wait().count == 1
    gc.collect()
    assert all(r() is None for r in refs), "released once their readback was seen complete"
    o = rb.enqueue(torch.arange(1000, device=DEV, dtype=torch.float64), n_of(10)).wait()
    held = o.numpy()
    o2 = rb.enqueue(torch.arange(1000, device=DEV, dtype=torch.float64), n_of(10)).wait()
    with pytest.raises(srb.SlotsExhaustedError):  # held by readouts, not dropped tickets
        rb.enqueue(torch.arange(1000, device=DEV, dtype=torch.float64), n_of(10))
    del held, o, o2


def test_an_enqueue_waits_only_for_dropped_tickets_of_its_own_slots():
    # A dropped ticket of the slots before a grow cannot free a slot of the new ones: an
    # enqueue that finds the new slots held by a live ticket raises at once.
    rb = srb.Readback(1000, dtype=torch.float64, slots=1)
    torch.cuda._sleep(400_000_000)  # ~200 ms
    old = rb.enqueue(torch.arange(1000, device=DEV, dtype=torch.float64), n_of(5))
    ev = torch.cuda.Event()
    ev.record()
    del old  # dropped in flight: holds the old slot
    rb.grow(2000)
    live = rb.enqueue(torch.arange(2000, device=DEV, dtype=torch.float64), n_of(7))
    more = torch.arange(2000, device=DEV, dtype=torch.float64)
    n7 = n_of(7)
    old_in_flight = not ev.query()  # (unless the grow's allocations synchronized)
    t0 = time.perf_counter()
    with pytest.raises(srb.SlotsExhaustedError):
        rb.enqueue(more, n7)
    took = time.perf_counter() - t0
    if old_in_flight:
        assert took < 0.05, f"waited {took * 1e3:.0f} ms for a dropped ticket of the old slots"
    assert live.wait().count == 7


def test_the_raw_entry_point_reads_the_same():
    rb = srb.Readback(4096, dtype=torch.float64)
    x = torch.arange(4096, device=DEV, dtype=torch.float64) * 3
    n = n_of(777)
    s = torch.cuda.current_stream().cuda_stream
    with rb._enqueue_raw([x.data_ptr()], [x.shape[0]], n.data_ptr(), "int32", s).wait() as a:
        with rb.enqueue(x, n).wait() as b:
            assert a.count == b.count == 777
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(srb.CountExceedsSourceError):
        rb._enqueue_raw([x.data_ptr()], [10], n.data_ptr(), "int32", s).wait()
    with pytest.raises(srb.BadPointerError):
        rb._enqueue_raw([x.data_ptr()], [4096], 0, "int32", s)
    with pytest.raises(ValueError, match="count_kind"):
        rb._enqueue_raw([x.data_ptr()], [4096], n.data_ptr(), "float32", s)
    with pytest.raises(ValueError, match="one address"):
        rb._enqueue_raw([x.data_ptr(), 0], [4096], n.data_ptr(), "int32", s)


def test_auto_transport_follows_the_last_count():
    cap = 16 << 20  # 128 MiB of f64: the smallest slot with staged slots
    rb = srb.Readback(cap, dtype=torch.float64, transport="auto")
    assert rb.info["transport"] == "auto"
    # Its staged slots serve nearly full slots: the whole-slot copy.
    assert rb.info["staged_copy"] == "whole"
    big = rb.auto_staged_from
    assert big == max(srb._native.AUTO_STAGED_MIN_BYTES // 8, int(np.ceil(cap * srb._native.AUTO_STAGED_MIN_FILL)))
    x = torch.arange(cap, device=DEV, dtype=torch.float64)
    seen = []
    for n in (10, cap, cap, 100, 100, big, big - 1, big - 1):
        t = rb.enqueue(x, n_of(n))
        seen.append(t.transport)
        with t.wait() as out:
            assert out.count == n
            v = out.numpy()
            assert v[0] == 0 and v[-1] == n - 1 if n else True
            del v
    # Each enqueue follows the count read back before it.
    assert seen == ["mapped", "mapped", "staged", "staged", "mapped", "mapped", "staged", "mapped"]
    rb.grow(2 * cap)
    assert rb.auto_staged_from == int(np.ceil(2 * cap * srb._native.AUTO_STAGED_MIN_FILL))


def test_auto_numbers_both_sets_in_one_sequence_and_falls_back_to_the_other_set():
    cap = 16 << 20  # 128 MiB of f64: the smallest slot with staged slots
    rb = srb.Readback(cap, dtype=torch.float64, slots=1, transport="auto")
    x = torch.arange(cap, device=DEV, dtype=torch.float64)
    t1 = rb.enqueue(x, n_of(cap))
    o1 = t1.wait()  # mapped slot held; the last count chooses staged next
    t2 = rb.enqueue(x, n_of(10))
    o2 = t2.wait()  # staged slot held; the last count chooses mapped next
    assert (t1.transport, t2.transport) == ("mapped", "staged")
    assert rb.slots_in_use == 2
    with pytest.raises(srb.SlotsExhaustedError):  # both sets full
        rb.enqueue(x, n_of(5))
    o2.release()
    t3 = rb.enqueue(x, n_of(5))  # mapped is full: the free staged slot takes it
    assert t3.transport == "staged"
    o3 = t3.wait()
    assert [t1.seq, t2.seq, t3.seq] == [1, 2, 3]
    assert [o1.seq, o2.seq, o3.seq] == [1, 2, 3]
    assert list(o3.numpy()) == [0, 1, 2, 3, 4]
    o1.release()
    o3.release()


def test_auto_makes_its_staged_set_only_once_a_count_can_reach_the_threshold():
    rb = srb.Readback(64, dtype=torch.float64, slots=1, transport="auto")
    assert rb.auto_staged_from is None  # no count within the capacity reaches the threshold
    assert rb.info["auto_staged_slots"] == 0  # no staged slots allocated
    x = torch.arange(16 << 20, device=DEV, dtype=torch.float64)
    o = rb.enqueue(x[:64], n_of(3)).wait()
    with pytest.raises(srb.SlotsExhaustedError):  # no staged set to fall back to
        rb.enqueue(x[:64], n_of(3))
    rb.grow(1 << 20)  # 8 MiB of f64: still below the threshold
    assert rb.auto_staged_from is None and rb.info["auto_staged_slots"] == 0
    rb.grow(16 << 20)
    assert rb.auto_staged_from == rb.info["capacity"] == 16 << 20
    assert rb.info["auto_staged_slots"] == 1
    t = rb.enqueue(x, n_of(7))  # the mapped set is new: o still holds an old slot
    assert t.wait().count == 7
    assert list(o.numpy()) == [0, 1, 2]


@pytest.mark.parametrize("transport", ["mapped", "staged", "auto"])
def test_profile_runs_and_cleans_up_on_every_path(transport):
    rb = srb.Readback(4096, dtype=torch.float64, transport=transport)
    x = torch.arange(4096, device=DEV, dtype=torch.float64)
    n = n_of(100)
    d = rb._profile(x, n, reps=5)
    assert d["reps"] == 5 and d["core_enqueue"] > 0

    def boom():
        raise RuntimeError("before failed")

    for _ in range(3):  # the error path destroys its event too
        with pytest.raises(RuntimeError, match="before failed"):
            rb._profile(x, n, reps=5, before=boom)
    assert rb.slots_in_use == 0
    with rb.enqueue(x, n).wait() as out:
        assert out.count == 100
