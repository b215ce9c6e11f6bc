"""PyTorch producers on the GPU: every count dtype, counts 0, 1, capacity and capacity + 1,
bad inputs, columns of mixed dtypes, several streams, the release rule on real slots,
timeouts, DLPack, and thousands of random cycles under torch's sync debug mode "error"."""

import gc

import numpy as np
import pytest

import sized_readback as srb

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

DEV = "cuda:0"
CAP = 1000


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    yield
    torch.cuda.synchronize()


COUNT_DTYPES = ["int32", "int64", "uint32", "uint64"]


def count_tensor(n, name, device=DEV):
    """A 0-d device count of torch dtype `name` (unsigned ones are views of signed fills:
    torch's uint32/uint64 have few kernels)."""
    signed = {"int32": torch.int32, "uint32": torch.int32, "int64": torch.int64, "uint64": torch.int64}[name]
    t = torch.full((), n, dtype=signed, device=device)
    return t if name.startswith("int") else t.view(getattr(torch, name))


def produce(rows, base, step, dtype=torch.float64):
    """rows values base + i * step (exact in every dtype used here)."""
    return torch.arange(rows, device=DEV, dtype=torch.float64).mul_(step).add_(base).to(dtype)


def expected(n, base, step, dtype=np.float64):
    return (np.arange(n, dtype=np.float64) * step + base).astype(dtype)


@pytest.mark.parametrize("count_dtype", COUNT_DTYPES)
@pytest.mark.parametrize("n", [0, 1, CAP, CAP + 1])
def test_every_count_dtype_and_edge_count(count_dtype, n):
    rb = srb.Readback(CAP, dtype=torch.float64)
    data = produce(CAP + 8, 0.5, 3.0)
    count = count_tensor(n, count_dtype)
    ticket = rb.enqueue(data, count)
    if n <= CAP:
        with ticket.wait() as out:
            assert out.count == n
            np.testing.assert_array_equal(out.numpy(), expected(n, 0.5, 3.0))
        return
    with pytest.raises(srb.CountExceedsCapacityError) as e:
        ticket.wait()
    assert isinstance(e.value, OverflowError)
    assert (e.value.count, e.value.capacity) == (CAP + 1, CAP)
    with pytest.raises(srb.CountExceedsCapacityError):
        ticket.wait()  # the same error again
    rb.grow(e.value.count)
    assert rb.info["capacity"] == CAP + 1
    # The deprecated shortcut getter: the info entry's value, with a DeprecationWarning
    # naming the replacement.
    with pytest.warns(DeprecationWarning, match=r'use rb.info\["capacity"\]'):
        assert rb.capacity == CAP + 1
    with rb.enqueue(data, count).wait() as out:  # the device data was untouched
        assert out.count == CAP + 1
        np.testing.assert_array_equal(out.numpy(), expected(CAP + 1, 0.5, 3.0))


@pytest.mark.parametrize("count_dtype, n", [("int32", -3), ("int64", -(2**40))])
def test_negative_counts(count_dtype, n):
    rb = srb.Readback(CAP, dtype=torch.float64)
    with pytest.raises(srb.NegativeCountError) as e:
        rb.enqueue(produce(CAP, 0, 1), count_tensor(n, count_dtype)).wait()
    assert isinstance(e.value, ValueError) and e.value.count == n


def test_a_count_past_the_source_reads_nothing():
    rb = srb.Readback(CAP, dtype=torch.float64)
    with pytest.raises(srb.CountExceedsSourceError) as e:
        rb.enqueue(produce(10, 0, 1), count_tensor(11, "int32")).wait()
    assert (e.value.count, e.value.source_len) == (11, 10)


