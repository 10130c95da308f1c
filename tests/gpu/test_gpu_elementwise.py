"""The element-wise family on the GPU against the CPU kernels (bit for bit where the formula is
the CPU's, within a few ulp for libm functions) and against NumPy: every unary, binary and
ternary element-wise primitive over every dtype its CPU kernel takes, on contiguous, broadcast,
scalar, strided, negative-stride, transposed, misaligned and empty operands, sizes that cross
the 16-byte vector tails (1, 3, 17, 1023, 4097, 2^20 + 3), edge values (NaN, +-inf, +-0,
integer extremes, zero divisors, shift amounts past the width), more folded dims than the
kernels take, and outputs written in place over a donated input.

Runs where a GPU is available (skipped otherwise); the CPU side of each comparison is built on
the CPU's default stream, the GPU side on gpu:0's. With NUVEC_TEST_FULL=1 every case runs,
else a seeded sample (the seed is printed; NUVEC_TEST_SEED repeats a run)."""
import contextlib
import ctypes as C
import itertools
import os
import random
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import SEED, sample  # noqa: E402
from nvc import (CODE, DTYPES, FLOATS, INTS, NuvecError, Session, assert_close, ints, lib,  # noqa: E402
                 np_dtype, ref64, sig)

P = C.c_void_p
I = C.c_int
D = C.c_double
B = C.c_bool


from nvc import Device  # noqa: E402  (one ctypes class for every module)


from nvc import Stream  # noqa: E402


sig("nv_cpu", Device)
sig("nv_gpu", Device, I)
sig("nv_device_is_available", B, Device)
sig("nv_default_stream", Stream, Device)
sig("nv_stream_enter", I, Stream)
sig("nv_stream_exit", None)

GPU = lib.nv_gpu(0)
CPU = lib.nv_cpu()
if not lib.nv_device_is_available(GPU):
    pytest.skip("no GPU: the GPU element-wise tests are skipped", allow_module_level=True)

FALLBACKS = getattr(lib, "nv_gpu_fallback_count", None)
if FALLBACKS is not None:
    FALLBACKS.restype = C.c_uint64
    FALLBACKS.argtypes = []

print(f"test_gpu_elementwise seed: NUVEC_TEST_SEED={SEED}", file=sys.stderr)




@pytest.fixture
def rng(request):
    h = sum(map(ord, request.node.nodeid)) * 2654435761 % (2**31)
    seed = (SEED + h) % (2**31)
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


@pytest.fixture
def nv():
    with Session() as s:
        yield s


@pytest.fixture(autouse=True)
def checks():
    """Sentinel guards of freed buffers stay intact (an out-of-bounds write fails the test), and
    no element-wise op falls back to the CPU kernel."""
    g0 = lib.nv_get_guard_violations()
    f0 = FALLBACKS() if FALLBACKS else 0
    yield
    assert lib.nv_get_guard_violations() == g0, "damaged buffer guards: an out-of-bounds write"
    if FALLBACKS:
        assert FALLBACKS() == f0, f"{FALLBACKS() - f0} op(s) fell back to the CPU"


@contextlib.contextmanager
def on(device):
    assert lib.nv_stream_enter(lib.nv_default_stream(device)) == 0
    try:
        yield
    finally:
        lib.nv_stream_exit()


# ---- The ops ----

UNARY = ["negative", "abs", "exp", "log", "sqrt", "sign", "logical_not", "reciprocal", "floor",
         "ceil", "trunc", "square", "rsqrt", "expm1", "log2", "log10", "log1p", "sin", "cos",
         "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh",
         "arctanh", "degrees", "radians", "sigmoid", "erf", "erfinv", "isnan", "isinf",
         "isfinite", "isposinf", "isneginf", "conjugate", "bitwise_invert", "real", "imag",
         "stop_gradient"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "floor_divide",
          "remainder", "power", "arctan2", "logaddexp", "equal", "not_equal", "greater",
          "greater_equal", "less", "less_equal", "logical_and", "logical_or", "logical_xor",
          "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]
for _n in UNARY:
    sig("nv_" + _n, P, P)
for _n in BINARY:
    sig("nv_" + _n, P, P, P)
sig("nv_round", P, P, I)
sig("nv_nan_to_num", P, P, D, C.POINTER(D), C.POINTER(D))
sig("nv_where", P, P, P, P)
sig("nv_isclose", P, P, P, D, D, B)
sig("nv_allclose", P, P, P, D, D, B)
sig("nv_array_equal", P, P, P, B)
sig("nv_divmod", I, P, P, P)
sig("nv_tri", P, I, I, I, I)
for _n in ["hanning", "hamming", "bartlett", "blackman"]:
    sig("nv_" + _n, P, I)
sig("nv_view", P, P, I)
sig("nv_number_of_elements", P, P, C.POINTER(C.c_int), I, B, I)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_size", C.c_size_t, P)
sig("nv_vec_get", P, P, C.c_size_t)
sig("nv_reshape", P, P, C.POINTER(C.c_int), I)

ALL = ["bool"] + INTS + FLOATS + ["complex64"]
SIGNED = ["int8", "int16", "int32", "int64"]

# Ops whose results may differ from the CPU's by a few ulp (libm functions): ulps allowed in
# the output dtype. Every other op must match the CPU bit for bit (NaN payloads aside).
INEXACT = {"exp", "log", "expm1", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin",
           "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
           "sigmoid", "erf", "erfinv", "arctan2", "logaddexp", "power", "hanning", "hamming",
           "bartlett", "blackman"}
COMPLEX_INEXACT = {"sqrt", "reciprocal", "rsqrt", "sign"}


def ulps_allowed(name, dt):
    if name in INEXACT or (dt == "complex64" and name in COMPLEX_INEXACT):
        return 1 if dt in ("float16", "bfloat16") else 8
    return 0


def call(nv, name, *args):
    return nv.own(getattr(lib, "nv_" + name)(*args))


def build(nv, name, handles):
    """The op `name` over nuvec handles (with the fixed constants of the parametrized ones)."""
    if name == "round2":
        return call(nv, "round", handles[0], 2)
    if name == "round-1":
        return call(nv, "round", handles[0], -1)
    if name == "nan_to_num":
        pos, neg = C.c_double(7.0), C.c_double(-9.0)
        return call(nv, "nan_to_num", handles[0], 5.0, C.byref(pos), C.byref(neg))
    if name == "isclose":
        return call(nv, "isclose", handles[0], handles[1], 1e-3, 1e-5, True)
    if name == "allclose":
        return call(nv, "allclose", handles[0], handles[1], 1e-3, 1e-5, False)
    if name == "array_equal":
        return call(nv, "array_equal", handles[0], handles[1], True)
    return call(nv, name, *handles)


# ---- Inputs ----

def edges(dt):
    """Edge values of a dtype."""
    if dt == "bool":
        return np.array([True, False])
    if dt in INTS:
        info = np.iinfo(np_dtype(dt))
        vals = [0, 1, 2, 7, info.max, info.min, info.max - 1]
        if info.min < 0:
            vals += [-1, -2, -7, info.min + 1]
        return np.array(vals, dtype=np_dtype(dt))
    f = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 1e-30, -3e38, 1e4,
         -88.0, 89.0, 6e-8, 1e-45]
    if dt == "complex64":
        re = np.array(f, dtype=np.float32)
        z = np.empty(len(f), np.complex64)
        z.real, z.imag = re, np.roll(re, 5)
        return z
    with np.errstate(all="ignore"):
        return np.array(f).astype(np_dtype(dt))


