"""The decompositions of include/nuvec/linalg.h (MLX's mx.linalg) against numpy.linalg:
reconstruction checks (Q R, U S Vh, L Lᵀ, L[perm] U, a V = V diag(w)), batched, strided and
transposed inputs, sizes 0, 1 and primes, singular and NaN inputs, the dtypes of every result,
and the errors, which name the op and the shapes."""
import ctypes as C

import numpy as np
import pytest

from nvc import D, I, NuvecError, lib, nv_name, sig

P = C.c_void_p
IP = C.POINTER(C.c_int)
PP = C.POINTER(C.c_void_p)
B = C.c_bool
S = C.c_char_p
sig("nv_linalg_norm", P, P, IP, I, B)
sig("nv_linalg_norm_ord", P, P, D, IP, I, B)
sig("nv_linalg_norm_str", P, P, S, IP, I, B)
sig("nv_linalg_cholesky", P, P, B)
sig("nv_linalg_cholesky_inv", P, P, B)
sig("nv_linalg_inv", P, P)
sig("nv_linalg_tri_inv", P, P, B)
sig("nv_linalg_pinv", P, P)
sig("nv_linalg_lu", I, P, PP)
sig("nv_linalg_lu_factor", I, P, PP)
sig("nv_linalg_solve", P, P, P)
sig("nv_linalg_solve_triangular", P, P, P, B)
sig("nv_linalg_cross", P, P, P, I)
sig("nv_linalg_qr", I, P, PP)
sig("nv_linalg_svd", I, P, B, PP)
sig("nv_linalg_eigh", I, P, S, PP)
sig("nv_linalg_eigvalsh", P, P, S)
sig("nv_linalg_eig", I, P, PP)
sig("nv_linalg_eigvals", P, P)
sig("nv_linalg_det", P, P)
sig("nv_linalg_slogdet", I, P, PP)

LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]
TOL = {"float32": 2e-4, "float64": 1e-10, "complex64": 2e-4}


def multi(nv, fn, n, *args):
    """The n results of a multi-output builder, owned by the session."""
    out = (C.c_void_p * n)()
    fn(*args, out)
    return [nv.own(out[i]) for i in range(n)]


def err(nv, h):
    h = nv.own(h)
    st, msg = nv.status(h)
    assert st != 0, "expected an error"
    with pytest.raises(NuvecError):
        nv.read(h)
    return msg


def rand(rng, shape, dt):
    x = rng.standard_normal(shape)
    if dt == "complex64":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dt)


def spd(rng, shape, dt):
    """Symmetric (Hermitian) positive-definite matrices of shape (..., n, n)."""
    a = rand(rng, shape, dt).astype(np.complex128 if dt == "complex64" else np.float64)
    n = shape[-1]
    m = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)
    return m.astype(dt)


def close(got, want, dt, scale=1.0):
    tol = TOL[dt] * scale
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


def mT(x):
    return np.swapaxes(x, -1, -2)


def sort_eig(w):
    """Eigenvalues in a canonical order (by real part rounded, then imaginary part), so that
    conjugate pairs whose real parts differ by rounding compare in the same order."""
    w = np.asarray(w).reshape(-1, np.shape(w)[-1])
    return np.stack([r[np.lexsort((r.imag, np.round(r.real, 3)))] for r in w])


SHAPES = [(1, 1), (2, 2), (5, 5), (7, 7), (3, 4, 4), (2, 3, 6, 6), (13, 13)]


