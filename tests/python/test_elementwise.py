"""The elementwise family against NumPy: unary math, rounding and classification, floor
division and powers, comparisons, logical and bitwise ops, where/clip, closeness tests,
triangular and window creation, meshgrid, dtype views, depends and number_of_elements.

Values come from NumPy in float64 (complex128) rounded to the result dtype; result dtypes are
MLX's. Random inputs are seeded (see conftest.py) and every case runs over several layouts
(contiguous, transposed, strided and negative-step views)."""
import ctypes as C
import itertools

import ml_dtypes
import numpy as np
import pytest

from conftest import sample
from nvc import (CODE, DTYPES, FLOATS, INTS, NuvecError, assert_close, ints, lib, np_dtype,
                 ref64, sig)

P = C.c_void_p
D = C.c_double
B = C.c_bool
I = C.c_int
DP = C.POINTER(C.c_double)

UNARY_NAMES = [
    "positive", "sign", "logical_not", "reciprocal", "floor", "ceil", "trunc", "square", "rsqrt",
    "expm1", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh",
    "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "degrees", "radians", "sigmoid", "erf",
    "erfinv", "isnan", "isinf", "isfinite", "isposinf", "isneginf", "conjugate", "real", "imag",
    "bitwise_invert", "stop_gradient", "exp", "abs",
]
BINARY_NAMES = [
    "floor_divide", "remainder", "power", "arctan2", "logaddexp", "equal", "not_equal", "greater",
    "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "maximum", "minimum",
]
for _n in UNARY_NAMES:
    sig("nv_" + _n, P, P)
for _n in BINARY_NAMES:
    sig("nv_" + _n, P, P, P)
sig("nv_round", P, P, I)
sig("nv_nan_to_num", P, P, D, DP, DP)
sig("nv_divmod", I, P, P, P)
sig("nv_where", P, P, P, P)
sig("nv_clip", P, P, P, P)
sig("nv_clip_scalar", P, P, D, D)
sig("nv_isclose", P, P, P, D, D, B)
sig("nv_allclose", P, P, P, D, D, B)
sig("nv_array_equal", P, P, P, B)
sig("nv_tri", P, I, I, I, I)
sig("nv_tril", P, P, I)
sig("nv_triu", P, P, I)
sig("nv_meshgrid", I, P, B, C.c_char_p, P)
for _n in ["hanning", "hamming", "bartlett", "blackman"]:
    sig("nv_" + _n, P, I)
sig("nv_view", P, P, I)
sig("nv_depends", I, P, P, P)
sig("nv_number_of_elements", P, P, C.POINTER(C.c_int), I, B, I)
sig("nv_power_scalar", P, P, D)
sig("nv_floor_divide_scalar", P, P, D)
sig("nv_remainder_scalar", P, P, D)
sig("nv_equal_scalar", P, P, D)
sig("nv_greater_scalar", P, P, D)
sig("nv_less_scalar", P, P, D)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_push", I, P, P)
sig("nv_vec_size", C.c_size_t, P)
sig("nv_vec_get", P, P, C.c_size_t)
sig("nv_array_is_evaluated", B, P)
sig("nv_array_strides", C.POINTER(C.c_int64), P)
sig("nv_array_data", P, P)
sig("nv_array_scalar", P, D, I)

ALL = ["bool"] + INTS + FLOATS + ["complex64"]
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]
SHAPES = [(), (0,), (7,), (3, 4), (2, 3, 5)]


def call(nv, name, *args):
    return nv.own(getattr(lib, "nv_" + name)(*args))


def rand(rng, shape, dtype, lo=-3.0, hi=3.0):
    dt = np_dtype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in INTS:
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dt)
    if dtype == "complex64":
        return (rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)).astype(dt)
    return rng.uniform(lo, hi, shape).astype(dt)


def expect_error(nv, h, *words):
    st, msg = nv.status(h)
    assert st != 0, "expected an error"
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


# ---- Unary math ----

# name: (numpy reference, domain (lo, hi) for real inputs, accepts complex)
MATH = {
    "reciprocal": (np.reciprocal, (-3, 3), True),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.01, 5), True),
    "expm1": (np.expm1, (-3, 3), True),
    "log2": (np.log2, (0.01, 5), True),
    "log10": (np.log10, (0.01, 5), True),
    "log1p": (np.log1p, (-0.9, 5), True),
    "sin": (np.sin, (-6, 6), True),
    "cos": (np.cos, (-6, 6), True),
    "tan": (np.tan, (-1.4, 1.4), True),
    "arcsin": (np.arcsin, (-1, 1), True),
    "arccos": (np.arccos, (-1, 1), True),
    "arctan": (np.arctan, (-5, 5), True),
    "sinh": (np.sinh, (-4, 4), True),
    "cosh": (np.cosh, (-4, 4), True),
    "tanh": (np.tanh, (-4, 4), True),
    "arcsinh": (np.arcsinh, (-5, 5), True),
    "arccosh": (np.arccosh, (1, 6), True),
    "arctanh": (np.arctanh, (-0.99, 0.99), True),
    "degrees": (lambda x: x * (180 / np.pi), (-6, 6), True),
    "radians": (lambda x: x * (np.pi / 180), (-360, 360), True),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-20, 20), False),
    "erf": (None, (-3, 3), False),
    "erfinv": (None, (-0.999, 0.999), False),
}


def np_erf(x):
    import math

    return np.vectorize(math.erf, otypes=[np.float64])(x)


def np_erfinv(y):
    """A float64 reference independent of the kernel's method: bisection on math.erf, on
    math.erfc in the tails (where 1 - |y| is exact), and the Taylor term for tiny |y|."""
    import math

    y = np.asarray(y, dtype=np.float64)
    out = np.empty(y.shape)
    for i, v in np.ndenumerate(y):
        w = abs(v)
        if np.isnan(v) or w > 1:
            out[i] = np.nan
        elif w == 1:
            out[i] = math.copysign(np.inf, v)
        elif w < 1e-9:
            out[i] = v * math.sqrt(math.pi) / 2
        else:
            lo, hi = 0.0, 7.0
            for _ in range(70):
                mid = (lo + hi) / 2
                below = math.erfc(mid) > 1 - w if w > 0.5 else math.erf(mid) < w
                lo, hi = (mid, hi) if below else (lo, mid)
            out[i] = math.copysign((lo + hi) / 2, v)
    return out


