"""nuvec's convolutions from Python: mx.conv_general, conv1d/2d/3d and conv_transpose1d/2d/3d
against the float64 NumPy reference (tests/python/conv_ref.py) and against mlx.core where
importable (values, shapes, dtypes, argument forms, errors); gradients of the input and the
weight by central finite differences in float64 and against MLX's vjp; jvp; vmap over the
input, the weight and both."""
import os
import sys

import numpy as np
import pytest

import nuvec as mx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "python"))
import conv_ref  # noqa: E402

try:
    import mlx.core as mlx
except ImportError:  # pragma: no cover
    mlx = None

RNG = np.random.default_rng(20261201)


def rnd(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def A(x):
    """A float64 nuvec array of NumPy array x."""
    return mx.array(x, dtype=mx.float64)


def close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.array(a), np.array(b), rtol=rtol, atol=atol)


# (x shape, w shape, kwargs of conv_general)
GRAD_CASES = [
    ((2, 7, 4), (6, 3, 2), dict(stride=2, padding=([1], [2]), groups=2)),
    ((1, 9, 3), (2, 2, 3), dict(stride=3, kernel_dilation=2, input_dilation=2, flip=True)),
    ((2, 6, 3), (3, 3, 1), dict(padding=([-1], [2]), input_dilation=3, groups=3)),
    ((2, 5, 6, 2), (4, 3, 2, 2), dict(stride=[2, 1], padding=([1, 0], [0, 1]),
                                      kernel_dilation=[1, 2])),
    ((1, 5, 5, 4), (4, 3, 3, 1), dict(stride=2, padding=1, groups=4, flip=True)),
    ((1, 3, 4, 3, 2), (2, 2, 2, 2, 2), dict(stride=[1, 2, 1], padding=([1, 0, 1], [0, 1, 0]),
                                            input_dilation=[1, 1, 2])),
]


def np_loss(x, w, cot, kw):
    pad = kw.get("padding", 0)
    lo, hi = pad if isinstance(pad, tuple) else (pad, pad)
    y = conv_ref.conv_general(x, w, kw.get("stride", 1), lo, hi, kw.get("kernel_dilation", 1),
                              kw.get("input_dilation", 1), kw.get("groups", 1),
                              kw.get("flip", False))
    return float((y * cot).sum())


