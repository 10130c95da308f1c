"""nuvec.nn.Module against mlx.nn.Module's semantics: members and parameters, children and
named modules, update, freeze/unfreeze, apply, train/eval, repr, save/load round trips, and
nn.value_and_grad (gradients against MLX's, an MLP trained by hand giving MLX's losses)."""
import numpy as np
import pytest

import nuvec as mx
import nuvec.nn as nn
from nuvec.utils import tree_flatten, tree_map


def _tree_model(nnmod, core):
    """The same nested model built with nuvec.nn or mlx.nn."""
    class Net(nnmod.Module):
        def __init__(self):
            super().__init__()
            self.l = [nnmod.Linear(2, 3), {"x": nnmod.ReLU(), "w": core.zeros((2,))}]
            self.s = nnmod.Sequential(nnmod.Linear(3, 3), nnmod.GELU())
            self.b = nnmod.BatchNorm(3)
            self._hidden = core.ones((1,))
            self.t = (1, 2)
            self.n = 5

        def __call__(self, x):
            return self.b(self.s(self.l[0](x)))
    return Net()


def _keys(tree):
    return [(k, type(v).__name__) for k, v in tree_flatten(tree)]


def test_members_and_attributes():
    m = _tree_model(nn, mx)
    assert isinstance(m, dict) and "l" in m and "n" not in m and m.n == 5
    assert "t" in m and "_hidden" in m
    assert [k for k, _ in tree_flatten(m.parameters())] == [
        "l.0.weight", "l.0.bias", "l.1.w", "s.layers.0.weight", "s.layers.0.bias",
        "b.weight", "b.bias", "b.running_mean", "b.running_var"]
    assert [k for k, _ in tree_flatten(m.trainable_parameters())] == [
        "l.0.weight", "l.0.bias", "l.1.w", "s.layers.0.weight", "s.layers.0.bias",
        "b.weight", "b.bias"]
    with pytest.raises(AttributeError):
        m.missing
    m.extra = mx.ones((2,))
    assert "extra" in m
    del m.extra
    assert "extra" not in m
    assert m.state is m


def test_children_leaf_and_named_modules():
    m = _tree_model(nn, mx)
    assert [k for k, _ in m.named_modules()] == ["", "b", "s", "s.layers.1", "s.layers.0",
                                                 "l.1.x", "l.0"]
    assert m.modules()[0] is m and len(m.modules()) == 7
    assert [k for k, _ in tree_flatten(m.children(), is_leaf=nn.Module.is_module)] == [
        "l.0", "l.1.x", "s", "b"]
    assert [k for k, _ in tree_flatten(m.leaf_modules(), is_leaf=nn.Module.is_module)] == [
        "l.0", "l.1.x", "s.layers.0", "s.layers.1", "b"]


def test_update_and_strict():
    m = nn.Linear(2, 3)
    w = mx.ones((3, 2))
    assert m.update({"weight": w}) is m
    assert m.weight is w
    with pytest.raises(ValueError):
        m.update({"nope": w})
    with pytest.raises(ValueError):
        m.update({"weight": 3})
    m.update({"nope": w}, strict=False)
    assert "nope" not in m
    s = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    s.update({"layers": [{}, {"bias": mx.zeros((2,))}]})
    assert np.all(np.array(s.layers[1].bias) == 0)
    s.update_modules({"layers": [{}, nn.Identity()]})
    assert isinstance(s.layers[1], nn.Identity)


def test_freeze_unfreeze():
    m = _tree_model(nn, mx)
    m.freeze()
    assert tree_flatten(m.trainable_parameters()) == []
    m.unfreeze(keys="weight")
    assert [k for k, _ in tree_flatten(m.trainable_parameters())] == [
        "l.0.weight", "s.layers.0.weight", "b.weight"]
    m.b.unfreeze()  # BatchNorm's own unfreeze keeps its running statistics frozen
    assert "b.running_mean" not in dict(tree_flatten(m.trainable_parameters()))
    m.unfreeze()  # a parent's recursive unfreeze does not (as MLX)
    assert "b.running_mean" in dict(tree_flatten(m.trainable_parameters()))
    m.b.freeze(keys=["running_mean", "running_var"], recurse=False)
    m.s.freeze(recurse=False)
    assert len(tree_flatten(m.trainable_parameters())) == 7
    m.freeze(keys=["l"], recurse=False)
    assert [k for k, _ in tree_flatten(m.trainable_parameters())][0] == "s.layers.0.weight"
    with pytest.raises(KeyError):
        m.freeze(keys="absent", strict=True)


def test_apply_train_eval_set_dtype():
    m = _tree_model(nn, mx)
    m.apply(lambda x: x * 0)
    assert all(float(mx.sum(mx.abs(v))) == 0 for _, v in tree_flatten(m.parameters()))
    assert m.training and m.s.layers[0].training
    m.eval()
    assert not m.training and not m.s.layers[0].training and not m.b.training
    m.train()
    assert m.b.training
    m.set_dtype(mx.float16)
    assert m.l[0].weight.dtype == mx.float16
    seen = []
    m.apply_to_modules(lambda k, mod: seen.append(k))
    assert seen[0] == ""


