"""nuvec.nn.losses against NumPy formulas and against mlx.nn.losses where importable, with the
three reductions and the argument checks."""
import math

import numpy as np
import pytest

import nuvec as mx
import nuvec.nn as nn

L = nn.losses
RNG = np.random.default_rng(777)


def rnd(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, rtol=1e-4, atol=1e-5):
    np.testing.assert_allclose(np.array(a), np.array(b), rtol=rtol, atol=atol)


def _lse(x, axis):
    m = x.max(axis, keepdims=True)
    return (m + np.log(np.exp(x - m).sum(axis, keepdims=True))).squeeze(axis)


def test_cross_entropy_numpy():
    logits = rnd(5, 4)
    t = RNG.integers(0, 4, 5).astype(np.int32)
    ref = _lse(logits, -1) - logits[np.arange(5), t]
    close(L.cross_entropy(mx.array(logits), mx.array(t)), ref)
    close(L.cross_entropy(mx.array(logits), mx.array(t), reduction="mean"), ref.mean())
    close(L.cross_entropy(mx.array(logits), mx.array(t), reduction="sum"), ref.sum())
    w = np.abs(rnd(5))
    close(L.cross_entropy(mx.array(logits), mx.array(t), weights=mx.array(w)), ref * w)
    probs = np.eye(4, dtype=np.float32)[t]
    close(L.cross_entropy(mx.array(logits), mx.array(probs)), ref)
    ls = 0.2
    sm = _lse(logits, -1) - (1 - ls) * logits[np.arange(5), t] - ls * logits.mean(-1)
    close(L.cross_entropy(mx.array(logits), mx.array(t), label_smoothing=ls), sm)
    close(L.cross_entropy(mx.array(logits.T), mx.array(t), axis=0), ref)
    with pytest.raises(ValueError):
        L.cross_entropy(mx.array(logits), mx.array(t), label_smoothing=1.0)
    with pytest.raises(ValueError):
        L.cross_entropy(mx.array(logits), mx.array(t[:3]))
    with pytest.raises(ValueError):
        L.cross_entropy(mx.array(logits), mx.array(t), weights=mx.ones((3,)))
    with pytest.raises(ValueError):
        L.cross_entropy(mx.array(logits), mx.array(t), reduction="max")


def test_binary_cross_entropy_numpy():
    z, t = rnd(6), (RNG.random(6) > 0.5).astype(np.float32)
    p = 1 / (1 + np.exp(-z))
    ref = -(t * np.log(p) + (1 - t) * np.log(1 - p))
    close(L.binary_cross_entropy(mx.array(z), mx.array(t)), ref.mean())
    close(L.binary_cross_entropy(mx.array(p), mx.array(t), with_logits=False,
                                 reduction="none"), ref, rtol=1e-3)
    w = np.abs(rnd(6))
    close(L.binary_cross_entropy(mx.array(z), mx.array(t), weights=mx.array(w),
                                 reduction="sum"), (ref * w).sum())
    clipped = L.binary_cross_entropy(mx.array([0.0, 1.0]), mx.array([1.0, 0.0]),
                                     with_logits=False, reduction="none")
    close(clipped, [100.0, 100.0])
    with pytest.raises(ValueError):
        L.binary_cross_entropy(mx.array(z), mx.array(t[:2]))


def test_regression_losses_numpy():
    p, t = rnd(4, 3), rnd(4, 3)
    P, T = mx.array(p), mx.array(t)
    d = p - t
    close(L.l1_loss(P, T), np.abs(d).mean())
    close(L.mse_loss(P, T, reduction="sum"), (d ** 2).sum())
    a = np.abs(d)
    close(L.smooth_l1_loss(P, T, beta=0.5, reduction="none"),
          np.where(a < 0.5, 0.5 * a ** 2 / 0.5, a - 0.25))
    close(L.huber_loss(P, T, delta=0.7), np.where(a <= 0.7, 0.5 * a ** 2, 0.7 * (a - 0.35)))
    close(L.log_cosh_loss(P, T), np.log(np.cosh(d)))
    close(L.hinge_loss(P, mx.array(np.sign(t))), np.maximum(1 - p * np.sign(t), 0))
    v = np.abs(rnd(4, 3)) + 0.1
    close(L.gaussian_nll_loss(P, T, mx.array(v), full=True, reduction="none"),
          0.5 * (np.log(v) + d ** 2 / v) + 0.5 * math.log(2 * math.pi))
    for f in (L.l1_loss, L.mse_loss, L.smooth_l1_loss):
        with pytest.raises(ValueError):
            f(P, mx.array(t[:2]))
    with pytest.raises(ValueError):
        L.gaussian_nll_loss(P, T, mx.ones((2,)))


