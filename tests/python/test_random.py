"""The random family: MLX's key-based API on threefry-2x32.

Checked against an independent NumPy implementation of the threefry stream layout (bits of
every width), against MLX itself where `mlx.core` imports (keys, splits, the global sequence,
and each sampler bit for bit or within a few ulps where MLX's float ops differ), by statistics
on 10^6 samples with fixed keys (mean, variance, Kolmogorov-Smirnov distance), and for
determinism across thread counts and key-splitting patterns."""
import ctypes as C
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from nvc import (CODE, FLOATS, INTS, BF16, NuvecError, ints, lib, np_dtype, nv_name as nv_dtype_name, sig)

P = C.c_void_p
I = C.c_int
D = C.c_double
IP = C.POINTER(C.c_int)
sig("nv_random_key", P, C.c_uint64)
sig("nv_random_seed", None, C.c_uint64)
sig("nv_random_split", P, P, I)
sig("nv_random_bits", P, IP, I, I, P)
sig("nv_random_uniform", P, P, P, IP, I, I, P)
sig("nv_random_uniform_scalar", P, D, D, IP, I, I, P)
sig("nv_random_randint", P, P, P, IP, I, I, P)
sig("nv_random_randint_scalar", P, C.c_int64, C.c_int64, IP, I, I, P)
sig("nv_random_gumbel", P, IP, I, I, P)

UNIFORM_DTYPES = ["float16", "bfloat16", "float32"]
N_STAT = 10**6


@pytest.fixture
def mx():
    return pytest.importorskip("mlx.core")


def mx_dtype(mx, name):
    return getattr(mx, {"bool": "bool_"}.get(name, name))


def from_mx(a):
    """An MLX array as NumPy (bfloat16 through ml_dtypes)."""
    if str(a.dtype) == "mlx.core.bfloat16":
        return np.array(a.view(__import__("mlx.core").core.uint16)).view(BF16)
    return np.array(a)


# ---- An independent reference of MLX's threefry stream (NumPy, vectorized) ----

_M = np.uint64(0xFFFFFFFF)


