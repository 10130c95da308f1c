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


def train(mx, nn, opt, model, loss, batches):
    """The losses of one optimizer step per batch (MLX's training-loop idiom)."""
    mx.eval(model.parameters())
    loss_and_grad = nn.value_and_grad(model, loss)
    out = []
    for batch in batches:
        value, grads = loss_and_grad(model, *[mx.array(b) for b in batch])
        opt.update(model, grads)
        mx.eval(model.parameters(), opt.state)
        out.append(value.item())
    return out


# A small CNN (Conv2d, BatchNorm, MaxPool2d, GroupNorm, gelu, Dropout, label smoothing, Adam),
# recurrent layers (LSTM, GRU, RNN with RMSprop) and attention (Sequential, SiLU, LayerNorm,
# MultiHeadAttention, RoPE with Lion). The CNN's conv bias sits before a BatchNorm, whose
# gradient is rounding noise that Adam amplifies: only the losses are compared there.
def cnn_program(mx, nn, optim, steps=4):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm(8)
            self.pool = nn.MaxPool2d(2, 2)
            self.c2 = nn.Conv2d(8, 16, 3, stride=2)
            self.gn = nn.GroupNorm(4, 16)
            self.drop = nn.Dropout(0.0)
            self.fc = nn.Linear(16 * 3 * 3, 5)

        def __call__(self, x):
            x = self.pool(nn.relu(self.bn(self.c1(x))))
            x = nn.gelu(self.gn(self.c2(x)))
            return self.fc(self.drop(x.reshape(x.shape[0], -1)))

    def loss(model, x, y):
        return nn.losses.cross_entropy(model(x), y, reduction="mean", label_smoothing=0.1)

    mx.random.seed(5)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 16, 16, 3)).astype(np.float32)
    y = rng.integers(0, 5, 8).astype(np.int32)
    return train(mx, nn, optim.Adam(learning_rate=1e-2), Net(), loss, [(x, y)] * steps)


def rnn_program(mx, nn, optim, steps=4):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(6, 12)
            self.gru = nn.GRU(12, 8)
            self.rnn = nn.RNN(8, 4)
            self.out = nn.Linear(4, 3)

        def __call__(self, x):
            h, _ = self.lstm(x)
            return self.out(self.rnn(self.gru(h))[:, -1])

    mx.random.seed(9)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 7, 6)).astype(np.float32)
    y = rng.standard_normal((5, 3)).astype(np.float32)
    loss = lambda model, x, y: nn.losses.mse_loss(model(x), y)  # noqa: E731
    return train(mx, nn, optim.RMSprop(learning_rate=1e-2), Net(), loss, [(x, y)] * steps)


def attention_program(mx, nn, optim, steps=3):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = nn.Sequential(nn.Linear(10, 16), nn.SiLU(), nn.LayerNorm(16), nn.Linear(16, 16))
            self.att = nn.MultiHeadAttention(16, 4, bias=True)
            self.rope = nn.RoPE(4)

        def __call__(self, q):
            h = self.m(q)
            return self.att(h, h, h).sum() + self.rope(h.reshape(2, 5, 4, 4)).sum()

    mx.random.seed(1)
    q = np.random.default_rng(4).standard_normal((2, 5, 10)).astype(np.float32)
    loss = lambda model, q: model(q) ** 2  # noqa: E731
    return train(mx, nn, optim.Lion(learning_rate=1e-3), Net(), loss, [(q,)] * steps)


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


@pytest.mark.parametrize("program", ["cnn_program", "rnn_program", "attention_program"])
def test_more_layers_same_losses(program):
    mlx = mlx_modules()
    fn = globals()[program]
    np.testing.assert_allclose(fn(*NUVEC), fn(*mlx), rtol=5e-5, atol=5e-6)