def fd_grad(f, a, eps=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        ap, am = a.copy(), a.copy()
        ap[i] += eps
        am[i] -= eps
        g[i] = (f(ap) - f(am)) / (2 * eps)
    return g


@pytest.mark.parametrize("case", GRAD_CASES, ids=range(len(GRAD_CASES)))
def test_conv_grads_finite_differences(case):
    xs, ws, kw = case
    x, w = rnd(*xs), rnd(*ws)
    y = mx.conv_general(A(x), A(w), **kw)
    cot = rnd(*y.shape)
    c = A(cot)
    gx, gw = mx.grad(lambda a, b: (mx.conv_general(a, b, **kw) * c).sum(), argnums=(0, 1))(
        A(x), A(w))
    assert gx.dtype == mx.float64 and gx.shape == xs and gw.shape == ws
    close(gx, fd_grad(lambda a: np_loss(a, w, cot, kw), x), rtol=1e-6, atol=1e-7)
    close(gw, fd_grad(lambda b: np_loss(x, b, cot, kw), w), rtol=1e-6, atol=1e-7)


@pytest.mark.skipif(mlx is None, reason="mlx not installed")
@pytest.mark.parametrize("case", GRAD_CASES, ids=range(len(GRAD_CASES)))
def test_conv_vjp_matches_mlx(case):
    xs, ws, kw = case
    if len(xs) == 5 and kw.get("groups", 1) > 1:
        pytest.skip("MLX has no grouped 3-D convolution")
    x, w = rnd(*xs, dtype=np.float32), rnd(*ws, dtype=np.float32)
    y = mx.conv_general(mx.array(x), mx.array(w), **kw)
    cot = rnd(*y.shape, dtype=np.float32)
    _, (gx, gw) = mx.vjp(lambda a, b: mx.conv_general(a, b, **kw), [mx.array(x), mx.array(w)],
                         [mx.array(cot)])
    ykw = dict(kw)
    ym, (mgx, mgw) = mlx.vjp(lambda a, b: mlx.conv_general(a, b, **ykw, stream=mlx.cpu),
                             [mlx.array(x), mlx.array(w)], [mlx.array(cot)])
    close(y, ym[0] if isinstance(ym, list) else ym, rtol=1e-4, atol=1e-4)
    close(gx, mgx, rtol=1e-4, atol=1e-4)
    if tuple(mgw.shape) != ws:
        # MLX 0.32's weight gradient with both dilations has the wrong shape (nuvec's is
        # checked by finite differences above).
        assert kw.get("input_dilation", 1) > 1 and kw.get("kernel_dilation", 1) > 1
        return
    close(gw, mgw, rtol=1e-4, atol=1e-4)


def test_conv_transpose_grads():
    x, w = rnd(2, 4, 4), rnd(4, 3, 2)
    kw = dict(stride=2, padding=1, output_padding=1, groups=2)
    y = mx.conv_transpose1d(A(x), A(w), **kw)
    cot = rnd(*y.shape)
    c = A(cot)
    gx, gw = mx.grad(lambda a, b: (mx.conv_transpose1d(a, b, **kw) * c).sum(), argnums=(0, 1))(
        A(x), A(w))
    loss = lambda a, b: float((conv_ref.conv_transpose_scatter(a, b, 2, 1, 1, 1, 2) * cot).sum())
    close(gx, fd_grad(lambda a: loss(a, w), x), rtol=1e-6, atol=1e-7)
    close(gw, fd_grad(lambda b: loss(x, b), w), rtol=1e-6, atol=1e-7)


def test_conv_second_order():
    """Gradients are convolutions, so they differentiate again: d/dw of <grad_x, v>."""
    x, w, v = rnd(1, 6, 2), rnd(2, 3, 2), rnd(1, 6, 2)
    vv = A(v)

    def inner(b):
        gx = mx.grad(lambda a: (mx.conv1d(a, b, padding=1) ** 2).sum())(A(x))
        return (gx * vv).sum()

    g = mx.grad(inner)(A(w))

    # inner is quadratic in b: central differences of its (first-order, float64) values are
    # exact up to rounding.
    close(g, fd_grad(lambda b: float(inner(A(b))), w, eps=1e-3), rtol=1e-7, atol=1e-8)


def test_conv_jvp():
    x, w, tx, tw = rnd(2, 6, 5, 2), rnd(3, 2, 2, 2), rnd(2, 6, 5, 2), rnd(3, 2, 2, 2)
    f = lambda a, b: mx.conv2d(a, b, stride=(1, 2), padding=1)
    _, (t,) = mx.jvp(f, [A(x), A(w)], [A(tx), A(tw)])
    want = conv_ref.conv_general(tx, w, [1, 2], 1, 1) + conv_ref.conv_general(x, tw, [1, 2], 1, 1)
    close(t, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("which", ["input", "weight", "both"])
@pytest.mark.parametrize("groups", [1, 2])
def test_conv_vmap(which, groups):
    B = 3
    xs, ws = (2, 7, 6, 4), (4, 3, 2, 4 // groups)
    x = rnd(B, *xs) if which != "weight" else rnd(*xs)
    w = rnd(*ws[:0], B, *ws) if which != "input" else rnd(*ws)
    in_axes = (0 if which != "weight" else None, 0 if which != "input" else None)
    f = lambda a, b: mx.conv2d(a, b, stride=(2, 1), padding=(1, 0), groups=groups)
    got = mx.vmap(f, in_axes=in_axes)(A(x), A(w))
    want = np.stack([conv_ref.conv_general(x[i] if in_axes[0] == 0 else x,
                                           w[i] if in_axes[1] == 0 else w, [2, 1], [1, 0],
                                           [1, 0], 1, 1, groups) for i in range(B)])
    close(got, want, rtol=1e-10, atol=1e-10)


def test_conv_vmap_other_axis_and_grad():
    x, w = rnd(2, 5, 3, 4), rnd(3, 2, 4)  # x batched along axis 2
    got = mx.vmap(lambda a, b: mx.conv1d(a, b, padding=1), in_axes=(2, None))(A(x),
                                                                               A(w))
    want = np.stack([conv_ref.conv_general(x[:, :, i], w, 1, 1, 1) for i in range(3)])
    close(got, want, rtol=1e-10, atol=1e-10)
    # Per-example weight gradients: vmap of grad over the batch.
    g = mx.vmap(mx.grad(lambda b, a: mx.conv1d(a[None], b).sum()), in_axes=(None, 0))(
        A(w), A(x[:, :, 0]))
    assert g.shape == (2,) + w.shape
    for i in range(2):
        gi = mx.grad(lambda b: mx.conv1d(A(x[i:i + 1, :, 0]), b).sum())(A(w))
        close(g[i], gi, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32", "float64"])
def test_conv_dtypes(dt):
    x, w = rnd(2, 9, 4), rnd(6, 3, 4)
    y = mx.conv1d(mx.array(x).astype(getattr(mx, dt)), mx.array(w).astype(getattr(mx, dt)),
                  stride=2, padding=1)
    assert y.dtype == getattr(mx, dt)
    tol = {"float16": 2e-2, "bfloat16": 1e-1, "float32": 1e-5, "float64": 1e-12}[dt]
    want = conv_ref.conv_general(np.array(mx.array(x).astype(getattr(mx, dt)).astype(mx.float64)),
                                 np.array(mx.array(w).astype(getattr(mx, dt)).astype(mx.float64)),
                                 2, 1, 1)
    close(y.astype(mx.float64), want, rtol=tol, atol=tol * 4)


def test_conv_argument_forms():
    x, w = mx.array(rnd(1, 6, 6, 2)), mx.array(rnd(3, 3, 3, 2))
    assert mx.conv2d(x, w, 2, 1).shape == (1, 3, 3, 3)
    assert mx.conv2d(x, w, stride=(1, 2), padding=(0, 1), dilation=(1, 1)).shape == (1, 4, 3, 3)
    assert mx.conv_general(x, w, padding=[1, 0]).shape == (1, 6, 4, 3)
    assert mx.conv_general(x, w, padding=([1, 0], [2, 0])).shape == (1, 7, 4, 3)
    assert mx.conv_general(x, w, padding=1, input_dilation=[2, 1]).shape == (1, 11, 6, 3)
    with pytest.raises(ValueError, match="spatial axes"):
        mx.conv_general(x, w, stride=[1, 1, 1])
    with pytest.raises(ValueError, match="conv2d"):
        mx.conv2d(mx.array(rnd(1, 6, 2)), w)
    with pytest.raises(ValueError, match="groups"):
        mx.conv2d(x, w, groups=3)


@pytest.mark.skipif(mlx is None, reason="mlx not installed")
@pytest.mark.parametrize("fn,xs,ws,kw", [
    ("conv1d", (2, 9, 4), (6, 3, 2), dict(stride=2, padding=1, dilation=2, groups=2)),
    ("conv2d", (2, 7, 6, 3), (4, 3, 2, 3), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2))),
    ("conv3d", (1, 5, 4, 6, 2), (3, 2, 3, 2, 2), dict(stride=(1, 2, 2), padding=(1, 0, 1))),
    ("conv_transpose1d", (2, 5, 4), (3, 3, 4), dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose2d", (1, 4, 3, 4), (6, 3, 2, 2),
     dict(stride=(2, 3), padding=(1, 0), dilation=(1, 2), output_padding=(1, 2), groups=2)),
    ("conv_transpose3d", (1, 3, 2, 3, 2), (2, 2, 2, 3, 2),
     dict(stride=(2, 1, 2), padding=(0, 1, 1), output_padding=(1, 0, 1))),
    ("conv_transpose1d", (1, 6, 2), (3, 2, 2), dict(stride=3, padding=3)),  # negative padding
    ("conv_general", (2, 5, 6, 2), (3, 2, 3, 2),
     dict(stride=[2, 1], padding=([-1, 1], [2, 0]), kernel_dilation=[1, 2],
          input_dilation=[3, 1], flip=True)),
])
def test_matches_mlx(fn, xs, ws, kw):
    x, w = rnd(*xs, dtype=np.float32), rnd(*ws, dtype=np.float32)
    got = getattr(mx, fn)(mx.array(x), mx.array(w), **kw)
    want = getattr(mlx, fn)(mlx.array(x), mlx.array(w), **kw, stream=mlx.cpu)
    assert got.shape == tuple(want.shape)
    close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(mlx is None, reason="mlx not installed")
def test_errors_like_mlx():
    """Each input MLX refuses, nuvec refuses too (ValueError)."""
    cases = [
        ("conv1d", (2, 8, 4), (6, 3, 3), {}),
        ("conv1d", (2, 8, 4), (6, 3, 2), dict(groups=3)),
        ("conv1d", (2, 8, 4), (5, 3, 2), dict(groups=2)),
        ("conv1d", (2, 8, 4), (6, 9, 4), {}),
        ("conv1d", (2, 8, 4), (6, 3, 4), dict(stride=0)),
        ("conv1d", (2, 8, 4), (6, 3, 4), dict(dilation=0)),
        ("conv_general", (2, 8, 4), (6, 3, 4), dict(input_dilation=0)),
        ("conv_general", (2, 4), (2, 4), {}),
        ("conv_general", (2, 8, 4), (6, 3, 4), dict(stride=[1, 1])),
        ("conv_transpose1d", (2, 8, 4), (6, 3, 4), dict(padding=5)),
        ("conv1d", (2, 8, 4), (6, 3, 2, 4), {}),
    ]
    for fn, xs, ws, kw in cases:
        with pytest.raises(ValueError):
            getattr(mlx, fn)(mlx.ones(xs), mlx.ones(ws), **kw, stream=mlx.cpu)
        with pytest.raises(ValueError):
            getattr(mx, fn)(mx.ones(xs), mx.ones(ws), **kw)
    with pytest.raises(ValueError, match="floating point"):
        mx.conv1d(mx.ones((2, 8, 4), dtype=mx.int32), mx.ones((6, 3, 4)))