def _rotl(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & _M


def threefry(key, c0, c1):
    """Threefry-2x32 (20 rounds) of counter arrays c0, c1 under key (k0, k1)."""
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    ks = [k0, k1, k0 ^ k1 ^ np.uint64(0x1BD11BDA)]
    a = (np.asarray(c0, np.uint64) + ks[0]) & _M
    b = (np.asarray(c1, np.uint64) + ks[1]) & _M
    rot = [[13, 15, 26, 6], [17, 29, 16, 24]]
    for i in range(5):
        for r in rot[i % 2]:
            a = (a + b) & _M
            b = _rotl(b, r) ^ a
        a = (a + ks[(i + 1) % 3]) & _M
        b = (b + ks[(i + 2) % 3] + np.uint64(i + 1)) & _M
    return a.astype(np.uint32), b.astype(np.uint32)


def ref_bits(key, shape, width):
    """MLX's RandomBits for one key: pairs (i, half + odd + i) fill words i and half + odd + i;
    an odd word count puts hash(half, 0)'s first word in the middle; bytes cut at the end."""
    n = int(np.prod(shape))
    nbytes = n * width
    words = (nbytes + 3) // 4
    half, odd = words // 2, words % 2
    out = np.zeros(words, np.uint32)
    i = np.arange(half, dtype=np.uint64)
    a, b = threefry(key, i, i + np.uint64(half + odd))
    out[:half] = a
    out[half + odd:] = b
    if odd:
        out[half] = threefry(key, [half], [0])[0][0]
    dt = {4: np.uint32, 2: np.uint16, 1: np.uint8}[width]
    return out.view(np.uint8)[:nbytes].view(dt).reshape(shape)


# ---- Helpers ----


def key(nv, seed):
    return nv.own(lib.nv_random_key(seed))


def key_of(nv, pair):
    return nv.array(np.array(pair, dtype=np.uint32))


def shp(shape):
    return ints(shape)


def bits(nv, shape, width, k):
    s, n = shp(shape)
    return nv.read(nv.own(lib.nv_random_bits(s, n, width, k)))


def uniform(nv, lo, hi, shape, dtype, k):
    s, n = shp(shape)
    return nv.read(nv.own(lib.nv_random_uniform_scalar(lo, hi, s, n, CODE[dtype], k)))


def error_of(nv, h):
    st, msg = nv.status(h)
    assert st != 0, "expected an error"
    return msg


def ks_stat(samples, cdf):
    """The Kolmogorov-Smirnov distance between the samples and a continuous CDF."""
    x = np.sort(np.asarray(samples, np.float64))
    n = len(x)
    f = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


def ks_bound(n):
    # The 0.1% critical value of the KS distance for n samples (asymptotic), plus the
    # discreteness of float32 / half samples.
    return 1.95 / math.sqrt(n)


# ---- Keys, split, bits ----


@pytest.mark.parametrize("seed", [0, 1, 7, 2**32 - 1, 2**32, 2**40 + 5, 2**64 - 1])
def test_key_splits_seed_into_two_words(nv, seed):
    got = nv.read(key(nv, seed))
    assert got.dtype == np.uint32 and got.shape == (2,)
    assert list(got) == [seed >> 32, seed & 0xFFFFFFFF]


@pytest.mark.parametrize("seed", [0, 1, 2**40 + 5, 123456789])
def test_key_and_split_match_mlx(nv, mx, seed):
    np.testing.assert_array_equal(nv.read(key(nv, seed)), np.array(mx.random.key(seed)))
    for num in [1, 2, 3, 7]:
        got = nv.read(nv.own(lib.nv_random_split(key(nv, seed), num)))
        want = np.array(mx.random.split(mx.random.key(seed), num))
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("width", [1, 2, 4])
@pytest.mark.parametrize("shape", [(), (0,), (1,), (2,), (3,), (5,), (6,), (7,), (9,), (3, 5),
                                   (2, 3, 7), (101,), (1000,), (4, 0, 3)])
def test_bits_match_reference_layout(nv, rng, width, shape):
    pair = [int(v) for v in rng.integers(0, 2**32, 2)]
    got = bits(nv, shape, width, key_of(nv, pair))
    assert got.dtype == {1: np.uint8, 2: np.uint16, 4: np.uint32}[width]
    np.testing.assert_array_equal(got, ref_bits(pair, shape, width))


@pytest.mark.parametrize("width", [1, 4])
def test_bits_large_split_over_the_pool(nv, rng, width):
    # Past the kernel's parallel threshold: the pool splits the counter pairs.
    pair = [int(v) for v in rng.integers(0, 2**32, 2)]
    shape = (300_001,)
    np.testing.assert_array_equal(bits(nv, shape, width, key_of(nv, pair)),
                                  ref_bits(pair, shape, width))


def test_bits_of_key_views_read_through_strides(nv):
    # Keys that are rows, columns or reversed slices of other arrays read as their values.
    ks = nv.own(lib.nv_random_split(key(nv, 42), 4))
    want_keys = nv.read(ks)
    for i in range(4):
        start, n = ints([i, 0])
        stop, _ = ints([i + 1, 2])
        row = nv.own(lib.nv_slice(ks, start, stop, None, n))
        r1, _ = ints([2])
        row = nv.own(lib.nv_reshape(row, r1, 1))
        np.testing.assert_array_equal(bits(nv, (5,), 4, row), ref_bits(want_keys[i], (5,), 4))
    t = nv.own(lib.nv_transpose(nv.array(np.array([[3, 9], [4, 8]], np.uint32)), None, 0))
    start, n = ints([0, 1])
    stop, _ = ints([2, 2])
    col = nv.own(lib.nv_slice(t, start, stop, None, n))
    r1, _ = ints([2])
    col = nv.own(lib.nv_reshape(col, r1, 1))
    np.testing.assert_array_equal(bits(nv, (6,), 2, col), ref_bits([4, 8], (6,), 2))


sig("nv_slice", P, P, IP, IP, IP, I)
sig("nv_reshape", P, P, IP, I)


def test_split_patterns_are_consistent(nv, mx):
    # split(k, n)[i] is the same key however it is reached, and a chain of splits (the fold
    # pattern of the global sequence) gives MLX's keys.
    k = key(nv, 5)
    all4 = nv.read(nv.own(lib.nv_random_split(k, 4)))
    two = nv.read(nv.own(lib.nv_random_split(k, 2)))
    assert not np.array_equal(all4[:2], two)  # num is part of the counter layout, as MLX's
    np.testing.assert_array_equal(all4, np.array(mx.random.split(mx.random.key(5), 4)))
    cur, mcur = k, mx.random.key(5)
    for _ in range(5):
        both = nv.own(lib.nv_random_split(cur, 2))
        got = nv.read(both)
        mboth = mx.random.split(mcur, 2)
        np.testing.assert_array_equal(got, np.array(mboth))
        cur, mcur = key_of(nv, got[0]), mboth[0]


def test_split_zero_and_distinct(nv):
    assert nv.read(nv.own(lib.nv_random_split(key(nv, 1), 0))).shape == (0, 2)
    ks = nv.read(nv.own(lib.nv_random_split(key(nv, 1), 1000)))
    assert len({tuple(r) for r in ks}) == 1000


# ---- The global key sequence ----


def test_global_sequence_matches_mlx(nv, mx):
    s, n = shp((4,))
    for seed in [0, 17, 2**40 + 3]:
        lib.nv_random_seed(seed)
        mx.random.seed(seed)
        for _ in range(3):
            got = nv.read(nv.own(lib.nv_random_uniform_scalar(0, 1, s, n, CODE["float32"], None)))
            np.testing.assert_array_equal(got, np.array(mx.random.uniform(shape=(4,))))
        got = nv.read(nv.own(lib.nv_random_randint_scalar(0, 100, s, n, CODE["int32"], None)))
        np.testing.assert_array_equal(got, np.array(mx.random.randint(0, 100, (4,))))


def test_global_sequence_advances_and_reseeds(nv):
    s, n = shp((6,))
    lib.nv_random_seed(99)
    a = nv.read(nv.own(lib.nv_random_bits(s, n, 4, None)))
    b = nv.read(nv.own(lib.nv_random_bits(s, n, 4, None)))
    assert not np.array_equal(a, b)
    lib.nv_random_seed(99)
    np.testing.assert_array_equal(nv.read(nv.own(lib.nv_random_bits(s, n, 4, None))), a)
    # The first key handed out is the second half of split(key(99)).
    sub = nv.read(nv.own(lib.nv_random_split(key(nv, 99), 2)))[1]
    np.testing.assert_array_equal(a, ref_bits(sub, (6,), 4))


# ---- Determinism across thread counts ----

_CHILD = r"""
import hashlib, sys, ctypes as C
sys.path.insert(0, sys.argv[1])
import numpy as np
from nvc import lib, ints, sig, Session, CODE
P = C.c_void_p
sig("nv_random_key", P, C.c_uint64)
sig("nv_random_bits", P, C.POINTER(C.c_int), C.c_int, C.c_int, P)
sig("nv_random_uniform_scalar", P, C.c_double, C.c_double, C.POINTER(C.c_int), C.c_int, C.c_int, P)
sig("nv_random_split", P, P, C.c_int)
h = hashlib.sha256()
with Session() as nv:
    k = nv.own(lib.nv_random_key(2024))
    s, n = ints([1_000_003])
    h.update(nv.read(nv.own(lib.nv_random_bits(s, n, 4, k))).tobytes())
    h.update(nv.read(nv.own(lib.nv_random_bits(s, n, 1, k))).tobytes())
    h.update(nv.read(nv.own(lib.nv_random_uniform_scalar(-2, 3, s, n, CODE["bfloat16"], k))).tobytes())
    h.update(nv.read(nv.own(lib.nv_random_split(k, 100_000))).tobytes())
print(h.hexdigest())
"""


def test_same_bits_whatever_the_thread_count():
    here = os.path.dirname(os.path.abspath(__file__))
    digests = []
    for threads in ["1", "2", "3"]:
        env = dict(os.environ, NUVEC_NUM_THREADS=threads)
        out = subprocess.run([sys.executable, "-c", _CHILD, here], env=env, check=True,
                             capture_output=True, text=True, timeout=120)
        digests.append(out.stdout.strip())
    assert len(digests[0]) == 64 and digests.count(digests[0]) == 3, digests


# ---- uniform ----


@pytest.mark.parametrize("dtype", UNIFORM_DTYPES)
@pytest.mark.parametrize("lo,hi", [(0.0, 1.0), (-2.0, 3.0), (5.0, 5.5), (3.0, -1.0), (-0.0, 1.0)])
def test_uniform_matches_mlx(nv, mx, dtype, lo, hi):
    for seed in [0, 3, 2**33 + 1]:
        got = uniform(nv, lo, hi, (3, 41), dtype, key(nv, seed))
        want = from_mx(mx.random.uniform(lo, hi, (3, 41), dtype=mx_dtype(mx, dtype),
                                         key=mx.random.key(seed)))
        assert got.dtype == np_dtype(dtype)
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", UNIFORM_DTYPES)
def test_uniform_array_bounds_broadcast_as_mlx(nv, mx, rng, dtype):
    lo = rng.uniform(-3, 0, (4, 1)).astype(np.float32)
    hi = rng.uniform(0.5, 3, (5,)).astype(np.float32)
    s, n = shp((2, 4, 5))
    got = nv.read(nv.own(lib.nv_random_uniform(nv.array(lo), nv.array(hi), s, n, CODE[dtype],
                                               key(nv, 11))))
    want = from_mx(mx.random.uniform(mx.array(lo), mx.array(hi), (2, 4, 5),
                                     dtype=mx_dtype(mx, dtype), key=mx.random.key(11)))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    # Integer bounds convert to the dtype first.
    lo_i = nv.array(np.array([-3, 0, 7], np.int64))
    hi_i = nv.array(np.array([10], np.int8))
    s, n = shp((3,))
    got = nv.read(nv.own(lib.nv_random_uniform(lo_i, hi_i, s, n, CODE[dtype], key(nv, 4))))
    want = from_mx(mx.random.uniform(mx.array([-3, 0, 7]), mx.array([10], mx.int8), (3,),
                                     dtype=mx_dtype(mx, dtype), key=mx.random.key(4)))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", UNIFORM_DTYPES)
def test_uniform_statistics(nv, dtype):
    x = uniform(nv, -1.0, 3.0, (N_STAT,), dtype, key(nv, 1234)).astype(np.float64)
    assert x.min() >= -1.0 and x.max() < 3.0
    assert abs(x.mean() - 1.0) < 6 * math.sqrt(16 / 12 / N_STAT) + 4 * 2.0**-8
    assert abs(x.var() - 16 / 12) < 0.01
    ulp = {"float16": 2.0**-9, "bfloat16": 2.0**-6, "float32": 2.0**-22}[dtype] * 4
    # The KS distance to U(-1, 3), widened by the dtype's rounding of the samples.
    d = ks_stat(x, lambda t: np.clip((t + 1) / 4, 0, 1))
    assert d < ks_bound(N_STAT) + ulp / 4, d


def test_uniform_empty_and_0d(nv):
    assert uniform(nv, 0, 1, (0, 3), "float32", key(nv, 1)).shape == (0, 3)
    x = uniform(nv, 2, 3, (), "float32", key(nv, 1))
    assert x.shape == () and 2 <= x < 3


def test_uniform_stays_below_high(nv):
    # The clamp below one keeps samples under `high` even where bits/2^32 rounds to 1.
    k = key_of(nv, [0, 0])
    for dtype in UNIFORM_DTYPES:
        x = uniform(nv, 0, 1, (200_000,), dtype, k).astype(np.float64)
        assert x.max() < 1.0 and x.min() >= 0.0


# ---- randint ----


@pytest.mark.parametrize("dtype", INTS + ["bool"])
def test_randint_matches_mlx(nv, mx, dtype):
    info = np.iinfo(np_dtype(dtype)) if dtype != "bool" else None
    bounds = [(0, 2), (0, 10)]
    if info is not None:
        bounds.append((max(int(info.min), -1000), min(int(info.max), 1000)))
        if info.min < 0:
            bounds.append((-7, -2))
    for lo, hi in bounds:
        s, n = shp((7, 13))
        got = nv.read(nv.own(lib.nv_random_randint_scalar(lo, hi, s, n, CODE[dtype], key(nv, 8))))
        want = np.array(mx.random.randint(lo, hi, (7, 13), dtype=mx_dtype(mx, dtype),
                                          key=mx.random.key(8)))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_randint_array_bounds_match_mlx(nv, mx, rng):
    lo = rng.integers(-50, 0, (3, 1)).astype(np.int32)
    hi = rng.integers(1, 50, (4,)).astype(np.int64)
    s, n = shp((3, 4))
    got = nv.read(nv.own(lib.nv_random_randint(nv.array(lo), nv.array(hi), s, n,
                                               CODE["int16"], key(nv, 2))))
    want = np.array(mx.random.randint(mx.array(lo), mx.array(hi), (3, 4), dtype=mx.int16,
                                      key=mx.random.key(2)))
    np.testing.assert_array_equal(got, want)
    assert ((got >= lo) & (got < hi)).all()


def test_randint_empty_range_gives_low(nv):
    s, n = shp((50,))
    got = nv.read(nv.own(lib.nv_random_randint_scalar(5, 5, s, n, CODE["int32"], key(nv, 1))))
    assert (got == 5).all()
    got = nv.read(nv.own(lib.nv_random_randint_scalar(5, 2, s, n, CODE["int32"], key(nv, 1))))
    assert (got == 5).all()


def test_randint_statistics(nv):
    s, n = shp((N_STAT,))
    x = nv.read(nv.own(lib.nv_random_randint_scalar(-3, 7, s, n, CODE["int64"], key(nv, 77))))
    assert x.min() == -3 and x.max() == 6
    counts = np.bincount(x + 3, minlength=10)
    # Pearson's chi-square over 10 equally likely values (9 degrees of freedom): the 0.1%
    # critical value is 27.9.
    chi2 = ((counts - N_STAT / 10) ** 2 / (N_STAT / 10)).sum()
    assert chi2 < 27.9, counts
    assert abs(x.mean() - 1.5) < 6 * math.sqrt(8.25 / N_STAT)
    assert abs(x.var() - 8.25) < 0.05


# ---- gumbel ----


def gumbel(nv, shape, dtype, k):
    s, n = shp(shape)
    return nv.read(nv.own(lib.nv_random_gumbel(s, n, CODE[dtype], k)))


@pytest.mark.parametrize("dtype", UNIFORM_DTYPES)
def test_gumbel_matches_mlx(nv, mx, dtype):
    got = gumbel(nv, (4, 33), dtype, key(nv, 21))
    want = from_mx(mx.random.gumbel((4, 33), dtype=mx_dtype(mx, dtype), key=mx.random.key(21)))
    assert got.dtype == np_dtype(dtype)
    # Two logs: MLX's and the C library's may differ by an ulp each.
    tol = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 4e-6}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol)


