"""nuvec.nn's layers and activations: forward passes against NumPy with the same weights, and
against mlx.nn where importable (the parameters copied from the nuvec layer into the MLX one
through NumPy); initializers' shapes, dtypes and ranges."""
import math

import numpy as np
import pytest

import nuvec as mx
import nuvec.nn as nn
from nuvec.utils import tree_flatten, tree_map

RNG = np.random.default_rng(20240607)


def rnd(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.array(a), np.array(b), rtol=rtol, atol=atol)


# --- NumPy references (work without MLX) ---------------------------------------------------

def test_linear_bilinear_embedding_numpy():
    mx.random.seed(0)
    lin = nn.Linear(5, 3)
    assert lin.weight.shape == (3, 5) and lin.bias.shape == (3,)
    assert float(mx.max(mx.abs(lin.weight))) <= 1 / math.sqrt(5)
    x = rnd(2, 4, 5)
    close(lin(mx.array(x)), x @ np.array(lin.weight).T + np.array(lin.bias))
    assert "bias" not in nn.Linear(5, 3, bias=False)
    bl = nn.Bilinear(4, 3, 2)
    assert bl.weight.shape == (2, 3, 4)
    x1, x2 = rnd(6, 4), rnd(6, 3)
    W = np.array(bl.weight)
    close(bl(mx.array(x1), mx.array(x2)),
          np.einsum("bi,oji,bj->bo", x1, W, x2) + np.array(bl.bias))
    emb = nn.Embedding(10, 4)
    idx = np.array([[1, 9], [0, 3]], dtype=np.int32)
    close(emb(mx.array(idx)), np.array(emb.weight)[idx])
    h = rnd(3, 4)
    close(emb.as_linear(mx.array(h)), h @ np.array(emb.weight).T)
    seq = nn.Sequential(lin, nn.ReLU(), lambda t: t * 2)
    close(seq(mx.array(x)), 2 * np.maximum(x @ np.array(lin.weight).T + np.array(lin.bias), 0))
    assert nn.Identity(1, a=2)(mx.array(x)) is not None


def test_norms_numpy():
    x = rnd(2, 3, 8)
    m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    ln = nn.LayerNorm(8)
    ln.weight = mx.array(rnd(8))
    ln.bias = mx.array(rnd(8))
    close(ln(mx.array(x)), (x - m) / np.sqrt(v + 1e-5) * np.array(ln.weight)
          + np.array(ln.bias))
    rms = nn.RMSNorm(8)
    rms.weight = mx.array(rnd(8))
    close(rms(mx.array(x)), x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-5)
          * np.array(rms.weight))
    bn = nn.BatchNorm(8)
    y = bn(mx.array(x))
    mb, vb = x.mean((0, 1)), x.var((0, 1))
    close(y, (x - mb) / np.sqrt(vb + 1e-5))
    close(bn.running_mean, 0.1 * mb)
    vu = x.var((0, 1), ddof=1)  # the running variance is unbiased
    close(bn.running_var, 0.9 + 0.1 * vu)
    bn.eval()
    close(bn(mx.array(x)), (x - 0.1 * mb) / np.sqrt(0.9 + 0.1 * vu + 1e-5))
    with pytest.raises(ValueError):
        bn(mx.ones((2,)))
    inorm = nn.InstanceNorm(8)
    xi = rnd(2, 4, 5, 8)
    mi, vi = xi.mean((1, 2), keepdims=True), xi.var((1, 2), keepdims=True)
    close(inorm(mx.array(xi)), (xi - mi) / np.sqrt(vi + 1e-5))
    gn = nn.GroupNorm(2, 8, pytorch_compatible=True)
    g = xi.reshape(2, 20, 2, 4)
    mg, vg = g.mean((1, 3), keepdims=True), g.var((1, 3), keepdims=True)
    close(gn(mx.array(xi)), ((g - mg) / np.sqrt(vg + 1e-5)).reshape(xi.shape))


