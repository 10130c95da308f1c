"""The fast family's norms and rope (rms_norm, layer_norm, rope) through the C API against
NumPy float64 references: every float dtype, row lengths 1..4097, strided, transposed and
reversed inputs, weight/bias absent, per-batch offsets, freqs instead of base, edge values
(NaN, +-inf rows), empty arrays, and MLX's argument errors."""
import ctypes as C
import math

import numpy as np
import pytest

from conftest import sample
from nvc import FLOATS, INTS, NuvecError, assert_close, lib, np_dtype, ref64, sig

P = C.c_void_p
sig("nv_fast_rms_norm", P, P, P, C.c_double)
sig("nv_fast_layer_norm", P, P, P, P, C.c_double)
sig("nv_fast_rope", P, P, C.c_int, C.c_bool, C.c_double, C.c_double, P, P)

LENGTHS = [1, 7, 64, 80, 96, 128, 256, 4097]
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]
# Tolerances against float64: the kernels accumulate half rows in float32 and round once.
TOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 2e-5, "float64": 1e-12}


def rand(rng, shape, dtype, scale=2.0):
    x = (rng.standard_normal(shape) * scale).astype(np_dtype(dtype))
    if x.size and not np.any(x):
        x.reshape(-1)[0] = 1
    return x


def rms_ref(x, w, eps):
    x = ref64(x)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * ref64(w) if w is not None else y


def layer_ref(x, w, b, eps):
    x = ref64(x)
    mu = x.mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)
    if w is not None:
        y = y * ref64(w)
    if b is not None:
        y = y + ref64(b)
    return y


def rope_ref(x, dims, trad, base, scale, offset, freqs=None, inverse=False):
    x = ref64(x)
    half = dims // 2
    if freqs is None:
        inv = base ** (-np.arange(half) * 2.0 / dims)
    else:
        inv = 1.0 / ref64(freqs)
    off = np.broadcast_to(np.asarray(offset, dtype=np.float64).reshape(-1), (x.shape[0],))
    pos = (off[:, None] + np.arange(x.shape[-2])[None, :]) * scale
    th = (pos[..., None] * inv).reshape((x.shape[0],) + (1,) * (x.ndim - 3) + (x.shape[-2], half))
    c, s = np.cos(th), np.sin(th) * (-1 if inverse else 1)
    out = x.copy()
    if trad:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2], out[..., 1:dims:2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., :half], x[..., half:dims]
        out[..., :half], out[..., half:dims] = a * c - b * s, a * s + b * c
    return out


def close(got, want, dtype, tol=None):
    t = tol if tol is not None else TOL[dtype]
    assert_close(got, want, dtype, rtol=t, atol=t)


NORM_CASES = [(dt, d, lay, opt) for dt in FLOATS for d in LENGTHS for lay in LAYOUTS
              for opt in ["none", "weight", "both"]]


@pytest.mark.parametrize("dtype,d,layout,opt", sample(NORM_CASES, 60, salt=181))
def test_rms_norm(nv, rng, dtype, d, layout, opt):
    x = rand(rng, (3, 5, d), dtype)
    w = rand(rng, (d,), dtype) if opt != "none" else None
    h = nv.own(lib.nv_fast_rms_norm(nv.view(x, layout), nv.array(w) if w is not None else None,
                                    1e-5))
    close(nv.read(h), rms_ref(x, w, 1e-5), dtype)


@pytest.mark.parametrize("dtype,d,layout,opt", sample(NORM_CASES, 60, salt=182))
def test_layer_norm(nv, rng, dtype, d, layout, opt):
    x = rand(rng, (3, 5, d), dtype) + np.asarray(1.5, np_dtype(dtype))
    w = rand(rng, (d,), dtype) if opt != "none" else None
    b = rand(rng, (d,), dtype) if opt == "both" else None
    hw = nv.array(w) if w is not None else None
    hb = nv.array(b) if b is not None else None
    h = nv.own(lib.nv_fast_layer_norm(nv.view(x, layout), hw, hb, 1e-5))
    close(nv.read(h), layer_ref(x, w, b, 1e-5), dtype)


def test_layer_norm_bias_only(nv, rng):
    x = rand(rng, (4, 33), "float32")
    b = rand(rng, (33,), "float32")
    h = nv.own(lib.nv_fast_layer_norm(nv.array(x), None, nv.array(b), 1e-6))
    close(nv.read(h), layer_ref(x, None, b, 1e-6), "float32")


