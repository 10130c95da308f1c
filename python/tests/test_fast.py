"""nuvec.fast (mlx.core.fast): rms_norm, layer_norm and rope through the Python module, against
NumPy float64 references and, where MLX is importable, against mlx.core.fast itself (values,
dtypes, vjp with weight/bias gradients); gradients by central finite differences in float64;
jvp; vmap over x, over batched weights and over rope's inputs; MLX's errors as ValueError."""
import math

import numpy as np
import pytest

import nuvec as nv
import nuvec.fast

RNG = np.random.default_rng(20261201)


def rnd(*shape):
    return RNG.standard_normal(shape)


def rms_ref(x, w, eps):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * w if w is not None else y


def layer_ref(x, w, b, eps):
    mu = x.mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)
    if w is not None:
        y = y * w
    return y + b if b is not None else y


def rope_ref(x, dims, trad, base, scale, offset, freqs=None):
    half = dims // 2
    inv = base ** (-np.arange(half) * 2.0 / dims) if freqs is None else 1.0 / freqs
    off = np.broadcast_to(np.asarray(offset, dtype=np.float64).reshape(-1), (x.shape[0],))
    pos = (off[:, None] + np.arange(x.shape[-2])[None, :]) * scale
    th = (pos[..., None] * inv).reshape((x.shape[0],) + (1,) * (x.ndim - 3) + (x.shape[-2], half))
    c, s = np.cos(th), np.sin(th)
    out = x.copy()
    if trad:
        a, b = x[..., 0:dims:2], x[..., 1:dims:2]
        out[..., 0:dims:2], out[..., 1:dims:2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., :half], x[..., half:dims]
        out[..., :half], out[..., half:dims] = a * c - b * s, a * s + b * c
    return out


def test_module_names():
    assert nv.fast is nuvec.fast
    for name in ["rms_norm", "layer_norm", "rope"]:
        assert callable(getattr(nv.fast, name))


def test_forward_against_numpy():
    x, w, b = rnd(4, 5, 96), rnd(96), rnd(96)
    for dtype, tol in [(nv.float32, 2e-5), (nv.float64, 1e-12)]:
        xa, wa, ba = (nv.array(v, dtype=dtype) for v in (x, w, b))
        np.testing.assert_allclose(np.array(nv.fast.rms_norm(xa, wa, 1e-5)), rms_ref(x, w, 1e-5),
                                   rtol=tol, atol=tol)
        np.testing.assert_allclose(np.array(nv.fast.layer_norm(xa, wa, ba, 1e-5)),
                                   layer_ref(x, w, b, 1e-5), rtol=tol, atol=tol)
        np.testing.assert_allclose(np.array(nv.fast.layer_norm(xa, None, None, 1e-5)),
                                   layer_ref(x, None, None, 1e-5), rtol=tol, atol=tol)
    xr = rnd(2, 3, 6, 32)
    got = nv.fast.rope(nv.array(xr, dtype=nv.float64), 32, traditional=False, base=10000.0,
                       scale=1.0, offset=4)
    np.testing.assert_allclose(np.array(got), rope_ref(xr, 32, False, 10000.0, 1.0, 4), atol=1e-12)
    fr = RNG.random(8) * 10 + 1
    got = nv.fast.rope(nv.array(xr, dtype=nv.float64), 16, traditional=True, base=None, scale=2.0,
                       offset=nv.array([1, 7]), freqs=nv.array(fr, dtype=nv.float64))
    np.testing.assert_allclose(np.array(got), rope_ref(xr, 16, True, None, 2.0, [1, 7], fr),
                               atol=1e-12)


