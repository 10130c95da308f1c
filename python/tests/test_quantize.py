"""nuvec.quantize / dequantize / quantized_matmul against mlx.core: MLX's signatures and
defaults, the same bits for quantize and dequantize in every mode, quantized_matmul's values,
dtypes and shapes, MLX's errors, and the transforms (grad in x by finite differences, vmap)."""
import ml_dtypes
import numpy as np
import pytest

import nuvec as nv

MODES = {"affine": (64, 4), "mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}


def mlx():
    try:
        import mlx.core as mx
    except ImportError:
        return None
    return mx


def np_of(a):
    a = np.array(a.astype(nv.float32)) if a.dtype == nv.bfloat16 else np.array(a)
    return a


def test_defaults_and_outputs(rng):
    w = nv.array(rng.standard_normal((8, 128)).astype(np.float32))
    q, s, b = nv.quantize(w)
    assert q.dtype == nv.uint32 and q.shape == (8, 16)
    assert s.dtype == nv.float32 and s.shape == (8, 2) and b.shape == (8, 2)
    for mode, (gs, bits) in MODES.items():
        if mode == "affine":
            continue
        q, s = nv.quantize(w, mode=mode)
        assert q.shape == (8, 128 * bits // 32) and s.dtype == nv.uint8
        assert s.shape == (8, 128 // gs)
        assert nv.dequantize(q, s, mode=mode).dtype == nv.bfloat16
        assert nv.dequantize(q, s, mode=mode, dtype=nv.float16).dtype == nv.float16


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_bits_match_mlx(rng, dtype, mode):
    mx = mlx()
    if mx is None:
        pytest.skip("mlx is not installed")
    w32 = (rng.standard_normal((4, 256)) * np.exp(rng.uniform(-4, 4, (4, 1)))).astype(np.float32)
    settings = [(g, b) for b in (1, 2, 3, 4, 5, 6, 8) for g in (32, 64, 128)] \
        if mode == "affine" else [MODES[mode]]
    for gs, bits in settings:
        ours = nv.quantize(nv.array(w32).astype(getattr(nv, dtype)), gs, bits, mode=mode)
        theirs = mx.quantize(mx.array(w32).astype(getattr(mx, dtype)), gs, bits, mode=mode)
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            assert str(o.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
            to = np.array(o.astype(nv.float32)) if o.dtype == nv.bfloat16 else np.array(o)
            tt = np.array(t.astype(mx.float32)) if t.dtype == mx.bfloat16 else np.array(t)
            np.testing.assert_array_equal(to, tt, err_msg=f"{mode} {gs} {bits}")
        d = nv.dequantize(*ours, group_size=gs, bits=bits, mode=mode)
        dm = mx.dequantize(*theirs, group_size=gs, bits=bits, mode=mode)
        np.testing.assert_array_equal(np.array(d.astype(nv.float32)),
                                      np.array(dm.astype(mx.float32)))


def dequantized(q, s, b, gs, bits, mode):
    return np.array(nv.dequantize(q, s, b, group_size=gs, bits=bits, mode=mode,
                                  dtype=nv.float32)).astype(np.float64)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("transpose", [True, False])
def test_quantized_matmul(rng, mode, transpose):
    gs, bits = MODES[mode]
    K, N = 128, 64
    w = nv.array(rng.standard_normal((N, K) if transpose else (K, N)).astype(np.float32))
    out = nv.quantize(w, mode=mode)
    q, s, b = out[0], out[1], out[2] if mode == "affine" else None
    x = rng.standard_normal((2, 3, K)).astype(np.float32)
    got = nv.quantized_matmul(nv.array(x), q, s, b, transpose=transpose, mode=mode)
    wd = dequantized(q, s, b, gs, bits, mode)
    want = x.astype(np.float64) @ (wd.T if transpose else wd)
    assert got.shape == (2, 3, N) and got.dtype == nv.float32
    np.testing.assert_allclose(np.array(got), want, rtol=1e-4, atol=1e-3)
    mx = mlx()
    if mx is not None:
        args = [mx.array(np.array(a)) for a in out]
        if mode != "affine":
            args.insert(2, None)
        ref = mx.quantized_matmul(mx.array(x), *args, transpose=transpose, mode=mode)
        np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-4, atol=1e-3)


def test_result_dtype_matches_mlx(rng):
    w = nv.array(rng.standard_normal((32, 128)).astype(np.float32))
    q, s, b = nv.quantize(w, 64, 4)
    x16 = nv.array(rng.standard_normal((3, 128)).astype(np.float16))
    assert nv.quantized_matmul(x16, q, s, b).dtype == nv.float32
    assert nv.quantized_matmul(x16, q, s.astype(nv.float16), b.astype(nv.float16)).dtype == \
        nv.float16
    qf, sf = nv.quantize(w, mode="nvfp4")
    assert nv.quantized_matmul(x16, qf, sf, mode="nvfp4").dtype == nv.float16
    assert nv.quantized_matmul(nv.ones((128,)), q, s, b).shape == (32,)


def test_errors_match_mlx():
    w = nv.ones((4, 64))
    with pytest.raises(ValueError, match="group size 16 is not supported"):
        nv.quantize(w, 16, 4)
    with pytest.raises(ValueError, match="requires group size 32 but got 64"):
        nv.quantize(w, 64, mode="mxfp4")
    with pytest.raises(ValueError, match="Invalid quantization mode|invalid quantization mode"):
        nv.quantize(w, mode="foo")
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        nv.quantize(nv.ones((64,)))
    q, s, b = nv.quantize(w)
    with pytest.raises(ValueError, match="quantized_matmul: the last dimension of x"):
        nv.quantized_matmul(nv.ones((2, 32)), q, s, b)
    # A global scale is nvfp4's alone (python/tests/test_qq.py tests it).
    with pytest.raises(ValueError, match="global scale is only supported for 'nvfp4'"):
        nv.quantize(w, global_scale=nv.array(1.0))


def test_grad_in_x_by_finite_differences(rng):
    for transpose in (True, False):
        w = nv.array(rng.standard_normal((24, 64) if transpose else (64, 32)).astype(np.float32))
        q, s, b = nv.quantize(w, 32, 4)
        x = rng.standard_normal((3, 64)).astype(np.float32)
        c = rng.standard_normal((3, 24 if transpose else 32)).astype(np.float32)

        def f(x):
            return nv.sum(nv.quantized_matmul(x, q, s, b, transpose, 32, 4) * nv.array(c))

        g = np.array(nv.grad(f)(nv.array(x)))
        # f is linear in x: its central differences are exact up to rounding.
        eps, fd = 1e-2, np.zeros_like(x)
        for idx in [(0, 0), (1, 7), (2, 63), (2, 31)]:
            xp, xm = x.copy(), x.copy()
            xp[idx] += eps
            xm[idx] -= eps
            fd[idx] = (float(f(nv.array(xp))) - float(f(nv.array(xm)))) / (2 * eps)
            assert abs(fd[idx] - g[idx]) < 2e-2 * max(1, abs(g[idx])), (transpose, idx)
        wd = dequantized(q, s, b, 32, 4, "affine")
        np.testing.assert_allclose(g, c @ (wd if transpose else wd.T), rtol=1e-4, atol=1e-4)


def test_vmap_over_x_and_w(rng):
    w = nv.array(rng.standard_normal((5, 16, 64)).astype(np.float32))
    q, s, b = nv.quantize(w, 64, 4)
    x = nv.array(rng.standard_normal((5, 2, 64)).astype(np.float32))
    got = nv.vmap(lambda x, q, s, b: nv.quantized_matmul(x, q, s, b))(x, q, s, b)
    wd = np.array(nv.dequantize(q, s, b, 64, 4)).astype(np.float64)
    want = np.einsum("bmk,bnk->bmn", np.array(x).astype(np.float64), wd)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-4)
    # x batched alone, w shared.
    q0, s0, b0 = q[0], s[0], b[0]
    got = nv.vmap(lambda x: nv.quantized_matmul(x, q0, s0, b0))(x)
    np.testing.assert_allclose(np.array(got), np.array(nv.quantized_matmul(x, q0, s0, b0)),
                               rtol=1e-5, atol=1e-5)
    # quantize and dequantize map over a batch axis in the middle.
    wt = nv.moveaxis(w, 0, 1)
    qs = nv.vmap(lambda w: nv.quantize(w, 64, 4), in_axes=1)(wt)
    for a, r in zip(qs, (q, s, b)):
        np.testing.assert_array_equal(np.array(a), np.array(r))
    d = nv.vmap(lambda q, s, b: nv.dequantize(q, s, b, 64, 4))(q, s, b)
    np.testing.assert_array_equal(np.array(d), np.array(nv.dequantize(q, s, b, 64, 4)))


def test_gather_mm_matches_numpy_and_mlx(rng):
    a = rng.standard_normal((4, 3, 5, 8)).astype(np.float32)
    b = rng.standard_normal((6, 8, 7)).astype(np.float32)
    li = np.array([[0, 3], [11, 2]], np.uint32)
    ri = np.array([1, 5], np.int32)
    got = nv.gather_mm(nv.array(a), nv.array(b), nv.array(li), nv.array(ri))
    want = a.reshape(12, 5, 8)[li] @ b[ri]
    assert got.shape == (2, 2, 5, 7)
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)
    # Without indices: every matrix, in the operand's batch shape (broadcast).
    got = nv.gather_mm(nv.array(a), nv.array(b[:3].reshape(3, 8, 7)))
    np.testing.assert_allclose(np.array(got), a @ b[:3], rtol=1e-5, atol=1e-5)
    mx = mlx()
    if mx is not None:
        ref = mx.gather_mm(mx.array(a), mx.array(b), mx.array(li), mx.array(ri),
                           sorted_indices=False)
        ours = nv.gather_mm(nv.array(a), nv.array(b), nv.array(li), nv.array(ri))
        np.testing.assert_allclose(np.array(ours), np.array(ref), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        nv.gather_mm(nv.array(a), nv.array(b), None, nv.array(ri))


def test_gather_qmm_moe_shape(rng):
    """8 tokens, each routed to one of 4 experts (sorted), against quantized_matmul per token."""
    w = nv.array(rng.standard_normal((4, 32, 128)).astype(np.float32))
    q, s, b = nv.quantize(w, 64, 4)
    x = rng.standard_normal((8, 1, 128)).astype(np.float32)
    ri = np.sort(rng.integers(0, 4, 8)).astype(np.uint32)
    got = nv.gather_qmm(nv.array(x), q, s, b, rhs_indices=nv.array(ri), sorted_indices=True)
    assert got.shape == (8, 1, 32)
    for t in range(8):
        one = nv.quantized_matmul(nv.array(x[t]), q[int(ri[t])], s[int(ri[t])], b[int(ri[t])])
        np.testing.assert_allclose(np.array(got)[t], np.array(one), rtol=1e-5, atol=1e-5)
    mx = mlx()
    if mx is not None:
        ref = mx.gather_qmm(mx.array(x), mx.array(np.array(q)), mx.array(np.array(s)),
                            mx.array(np.array(b)), rhs_indices=mx.array(ri), sorted_indices=True)
        np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-4, atol=1e-4)
    # The gradient in x flows through the gather.
    g = nv.grad(lambda x: nv.sum(nv.gather_qmm(x, q, s, b, rhs_indices=nv.array(ri))))(
        nv.array(x))
    wd = np.array(nv.dequantize(q, s, b)).astype(np.float64)
    want = np.stack([wd[int(r)].sum(0) for r in ri])[:, None, :]
    np.testing.assert_allclose(np.array(g), want, rtol=1e-4, atol=1e-4)


def test_segmented_mm(rng):
    a = rng.standard_normal((3, 10)).astype(np.float32)
    b = rng.standard_normal((10, 4)).astype(np.float32)
    seg = np.array([[0, 4], [4, 10], [2, 2], [7, 3], [0, 10]], np.int32)
    got = np.array(nv.segmented_mm(nv.array(a), nv.array(b), nv.array(seg)))
    assert got.shape == (5, 3, 4)
    for i, (s, e) in enumerate(seg):
        want = a[:, s:e] @ b[s:e] if e > s else np.zeros((3, 4))
        np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-5)
    mx = mlx()
    if mx is not None:
        ref = mx.segmented_mm(mx.array(a), mx.array(b), mx.array(seg))
        np.testing.assert_allclose(got, np.array(ref), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="batched matmul is not supported"):
        nv.segmented_mm(nv.ones((2, 3, 10)), nv.array(b), nv.array(seg))


