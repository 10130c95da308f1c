"""norm_rope and gated_delta_slots through the C API against NumPy float64 references:
norm_rope over every float dtype, head dims 64/80/96/128/256 and odd ones, rope on all or part
of the features, traditional or not, base or freqs, with or without weight, 2-D to 4-D x,
strided and transposed inputs, with and without a cache (padding positions, duplicates, an
out-of-range position, a donated cache and a held one); gated_delta_slots over every float
dtype of the inputs and the pool, grouped heads, decode (T = 1) and several tokens, key/value
dims 1..256, padding slots, empty batches, an out-of-range slot, a donated pool and a held one;
and the argument errors."""
import ctypes as C

import numpy as np
import pytest

from conftest import sample
from nvc import FLOATS, Device, assert_close, lib, np_dtype, ref64, sig

P = C.c_void_p
sig("nv_fast_norm_rope", P, P, P, C.c_double, C.c_int, C.c_bool, C.c_double, C.c_double, P, P,
    P, P)
sig("nv_fast_gated_delta_slots", C.c_int, P, P, P, P, P, P, P, C.c_double, C.POINTER(P))
sig("nv_multiply_scalar", P, P, C.c_double)
sig("nv_cpu", Device)
sig("nv_default_device", Device)
sig("nv_set_default_device", C.c_int, Device)

# Against float64: rows computed in float32 (float64 for float64) and rounded once; float32
# angles of positions below 64 (these files also run with the GPU as the default device).
TOL = {"float16": 3e-3, "bfloat16": 2e-2, "float32": 3e-5, "float64": 1e-12}


def error_of(nv, h):
    st, msg = nv.status(nv.own(h))
    assert st != 0
    return msg


# ---- norm_rope ----

def rope_ref(n, dims, trad, base, scale, pos, freqs):
    """The rope of n [T, ..., D] (float64) at positions pos[t] * scale."""
    h = dims // 2
    inv = 1 / ref64(freqs) if freqs is not None else base ** (-2 * np.arange(h) / dims)
    th = (ref64(pos) * scale)[:, None] * inv[None, :]
    th = th.reshape((n.shape[0],) + (1,) * (n.ndim - 2) + (h,))
    c, s = np.cos(th), np.sin(th)
    y = n.copy()
    if trad:
        a, b = n[..., 0:dims:2], n[..., 1:dims:2]
        y[..., 0:dims:2], y[..., 1:dims:2] = a * c - b * s, a * s + b * c
    else:
        a, b = n[..., :h], n[..., h:dims]
        y[..., :h], y[..., h:dims] = a * c - b * s, a * s + b * c
    return y


def norm_rope_ref(x, w, eps, dims, trad, base, scale, pos, freqs):
    x = ref64(x)
    n = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    if w is not None:
        n = n * ref64(w)
    return rope_ref(n, dims, trad, base, scale, pos, freqs)


def nr_call(nv, x, w, eps, dims, trad, base, scale, pos, freqs=None, cache=None, cpos=None,
            layout="contiguous"):
    h = lib.nv_fast_norm_rope(nv.view(x, layout), nv.array(w) if w is not None else None, eps,
                              dims, trad, base, scale, nv.array(pos),
                              nv.array(freqs) if freqs is not None else None,
                              nv.view(cache, layout) if cache is not None else None,
                              nv.array(cpos) if cpos is not None else None)
    return nv.own(h)


NR_CASES = [(dt, shape, dims, trad, freqs, weight, lay)
            for dt in FLOATS
            for shape, dims in [((5, 3, 64), 64), ((4, 2, 128), 128), ((3, 256), 256),
                                ((6, 2, 80), 80), ((2, 3, 96), 32), ((3, 2, 2, 128), 64),
                                ((7, 1, 10), 6), ((1, 4, 2), 2), ((2, 5, 33), 32)]
            for trad in [False, True] for freqs in [False, True] for weight in [False, True]
            for lay in ["contiguous", "transposed", "strided"]]


@pytest.mark.parametrize("dtype,shape,dims,trad,freqs,weight,layout",
                         sample(NR_CASES, 80, salt=401))