def test_bad_inputs_are_value_errors():
    rb = srb.Readback(CAP, dtype=torch.float64)
    n = count_tensor(3, "int32")
    with pytest.raises(ValueError, match="float32"):
        rb.enqueue(produce(CAP, 0, 1, torch.float32), n)
    with pytest.raises(ValueError, match="int32, int64"):
        rb.enqueue(produce(CAP, 0, 1), torch.zeros((), device=DEV))
    with pytest.raises(ValueError, match="one element"):
        rb.enqueue(produce(CAP, 0, 1), torch.zeros(2, dtype=torch.int32, device=DEV))
    with pytest.raises(ValueError, match="not on a CUDA device"):
        rb.enqueue(torch.zeros(CAP, dtype=torch.float64), n)
    with pytest.raises(ValueError, match="contiguous"):
        rb.enqueue(produce(2 * CAP, 0, 1)[::2], n)
    with pytest.raises(ValueError, match="0-dimensional"):
        rb.enqueue(torch.zeros((), dtype=torch.float64, device=DEV), n)
    z = torch.complex(produce(CAP, 0, 1), produce(CAP, 0, 1))
    with pytest.raises(ValueError, match="lazy conjugate view"):
        srb.Readback(CAP, dtype=torch.complex128).enqueue(z.conj(), n)
    with pytest.raises(ValueError, match="lazy negation view"):
        rb.enqueue(torch._neg_view(produce(CAP, 0, 1)), n)
    # Resolved, the same views read back their values.
    with srb.Readback(CAP, dtype=torch.complex128).enqueue(z.conj().resolve_conj(), n).wait(timeout=30) as out:
        np.testing.assert_array_equal(out.numpy(), (expected(3, 0, 1) - 1j * expected(3, 0, 1)))
    with rb.enqueue(torch._neg_view(produce(CAP, 0, 1)).resolve_neg(), n).wait(timeout=30) as out:
        np.testing.assert_array_equal(out.numpy(), -expected(3, 0, 1))
    rb2 = srb.Readback(CAP, dtype=("f8", 3))
    with pytest.raises(ValueError, match="rows of shape"):
        rb2.enqueue(torch.zeros(CAP, 2, dtype=torch.float64, device=DEV), n)


@pytest.mark.multi_gpu
def test_foreign_device_is_a_value_error():
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU")
    rb = srb.Readback(CAP, dtype=torch.float64)
    with pytest.raises(srb.ForeignDeviceError):
        rb.enqueue(torch.zeros(CAP, dtype=torch.float64, device="cuda:1"), count_tensor(1, "int32"))


def test_columns_of_mixed_dtypes():
    cols = {
        "pos": ("f4", 3),
        "vel": (np.float64, 3),
        "id": torch.int64,
        "alive": torch.bool,
        "h": torch.float16,
        "z": np.complex64,
        "b": np.uint8,
    }
    rb = srb.Readback(CAP, columns=cols, slots=3)
    i = torch.arange(CAP, device=DEV)
    data = {
        "pos": (i[:, None] * 3 + torch.arange(3, device=DEV)).to(torch.float32),
        "vel": (i[:, None] * -2.0 + torch.arange(3, device=DEV)).to(torch.float64),
        "id": i * 1000 + 7,
        "alive": i % 3 == 0,
        "h": (i % 64).to(torch.float16),
        "z": torch.complex(i.float(), -i.float()).to(torch.complex64),
        "b": (i % 251).to(torch.uint8),
    }
    for n in [0, 1, 517, CAP]:
        t = rb.enqueue(data, count_tensor(n, "uint32"))
        with t.wait() as out:
            assert out.count == n
            pos, vel, ids, alive, h, z, b = out.numpy()
            ih = np.arange(n)
            np.testing.assert_array_equal(pos, (ih[:, None] * 3 + np.arange(3)).astype(np.float32))
            np.testing.assert_array_equal(vel, ih[:, None] * -2.0 + np.arange(3))
            np.testing.assert_array_equal(ids, ih * 1000 + 7)
            np.testing.assert_array_equal(alive, ih % 3 == 0)
            np.testing.assert_array_equal(h, (ih % 64).astype(np.float16))
            np.testing.assert_array_equal(z, (ih - 1j * ih).astype(np.complex64))
            np.testing.assert_array_equal(b, (ih % 251).astype(np.uint8))
            assert out.numpy("id").dtype == np.int64 and pos.shape == (n, 3)
            del pos, vel, ids, alive, h, z, b  # views hold the slot
    # a tuple in column order works too
    t = rb.enqueue(tuple(data[k] for k in cols), count_tensor(5, "int64"))
    assert t.wait().count == 5


def test_several_streams_and_a_copy_stream():
    rb = srb.Readback(CAP, dtype=torch.float64, slots=8)
    streams = [torch.cuda.Stream() for _ in range(3)]
    copy = torch.cuda.Stream()
    tickets = []
    for k, s in enumerate(streams):
        with torch.cuda.stream(s):
            # A slow producer: an enqueue that were not ordered after it would read -1s.
            data = torch.full((CAP,), -1.0, dtype=torch.float64, device=DEV)
            torch.cuda._sleep(2_000_000)
            data.copy_(produce(CAP, k * 100.0, 1.0))
            n = count_tensor(100 + k, "int32")
            # stream=None: this stream (torch's current one)
            tickets.append((rb.enqueue(data, n), k, 100 + k))
            # on the copy stream, ordered after this one on the device
            tickets.append((rb.enqueue(data, n, stream=copy), k, 100 + k))
    for t, k, n in tickets:
        with t.wait(timeout=30) as out:
            assert out.count == n
            np.testing.assert_array_equal(out.numpy(), expected(n, k * 100.0, 1.0))


