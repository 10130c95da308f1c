"""The CUDA backend's copy and linalg families on the GPU, against NumPy (and, for the exact
conversion rules, against nuvec's own CPU results bit for bit): matmul over dtypes, batched,
broadcast, transposed and strided operands, odd sizes, K = 0, addmm's zero rules, integer
wrap-around, vecdot; astype over every dtype pair with edge values, fp8, copies of transposed,
sliced and negative-stride layouts, full, arange, eye and slice_update (in place and not).

Every op is built with the GPU as the default device (skipped where no GPU is usable); the CPU
references are built with the CPU as the default device. `NUVEC_TEST_FULL=1` runs every case."""
import ctypes as C
import itertools
import os
import random
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import needs_gpu, On, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import (BF16, CODE, DTYPES, FLOATS, INTS, Session, ints, lib, np_dtype,  # noqa: E402
                 nv_name, ref64, sig)




P = C.c_void_p
I = C.c_int
D = C.c_double
IP = C.POINTER(C.c_int)
sig("nv_matmul", P, P, P)
sig("nv_addmm", P, P, P, P, D, D)
sig("nv_vecdot", P, P, P, I)
sig("nv_copy", P, P)
sig("nv_contiguous", P, P)
sig("nv_reshape", P, P, IP, I)
sig("nv_full", P, IP, I, D, I)
sig("nv_full_array", P, IP, I, P, I)
sig("nv_arange", P, D, D, D, I)
sig("nv_linspace", P, D, D, I, I)
sig("nv_eye", P, I, I, I, I)
sig("nv_slice_update", P, P, P, IP, IP, IP, I)
sig("nv_to_fp8", P, P)
sig("nv_from_fp8", P, P, I)
sig("nv_concatenate", P, C.POINTER(P), I, I)
sig("nv_pad", P, P, IP, IP, I, I, P)
sig("nv_diagonal", P, P, I, I, I)

pytestmark = needs_gpu

ALL = DTYPES
NUMERIC = INTS + FLOATS + ["complex64"]
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]


@pytest.fixture
def nv():
    with Session() as s, On("gpu"):
        yield s


def read(nv, h):
    return nv.read(nv.own(h))


def rand(rng, shape, dtype, full_range=False):
    dt = np_dtype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in INTS:
        info = np.iinfo(dt)
        lo, hi = (info.min, info.max) if full_range else (max(info.min, -100), min(info.max, 100))
        return rng.integers(lo, hi, shape, endpoint=True, dtype=dt)
    if dtype == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return (rng.standard_normal(shape) * 3).astype(dt)


EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 6e-8, 65504, 65519.99, 65520, 3e9, -3e9,
         300.0, -1.5, 2.5, -0.5, 1e20, 4294967296.0, 9.3e18, -9.3e18, 1.8e19, 2e-40, 448, 464,
         1 + 2**-11 + 2**-40, 2**53 + 1, -(2**63), 2**64 - 2048]


def edge_values(dtype, rng, n=64):
    """Values of `dtype` including its edge cases (NaN, inf, overflow for narrower types)."""
    dt = np_dtype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dtype in INTS:
        info = np.iinfo(dt)
        base = rng.integers(info.min, info.max, n, endpoint=True, dtype=dt)
        base[:4] = [info.min, info.max, 0, -1 if info.min < 0 else 1]
        return base
    with np.errstate(all="ignore"):
        e = np.array(EDGES, np.float64)
        if dtype == "complex64":
            return (np.resize(e, n) + 1j * np.resize(e[::-1], n)).astype(np.complex64)
        return np.resize(e, n).astype(dt)


