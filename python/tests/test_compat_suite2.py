"""Compatibility, second part: behaviours where nuvec differed from MLX 0.32.4 in MLX's own test
suite (tools/mlx_suite.py): fused norm gradients' accuracy, shapeless compile over graphs made
from shapes, compile refusing inputs it also captures, get_array_buffer_size, grad's in-place
argument updates and hadamard_transform of lengths m * 2^k. Each is checked on nuvec against
NumPy or an answer stated here, and on MLX itself where it is importable."""
import numpy as np
import pytest
from test_compat_suite import IDS, LIBS  # nuvec, and mlx.core where it is installed

import nuvec


# ---- rms_norm / layer_norm: the fused vjp's row sums ----

def norm_grads_f64(x, w, g, eps, layer):
    """dL/dx and dL/dw of sum(norm(x) * w * g) in float64 (x, g: rows of the last axis)."""
    x, w, g = (np.asarray(a, np.float64) for a in (x, w, g))
    mu = x.mean(-1, keepdims=True) if layer else 0.0
    xc = x - mu
    r = 1.0 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    xhat = xc * r
    gw = g * w
    c = gw.mean(-1, keepdims=True) if layer else 0.0
    dx = r * (gw - c - xhat * (gw * xhat).mean(-1, keepdims=True))
    dw = (g * xhat).reshape(-1, x.shape[-1]).sum(0)
    return dx, dw


@pytest.mark.parametrize("layer", [False, True], ids=["rms", "layer"])
@pytest.mark.parametrize("d", [8192, 4099])
def test_norm_vjp_long_rows_are_accurate(layer, d):
    # Long rows: the fused vjp's row sums must stay as close to float64 as a float32 composed
    # norm does (MLX's gradient tests compare the two at 1e-5).
    rng = np.random.default_rng(12 + d)
    print("seed", 12 + d)
    x = rng.uniform(size=(2, 3, d)).astype(np.float32)
    w = rng.uniform(size=(d,)).astype(np.float32)
    g = rng.uniform(size=(2, 3, d)).astype(np.float32)
    eps = 1e-5
    mx = nuvec
    if layer:
        f = lambda x, w: (mx.fast.layer_norm(x, w, None, eps) * mx.array(g)).sum()
    else:
        f = lambda x, w: (mx.fast.rms_norm(x, w, eps) * mx.array(g)).sum()
    gx, gw = mx.grad(f, argnums=(0, 1))(mx.array(x), mx.array(w))
    rx, rw = norm_grads_f64(x, w, g, eps, layer)
    err_x = np.abs(np.array(gx, np.float64) - rx).max()
    err_w = np.abs(np.array(gw, np.float64) - rw).max() / np.abs(rw).mean()
    assert err_x < 2e-6, err_x
    assert err_w < 2e-6, err_w


# ---- compile(shapeless=True) over values made from shapes ----

@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_shapeless_like_ops_follow_the_new_shape(lib):
    zeros = lib.compile(lambda x: lib.zeros_like(x), shapeless=True)
    ones = lib.compile(lambda x: lib.ones_like(x), shapeless=True)
    for shape in [(1, 1, 32), (2, 2, 16), (3, 5, 7)]:
        x = lib.full(shape, 3.0)
        z, o = zeros(x), ones(x)
        assert z.shape == shape and o.shape == shape
        assert np.array_equal(np.array(z), np.zeros(shape, np.float32))
        assert np.array_equal(np.array(o), np.ones(shape, np.float32))


def test_shapeless_values_made_from_shapes_retrace():
    mx = nuvec
    full = mx.compile(lambda x: mx.full(x.shape, 2.0) * x, shapeless=True)
    times_ones = mx.compile(lambda x: x + mx.ones(x.shape[-1:]), shapeless=True)
    plain = mx.compile(lambda x: x * 2.0 + 1.0, shapeless=True)
    for n in [3, 5, 8]:
        x = mx.arange(2 * n, dtype=mx.float32).reshape(2, n)
        ref = np.arange(2 * n, dtype=np.float32).reshape(2, n)
        assert np.array_equal(np.array(full(x)), 2 * ref)
        assert np.array_equal(np.array(times_ones(x)), ref + 1)
        assert np.array_equal(np.array(plain(x)), ref * 2 + 1)
    # An element-wise function over scalars still replays on every shape without tracing again.
    assert plain._stats["traces"] == 1
    assert full._stats["traces"] == 3