def test_stream_objects_and_handles():
    rb = srb.Readback(CAP, dtype=torch.float64)
    s = torch.cuda.Stream()
    data, n = produce(CAP, 1, 1), count_tensor(9, "int32")
    torch.cuda.synchronize()
    for stream in [s, s.cuda_stream, torch.cuda.current_stream(), 0]:
        assert rb.enqueue(data, n, stream=stream).wait(timeout=30).count == 9


def test_views_hold_their_slot_and_are_never_overwritten():
    rb = srb.Readback(CAP, dtype=torch.float64, slots=2)
    n = count_tensor(10, "int32")
    out = rb.enqueue(produce(CAP, 0, 1), n).wait()
    held = out.numpy()
    with pytest.raises(BufferError):
        out.release()
    for k in range(1, 20):  # every later readback takes the other slot
        with rb.enqueue(produce(CAP, k * 1000.0, 1), n).wait() as o2:
            np.testing.assert_array_equal(o2.numpy(), expected(10, k * 1000.0, 1))
        np.testing.assert_array_equal(held, expected(10, 0, 1))
    one = srb.Readback(CAP, dtype=torch.float64, slots=1)
    o = one.enqueue(produce(CAP, 0, 1), n).wait()
    v = o.numpy()
    with pytest.raises(srb.SlotsExhaustedError):
        one.enqueue(produce(CAP, 0, 1), n)
    del v, o
    gc.collect()
    assert one.enqueue(produce(CAP, 5, 1), n).wait().numpy()[0] == 5.0


def test_copy_outlives_the_slot_and_dlpack_goes_to_torch_and_numpy():
    rb = srb.Readback(CAP, dtype=torch.int64, slots=2)
    data = torch.arange(CAP, device=DEV) * 3
    with rb.enqueue(data, count_tensor(7, "int64")).wait() as out:
        c = out.copy()
        t = torch.from_dlpack(out)
        a = np.from_dlpack(out)
        assert t.device.type == "cpu" and t.tolist() == [0, 3, 6, 9, 12, 15, 18]
        np.testing.assert_array_equal(a, c)
        del t, a
    np.testing.assert_array_equal(c, np.arange(7) * 3)


def test_timeouts_leave_the_ticket_valid():
    rb = srb.Readback(CAP, dtype=torch.float64)
    torch.cuda._sleep(200_000_000)  # ~0.1 s on the current stream
    t = rb.enqueue(produce(CAP, 2, 2), count_tensor(4, "int32"))
    with pytest.raises(srb.ReadbackTimeoutError) as e:
        t.wait(timeout=0.001)
    assert isinstance(e.value, TimeoutError) and e.value.waited >= 0.001
    assert t.done() in (False, True)
    assert t.wait(timeout=60).count == 4
    assert t.done()


def test_tickets_dropped_in_flight_keep_their_arrays():
    rb = srb.Readback(CAP, dtype=torch.float64, slots=4)
    for _ in range(3):
        torch.cuda._sleep(2_000_000)
        data = produce(CAP, 1, 1)
        t = rb.enqueue(data, count_tensor(CAP, "int32"))
        del data, t  # the readback may still be running: it keeps the tensor alive
    gc.collect()
    for k in range(8):
        assert rb.enqueue(produce(CAP, k, 1), count_tensor(3, "int32")).wait().numpy()[0] == k


def test_keep_false_holds_no_reference_and_reads_the_rows():
    import weakref

    rb = srb.Readback(CAP, dtype=torch.float64)
    torch.cuda._sleep(20_000_000)  # the pack runs after this, while the host goes on
    data, n = produce(CAP, 5, 2), count_tensor(7, "int32")
    kept = rb.enqueue(data, n)
    refs = weakref.ref(data), weakref.ref(n)
    unkept = rb.enqueue(data, n, keep=False)
    del data, n
    gc.collect()
    # The kept ticket still holds both; the unkept one adds nothing to that.
    assert all(r() is not None for r in refs)
    np.testing.assert_array_equal(kept.wait().numpy(), expected(7, 5, 2))
    del kept
    gc.collect()
    # Freed to torch's caching allocator, whose reuse on this stream comes after the pack.
    assert all(r() is None for r in refs)
    np.testing.assert_array_equal(unkept.wait().numpy(), expected(7, 5, 2))
    with pytest.raises(TypeError):
        rb.enqueue(produce(CAP, 0, 1), count_tensor(1, "int32"), keep="no")


