"""gather_qmm (the GATHER_QMM primitive: each pair's matrix of w read in place) against a NumPy
reference of the dequantized weights: every mode, bits 2-8 and group size, transposed and not,
lhs and rhs indices with repeats, unsorted and sorted, batched and broadcast index shapes,
negative indices (wrapped as take's), empty pair lists, half-precision x, and out-of-range
indices failing under the op's name."""
import ctypes as C

import numpy as np
import pytest

from nvc import B, I, NuvecError, P, lib, np_dtype, sig
from test_quantize import deq_ref, quantize

sig("nv_gather_qmm", P, P, P, P, P, P, P, B, I, I, C.c_char_p, B)

MODES = [("affine", 64, 4), ("affine", 32, 2), ("affine", 128, 8), ("affine", 32, 3),
         ("affine", 64, 5), ("affine", 32, 6), ("mxfp4", 32, 4), ("mxfp8", 32, 8),
         ("nvfp4", 16, 4)]


def gqmm(nv, x, q, s, b, li, ri, transpose, gs, bits, mode, sorted_=False):
    h = lib.nv_gather_qmm(nv.array(x), nv.array(q), nv.array(s),
                          nv.array(b) if b is not None else None,
                          nv.array(li) if li is not None else None,
                          nv.array(ri) if ri is not None else None, transpose, gs, bits,
                          mode.encode(), sorted_)
    return nv.read(nv.own(h))


def reference(x, wd, li, ri, transpose):
    """x[li] @ wd[ri](.T) in float64, over flat batch indices (NumPy's wrapping of negatives)."""
    xb = x.reshape((-1,) + x.shape[-2:]).astype(np.float64)
    wb = wd.reshape((-1,) + wd.shape[-2:])
    li = np.arange(xb.shape[0]).reshape(x.shape[:-2]) if li is None else li
    ri = np.arange(wb.shape[0]).reshape(wd.shape[:-2]) if ri is None else ri
    li, ri = np.broadcast_arrays(li, ri)
    mats = wb[ri.astype(np.int64)]
    if transpose:
        mats = np.swapaxes(mats, -1, -2)
    return xb[li.astype(np.int64)] @ mats


def experts(nv, rng, E, N, K, transpose, mode, gs, bits):
    w = rng.standard_normal((E, N, K) if transpose else (E, K, N)).astype(np.float32)
    out = quantize(nv, w, gs, bits, mode)
    q, s = out[0], out[1]
    b = out[2] if mode == "affine" else None
    return q, s, b, deq_ref(q, s, b, gs, bits, mode)


CASES = [
    # (x shape, E, N, K, lhs, rhs): lhs / rhs as lists (None: every matrix)
    ((1, 1, 128), 4, 24, 128, None, [[2, 0, 2, 3]]),          # MoE decode: one token, repeats
    ((6, 1, 256), 5, 17, 256, [0, 1, 2, 3, 4, 5], [4, 0, 4, 1, 0, 2]),  # unsorted
    ((3, 2, 64), 3, 40, 64, [[0, 2], [1, 1]], [[2, 2], [0, 1]]),  # batched index shape
    ((2, 5, 128), 3, 9, 128, [1, 0, 1], None),                 # lhs only, w's 3 matrices
    ((4, 1, 96), 3, 33, 96, None, [[1], [0], [2], [-1]]),      # broadcast, a negative index
    ((2, 9, 64), 4, 16, 64, [0, 1], [3, -4]),                  # more than 8 rows per pair
]


@pytest.mark.parametrize("xshape,E,N,K,li,ri", CASES)
@pytest.mark.parametrize("mode,gs,bits", MODES)
@pytest.mark.parametrize("transpose", [True, False])
def test_gather_qmm(nv, rng, xshape, E, N, K, li, ri, mode, gs, bits, transpose):
    if K % gs:
        pytest.skip("K is not a multiple of the group size")
    if not transpose:
        N = 2 * gs  # w's packed rows are N long
    li = None if li is None else np.array(li, np.int32)
    ri = None if ri is None else np.array(ri, np.int32)
    q, s, b, wd = experts(nv, rng, E, N, K, transpose, mode, gs, bits)
    x = rng.standard_normal(xshape).astype(np.float32)
    got = gqmm(nv, x, q, s, b, li, ri, transpose, gs, bits, mode)
    want = reference(x, wd, li, ri, transpose)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(K))