# ---- compile refuses arrays it captures that are also its inputs ----

@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_compile_refuses_a_captured_input(lib):
    lazy = lib.array([1.0, 2.0, 3.0]) + 2
    done = lib.array([1.0, 2.0, 3.0])
    lib.eval(done)
    derived = done * 2
    for x, captured in [(lazy, lazy), (done, done), (done, derived)]:
        with pytest.raises(ValueError):
            lib.compile(lambda a: a + captured)(x)
    # Another array captured is a constant of the trace.
    other = lib.array([10.0, 20.0, 30.0]) * 1
    out = lib.compile(lambda a: a + other)(done)
    assert np.array_equal(np.array(out), [11.0, 22.0, 33.0])


@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_compile_captures_an_outer_tracer(lib):
    # Inside vmap and grad the input is the outer transform's tracer: capturing it is allowed.
    def outer(x):
        x = lib.abs(x)
        return lib.compile(lambda z: z * x)(x)

    x = lib.array([[1.0, -2.0], [-3.0, 4.0]])
    assert np.allclose(np.array(lib.vmap(outer)(x)), np.array(x) ** 2)
    g = lib.grad(lambda x: lib.compile(lambda z: z * x)(x).sum())(lib.array([1.0, 3.0]))
    assert np.allclose(np.array(g), [2.0, 6.0])


# ---- get_array_buffer_size ----

@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_array_buffer_size(lib):
    a = lib.arange(100, dtype=lib.float32)
    b = lib.ones((7,), dtype=lib.int8)
    lib.eval(a, b)
    sa, sb = lib.get_array_buffer_size(a), lib.get_array_buffer_size(b)
    assert sa >= 400 and sb >= 7
    view = a[10:20]
    lib.eval(view)
    # A view is its base's buffer, counted once however often it appears.
    assert lib.get_array_buffer_size(view) == sa
    assert lib.get_array_buffer_size([a, view], {"k": (a, None, 3)}) == sa
    assert lib.get_array_buffer_size(a, b) == sa + sb
    assert lib.get_array_buffer_size() == 0
    empty = lib.zeros((0, 3))
    lib.eval(empty)
    assert lib.get_array_buffer_size(empty) == 0
    with pytest.raises(ValueError):
        lib.get_array_buffer_size([a, a * 2])
    # An array made from Python values holds its data at once.
    assert lib.get_array_buffer_size(lib.array([5.0, 6.0]), lib.array([[1, 2]])) >= 16


# ---- grad: changes to the argument's containers stay ----

@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_grad_keeps_inplace_updates_of_its_arguments(lib):
    def loss(params):
        params["b"] = lib.array(5.0)
        params["list"][0] = lib.array(-1.0)
        return (params["a"] * 3).sum()

    a, b, c = lib.array([1.0, 2.0]), lib.array(0.0), lib.array(4.0)
    params = {"a": a, "b": b, "list": [c, lib.array(8.0)]}
    keep = params["list"][1]
    g = lib.grad(loss)(params)
    assert np.array_equal(np.array(g["a"]), [3.0, 3.0])
    assert params["a"] is a and params["list"][1] is keep
    assert params["b"].item() == 5.0
    assert params["list"][0].item() == -1.0


# ---- hadamard_transform of lengths m * 2^k ----

def transform_matrix(lib, n, dtype=None):
    """The transform's matrix: the rows are the transforms of the identity's rows."""
    eye = lib.eye(n) if dtype is None else lib.eye(n, dtype=dtype)
    return np.array(lib.hadamard_transform(eye).astype(lib.float32), np.float64)


