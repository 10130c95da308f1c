"""nuvec.random against mlx.core.random: MLX's signatures and keyword names, the same values
for the same key (bit-equal where include/nuvec/random.h promises it: keys, split, uniform,
randint, bernoulli, permutation; within a few ulps for the samplers that go through erfinv,
log or log1p), determinism, the global key sequence, statistics of every distribution with
fixed keys, dtypes and shapes, the transforms, and the errors."""
import math
import re

import numpy as np
import pytest

import nuvec as nv
import nuvec.random
from conftest import assert_close

mx = pytest.importorskip("mlx.core")

# Every mlx.core.random function of the C op table (multivariate_normal is Python: its
# signature and samples are checked in test_compat_core.py).
FUNCTIONS = ["bernoulli", "categorical", "gumbel", "key", "laplace", "normal", "permutation",
             "randint", "seed", "split", "truncated_normal", "uniform"]


def both(seed):
    return nv.random.key(seed), mx.random.key(seed)


def same(a, b):
    a, b = np.array(a), np.array(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    np.testing.assert_array_equal(a, b)


def mlx_params(fn):
    return re.findall(r"(\w+):", fn.__doc__.split("\n")[0].split("->")[0])


def nv_params(fn):
    head = fn.__doc__.split(", *,")[0]
    return re.findall(r"(\w+)(?:=\.\.\.)?(?:,|$)", head.split("(", 1)[1])


def test_submodule_imports():
    import importlib

    mod = importlib.import_module("nuvec.random")
    assert mod is nv.random is nuvec.random
    from nuvec.random import normal  # noqa: F401
    assert nv.random.normal((2,)).shape == (2,)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_signature_matches_mlx(name):
    want = [p for p in mlx_params(getattr(mx.random, name)) if p != "stream"]
    assert nv_params(getattr(nv.random, name)) == want


def test_keys_split_bits_equal_mlx():
    for s in [0, 1, 42, 2**40 + 7, 2**64 - 1]:
        k, m = both(s)
        same(k, m)
        same(nv.random.split(k), mx.random.split(m))
        same(nv.random.split(k, 5), mx.random.split(m, 5))
        same(nv.random.split(k, num=0), mx.random.split(m, num=0))
    k = nv.random.key(3)
    # split is bits((num, 2)) with 4-byte words.
    same(nv.random.bits((4, 2), key=k), nv.random.split(k, 4))
    for width, dtype in [(4, np.uint32), (2, np.uint16), (1, np.uint8)]:
        b = np.array(nv.random.bits((1000,), width, key=k))
        assert b.dtype == dtype and len(np.unique(b)) > 100
    assert nv.random.bits(key=k).shape == ()


def test_uniform_randint_bernoulli_permutation_equal_mlx():
    k, m = both(7)
    same(nv.random.uniform(key=k), mx.random.uniform(key=m))
    same(nv.random.uniform(-2, 3, (5, 7), key=k), mx.random.uniform(-2, 3, (5, 7), key=m))
    for dt in ["float16", "bfloat16", "float32"]:
        a = nv.random.uniform(shape=(100,), dtype=getattr(nv, dt), key=k)
        b = mx.random.uniform(shape=(100,), dtype=getattr(mx, dt), key=m)
        assert a.dtype == getattr(nv, dt)
        same(a.astype(nv.float32), b.astype(mx.float32))
    lo = np.array([[0.0], [10.0]], np.float32)
    same(nv.random.uniform(nv.array(lo), 20, (2, 3), key=k),
         mx.random.uniform(mx.array(lo), 20, (2, 3), key=m))
    same(nv.random.uniform(low=1, high=nv.array([2.0, 4.0]), shape=[3, 2], key=k),
         mx.random.uniform(low=1, high=mx.array([2.0, 4.0]), shape=[3, 2], key=m))
    same(nv.random.randint(0, 10, (50,), key=k), mx.random.randint(0, 10, (50,), key=m))
    same(nv.random.randint(-5, 5, key=k), mx.random.randint(-5, 5, key=m))
    same(nv.random.randint(0.5, 10.5, (4,), key=k), mx.random.randint(0.5, 10.5, (4,), key=m))
    for dt in ["int8", "uint8", "int64", "uint32", "bool_"]:
        same(nv.random.randint(0, 3, (20,), getattr(nv, dt), key=k),
             mx.random.randint(0, 3, (20,), getattr(mx, dt), key=m))
    same(nv.random.randint(nv.array([0, 100]), 200, (3, 2), nv.int64, key=k),
         mx.random.randint(mx.array([0, 100]), 200, (3, 2), mx.int64, key=m))
    same(nv.random.bernoulli(key=k), mx.random.bernoulli(key=m))
    same(nv.random.bernoulli(0.3, (64,), key=k), mx.random.bernoulli(0.3, (64,), key=m))
    p = np.array([0.1, 0.5, 0.9], np.float32)
    same(nv.random.bernoulli(nv.array(p), key=k), mx.random.bernoulli(mx.array(p), key=m))
    same(nv.random.bernoulli(nv.array(p), (4, 3), key=k), mx.random.bernoulli(mx.array(p), (4, 3), key=m))
    same(nv.random.permutation(20, key=k), mx.random.permutation(20, key=m))
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    same(nv.random.permutation(nv.array(x), key=k), mx.random.permutation(mx.array(x), key=m))
    same(nv.random.permutation(nv.array(x), axis=1, key=k),
         mx.random.permutation(mx.array(x), axis=1, key=m))


def close(a, b, ulps=4):
    a, b = np.array(a).astype(np.float64), np.array(b).astype(np.float64)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=ulps * 2.0**-23, atol=ulps * 2.0**-23)


