"""JAX producers (jit-compiled, asynchronously dispatched): arrays through __dlpack__, every
count dtype, columns."""

import numpy as np
import pytest

import sized_readback as srb

pytestmark = pytest.mark.gpu
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

CAP = 2048


@pytest.fixture(scope="module")
def gpu():
    jax.config.update("jax_enable_x64", True)
    try:
        devs = jax.devices("gpu")
    except RuntimeError as e:
        pytest.skip(f"JAX has no GPU backend: {e}")
    if not devs:
        pytest.skip("JAX sees no GPU")
    return devs[0]


@pytest.mark.parametrize("count_dtype", ["int32", "int64", "uint32", "uint64"])
@pytest.mark.parametrize("n", [0, 1, CAP, CAP + 1])
def test_jax_arrays_every_count_dtype_and_edge_count(gpu, count_dtype, n):
    rb = srb.Readback(CAP, dtype=np.float64)
    data = jax.device_put(jnp.arange(CAP + 4, dtype=jnp.float64) * 0.25 + 3, gpu)
    count = jax.device_put(jnp.asarray(n, dtype=getattr(jnp, count_dtype)), gpu)
    t = rb.enqueue(data, count)
    if n > CAP:
        with pytest.raises(srb.CountExceedsCapacityError) as e:
            t.wait(timeout=30)
        assert e.value.count == n
        return
    with t.wait(timeout=30) as out:
        assert out.count == n
        np.testing.assert_array_equal(out.numpy(), np.arange(n) * 0.25 + 3)


def test_a_jitted_producer_selects_on_the_device(gpu):
    @jax.jit
    def select(x, thr):
        keep = x > thr
        n = keep.sum(dtype=jnp.int32)
        order = jnp.argsort(~keep, stable=True)  # kept rows first, in order
        return x[order], n

    rb = srb.Readback(CAP, dtype=np.float32, slots=4)
    rng = np.random.default_rng(9)
    pending = []
    for _ in range(40):
        host = rng.standard_normal(CAP).astype(np.float32)
        data, n = select(jax.device_put(host, gpu), np.float32(0.3))
        pending.append((rb.enqueue(data, n), host))  # dispatched, maybe not yet computed
        if len(pending) == 4:
            for t, h in pending:
                with t.wait(timeout=30) as out:
                    np.testing.assert_array_equal(out.numpy(), h[h > 0.3])
            pending = []


def test_jax_columns(gpu):
    rb = srb.Readback(CAP, columns={"p": ("f4", 3), "k": np.int64})
    i = jnp.arange(CAP)
    p = jax.device_put(jnp.stack([i, -i, 2 * i], axis=1).astype(jnp.float32), gpu)
    k = jax.device_put(i.astype(jnp.int64) * 11, gpu)
    with rb.enqueue({"p": p, "k": k}, jax.device_put(jnp.asarray(77, jnp.int32), gpu)).wait(timeout=30) as out:
        ih = np.arange(77)
        np.testing.assert_array_equal(out.numpy("p"), np.stack([ih, -ih, 2 * ih], 1).astype(np.float32))
        np.testing.assert_array_equal(out.numpy("k"), ih * 11)