@pytest.mark.parametrize("m", [12, 20, 28])
def test_hadamard_m_times_power_of_two(m):
    mx = nuvec
    tm = np.rint(transform_matrix(mx, m) * np.sqrt(m))
    # A Hadamard matrix of order m: +-1 entries, orthogonal rows.
    assert np.array_equal(np.abs(tm), np.ones((m, m)))
    assert np.allclose(tm @ tm.T, m * np.eye(m), atol=1e-4)
    for k in [1, 3, 6]:
        p = 1 << k
        n = m * p
        t = transform_matrix(mx, n)
        # The row read as m x p: the power-of-two transform of each row, then H_m across rows.
        expect = np.kron(tm, np.rint(transform_matrix(mx, p) * np.sqrt(p))) / np.sqrt(n)
        assert np.allclose(t, expect, atol=1e-5)
        rng = np.random.default_rng(n)
        x = rng.standard_normal((3, n)).astype(np.float32)
        y = mx.hadamard_transform(mx.array(x), scale=0.5)
        assert np.allclose(np.array(y), 0.5 * np.sqrt(n) * x @ t, atol=1e-4)
    with pytest.raises(ValueError):
        mx.hadamard_transform(mx.ones((m * 3,)))


def test_hadamard_m_rows_are_mlxs():
    # MLX's H12 (Sloane's): first row + - + + + + + + + + + +, second - - + - + - + - + - + -.
    t = np.rint(transform_matrix(nuvec, 12) * np.sqrt(12))
    assert np.array_equal(t[0], [1, -1] + [1] * 10)
    assert np.array_equal(t[1], [-1, -1] + [1, -1] * 5)


@pytest.mark.parametrize("n", [24, 80, 112, 12 * 256])
def test_hadamard_m_times_power_of_two_equals_mlx(n):
    mlx = pytest.importorskip("mlx.core")
    rng = np.random.default_rng(n)
    x = rng.standard_normal((4, n)).astype(np.float32)
    for dt in ["float32", "float16"]:
        a = nuvec.hadamard_transform(nuvec.array(x).astype(getattr(nuvec, dt)))
        b = mlx.hadamard_transform(mlx.array(x).astype(getattr(mlx, dt)))
        tol = 1e-4 if dt == "float32" else 2e-2
        assert str(a.dtype).split(".")[-1] == dt
        assert np.allclose(np.array(a.astype(nuvec.float32)), np.array(b.astype(mlx.float32)),
                           atol=tol, rtol=tol)


@pytest.mark.parametrize("m", LIBS, ids=IDS)
def test_arange_overloads(m):
    """arange(stop), arange(start, stop), arange(stop, step=...) and arange(stop=...): the first
    positional bound is the stop when it is alone; a start given by name needs a stop."""
    assert m.arange(5).tolist() == [0, 1, 2, 3, 4]
    assert m.arange(1, 5).tolist() == [1, 2, 3, 4]
    assert m.arange(-3, step=-1).tolist() == [0, -1, -2]
    assert m.arange(stop=2, step=0.5).tolist() == [0, 0.5, 1.0, 1.5]
    assert m.arange(stop=3).tolist() == [0, 1, 2]
    assert m.arange(start=1, stop=3).tolist() == [1, 2]
    with pytest.raises(TypeError):
        m.arange(start=1, step=2)
    with pytest.raises(TypeError):
        m.arange()


def test_get_array_buffer_size_refuses_cyclic_and_too_deep_trees():
    """A list inside itself is a ValueError and a tree past the recursion limit a
    RecursionError, never a crash; a list met twice side by side is no cycle."""
    cyc = []
    cyc.append(cyc)
    with pytest.raises(ValueError, match="get_array_buffer_size: the pytree contains itself"):
        nuvec.get_array_buffer_size(cyc)
    deep = leaf = []
    for _ in range(5000):
        leaf.append([])
        leaf = leaf[0]
    with pytest.raises(RecursionError, match="get_array_buffer_size"):
        nuvec.get_array_buffer_size(deep)
    a = nuvec.array([1.0, 2.0])
    shared = [a]
    assert nuvec.get_array_buffer_size([shared, shared, {"k": shared}]) == 8