def math_ref(name, x):
    f = MATH[name][0]
    with np.errstate(all="ignore"):
        if name == "erf":
            return np_erf(x)
        if name == "erfinv":
            return np_erfinv(x)
        return f(ref64(x))


def math_cases():
    for name, (_, _, cplx) in MATH.items():
        for dt in ALL:
            if dt == "complex64" and not cplx:
                continue
            for shape, layout in itertools.product(SHAPES, LAYOUTS):
                yield name, dt, shape, layout


@pytest.mark.parametrize("name,dt,shape,layout", sample(math_cases(), 160, salt=11))
def test_unary_math_matches_numpy(nv, rng, name, dt, shape, layout):
    lo, hi = MATH[name][1]
    if dt in INTS:
        x = rng.integers(max(int(np.ceil(lo)), np.iinfo(np_dtype(dt)).min), int(np.floor(hi)) + 1,
                         shape).astype(np_dtype(dt))
        if name in ("reciprocal",):
            x = np.where(x == 0, 1, x).astype(x.dtype)
    elif dt == "bool":
        x = rng.integers(0, 2, shape).astype(bool)
    else:
        x = rand(rng, shape, dt, lo, hi)
    got = nv.read(call(nv, name, nv.view(x, layout)))
    out_dt = dt if dt in FLOATS + ["complex64"] else "float32"
    want = math_ref(name, x)
    rtol = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12,
            "complex64": 1e-5}[out_dt]
    assert_close(got, want, out_dt, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
def test_unary_math_edge_values(nv, dt):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-30, 88.0, -88.0, 1e4, -1e4],
                 dtype=np_dtype(dt))
    for name in ["sin", "tanh", "sigmoid", "expm1", "log1p", "log2", "arctan", "erf", "erfinv",
                 "arcsinh", "reciprocal", "rsqrt"]:
        got = nv.read(call(nv, name, nv.array(x)))
        want = math_ref(name, x)
        tol = 1e-12 if dt == "float64" else 1e-5 if dt == "float32" else 3e-2
        assert_close(got, want, dt, rtol=tol, atol=tol)


def test_sigmoid_extremes(nv):
    x = np.array([-1000, -100, -20, 0, 20, 100, 1000, np.nan], dtype=np.float32)
    got = nv.read(call(nv, "sigmoid", nv.array(x)))
    with np.errstate(over="ignore"):
        want = 1 / (1 + np.exp(-x.astype(np.float64)))
    assert_close(got, want, "float32")
    assert got[0] == 0 and got[-2] == 1 and np.isnan(got[-1])


def test_erfinv_tails(nv):
    y = np.array([-1, 1, 0, -0.0, 1 - 1e-12, -(1 - 1e-15), 1e-300, 2, -2, np.nan], dtype=np.float64)
    got = nv.read(call(nv, "erfinv", nv.array(y)))
    assert got[0] == -np.inf and got[1] == np.inf and got[2] == 0 and np.signbit(got[3])
    np.testing.assert_allclose(got[4:7], np_erfinv(y[4:7]), rtol=1e-9)
    assert np.isnan(got[7:]).all()


def test_float32_erfinv_within_4_ulp(nv):
    """float32 erfinv (a polynomial approximation) against the float64 inverse: a dense sweep
    of (-1, 1) and the floats nearest ±1."""
    y = np.concatenate([np.linspace(-1, 1, 200001, dtype=np.float32)[1:-1],
                        np.nextafter(np.float32(1), np.float32(0)) - np.arange(64, dtype=np.float32) * np.float32(2**-24),
                        np.float32(-1) + np.arange(1, 64, dtype=np.float32) * np.float32(2**-24)])
    got = nv.read(call(nv, "erfinv", nv.array(y)))
    want = np_erfinv(y.astype(np.float64))
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - want) / np.maximum(ulp, np.float64(np.finfo(np.float32).tiny))
    assert err.max() <= 4, f"{err.max()} ulp at {y[np.argmax(err)]}"
    assert np.all(np.sign(got) == np.sign(y))


@pytest.mark.parametrize("name", ["sigmoid", "erf", "erfinv"])
def test_complex_rejected(nv, name):
    x = nv.array(np.ones(3, np.complex64))
    expect_error(nv, call(nv, name, x), name, "complex64")


# ---- Unary ops that keep the dtype ----

def same_dtype_cases():
    for name, dt, shape, layout in itertools.product(
            ["sign", "square", "floor", "ceil", "trunc", "positive", "conjugate", "bitwise_invert",
             "abs"], ALL, SHAPES, LAYOUTS):
        if name in ("floor", "ceil", "trunc") and dt == "complex64":
            continue
        if name == "bitwise_invert" and dt in FLOATS + ["complex64"]:
            continue
        yield name, dt, shape, layout


SAME_REF = {
    "sign": np.sign, "square": np.square, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
    "positive": np.positive, "conjugate": np.conjugate, "bitwise_invert": np.invert,
    "abs": np.abs,
}


@pytest.mark.parametrize("name,dt,shape,layout", sample(same_dtype_cases(), 120, salt=12))
def test_same_dtype_unary(nv, rng, name, dt, shape, layout):
    x = rand(rng, shape, dt)
    got = nv.read(call(nv, name, nv.view(x, layout)))
    out_dt = "float32" if (name == "abs" and dt == "complex64") else dt
    with np.errstate(all="ignore"):
        if dt == "bool" and name in ("sign", "square", "floor", "ceil", "trunc", "abs",
                                     "positive"):
            want = x
        elif dt in INTS or dt == "bool":
            want = SAME_REF[name](x)  # integer results wrap in the type, as NumPy's
        else:
            want = SAME_REF[name](ref64(x))
    assert_close(got, want, out_dt)


def test_sign_edges(nv):
    x = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -2.5, 3.0], dtype=np.float32)
    got = nv.read(call(nv, "sign", nv.array(x)))
    np.testing.assert_array_equal(got, np.sign(x))
    z = np.array([3 + 4j, 0, -2j, 1e-30 + 0j], dtype=np.complex64)
    got = nv.read(call(nv, "sign", nv.array(z)))
    np.testing.assert_allclose(got, np.sign(z.astype(np.complex128)), rtol=1e-6)
    u = np.array([0, 1, 255], dtype=np.uint8)
    np.testing.assert_array_equal(nv.read(call(nv, "sign", nv.array(u))), [0, 1, 1])


