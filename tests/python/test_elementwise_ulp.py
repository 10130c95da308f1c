"""The vectorized float32 element-wise kernels (src/cpu/elementwise_fast.c) against float64
NumPy references, in ulp of the float32 result: a sweep over every exponent of the float32
range (2^20 bit patterns of each sign), a dense sweep where each function bends, and the edge
values (±0, ±inf, NaN, subnormals, the overflow and underflow ends) exactly. Strided and
broadcast inputs must give the contiguous results bit for bit; float16/bfloat16 (computed
through float32) within one ulp of their own format."""
import math
import os

import ml_dtypes
import numpy as np
import pytest

from nvc import ints, lib, np_dtype, sig

P = __import__("ctypes").c_void_p
NAMES = ["exp", "log", "log1p", "expm1", "tanh", "sigmoid", "erf", "sin", "cos"]
for _n in NAMES:
    sig("nv_" + _n, P, P)

_erf = np.vectorize(math.erf, otypes=[np.float64])


def sigmoid64(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


REF = {"exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "tanh": np.tanh,
       "sigmoid": sigmoid64, "erf": _erf, "sin": np.sin, "cos": np.cos}
# The bound each kernel's comment states, in float32 ulp.
BOUND = {"exp": 1.5, "log": 1, "log1p": 1.5, "expm1": 2, "tanh": 1.5, "sigmoid": 2, "erf": 2, "sin": 1,
         "cos": 1}
# With the default device gpu the CUDA kernels run: CUDA's single-precision functions' stated
# maximum errors (its programming guide), and sigmoid's e / (1 + e) over expf.
GPU_BOUND = {"exp": 2, "log": 1, "log1p": 1, "expm1": 1.5, "tanh": 2, "sigmoid": 3.5, "erf": 2,
             "sin": 2, "cos": 2}
if os.environ.get("NUVEC_DEFAULT_DEVICE", "").lower() == "gpu":
    BOUND = GPU_BOUND
# Where each function bends: a dense uniform sweep there.
DENSE = {"exp": (-104, 89), "log": (0, 4), "log1p": (-1, 3), "expm1": (-20, 20),
         "tanh": (-10, 10), "sigmoid": (-105, 90), "erf": (-4.5, 4.5), "sin": (-40, 40),
         "cos": (-40, 40)}
EDGE = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-45, -1e-45, 1.1754942e-38,
                 -1.1754942e-38, 1e-30, -1e-30, 3.4028235e38, -3.4028235e38, 88.72283,
                 88.722839, 88.7228394, -87.33654, -103.97208, -103.972084, -104.0, -150.0,
                 0.99999994, 1.0000001, -0.99999994, 1e-8, -1e-8, 3.92, -3.92, 3.9193, 0.4,
                 -0.4, 0.34657359, 1.5707964, -1.5707964, 3.1415927, 1048575.9, 1048576.0, -1048576.0,
                 1e6, 1e20, -1e30], dtype=np.float32)


def sweep(name):
    """2^20 bit patterns over every exponent (both signs), the dense range, the edges."""
    bits = np.linspace(0, 0x7f7fffff, 1 << 19).astype(np.uint32)
    wide = bits.view(np.float32)
    lo, hi = DENSE[name]
    dense = np.linspace(lo, hi, 1 << 19, dtype=np.float64).astype(np.float32)
    return np.concatenate([wide, -wide, dense, EDGE])


def ulp_error(got, want):
    """|got - want| in ulp of the float32 at want (subnormal ulp below the normal range);
    special results (NaN, ±inf and what rounds to ±inf) must match exactly."""
    with np.errstate(over="ignore"):
        want32 = want.astype(np.float32)
    special = ~np.isfinite(want32)
    assert np.array_equal(np.isnan(got), np.isnan(want32))
    assert np.array_equal(got[special & ~np.isnan(want32)], want32[special & ~np.isnan(want32)])
    fin = ~special
    w = want[fin]
    e = np.floor(np.log2(np.maximum(np.abs(w), 2.0 ** -126)))
    ulp = np.exp2(np.maximum(e, -126) - 23)
    err = np.zeros(len(got))
    with np.errstate(invalid="ignore"):
        err[fin] = np.abs(got[fin].astype(np.float64) - w) / ulp
    err[fin & ~np.isfinite(got)] = np.inf
    return err