def same_bits(got, want):
    """Bit-for-bit equality, NaNs of any payload counted equal (the conversions keep payloads as
    x86 does, but NumPy references may not)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind in "fc" or got.dtype == BF16:
        g, w = ref64(got), ref64(want)
        nan = np.isnan(g) & np.isnan(w)
        np.testing.assert_array_equal(np.where(nan, 0, g), np.where(nan, 0, w))
        # Signs of zeros too.
        np.testing.assert_array_equal(np.signbit(g.real[~nan]), np.signbit(w.real[~nan]))
    else:
        np.testing.assert_array_equal(got, want)


def on_cpu(nv, build):
    """The same op built on the CPU (the reference for the exact conversion rules)."""
    with On("cpu"):
        return build()


# ---- matmul ----

EPS = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53,
       "complex64": 2.0**-24}


def check_product(got, want, scale, dt, k):
    assert nv_name(got.dtype) == dt
    if dt in INTS:
        np.testing.assert_array_equal(got, np.asarray(want).astype(np_dtype(dt)))
        return
    want = np.asarray(want)
    assert got.shape == want.shape
    acc = EPS["float64"] if dt == "float64" else EPS["float32"]
    tol = 2 * (EPS[dt] + (k + 2) * acc) * np.asarray(scale) + 1e-300
    g = ref64(got)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(g[np.isinf(want)], want[np.isinf(want)])
    with np.errstate(invalid="ignore"):
        err = np.abs(g - want)
    bad = fin & ~(err <= tol)
    assert not bad.any(), f"max error {err[bad].max()} over the bound at {np.argwhere(bad)[:3]}"


def ref_product(a, b, dt):
    ra, rb = ref64(a.astype(np_dtype(dt))), ref64(b.astype(np_dtype(dt)))
    with np.errstate(all="ignore"):
        return ra @ rb, np.nan_to_num(np.abs(ra)) @ np.nan_to_num(np.abs(rb))


MKN = [(1, 1, 1), (7, 7, 7), (129, 65, 33), (1000, 129, 7), (1, 1000, 1), (7, 1, 129),
       (33, 1000, 1), (1, 129, 1000)]
MM_DTYPES = ["float32", "float64", "float16", "bfloat16", "complex64", "int8", "int32", "int64",
             "uint8", "uint64"]


def matmul_cases():
    for dt, mkn, la, lb in itertools.product(MM_DTYPES, MKN, LAYOUTS, LAYOUTS):
        yield dt, mkn, la, lb


@pytest.mark.parametrize("dt,mkn,la,lb", sample(matmul_cases(), 160, salt=101))
def test_matmul_dtypes_sizes_layouts(nv, rng, dt, mkn, la, lb):
    m, k, n = mkn
    a, b = rand(rng, (m, k), dt), rand(rng, (k, n), dt)
    got = read(nv, lib.nv_matmul(nv.view(a, la), nv.view(b, lb)))
    if dt in INTS:
        check_product(got, np.matmul(a, b), None, dt, k)
    else:
        want, scale = ref_product(a, b, dt)
        check_product(got, want, scale, dt, k)


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float64", "complex64", "int32", "float16"])
@pytest.mark.parametrize("sa,sb", [((4, 33, 17), (4, 17, 9)), ((4, 33, 17), (17, 9)),
                                   ((2, 1, 5, 6), (1, 3, 6, 7)), ((40, 1, 8), (8, 6)),
                                   ((5, 8), (3, 8, 2)), ((2, 3, 1, 9), (3, 9, 4)),
                                   ((64, 16, 16), (64, 16, 16))])
def test_matmul_batched_and_broadcast(nv, rng, dt, sa, sb):
    a, b = rand(rng, sa, dt), rand(rng, sb, dt)
    for la in ("contiguous", "transposed", "strided"):
        got = read(nv, lib.nv_matmul(nv.view(a, la), nv.array(b)))
        if dt in INTS:
            check_product(got, np.matmul(a, b), None, dt, sa[-1])
        else:
            want, scale = ref_product(a, b, dt)
            check_product(got, want, scale, dt, sa[-1])


def test_matmul_broadcast_to_zero_strides(nv, rng):
    a = rand(rng, (6, 10, 8), "float32")
    b = rand(rng, (8, 3), "float32")
    shape, n = ints((2, 6, 8, 3))
    bb = nv.own(lib.nv_broadcast_to(nv.array(b), shape, n))
    got = read(nv, lib.nv_matmul(nv.view(a, "strided"), bb))
    want, scale = ref_product(a, np.broadcast_to(b, (2, 6, 8, 3)), "float32")
    check_product(got, want, scale, "float32", 8)


def test_matmul_transposed_submatrices(nv, rng):
    # Leading dimensions larger than the width, both operand orders.
    base = rand(rng, (130, 140), "float32")
    x = nv.array(base)
    start, n = ints((1, 2))
    stop, _ = ints((129, 139))
    sub = nv.own(lib.nv_slice(x, start, stop, None, n))
    perm, _ = ints((1, 0))
    subt = nv.own(lib.nv_transpose(sub, perm, 2))
    s = base[1:129, 2:139]
    for lhs, rhs, (ra, rb) in [(sub, subt, (s, s.T)), (subt, sub, (s.T, s))]:
        got = read(nv, lib.nv_matmul(lhs, rhs))
        want, scale = ref_product(ra, rb, "float32")
        check_product(got, want, scale, "float32", ra.shape[1])


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64", "complex64", "int16"])
def test_matmul_k_zero_is_zeros(nv, dt):
    z = read(nv, lib.nv_matmul(nv.array(np.ones((3, 0), np_dtype(dt))),
                               nv.array(np.ones((0, 4), np_dtype(dt)))))
    assert z.shape == (3, 4) and nv_name(z.dtype) == dt and not ref64(z).any()
    e = read(nv, lib.nv_matmul(nv.array(np.ones((0, 3), np_dtype(dt))),
                               nv.array(np.ones((3, 4), np_dtype(dt)))))
    assert e.shape == (0, 4)


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "complex64"])
def test_matmul_nan_inf(nv, rng, dt):
    a, b = rand(rng, (4, 5), dt), rand(rng, (5, 3), dt)
    a[0, 1] = np.nan
    a[2, 0] = np.inf
    b[0, 2] = 0
    b[3, 1] = -np.inf
    got = read(nv, lib.nv_matmul(nv.array(a), nv.array(b)))
    want, scale = ref_product(a, b, dt)
    check_product(got, want, scale, dt, 5)


@pytest.mark.parametrize("dt", INTS)
def test_integer_matmul_wraps(nv, rng, dt):
    a = rand(rng, (3, 70, 90), dt, full_range=True)
    b = rand(rng, (90, 65), dt, full_range=True)
    info = np.iinfo(np_dtype(dt))
    a[0, 0, :] = info.max
    b[:, 0] = info.max
    a[0, 1, :] = info.min
    for la in ("contiguous", "transposed", "reversed"):
        got = read(nv, lib.nv_matmul(nv.view(a, la), nv.view(b, "strided")))
        np.testing.assert_array_equal(got, np.matmul(a, b))


# ---- addmm ----

@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "complex64"])
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (2.0, -0.5), (0.0, 1.5), (1.5, 0.0), (0.0, 0.0)])
@pytest.mark.parametrize("sc", [(17, 9), (9,), (17, 1), ()])
def test_addmm_matches_numpy(nv, rng, dt, alpha, beta, sc):
    c, a, b = rand(rng, sc, dt), rand(rng, (17, 33), dt), rand(rng, (33, 9), dt)
    got = read(nv, lib.nv_addmm(nv.view(c, "contiguous"), nv.view(a, "transposed"),
                                nv.view(b, "strided"), alpha, beta))
    prod, scale = ref_product(a, b, dt)
    want = alpha * prod + beta * ref64(c)
    bound = abs(alpha) * scale + abs(beta) * np.abs(ref64(c)) + np.abs(want)
    check_product(got, np.broadcast_to(want, (17, 9)), np.broadcast_to(bound, (17, 9)), dt, 33)


@pytest.mark.parametrize("dt", ["float32", "float16", "float64"])
def test_addmm_blas_zero_rules(nv, rng, dt):
    # beta = 0 never reads c (NaN there does not show); alpha = 0 never computes a @ b
    # (nuvec/linalg.h). The CPU's OpenBLAS path does compute a @ b for alpha = 0 at some sizes
    # (5x7 @ 7x6 gives NaN rows); the GPU keeps the documented rule.
    a, b = rand(rng, (5, 7), dt), rand(rng, (7, 6), dt)
    c = np.full((5, 6), np.nan, np_dtype(dt))
    got = read(nv, lib.nv_addmm(nv.array(c), nv.array(a), nv.array(b), 1.0, 0.0))
    want, scale = ref_product(a, b, dt)
    check_product(got, want, scale, dt, 7)
    a[0, 0] = np.nan
    b[1, 1] = np.inf
    c = rand(rng, (5, 6), dt)
    got = read(nv, lib.nv_addmm(nv.array(c), nv.array(a), nv.array(b), 0.0, 2.0))
    np.testing.assert_array_equal(got, (2 * ref64(c)).astype(np_dtype(dt)))
    got = read(nv, lib.nv_addmm(nv.array(np.full((5, 6), np.nan, np_dtype(dt))), nv.array(a),
                                nv.array(b), 0.0, 0.0))
    assert not ref64(got).any() and not np.isnan(ref64(got)).any()
    # K = 0: beta * c.
    got = read(nv, lib.nv_addmm(nv.array(c), nv.array(np.ones((5, 0), np_dtype(dt))),
                                nv.array(np.ones((0, 6), np_dtype(dt))), 1.0, 3.0))
    np.testing.assert_array_equal(got, (3 * ref64(c)).astype(np_dtype(dt)))


# ---- vecdot ----

@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "complex64", "int32",
                                "int64", "uint32"])
@pytest.mark.parametrize("k", [1, 5, 33, 1000])
@pytest.mark.parametrize("axis", [0, 1])
def test_vecdot(nv, rng, dt, k, axis):
    shape = (37, k) if axis == 1 else (k, 37)
    a, b = rand(rng, shape, dt), rand(rng, shape, dt)
    got = read(nv, lib.nv_vecdot(nv.array(a), nv.view(b, "reversed"), axis))
    with np.errstate(all="ignore"):
        want = np.sum(np.conj(ref64(a)) * ref64(b), axis=axis)
    if dt in INTS:
        wrapped = np.sum(a.astype(np.uint64) * b.astype(np.uint64), axis=axis)
        np.testing.assert_array_equal(got, wrapped.astype(a.dtype))
    else:
        # float16/bfloat16/float32 sum in float64 (one rounding); float64 in float64 (k terms).
        scale = np.sum(np.abs(ref64(a)) * np.abs(ref64(b)), axis=axis)
        check_product(got, want, scale, dt, k if dt == "float64" else 1)


# ---- astype and fp8 ----

@pytest.mark.parametrize("src,dst", sample(itertools.product(ALL, ALL), 196, salt=102))
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_astype_every_pair_matches_cpu_bits(nv, rng, src, dst, layout):
    x = edge_values(src, rng, 96).reshape(8, 12)
    gx = nv.view(x, layout)
    got = read(nv, lib.nv_astype(gx, CODE[dst]))
    want = on_cpu(nv, lambda: read(nv, lib.nv_astype(nv.view(x, layout), CODE[dst])))
    same_bits(got, want)
    # And NumPy between floats (each rounds once to nearest even), on finite values.
    if src in FLOATS and dst in FLOATS:
        ok = np.isfinite(ref64(x))
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(ref64(got)[ok], ref64(x.astype(np_dtype(dst)))[ok])


def test_astype_every_float16_and_bfloat16_bit_pattern(nv):
    allbits = np.arange(65536, dtype=np.uint16)
    for name in ("float16", "bfloat16"):
        x = allbits.view(np_dtype(name))
        for dst in ALL:
            if dst == name:
                continue
            got = read(nv, lib.nv_astype(nv.array(x), CODE[dst]))
            want = on_cpu(nv, lambda: read(nv, lib.nv_astype(nv.array(x), CODE[dst])))
            same_bits(got, want)


def test_astype_narrow_rounds_once_from_the_source(nv):
    v = np.array([1 + 2**-11 + 2**-40, 65520.0, 65519.99, 2**-25, -2**-25 * 1.5, 6e-8], np.float64)
    got = read(nv, lib.nv_astype(nv.array(v), CODE["float16"]))
    np.testing.assert_array_equal(got, v.astype(np.float16))
    import ml_dtypes

    bf = read(nv, lib.nv_astype(nv.array(v), CODE["bfloat16"]))
    np.testing.assert_array_equal(bf.astype(np.float64), v.astype(ml_dtypes.bfloat16).astype(np.float64))


def test_float_to_int_edges_as_x86(nv):
    v = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 300.0, -1.5, 2.5, 1e20], dtype=np.float64)
    table = {
        "int32": [-2**31, -2**31, -2**31, -2**31, -2**31, 300, -1, 2, -2**31],
        "int64": [-2**63, -2**63, -2**63, 3000000000, -3000000000, 300, -1, 2, -2**63],
        "int8": [0, 0, 0, 0, 0, 44, -1, 2, 0],
        "uint8": [0, 0, 0, 0, 0, 44, 255, 2, 0],
        "uint32": [0, 0, 0, 3000000000, 2**32 - 3000000000, 300, 2**32 - 1, 2, 0],
    }
    # The float32 values of v are the same numbers (3e9 is a float32), so one table serves.
    for src in ("float64", "float32"):
        for dst, want in table.items():
            got = read(nv, lib.nv_astype(nv.array(v.astype(src)), CODE[dst]))
            np.testing.assert_array_equal(got, np.array(want, dtype=object).astype(np_dtype(dst)),
                                          err_msg=f"{src}->{dst}")


def test_fp8_round_trip_matches_cpu(nv, rng):
    codes = np.arange(256, dtype=np.uint8)
    for dt in FLOATS:
        got = read(nv, lib.nv_from_fp8(nv.array(codes), CODE[dt]))
        want = on_cpu(nv, lambda: read(nv, lib.nv_from_fp8(nv.array(codes), CODE[dt])))
        same_bits(got, want)
        # The same codes read through a negative-stride view.
        got = read(nv, lib.nv_from_fp8(nv.view(codes, "reversed"), CODE[dt]))
        same_bits(got, want)
        x = np.concatenate([edge_values(dt, rng, 64), rand(rng, (200,), dt)]).reshape(8, 33)
        got = read(nv, lib.nv_to_fp8(nv.view(x, "transposed")))
        want = on_cpu(nv, lambda: read(nv, lib.nv_to_fp8(nv.view(x, "transposed"))))
        np.testing.assert_array_equal(got, want)
    # Saturation as MLX: NaN and inf to +-448 (0x7e / 0xfe).
    got = read(nv, lib.nv_to_fp8(nv.array(np.array([np.nan, np.inf, -np.inf, 1e6, 448, 464], np.float32))))
    np.testing.assert_array_equal(got[1:], [0x7e, 0xfe, 0x7e, 0x7e, 0x7e])


# ---- copies ----

@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(1,), (7, 5), (300, 257), (64, 1000), (1000, 3), (3, 5, 129)])
def test_copy_layouts(nv, rng, dt, layout, shape):
    x = rand(rng, shape, dt)
    for f in (lib.nv_copy, lib.nv_contiguous):
        got = read(nv, f(nv.view(x, layout)))
        np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize("dt", ["float32", "uint8", "float16", "complex64", "int64"])
def test_copy_permutations_and_many_dims(nv, rng, dt):
    x = rand(rng, (5, 64, 33), dt)
    h = nv.array(x)
    for perm in itertools.permutations(range(3)):
        p, n = ints(perm)
        got = read(nv, lib.nv_copy(nv.own(lib.nv_transpose(h, p, n))))
        np.testing.assert_array_equal(got, np.transpose(x, perm))
    # Ten dims no fold can merge (the general path), and a dtype conversion of it.
    y = rand(rng, (2, 3, 2, 3, 2, 3, 2, 3, 2, 3), dt)
    perm = (9, 7, 5, 3, 1, 8, 6, 4, 2, 0)
    p, n = ints(perm)
    t = nv.own(lib.nv_transpose(nv.array(y), p, n))
    np.testing.assert_array_equal(read(nv, lib.nv_copy(t)), np.transpose(y, perm))
    got = read(nv, lib.nv_astype(t, CODE["float64"]))
    np.testing.assert_array_equal(got, ref64(np.transpose(y, perm)).real)


def test_reshape_that_copies(nv, rng):
    x = rand(rng, (12, 10), "float32")
    t = nv.own(lib.nv_transpose(nv.array(x), None, 0))
    s, n = ints((5, 4, 6))
    np.testing.assert_array_equal(read(nv, lib.nv_reshape(t, s, n)), x.T.reshape(5, 4, 6))


def test_large_transpose_copy(nv, rng):
    x = rand(rng, (2048, 1536), "float32")
    t = nv.own(lib.nv_transpose(nv.array(x), None, 0))
    np.testing.assert_array_equal(read(nv, lib.nv_copy(t)), x.T)


# ---- creation ----

@pytest.mark.parametrize("dt", ALL)
def test_full(nv, rng, dt):
    shape, n = ints((1000, 37))
    for v in (1.5, -3.25, 0.0, 7.0):
        got = read(nv, lib.nv_full(shape, n, v, CODE[dt]))
        want = on_cpu(nv, lambda: read(nv, lib.nv_full(shape, n, v, CODE[dt])))
        same_bits(got, want)
    row, col = rand(rng, (37,), dt), rand(rng, (1000, 1), dt)
    np.testing.assert_array_equal(read(nv, lib.nv_full_array(shape, n, nv.array(row), CODE[dt])),
                                  np.broadcast_to(row, (1000, 37)))
    np.testing.assert_array_equal(read(nv, lib.nv_full_array(shape, n, nv.array(col), CODE[dt])),
                                  np.broadcast_to(col, (1000, 37)))
    for k in (1, 5, 17, 33):
        s1, n1 = ints((k,))
        got = read(nv, lib.nv_full(s1, n1, 2.0, CODE[dt]))
        np.testing.assert_array_equal(got, np.full((k,), 2, np_dtype(dt)))


@pytest.mark.parametrize("dt", [d for d in ALL if d != "bool"])
def test_arange_matches_cpu(nv, dt):
    for start, stop, step in [(0, 1000, 1), (-3.5, 7.25, 0.37), (10, -10, -0.1), (0, 1e6, 3.3),
                              (0.1, 100, 0.1)]:
        got = read(nv, lib.nv_arange(start, stop, step, CODE[dt]))
        want = on_cpu(nv, lambda: read(nv, lib.nv_arange(start, stop, step, CODE[dt])))
        same_bits(got, want)
    if dt in FLOATS:
        # A step exact in binary, so NumPy's values are start + i * step too.
        got = read(nv, lib.nv_arange(-3.5, 7.25, 0.25, CODE[dt]))
        np.testing.assert_array_equal(got, np.arange(-3.5, 7.25, 0.25).astype(np_dtype(dt)))


@pytest.mark.parametrize("dt", ALL)
def test_eye(nv, dt):
    for n_, m, k in [(7, 5, 0), (7, 5, 2), (7, 5, -3), (5, 7, 6), (5, 7, -6), (64, 64, 1), (1, 1, 0)]:
        got = read(nv, lib.nv_eye(n_, m, k, CODE[dt]))
        np.testing.assert_array_equal(got, np.eye(n_, m, k, dtype=np_dtype(dt)))


# ---- slice_update ----

SU_CASES = [
    ((2, 3), (7, 20), (1, 1), (5, 17)), ((0, 0), (20, 30), (2, 3), (10, 10)),
    ((-1, -1), (-21, -31), (-1, -2), (20, 15)), ((5, 4), (6, 29), (1, 1), ()),
    ((3, 0), (9, 30), (2, 1), (30,)), ((3, 3), (3, 9), (1, 1), (0, 6)),
]


@pytest.mark.parametrize("dt", ["float32", "uint8", "float16", "complex64", "int64"])
@pytest.mark.parametrize("case", range(len(SU_CASES)))
@pytest.mark.parametrize("in_place", [False, True])
def test_slice_update(nv, rng, dt, case, in_place):
    start, stop, step, us = SU_CASES[case]
    base, upd = rand(rng, (20, 30), dt), rand(rng, us, dt)
    want = base.copy()
    region = tuple(slice(a, b, s) for a, b, s in zip(start, stop, step))
    want[region] = upd
    st, n = ints(start)
    sp, _ = ints(stop)
    sd, _ = ints(step)
    # The base is a computed array (a copy): released before the evaluation, the evaluation
    # owns it outright and may write it in place; kept, it must be copied.
    b = lib.nv_copy(nv.array(base))
    u = nv.own(lib.nv_slice_update(b, nv.array(upd), st, sp, sd, n))
    if in_place:
        lib.nv_release(b)
    else:
        nv.own(b)
    np.testing.assert_array_equal(nv.read(u), want)
    if not in_place:
        np.testing.assert_array_equal(nv.read(b), base)


CONCAT_CASES = [((3, 4), (5, 4), (0, 4), 0), ((3, 4), (3, 1), (3, 7), 1), ((2, 3, 5), (2, 1, 5), (2, 0, 5), 1),
                ((2, 3, 5), (2, 3, 2), (2, 3, 9), -1), ((7,), (1,), (33,), 0), ((0, 3), (0, 3), (0, 3), 0)]


@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("case", range(len(CONCAT_CASES)))
def test_concatenate_on_the_gpu(nv, rng, dt, case):
    *shapes, axis = CONCAT_CASES[case]
    xs = [rand(rng, sh, dt) for sh in shapes]
    want = np.concatenate(xs, axis=axis)
    before = lib.nv_gpu_fallback_count()
    for layouts in [("contiguous",) * 3, ("transposed", "strided", "reversed")]:
        hs = [nv.view(x, la) if x.ndim > 1 or la != "transposed" else nv.array(x)
              for x, la in zip(xs, layouts)]
        arr = (P * 3)(*hs)
        got = read(nv, lib.nv_concatenate(arr, 3, axis))
        assert nv_name(got.dtype) == dt
        np.testing.assert_array_equal(got, want)
    assert lib.nv_gpu_fallback_count() == before, "concatenate fell back to the CPU"


PAD_CASES = [((3, 4), (1, 0), (2, 3)), ((2, 3, 5), (0, 1, 2), (1, 0, 0)), ((7,), (3,), (0,)),
             ((0, 3), (1, 1), (0, 2)), ((), (), ()), ((3,), (7,), (8,)), ((1, 4), (2, 1), (3, 2))]
PAD_MODES = {0: "constant", 1: "edge", 2: "reflect", 3: "symmetric"}


@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("case", range(len(PAD_CASES)))
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_pad_on_the_gpu(nv, rng, dt, case, mode):
    shape, low, high = PAD_CASES[case]
    x = rand(rng, shape, dt)
    if mode and x.size == 0:
        pytest.skip("non-constant modes cannot pad an empty axis")
    lo, n = ints(list(low))
    hi, _ = ints(list(high))
    kw = {"constant_values": x.reshape(-1)[0] if x.size else 0} if mode == 0 else {}
    value = nv.array(np.array(kw["constant_values"], dtype=x.dtype)) if mode == 0 else None
    want = np.pad(x, list(zip(low, high)), mode=PAD_MODES[mode], **kw) if x.ndim else x.copy()
    for la in ("contiguous", "reversed"):
        before = lib.nv_gpu_fallback_count()
        got = read(nv, lib.nv_pad(nv.view(x, la) if x.ndim else nv.array(x), lo, hi, n, mode, value))
        np.testing.assert_array_equal(got, want)
        # Every mode runs on the GPU.
        assert lib.nv_gpu_fallback_count() == before, "pad fell back to the CPU"


@pytest.mark.parametrize("dt", ["float32", "int8", "complex64", "bool"])
@pytest.mark.parametrize("shape,offset,a1,a2", [((4, 5), 0, 0, 1), ((4, 5), 2, 0, 1), ((4, 5), -3, 1, 0),
                                                ((2, 3, 4), 1, 2, 0), ((3, 3), 5, 0, 1)])
def test_diagonal_on_the_gpu(nv, rng, dt, shape, offset, a1, a2):
    x = rand(rng, shape, dt)
    before = lib.nv_gpu_fallback_count()
    for la in ("contiguous", "transposed", "strided"):
        got = read(nv, lib.nv_diagonal(nv.view(x, la), offset, a1, a2))
        np.testing.assert_array_equal(got, np.diagonal(x, offset, a1, a2))
    assert lib.nv_gpu_fallback_count() == before, "diagonal fell back to the CPU"


def test_linspace_uses_slice_update(nv):
    got = read(nv, lib.nv_linspace(-1.0, 1.0, 101, CODE["float32"]))
    np.testing.assert_allclose(got, np.linspace(-1, 1, 101, dtype=np.float32), rtol=1e-6, atol=1e-7)
    assert got[-1] == 1.0