def test_dropout():
    mx.random.seed(4)
    d = nn.Dropout(0.25)
    x = mx.ones((200, 50))
    y = np.array(d(x))
    assert set(np.unique(y).tolist()) <= {0.0, float(np.float32(1 / 0.75))}
    assert abs((y == 0).mean() - 0.25) < 0.03
    d.eval()
    assert np.array_equal(np.array(d(x)), np.ones((200, 50)))
    with pytest.raises(ValueError):
        nn.Dropout(1.0)
    y2 = np.array(nn.Dropout2d(0.5)(mx.ones((2, 3, 4, 16))))
    assert np.all(y2 == y2[:, :1, :1, :])  # whole channels
    assert np.all(np.abs(y2 - 1) == 1)
    y3 = np.array(nn.Dropout3d(0.5)(mx.ones((2, 2, 3, 4, 16))))
    assert np.all(y3 == y3[:, :1, :1, :1, :])
    with pytest.raises(ValueError):
        nn.Dropout2d()(mx.ones((2, 3)))


def test_pooling_numpy():
    x = rnd(2, 7, 6, 3)
    y = np.array(nn.MaxPool2d(2, stride=2)(mx.array(x)))
    ref = x[:, :6].reshape(2, 3, 2, 3, 2, 3).max((2, 4))
    close(y, ref)
    y = np.array(nn.AvgPool1d(3, stride=1, padding=1)(mx.array(x[:, :, 0])))
    xp = np.pad(x[:, :, 0], ((0, 0), (1, 1), (0, 0)))
    close(y, (xp[:, :-2] + xp[:, 1:-1] + xp[:, 2:]) / 3)
    with pytest.raises(ValueError):
        nn.MaxPool1d(3)(mx.ones((2, 3)))


def test_rope_numpy():
    x = rnd(1, 2, 5, 8)
    out = np.array(nn.RoPE(6, base=100.0)(mx.array(x), offset=2))
    pos = np.arange(5)[:, None] + 2
    theta = pos * 100.0 ** (-np.arange(0, 6, 2) / 6)
    a, b = x[..., :3], x[..., 3:6]
    ref = np.concatenate([a * np.cos(theta) - b * np.sin(theta),
                          a * np.sin(theta) + b * np.cos(theta), x[..., 6:]], -1)
    close(out, ref, atol=1e-4)


def test_activations_numpy():
    x = rnd(4, 6) * 3
    X = mx.array(x)
    sig = 1 / (1 + np.exp(-x))
    sp = np.log1p(np.exp(x))
    cases = {
        "relu": np.maximum(x, 0), "relu6": np.clip(x, 0, 6), "relu2": np.maximum(x, 0) ** 2,
        "leaky_relu": np.where(x > 0, x, 0.01 * x), "elu": np.where(x > 0, x, np.expm1(x)),
        "selu": 1.0507 * np.where(x > 0, x, 1.67326 * np.expm1(x)),
        "celu": np.maximum(x, 0) + np.minimum(np.expm1(x), 0),
        "gelu": x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
        "silu": x * sig, "mish": x * np.tanh(sp), "sigmoid": sig, "softplus": sp,
        "softsign": x / (1 + np.abs(x)), "hardswish": x * np.clip(x + 3, 0, 6) / 6,
        "hard_tanh": np.clip(x, -1, 1), "hard_shrink": np.where(np.abs(x) > 0.5, x, 0),
        "softshrink": np.where(np.abs(x) > 0.5, x - np.sign(x) * 0.5, 0),
        "log_sigmoid": -np.log1p(np.exp(-x)), "tanh": np.tanh(x), "step": (x > 0) * 1,
        "gelu_fast_approx": x / (1 + np.exp(-1.702 * x)),
        "gelu_approx": 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    }
    e = np.exp(x - x.max(-1, keepdims=True))
    cases["softmax"] = e / e.sum(-1, keepdims=True)
    cases["log_softmax"] = np.log(cases["softmax"])
    em = np.exp(-x - (-x).max(-1, keepdims=True))
    cases["softmin"] = em / em.sum(-1, keepdims=True)
    cases["glu"] = x[:, :3] * sig[:, 3:]
    for name, ref in cases.items():
        close(getattr(nn, name)(X), ref, rtol=1e-4, atol=1e-5)
    close(nn.prelu(X, mx.array([0.1])), np.where(x > 0, x, 0.1 * x))
    close(nn.PReLU()(X), np.where(x > 0, x, 0.25 * x))
    mods = {"ReLU": "relu", "ReLU6": "relu6", "SELU": "selu", "SiLU": "silu", "Mish": "mish",
            "Sigmoid": "sigmoid", "Softplus": "softplus", "Softsign": "softsign",
            "Hardswish": "hardswish", "HardTanh": "hard_tanh", "Softmin": "softmin",
            "Softmax": "softmax", "LogSoftmax": "log_softmax", "LogSigmoid": "log_sigmoid",
            "Tanh": "tanh", "LeakyReLU": "leaky_relu", "ELU": "elu", "CELU": "celu",
            "HardShrink": "hard_shrink", "Softshrink": "softshrink", "GLU": "glu",
            "Step": "step", "GELU": "gelu", "ReLU2": "relu2"}
    for cls, fn in mods.items():
        close(getattr(nn, cls)()(X), cases[fn], rtol=1e-4, atol=1e-5)
    close(nn.GELU("tanh")(X), cases["gelu_approx"])
    close(nn.GELU("fast")(X), cases["gelu_fast_approx"])
    with pytest.raises(ValueError):
        nn.GELU("bad")