@pytest.mark.parametrize("name", NAMES)
def test_float32_within_stated_ulp(nv, name):
    x = sweep(name)
    got = nv.read(nv.own(getattr(lib, "nv_" + name)(nv.array(x))))
    assert got.dtype == np.float32
    with np.errstate(all="ignore"):
        want = REF[name](x.astype(np.float64))
    err = ulp_error(got, want)
    i = int(np.argmax(err))
    assert err.max() <= BOUND[name], f"{name}: {err.max()} ulp at x = {x[i]!r} (got {got[i]!r}, want {want[i]!r})"
    # Signs of zero are kept where the function is odd through 0 or x-like there.
    if name in ("log1p", "expm1", "tanh", "erf", "sin"):
        z = np.isin(x, [0.0]) & (x == 0)
        assert np.array_equal(np.signbit(got[z]), np.signbit(x[z]))


LAYOUTS = ["strided", "reversed", "transposed", "rows", "columns"]


def layout_matches_contiguous(nv, f, x, layout):
    """f of x (37 x 21, float32) in `layout` (a view, or for "rows"/"columns" a row or a column
    broadcast to x's shape: stride-0 runs) must equal f of the same values contiguous; returns
    (the values, f's result)."""
    if layout in ("rows", "columns"):
        part = x[:1, :] if layout == "rows" else x[:, :1]
        shape, nd = ints(x.shape)
        src = nv.own(lib.nv_broadcast_to(nv.array(part), shape, nd))
        x = np.broadcast_to(part, x.shape)
    else:
        src = nv.view(x, layout)
    got = nv.read(nv.own(f(src)))
    want = nv.read(nv.own(f(nv.array(x))))
    np.testing.assert_array_equal(got, want)
    return x, got


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_layouts_match_contiguous(nv, rng, name, layout):
    """Non-contiguous inputs (the element-by-element path) against the contiguous (blocked)
    one; "rows"/"columns": a row or a column broadcast to 37 x 21 (stride-0 runs)."""
    lo, hi = DENSE[name]
    x = rng.uniform(lo, hi, (37, 21)).astype(np.float32)
    x.ravel()[:len(EDGE)] = EDGE
    x, got = layout_matches_contiguous(nv, getattr(lib, "nv_" + name), x, layout)
    with np.errstate(all="ignore"):
        assert ulp_error(got.ravel(), REF[name](x.astype(np.float64)).ravel()).max() <= BOUND[name]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_within_one_ulp(nv, name, dt):
    """Through float32: within one ulp of the half format (a float32 result within 2 ulp may
    round the other way once)."""
    with np.errstate(over="ignore"):
        x = np.concatenate([sweep(name)[::16], EDGE]).astype(np_dtype(dt))
    got = nv.read(nv.own(getattr(lib, "nv_" + name)(nv.array(x)))).astype(np.float64)
    with np.errstate(all="ignore"):
        want = REF[name](x.astype(np.float64))
        want_h = want.astype(np_dtype(dt)).astype(np.float64)
    assert np.array_equal(np.isnan(got), np.isnan(want_h))
    ok = ~np.isnan(want_h)
    fin = ok & np.isfinite(want_h)
    assert np.array_equal(got[ok & ~fin], want_h[ok & ~fin])
    step = np.abs(np.nextafter(want_h[fin].astype(np_dtype(dt)),
                               np.array(np.inf, np_dtype(dt))).astype(np.float64) - want_h[fin])
    step = np.maximum(step, float(ml_dtypes.finfo(np_dtype(dt)).smallest_subnormal))
    assert (np.abs(got[fin] - want_h[fin]) <= step * 1.0001).all()