def test_errors_are_value_errors():
    x = nv.array(rnd(2, 8), dtype=nv.float32)
    with pytest.raises(ValueError, match="weight"):
        nv.fast.rms_norm(x, nv.ones((7,)), 1e-5)
    with pytest.raises(ValueError, match="bias"):
        nv.fast.layer_norm(x, None, nv.ones((9,)), 1e-5)
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        nv.fast.rope(x, 8, traditional=False, base=10000.0, scale=1.0, offset=0)
    x3 = nv.array(rnd(2, 3, 8), dtype=nv.float32)
    with pytest.raises(ValueError, match="neither base nor freqs"):
        nv.fast.rope(x3, 8, traditional=False, base=None, scale=1.0, offset=0)
    with pytest.raises(ValueError, match="even"):
        nv.fast.rope(x3, 7, traditional=False, base=10000.0, scale=1.0, offset=0)


# ---- gradients (float64: the fallback's vjp against central differences) ----


def numeric_grad(f, args, i, h=1e-6):
    """d sum(f(*args) * cot) / d args[i] by central differences, with cot fixed."""
    base = [np.array(a, dtype=np.float64) for a in args]
    out0 = f(*base)
    cot = np.cos(np.arange(out0.size)).reshape(out0.shape) + 0.5
    g = np.zeros_like(base[i])
    it = np.nditer(base[i], flags=["multi_index"])
    for _ in it:
        k = it.multi_index
        up = [a.copy() for a in base]
        dn = [a.copy() for a in base]
        up[i][k] += h
        dn[i][k] -= h
        g[k] = ((f(*up) * cot).sum() - (f(*dn) * cot).sum()) / (2 * h)
    return g, cot


def nv_grads(f, args, cot):
    arrs = [nv.array(a, dtype=nv.float64) for a in args]
    _, vjps = nv.vjp(f, arrs, [nv.array(cot, dtype=nv.float64)])
    return [np.array(v) for v in vjps]


@pytest.mark.parametrize("d", [1, 7, 16])
def test_rms_norm_vjp_finite_differences(d):
    x, w = rnd(3, d), rnd(d)
    f_np = lambda x, w: rms_ref(x, w, 1e-3)  # noqa: E731
    f_nv = lambda x, w: nv.fast.rms_norm(x, w, 1e-3)  # noqa: E731
    for i in range(2):
        want, cot = numeric_grad(f_np, [x, w], i)
        got = nv_grads(f_nv, [x, w], cot)[i]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("d", [2, 7, 16])
def test_layer_norm_vjp_finite_differences(d):
    x, w, b = rnd(3, d), rnd(d), rnd(d)
    f_np = lambda x, w, b: layer_ref(x, w, b, 1e-3)  # noqa: E731
    f_nv = lambda x, w, b: nv.fast.layer_norm(x, w, b, 1e-3)  # noqa: E731
    for i in range(3):
        want, cot = numeric_grad(f_np, [x, w, b], i)
        got = nv_grads(f_nv, [x, w, b], cot)[i]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("trad", [False, True])
def test_rope_vjp_finite_differences(trad):
    x, fr = rnd(2, 2, 3, 8), RNG.random(2) * 3 + 1
    f_np = lambda x, fr: rope_ref(x, 4, trad, None, 0.7, [2, 5], fr)  # noqa: E731
    off = nv.array([2, 5])
    f_nv = lambda x, fr: nv.fast.rope(x, 4, traditional=trad, base=None, scale=0.7,  # noqa: E731
                                      offset=off, freqs=fr)
    for i in range(2):
        want, cot = numeric_grad(f_np, [x, fr], i)
        got = nv_grads(f_nv, [x, fr], cot)[i]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    # With base: x's gradient is the inverse rotation (the fused rope turning backwards).
    f_np = lambda x: rope_ref(x, 8, trad, 100.0, 1.0, 3)  # noqa: E731
    f_nv = lambda x: nv.fast.rope(x, 8, traditional=trad, base=100.0, scale=1.0,  # noqa: E731
                                  offset=3)
    want, cot = numeric_grad(f_np, [x], 0)
    np.testing.assert_allclose(nv_grads(f_nv, [x], cot)[0], want, rtol=1e-6, atol=1e-7)