def test_init():
    mx.random.seed(2)
    a = mx.zeros((64, 32))
    assert np.all(np.array(nn.init.constant(0.5)(a)) == 0.5)
    u = np.array(nn.init.uniform(-2, -1)(a))
    assert u.shape == (64, 32) and u.min() >= -2 and u.max() < -1
    n = np.array(nn.init.normal(3.0, 0.5)(a))
    assert abs(n.mean() - 3) < 0.05 and abs(n.std() - 0.5) < 0.05
    assert np.array_equal(np.array(nn.init.identity()(mx.zeros((4, 4)))), np.eye(4))
    with pytest.raises(ValueError):
        nn.init.identity()(a)
    limit = math.sqrt(6 / 96)
    g = np.array(nn.init.glorot_uniform()(a))
    assert g.max() <= limit and g.min() >= -limit and g.max() > 0.9 * limit
    assert abs(np.array(nn.init.glorot_normal()(a)).std() - math.sqrt(2 / 96)) < 0.02
    assert abs(np.array(nn.init.he_normal()(a)).std() - 1 / math.sqrt(32)) < 0.02
    h = np.array(nn.init.he_uniform()(a, mode="fan_out"))
    assert h.max() <= math.sqrt(3 / 64)
    with pytest.raises(ValueError):
        nn.init.he_uniform()(a, mode="bad")
    with pytest.raises(ValueError):
        nn.init.glorot_normal()(mx.zeros((3,)))
    s = np.array(nn.init.sparse(0.25)(a))
    assert np.all((s == 0).sum(1) == 8)
    for shape in ((8, 5), (5, 8)):
        q = np.array(nn.init.orthogonal(gain=2.0)(mx.zeros(shape)))
        small = q.T @ q if shape[0] > shape[1] else q @ q.T
        close(small, 4 * np.eye(min(shape)), atol=1e-4)
    assert nn.init.normal(dtype=mx.float16)(a).dtype == mx.float16


def test_alibi_and_causal_mask():
    m = np.array(nn.MultiHeadAttention.create_additive_causal_mask(4))
    assert np.all(m[np.tril_indices(4)] == 0) and np.all(m[np.triu_indices(4, 1)] < -1e30)
    s = rnd(1, 2, 3, 3)
    out = np.array(nn.ALiBi()(mx.array(s)))
    slopes = 256.0 ** (-np.arange(1, 3) / 2)
    dist = -np.abs(np.arange(3)[:, None] - np.arange(3)[None])
    close(out, s + slopes[None, :, None, None] * dist)


def test_rnn_numpy():
    mx.random.seed(7)
    rnn = nn.RNN(3, 4)
    x = rnd(2, 5, 3)
    W, U, b = (np.array(v) for v in (rnn.Wxh, rnn.Whh, rnn.bias))
    h = np.zeros((2, 4), np.float32)
    ref = []
    for t in range(5):
        h = np.tanh(x[:, t] @ W.T + b + h @ U.T)
        ref.append(h)
    close(rnn(mx.array(x)), np.stack(ref, 1))
    h, c = nn.LSTM(3, 4)(mx.array(x))
    assert h.shape == (2, 5, 4) and c.shape == (2, 5, 4)
    assert nn.GRU(3, 4)(mx.array(x)).shape == (2, 5, 4)