@pytest.mark.parametrize("d", [1, 4096, 16384, 20000])
def test_norms_long_and_single_rows(nv, rng, d):
    x = rand(rng, (2, d), "bfloat16")
    w = rand(rng, (d,), "bfloat16")
    h = nv.own(lib.nv_fast_rms_norm(nv.array(x), nv.array(w), 1e-6))
    close(nv.read(h), rms_ref(x, w, 1e-6), "bfloat16")
    h = nv.own(lib.nv_fast_layer_norm(nv.array(x), nv.array(w), nv.array(w), 1e-6))
    close(nv.read(h), layer_ref(x, w, w, 1e-6), "bfloat16")


def test_norm_dtype_promotion(nv, rng):
    """The result dtype is x's promoted with weight's (and bias's), as MLX."""
    x = rand(rng, (2, 8), "bfloat16")
    for wdt, want in [("bfloat16", "bfloat16"), ("float32", "float32"), ("float16", "float32"),
                      ("int32", "bfloat16")]:
        w = np.ones(8, dtype=np_dtype(wdt))
        got = nv.read(nv.own(lib.nv_fast_rms_norm(nv.array(x), nv.array(w), 1e-5)))
        assert got.dtype == np_dtype(want), (wdt, got.dtype)
    xi = np.arange(16, dtype=np.int32).reshape(2, 8)
    got = nv.read(nv.own(lib.nv_fast_rms_norm(nv.array(xi), nv.array(np.ones(8, np.float32)),
                                              1e-5)))
    close(got, rms_ref(xi, np.ones(8), 1e-5), "float32")


def test_norm_edge_values(nv):
    x = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 1.0], [0.0, 0.0, 0.0], [3.0, -4.0, 0.0]],
                 dtype=np.float32)
    got = nv.read(nv.own(lib.nv_fast_rms_norm(nv.array(x), None, 1e-5)))
    assert np.isnan(got[0]).all() and np.isnan(got[1]).any()
    np.testing.assert_array_equal(got[2], [0, 0, 0])
    close(got[3], rms_ref(x[3:], None, 1e-5)[0], "float32")
    got = nv.read(nv.own(lib.nv_fast_layer_norm(nv.array(x), None, None, 1e-5)))
    assert np.isnan(got[0]).all() and np.isnan(got[1]).all()
    np.testing.assert_array_equal(got[2], [0, 0, 0])


@pytest.mark.parametrize("shape", [(0, 4), (3, 0), (2, 0, 5)])
def test_norm_empty(nv, shape):
    x = np.zeros(shape, np.float32)
    for h in [lib.nv_fast_rms_norm(nv.array(x), None, 1e-5),
              lib.nv_fast_layer_norm(nv.array(x), None, None, 1e-5)]:
        assert nv.read(nv.own(h)).shape == shape


def error_of(nv, h):
    st, msg = nv.status(nv.own(h))
    assert st != 0
    return msg


def test_norm_errors(nv, rng):
    x = nv.array(rand(rng, (2, 8), "float32"))
    msg = error_of(nv, lib.nv_fast_rms_norm(x, nv.array(np.ones(7, np.float32)), 1e-5))
    assert "rms_norm" in msg and "weight" in msg and "7" in msg
    msg = error_of(nv, lib.nv_fast_rms_norm(x, nv.array(np.ones((1, 8), np.float32)), 1e-5))
    assert "1 dimension" in msg and "2 dimensions" in msg
    msg = error_of(nv, lib.nv_fast_rms_norm(nv.array(np.float32(2)), None, 1e-5))
    assert "at least 1 dimension" in msg
    msg = error_of(nv, lib.nv_fast_rms_norm(nv.array(np.ones((2, 8), np.int32)), None, 1e-5))
    assert "unsupported type int32" in msg
    msg = error_of(nv, lib.nv_fast_layer_norm(x, None, nv.array(np.ones(9, np.float32)), 1e-5))
    assert "layer_norm" in msg and "bias" in msg and "9" in msg
    msg = error_of(nv, lib.nv_fast_layer_norm(None, None, None, 1e-5))
    assert "layer_norm" in msg


ROPE_CASES = [(dt, hd, trad, opt) for dt in FLOATS for hd in [64, 80, 96, 128, 256, 12]
              for trad in [False, True] for opt in ["base", "freqs", "partial", "batch_offset"]]


