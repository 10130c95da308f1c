"""The fused GELU kernels (nv_gelu, nv_gelu_approx, nv_gelu_fast_approx; src/cpu/elementwise_fast.c)
against float64 NumPy references over every float32 exponent, a dense sweep and the edges, with
the bounds their comments state: the sigmoid forms within 4.5 ulp where the result is normal (and
|x| subnormal steps below), the erf form within 2 ulp for x >= 0 and |x| 2^-22 absolute below
(the composed form's cancellation). Strided and broadcast inputs give the contiguous bits;
float16/bfloat16 within one ulp of their format; float64 to 1e-15; integers compute in float32;
complex64 fails with a message naming the op."""
import math

import numpy as np
import pytest

from nvc import CODE, NuvecError, lib, np_dtype, sig
from test_elementwise_ulp import EDGE, LAYOUTS, layout_matches_contiguous, ulp_error

P = __import__("ctypes").c_void_p
NAMES = ["gelu", "gelu_approx", "gelu_fast_approx"]
for _n in NAMES:
    sig("nv_" + _n, P, P)
sig("nv_astype", P, P, __import__("ctypes").c_int)

_erfc = np.vectorize(math.erfc, otypes=[np.float64])
C = 2 * math.sqrt(2 / math.pi)
A = float(np.float32(1.702))


def sigmoid64(v):
    e = np.exp(-np.abs(v))
    return np.where(v >= 0, 1 / (1 + e), e / (1 + e))


def ref(name, x):
    """float64 references from the float32 inputs (erfc: no cancellation for x < 0)."""
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "gelu":
            y = 0.5 * x * _erfc(-x / math.sqrt(2))
        elif name == "gelu_approx":
            y = x * sigmoid64(C * x * (1 + 0.044715 * x * x))
        else:
            y = x * sigmoid64(A * x)
    y = np.where(x == -np.inf, -0.0, y)
    return np.where(x == 0, x, y)


def sweep():
    bits = np.linspace(0, 0x7f7fffff, 1 << 18).astype(np.uint32)
    wide = bits.view(np.float32)
    dense = np.linspace(-20, 20, 1 << 18, dtype=np.float64).astype(np.float32)
    return np.concatenate([wide, -wide, dense, EDGE, np.float32([-5.5, -8.0, -13.0, -14.5, 9.0]),
                           # the largest errors found over every float32 in [-12, -0.5]
                           np.float32([-1.8539306, -2.7588341, -3.109413, -7.719524])])


def check_bound(name, x, got):
    want = ref(name, x)
    err = ulp_error(got, want)
    fin = np.isfinite(want) & np.isfinite(x)
    if name == "gelu":
        pos = x >= 0
        assert err[pos].max() <= 2, f"gelu: {err[pos].max()} ulp for x >= 0"
        neg = fin & (x < 0)
        absol = np.abs(got[neg].astype(np.float64) - want[neg])
        bound = np.abs(x[neg].astype(np.float64)) * 2.0 ** -22 + 2 * 2.0 ** -149
        bad = absol > np.maximum(bound, 3 * np.abs(want[neg]) * 2.0 ** -23)
        assert not bad.any(), f"gelu: x = {x[neg][bad][:4]}: {got[neg][bad][:4]} vs {want[neg][bad][:4]}"
    else:
        normal = np.abs(want) >= 2.0 ** -126
        assert err[normal].max() <= 4.5, f"{name}: {err[normal].max()} ulp at x = {x[normal][np.argmax(err[normal])]!r}"
        sub = fin & ~normal
        lim = 3 + np.abs(x[sub].astype(np.float64))
        assert (err[sub] <= lim).all(), f"{name}: subnormal results off by {err[sub].max()} steps"


@pytest.mark.parametrize("name", NAMES)
def test_float32_within_stated_bound(nv, name):
    x = sweep()
    got = nv.read(nv.own(getattr(lib, "nv_" + name)(nv.array(x))))
    assert got.dtype == np.float32
    check_bound(name, x, got)
    # Exact edges: ±0 kept, +inf -> +inf, -inf -> -0, NaN -> NaN.
    e = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan])
    g = nv.read(nv.own(getattr(lib, "nv_" + name)(nv.array(e))))
    assert np.array_equal(np.signbit(g[:2]), [False, True]) and (g[:2] == 0).all()
    assert g[2] == np.inf and g[3] == 0 and np.signbit(g[3]) and np.isnan(g[4])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_match_contiguous(nv, rng, name, layout):
    x = rng.uniform(-8, 8, (37, 21)).astype(np.float32)
    x.ravel()[: len(EDGE)] = EDGE
    x, got = layout_matches_contiguous(nv, getattr(lib, "nv_" + name), x, layout)
    check_bound(name, np.ascontiguousarray(x).ravel(), got.ravel())


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_within_one_ulp(nv, rng, name, dt):
    x = rng.uniform(-10, 10, 4099).astype(np_dtype(dt))
    got = nv.read(nv.own(getattr(lib, "nv_" + name)(nv.array(x)))).astype(np.float64)
    want = ref(name, x.astype(np.float32)).astype(np_dtype(dt)).astype(np.float64)
    step = np.abs(np.nextafter(want.astype(np_dtype(dt)), np.array(np.inf, np_dtype(dt))).astype(np.float64) - want)
    tol = np.maximum(step * 1.0001, 1e-7 if name != "gelu" else 1e-5 * np.abs(x.astype(np.float64)))
    assert (np.abs(got - want) <= tol).all()


@pytest.mark.parametrize("name", NAMES)
def test_float64(nv, rng, name):
    x = np.concatenate([rng.uniform(-30, 30, 999), [0.0, -0.0, np.inf, -np.inf, 1e-300, -40.0]])
    got = nv.read(nv.own(getattr(lib, "nv_" + name)(nv.array(x))))
    assert got.dtype == np.float64
    want = ref(name, x)
    # The reference's rounding of its argument (x / sqrt(2), v) moves the result by up to
    # (1 + v) ulp of double where the function falls off as e^(-x^2 / 2) or e^v.
    fin = np.isfinite(x)
    rtol = 4e-16 * (1 + x[fin] * x[fin])
    assert (np.abs(got[fin] - want[fin]) <= rtol * np.abs(want[fin]) + 1e-300).all()
    np.testing.assert_array_equal(got[~fin], want[~fin])
    assert np.array_equal(np.signbit(got[~fin]), np.signbit(want[~fin]))
    assert np.isnan(nv.read(nv.own(getattr(lib, "nv_" + name)(nv.array(np.float64([np.nan])))))).all()


@pytest.mark.parametrize("name", NAMES)
def test_empty_scalar_and_integers(nv, name):
    f = getattr(lib, "nv_" + name)
    assert nv.read(nv.own(f(nv.array(np.zeros((0, 3), np.float32))))).shape == (0, 3)
    s = nv.read(nv.own(f(nv.array(np.float32(1.5)))))
    assert s.shape == () and abs(float(s) - ref(name, np.float32([1.5]))[0]) < 1e-6
    i = nv.read(nv.own(f(nv.array(np.arange(-3, 4, dtype=np.int32)))))
    assert i.dtype == np.float32
    xs = np.arange(-3, 4).astype(np.float32)
    check_bound(name, xs, i)


@pytest.mark.parametrize("name", NAMES)
def test_complex_fails_with_a_message(nv, name):
    z = nv.array(np.array([1 + 2j], np.complex64))
    h = nv.own(getattr(lib, "nv_" + name)(z))
    with pytest.raises(NuvecError, match=name + ": complex64 is not supported"):
        nv.read(h)