# --- against MLX --------------------------------------------------------------------------

def _mlx():
    return pytest.importorskip("mlx.core"), pytest.importorskip("mlx.nn")


def _pair(M, MN, name, *args, **kwargs):
    ours = getattr(nn, name)(*args, **kwargs)
    theirs = getattr(MN, name)(*args, **kwargs)
    po, pt = tree_flatten(ours.parameters()), tree_flatten(theirs.parameters())
    assert [(k, tuple(v.shape), str(v.dtype).split(".")[-1]) for k, v in po] == \
        [(k, tuple(v.shape), str(v.dtype).split(".")[-1]) for k, v in pt], name
    theirs.update(tree_map(lambda v: M.array(np.array(v)), ours.parameters()))
    return ours, theirs


def _run(M, ours, theirs, *inputs, **kw):
    a = ours(*[mx.array(i) if isinstance(i, np.ndarray) else i for i in inputs], **kw)
    b = theirs(*[M.array(i) if isinstance(i, np.ndarray) else i for i in inputs], **kw)
    return a, b


LAYERS = [
    ("Linear", (5, 3), {}, [(2, 5)]),
    ("Linear", (5, 3), {"bias": False}, [(4, 2, 5)]),
    ("Bilinear", (4, 3, 2), {}, [(6, 4), (6, 3)]),
    ("LayerNorm", (8,), {}, [(2, 3, 8)]),
    ("LayerNorm", (8,), {"bias": False}, [(2, 8)]),
    ("LayerNorm", (8,), {"affine": False}, [(2, 8)]),
    ("RMSNorm", (8,), {"eps": 1e-3}, [(2, 3, 8)]),
    ("GroupNorm", (2, 8), {}, [(2, 4, 5, 8)]),
    ("GroupNorm", (4, 8), {"pytorch_compatible": True}, [(2, 5, 8)]),
    ("BatchNorm", (8,), {}, [(4, 3, 8)]),
    ("BatchNorm", (8,), {"affine": False, "track_running_stats": False}, [(4, 8)]),
    ("InstanceNorm", (8,), {"affine": True}, [(2, 4, 5, 8)]),
    ("RoPE", (8,), {}, [(2, 3, 5, 8)]),
    ("RoPE", (6,), {"traditional": True, "base": 500.0, "scale": 0.5}, [(2, 5, 8)]),
    ("SinusoidalPositionalEncoding", (8,), {}, [(3, 4)]),
    ("SinusoidalPositionalEncoding", (8,), {"cos_first": True, "full_turns": True}, [(5,)]),
    ("MultiHeadAttention", (8, 2), {}, [(2, 4, 8), (2, 6, 8), (2, 6, 8)]),
    ("MultiHeadAttention", (8, 4), {"query_input_dims": 3, "key_input_dims": 5,
                                    "value_dims": 12, "value_output_dims": 7, "bias": True},
     [(2, 4, 3), (2, 6, 5), (2, 6, 5)]),
    ("RNN", (3, 4), {}, [(2, 5, 3)]),
    ("RNN", (3, 4), {"bias": False}, [(5, 3)]),
    ("GRU", (3, 4), {}, [(2, 5, 3)]),
    ("GRU", (3, 4), {"bias": False}, [(2, 5, 3)]),
    ("LSTM", (3, 4), {}, [(2, 5, 3)]),
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1}, [(2, 9, 3)]),
    ("AvgPool1d", (2,), {}, [(2, 9, 3)]),
    ("MaxPool2d", ((2, 3),), {"stride": (1, 2), "padding": (1, 1)}, [(2, 6, 7, 3)]),
    ("AvgPool2d", (2,), {"padding": 1}, [(2, 6, 7, 3)]),
    ("MaxPool3d", (2,), {}, [(1, 4, 5, 6, 2)]),
    ("AvgPool3d", ((2, 1, 2),), {"stride": 1}, [(1, 4, 5, 6, 2)]),
    ("Upsample", (2,), {}, [(2, 3, 4, 2)]),
    ("Upsample", ((1.5, 2.5),), {"mode": "linear"}, [(2, 3, 4, 2)]),
    ("Upsample", (2.0,), {"mode": "linear", "align_corners": True}, [(2, 3, 4, 5, 2)]),
    ("Upsample", (0.5,), {"mode": "nearest"}, [(2, 8, 2)]),
    ("Upsample", (2,), {"mode": "cubic"}, [(2, 3, 4, 2)]),
    ("Upsample", (3,), {"mode": "cubic", "align_corners": True}, [(2, 4, 2)]),
    ("PReLU", (3,), {"init": 0.1}, [(2, 3)]),
    ("Embedding", (10, 4), {}, []),
    ("Identity", (), {}, [(3,)]),
]


