"""Transforms over pytrees through the C closures: grad and value_and_grad (argnums, aux
outputs), vjp, jvp, vmap (in_axes/out_axes with None, nested), custom_function rules,
checkpoint, stop_gradient, eval/async_eval, and exceptions raised by the traced function."""
import numpy as np
import pytest

import nuvec as nv
from conftest import assert_close


def loss(params, x):
    r = params["w"] * x + params["b"][0]
    return (r * r).sum()


def test_grad_over_a_dict_and_list():
    p = {"w": nv.array([1.0, 2.0]), "b": [nv.array(0.5)]}
    x = nv.array([3.0, -1.0])
    g = nv.grad(loss)(p, x)
    assert set(g) == {"w", "b"} and isinstance(g["b"], list)
    r = np.array([1.0, 2.0]) * np.array([3.0, -1.0]) + 0.5
    assert_close(np.array(g["w"]), 2 * r * np.array([3.0, -1.0]), "float32")
    assert_close(np.array(g["b"][0]), np.array(2 * r.sum()), "float32")


def test_value_and_grad_argnums_and_aux():
    f = lambda x, y: ((x * y).sum(), {"a": x, "n": 3})  # noqa: E731
    (v, aux), (gx, gy) = nv.value_and_grad(f, argnums=(0, 1))(nv.array([1.0, 2.0]), nv.array([3.0, 4.0]))
    assert v.item() == 11 and aux["n"] == 3 and aux["a"].tolist() == [1, 2]
    assert gx.tolist() == [3, 4] and gy.tolist() == [1, 2]
    gy_only = nv.grad(lambda x, y: (x * y).sum(), argnums=1)(nv.array([1.0, 2.0]), nv.array([3.0, 4.0]))
    assert gy_only.tolist() == [1, 2]
    with pytest.raises(ValueError, match="grad"):
        nv.grad(lambda x: x)(nv.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="argument"):
        nv.grad(lambda x: x.sum(), argnums=3)(nv.array([1.0]))


def test_higher_order_and_nested():
    f = lambda x: (x * x * x).sum()  # noqa: E731
    assert nv.grad(nv.grad(f))(nv.array(2.0)).item() == 12
    per_row = nv.vmap(nv.grad(lambda r: (r * r).sum()))(nv.arange(6.0).reshape(2, 3))
    assert per_row.tolist() == [[0, 2, 4], [6, 8, 10]]
    g = nv.grad(lambda x: nv.vmap(lambda r: (r * r).sum())(x).sum())(nv.arange(4.0).reshape(2, 2))
    assert g.tolist() == [[0, 2], [4, 6]]


def test_vjp_jvp_match_finite_differences(rng):
    a = rng.standard_normal((3,))
    f = lambda x, y: [nv.exp(x) * y, (x * x).sum()]  # noqa: E731
    x, y = nv.array(a, nv.float64), nv.array(a[::-1].copy(), nv.float64)
    outs, vjps = nv.vjp(f, [x, y], [nv.ones((3,), nv.float64), nv.array(1.0, nv.float64)])
    assert len(outs) == 2 and len(vjps) == 2
    assert_close(np.array(vjps[0]), np.exp(a) * a[::-1] + 2 * a, "float64")
    assert_close(np.array(vjps[1]), np.exp(a), "float64")
    outs, jvps = nv.jvp(f, [x, y], [nv.ones((3,), nv.float64), nv.zeros((3,), nv.float64)])
    assert_close(np.array(jvps[0]), np.exp(a) * a[::-1], "float64")
    assert_close(np.array(jvps[1]), (2 * a).sum(), "float64")
    with pytest.raises(ValueError, match="vjp"):
        nv.vjp(f, [x, y], [nv.ones((3,))])


def test_vmap_axes():
    x = nv.arange(6.0).reshape(2, 3)
    y = nv.array([1.0, 2.0, 3.0])
    assert nv.vmap(lambda a: a.sum())(x).tolist() == [3, 12]
    assert nv.vmap(lambda a: a.sum(), in_axes=1)(x).tolist() == [3, 5, 7]
    prod, same = nv.vmap(lambda a, b: (a * b, a), in_axes=(0, None), out_axes=(1, 0))(x, y)
    assert_close(np.array(prod), (np.arange(6.0).reshape(2, 3) * [1, 2, 3]).T)
    assert same.shape == (2, 3)
    d = nv.vmap(lambda t: {"s": t["a"] + t["b"]}, in_axes=({"a": 0, "b": None},))({"a": x, "b": y})
    assert_close(np.array(d["s"]), np.arange(6.0).reshape(2, 3) + [1, 2, 3])
    nested = nv.vmap(nv.vmap(lambda a: a * 2))(x)
    assert nested.tolist() == [[0, 2, 4], [6, 8, 10]]
    with pytest.raises(ValueError, match="in axes"):
        nv.vmap(lambda a, b: a, in_axes=(0,))(x, y)
    with pytest.raises(ValueError, match="vmap"):
        nv.vmap(lambda a, b: a + b)(x, nv.ones((5, 3)))


