"""The decompositions on the GPU (cuSOLVER / cuBLAS, src/cuda/linalg_solver.c) against nuvec's
CPU results (LAPACK) and reconstruction checks: cholesky, lu_factor (and lu, solve, inv, det
over it), solve_triangular (tri_inv, cholesky_inv), qr, svd, eigh, eig; batched (one matrix and
several: the batched potrf / trsm paths and the per-matrix loops), transposed and strided
inputs, sizes 1, primes and 0, float32/float64 (complex64 where the op takes it), and the NaN
results of indefinite, NaN and singular inputs, which the device's info checks produce.

Factorizations are unique only up to signs and phases, so U, V and Q are checked by
reconstruction and orthogonality, and values against the CPU within a tolerance of the dtype.
Every op is built with the GPU as the default device (skipped where no GPU is usable) and must
run there (no CPU fallback)."""
import ctypes as C
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import needs_gpu, On, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import Session, lib, nv_name, sig  # noqa: E402

P = C.c_void_p
B = C.c_bool
PP = C.POINTER(C.c_void_p)
sig("nv_linalg_cholesky", P, P, B)
sig("nv_linalg_cholesky_inv", P, P, B)
sig("nv_linalg_inv", P, P)
sig("nv_linalg_tri_inv", P, P, B)
sig("nv_linalg_lu", C.c_int, P, PP)
sig("nv_linalg_lu_factor", C.c_int, P, PP)
sig("nv_linalg_solve", P, P, P)
sig("nv_linalg_solve_triangular", P, P, P, B)
sig("nv_linalg_qr", C.c_int, P, PP)
sig("nv_linalg_svd", C.c_int, P, B, PP)
sig("nv_linalg_eigh", C.c_int, P, C.c_char_p, PP)
sig("nv_linalg_eig", C.c_int, P, PP)
sig("nv_linalg_det", P, P)
sig("nv_linalg_pinv", P, P)

pytestmark = needs_gpu
TOL = {"float32": 3e-4, "float64": 1e-9, "complex64": 3e-4}


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def run(nv, make, n=1):
    """The n results of `make()` on the GPU (no CPU fallback) and on the CPU."""
    res = {}
    for where in ("cpu", "gpu"):
        with On(where):
            hs = make()
            hs = hs if isinstance(hs, list) else [hs]
            before = lib.nv_gpu_fallback_count()
            res[where] = [nv.read(nv.own(h)) for h in hs]
            if where == "gpu":
                assert lib.nv_gpu_fallback_count() == before, "the op fell back to the CPU"
    return res["gpu"], res["cpu"]


def multi(fn, n, *args):
    out = (C.c_void_p * n)()
    fn(*args, out)
    return [out[i] for i in range(n)]


def close(got, want, dt, scale=1.0):
    tol = TOL[dt] * scale
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


def mT(x):
    return np.swapaxes(x, -1, -2)


def sort_eig(w):
    """Eigenvalues in a canonical order (by real part rounded, then imaginary part), so that
    conjugate pairs whose real parts differ by rounding compare in the same order."""
    w = np.asarray(w).reshape(-1, np.shape(w)[-1])
    return np.stack([r[np.lexsort((r.imag, np.round(r.real, 3)))] for r in w])


def rand(rng, shape, dt):
    x = rng.standard_normal(shape)
    if dt == "complex64":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dt)


def spd(rng, shape, dt):
    a = rand(rng, shape, "float64")
    return (a @ mT(a) + shape[-1] * np.eye(shape[-1])).astype(dt)


BATCHES = [(), (1,), (3,), (2, 2)]
SQUARE = sample([(b, n) for b in BATCHES for n in (1, 2, 5, 17, 64)], 12)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("batch,n", SQUARE)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(nv, rng, dt, batch, n, upper):
    a = spd(rng, batch + (n, n), dt)
    (g,), (c,) = run(nv, lambda: lib.nv_linalg_cholesky(nv.view(a, "transposed" if not batch else "contiguous"), upper))
    assert nv_name(g.dtype) == dt
    close(g, c, dt, 10)
    f = mT(g) if upper else g
    close(f @ mT(f), a, dt, 10 * n)


def test_cholesky_indefinite_is_nan(nv):
    a = np.array([[[4.0, 2.0], [2.0, 5.0]], [[1.0, 2.0], [2.0, -1.0]]], np.float64)
    (g,), (c,) = run(nv, lambda: lib.nv_linalg_cholesky(nv.array(a), False))
    assert np.isnan(g[1]).all() and np.isnan(c[1]).all()
    close(g[0], c[0], "float64")


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape", sample([(1, 1), (5, 5), (17, 17), (3, 4, 4), (6, 3), (3, 6), (2, 2, 9, 5), (64, 64)], 6))
def test_lu_factor(nv, rng, dt, shape):
    a = rand(rng, shape, dt)
    g, c = run(nv, lambda: multi(lib.nv_linalg_lu_factor, 2, nv.view(a, "strided")))
    assert g[1].dtype == np.uint32 and g[1].shape == c[1].shape
    # Partial pivoting picks the same rows unless two candidates tie within rounding: where the
    # pivots agree, so must the factors.
    same = np.all(g[1] == c[1], axis=-1)
    close(g[0][same], c[0][same], dt, 100)
    g, c = run(nv, lambda: multi(lib.nv_linalg_lu, 3, nv.array(a)))
    lp = np.take_along_axis(g[1], g[0][..., None].astype(np.int64), -2)
    close(lp @ g[2], a, dt, 100)
    assert np.all(np.triu(g[1], 1) == 0) and np.all(np.tril(g[2], -1) == 0)
    np.testing.assert_array_equal(np.sort(g[0], axis=-1), np.broadcast_to(np.arange(shape[-2]), g[0].shape))


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("batch,n", SQUARE)
def test_solve_inv_det(nv, rng, dt, batch, n):
    a = rand(rng, batch + (n, n), dt) + 2 * np.eye(n, dtype=dt) * np.sqrt(n)
    b = rand(rng, batch + (n, 3), dt)
    (g,), (c,) = run(nv, lambda: lib.nv_linalg_solve(nv.array(a), nv.view(b, "transposed")))
    close(g, c, dt, 100)
    (g,), (c,) = run(nv, lambda: lib.nv_linalg_inv(nv.array(a)))
    close(g, c, dt, 100)
    (g,), (c,) = run(nv, lambda: lib.nv_linalg_det(nv.array(a)))
    close(g, c, dt, 100)