def rand(rng, shape, dt, kind="any"):
    n = int(np.prod(shape)) if shape else 1
    if dt == "bool":
        v = rng.integers(0, 2, n).astype(bool)
    elif dt in INTS:
        info = np.iinfo(np_dtype(dt))
        if kind == "shift":
            lo = -3 if info.min < 0 else 0
            v = rng.integers(lo, 8 * np.dtype(np_dtype(dt)).itemsize + 5, n)
        elif kind == "expo":
            v = rng.integers(0 if info.min == 0 else -2, 12, n)
        else:
            v = np.where(rng.integers(0, 2, n) == 1, rng.integers(max(info.min, -100), min(info.max, 100), n),
                         rng.integers(info.min, info.max, n, endpoint=True, dtype=np.int64 if info.min < 0 else np.uint64))
        v = v.astype(np_dtype(dt))
    elif dt == "complex64":
        v = (rng.uniform(-4, 4, n) + 1j * rng.uniform(-4, 4, n)).astype(np.complex64)
    else:
        lo, hi = (-1, 1) if kind == "unit" else (-6, 6)
        v = rng.uniform(lo, hi, n).astype(np_dtype(dt))
    if kind == "any" and n > 4:
        e = edges(dt)
        k = min(len(e), n // 2)
        v[rng.choice(n, k, replace=False)] = e[:k]
    return v.reshape(shape)


def domain(name):
    return {"arcsin": "unit", "arccos": "unit", "arctanh": "unit", "erfinv": "unit",
            "left_shift": "shift", "right_shift": "shift", "power": "expo"}.get(name, "any")


LAYOUTS = ["contiguous", "transposed", "strided", "reversed", "misaligned"]


def laid_out(nv, x, layout):
    """A nuvec array holding x's values in `layout` (views built on the current stream)."""
    if layout == "misaligned" and x.ndim >= 1 and x.size:
        big = np.concatenate([x.reshape(-1)[:1], x.reshape(-1)]) if x.size else x.reshape(-1)
        base = nv.array(big)
        start, n = ints([1])
        stop, _ = ints([x.size + 1])
        flat = nv.own(lib.nv_slice(base, start, stop, None, n))
        shape, nd = ints(x.shape)
        return nv.own(lib.nv_reshape(flat, shape, nd))
    if layout == "transposed" and x.ndim < 2:
        layout = "contiguous"
    if layout == "misaligned":
        layout = "contiguous"
    return nv.view(x, layout)


# ---- Comparisons ----

def _ordered(a):
    """Float bits as integers ordered like the values."""
    w = a.dtype.itemsize
    it = {2: np.int16, 4: np.int32, 8: np.int64}[w]
    b = np.ascontiguousarray(a).view(it).astype(np.int64)
    return np.where(b < 0, -(b & np.int64((1 << (8 * w - 1)) - 1)), b)


def same(got, want, dt, ulps=0, what="", scale=False):
    """got == want bit for bit (any NaN equals any NaN), or within `ulps` for floats."""
    if isinstance(got, Same):
        return
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind in "biu":
        bad = got != want
        assert not bad.any(), f"{what}: {bad.sum()} differ, first at {np.argwhere(bad)[0]}: {got[bad][:4]} vs {want[bad][:4]}"
        return
    if got.dtype.kind == "c":
        same(got.real.copy(), want.real.copy(), "float32", ulps, what + " (real)", scale)
        same(got.imag.copy(), want.imag.copy(), "float32", ulps, what + " (imag)", scale)
        return
    g = got.astype(np.float64) if got.dtype.itemsize == 2 else got
    w = want.astype(np.float64) if want.dtype.itemsize == 2 else want
    ng, nw = np.isnan(g), np.isnan(w)
    assert (ng == nw).all(), f"{what}: NaN at different places ({np.argwhere(ng != nw)[:4].tolist()})"
    ok = ~ng
    if ulps:
        # An overflowed libm result's sign can follow from the last bit of a huge angle
        # (complex power): infinities of either sign match.
        ok &= ~(np.isinf(g) & np.isinf(w))
    if scale:
        # Cancellation (logaddexp near 0): errors relative to the inputs' scale.
        eps = float(np.finfo(np.float64 if got.dtype.itemsize == 8 else np.float32).eps)
        if got.dtype.itemsize == 2:
            eps = 2.0 ** -7
        with np.errstate(all="ignore"):
            ok &= ~(np.abs(g.astype(np.float64) - w.astype(np.float64)) <=
                    4 * eps * np.maximum(1.0, np.abs(w.astype(np.float64))))
    d = np.abs(_ordered(got)[ok] - _ordered(want)[ok])
    if d.size and d.max() > ulps:
        i = np.argmax(d)
        raise AssertionError(f"{what}: {int((d > ulps).sum())} differ by more than {ulps} ulp; worst "
                             f"{int(d[i])} ulp: {got[ok][i]!r} vs {want[ok][i]!r}")


class Same:
    """Matches anything: both devices failed alike (an op the builder rejects for a dtype)."""


def gpu_and_cpu(nv, name, arrays, layouts=None):
    """Runs op `name` over NumPy inputs on the GPU and on the CPU (same layouts); returns both
    results, or two `Same` when both devices fail with the same status and message."""
    layouts = layouts or ["contiguous"] * len(arrays)
    out = []
    for dev in (GPU, CPU):
        with on(dev):
            hs = [laid_out(nv, a, lay) for a, lay in zip(arrays, layouts)]
            try:
                out.append(nv.read(build(nv, name, hs)))
            except NuvecError as e:
                out.append(e)
    g, c = out
    if isinstance(g, NuvecError) or isinstance(c, NuvecError):
        assert isinstance(g, NuvecError) and isinstance(c, NuvecError), \
            f"{name}: only one device failed: gpu {g if isinstance(g, NuvecError) else 'ok'}, " \
            f"cpu {c if isinstance(c, NuvecError) else 'ok'}"
        assert (g.status, g.message) == (c.status, c.message), f"{name}: {g} vs {c}"
        return Same(), Same()
    return out


def supported(name, dt):
    """Whether the builder gives op `name` a kernel for inputs of dtype `dt` (some return an
    input unchanged or cast first; those still run on the GPU and must match)."""
    if name in ("floor", "ceil", "trunc") and dt == "complex64":
        return False
    if name in ("sigmoid", "erf", "erfinv", "arctan2", "logaddexp", "floor_divide", "remainder") \
            and dt == "complex64":
        return False
    if name in ("bitwise_invert", "bitwise_and", "bitwise_or", "bitwise_xor") and dt in FLOATS + ["complex64"]:
        return False
    if name in ("left_shift", "right_shift") and dt in FLOATS + ["complex64"]:
        return False
    return True


UNARY_ALL = UNARY + ["round2", "round-1", "nan_to_num"]
SIZES = [1, 3, 17, 1023, 4097, (1 << 20) + 3]


# ---- GPU against the CPU kernels ----

@pytest.mark.parametrize("name,dt,layout", sample(
    [(n, d, l) for n, d, l in itertools.product(UNARY_ALL, ALL, LAYOUTS) if supported(n, d)],
    400, salt=1))
def test_unary_matches_cpu(nv, rng, name, dt, layout):
    x = rand(rng, (6, 37), dt, domain(name))
    g, c = gpu_and_cpu(nv, name, [x], [layout])
    same(g, c, dt, ulps_allowed(name, dt), f"{name} {dt} {layout}")


@pytest.mark.parametrize("name,dt", sample(
    [(n, d) for n, d in itertools.product(UNARY_ALL, ALL) if supported(n, d)], 120, salt=2))
def test_unary_edge_values_match_cpu(nv, name, dt):
    x = edges(dt)
    g, c = gpu_and_cpu(nv, name, [x])
    same(g, c, dt, ulps_allowed(name, dt), f"{name} {dt} edges")


BINARY_ALL = BINARY + ["isclose"]


@pytest.mark.parametrize("name,dt,layout", sample(
    [(n, d, l) for n, d, l in itertools.product(BINARY_ALL, ALL, LAYOUTS) if supported(n, d)],
    400, salt=3))
def test_binary_matches_cpu(nv, rng, name, dt, layout):
    a, b = rand(rng, (5, 41), dt), rand(rng, (5, 41), dt, domain(name))
    g, c = gpu_and_cpu(nv, name, [a, b], [layout, "contiguous"])
    same(g, c, dt, ulps_allowed(name, dt), f"{name} {dt} {layout}", name == "logaddexp")


@pytest.mark.parametrize("name,dt,shapes", sample(
    [(n, d, s) for n, d, s in itertools.product(
        BINARY_ALL, ALL, [((5, 1), (1, 7)), ((6, 7), (7,)), ((7,), (6, 7)), ((), (33,)),
                          ((33,), ()), ((), ()), ((3, 1, 4), (2, 1)), ((0, 3), (3,)),
                          ((9, 64), (64,)), ((64, 1), (1, 64)), ((64,), (5, 64)), ((17, 32), (17, 1))])
     if supported(n, d)], 300, salt=4))
def test_binary_broadcast_matches_cpu(nv, rng, name, dt, shapes):
    a, b = rand(rng, shapes[0], dt), rand(rng, shapes[1], dt, domain(name))
    g, c = gpu_and_cpu(nv, name, [a, b])
    same(g, c, dt, ulps_allowed(name, dt), f"{name} {dt} {shapes}", name == "logaddexp")


@pytest.mark.parametrize("name,dt", sample(
    [(n, d) for n, d in itertools.product(BINARY_ALL, ALL) if supported(n, d)], 150, salt=5))
def test_binary_edge_values_match_cpu(nv, name, dt):
    e = edges(dt)
    a, b = np.repeat(e, len(e)), np.tile(e, len(e))  # every pair of edge values
    if name in ("left_shift", "right_shift"):
        w = 8 * np.dtype(np_dtype(dt)).itemsize
        amounts = np.array([0, 1, w - 1, w, w + 1, 2 * w, 200] + ([-1, -w] if dt in SIGNED else []))
        a, b = np.repeat(e, len(amounts)), np.tile(amounts, len(e)).astype(np_dtype(dt))
    g, c = gpu_and_cpu(nv, name, [a, b])
    same(g, c, dt, ulps_allowed(name, dt), f"{name} {dt} edge pairs", name == "logaddexp")


@pytest.mark.parametrize("name,dt,n,layout", sample(
    [(n, d, s, l) for n, d, s, l in itertools.product(
        ["add", "multiply", "maximum", "greater", "exp", "negative", "where", "sqrt", "floor_divide"],
        ["float32", "bfloat16", "float16", "float64", "uint8", "int64", "complex64", "bool"],
        SIZES, ["contiguous", "misaligned", "reversed", "scalar"])
     if supported(n, d) and not (n in ("exp", "sqrt") and d in INTS + ["bool"])
     and not (n == "floor_divide" and d == "complex64")], 120, salt=6))
def test_vector_tails_match_cpu(nv, rng, name, dt, n, layout):
    """Sizes around the 16-byte vectors and the tiles, aligned or not."""
    x = rand(rng, (n,), dt)
    if name in ("exp", "negative", "sqrt"):
        g, c = gpu_and_cpu(nv, name, [x], [layout if layout != "scalar" else "contiguous"])
    elif name == "where":
        cond = rng.integers(0, 2, n).astype(bool)
        y = rand(rng, () if layout == "scalar" else (n,), dt)
        g, c = gpu_and_cpu(nv, name, [cond, x, y],
                           ["contiguous", layout if layout != "scalar" else "contiguous", "contiguous"])
    else:
        y = rand(rng, () if layout == "scalar" else (n,), dt)
        g, c = gpu_and_cpu(nv, name, [x, y], [layout if layout != "scalar" else "contiguous", "contiguous"])
    same(g, c, dt, ulps_allowed(name, dt), f"{name} {dt} n={n} {layout}")


@pytest.mark.parametrize("dt,layout", sample(itertools.product(ALL, LAYOUTS), 40, salt=7))
def test_where_matches_cpu(nv, rng, dt, layout):
    cond = rng.integers(0, 2, (7, 9)).astype(bool)
    x, y = rand(rng, (7, 9), dt), rand(rng, (9,), dt)
    g, c = gpu_and_cpu(nv, "where", [cond, x, y], [layout, layout, "contiguous"])
    same(g, c, dt, 0, f"where {dt} {layout}")


@pytest.mark.parametrize("dt", ["float32", "int16", "bfloat16", "complex64", "bool"])
def test_more_folded_dims_than_the_kernels_take(nv, rng, dt):
    """10 alternating broadcast dims fold to 10: the inputs are copied first."""
    sa = tuple(2 if i % 2 == 0 else 1 for i in range(10))
    sb = tuple(1 if i % 2 == 0 else 2 for i in range(10))
    a, b = rand(rng, sa, dt), rand(rng, sb, dt)
    for name in ("add", "equal", "maximum"):
        g, c = gpu_and_cpu(nv, name, [a, b])
        same(g, c, dt, 0, f"{name} {dt} 10-d")
    cond = rand(rng, sb, "bool")
    g, c = gpu_and_cpu(nv, "where", [cond, a, b])
    same(g, c, dt, 0, f"where {dt} 10-d")


# ---- GPU against NumPy ----

NP_UNARY = {"negative": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
            "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "square": np.square,
            "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "log1p": np.log1p, "expm1": np.expm1,
            "arctan": np.arctan, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
            "logical_not": np.logical_not, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
            "reciprocal": np.reciprocal, "rsqrt": lambda x: 1 / np.sqrt(x)}


@pytest.mark.parametrize("name,dt,shape,layout", sample(itertools.product(
    NP_UNARY, ["float32", "float16", "bfloat16", "float64"], [(), (0,), (1,), (17,), (4097,), (3, 5, 7)],
    LAYOUTS), 150, salt=8))
def test_unary_matches_numpy(nv, rng, name, dt, shape, layout):
    x = rand(rng, shape, dt, "unit" if name in ("log1p",) else "plain")
    if name in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + np_dtype(dt).type(0.01) if x.size else x
    with on(GPU):
        got = nv.read(call(nv, name, laid_out(nv, x, layout)))
    with np.errstate(all="ignore"):
        want = NP_UNARY[name](ref64(x))
    if got.dtype == bool:
        np.testing.assert_array_equal(got, want)
    else:
        tol = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}[dt]
        assert_close(got, want, dt, rtol=tol, atol=tol)