def test_jvp_finite_differences():
    x, w, b = rnd(3, 6), rnd(6), rnd(6)
    t = [rnd(3, 6), rnd(6), rnd(6)]
    h = 1e-6
    for f_np, f_nv, n in [
        (lambda x, w, b: rms_ref(x, w, 1e-3), lambda x, w, b: nv.fast.rms_norm(x, w, 1e-3), 2),
        (lambda x, w, b: layer_ref(x, w, b, 1e-3),
         lambda x, w, b: nv.fast.layer_norm(x, w, b, 1e-3), 3),
    ]:
        args = [x, w, b]
        want = (f_np(*[a + h * ti for a, ti in zip(args, t)]) -
                f_np(*[a - h * ti for a, ti in zip(args, t)])) / (2 * h)
        _, jv = nv.jvp(f_nv, [nv.array(a, dtype=nv.float64) for a in args],
                       [nv.array(ti, dtype=nv.float64) for ti in t])
        np.testing.assert_allclose(np.array(jv[0]), want, rtol=1e-6, atol=1e-7)
    xr, tr = rnd(2, 3, 8), rnd(2, 3, 8)
    f = lambda x: nv.fast.rope(x, 6, traditional=False, base=50.0, scale=1.0, offset=1)  # noqa
    _, jv = nv.jvp(f, [nv.array(xr, dtype=nv.float64)], [nv.array(tr, dtype=nv.float64)])
    np.testing.assert_allclose(np.array(jv[0]), rope_ref(tr, 6, False, 50.0, 1.0, 1), atol=1e-12)


def test_grad_in_low_precision_reaches_the_inputs():
    x = nv.array(rnd(4, 32), dtype=nv.bfloat16)
    w = nv.array(rnd(32), dtype=nv.float32)
    gx, gw = nv.grad(lambda x, w: nv.fast.rms_norm(x, w, 1e-5).sum(), argnums=(0, 1))(x, w)
    assert gx.dtype == nv.bfloat16 and gw.dtype == nv.float32
    assert gx.shape == (4, 32) and gw.shape == (32,)
    xf = np.array(x.astype(nv.float32)).astype(np.float64)
    np.testing.assert_allclose(np.array(gw), (xf / np.sqrt((xf * xf).mean(-1, keepdims=True)
                                                         + 1e-5)).sum(0), rtol=2e-3, atol=2e-3)


# ---- vmap ----


def test_vmap_norms():
    x, w, b = rnd(5, 3, 16), rnd(16), rnd(16)
    xa, wa, ba = (nv.array(v, dtype=nv.float64) for v in (x, w, b))
    got = nv.vmap(lambda x: nv.fast.rms_norm(x, wa, 1e-5), in_axes=1, out_axes=1)(xa)
    np.testing.assert_allclose(np.array(got), rms_ref(x, w, 1e-5), atol=1e-12)
    # x mapped along its last axis: the batch axis moves to the front first.
    x2 = rnd(3, 16, 5)
    got = nv.vmap(lambda x: nv.fast.layer_norm(x, wa, ba, 1e-5), in_axes=2)(
        nv.array(x2, dtype=nv.float64))
    want = np.stack([layer_ref(x2[:, :, i], w, b, 1e-5) for i in range(5)])
    np.testing.assert_allclose(np.array(got), want, atol=1e-12)
    # Batched weights and biases go through the fallback.
    ws, bs = rnd(4, 16), rnd(4, 16)
    got = nv.vmap(lambda w, b: nv.fast.layer_norm(xa, w, b, 1e-5))(
        nv.array(ws, dtype=nv.float64), nv.array(bs, dtype=nv.float64))
    want = np.stack([layer_ref(x, ws[i], bs[i], 1e-5) for i in range(4)])
    np.testing.assert_allclose(np.array(got), want, atol=1e-12)
    got = nv.vmap(lambda x, w: nv.fast.rms_norm(x, w, 1e-5))(
        xa, nv.array(rnd(5, 16) * 0 + ws[0], dtype=nv.float64))
    np.testing.assert_allclose(np.array(got), np.stack([rms_ref(x[i], ws[0], 1e-5)
                                                        for i in range(5)]), atol=1e-12)


