"""SizedLaunch from Python: a CuPy RawKernel body per size class, each launch running the body
of the count's class (its grid, its n_max) with the true count bounding the work; counts past
the capacity and negative ones run nothing; a loop with no host synchronization; a body that
raises is a BodyRecordingError with the exception as its cause; the exact-grid form
(items_per_block) runs its one kernel with the count's grid."""

import gc
import threading
import time

import numpy as np
import pytest

import sized_readback as srb

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy")

BODY = r"""
extern "C" __global__ void body(const int* count, unsigned long long n_max, unsigned int klass,
                                unsigned long long* out, unsigned long long* meta) {
    unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid == 0) { meta[0] = n_max; meta[1] = (unsigned long long)gridDim.x * blockDim.x;
                    meta[2] = klass; meta[3] += 1; }
    long long n = *count;
    if ((long long)tid < n && tid < n_max) out[tid] = 2 * tid + 1;
}
"""
SENTINEL = 0xDEADBEEF


@pytest.fixture(autouse=True)
def _cuda(cupy_device):
    if cp.cuda.runtime.driverGetVersion() < 12080:
        n = cp.zeros(1, dtype=cp.int32)
        with pytest.raises(srb.SizedLaunchUnavailableError):
            srb.SizedLaunch(n, 64, lambda c: None)
        pytest.skip("sized launches need a CUDA 12.8 driver (checked: SizedLaunchUnavailableError)")
    yield


class Bench:
    def __init__(self, classes):
        self.classes = classes
        cap = classes[-1]
        self.count = cp.zeros(1, dtype=cp.int32)
        self.out = cp.full(cap + 64, SENTINEL, dtype=cp.uint64)
        self.meta = cp.zeros(4, dtype=cp.uint64)
        self.kernel = cp.RawKernel(BODY, "body")
        self.kernel.compile()
        self.launch = srb.SizedLaunch(self.count, cap, self.body, classes=classes)

    def body(self, c):
        grid = (c.n_max + 255) // 256
        with cp.cuda.ExternalStream(c.stream):
            self.kernel((grid,), (256,), (self.count, np.uint64(c.n_max), np.uint32(c.index), self.out, self.meta))

    def check(self, n, index):
        meta = self.meta.get()
        n_max = self.classes[index]
        assert meta[3] == 1 and meta[2] == index and meta[0] == n_max
        assert meta[1] == (n_max + 255) // 256 * 256
        out = self.out.get()
        np.testing.assert_array_equal(out[:n], 2 * np.arange(n, dtype=np.uint64) + 1)
        assert out[n] == SENTINEL

    def reset(self):
        self.out.fill(SENTINEL)
        self.meta.fill(0)


def class_of(classes, n):
    return next(i for i, c in enumerate(classes) if n <= c)


def test_every_class_boundary_runs_its_body_alone():
    b = Bench([1024, 4096, 5000])
    assert b.launch.classes == [1024, 4096, 5000] and b.launch.capacity == 5000
    for n in [0, 1, 1024, 1025, 4096, 4097, 5000]:
        b.reset()
        b.count.fill(n)
        t = b.launch.enqueue()
        assert t.seq is not None
        done = t.wait(timeout=30)
        assert (done.count, done.index) == (n, class_of(b.classes, n))
        b.check(n, done.index)


def test_bad_counts_run_nothing_and_report_the_true_count():
    b = Bench([64, 1000])
    b.reset()
    b.count.fill(1001)
    with pytest.raises(srb.CountExceedsCapacityError) as e:
        b.launch.enqueue().wait(timeout=30)
    assert e.value.count == 1001 and e.value.capacity == 1000
    b.count.fill(-5)
    with pytest.raises(srb.NegativeCountError) as e:
        b.launch.enqueue().wait(timeout=30)
    assert e.value.count == -5
    assert b.meta.get()[3] == 0


def test_a_loop_with_no_host_sync():
    b = Bench([32, 128, 512, 2048])
    counts = [(i * 977 + 13) % 2049 for i in range(100)]
    tickets = []
    for n in counts:
        b.count.fill(n)  # on CuPy's current stream, as the enqueue
        tickets.append(b.launch.enqueue())
    for t, n in zip(tickets, counts):
        done = t.wait(timeout=30)
        assert (done.count, done.index) == (n, class_of(b.classes, n))
    assert b.meta.get()[3] == len(counts)


def test_a_body_that_raises_is_a_body_recording_error():
    n = cp.zeros(1, dtype=cp.int32)

    def body(c):
        if c.index == 1:
            raise RuntimeError("no workspace for this size")

    with pytest.raises(srb.BodyRecordingError) as e:
        srb.SizedLaunch(n, 64, body, classes=[8, 64])
    assert e.value.index == 1 and e.value.n_max == 64
    assert isinstance(e.value.__cause__, RuntimeError)
    assert "no workspace" in str(e.value)