NP_BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
             "divide": np.divide, "maximum": np.maximum, "minimum": np.minimum,
             "equal": np.equal, "greater": np.greater, "less_equal": np.less_equal,
             "logical_and": np.logical_and, "bitwise_xor": np.bitwise_xor}


@pytest.mark.parametrize("name,dt,shapes", sample(itertools.product(
    NP_BINARY, ALL, [((4097,), (4097,)), ((6, 7), (7,)), ((5, 1), (1, 3)), ((), (9,)),
                     ((0, 2), (2,))]), 150, salt=9))
def test_binary_matches_numpy(nv, rng, name, dt, shapes):
    if name == "bitwise_xor" and dt in FLOATS + ["complex64"]:
        return
    if name == "divide" and dt in INTS + ["bool"]:
        return  # promotes to float32: covered by the CPU comparison
    if name == "subtract" and dt == "bool":
        return  # MLX's bool subtract is built from other ops
    a, b = rand(rng, shapes[0], dt, "plain"), rand(rng, shapes[1], dt, "plain")
    with on(GPU):
        got = nv.read(call(nv, name, nv.array(a), nv.array(b)))
    with np.errstate(all="ignore"):
        if dt in INTS or dt == "bool":
            want = NP_BINARY[name](a, b)
            if dt == "bool" and name in ("add", "multiply", "maximum", "minimum"):
                want = want.astype(bool)
        else:
            want = NP_BINARY[name](ref64(a), ref64(b))
    if got.dtype == bool or dt in INTS:
        np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype))
    else:
        assert_close(got, want, dt)


