"""src/nn through the C API: optimizers, schedules and clip_grad_norm against MLX 0.32 (run on
the same inputs) and NumPy re-implementations of MLX's formulas in float64; parameter trees
against mlx.utils' tree_flatten / tree_unflatten and hand-derived cases; errors."""
import ctypes as C
import math

import numpy as np
import pytest

from conftest import sample
from nvc import (BF16, B, CODE, D, FLOATS, I, P, Session, assert_close, lib, np_dtype, nv_name,
                 sig)

try:
    import mlx.core as mx
    import mlx.optimizers as optim
    import mlx.utils as mlx_utils
except ImportError:  # pragma: no cover - setup.sh installs mlx[cpu]
    mx = None

needs_mlx = pytest.mark.skipif(mx is None, reason="mlx is not installed")


class SgdOptions(C.Structure):
    _fields_ = [("learning_rate", D), ("schedule", P), ("momentum", D), ("weight_decay", D),
                ("dampening", D), ("nesterov", B)]


class AdamOptions(C.Structure):
    _fields_ = [("learning_rate", D), ("schedule", P), ("beta1", D), ("beta2", D), ("eps", D),
                ("weight_decay", D), ("bias_correction", B)]


PP = C.POINTER(P)
sig("nv_map_new", P)
sig("nv_map_free", None, P)
sig("nv_map_set", I, P, C.c_char_p, P)
sig("nv_map_get", P, P, C.c_char_p)
sig("nv_map_size", C.c_size_t, P)
sig("nv_map_key", C.c_char_p, P, C.c_size_t)
sig("nv_map_value", P, P, C.c_size_t)
sig("nv_array_uint64", P, C.c_uint64)
sig("nv_array_scalar", P, D, I)
sig("nv_tree_new_array", P, P)
sig("nv_tree_new_dict", P)
sig("nv_tree_new_list", P)
sig("nv_tree_free", None, P)
sig("nv_tree_dict_set", I, P, C.c_char_p, P)
sig("nv_tree_list_append", I, P, P)
sig("nv_tree_get_kind", I, P)
sig("nv_tree_size", C.c_size_t, P)
sig("nv_tree_key", C.c_char_p, P, C.c_size_t)
sig("nv_tree_child", P, P, C.c_size_t)
sig("nv_tree_find", P, P, C.c_char_p)
sig("nv_tree_array", P, P)
sig("nv_tree_flatten", I, P, C.c_char_p, PP)
sig("nv_tree_unflatten", I, P, PP)
sig("nv_params_filter", I, P, C.c_char_p, B, PP)
sig("nv_params_prefix", I, P, C.c_char_p, PP)
sig("nv_params_merge", I, P, P, B, PP)
sig("nv_params_update", I, P, P, B)
sig("nv_params_count", C.c_int64, P)
sig("nv_params_eval", I, PP, C.c_size_t)
sig("nv_linear_schedule", I, D, D, C.c_int64, PP)
sig("nv_cosine_decay", I, D, C.c_int64, D, PP)
sig("nv_step_decay", I, D, D, C.c_int64, PP)
sig("nv_exponential_decay", I, D, D, PP)
sig("nv_join_schedules", I, PP, C.c_size_t, C.POINTER(C.c_int64), C.c_size_t, PP)
sig("nv_lr_schedule_free", None, P)
sig("nv_lr_schedule_at", P, P, P)
sig("nv_lr_schedule_value", I, P, C.c_uint64, C.POINTER(D))
sig("nv_sgd_defaults", SgdOptions, D)
sig("nv_adam_defaults", AdamOptions, D)
sig("nv_adamw_defaults", AdamOptions, D)
sig("nv_optimizer_sgd", I, C.POINTER(SgdOptions), PP)
sig("nv_optimizer_adam", I, C.POINTER(AdamOptions), PP)
sig("nv_optimizer_adamw", I, C.POINTER(AdamOptions), PP)
sig("nv_optimizer_free", None, P)
sig("nv_optimizer_update", I, P, P, P, PP)
sig("nv_optimizer_init", I, P, P)
sig("nv_optimizer_state", P, P)
sig("nv_optimizer_set_state", I, P, P)
sig("nv_optimizer_step", P, P)
sig("nv_optimizer_learning_rate", P, P)
sig("nv_optimizer_set_learning_rate", I, P, D)
sig("nv_clip_grad_norm", I, P, D, PP, PP)


def err():
    return lib.nv_last_error().decode()


class NN:
    """A Session that also frees the maps, trees, schedules and optimizers it made."""

    def __init__(self, s):
        self.s = s
        self.maps, self.trees, self.scheds, self.opts = [], [], [], []

    def close(self):
        for m in self.maps:
            lib.nv_map_free(m)
        for t in self.trees:
            lib.nv_tree_free(t)
        for x in self.scheds:
            lib.nv_lr_schedule_free(x)
        for o in self.opts:
            lib.nv_optimizer_free(o)

    def map(self, d, layout="contiguous"):
        m = lib.nv_map_new()
        self.maps.append(m)
        for k, v in d.items():
            h = self.s.view(np.asarray(v), layout) if np.ndim(v) >= 1 else self.s.array(v)
            assert lib.nv_map_set(m, k.encode(), h) == 0
        return m

    def own_map(self, m):
        self.maps.append(m)
        return m

    def keys(self, m):
        return [lib.nv_map_key(m, i).decode() for i in range(lib.nv_map_size(m))]

    def read(self, m):
        return {k: self.s.read(lib.nv_map_value(m, i)) for i, k in enumerate(self.keys(m))}

    def sched(self, fn, *args):
        out = P()
        st = fn(*args, C.byref(out))
        assert st == 0, err()
        self.scheds.append(out.value)
        return out.value

    def opt(self, kind, **kw):
        if kind == "sgd":
            o = lib.nv_sgd_defaults(kw.pop("learning_rate"))
            make = lib.nv_optimizer_sgd
        else:
            o = (lib.nv_adamw_defaults if kind == "adamw" else lib.nv_adam_defaults)(
                kw.pop("learning_rate"))
            make = lib.nv_optimizer_adamw if kind == "adamw" else lib.nv_optimizer_adam
        for k, v in kw.items():
            setattr(o, k, v)
        out = P()
        st = make(C.byref(o), C.byref(out))
        if st != 0:
            raise ValueError(err())
        self.opts.append(out.value)
        return out.value

    def update(self, o, params, grads):
        out = P()
        st = lib.nv_optimizer_update(o, params, grads, C.byref(out))
        if st != 0:
            raise ValueError(err())
        return self.own_map(out.value)


