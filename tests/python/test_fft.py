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


# The CPU engine's paths (src/cpu/fft.c, fft_plan.c): rows one at a time (3 rows) or 16 at a
# time in the block layout (37 rows: two full blocks and a partial one); radices 2, 3, 4, 5,
# direct primes up to 31, Bluestein above (37, 97, 1009, 4099), four-step rows from 2048 on
# (one at a time; 4096 is the block layout's longest), real transforms of odd and even length.
PATH_LENGTHS = [1, 2, 3, 5, 7, 11, 16, 31, 37, 60, 97, 128, 243, 343, 625, 1000, 1009, 2048,
                3000, 4096, 4099, 6000, 65536]


def check_norm(got, want, n):
    """Each transformed row's error in the 2-norm, relative to the reference row's norm, within
    8e-8 (log2 n + 4): a float32 FFT's error grows with log n (Bluestein's three transforms of
    twice the length included); a wrong butterfly or twiddle errs by O(1)."""
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert np.all(np.isfinite(got))
    if want.size == 0:
        return
    axis = -1 if want.ndim else None
    err = np.linalg.norm(got - want, axis=axis)
    ref = np.maximum(np.linalg.norm(want, axis=axis), 1e-30)
    tol = 8e-8 * (np.log2(max(n, 2)) + 4)
    worst = float(np.max(err / ref))
    assert worst <= tol, f"relative error {worst:.3g} > {tol:.3g} (n = {n})"


def one_ref(op, x, n=None, axis=-1, norm="backward"):
    """numpy.fft in float64 of what nuvec transforms (x as float32 / complex64)."""
    wide = x.astype(np.float64 if x.dtype == np.float32 else np.complex128)
    return ONE[op](wide, n=n, axis=axis, norm=norm)


@pytest.mark.parametrize("rows", [3, 37])
@pytest.mark.parametrize("n", PATH_LENGTHS)
@pytest.mark.parametrize("op", list(ONE))
def test_engine_paths(nv, rng, op, n, rows):
    if op == "irfft":
        x = rand(rng, (rows, n // 2 + 1), True).astype(np.complex64)
        got = nv.read(c1(nv, op, nv.array(x), n=n))
        assert got.dtype == np.float32
        check_norm(got, one_ref(op, x, n=n), n)
        return
    x = rand(rng, (rows, n), op != "rfft").astype(np.float32 if op == "rfft" else np.complex64)
    got = nv.read(c1(nv, op, nv.array(x)))
    assert got.dtype == np.complex64
    check_norm(got, one_ref(op, x), n)


@pytest.mark.parametrize("norm", list(NORMS))
@pytest.mark.parametrize("op", list(ONE))
def test_engine_norms_and_n(nv, rng, op, norm):
    """n crops or pads rows across the paths' lengths, 16 at a time (20 rows) and one at a time
    (3 rows: four-step rows from 2048 on, whose scale comes with their last pass)."""
    for rows in (3, 20):
        x = rand(rng, (rows, 50), op != "rfft").astype(np.float32 if op == "rfft" else
                                                       np.complex64)
        for n in (None, 1, 7, 64, 101, 2048, 2310, 6144):
            got = nv.read(c1(nv, op, nv.array(x), n=n, norm=norm))
            check_norm(got, one_ref(op, x, n=n, norm=norm), n or 50)


def flipped(nv, x):
    """x with negative strides on every axis (a step -1 slice of a reversed copy)."""
    base = nv.array(np.ascontiguousarray(x[(slice(None, None, -1),) * x.ndim]))
    start, k = ints([-1] * x.ndim)
    stop, _ = ints([-(s + 1) for s in x.shape])
    step, _ = ints([-1] * x.ndim)
    return nv.own(lib.nv_slice(base, start, stop, step, k))


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "reversed", "flipped"])
@pytest.mark.parametrize("op", list(ONE))
def test_engine_layouts(nv, rng, op, layout):
    """Block-layout rows from every input layout: adjacent rows (a transform along a leading
    axis of a contiguous array), contiguous, strided and negative-stride rows, and blocks whose
    rows cross a batch axis (19 x 20 rows by 16)."""
    if op == "irfft":
        x = rand(rng, (19, 20, 33), True).astype(np.complex64)
    else:
        x = rand(rng, (19, 20, 33), op != "rfft").astype(np.float32 if op == "rfft" else
                                                          np.complex64)
    for axis in (0, 1, 2, -1):
        a = flipped(nv, x) if layout == "flipped" else nv.view(x, layout)
        n = 2 * (x.shape[axis] - 1) if op == "irfft" else None
        got = nv.read(c1(nv, op, a, n=n, axis=axis))
        check_norm(np.moveaxis(got, axis, -1), np.moveaxis(one_ref(op, x, n=n, axis=axis), axis,
                                                           -1), x.shape[axis])


