"""nuvec.linalg: MLX's names, argument order, keywords and result tuples; values against NumPy
and, where mlx.core imports, against mlx.core.linalg itself; gradients by central finite
differences (cholesky, inv, solve, solve_triangular, det, slogdet, qr, eigh, eigvalsh, svd's
values, norm) and jvp/vmap."""
import inspect

import numpy as np
import pytest

import nuvec as nv
import nuvec.linalg

NAMES = ["cholesky", "cholesky_inv", "cross", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv",
         "lu", "lu_factor", "norm", "pinv", "qr", "slogdet", "solve", "solve_triangular", "svd",
         "tri_inv"]


def np_(x):
    return np.array(x)


def rng():
    return np.random.default_rng(1234)


def spd(r, n, batch=()):
    a = r.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def test_every_name_is_there():
    for name in NAMES:
        assert callable(getattr(nv.linalg, name)), name
    import importlib

    assert importlib.import_module("nuvec.linalg") is nv.linalg


def test_values_against_numpy():
    r = rng()
    a = r.standard_normal((3, 4, 4)).astype(np.float32) + 3 * np.eye(4, dtype=np.float32)
    s = spd(r, 4).astype(np.float32)
    x = nv.array(a)
    np.testing.assert_allclose(np_(nv.linalg.inv(x)), np.linalg.inv(a), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(np_(nv.linalg.det(x)), np.linalg.det(a), rtol=1e-3)
    np.testing.assert_allclose(np_(nv.linalg.cholesky(nv.array(s))), np.linalg.cholesky(s), rtol=1e-4, atol=1e-5)
    u = nv.linalg.cholesky(nv.array(s), upper=True)
    np.testing.assert_allclose(np_(u), np.linalg.cholesky(s).T, rtol=1e-4, atol=1e-5)
    w, v = nv.linalg.eigh(nv.array(s))
    np.testing.assert_allclose(np_(w), np.linalg.eigvalsh(s), rtol=1e-4)
    np.testing.assert_allclose(np_(nv.linalg.eigvalsh(nv.array(s), UPLO="U")), np.linalg.eigvalsh(s, "U"), rtol=1e-4)
    U, S, Vh = nv.linalg.svd(x)
    np.testing.assert_allclose(np_(S), np.linalg.svd(a, compute_uv=False), rtol=1e-4)
    sv = nv.linalg.svd(x, compute_uv=False)
    assert isinstance(sv, nv.array)
    q, rr = nv.linalg.qr(x)
    np.testing.assert_allclose(np_(q) @ np_(rr), a, rtol=1e-4, atol=1e-4)
    p, l, uu = nv.linalg.lu(x)
    assert np_(p).dtype == np.uint32
    lu, piv = nv.linalg.lu_factor(x)
    assert np_(piv).dtype == np.uint32
    sign, logdet = nv.linalg.slogdet(x)
    ws, wl = np.linalg.slogdet(a)
    np.testing.assert_allclose(np_(sign), ws)
    np.testing.assert_allclose(np_(logdet), wl, rtol=1e-4)
    b = r.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(np_(nv.linalg.solve(x[0], nv.array(b[0]))), np.linalg.solve(a[0], b[0]), rtol=1e-4, atol=1e-4)
    t = nv.linalg.solve_triangular(x[0], nv.array(b[0]), upper=True)
    np.testing.assert_allclose(np_(t), np.linalg.solve(np.triu(a[0]), b[0]), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np_(nv.linalg.cross(nv.array([1.0, 2, 3]), nv.array([4.0, 5, 6]))), [-3, 6, -3])
    np.testing.assert_allclose(np_(nv.linalg.norm(x, ord=2, axis=(1, 2))), np.linalg.norm(a, 2, axis=(1, 2)), rtol=1e-4)
    np.testing.assert_allclose(np_(nv.linalg.norm(x, "fro", (1, 2))), np.linalg.norm(a, "fro", axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(np_(nv.linalg.norm(x[0, 0], float("inf"))), np.abs(a[0, 0]).max())
    np.testing.assert_allclose(np_(nv.linalg.pinv(x[0])), np.linalg.pinv(a[0]), rtol=1e-3, atol=1e-4)
    we, ve = nv.linalg.eig(x[0])
    assert np_(we).dtype == np.complex64
    np.testing.assert_allclose(np.sort_complex(np_(nv.linalg.eigvals(x[0]))), np.sort_complex(np.linalg.eigvals(a[0])), rtol=1e-3)
    np.testing.assert_allclose(np_(nv.linalg.tri_inv(x[0])), np.linalg.inv(np.tril(a[0])), rtol=1e-3, atol=1e-4)
    l0 = np.linalg.cholesky(s)
    np.testing.assert_allclose(np_(nv.linalg.cholesky_inv(nv.array(l0))), np.linalg.inv(s), rtol=1e-3, atol=1e-5)


def test_errors_name_the_op():
    with pytest.raises(ValueError, match="inv"):
        nv.linalg.inv(nv.array([[1, 2], [3, 4]]))
    with pytest.raises(ValueError, match="square"):
        nv.linalg.cholesky(nv.ones((2, 3)))
    with pytest.raises(ValueError, match="norm"):
        nv.linalg.norm(nv.ones((2, 2)), ord="abc")
    with pytest.raises(ValueError, match="qr"):
        nv.linalg.qr(nv.ones((3,)))


# ---- gradients by central finite differences ----

def fd_check(f, x, eps=1e-6, tol=1e-5, sym=False):
    """nv.grad of f (a scalar function of one float64 array) against central differences, along
    a few random directions (symmetric ones when `sym`: the function reads one triangle)."""
    r = np.random.default_rng(7)
    arr = lambda v: nv.array(v, dtype=nv.float64)
    g = np_(nv.grad(lambda a: f(a))(arr(x)))
    for _ in range(3):
        d = r.standard_normal(x.shape)
        if sym:
            d = d + np.swapaxes(d, -1, -2)
        hi = np_(f(arr(x + eps * d))).item()
        lo = np_(f(arr(x - eps * d))).item()
        fd = (hi - lo) / (2 * eps)
        an = float(np.sum(g * d))
        assert abs(fd - an) <= tol * max(1.0, abs(fd)), (fd, an)


def sumw(x, w):
    return nv.sum(x * nv.array(w, dtype=nv.float64))


def test_grad_inv_solve_det():
    r = rng()
    a = r.standard_normal((3, 3)) + 3 * np.eye(3)
    w = r.standard_normal((3, 3))
    b = r.standard_normal((3, 2))
    fd_check(lambda x: sumw(nv.linalg.inv(x), w), a)
    fd_check(lambda x: sumw(nv.linalg.solve(x, nv.array(b)), w[:, :2]), a)
    fd_check(lambda x: nv.linalg.det(x), a)
    fd_check(lambda x: nv.linalg.slogdet(x)[1], a)
    fd_check(lambda x: sumw(nv.linalg.solve(nv.array(a), x), w[:, :2]), b)


@pytest.mark.parametrize("upper", [False, True])
def test_grad_triangular_and_cholesky(upper):
    r = rng()
    a = r.standard_normal((4, 4)) + 4 * np.eye(4)
    b = r.standard_normal((4, 3))
    w = r.standard_normal((4, 4))
    fd_check(lambda x: sumw(nv.linalg.solve_triangular(x, nv.array(b), upper=upper), w[:, :3]), a)
    fd_check(lambda x: sumw(nv.linalg.solve_triangular(nv.array(a), x, upper=upper), w[:, :3]), b)
    s = spd(r, 4)
    fd_check(lambda x: sumw(nv.linalg.cholesky(x, upper=upper), w), s, sym=True)
    # The read triangle alone carries the gradient (the function ignores the other).
    fd_check(lambda x: sumw(nv.linalg.cholesky(x, upper=upper), w), s)


def test_grad_qr_eigh_svd_norm():
    r = rng()
    a = r.standard_normal((5, 3))
    wq, wr = r.standard_normal((5, 3)), r.standard_normal((3, 3))
    fd_check(lambda x: sumw(nv.linalg.qr(x)[0], wq) + sumw(nv.linalg.qr(x)[1], wr), a)
    h = r.standard_normal((4, 4))
    h = h + h.T
    wv = r.standard_normal((4, 4))
    # Eigenvector signs are arbitrary: differentiate sign-invariant functions of them.
    fd_check(lambda x: nv.sum(nv.linalg.eigvalsh(x) * nv.array([1.0, 2, 3, 4])), h, sym=True)
    fd_check(lambda x: sumw(nv.linalg.eigh(x)[1] ** 2, wv), h, sym=True)
    fd_check(lambda x: nv.sum(nv.linalg.svd(x, compute_uv=False) * nv.array([1.0, 3, 2])), a)
    fd_check(lambda x: nv.linalg.norm(x, "nuc"), a)
    fd_check(lambda x: nv.linalg.norm(x, 2), a)
    fd_check(lambda x: nv.linalg.norm(x), a)
    # U and Vh of a square matrix, through sign-invariant functions (and pinv over them).
    sq = r.standard_normal((4, 4))
    wu, wvh = r.standard_normal((4, 4)), r.standard_normal((4, 4))
    fd_check(lambda x: sumw(nv.linalg.svd(x)[0] ** 2, wu) + sumw(nv.linalg.svd(x)[2] ** 2, wvh), sq)
    fd_check(lambda x: sumw(nv.linalg.pinv(x), wu), sq)
    with pytest.raises(Exception, match="square"):
        nv.grad(lambda x: nv.sum(nv.linalg.svd(x)[0]))(nv.array(a, dtype=nv.float64))


def test_jvp_and_vmap():
    r = rng()
    f64 = lambda v: nv.array(v, dtype=nv.float64)
    a = r.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    t = r.standard_normal((3, 3))
    (out,), (tan,) = nv.jvp(lambda x: [nv.linalg.inv(x)], [f64(a[0])], [f64(t)])
    eps = 1e-6
    fd = (np.linalg.inv(a[0] + eps * t) - np.linalg.inv(a[0] - eps * t)) / (2 * eps)
    np.testing.assert_allclose(np_(tan), fd, rtol=1e-5, atol=1e-7)
    s = np.stack([spd(r, 3) for _ in range(2)])
    got = nv.vmap(nv.linalg.cholesky)(f64(s))
    np.testing.assert_allclose(np_(got), np.linalg.cholesky(s), rtol=1e-10)
    got = nv.vmap(nv.linalg.inv, in_axes=1)(f64(np.swapaxes(a, 0, 1)))
    np.testing.assert_allclose(np_(got), np.linalg.inv(a), rtol=1e-9)
    b = r.standard_normal((3, 2))
    got = nv.vmap(lambda x: nv.linalg.solve_triangular(x, f64(b)))(f64(a))
    np.testing.assert_allclose(np_(got), np.linalg.solve(np.tril(a), b), rtol=1e-9)
    w = nv.vmap(lambda x: nv.linalg.svd(x, compute_uv=False))(f64(a))
    np.testing.assert_allclose(np_(w), np.linalg.svd(a, compute_uv=False), rtol=1e-9)
    # Multi-output primitives under vmap: every output batched, batch axis not first.
    lu, piv = nv.vmap(nv.linalg.lu_factor, in_axes=2, out_axes=0)(f64(np.moveaxis(a, 0, 2)))
    for i in range(2):
        l1, p1 = nv.linalg.lu_factor(f64(a[i]))
        np.testing.assert_allclose(np_(lu)[i], np_(l1), rtol=1e-12)
        np.testing.assert_array_equal(np_(piv)[i], np_(p1))
    q, rr = nv.vmap(nv.linalg.qr)(f64(a))
    np.testing.assert_allclose(np.matmul(np_(q), np_(rr)), a, rtol=1e-9, atol=1e-12)
    ws = nv.vmap(nv.linalg.eigvalsh)(f64(s))
    np.testing.assert_allclose(np_(ws), np.linalg.eigvalsh(s), rtol=1e-9)
    # jvp of cholesky and eigvalsh against central differences along a symmetric direction.
    d = r.standard_normal((3, 3))
    d = d + d.T
    for fn, ref in [(nv.linalg.cholesky, np.linalg.cholesky), (nv.linalg.eigvalsh, np.linalg.eigvalsh)]:
        (_,), (tn,) = nv.jvp(lambda x: [fn(x)], [f64(s[0])], [f64(d)])
        fd = (ref(s[0] + eps * d) - ref(s[0] - eps * d)) / (2 * eps)
        np.testing.assert_allclose(np_(tn), fd, rtol=1e-5, atol=1e-7)


# ---- against MLX itself ----

def test_against_mlx():
    mx = pytest.importorskip("mlx.core")
    for name in NAMES:
        assert hasattr(mx.linalg, name)
        ps = [p.name for p in inspect.signature(getattr(mx.linalg, name)).parameters.values()
              if p.name != "stream"] if _has_sig(getattr(mx.linalg, name)) else None
        if ps:
            mine = getattr(nv.linalg, name)
            assert mine.__name__ == name
    r = rng()
    a = (r.standard_normal((2, 4, 4)) + 3 * np.eye(4)).astype(np.float32)
    s = spd(r, 4).astype(np.float32)
    cpu = mx.cpu
    pairs = [
        (nv.linalg.inv(nv.array(a)), mx.linalg.inv(mx.array(a), stream=cpu)),
        (nv.linalg.det(nv.array(a)), mx.linalg.det(mx.array(a), stream=cpu)),
        (nv.linalg.cholesky(nv.array(s)), mx.linalg.cholesky(mx.array(s), stream=cpu)),
        (nv.linalg.cholesky(nv.array(s), True), mx.linalg.cholesky(mx.array(s), True, stream=cpu)),
        (nv.linalg.tri_inv(nv.array(a), True), mx.linalg.tri_inv(mx.array(a), True, stream=cpu)),
        (nv.linalg.pinv(nv.array(a)), mx.linalg.pinv(mx.array(a), stream=cpu)),
        (nv.linalg.eigvalsh(nv.array(s)), mx.linalg.eigvalsh(mx.array(s), stream=cpu)),
        (nv.linalg.svd(nv.array(a), False), mx.linalg.svd(mx.array(a), False, stream=cpu)),
        (nv.linalg.norm(nv.array(a), 1, (1, 2)), mx.linalg.norm(mx.array(a), 1, (1, 2))),
        (nv.linalg.norm(nv.array(a)), mx.linalg.norm(mx.array(a))),
        (nv.linalg.cross(nv.array(a[0, :3, :3]), nv.array(a[1, :3, :3]), 0),
         mx.linalg.cross(mx.array(a[0, :3, :3]), mx.array(a[1, :3, :3]), 0)),
        (nv.linalg.solve(nv.array(a), nv.array(a[:, :, :2])),
         mx.linalg.solve(mx.array(a), mx.array(a[:, :, :2]), stream=cpu)),
        (nv.linalg.solve_triangular(nv.array(a[0]), nv.array(a[1]), upper=True),
         mx.linalg.solve_triangular(mx.array(a[0]), mx.array(a[1]), upper=True, stream=cpu)),
        (nv.linalg.cholesky_inv(nv.array(np.linalg.cholesky(s))),
         mx.linalg.cholesky_inv(mx.array(np.linalg.cholesky(s)), stream=cpu)),
    ]
    for got, want in pairs:
        got, want = np_(got), np.array(want)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-4)
    for mine, theirs in [(nv.linalg.lu(nv.array(a)), mx.linalg.lu(mx.array(a), stream=cpu)),
                         (nv.linalg.lu_factor(nv.array(a)), mx.linalg.lu_factor(mx.array(a), stream=cpu)),
                         (nv.linalg.qr(nv.array(a)), mx.linalg.qr(mx.array(a), stream=cpu)),
                         (nv.linalg.slogdet(nv.array(a)), mx.linalg.slogdet(mx.array(a), stream=cpu))]:
        assert len(mine) == len(theirs)
        for g, w in zip(mine, theirs):
            g, w = np_(g), np.array(w)
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-4)
    u, sv, vh = nv.linalg.svd(nv.array(a))
    mu, msv, mvh = mx.linalg.svd(mx.array(a), stream=cpu)
    assert np_(u).shape == np.array(mu).shape and np_(vh).shape == np.array(mvh).shape
    w, v = nv.linalg.eig(nv.array(a[0]))
    mw, mv = mx.linalg.eig(mx.array(a[0]), stream=cpu)
    np.testing.assert_allclose(np.sort_complex(np_(w)), np.sort_complex(np.array(mw)), rtol=1e-3)
    with pytest.raises(ValueError):
        nv.linalg.inv(nv.array(np.ones((2, 2), np.float16)))


def _has_sig(f):
    try:
        inspect.signature(f)
        return True
    except (TypeError, ValueError):
        return False
