"""nuvec.optimizers against mlx.optimizers's documented semantics: every optimizer's update
rule against a NumPy reference of its formula over several steps on a nested tree of float32
parameters (and against MLX itself where it is installed: parameters and state after each
step), the schedules, clip_grad_norm, the state tree (layout, save and load through
safetensors), MultiOptimizer's filters, schedules advancing per update, update(model, ...)."""
import math

import ml_dtypes
import numpy as np
import pytest

import nuvec as nv
import nuvec.optimizers as optim
from nuvec.utils import tree_flatten, tree_map, tree_unflatten

SHAPES = {"w": (3, 4), "layers": [{"w": (2, 3, 4), "b": (5,)}, {"w": (4, 2)}], "s": ()}
STEPS = 4


def make_tree(rng, shapes=SHAPES):
    """A tree of float32 NumPy arrays of the given shapes, fresh seeded values."""
    return tree_map(lambda s: rng.standard_normal(s).astype(np.float32), shapes,
                    is_leaf=lambda x: isinstance(x, tuple))


def to_nv(tree):
    return tree_map(nv.array, tree)


def to_np(tree):
    return tree_map(lambda x: np.array(x), tree)


def assert_trees_close(got, want, rtol=2e-5, atol=2e-6):
    g, w = dict(tree_flatten(got)), dict(tree_flatten(want))
    assert g.keys() == w.keys()
    for k in g:
        a, b = np.asarray(g[k]), np.asarray(w[k])
        assert a.shape == b.shape, (k, a.shape, b.shape)
        np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol,
                                   atol=atol, err_msg=k)


# NumPy references: one function per optimizer, (g, w, state dict, step t counted from 1, lr)
# -> new w, updating the dict; the formulas of the documentation, in float32.
f32 = np.float32


def ref_sgd(momentum=0.0, weight_decay=0.0, dampening=0.0, nesterov=False):
    def step(g, w, s, t, lr):
        g = g + f32(weight_decay) * w
        if momentum <= 0:
            return w - lr * g
        v = f32(momentum) * s.get("v", np.zeros_like(w)) + f32(1 - dampening) * g
        s["v"] = v
        return w - lr * (g + f32(momentum) * v if nesterov else v)
    return step


def ref_rmsprop(alpha=0.99, eps=1e-8):
    def step(g, w, s, t, lr):
        s["v"] = f32(alpha) * s.get("v", np.zeros_like(w)) + f32(1 - alpha) * g * g
        return w - lr * g / (np.sqrt(s["v"]) + f32(eps))
    return step


def ref_adagrad(eps=1e-8):
    def step(g, w, s, t, lr):
        s["v"] = s.get("v", np.zeros_like(w)) + g * g
        return w - lr * g / (np.sqrt(s["v"]) + f32(eps))
    return step


def ref_adadelta(rho=0.9, eps=1e-6):
    def step(g, w, s, t, lr):
        v = f32(rho) * s.get("v", np.zeros_like(w)) + f32(1 - rho) * g * g
        u = s.get("u", np.zeros_like(w))
        d = np.sqrt(u + f32(eps)) / np.sqrt(v + f32(eps)) * g
        s["v"], s["u"] = v, f32(rho) * u + f32(1 - rho) * d * d
        return w - lr * d
    return step


def ref_adam(betas=(0.9, 0.999), eps=1e-8, bias_correction=False, weight_decay=None):
    b1, b2 = betas

    def step(g, w, s, t, lr):
        if weight_decay is not None:
            w = w * (f32(1) - lr * f32(weight_decay))
        m = f32(b1) * s.get("m", np.zeros_like(w)) + f32(1 - b1) * g
        v = f32(b2) * s.get("v", np.zeros_like(w)) + f32(1 - b2) * g * g
        s["m"], s["v"] = m, v
        if bias_correction:
            m, v = m / f32(1 - b1 ** t), v / f32(1 - b2 ** t)
        return w - lr * m / (np.sqrt(v) + f32(eps))
    return step


def ref_adamax(betas=(0.9, 0.999), eps=1e-8):
    b1, b2 = betas

    def step(g, w, s, t, lr):
        s["m"] = f32(b1) * s.get("m", np.zeros_like(w)) + f32(1 - b1) * g
        s["v"] = np.maximum(f32(b2) * s.get("v", np.zeros_like(w)), np.abs(g))
        return w - lr * s["m"] / (s["v"] + f32(eps))
    return step


