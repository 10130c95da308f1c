"""nuvec.fft against numpy.fft and mlx.core.fft: the 16 functions with MLX's signatures,
keywords and defaults, values and dtypes, gradients by finite differences (float64 references of
real-valued losses), vmap, and the errors."""
import numpy as np
import pytest

import nuvec as nv
import nuvec.fft

FUNCS = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2",
         "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


def close(got, want, tol=2e-5):
    got, want = np.array(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.abs(want).max())) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


def test_all_present():
    for name in FUNCS:
        assert callable(getattr(nv.fft, name)), name


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft"])
def test_one_d_keywords(rng, name):
    x = rng.standard_normal((3, 12)).astype(np.float32)
    if name == "irfft":
        x = x + 1j * rng.standard_normal((3, 12)).astype(np.float32)
    f, g = getattr(nv.fft, name), getattr(np.fft, name)
    close(f(nv.array(x)), g(x))
    close(f(nv.array(x), n=7, axis=0, norm="ortho"), g(x, n=7, axis=0, norm="ortho"))
    close(f(nv.array(x), 16, -1, "forward"), g(x, 16, -1, "forward"))


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn",
                                  "irfftn"])
def test_n_d_keywords(rng, name):
    x = rng.standard_normal((4, 5, 6)).astype(np.float32)
    f, g = getattr(nv.fft, name), getattr(np.fft, name)
    close(f(nv.array(x)), g(x))
    close(f(nv.array(x), s=(4, 8), axes=(0, 2)), g(x, s=(4, 8), axes=(0, 2)))
    close(f(nv.array(x), axes=[-1, 0], norm="ortho"), g(x, axes=[-1, 0], norm="ortho"))


def test_freqs_shifts():
    close(nv.fft.fftfreq(7, 0.5), np.fft.fftfreq(7, 0.5))
    close(nv.fft.rfftfreq(8), np.fft.rfftfreq(8))
    assert nv.fft.fftfreq(4).dtype == nv.float32
    x = np.arange(30).reshape(5, 6)
    np.testing.assert_array_equal(np.array(nv.fft.fftshift(nv.array(x))), np.fft.fftshift(x))
    np.testing.assert_array_equal(np.array(nv.fft.ifftshift(nv.array(x), axes=[1])),
                                  np.fft.ifftshift(x, axes=[1]))


def test_errors():
    a = nv.ones((3, 4))
    with pytest.raises(ValueError, match="fft"):
        nv.fft.fft(a, n=0)
    with pytest.raises(ValueError, match="repeated"):
        nv.fft.fftn(a, axes=[0, 0])
    with pytest.raises(ValueError, match="norm"):
        nv.fft.fft(a, norm="x")
    with pytest.raises(ValueError):
        nv.fft.fftn(a, s=[2], axes=[0, 1])
    with pytest.raises(ValueError, match="fftfreq"):
        nv.fft.fftfreq(0)


# ---- Gradients by finite differences and vmap ----

def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


