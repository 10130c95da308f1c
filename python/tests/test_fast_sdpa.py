"""nuvec.fast.scaled_dot_product_attention against NumPy (float64) and, where mlx is
installed, against mlx.core.fast.scaled_dot_product_attention: values over dtypes, masks
(None, "causal", additive, bool, broadcast), grouped-query heads and sinks; the gradients with
respect to q, k and v (vjp and grad), vmap, the keyword names and the errors."""
import numpy as np
import pytest

import nuvec as nv
import nuvec.fast

LOW = -np.finfo(np.float64).max


def ref(q, k, v, scale, mask=None, sinks=None):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    Hq, Lq, Hkv, Lk = q.shape[1], q.shape[2], k.shape[1], k.shape[2]
    kk, vv = np.repeat(k, Hq // Hkv, 1), np.repeat(v, Hq // Hkv, 1)
    s = scale * q @ kk.transpose(0, 1, 3, 2)
    if isinstance(mask, str):
        keep = np.arange(Lk)[None, :] <= (np.arange(Lq) + Lk - Lq)[:, None]
        s = np.where(keep, s, LOW)
    elif mask is not None and mask.dtype == bool:
        s = np.where(mask, s, LOW)
    elif mask is not None:
        s = s + mask
    m = s.max(-1, keepdims=True)
    if sinks is not None:
        sk = np.broadcast_to(np.asarray(sinks, np.float64)[None, :, None, None], m.shape)
        m = np.maximum(m, sk)
    e = np.exp(s - m)
    den = e.sum(-1, keepdims=True) + (np.exp(sk - m) if sinks is not None else 0)
    return (e / den) @ vv


def inputs(rng, B=2, Hq=4, Hkv=2, Lq=5, Lk=7, D=8, Dv=8):
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    return f(B, Hq, Lq, D), f(B, Hkv, Lk, D), f(B, Hkv, Lk, Dv)


MASKS = [None, "causal", "add", "bool", "bool_broadcast"]


def make_mask(rng, kind, Hq=4, Lq=5, Lk=7):
    if kind == "add":
        return rng.standard_normal((Lq, Lk)).astype(np.float32)
    if kind == "bool":
        return rng.random((2, Hq, Lq, Lk)) < 0.7
    if kind == "bool_broadcast":
        return rng.random((Hq, 1, Lk)) < 0.7
    return kind


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("sinks", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_values_against_numpy(rng, mask, sinks, dtype):
    q, k, v = inputs(rng)
    m = make_mask(rng, mask)
    s = rng.standard_normal(4).astype(np.float32) if sinks else None
    dt = getattr(nv, dtype)
    cast = lambda x: nv.array(x).astype(dt)
    nm = m if m is None or isinstance(m, str) else (nv.array(m) if m.dtype == bool else cast(m))
    out = nv.fast.scaled_dot_product_attention(cast(q), cast(k), cast(v), scale=0.35, mask=nm,
                                               sinks=None if s is None else cast(s))
    assert out.dtype == dt and out.shape == (2, 4, 5, 8)
    back = lambda x: np.array(nv.array(x).astype(dt).astype(nv.float32))
    want = ref(back(q), back(k), back(v), 0.35,
               m if m is None or isinstance(m, str) or m.dtype == bool else back(m),
               None if s is None else back(s))
    tol = {"float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}[dtype]
    np.testing.assert_allclose(np.array(out.astype(nv.float32)), want, atol=tol * 4, rtol=tol)


def test_keywords_and_positional(rng):
    q, k, v = (nv.array(x) for x in inputs(rng))
    a = nv.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask="causal")
    b = nv.fast.scaled_dot_product_attention(q=q, k=k, v=v, scale=0.5, mask="causal", sinks=None)
    c = nv.fast.scaled_dot_product_attention(q, k, v, 0.5, "causal")
    np.testing.assert_array_equal(np.array(a), np.array(b))
    np.testing.assert_array_equal(np.array(a), np.array(c))


def test_errors(rng):
    q, k, v = (nv.array(x) for x in inputs(rng))
    f = nv.fast.scaled_dot_product_attention
    with pytest.raises(ValueError, match="scaled_dot_product_attention.*invalid mask option"):
        np.array(f(q, k, v, scale=1.0, mask="foo"))
    with pytest.raises(ValueError, match="scaled_dot_product_attention.*rank 4"):
        np.array(f(q[0], k, v, scale=1.0))
    with pytest.raises(ValueError, match="n_kv_heads"):
        np.array(f(q, k[:, :1], v, scale=1.0))
    with pytest.raises(TypeError):
        f(q, k, v)  # scale is required, as MLX's


def composed(q, k, v, scale, mask=None):
    """The attention in plain nuvec ops (float32), for gradients."""
    G = q.shape[1] // k.shape[1]
    kk, vv = nv.repeat(k, G, axis=1), nv.repeat(v, G, axis=1)
    s = (q * scale) @ kk.transpose(0, 1, 3, 2)
    if mask is not None:
        s = s + mask
    return nv.softmax(s, axis=-1) @ vv


def test_vjp_against_composition(rng):
    q, k, v = (nv.array(x) for x in inputs(rng))
    add = nv.array(make_mask(rng, "add"))
    cot = nv.array(rng.standard_normal((2, 4, 5, 8)).astype(np.float32))
    fused = lambda q, k, v: nv.fast.scaled_dot_product_attention(q, k, v, scale=0.4, mask=add)
    plain = lambda q, k, v: composed(q, k, v, 0.4, add)
    _, g1 = nv.vjp(fused, [q, k, v], [cot])
    _, g2 = nv.vjp(plain, [q, k, v], [cot])
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-4, atol=1e-5)


def test_vmap_against_loop(rng):
    q = nv.array(rng.standard_normal((3, 1, 4, 5, 8)).astype(np.float32))
    _, k, v = (nv.array(x) for x in inputs(rng, B=1))
    f = lambda q: nv.fast.scaled_dot_product_attention(q, k, v, scale=0.3, mask="causal")
    got = np.array(nv.vmap(f)(q))
    for i in range(3):
        np.testing.assert_allclose(got[i], np.array(f(q[i])), rtol=1e-5, atol=1e-6)


# ---- against MLX ----

@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("sinks", [False, True])
def test_against_mlx(rng, mask, sinks):
    mx = pytest.importorskip("mlx.core")
    q, k, v = inputs(rng)
    m = make_mask(rng, mask)
    s = rng.standard_normal(4).astype(np.float32) if sinks else None
    conv = lambda lib, x: x if x is None or isinstance(x, str) else lib.array(x)
    a = nv.fast.scaled_dot_product_attention(nv.array(q), nv.array(k), nv.array(v), scale=0.35,
                                             mask=conv(nv, m), sinks=conv(nv, s))
    b = mx.fast.scaled_dot_product_attention(mx.array(q), mx.array(k), mx.array(v), scale=0.35,
                                             mask=conv(mx, m), sinks=conv(mx, s))
    np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mask", [None, "causal", "add", "bool"])
def test_grad_against_mlx(rng, mask):
    mx = pytest.importorskip("mlx.core")
    q, k, v = inputs(rng)
    m = make_mask(rng, mask)
    conv = lambda lib, x: x if x is None or isinstance(x, str) else lib.array(x)
    cot = rng.standard_normal((2, 4, 5, 8)).astype(np.float32)

    def run(lib):
        f = lambda q, k, v: lib.fast.scaled_dot_product_attention(q, k, v, scale=0.3,
                                                                  mask=conv(lib, m))
        _, g = lib.vjp(f, [lib.array(q), lib.array(k), lib.array(v)], [lib.array(cot)])
        return g

    for a, b in zip(run(nv), run(mx)):
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-4, atol=1e-5)