@pytest.mark.parametrize("dt", SIGNED + ["uint8", "uint32", "uint64"])
def test_integer_rules(nv, dt):
    """Division by zero (0 and x), INT_MIN / -1, shifts past the width, negative powers."""
    info = np.iinfo(np_dtype(dt))
    a = np.array([7, info.min, info.max, 0, 5, info.min, 3, 2], dtype=np_dtype(dt))
    b = np.array([0, 0, 0, 0, 2, 1, 3, 2], dtype=np_dtype(dt))
    if info.min < 0:
        b[5] = -1
    with on(GPU):
        q = nv.read(call(nv, "floor_divide", nv.array(a), nv.array(b)))
        r = nv.read(call(nv, "remainder", nv.array(a), nv.array(b)))
    with np.errstate(all="ignore"):
        wq = np.where(b == 0, 0, np.floor_divide(a, np.where(b == 0, 1, b))).astype(a.dtype)
        wr = np.where(b == 0, a, np.remainder(a, np.where(b == 0, 1, b))).astype(a.dtype)
    if info.min < 0:
        wq[5], wr[5] = info.min, 0  # wraps, as the CPU
    np.testing.assert_array_equal(q, wq)
    np.testing.assert_array_equal(r, wr)
    w = 8 * np.dtype(np_dtype(dt)).itemsize
    x = np.array([1, 5, info.max, info.min] * 4, dtype=np_dtype(dt))
    s = np.repeat(np.array([0, w - 1, w, w + 3], dtype=np_dtype(dt)), 4)
    with on(GPU):
        left = nv.read(call(nv, "left_shift", nv.array(x), nv.array(s)))
        right = nv.read(call(nv, "right_shift", nv.array(x), nv.array(s)))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(left, np.left_shift(x, s))
        np.testing.assert_array_equal(right, np.right_shift(x, s))
    e = np.array([0, 1, 2, 3, 9, 63], dtype=np_dtype(dt))
    base = np.array([3, -2 if info.min < 0 else 2, 2, 0, 1, 3], dtype=np_dtype(dt))
    with on(GPU):
        p = nv.read(call(nv, "power", nv.array(base), nv.array(e)))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(p, np.power(base, e))
    if info.min < 0:
        with on(GPU):
            neg = nv.read(call(nv, "power", nv.array(base), nv.array(np.full(6, -1, np_dtype(dt)))))
        np.testing.assert_array_equal(neg, np.zeros(6, np_dtype(dt)))