@pytest.fixture
def nn():
    with Session() as s:
        h = NN(s)
        try:
            yield h
        finally:
            h.close()


def to_mx(x):
    x = np.asarray(x)
    if BF16 is not None and x.dtype == BF16:
        return mx.array(x.astype(np.float32)).astype(mx.bfloat16)
    if x.dtype == np.float64:
        return mx.array(x, dtype=mx.float64)  # MLX would make float32 of it
    return mx.array(x)


def from_mx(a):
    if a.dtype == mx.bfloat16:
        return np.array(a.astype(mx.float32)).astype(BF16)
    return np.array(a)


def param_set(rng, dtype):
    """Parameters and a gradient generator: a matrix, a vector, a 0-d and an empty array."""
    shapes = {"layers.0.weight": (3, 4), "layers.0.bias": (4,), "scale": (), "empty": (0, 2)}
    dt = np_dtype(dtype)
    params = {k: rng.standard_normal(s).astype(dt) for k, s in shapes.items()}

    def grads():
        return {k: (rng.standard_normal(s) * 0.5).astype(dt) for k, s in shapes.items()}

    return params, grads


# ---- NumPy re-implementations of MLX's formulas (float64) ----


def ref_sgd(p, g, st, lr, momentum=0.0, weight_decay=0.0, dampening=0.0, nesterov=False):
    if weight_decay != 0:
        g = g + weight_decay * p
    if momentum <= 0:
        return p - lr * g
    v = momentum * st.get("v", np.zeros_like(g))
    v = v + ((1 - dampening) * g if dampening > 0 else g)
    st["v"] = v
    return p - lr * (g + momentum * v if nesterov else v)


def ref_adam(p, g, st, lr, step, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0,
             bias_correction=False, decoupled=False):
    if decoupled:
        p = p * (1 - lr * weight_decay)
    m = beta1 * st.get("m", np.zeros_like(g)) + (1 - beta1) * g
    v = beta2 * st.get("v", np.zeros_like(g)) + (1 - beta2) * g * g
    st["m"], st["v"] = m, v
    if bias_correction:
        # MLX computes beta**step with a float32 weak scalar and the uint64 step: in float32.
        f = np.float32
        c1 = lr / float(f(1) - f(beta1) ** f(step))
        c2 = float(f(1) / np.sqrt(f(1) - f(beta2) ** f(step)))
        return p - (c1 * m) / (np.sqrt(v) * c2 + eps)
    return p - lr * m / (np.sqrt(v) + eps)


def ref_adam_half(p, g, st, lr, step, dtype, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0,
                  bias_correction=False, decoupled=False):
    """adam_update's rule for float16/bfloat16: the optimizer's scalars in the half dtype, as it
    builds them, then float32 arithmetic in the composed update's order, each output rounded
    once to the half dtype (the state too, which the next step reads)."""
    f, h = np.float32, np_dtype(dtype)

    def half(x):
        return np.asarray(x, dtype=f).astype(h).astype(f)

    lr_g = half(lr)
    p, g = np.asarray(p).astype(f), np.asarray(g).astype(f)
    m = np.asarray(st.get("m", np.zeros_like(g))).astype(f)
    v = np.asarray(st.get("v", np.zeros_like(g))).astype(f)
    if decoupled:
        p = p * half(f(1) - half(lr_g * half(weight_decay)))
    m = m * f(beta1) + g * f(1 - beta1)
    v = v * f(beta2) + (g * g) * f(1 - beta2)
    st["m"], st["v"] = m.astype(h), v.astype(h)
    if bias_correction:
        c1 = half(lr_g / (f(1) - f(beta1) ** f(step)))
        c2 = half(f(1) / np.sqrt(f(1) - f(beta2) ** f(step)))
        return (p - (c1 * m) / (np.sqrt(v) * c2 + f(eps))).astype(h)
    return (p - (lr_g * m) / (np.sqrt(v) + f(eps))).astype(h)


SGD_CONFIGS = [
    dict(),
    dict(momentum=0.9),
    dict(momentum=0.9, dampening=0.3),
    dict(momentum=0.8, nesterov=True),
    dict(momentum=0.9, weight_decay=0.05),
    dict(weight_decay=0.1),
]
ADAM_CONFIGS = [
    ("adam", dict()),
    ("adam", dict(bias_correction=True)),
    ("adam", dict(beta1=0.5, beta2=0.75, eps=1e-3, bias_correction=True)),
    ("adamw", dict()),
    ("adamw", dict(weight_decay=0.1, bias_correction=True)),
]
LR32 = float(np.float32(0.05))
TOL = {"float16": 5e-3, "bfloat16": 3e-2, "float32": 2e-5, "float64": 1e-12}


def mlx_opt(kind, lr, kw):
    if kind == "sgd":
        return optim.SGD(lr, **kw)
    if kind == "adamw":
        return optim.AdamW(lr, **kw)
    return optim.Adam(lr, betas=[kw.pop("beta1", 0.9), kw.pop("beta2", 0.999)], **kw)


def run_steps(nn, kind, kw, dtype, rng, steps=4, layout="contiguous", lr=0.05):
    """Runs the nuvec optimizer and returns its parameters after each step."""
    params, grads = param_set(rng, dtype)
    o = nn.opt(kind, learning_rate=lr, **kw)
    m = nn.map(params)
    history, gs = [], []
    for _ in range(steps):
        g = grads()
        gs.append(g)
        m = nn.update(o, m, nn.map(g, layout))
        history.append(nn.read(m))
    return params, gs, history, o


@needs_mlx
@pytest.mark.parametrize("cfg,dtype", sample(
    [(i, d) for i in range(len(SGD_CONFIGS)) for d in FLOATS], 10, salt=1))