def test_gumbel_statistics(nv):
    x = gumbel(nv, (N_STAT,), "float32", key(nv, 5)).astype(np.float64)
    euler = 0.5772156649015329
    assert abs(x.mean() - euler) < 6 * math.sqrt(math.pi**2 / 6 / N_STAT)
    assert abs(x.var() - math.pi**2 / 6) < 0.02
    d = ks_stat(x, lambda t: np.exp(-np.exp(-t)))
    assert d < ks_bound(N_STAT), d


# ---- Errors ----


def test_key_errors(nv):
    s, n = shp((3,))
    for bad in [np.array([1, 2], np.int32), np.array([1, 2, 3], np.uint32),
                np.array([[1, 2]], np.uint32), np.array(5, np.uint32)]:
        for h in [lib.nv_random_bits(s, n, 4, nv.array(bad)),
                  lib.nv_random_uniform_scalar(0, 1, s, n, CODE["float32"], nv.array(bad)),
                  lib.nv_random_split(nv.array(bad), 2)]:
            msg = error_of(nv, nv.own(h))
            assert "key" in msg and "uint32" in msg and "(2)" in msg, msg
    msg = error_of(nv, nv.own(lib.nv_random_randint_scalar(0, 3, s, n, CODE["int32"],
                                                           nv.array(np.zeros(2, np.float32)))))
    assert msg.startswith("randint:") and "float32" in msg