@pytest.mark.parametrize("n", [5, 8])
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft"])
def test_grad_finite_differences(rng, name, norm, n):
    m = n // 2 + 1 if name == "irfft" else n
    x = rng.standard_normal((2, m))
    wr = rng.standard_normal((2, n // 2 + 1 if name == "rfft" else n))
    wi = rng.standard_normal(wr.shape)
    cplx = name in ("fft", "ifft", "irfft")

    def loss_np(v):
        z = v[0] + 1j * v[1] if cplx else v[0]
        y = getattr(np.fft, name)(z, n=n, norm=norm)
        return float((y.real * wr).sum() + (y.imag * wi).sum()) if name != "irfft" else \
            float((y * wr).sum())

    v = np.stack([x, rng.standard_normal(x.shape)])
    # The real and imaginary parts are separate real inputs, so the gradient is real.
    def loss_arr(a):
        z = a[0]
        if cplx:
            z = z + a[1] * nv.array(1j)
        y = getattr(nv.fft, name)(z, n=n, norm=norm)
        if name == "irfft":
            return (y * nv.array(wr.astype(np.float32))).sum()
        return (nv.real(y) * nv.array(wr.astype(np.float32))).sum() + \
            (nv.imag(y) * nv.array(wi.astype(np.float32))).sum()

    got = np.array(nv.grad(loss_arr)(nv.array(v.astype(np.float32))))
    want = numeric_grad(loss_np, v)
    if not cplx:
        want[1] = 0
    close(got, want, 1e-4)


@pytest.mark.parametrize("rows,n", [(24, 64), (20, 97), (3, 4096)])
@pytest.mark.parametrize("name", ["fft", "rfft"])
def test_grad_is_the_adjoint(rng, name, rows, n):
    """Gradients through the CPU engine's block layout (24 and 20 rows: 16 at a time),
    Bluestein (97) and four-step rows (4096): L = Re <w, F x> is linear in x, so its gradient is
    the adjoint F^H w = n ifft(w) exactly (real and imaginary parts for fft, the real part of the
    zero-extended spectrum's for rfft)."""
    m = n // 2 + 1 if name == "rfft" else n
    w = rng.standard_normal((rows, m)) + 1j * rng.standard_normal((rows, m))
    wr, wi = nv.array(w.real.astype(np.float32)), nv.array(w.imag.astype(np.float32))
    x = rng.standard_normal((2, rows, n)).astype(np.float32)

    def loss(a):
        z = a[0] + a[1] * nv.array(1j) if name == "fft" else a[0]
        y = getattr(nv.fft, name)(z)
        return (nv.real(y) * wr).sum() + (nv.imag(y) * wi).sum()

    got = np.array(nv.grad(loss)(nv.array(x)))
    full = np.zeros((rows, n), complex)
    full[:, :m] = w
    adj = n * np.fft.ifft(full, axis=-1)
    want = np.stack([adj.real, adj.imag if name == "fft" else np.zeros_like(adj.real)])
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert err < 8e-8 * (np.log2(n) + 4), err


@pytest.mark.parametrize("name", ["fft", "rfft", "irfft", "fft2"])
def test_vmap(rng, name):
    x = rng.standard_normal((4, 6, 3)).astype(np.float32)
    f = getattr(nv.fft, name)
    for ax in (0, 1, 2):
        got = nv.vmap(f, in_axes=ax)(nv.array(x))
        want = np.stack([getattr(np.fft, name)(np.take(x, i, axis=ax))
                         for i in range(x.shape[ax])])
        close(got, want)


def test_against_mlx(rng):
    mx = pytest.importorskip("mlx.core")
    x = rng.standard_normal((3, 10)).astype(np.float32)
    for name in ["fft", "ifft", "rfft", "irfft", "fft2", "rfftn", "irfft2"]:
        a = getattr(nv.fft, name)(nv.array(x))
        b = getattr(mx.fft, name)(mx.array(x))
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        close(a, np.array(b), 1e-4)
    g1 = nv.grad(lambda v: nv.real(nv.fft.fft(v) * nv.arange(10)).sum())(nv.array(x))
    g2 = mx.grad(lambda v: mx.real(mx.fft.fft(v) * mx.arange(10)).sum())(mx.array(x))
    close(g1, np.array(g2), 1e-4)


# ---- einsum, einsum_path, hadamard_transform, convolve (top level, as mlx.core) ----

def test_einsum_values_and_path(rng):
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in [(2, 3), (3, 4), (4, 5)])
    close(nv.einsum("ij,jk,kl->il", nv.array(a), nv.array(b), nv.array(c)),
          np.einsum("ij,jk,kl->il", a, b, c))
    close(nv.einsum("...ij,...jk", nv.array(a[None]), nv.array(b)), np.einsum("...ij,...jk", a[None], b))
    path, report = nv.einsum_path("ij,jk,kl->il", nv.array(a), nv.array(b), nv.array(c))
    assert path == [(1, 2), (0, 1)] and "Optimized FLOP count:  180" in report
    path, _ = nv.einsum_path("ii->i", nv.ones((3, 3)))
    assert path == [(0,)]
    with pytest.raises(ValueError, match="einsum"):
        nv.einsum("ij,jk", nv.ones((2, 3)), nv.ones((4, 4)))
    with pytest.raises(TypeError):
        nv.einsum("ij")


def test_einsum_grad(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    g = nv.grad(lambda x: nv.einsum("ij,jk->", x, nv.array(b)))(nv.array(a))
    close(g, np.repeat(b.sum(1)[None], 3, 0))
    g = nv.grad(lambda x: (nv.einsum("ii->i", x) ** 2).sum())(nv.array(a[:3, :3]))
    close(g, np.diag(2 * np.diag(a[:3, :3])))


def test_hadamard_and_convolve_against_mlx(rng):
    mx = pytest.importorskip("mlx.core")
    x = rng.standard_normal((3, 64)).astype(np.float32)
    close(nv.hadamard_transform(nv.array(x)), np.array(mx.hadamard_transform(mx.array(x))))
    close(nv.hadamard_transform(nv.array(x), scale=0.5),
          np.array(mx.hadamard_transform(mx.array(x), scale=0.5)))
    close(nv.hadamard_transform(nv.array(x), 0.5), np.array(mx.hadamard_transform(mx.array(x), 0.5)))
    a = rng.standard_normal(20).astype(np.float32)
    v = rng.standard_normal(5).astype(np.float32)
    for mode in ("full", "same", "valid"):
        close(nv.convolve(nv.array(a), nv.array(v), mode), np.array(mx.convolve(mx.array(a), mx.array(v), mode)))
        close(nv.convolve(nv.array(v), nv.array(a), mode=mode), np.convolve(v, a, mode=mode))
    with pytest.raises(ValueError, match="mode"):
        nv.convolve(nv.array(a), nv.array(v), "x")
    with pytest.raises(ValueError, match="1-D"):
        nv.convolve(nv.ones((2, 2)), nv.array(v))
    g = nv.grad(lambda s: nv.convolve(s, nv.array(v)).sum())(nv.array(a))
    close(g, np.full(20, v.sum()), 1e-4)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "rfft2", "irfftn"])