def test_float_edges_against_numpy(nv):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 2.5, -2.5, 1e-45, 3e38], dtype=np.float32)
    with on(GPU):
        sgn = nv.read(call(nv, "sign", nv.array(x)))
        rnd = nv.read(call(nv, "round", nv.array(x), 0))
        mx = nv.read(call(nv, "maximum", nv.array(x), nv.array(np.float32(1.0))))
        mn = nv.read(call(nv, "minimum", nv.array(np.float32(1.0)), nv.array(x)))
    np.testing.assert_array_equal(sgn, np.sign(x))
    np.testing.assert_array_equal(rnd, np.round(x))
    np.testing.assert_array_equal(mx, np.maximum(x, 1.0))
    np.testing.assert_array_equal(mn, np.minimum(1.0, x))
    assert np.signbit(nv.read(call(nv, "negative", nv.array(np.float32(0.0)))))
    a = np.array([7, -7, 1, 0, -1, 5.5, np.inf, -5.5, -0.0, 3, 5.5, np.nan], dtype=np.float64)
    b = np.array([2, 2, 0, 0, 0, np.inf, 2, np.inf, 2, -3, -np.inf, 1], dtype=np.float64)
    with on(GPU):
        q = nv.read(call(nv, "floor_divide", nv.array(a), nv.array(b)))
        r = nv.read(call(nv, "remainder", nv.array(a), nv.array(b)))
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(q, np.floor_divide(a, b))
        np.testing.assert_array_equal(r, np.remainder(a, b))
        np.testing.assert_array_equal(np.signbit(r), np.signbit(np.remainder(a, b)))


def test_half_rounding_is_once_to_nearest_even(nv):
    """float16/bfloat16 compute in float32 and round once: a + b for halves whose float32 sum
    lies exactly between two half values rounds to the even one."""
    a = np.array([1.0, 1.0, 2048.0, 2048.0], np.float16)
    b = np.array([2.0 ** -11, 3 * 2.0 ** -11, 1.0, 3.0], np.float16)
    with on(GPU):
        got = nv.read(call(nv, "add", nv.array(a), nv.array(b)))
    np.testing.assert_array_equal(got, (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16))
    from nvc import BF16
    if BF16 is not None:
        x = np.array([1.0, 1.0], BF16)
        y = np.array([2.0 ** -8, 3 * 2.0 ** -8], BF16)
        with on(GPU):
            got = nv.read(call(nv, "add", nv.array(x), nv.array(y)))
        np.testing.assert_array_equal(got.astype(np.float32),
                                      (x.astype(np.float32) + y.astype(np.float32)).astype(BF16).astype(np.float32))


