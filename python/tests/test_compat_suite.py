"""Compatibility: behaviours where nuvec differed from MLX 0.32.4, found by running MLX's own
test suite with nuvec's names (tools/mlx_suite.py). Each is checked on nuvec against NumPy or
an answer stated here, and on MLX itself where it is importable, so the two cannot drift."""
import numpy as np
import pytest

import nuvec


def libs():
    """nuvec, and mlx.core when it is installed."""
    out = [nuvec]
    try:
        import mlx.core as mx
        out.append(mx)
    except ImportError:
        pass
    return out


LIBS = libs()
IDS = [m.__name__ for m in LIBS]


# ---- grad / value_and_grad: what the function may return ----

@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_grad_wants_a_0d_array(lib):
    x = lib.ones((2, 2))
    # A size-1 array of another shape is no scalar.
    for shape_keeping in (lambda v: lib.sum(v, keepdims=True), lambda v: v.sum().reshape(1)):
        with pytest.raises(ValueError):
            lib.grad(shape_keeping)(x)
        with pytest.raises(ValueError):
            lib.value_and_grad(shape_keeping)(x)
    g = lib.grad(lambda v: (v * v).sum())(x)
    assert np.array_equal(np.array(g), 2 * np.ones((2, 2)))


@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_grad_refuses_auxiliary_outputs_value_and_grad_keeps_them(lib):
    def f(v):
        loss = (v * 3).sum()
        return loss, {"aux": v + 1, "n": 7}

    with pytest.raises(ValueError, match="tuple"):
        lib.grad(f)(lib.array([1.0, 2.0]))
    (loss, aux), g = lib.value_and_grad(f)(lib.array([1.0, 2.0]))
    assert loss.item() == 9.0
    assert aux["n"] == 7 and aux["aux"].tolist() == [2.0, 3.0]
    assert g.tolist() == [3.0, 3.0]
    with pytest.raises(ValueError, match="str"):
        lib.grad(lambda v: "no array")(lib.array(1.0))
    with pytest.raises(ValueError, match="str"):
        lib.value_and_grad(lambda v: ("no array", v))(lib.array(1.0))


# ---- custom_function: a function of one argument gets that argument in its rules ----

@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_custom_function_rules_of_one_argument(lib):
    seen = {}
    f = lib.custom_function(lambda x: lib.exp(x))

    @f.vjp
    def f_vjp(primals, cotangent, output):
        seen["vjp"] = type(primals).__name__
        return lib.ones_like(primals) * 42 * cotangent

    @f.jvp
    def f_jvp(primals, tangents):
        seen["jvp"] = (type(primals).__name__, type(tangents).__name__)
        return tangents * 7

    @f.vmap
    def f_vmap(x, axis):
        seen["vmap"] = (type(x).__name__, axis)
        return lib.ones_like(x) * 3, axis

    x = lib.array([0.5, -1.0, 2.0])
    assert lib.grad(lambda v: f(v).sum())(x).tolist() == [42.0, 42.0, 42.0]
    _, (t,) = lib.jvp(f, [x], [lib.array([1.0, 2.0, 3.0])])
    assert t.tolist() == [7.0, 14.0, 21.0]
    assert lib.vmap(f)(lib.ones((4, 2))).tolist() == [[3.0, 3.0]] * 4
    assert seen == {"vjp": "array", "jvp": ("array", "array"), "vmap": ("array", 0)}


@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_custom_function_rules_of_a_tree_argument(lib):
    @lib.custom_function
    def f(params):
        return {"out": 2 * params["x"] * params["y"]}

    @f.vjp
    def f_vjp(primals, cotangents, outputs):
        return {"x": lib.zeros_like(primals["x"]), "y": cotangents["out"] * 5}

    g = lib.grad(lambda p: f(p)["out"].sum())({"x": lib.ones(2), "y": lib.ones(2)})
    assert g["x"].tolist() == [0.0, 0.0] and g["y"].tolist() == [5.0, 5.0]


# ---- vmap: axes given as a dict, and a one-element tuple for one output ----

@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_vmap_dict_in_axes_is_a_prefix_of_the_argument(lib):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((2, 4)), rng.standard_normal((4, 2))
    tree = {"a": lib.array(a), "b": lib.array(b)}
    out = lib.vmap(lambda t: t["a"] * t["b"], in_axes={"a": 0, "b": 1})(tree)
    np.testing.assert_allclose(np.array(out), a * b.T, rtol=1e-6)
    with pytest.raises(ValueError):
        lib.vmap(lambda t: t["a"] * t["b"], in_axes={"a": 0, "c": 1})(tree)


@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_vmap_one_element_out_axes_for_one_output(lib):
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    out = lib.vmap(lib.matmul, in_axes=(1, None), out_axes=(1,))(lib.array(a), lib.array(b))
    want = np.moveaxis(np.moveaxis(a, 1, 0) @ b, 0, 1)
    assert out.shape == want.shape == (2, 3, 5)
    np.testing.assert_allclose(np.array(out), want, rtol=1e-5, atol=1e-6)


# ---- arange with an integer dtype and a fractional step ----

ARANGES = [  # (start, stop, step) with dtype int32
    (0, 3, 0.2),
    (-1, -4, -0.9),
    (-1, -20, -1.2),
    (0.5, 5, 1),
    (2, 11, 2.5),
    (0, 10, 100),
    (10, 0, 1),
]


@pytest.mark.parametrize("lib", LIBS, ids=IDS)
@pytest.mark.parametrize("start,stop,step", ARANGES)
def test_arange_integer_dtype_converts_start_and_step(lib, start, stop, step):
    n = max(0, int(np.ceil((stop - start) / step)))
    # The length is the real one; the elements come from start and step made integers.
    want = [int(start) + i * int(step) for i in range(n)]
    a = lib.arange(start, stop, step, dtype=lib.int32)
    assert a.dtype == lib.int32
    assert a.tolist() == want
    f = lib.arange(start, stop, step, dtype=lib.float32)
    np.testing.assert_allclose(np.array(f), np.arange(start, stop, step, dtype=np.float32),
                               rtol=1e-6)


# ---- in-place division of an integer array ----

@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_inplace_division_of_integers_raises(lib):
    for dt in (lib.int32, lib.uint8, lib.bool_):
        a = lib.array([4, 2], dtype=dt)
        with pytest.raises(ValueError, match="In place division"):
            a /= 2
        assert a.dtype == dt
    for dt in (lib.float32, lib.float16):
        a = lib.array([4, 2], dtype=dt)
        b = a
        b /= 2
        assert a.dtype == dt and a.tolist() == [2.0, 1.0]
    a = lib.array([7, 2])
    a //= 2
    assert a.tolist() == [3, 1] and a.dtype == lib.int32


@pytest.mark.parametrize("lib", LIBS, ids=IDS)
def test_arange_infinite_step(lib):
    inf = float("inf")
    for start, stop, step, want in [(0, 10, inf, [0.0]), (0, -10, -inf, [0.0]), (10, 0, inf, []),
                                    (3, 3, inf, []), (-2.5, 1, inf, [-2.5])]:
        assert lib.arange(start, stop, step).tolist() == want
        assert lib.arange(start, stop, step, dtype=lib.int32).tolist() == [int(v) for v in want]
    for bad in [(0, inf, 1), (-inf, 1, 1), (0, 2, float("nan")), (float("nan"), 1, 1)]:
        with pytest.raises(ValueError):
            lib.arange(*bad)
