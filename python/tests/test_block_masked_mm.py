"""nuvec.block_masked_mm against mlx.core.block_masked_mm: bool and float masks, each mask
alone, batched masks, the default block size, a NaN inside a zeroed block; its gradient by
finite differences."""
import numpy as np
import pytest

import nuvec as nv


@pytest.mark.parametrize("bs", [32, 64])
@pytest.mark.parametrize("float_masks", [False, True])
def test_against_mlx(rng, bs, float_masks):
    mx = pytest.importorskip("mlx.core")
    a = rng.standard_normal((2, 70, 40)).astype(np.float32)
    b = rng.standard_normal((40, 100)).astype(np.float32)
    a[0, 0, 0] = np.nan
    cb = lambda n: -(-n // bs)  # noqa: E731
    shapes = {"mask_out": (cb(70), cb(100)), "mask_lhs": (2, cb(70), cb(40)),
              "mask_rhs": (cb(40), cb(100))}
    masks = {k: (rng.random(s).astype(np.float32) if float_masks else rng.random(s) > 0.4)
             for k, s in shapes.items()}
    for keys in [("mask_out", "mask_lhs", "mask_rhs"), ("mask_out",), ("mask_lhs",),
                 ("mask_rhs",), ()]:
        kn = {k: nv.array(masks[k]) for k in keys}
        km = {k: mx.array(masks[k]) for k in keys}
        got = nv.block_masked_mm(nv.array(a), nv.array(b), bs, **kn)
        ref = mx.block_masked_mm(mx.array(a), mx.array(b), bs, **km)
        assert got.shape == tuple(ref.shape) and got.dtype == nv.float32
        np.testing.assert_allclose(np.array(got), np.array(ref), rtol=1e-4, atol=1e-4,
                                   equal_nan=True)
    assert nv.block_masked_mm(nv.array(a[0]), nv.array(b)).shape == (70, 100)  # block 64


def test_grad(rng):
    a = rng.standard_normal((40, 36)).astype(np.float32)
    b = rng.standard_normal((36, 20)).astype(np.float32)
    ml = nv.array(np.array([[True, False], [False, True]]))
    mo = nv.array(np.array([[1.0], [0.5]], np.float32))

    def f(a):
        return nv.sum(nv.block_masked_mm(a, nv.array(b), 32, mask_out=mo, mask_lhs=ml))

    g = np.array(nv.grad(f)(nv.array(a)))
    eps = 1e-2
    for idx in [(0, 0), (0, 35), (39, 0), (39, 35), (33, 33)]:
        ap, am = a.copy(), a.copy()
        ap[idx] += eps
        am[idx] -= eps
        fd = (float(f(nv.array(ap))) - float(f(nv.array(am)))) / (2 * eps)
        assert abs(fd - g[idx]) < 2e-2 * max(1, abs(g[idx])), idx
