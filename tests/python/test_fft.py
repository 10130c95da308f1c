"""The fft family against numpy.fft through the C API: fft, ifft, rfft, irfft and their 2-D and
n-D forms with n/s cropping and zero-padding, axes (negative, repeated: an error), the three
norms, lengths 1, 2, primes (Bluestein), powers of two and mixed radices, batched, strided and
transposed inputs, every input dtype (the result is complex64 / float32 as MLX's), NaN; the
frequencies and shifts. Gradients and vmap are tested through the Python module
(python/tests/test_fft.py)."""
import ctypes as C

import numpy as np
import pytest

from nvc import CODE, I, NuvecError, ints, lib, np_dtype, sig

P = C.c_void_p
IP = C.POINTER(C.c_int)
D = C.c_double
for name in ("nv_fft_fft", "nv_fft_ifft", "nv_fft_rfft", "nv_fft_irfft"):
    sig(name, P, P, IP, I, I)
for name in ("nv_fft_fftn", "nv_fft_ifftn", "nv_fft_rfftn", "nv_fft_irfftn"):
    sig(name, P, P, IP, IP, I, I)
sig("nv_fft_fftfreq", P, I, D)
sig("nv_fft_rfftfreq", P, I, D)
sig("nv_fft_fftshift", P, P, IP, I)
sig("nv_fft_ifftshift", P, P, IP, I)

NORMS = {"backward": 0, "ortho": 1, "forward": 2}
ONE = {"fft": np.fft.fft, "ifft": np.fft.ifft, "rfft": np.fft.rfft, "irfft": np.fft.irfft}
ND = {"fftn": np.fft.fftn, "ifftn": np.fft.ifftn, "rfftn": np.fft.rfftn, "irfftn": np.fft.irfftn}
LENGTHS = [1, 2, 3, 4, 5, 7, 8, 12, 16, 30, 64, 97, 105, 128, 210, 1009, 1024, 2048]


def rand(rng, shape, complex_=False):
    x = rng.standard_normal(shape)
    if complex_:
        x = x + 1j * rng.standard_normal(shape)
    return x


def check(got, want, n, rtol=None):
    """float32 transforms: an error bound that grows with log n, relative to the data's scale."""
    want = np.asarray(want)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    tol = (rtol or 4e-7) * (np.log2(max(n, 2)) + 4)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


def c1(nv, op, x, n=None, axis=-1, norm="backward"):
    nn = (C.c_int * 1)(n) if n is not None else None
    return nv.own(getattr(lib, "nv_fft_" + op)(x, nn, axis, NORMS[norm]))