def test_the_exact_grid_form_sets_the_counts_grid():
    """items_per_block: one body kernel, recorded for the capacity, run with ceil(n / 256)
    blocks; a count of 0 skips it and the next count runs it again; a body of two launches is
    a BodyRecordingError."""
    cap = 5000
    count = cp.zeros(1, dtype=cp.int32)
    out = cp.full(cap + 64, SENTINEL, dtype=cp.uint64)
    meta = cp.zeros(4, dtype=cp.uint64)
    kernel = cp.RawKernel(BODY, "body")
    kernel.compile()
    seen = []

    def body(c, launches=1):
        seen.append((c.index, c.n_max))
        with cp.cuda.ExternalStream(c.stream):
            for _ in range(launches):
                kernel(((cap + 255) // 256,), (256,), (count, np.uint64(cap), np.uint32(0), out, meta))

    launch = srb.SizedLaunch(count, cap, body, items_per_block=256)
    assert seen == [(0, cap)] and launch.classes == [cap]
    for n in [1, 300, 0, 5000, 3]:
        out.fill(SENTINEL)
        meta.fill(0)
        count.fill(n)
        done = launch.enqueue().wait(timeout=30)
        assert (done.count, done.index) == (n, 0)
        m = meta.get()
        if n == 0:
            assert m[3] == 0, "the body ran for a count of 0"
            continue
        assert m[3] == 1 and m[1] == (n + 255) // 256 * 256, m
        o = out.get()
        np.testing.assert_array_equal(o[:n], 2 * np.arange(n, dtype=np.uint64) + 1)
        assert o[n] == SENTINEL
    with pytest.raises(srb.BodyRecordingError, match="2 operations"):
        srb.SizedLaunch(count, cap, lambda c: body(c, launches=2), items_per_block=256)


SPIN = r"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""


def busy_for(ns):
    """A blocking stream (ordered with the legacy default stream, as CuPy's default stream is)
    that spins for `ns` on the device, the device idle before."""
    spin = cp.RawKernel(SPIN, "spin")
    spin.compile()
    cp.cuda.Device().synchronize()
    busy = cp.cuda.Stream(non_blocking=False)
    with busy:
        spin((1,), (1,), (np.uint64(ns),))
    return busy


def test_building_waits_for_no_other_work():
    """A sized launch built while another stream of the context is busy returns before that
    work ends: a build that synchronized the context, or used the legacy stream, would wait
    the 0.5 s out. The first build in the process (which loads the library's modules) is made
    before the busy work starts."""
    b = Bench([32, 128])
    busy = busy_for(500_000_000)
    launch = srb.SizedLaunch(b.count, 128, b.body, classes=[32, 128])
    assert not busy.done, "the build waited for work on another stream"
    busy.synchronize()
    b.count.fill(100)
    done = launch.enqueue().wait(timeout=30)
    assert (done.count, done.index) == (100, 1)
    b.check(100, 1)


@pytest.mark.parametrize("transport", ["mapped", "staged"])
def test_building_a_readback_waits_for_no_other_work(transport):
    """A readback built when every earlier one is gone returns before another stream's work
    ends: the library's kernel images stay loaded in the device's primary context (loading
    them again would wait for every running kernel)."""
    srb.Readback(1 << 16, dtype=np.float64, transport=transport)  # built and dropped
    gc.collect()
    busy = busy_for(500_000_000)
    rb = srb.Readback(1 << 16, dtype=np.float64, transport=transport)
    still_busy = not busy.done
    busy.synchronize()
    data = cp.arange(1 << 16, dtype=cp.float64)
    n = cp.full((), 7, dtype=cp.int32)
    with rb.enqueue(data, n).wait(timeout=30) as out:
        np.testing.assert_array_equal(out.numpy(), np.arange(7, dtype=np.float64))
    assert still_busy, "the build waited for work on another stream"


@pytest.mark.parametrize("transport", ["mapped", "staged"])
def test_dropping_a_readback_lets_other_python_threads_run(transport):
    """A readback's drop frees pinned and device memory, and those frees wait for the device's
    running work; the drop waits with the GIL released, so another Python thread runs
    meanwhile (it would stand still for the whole wait with the GIL held)."""
    rb = srb.Readback(1 << 16, dtype=np.float64, transport=transport)
    ticks, stop = [], threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    busy = busy_for(300_000_000)
    thread = threading.Thread(target=ticker)
    thread.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    del rb
    t1 = time.perf_counter()
    stop.set()
    thread.join()
    busy.synchronize()
    during = sum(t0 < t < t1 for t in ticks)
    assert t1 - t0 > 0.1, f"the drop took {(t1 - t0) * 1e3:.1f} ms: it did not wait for the device, so this shows nothing"
    assert during >= 10, f"another thread ran {during} times during a {(t1 - t0) * 1e3:.0f} ms drop"
