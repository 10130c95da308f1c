"""Compatibility: small programs written for mlx.core run unchanged against nuvec, and both
give the same values, dtypes and shapes."""
import numpy as np
import pytest

import nuvec

mlx = pytest.importorskip("mlx.core")

SNIPPETS = {
    "arith": """
x = mx.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
y = (x * 2 + 1) / 3 - mx.array([1.0, 0.5, 0.25])
out = [y, x.T @ x, mx.maximum(x, 3), x ** 2, -x, abs(-x), x // 2, x % 2]
""",
    "weak": """
h = mx.array([1, 2, 3], dtype=mx.float16)
out = [h + 1.5, 2 * h, h / 3, mx.array([1], mx.int8) + 3, mx.array([True, False]) + True,
       mx.array([1, 2]) < 2.5]
""",
    "creation": """
out = [mx.zeros((2, 3)), mx.ones((3,), dtype=mx.int32), mx.full((2, 2), 7), mx.arange(10),
       mx.arange(0.0, 1.0, 0.25), mx.linspace(0, 1, 5), mx.eye(3, k=1), mx.identity(2),
       mx.zeros_like(mx.ones((2,), mx.uint8)), mx.tri(3)]
""",
    "shape": """
x = mx.arange(24).reshape(2, 3, 4)
out = [x.transpose(2, 0, 1), mx.swapaxes(x, 0, 1), x.flatten(), mx.expand_dims(x, 0),
       mx.concatenate([x, x], axis=1), mx.stack([x, x]), mx.split(x, 2, axis=2)[1],
       mx.pad(x, 1), mx.tile(x, (1, 2, 1)), mx.repeat(x, 2, axis=0), x.sum(axis=(0, 2)),
       mx.moveaxis(x, 0, -1), mx.squeeze(x[:, :1]), mx.roll(x, 1, axis=2)]
""",
    "index": """
x = mx.arange(30).reshape(5, 6)
y = mx.arange(30).reshape(5, 6)
y[1:3, ::2] = 0
y[mx.array([0, 4]), 1] = -1
out = [x[1], x[-1, ::-1], x[:, 2], x[None, 1:3], x[..., 1], x[mx.array([0, 2]), 1:4],
       x[:, mx.array([5, 0])], y, x.at[mx.array([0, 0])].add(1), mx.take(x, mx.array([1, 3]), axis=1)]
""",
    "grad": """
def loss(w, x):
    return ((w * x - 1.0) * (w * x - 1.0)).sum()
w = mx.array([0.5, -1.0, 2.0])
x = mx.array([1.0, 2.0, 3.0])
val, g = mx.value_and_grad(loss)(w, x)
out = [val, g, mx.grad(loss, argnums=1)(w, x), mx.vmap(lambda r: (r * r).sum())(mx.ones((3, 4)))]
""",
    "unary": """
x = mx.array([0.5, 1.0, 2.0])
out = [mx.exp(x), mx.log(x), mx.sqrt(x), mx.sin(x), mx.tanh(x), mx.sigmoid(x), mx.floor(x * 3),
       mx.isnan(x), mx.where(x > 1, x, 0.0), mx.clip(x, 0.7, 1.5), mx.round(x * 3.3, 1)]
""",
}


def run(src, mod):
    env = {"mx": mod}
    exec(src, env)
    return env["out"]


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_snippet_matches_mlx(name):
    want = run(SNIPPETS[name], mlx)
    got = run(SNIPPETS[name], nuvec)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        gn = np.array(g.astype(nuvec.float32)) if g.dtype == nuvec.bfloat16 else np.array(g)
        wn = np.array(w.astype(mlx.float32)) if w.dtype == mlx.bfloat16 else np.array(w)
        np.testing.assert_allclose(gn, wn, rtol=1e-5, atol=1e-6)
        assert repr(g) == repr(w)
