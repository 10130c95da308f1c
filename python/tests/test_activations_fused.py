"""The fused activations' derivatives (act_vjp, src/ops/elementwise_act.c): nn.gelu's three forms
and the gradients of tanh and sigmoid against float64 NumPy derivatives, their second
derivatives (the rules' composed f'') against float64 finite differences, jvp, vmap and
broadcast inputs; and the composed forms' values (as MLX writes them) beside the fused ones."""
import math

import numpy as np
import pytest

import nuvec as nv
import nuvec.nn as nn

_erf = np.vectorize(math.erf, otypes=[np.float64])
C = 2 * math.sqrt(2 / math.pi)
A = float(np.float32(1.702))
FORMS = {"gelu": nn.gelu, "gelu_approx": nn.gelu_approx, "gelu_fast_approx": nn.gelu_fast_approx,
         "tanh": nv.tanh, "sigmoid": nv.sigmoid}


def sig64(v):
    return np.exp(-np.logaddexp(0, -v))


def d64(name, x):
    """f'(x) in float64."""
    if name == "gelu":
        return 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    if name == "tanh":
        return 1 - np.tanh(x) ** 2
    if name == "sigmoid":
        s = sig64(x)
        return s * (1 - s)
    c, k = (C, 0.044715) if name == "gelu_approx" else (A, 0.0)
    s = sig64(c * x * (1 + k * x * x))
    return s + x * s * (1 - s) * c * (1 + 3 * k * x * x)


def grad_of(f):
    return nv.grad(lambda x: nv.sum(f(x)))


@pytest.mark.parametrize("name", FORMS)
def test_first_derivative_float32(rng, name):
    x = np.concatenate([rng.uniform(-12, 12, 20000), np.linspace(-3, 3, 1001)]).astype(np.float32)
    g = rng.uniform(-2, 2, x.shape).astype(np.float32)
    _, (got,) = nv.vjp(FORMS[name], [nv.array(x)], [nv.array(g)])
    got = np.array(got).astype(np.float64)
    want = g.astype(np.float64) * d64(name, x.astype(np.float64))
    # f' is bounded by 1.13: an absolute error in units of |g|, plus a few ulp of the result.
    tol = np.abs(g) * 2.0 ** -21 + 4 * 2.0 ** -24 * np.abs(want)
    bad = np.abs(got - want) > tol
    assert not bad.any(), f"{name}: x = {x[bad][:4]} got {got[bad][:4]} want {want[bad][:4]}"


@pytest.mark.parametrize("name", FORMS)
def test_first_derivative_edges(name):
    x = np.float32([np.inf, -np.inf, np.nan, 0.0, -0.0, 80.0, -80.0, 1e-30, 3e38, -3e38])
    got = np.array(grad_of(FORMS[name])(nv.array(x)))
    assert np.isnan(got[2])
    fin = ~np.isnan(x)
    with np.errstate(over="ignore", invalid="ignore"):
        want = np.where(
            np.isinf(x), np.where(x > 0, 1.0, 0.0), d64(name, np.nan_to_num(x.astype(np.float64))))
    if name in ("tanh", "sigmoid"):
        want = np.where(np.isinf(x), 0.0, want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=2e-6, atol=1e-30)


@pytest.mark.parametrize("name", FORMS)
def test_first_derivative_float64(rng, name):
    x = rng.uniform(-10, 10, 3000)
    got = np.array(grad_of(FORMS[name])(nv.array(x, dtype=nv.float64)))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, d64(name, x), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", FORMS)
def test_second_derivative_against_finite_differences(rng, name):
    x = rng.uniform(-6, 6, 500)
    got = np.array(grad_of(grad_of(FORMS[name]))(nv.array(x, dtype=nv.float64)))
    h = 1e-5
    want = (d64(name, x + h) - d64(name, x - h)) / (2 * h)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", FORMS)
def test_jvp_and_vmap(rng, name):
    x = rng.uniform(-5, 5, (6, 33)).astype(np.float32)
    t = rng.uniform(-1, 1, x.shape).astype(np.float32)
    f = FORMS[name]
    _, (jv,) = nv.jvp(f, [nv.array(x)], [nv.array(t)])
    _, (vj,) = nv.vjp(f, [nv.array(x)], [nv.array(t)])
    np.testing.assert_array_equal(np.array(jv), np.array(vj))
    per_row = nv.vmap(grad_of(f))(nv.array(x))
    np.testing.assert_array_equal(np.array(per_row), np.array(grad_of(f)(nv.array(x))))
    # The derivative's own vmap (grad under vmap of a vjp): rows of g against the whole.
    gv = nv.vmap(lambda a, b: nv.vjp(f, [a], [b])[1][0])(nv.array(x), nv.array(t))
    np.testing.assert_array_equal(np.array(gv), np.array(vj))


@pytest.mark.parametrize("name", FORMS)
def test_broadcast_and_strided_inputs(rng, name):
    """A row broadcast to a matrix (the gradient sums over the broadcast axis) and a transposed
    view, against the contiguous computation."""
    f = FORMS[name]
    row = rng.uniform(-4, 4, (1, 17)).astype(np.float32)
    got = np.array(nv.grad(lambda r: nv.sum(f(nv.broadcast_to(r, (5, 17)))))(nv.array(row)))
    want = 5 * d64(name, row.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    m = rng.uniform(-4, 4, (9, 13)).astype(np.float32)
    gt = np.array(grad_of(f)(nv.array(m).T))
    np.testing.assert_array_equal(gt, np.array(grad_of(f)(nv.array(np.ascontiguousarray(m.T)))))


@pytest.mark.parametrize("dt", [nv.float16, nv.bfloat16])
@pytest.mark.parametrize("name", FORMS)
def test_half_gradients(rng, name, dt):
    x = rng.uniform(-6, 6, 4000).astype(np.float32)
    got = np.array(grad_of(FORMS[name])(nv.array(x).astype(dt)).astype(nv.float32))
    xr = np.array(nv.array(x).astype(dt).astype(nv.float32)).astype(np.float64)
    tol = 4e-3 if dt == nv.float16 else 3e-2
    np.testing.assert_allclose(got, d64(name, xr), rtol=tol, atol=tol)


def test_composed_forms_match():
    """The composed formulas (MLX's, written out in element-wise ops) beside the fused
    kernels (float32 within a few ulp of each other where the composed form is accurate)."""
    x = np.linspace(-5, 5, 20001, dtype=np.float32)
    xa = nv.array(x)
    c = 0.5 * xa * (1 + nv.erf(xa * 0.7071067811865476))
    np.testing.assert_allclose(np.array(nn.gelu(xa)), np.array(c), rtol=1e-6, atol=4e-7)
    c = xa * nv.sigmoid(2 * 0.7978845608028654 * xa * (1 + 0.044715 * xa * xa))
    np.testing.assert_allclose(np.array(nn.gelu_approx(xa)), np.array(c), rtol=4e-6, atol=1e-7)
    t = 0.5 * xa * (1 + nv.tanh(0.7978845608028654 * (xa + 0.044715 * xa ** 3)))
    np.testing.assert_allclose(np.array(nn.gelu_approx(xa)), np.array(t), rtol=4e-6, atol=3e-7)
    c = xa * nv.sigmoid(1.702 * xa)
    np.testing.assert_allclose(np.array(nn.gelu_fast_approx(xa)), np.array(c), rtol=4e-6, atol=1e-7)


def test_bad_inputs_fail_with_the_op_name():
    with pytest.raises(Exception, match="gelu: complex64 is not supported"):
        nv.eval(nn.gelu(nv.array(np.array([1 + 1j], np.complex64))))