def test_square_wraps_and_bitwise_invert(nv):
    x = np.array([200, -128, 127, 12], dtype=np.int16).astype(np.int8)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(nv.read(call(nv, "square", nv.array(x))), x * x)
    np.testing.assert_array_equal(nv.read(call(nv, "bitwise_invert", nv.array(x))), ~x)
    b = np.array([True, False])
    np.testing.assert_array_equal(nv.read(call(nv, "bitwise_invert", nv.array(b))), ~b)
    expect_error(nv, call(nv, "bitwise_invert", nv.array(np.ones(2, np.float32))),
                 "bitwise_invert", "float32")


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc"])
def test_rounding_edges_and_complex_error(nv, name):
    x = np.array([-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, np.nan, np.inf, -np.inf, 1e20],
                 dtype=np.float64)
    got = nv.read(call(nv, name, nv.array(x)))
    np.testing.assert_array_equal(got, getattr(np, name)(x))
    expect_error(nv, call(nv, name, nv.array(np.ones(2, np.complex64))), name, "complex64")


@pytest.mark.parametrize("dt,decimals", sample(itertools.product(
    FLOATS + ["complex64", "int32", "int64", "uint8", "int8", "bool"], [-3, -1, 0, 1, 2, 5]), 40,
    salt=13))
def test_round_matches_numpy(nv, rng, dt, decimals):
    if dt in INTS:
        info = np.iinfo(np_dtype(dt))
        x = rng.integers(max(info.min, -5000), min(info.max, 5000), (40,)).astype(np_dtype(dt))
        x[:6] = np.array([0, 5, 15, 25, 50, 65], dtype=x.dtype)[:6] if info.max > 64 else x[:6]
    else:
        x = rand(rng, (40,), dt, -500, 500)
        if dt != "complex64":
            x[:6] = np.array([0.5, 1.5, 2.5, -0.5, 1.25, -2.5]).astype(np_dtype(dt))
    got = nv.read(call(nv, "round", nv.array(x), decimals))
    if dt in INTS or dt == "bool":
        want = x if decimals >= 0 or dt == "bool" else np.round(x.astype(np.int64), decimals)
        if decimals < 0 and dt in INTS:
            # Exact halves-to-even rounding to a multiple of 10^-d, as NumPy's integer round.
            q = 10 ** (-decimals)
            v = x.astype(np.int64)
            k, r = np.divmod(np.abs(v), q)
            k = k + ((2 * r > q) | ((2 * r == q) & (k % 2 == 1)))
            want = (np.sign(v) * k * q).astype(x.dtype)
        np.testing.assert_array_equal(got, want)
    else:
        want = np.round(ref64(x), decimals)
        assert_close(got, want, dt)


def test_round_large_negative_decimals(nv):
    x = np.array([123456789012, -5, 999], dtype=np.int64)
    np.testing.assert_array_equal(nv.read(call(nv, "round", nv.array(x), -30)), [0, 0, 0])
    np.testing.assert_array_equal(nv.read(call(nv, "round", nv.array(x), -3)),
                                  [123456789000, 0, 1000])
    u = np.array([255, 14], dtype=np.uint8)
    np.testing.assert_array_equal(nv.read(call(nv, "round", nv.array(u), -1)), [4, 10])  # wraps
    f = np.array([1234.5678, 1e300], dtype=np.float64)
    with np.errstate(all="ignore"):
        for d in (-400, 400, 10):
            np.testing.assert_array_equal(nv.read(call(nv, "round", nv.array(f), d)),
                                          np.round(f, d))


# ---- Classification ----

TESTS = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
         "isposinf": np.isposinf, "isneginf": np.isneginf, "logical_not": np.logical_not}


@pytest.mark.parametrize("name,dt,layout", sample(itertools.product(TESTS, ALL, LAYOUTS), 60,
                                                  salt=14))
def test_classification(nv, rng, name, dt, layout):
    x = rand(rng, (4, 6), dt)
    if dt in FLOATS:
        x.flat[:6] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0]).astype(np_dtype(dt))
    if dt == "complex64":
        x.flat[:6] = np.array([complex(np.nan, 0), complex(np.inf, 0), complex(-np.inf, 0),
                               complex(0, np.inf), 0, complex(0, np.nan)]).astype(np.complex64)
    got = nv.read(call(nv, name, nv.view(x, layout)))
    if dt == "complex64" and name in ("isposinf", "isneginf"):
        # MLX's rule: equal to ±inf + 0i.
        inf = np.inf if name == "isposinf" else -np.inf
        want = (x.real == inf) & (x.imag == 0)
    else:
        want = TESTS[name](ref64(x) if dt in FLOATS else x)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == bool


@pytest.mark.parametrize("dt", FLOATS + ["complex64"])
def test_nan_to_num(nv, dt):
    x = np.array([np.nan, np.inf, -np.inf, 1.5, -0.0], dtype=np_dtype(dt))
    if dt == "complex64":
        x = np.array([complex(np.nan, np.inf), complex(-np.inf, 2), 1.5 + 0j], dtype=np.complex64)
    got = nv.read(call(nv, "nan_to_num", nv.array(x), 0.0, None, None))
    if dt == "bfloat16":
        big = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
        want = np.nan_to_num(x.astype(np.float64), posinf=big, neginf=-big)
    else:
        want = np.nan_to_num(x)  # NaN 0, ±inf the dtype's largest / lowest finite value
    np.testing.assert_array_equal(got.astype(np.complex128 if dt == "complex64" else np.float64),
                                  want.astype(np.complex128 if dt == "complex64" else np.float64))
    pos, neg = C.c_double(7.0), C.c_double(-9.0)
    got = nv.read(call(nv, "nan_to_num", nv.array(x), 5.0, C.byref(pos), C.byref(neg)))
    want = np.nan_to_num(x.astype(np.complex128 if dt == "complex64" else np.float64), nan=5.0,
                         posinf=7.0, neginf=-9.0)
    np.testing.assert_array_equal(got.astype(np.complex128), want.astype(np.complex128))


def test_nan_to_num_integers_unchanged(nv):
    x = np.array([1, -2, 3], dtype=np.int16)
    np.testing.assert_array_equal(nv.read(call(nv, "nan_to_num", nv.array(x), 0.0, None, None)), x)