# Orders up to 64 take the unblocked kernel of their own, larger ones LAPACK's potrf.
CHOLESKY_SHAPES = SHAPES + [(64, 64), (2, 65, 65), (70, 70), (400, 400)]


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape", CHOLESKY_SHAPES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(nv, rng, dt, shape, upper):
    a = spd(rng, shape, dt)
    # The unread triangle holds garbage: the result must not depend on it.
    junk = a.copy()
    n = shape[-1]
    mask = np.tril(np.ones((n, n), bool), -1) if upper else np.triu(np.ones((n, n), bool), 1)
    junk[..., mask] = 99.0
    got = nv.read(nv.own(lib.nv_linalg_cholesky(nv.array(junk), upper)))
    assert nv_name(got.dtype) == dt
    want = np.linalg.cholesky(a.astype(np.float64))
    close(got, mT(want) if upper else want, dt, 10)
    assert np.all((np.triu(got, 1) if not upper else np.tril(got, -1)) == 0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cholesky_layouts_and_batch(nv, rng, layout):
    a = spd(rng, (4, 6, 6), "float64")
    got = nv.read(nv.own(lib.nv_linalg_cholesky(nv.view(a, layout), False)))
    close(got, np.linalg.cholesky(a), "float64")


@pytest.mark.parametrize("n", [3, 64, 65, 400])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_nan_or_indefinite_gives_nan(nv, rng, n, upper):
    """A NaN in the triangle read reaches the entries it reaches in NumPy's (LAPACK's) factor; a
    matrix that is not positive definite gives NaN throughout, for that matrix only (each path:
    the small kernel, LAPACK)."""
    a = spd(rng, (3, n, n), "float64")
    a[0, n - 1, n - 2] = a[0, n - 2, n - 1] = np.nan
    a[1, n - 1, n - 1] = -1e6
    got = nv.read(nv.own(lib.nv_linalg_cholesky(nv.array(a), upper)))
    ref0 = np.linalg.cholesky(a[0])
    np.testing.assert_array_equal(np.isnan(got[0]), np.isnan(mT(ref0) if upper else ref0))
    assert np.isnan(got[0]).any() and np.isnan(got[1]).all()
    want = np.linalg.cholesky(a[2])
    close(got[2], mT(want) if upper else want, "float64")
    for k in (0, 1):  # one matrix alone
        single = nv.read(nv.own(lib.nv_linalg_cholesky(nv.array(a[k]), upper)))
        np.testing.assert_array_equal(np.isnan(single), np.isnan(got[k]))


def test_cholesky_not_positive_definite_gives_nan(nv):
    a = np.array([[[4.0, 2.0], [2.0, 5.0]], [[1.0, 2.0], [2.0, -1.0]]], np.float32)
    got = nv.read(nv.own(lib.nv_linalg_cholesky(nv.array(a), False)))
    close(got[0], np.linalg.cholesky(a[0].astype(np.float64)), "float32")
    assert np.isnan(got[1]).all()


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (7, 7), (2, 5, 5), (4, 3), (3, 5), (2, 2, 7, 4),
                                   (64, 64), (64, 9), (2, 65, 40), (30, 70), (400, 390), (1030, 1024)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "zero column"])
def test_lu_and_lu_factor(nv, rng, dt, shape, layout):
    """Orders up to 64 take the small kernel, larger ones LAPACK, a lone matrix of order >=
    1024 the blocked factor; a zero column (an exact zero pivot, no row swap) factors too."""
    a = rand(rng, shape, dt)
    if layout == "zero column":
        a[..., :, min(shape[-2:]) // 2] = 0
        layout = "contiguous"
    x = nv.view(a, layout)
    p, l, u = (nv.read(h) for h in multi(nv, lib.nv_linalg_lu, 3, x))
    m, n = shape[-2:]
    k = min(m, n)
    assert p.dtype == np.uint32 and p.shape == shape[:-1]
    assert l.shape == shape[:-2] + (m, k) and u.shape == shape[:-2] + (k, n)
    assert np.all(np.triu(l, 1) == 0) and np.allclose(np.diagonal(l, 0, -2, -1), 1)
    assert np.all(np.tril(u, -1) == 0)
    lp = np.take_along_axis(l, p[..., None].astype(np.int64), -2)
    close(lp @ u, a, dt, 10)
    lu, piv = (nv.read(h) for h in multi(nv, lib.nv_linalg_lu_factor, 2, x))
    assert piv.dtype == np.uint32 and piv.shape == shape[:-2] + (k,)
    close(np.tril(lu[..., :, :k], -1) + np.eye(m, k), l, dt)
    close(np.triu(lu[..., :k, :]), u, dt)
    # The pivots replay the permutation: row i swapped with row piv[i] in turn.
    flat_p, flat_piv = p.reshape(-1, m), piv.reshape(-1, k)
    for bp, bpiv in zip(flat_p, flat_piv):
        rows = list(range(m))
        for i, s in enumerate(bpiv):
            rows[i], rows[s] = rows[s], rows[i]
        inv = np.empty(m, np.int64)
        inv[rows] = np.arange(m)
        np.testing.assert_array_equal(inv, bp)


def test_lu_matches_mlx_example(nv):
    a = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 10]], np.float32)
    p, l, u = (nv.read(h) for h in multi(nv, lib.nv_linalg_lu, 3, nv.array(a)))
    np.testing.assert_array_equal(p, [1, 2, 0])
    lu, piv = (nv.read(h) for h in multi(nv, lib.nv_linalg_lu_factor, 2, nv.array(a)))
    np.testing.assert_array_equal(piv, [2, 2, 2])


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 2, 5, 11])
@pytest.mark.parametrize("batch", [(), (3,), (2, 2)])
def test_solve_and_inv(nv, rng, dt, n, batch):
    a = rand(rng, batch + (n, n), dt) + 3 * np.eye(n, dtype=dt)
    b = rand(rng, batch + (n, 3), dt)
    got = nv.read(nv.own(lib.nv_linalg_solve(nv.array(a), nv.view(b, "transposed"))))
    close(a.astype(np.float64) @ got, b, dt, 50)
    v = rand(rng, (n,), dt)
    gv = nv.read(nv.own(lib.nv_linalg_solve(nv.array(a), nv.array(v))))
    assert gv.shape == batch + (n,)
    close(np.linalg.solve(a.astype(np.float64), np.broadcast_to(v, batch + (n,))[..., None])[..., 0], gv, dt, 50)
    inv = nv.read(nv.own(lib.nv_linalg_inv(nv.view(a, "strided"))))
    assert nv_name(inv.dtype) == dt
    close(inv, np.linalg.inv(a.astype(np.float64)), dt, 50)


