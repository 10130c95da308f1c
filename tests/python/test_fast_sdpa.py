"""scaled_dot_product_attention (nv_fast_scaled_dot_product_attention) against a NumPy float64
reference with MLX's semantics and against the composed fallback (float64 inputs go through
it): every float dtype, head sizes 64/80/96/128/256 and odd ones, odd query/key lengths across
the CPU kernel's blocks, no mask / causal (Lq < Lk, Lq > Lk) / additive / bool masks (broadcast
ones too), grouped-query heads, sinks, strided and transposed inputs, Lk = 0 and empty
queries, NaN and -inf; the dtype rules and the errors, which name the op and the shapes."""
import ctypes as C

import numpy as np
import pytest

from conftest import sample
from nvc import FLOATS, NuvecError, ints, lib, np_dtype, nv_name, ref64, sig

P = C.c_void_p
sig("nv_fast_scaled_dot_product_attention", P, P, P, P, C.c_float, C.c_char_p, P, P)

LOW = -np.finfo(np.float64).max
# Output tolerances relative to max|v|: the output rounding plus float32 accumulation.
TOL = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 2e-5, "float64": 1e-12}


def ref_sdpa(q, k, v, scale, mode=None, mask=None, sinks=None):
    """The definition in float64: softmax(scale q kᵀ + mask) v per head (k/v heads repeated
    for grouped queries); masked scores take the lowest value (a fully masked row averages
    v); sinks add one logit per head to the denominator."""
    q, k, v = ref64(q), ref64(k), ref64(v)
    B, Hq, Lq, _ = q.shape
    Hkv, Lk, Dv = k.shape[1], k.shape[2], v.shape[3]
    if Lk == 0:
        return np.zeros((B, Hq, Lq, Dv))
    kk, vv = np.repeat(k, Hq // Hkv, axis=1), np.repeat(v, Hq // Hkv, axis=1)
    with np.errstate(invalid="ignore", over="ignore"):
        s = scale * (q @ kk.transpose(0, 1, 3, 2))
        if mode == "causal":
            keep = np.arange(Lk)[None, :] <= (np.arange(Lq) + Lk - Lq)[:, None]
            s = np.where(keep, s, LOW)
        elif mask is not None and mask.dtype == bool:
            s = np.where(mask, s, LOW)
        elif mask is not None:
            s = s + ref64(mask)
        m = s.max(-1, keepdims=True)
        if sinks is not None:
            sk = np.broadcast_to(ref64(sinks)[None, :, None, None], m.shape)
            m = np.maximum(m, sk)
        e = np.exp(s - m)
        den = e.sum(-1, keepdims=True)
        if sinks is not None:
            den = den + np.exp(sk - m)
        return (e / den) @ vv


def rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np_dtype(dtype))


def run(nv, q, k, v, scale, mode=None, mask=None, sinks=None, layout="contiguous"):
    hq, hk, hv = nv.view(q, layout), nv.view(k, layout), nv.view(v, layout)
    hm = nv.array(mask) if mask is not None else None
    hs = nv.array(sinks) if sinks is not None else None
    m = mode.encode() if mode else None
    return nv.read(nv.own(lib.nv_fast_scaled_dot_product_attention(hq, hk, hv, scale, m, hm, hs)))


def check(got, want, dtype, vmax):
    assert nv_name(got.dtype) == dtype
    assert got.shape == want.shape, f"{got.shape} != {want.shape}"
    g = ref64(got)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
    ok = ~np.isnan(want)
    err = np.abs(g[ok] - want[ok])
    tol = TOL[dtype] * max(vmax, 1.0)
    assert err.size == 0 or err.max() <= tol, f"max error {err.max()} > {tol}"


# (B, Hq, Hkv, Lq, Lk, D, Dv)
SHAPES = [
    (1, 1, 1, 1, 1, 8, 8),
    (2, 4, 2, 5, 7, 16, 16),
    (1, 8, 2, 1, 300, 64, 64),     # decode, GQA 4
    (1, 4, 1, 3, 257, 80, 80),     # MQA, keys across blocks
    (2, 2, 2, 67, 131, 96, 96),    # queries across blocks
    (1, 2, 1, 130, 130, 128, 128),
    (1, 2, 2, 9, 33, 256, 256),
    (1, 3, 3, 17, 29, 24, 40),     # odd head sizes, Dv != D
    (1, 2, 2, 600, 601, 16, 16),   # long, odd
]
MASKS = ["none", "causal", "add", "bool", "add_broadcast", "bool_broadcast"]