def test_jvp_is_the_transform_of_the_tangent(rng, name):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    t = rng.standard_normal((3, 8)).astype(np.float32)
    if name in ("ifft", "irfft", "irfftn"):
        x = (x + 1j * rng.standard_normal((3, 8))).astype(np.complex64)
        t = (t + 1j * rng.standard_normal((3, 8))).astype(np.complex64)
    f = getattr(nv.fft, name)
    (y,), (dy,) = nv.jvp(lambda v: f(v, norm="ortho") if name in ("fft", "ifft", "rfft", "irfft")
                         else f(v), [nv.array(x)], [nv.array(t)])
    g = getattr(np.fft, name)
    close(dy, g(t, norm="ortho") if name in ("fft", "ifft", "rfft", "irfft") else g(t))
    close(y, g(x, norm="ortho") if name in ("fft", "ifft", "rfft", "irfft") else g(x))


def test_vmap_of_compositions(rng):
    x = rng.standard_normal((4, 5)).astype(np.float32)
    v = np.array([1.0, 2.0, -1.0], np.float32)
    for ax in (0, 1):
        got = nv.vmap(lambda r: nv.convolve(r, nv.array(v)), in_axes=ax)(nv.array(x))
        close(got, np.stack([np.convolve(r, v) for r in np.moveaxis(x, ax, 0)]))
    m = rng.standard_normal((6, 2, 3)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    got = nv.vmap(lambda a: nv.einsum("ij,j->i", a, nv.array(w)))(nv.array(m))
    close(got, np.einsum("bij,j->bi", m, w))
    h = rng.standard_normal((3, 16)).astype(np.float32)
    got = nv.vmap(nv.hadamard_transform, in_axes=1, out_axes=1)(nv.array(h.T.copy()))
    close(got, np.array(nv.hadamard_transform(nv.array(h))).T)


@pytest.mark.parametrize("op", ["fft2", "ifft2", "rfft2", "irfft2"])
def test_fft2_axes_none_is_every_axis_numpy(op):
    """Left out, fft2's axes are (-2, -1); given as None they are all of them (NumPy, MLX)."""
    rng = np.random.default_rng(5)
    r = rng.standard_normal((3, 4, 6)).astype(np.float32)
    x = r if op == "rfft2" else (r + 1j * rng.standard_normal(r.shape)).astype(np.complex64)
    if op == "irfft2":
        x = np.fft.rfftn(r).astype(np.complex64)
    for kw in ({}, {"axes": None}):
        want = getattr(np.fft, op)(x, **kw)
        got = np.array(getattr(nuvec.fft, op)(nuvec.array(x), **kw))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["fftn", "ifftn", "rfftn", "irfftn", "fft2"])
def test_fftn_of_a_0d_array_raises(op):
    with pytest.raises(ValueError, match="at least one dimension"):
        getattr(nuvec.fft, op)(nuvec.array(3.0), axes=None) if op == "fft2" else \
            getattr(nuvec.fft, op)(nuvec.array(3.0))


@pytest.mark.parametrize("subs,shapes", [
    ("ab,bc->c", [(5, 1), (8, 2)]),
    ("ab,bc->ac", [(5, 8), (1, 2)]),
    ("abcd,cdab->abcd", [(5, 1, 3, 1), (1, 7, 1, 2)]),
    ("ij,ij->i", [(4, 1), (4, 6)]),
    ("i,i", [(1,), (6,)]),
])
def test_einsum_size_one_labels_broadcast_numpy(subs, shapes):
    rng = np.random.default_rng(11)
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    want = np.einsum(subs, *xs)
    got = nv.einsum(subs, *[nv.array(x) for x in xs])
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(np.array(got), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="sizes 2 and 3"):
        nv.einsum("ij,jk->ik", nv.ones((4, 2)), nv.ones((3, 5)))