def test_complex_ops_against_numpy(nv, rng):
    z = (rng.uniform(-3, 3, 64) + 1j * rng.uniform(-3, 3, 64)).astype(np.complex64)
    w = (rng.uniform(0.5, 3, 64) + 1j * rng.uniform(-3, 3, 64)).astype(np.complex64)
    for name, f in [("multiply", np.multiply), ("divide", np.divide), ("add", np.add),
                    ("subtract", np.subtract), ("power", np.power)]:
        with on(GPU):
            got = nv.read(call(nv, name, nv.array(z), nv.array(w)))
        np.testing.assert_allclose(got, f(z.astype(np.complex128), w.astype(np.complex128)),
                                   rtol=1e-5, atol=1e-6, err_msg=name)
    for name, f in [("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("sin", np.sin),
                    ("tanh", np.tanh), ("arcsinh", np.arcsinh), ("square", np.square)]:
        with on(GPU):
            got = nv.read(call(nv, name, nv.array(z)))
        np.testing.assert_allclose(got, f(z.astype(np.complex128)), rtol=1e-5, atol=1e-5, err_msg=name)
    with on(GPU):
        a = nv.read(call(nv, "abs", nv.array(z)))
    assert a.dtype == np.float32
    np.testing.assert_allclose(a, np.abs(z.astype(np.complex128)), rtol=1e-6)


@pytest.mark.parametrize("dt", ALL)
def test_closeness(nv, rng, dt):
    a = rand(rng, (33, 5), dt)
    b = a.copy()
    if dt in FLOATS + ["complex64"]:
        with np.errstate(all="ignore"):
            b = (ref64(a) * (1 + rng.uniform(-2e-5, 2e-5, a.shape))).astype(a.dtype)
    g, c = gpu_and_cpu(nv, "isclose", [a, b], ["transposed", "contiguous"])
    same(g, c, "bool", 0, f"isclose {dt}")
    for name in ("allclose", "array_equal"):
        for pair in ([a, b], [a, a.copy()], [a, a[:1]]):
            if name == "array_equal" and pair[1].shape != a.shape:
                continue
            g, c = gpu_and_cpu(nv, name, pair, ["strided", "contiguous"])
            assert isinstance(g, Same) or (g.shape == () and bool(g) == bool(c)), f"{name} {dt}"
    big = np.ones(300001, np_dtype(dt))
    big[-1] = 0
    with on(GPU):
        assert not bool(nv.read(call(nv, "allclose", nv.array(big), nv.array(np.ones(1, np_dtype(dt))), 0.0, 0.0, False)))
        assert bool(nv.read(call(nv, "allclose", nv.array(big[:-1]), nv.array(np.ones(1, np_dtype(dt))), 0.0, 0.0, False)))
        assert bool(nv.read(call(nv, "allclose", nv.array(big[:0]), nv.array(np.ones(1, np_dtype(dt))), 0.0, 0.0, False)))


@pytest.mark.parametrize("dt", ALL)
def test_divmod(nv, rng, dt):
    if dt == "complex64":
        return
    a, b = rand(rng, (3, 1031), dt), rand(rng, (1031,), dt)
    outs = []
    for dev in (GPU, CPU):
        with on(dev):
            v = nv.own(lib.nv_vec_new())
            nv.arrays.remove(v)
            assert lib.nv_divmod(nv.array(a), nv.array(b), v) == 0
            outs.append([nv.read(lib.nv_vec_get(v, i)) for i in range(2)])
            lib.nv_vec_free(v)
    for i in range(2):
        same(outs[0][i], outs[1][i], dt, 0, f"divmod[{i}] {dt}")


def test_creation(nv):
    for dt in ALL:
        for n, m, k in [(3, 4, 1), (3, -1, 0), (0, -1, 0), (2, 2, -5), (4, 2, -1), (5, 5, 10), (257, 1031, 3)]:
            with on(GPU):
                got = nv.read(call(nv, "tri", n, m, k, CODE[dt]))
            np.testing.assert_array_equal(got, np.tri(n, None if m < 0 else m, k, dtype=np_dtype(dt)))
    for name in ("hanning", "hamming", "bartlett", "blackman"):
        for m in (0, 1, 2, 5, 12, 101, 4097):
            with on(GPU):
                got = nv.read(call(nv, name, m))
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, getattr(np, name)(m).astype(np.float32), rtol=0, atol=1e-7)
    x = np.ones((2, 3, 4), np.float32)
    for axes, inverted, dt, want in [([0], False, "int32", 2), ([0, 2], False, "float16", 8),
                                     ([2], True, "float32", 6), ([], True, "int64", 24),
                                     ([1], False, "bool", True), ([0, 1, 2], False, "complex64", 24)]:
        with on(GPU):
            a, n = ints(axes)
            got = nv.read(call(nv, "number_of_elements", nv.array(x), a, n, inverted, CODE[dt]))
        assert got.shape == () and got == want


def test_views(nv, rng):
    z = rand(rng, (3, 4), "complex64")
    with on(GPU):
        base = nv.view(z, "transposed")
        np.testing.assert_array_equal(nv.read(call(nv, "real", base)), z.real)
        np.testing.assert_array_equal(nv.read(call(nv, "imag", base)), z.imag)
        x = rand(rng, (3, 4), "float32")
        np.testing.assert_array_equal(nv.read(call(nv, "stop_gradient", nv.view(x, "transposed"))), x)
        for dt in ALL:
            got = nv.read(call(nv, "view", nv.array(x), CODE[dt]))
            want = x.view(np_dtype(dt)) if dt != "bool" else x.view(np.uint8).astype(bool)
            if dt == "bool":
                continue
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
        u = np.arange(10, dtype=np.uint8)
        b = nv.array(u)
        start, n = ints([1])
        stop, _ = ints([9])
        sl = nv.own(lib.nv_slice(b, start, stop, None, n))
        np.testing.assert_array_equal(nv.read(call(nv, "view", sl, CODE["int16"])), u[1:9].copy().view(np.int16))