def test_argument_errors(nv):
    k = key(nv, 0)
    s, n = shp((3,))
    msg = error_of(nv, nv.own(lib.nv_random_bits(s, n, 3, k)))
    assert msg.startswith("bits:") and "width" in msg
    neg, nn = shp((2, -1))
    msg = error_of(nv, nv.own(lib.nv_random_bits(neg, nn, 4, k)))
    assert "negative dimension" in msg and "(2,-1)" in msg
    msg = error_of(nv, nv.own(lib.nv_random_split(k, -1)))
    assert msg.startswith("split:")
    msg = error_of(nv, nv.own(lib.nv_random_bits(None, 2, 4, k)))
    assert "NULL" in msg


@pytest.mark.parametrize("dtype", ["bool", "int32", "uint8", "float64", "complex64"])
def test_uniform_and_gumbel_dtype_errors(nv, dtype):
    s, n = shp((3,))
    msg = error_of(nv, nv.own(lib.nv_random_uniform_scalar(0, 1, s, n, CODE[dtype], key(nv, 0))))
    assert msg.startswith("uniform:") and dtype in msg
    msg = error_of(nv, nv.own(lib.nv_random_gumbel(s, n, CODE[dtype], key(nv, 0))))
    assert msg.startswith("gumbel:") and dtype in msg


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64"])
def test_randint_dtype_errors(nv, dtype):
    s, n = shp((3,))
    msg = error_of(nv, nv.own(lib.nv_random_randint_scalar(0, 5, s, n, CODE[dtype], key(nv, 0))))
    assert msg.startswith("randint:") and dtype in msg