def make_mask(rng, kind, B, Hq, Lq, Lk, dtype):
    if kind == "add":
        return rand(rng, (B, Hq, Lq, Lk), dtype)
    if kind == "add_broadcast":
        return rand(rng, (Lq, Lk), dtype)
    if kind == "bool":
        return rng.random((B, Hq, Lq, Lk)) < 0.7
    if kind == "bool_broadcast":
        return rng.random((1, Hq, 1, Lk)) < 0.7
    return None


CASES = [(s, dt, mk, sk) for s in SHAPES for dt in FLOATS for mk in MASKS for sk in (False, True)]


@pytest.mark.parametrize("shape,dtype,mask,sinks", sample(CASES, 60))
def test_against_reference_and_fallback(nv, rng, shape, dtype, mask, sinks):
    B, Hq, Hkv, Lq, Lk, D, Dv = shape
    q, k, v = rand(rng, (B, Hq, Lq, D), dtype), rand(rng, (B, Hkv, Lk, D), dtype), \
        rand(rng, (B, Hkv, Lk, Dv), dtype)
    scale = 1.0 / np.sqrt(D)
    mode = "causal" if mask == "causal" else ("array" if mask != "none" else None)
    m = make_mask(rng, mask, B, Hq, Lq, Lk, dtype)
    s = rand(rng, (Hq,), dtype) if sinks else None
    got = run(nv, q, k, v, scale, mode, m, s)
    want = ref_sdpa(q, k, v, np.float32(scale), mode, m, s)
    check(got, want, dtype, np.abs(ref64(v)).max(initial=0))
    if dtype != "float64":
        # the composed fallback: the same inputs in float64
        c = lambda x: None if x is None else (x if x.dtype == bool else ref64(x))
        fb = run(nv, ref64(q), ref64(k), ref64(v), scale, mode, c(m), c(s))
        check(got, fb, dtype, np.abs(ref64(v)).max(initial=0))