def test_float_samplers_close_to_mlx():
    k, m = both(11)
    close(nv.random.normal((1000,), key=k), mx.random.normal((1000,), key=m))
    close(nv.random.normal((3,), loc=1, scale=2, key=k), mx.random.normal((3,), loc=1, scale=2, key=m))
    loc = np.array([1.0, 2.0, 3.0], np.float32)
    close(nv.random.normal(loc=nv.array(loc), key=k), mx.random.normal(loc=mx.array(loc), key=m))
    close(nv.random.normal((2, 3), loc=nv.array(loc), scale=2, key=k),
          mx.random.normal((2, 3), loc=mx.array(loc), scale=2, key=m))
    c_nv, c_mx = nv.random.normal((500,), nv.complex64, key=k), mx.random.normal((500,), mx.complex64, key=m)
    assert c_nv.dtype == nv.complex64
    close(np.array(c_nv).real, np.array(c_mx).real)
    close(np.array(c_nv).imag, np.array(c_mx).imag)
    f64 = nv.random.normal((100,), nv.float64, key=k)
    assert f64.dtype == nv.float64
    close(f64, mx.random.normal((100,), mx.float64, key=m))
    close(nv.random.truncated_normal(-1, 1, (1000,), key=k), mx.random.truncated_normal(-1, 1, (1000,), key=m))
    lo = np.array([-1.0, 0.0], np.float32)
    close(nv.random.truncated_normal(nv.array(lo), 1, key=k), mx.random.truncated_normal(mx.array(lo), 1, key=m))
    close(nv.random.gumbel((1000,), key=k), mx.random.gumbel((1000,), key=m), ulps=16)
    close(nv.random.laplace((1000,), key=k), mx.random.laplace((1000,), key=m), ulps=16)
    close(nv.random.laplace((100,), nv.float64, 1, 2, key=k), mx.random.laplace((100,), mx.float64, 1, 2, key=m), ulps=16)
    logits = np.random.default_rng(5).standard_normal((50, 8)).astype(np.float32) * 3
    for kw in [{}, {"axis": 0}, {"shape": (3, 50)}, {"num_samples": 7}]:
        a = np.array(nv.random.categorical(nv.array(logits), key=k, **kw))
        b = np.array(mx.random.categorical(mx.array(logits), key=m, **kw))
        assert a.dtype == np.uint32 and a.shape == b.shape
        assert (a == b).mean() > 0.99  # argmax ties under a few ulps of noise may differ