def test_custom_function_rules():
    @nv.custom_function
    def f(x, y):
        return nv.exp(x) * y

    @f.vjp
    def f_vjp(primals, cotangent, output):
        x, y = primals
        return cotangent * 10, cotangent * 20

    @f.jvp
    def f_jvp(primals, tangents):
        return tangents[0] * 100

    @f.vmap
    def f_vmap(inputs, axes):
        x, y = inputs
        return nv.exp(x) * y + 1000, axes[0]

    x, y = nv.array([1.0, 2.0]), nv.array([1.0, 1.0])
    assert_close(np.array(f(x, y)), np.exp([1.0, 2.0]), "float32")
    gx, gy = nv.grad(lambda a, b: f(a, b).sum(), argnums=(0, 1))(x, y)
    assert gx.tolist() == [10, 10] and gy.tolist() == [20, 20]
    _, (t,) = nv.jvp(lambda a: f(a, y), [x], [nv.ones((2,))])
    assert t.tolist() == [100, 100]
    v = nv.vmap(f, in_axes=(0, None))(nv.ones((3, 2)), y)
    assert_close(np.array(v), np.full((3, 2), np.e + 1000), "float32")
    plain = nv.custom_function(lambda a: a * a)
    assert nv.grad(lambda a: plain(a).sum())(x).tolist() == [2, 4]


def test_checkpoint_and_stop_gradient():
    f = lambda x: (nv.exp(x) * x).sum()  # noqa: E731
    x = nv.array([1.0, 2.0])
    assert_close(np.array(nv.grad(nv.checkpoint(f))(x)), np.array(nv.grad(f)(x)), "float32")
    assert nv.grad(lambda a: (nv.stop_gradient(a) * a).sum())(x).tolist() == [1, 2]


def test_eval_async_eval_pytrees_and_errors():
    t = {"a": [nv.ones(3) + 1, (nv.zeros(2) * 3,)], "b": 7, "c": None}
    nv.eval(t)
    nv.eval(nv.ones(2), [nv.ones(1)])
    nv.async_eval(t)
    assert t["a"][0].tolist() == [2, 2, 2]

    def bad(x):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        nv.grad(bad)(nv.array(1.0))
    with pytest.raises(KeyError, match="boom"):
        nv.vmap(bad)(nv.ones(2))
    with pytest.raises(ValueError, match="out of range"):
        nv.eval({"x": nv.take(nv.ones(3), nv.array([5]))})


# ---- Complex gradients: MLX's convention (cot · conj(f'(z))) ----

COMPLEX_CASES = {
    "square": lambda mx: (lambda x: x * x),
    "sin": lambda mx: mx.sin,
    "exp": lambda mx: mx.exp,
    "real": lambda mx: mx.real,
    "imag": lambda mx: mx.imag,
    "conj": lambda mx: mx.conj,
    "abs": lambda mx: mx.abs,
    "matmul": lambda mx: (lambda a: a @ mx.array([[1 - 1j, 0.5j], [3 + 0j, -2 + 1j]])),
    "real_of_square": lambda mx: (lambda x: mx.real(x * x)),
}


@pytest.mark.parametrize("name", sorted(COMPLEX_CASES))
def test_complex_vjp_matches_mlx(name):
    mlx = pytest.importorskip("mlx.core")
    z = np.array([[0.5 - 1.25j, 3 + 4j], [0j, -2j]], np.complex64)
    outs = []
    for lib in (nv, mlx):
        f = COMPLEX_CASES[name](lib)
        y = f(lib.array(z))
        cot = np.ones(y.shape, np.float32) * 2 if y.dtype == lib.float32 else \
            np.full(y.shape, 1.5 + 0.5j, np.complex64)
        outs.append(np.array(lib.vjp(f, [lib.array(z)], [lib.array(cot)])[1][0]))
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)


def test_complex_grad_matches_mlx():
    mlx = pytest.importorskip("mlx.core")
    z = np.array([0.5 - 1.25j, 3 + 4j, 0j], np.complex64)
    got = nv.grad(lambda x: (nv.abs(x) + nv.real(x * x)).sum())(nv.array(z))
    want = mlx.grad(lambda x: (mlx.abs(x) + mlx.real(x * x)).sum())(mlx.array(z))
    np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-5, atol=1e-6)