def test_inv_singular_is_not_finite(nv):
    a = np.array([[1.0, 2.0], [2.0, 4.0]], np.float32)
    (g,), _ = run(nv, lambda: lib.nv_linalg_inv(nv.array(a)))
    assert not np.isfinite(g).all()


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("batch,n", SQUARE)
@pytest.mark.parametrize("upper", [False, True])
def test_solve_triangular(nv, rng, dt, batch, n, upper):
    a = rand(rng, batch + (n, n), dt) + 3 * np.eye(n, dtype=dt)
    b = rand(rng, batch + (n, 4), dt)
    (g,), (c,) = run(nv, lambda: lib.nv_linalg_solve_triangular(nv.array(a), nv.array(b), upper))
    close(g, c, dt, 100)
    (g,), (c,) = run(nv, lambda: lib.nv_linalg_tri_inv(nv.view(a, "strided"), upper))
    close(g, c, dt, 100)
    l = spd(rng, batch + (n, n), dt)
    (g,), (c,) = run(nv, lambda: lib.nv_linalg_cholesky_inv(nv.array(np.tril(l) if not upper else np.triu(l)), upper))
    close(g, c, dt, 100)


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape", sample([(1, 1), (5, 3), (3, 5), (17, 17), (2, 6, 4), (2, 2, 4, 6), (0, 3), (64, 32)], 6))
def test_qr(nv, rng, dt, shape):
    a = rand(rng, shape, dt)
    g, c = run(nv, lambda: multi(lib.nv_linalg_qr, 2, nv.view(a, "transposed")))
    q, r = g
    k = min(shape[-2:])
    close(q @ r, a, dt, 10)
    close(mT(q) @ q, np.broadcast_to(np.eye(k), q.shape[:-2] + (k, k)), dt, 10)
    assert np.all(np.tril(r, -1) == 0)
    close(np.abs(r), np.abs(c[1]), dt, 100)


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("shape", sample([(1, 1), (5, 3), (3, 5), (17, 17), (2, 6, 4), (3, 2, 7), (0, 3), (3, 0), (40, 33)], 7))
def test_svd(nv, rng, dt, shape):
    a = rand(rng, shape, dt)
    g, c = run(nv, lambda: multi(lib.nv_linalg_svd, 3, nv.array(a), True))
    u, s, vh = g
    m, n = shape[-2:]
    k = min(m, n)
    close(s, c[1], dt, 10)
    close((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a, dt, 10)
    close(np.conj(mT(u)) @ u, np.broadcast_to(np.eye(m), u.shape), dt, 10)
    close(np.conj(mT(vh)) @ vh, np.broadcast_to(np.eye(n), vh.shape), dt, 10)
    g, c = run(nv, lambda: multi(lib.nv_linalg_svd, 1, nv.array(a), False))
    close(g[0], c[0], dt, 10)


def test_svd_nan(nv):
    a = np.array([[[1.0, np.nan], [3.0, 4.0]], [[1.0, 0.0], [0.0, 2.0]]], np.float32)
    g, _ = run(nv, lambda: multi(lib.nv_linalg_svd, 3, nv.array(a), True))
    assert all(np.isnan(x[0]).all() for x in g)
    close(g[1][1], [2.0, 1.0], "float32")


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("batch,n", SQUARE)
@pytest.mark.parametrize("uplo", [b"L", b"U"])
def test_eigh(nv, rng, dt, batch, n, uplo):
    h = rand(rng, batch + (n, n), dt)
    h = (h + np.conj(mT(h))).astype(dt)
    g, c = run(nv, lambda: multi(lib.nv_linalg_eigh, 2, nv.array(h), uplo))
    w, v = g
    close(w, c[0], dt, 10 * n)
    close(h @ v, v * w[..., None, :], dt, 10 * n)


def test_eigh_nan(nv):
    a = np.array([[1.0, np.nan], [np.nan, 4.0]], np.float32)
    g, _ = run(nv, lambda: multi(lib.nv_linalg_eigh, 2, nv.array(a), b"L"))
    assert np.isnan(g[0]).all() and np.isnan(g[1]).all()


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("batch,n", sample([(b, n) for b in BATCHES for n in (1, 2, 5, 16)], 6))
def test_eig(nv, rng, dt, batch, n):
    a = rand(rng, batch + (n, n), dt)
    g, c = run(nv, lambda: multi(lib.nv_linalg_eig, 2, nv.array(a)))
    w, v = g
    assert w.dtype == np.complex64 and v.dtype == np.complex64
    close(a.astype(np.complex128) @ v, v * w[..., None, :], "complex64", 100)
    close(sort_eig(w), sort_eig(c[0]), "complex64", 100)


def test_pinv(nv, rng):
    a = rand(rng, (2, 7, 4), "float64")
    (g,), (c,) = run(nv, lambda: lib.nv_linalg_pinv(nv.array(a)))
    close(g, c, "float64", 1e3)
