"""nuvec.fast's serving kernels through the Python module: sorted_offsets, softmax and
causal_softmax against NumPy float64 references and, where MLX is importable, fast softmax
against mlx.core.softmax; causal_softmax's vjp and jvp by central finite differences in
float64; vmap of both ops over any axis; an intermediate written in place keeps the caller's
arrays intact; argument errors as ValueError."""
import numpy as np
import pytest

import nuvec as nv
import nuvec.fast

RNG = np.random.default_rng(20261202)


def causal_ref(x, rows):
    c = x.shape[-1]
    flat = np.asarray(x, np.float64).reshape(-1, c)
    k = np.clip(c - rows + np.arange(flat.shape[0]) % rows + 1, 0, c)
    seen = np.arange(c)[None, :] < k[:, None]
    with np.errstate(invalid="ignore"):  # rows that see nothing: 0
        v = np.where(seen, flat, -np.inf)
        e = np.where(seen, np.exp(v - v.max(-1, keepdims=True)), 0)
        return np.where(seen, e / e.sum(-1, keepdims=True), 0).reshape(x.shape)


def test_sorted_offsets():
    ids = np.sort(RNG.integers(0, 9, 50)).astype(np.int32)
    got = nv.fast.sorted_offsets(nv.array(ids), 12)
    assert got.dtype == nv.int32 and got.shape == (13,)
    np.testing.assert_array_equal(np.array(got), np.searchsorted(ids, np.arange(13)))
    got = nv.fast.sorted_offsets(sorted_indices=nv.array(ids.astype(np.uint32)), groups=3)
    np.testing.assert_array_equal(np.array(got), np.searchsorted(ids, np.arange(4)))


def test_vmap_sorted_offsets():
    ids = np.sort(RNG.integers(-1, 7, (5, 30)), axis=1).astype(np.int64)
    want = np.stack([np.searchsorted(r, np.arange(7)) for r in ids])
    got = nv.vmap(lambda i: nv.fast.sorted_offsets(i, 6))(nv.array(ids))
    assert got.dtype == nv.int32
    np.testing.assert_array_equal(np.array(got), want)
    got = nv.vmap(lambda i: nv.fast.sorted_offsets(i, 6), in_axes=1)(nv.array(ids.T.copy()))
    np.testing.assert_array_equal(np.array(got), want)


@pytest.mark.parametrize("dtype,tol", [(nv.float32, 1e-5), (nv.bfloat16, 3e-2),
                                       (nv.float16, 4e-3), (nv.float64, 1e-12)])
def test_causal_softmax(dtype, tol):
    x = RNG.standard_normal((2, 6, 11)) * 3
    xa = nv.array(x).astype(dtype)
    got = nv.fast.causal_softmax(xa, 3)
    assert got.dtype == dtype and got.shape == x.shape
    ref = causal_ref(np.array(xa.astype(nv.float64)), 3)
    np.testing.assert_allclose(np.array(got.astype(nv.float64)), ref, rtol=tol, atol=tol)


def test_softmax_matches_mlx():
    x = RNG.standard_normal((3, 17)).astype(np.float32)
    got = np.array(nv.fast.softmax(nv.array(x)))
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    mx = pytest.importorskip("mlx.core")
    np.testing.assert_allclose(got, np.array(mx.softmax(mx.array(x), axis=-1, precise=True)),
                               rtol=1e-5, atol=1e-6)