@pytest.mark.parametrize("layout", ["transposed", "strided", "reversed"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_layouts(nv, rng, layout, dtype):
    q, k, v = rand(rng, (2, 4, 9, 16), dtype), rand(rng, (2, 2, 11, 16), dtype), \
        rand(rng, (2, 2, 11, 16), dtype)
    got = run(nv, q, k, v, 0.25, "causal", layout=layout)
    check(got, ref_sdpa(q, k, v, 0.25, "causal"), dtype, 4.0)


@pytest.mark.parametrize("Lq,Lk", [(3, 10), (10, 3), (64, 300), (300, 64), (1, 1)])
def test_causal_alignment(nv, rng, Lq, Lk):
    """The queries are the last Lq positions; with Lq > Lk the first rows see no key and
    average v, as MLX's."""
    q, k, v = rand(rng, (1, 2, Lq, 8), "float32"), rand(rng, (1, 2, Lk, 8), "float32"), \
        rand(rng, (1, 2, Lk, 8), "float32")
    got = run(nv, q, k, v, 0.5, "causal")
    check(got, ref_sdpa(q, k, v, 0.5, "causal"), "float32", 4.0)
    if Lq > Lk:
        np.testing.assert_allclose(got[0, :, 0], v[0].mean(axis=1), rtol=1e-5, atol=1e-6)


def test_fully_masked_rows(nv, rng):
    q, k, v = rand(rng, (1, 2, 4, 8), "float32"), rand(rng, (1, 2, 6, 8), "float32"), \
        rand(rng, (1, 2, 6, 8), "float32")
    none = np.zeros((4, 6), bool)
    got = run(nv, q, k, v, 0.5, "array", none)
    np.testing.assert_allclose(got, np.broadcast_to(v.mean(axis=2, keepdims=True), got.shape),
                               rtol=1e-5, atol=1e-6)
    # with a sink the sink takes all the weight
    got = run(nv, q, k, v, 0.5, "array", none, np.zeros(2, np.float32))
    np.testing.assert_array_equal(got, np.zeros_like(got))
    # an additive -inf row is 0/0 (NaN), as the composition's softmax
    ninf = np.zeros((4, 6), np.float32)
    ninf[1] = -np.inf
    got = run(nv, q, k, v, 0.5, "array", ninf)
    assert np.isnan(got[:, :, 1]).all() and not np.isnan(got[:, :, [0, 2, 3]]).any()
    # -inf on a block of keys only (the CPU kernel's first key block): exact zeros there
    q, k, v = rand(rng, (1, 1, 2, 8), "float32"), rand(rng, (1, 1, 300, 8), "float32"), \
        rand(rng, (1, 1, 300, 8), "float32")
    part = np.zeros((2, 300), np.float32)
    part[:, :200] = -np.inf
    got = run(nv, q, k, v, 0.5, "array", part)
    check(got, ref_sdpa(q, k, v, 0.5, None, part), "float32", 4.0)


def test_nan_inputs(nv, rng):
    q, k, v = rand(rng, (1, 1, 3, 8), "float32"), rand(rng, (1, 1, 5, 8), "float32"), \
        rand(rng, (1, 1, 5, 8), "float32")
    q[0, 0, 1, 2] = np.nan
    got = run(nv, q, k, v, 0.5)
    assert np.isnan(got[0, 0, 1]).all() and not np.isnan(got[0, 0, [0, 2]]).any()


def test_empty(nv, rng):
    q = rand(rng, (1, 2, 3, 8), "float32")
    k = np.zeros((1, 2, 0, 8), np.float32)
    got = run(nv, q, k, np.zeros((1, 2, 0, 4), np.float32), 0.5)
    assert got.shape == (1, 2, 3, 4) and (got == 0).all()
    got = run(nv, q[:, :, :0], rand(rng, (1, 2, 5, 8), "float32"),
              rand(rng, (1, 2, 5, 8), "float32"), 0.5, "causal")
    assert got.shape == (1, 2, 0, 8)
    # head size 0: every score is 0, the weights uniform
    v = rand(rng, (1, 2, 5, 4), "float32")
    got = run(nv, q[..., :0], np.zeros((1, 2, 5, 0), np.float32), v, 0.5)
    np.testing.assert_allclose(got, np.broadcast_to(v.mean(2, keepdims=True), got.shape),
                               rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dq,dk,dv,want", [
    ("float16", "float32", "float32", "float32"),
    ("bfloat16", "float16", "float16", "float32"),
    ("bfloat16", "bfloat16", "bfloat16", "bfloat16"),
    ("float32", "float64", "float32", "float64"),
])
def test_result_dtype(nv, rng, dq, dk, dv, want):
    q, k, v = rand(rng, (1, 2, 3, 8), dq), rand(rng, (1, 2, 4, 8), dk), rand(rng, (1, 2, 4, 8), dv)
    got = run(nv, q, k, v, 0.3)
    check(got, ref_sdpa(q, k, v, np.float32(0.3)), want, 4.0)


def expect_error(nv, words, *args):
    with pytest.raises(NuvecError) as e:
        run(nv, *args)
    msg = e.value.message
    assert "scaled_dot_product_attention" in msg
    for w in words:
        assert w in msg, msg


def test_errors(nv, rng):
    f = lambda *s: rand(rng, s, "float32")
    q, k, v = f(1, 4, 3, 8), f(1, 2, 5, 8), f(1, 2, 5, 8)
    expect_error(nv, ["rank 4", "(4,3,8)"], q[0], k, v, 0.5)
    expect_error(nv, ["multiple of n_kv_heads", "(1,4,3,8)"], q, f(1, 3, 5, 8), f(1, 3, 5, 8),
                 0.5)
    expect_error(nv, ["batch"], np.concatenate([q, q]), k, v, 0.5)
    expect_error(nv, ["last dimension"], q, f(1, 2, 5, 4), v, 0.5)
    expect_error(nv, ["n_kv_heads"], q, k, f(1, 1, 5, 8), 0.5)
    expect_error(nv, ["lengths"], q, k, f(1, 2, 4, 8), 0.5)
    expect_error(nv, ["int32"], q.astype(np.int32), k, v, 0.5)
    expect_error(nv, ["invalid mask option 'foo'"], q, k, v, 0.5, "foo")
    expect_error(nv, ["'array' needs"], q, k, v, 0.5, "array")
    expect_error(nv, ["(2,5)", "(1,4,3,5)"], q, k, v, 0.5, "array", f(2, 5))
    expect_error(nv, ["at most rank 4"], q, k, v, 0.5, "array", f(1, 1, 1, 1, 3, 5))
    expect_error(nv, ["float64", "float32"], q, k, v, 0.5, "array", np.zeros((3, 5)))
    expect_error(nv, ["sinks", "(2,)", "(4,)"], q, k, v, 0.5, None, None, f(2))
    expect_error(nv, ["sinks", "float32", "float16"], q.astype(np.float16),
                 k.astype(np.float16), v.astype(np.float16), 0.5, None, None, f(4))
    # an integer mask adds (it promotes to the result), integer sinks promote
    got = run(nv, q, k, v, 0.5, "array", np.ones((3, 5), np.int32), np.zeros(4, np.int32))
    check(got, ref_sdpa(q, k, v, 0.5, None, np.ones((3, 5)), np.zeros(4)), "float32", 4.0)