def test_solve_broadcasts_and_promotes(nv, rng):
    a = rand(rng, (2, 1, 4, 4), "float32") + 4 * np.eye(4, dtype=np.float32)
    b = rand(rng, (3, 4, 2), "float64")
    got = nv.read(nv.own(lib.nv_linalg_solve(nv.array(a), nv.array(b))))
    assert got.dtype == np.float64 and got.shape == (2, 3, 4, 2)
    close(got, np.linalg.solve(a.astype(np.float64), b), "float32", 10)
    bi = np.array([1, 2, 3, 4], np.int32)
    gi = nv.read(nv.own(lib.nv_linalg_solve(nv.array(a[0, 0]), nv.array(bi))))
    assert gi.dtype == np.float32


def test_singular_gives_non_finite(nv):
    a = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    inv = nv.read(nv.own(lib.nv_linalg_inv(nv.array(a))))
    assert not np.isfinite(inv).all()
    assert nv.read(nv.own(lib.nv_linalg_det(nv.array(a)))) == 0
    sign, logdet = (nv.read(h) for h in multi(nv, lib.nv_linalg_slogdet, 2, nv.array(a)))
    assert sign == 0 and logdet == -np.inf


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape,bshape", [((4, 4), (4,)), ((4, 4), (4, 3)), ((2, 5, 5), (2, 5, 1)),
                                          ((1, 1), (1, 2)), ((3, 3, 3), (3,))])
def test_solve_triangular_and_tri_inv(nv, rng, dt, upper, shape, bshape):
    a = rand(rng, shape, dt) + 4 * np.eye(shape[-1], dtype=dt)
    t = np.triu(a) if upper else np.tril(a)
    b = rand(rng, bshape, dt)
    got = nv.read(nv.own(lib.nv_linalg_solve_triangular(nv.array(a), nv.array(b), upper)))
    bb = b[..., None] if b.ndim == 1 else b
    want = np.linalg.solve(t.astype(np.float64), bb)
    close(got, want[..., 0] if b.ndim == 1 else want, dt, 10)
    ti = nv.read(nv.own(lib.nv_linalg_tri_inv(nv.view(a, "transposed" if a.ndim == 2 else "contiguous"), upper)))
    close(ti, np.linalg.inv(t.astype(np.float64)), dt, 10)
    assert np.all((np.tril(ti, -1) if upper else np.triu(ti, 1)) == 0)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inv(nv, rng, upper):
    a = spd(rng, (3, 5, 5), "float64")
    l = np.linalg.cholesky(a)
    f = mT(l) if upper else l
    got = nv.read(nv.own(lib.nv_linalg_cholesky_inv(nv.array(f), upper)))
    close(got, np.linalg.inv(a), "float64", 100)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (3, 5), (7, 7), (2, 6, 4), (2, 2, 4, 6)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_qr(nv, rng, dt, shape, layout):
    a = rand(rng, shape, dt)
    q, r = (nv.read(h) for h in multi(nv, lib.nv_linalg_qr, 2, nv.view(a, layout)))
    m, n = shape[-2:]
    k = min(m, n)
    assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
    close(q @ r, a, dt, 10)
    close(mT(q) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)), dt, 10)
    assert np.all(np.tril(r, -1) == 0)
    # LAPACK's signs, as MLX: |R| agrees with NumPy's (its Householder QR too).
    _, rn = np.linalg.qr(a.astype(np.float64))
    close(np.abs(r), np.abs(rn), dt, 50)


