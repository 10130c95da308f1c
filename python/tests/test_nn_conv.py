"""nuvec.nn's convolution layers (Conv1d/2d/3d, ConvTranspose1d/2d/3d): parameter shapes and
initialization ranges as mlx.nn's, forward passes against the NumPy reference with the layer's
own weights, repr, gradients through the layer, and against mlx.nn where importable (the
parameters copied from the nuvec layer into the MLX one, and equal draws at equal seeds)."""
import math
import os
import sys

import numpy as np
import pytest

import nuvec as mx
import nuvec.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "python"))
import conv_ref  # noqa: E402

try:
    import mlx.core as mlx
    import mlx.nn as mlx_nn
except ImportError:  # pragma: no cover
    mlx = None

RNG = np.random.default_rng(20261202)

# (class name, constructor args, kwargs, input shape)
LAYERS = [
    ("Conv1d", (4, 6, 3), dict(stride=2, padding=1, dilation=2, groups=2), (2, 11, 4)),
    ("Conv2d", (3, 5, (3, 2)), dict(stride=(2, 1), padding=(1, 0)), (2, 7, 6, 3)),
    ("Conv2d", (4, 4, 3), dict(padding=1, groups=4, bias=False), (1, 5, 5, 4)),
    ("Conv3d", (2, 3, 2), dict(stride=(1, 2, 1), padding=1), (1, 4, 5, 3, 2)),
    ("ConvTranspose1d", (4, 3, 3), dict(stride=2, padding=1, output_padding=1), (2, 5, 4)),
    ("ConvTranspose2d", (2, 3, (2, 3)), dict(stride=2, padding=(0, 1), dilation=1), (1, 4, 3, 2)),
    ("ConvTranspose3d", (2, 2, 2), dict(stride=(2, 1, 1), output_padding=(1, 0, 0)),
     (1, 3, 2, 2, 2)),
]


def reference(name, layer, x, kw):
    w = np.array(layer.weight).astype(np.float64)
    n = x.ndim - 2
    per = lambda v: v if isinstance(v, (tuple, list)) else (v,) * n
    st, pad, dil = per(kw.get("stride", 1)), per(kw.get("padding", 0)), per(kw.get("dilation", 1))
    if name.startswith("ConvTranspose"):
        y = conv_ref.conv_transpose_scatter(x, w, st, pad, dil, per(kw.get("output_padding", 0)))
    else:
        y = conv_ref.conv_general(x, w, st, pad, pad, dil, 1, kw.get("groups", 1))
    if "bias" in layer:
        y = y + np.array(layer.bias)
    return y


@pytest.mark.parametrize("name,args,kw,xs", LAYERS, ids=[f"{l[0]}-{i}" for i, l in
                                                           enumerate(LAYERS)])
def test_layer_forward_numpy(name, args, kw, xs):
    mx.random.seed(3)
    layer = getattr(nn, name)(*args, **kw)
    cin, cout, k = args
    n = len(xs) - 2
    ks = k if isinstance(k, tuple) else (k,) * n
    groups = kw.get("groups", 1)
    assert layer.weight.shape == (cout, *ks, cin // groups)
    assert ("bias" in layer) == kw.get("bias", True)
    if "bias" in layer:
        assert layer.bias.shape == (cout,)
        np.testing.assert_array_equal(np.array(layer.bias), 0)
    bound = 1 / math.sqrt(cin // groups * math.prod(ks))
    wv = np.array(layer.weight)
    assert np.abs(wv).max() <= bound and np.abs(wv).max() > bound / 2
    # A bias that is not zero, so that its addition is checked.
    if "bias" in layer:
        layer.bias = mx.array(RNG.standard_normal(cout).astype(np.float32))
    x = RNG.standard_normal(xs).astype(np.float32)
    y = layer(mx.array(x))
    np.testing.assert_allclose(np.array(y), reference(name, layer, x, kw), rtol=1e-4, atol=1e-5)


def test_layer_repr():
    assert repr(nn.Conv1d(4, 6, 3, groups=2)) == (
        "Conv1d(4, 6, kernel_size=3, stride=1, padding=0, dilation=1, groups=2, bias=True)")
    assert repr(nn.Conv2d(4, 6, 3, stride=2)) == (
        "Conv2d(4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(0, 0), dilation=1, groups=1, "
        "bias=True)")
    assert repr(nn.ConvTranspose3d(2, 3, 2, bias=False)) == (
        "ConvTranspose3d(2, 3, kernel_size=(2, 2, 2), stride=(1, 1, 1), padding=(0, 0, 0), "
        "dilation=1, output_padding=(0, 0, 0), bias=False)")
    with pytest.raises(ValueError, match="divisible"):
        nn.Conv2d(3, 6, 3, groups=2)


def test_layer_gradients():
    mx.random.seed(1)
    layer = nn.Conv2d(3, 4, 3, padding=1)
    x = mx.array(RNG.standard_normal((2, 5, 5, 3)).astype(np.float32))

    def loss(model, x):
        return (model(x) ** 2).mean()

    val, grads = nn.value_and_grad(layer, loss)(layer, x)
    assert grads["weight"].shape == layer.weight.shape and grads["bias"].shape == (4,)
    # d loss / d bias = mean over positions of 2 y, per channel.
    y = np.array(layer(x))
    np.testing.assert_allclose(np.array(grads["bias"]), (2 * y).sum(axis=(0, 1, 2)) / y.size,
                               rtol=1e-4, atol=1e-6)
    assert float(val) == pytest.approx(float((y ** 2).mean()), rel=1e-5)


@pytest.mark.skipif(mlx is None, reason="mlx not installed")
@pytest.mark.parametrize("name,args,kw,xs", LAYERS, ids=[f"{l[0]}-{i}" for i, l in
                                                           enumerate(LAYERS)])
def test_layer_matches_mlx(name, args, kw, xs):
    mx.random.seed(5)
    layer = getattr(nn, name)(*args, **kw)
    mlx.random.seed(5)
    ref = getattr(mlx_nn, name)(*args, **kw)
    # Equal seeds draw equal weights (the same initializer and draw order as mlx.nn's).
    np.testing.assert_array_equal(np.array(layer.weight), np.array(ref.weight))
    ref.update({k: mlx.array(np.array(v)) for k, v in layer.parameters().items()})
    x = RNG.standard_normal(xs).astype(np.float32)
    np.testing.assert_allclose(np.array(layer(mx.array(x))), np.array(ref(mlx.array(x))),
                               rtol=1e-4, atol=1e-5)
    assert repr(layer) == repr(ref)