def test_other_losses_numpy():
    logp = np.log(np.exp(rnd(3, 5)) / np.exp(rnd(3, 5)).sum(-1, keepdims=True))
    logp = logp - _lse(logp, -1)[:, None]
    t = np.array([0, 4, 2], np.int32)
    close(L.nll_loss(mx.array(logp), mx.array(t)), -logp[np.arange(3), t])
    q = rnd(3, 5)
    q = q - _lse(q, -1)[:, None]
    close(L.kl_div_loss(mx.array(logp), mx.array(q)), (np.exp(q) * (q - logp)).sum(-1))
    a, p, n = rnd(4, 6), rnd(4, 6), rnd(4, 6)
    ref = np.maximum(np.sqrt(((a - p) ** 2).sum(-1) + 1e-6)
                     - np.sqrt(((a - n) ** 2).sum(-1) + 1e-6) + 1.0, 0)
    close(L.triplet_loss(mx.array(a), mx.array(p), mx.array(n)), ref)
    cos = (a * p).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(p, axis=1))
    close(L.cosine_similarity_loss(mx.array(a), mx.array(p)), cos)
    x1, x2, y = rnd(5), rnd(5), np.sign(rnd(5))
    close(L.margin_ranking_loss(mx.array(x1), mx.array(x2), mx.array(y), margin=0.3),
          np.maximum(0, -y * (x1 - x2) + 0.3))
    with pytest.raises(ValueError):
        L.margin_ranking_loss(mx.array(x1), mx.array(x2[:2]), mx.array(y))


def test_losses_against_mlx():
    M = pytest.importorskip("mlx.core")
    ML = pytest.importorskip("mlx.nn").losses
    logits, t = rnd(5, 4), RNG.integers(0, 4, 5).astype(np.int32)
    probs = np.abs(rnd(5, 4))
    probs /= probs.sum(-1, keepdims=True)
    w = np.abs(rnd(5))
    p, q, r = rnd(4, 3), rnd(4, 3), np.abs(rnd(4, 3)) + 0.1
    b = (RNG.random((4, 3)) > 0.5).astype(np.float32)
    sig = 1 / (1 + np.exp(-p))
    cases = [
        ("cross_entropy", (logits, t), {}),
        ("cross_entropy", (logits, t), {"weights": w, "label_smoothing": 0.1,
                                        "reduction": "mean"}),
        ("cross_entropy", (logits, probs), {"label_smoothing": 0.3}),
        ("cross_entropy", (logits.T.copy(), t), {"axis": 0, "reduction": "sum"}),
        ("binary_cross_entropy", (p, b), {}),
        ("binary_cross_entropy", (sig, b), {"with_logits": False, "weights": r,
                                            "reduction": "none"}),
        ("l1_loss", (p, q), {"reduction": "sum"}),
        ("mse_loss", (p, q), {}),
        ("nll_loss", (logits, t), {"reduction": "mean"}),
        ("kl_div_loss", (p, q), {}),
        ("smooth_l1_loss", (p, q), {"beta": 0.3, "reduction": "none"}),
        ("triplet_loss", (p, q, r), {"p": 2, "margin": 0.5}),
        ("hinge_loss", (p, np.sign(q)), {"reduction": "mean"}),
        ("huber_loss", (p, q), {"delta": 0.5}),
        ("log_cosh_loss", (p, q), {"reduction": "sum"}),
        ("cosine_similarity_loss", (p, q), {}),
        ("cosine_similarity_loss", (p, q), {"axis": 0, "reduction": "mean"}),
        ("margin_ranking_loss", (p, q, np.sign(r - 0.5)), {"margin": 0.2}),
        ("gaussian_nll_loss", (p, q, r), {}),
        ("gaussian_nll_loss", (p, q, r), {"full": True, "reduction": "sum"}),
    ]
    for name, args, kw in cases:
        ours = getattr(L, name)(*[mx.array(a) for a in args],
                                **{k: mx.array(v) if isinstance(v, np.ndarray) else v
                                   for k, v in kw.items()})
        theirs = getattr(ML, name)(*[M.array(a) for a in args],
                                   **{k: M.array(v) if isinstance(v, np.ndarray) else v
                                      for k, v in kw.items()})
        assert tuple(ours.shape) == tuple(theirs.shape), name
        close(ours, theirs, rtol=2e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_nll_loss_any_axis_numpy(axis):
    logits = rnd(3, 4, 5)
    logp = logits - np.expand_dims(_lse(logits, axis), axis)
    n = logp.shape[axis]
    shape = [d for i, d in enumerate(logp.shape) if i != axis % 3]
    t = RNG.integers(0, n, size=shape).astype(np.int32)
    want = -np.take_along_axis(logp, np.expand_dims(t, axis), axis).squeeze(axis)
    got = L.nll_loss(mx.array(logp), mx.array(t), axis=axis)
    assert tuple(got.shape) == want.shape
    close(got, want)


@pytest.mark.parametrize("p", [1, 2, 3, 1.5])
def test_triplet_loss_p_norms_numpy(p):
    a, q, n = rnd(4, 6), rnd(4, 6), rnd(4, 6)

    def dist(d):
        return ((np.abs(d) ** p).sum(-1) + 1e-6) ** (1.0 / p)

    want = np.maximum(dist(a - q) - dist(a - n) + 0.5, 0)
    close(L.triplet_loss(mx.array(a), mx.array(q), mx.array(n), p=p, margin=0.5), want)
    # A point 2 from the anchor and one 3 from it along other axes: any p-norm gives 2 and 3.
    z = mx.zeros((1, 2))
    got = L.triplet_loss(z, mx.array([[2.0, 0.0]]), mx.array([[0.0, 3.0]]), p=p,
                         reduction="none")
    close(got, np.zeros(1), atol=1e-4)