def test_determinism_and_the_key_sequence():
    k = nv.random.key(123)
    for f in [lambda key: nv.random.normal((8,), key=key), lambda key: nv.random.uniform(shape=(8,), key=key),
              lambda key: nv.random.randint(0, 100, (8,), key=key), lambda key: nv.random.gumbel((8,), key=key)]:
        same(f(k), f(nv.random.key(123)))
        assert not np.array_equal(np.array(f(k)), np.array(f(nv.random.key(124))))
    k1, k2 = nv.random.split(k)
    assert not np.array_equal(np.array(nv.random.uniform(shape=(8,), key=k1)),
                              np.array(nv.random.uniform(shape=(8,), key=k2)))
    # The global sequence: reseeding repeats it, and it is MLX's for the same seed.
    nv.random.seed(9)
    mx.random.seed(9)
    first = [np.array(nv.random.uniform(shape=(4,))) for _ in range(3)]
    want = [np.array(mx.random.uniform(shape=(4,))) for _ in range(3)]
    nv.random.seed(9)
    again = [np.array(nv.random.uniform(shape=(4,))) for _ in range(3)]
    for a, b, c in zip(first, want, again):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    assert not np.array_equal(first[0], first[1])
    nv.random.seed(9)
    same(nv.random.normal((3,)), nv.random.normal((3,), key=nv.random.split(nv.random.key(9))[1]))


N = 200_000


def stats(x):
    x = np.array(x).astype(np.float64)
    return x.mean(), x.var()


def test_statistics():
    key = nv.random.key(2024)
    ks = nv.random.split(key, 12)
    u = np.array(nv.random.uniform(-1, 3, (N,), key=ks[0]))
    assert u.min() >= -1 and u.max() < 3
    m, v = stats(u)
    assert abs(m - 1) < 0.02 and abs(v - 16 / 12) < 0.02
    m, v = stats(nv.random.normal((N,), loc=2, scale=3, key=ks[1]))
    assert abs(m - 2) < 0.03 and abs(v - 9) < 0.1
    c = np.array(nv.random.normal((N,), nv.complex64, key=ks[2]))
    assert abs(c.real.var() - 0.5) < 0.01 and abs(c.imag.var() - 0.5) < 0.01
    assert abs(np.mean(c.real * c.imag)) < 0.01
    t = np.array(nv.random.truncated_normal(-0.5, 2.0, (N,), key=ks[3])).astype(np.float64)
    assert t.min() >= -0.5 and t.max() <= 2.0
    # The mean of N(0, 1) truncated to [a, b]: (phi(a) - phi(b)) / (Phi(b) - Phi(a)).
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    Phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    assert abs(t.mean() - (phi(-0.5) - phi(2.0)) / (Phi(2.0) - Phi(-0.5))) < 0.01
    m, v = stats(nv.random.gumbel((N,), key=ks[4]))
    assert abs(m - 0.5772156649) < 0.02 and abs(v - math.pi**2 / 6) < 0.05
    m, v = stats(nv.random.laplace((N,), loc=-1, scale=0.5, key=ks[5]))
    assert abs(m + 1) < 0.01 and abs(v - 2 * 0.25) < 0.01
    b = np.array(nv.random.bernoulli(0.3, (N,), key=ks[6]))
    assert b.dtype == np.bool_ and abs(b.mean() - 0.3) < 0.005
    r = np.array(nv.random.randint(-3, 7, (N,), key=ks[7]))
    assert r.dtype == np.int32 and r.min() == -3 and r.max() == 6
    counts = np.bincount(r + 3)
    assert np.all(np.abs(counts / N - 0.1) < 0.005)
    logits = np.array([0.0, 1.0, 2.0, -1.0], np.float32)
    s = np.array(nv.random.categorical(nv.array(logits), num_samples=N, key=ks[8]))
    p = np.exp(logits) / np.exp(logits).sum()
    assert np.all(np.abs(np.bincount(s, minlength=4) / N - p) < 0.005)
    perm = np.array(nv.random.permutation(1000, key=ks[9]))
    assert perm.dtype == np.uint32 and sorted(perm.tolist()) == list(range(1000))
    assert (perm != np.arange(1000)).mean() > 0.9