def test_norm_rope(nv, rng, dtype, shape, dims, trad, freqs, weight, layout):
    x = (rng.standard_normal(shape) * 2).astype(np_dtype(dtype))
    w = (rng.standard_normal(shape[-1]) + 1).astype(np_dtype(dtype)) if weight else None
    pos = rng.integers(0, 60, shape[0]).astype(np.int64 if shape[0] % 2 else np.int32)
    fq = rng.uniform(1, 50, dims // 2).astype(np.float32) if freqs else None
    base = np.nan if freqs else 10000.0
    got = nv.read(nr_call(nv, x, w, 1e-6, dims, trad, base, 0.5, pos, fq, layout=layout))
    want = norm_rope_ref(x, w, 1e-6, dims, trad, base, 0.5, pos, fq)
    t = TOL[dtype]
    assert_close(got, want, dtype, rtol=t, atol=t)


@pytest.mark.parametrize("dtype", FLOATS)
def test_norm_rope_cache(nv, rng, dtype):
    t, hd, d, s = 6, 2, 64, 9
    x = rng.standard_normal((t, hd, d)).astype(np_dtype(dtype))
    w = rng.standard_normal(d).astype(np_dtype(dtype))
    cache = rng.standard_normal((s, hd, d)).astype(np_dtype(dtype))
    pos = np.arange(t, dtype=np.int32) + 3
    cpos = np.array([4, -1, 0, 8, 2, -3], np.int64 if dtype == "float32" else np.int32)
    got = nv.read(nr_call(nv, x, w, 1e-5, d, False, 10000.0, 1.0, pos, cache=cache, cpos=cpos))
    rows = norm_rope_ref(x, w, 1e-5, d, False, 10000.0, 1.0, pos, None)
    want = ref64(cache).copy()
    for i, c in enumerate(cpos):
        if c >= 0:
            want[c] = rows[i]
    assert_close(got, want, dtype, rtol=TOL[dtype], atol=TOL[dtype])
    untouched = [r for r in range(s) if r not in cpos]
    np.testing.assert_array_equal(got[untouched], cache[untouched])  # copied, never rounded


def test_norm_rope_cache_donated_and_held(nv, rng):
    x = rng.standard_normal((3, 2, 8)).astype(np.float32)
    cache = rng.standard_normal((5, 2, 8)).astype(np.float32)
    pos, cpos = np.array([1, 2, 3], np.int32), np.array([4, 0, 2], np.int32)
    want = ref64(cache).copy()
    want[cpos] = norm_rope_ref(x, None, 1e-6, 8, True, 100.0, 1.0, pos, None)
    held = nv.array(cache)
    inter = lib.nv_multiply_scalar(held, 1.0)  # only norm_rope reads it: donated
    h = nv.own(lib.nv_fast_norm_rope(nv.array(x), None, 1e-6, 8, True, 100.0, 1.0,
                                     nv.array(pos), None, inter, nv.array(cpos)))
    lib.nv_release(inter)
    h2 = nr_call(nv, x, None, 1e-6, 8, True, 100.0, 1.0, pos, cache=None, cpos=None)
    h3 = nv.own(lib.nv_fast_norm_rope(nv.array(x), None, 1e-6, 8, True, 100.0, 1.0,
                                      nv.array(pos), None, held, nv.array(cpos)))
    assert_close(nv.read(h), want, "float32", rtol=3e-5, atol=3e-5)
    assert_close(nv.read(h3), want, "float32", rtol=3e-5, atol=3e-5)
    assert_close(nv.read(h2), want[cpos], "float32", rtol=3e-5, atol=3e-5)
    np.testing.assert_array_equal(nv.read(held), cache)  # the held cache keeps its values


def test_norm_rope_edges(nv, rng):
    """No tokens; a cache with no rows and only padding; duplicate cache rows on the CPU keep
    the last token."""
    got = nv.read(nr_call(nv, np.zeros((0, 2, 8), np.float32), None, 1e-6, 8, False, 10.0, 1.0,
                          np.zeros(0, np.int32)))
    assert got.shape == (0, 2, 8)
    cache = rng.standard_normal((3, 8)).astype(np.float32)
    got = nv.read(nr_call(nv, np.zeros((0, 8), np.float32), None, 1e-6, 8, False, 10.0, 1.0,
                          np.zeros(0, np.int32), cache=cache, cpos=np.zeros(0, np.int32)))
    np.testing.assert_array_equal(got, cache)
    x = rng.standard_normal((2, 8)).astype(np.float32)
    got = nv.read(nr_call(nv, x, None, 1e-6, 8, False, 10.0, 1.0, np.array([0, 1], np.int32),
                          cache=np.zeros((0, 8), np.float32), cpos=np.array([-1, -1], np.int32)))
    assert got.shape == (0, 8)
    prev = lib.nv_default_device()
    assert lib.nv_set_default_device(lib.nv_cpu()) == 0
    try:
        got = nv.read(nr_call(nv, x, None, 1e-6, 8, False, 10.0, 1.0, np.array([0, 1], np.int32),
                              cache=np.zeros((2, 8), np.float32),
                              cpos=np.array([1, 1], np.int32)))
    finally:
        lib.nv_set_default_device(prev)
    want = norm_rope_ref(x, None, 1e-6, 8, False, 10.0, 1.0, np.array([0, 1]), None)
    np.testing.assert_allclose(got[1], want[1], rtol=3e-5, atol=3e-5)
    np.testing.assert_array_equal(got[0], 0)


def test_norm_rope_errors(nv, rng):
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    pos = np.array([0, 1], np.int32)
    h = nr_call(nv, x, None, 1e-6, 8, False, 10.0, 1.0, pos,
                cache=np.zeros((4, 3, 8), np.float32), cpos=np.array([1, 4], np.int32))
    assert lib.nv_eval1(h) != 0
    msg = lib.nv_last_error().decode()
    assert "norm_rope: index 4 is out of range for an axis of size 4" in msg

    def err(x=x, w=None, dims=8, base=10.0, pos=pos, freqs=None, cache=None, cpos=None):
        return error_of(nv, lib.nv_fast_norm_rope(
            nv.array(x), nv.array(w) if w is not None else None, 1e-6, dims, False, base, 1.0,
            nv.array(pos), nv.array(freqs) if freqs is not None else None,
            nv.array(cache) if cache is not None else None,
            nv.array(cpos) if cpos is not None else None))

    assert "x must be [T, ..., D]" in err(x=np.ones(8, np.float32), pos=np.zeros(1, np.int32))
    assert "x must be [T, ..., D]" in err(x=x.astype(np.int32))
    assert "weight must be a floating [D]" in err(w=np.ones(7, np.float32))
    assert "dims must be even" in err(dims=7)
    assert "dims must be even" in err(dims=10)
    assert "exactly one of base and freqs" in err(base=np.nan)
    assert "exactly one of base and freqs" in err(freqs=np.ones(4, np.float32))
    assert "freqs must be a real 1-D" in err(base=np.nan, freqs=np.ones(3, np.float32))
    assert "positions must be a 1-D integer" in err(pos=np.zeros(3, np.int32))
    assert "positions must be a 1-D integer" in err(pos=np.zeros(2, np.float32))
    assert "given together" in err(cache=np.zeros((4, 3, 8), np.float32))
    assert "the cache must be [S]" in err(cache=np.zeros((4, 2, 8), np.float32), cpos=pos)
    assert "the cache must be [S]" in err(cache=np.zeros((4, 3, 8), np.float16), cpos=pos)
    assert "cache_positions must be" in err(cache=np.zeros((4, 3, 8), np.float32),
                                            cpos=np.zeros(1, np.int32))


# ---- gated_delta_slots ----

def delta_ref(q, k, v, g, beta, pool, slots, scale):
    """o and the updated pool in float64 (slots of padding untouched)."""
    q, k, v, g, beta = ref64(q), ref64(k), ref64(v), ref64(g), ref64(beta)
    pool = ref64(pool).copy()
    n, t, hk, _ = q.shape
    hv, dv = v.shape[2], v.shape[3]
    rep = hv // hk
    o = np.zeros((n, t, hv, dv))
    for i, s in enumerate(slots):
        if s < 0:
            continue
        for h in range(hv):
            m = pool[s, h].copy()
            for tt in range(t):
                kk, qq = k[i, tt, h // rep], q[i, tt, h // rep]
                m = m * np.exp(g[i, tt, h])
                u = (v[i, tt, h] - m.T @ kk) * beta[i, tt, h]
                m = m + np.outer(kk, u)
                o[i, tt, h] = scale * (m.T @ qq)
            pool[s, h] = m
    return o, pool


def delta_inputs(rng, n, t, hk, hv, dk, dv, s, dt, sdt):
    q = rng.standard_normal((n, t, hk, dk))
    k = rng.standard_normal((n, t, hk, dk))
    k /= np.sqrt((k * k).sum(-1, keepdims=True)) + 1e-9  # unit keys, as the models normalize
    v = rng.standard_normal((n, t, hv, dv))
    g = -rng.uniform(0.01, 0.5, (n, t, hv))
    beta = rng.uniform(0.1, 0.9, (n, t, hv))
    pool = rng.standard_normal((s, hv, dk, dv)) * 0.5
    f = lambda a, d: a.astype(np_dtype(d))  # noqa: E731
    return f(q, dt), f(k, dt), f(v, dt), f(g, dt), f(beta, dt), f(pool, sdt)


def delta_call(nv, q, k, v, g, beta, pool, slots, scale, layout="contiguous", pool_h=None):
    out = (P * 2)()
    pv = pool_h if pool_h is not None else nv.view(pool, layout)
    lib.nv_fast_gated_delta_slots(nv.view(q, layout), nv.view(k, layout), nv.view(v, layout),
                                  nv.view(g, layout), nv.view(beta, layout), pv,
                                  nv.array(slots), scale, out)
    return nv.own(out[0]), nv.own(out[1])


DELTA_TOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 2e-4, "float64": 1e-10}
DELTA_CASES = [(dt, sdt, dims, lay)
               for dt in FLOATS for sdt in sorted({dt, "float32"})
               for dims in [(3, 1, 2, 4, 16, 8), (2, 3, 1, 1, 5, 7), (4, 1, 2, 2, 64, 64),
                            (1, 2, 1, 2, 128, 33), (2, 2, 1, 3, 1, 1), (1, 1, 1, 1, 256, 16)]
               for lay in ["contiguous", "transposed", "strided"]]


@pytest.mark.parametrize("dtype,sdtype,dims,layout", sample(DELTA_CASES, 60, salt=402))
def test_gated_delta_slots(nv, rng, dtype, sdtype, dims, layout):
    n, t, hk, hv, dk, dv = dims
    s = 2 * n + 1
    q, k, v, g, beta, pool = delta_inputs(rng, n, t, hk, hv, dk, dv, s, dtype, sdtype)
    slots = rng.permutation(s)[:n]
    slots = np.where(np.arange(n) % 3 == 1, -1, slots).astype(np.int64 if n % 2 else np.int32)
    scale = dk ** -0.5
    ho, hp = delta_call(nv, q, k, v, g, beta, pool, slots, scale, layout)
    o, p = nv.read(ho), nv.read(hp)
    wo, wp = delta_ref(q, k, v, g, beta, pool, slots, scale)
    t_o, t_p = DELTA_TOL[dtype], max(DELTA_TOL[dtype], DELTA_TOL[sdtype])
    assert_close(o, wo, dtype, rtol=t_o, atol=t_o)
    assert_close(p, wp, sdtype, rtol=t_p, atol=t_p)
    unused = [r for r in range(s) if r not in slots]
    np.testing.assert_array_equal(p[unused], pool[unused])  # copied, never rounded


def test_gated_delta_slots_donated_and_held(nv, rng):
    q, k, v, g, beta, pool = delta_inputs(rng, 3, 2, 1, 2, 8, 8, 4, "float32", "float32")
    slots = np.array([2, 0, -1], np.int32)
    wo, wp = delta_ref(q, k, v, g, beta, pool, slots, 0.3)
    held = nv.array(pool)
    inter = lib.nv_multiply_scalar(held, 1.0)  # only gated_delta_slots reads it: donated
    ho, hp = delta_call(nv, q, k, v, g, beta, None, slots, 0.3, pool_h=inter)
    lib.nv_release(inter)
    ho2, hp2 = delta_call(nv, q, k, v, g, beta, None, slots, 0.3, pool_h=held)
    for h, want in [(ho, wo), (hp, wp), (ho2, wo), (hp2, wp)]:
        assert_close(nv.read(h), want, "float32", rtol=2e-4, atol=2e-4)
    np.testing.assert_array_equal(nv.read(held), pool)  # the held pool keeps its values


def test_gated_delta_slots_edges(nv, rng):
    """No sequences (the pool a copy); no tokens (states unchanged); an empty pool with padding
    only; mixed input dtypes promote."""
    q, k, v, g, beta, pool = delta_inputs(rng, 0, 1, 1, 2, 4, 4, 3, "float32", "float32")
    ho, hp = delta_call(nv, q, k, v, g, beta, pool, np.zeros(0, np.int32), 0.5)
    assert nv.read(ho).shape == (0, 1, 2, 4)
    np.testing.assert_array_equal(nv.read(hp), pool)
    q, k, v, g, beta, pool = delta_inputs(rng, 2, 0, 1, 2, 4, 4, 3, "float32", "float32")
    ho, hp = delta_call(nv, q, k, v, g, beta, pool, np.array([0, 2], np.int32), 0.5)
    assert nv.read(ho).shape == (2, 0, 2, 4)
    np.testing.assert_array_equal(nv.read(hp), pool)
    q, k, v, g, beta, _ = delta_inputs(rng, 2, 1, 1, 2, 4, 4, 3, "float32", "float32")
    ho, hp = delta_call(nv, q, k, v, g, beta, np.zeros((0, 2, 4, 4), np.float32),
                        np.array([-1, -1], np.int32), 0.5)
    np.testing.assert_array_equal(nv.read(ho), 0)
    assert nv.read(hp).shape == (0, 2, 4, 4)
    q, k, v, g, beta, pool = delta_inputs(rng, 2, 2, 1, 1, 4, 4, 3, "float32", "float32")
    ho, hp = delta_call(nv, q.astype(np.float16), k, v.astype(np_dtype("bfloat16")), g, beta,
                        pool, np.array([1, 0], np.int32), 0.5)
    got = nv.read(ho)
    assert got.dtype == np.float32  # float16 and bfloat16 promote to float32
    wo, _ = delta_ref(q.astype(np.float16), k, v.astype(np_dtype("bfloat16")), g, beta, pool,
                      [1, 0], 0.5)
    assert_close(got, wo, "float32", rtol=2e-4, atol=2e-4)


def test_gated_delta_slots_errors(nv, rng):
    q, k, v, g, beta, pool = delta_inputs(rng, 2, 1, 1, 2, 4, 4, 3, "float32", "float32")
    ho, _ = delta_call(nv, q, k, v, g, beta, pool, np.array([1, 3], np.int32), 0.5)
    assert lib.nv_eval1(ho) != 0
    msg = lib.nv_last_error().decode()
    assert "gated_delta_slots: index 3 is out of range for an axis of size 3" in msg

    def err(q=q, k=k, v=v, g=g, beta=beta, pool=pool, slots=np.array([0, 1], np.int32)):
        out = (P * 2)()
        st = lib.nv_fast_gated_delta_slots(nv.array(q), nv.array(k), nv.array(v), nv.array(g),
                                           nv.array(beta), nv.array(pool), nv.array(slots), 1.0,
                                           out)
        assert st != 0
        nv.own(out[0])
        nv.own(out[1])
        m0, m1 = nv.status(out[0])[1], nv.status(out[1])[1]
        assert m0 == m1
        return m0

    assert "q and k must be floating [N, T, Hk, Dk]" in err(k=k[:, :, :, :3])
    assert "q and k must be" in err(q=q.astype(np.int32))
    assert "v must be floating [N, T, Hv, Dv]" in err(v=np.ones((2, 2, 2, 4), np.float32))
    assert "g must be floating [N, T, Hv]" in err(g=g[:, :, :1])
    assert "beta must be floating" in err(beta=beta.astype(np.int32))
    assert "state_pool must be floating [S, Hv, Dk, Dv]" in err(pool=pool[:, :, :3])
    assert "slot_ids must be a 1-D integer" in err(slots=np.array([0.0, 1.0]))
    assert "slot_ids must be a 1-D integer" in err(slots=np.array([0], np.int32))