def test_shape_broadcast_errors(nv):
    s, n = shp((3,))
    lo = nv.array(np.zeros((2, 3), np.float32))
    hi = nv.array(np.ones(3, np.float32))
    msg = error_of(nv, nv.own(lib.nv_random_uniform(lo, hi, s, n, CODE["float32"], key(nv, 0))))
    assert msg.startswith("uniform:") and "(2,3)" in msg and "(3,)" in msg
    lo4 = nv.array(np.zeros(4, np.int32))
    msg = error_of(nv, nv.own(lib.nv_random_randint(lo4, hi, s, n, CODE["int32"], key(nv, 0))))
    assert msg.startswith("randint:") and "(4,)" in msg


def test_failed_inputs_are_sticky_and_null_is_an_error(nv):
    s, n = shp((3,))
    bad = nv.own(lib.nv_random_bits(s, n, 3, key(nv, 0)))
    _, first = nv.status(bad)
    for h in [lib.nv_random_bits(s, n, 4, bad), lib.nv_random_split(bad, 2),
              lib.nv_random_gumbel(s, n, CODE["float32"], bad)]:
        assert error_of(nv, nv.own(h)) == first
    msg = error_of(nv, nv.own(lib.nv_random_uniform(None, nv.array(np.float32(1)), s, n,
                                                    CODE["float32"], key(nv, 0))))
    assert msg.startswith("uniform:") and "NULL" in msg
    with pytest.raises(NuvecError):
        nv.read(nv.own(lib.nv_random_bits(s, n, 4, bad)))


# ---- normal, laplace, truncated_normal, bernoulli, categorical, permutation ----

sig("nv_random_normal", P, IP, I, I, D, D, P)
sig("nv_random_normal_array", P, IP, I, I, P, P, P)
sig("nv_random_laplace", P, IP, I, I, D, D, P)
sig("nv_random_truncated_normal", P, P, P, IP, I, I, P)
sig("nv_random_truncated_normal_scalar", P, D, D, IP, I, I, P)
sig("nv_random_bernoulli", P, P, IP, I, P)
sig("nv_random_bernoulli_scalar", P, D, IP, I, P)
sig("nv_random_categorical", P, P, I, IP, I, P)
sig("nv_random_categorical_samples", P, P, I, I, P)
sig("nv_random_permutation_n", P, I, P)
sig("nv_random_permutation", P, P, I, P)

# Where MLX composes float functions (erfinv, erf, log, log1p) nuvec's own may differ by a few
# ulps; half types usually round to the same value but may land one ulp apart.
ULPS = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 2e-6,
        "complex64": 2e-6}


def assert_near_mlx(got, want, dtype):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    tol = ULPS[dtype]
    if dtype == "complex64":
        got, want = got.view(np.float32), want.view(np.float32)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol)


_erf = np.frompyfunc(math.erf, 1, 1)


def phi(x):
    return 0.5 * (1 + np.asarray(_erf(np.asarray(x, np.float64) / math.sqrt(2)), np.float64))


