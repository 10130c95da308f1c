"""logcumsumexp of complex64 (src/ops/reduce_scan_complex.c) against NumPy's
log(cumsum(exp(z))) in complex128: every axis and the flattened array, forward and reversed,
inclusive and exclusive, contiguous / transposed / strided / reversed inputs, empty and 0-d
arrays, -inf real parts, and magnitudes where exp then cumsum would overflow."""
import ctypes as C
import itertools
import zlib

import numpy as np
import pytest

from nvc import IP, P, Session, lib, sig

sig("nv_logcumsumexp", P, P, IP, C.c_bool, C.c_bool)


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def axis_ptr(axis):
    return None if axis is None else C.pointer(C.c_int(axis))


def reference(z, axis, reverse, inclusive):
    """NumPy's definition in complex128, shifted by the running maximum of the real part so
    that the large cases stay finite (exact in exact arithmetic)."""
    z = z.astype(np.complex128)
    if axis is None:
        z, axis = z.reshape(-1), 0
    z = np.moveaxis(z, axis, -1)
    if reverse:
        z = z[..., ::-1]
    out = np.empty_like(z)
    with np.errstate(all="ignore"):
        for k in range(z.shape[-1]):
            m = np.max(z[..., : k + 1].real, axis=-1, keepdims=True)
            m = np.where(np.isfinite(m), m, 0)
            out[..., k] = (m[..., 0] + np.log(np.sum(np.exp(z[..., : k + 1] - m), axis=-1)))
    if not inclusive and out.shape[-1]:
        out = np.concatenate([np.full(out.shape[:-1] + (1,), -np.inf + 0j), out[..., :-1]], -1)
    if reverse:
        out = out[..., ::-1]
    return np.moveaxis(out, -1, axis)


def same(got, want, tol=2e-4):
    """Equal real parts (where finite, and the same infinities) and phases (mod 2 pi)."""
    assert got.shape == want.shape and got.dtype == np.complex64
    fin = np.isfinite(want.real)
    np.testing.assert_array_equal(np.isfinite(got.real), fin)
    np.testing.assert_array_equal(got.real[~fin], want.real[~fin])
    scale = 1 + np.abs(want.real[fin])
    assert np.all(np.abs(got.real[fin] - want.real[fin]) <= tol * scale)
    ph = np.abs(np.exp(1j * got.imag[fin]) - np.exp(1j * want.imag[fin]))
    assert np.all(ph <= tol * scale)


CASES = list(itertools.product(
    [((4, 5), 0), ((4, 5), 1), ((3, 4, 5), -2), ((7,), 0), ((2, 3), None), ((), None),
     ((0, 3), 0), ((3, 200), 1), ((1,), 0), ((33,), 0)],
    ["contiguous", "transposed", "strided", "reversed"], [False, True], [True, False]))


@pytest.mark.parametrize("case,layout,rev,inc", CASES)
def test_matches_numpy(nv, case, layout, rev, inc):
    shape, axis = case
    rng = np.random.default_rng(zlib.crc32(repr((shape, layout, rev, inc)).encode()))
    z = (rng.standard_normal(shape) * 3 + 1j * rng.standard_normal(shape) * 3).astype(np.complex64)
    got = nv.read(nv.own(lib.nv_logcumsumexp(nv.view(z, layout), axis_ptr(axis), rev, inc)))
    same(got, reference(z, axis, rev, inc))


def test_large_and_infinite_real_parts(nv):
    z = np.array([1000 + 1j, 1001 + 2j, -1000 + 0j, -np.inf + 0j, 1002 - 1j, -3000 + 2j],
                 np.complex64)
    got = nv.read(nv.own(lib.nv_logcumsumexp(nv.array(z), None, False, True)))
    same(got, reference(z, None, False, True))
    lead = np.array([-np.inf + 0j, -np.inf + 0j, 2 + 1j], np.complex64)
    got = nv.read(nv.own(lib.nv_logcumsumexp(nv.array(lead), None, False, True)))
    assert np.all(got.real[:2] == -np.inf) and abs(got[2] - (2 + 1j)) < 1e-6


def test_every_length_up_to_70(nv):
    rng = np.random.default_rng(1)
    for n in range(70):
        z = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
        for rev, inc in itertools.product([False, True], [True, False]):
            got = nv.read(nv.own(lib.nv_logcumsumexp(nv.array(z), axis_ptr(0), rev, inc)))
            same(got, reference(z, 0, rev, inc))