def test_sgd_matches_mlx(nn, rng, cfg, dtype):
    kw = SGD_CONFIGS[cfg]
    params, gs, history, _ = run_steps(nn, "sgd", kw, dtype, rng)
    mo = mlx_opt("sgd", 0.05, dict(kw))
    mp = {k: to_mx(v) for k, v in params.items()}
    for g, got in zip(gs, history):
        mp = mo.apply_gradients({k: to_mx(v) for k, v in g.items()}, mp)
        for k in params:
            assert_close(got[k], from_mx(mp[k]).astype(np.float64), dtype,
                         rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("cfg,dtype", sample(
    [(i, d) for i in range(len(SGD_CONFIGS)) for d in ["float32", "float64"]], 6, salt=2))
def test_sgd_matches_numpy(nn, rng, cfg, dtype):
    kw = SGD_CONFIGS[cfg]
    params, gs, history, _ = run_steps(nn, "sgd", kw, dtype, rng, layout="transposed")
    ref = {k: v.astype(np.float64) for k, v in params.items()}
    states = {k: {} for k in params}
    for g, got in zip(gs, history):
        for k in params:
            # The learning rate is a float32 array, as MLX's (cast to the gradient's dtype).
            ref[k] = ref_sgd(ref[k], g[k].astype(np.float64), states[k], LR32, **kw)
            assert_close(got[k], ref[k], dtype, rtol=TOL[dtype], atol=TOL[dtype])


# float16 and bfloat16 Adam compute in float32 and round once per output (adam_update), which
# MLX's chain of half-precision ops does not: they are checked against ref_adam_half below.
@needs_mlx
@pytest.mark.parametrize("cfg,dtype", sample(
    [(i, d) for i in range(len(ADAM_CONFIGS)) for d in ("float32", "float64")], 10, salt=3))
def test_adam_matches_mlx(nn, rng, cfg, dtype):
    kind, kw = ADAM_CONFIGS[cfg]
    params, gs, history, _ = run_steps(nn, kind, kw, dtype, rng, layout="strided")
    mo = mlx_opt(kind, 0.05, dict(kw))
    mp = {k: to_mx(v) for k, v in params.items()}
    for g, got in zip(gs, history):
        mp = mo.apply_gradients({k: to_mx(v) for k, v in g.items()}, mp)
        for k in params:
            assert_close(got[k], from_mx(mp[k]).astype(np.float64), dtype,
                         rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("cfg", range(len(ADAM_CONFIGS)))
def test_adam_matches_numpy(nn, rng, cfg):
    kind, kw = ADAM_CONFIGS[cfg]
    params, gs, history, o = run_steps(nn, kind, kw, "float64", rng, steps=5,
                                       layout="reversed")
    full = dict(kw)
    if kind == "adamw":
        full.setdefault("weight_decay", 0.01)
    ref = {k: v.astype(np.float64) for k, v in params.items()}
    states = {k: {} for k in params}
    for t, (g, got) in enumerate(zip(gs, history), start=1):
        for k in params:
            ref[k] = ref_adam(ref[k], g[k], states[k], LR32, t, decoupled=kind == "adamw",
                              **full)
            # Bias correction goes through float32 pow/rsqrt, whose last bits may differ.
            tol = 1e-6 if full.get("bias_correction") else 1e-12
            assert_close(got[k], ref[k], "float64", rtol=tol, atol=tol)
    state = nn.read(lib.nv_optimizer_state(o))
    assert state["step"] == 5 and state["step"].dtype == np.uint64
    assert state["learning_rate"].dtype == np.float32
    for k in params:
        assert_close(state[k + ".m"], states[k]["m"], "float64", rtol=1e-9, atol=1e-12)
        assert_close(state[k + ".v"], states[k]["v"], "float64", rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("cfg,dtype", [(i, d) for i in range(len(ADAM_CONFIGS))
                                       for d in ("float16", "bfloat16")])
def test_adam_half_rounds_once(nn, rng, cfg, dtype):
    """float16/bfloat16 Adam and AdamW are one adam_update per parameter: float32 arithmetic
    rounded once per output (more accurate than rounding every intermediate as MLX does: no
    underflow of v to 0 within a step, eps kept), against its NumPy emulation."""
    kind, kw = ADAM_CONFIGS[cfg]
    params, gs, history, _ = run_steps(nn, kind, kw, dtype, rng, layout="strided")
    full = dict(kw)
    if kind == "adamw":
        full.setdefault("weight_decay", 0.01)
    ref = dict(params)
    states = {k: {} for k in params}
    for t, (g, got) in enumerate(zip(gs, history), start=1):
        for k in params:
            ref[k] = ref_adam_half(ref[k], g[k], states[k], LR32, t, dtype,
                                   decoupled=kind == "adamw", **full)
            # The same operations in the same order: equal on the CPU; assert_close's two
            # units in the last place leave room for float32 pow in the bias corrections.
            assert_close(got[k], ref[k].astype(np.float64), dtype)


@needs_mlx
def test_state_keys_match_mlx(nn, rng):
    params, grads = param_set(rng, "float32")
    o = nn.opt("adam", learning_rate=0.1)
    g = grads()
    nn.update(o, nn.map(params), nn.map(g))
    mo = optim.Adam(0.1)
    mo.apply_gradients({k: to_mx(v) for k, v in g.items()}, {k: to_mx(v) for k, v in params.items()})
    want = [k for k, _ in mlx_utils.tree_flatten(mo.state)]
    assert sorted(nn.keys(lib.nv_optimizer_state(o))) == sorted(want)


def test_partial_grads_and_new_keys(nn, rng):
    """Parameters without a gradient pass through as the same values; a gradient seen for the
    first time gets fresh slots."""
    p = {"a": rng.standard_normal(3), "b": rng.standard_normal(2)}
    o = nn.opt("sgd", learning_rate=0.5, momentum=0.5)
    ga = rng.standard_normal(3)
    m = nn.update(o, nn.map(p), nn.map({"a": ga}))
    got = nn.read(m)
    assert nn.keys(m) == ["a", "b"]
    np.testing.assert_array_equal(got["b"], p["b"])
    assert_close(got["a"], p["a"] - 0.5 * ga, "float64")
    assert nn.keys(lib.nv_optimizer_state(o)) == ["step", "learning_rate", "a.v"]
    gb = rng.standard_normal(2)
    m2 = nn.update(o, m, nn.map({"b": gb}))
    assert nn.keys(lib.nv_optimizer_state(o)) == ["step", "learning_rate", "a.v", "b.v"]
    assert_close(nn.read(m2)["b"], p["b"] - 0.5 * gb, "float64")


def test_set_state_resumes(nn, rng):
    """A state copied into a fresh optimizer continues exactly as the original."""
    params, grads = param_set(rng, "float32")
    a = nn.opt("adamw", learning_rate=0.01, bias_correction=True)
    m = nn.map(params)
    for _ in range(3):
        m = nn.update(a, m, nn.map(grads()))
    b = nn.opt("adamw", learning_rate=0.01, bias_correction=True)
    assert lib.nv_optimizer_set_state(b, lib.nv_optimizer_state(a)) == 0, err()
    g = nn.map(grads())
    ra, rb = nn.read(nn.update(a, m, g)), nn.read(nn.update(b, m, g))
    for k in params:
        np.testing.assert_array_equal(ra[k], rb[k])
    assert nn.read(lib.nv_optimizer_state(b))["step"] == 4


def test_set_state_errors(nn):
    o = nn.opt("adam", learning_rate=0.1)
    for bad, msg in [({"step": np.uint64(1)}, "learning_rate"),
                     ({"step": np.uint64(1), "learning_rate": np.float32(0.1), "w.x": np.zeros(2)},
                      "'w.x' is not a state entry"),
                     ({"step": np.zeros(2), "learning_rate": np.float32(0.1)}, "'step'")]:
        assert lib.nv_optimizer_set_state(o, nn.map(bad)) == 1
        assert msg in err() and "adam" in err()
    good = {"step": np.int32(7), "learning_rate": np.array([0.5]), "w.m": np.ones(2),
            "w.v": np.ones(2)}
    assert lib.nv_optimizer_set_state(o, nn.map(good)) == 0, err()
    st = nn.read(lib.nv_optimizer_state(o))
    assert st["step"].dtype == np.uint64 and st["step"].shape == () and st["step"] == 7
    assert st["learning_rate"].dtype == np.float32 and st["learning_rate"] == 0.5


def test_init_creates_slots(nn, rng):
    o = nn.opt("adam", learning_rate=0.1)
    p = {"w": rng.standard_normal((2, 3)).astype(np.float16)}
    assert lib.nv_optimizer_init(o, nn.map(p)) == 0, err()
    st = nn.read(lib.nv_optimizer_state(o))
    assert list(st) == ["step", "learning_rate", "w.m", "w.v"]
    assert st["w.m"].dtype == np.float16 and not st["w.m"].any() and st["step"] == 0
    # A second init keeps the slots it has.
    assert lib.nv_optimizer_init(o, nn.map(p)) == 0, err()
    assert nn.keys(lib.nv_optimizer_state(o)) == ["step", "learning_rate", "w.m", "w.v"]


def test_set_learning_rate(nn, rng):
    o = nn.opt("sgd", learning_rate=0.1)
    assert lib.nv_optimizer_set_learning_rate(o, 0.25) == 0
    p, g = rng.standard_normal(4), rng.standard_normal(4)
    got = nn.read(nn.update(o, nn.map({"w": p}), nn.map({"w": g})))["w"]
    assert_close(got, p - 0.25 * g, "float64")
    assert lib.nv_optimizer_set_learning_rate(o, math.nan) == 1


def test_optimizer_errors(nn, rng):
    with pytest.raises(ValueError, match="Nesterov"):
        nn.opt("sgd", learning_rate=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Nesterov"):
        nn.opt("sgd", learning_rate=0.1, momentum=0.9, dampening=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta1 should be in"):
        nn.opt("adam", learning_rate=0.1, beta1=1.0)
    with pytest.raises(ValueError, match="beta2 should be in"):
        nn.opt("adam", learning_rate=0.1, beta2=-0.1)
    with pytest.raises(ValueError, match="epsilon"):
        nn.opt("adam", learning_rate=0.1, eps=-1.0)
    with pytest.raises(ValueError, match="adamw"):
        nn.opt("adam", learning_rate=0.1, weight_decay=0.1)
    with pytest.raises(ValueError, match="finite"):
        nn.opt("sgd", learning_rate=math.inf)
    o = nn.opt("adam", learning_rate=0.1)
    p = nn.map({"w": np.ones((2, 3), np.float32), "n": np.ones(2, np.int32),
                "step.x": np.ones(2, np.float32)})
    cases = [
        ({"x": np.ones(3, np.float32)}, "gradient 'x' has no parameter"),
        ({"w": np.ones((3, 2), np.float32)}, "'w' has parameter shape (2,3) and gradient shape (3,2)"),
        ({"n": np.ones(2, np.int32)}, "'n' has parameter dtype int32"),
        ({"w": np.ones((2, 3), np.complex64)}, "gradient dtype complex64"),
        ({"step.x": np.ones(2, np.float32)}, "collides"),
    ]
    for g, msg in cases:
        with pytest.raises(ValueError) as e:
            nn.update(o, p, nn.map(g))
        assert msg in str(e.value) and "adam:" in str(e.value)
    # Nothing changed: the step is still 0 and no slot was made.
    assert nn.keys(lib.nv_optimizer_state(o)) == ["step", "learning_rate"]
    assert nn.read(lib.nv_optimizer_state(o))["step"] == 0
    out = P()
    assert lib.nv_optimizer_update(None, p, p, C.byref(out)) == 1


# ---- Schedules ----


def make_schedules(nn):
    lin = nn.sched(lib.nv_linear_schedule, 0.0, 1e-1, 10)
    cos = nn.sched(lib.nv_cosine_decay, 1e-1, 200, 1e-3)
    step = nn.sched(lib.nv_step_decay, 1e-1, 0.9, 10)
    exp = nn.sched(lib.nv_exponential_decay, 1e-1, 0.9)
    parts = (P * 3)(lin, cos, exp)
    bounds = (C.c_int64 * 2)(10, 50)
    join = nn.sched(lib.nv_join_schedules, parts, 3, bounds, 2)
    return {
        "linear": (lin, lambda: optim.linear_schedule(0.0, 1e-1, 10)),
        "cosine": (cos, lambda: optim.cosine_decay(1e-1, 200, 1e-3)),
        "step": (step, lambda: optim.step_decay(1e-1, 0.9, 10)),
        "exponential": (exp, lambda: optim.exponential_decay(1e-1, 0.9)),
        "join": (join, lambda: optim.join_schedules(
            [optim.linear_schedule(0.0, 1e-1, 10), optim.cosine_decay(1e-1, 200, 1e-3),
             optim.exponential_decay(1e-1, 0.9)], [10, 50])),
    }


def ref_schedule(name, t):
    t = np.float64(t)
    if name == "linear":
        return min(t, 10) * (0.1 / 10)
    if name == "cosine":
        return 1e-3 + 0.5 * (1 + math.cos(math.pi / 200 * min(t, 200))) * (0.1 - 1e-3)
    if name == "step":
        return 0.1 * 0.9 ** (t // 10)
    if name == "exponential":
        return 0.1 * 0.9**t
    if t < 10:
        return ref_schedule("linear", t)
    if t < 50:
        return ref_schedule("cosine", t - 10)
    return ref_schedule("exponential", t - 50)


STEPS = [0, 1, 2, 5, 9, 10, 11, 25, 49, 50, 51, 199, 200, 201, 250, 1000]


@needs_mlx
@pytest.mark.parametrize("name", ["linear", "cosine", "step", "exponential", "join"])
def test_schedules_match_mlx(nn, name):
    s, mk = make_schedules(nn)[name]
    f = mk()
    steps = np.array(STEPS, np.uint64)
    got = nn.s.read(nn.s.own(lib.nv_lr_schedule_at(s, nn.s.array(steps))))
    want = from_mx(f(mx.array(steps)))
    assert got.dtype == np.float32 == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(got, [ref_schedule(name, t) for t in STEPS], rtol=2e-6,
                               atol=1e-8)
    # A float64 step computes in float64, as MLX's weak scalars make it.
    got64 = nn.s.read(nn.s.own(lib.nv_lr_schedule_at(s, nn.s.array(steps.astype(np.float64)))))
    assert got64.dtype == np.float64
    np.testing.assert_allclose(got64, [ref_schedule(name, t) for t in STEPS], rtol=1e-12)
    v = D()
    assert lib.nv_lr_schedule_value(s, 11, C.byref(v)) == 0
    assert v.value == float(got[STEPS.index(11)])


def test_schedule_errors(nn):
    out = P()
    assert lib.nv_linear_schedule(0.0, 1.0, 0, C.byref(out)) == 1 and "steps must be" in err()
    assert lib.nv_cosine_decay(1.0, 0, 0.0, C.byref(out)) == 1 and "decay_steps" in err()
    assert lib.nv_step_decay(1.0, 0.5, -1, C.byref(out)) == 1 and "step_size" in err()
    lin = nn.sched(lib.nv_linear_schedule, 0.0, 1.0, 5)
    parts = (P * 2)(lin, lin)
    assert lib.nv_join_schedules(parts, 2, None, 0, C.byref(out)) == 1
    assert "received 0 boundaries but expected 1" in err()
    assert lib.nv_join_schedules(parts, 0, None, 0, C.byref(out)) == 1 and "at least 1" in err()
    neg = (C.c_int64 * 1)(-3)
    assert lib.nv_join_schedules(parts, 2, neg, 1, C.byref(out)) == 1 and "negative" in err()
    h = nn.s.own(lib.nv_lr_schedule_at(lin, nn.s.array(np.ones(2, np.complex64))))
    st, msg = nn.s.status(h)
    assert st == 1 and "lr_schedule" in msg and "complex64" in msg
    st, msg = nn.s.status(nn.s.own(lib.nv_lr_schedule_at(lin, None)))
    assert st == 1 and "NULL" in msg


@needs_mlx
def test_optimizer_with_schedule_matches_mlx(nn, rng):
    """AdamW with warm-up then cosine decay (the charlm recipe): learning rates and parameters
    as MLX's over 14 steps, the schedule copied so freeing it early is fine."""
    warm = P()
    assert lib.nv_linear_schedule(0.0, 1e-2, 5, C.byref(warm)) == 0
    cos = P()
    assert lib.nv_cosine_decay(1e-2, 20, 1e-4, C.byref(cos)) == 0
    parts = (P * 2)(warm, cos)
    bounds = (C.c_int64 * 1)(5)
    join = P()
    assert lib.nv_join_schedules(parts, 2, bounds, 1, C.byref(join)) == 0
    lib.nv_lr_schedule_free(warm.value)
    lib.nv_lr_schedule_free(cos.value)
    o = nn.opt("adamw", learning_rate=0.0, schedule=join.value)
    lib.nv_lr_schedule_free(join.value)
    mo = optim.AdamW(optim.join_schedules(
        [optim.linear_schedule(0.0, 1e-2, 5), optim.cosine_decay(1e-2, 20, 1e-4)], [5]))
    params, grads = param_set(rng, "float32")
    m, mp = nn.map(params), {k: to_mx(v) for k, v in params.items()}
    for _ in range(14):
        g = grads()
        m = nn.update(o, m, nn.map(g))
        mp = mo.apply_gradients({k: to_mx(v) for k, v in g.items()}, mp)
        lr = nn.s.read(lib.nv_optimizer_learning_rate(o))
        np.testing.assert_allclose(lr, np.array(mo.learning_rate), rtol=1e-6, atol=1e-10)
        got = nn.read(m)
        for k in params:
            np.testing.assert_allclose(got[k], np.array(mp[k]), rtol=1e-5, atol=1e-6)


# ---- clip_grad_norm ----


def clip(nn, grads, max_norm):
    out, norm = P(), P()
    st = lib.nv_clip_grad_norm(grads, max_norm, C.byref(out), C.byref(norm))
    if st != 0:
        raise ValueError(err())
    nn.own_map(out.value)
    return nn.read(out.value), nn.s.read(nn.s.own(norm.value))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32"])
@pytest.mark.parametrize("max_norm", [0.5, 1e3, 0.0])
def test_clip_grad_norm(nn, rng, dtype, max_norm):
    dt = np_dtype(dtype)
    g = {"a": (rng.standard_normal((5, 3)) * 3).astype(dt),
         "b.c": (rng.standard_normal(7) * 3).astype(dt), "e": np.zeros((0,), dt)}
    got, norm = clip(nn, nn.map(g, "transposed"), max_norm)
    total = math.sqrt(sum(float((v.astype(np.float64) ** 2).sum()) for v in g.values()))
    ndt = "float32" if dtype in ("float16", "int32") else dtype
    assert_close(norm, total, ndt)
    scale = min(max_norm / (total + 1e-6), 1.0)
    for k, v in g.items():
        want_dt = "float32" if dtype == "int32" else dtype
        assert_close(got[k], v.astype(np.float64) * scale, want_dt)
    if mx is not None:
        mg, mn = optim.clip_grad_norm({k: to_mx(v) for k, v in g.items()}, max_norm)
        assert nv_name(norm.dtype) == nv_name(from_mx(mn).dtype)
        for k in g:
            assert nv_name(got[k].dtype) == nv_name(from_mx(mg[k]).dtype)
            assert_close(got[k], from_mx(mg[k]).astype(np.float64), nv_name(got[k].dtype))


def test_clip_grad_norm_edges(nn, rng):
    got, norm = clip(nn, nn.map({}), 1.0)
    assert got == {} and norm.dtype == np.float32 and norm == 0
    # float16 squares are summed in float32: 300^2 * 4 overflows float16.
    got, norm = clip(nn, nn.map({"w": np.full(4, 300, np.float16)}), 1.0)
    assert norm.dtype == np.float32 and norm == 600
    assert_close(got["w"], np.full(4, 300 / 600.000001), "float16")
    # Mixed dtypes promote the norm as MLX's running sum does.
    got, norm = clip(nn, nn.map({"a": np.ones(2, np.float16), "b": np.ones(2, np.float64)}), 10)
    assert norm.dtype == np.float64 and abs(norm - 2.0) < 1e-12
    for bad in [-1.0, math.nan]:
        with pytest.raises(ValueError, match="max_norm should be >= 0"):
            clip(nn, nn.map({"w": np.ones(2, np.float32)}), bad)
    with pytest.raises(ValueError, match="'w' is complex64"):
        clip(nn, nn.map({"w": np.ones(2, np.complex64)}), 1.0)


# ---- Parameter trees ----


def build_tree(nn, obj, handles):
    """A nuvec tree from a Python tree of dicts, lists and NumPy arrays."""
    if isinstance(obj, dict):
        t = lib.nv_tree_new_dict()
        for k, v in obj.items():
            assert lib.nv_tree_dict_set(t, k.encode(), build_tree(nn, v, handles)) == 0, err()
        return t
    if isinstance(obj, list):
        t = lib.nv_tree_new_list()
        for v in obj:
            assert lib.nv_tree_list_append(t, build_tree(nn, v, handles)) == 0, err()
        return t
    h = nn.s.array(obj)
    handles[h] = obj
    return lib.nv_tree_new_array(h)


def read_tree(nn, t):
    kind = lib.nv_tree_get_kind(t)
    if kind == 1:
        return {lib.nv_tree_key(t, i).decode(): read_tree(nn, lib.nv_tree_child(t, i))
                for i in range(lib.nv_tree_size(t))}
    if kind == 2:
        return [read_tree(nn, lib.nv_tree_child(t, i)) for i in range(lib.nv_tree_size(t))]
    return nn.s.read(lib.nv_tree_array(t)).item()


def random_tree(rng, depth=0):
    r = rng.random()
    if depth >= 3 or (depth > 0 and r < 0.3):
        return np.float32(rng.integers(0, 1000))
    n = int(rng.integers(0, 4))
    if r < 0.65:
        return {f"k{int(rng.integers(0, 50))}": random_tree(rng, depth + 1) for _ in range(n)}
    return [random_tree(rng, depth + 1) for _ in range(n)]


def as_py(obj):
    if isinstance(obj, dict):
        return {k: as_py(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [as_py(v) for v in obj]
    return np.asarray(obj).item()


@needs_mlx
def test_flatten_unflatten_match_mlx(nn, rng):
    for _ in range(40):
        tree = random_tree(rng)
        if not isinstance(tree, (dict, list)):
            tree = {"x": tree}
        t = build_tree(nn, tree, {})
        nn.trees.append(t)
        for prefix in ["", "model"]:
            out = P()
            assert lib.nv_tree_flatten(t, prefix.encode(), C.byref(out)) == 0, err()
            m = nn.own_map(out.value)
            want = mlx_utils.tree_flatten(tree, prefix="." + prefix if prefix else "")
            assert nn.keys(m) == [k for k, _ in want]
            assert [v.item() for v in nn.read(m).values()] == [as_py(v) for _, v in want]
        out = P()
        assert lib.nv_tree_flatten(t, None, C.byref(out)) == 0
        m = nn.own_map(out.value)
        back = P()
        assert lib.nv_tree_unflatten(m, C.byref(back)) == 0, err()
        nn.trees.append(back.value)
        flat = mlx_utils.tree_flatten(tree)
        assert read_tree(nn, back.value) == as_py(mlx_utils.tree_unflatten(flat))


def unflatten(nn, d):
    out = P()
    st = lib.nv_tree_unflatten(nn.map({k: np.float32(v) for k, v in d.items()}), C.byref(out))
    if st != 0:
        raise ValueError(err())
    nn.trees.append(out.value)
    return read_tree(nn, out.value)


def test_unflatten_cases(nn):
    assert unflatten(nn, {"layers.0.weight": 1, "layers.1.weight": 2, "head": 3}) == {
        "layers": [{"weight": 1}, {"weight": 2}], "head": 3}
    # Missing indices become empty dicts, indices sort numerically, "01" and "1" make a dict.
    assert unflatten(nn, {"l.3": 1, "l.10": 2, "l.0": 3}) == {
        "l": [3, {}, {}, 1] + [{}] * 6 + [2]}
    assert unflatten(nn, {"01": 1, "1": 2}) == {"01": 1, "1": 2}
    assert unflatten(nn, {"2": 5}) == [{}, {}, 5]
    assert unflatten(nn, {"": 7}) == 7
    assert unflatten(nn, {}) == []
    assert unflatten(nn, {"a.b.c": 1, "a.d": 2, "e": 3}) == {"a": {"b": {"c": 1}, "d": 2}, "e": 3}
    for bad, msg in [({"a..b": 1}, "empty component"), ({"a.": 1}, "empty component"),
                     ({"a": 1, "a.b": 2}, "'a' is an array and also the prefix of 'a.b'"),
                     ({"l.99999999999": 1}, "list index"), ({"": 1, "b": 2}, "empty component")]:
        with pytest.raises(ValueError, match="tree_unflatten") as e:
            unflatten(nn, bad)
        assert msg in str(e.value)


def test_tree_building(nn):
    x = nn.s.array(np.float32(1))
    d = lib.nv_tree_new_dict()
    nn.trees.append(d)
    assert lib.nv_tree_dict_set(d, b"w", lib.nv_tree_new_array(x)) == 0
    assert lib.nv_tree_dict_set(d, b"w", lib.nv_tree_new_list()) == 0  # replaces in place
    assert lib.nv_tree_size(d) == 1 and lib.nv_tree_get_kind(lib.nv_tree_find(d, b"w")) == 2
    assert lib.nv_tree_find(d, b"nope") is None
    for key in [b"a.b", b""]:
        assert lib.nv_tree_dict_set(d, key, lib.nv_tree_new_array(x)) == 1
        assert "empty or contains '.'" in err()
    assert lib.nv_tree_list_append(d, lib.nv_tree_new_array(x)) == 1 and "not a list" in err()
    assert lib.nv_tree_dict_set(d, b"k", None) == 1 and "NULL child" in err()
    assert lib.nv_tree_new_array(None) is None
    assert lib.nv_tree_key(d, 5) is None and lib.nv_tree_child(d, 5) is None
    assert lib.nv_tree_array(d) is None
    leaf = lib.nv_tree_new_array(x)
    nn.trees.append(leaf)
    out = P()
    assert lib.nv_tree_flatten(leaf, b"p", C.byref(out)) == 0
    assert nn.keys(nn.own_map(out.value)) == ["p"]
    assert lib.nv_tree_flatten(None, None, C.byref(out)) == 1


def test_params_filter_prefix(nn):
    vals = {"layers.0.w": 1, "layers.0.b": 2, "layers.1.w": 3, "layers.10.w": 4, "head": 5,
            "layers.0": 6}
    p = nn.map({k: np.float32(v) for k, v in vals.items()})
    out = P()
    assert lib.nv_params_filter(p, b"layers.0", False, C.byref(out)) == 0
    assert nn.keys(nn.own_map(out.value)) == ["layers.0.w", "layers.0.b", "layers.0"]
    assert lib.nv_params_filter(p, b"layers.0", True, C.byref(out)) == 0
    sub = nn.own_map(out.value)
    assert nn.keys(sub) == ["w", "b", ""]
    assert {k: v.item() for k, v in nn.read(sub).items()} == {"w": 1, "b": 2, "": 6}
    assert lib.nv_params_filter(p, None, True, C.byref(out)) == 0
    assert nn.keys(nn.own_map(out.value)) == list(vals)
    assert lib.nv_params_prefix(sub, b"layers.0", C.byref(out)) == 0
    assert nn.keys(nn.own_map(out.value)) == ["layers.0.w", "layers.0.b", "layers.0"]
    assert lib.nv_params_prefix(sub, b"", C.byref(out)) == 1 and "empty" in err()
    twice = nn.map({"a": np.float32(1), "a.": np.float32(2)})
    assert lib.nv_params_filter(twice, b"a", True, C.byref(out)) == 1 and "both strip" in err()
    assert lib.nv_params_count(p) == 6 and lib.nv_params_count(None) == 0
    big = nn.map({"w": np.zeros((3, 4), np.float32), "b": np.zeros(4, np.float16),
                  "e": np.zeros((0, 5))})
    assert lib.nv_params_count(big) == 16


def test_params_merge_update(nn):
    a = nn.map({"x": np.float32(1), "y": np.float32(2)})
    b = nn.map({"y": np.float32(20), "z": np.float32(30)})
    out = P()
    assert lib.nv_params_merge(a, b, True, C.byref(out)) == 0
    m = nn.own_map(out.value)
    assert {k: v.item() for k, v in nn.read(m).items()} == {"x": 1, "y": 20, "z": 30}
    assert nn.keys(m) == ["x", "y", "z"]
    assert lib.nv_params_merge(a, b, False, C.byref(out)) == 1 and "both maps hold 'y'" in err()
    c = nn.map({"x.q": np.float32(3)})
    assert lib.nv_params_merge(a, c, True, C.byref(out)) == 1
    assert "'x' is an array and also the prefix of 'x.q'" in err()
    d = nn.map({"x!": np.float32(3), "x.r": np.float32(3), "xa": np.float32(1)})
    assert lib.nv_params_merge(a, d, True, C.byref(out)) == 1 and "'x.r'" in err()
    assert lib.nv_params_update(a, nn.map({"q": np.float32(5)}), True) == 1
    assert "'q' is not a parameter" in err()
    assert nn.keys(a) == ["x", "y"]
    assert lib.nv_params_update(a, nn.map({"y": np.float32(9), "q": np.float32(5)}), False) == 0
    assert {k: v.item() for k, v in nn.read(a).items()} == {"x": 1, "y": 9, "q": 5}
    assert lib.nv_params_update(a, nn.map({"x": np.float32(-1)}), True) == 0
    assert nn.read(a)["x"] == -1


def test_params_eval(nn, rng):
    params, grads = param_set(rng, "float32")
    o = nn.opt("adam", learning_rate=0.1)
    m = nn.update(o, nn.map(params), nn.map(grads()))
    maps = (P * 2)(m, lib.nv_optimizer_state(o))
    assert lib.nv_params_eval(maps, 2) == 0
    sig("nv_array_is_evaluated", B, P)
    for mm in (m, lib.nv_optimizer_state(o)):
        for i in range(lib.nv_map_size(mm)):
            assert lib.nv_array_is_evaluated(lib.nv_map_value(mm, i))
    bad = (P * 2)(m, None)
    assert lib.nv_params_eval(bad, 2) == 1 and "map 1 is NULL" in err()


# ---- Initialisers ----

sig("nv_random_seed", None, C.c_uint64)
sig("nv_random_key", P, C.c_uint64)
IPT = C.POINTER(C.c_int)
sig("nv_init_fans", I, IPT, I, C.POINTER(C.c_int64), C.POINTER(C.c_int64))
sig("nv_init_constant", P, IPT, I, D, I)
sig("nv_init_normal", P, IPT, I, D, D, I, P)
sig("nv_init_uniform", P, IPT, I, D, D, I, P)
sig("nv_init_identity", P, IPT, I, I)
sig("nv_init_glorot_normal", P, IPT, I, D, I, P)
sig("nv_init_glorot_uniform", P, IPT, I, D, I, P)
sig("nv_init_he_normal", P, IPT, I, I, D, I, P)
sig("nv_init_he_uniform", P, IPT, I, I, D, I, P)


def shp(shape):
    return (C.c_int * max(1, len(shape)))(*shape), len(shape)


def init(nn, name, shape, *args, key=None):
    s, n = shp(shape)
    return nn.s.own(getattr(lib, "nv_init_" + name)(s, n, *args, key))


def init_read(nn, name, shape, *args, key=None):
    return nn.s.read(init(nn, name, shape, *args, key=key))


INIT_CASES = [
    ("normal", (0.5, 2.0), lambda: mlx_init().normal(0.5, 2.0), ()),
    ("uniform", (-0.5, 1.5), lambda: mlx_init().uniform(-0.5, 1.5), ()),
    ("glorot_normal", (1.0,), lambda: mlx_init().glorot_normal(), ()),
    ("glorot_uniform", (2.0,), lambda: mlx_init().glorot_uniform(), (2.0,)),
    ("he_normal", (0, 1.0), lambda: mlx_init().he_normal(), ("fan_in", 1.0)),
    ("he_normal", (1, 0.5), lambda: mlx_init().he_normal(), ("fan_out", 0.5)),
    ("he_uniform", (0, 3.0), lambda: mlx_init().he_uniform(), ("fan_in", 3.0)),
    ("he_uniform", (1, 1.0), lambda: mlx_init().he_uniform(), ("fan_out", 1.0)),
]


def mlx_init():
    import mlx.nn.init as mi
    return mi


@needs_mlx
@pytest.mark.parametrize("case", range(len(INIT_CASES)))
@pytest.mark.parametrize("shape", [(16, 8), (6, 3, 5), (4, 2, 3, 3)])
def test_init_matches_mlx(nn, case, shape):
    """After the same seed, the global key sequence gives MLX's values exactly."""
    name, args, mk, call = INIT_CASES[case]
    dtype_args = (CODE["float32"],)
    if name in ("normal", "uniform"):
        c_args = args + dtype_args
    elif name.startswith("glorot"):
        c_args = args + dtype_args
    else:
        c_args = (args[0], args[1]) + dtype_args
    lib.nv_random_seed(1234)
    got = init_read(nn, name, shape, *c_args)
    mx.random.seed(1234)
    want = np.array(mk()(mx.zeros(shape), *call))
    assert got.dtype == np.float32 and got.shape == shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_init_fans():
    fi, fo = C.c_int64(), C.c_int64()
    for shape, want in [((3, 4), (4, 3)), ((8, 3, 3, 16), (16 * 9, 8 * 9)), ((5, 7, 2), (14, 35))]:
        s, n = shp(shape)
        assert lib.nv_init_fans(s, n, C.byref(fi), C.byref(fo)) == 0
        assert (fi.value, fo.value) == want
    s, n = shp((5,))
    assert lib.nv_init_fans(s, n, C.byref(fi), C.byref(fo)) == 1
    assert "at least 2 dimensional" in err()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_init_statistics(nn, dtype):
    """Moments and bounds over 40000 samples with fixed keys (seeded, so deterministic), against
    the scales MLX's formulas give for a (200, 200) weight: fan_in = fan_out = 200."""
    shape, n = (200, 200), 40000
    key = nn.s.own(lib.nv_random_key(7))
    code = CODE[dtype]
    uniform_ok = dtype != "float64"
    se = 4.5 / math.sqrt(n)  # generous z-bound for the mean, in units of the std
    cases = [("normal", (0.25, 0.5, code), "normal", 0.25, 0.5),
             ("glorot_normal", (2.0, code), "normal", 0.0, 2.0 * math.sqrt(2 / 400)),
             ("he_normal", (0, 1.5, code), "normal", 0.0, 1.5 / math.sqrt(200))]
    if uniform_ok:
        cases += [("uniform", (-1.0, 3.0, code), "uniform", -1.0, 3.0),
                  ("glorot_uniform", (1.0, code), "uniform", -math.sqrt(6 / 400),
                   math.sqrt(6 / 400)),
                  ("he_uniform", (1, 2.0, code), "uniform", -2.0 * math.sqrt(3 / 200),
                   2.0 * math.sqrt(3 / 200))]
    for name, args, kind, a, b in cases:
        x = init_read(nn, name, shape, *args, key=key)
        assert nv_name(x.dtype) == dtype and x.shape == shape
        x = x.astype(np.float64)
        if kind == "normal":
            mean, std = a, b
            assert abs(x.mean() - mean) < se * std, name
            assert abs(x.std() - std) < 0.02 * std, name
            assert abs(((x - mean) / std > 2).mean() - 0.02275) < 0.004, name
        else:
            mean, std = (a + b) / 2, (b - a) / math.sqrt(12)
            rnd = {"float16": 1e-3, "bfloat16": 8e-3}.get(dtype, 0) * max(abs(a), abs(b))
            assert x.min() >= a - rnd and x.max() <= b + rnd, name
            assert abs(x.mean() - mean) < se * std and abs(x.std() - std) < 0.02 * std, name
            # Roughly uniform: each tenth of the range holds about a tenth of the samples.
            hist = np.histogram(x, bins=10, range=(a - rnd, b + rnd))[0] / n
            assert np.all(np.abs(hist - 0.1) < 0.012), (name, hist)
    c = init_read(nn, "constant", (3, 2), 0.75, code)
    assert nv_name(c.dtype) == dtype and np.all(c.astype(np.float64) == 0.75)
    # The same key gives the same values; another key others.
    k2 = nn.s.own(lib.nv_random_key(8))
    a1 = init_read(nn, "normal", (64,), 0.0, 1.0, code, key=key)
    a2 = init_read(nn, "normal", (64,), 0.0, 1.0, code, key=key)
    a3 = init_read(nn, "normal", (64,), 0.0, 1.0, code, key=k2)
    np.testing.assert_array_equal(a1, a2)
    assert np.mean(a1 != a3) > 0.9


def test_init_identity_and_constant(nn):
    for dtype in ["bool", "int8", "uint64", "float16", "bfloat16", "float64", "complex64"]:
        x = init_read(nn, "identity", (3, 3), CODE[dtype])
        assert nv_name(x.dtype) == dtype
        np.testing.assert_array_equal(x, np.eye(3).astype(x.dtype))
        c = init_read(nn, "constant", (2, 0, 3), 1.0, CODE[dtype])
        assert c.shape == (2, 0, 3) and nv_name(c.dtype) == dtype
    assert init_read(nn, "identity", (0, 0), CODE["float32"]).shape == (0, 0)
    assert init_read(nn, "constant", (), -2.5, CODE["float32"]) == -2.5


def test_init_errors(nn):
    f32, f64, i32 = CODE["float32"], CODE["float64"], CODE["int32"]
    cases = [
        (("glorot_uniform", (5,), 1.0, f32), "init_glorot_uniform", "at least 2 dimensions"),
        (("he_normal", (0, 4), 1, 1.0, f32), "init_he_normal", "fan is 0"),
        (("glorot_normal", (3, 0, 4), 1.0, f32), "init_glorot_normal", "fan is 0"),
        (("he_uniform", (3, 4), 5, 1.0, f32), "init_he_uniform", "invalid fan mode"),
        (("he_uniform", (3, 4), -1, 1.0, f32), "init_he_uniform", "invalid fan mode"),
        (("uniform", (3,), 0.0, 1.0, f64), "init_uniform", "unsupported dtype float64"),
        (("normal", (3,), 0.0, 1.0, i32), "init_normal", "unsupported dtype int32"),
        (("glorot_normal", (3, 3), 1.0, CODE["complex64"]), "init_glorot_normal", "complex64"),
        (("identity", (3, 4), f32), "init_identity", "square matrix but got (3,4)"),
        (("normal", (3, -1), 0.0, 1.0, f32), "init_normal", "negative dimension"),
        (("constant", (-2,), 1.0, f32), "init_constant", "negative dimension"),
    ]
    for (name, shape, *args), op, msg in cases:
        s, n = shp(shape)
        extra = () if name in ("identity", "constant") else (None,)
        h = nn.s.own(getattr(lib, "nv_init_" + name)(s, n, *args, *extra))
        st, m = nn.s.status(h)
        assert st == 1 and op + ":" in m and msg in m, (name, m)
    # A bad key fails in the sampler with its message.
    bad = nn.s.array(np.zeros(3, np.uint32))
    st, m = nn.s.status(init(nn, "normal", (2,), 0.0, 1.0, f32, key=bad))
    assert st == 1 and "key" in m
