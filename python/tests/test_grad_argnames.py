"""grad and value_and_grad with argnames= (keyword arguments differentiated by name, pytrees
among them) and MLX's argnums rules, each call compared with mlx.core: the structure of the
result (one array, a tuple, None, the (argnums, {name: grads}) pair), the values, and the
errors."""
import numpy as np
import pytest

import nuvec as nv

mx = pytest.importorskip("mlx.core")


def f(m, x, y=None, *, z=None, w=None):
    s = (x * x * m.array([1.0, 3.0])).sum()
    if y is not None:
        s = s + (y * x[0]).sum()
    if z is not None:
        s = s + (z * z * 3).sum()
    if w is not None:
        s = s + (w["a"] * 4 * x[1]).sum() + (w["b"][0] * w["b"][1]).sum()
    return s


def make(m):
    x = m.array([1.0, 2.0])
    y = m.array([3.0])
    z = m.array([4.0, -5.0])
    w = {"a": m.array([1.5]), "b": [m.array([2.0, 3.0]), m.array([-1.0, 0.5])]}
    return x, y, z, w


def assert_same_tree(a, b):
    """Same structure (types of containers, None, dict keys) and the same array values."""
    if isinstance(b, mx.array):
        assert isinstance(a, nv.array), (type(a), b)
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-6)
        assert a.shape == tuple(b.shape)
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), (a, b)
        for p, q in zip(a, b):
            assert_same_tree(p, q)
    elif isinstance(b, dict):
        assert isinstance(a, dict) and list(a) == list(b), (a, b)
        for k in b:
            assert_same_tree(a[k], b[k])
    else:
        assert a == b, (a, b)


CASES = [
    ({}, lambda x, y, z, w: ((x, y), {"z": z})),
    ({"argnames": "z"}, lambda x, y, z, w: ((x, y), {"z": z})),
    ({"argnames": ["z"]}, lambda x, y, z, w: ((x, y), {"z": z})),
    ({"argnums": None, "argnames": "z"}, lambda x, y, z, w: ((x, y), {"z": z})),
    ({"argnums": 0, "argnames": "z"}, lambda x, y, z, w: ((x, y), {"z": z})),
    ({"argnums": [0, 1], "argnames": "z"}, lambda x, y, z, w: ((x, y), {"z": z})),
    ({"argnums": (1,), "argnames": ("z",)}, lambda x, y, z, w: ((x, y), {"z": z})),
    ({"argnums": [], "argnames": "z"}, lambda x, y, z, w: ((x,), {"z": z})),
    ({"argnames": ("z", "w")}, lambda x, y, z, w: ((x, y), {"z": z, "w": w})),
    ({"argnames": ("w", "z", "w")}, lambda x, y, z, w: ((x,), {"w": w, "z": z})),
    ({"argnames": "w"}, lambda x, y, z, w: ((x,), {"z": z, "w": w})),
    ({"argnums": 0, "argnames": "y"}, lambda x, y, z, w: ((x,), {"y": y})),
    ({"argnums": None, "argnames": []}, lambda x, y, z, w: ((x,), {})),
    ({"argnums": [1, 0]}, lambda x, y, z, w: ((x, y), {"z": z})),
    ({"argnums": (0,)}, lambda x, y, z, w: ((x, y), {})),
]


@pytest.mark.parametrize("value", [False, True])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_results_match_mlx(case, value):
    kw, call = CASES[case]
    out = {}
    for name, m in [("nv", nv), ("mx", mx)]:
        args, kwargs = call(*make(m))
        t = (m.value_and_grad if value else m.grad)(lambda *a, **k: f(m, *a, **k), **kw)
        out[name] = t(*args, **kwargs)
    assert_same_tree(out["nv"], out["mx"])


def test_kwargs_and_aux():
    g = nv.grad(lambda **kw: (kw["a"] * kw["b"]).sum(), argnames=["a"])
    gx = g(a=nv.array([1.0, 2.0]), b=nv.array([3.0, 4.0]))
    assert gx[0] is None and gx[1]["a"].tolist() == [3, 4]
    vg = nv.value_and_grad(lambda x, *, k: ((x * k).sum(), k), argnames="k")
    (v, aux), (gpos, gk) = vg(nv.array([1.0, 2.0]), k=nv.array([5.0, 6.0]))
    assert v.item() == 17 and aux.tolist() == [5, 6] and gpos is None and gk["k"].tolist() == [1, 2]
    # A keyword argument that is not differentiated is passed through unchanged.
    h = nv.grad(lambda x, *, scale, tag: (x * scale).sum() if tag == "t" else None, argnames="scale")
    _, d = h(nv.array([2.0, 3.0]), scale=nv.array(4.0), tag="t")
    assert d["scale"].item() == 5


def test_errors_match_mlx():
    x = nv.array([1.0, 2.0])
    cases = [
        (lambda: nv.grad(f, argnums=[]), "Gradient wrt no argument requested"),
        (lambda: nv.value_and_grad(f, argnums=()), r"\[value_and_grad\] Gradient wrt no argument"),
        (lambda: nv.grad(f, argnums=[0, 0]), "Duplicate argument index 0"),
        (lambda: nv.grad(f, argnums=-1), "negative argument index -1"),
        (lambda: nv.grad(lambda m, x: x.sum(), argnums=2)(nv, x), "argument index 2 because the function is called with only 2"),
        (lambda: nv.grad(lambda m, x, **k: x.sum(), argnames="q")(nv, x, a=x, b=x),
         r"keyword argument 'q' because the function is called with the following keyword arguments \{a,b,\}"),
        (lambda: nv.grad(lambda m, x, y=None: x.sum(), argnames="y")(nv, x, x), "keyword argument 'y'"),
    ]
    for fn, msg in cases:
        with pytest.raises(ValueError, match=msg):
            fn()
    for bad in [{"argnames": 5}, {"argnames": ["a", 1]}, {"argnums": [0, "a"]}, {"argnums": 1.5}]:
        with pytest.raises(TypeError):
            nv.grad(f, **bad)
