"""mx.logcumsumexp of complex64 arrays: against NumPy's log(cumsum(exp(z))), MLX where it is
installed, its gradient (through the complex logaddexp steps, MLX's conjugate convention) by
finite differences, and vmap."""
import numpy as np
import pytest

import nuvec as mx


def z_of(rng, shape):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def close(got, want, tol=1e-4):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.real, want.real, rtol=tol, atol=tol)
    np.testing.assert_allclose(np.exp(1j * got.imag), np.exp(1j * want.imag), rtol=tol, atol=tol)


def test_matches_numpy_and_mlx():
    rng = np.random.default_rng(0)
    z = z_of(rng, (3, 9))
    for axis in (0, 1, None):
        for reverse in (False, True):
            y = mx.logcumsumexp(mx.array(z), axis=axis, reverse=reverse)
            assert y.dtype == mx.complex64
            zz = z.reshape(-1) if axis is None else z
            ax = 0 if axis is None else axis
            want = np.log(np.cumsum(np.exp(np.flip(zz, ax) if reverse else zz), axis=ax))
            close(y, np.flip(want, ax) if reverse else want)
    m = pytest.importorskip("mlx.core")
    for kw in ({}, {"axis": 1}, {"axis": 0, "reverse": True}, {"axis": 1, "inclusive": False}):
        close(mx.logcumsumexp(mx.array(z), **kw), m.logcumsumexp(m.array(z), **kw))


def test_gradient_by_finite_differences():
    rng = np.random.default_rng(1)
    z = z_of(rng, (6,))
    w = z_of(rng, (6,))

    def f(a, b):
        y = mx.logcumsumexp(a + 1j * b)
        return (mx.real(y) * mx.array(w.real) + mx.imag(y) * mx.array(w.imag)).sum()

    ga, gb = mx.grad(f, argnums=(0, 1))(mx.array(z.real), mx.array(z.imag))
    eps = 1e-3
    for i in range(6):
        for g, part in ((ga, 0), (gb, 1)):
            d = np.zeros(6, np.float32)
            d[i] = eps
            a, b = z.real.copy(), z.imag.copy()
            hi = f(mx.array(a + d * (part == 0)), mx.array(b + d * (part == 1))).item()
            lo = f(mx.array(a - d * (part == 0)), mx.array(b - d * (part == 1))).item()
            assert abs(np.array(g)[i] - (hi - lo) / (2 * eps)) < 2e-2


def test_vmap():
    rng = np.random.default_rng(2)
    z = mx.array(z_of(rng, (4, 5)))
    got = mx.vmap(lambda r: mx.logcumsumexp(r, axis=0))(z)
    close(got, mx.logcumsumexp(z, axis=1))