def test_in_place_keeps_the_callers_arrays():
    """An intermediate is written in place; arrays the caller holds keep their values."""
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    xa = nv.array(x)
    y = nv.fast.causal_softmax(xa * 2, 2)  # the product has no other reference
    z = nv.fast.causal_softmax(xa, 2)      # xa is held: copied, not overwritten
    s = nv.fast.softmax(xa + 1)
    nv.eval(y, z, s)
    np.testing.assert_array_equal(np.array(xa), x)
    np.testing.assert_allclose(np.array(y), causal_ref(2 * x, 2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(z), causal_ref(x, 2), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(s), causal_ref(x + 1, 1), rtol=1e-5, atol=1e-6)


def numeric_grad(f, x, cot, h=1e-6):
    g = np.zeros_like(x)
    for k in np.ndindex(*x.shape):
        up, dn = x.copy(), x.copy()
        up[k] += h
        dn[k] -= h
        g[k] = ((f(up) * cot).sum() - (f(dn) * cot).sum()) / (2 * h)
    return g


@pytest.mark.parametrize("rows", [1, 3, 7])
def test_causal_softmax_vjp_jvp_finite_differences(rows):
    x = RNG.standard_normal((2 * rows if rows < 7 else 7, 5))
    cot = np.cos(np.arange(x.size)).reshape(x.shape) + 0.5
    want = numeric_grad(lambda v: causal_ref(v, rows), x, cot)
    f = lambda v: nv.fast.causal_softmax(v, rows)  # noqa: E731
    _, (g,) = nv.vjp(f, [nv.array(x, dtype=nv.float64)], [nv.array(cot, dtype=nv.float64)])
    np.testing.assert_allclose(np.array(g), want, rtol=1e-6, atol=1e-8)
    t = RNG.standard_normal(x.shape)
    h = 1e-6
    jv_want = (causal_ref(x + h * t, rows) - causal_ref(x - h * t, rows)) / (2 * h)
    _, (jv,) = nv.jvp(f, [nv.array(x, dtype=nv.float64)], [nv.array(t, dtype=nv.float64)])
    np.testing.assert_allclose(np.array(jv), jv_want, rtol=1e-6, atol=1e-8)


def test_grad_in_low_precision():
    x = nv.array(RNG.standard_normal((4, 8)), dtype=nv.bfloat16)
    g = nv.grad(lambda v: (nv.fast.causal_softmax(v, 4) * nv.arange(8)).sum())(x)
    assert g.dtype == nv.bfloat16 and g.shape == (4, 8)
    assert np.all(np.array(g.astype(nv.float32))[0, 6:] == 0)  # unseen columns get nothing


def test_vmap_causal_softmax():
    x = RNG.standard_normal((3, 4, 6))
    want = np.stack([causal_ref(x[i], 2) for i in range(3)])
    got = nv.vmap(lambda v: nv.fast.causal_softmax(v, 2))(nv.array(x, dtype=nv.float64))
    np.testing.assert_allclose(np.array(got), want, atol=1e-13)
    # Mapped along the last axis: the logical rows are the other axes.
    xt = np.ascontiguousarray(np.moveaxis(x, 0, -1))
    got = nv.vmap(lambda v: nv.fast.causal_softmax(v, 2), in_axes=2)(nv.array(xt, dtype=nv.float64))
    np.testing.assert_allclose(np.array(got), want, atol=1e-13)


def test_errors():
    with pytest.raises(ValueError, match="divide"):
        nv.fast.causal_softmax(nv.zeros((3, 4)), 2)
    with pytest.raises(ValueError, match="floating"):
        nv.fast.causal_softmax(nv.zeros((3, 4), dtype=nv.int32), 1)
    with pytest.raises(ValueError, match="integer dtype"):
        nv.fast.sorted_offsets(nv.zeros((3,)), 2)
    with pytest.raises(ValueError, match="groups"):
        nv.fast.sorted_offsets(nv.zeros((3,), dtype=nv.int32), -2)


def paged_ref(pool, values, slots):
    out = np.array(pool, copy=True)
    flat = out.reshape((pool.shape[0] * pool.shape[1],) + pool.shape[2:])
    for t, s in enumerate(slots):
        if s >= 0:
            flat[s] = values[t]
    return out


def test_paged_write():
    pool = RNG.standard_normal((5, 4, 2, 3)).astype(np.float32)
    vals = RNG.standard_normal((6, 2, 3)).astype(np.float32)
    slots = np.array([19, -1, 0, 7, 4, -1], np.int32)
    got = nv.fast.paged_write(nv.array(pool), nv.array(vals), nv.array(slots))
    np.testing.assert_array_equal(np.array(got), paged_ref(pool, vals, slots))
    pa = nv.array(pool)
    got = nv.fast.paged_write(cache_pool=pa * 1, values=nv.array(vals),
                              slot_mapping=nv.array(slots))  # an intermediate pool: in place
    nv.eval(got)
    np.testing.assert_array_equal(np.array(got), paged_ref(pool, vals, slots))
    np.testing.assert_array_equal(np.array(pa), pool)
    with pytest.raises(Exception, match="out of range"):
        nv.eval(nv.fast.paged_write(pa, nv.array(vals), nv.array(slots + 20)))


def test_paged_write_grads_and_vmap():
    pool, vals = RNG.standard_normal((3, 2, 4)), RNG.standard_normal((3, 4))
    slots = nv.array(np.array([5, -1, 1], np.int32))
    w = RNG.standard_normal((3, 2, 4))
    f = lambda p, v: (nv.fast.paged_write(p, v, slots) * nv.array(w)).sum()  # noqa: E731
    gp, gv = nv.grad(f, argnums=(0, 1))(nv.array(pool), nv.array(vals))
    want_p = w.copy().reshape(6, 4)
    want_p[[5, 1]] = 0  # overwritten slots pass nothing back to the pool
    np.testing.assert_allclose(np.array(gp), want_p.reshape(3, 2, 4))
    want_v = np.stack([w.reshape(6, 4)[5], np.zeros(4), w.reshape(6, 4)[1]])
    np.testing.assert_allclose(np.array(gv), want_v)
    t = RNG.standard_normal((3, 4))
    _, (jv,) = nv.jvp(lambda v: nv.fast.paged_write(nv.array(pool), v, slots),
                      [nv.array(vals)], [nv.array(t)])
    np.testing.assert_allclose(np.array(jv), paged_ref(np.zeros_like(pool), t, [5, -1, 1]))
    pools = RNG.standard_normal((2, 3, 2, 4))
    got = nv.vmap(lambda p: nv.fast.paged_write(p, nv.array(vals), slots))(nv.array(pools))
    np.testing.assert_allclose(np.array(got), np.stack([paged_ref(p, vals, [5, -1, 1])
                                                        for p in pools]))
    sl = np.array([[0, 1, 2], [5, 4, -1]], np.int32)
    got = nv.vmap(lambda s: nv.fast.paged_write(nv.array(pool), nv.array(vals), s))(nv.array(sl))
    np.testing.assert_allclose(np.array(got), np.stack([paged_ref(pool, vals, s) for s in sl]))


def conv_ref(x, w, b, pool, slots, silu):
    pool = np.array(pool, np.float64, copy=True)
    y = np.zeros(x.shape)
    for n, s in enumerate(slots):
        if s >= 0:
            win = np.concatenate([pool[s], x[n][:, None]], axis=1)
            v = (win * w).sum(axis=1) + (b if b is not None else 0)
            y[n] = v / (1 + np.exp(-v)) if silu else v
            pool[s] = win[:, 1:]
    return y, pool


def test_conv_slots():
    x, w, b = RNG.standard_normal((4, 6)), RNG.standard_normal((6, 4)), RNG.standard_normal(6)
    pool = RNG.standard_normal((5, 6, 3))
    slots = np.array([2, -1, 4, 0], np.int32)
    f32 = lambda a: nv.array(a, dtype=nv.float32)  # noqa: E731
    y, p = nv.fast.conv_slots(f32(x), f32(w), f32(b), f32(pool), nv.array(slots), silu=True)
    wy, wp = conv_ref(x, w, b, pool, slots, True)
    np.testing.assert_allclose(np.array(y), wy, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(p), wp, rtol=1e-6, atol=1e-7)
    held = f32(pool)
    y, p = nv.fast.conv_slots(x=f32(x), weight=f32(w), bias=None, conv_state_pool=held * 1,
                              slot_ids=nv.array(slots))  # an intermediate pool: in place
    wy, wp = conv_ref(x, w, None, pool, slots, False)
    np.testing.assert_allclose(np.array(y), wy, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.array(p), wp, rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(np.array(held), pool.astype(np.float32))
    with pytest.raises(ValueError, match="conv_state_pool"):
        nv.fast.conv_slots(f32(x), f32(w), None, f32(pool[:, :, :2]), nv.array(slots))


def test_conv_slots_grads_and_vmap():
    x, w, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 3)), RNG.standard_normal(4)
    pool = RNG.standard_normal((4, 4, 2))
    slots = [3, -1, 1]
    sl = nv.array(np.array(slots, np.int32))
    cy, cp = np.cos(np.arange(12)).reshape(3, 4), np.sin(np.arange(32)).reshape(4, 4, 2)
    h = 1e-6
    args = [x, w, b, pool]

    def loss_np(*a):
        y, p = conv_ref(a[0], a[1], a[2], a[3], slots, True)
        return (y * cy).sum() + (p * cp).sum()

    def loss_nv(xx, ww, bb, pp):
        y, p = nv.fast.conv_slots(xx, ww, bb, pp, sl, silu=True)
        return (y * nv.array(cy)).sum() + (p * nv.array(cp)).sum()

    grads = nv.grad(loss_nv, argnums=(0, 1, 2, 3))(*[nv.array(a, dtype=nv.float64) for a in args])
    for i, a in enumerate(args):
        want = np.zeros_like(a)
        for k in np.ndindex(*a.shape):
            up = [v.copy() for v in args]
            dn = [v.copy() for v in args]
            up[i][k] += h
            dn[i][k] -= h
            want[k] = (loss_np(*up) - loss_np(*dn)) / (2 * h)
        np.testing.assert_allclose(np.array(grads[i]), want, rtol=1e-6, atol=1e-8)
    tx = RNG.standard_normal(x.shape)
    d = lambda a: nv.array(a, dtype=nv.float64)  # noqa: E731
    _, (jy, jp) = nv.jvp(lambda xx: nv.fast.conv_slots(xx, d(w), d(b), d(pool), sl),
                         [d(x)], [d(tx)])
    fd = [(u - d) / (2 * h) for u, d in zip(conv_ref(x + h * tx, w, b, pool, slots, False),
                                            conv_ref(x - h * tx, w, b, pool, slots, False))]
    np.testing.assert_allclose(np.array(jy), fd[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.array(jp), fd[1], rtol=1e-6, atol=1e-8)
    pools = RNG.standard_normal((2, 4, 4, 2))
    ys, ps = nv.vmap(lambda pp: nv.fast.conv_slots(d(x), d(w), None, pp, sl))(d(pools))
    for i in range(2):
        wy, wp = conv_ref(x, w, None, pools[i], slots, False)
        np.testing.assert_allclose(np.array(ys[i]), wy, atol=1e-12)
        np.testing.assert_allclose(np.array(ps[i]), wp, atol=1e-12)