def test_real_imag_are_views(nv, rng):
    z = rand(rng, (3, 4), "complex64")
    base = nv.view(z, "transposed")
    re, im = call(nv, "real", base), call(nv, "imag", base)
    np.testing.assert_array_equal(nv.read(re), z.real)
    np.testing.assert_array_equal(nv.read(im), z.imag)
    assert lib.nv_array_dtype(re) == CODE["float32"]
    # Both read the complex buffer in place: their data pointers are one float apart.
    d_re, d_im, d_z = lib.nv_array_data(re), lib.nv_array_data(im), lib.nv_array_data(base)
    assert d_re == d_z and d_im == d_z + 4
    x = np.array([1.5, -2], dtype=np.float64)
    np.testing.assert_array_equal(nv.read(call(nv, "real", nv.array(x))), x)
    im2 = call(nv, "imag", nv.array(x))
    np.testing.assert_array_equal(nv.read(im2), [0, 0])
    assert lib.nv_array_dtype(im2) == CODE["float64"]
    zc = rand(rng, (5,), "complex64")
    np.testing.assert_array_equal(nv.read(call(nv, "conjugate", nv.view(zc, "reversed"))),
                                  np.conj(zc))


# ---- Binary arithmetic ----

ARITH_DT = ["bool"] + INTS + FLOATS


def fdiv_ref(a, b, dt):
    """NumPy's floor_divide / remainder, with MLX's integer rules for a zero divisor."""
    with np.errstate(all="ignore"):
        if dt in FLOATS:
            return np.floor_divide(ref64(a), ref64(b)), np.remainder(ref64(a), ref64(b))
        if dt == "bool":
            return a & b, a & ~b
        q, r = np.floor_divide(a, b), np.remainder(a, b)
        q = np.where(b == 0, 0, q).astype(a.dtype)
        r = np.where(b == 0, a, r).astype(a.dtype)
        return q, r


@pytest.mark.parametrize("dt,layout,bshape", sample(itertools.product(
    ARITH_DT, LAYOUTS, [(3, 4), (4,), ()]), 50, salt=21))
def test_floor_divide_remainder_divmod(nv, rng, dt, layout, bshape):
    a, b = rand(rng, (3, 4), dt, -10, 10), rand(rng, bshape, dt, -4, 4)
    if dt in INTS and b.size:
        b.flat[0] = 0  # integer division by zero: 0 and a (MLX's rule)
    if dt in FLOATS and b.size > 2:
        b.flat[:3] = np.array([0.0, np.inf, -np.inf]).astype(b.dtype)
    wq, wr = fdiv_ref(a, np.broadcast_to(b, (3, 4)) if b.ndim else b, dt)
    na, nb = nv.view(a, layout), nv.array(b)
    assert_close(nv.read(call(nv, "floor_divide", na, nb)), wq, dt)
    assert_close(nv.read(call(nv, "remainder", na, nb)), wr, dt)
    v = nv.own(lib.nv_vec_new())
    assert lib.nv_divmod(na, nb, v) == 0
    assert lib.nv_vec_size(v) == 2
    assert_close(nv.read(lib.nv_vec_get(v, 0)), wq, dt)
    assert_close(nv.read(lib.nv_vec_get(v, 1)), wr, dt)
    lib.nv_vec_free(v)
    nv.arrays.remove(v)


@pytest.mark.parametrize("dt", ["int8", "int16", "int32", "int64"])
def test_integer_division_extremes(nv, dt):
    info = np.iinfo(np_dtype(dt))
    a = np.array([info.min, info.min, 7, -7, 7, -7, 0, 5], dtype=dt)
    b = np.array([-1, 0, 2, 2, -2, -2, 0, 0], dtype=dt)
    q = nv.read(call(nv, "floor_divide", nv.array(a), nv.array(b)))
    r = nv.read(call(nv, "remainder", nv.array(a), nv.array(b)))
    np.testing.assert_array_equal(q, np.array([info.min, 0, 3, -4, -4, 3, 0, 0], dtype=dt))
    np.testing.assert_array_equal(r, np.array([0, info.min, 1, 1, -1, -1, 0, 5], dtype=dt))


def test_float_divmod_edges(nv):
    a = np.array([7, -7, 1, 0, -1, 5.5, np.inf, -5.5, -0.0, 3, 5.5, np.nan], dtype=np.float64)
    b = np.array([2, 2, 0, 0, 0, np.inf, 2, np.inf, 2, -3, -np.inf, 1], dtype=np.float64)
    with np.errstate(all="ignore"):
        wq, wr = np.floor_divide(a, b), np.remainder(a, b)
    q = nv.read(call(nv, "floor_divide", nv.array(a), nv.array(b)))
    r = nv.read(call(nv, "remainder", nv.array(a), nv.array(b)))
    np.testing.assert_array_equal(q, wq)
    np.testing.assert_array_equal(r, wr)
    np.testing.assert_array_equal(np.signbit(r), np.signbit(wr))


@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
def test_complex_division_rejected(nv, name):
    z = nv.array(np.ones(2, np.complex64))
    expect_error(nv, call(nv, name, z, z), name, "complex64")
    v = nv.own(lib.nv_vec_new())
    assert lib.nv_divmod(z, z, v) != 0 and lib.nv_vec_size(v) == 0
    assert b"divmod" in lib.nv_last_error()
    lib.nv_vec_free(v)
    nv.arrays.remove(v)


@pytest.mark.parametrize("dt,layout", sample(itertools.product(ALL, LAYOUTS), 40, salt=22))
def test_power(nv, rng, dt, layout):
    if dt in INTS:
        a = rand(rng, (3, 5), dt, -5, 5)
        b = rng.integers(0, 6, (3, 5)).astype(np_dtype(dt))
        want = np.power(a, b)  # wraps in the type, as NumPy
    elif dt == "bool":
        a, b = rand(rng, (3, 5), dt), rand(rng, (3, 5), dt)
        want = a | ~b
    else:
        a, b = rand(rng, (3, 5), dt, 0.1, 3), rand(rng, (3, 5), dt, -2, 2)
        want = np.power(ref64(a), ref64(b))
    got = nv.read(call(nv, "power", nv.view(a, layout), nv.array(b)))
    tol = {"float16": 4e-3, "bfloat16": 3e-2}.get(dt)
    assert_close(got, want, dt, rtol=tol, atol=tol)


def test_integer_power_rules(nv):
    a = np.array([2, 1, -1, 0, -2, 3, 3, 2], dtype=np.int32)
    b = np.array([-1, -5, -3, -1, -1, 0, 40, 31], dtype=np.int32)
    got = nv.read(call(nv, "power", nv.array(a), nv.array(b)))
    # Negative exponents give 0 (MLX); large ones wrap.
    want = np.array([0, 0, 0, 0, 0, 1, pow(3, 40, 2**32), 2**31], dtype=np.int64)
    want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)
    np.testing.assert_array_equal(got, want)
    u = np.array([3, 255], dtype=np.uint8)
    np.testing.assert_array_equal(nv.read(call(nv, "power", nv.array(u), nv.array(np.array([5, 2], np.uint8)))),
                                  np.array([243, 1], dtype=np.uint8))


