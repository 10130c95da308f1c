"""nuvec.fast's norm_rope and gated_delta_slots through the Python module: against NumPy
float64 references and, where MLX is importable, norm_rope against MLX's composition
mx.fast.rope(mx.fast.rms_norm(x)); vjp and jvp by central finite differences in float64 (they
go through the composed forms); vmap over the batched inputs; an intermediate cache or pool is
written in place while a held one keeps its values; argument errors as ValueError."""
import numpy as np
import pytest

import nuvec as nv
import nuvec.fast

RNG = np.random.default_rng(20261203)
f64 = lambda a: nv.array(np.asarray(a, np.float64), dtype=nv.float64)  # noqa: E731


def norm_rope_ref(x, w, eps, dims, trad, base, scale, pos):
    n = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    if w is not None:
        n = n * w
    h = dims // 2
    th = (np.asarray(pos, np.float64) * scale)[:, None] * base ** (-2 * np.arange(h) / dims)
    th = th.reshape((x.shape[0],) + (1,) * (x.ndim - 2) + (h,))
    c, s = np.cos(th), np.sin(th)
    y = n.copy()
    if trad:
        a, b = n[..., 0:dims:2], n[..., 1:dims:2]
        y[..., 0:dims:2], y[..., 1:dims:2] = a * c - b * s, a * s + b * c
    else:
        a, b = n[..., :h], n[..., h:dims]
        y[..., :h], y[..., h:dims] = a * c - b * s, a * s + b * c
    return y


def delta_ref(q, k, v, g, beta, pool, slots, scale):
    pool = np.array(pool, np.float64, copy=True)
    n, t, hk, _ = q.shape
    hv = v.shape[2]
    o = np.zeros(v.shape)
    for i, s in enumerate(slots):
        if s < 0:
            continue
        for h in range(hv):
            m = pool[s, h].copy()
            for tt in range(t):
                kk, qq = k[i, tt, h * hk // hv], q[i, tt, h * hk // hv]
                m = m * np.exp(g[i, tt, h])
                m = m + np.outer(kk, (v[i, tt, h] - m.T @ kk) * beta[i, tt, h])
                o[i, tt, h] = scale * (m.T @ qq)
            pool[s, h] = m
    return o, pool


def test_norm_rope():
    x, w = RNG.standard_normal((5, 4, 64)), RNG.standard_normal(64)
    pos = np.array([0, 7, 3, 100, 12], np.int32)
    got = nv.fast.norm_rope(nv.array(x, dtype=nv.float32), nv.array(w, dtype=nv.float32), 1e-6,
                            64, nv.array(pos), base=10000.0)
    want = norm_rope_ref(x, w, 1e-6, 64, False, 10000.0, 1.0, pos)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)
    cache = RNG.standard_normal((8, 4, 64)).astype(np.float32)
    held = nv.array(cache)
    cpos = np.array([6, -1, 0, 2, 7], np.int32)
    got = nv.fast.norm_rope(x=nv.array(x, dtype=nv.float32), weight=None, eps=1e-6, dims=32,
                            positions=nv.array(pos), traditional=True, base=500.0, scale=0.5,
                            cache=held * 1, cache_positions=nv.array(cpos))
    want = cache.astype(np.float64)
    rows = norm_rope_ref(x, None, 1e-6, 32, True, 500.0, 0.5, pos)
    for i, c in enumerate(cpos):
        if c >= 0:
            want[c] = rows[i]
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(np.array(held), cache)
    with pytest.raises(ValueError, match="positions must be"):
        nv.fast.norm_rope(nv.array(x), None, 1e-6, 64, nv.array(pos[:2]), base=10.0)


def test_norm_rope_matches_mlx():
    mx = pytest.importorskip("mlx.core")
    x, w = RNG.standard_normal((3, 8, 128)).astype(np.float32), RNG.standard_normal(128)
    w = w.astype(np.float32)
    for trad in [False, True]:
        got = nv.fast.norm_rope(nv.array(x), nv.array(w), 1e-6, 128,
                                nv.array(np.full(3, 17, np.int32)), traditional=trad,
                                base=1e6)
        # MLX's layout (..., L, D): every row its own sequence of L = 1 at offset 17
        n = mx.fast.rms_norm(mx.array(x), mx.array(w), 1e-6).reshape(3, 8, 1, 128)
        want = mx.fast.rope(n, 128, traditional=trad, base=1e6, scale=1.0, offset=17)
        np.testing.assert_allclose(np.array(got), np.array(want).reshape(3, 8, 128),
                                   rtol=1e-4, atol=1e-4)