@pytest.mark.parametrize("op", list(ND))
def test_engine_nd(nv, rng, op):
    """2-D and 3-D transforms of the sizes the block layout and the four-step rows take, with s
    and axes, on contiguous and transposed inputs."""
    dt = np.float32 if op == "rfftn" else np.complex64
    cases = [((512, 512), None, None), ((48, 100, 6), [32, 100], [0, 1]), ((64, 3, 2100), None,
                                                                             [2, 0]),
             ((20, 24, 25), [18, 20, 25], [0, 1, 2])]
    for shape, s, axes in cases:
        if op == "irfftn":
            x = rand(rng, shape, True).astype(np.complex64)
        else:
            x = rand(rng, shape, op != "rfftn").astype(dt)
        wide = x.astype(np.float64 if dt == np.float32 and op == "rfftn" else np.complex128)
        for layout in ("contiguous", "transposed"):
            norm = "ortho"
            ref_axes = axes if axes is not None or s is None else list(range(len(shape) - len(s),
                                                                              len(shape)))
            want = ND[op](wide, s=s, axes=ref_axes, norm=norm)
            got = nv.read(cn(nv, op, nv.view(x, layout), s=s, axes=axes, norm=norm))
            check_norm(got, want, int(np.prod(want.shape)))


@pytest.mark.parametrize("dtype", ["int32", "float16", "float32", "float64", "complex64"])
def test_engine_dtypes(nv, rng, dtype):
    """Every input dtype through the block layout (24 rows): float64 data is transformed in
    float32 (MLX's rule), within float32's bound of the float64 transform."""
    x = rng.standard_normal((24, 96)) * 3
    xd = x.astype(np_dtype(dtype))
    ref = xd.astype(np.complex128 if dtype == "complex64" else np.float64)
    check_norm(nv.read(c1(nv, "fft", nv.array(xd))), np.fft.fft(ref), 96)
    check_norm(nv.read(c1(nv, "rfft", nv.array(xd))), np.fft.rfft(ref.real), 96)
    check_norm(nv.read(c1(nv, "ifft", nv.array(xd))), np.fft.ifft(ref), 96)
    check_norm(nv.read(c1(nv, "irfft", nv.array(xd))), np.fft.irfft(ref), 190)


def test_engine_empty_axes(nv):
    """Empty batch axes around block-layout and four-step lengths give empty results of the
    right shape; an empty transformed axis is an error (MLX's rule)."""
    for shape, n in (((0, 4096), None), ((16, 0, 64), None), ((0, 3, 6000), None),
                     ((5, 0, 300), 17)):
        x = np.zeros(shape, np.complex64)
        for op in ONE:
            got = nv.read(c1(nv, op, nv.array(x), n=n))
            ln = n or shape[-1]
            want = {"fft": ln, "ifft": ln, "rfft": ln // 2 + 1,
                    "irfft": n or 2 * (shape[-1] - 1)}[op]
            assert got.shape == shape[:-1] + (want,)
    err(nv, c1(nv, "fft", nv.array(np.zeros((16, 0), np.complex64))), "size 0")


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



# ---- einsum, einsum_path, hadamard_transform, convolve ----

sig("nv_einsum", P, C.c_char_p, C.POINTER(P), I)
sig("nv_einsum_path", I, C.c_char_p, C.POINTER(P), I, IP, IP, C.c_char_p, C.c_size_t)
sig("nv_hadamard_transform", P, P, C.POINTER(D))
sig("nv_convolve", P, P, P, I)

EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]),
    ("i,i", [(5,), (5,)]),
    (",ij->ij", [(), (2, 3)]),
    (",", [(), ()]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk", [(6, 1, 3, 4), (2, 4, 5)]),
    ("i...->...", [(3, 2, 4)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("ijk,ikl,ilm->jm", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("iJ,Jk->ki", [(3, 4), (4, 2)]),
    ("ij,ij,ij->ij", [(3, 4), (3, 4), (3, 4)]),
    ("ijji->", [(2, 3, 3, 2)]),
    ("ij,kl->", [(2, 3), (4, 5)]),
]


def einsum_c(nv, subs, arrs):
    ops = (P * len(arrs))(*arrs)
    return nv.own(lib.nv_einsum(subs.encode(), ops, len(arrs)))


@pytest.mark.parametrize("subs,shapes", EINSUM)
def test_einsum(nv, rng, subs, shapes):
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    want = np.einsum(subs, *[x.astype(np.float64) for x in xs])
    got = nv.read(einsum_c(nv, subs, [nv.array(x) for x in xs]))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * max(1, np.abs(want).max()))


def test_einsum_views_and_dtypes(nv, rng):
    a = rng.standard_normal((5, 4))
    b = rng.standard_normal((5, 3))
    got = nv.read(einsum_c(nv, "ji,jk->ik", [nv.view(a.astype(np.float32), "transposed"),
                                              nv.view(b.astype(np.float32), "strided")]))
    np.testing.assert_allclose(got, np.einsum("ji,jk->ik", a, b), rtol=2e-5, atol=2e-5)
    got = nv.read(einsum_c(nv, "ij,jk->ik", [nv.array(a.T.copy()), nv.array(b)]))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a.T @ b, rtol=1e-12)


def einsum_path_c(nv, subs, arrs):
    ops = (P * len(arrs))(*arrs)
    path = (C.c_int * (2 * max(1, len(arrs) - 1)))()
    steps = C.c_int(0)
    rep = C.create_string_buffer(1024)
    st = lib.nv_einsum_path(subs.encode(), ops, len(arrs), path, C.byref(steps), rep, 1024)
    return st, [tuple(path[2 * i:2 * i + 2]) for i in range(steps.value)], rep.value.decode()


@pytest.mark.parametrize("subs,shapes", EINSUM)
def test_einsum_path(nv, subs, shapes):
    arrs = [nv.array(np.ones(s, np.float32)) for s in shapes]
    st, path, rep = einsum_path_c(nv, subs, arrs)
    assert st == 0
    assert len(path) == max(1, len(shapes) - 1)
    m = len(shapes)
    for i, j in path:
        if m == 1:
            assert (i, j) == (0, -1)
            continue
        assert 0 <= i < j < m
        m -= 1
    assert "Complete contraction:  " + subs in rep and "Optimized FLOP count" in rep


def test_einsum_path_matches_numpy_greedy(nv):
    shapes = [(2, 3), (3, 4), (4, 5)]
    arrs = [nv.array(np.ones(s, np.float32)) for s in shapes]
    _, path, rep = einsum_path_c(nv, "ij,jk,kl->il", arrs)
    want = np.einsum_path("ij,jk,kl->il", *[np.ones(s) for s in shapes], optimize="greedy")[0]
    assert path == [tuple(p) for p in want[1:]]
    assert "Naive FLOP count:  360" in rep and "Optimized FLOP count:  180" in rep


def test_einsum_errors(nv):
    a = nv.array(np.ones((2, 3), np.float32))
    b = nv.array(np.ones((4, 4), np.float32))
    for subs, arrs, words in [("ij,jk", [a, b], ["einsum", "sizes 3 and 4"]),
                              ("ij->k", [a], ["'k'"]), ("ijk", [a], ["3 labels", "2 dim"]),
                              ("ij,jk", [a], ["subscripts"]), ("i$", [a], ["'$'"]),
                              ("ij->ii", [a], ["repeated"]), ("i..j", [a], ["ellipsis"])]:
        err(nv, einsum_c(nv, subs, arrs), *words)


def hadamard_ref(n):
    h = np.array([[1.0]])
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def fwht(x):
    """The Sylvester-ordered Walsh-Hadamard transform of the last axis (butterflies), float64."""
    x = np.array(x, np.float64)
    n, h = x.shape[-1], 1
    while h < n:
        y = x.reshape(x.shape[:-1] + (n // (2 * h), 2, h))
        a, b = y[..., 0, :], y[..., 1, :]
        x = np.stack([a + b, a - b], axis=-2).reshape(x.shape)
        h *= 2
    return x


@pytest.mark.parametrize("n", [1, 2, 4, 8, 32, 128, 1024, 4096])
def test_hadamard(nv, rng, n):
    x = rng.standard_normal((3, n))
    if n <= 8:
        np.testing.assert_allclose(fwht(x), x @ hadamard_ref(n).T)
    want = fwht(x) / np.sqrt(n)
    got = nv.read(nv.own(lib.nv_hadamard_transform(nv.array(x.astype(np.float32)), None)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1, np.abs(want).max()))
    s = D(0.25)
    got = nv.read(nv.own(lib.nv_hadamard_transform(nv.view(x.astype(np.float32), "transposed"),
                                                   C.byref(s))))
    np.testing.assert_allclose(got, fwht(x) * 0.25, rtol=1e-5,
                               atol=1e-5 * max(1, np.abs(x).sum(1).max()))


def test_hadamard_dtypes_and_errors(nv):
    got = nv.read(nv.own(lib.nv_hadamard_transform(nv.array(np.arange(4, dtype=np.int32)), None)))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, hadamard_ref(4) @ np.arange(4) / 2, rtol=1e-6)
    got = nv.read(nv.own(lib.nv_hadamard_transform(nv.array(np.ones(8, np.float16)), None)))
    assert got.dtype == np.float16
    got = nv.read(nv.own(lib.nv_hadamard_transform(nv.array(np.float32(3)), None)))
    assert got.shape == () and got == 3
    # Lengths m * 2^k with m = 12, 20, 28 are MLX's too; 36 = 12 * 3 is none of them.
    got = nv.read(nv.own(lib.nv_hadamard_transform(nv.array(np.ones(24, np.float32)), None)))
    assert got.shape == (24,)
    np.testing.assert_allclose(np.linalg.norm(got), np.sqrt(24), rtol=1e-5)
    err(nv, nv.own(lib.nv_hadamard_transform(nv.array(np.ones(36, np.float32)), None)),
        "hadamard_transform", "m * 2^k", "(36,)")


MODES = {"full": 0, "same": 1, "valid": 2}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("na,nv_", [(1, 1), (5, 3), (3, 5), (10, 10), (64, 7), (7, 64),
                                    (5000, 2000), (1000, 4097)])
def test_convolve(nv, rng, mode, na, nv_):
    a = rng.standard_normal(na).astype(np.float32)
    v = rng.standard_normal(nv_).astype(np.float32)
    want = np.convolve(a.astype(np.float64), v.astype(np.float64), mode=mode)
    got = nv.read(nv.own(lib.nv_convolve(nv.array(a), nv.array(v), MODES[mode])))
    assert got.dtype == np.float32
    tol = 1e-5 * np.sqrt(min(na, nv_)) * np.abs(a).max() * np.abs(v).max()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=tol)


def test_convolve_views_dtypes_errors(nv, rng):
    a = rng.standard_normal(9)
    v = rng.standard_normal(4)
    got = nv.read(nv.own(lib.nv_convolve(nv.view(a, "reversed"), nv.array(v), 0)))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.convolve(a, v), rtol=1e-12)
    got = nv.read(nv.own(lib.nv_convolve(nv.array(np.arange(4, dtype=np.int32)),
                                         nv.array(np.ones(2, np.int32)), 0)))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.convolve(np.arange(4), np.ones(2)))
    m = nv.array(np.ones((2, 2), np.float32))
    one = nv.array(np.ones(2, np.float32))
    err(nv, nv.own(lib.nv_convolve(m, one, 0)), "convolve", "1-D", "(2,2)")
    err(nv, nv.own(lib.nv_convolve(nv.array(np.ones(0, np.float32)), one, 0)), "empty")
    err(nv, nv.own(lib.nv_convolve(one, one, 9)), "mode")
