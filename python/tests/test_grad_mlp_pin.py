"""The MLP gradient step of bench/bench_grad (4 layers, batch 256, width 1024, float32, tanh
between the layers, mean squared error) pinned against the same gradients computed in float64
by NumPy: the fused tanh derivative (act_vjp), the transposed matrix products of the backward
pass and the bias reductions must keep the step's values. Also the GELU forms in place of tanh,
on a smaller MLP."""
import numpy as np
import pytest

import nuvec as nv
import nuvec.nn as nn

def np_forward_backward(ps, x, y, act64, dact64):
    """Loss and gradients in float64 (hand-written backpropagation)."""
    hs, zs = [x], []
    h = x
    L = len(ps) // 2
    for l in range(L):
        z = h @ ps[2 * l] + ps[2 * l + 1]
        zs.append(z)
        h = act64(z) if l < L - 1 else z
        hs.append(h)
    d = h - y
    n = d.size
    loss = np.sum(d * d) / n
    g = 2 * d / n
    grads = [None] * len(ps)
    for l in reversed(range(L)):
        if l < L - 1:
            g = g * dact64(zs[l])
        grads[2 * l] = hs[l].T @ g
        grads[2 * l + 1] = g.sum(axis=0)
        g = g @ ps[2 * l].T
    return loss, grads


def run(batch, width, layers, act, act64, dact64, seed):
    rng = np.random.default_rng(seed)
    ps = []
    for _ in range(layers):
        ps.append(((rng.random((width, width)) - 0.5) * (2.0 / np.sqrt(width))).astype(np.float32))
        ps.append(((rng.random(width) - 0.5) * 0.1).astype(np.float32))
    x = ((rng.random((batch, width)) - 0.5) * 2.0).astype(np.float32)
    y = (rng.random((batch, width)) - 0.5).astype(np.float32)

    def loss(*args):
        *p, xb, yb = args
        h = xb
        for l in range(layers):
            h = h @ p[2 * l] + p[2 * l + 1]
            if l < layers - 1:
                h = act(h)
        d = h - yb
        return nv.sum(d * d) / (batch * width)

    vg = nv.value_and_grad(loss, argnums=list(range(2 * layers)))
    value, grads = vg(*[nv.array(p) for p in ps], nv.array(x), nv.array(y))
    want_loss, want = np_forward_backward([p.astype(np.float64) for p in ps], x.astype(np.float64),
                                          y.astype(np.float64), act64, dact64)
    np.testing.assert_allclose(float(value), want_loss, rtol=1e-5)
    for i, (g, w) in enumerate(zip(grads, want)):
        g = np.array(g)
        assert g.dtype == np.float32 and g.shape == w.shape
        # Relative to the gradient's scale: float32 products of length 256..1024 summed.
        scale = np.abs(w).max()
        err = np.abs(g - w).max() / scale
        assert err < 1e-5, f"parameter {i}: max error {err:.2e} of its scale {scale:.3e}"


def test_bench_grad_step_gradients_match_float64():
    run(256, 1024, 4, nv.tanh, np.tanh, lambda z: 1 - np.tanh(z) ** 2, seed=0)


@pytest.mark.parametrize("name", ["gelu", "gelu_approx", "gelu_fast_approx"])
def test_gelu_mlp_gradients_match_float64(name):
    from test_activations_fused import d64

    act = getattr(nn, name)
    run(64, 128, 3, act, lambda z: _gelu64(name, z), lambda z: d64(name, z), seed=1)


def _gelu64(name, x):
    import math
    if name == "gelu":
        erf = np.vectorize(math.erf, otypes=[np.float64])
        return 0.5 * x * (1 + erf(x / math.sqrt(2)))
    c, k = (2 * math.sqrt(2 / math.pi), 0.044715) if name == "gelu_approx" else (float(np.float32(1.702)), 0.0)
    v = c * x * (1 + k * x * x)
    return x * np.exp(-np.logaddexp(0, -v))