@pytest.mark.parametrize("name,ref", [("arctan2", np.arctan2),
                                      ("logaddexp", np.logaddexp)])
@pytest.mark.parametrize("dt", FLOATS + ["int32", "bool"])
def test_float_binary(nv, rng, name, ref, dt):
    a, b = rand(rng, (4, 5), dt), rand(rng, (5,), dt)
    got = nv.read(call(nv, name, nv.view(a, "strided"), nv.array(b)))
    out = dt if dt in FLOATS else "float32"
    assert_close(got, ref(ref64(a), ref64(b)), out, rtol=5e-3 if dt == "float16" else None)


def test_float_binary_edges(nv):
    a = np.array([-np.inf, np.inf, np.nan, 1.0, 800, -np.inf, 0.0, -0.0], dtype=np.float64)
    b = np.array([-np.inf, np.inf, 1.0, 2.0, 800, 3.0, -0.0, -1.0], dtype=np.float64)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(nv.read(call(nv, "logaddexp", nv.array(a), nv.array(b))),
                                      np.logaddexp(a, b))
        # Edge values exactly (signs, infinities, NaN); finite results within 1 ulp (the GPU's
        # atan2 is not glibc's).
        got, want = nv.read(call(nv, "arctan2", nv.array(a), nv.array(b))), np.arctan2(a, b)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
        np.testing.assert_array_max_ulp(got, want, maxulp=1)
    expect_error(nv, call(nv, "arctan2", nv.array(np.ones(2, np.complex64)),
                          nv.array(np.ones(2, np.complex64))), "arctan2", "complex64")


# ---- Comparisons and logical ops ----

CMP = {"equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
       "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
       "logical_and": np.logical_and, "logical_or": np.logical_or,
       "logical_xor": np.logical_xor}


@pytest.mark.parametrize("name,dt,layout", sample(itertools.product(CMP, ALL, LAYOUTS), 80,
                                                  salt=31))
def test_comparisons(nv, rng, name, dt, layout):
    a = rand(rng, (4, 5), dt, -2, 2)
    b = a.copy()
    b[::2] = rand(rng, (2, 5), dt, -2, 2)  # equal and different values both occur
    if dt in FLOATS:
        a.flat[0], b.flat[1], a.flat[2], b.flat[2] = np.nan, np.nan, np.nan, np.nan
    if dt in FLOATS + ["complex64"]:
        a = a.round().astype(a.dtype)
        b = b.round().astype(b.dtype)
    got = nv.read(call(nv, name, nv.view(a, layout), nv.view(b, "strided")))
    with np.errstate(invalid="ignore"):
        want = CMP[name](a, b)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == bool


def test_comparison_promotion_and_scalars(nv):
    a = np.array([1, 2, 3], dtype=np.int8)
    got = nv.read(call(nv, "less", nv.array(a), nv.array(np.array([1.5, 2.0, 2.5], np.float32))))
    np.testing.assert_array_equal(got, [True, False, False])
    got = nv.read(call(nv, "greater_scalar", nv.array(a), 1.5))
    np.testing.assert_array_equal(got, [False, True, True])
    got = nv.read(call(nv, "equal_scalar", nv.array(np.array([0.1, 0.2], np.float32)), 0.1))
    np.testing.assert_array_equal(got, [True, False])  # the scalar takes float32 (weak)
    u = np.array([2**63 + 5], dtype=np.uint64)
    i = np.array([-1], dtype=np.int64)
    got = nv.read(call(nv, "greater", nv.array(u), nv.array(i)))
    assert got.dtype == bool


# ---- Bitwise ops and shifts ----

BITS = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
        "bitwise_xor": np.bitwise_xor}


@pytest.mark.parametrize("name,dt", sample(itertools.product(BITS, ["bool"] + INTS), 30, salt=41))
def test_bitwise(nv, rng, name, dt):
    if dt in INTS:
        info = np.iinfo(np_dtype(dt))
        a = rng.integers(info.min, info.max, (3, 7), endpoint=True, dtype=np_dtype(dt))
        b = rng.integers(info.min, info.max, (7,), endpoint=True, dtype=np_dtype(dt))
    else:
        a, b = rand(rng, (3, 7), dt), rand(rng, (7,), dt)
    got = nv.read(call(nv, name, nv.view(a, "transposed"), nv.array(b)))
    np.testing.assert_array_equal(got, BITS[name](a, b))


def test_bitwise_promotion_and_errors(nv):
    got = call(nv, "bitwise_xor", nv.array(np.array([255], np.uint8)),
               nv.array(np.array([-1], np.int8)))
    assert lib.nv_array_dtype(got) == CODE["int16"]
    np.testing.assert_array_equal(nv.read(got), [-256])
    for name in list(BITS) + ["left_shift", "right_shift"]:
        expect_error(nv, call(nv, name, nv.array(np.ones(2, np.float32)),
                              nv.array(np.ones(2, np.int32))), name, "float32")


@pytest.mark.parametrize("dt", INTS)
def test_shifts_defined_for_every_amount(nv, rng, dt):
    info = np.iinfo(np_dtype(dt))
    w = np.dtype(np_dtype(dt)).itemsize * 8
    amounts = [0, 1, w - 1, w, w + 1, 2 * w]
    if info.min < 0:
        amounts += [-1, -w]
    x = np.array([1, info.max, info.min, 5, info.min + 3] * len(amounts), dtype=np_dtype(dt))
    s = np.repeat(np.array(amounts, dtype=np_dtype(dt)), 5)
    with np.errstate(all="ignore"):
        # NumPy's definition: out-of-range amounts give 0, or -1 for negative right shifts.
        wl = np.left_shift(x, s)
        wr = np.right_shift(x, s)
    np.testing.assert_array_equal(nv.read(call(nv, "left_shift", nv.array(x), nv.array(s))), wl)
    np.testing.assert_array_equal(nv.read(call(nv, "right_shift", nv.array(x), nv.array(s))), wr)