def test_repr():
    m = nn.Sequential(nn.Linear(2, 3, bias=False), nn.ReLU())
    assert repr(m) == ("Sequential(\n  (layers.0): Linear(input_dims=2, output_dims=3, "
                       "bias=False)\n  (layers.1): ReLU()\n)")


@pytest.mark.parametrize("ext", ["npz", "safetensors"])
def test_save_load_round_trip(tmp_path, ext):
    mx.random.seed(3)
    a = _tree_model(nn, mx)
    b = _tree_model(nn, mx)
    path = str(tmp_path / f"w.{ext}")
    a.save_weights(path)
    b.load_weights(path)
    for (ka, va), (kb, vb) in zip(tree_flatten(a.parameters()), tree_flatten(b.parameters())):
        assert ka == kb and np.array_equal(np.array(va), np.array(vb))
    with pytest.raises(ValueError):
        a.save_weights(str(tmp_path / "w.bin"))
    weights = tree_flatten(a.parameters())
    with pytest.raises(ValueError, match="Missing"):
        b.load_weights(weights[1:])
    with pytest.raises(ValueError, match="not in model"):
        b.load_weights(weights + [("zz", mx.ones((1,)))])
    with pytest.raises(ValueError, match="shape"):
        b.load_weights([(k, mx.ones((7,))) if k == "l.0.bias" else (k, v) for k, v in weights])
    b.load_weights([("l.0.bias", mx.full((3,), 2.0))], strict=False)
    assert np.all(np.array(b.l[0].bias) == 2)


def test_value_and_grad_numpy():
    mx.random.seed(0)
    model = nn.Linear(3, 2)
    x = mx.random.normal((4, 3))
    y = mx.random.normal((4, 2))
    model.freeze(keys="bias")

    def loss(x, y):
        return mx.mean(mx.square(model(x) - y))

    val, g = nn.value_and_grad(model, loss)(x, y)
    assert list(g) == ["weight"]
    W, b, X, Y = (np.array(v, dtype=np.float64) for v in (model.weight, model.bias, x, y))
    r = X @ W.T + b - Y
    assert np.isclose(float(val), np.mean(r ** 2), rtol=1e-5)
    np.testing.assert_allclose(np.array(g["weight"]), 2 * r.T @ X / r.size, rtol=1e-4,
                               atol=1e-6)


def _to_mlx(core, tree):
    return tree_map(lambda v: core.array(np.array(v)), tree)


def test_value_and_grad_and_sgd_against_mlx():
    M = pytest.importorskip("mlx.core")
    MN = pytest.importorskip("mlx.nn")
    mx.random.seed(1)

    def mlp(nnmod):
        return nnmod.Sequential(nnmod.Linear(4, 8), nnmod.ReLU(), nnmod.Linear(8, 8),
                                nnmod.Tanh(), nnmod.Linear(8, 3))

    ours, theirs = mlp(nn), mlp(MN)
    theirs.update(_to_mlx(M, ours.parameters()))
    x = np.random.default_rng(5).standard_normal((16, 4)).astype(np.float32)
    t = np.random.default_rng(6).integers(0, 3, 16).astype(np.int32)

    def make(nnmod, model, core):
        def loss(x, t):
            return nnmod.losses.cross_entropy(model(x), t, reduction="mean")
        return nnmod.value_and_grad(model, loss), core

    steps = []
    for nnmod, model, core in ((nn, ours, mx), (MN, theirs, M)):
        vg, _ = make(nnmod, model, core)
        losses = []
        for _ in range(5):
            v, g = vg(core.array(x), core.array(t))
            model.update(tree_map(lambda p, d: p - 0.5 * d, model.trainable_parameters(), g))
            losses.append(float(v))
        steps.append((losses, g))
    np.testing.assert_allclose(steps[0][0], steps[1][0], rtol=1e-4)
    assert steps[0][0][-1] < steps[0][0][0]
    for (k, a), (k2, b) in zip(tree_flatten(steps[0][1]), tree_flatten(steps[1][1])):
        assert k == k2
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-3, atol=1e-5)


def test_tree_queries_against_mlx():
    M = pytest.importorskip("mlx.core")
    MN = pytest.importorskip("mlx.nn")
    from mlx.utils import tree_flatten as mlx_flatten
    a, b = _tree_model(nn, mx), _tree_model(MN, M)
    for fn in ("parameters", "trainable_parameters", "children", "leaf_modules"):
        assert _keys(getattr(a, fn)()) == [(k, type(v).__name__.replace("array", "array"))
                                           for k, v in mlx_flatten(getattr(b, fn)())]
    assert [k for k, _ in a.named_modules()] == [k for k, _ in b.named_modules()]
    assert repr(a).split("\n", 1)[1] == repr(b).split("\n", 1)[1]
    for m in (a, b):
        m.freeze()
        m.unfreeze(keys=["weight", "w"])
        m.l[0].freeze(keys="weight")
    assert [k for k, _ in tree_flatten(a.trainable_parameters())] == \
        [k for k, _ in mlx_flatten(b.trainable_parameters())]