@pytest.mark.parametrize("name,args,kwargs,shapes", LAYERS,
                         ids=[f"{n}{i}" for i, (n, *_r) in enumerate(LAYERS)])
def test_layer_against_mlx(name, args, kwargs, shapes):
    M, MN = _mlx()
    mx.random.seed(11)
    ours, theirs = _pair(M, MN, name, *args, **kwargs)
    if name == "Embedding":
        inputs = [np.array([[1, 9], [0, 3]], dtype=np.int32)]
    else:
        inputs = [rnd(*s) for s in shapes]
    a, b = _run(M, ours, theirs, *inputs)
    for u, v in zip(tree_flatten(a), tree_flatten(b)):
        close(u[1], v[1], rtol=2e-4, atol=2e-5)
    if name == "BatchNorm" and "running_var" in theirs:
        close(ours.running_var, theirs.running_var)
        ours.eval(), theirs.eval()
        a, b = _run(M, ours, theirs, *inputs)
        close(a, b)
    if name != "RNN":  # RNN's repr names the nonlinearity's object
        assert repr(ours) == repr(theirs)


def test_recurrent_with_state_against_mlx():
    M, MN = _mlx()
    x, h0, c0 = rnd(2, 5, 3), rnd(2, 4), rnd(2, 4)
    for name in ("RNN", "GRU"):
        ours, theirs = _pair(M, MN, name, 3, 4)
        a, b = _run(M, ours, theirs, x, h0)
        close(a, b)
    ours, theirs = _pair(M, MN, "LSTM", 3, 4)
    a, b = _run(M, ours, theirs, x, h0, c0)
    close(a[0], b[0]), close(a[1], b[1])


def test_attention_masks_and_transformer_against_mlx():
    M, MN = _mlx()
    mx.random.seed(5)
    x, mem = rnd(2, 4, 8), rnd(2, 6, 8)
    ours, theirs = _pair(M, MN, "MultiHeadAttention", 8, 2)
    mask = nn.MultiHeadAttention.create_additive_causal_mask(4)
    close(mask, MN.MultiHeadAttention.create_additive_causal_mask(4))
    a = ours(mx.array(x), mx.array(x), mx.array(x), mask)
    b = theirs(M.array(x), M.array(x), M.array(x), M.array(np.array(mask)))
    close(a, b)
    bmask = np.tril(np.ones((4, 6), bool))
    a = ours(mx.array(x), mx.array(mem), mx.array(mem), mx.array(bmask))
    b = theirs(M.array(x), M.array(mem), M.array(mem), M.array(bmask))
    close(a, b)
    for norm_first in (True, False):
        ours, theirs = _pair(M, MN, "Transformer", 8, 2, 2, 2, 16, norm_first=norm_first)
        a = ours(mx.array(x[:, :3]), mx.array(x), None, mask, None)
        b = theirs(M.array(x[:, :3]), M.array(x), None, M.array(np.array(mask)), None)
        close(a, b, rtol=1e-3, atol=1e-4)
    ours, theirs = _pair(M, MN, "TransformerEncoder", 2, 8, 2, checkpoint=True)
    close(ours(mx.array(x), None), theirs(M.array(x), None), rtol=1e-3, atol=1e-4)
    ours, theirs = _pair(M, MN, "ALiBi")
    s = rnd(2, 2, 3, 5)
    close(ours(mx.array(s), offset=2), theirs(M.array(s), offset=2))


ACTS = ["relu", "relu6", "relu2", "leaky_relu", "elu", "selu", "celu", "gelu", "gelu_approx",
        "gelu_fast_approx", "silu", "mish", "sigmoid", "softplus", "softsign", "hardswish",
        "hard_tanh", "hard_shrink", "softshrink", "softmin", "glu", "log_sigmoid",
        "log_softmax", "softmax", "step", "tanh"]