def normal(nv, shape, dtype, k, loc=0.0, scale=1.0):
    s, n = shp(shape)
    return nv.read(nv.own(lib.nv_random_normal(s, n, CODE[dtype], loc, scale, k)))


@pytest.mark.parametrize("dtype", FLOATS + ["complex64"])
@pytest.mark.parametrize("loc,scale", [(0.0, 1.0), (1.5, 2.0), (-3.0, 0.25)])
def test_normal_matches_mlx(nv, mx, dtype, loc, scale):
    got = normal(nv, (5, 37), dtype, key(nv, 31), loc, scale)
    want = from_mx(mx.random.normal((5, 37), dtype=mx_dtype(mx, dtype), loc=loc, scale=scale,
                                    key=mx.random.key(31)))
    assert_near_mlx(got, want, dtype)


def test_normal_array_loc_scale_broadcast_as_mlx(nv, mx, rng):
    loc = rng.standard_normal((2, 1, 3)).astype(np.float32)
    scale = rng.uniform(0.5, 2, (3,)).astype(np.float32)
    s, n = shp((4, 3))
    got = nv.read(nv.own(lib.nv_random_normal_array(s, n, CODE["float32"], nv.array(loc),
                                                    nv.array(scale), key(nv, 6))))
    want = np.array(mx.random.normal((4, 3), loc=mx.array(loc), scale=mx.array(scale),
                                     key=mx.random.key(6)))
    assert got.shape == want.shape == (2, 4, 3)
    assert_near_mlx(got, want, "float32")
    got = nv.read(nv.own(lib.nv_random_normal_array(s, n, CODE["float16"], None, None, key(nv, 6))))
    assert_near_mlx(got, from_mx(mx.random.normal((4, 3), dtype=mx.float16, key=mx.random.key(6))),
                    "float16")


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_normal_statistics(nv, dtype):
    n = N_STAT if dtype != "bfloat16" else N_STAT // 10
    x = normal(nv, (n,), dtype, key(nv, 404), 2.0, 3.0).astype(np.float64)
    assert abs(x.mean() - 2.0) < 6 * 3 / math.sqrt(n)
    assert abs(x.std() - 3.0) < 0.01 * 3 + (0.05 if dtype == "bfloat16" else 0)
    d = ks_stat(x, lambda t: phi((t - 2.0) / 3.0))
    assert d < ks_bound(n) + (4e-3 if dtype == "bfloat16" else 0), d


def test_complex_normal_statistics(nv):
    z = normal(nv, (N_STAT // 2,), "complex64", key(nv, 9))
    for part in (z.real.astype(np.float64), z.imag.astype(np.float64)):
        assert abs(part.mean()) < 6 * math.sqrt(0.5 / len(part))
        assert abs(part.var() - 0.5) < 0.01
        assert ks_stat(part, lambda t: phi(t * math.sqrt(2))) < ks_bound(len(part))
    assert abs(np.mean(z.real * z.imag)) < 6 * 0.5 / math.sqrt(len(z))


@pytest.mark.parametrize("dtype", FLOATS)
def test_laplace_matches_mlx(nv, mx, dtype):
    for loc, scale in [(0.0, 1.0), (0.5, 3.0)]:
        s, n = shp((3, 29))
        got = nv.read(nv.own(lib.nv_random_laplace(s, n, CODE[dtype], loc, scale, key(nv, 12))))
        want = from_mx(mx.random.laplace((3, 29), dtype=mx_dtype(mx, dtype), loc=loc,
                                         scale=scale, key=mx.random.key(12)))
        assert_near_mlx(got, want, dtype)


def test_laplace_statistics(nv):
    s, n = shp((N_STAT,))
    x = nv.read(nv.own(lib.nv_random_laplace(s, n, CODE["float32"], -1.0, 2.0, key(nv, 3))))
    x = x.astype(np.float64)
    assert abs(x.mean() + 1.0) < 6 * math.sqrt(8 / N_STAT)
    assert abs(x.var() - 8.0) < 0.15

    def cdf(t):
        z = (t + 1.0) / 2.0
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0)), 1 - 0.5 * np.exp(-np.maximum(z, 0)))

    assert ks_stat(x, cdf) < ks_bound(N_STAT)


@pytest.mark.parametrize("dtype", UNIFORM_DTYPES)
def test_truncated_normal_matches_mlx(nv, mx, dtype):
    for lo, hi in [(-0.5, 2.0), (-2.0, 2.0), (1.0, 3.0)]:
        s, n = shp((4, 25))
        got = nv.read(nv.own(lib.nv_random_truncated_normal_scalar(lo, hi, s, n, CODE[dtype],
                                                                   key(nv, 44))))
        want = from_mx(mx.random.truncated_normal(lo, hi, (4, 25), dtype=mx_dtype(mx, dtype),
                                                  key=mx.random.key(44)))
        assert_near_mlx(got, want, dtype)
        assert (got.astype(np.float64) >= lo).all() and (got.astype(np.float64) <= hi).all()