def test_vmap_rope():
    x = rnd(4, 2, 3, 5, 8)  # mapped axis 0 over (B=2, H=3, T=5, D=8)
    f = lambda x: nv.fast.rope(x, 8, traditional=False, base=10000.0, scale=1.0,  # noqa: E731
                               offset=nv.array([1, 4]))
    got = nv.vmap(f)(nv.array(x, dtype=nv.float64))
    want = np.stack([rope_ref(x[i], 8, False, 10000.0, 1.0, [1, 4]) for i in range(4)])
    np.testing.assert_allclose(np.array(got), want, atol=1e-12)
    g = lambda x, o: nv.fast.rope(x, 8, traditional=False, base=1e4, scale=1.0, offset=o)  # noqa
    with pytest.raises(Exception, match="batched offsets"):
        nv.vmap(g)(nv.array(x, dtype=nv.float64), nv.array([0, 1, 2, 3]))


# ---- against MLX ----


def test_against_mlx():
    mx = pytest.importorskip("mlx.core")
    x, w, b = rnd(3, 4, 80), rnd(80), rnd(80)
    for name in ["float32", "bfloat16", "float16"]:
        ndt, mdt = getattr(nv, name), getattr(mx, name)
        tol = 2e-5 if name == "float32" else 4e-2
        for f_nv, f_mx in [
            (lambda x, w, b: nv.fast.rms_norm(x, w, 1e-5), lambda x, w, b: mx.fast.rms_norm(x, w, 1e-5)),
            (lambda x, w, b: nv.fast.layer_norm(x, w, b, 1e-5),
             lambda x, w, b: mx.fast.layer_norm(x, w, b, 1e-5)),
        ]:
            a = f_nv(*[nv.array(v, dtype=ndt) for v in (x, w, b)])
            m = f_mx(*[mx.array(v).astype(mdt) for v in (x, w, b)])
            assert str(a.dtype).split(".")[-1] == str(m.dtype).split(".")[-1]
            np.testing.assert_allclose(np.array(a.astype(nv.float32)), np.array(m.astype(mx.float32)),
                                       rtol=tol, atol=tol)
            cot = rnd(3, 4, 80)
            _, gn = nv.vjp(f_nv, [nv.array(v, dtype=nv.float32) for v in (x, w, b)],
                           [nv.array(cot, dtype=nv.float32)])
            _, gm = mx.vjp(f_mx, [mx.array(v).astype(mx.float32) for v in (x, w, b)],
                           [mx.array(cot).astype(mx.float32)])
            for p, q in zip(gn, gm):
                np.testing.assert_allclose(np.array(p), np.array(q), rtol=1e-4, atol=1e-4)
    xr = rnd(2, 3, 9, 64)
    for trad in [False, True]:
        for dims in [64, 32]:
            a = nv.fast.rope(nv.array(xr, dtype=nv.float32), dims, traditional=trad, base=10000.0,
                             scale=0.5, offset=nv.array([3, 6]))
            m = mx.fast.rope(mx.array(xr).astype(mx.float32), dims, traditional=trad, base=10000.0,
                             scale=0.5, offset=mx.array([3, 6]))
            np.testing.assert_allclose(np.array(a), np.array(m), rtol=1e-5, atol=1e-5)
            cot = rnd(2, 3, 9, 64)
            fn = lambda x: nv.fast.rope(x, dims, traditional=trad, base=10000.0, scale=0.5,  # noqa
                                        offset=2)
            fm = lambda x: mx.fast.rope(x, dims, traditional=trad, base=10000.0, scale=0.5,  # noqa
                                        offset=2)
            _, gn = nv.vjp(fn, [nv.array(xr, dtype=nv.float32)], [nv.array(cot, dtype=nv.float32)])
            _, gm = mx.vjp(fm, [mx.array(xr).astype(mx.float32)], [mx.array(cot).astype(mx.float32)])
            np.testing.assert_allclose(np.array(gn[0]), np.array(gm[0]), rtol=1e-5, atol=1e-5)
    assert math.isfinite(float(np.array(a).sum()))


