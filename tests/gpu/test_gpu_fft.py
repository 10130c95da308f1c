"""The CUDA backend's fft family (cuFFT captured into the graph) on the GPU against nuvec's CPU
results: the four kinds (C2C forward and inverse, R2C, C2R) over lengths 1, 2, primes, powers of
two and mixed radices, batched, along every axis (strided rows copied contiguous first),
transposed, strided and reversed inputs, the three norms (the scale kernel), n cropping and
padding, the n-D forms, empty batches and NaN. float32 transforms compare within an error bound
that grows with log n. Every op is built with the GPU as the default device (skipped where no GPU
is usable) and must run there (no CPU fallback)."""
import ctypes as C
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import needs_gpu, On, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import Session, ints, lib, sig  # noqa: E402

P = C.c_void_p
I = C.c_int
IP = C.POINTER(C.c_int)
ONE = ["fft", "ifft", "rfft", "irfft"]
ND = ["fftn", "ifftn", "rfftn", "irfftn"]
for _name in ONE:
    sig("nv_fft_" + _name, P, P, IP, I, I)
for _name in ND:
    sig("nv_fft_" + _name, P, P, IP, IP, I, I)

pytestmark = needs_gpu

LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]
LENGTHS = [1, 2, 3, 5, 7, 8, 12, 64, 97, 105, 256, 1009, 4096, 65536]


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def close(got, want, n):
    tol = 4e-7 * (np.log2(max(n, 2)) + 4)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, equal_nan=True)


def run_both(nv, build):
    """build() under the CPU and under the GPU; the GPU one must not fall back."""
    with On("cpu"):
        want = nv.read(build())
    before = lib.nv_gpu_fallback_count()
    with On("gpu"):
        got = nv.read(build())
    assert lib.nv_gpu_fallback_count() == before, "an fft node ran on the CPU"
    return got, want


def data(rng, shape, op):
    x = rng.standard_normal(shape)
    if op != "rfft" and op != "rfftn":
        x = x + 1j * rng.standard_normal(shape)
        return x.astype(np.complex64)
    return x.astype(np.float32)


CASES = [(op, n, norm) for op in ONE for n in LENGTHS for norm in (0, 1, 2)]


@pytest.mark.parametrize("op,n,norm", sample(CASES, 60))
def test_lengths_norms(nv, rng, op, n, norm):
    rows = 3 if n < 4096 else 2
    m = n // 2 + 1 if op == "irfft" else n
    x = data(rng, (rows, m), op)
    nn = (C.c_int * 1)(n)
    got, want = run_both(nv, lambda: nv.own(getattr(lib, "nv_fft_" + op)(nv.array(x), nn, -1,
                                                                          norm)))
    close(got, want, n)


@pytest.mark.parametrize("op,layout,axis", sample(
    [(op, lay, ax) for op in ONE for lay in LAYOUTS for ax in (0, 1, -1)], 30, salt=1))
def test_layouts_axes(nv, rng, op, layout, axis):
    x = data(rng, (6, 10, 12), op)
    got, want = run_both(nv, lambda: nv.own(getattr(lib, "nv_fft_" + op)(nv.view(x, layout),
                                                                          None, axis, 0)))
    close(got, want, x.shape[axis])


@pytest.mark.parametrize("op", ONE)
def test_crop_pad(nv, rng, op):
    x = data(rng, (4, 16), op)
    for n in (5, 16, 40):
        nn = (C.c_int * 1)(n)
        got, want = run_both(nv, lambda: nv.own(getattr(lib, "nv_fft_" + op)(nv.array(x), nn,
                                                                              -1, 1)))
        close(got, want, n)


@pytest.mark.parametrize("op", ND)
def test_nd(nv, rng, op):
    x = data(rng, (5, 6, 8), op)
    for s, axes in ((None, None), ([4, 10], [0, 2]), ([6, 6], [2, 1])):
        sa = ints(s)[0] if s else None
        aa = ints(axes)[0] if axes else None
        na = len(axes) if axes else 0
        got, want = run_both(nv, lambda: nv.own(getattr(lib, "nv_fft_" + op)(
            nv.view(x, "transposed"), sa, aa, na, 0)))
        close(got, want, 64)


def test_large_batch_rfft(nv, rng):
    x = rng.standard_normal((64, 65536)).astype(np.float32)
    got, want = run_both(nv, lambda: nv.own(lib.nv_fft_rfft(nv.array(x), None, -1, 0)))
    close(got, want, 65536)


def test_empty_and_nan(nv):
    e = np.zeros((0, 8), np.complex64)
    got, want = run_both(nv, lambda: nv.own(lib.nv_fft_fft(nv.array(e), None, -1, 0)))
    assert got.shape == (0, 8)
    x = np.array([[1, np.nan, 3, 4]], np.complex64)
    got, want = run_both(nv, lambda: nv.own(lib.nv_fft_fft(nv.array(x), None, -1, 0)))
    assert np.isnan(got).all() and np.isnan(want).all()


sig("nv_einsum", P, C.c_char_p, C.POINTER(P), I)
sig("nv_hadamard_transform", P, P, C.POINTER(C.c_double))
sig("nv_convolve", P, P, P, I)


def test_compositions_on_the_gpu(nv, rng):
    """einsum, hadamard_transform and convolve are compositions: they run on the GPU through
    the other families' kernels (no fallback) and match the CPU."""
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    c = rng.standard_normal((5, 3)).astype(np.float32)

    def ein():
        ops = (P * 3)(nv.array(a), nv.array(b), nv.array(c))
        return nv.own(lib.nv_einsum(b"bij,jk,kl->bil", ops, 3))

    got, want = run_both(nv, ein)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    h = rng.standard_normal((3, 256)).astype(np.float32)
    got, want = run_both(nv, lambda: nv.own(lib.nv_hadamard_transform(nv.array(h), None)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    h = rng.standard_normal((3, 20 * 64)).astype(np.float32)  # an m * 2^k length (m = 20)
    got, want = run_both(nv, lambda: nv.own(lib.nv_hadamard_transform(nv.array(h), None)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    s = rng.standard_normal(300).astype(np.float32)
    k = rng.standard_normal(17).astype(np.float32)
    for mode in (0, 1, 2):
        got, want = run_both(nv, lambda: nv.own(lib.nv_convolve(nv.array(s), nv.array(k), mode)))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    big = rng.standard_normal(5000).astype(np.float32)
    kb = rng.standard_normal(1500).astype(np.float32)
    got, want = run_both(nv, lambda: nv.own(lib.nv_convolve(nv.array(big), nv.array(kb), 0)))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