@pytest.mark.parametrize("mode,gs,bits", [("affine", 64, 4), ("mxfp4", 32, 4)])
@pytest.mark.parametrize("L", [8, 40, 200])
def test_gather_qmm_sorted_moe(nv, rng, mode, gs, bits, L):
    """Tokens routed to experts, sorted by expert (the runs of one matrix), as MoE layers call
    it: x (L, 1, K) by rhs_indices alone; the same result with sorted_indices False."""
    E, N, K = 16, 20, 256
    q, s, b, wd = experts(nv, rng, E, N, K, True, mode, gs, bits)
    x = rng.standard_normal((L, 1, K)).astype(np.float32)
    ri = np.sort(rng.integers(0, E, L)).astype(np.uint32)
    got = gqmm(nv, x, q, s, b, None, ri, True, gs, bits, mode, True)
    want = reference(x, wd, None, ri, True)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(gqmm(nv, x, q, s, b, None, ri, True, gs, bits, mode), got,
                               rtol=1e-6, atol=1e-6)
    # A wrong hint (unsorted pairs) still gives the exact product.
    perm = rng.permutation(L)
    got = gqmm(nv, x[perm], q, s, b, None, ri[perm], True, gs, bits, mode, True)
    np.testing.assert_allclose(got, want[perm], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gather_qmm_half(nv, rng, dtype):
    w = rng.standard_normal((3, 24, 128)).astype(np_dtype(dtype))
    q, s, b = quantize(nv, w, 64, 4, "affine")
    x = rng.standard_normal((5, 2, 128)).astype(np_dtype(dtype))
    li, ri = np.array([4, 0, 4], np.uint32), np.array([2, 2, 1], np.uint32)
    got = gqmm(nv, x, q, s, b, li, ri, True, 64, 4, "affine")
    assert got.dtype == np_dtype(dtype) and got.shape == (3, 2, 24)
    want = reference(x, deq_ref(q, s, b, 64, 4, "affine"), li, ri, True)
    tol = 2e-2 if dtype == "bfloat16" else 4e-3
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * 4)


def test_gather_qmm_empty_and_edges(nv, rng):
    q, s, b, wd = experts(nv, rng, 3, 8, 64, True, "affine", 64, 4)
    x = rng.standard_normal((2, 1, 64)).astype(np.float32)
    got = gqmm(nv, x, q, s, b, np.zeros(0, np.int32), np.zeros(0, np.int32), True, 64, 4,
               "affine")
    assert got.shape == (0, 1, 8)
    # Scalar indices: one pair, shape (M, N).
    got = gqmm(nv, x, q, s, b, np.array(1, np.int64), np.array(2, np.int64), True, 64, 4,
               "affine")
    np.testing.assert_allclose(got, x[1].astype(np.float64) @ wd[2].T, rtol=1e-4, atol=1e-4)
    # A NaN in x reaches only its pair's row.
    xe = x.copy()
    xe[0, 0, 3] = np.nan
    got = gqmm(nv, xe, q, s, b, np.array([0, 1]), np.array([0, 1]), True, 64, 4, "affine")
    assert np.isnan(got[0]).all()
    np.testing.assert_allclose(got[1], x[1].astype(np.float64) @ wd[1].T, rtol=1e-4, atol=1e-4)