@pytest.mark.parametrize("transpose", [True, False])
@pytest.mark.parametrize("xshape", [(5, 96), (2, 3, 96)])
def test_qmm_vjp_of_scales_and_biases_is_numpys(transpose, xshape):
    """d/d scales and d/d biases of sum(cot * quantized_matmul) against NumPy's chain rule over
    the dequantized matrix (scale * q + bias per group), batch axes of x summed."""
    rng = np.random.default_rng(3)
    gs, bits, N, K = 32, 4, 64, 96
    w = nv.array(rng.standard_normal((N, K) if transpose else (K, N)).astype(np.float32))
    wq, s, b = nv.quantize(w, gs, bits)
    xs = xshape  # (..., K): the output is (..., N) either way
    x = rng.standard_normal(xs).astype(np.float32)
    out_n = N
    cot = rng.standard_normal(xs[:-1] + (out_n,)).astype(np.float32)

    def f(s_, b_):
        return (nv.quantized_matmul(nv.array(x), wq, s_, b_, transpose, gs, bits) * nv.array(cot)).sum()

    ds, db = nv.grad(f, argnums=(0, 1))(s, b)
    q = np.array(nv.dequantize(wq, nv.ones_like(s), nv.zeros_like(b), gs, bits))
    x2, c2 = x.reshape(-1, xs[-1]), cot.reshape(-1, out_n)
    dw = c2.T @ x2 if transpose else x2.T @ c2  # d sum / d w_hat
    g = dw.reshape(*np.array(s).shape, gs)
    np.testing.assert_allclose(np.array(db), g.sum(-1), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.array(ds), (g * q.reshape(g.shape)).sum(-1), rtol=1e-4, atol=1e-3)
    assert ds.shape == s.shape and db.shape == b.shape and ds.dtype == s.dtype