def test_qr_signs_match_mlx(nv):
    q, r = (nv.read(h) for h in multi(nv, lib.nv_linalg_qr, 2, nv.array(np.array([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]], np.float32))))
    close(r, np.array([[-3.16228, -4.42719, -5.6921], [0, -0.632455, -1.26491]]), "float32", 100)


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (3, 5), (7, 7), (2, 6, 4), (2, 1, 3, 2)])
def test_svd(nv, rng, dt, shape):
    a = rand(rng, shape, dt)
    u, s, vh = (nv.read(h) for h in multi(nv, lib.nv_linalg_svd, 3, nv.view(a, "transposed"), True))
    m, n = shape[-2:]
    k = min(m, n)
    real = "float64" if dt == "float64" else "float32"
    assert nv_name(s.dtype) == real and nv_name(u.dtype) == dt
    assert u.shape == shape[:-2] + (m, m) and vh.shape == shape[:-2] + (n, n)
    close(s, np.linalg.svd(a.astype(np.complex128 if dt == "complex64" else np.float64), compute_uv=False), dt, 10)
    close((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, dt, 10)
    close(np.conj(mT(u)) @ u, np.broadcast_to(np.eye(m), u.shape), dt, 10)
    close(np.conj(mT(vh)) @ vh, np.broadcast_to(np.eye(n), vh.shape), dt, 10)
    (s2,) = (nv.read(h) for h in multi(nv, lib.nv_linalg_svd, 1, nv.array(a), False))
    close(s2, s, dt, 10)


def test_svd_empty_and_nan(nv):
    u, s, vh = (nv.read(h) for h in multi(nv, lib.nv_linalg_svd, 3, nv.array(np.zeros((0, 3), np.float32)), True))
    assert u.shape == (0, 0) and s.shape == (0,)
    np.testing.assert_array_equal(vh, np.eye(3))
    a = np.array([[[1.0, np.nan], [3.0, 4.0]], [[1.0, 0.0], [0.0, 2.0]]], np.float32)
    u, s, vh = (nv.read(h) for h in multi(nv, lib.nv_linalg_svd, 3, nv.array(a), True))
    assert np.isnan(s[0]).all() and np.isnan(u[0]).all() and np.isnan(vh[0]).all()
    close(s[1], [2.0, 1.0], "float32")


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (3, 7, 7)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(nv, rng, dt, shape, uplo):
    h = rand(rng, shape, dt)
    h = h + np.conj(mT(h))
    junk = h.copy()
    n = shape[-1]
    mask = np.triu(np.ones((n, n), bool), 1) if uplo == "L" else np.tril(np.ones((n, n), bool), -1)
    junk[..., mask] = 7.0
    w, v = (nv.read(x) for x in multi(nv, lib.nv_linalg_eigh, 2, nv.array(junk), uplo.encode()))
    real = "float64" if dt == "float64" else "float32"
    assert nv_name(w.dtype) == real and nv_name(v.dtype) == dt
    wn = np.linalg.eigvalsh(h.astype(np.complex128 if dt == "complex64" else np.float64))
    close(w, wn, dt, 10)
    close(h @ v, v * w[..., None, :], dt, 50)
    wv = nv.read(nv.own(lib.nv_linalg_eigvalsh(nv.array(junk), uplo.encode())))
    close(wv, wn, dt, 10)


def test_eigh_nan(nv):
    a = np.array([[1.0, np.nan], [np.nan, 4.0]], np.float64)
    w, v = (nv.read(x) for x in multi(nv, lib.nv_linalg_eigh, 2, nv.array(a), b"L"))
    assert np.isnan(w).all() and np.isnan(v).all()


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (5, 5), (3, 6, 6)])
def test_eig(nv, rng, dt, shape):
    a = rand(rng, shape, dt)
    w, v = (nv.read(x) for x in multi(nv, lib.nv_linalg_eig, 2, nv.view(a, "transposed")))
    assert w.dtype == np.complex64 and v.dtype == np.complex64
    ref = a.astype(np.complex128)
    close(ref @ v, v * w[..., None, :], "complex64", 100)
    np.testing.assert_allclose(np.linalg.norm(v, axis=-2), 1, rtol=1e-4)
    wv = nv.read(nv.own(lib.nv_linalg_eigvals(nv.array(a))))
    close(sort_eig(wv), sort_eig(np.linalg.eigvals(ref)), "complex64", 100)