def test_shift_bool_is_uint8(nv):
    b = nv.array(np.array([True, False]))
    out = call(nv, "left_shift", b, nv.array(np.array([True, True])))
    assert lib.nv_array_dtype(out) == CODE["uint8"]
    np.testing.assert_array_equal(nv.read(out), [2, 0])


# ---- where, clip ----

@pytest.mark.parametrize("dt,layout", sample(itertools.product(ALL, LAYOUTS), 30, salt=51))
def test_where(nv, rng, dt, layout):
    cond = rng.integers(-1, 2, (4, 5)).astype(np.int32)
    x, y = rand(rng, (4, 5), dt), rand(rng, (5,), dt)
    got = nv.read(call(nv, "where", nv.array(cond), nv.view(x, layout), nv.array(y)))
    want = np.where(cond != 0, x, y)
    assert_close(got, want if dt in INTS + ["bool"] else ref64(want), dt)


def test_where_promotion_broadcast_and_errors(nv):
    c = nv.array(np.array([[np.nan], [0.0]], dtype=np.float32))
    x = nv.array(np.array([1, 2, 3], np.int8))
    out = call(nv, "where", c, x, nv.own(lib.nv_weak_scalar(0.5)))
    assert lib.nv_array_dtype(out) == CODE["float32"]
    np.testing.assert_array_equal(nv.read(out), [[1, 2, 3], [0.5, 0.5, 0.5]])
    out = call(nv, "where", nv.array(np.array([True, False])), x[0:0] if False else x,
               nv.array(np.array([1.5], np.float16)))
    expect_error(nv, out, "where", "(2,)", "(3,)")


@pytest.mark.parametrize("dt", ["float32", "int8", "float64", "bfloat16", "uint16"])
def test_clip(nv, rng, dt):
    x = rand(rng, (3, 6), dt, -10, 10)
    lo = rand(rng, (6,), dt, -5, 0)
    hi = rand(rng, (3, 1), dt, 0, 5)
    na = nv.view(x, "reversed")
    got = nv.read(call(nv, "clip", na, nv.array(lo), nv.array(hi)))
    want = np.minimum(np.maximum(ref64(x), ref64(lo)), ref64(hi))
    assert_close(got, want, dt)
    got = nv.read(call(nv, "clip", na, None, nv.array(hi)))
    assert_close(got, np.minimum(ref64(x), ref64(hi)), dt)
    got = nv.read(call(nv, "clip", na, nv.array(lo), None))
    assert_close(got, np.maximum(ref64(x), ref64(lo)), dt)


def test_clip_rules(nv):
    x = nv.array(np.array([np.nan, 1, 3, 5], np.float32))
    np.testing.assert_array_equal(nv.read(call(nv, "clip_scalar", x, 2, 4)), [np.nan, 2, 3, 4])
    np.testing.assert_array_equal(nv.read(call(nv, "clip_scalar", x, 4, 2)), [np.nan, 2, 2, 2])
    xi = nv.array(np.array([1, 5, 9], np.int32))
    out = call(nv, "clip_scalar", xi, 2.5, 7)
    assert lib.nv_array_dtype(out) == CODE["float32"]  # a float bound promotes, as MLX
    np.testing.assert_array_equal(nv.read(out), [2.5, 5, 7])
    expect_error(nv, call(nv, "clip", xi, None, None), "clip", "a_min")
    expect_error(nv, call(nv, "clip", xi, nv.array(np.ones(2, np.int32)), None), "clip", "(3,)",
                 "(2,)")


# ---- Closeness ----

@pytest.mark.parametrize("dt,equal_nan", sample(itertools.product(ALL, [False, True]), 20, salt=61))
def test_isclose_allclose_array_equal(nv, rng, dt, equal_nan):
    a = rand(rng, (4, 6), dt)
    b = a.copy()
    if dt in FLOATS + ["complex64"]:
        b = (ref64(a) * (1 + rng.uniform(-2e-5, 2e-5, a.shape))).astype(a.dtype)
    if dt in FLOATS:
        a.flat[:5] = np.array([np.nan, np.nan, np.inf, np.inf, -np.inf]).astype(a.dtype)
        b.flat[:5] = np.array([np.nan, 1.0, np.inf, -np.inf, 5.0]).astype(a.dtype)
    if dt in INTS:
        b.flat[3] = a.flat[3] + 1 if a.flat[3] < 50 else a.flat[3] - 1
    na, nb = nv.view(a, "transposed"), nv.array(b)
    got = nv.read(call(nv, "isclose", na, nb, 1e-5, 1e-8, equal_nan))
    want = np.isclose(ref64(a), ref64(b), rtol=1e-5, atol=1e-8, equal_nan=equal_nan)
    np.testing.assert_array_equal(got, want)
    allc = nv.read(call(nv, "allclose", na, nb, 1e-5, 1e-8, equal_nan))
    assert allc.shape == () and bool(allc) == bool(want.all())
    same = nv.read(call(nv, "allclose", na, na, 0.0, 0.0, True))
    assert bool(same)
    eq = nv.read(call(nv, "array_equal", na, nv.array(a.copy()), equal_nan))
    has_nan = dt in FLOATS
    assert bool(eq) == (equal_nan or not has_nan)


def test_closeness_shapes(nv):
    a = nv.array(np.ones((2, 3), np.float32))
    b = nv.array(np.ones(3, np.float32))
    assert bool(nv.read(call(nv, "allclose", a, b, 1e-5, 1e-8, False)))
    assert not bool(nv.read(call(nv, "array_equal", a, b, False)))
    assert bool(nv.read(call(nv, "array_equal", a, nv.array(np.ones((2, 3), np.int64)), False)))
    expect_error(nv, call(nv, "allclose", a, nv.array(np.ones(4)), 1e-5, 1e-8, False), "allclose",
                 "(2,3)", "(4,)")
    e = nv.array(np.ones((0, 3), np.float32))
    assert bool(nv.read(call(nv, "allclose", e, b, 1e-5, 1e-8, False)))
    big = np.ones(100000, np.float32)
    big[-1] = 2
    assert not bool(nv.read(call(nv, "allclose", nv.array(big), nv.array(np.ones(1, np.float32)),
                                 1e-5, 1e-8, False)))


# ---- Creation ----

@pytest.mark.parametrize("n,m,k,dt", [(3, 4, 1, "float32"), (3, -1, 0, "int32"), (0, -1, 0, "float32"),
                                      (2, 2, -5, "bool"), (4, 2, -1, "float16"), (5, 5, 10, "int8")])