def test_truncated_normal_array_bounds_default_shape(nv, mx):
    lo = np.array([[-1.0], [0.0]], np.float32)
    hi = np.array([0.5, 1.0, 2.0], np.float32)
    got = nv.read(nv.own(lib.nv_random_truncated_normal(nv.array(lo), nv.array(hi), None, 0,
                                                        CODE["float32"], key(nv, 2))))
    want = np.array(mx.random.truncated_normal(mx.array(lo), mx.array(hi), key=mx.random.key(2)))
    assert got.shape == (2, 3)
    assert_near_mlx(got, want, "float32")


def test_truncated_normal_statistics(nv):
    s, n = shp((N_STAT,))
    x = nv.read(nv.own(lib.nv_random_truncated_normal_scalar(-0.5, 2.0, s, n, CODE["float32"],
                                                             key(nv, 8)))).astype(np.float64)
    assert x.min() >= -0.5 and x.max() <= 2.0
    a, b = phi(-0.5), phi(2.0)
    assert ks_stat(x, lambda t: (phi(t) - a) / (b - a)) < ks_bound(N_STAT)


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 0.999, 1.0, -0.5, 1.5])
def test_bernoulli_matches_mlx(nv, mx, p):
    s, n = shp((6, 31))
    got = nv.read(nv.own(lib.nv_random_bernoulli_scalar(p, s, n, key(nv, 17))))
    want = np.array(mx.random.bernoulli(p, (6, 31), key=mx.random.key(17)))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, want)
    if p <= 0:
        assert not got.any()
    if p >= 1:
        assert got.all()


@pytest.mark.parametrize("dtype", FLOATS)
def test_bernoulli_array_p_matches_mlx(nv, mx, rng, dtype):
    p = rng.uniform(0, 1, (4, 1)).astype(np_dtype(dtype))
    got = nv.read(nv.own(lib.nv_random_bernoulli(nv.array(p), None, 0, key(nv, 5))))
    mp = mx.array(p.astype(np.float32)).astype(mx_dtype(mx, dtype))
    np.testing.assert_array_equal(got, np.array(mx.random.bernoulli(mp, key=mx.random.key(5))))
    s, n = shp((4, 9))
    got = nv.read(nv.own(lib.nv_random_bernoulli(nv.array(p), s, n, key(nv, 5))))
    want = np.array(mx.random.bernoulli(mp, (4, 9), key=mx.random.key(5)))
    np.testing.assert_array_equal(got, want)


def test_bernoulli_statistics(nv):
    s, n = shp((N_STAT,))
    x = nv.read(nv.own(lib.nv_random_bernoulli_scalar(0.3, s, n, key(nv, 71))))
    assert abs(x.mean() - 0.3) < 6 * math.sqrt(0.21 / N_STAT)


def test_categorical_matches_mlx(nv, mx, rng):
    lg = rng.standard_normal((4, 6)).astype(np.float32)
    k, mk = key(nv, 13), mx.random.key(13)
    cases = [
        (lib.nv_random_categorical(nv.array(lg), -1, None, 0, k),
         mx.random.categorical(mx.array(lg), key=mk)),
        (lib.nv_random_categorical(nv.array(lg), 0, None, 0, k),
         mx.random.categorical(mx.array(lg), axis=0, key=mk)),
        (lib.nv_random_categorical(nv.array(lg), 1, *shp((3, 4)), k),
         mx.random.categorical(mx.array(lg), shape=(3, 4), key=mk)),
        (lib.nv_random_categorical_samples(nv.array(lg), 1, 7, k),
         mx.random.categorical(mx.array(lg), num_samples=7, key=mk)),
        (lib.nv_random_categorical_samples(nv.array(lg), -2, 3, k),
         mx.random.categorical(mx.array(lg), axis=-2, num_samples=3, key=mk)),
        (lib.nv_random_categorical(nv.array(lg.astype(np.float16)), 1, None, 0, k),
         mx.random.categorical(mx.array(lg).astype(mx.float16), key=mk)),
    ]
    for h, want in cases:
        got = nv.read(nv.own(h))
        assert got.dtype == np.uint32
        np.testing.assert_array_equal(got, np.array(want))


def test_categorical_statistics(nv):
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4], np.float32))[None, :]
    x = nv.read(nv.own(lib.nv_random_categorical_samples(nv.array(logits), 1, N_STAT,
                                                         key(nv, 19))))
    counts = np.bincount(x.ravel(), minlength=4)
    want = np.array([0.1, 0.2, 0.3, 0.4]) * N_STAT
    chi2 = ((counts - want) ** 2 / want).sum()
    assert chi2 < 16.3, counts  # 3 degrees of freedom, 0.1%


def test_permutation_matches_mlx(nv, mx, rng):
    for n in [0, 1, 2, 10, 1000]:
        got = nv.read(nv.own(lib.nv_random_permutation_n(n, key(nv, n + 1))))
        assert got.dtype == np.uint32
        np.testing.assert_array_equal(got, np.array(mx.random.permutation(n, key=mx.random.key(n + 1))))
    x = rng.standard_normal((5, 4, 3)).astype(np.float32)
    for axis in [0, 1, -1]:
        got = nv.read(nv.own(lib.nv_random_permutation(nv.array(x), axis, key(nv, 3))))
        want = np.array(mx.random.permutation(mx.array(x), axis=axis, key=mx.random.key(3)))
        np.testing.assert_array_equal(got, want)


