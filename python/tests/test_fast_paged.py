"""nuvec.fast.paged_attention against NumPy (float64) and, where MLX is installed, against
mx.fast.scaled_dot_product_attention over the same keys laid out contiguously: decode and
chunked prefill after paged_write filled the pool (the two ops round-trip), grouped-query
heads, keywords; vjp (q and both pools) and jvp by central finite differences in float64;
vmap over q, the pools and the tables (all through the composed form, compared with the fused
op); the evaluation error of a bad block id."""
import numpy as np
import pytest

import nuvec as nv
import nuvec.fast

RNG = np.random.default_rng(18)


def paged_ref(q, kp, vp, tables, lens, scale):
    """The definition in float64 (include/nuvec/fast.h): query i of a chunk of c at the end of
    a context of L keys sees the keys j <= L - c + i; no key gives 0."""
    T, Hq, D = q.shape
    NB, BS, Hkv, Dv = vp.shape
    S = tables.shape[0]
    c, G = T // S, Hq // Hkv
    kf, vf = kp.reshape(-1, Hkv, D), vp.reshape(-1, Hkv, Dv)
    out = np.zeros((T, Hq, Dv))
    for s in range(S):
        j = np.arange(lens[s])
        slots = np.asarray(tables)[s, j // BS] * BS + j % BS
        for i in range(c):
            n = lens[s] - c + i + 1
            for h in range(Hq):
                if n > 0:
                    sc = scale * (kf[slots[:n], h // G] @ q[s * c + i, h])
                    e = np.exp(sc - sc.max())
                    out[s * c + i, h] = e @ vf[slots[:n], h // G] / e.sum()
    return out


def fill_pool(lens, BS, Hkv, D, dtype, extra=2):
    """Pools written by paged_write from contiguous keys and values [S, Lmax, Hkv, D]: sequence
    s's keys at the blocks of its table (a shuffled list of distinct blocks)."""
    S, Lmax = len(lens), max(lens)
    M = -(-Lmax // BS)
    NB = S * M + extra
    perm = RNG.permutation(NB).astype(np.int32)
    tables = perm[:S * M].reshape(S, M)
    k = RNG.standard_normal((S, Lmax, Hkv, D))
    v = RNG.standard_normal((S, Lmax, Hkv, D))
    slots = np.full((S, Lmax), -1, np.int64)  # past a context: skipped
    for s, L in enumerate(lens):
        j = np.arange(L)
        slots[s, :L] = tables[s, j // BS] * BS + j % BS
    pools = []
    for x in (k, v):
        pool = nv.zeros((NB, BS, Hkv, D), dtype=dtype)
        pools.append(nv.fast.paged_write(pool, nv.array(x.reshape(-1, Hkv, D), dtype=dtype),
                                         nv.array(slots.reshape(-1))))
    return pools, k, v, tables


@pytest.mark.parametrize("c", [1, 3])
@pytest.mark.parametrize("dtype", [nv.float32, nv.bfloat16])
def test_round_trip_with_paged_write(c, dtype):
    lens, BS, Hq, Hkv, D = [37, 5, 64], 16, 8, 2, 64
    (kp, vp), k, v, tables = fill_pool(lens, BS, Hkv, D, dtype)
    q = RNG.standard_normal((len(lens) * c, Hq, D))
    scale = D ** -0.5
    got = nv.fast.paged_attention(nv.array(q, dtype=dtype), kp, vp, nv.array(tables),
                                  nv.array(np.array(lens, np.int32)), scale)
    assert got.dtype == dtype and got.shape == (len(lens) * c, Hq, D)
    kp64, vp64 = np.array(kp.astype(nv.float32)), np.array(vp.astype(nv.float32))
    q64 = np.array(nv.array(q, dtype=dtype).astype(nv.float32)).astype(np.float64)
    want = paged_ref(q64, kp64, vp64, tables, lens, scale)
    tol = 2e-2 if dtype == nv.bfloat16 else 2e-5
    np.testing.assert_allclose(np.array(got.astype(nv.float32)), want, atol=tol * 4, rtol=tol)


def test_against_mlx_sdpa():
    mx = pytest.importorskip("mlx.core")
    lens, BS, Hq, Hkv, D = [40, 40], 16, 4, 2, 32
    (kp, vp), k, v, tables = fill_pool(lens, BS, Hkv, D, nv.float32)
    q = RNG.standard_normal((2, Hq, D)).astype(np.float32)
    got = nv.fast.paged_attention(q=nv.array(q), k_pool=kp, v_pool=vp,
                                  block_tables=nv.array(tables),
                                  context_lens=nv.array(np.array(lens, np.int32)), scale=0.2)
    # MLX's SDPA over the same keys: [B, H, L, D], one query each
    tr = lambda x: mx.array(x.astype(np.float32).transpose(0, 2, 1, 3))  # noqa: E731
    want = mx.fast.scaled_dot_product_attention(mx.array(q[:, :, None, :]), tr(k), tr(v),
                                                scale=0.2)
    np.testing.assert_allclose(np.array(got), np.array(want)[:, :, 0, :], rtol=1e-5, atol=1e-6)


def small_case(c=2):
    BS, Hkv, D = 3, 1, 4
    lens = [5, 2]
    NB = 6
    tables = np.array([[4, 1], [0, 5]], np.int32)
    kp = RNG.standard_normal((NB, BS, Hkv, D))
    vp = RNG.standard_normal((NB, BS, Hkv, D))
    q = RNG.standard_normal((2 * c, 2, D))
    return q, kp, vp, tables, lens


def d(x):
    """x as a float64 nuvec array (nv.array makes float32 of float64 data, as MLX)."""
    return nv.array(x, dtype=nv.float64)


def numeric_grad(f, x, cot, h=1e-6):
    g = np.zeros_like(x)
    for k in np.ndindex(*x.shape):
        up, dn = x.copy(), x.copy()
        up[k] += h
        dn[k] -= h
        g[k] = ((f(up) * cot).sum() - (f(dn) * cot).sum()) / (2 * h)
    return g


def test_vjp_jvp_finite_differences():
    q, kp, vp, tables, lens = small_case()
    t_, l_ = nv.array(tables), nv.array(np.array(lens, np.int32))
    f = lambda a, b, c: nv.fast.paged_attention(a, b, c, t_, l_, 0.7)  # noqa: E731
    cot = np.cos(np.arange(q.size)).reshape(q.shape) + 0.5
    _, g = nv.vjp(f, [d(x) for x in (q, kp, vp)], [d(cot)])
    refs = [lambda x: paged_ref(x, kp, vp, tables, lens, 0.7),
            lambda x: paged_ref(q, x, vp, tables, lens, 0.7),
            lambda x: paged_ref(q, kp, x, tables, lens, 0.7)]
    for i, x in enumerate((q, kp, vp)):
        np.testing.assert_allclose(np.array(g[i]), numeric_grad(refs[i], x, cot), rtol=1e-6,
                                   atol=1e-8)
    # unread blocks (2, 3) get nothing
    assert np.all(np.array(g[1])[[2, 3]] == 0)
    t = RNG.standard_normal(kp.shape)
    h = 1e-6
    want = (paged_ref(q, kp + h * t, vp, tables, lens, 0.7) -
            paged_ref(q, kp - h * t, vp, tables, lens, 0.7)) / (2 * h)
    _, (jv,) = nv.jvp(lambda b: f(d(q), b, d(vp)), [d(kp)], [d(t)])
    np.testing.assert_allclose(np.array(jv), want, rtol=1e-6, atol=1e-8)


def test_grad_in_low_precision():
    q, kp, vp, tables, lens = small_case(1)
    g = nv.grad(lambda a: nv.fast.paged_attention(
        a, nv.array(kp, dtype=nv.bfloat16), nv.array(vp, dtype=nv.bfloat16), nv.array(tables),
        nv.array(np.array(lens, np.int32)), 0.5).astype(nv.float32).sum())(
            nv.array(q, dtype=nv.bfloat16))
    assert g.dtype == nv.bfloat16 and g.shape == q.shape


def test_vmap_matches_fused():
    q, kp, vp, tables, lens = small_case()
    qs = RNG.standard_normal((3,) + q.shape)
    t_, l_ = nv.array(tables), nv.array(np.array(lens, np.int32))
    got = nv.vmap(lambda a: nv.fast.paged_attention(a, d(kp), d(vp), t_, l_, 0.4))(
        d(qs))
    want = np.stack([paged_ref(x, kp, vp, tables, lens, 0.4) for x in qs])
    np.testing.assert_allclose(np.array(got), want, rtol=1e-6, atol=1e-8)
    # the tables batched (in_axes=1) and the pools batched
    tb = np.stack([tables, tables[::-1]], 1)
    got = nv.vmap(lambda tt: nv.fast.paged_attention(d(q), d(kp), d(vp), tt,
                                                     l_, 0.4), in_axes=1)(nv.array(tb))
    want = np.stack([paged_ref(q, kp, vp, tb[:, b], lens, 0.4) for b in range(2)])
    np.testing.assert_allclose(np.array(got), want, rtol=1e-6, atol=1e-8)
    kps = RNG.standard_normal((2,) + kp.shape)
    got = nv.vmap(lambda kk: nv.fast.paged_attention(d(q), kk, d(vp), t_, l_, 0.4))(
        d(kps))
    want = np.stack([paged_ref(q, x, vp, tables, lens, 0.4) for x in kps])
    np.testing.assert_allclose(np.array(got), want, rtol=1e-6, atol=1e-8)


def test_bad_block_fails_evaluation():
    q, kp, vp, tables, lens = small_case(1)
    bad = tables.copy()
    bad[0, 1] = 6
    out = nv.fast.paged_attention(nv.array(q), nv.array(kp), nv.array(vp), nv.array(bad),
                                  nv.array(np.array(lens, np.int32)), 0.5)
    with pytest.raises(Exception, match="paged_attention: index 6 is out of range"):
        nv.eval(out)
    with pytest.raises(Exception, match="multiple of the 2 sequences"):
        nv.fast.paged_attention(nv.array(np.concatenate([q, q[:1]])), nv.array(kp), nv.array(vp),
                                nv.array(tables),
                                nv.array(np.array(lens, np.int32)), 0.5)