def test_norm_rope_grads_and_vmap():
    x, w = RNG.standard_normal((3, 2, 8)), RNG.standard_normal(8)
    cache = RNG.standard_normal((4, 2, 8))
    pos, cpos = np.array([1, 5, 2], np.int32), np.array([3, -1, 0], np.int32)
    cot = np.cos(np.arange(64)).reshape(4, 2, 8)
    h = 1e-6

    def loss_np(xx, ww, cc):
        y = cc.copy()
        rows = norm_rope_ref(xx, ww, 1e-5, 6, False, 100.0, 1.0, pos)
        for i, c in enumerate(cpos):
            if c >= 0:
                y[c] = rows[i]
        return (y * cot).sum()

    def loss_nv(xx, ww, cc):
        y = nv.fast.norm_rope(xx, ww, 1e-5, 6, nv.array(pos), base=100.0, cache=cc,
                              cache_positions=nv.array(cpos))
        return (y * nv.array(cot)).sum()

    args = [x, w, cache]
    grads = nv.grad(loss_nv, argnums=(0, 1, 2))(*[f64(a) for a in args])
    for i, a in enumerate(args):
        want = np.zeros_like(a)
        for idx in np.ndindex(*a.shape):
            up = [v.copy() for v in args]
            dn = [v.copy() for v in args]
            up[i][idx] += h
            dn[i][idx] -= h
            want[idx] = (loss_np(*up) - loss_np(*dn)) / (2 * h)
        np.testing.assert_allclose(np.array(grads[i]), want, rtol=1e-6, atol=1e-7)
    tx = RNG.standard_normal(x.shape)
    f = lambda xx: nv.fast.norm_rope(xx, f64(w), 1e-5, 8, nv.array(pos), base=100.0)  # noqa: E731
    _, (jt,) = nv.jvp(f, [f64(x)], [f64(tx)])
    fd = (norm_rope_ref(x + h * tx, w, 1e-5, 8, False, 100.0, 1.0, pos)
          - norm_rope_ref(x - h * tx, w, 1e-5, 8, False, 100.0, 1.0, pos)) / (2 * h)
    np.testing.assert_allclose(np.array(jt), fd, rtol=1e-6, atol=1e-7)
    xs = RNG.standard_normal((2, 3, 2, 8))
    got = nv.vmap(f)(f64(xs))
    for i in range(2):
        np.testing.assert_allclose(np.array(got[i]),
                                   norm_rope_ref(xs[i], w, 1e-5, 8, False, 100.0, 1.0, pos),
                                   atol=1e-12)


def delta_args(n, t, hk, hv, dk, dv, s):
    q, k = RNG.standard_normal((n, t, hk, dk)), RNG.standard_normal((n, t, hk, dk)) * 0.5
    v = RNG.standard_normal((n, t, hv, dv))
    g, beta = -RNG.uniform(0.05, 0.5, (n, t, hv)), RNG.uniform(0.1, 0.9, (n, t, hv))
    pool = RNG.standard_normal((s, hv, dk, dv)) * 0.5
    return [q, k, v, g, beta, pool]


def test_gated_delta_slots():
    q, k, v, g, beta, pool = delta_args(3, 2, 1, 2, 16, 8, 5)
    slots = np.array([4, -1, 1], np.int32)
    f32 = lambda a: nv.array(a, dtype=nv.float32)  # noqa: E731
    held = f32(pool)
    o, p = nv.fast.gated_delta_slots(f32(q), f32(k), f32(v), f32(g), f32(beta), held * 1,
                                     nv.array(slots))  # scale Dk^-1/2; an intermediate pool
    wo, wp = delta_ref(q, k, v, g, beta, pool, slots, 16 ** -0.5)
    np.testing.assert_allclose(np.array(o), wo, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.array(p), wp, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(np.array(held), pool.astype(np.float32))
    o, p = nv.fast.gated_delta_slots(q=f32(q), k=f32(k), v=f32(v), g=f32(g), beta=f32(beta),
                                     state_pool=held, slot_ids=nv.array(slots), scale=1.0)
    wo, wp = delta_ref(q, k, v, g, beta, pool, slots, 1.0)
    np.testing.assert_allclose(np.array(o), wo, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="state_pool"):
        nv.fast.gated_delta_slots(f32(q), f32(k), f32(v), f32(g), f32(beta), f32(pool[:, :1]),
                                  nv.array(slots))


def test_gated_delta_slots_grads_and_vmap():
    args = delta_args(2, 2, 1, 2, 3, 2, 3)
    slots = [2, 0]
    sl = nv.array(np.array(slots, np.int32))
    co, cp = np.cos(np.arange(16)).reshape(2, 2, 2, 2), np.sin(np.arange(36)).reshape(3, 2, 3, 2)
    h = 1e-6

    def loss_np(*a):
        o, p = delta_ref(*a, slots, 0.7)
        return (o * co).sum() + (p * cp).sum()

    def loss_nv(*a):
        o, p = nv.fast.gated_delta_slots(*a, sl, 0.7)
        return (o * nv.array(co)).sum() + (p * nv.array(cp)).sum()

    grads = nv.grad(loss_nv, argnums=tuple(range(6)))(*[f64(a) for a in args])
    for i, a in enumerate(args):
        want = np.zeros_like(a)
        for idx in np.ndindex(*a.shape):
            up = [v.copy() for v in args]
            dn = [v.copy() for v in args]
            up[i][idx] += h
            dn[i][idx] -= h
            want[idx] = (loss_np(*up) - loss_np(*dn)) / (2 * h)
        np.testing.assert_allclose(np.array(grads[i]), want, rtol=1e-5, atol=1e-7)
    tq = RNG.standard_normal(args[0].shape)
    _, (jo, jp) = nv.jvp(lambda qq: nv.fast.gated_delta_slots(qq, *[f64(a) for a in args[1:]],
                                                              sl, 0.7),
                         [f64(args[0])], [f64(tq)])
    up = delta_ref(args[0] + h * tq, *args[1:], slots, 0.7)
    dn = delta_ref(args[0] - h * tq, *args[1:], slots, 0.7)
    np.testing.assert_allclose(np.array(jo), (up[0] - dn[0]) / (2 * h), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.array(jp), 0, atol=1e-8)  # the states do not read q
    pools = RNG.standard_normal((2,) + args[5].shape)
    os_, ps = nv.vmap(lambda pp: nv.fast.gated_delta_slots(*[f64(a) for a in args[:5]], pp, sl,
                                                           0.7))(f64(pools))
    for i in range(2):
        wo, wp = delta_ref(*args[:5], pools[i], slots, 0.7)
        np.testing.assert_allclose(np.array(os_[i]), wo, atol=1e-12)
        np.testing.assert_allclose(np.array(ps[i]), wp, atol=1e-12)
