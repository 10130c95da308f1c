"""nn.QuantizedLinear, nn.QuantizedEmbedding and nn.quantize against NumPy and mlx.nn."""
import numpy as np
import pytest

import nuvec as mx
import nuvec.nn as nn


def mlx():
    return pytest.importorskip("mlx.core")


def dense_linear(w, b=None):
    lin = nn.Linear(w.shape[1], w.shape[0], bias=b is not None)
    lin.weight = mx.array(w)
    if b is not None:
        lin.bias = mx.array(b)
    return lin


@pytest.mark.parametrize("mode,gs,bits", [("affine", 64, 4), ("affine", 32, 8), ("affine", 128, 3),
                                          ("mxfp4", 32, 4), ("mxfp8", 32, 8), ("nvfp4", 16, 4)])
def test_quantized_linear_is_the_dequantized_product(mode, gs, bits):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((48, 256)).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    x = rng.standard_normal((5, 256)).astype(np.float32)
    q = nn.QuantizedLinear.from_linear(dense_linear(w, b), gs, bits, mode)
    assert (q.group_size, q.bits, q.mode) == (gs, bits, mode)
    assert set(q.parameters()) == ({"weight", "scales", "biases", "bias"} if mode == "affine"
                                   else {"weight", "scales", "bias"})
    deq = np.array(mx.dequantize(q.weight, q.scales, q.get("biases"), group_size=gs, bits=bits,
                                 mode=mode))
    want = x @ deq.T + b
    np.testing.assert_allclose(np.array(q(mx.array(x))), want, rtol=2e-5, atol=2e-4)
    # Quantization error itself is bounded by the mode's resolution.
    assert np.abs(deq - w).max() < (0.6 if bits <= 4 else 0.1) * np.abs(w).max()


def test_new_layers_are_frozen_with_zero_bias_and_reprs_as_mlx():
    q = nn.QuantizedLinear(64, 32)
    assert q.trainable_parameters() == {}
    assert np.array(q.bias).tolist() == [0.0] * 32
    assert q.weight.dtype == mx.uint32 and q.weight.shape == (32, 8)
    assert repr(q) == ("QuantizedLinear(input_dims=64, output_dims=32, bias=True, group_size=64, "
                       "bits=4, mode=affine)")
    q.unfreeze()
    assert set(q.trainable_parameters()) == {"weight", "scales", "biases", "bias"}
    e = nn.QuantizedEmbedding(100, 64, mode="mxfp4")
    assert repr(e) == "QuantizedEmbedding(100, 64, group_size=32, bits=4, mode=mxfp4)"
    assert "biases" not in e.parameters() and e.trainable_parameters() == {}
    with pytest.raises(ValueError):
        nn.QuantizedLinear(64, 32, mode="fp3")


def test_quantized_embedding_rows_and_as_linear():
    rng = np.random.default_rng(1)
    table = rng.standard_normal((20, 128)).astype(np.float32)
    emb = nn.Embedding(20, 128)
    emb.weight = mx.array(table)
    q = emb.to_quantized(group_size=32, bits=8)
    deq = np.array(mx.dequantize(q.weight, q.scales, q.biases, group_size=32, bits=8))
    idx = np.array([[3, 0], [19, 3]])
    np.testing.assert_allclose(np.array(q(mx.array(idx))), deq[idx], rtol=1e-6, atol=1e-6)
    x = rng.standard_normal((4, 128)).astype(np.float32)
    np.testing.assert_allclose(np.array(q.as_linear(mx.array(x))), x @ deq.T, rtol=2e-5,
                               atol=2e-4)


def test_quantize_replaces_leaf_modules_in_place():
    model = nn.Sequential(nn.Embedding(10, 64), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32))
    nn.quantize(model)
    kinds = [type(m).__name__ for m in model.layers]
    assert kinds == ["QuantizedEmbedding", "QuantizedLinear", "ReLU", "QuantizedLinear"]
    assert model.layers[1].group_size == 64 and model.layers[1].bits == 4
    # A predicate picks modules and may give each its own parameters.
    m2 = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64))
    nn.quantize(m2, class_predicate=lambda p, m: {"group_size": 32, "bits": 8}
                if p == "layers.1" else False)
    assert type(m2.layers[0]).__name__ == "Linear"
    assert (m2.layers[1].group_size, m2.layers[1].bits) == (32, 8)
    with pytest.raises(ValueError, match="Unable to quantize"):
        nn.quantize(nn.Sequential(nn.ReLU()), class_predicate=lambda p, m: True)
    # quantize_input makes QQLinear layers, which (as MLX's) have no bias.
    with pytest.raises(NotImplementedError, match="bias"):
        nn.quantize(nn.Sequential(nn.Linear(64, 64)), mode="nvfp4", quantize_input=True)


def test_against_mlx_same_weights_same_outputs():
    mc = mlx()
    import mlx.nn as mnn
    rng = np.random.default_rng(2)
    w = rng.standard_normal((32, 128)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    x = rng.standard_normal((3, 128)).astype(np.float32)
    for mode in ("affine", "mxfp4", "nvfp4"):
        ours = nn.QuantizedLinear.from_linear(dense_linear(w, b), mode=mode)
        ml = mnn.Linear(128, 32)
        ml.weight, ml.bias = mc.array(w), mc.array(b)
        theirs = mnn.QuantizedLinear.from_linear(ml, mode=mode)
        assert repr(ours) == repr(theirs)
        assert np.array_equal(np.array(ours.weight), np.array(theirs.weight))
        np.testing.assert_allclose(np.array(ours(mx.array(x))), np.array(theirs(mc.array(x))),
                                   rtol=1e-5, atol=1e-4)