def test_tri(nv, n, m, k, dt):
    got = nv.read(call(nv, "tri", n, m, k, CODE[dt]))
    want = np.tri(n, None if m < 0 else m, k, dtype=np_dtype(dt))
    np.testing.assert_array_equal(got, want)
    assert lib.nv_array_dtype(call(nv, "tri", n, m, k, CODE[dt])) == CODE[dt]
    if n == 3:
        expect_error(nv, call(nv, "tri", -1, 2, 0, CODE[dt]), "tri", "-1")


@pytest.mark.parametrize("shape,k,dt,layout", sample(itertools.product(
    [(4, 5), (2, 3, 3), (3, 0)], [-2, 0, 1, 7], ["float32", "int16", "complex64", "bool"],
    ["contiguous", "transposed", "reversed"]), 30, salt=71))
def test_tril_triu(nv, rng, shape, k, dt, layout):
    x = rand(rng, shape, dt)
    for name, ref in [("tril", np.tril), ("triu", np.triu)]:
        got = nv.read(call(nv, name, nv.view(x, layout), k))
        np.testing.assert_array_equal(got, ref(x, k))
        assert got.dtype == x.dtype
    expect_error(nv, call(nv, "tril", nv.array(np.ones(3)), 0), "tril", "2-D")


def vec_of(nv, arrays):
    v = nv.own(lib.nv_vec_new())
    nv.arrays.remove(v)
    for a in arrays:
        assert lib.nv_vec_push(v, a) == 0
    return v


def vec_read(nv, v):
    return [nv.read(lib.nv_vec_get(v, i)) for i in range(lib.nv_vec_size(v))]


@pytest.mark.parametrize("indexing,sparse", list(itertools.product([b"xy", b"ij", None], [False, True])))
def test_meshgrid(nv, rng, indexing, sparse):
    xs = [rand(rng, (3,), "int32"), rand(rng, (2, 2), "float32"), rand(rng, (5,), "float16")]
    ins = vec_of(nv, [nv.array(x) for x in xs])
    out = vec_of(nv, [])
    assert lib.nv_meshgrid(ins, sparse, indexing, out) == 0
    got = vec_read(nv, out)
    want = np.meshgrid(*xs, sparse=sparse, indexing=(indexing or b"xy").decode())
    assert len(got) == 3
    for g, w, x in zip(got, want, xs):
        assert g.dtype == x.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
    bad = vec_of(nv, [])
    assert lib.nv_meshgrid(ins, sparse, b"zz", bad) != 0 and lib.nv_vec_size(bad) == 0
    assert b"indexing" in lib.nv_last_error()
    for v in (ins, out, bad):
        lib.nv_vec_free(v)


@pytest.mark.parametrize("name", ["hanning", "hamming", "bartlett", "blackman"])
@pytest.mark.parametrize("m", [-1, 0, 1, 2, 5, 12, 101])
def test_windows(nv, name, m):
    got = nv.read(call(nv, name, m))
    want = getattr(np, name)(m)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=0, atol=1e-7)


# ---- view, stop_gradient, depends, number_of_elements ----

def test_view_same_size_and_narrowing(nv, rng):
    x = rand(rng, (3, 4), "float32")
    got = nv.read(call(nv, "view", nv.array(x), CODE["int32"]))
    np.testing.assert_array_equal(got, x.view(np.int32))
    # A transposed view keeps its layout (the last axis is strided).
    t = nv.view(x, "transposed")
    got = nv.read(call(nv, "view", t, CODE["uint32"]))
    np.testing.assert_array_equal(got, x.view(np.uint32))
    got = nv.read(call(nv, "view", nv.view(x, "reversed"), CODE["uint8"]))
    np.testing.assert_array_equal(got, np.ascontiguousarray(x).view(np.uint8))
    got = nv.read(call(nv, "view", nv.array(x), CODE["float16"]))
    np.testing.assert_array_equal(got.view(np.uint16), x.view(np.uint16))
    assert got.shape == (3, 8)


def test_view_widening_and_offsets(nv, rng):
    x = rng.integers(0, 256, (4, 8)).astype(np.uint8)
    got = nv.read(call(nv, "view", nv.array(x), CODE["int32"]))
    np.testing.assert_array_equal(got, x.view(np.int32))
    # A strided input that is not row-contiguous is copied first.
    s = nv.view(x, "strided")
    np.testing.assert_array_equal(nv.read(call(nv, "view", s, CODE["uint16"])),
                                  np.ascontiguousarray(x).view(np.uint16))
    # A row-contiguous slice at an odd byte offset: the offset is not whole in int16.
    base = nv.array(np.arange(10, dtype=np.uint8))
    start, n = ints([1])
    stop, _ = ints([9])
    sl = nv.own(lib.nv_slice(base, start, stop, None, n))
    got = nv.read(call(nv, "view", sl, CODE["int16"]))
    np.testing.assert_array_equal(got, np.arange(10, dtype=np.uint8)[1:9].copy().view(np.int16))
    # An offset that stays whole shares the buffer.
    start2, _ = ints([2])
    stop2, _ = ints([10])
    sl2 = nv.own(lib.nv_slice(base, start2, stop2, None, n))
    v2 = call(nv, "view", sl2, CODE["int16"])
    np.testing.assert_array_equal(nv.read(v2), np.arange(10, dtype=np.uint8)[2:].view(np.int16))
    assert lib.nv_array_data(v2) == lib.nv_array_data(base) + 2
    zc = nv.read(call(nv, "view", nv.array(np.arange(4, dtype=np.float32)), CODE["complex64"]))
    np.testing.assert_array_equal(zc, np.arange(4, dtype=np.float32).view(np.complex64))


def test_view_errors(nv):
    expect_error(nv, call(nv, "view", nv.array(np.ones(3, np.uint8)), CODE["int16"]), "view",
                 "multiple")
    expect_error(nv, call(nv, "view", nv.array(np.int32(1)), CODE["int16"]), "view", "0-d")
    got = nv.read(call(nv, "view", nv.array(np.int32(1)), CODE["float32"]))
    assert got.view(np.int32) == 1
    assert nv.read(call(nv, "view", nv.array(np.ones((2, 0), np.int32)), CODE["uint8"])).shape == (2, 0)


def test_stop_gradient_is_a_view(nv, rng):
    x = rand(rng, (3, 4), "float64")
    t = nv.view(x, "transposed")
    s = call(nv, "stop_gradient", t)
    np.testing.assert_array_equal(nv.read(s), x)
    assert lib.nv_array_data(s) == lib.nv_array_data(t)