@pytest.mark.parametrize("mode", ["mxfp4", "mxfp8", "nvfp4"])
def test_qmm_vjp_of_fp_scales_is_a_value_error(mode):
    w = nv.array(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32))
    wq, s = nv.quantize(w, mode=mode)
    x = nv.ones((2, 64))
    with pytest.raises(ValueError, match="only the affine mode"):
        nv.grad(lambda s_: nv.quantized_matmul(x, wq, s_, mode=mode).sum())(s)
    with pytest.raises(ValueError, match="only the affine mode"):
        nv.grad(lambda s_: nv.gather_qmm(x, wq, s_, rhs_indices=nv.array(0), mode=mode).sum())(s)


@pytest.mark.parametrize("transpose", [True, False])
def test_gather_qmm_vjp_of_scales_and_biases_is_numpys(transpose):
    """Each (lhs, rhs) pair adds its dequantized-matrix gradient to its expert's: NumPy's chain
    rule per pair, summed per expert (repeated and unused experts among the indices)."""
    rng = np.random.default_rng(5)
    E, M, N, K, gs = 3, 2, 64, 64, 32
    w = nv.array(rng.standard_normal((E, N, K) if transpose else (E, K, N)).astype(np.float32))
    wq, s, b = nv.quantize(w, gs, 4)
    x = rng.standard_normal((4, M, K)).astype(np.float32)
    lhs, rhs = np.array([0, 3, 3, 1, 2]), np.array([2, 0, 2, 2, 0])
    cot = rng.standard_normal((5, M, N)).astype(np.float32)

    def f(s_, b_):
        y = nv.gather_qmm(nv.array(x), wq, s_, b_, nv.array(lhs), nv.array(rhs),
                          transpose=transpose, group_size=gs, bits=4)
        return (y * nv.array(cot)).sum()

    ds, db = nv.grad(f, argnums=(0, 1))(s, b)
    q = np.array(nv.dequantize(wq, nv.ones_like(s), nv.zeros_like(b), gs, 4))
    dw = np.zeros(q.shape, np.float32)
    for p in range(5):
        dw[rhs[p]] += cot[p].T @ x[lhs[p]] if transpose else x[lhs[p]].T @ cot[p]
    g = dw.reshape(*np.array(s).shape, gs)
    np.testing.assert_allclose(np.array(db), g.sum(-1), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.array(ds), (g * q.reshape(g.shape)).sum(-1), rtol=1e-4, atol=1e-3)
    assert not np.array(db)[1].any()  # expert 1 is never used