def test_eig_rotation(nv):
    w, v = (nv.read(x) for x in multi(nv, lib.nv_linalg_eig, 2, nv.array(np.array([[0.0, -1.0], [1.0, 0.0]], np.float32))))
    np.testing.assert_allclose(w, [1j, -1j], atol=1e-6)


@pytest.mark.parametrize("dt", ["float32", "float64", "int32", "float16"])
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (2, 5, 5), (8, 8)])
def test_det_slogdet(nv, rng, dt, shape):
    a = (rng.integers(-3, 4, shape) if dt == "int32" else rng.standard_normal(shape)).astype(dt)
    # An integer matrix is often exactly singular (its determinant an integer, 0), where
    # float64's sign of a rounding residue and float32's exact zero pivot both are right:
    # such draws are redrawn so the signs compare.
    while dt == "int32" and (np.rint(np.linalg.det(a.astype(np.float64))) == 0).any():
        a = rng.integers(-3, 4, shape).astype(dt)
    det = nv.read(nv.own(lib.nv_linalg_det(nv.view(a, "transposed"))))
    want_dt = {"int32": "float32"}.get(dt, dt)
    assert nv_name(det.dtype) == want_dt
    ref = np.linalg.det(a.astype(np.float64))
    tol = 2e-2 if dt == "float16" else 1e-3
    np.testing.assert_allclose(det, ref, rtol=tol, atol=tol * max(1, np.abs(ref).max()))
    sign, logdet = (nv.read(x) for x in multi(nv, lib.nv_linalg_slogdet, 2, nv.array(a)))
    rs, rl = np.linalg.slogdet(a.astype(np.float64))
    np.testing.assert_array_equal(sign, rs)
    np.testing.assert_allclose(logdet, rl, rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(3, 2), (2, 3), (4, 4), (2, 5, 3)])
def test_pinv(nv, rng, shape):
    a = rand(rng, shape, "float64")
    got = nv.read(nv.own(lib.nv_linalg_pinv(nv.array(a))))
    close(got, np.linalg.pinv(a), "float64", 1e3)
    s = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    close(nv.read(nv.own(lib.nv_linalg_pinv(nv.array(s)))), np.linalg.pinv(s.astype(np.float64)), "float32", 10)


@pytest.mark.parametrize("sa,sb,axis", [((3,), (3,), -1), ((2,), (2,), -1), ((3,), (2,), 0), ((4, 3), (1, 3), -1),
                                        ((3, 5), (3, 5), 0), ((2, 1, 3), (4, 3), -1)])
@pytest.mark.parametrize("dt", ["float32", "int32", "float64"])
def test_cross(nv, rng, sa, sb, axis, dt):
    a = (rng.integers(-5, 5, sa) if dt == "int32" else rng.standard_normal(sa)).astype(dt)
    b = (rng.integers(-5, 5, sb) if dt == "int32" else rng.standard_normal(sb)).astype(dt)
    got = nv.read(nv.own(lib.nv_linalg_cross(nv.array(a), nv.array(b), axis)))
    pad = lambda x: np.concatenate([x, np.zeros_like(np.take(x, [0], axis))], axis) if x.shape[axis] == 2 else x
    want = np.cross(pad(a), pad(b), axis=axis)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def arr_ax(axes):
    if axes is None:
        return None, 0
    return (C.c_int * len(axes))(*axes), len(axes)