def test_activations_against_mlx():
    M, MN = _mlx()
    x = rnd(4, 8) * 4
    for name in ACTS:
        close(getattr(nn, name)(mx.array(x)), getattr(MN, name)(M.array(x)), rtol=1e-4,
              atol=1e-5)
    close(nn.prelu(mx.array(x), mx.array([0.3])), MN.prelu(M.array(x), M.array([0.3])))
    close(nn.elu(mx.array(x), 0.5), MN.elu(M.array(x), 0.5))
    close(nn.glu(mx.array(x), 0), MN.glu(M.array(x), 0))


def test_layer_gradients_against_mlx():
    M, MN = _mlx()
    mx.random.seed(9)
    x = rnd(2, 4, 6)

    def build(nnmod):
        class Net(nnmod.Module):
            def __init__(self):
                super().__init__()
                self.ln = nnmod.LayerNorm(6)
                self.att = nnmod.MultiHeadAttention(6, 2, bias=True)
                self.gru = nnmod.GRU(6, 5)
                self.out = nnmod.Linear(5, 1)

            def __call__(self, x):
                y = self.ln(x)
                y = y + self.att(y, y, y)
                return self.out(nnmod.silu(self.gru(y)))
        return Net()

    ours, theirs = build(nn), build(MN)
    theirs.update(tree_map(lambda v: M.array(np.array(v)), ours.parameters()))
    vo, go = nn.value_and_grad(ours, lambda x: mx.sum(ours(x) ** 2))(mx.array(x))
    vt, gt = MN.value_and_grad(theirs, lambda x: M.sum(theirs(x) ** 2))(M.array(x))
    close(vo, vt, rtol=1e-4)
    for (k, a), (k2, b) in zip(tree_flatten(go), tree_flatten(gt)):
        assert k == k2
        close(a, b, rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("kernel,stride,pad", [(3, 3, 2), (2, 1, 2), (3, 2, 3)])
def test_pool1d_padding_beyond_half_the_kernel_numpy(kernel, stride, pad):
    x = np.random.default_rng(31).standard_normal((2, 11, 3)).astype(np.float32)
    for cls, fill, red in ((nn.MaxPool1d, -np.inf, np.max), (nn.AvgPool1d, 0.0, np.mean)):
        xp = np.pad(x, ((0, 0), (pad, pad), (0, 0)), constant_values=fill)
        n = (xp.shape[1] - kernel) // stride + 1
        want = np.stack([red(xp[:, i * stride:i * stride + kernel], axis=1) for i in range(n)], 1)
        got = np.array(cls(kernel, stride=stride, padding=pad)(mx.array(x)))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="non-negative"):
        nn.MaxPool1d(kernel, padding=-1)


@pytest.mark.parametrize("mode,align", [("linear", False), ("linear", True), ("cubic", False)])
def test_upsample_integer_and_half_inputs_interpolate_in_float32(mode, align):
    xi = np.arange(1, 1 + 2 * 3 * 4 * 2).reshape(2, 3, 4, 2).astype(np.int32)
    up = nn.Upsample(scale_factor=2, mode=mode, align_corners=align)
    ref = np.array(up(mx.array(xi.astype(np.float32))))
    for dt in (mx.int32, mx.uint8, mx.float16):
        y = up(mx.array(xi).astype(dt))
        assert y.dtype == mx.float32
        close(y, ref, rtol=1e-3 if dt == mx.float16 else 1e-6, atol=1e-3)
    # The no-align-corners 2x2 case MLX documents: 1..4 into 4x4 quarters.
    y = nn.Upsample(scale_factor=2, mode="linear")(mx.arange(1, 5).reshape(1, 2, 2, 1))
    close(y[0, :, :, 0], [[1.0, 1.25, 1.75, 2.0], [1.5, 1.75, 2.25, 2.5],
                          [2.5, 2.75, 3.25, 3.5], [3.0, 3.25, 3.75, 4.0]])
    # Nearest keeps the input's dtype.
    assert nn.Upsample(scale_factor=2)(mx.array(xi)).dtype == mx.int32