def test_gather_qmm_errors(nv, rng):
    q, s, b, _ = experts(nv, rng, 3, 8, 64, True, "affine", 64, 4)
    x = rng.standard_normal((2, 1, 64)).astype(np.float32)
    with pytest.raises(NuvecError, match=r"gather_qmm: index 3 is out of range for an axis "
                                         r"of size 3"):
        gqmm(nv, x, q, s, b, np.array([0, 1]), np.array([0, 3]), True, 64, 4, "affine")
    with pytest.raises(NuvecError, match=r"gather_qmm: index -3 is out of range for an axis "
                                         r"of size 2"):
        gqmm(nv, x, q, s, b, np.array([-3]), np.array([0]), True, 64, 4, "affine")
    with pytest.raises(NuvecError, match="gather_qmm: the last dimension of x"):
        gqmm(nv, np.ones((2, 1, 32), np.float32), q, s, b, None, np.array([0, 1]), True, 64,
             4, "affine")
    with pytest.raises(NuvecError, match="gather_qmm: rhs_indices must be integers"):
        gqmm(nv, x, q, s, b, None, np.array([0.0, 1.0], np.float32), True, 64, 4, "affine")
    with pytest.raises(NuvecError, match="cannot be broadcast"):
        gqmm(nv, x, q, s, b, np.array([0, 1]), np.array([0, 1, 2]), True, 64, 4, "affine")
    with pytest.raises(NuvecError, match="gather_qmm: affine quantization requires biases"):
        gqmm(nv, x, q, s, None, None, np.array([0, 1]), True, 64, 4, "affine")


# ---- block_masked_mm (composed) ----

sig("nv_block_masked_mm", P, P, P, I, P, P, P)


def block_ref(x, m, bs):
    """Block mask m applied to x (float64): bool masks select, others scale."""
    R, C = x.shape[-2:]
    e = np.repeat(np.repeat(m, bs, -2), bs, -1)[..., :R, :C]
    return np.where(e, x, 0.0) if m.dtype == bool else x * e.astype(np.float64)


def bmm(nv, a, b, bs, mo, ml, mr):
    h = lib.nv_block_masked_mm(nv.array(a), nv.array(b), bs,
                               *(nv.array(m) if m is not None else None for m in (mo, ml, mr)))
    return nv.read(nv.own(h))


@pytest.mark.parametrize("bs", [32, 64, 16])
@pytest.mark.parametrize("ashape,bshape", [((70, 40), (40, 50)), ((2, 64, 33), (33, 96)),
                                           ((3, 1, 5, 7), (2, 7, 65))])
@pytest.mark.parametrize("kind", ["bool", "float32"])
def test_block_masked_mm(nv, rng, bs, ashape, bshape, kind):
    a = rng.standard_normal(ashape).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    M, K, N = ashape[-2], ashape[-1], bshape[-1]
    cb = lambda n: -(-n // bs)  # noqa: E731

    def mask(shape):
        m = rng.random(shape)
        return m > 0.4 if kind == "bool" else m.astype(np.float32)
    mo, ml, mr = mask((cb(M), cb(N))), mask(ashape[:-2] + (cb(M), cb(K))), mask((cb(K), cb(N)))
    a[..., 0, 0] = np.nan  # a NaN in a block that a bool mask may zero
    want = block_ref(block_ref(a.astype(np.float64), ml, bs) @ block_ref(b, mr, bs), mo, bs)
    got = bmm(nv, a, b, bs, mo, ml, mr)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # Each mask alone, and none.
    for k in range(4):
        ms = [mo if k == 0 else None, ml if k == 1 else None, mr if k == 2 else None]
        x = block_ref(a.astype(np.float64), ml, bs) if k == 1 else a.astype(np.float64)
        y = block_ref(b, mr, bs) if k == 2 else b
        want = block_ref(x @ y, mo, bs) if k == 0 else x @ y
        np.testing.assert_allclose(bmm(nv, a, b, bs, *ms), want, rtol=1e-4, atol=1e-4)


def test_block_masked_mm_dtypes_and_errors(nv, rng):
    a = rng.standard_normal((40, 40)).astype(np.float16)
    m = np.ones((2, 2), bool)
    assert bmm(nv, a, a, 32, m, None, None).dtype == np.float16
    with pytest.raises(NuvecError, match="block_masked_mm: only floating point types"):
        bmm(nv, np.ones((4, 4), np.int32), np.ones((4, 4), np.int32), 32, None, None, None)
    with pytest.raises(NuvecError, match=r"block_masked_mm: mask_lhs must have shape "
                                         r"\(\.\.\., 2, 2\)"):
        bmm(nv, a, a, 32, None, np.ones((1, 2), bool), None)
    with pytest.raises(NuvecError, match="block_masked_mm: the inner dimensions"):
        bmm(nv, a, a[:3], 32, None, None, None)
    with pytest.raises(NuvecError, match="block_masked_mm: block_size must be positive"):
        bmm(nv, a, a, 0, None, None, None)