def test_permutation_is_a_shuffle(nv):
    n = N_STAT
    p = nv.read(nv.own(lib.nv_random_permutation_n(n, key(nv, 1))))
    np.testing.assert_array_equal(np.sort(p), np.arange(n))
    # Positions and values are uncorrelated.
    assert abs(np.corrcoef(np.arange(n), p.astype(np.float64))[0, 1]) < 6 / math.sqrt(n)
    x = np.arange(12, dtype=np.int16).reshape(3, 4)
    got = nv.read(nv.own(lib.nv_random_permutation(nv.array(x), 1, key(nv, 2))))
    np.testing.assert_array_equal(np.sort(got, axis=1), x)
    # Whole columns move together.
    np.testing.assert_array_equal(got - got[0], x - x[0])


def test_sampler_errors(nv):
    s, n = shp((3,))
    k = key(nv, 0)
    for dtype in ["bool", "int32", "uint64"]:
        for h, op in [(lib.nv_random_normal(s, n, CODE[dtype], 0, 1, k), "normal"),
                      (lib.nv_random_laplace(s, n, CODE[dtype], 0, 1, k), "laplace"),
                      (lib.nv_random_truncated_normal_scalar(0, 1, s, n, CODE[dtype], k),
                       "truncated_normal")]:
            msg = error_of(nv, nv.own(h))
            assert msg.startswith(op + ":") and dtype in msg
    msg = error_of(nv, nv.own(lib.nv_random_laplace(s, n, CODE["complex64"], 0, 1, k)))
    assert msg.startswith("laplace:") and "complex64" in msg
    msg = error_of(nv, nv.own(lib.nv_random_truncated_normal_scalar(0, 1, s, n,
                                                                    CODE["float64"], k)))
    assert msg.startswith("truncated_normal:") and "float64" in msg
    msg = error_of(nv, nv.own(lib.nv_random_bernoulli(nv.array(np.array([1, 0], np.int32)),
                                                      None, 0, k)))
    assert msg.startswith("bernoulli:") and "int32" in msg
    msg = error_of(nv, nv.own(lib.nv_random_bernoulli(nv.array(np.full((2, 3), 0.5, np.float32)),
                                                      s, n, k)))
    assert msg.startswith("bernoulli:") and "(2,3)" in msg
    loc = nv.array(np.zeros(4, np.float32))
    msg = error_of(nv, nv.own(lib.nv_random_normal_array(s, n, CODE["float32"], loc, None, k)))
    assert msg.startswith("normal:") and "(4,)" in msg
    lg = nv.array(np.zeros((2, 3), np.float32))
    msg = error_of(nv, nv.own(lib.nv_random_categorical(lg, 2, None, 0, k)))
    assert msg.startswith("categorical:") and "axis 2" in msg
    msg = error_of(nv, nv.own(lib.nv_random_categorical(lg, 1, *shp((3,)), k)))
    assert msg.startswith("categorical:") and "(3,)" in msg and "(2,)" in msg
    msg = error_of(nv, nv.own(lib.nv_random_categorical_samples(lg, 1, -1, k)))
    assert msg.startswith("categorical:") and "num_samples" in msg
    msg = error_of(nv, nv.own(lib.nv_random_permutation_n(-2, k)))
    assert msg.startswith("permutation:")
    msg = error_of(nv, nv.own(lib.nv_random_permutation(nv.array(np.float32(1)), 0, k)))
    assert msg.startswith("permutation:") and "axis" in msg
    msg = error_of(nv, nv.own(lib.nv_random_permutation(lg, -3, k)))
    assert msg.startswith("permutation:") and "axis -3" in msg
    bad = nv.array(np.zeros(2, np.int64))
    for h in [lib.nv_random_normal(s, n, CODE["float32"], 0, 1, bad),
              lib.nv_random_categorical(lg, 0, None, 0, bad),
              lib.nv_random_permutation_n(3, bad), lib.nv_random_bernoulli_scalar(0.5, s, n, bad)]:
        assert "key" in error_of(nv, nv.own(h))


def test_shapes_and_dtypes(nv):
    k = key(nv, 0)
    for shape in [(), (0,), (2, 0, 3), (1, 1, 5)]:
        s, n = shp(shape)
        for h, dt in [(lib.nv_random_normal(s, n, CODE["bfloat16"], 0, 1, k), "bfloat16"),
                      (lib.nv_random_normal(s, n, CODE["complex64"], 0, 1, k), "complex64"),
                      (lib.nv_random_laplace(s, n, CODE["float64"], 0, 1, k), "float64"),
                      (lib.nv_random_bernoulli_scalar(0.5, s, n, k), "bool"),
                      (lib.nv_random_gumbel(s, n, CODE["float16"], k), "float16"),
                      (lib.nv_random_randint_scalar(0, 9, s, n, CODE["uint8"], k), "uint8")]:
            got = nv.read(nv.own(h))
            assert got.shape == shape and nv_dtype_name(got.dtype) == dt
