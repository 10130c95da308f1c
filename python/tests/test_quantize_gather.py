"""nuvec.gather_qmm (the GATHER_QMM primitive) against mlx.core.gather_qmm and a NumPy
reference: MLX's keywords, unsorted and sorted MoE routing, lhs and rhs indices, every mode,
dtypes; the transforms: grad in x (by finite differences, and repeated lhs indices adding up),
jvp, and vmap over x, over w and over the indices."""
import numpy as np
import pytest

import nuvec as nv


def mlx():
    try:
        import mlx.core as mx
    except ImportError:
        return None
    return mx


def deq(q, s, b, gs, bits, mode):
    return np.array(nv.dequantize(q, s, b, gs, bits, mode=mode, dtype=nv.float32)).astype(
        np.float64)


def experts(rng, E, N, K, gs=64, bits=4, mode="affine"):
    w = nv.array(rng.standard_normal((E, N, K)).astype(np.float32))
    out = nv.quantize(w, gs, bits, mode=mode)
    return (out[0], out[1], out[2] if mode == "affine" else None)


@pytest.mark.parametrize("mode,gs,bits", [("affine", 64, 4), ("affine", 32, 8),
                                          ("affine", 128, 3), ("mxfp4", 32, 4),
                                          ("mxfp8", 32, 8), ("nvfp4", 16, 4)])
@pytest.mark.parametrize("sorted_indices", [False, True])
def test_against_mlx(rng, mode, gs, bits, sorted_indices):
    mx = mlx()
    if mx is None:
        pytest.skip("mlx is not installed")
    E, N, K, T = 8, 24, 256, 12
    q, s, b = experts(rng, E, N, K, gs, bits, mode)
    x = rng.standard_normal((T, 1, 1, K)).astype(np.float32)
    ri = rng.integers(0, E, (T, 2)).astype(np.uint32)
    xx = x
    if sorted_indices:  # MLX's MoE pattern: flatten, sort by expert, gather rows
        order = np.argsort(ri.reshape(-1), kind="stable")
        ri = ri.reshape(-1)[order]
        xx = x.reshape(T, 1, K)[order // 2][:, None]
    got = nv.gather_qmm(nv.array(xx), q, s, b, rhs_indices=nv.array(ri), transpose=True,
                        group_size=gs, bits=bits, mode=mode, sorted_indices=sorted_indices)
    ref = mx.gather_qmm(mx.array(xx), mx.array(np.array(q)), mx.array(np.array(s)),
                        None if b is None else mx.array(np.array(b)),
                        rhs_indices=mx.array(ri), transpose=True, group_size=gs, bits=bits,
                        mode=mode, sorted_indices=sorted_indices)
    assert got.shape == tuple(ref.shape)
    np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-4, atol=1e-3)


def test_lhs_and_rhs_against_numpy(rng):
    q, s, b = experts(rng, 4, 16, 128)
    x = rng.standard_normal((3, 2, 128)).astype(np.float32)
    li = np.array([[2, 0, 2], [1, 1, 0]], np.int32)
    ri = np.array([[3, 0, 0], [1, 2, 3]], np.int32)
    got = nv.gather_qmm(nv.array(x), q, s, b, lhs_indices=nv.array(li),
                        rhs_indices=nv.array(ri))
    wd = deq(q, s, b, 64, 4, "affine")
    want = x.astype(np.float64)[li] @ np.swapaxes(wd[ri], -1, -2)
    assert got.shape == (2, 3, 2, 16)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-4)
    mx = mlx()
    if mx is not None:
        ref = mx.gather_qmm(mx.array(x), mx.array(np.array(q)), mx.array(np.array(s)),
                            mx.array(np.array(b)), lhs_indices=mx.array(li),
                            rhs_indices=mx.array(ri))
        np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-4, atol=1e-4)