# ---- the fused gradient's own transforms ----


@pytest.mark.parametrize("name", ["rms_norm", "layer_norm"])
def test_second_order_through_norm_vjp(name):
    """The gradient of a gradient goes through norm_vjp's rules (its composed formula):
    checked by central differences of the (already checked) first gradient."""
    x, w, c = rnd(2, 5), rnd(5), rnd(2, 5)
    wa, ca = nv.array(w, dtype=nv.float64), nv.array(c, dtype=nv.float64)
    if name == "rms_norm":
        f = lambda x: (nv.fast.rms_norm(x, wa, 1e-3) * ca).sum()  # noqa: E731
    else:
        f = lambda x: (nv.fast.layer_norm(x, wa, wa, 1e-3) * ca).sum()  # noqa: E731
    g1 = nv.grad(f)
    c2 = np.sin(np.arange(10.0)).reshape(2, 5)
    h = lambda x: (g1(x) * nv.array(c2, dtype=nv.float64)).sum()  # noqa: E731
    got = np.array(nv.grad(h)(nv.array(x, dtype=nv.float64)))
    want = np.zeros_like(x)
    for k in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[k] = 1e-6
        want[k] = (h(nv.array(x + e, dtype=nv.float64)).item() -
                   h(nv.array(x - e, dtype=nv.float64)).item()) / 2e-6
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_vmap_of_grad():
    xs, w = rnd(4, 3, 8), rnd(8)
    wa = nv.array(w, dtype=nv.float64)
    for fn in [lambda x: nv.fast.rms_norm(x, wa, 1e-4), lambda x: nv.fast.layer_norm(x, wa, None, 1e-4)]:
        g = nv.grad(lambda x: (fn(x) * fn(x)).sum())
        got = np.array(nv.vmap(g)(nv.array(xs, dtype=nv.float64)))
        want = np.stack([np.array(g(nv.array(xs[i], dtype=nv.float64))) for i in range(4)])
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
        # and with the weight batched: the batched gradient goes through the formula
        ws = rnd(4, 8)
        gw = nv.grad(lambda x, w: (nv.fast.rms_norm(x, w, 1e-4) ** 2).sum())
        got = np.array(nv.vmap(gw, in_axes=(0, 0))(nv.array(xs, dtype=nv.float64),
                                                   nv.array(ws, dtype=nv.float64)))
        want = np.stack([np.array(gw(nv.array(xs[i], dtype=nv.float64),
                                     nv.array(ws[i], dtype=nv.float64))) for i in range(4)])
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_rope_jvp_with_freqs_tangent_goes_through_the_fallback():
    x, fr = rnd(2, 3, 4, 8), RNG.random(4) * 3 + 1
    tx, tf = rnd(2, 3, 4, 8), rnd(4)
    off = nv.array([1, 3])
    f = lambda x, fr: nv.fast.rope(x, 8, traditional=True, base=None, scale=0.5,  # noqa: E731
                                   offset=off, freqs=fr)
    out, jv = nv.jvp(f, [nv.array(x, dtype=nv.float64), nv.array(fr, dtype=nv.float64)],
                     [nv.array(tx, dtype=nv.float64), nv.array(tf, dtype=nv.float64)])
    h = 1e-6
    want = (rope_ref(x + h * tx, 8, True, None, 0.5, [1, 3], fr + h * tf) -
            rope_ref(x - h * tx, 8, True, None, 0.5, [1, 3], fr - h * tf)) / (2 * h)
    np.testing.assert_allclose(np.array(jv[0]), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.array(out[0]), rope_ref(x, 8, True, None, 0.5, [1, 3], fr),
                               atol=1e-12)