def test_dtypes_and_shapes():
    k = nv.random.key(0)
    assert nv.random.uniform(key=k).shape == () and nv.random.uniform(key=k).dtype == nv.float32
    assert nv.random.uniform(shape=(2, 3), dtype=nv.float16, key=k).dtype == nv.float16
    assert nv.random.uniform(dtype=None, key=k).dtype == nv.float32
    assert nv.random.normal([4], nv.bfloat16, key=k).dtype == nv.bfloat16
    assert nv.random.normal(loc=nv.array([1.0, 2.0]), key=k).shape == (2,)
    assert nv.random.randint(0, 5, (3, 0), key=k).shape == (3, 0)
    assert nv.random.bernoulli(nv.array([[0.5, 0.5]]), key=k).shape == (1, 2)
    assert nv.random.truncated_normal(nv.array([-1.0, 0.0]), nv.array([[1.0], [2.0]]), key=k).shape == (2, 2)
    assert nv.random.truncated_normal(-1, 1, (5,), nv.float16, key=k).dtype == nv.float16
    assert nv.random.categorical(nv.zeros((3, 4)), key=k).shape == (3,)
    assert nv.random.categorical(nv.zeros((3, 4)), 0, key=k).shape == (4,)
    assert nv.random.permutation(nv.arange(6).reshape(3, 2), key=k).dtype == nv.int32
    assert nv.random.split(k, 3).shape == (3, 2) and nv.random.split(k).dtype == nv.uint32
    assert nv.random.key(5).tolist() == [0, 5] and nv.random.key(2**40).tolist() == [256, 0]
    s = nv.random.normal((3,), key=k, stream=nv.cpu)
    same(s, nv.random.normal((3,), key=k, stream=nv.default_stream(nv.cpu)))


def test_under_transforms():
    keys = nv.random.split(nv.random.key(1), 4)
    batched = nv.vmap(lambda k: nv.random.uniform(shape=(3,), key=k))(keys)
    for i in range(4):
        same(batched[i], nv.random.uniform(shape=(3,), key=keys[i]))
    k = nv.random.key(2)
    g = nv.grad(lambda x: (x * nv.random.normal((3,), key=k)).sum())(nv.ones(3))
    assert_close(np.array(g), np.array(nv.random.normal((3,), key=k)), "float32")


def test_errors():
    k = nv.random.key(0)
    bad = [
        lambda: nv.random.uniform(dtype=nv.int32, key=k),
        lambda: nv.random.uniform(dtype=nv.float64, key=k),
        lambda: nv.random.uniform(nv.array([0.0, 1.0]), 2, (3,), key=k),
        lambda: nv.random.uniform(nv.array([0.0, 1.0]), 2, key=k),
        lambda: nv.random.normal((2,), nv.int32, key=k),
        lambda: nv.random.normal((2,), loc=nv.array([1.0, 2.0, 3.0]), key=k),
        lambda: nv.random.randint(0, 10, (4,), nv.float32, key=k),
        lambda: nv.random.bernoulli(1, key=k),
        lambda: nv.random.bernoulli(nv.array([1, 0]), key=k),
        lambda: nv.random.truncated_normal(-1, 1, (3,), nv.float64, key=k),
        lambda: nv.random.gumbel((3,), nv.float64, key=k),
        lambda: nv.random.laplace((3,), nv.int32, key=k),
        lambda: nv.random.categorical(nv.zeros((2, 3)), shape=(2,), num_samples=3, key=k),
        lambda: nv.random.categorical(nv.zeros((2, 3)), axis=3, key=k),
        lambda: nv.random.permutation(-1, key=k),
        lambda: nv.random.permutation(nv.array(3), key=k),
        lambda: nv.random.split(k, -1),
        lambda: nv.random.uniform(key=nv.array([1, 2])),
        lambda: nv.random.uniform(key=nv.zeros((3,), nv.uint32)),
        lambda: nv.random.bits((2,), 3, key=k),
        lambda: nv.random.normal((-1,), key=k),
        lambda: nv.random.key(-1),
        lambda: nv.random.seed(2**64),
    ]
    for i, f in enumerate(bad):
        with pytest.raises(ValueError):
            f()
    with pytest.raises(ValueError, match="At most one of shape or num_samples"):
        nv.random.categorical(nv.zeros((2, 3)), shape=(2,), num_samples=3)
    with pytest.raises(TypeError, match="key must be an array"):
        nv.random.uniform(key=[1, 2])
    with pytest.raises(TypeError):
        nv.random.laplace((3,), loc=nv.array([1.0, 2, 3]), key=k)
    with pytest.raises(TypeError):
        nv.random.randint(0)
    with pytest.raises(TypeError):
        nv.random.uniform(bogus=1)