def ref_lion(betas=(0.9, 0.99), weight_decay=0.0):
    b1, b2 = betas

    def step(g, w, s, t, lr):
        m = s.get("m", np.zeros_like(w))
        c = f32(b1) * m + f32(1 - b1) * g
        s["m"] = f32(b2) * m + f32(1 - b2) * g
        return w * (f32(1) - lr * f32(weight_decay)) - lr * np.sign(c)
    return step


def ref_adafactor(eps=(1e-30, 1e-3), clip_threshold=1.0, decay_rate=-0.8, beta_1=None,
                  weight_decay=0.0, scale_parameter=True, relative_step=True,
                  warmup_init=False):
    def rms(x):
        return np.sqrt(np.mean(np.square(x, dtype=np.float64)))

    def step(g, w, s, t, lr):
        g, w = g.astype(np.float64), w.astype(np.float64)
        if relative_step:
            size = min(1e-6 * t if warmup_init else 1e-2, 1 / math.sqrt(t))
        else:
            size = float(lr)
        if scale_parameter:
            size *= max(eps[1], rms(w))
        beta2 = 1 - t ** decay_rate
        sq = g * g + eps[0]
        if g.ndim >= 2:
            row = beta2 * s.get("exp_avg_sq_row", 0) + (1 - beta2) * sq.mean(-1)
            col = beta2 * s.get("exp_avg_sq_col", 0) + (1 - beta2) * sq.mean(-2)
            s["exp_avg_sq_row"], s["exp_avg_sq_col"] = row, col
            # v ~ row * col / mean(row): the rank-1 factorization of each matrix.
            v = row[..., :, None] * col[..., None, :] / row.mean(-1)[..., None, None]
        else:
            v = s["exp_avg_sq"] = beta2 * s.get("exp_avg_sq", 0) + (1 - beta2) * sq
        u = g / np.sqrt(v)
        u = size * u / max(1.0, rms(u) / clip_threshold)
        if beta_1 is not None:
            u = s["exp_avg"] = beta_1 * s.get("exp_avg", 0) + (1 - beta_1) * u
        return (w * (1 - weight_decay * size) - u).astype(np.float32)
    return step