@pytest.mark.parametrize("dtype,hd,trad,opt", sample(ROPE_CASES, 48, salt=183))
def test_rope(nv, rng, dtype, hd, trad, opt):
    x = rand(rng, (2, 3, 7, hd), dtype)
    dims = hd // 2 if opt == "partial" else hd
    freqs = (rng.random(dims // 2) * 50 + 1).astype(np.float32) if opt == "freqs" else None
    offset = np.array([3, 11], np.int32) if opt == "batch_offset" else np.array(5, np.int32)
    base = math.nan if freqs is not None else 10000.0
    h = nv.own(lib.nv_fast_rope(nv.array(x), dims, trad, base, 0.5, nv.array(offset),
                                nv.array(freqs) if freqs is not None else None))
    close(nv.read(h), rope_ref(x, dims, trad, 10000.0, 0.5, offset, freqs), dtype,
          tol={"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}[dtype])


@pytest.mark.parametrize("layout", ["transposed", "strided", "reversed"])
def test_rope_layouts(nv, rng, layout):
    x = rand(rng, (2, 4, 5, 16), "float32")
    h = nv.own(lib.nv_fast_rope(nv.view(x, layout), 16, False, 10000.0, 1.0,
                                nv.array(np.array(2, np.int64)), None))
    close(nv.read(h), rope_ref(x, 16, False, 10000.0, 1.0, 2), "float32")


def test_rope_long_sequence(nv, rng):
    """Positions up to 4100: the float32 angle is computed as the reference rounds it."""
    x = rand(rng, (1, 4097, 64), "float32")
    h = nv.own(lib.nv_fast_rope(nv.array(x), 64, False, 10000.0, 1.0,
                                nv.array(np.array(3, np.int32)), None))
    close(nv.read(h), rope_ref(x, 64, False, 10000.0, 1.0, 3), "float32", tol=2e-3)


def test_rope_empty_and_edges(nv):
    x = np.zeros((2, 0, 8), np.float32)
    h = nv.own(lib.nv_fast_rope(nv.array(x), 8, False, 10000.0, 1.0,
                                nv.array(np.array(0, np.int32)), None))
    assert nv.read(h).shape == (2, 0, 8)
    x = np.array([[[np.nan, 1.0, 2.0, 3.0, np.inf, 5.0]]], np.float32)
    got = nv.read(nv.own(lib.nv_fast_rope(nv.array(x), 4, False, 10000.0, 1.0,
                                          nv.array(np.array(0, np.int32)), None)))
    # position 0: no rotation, NaN stays in its pair, features past dims pass through.
    assert np.isnan(got[0, 0, 0]) and np.isnan(got[0, 0, 2])
    np.testing.assert_array_equal(got[0, 0, [1, 3]], [1.0, 3.0])
    assert got[0, 0, 4] == np.inf and got[0, 0, 5] == 5.0


def test_rope_errors(nv, rng):
    x = nv.array(rand(rng, (2, 3, 8), "float32"))
    off = nv.array(np.array(0, np.int32))

    def msg(*a):
        return error_of(nv, lib.nv_fast_rope(*a))

    assert "dims must be even but got 7" in msg(x, 7, False, 1e4, 1.0, off, None)
    assert "dims must be positive" in msg(x, 0, False, 1e4, 1.0, off, None)
    assert "must not exceed" in msg(x, 10, False, 1e4, 1.0, off, None)
    assert "at least 3 dimensions" in msg(nv.array(np.ones((3, 8), np.float32)), 8, False, 1e4,
                                          1.0, off, None)
    assert "floating" in msg(nv.array(np.ones((2, 3, 8), np.int32)), 8, False, 1e4, 1.0, off, None)
    assert "neither base nor freqs" in msg(x, 8, False, math.nan, 1.0, off, None)
    f4 = nv.array(np.ones(4, np.float32))
    assert "only one of base or freqs" in msg(x, 8, False, 1e4, 1.0, off, f4)
    assert "size 4" in msg(x, 8, False, math.nan, 1.0, off, nv.array(np.ones(3, np.float32)))
    assert "integer" in msg(x, 8, False, 1e4, 1.0, nv.array(np.array(1.5, np.float32)), None)
    assert "integer" in msg(x, 8, False, 1e4, 1.0, nv.array(np.array(True)), None)
    assert "2 elements" in msg(x, 8, False, 1e4, 1.0, nv.array(np.arange(3, dtype=np.int32)), None)
    assert "at most one dimension" in msg(x, 8, False, 1e4, 1.0,
                                          nv.array(np.zeros((1, 2), np.int32)), None)