def test_depends(nv, rng):
    x, y = rand(rng, (3,), "float32"), rand(rng, (2, 2), "int32")
    nx, ny = nv.array(x), nv.array(y)
    dep = call(nv, "exp", nv.array(np.ones(2, np.float32)))
    ins, deps, out = vec_of(nv, [nx, ny]), vec_of(nv, [dep]), vec_of(nv, [])
    assert lib.nv_depends(ins, deps, out) == 0
    r = vec_read(nv, out)
    np.testing.assert_array_equal(r[0], x)
    np.testing.assert_array_equal(r[1], y)
    assert lib.nv_array_is_evaluated(dep)
    # A failed dependency fails the results.
    bad = call(nv, "add", nx, nv.array(np.ones(4, np.float32)))
    deps2, out2 = vec_of(nv, [bad]), vec_of(nv, [])
    assert lib.nv_depends(ins, deps2, out2) != 0 and lib.nv_vec_size(out2) == 0
    for v in (ins, deps, out, deps2, out2):
        lib.nv_vec_free(v)


sig("nv_add", P, P, P)
sig("nv_exp", P, P)


@pytest.mark.parametrize("axes,inverted,dt,want", [
    ([0], False, "int32", 2), ([0, 2], False, "int32", 8), ([-1], True, "float32", 6),
    ([], False, "int64", 1), ([], True, "float16", 24), ([1], False, "bool", True),
])
def test_number_of_elements(nv, axes, inverted, dt, want):
    x = nv.array(np.ones((2, 3, 4), np.float32))
    a, n = ints(axes)
    out = call(nv, "number_of_elements", x, a, n, inverted, CODE[dt])
    got = nv.read(out)
    assert got.shape == () and lib.nv_array_dtype(out) == CODE[dt]
    assert got == want


def test_number_of_elements_errors(nv):
    x = nv.array(np.ones((2, 3), np.float32))
    for axes in ([2], [-3], [0, 0]):
        a, n = ints(axes)
        expect_error(nv, call(nv, "number_of_elements", x, a, n, False, CODE["int32"]),
                     "number_of_elements", "axis")


# ---- Errors, stickiness, NULL inputs ----

def test_null_and_sticky_errors(nv):
    for name in ["sin", "sign", "isnan", "floor", "real", "view"]:
        h = call(nv, name, None) if name != "view" else call(nv, "view", None, CODE["int8"])
        expect_error(nv, h, name, "NULL")
    bad = call(nv, "add", nv.array(np.ones(2, np.float32)), nv.array(np.ones(3, np.float32)))
    msg = nv.status(bad)[1]
    for h in [call(nv, "tanh", bad), call(nv, "less", bad, bad), call(nv, "where", bad, bad, bad),
              call(nv, "round", bad, 2), call(nv, "isclose", bad, bad, 1e-5, 1e-8, False)]:
        assert nv.status(h)[1] == msg
    with pytest.raises(NuvecError):
        nv.read(call(nv, "power", bad, bad))


@pytest.mark.parametrize("name", ["floor_divide", "power", "equal", "logical_and", "bitwise_or",
                                  "logaddexp"])
def test_broadcast_errors_name_op(nv, name):
    a = nv.array(np.ones((2, 3), np.int32))
    b = nv.array(np.ones((4,), np.int32))
    expect_error(nv, call(nv, name, a, b), name, "(2,3)", "(4,)", "broadcast")


@pytest.mark.parametrize("name,want", [("floor_divide_scalar", [1, 1, 2]),
                                       ("remainder_scalar", [0, 1, 0]),
                                       ("power_scalar", [4, 9, 16])])
def test_scalar_forms_keep_dtype(nv, name, want):
    x = nv.array(np.array([2, 3, 4], np.int16))
    out = call(nv, name, x, 2.0 if name != "power_scalar" else 2.0)
    # A float scalar with an integer array promotes to float32, as MLX's Python scalars.
    assert lib.nv_array_dtype(out) == CODE["float32"]
    np.testing.assert_array_equal(nv.read(out), want)


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "sin"])
def test_large_parallel_contiguous(nv, rng, name):
    x = rand(rng, (300001,), "float32", -8, 8)
    got = nv.read(call(nv, name, nv.array(x)))
    assert_close(got, math_ref(name, x), "float32", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shapes", [((5,), (5,)), ((3, 1), (4,)), ((), (2, 2)), ((0, 3), (3,))])
@pytest.mark.parametrize("other", ["complex64", "float32", "int8"])
def test_complex_logaddexp_is_log_of_exp_sum(nv, rng, shapes, other):
    # MLX takes complex64: log(exp(a) + exp(b)), computed from the operand of larger real part.
    sa, sb = shapes
    a = (rng.normal(size=sa) * 3 + 1j * rng.uniform(-3, 3, size=sa)).astype(np.complex64)
    b = (rng.normal(size=sb) * 3).astype(np_dtype(other)) if other != "complex64" else \
        (rng.normal(size=sb) * 3 + 1j * rng.uniform(-3, 3, size=sb)).astype(np.complex64)
    for x, y in [(a, b), (b, a)]:
        got = nv.read(call(nv, "logaddexp", nv.array(x), nv.array(y)))
        assert got.dtype == np.complex64
        want = np.log(np.exp(x.astype(np.complex128)) + np.exp(y.astype(np.complex128)))
        # A complex logarithm up to its branch: MLX's formula (the larger operand plus log1p)
        # may leave the imaginary part outside (-pi, pi], so it is compared modulo 2 pi.
        np.testing.assert_allclose(got.real, want.real, rtol=1e-5, atol=1e-5)
        turn = np.remainder(got.imag - want.imag + np.pi, 2 * np.pi) - np.pi
        np.testing.assert_allclose(turn, 0, atol=1e-5)
    # Large real parts do not overflow; -inf operands give the other one.
    x = np.array([1000 + 1j, -np.inf + 0j, -np.inf + 0j, 2 + 0j], np.complex64)
    y = np.array([999 + 2j, 2 + 1j, -np.inf + 0j, -np.inf + 0j], np.complex64)
    got = nv.read(call(nv, "logaddexp", nv.array(x), nv.array(y)))
    want = [1000 + np.log1p(np.exp(-1 + 1j)) + 1j, 2 + 1j, -np.inf + 0j, 2 + 0j]
    np.testing.assert_allclose(got, np.array(want, np.complex128), rtol=1e-6)