def bf16(x):
    return np.asarray(x, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def ref_muon(momentum=0.95, weight_decay=0.01, nesterov=True, ns_steps=5):
    def orthogonalize(x):
        # Newton-Schulz in bfloat16: products accumulate in float32, results round to bf16.
        a, b, c = 3.4445, -4.7750, 2.0315
        x = bf16(x)
        tall = x.shape[0] > x.shape[1]
        x = x.T if tall else x
        x = bf16(x / bf16(np.sqrt(np.sum(x * x)) + 1e-7))
        for _ in range(ns_steps):
            gram = bf16(x @ x.T)
            poly = bf16(bf16(b * gram) + bf16(c * bf16(gram @ gram)))
            x = bf16(bf16(a * x) + bf16(poly @ x))
        return x.T if tall else x

    def step(g, w, s, t, lr):
        g = g + f32(weight_decay) * w
        v = s["v"] = f32(momentum) * s.get("v", np.zeros_like(w)) + f32(1 - momentum) * g
        u = g * f32(1 - momentum) + v * f32(momentum) if nesterov else v
        if u.ndim >= 2:
            u = orthogonalize(u.reshape(u.shape[0], -1)).reshape(u.shape)
            lr = lr * f32(math.sqrt(max(1, u.shape[-2] / u.shape[-1])))
        return w - lr * u
    return step


# (name, constructor arguments, reference, tolerances): each optimizer and its options.
CASES = [
    ("SGD", dict(learning_rate=0.1), ref_sgd(), {}),
    ("SGD", dict(learning_rate=0.1, momentum=0.9, weight_decay=0.01), ref_sgd(0.9, 0.01), {}),
    ("SGD", dict(learning_rate=0.05, momentum=0.8, dampening=0.3), ref_sgd(0.8, 0, 0.3), {}),
    ("SGD", dict(learning_rate=0.1, momentum=0.9, nesterov=True), ref_sgd(0.9, nesterov=True),
     {}),
    ("RMSprop", dict(learning_rate=0.01, alpha=0.9), ref_rmsprop(0.9), {}),
    ("Adagrad", dict(learning_rate=0.1, eps=1e-6), ref_adagrad(1e-6), {}),
    ("AdaDelta", dict(learning_rate=0.5, rho=0.8), ref_adadelta(0.8), {}),
    ("Adam", dict(learning_rate=0.01), ref_adam(), {}),
    ("Adam", dict(learning_rate=0.01, betas=[0.8, 0.99], bias_correction=True),
     ref_adam((0.8, 0.99), bias_correction=True), {}),
    ("AdamW", dict(learning_rate=0.01, weight_decay=0.1), ref_adam(weight_decay=0.1), {}),
    ("AdamW", dict(learning_rate=0.01, bias_correction=True),
     ref_adam(bias_correction=True, weight_decay=0.01), {}),
    ("Adamax", dict(learning_rate=0.02, betas=[0.85, 0.95]), ref_adamax((0.85, 0.95)), {}),
    ("Lion", dict(learning_rate=0.01, weight_decay=0.1), ref_lion(weight_decay=0.1), {}),
    ("Adafactor", dict(), ref_adafactor(), dict(rtol=1e-5, atol=1e-6)),
    ("Adafactor", dict(learning_rate=0.05, relative_step=False, beta_1=0.9, weight_decay=0.1,
                       clip_threshold=0.5), ref_adafactor(relative_step=False, beta_1=0.9,
                                                          weight_decay=0.1, clip_threshold=0.5),
     dict(rtol=1e-5, atol=1e-6)),
    ("Adafactor", dict(warmup_init=True, scale_parameter=False),
     ref_adafactor(warmup_init=True, scale_parameter=False), dict(rtol=1e-5, atol=1e-7)),
    # The orthogonalization runs in bfloat16, whose rounding the Newton-Schulz iteration
    # amplifies: after 4 steps of lr 0.02 the parameters agree to a few percent of their
    # movement (a missing scale or momentum term moves them by several times that).
    ("Muon", dict(learning_rate=0.02), ref_muon(), dict(rtol=0, atol=6e-3)),
    ("Muon", dict(learning_rate=0.02, nesterov=False, weight_decay=0.0, ns_steps=3),
     ref_muon(nesterov=False, weight_decay=0.0, ns_steps=3), dict(rtol=0, atol=6e-3)),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def run_numpy(ref, lr, params, grads_seq):
    """The reference over the steps: (parameters, per-leaf state dicts) at the end."""
    flat = dict(tree_flatten(params))
    states = {k: {} for k in flat}
    for t, grads in enumerate(grads_seq, start=1):
        g = dict(tree_flatten(grads))
        lr_t = f32(lr(t - 1)) if callable(lr) else f32(lr)
        flat = {k: ref(g[k], flat[k], states[k], t, lr_t) for k in flat}
    return tree_unflatten(list(flat.items())), states


@pytest.mark.parametrize("name,kwargs,ref,tols", CASES, ids=IDS)
def test_update_rule_against_numpy(name, kwargs, ref, tols, rng):
    params = make_tree(rng)
    grads_seq = [make_tree(rng) for _ in range(STEPS)]
    opt = getattr(optim, name)(**kwargs)
    p = to_nv(params)
    for grads in grads_seq:
        p = opt.apply_gradients(to_nv(grads), p)
        nv.eval(p)
    want, want_state = run_numpy(ref, kwargs.get("learning_rate"), params, grads_seq)
    assert_trees_close(p, want, **tols)
    assert opt.step.item() == STEPS and opt.step.dtype == nv.uint64
    # The state mirrors the parameter tree: one dict per parameter, with the reference's keys.
    state = opt.state
    for path, s in want_state.items():
        node = state
        for k in path.split("."):
            node = node[int(k)] if isinstance(node, list) else node[k]
        assert set(node) >= set(s), (path, set(node), set(s))
        if name != "Muon":
            for k in s:
                np.testing.assert_allclose(np.array(node[k]), np.asarray(s[k], np.float32),
                                           rtol=tols.get("rtol", 2e-5),
                                           atol=tols.get("atol", 2e-6), err_msg=path + k)


@pytest.mark.parametrize("name,kwargs,ref,tols", CASES, ids=IDS)
def test_update_rule_against_mlx(name, kwargs, ref, tols, rng):
    mx = pytest.importorskip("mlx.core")
    mopt = pytest.importorskip("mlx.optimizers")
    from mlx.utils import tree_flatten as mlx_flatten

    params = make_tree(rng)
    ours, theirs = getattr(optim, name)(**kwargs), getattr(mopt, name)(**kwargs)
    p, q = to_nv(params), tree_map(mx.array, params)
    for _ in range(STEPS):
        grads = make_tree(rng)
        p = ours.apply_gradients(to_nv(grads), p)
        q = theirs.apply_gradients(tree_map(mx.array, grads), q)
        assert_trees_close(p, to_np(q), **tols)
        ours_state = dict(tree_flatten(ours.state))
        theirs_raw = dict(mlx_flatten(theirs.state))
        assert ours_state.keys() == theirs_raw.keys()
        for k, v in theirs_raw.items():
            assert ours_state[k].shape == tuple(v.shape), k
            assert str(ours_state[k].dtype).split(".")[-1] == str(v.dtype).split(".")[-1], k
        theirs_state = {k: np.array(v) for k, v in theirs_raw.items()}
        assert_trees_close(ours_state, theirs_state, rtol=tols.get("rtol", 2e-5),
                           atol=max(tols.get("atol", 2e-6), 1e-5))


SCHEDULES = [
    ("exponential_decay", (0.1, 0.9)),
    ("step_decay", (0.1, 0.5, 3)),
    ("cosine_decay", (0.1, 10)),
    ("cosine_decay", (0.2, 7, 0.05)),
    ("linear_schedule", (0.0, 0.1, 8)),
    ("linear_schedule", (1.0, 0.25, 5)),
]

SCHEDULE_FORMULAS = {
    "exponential_decay": lambda t, init, r: init * r ** t,
    "step_decay": lambda t, init, r, n: init * r ** (t // n),
    "cosine_decay": lambda t, init, n, end=0.0:
        end + (init - end) * 0.5 * (1 + math.cos(math.pi * min(t, n) / n)),
    "linear_schedule": lambda t, init, end, n: init + (end - init) * min(t, n) / n,
}


@pytest.mark.parametrize("name,args", SCHEDULES)
def test_schedules_against_formula(name, args):
    schedule = getattr(optim, name)(*args)
    for t in range(15):
        got = schedule(nv.array(t, nv.uint64))
        assert got.dtype == nv.float32
        assert abs(got.item() - SCHEDULE_FORMULAS[name](t, *args)) < 1e-6, t


@pytest.mark.parametrize("name,args", SCHEDULES)
def test_schedules_against_mlx(name, args):
    mx = pytest.importorskip("mlx.core")
    mopt = pytest.importorskip("mlx.optimizers")
    ours, theirs = getattr(optim, name)(*args), getattr(mopt, name)(*args)
    for t in range(15):
        a, b = ours(nv.array(t, nv.uint64)), theirs(mx.array(t, mx.uint64))
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-6, atol=1e-7)


def test_join_schedules():
    warm = optim.linear_schedule(0.0, 0.1, 5)
    cos = optim.cosine_decay(0.1, 10)
    joined = optim.join_schedules([warm, cos, optim.exponential_decay(0.05, 0.5)], [5, 12])
    for t in range(20):
        want = (SCHEDULE_FORMULAS["linear_schedule"](t, 0.0, 0.1, 5) if t < 5 else
                SCHEDULE_FORMULAS["cosine_decay"](t - 5, 0.1, 10) if t < 12 else
                0.05 * 0.5 ** (t - 12))
        assert abs(joined(nv.array(t, nv.uint64)).item() - want) < 1e-6, t
    with pytest.raises(ValueError):
        optim.join_schedules([], [])
    with pytest.raises(ValueError):
        optim.join_schedules([warm, cos], [1, 2])
    with pytest.raises(ValueError):
        optim.linear_schedule(0.0, 1.0, 0)


def test_join_schedules_against_mlx():
    mx = pytest.importorskip("mlx.core")
    mopt = pytest.importorskip("mlx.optimizers")

    def build(o):
        return o.join_schedules([o.linear_schedule(0, 1e-1, 10), o.cosine_decay(1e-1, 20, 1e-3)],
                                [10])
    ours, theirs = build(optim), build(mopt)
    for t in range(40):
        np.testing.assert_allclose(np.array(ours(nv.array(t, nv.uint64))),
                                   np.array(theirs(mx.array(t, mx.uint64))), rtol=1e-6)


def test_schedule_advances_per_update(rng):
    """The k-th update (from 0) uses schedule(k); learning_rate then reads schedule(k)."""
    schedule = optim.step_decay(0.5, 0.5, 2)
    opt = optim.SGD(learning_rate=schedule)
    assert opt.learning_rate.item() == 0.5 and opt.learning_rate.dtype == nv.float32
    w = rng.standard_normal((3,)).astype(np.float32)
    p = {"w": nv.array(w)}
    for k in range(6):
        g = rng.standard_normal((3,)).astype(np.float32)
        p = opt.apply_gradients({"w": nv.array(g)}, p)
        lr = 0.5 * 0.5 ** (k // 2)
        assert opt.learning_rate.item() == pytest.approx(lr)
        w = w - f32(lr) * g
        np.testing.assert_allclose(np.array(p["w"]), w, rtol=1e-6)
    # Assigning a value replaces the current one (the schedule still runs at the next update).
    opt.learning_rate = 0.25
    assert opt.learning_rate.item() == 0.25 and isinstance(opt.learning_rate, nv.array)


def test_schedule_documented_examples():
    opt = optim.SGD(learning_rate=optim.exponential_decay(1e-1, 0.9))
    for _ in range(5):
        opt.update({}, {})
    assert opt.learning_rate.item() == pytest.approx(0.06561, rel=1e-5)
    opt = optim.Adam(learning_rate=optim.join_schedules(
        [optim.linear_schedule(0, 1e-1, steps=10), optim.cosine_decay(1e-1, 200)], [10]))
    assert opt.learning_rate.item() == 0.0
    for _ in range(12):
        opt.update({}, {})
    assert opt.learning_rate.item() == pytest.approx(0.0999938, rel=1e-5)


def test_clip_grad_norm(rng):
    grads = make_tree(rng)
    norm = math.sqrt(sum(float(np.sum(np.square(g, dtype=np.float64)))
                         for _, g in tree_flatten(grads)))
    for max_norm in (norm / 3, norm * 2):
        clipped, total = optim.clip_grad_norm(to_nv(grads), max_norm)
        assert total.item() == pytest.approx(norm, rel=1e-5)
        scale = min(max_norm / (norm + 1e-6), 1.0)
        assert_trees_close(clipped, tree_map(lambda g: g * scale, grads))
        got = math.sqrt(sum(float(np.sum(np.square(np.array(g), dtype=np.float64)))
                            for _, g in tree_flatten(clipped)))
        assert got == pytest.approx(min(norm, max_norm), rel=1e-5)
    clipped, total = optim.clip_grad_norm({"a": nv.array([3.0, 4.0], nv.bfloat16)}, 1.0)
    assert total.dtype == nv.bfloat16 and clipped["a"].dtype == nv.bfloat16
    assert total.item() == 5.0


def test_clip_grad_norm_against_mlx(rng):
    mx = pytest.importorskip("mlx.core")
    mopt = pytest.importorskip("mlx.optimizers")
    grads = make_tree(rng)
    for max_norm in (0.5, 100.0):
        a, na = optim.clip_grad_norm(to_nv(grads), max_norm)
        b, nb = mopt.clip_grad_norm(tree_map(mx.array, grads), max_norm)
        assert_trees_close(a, to_np(b))
        assert na.item() == pytest.approx(nb.item(), rel=1e-6)


def test_state_round_trip_through_safetensors(tmp_path, rng):
    params = make_tree(rng)
    grads_seq = [make_tree(rng) for _ in range(5)]
    opt = optim.AdamW(learning_rate=optim.cosine_decay(1e-2, 10), bias_correction=True)
    p = to_nv(params)
    for grads in grads_seq[:3]:
        p = opt.apply_gradients(to_nv(grads), p)
    path = str(tmp_path / "opt.safetensors")
    nv.save_safetensors(path, dict(tree_flatten(opt.state)))
    loaded = tree_unflatten(list(nv.load(path).items()))
    assert loaded["step"].dtype == nv.uint64 and loaded["step"].item() == 3
    restored = optim.AdamW(learning_rate=optim.cosine_decay(1e-2, 10), bias_correction=True)
    restored.state = loaded
    q = p
    for grads in grads_seq[3:]:
        p = opt.apply_gradients(to_nv(grads), p)
        q = restored.apply_gradients(to_nv(grads), q)
    assert_trees_close(q, p, rtol=0, atol=0)
    assert_trees_close(restored.state, opt.state, rtol=0, atol=0)
    assert restored.step.item() == 5


def test_init_and_state_layout(rng):
    params = {"a": nv.zeros((2, 3)), "l": [nv.zeros((4,)), {"b": nv.zeros((1,))}],
              "t": (nv.zeros((2,)),)}
    opt = optim.Adam(1e-3)
    assert set(opt.state) == {"step", "learning_rate"} and opt.step.item() == 0
    opt.init(params)
    s = opt.state
    assert set(s["a"]) == {"m", "v"} and s["a"]["m"].shape == (2, 3)
    assert s["l"][0]["v"].shape == (4,) and s["l"][1]["b"]["m"].shape == (1,)
    assert isinstance(s["t"], tuple) and s["t"][0]["m"].shape == (2,)
    # init keeps existing state and adds what is new; apply_gradients returns gradients' tree.
    s["a"]["m"] = nv.ones((2, 3))
    params["c"] = nv.zeros((5,))
    opt.init(params)
    assert opt.state["a"]["m"].tolist() == [[1.0] * 3] * 2 and opt.state["c"]["m"].shape == (5,)
    out = opt.apply_gradients({"c": nv.ones((5,)), "t": (nv.ones((2,)),)}, params)
    assert set(out) == {"c", "t"} and isinstance(out["t"], tuple)
    assert opt.state["a"]["m"].tolist() == [[1.0] * 3] * 2  # untouched without a gradient


class StandIn:
    """The two methods of nn.Module that Optimizer.update uses."""

    def __init__(self, params):
        self.params = params

    def trainable_parameters(self):
        return self.params

    def update(self, tree):
        def merge(old, new):
            if isinstance(old, dict):
                return {k: merge(v, new[k]) if k in new else v for k, v in old.items()}
            if isinstance(old, list):
                return [merge(o, n) if not (isinstance(n, dict) and not n) else o
                        for o, n in zip(old, new)] + old[len(new):]
            return new
        self.params = merge(self.params, tree)


def test_update_model(rng):
    params = make_tree(rng)
    model = StandIn(to_nv(params))
    opt = optim.SGD(0.1, momentum=0.5)
    grads_seq = [make_tree(rng) for _ in range(3)]
    for grads in grads_seq:
        opt.update(model, to_nv(grads))
    want, _ = run_numpy(ref_sgd(0.5), 0.1, params, grads_seq)
    assert_trees_close(model.params, want)
    # A dict is used as its own parameter tree, as an nn.Module is.
    class DictModel(dict):
        def update(self, tree):
            for k, v in tree.items():
                self[k] = v
            return self
    m = DictModel(w=nv.array([1.0, 2.0]), frozen=nv.array([5.0]))
    optim.SGD(0.5).update(m, {"w": nv.array([1.0, 1.0])})
    assert m["w"].tolist() == [0.5, 1.5] and m["frozen"].tolist() == [5.0]


def test_multi_optimizer(rng):
    params = make_tree(rng)
    grads_seq = [make_tree(rng) for _ in range(3)]
    multi = optim.MultiOptimizer(
        [optim.SGD(0.1), optim.Adam(0.01), optim.RMSprop(0.02)],
        [lambda path, g: path.startswith("layers.0"), lambda path, g: g.ndim == 2])
    p = to_nv(params)
    for grads in grads_seq:
        p = multi.apply_gradients(to_nv(grads), p)
    flat = dict(tree_flatten(params))
    refs = {k: ((ref_sgd(), 0.1) if k.startswith("layers.0") else
                (ref_adam(), 0.01) if flat[k].ndim == 2 else (ref_rmsprop(), 0.02))
            for k in flat}
    got = dict(tree_flatten(p))
    assert got.keys() == flat.keys()
    for k, (ref, lr) in refs.items():
        w, s = flat[k], {}
        for t, grads in enumerate(grads_seq, start=1):
            w = ref(dict(tree_flatten(grads))[k], w, s, t, f32(lr))
        np.testing.assert_allclose(np.array(got[k]), w, rtol=2e-5, atol=2e-6, err_msg=k)
    states = multi.state["states"]
    assert len(states) == 3 and all(s["step"].item() == 3 for s in states)
    assert set(states[0]["layers"][0]) == {"w", "b"} and "w" in states[1] and "s" in states[2]
    assert multi.learning_rate.item() == pytest.approx(0.1)
    multi.learning_rate = 0.3
    assert [o.learning_rate.item() for o in multi.optimizers] == [pytest.approx(0.3)] * 3
    multi.state = {"states": states}
    assert multi.optimizers[2].state is states[2]
    for bad in (states, {"states": states[:2]}, {"s": states}):
        with pytest.raises(ValueError):
            multi.state = bad
    with pytest.raises(ValueError):
        optim.MultiOptimizer([optim.SGD(0.1), optim.SGD(0.1)])


def test_multi_optimizer_against_mlx(rng):
    mx = pytest.importorskip("mlx.core")
    mopt = pytest.importorskip("mlx.optimizers")

    def build(o):
        return o.MultiOptimizer([o.Lion(0.01), o.AdamW(0.01)], [lambda path, g: g.ndim == 3])
    ours, theirs = build(optim), build(mopt)
    params = make_tree(rng)
    p, q = to_nv(params), tree_map(mx.array, params)
    for _ in range(3):
        grads = make_tree(rng)
        p = ours.apply_gradients(to_nv(grads), p)
        q = theirs.apply_gradients(tree_map(mx.array, grads), q)
    assert_trees_close(p, to_np(q))


def test_muon_update_is_nearly_orthogonal(rng):
    """One Muon step from zero momentum: the update of a matrix has singular values near 1
    (Newton-Schulz's quintic lands them in about [0.7, 1.2]), scaled by sqrt(rows / cols)."""
    for shape in ((6, 4), (4, 6), (3, 2, 4)):
        w = rng.standard_normal(shape).astype(np.float32)
        opt = optim.Muon(learning_rate=1.0, weight_decay=0.0, nesterov=False, momentum=0.5)
        out = opt.apply_gradients({"w": nv.array(rng.standard_normal(shape))}, {"w": nv.array(w)})
        update = (w - np.array(out["w"])).reshape(shape[0], -1)
        sv = np.linalg.svd(update / math.sqrt(max(1, shape[-2] / shape[-1])), compute_uv=False)
        assert 0.6 < sv.min() and sv.max() < 1.3, (shape, sv)


def test_argument_errors():
    with pytest.raises(ValueError):
        optim.SGD(0.1, nesterov=True)
    with pytest.raises(ValueError):
        optim.SGD(0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError):
        optim.RMSprop(0.1, alpha=-1)
    with pytest.raises(ValueError):
        optim.Adagrad(0.1, eps=-1)
    with pytest.raises(ValueError):
        optim.AdaDelta(0.1, rho=-0.5)
    with pytest.raises(ValueError):
        optim.Adamax(0.1, eps=-1)
    with pytest.raises(KeyError):
        optim.Adafactor(relative_step=False).learning_rate


def test_float16_parameters_keep_their_dtype(rng):
    for opt in (optim.SGD(0.1, momentum=0.9), optim.Adam(1e-2, bias_correction=True),
                optim.AdamW(1e-2), optim.Lion(1e-2), optim.Muon(1e-2)):
        p = {"w": nv.array(rng.standard_normal((3, 4)), nv.float16)}
        out = opt.apply_gradients({"w": nv.array(rng.standard_normal((3, 4)), nv.float16)}, p)
        assert out["w"].dtype == nv.float16, type(opt).__name__
        assert np.all(np.isfinite(np.array(out["w"]).astype(np.float32)))