# ---- In place: outputs over a donated input ----

@pytest.mark.parametrize("dt,n", sample(itertools.product(["float32", "bfloat16", "float16"],
                                                          [1, 17, 4097, (1 << 20) + 3]), 12, salt=10))
def test_donated_chains(nv, rng, dt, n):
    """Chains whose intermediates have no other reference, so each op may write over its input:
    the results match NumPy's and the caller's inputs are untouched."""
    a, b, c = rand(rng, (n,), dt, "plain"), rand(rng, (n,), dt, "plain"), rand(rng, (n,), dt, "plain")
    cond = rng.integers(0, 2, n).astype(bool)
    with on(GPU):
        na, nb, nc, ncond = nv.array(a), nv.array(b), nv.array(c), nv.array(cond)
        t = lib.nv_multiply(na, nb)             # a * b
        u = lib.nv_add(t, nc)                   # + c (may write over t)
        lib.nv_release(t)
        v = lib.nv_tanh(u)                      # may write over u
        lib.nv_release(u)
        w = lib.nv_where(ncond, v, nc)          # may write over v
        lib.nv_release(v)
        x = lib.nv_exp(w)                       # may write over w
        lib.nv_release(w)
        got = nv.read(nv.own(x))
    f = lambda q: ref64(q)  # noqa: E731
    ab = (f(a) * f(b)).astype(np_dtype(dt))
    abc = (f(ab) + f(c)).astype(np_dtype(dt))
    th = np.tanh(f(abc)).astype(np_dtype(dt))
    wh = np.where(cond, th, c)
    want = np.exp(f(wh))
    tol = {"float32": 2e-5, "bfloat16": 3e-2, "float16": 4e-3}[dt]
    assert_close(got, want, dt, rtol=tol, atol=tol)
    for h, orig in ((na, a), (nb, b), (nc, c)):
        np.testing.assert_array_equal(nv.read(h), orig)


def test_donated_binary_both_sides(nv, rng):
    a, b = rand(rng, (4099,), "float32", "plain"), rand(rng, (4099,), "float32", "plain")
    with on(GPU):
        na, nb = nv.array(a), nv.array(b)
        s = lib.nv_exp(nb)          # exp(b): only the subtract below reads it
        d = lib.nv_subtract(na, s)  # may write over s (input 1)
        lib.nv_release(s)
        got = nv.read(nv.own(d))
    assert_close(got, (ref64(a) - ref64(np.exp(ref64(b)).astype(np.float32))), "float32", rtol=2e-5, atol=2e-5)


# ---- Transposed and broadcast-row operands (the tiled kernel and the rows mode) ----

def viewed(nv, x, perm=None, offset=0, flip=None):
    """A nuvec array with x's values: a row-major copy of x.transpose(argsort(perm)) at element
    `offset` of its buffer (a misaligned start when odd), seen through nv_transpose(perm), then
    with axis `flip` reversed by a negative-step slice (so the view's stride there is negative)."""
    if flip is not None:
        x = np.flip(x, flip)
    perm = list(range(x.ndim)) if perm is None else list(perm)
    stored = np.ascontiguousarray(x.transpose(np.argsort(perm)))
    if offset:
        pad = np.zeros(offset, dtype=x.dtype)
        base = nv.array(np.concatenate([pad, stored.reshape(-1)]))
        start, n = ints([offset])
        stop, _ = ints([offset + stored.size])
        flat = nv.own(lib.nv_slice(base, start, stop, None, n))
        shape, nd = ints(stored.shape)
        base = nv.own(lib.nv_reshape(flat, shape, nd))
    else:
        base = nv.array(stored)
    p, nd = ints(perm)
    v = nv.own(lib.nv_transpose(base, p, nd))
    if flip is None:
        return v
    start, n = ints([-1 if i == flip else 0 for i in range(x.ndim)])
    stop, _ = ints([-(s + 1) if i == flip else s for i, s in enumerate(x.shape)])
    step, _ = ints([-1 if i == flip else 1 for i in range(x.ndim)])
    return nv.own(lib.nv_slice(v, start, stop, step, n))


def both_devices(nv, name, arrays, how):
    """Op `name` over NumPy inputs laid out by `how` (a viewed() keyword dict per input) on the
    GPU and on the CPU."""
    out = []
    for dev in (GPU, CPU):
        with on(dev):
            hs = [viewed(nv, a, **kw) for a, kw in zip(arrays, how)]
            out.append(nv.read(build(nv, name, hs)))
    return out


# (shape, the transposed input's perm, flip): sizes off the 32 x 32 tiles, batch dims before,
# between and after the two tile dims, 2-D to 4-D, a reversed J, and tile dims of exactly 16.
TILE_SHAPES = [((33, 47), (1, 0), None), ((16, 16), (1, 0), None), ((64, 96), (1, 0), None),
               ((3, 40, 70), (0, 2, 1), None), ((40, 3, 50), (2, 1, 0), None),
               ((5, 17, 31), (0, 2, 1), 1), ((2, 3, 20, 36), (0, 1, 3, 2), None),
               ((2, 17, 3, 33), (3, 1, 2, 0), None), ((4, 33, 2, 65), (0, 3, 2, 1), None),
               ((130, 18), (1, 0), 0)]