def test_bfloat16_and_out_of_range():
    rng = np.random.default_rng(3)
    q, s, b = experts(rng, 3, 8, 64)
    x = nv.array(rng.standard_normal((2, 1, 64)).astype(np.float32)).astype(nv.bfloat16)
    sb, bb = s.astype(nv.bfloat16), b.astype(nv.bfloat16)
    got = nv.gather_qmm(x, q, sb, bb, rhs_indices=nv.array([2, 0]), transpose=True)
    assert got.dtype == nv.bfloat16 and got.shape == (2, 1, 8)
    with pytest.raises(ValueError, match="gather_qmm: index 5 is out of range"):
        nv.eval(nv.gather_qmm(x, q, sb, bb, rhs_indices=nv.array([5, 0])))


def test_grad_in_x(rng):
    q, s, b = experts(rng, 3, 24, 64)
    x = rng.standard_normal((2, 2, 64)).astype(np.float32)
    li, ri = nv.array([1, 0, 1, 1]), nv.array([2, 2, 0, 1])
    c = rng.standard_normal((4, 2, 24)).astype(np.float32)

    def f(x):
        return nv.sum(nv.gather_qmm(x, q, s, b, lhs_indices=li, rhs_indices=ri) * nv.array(c))

    g = np.array(nv.grad(f)(nv.array(x)))
    wd = deq(q, s, b, 64, 4, "affine")
    want = np.zeros_like(x, dtype=np.float64)
    for p, (l, r) in enumerate(zip([1, 0, 1, 1], [2, 2, 0, 1])):
        want[l] += c[p].astype(np.float64) @ wd[r]
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)
    eps = 1e-2
    for idx in [(0, 0, 0), (1, 1, 63), (1, 0, 17)]:
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        fd = (float(f(nv.array(xp))) - float(f(nv.array(xm)))) / (2 * eps)
        assert abs(fd - g[idx]) < 2e-2 * max(1, abs(g[idx])), idx
    # jvp: the product of the tangent.
    t = rng.standard_normal(x.shape).astype(np.float32)
    _, jt = nv.jvp(lambda x: nv.gather_qmm(x, q, s, b, lhs_indices=li, rhs_indices=ri),
                   [nv.array(x)], [nv.array(t)])
    want = t.astype(np.float64)[[1, 0, 1, 1]] @ np.swapaxes(wd[[2, 2, 0, 1]], -1, -2)
    np.testing.assert_allclose(np.array(jt[0]), want, rtol=1e-4, atol=1e-4)


def test_vmap(rng):
    q, s, b = experts(rng, 6, 16, 64)
    wd = deq(q, s, b, 64, 4, "affine")
    x = rng.standard_normal((5, 3, 1, 64)).astype(np.float32)
    ri = np.array([[0, 5, -1], [2, 2, 1], [3, 0, 0], [4, 1, 2], [5, 5, 5]], np.int32)
    # x and the indices mapped, w shared.
    got = nv.vmap(lambda x, r: nv.gather_qmm(x, q, s, b, rhs_indices=r))(nv.array(x),
                                                                          nv.array(ri))
    want = x.astype(np.float64) @ np.swapaxes(wd[ri], -1, -2)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-4)
    # w mapped (5 stacks of 6 experts' scales: only the scales differ), indices shared.
    sv = nv.stack([s * (1 + 0.1 * i) for i in range(5)])
    bv = nv.stack([b for _ in range(5)])
    qv = nv.stack([q for _ in range(5)])
    r0 = nv.array([1, 4, 1])
    got = nv.vmap(lambda q, s, b: nv.gather_qmm(nv.array(x[0]), q, s, b, rhs_indices=r0))(
        qv, sv, bv)
    for i in range(5):
        wi = deq(q, s * (1 + 0.1 * i), b, 64, 4, "affine")
        want = x[0].astype(np.float64) @ np.swapaxes(wi[[1, 4, 1]], -1, -2)
        np.testing.assert_allclose(np.array(got[i]), want, rtol=1e-5, atol=1e-4)
    # An out-of-range index under vmap still fails.
    bad = ri.copy()
    bad[3, 1] = 6
    with pytest.raises(ValueError, match="gather_qmm: index"):
        nv.eval(nv.vmap(lambda x, r: nv.gather_qmm(x, q, s, b, rhs_indices=r))(
            nv.array(x), nv.array(bad)))