@pytest.mark.parametrize("ord_", [None, 1, 2, 0, -1, 3, 0.5, np.inf, -np.inf])
@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("keep", [False, True])
def test_vector_norm(nv, rng, ord_, axis, keep):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    x[0, 0] = 0
    if axis is None and ord_ is not None:
        x = x[0]
    ax, nax = arr_ax(None if axis is None else [axis])
    if ord_ is None:
        h = lib.nv_linalg_norm(nv.array(x), ax, nax, keep)
    else:
        h = lib.nv_linalg_norm_ord(nv.array(x), float(ord_), ax, nax, keep)
    got = nv.read(nv.own(h))
    want = np.linalg.norm(x.astype(np.float64) if ord_ is not None or axis is not None else x.ravel().astype(np.float64),
                          ord=ord_, axis=axis, keepdims=keep)
    if ord_ is None and axis is None and keep:
        want = np.reshape(want, (1, 1))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("ord_", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
@pytest.mark.parametrize("axes", [None, (0, 1), (1, 0), (-1, 0)])
def test_matrix_norm(nv, rng, ord_, axes):
    x = rng.standard_normal((4, 6))
    ax, nax = arr_ax(axes)
    if ord_ is None:
        h = lib.nv_linalg_norm(nv.array(x), ax, nax, False)
    elif isinstance(ord_, str):
        h = lib.nv_linalg_norm_str(nv.array(x), ord_.encode(), ax, nax, False)
    else:
        h = lib.nv_linalg_norm_ord(nv.array(x), float(ord_), ax, nax, False)
    got = nv.read(nv.own(h))
    want = np.linalg.norm(x, ord=ord_, axis=axes)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_norm_dtypes_batch_keepdims(nv, rng):
    x = rng.integers(-5, 5, (2, 3, 4)).astype(np.int32)
    got = nv.read(nv.own(lib.nv_linalg_norm(nv.array(x), None, 0, False)))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.linalg.norm(x.ravel()), rtol=1e-6)
    ax, nax = arr_ax((2, 0))
    g = nv.read(nv.own(lib.nv_linalg_norm_ord(nv.array(x.astype(np.float64)), 1.0, ax, nax, True)))
    np.testing.assert_allclose(g, np.linalg.norm(x.astype(np.float64), 1, axis=(2, 0), keepdims=True))
    z = (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(np.complex64)
    gz = nv.read(nv.own(lib.nv_linalg_norm(nv.array(z), None, 0, False)))
    assert gz.dtype == np.float32
    np.testing.assert_allclose(gz, np.linalg.norm(z), rtol=1e-5)


def test_empty_inputs(nv):
    e = np.zeros((0, 0), np.float32)
    assert nv.read(nv.own(lib.nv_linalg_inv(nv.array(e)))).shape == (0, 0)
    assert nv.read(nv.own(lib.nv_linalg_cholesky(nv.array(np.zeros((3, 0, 0), np.float64)), False))).shape == (3, 0, 0)
    q, r = (nv.read(h) for h in multi(nv, lib.nv_linalg_qr, 2, nv.array(np.zeros((0, 3), np.float32))))
    assert q.shape == (0, 0) and r.shape == (0, 3)
    w, v = (nv.read(h) for h in multi(nv, lib.nv_linalg_eigh, 2, nv.array(np.zeros((2, 0, 0), np.float32)), b"L"))
    assert w.shape == (2, 0) and v.shape == (2, 0, 0)
    lu, piv = (nv.read(h) for h in multi(nv, lib.nv_linalg_lu_factor, 2, nv.array(np.zeros((2, 0), np.float32))))
    assert lu.shape == (2, 0) and piv.shape == (0,)


def test_errors(nv):
    f = nv.array(np.ones((3, 4), np.float32))
    i = nv.array(np.ones((3, 3), np.int32))
    v = nv.array(np.ones((3,), np.float32))
    h = nv.array(np.ones((3, 3), np.float16))
    c = nv.array(np.ones((3, 3), np.complex64))
    for name, call in [("cholesky", lambda x: lib.nv_linalg_cholesky(x, False)),
                       ("inv", lib.nv_linalg_inv), ("tri_inv", lambda x: lib.nv_linalg_tri_inv(x, False)),
                       ("eigvalsh", lambda x: lib.nv_linalg_eigvalsh(x, b"L")), ("eigvals", lib.nv_linalg_eigvals),
                       ("det", lib.nv_linalg_det)]:
        msg = err(nv, call(f))
        assert name in msg and "(3,4)" in msg and "square" in msg
    for name, call in [("inv", lib.nv_linalg_inv), ("cholesky", lambda x: lib.nv_linalg_cholesky(x, False)),
                       ("pinv", lib.nv_linalg_pinv)]:
        assert name in err(nv, call(i)) and "int32" in err(nv, call(i))
        assert "float16" in err(nv, call(h))
        assert "dimensions" in err(nv, call(v))
    assert "complex64" in err(nv, lib.nv_linalg_inv(c))
    assert "complex" in err(nv, lib.nv_linalg_det(c))
    msg = err(nv, lib.nv_linalg_solve(nv.array(np.eye(3, dtype=np.float32)), nv.array(np.ones(4, np.float32))))
    assert "solve" in msg and "(3,3)" in msg and "(4,)" in msg
    msg = err(nv, lib.nv_linalg_solve_triangular(i, i, False))
    assert "solve_triangular" in msg and "float32 or float64" in msg
    msg = err(nv, lib.nv_linalg_cross(nv.array(np.ones(4)), nv.array(np.ones(4)), -1))
    assert "cross" in msg and "2 or 3" in msg
    msg = err(nv, lib.nv_linalg_norm_ord(f, 3.0, None, 0, False))
    assert "norm" in msg and "3" in msg
    msg = err(nv, lib.nv_linalg_norm_str(v, b"fro", None, 0, False))
    assert "norm" in msg and "fro" in msg
    msg = err(nv, lib.nv_linalg_norm_ord(nv.array(np.ones((2, 2, 2))), 2.0, None, 0, False))
    assert "norm" in msg and "(2,2,2)" in msg
    outs = (C.c_void_p * 2)()
    assert lib.nv_linalg_qr(i, outs) != 0
    for k in range(2):
        nv.own(outs[k])
    assert "qr" in nv.status(outs[0])[1] and nv.status(outs[1])[0] != 0


@pytest.mark.parametrize("upper", [False, True])
def test_wide_right_hand_sides(nv, rng, upper):
    """Solves with many right-hand sides (cut into column slices across the pool) and the
    inverse of a larger matrix."""
    a = rand(rng, (96, 96), "float64") + 20 * np.eye(96)
    b = rand(rng, (96, 333), "float64")
    t = np.triu(a) if upper else np.tril(a)
    got = nv.read(nv.own(lib.nv_linalg_solve_triangular(nv.array(a), nv.view(b, "strided"), upper)))
    close(got, np.linalg.solve(t, b), "float64", 100)
    close(nv.read(nv.own(lib.nv_linalg_inv(nv.array(a)))), np.linalg.inv(a), "float64", 100)
    a2 = np.stack([a, a.T])
    close(nv.read(nv.own(lib.nv_linalg_inv(nv.array(a2)))), np.linalg.inv(a2), "float64", 100)


def test_half_norms_compute_in_float32(nv):
    """float16/bfloat16 norms are computed in float32 and rounded once: squares past float16's
    range do not overflow."""
    x = np.array([300.0, 400.0], np.float16)
    got = nv.read(nv.own(lib.nv_linalg_norm(nv.array(x), None, 0, False)))
    assert got.dtype == np.float16 and got == np.float16(500.0)
    got = nv.read(nv.own(lib.nv_linalg_norm_ord(nv.array(x), 3.0, None, 0, False)))
    np.testing.assert_allclose(got.astype(np.float64), (300.0**3 + 400.0**3) ** (1 / 3), rtol=1e-3)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_large_single_matrices(nv, rng, dt):
    """Lone large matrices: cholesky through LAPACK's potrf, lu_factor blocked across the pool
    from order 1024 (LAPACK's getrf below): the same factors as LAPACK's, square, tall and
    wide, both triangles."""
    n = 1024
    s = spd(rng, (n, n), dt)
    l = nv.read(nv.own(lib.nv_linalg_cholesky(nv.array(s), False)))
    close(l, np.linalg.cholesky(s.astype(np.float64)), dt, 100)
    assert np.all(np.triu(l, 1) == 0)
    u = nv.read(nv.own(lib.nv_linalg_cholesky(nv.view(s, "transposed"), True)))
    close(u, mT(np.linalg.cholesky(s.astype(np.float64))), dt, 100)
    assert np.all(np.tril(u, -1) == 0)
    bad = s.copy()
    bad[700, 700] = -1e6
    assert np.isnan(nv.read(nv.own(lib.nv_linalg_cholesky(nv.array(bad), False)))).all()
    for shape in [(n, n), (1100, n), (n, 1040), (500, 400)]:
        a = rand(rng, shape, dt)
        p, lo, up = (nv.read(h) for h in multi(nv, lib.nv_linalg_lu, 3, nv.array(a)))
        lp = np.take_along_axis(lo, p[..., None].astype(np.int64), -2)
        close(lp @ up, a, dt, 1e3)
        assert np.abs(lo).max() <= 1 + 1e-6  # partial pivoting: multipliers at most 1
        lu, piv = (nv.read(h) for h in multi(nv, lib.nv_linalg_lu_factor, 2, nv.array(a)))
        m, k = shape[0], min(shape)
        close(np.tril(lu[:, :k], -1) + np.eye(m, k), lo, dt)
    a = rand(rng, (n, n), dt) + 10 * np.eye(n, dtype=dt)
    close(nv.read(nv.own(lib.nv_linalg_inv(nv.array(a)))), np.linalg.inv(a.astype(np.float64)), dt, 1e3)
    sign, logdet = (nv.read(h) for h in multi(nv, lib.nv_linalg_slogdet, 2, nv.array(a)))
    rs, rl = np.linalg.slogdet(a.astype(np.float64))
    assert sign == rs
    np.testing.assert_allclose(logdet, rl, rtol=1e-4 if dt == "float32" else 1e-10)


def test_null_arguments_and_sticky_errors(nv):
    """NULL inputs and output lists fail naming the op; an input's error passes to every result
    of a multi-output builder."""
    outs = (C.c_void_p * 3)()
    for name, fn, n in [("qr", lib.nv_linalg_qr, 2), ("lu", lib.nv_linalg_lu, 3),
                        ("lu_factor", lib.nv_linalg_lu_factor, 2), ("eig", lib.nv_linalg_eig, 2),
                        ("slogdet", lib.nv_linalg_slogdet, 2)]:
        assert fn(None, outs) != 0
        for k in range(n):
            nv.own(outs[k])
        st, msg = nv.status(outs[0])
        assert st != 0 and name in msg and "NULL" in msg
        assert all(nv.status(outs[k])[0] != 0 for k in range(n))
        assert fn(nv.array(np.eye(2, dtype=np.float32)), None) != 0
        assert name in lib.nv_last_error().decode()
    bad = nv.own(lib.nv_linalg_inv(nv.array(np.ones((2, 3), np.float32))))
    msg = nv.status(bad)[1]
    for k, h in enumerate(multi(nv, lib.nv_linalg_svd, 3, bad, True)):
        assert nv.status(h)[1] == msg, k
    assert nv.status(nv.own(lib.nv_linalg_solve(bad, bad)))[1] == msg


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("shape", [(31, 33), (33, 31), (32, 32), (65, 40), (40, 97)])
def test_tile_edges(nv, rng, dt, shape):
    """Orders on either side of the 32 x 32 tiles that move matrices to and from LAPACK's
    column-major layout: svd reconstructs, qr and lu (real) their input, eigh the matrix."""
    a = rand(rng, shape, dt)
    u, s, vh = (nv.read(h) for h in multi(nv, lib.nv_linalg_svd, 3, nv.array(a), True))
    k = min(shape)
    close((u[:, :k] * s) @ vh[:k], a, dt, 100)
    if dt != "complex64":
        q, r = (nv.read(h) for h in multi(nv, lib.nv_linalg_qr, 2, nv.array(a)))
        close(q @ r, a, dt, 100)
        p, lo, up = (nv.read(h) for h in multi(nv, lib.nv_linalg_lu, 3, nv.array(a)))
        lp = np.take_along_axis(lo, p[..., None].astype(np.int64), -2)
        close(lp @ up, a, dt, 100)
    h = spd(rng, (shape[0], shape[0]), dt)
    w, v = (nv.read(x) for x in multi(nv, lib.nv_linalg_eigh, 2, nv.array(h), b"L"))
    close((v * w) @ np.conj(v.T), h, dt, 100)
