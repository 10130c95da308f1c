"""Programs written for MLX (mlx.core, mlx.nn, mlx.optimizers only), run unchanged once with
MLX's modules and once with nuvec's: an MLP classifier trained with SGD on synthetic data, and
a causal transformer language model trained with AdamW, in the style of MLX's examples. Both
libraries draw the same random numbers for the same seed, and their layers initialize with the
same draws, so the loss curves must agree step by step (to float32 rounding over a few
steps). Skipped where mlx.core is not installed."""
import numpy as np
import pytest

import nuvec
import nuvec.nn
import nuvec.optimizers


def mlp_program(mx, nn, optim, steps=8):
    class MLP(nn.Module):
        def __init__(self, num_layers, input_dim, hidden_dim, output_dim):
            super().__init__()
            sizes = [input_dim] + [hidden_dim] * num_layers + [output_dim]
            self.layers = [nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]

        def __call__(self, x):
            for layer in self.layers[:-1]:
                x = nn.relu(layer(x))
            return self.layers[-1](x)

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    mx.random.seed(3)
    rng = np.random.default_rng(0)
    # Learnable labels: a fixed linear teacher's classes, two batches seen in turn.
    teacher = rng.standard_normal((20, 10)).astype(np.float32)
    data = np.tile(rng.standard_normal((2, 64, 20)).astype(np.float32), (steps // 2, 1, 1))
    labels = np.argmax(data @ teacher, axis=-1).astype(np.int32)
    model = MLP(2, 20, 32, 10)
    mx.eval(model.parameters())
    loss_and_grad = nn.value_and_grad(model, loss_fn)
    opt = optim.SGD(learning_rate=0.1, momentum=0.9)
    losses = []
    for x, y in zip(data, labels):
        loss, grads = loss_and_grad(model, mx.array(x), mx.array(y))
        opt.update(model, grads)
        mx.eval(model.parameters(), opt.state)
        losses.append(loss.item())
    correct = mx.sum(mx.argmax(model(mx.array(data[0])), axis=1) == mx.array(labels[0]))
    return losses, int(correct.item())


def transformer_program(mx, nn, optim, steps=5):
    class TransformerLM(nn.Module):
        def __init__(self, vocab, layers, dims, heads):
            super().__init__()
            self.embedding = nn.Embedding(vocab, dims)
            self.pe = nn.SinusoidalPositionalEncoding(dims)
            self.transformer = nn.TransformerEncoder(layers, dims, heads, norm_first=True)
            self.out_proj = nn.Linear(dims, vocab)

        def __call__(self, x):
            length = x.shape[1]
            mask = nn.MultiHeadAttention.create_additive_causal_mask(length)
            h = self.embedding(x)
            h = h + self.pe(mx.arange(length))
            return self.out_proj(self.transformer(h, mask))

    def loss_fn(model, x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean")

    mx.random.seed(11)
    rng = np.random.default_rng(1)
    # One batch learned by heart: the loss falls step by step.
    tokens = np.tile(rng.integers(0, 50, (1, 4, 17)).astype(np.int32), (steps, 1, 1))
    model = TransformerLM(50, 2, 32, 4)
    mx.eval(model.parameters())
    loss_and_grad = nn.value_and_grad(model, loss_fn)
    opt = optim.AdamW(learning_rate=3e-3, weight_decay=0.01)
    losses = []
    for t in tokens:
        x, y = mx.array(t[:, :-1]), mx.array(t[:, 1:])
        loss, grads = loss_and_grad(model, x, y)
        opt.update(model, grads)
        mx.eval(model.parameters(), opt.state)
        losses.append(loss.item())
    return losses


def mlx_modules():
    mx = pytest.importorskip("mlx.core")
    import mlx.nn as nn
    import mlx.optimizers as optim
    return mx, nn, optim


NUVEC = (nuvec, nuvec.nn, nuvec.optimizers)


def test_mlp_classifier_same_losses():
    mlx = mlx_modules()
    ours, ours_correct = mlp_program(*NUVEC)
    theirs, theirs_correct = mlp_program(*mlx)
    np.testing.assert_allclose(ours, theirs, rtol=2e-5, atol=2e-6)
    assert ours[-1] < ours[0]
    assert ours_correct == theirs_correct


def test_transformer_lm_same_losses():
    mlx = mlx_modules()
    ours = transformer_program(*NUVEC)
    theirs = transformer_program(*mlx)
    np.testing.assert_allclose(ours, theirs, rtol=5e-5, atol=5e-6)
    assert ours[-1] < ours[0]