def test_staged_transport():
    rb = srb.Readback(CAP, dtype=torch.float32, transport="staged")
    assert rb.info["transport"] == "staged"
    with rb.enqueue(produce(CAP, 1, 2, torch.float32), count_tensor(CAP, "int32")).wait() as out:
        np.testing.assert_array_equal(out.numpy(), expected(CAP, 1, 2, np.float32))


def test_staged_copies_whole_and_sized_read_alike():
    # The GPU host's driver (R580, CUDA 13.0) has graph conditionals: "auto" takes the sized copy.
    auto = srb.Readback(CAP, dtype=torch.float64, transport="staged")
    whole = srb.Readback(CAP, dtype=torch.float64, transport="staged", staged_copy="whole")
    assert (auto.info["staged_copy"], whole.info["staged_copy"]) == ("sized", "whole")
    assert auto.info["staged_copy"] == "sized"
    assert srb.Readback(CAP, dtype=torch.float64).info["staged_copy"] is None
    for n in (0, 1, 3, 17, CAP):
        x = produce(CAP, n, 3)
        for rb in (auto, whole):
            with rb.enqueue(x, count_tensor(n, "int32")).wait() as out:
                np.testing.assert_array_equal(out.numpy(), expected(CAP, n, 3)[:n])
    with pytest.raises(srb.SizedCopyUnavailableError, match="append"):
        srb.AppendReadback(CAP, dtype=np.float64, transport="staged", staged_copy="sized")


def test_enqueue_refuses_a_capturing_stream():
    rb = srb.Readback(CAP, dtype=torch.float64)
    x = produce(CAP, 0, 1)
    n = count_tensor(3, "int32")
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with pytest.raises(srb.StreamCapturingError):
        with torch.cuda.graph(g):
            y = x * 2
            rb.enqueue(y, n)


def test_random_cycles_never_synchronize_and_are_exact():
    """Thousands of cycles with random counts (0, 1, capacity, capacity + 1 and between),
    count dtypes, columns and depths in flight, every element checked, under
    torch.cuda.set_sync_debug_mode("error"): any synchronizing torch call would raise."""
    rng = np.random.default_rng(12)
    cap = 2048
    single = srb.Readback(cap, dtype=torch.float64, slots=4)
    mixed = srb.Readback(cap, columns=[("f4", 2), torch.int32, torch.bool], slots=4)
    idx = torch.arange(cap + 16, device=DEV, dtype=torch.float64)
    copy = torch.cuda.Stream()
    cycles = checked = overflowed = 0
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        assert torch.cuda.get_sync_debug_mode() == 2
        while cycles < 4000:
            depth = int(rng.integers(1, 5))
            pending = []
            for _ in range(depth):
                n = int(rng.choice([0, 1, cap, cap + 1, rng.integers(0, cap + 1)]))
                base, step = float(rng.integers(-10_000, 10_000)), float(rng.integers(-8, 9))
                kind = COUNT_DTYPES[int(rng.integers(0, 4))]
                count = count_tensor(n, kind)
                side = rng.random() < 0.3
                if rng.random() < 0.5:
                    d = idx * step + base
                    t = single.enqueue(d, count, stream=copy if side else None)
                    pending.append(("single", t, n, base, step))
                else:
                    xy = torch.stack([idx * step + base, idx - base], dim=1).to(torch.float32)
                    ids = (idx * 2).to(torch.int32)
                    flags = (idx.to(torch.int64) % 5) == 1
                    t = mixed.enqueue((xy, ids, flags), count, stream=copy if side else None)
                    pending.append(("mixed", t, n, base, step))
                cycles += 1
            for kind, t, n, base, step in pending:
                if n > cap:
                    with pytest.raises(srb.CountExceedsCapacityError) as e:
                        t.wait(timeout=60)
                    assert (e.value.count, e.value.capacity) == (n, cap)
                    overflowed += 1
                    continue
                with t.wait(timeout=60) as out:
                    assert out.count == n
                    i = np.arange(n, dtype=np.float64)
                    if kind == "single":
                        np.testing.assert_array_equal(out.numpy(), i * step + base)
                    else:
                        xy, ids, flags = out.numpy()
                        np.testing.assert_array_equal(xy, np.stack([i * step + base, i - base], 1).astype(np.float32))
                        np.testing.assert_array_equal(ids, (i * 2).astype(np.int32))
                        np.testing.assert_array_equal(flags, (np.arange(n) % 5) == 1)
                        del xy, ids, flags  # views hold the slot: the next rounds need it
                    checked += 1
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    assert checked > 3000 and overflowed > 100