TILE_OPS = [("add", "float32"), ("subtract", "float32"), ("divide", "float32"),
            ("subtract", "bfloat16"), ("divide", "bfloat16"), ("add", "float16"),
            ("maximum", "float16"), ("subtract", "float64"), ("minimum", "float64"),
            ("subtract", "int32"), ("multiply", "int64"), ("less", "float32"),
            ("greater_equal", "bfloat16"), ("power", "float32"), ("logical_and", "bool"),
            ("arctan2", "float32"), ("floor_divide", "int32")]


@pytest.mark.parametrize("name,dt,case,side", sample(
    [(n, d, c, s) for (n, d), c, s in itertools.product(TILE_OPS, TILE_SHAPES,
                                                         ["b", "a", "both"])], 160, salt=11))
def test_transposed_operand_matches_cpu(nv, rng, name, dt, case, side):
    """a op b^T, a^T op b and a^T op b^T (non-commutative ops too), the GPU's tiled kernel
    (or the strided one where the op has no tiled kernel) bit for bit against the CPU."""
    shape, perm, flip = case
    a, b = rand(rng, shape, dt), rand(rng, shape, dt, domain(name))
    t = {"perm": perm, "flip": flip}
    how = {"a": [t, {}], "b": [{}, t], "both": [t, t]}[side]
    g, c = both_devices(nv, name, [a, b], how)
    same(g, c, dt, ulps_allowed(name, dt), f"{name} {dt} {shape} {perm} flip {flip} {side}")


@pytest.mark.parametrize("dt", ["float32", "float64", "int32"])
def test_transposed_operand_matches_numpy(nv, rng, dt):
    """x - x^T and x^T - y over a batch, at misaligned starts, a broadcast row and a scalar next
    to a transposed input, and an output written over a donated straight input, against NumPy
    (exact for these dtypes)."""
    x, y = rand(rng, (3, 50, 50), dt, "plain"), rand(rng, (3, 50, 50), dt, "plain")
    row, s = rand(rng, (50,), dt, "plain"), rand(rng, (), dt, "plain")
    xt = np.ascontiguousarray(x.transpose(0, 2, 1))
    tr = {"perm": (0, 2, 1)}
    with on(GPU):
        got = nv.read(call(nv, "subtract", viewed(nv, x), viewed(nv, xt, **tr)))
        same(got, x - xt, dt, 0, f"x - x^T {dt}")
        for off_a, off_b in ((1, 0), (0, 3), (1, 1)):
            got = nv.read(call(nv, "subtract", viewed(nv, xt, offset=off_a, **tr),
                               viewed(nv, y, offset=off_b)))
            same(got, xt - y, dt, 0, f"x^T - y offsets {off_a} {off_b} {dt}")
        got = nv.read(call(nv, "multiply", viewed(nv, xt, **tr), nv.array(row)))
        same(got, xt * row, dt, 0, f"x^T * row {dt}")
        got = nv.read(call(nv, "subtract", nv.array(s), viewed(nv, xt, **tr)))
        same(got, s - xt, dt, 0, f"scalar - x^T {dt}")
        # In place: -y has no other reference, so the output may be written over it.
        ny = nv.array(y)
        e = lib.nv_negative(ny)
        d = lib.nv_subtract(viewed(nv, xt, **tr), e)
        lib.nv_release(e)
        got = nv.read(nv.own(d))
        same(got, xt - (-y), dt, 0, f"donated x^T - (-y) {dt}")
        np.testing.assert_array_equal(nv.read(ny), y)


# (x's shape, the row's length): odd rows (no vectors), rows of 4 / 8 (vector widths), a row
# longer than a block's tile, 3-D x folded to rows.
ROW_SHAPES = [((7, 37), 37), ((5, 1023), 1023), ((9, 64), 64), ((33, 8), 8), ((6, 4), 4),
              ((3, 4100), 4100), ((4, 6, 96), 96), ((2, 3, 10), 10)]


@pytest.mark.parametrize("name,dt,case,where", sample(
    [(n, d, c, w) for (n, d), c, w in itertools.product(
        [("add", "float32"), ("subtract", "float32"), ("divide", "bfloat16"), ("add", "float16"),
         ("subtract", "float64"), ("multiply", "int32"), ("maximum", "float32"),
         ("less", "float32"), ("arctan2", "float32")],
        ROW_SHAPES, ["aligned", "row offset", "x offset", "row first"])], 140, salt=12))
def test_broadcast_row_matches_cpu(nv, rng, name, dt, case, where):
    """x op row and row op x (rows mode: vectors of both, the row's column from the element
    index), rows whose length is no multiple of the vector width, and rows or x at a misaligned
    offset (the element loop), bit for bit against the CPU."""
    shape, n = case
    x, row = rand(rng, shape, dt), rand(rng, (n,), dt, domain(name))
    hx = {"offset": 1} if where == "x offset" else {}
    hr = {"offset": 1} if where == "row offset" else {}
    arrays, how = ([row, x], [hr, hx]) if where == "row first" else ([x, row], [hx, hr])
    g, c = both_devices(nv, name, arrays, how)
    same(g, c, dt, ulps_allowed(name, dt), f"{name} {dt} {shape} {where}")


def test_broadcast_row_over_strided_rows(nv, rng):
    """x[:, :64] + row: the contiguous input's row stride (80) is not the row length."""
    big, row = rand(rng, (33, 80), "float32"), rand(rng, (64,), "float32")
    for dev in (GPU, CPU):
        with on(dev):
            start, n = ints([0, 0])
            stop, _ = ints([33, 64])
            hx = nv.own(lib.nv_slice(nv.array(big), start, stop, None, n))
            got = nv.read(call(nv, "subtract", hx, nv.array(row)))
            same(got, big[:, :64] - row, "float32", 0, f"strided rows on {dev}")