def cn(nv, op, x, s=None, axes=None, norm="backward"):
    sa = ints(s)[0] if s is not None else None
    aa = ints(axes)[0] if axes is not None else None
    na = len(axes) if axes is not None else (len(s) if s is not None else 0)
    return nv.own(getattr(lib, "nv_fft_" + op)(x, sa, aa, na, NORMS[norm]))


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", list(ONE))
def test_lengths(nv, rng, op, n):
    if op == "irfft":
        x = rand(rng, (3, n // 2 + 1), True)
        x[:, 0] = x[:, 0].real
        if n % 2 == 0:
            x[:, -1] = x[:, -1].real
        want = np.fft.irfft(x, n=n)
        got = nv.read(c1(nv, op, nv.array(x.astype(np.complex64)), n=n))
        assert got.dtype == np.float32
    else:
        x = rand(rng, (3, n), op != "rfft")
        xt = x.astype(np.complex64 if op != "rfft" else np.float32)
        want = ONE[op](xt.astype(np.complex128 if op != "rfft" else np.float64))
        got = nv.read(c1(nv, op, nv.array(xt)))
        assert got.dtype == np.complex64
    check(got, want, n)


@pytest.mark.parametrize("norm", list(NORMS))
@pytest.mark.parametrize("op", list(ONE))
def test_norms_and_n(nv, rng, op, norm):
    x = rand(rng, (4, 10), op != "rfft")
    dt = np.float32 if op == "rfft" else np.complex64
    xt = x.astype(dt)
    for n in (None, 4, 10, 17, 32):
        want = ONE[op](xt.astype(np.complex128 if dt == np.complex64 else np.float64), n=n,
                       norm=norm)
        got = nv.read(c1(nv, op, nv.array(xt), n=n, norm=norm))
        check(got, want, n or 10)


@pytest.mark.parametrize("layout", ["transposed", "strided", "reversed"])
@pytest.mark.parametrize("op", list(ONE))
def test_layouts_and_axes(nv, rng, op, layout):
    x = rand(rng, (6, 5, 8), op != "rfft")
    dt = np.float32 if op == "rfft" else np.complex64
    xt = x.astype(dt)
    for axis in (0, 1, -1, -3):
        want = ONE[op](xt.astype(np.complex128 if dt == np.complex64 else np.float64), axis=axis)
        got = nv.read(c1(nv, op, nv.view(xt, layout), axis=axis))
        check(got, want, x.shape[axis])


@pytest.mark.parametrize("dtype", ["bool", "int32", "uint8", "float16", "bfloat16", "float32",
                                   "float64", "complex64"])
def test_input_dtypes(nv, rng, dtype):
    x = (rng.standard_normal((3, 6)) * 3)
    xd = x.astype(np_dtype(dtype)) if dtype != "bool" else x > 0
    ref = xd.astype(np.float64) if dtype != "complex64" else xd.astype(np.complex128)
    got = nv.read(c1(nv, "fft", nv.array(xd)))
    assert got.dtype == np.complex64
    check(got, np.fft.fft(ref), 6)
    got = nv.read(c1(nv, "rfft", nv.array(xd)))
    assert got.dtype == np.complex64
    check(got, np.fft.rfft(ref.real), 6)
    got = nv.read(c1(nv, "irfft", nv.array(xd)))
    assert got.dtype == np.float32
    check(got, np.fft.irfft(ref), 10)


@pytest.mark.parametrize("op", list(ND))
def test_nd(nv, rng, op):
    x = rand(rng, (4, 6, 5), op != "rfftn")
    dt = np.float32 if op == "rfftn" else np.complex64
    xt = x.astype(dt)
    xr = xt.astype(np.complex128 if dt == np.complex64 else np.float64)
    cases = [(None, None), (None, [0, 2]), ([3, 8], None), ([5, 4], [-1, 0]), ([2, 7, 6], [1, 0, 2]),
             (None, [1])]
    for s, axes in cases:
        for norm in NORMS:
            ref_axes = axes if axes is not None or s is None else list(range(3 - len(s), 3))
            want = ND[op](xr, s=s, axes=ref_axes, norm=norm)
            got = nv.read(cn(nv, op, nv.view(xt, "transposed"), s=s, axes=axes, norm=norm))
            check(got, want, 64)


def test_nan_and_inf(nv):
    x = np.array([1, np.nan, 3, 4], np.complex64)
    got = nv.read(c1(nv, "fft", nv.array(x)))
    assert np.isnan(got).all()
    y = np.array([np.inf, 0, 0, 0, 0], np.float32)
    got = nv.read(c1(nv, "rfft", nv.array(y)))
    assert np.isinf(got.real).all()


def test_empty_batch(nv):
    x = np.zeros((0, 8), np.complex64)
    got = nv.read(c1(nv, "fft", nv.array(x)))
    assert got.shape == (0, 8) and got.dtype == np.complex64
    got = nv.read(c1(nv, "irfft", nv.array(x)))
    assert got.shape == (0, 14)


def err(nv, h, *words):
    with pytest.raises(NuvecError) as e:
        nv.read(h)
    for w in words:
        assert w in e.value.message, e.value.message


def test_errors(nv):
    a = nv.array(np.ones((3, 4), np.float32))
    err(nv, c1(nv, "fft", a, n=0), "fftn", "size 0")
    err(nv, c1(nv, "irfft", a, n=-2), "irfftn", "size -2")
    err(nv, c1(nv, "fft", a, axis=2), "fftn", "axis 2", "(3,4)")
    err(nv, cn(nv, "fftn", a, axes=[0, 0]), "fftn", "repeated")
    err(nv, cn(nv, "fftn", a, axes=[1, -1]), "repeated")
    err(nv, c1(nv, "fft", nv.array(np.ones((0,), np.float32))), "size 0")
    err(nv, c1(nv, "fft", nv.array(np.float32(1.0))), "1 axes", "shape ()")
    err(nv, cn(nv, "rfftn", a, s=[2, 2, 2]), "3 axes")
    err(nv, nv.own(lib.nv_fft_fft(a, None, -1, 7)), "norm")
    err(nv, nv.own(lib.nv_fft_fftfreq(0, 1.0)), "fftfreq", "positive")


def test_no_axes_is_identity(nv):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = nv.read(cn(nv, "fftn", nv.array(x), axes=[]))
    np.testing.assert_array_equal(got, x)


def test_freqs_and_shifts(nv, rng):
    for n in (1, 2, 5, 8, 11):
        for d in (1.0, 0.25):
            np.testing.assert_allclose(nv.read(nv.own(lib.nv_fft_fftfreq(n, d))),
                                       np.fft.fftfreq(n, d), rtol=1e-6)
            np.testing.assert_allclose(nv.read(nv.own(lib.nv_fft_rfftfreq(n, d))),
                                       np.fft.rfftfreq(n, d), rtol=1e-6)
    x = rng.standard_normal((5, 4, 3)).astype(np.float32)
    for axes in (None, [0], [-1, 1]):
        aa = ints(axes)[0] if axes is not None else None
        na = len(axes) if axes is not None else 0
        got = nv.read(nv.own(lib.nv_fft_fftshift(nv.array(x), aa, na)))
        np.testing.assert_array_equal(got, np.fft.fftshift(x, axes=axes))
        got = nv.read(nv.own(lib.nv_fft_ifftshift(nv.array(x), aa, na)))
        np.testing.assert_array_equal(got, np.fft.ifftshift(x, axes=axes))

