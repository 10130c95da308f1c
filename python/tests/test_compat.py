"""Compatibility: small programs written for mlx.core run unchanged against nuvec, and both
give the same values, dtypes and shapes; single behaviours of mlx.array stated explicitly, and
checked against MLX itself where it is importable."""
import numpy as np
import pytest

import nuvec


def need_mlx():
    return pytest.importorskip("mlx.core")

SNIPPETS = {
    "arith": """
x = mx.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
y = (x * 2 + 1) / 3 - mx.array([1.0, 0.5, 0.25])
out = [y, x.T @ x, mx.maximum(x, 3), x ** 2, -x, abs(-x), x // 2, x % 2]
""",
    "weak": """
h = mx.array([1, 2, 3], dtype=mx.float16)
out = [h + 1.5, 2 * h, h / 3, mx.array([1], mx.int8) + 3, mx.array([True, False]) + True,
       mx.array([1, 2]) < 2.5]
""",
    "creation": """
out = [mx.zeros((2, 3)), mx.ones((3,), dtype=mx.int32), mx.full((2, 2), 7), mx.arange(10),
       mx.arange(0.0, 1.0, 0.25), mx.linspace(0, 1, 5), mx.eye(3, k=1), mx.identity(2),
       mx.zeros_like(mx.ones((2,), mx.uint8)), mx.tri(3)]
""",
    "shape": """
x = mx.arange(24).reshape(2, 3, 4)
out = [x.transpose(2, 0, 1), mx.swapaxes(x, 0, 1), x.flatten(), mx.expand_dims(x, 0),
       mx.concatenate([x, x], axis=1), mx.stack([x, x]), mx.split(x, 2, axis=2)[1],
       mx.pad(x, 1), mx.tile(x, (1, 2, 1)), mx.repeat(x, 2, axis=0), x.sum(axis=(0, 2)),
       mx.moveaxis(x, 0, -1), mx.squeeze(x[:, :1]), mx.roll(x, 1, axis=2)]
""",
    "index": """
x = mx.arange(30).reshape(5, 6)
y = mx.arange(30).reshape(5, 6)
y[1:3, ::2] = 0
y[mx.array([0, 4]), 1] = -1
out = [x[1], x[-1, ::-1], x[:, 2], x[None, 1:3], x[..., 1], x[mx.array([0, 2]), 1:4],
       x[:, mx.array([5, 0])], y, x.at[mx.array([0, 0])].add(1), mx.take(x, mx.array([1, 3]), axis=1)]
""",
    "grad": """
def loss(w, x):
    return ((w * x - 1.0) * (w * x - 1.0)).sum()
w = mx.array([0.5, -1.0, 2.0])
x = mx.array([1.0, 2.0, 3.0])
val, g = mx.value_and_grad(loss)(w, x)
out = [val, g, mx.grad(loss, argnums=1)(w, x), mx.vmap(lambda r: (r * r).sum())(mx.ones((3, 4)))]
""",
    "unary": """
x = mx.array([0.5, 1.0, 2.0])
out = [mx.exp(x), mx.log(x), mx.sqrt(x), mx.sin(x), mx.tanh(x), mx.sigmoid(x), mx.floor(x * 3),
       mx.isnan(x), mx.where(x > 1, x, 0.0), mx.clip(x, 0.7, 1.5), mx.round(x * 3.3, 1)]
""",
}


def run(src, mod):
    env = {"mx": mod}
    exec(src, env)
    return env["out"]


@pytest.mark.parametrize("name", sorted(SNIPPETS))
def test_snippet_matches_mlx(name):
    mlx = need_mlx()
    want = run(SNIPPETS[name], mlx)
    got = run(SNIPPETS[name], nuvec)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        gn = np.array(g.astype(nuvec.float32)) if g.dtype == nuvec.bfloat16 else np.array(g)
        wn = np.array(w.astype(mlx.float32)) if w.dtype == mlx.bfloat16 else np.array(w)
        np.testing.assert_allclose(gn, wn, rtol=1e-5, atol=1e-6)
        assert repr(g) == repr(w)


# ---- Comparisons with lists and unrelated objects ----

def outcome(f):
    """What f() gives: ("array", values), ("bool", value) or ("raises", exception type)."""
    try:
        r = f()
    except Exception as e:  # noqa: BLE001
        return ("raises", type(e))
    if isinstance(r, bool):
        return ("bool", r)
    return ("array", np.array(r).tolist())


def test_compare_with_list_and_tuple_is_no_array_operation():
    """As MLX: a list or tuple is no operand of an operator. == is False and != True (no
    element-wise comparison), the orderings and arithmetic raise ValueError."""
    import importlib.util

    mods = [nuvec]
    if importlib.util.find_spec("mlx") is not None:
        import mlx.core

        mods.append(mlx.core)
    for mod in mods:
        x = mod.array([1, 2])
        assert (x == [1, 2]) is False and (x == (1, 3)) is False
        assert (x != [1, 3]) is True and ([1, 2] == x) is False
        assert (x == [1, 2, 3]) is False  # no broadcast error either
        for f in (lambda: x < [2, 2], lambda: x >= (2, 2), lambda: x + [1, 2],
                  lambda: [1, 2] * x, lambda: x & (1, 2)):
            with pytest.raises(ValueError):
                f()


# How each comparison of x = array([1, 2]) with a non-array comes out, never a conversion
# error. MLX 0.32.4 gives the same but for None (MLX_DIFFERS).
CASES = {
    "x == None": (lambda x: x == None, ("bool", False)),  # noqa: E711
    "x != None": (lambda x: x != None, ("bool", True)),  # noqa: E711
    "None == x": (lambda x: None == x, ("bool", False)),  # noqa: E711
    "x < None": (lambda x: x < None, ("raises", TypeError)),
    "x in [None]": (lambda x: x in [None], ("bool", False)),
    "None in x": (lambda x: None in x, ("bool", False)),
    'x == "a"': (lambda x: x == "a", ("bool", False)),
    'x != "a"': (lambda x: x != "a", ("bool", True)),
    '"a" == x': (lambda x: "a" == x, ("bool", False)),
    "x == object()": (lambda x: x == object(), ("bool", False)),
    "x == {}": (lambda x: x == {}, ("bool", False)),
    'x == ["a", "b"]': (lambda x: x == ["a", "b"], ("bool", False)),
    'x != ["a", "b"]': (lambda x: x != ["a", "b"], ("bool", True)),
    "x == ragged": (lambda x: x == [[1, 2], [3]], ("bool", False)),
    "x != ragged": (lambda x: x != [[1, 2], [3]], ("bool", True)),
    '"a" in x': (lambda x: "a" in x, ("bool", False)),
    "1 in x": (lambda x: 1 in x, ("bool", True)),
    "3 in x": (lambda x: 3 in x, ("bool", False)),
    "x == 1.5": (lambda x: x == 1.5, ("array", [False, False])),
    "x == True": (lambda x: x == True, ("array", [True, False])),  # noqa: E712
}
# MLX rejects None as an operand of == and != too (nanobind's "incompatible function arguments").
MLX_DIFFERS = {k: ("raises", TypeError)
               for k in ("x == None", "x != None", "None == x", "x in [None]", "None in x")}
# Ordering against a str or an object raises ValueError, as MLX's ("Cannot perform less than
# on an mlx.core.array and str").
ORDERING = {
    'x < "a"': lambda x: x < "a",
    'x >= "a"': lambda x: x >= "a",
    '"a" < x': lambda x: "a" < x,
    "x < object()": lambda x: x < object(),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compare_with_other_objects(case):
    f, want = CASES[case]
    assert outcome(lambda: f(nuvec.array([1, 2]))) == want


@pytest.mark.parametrize("case", sorted(CASES))
def test_compare_with_other_objects_as_mlx(case):
    mlx = need_mlx()
    f, want = CASES[case]
    assert outcome(lambda: f(mlx.array([1, 2]))) == MLX_DIFFERS.get(case, want)


@pytest.mark.parametrize("case", sorted(ORDERING))
def test_ordering_with_other_objects_raises(case):
    with pytest.raises(ValueError):
        ORDERING[case](nuvec.array([1, 2]))
    mlx = pytest.importorskip("mlx.core")
    with pytest.raises(ValueError):
        ORDERING[case](mlx.array([1, 2]))


# ---- format(), float() and complex() of arrays ----

FORMATS = [  # (values, dtype name, spec, result)
    (3.14159, "float32", ".2f", "3.14"),
    (3.14159, "float32", ".3e", "3.142e+00"),
    (3.14159, "float32", "", "3.141590118408203"),
    (3, "int32", "d", "3"),
    (3, "int32", ".2f", "3.00"),
    (True, "bool_", "", "True"),
    (True, "bool_", "d", "1"),
    (1.5, "float16", ".3f", "1.500"),
    (1.5, "bfloat16", ".2f", "1.50"),
    (1 + 2j, "complex64", "", "(1+2j)"),
    (1 + 2j, "complex64", ".2f", "1.00+2.00j"),
    ([1.0, 2.0], "float32", "", "array([1, 2], dtype=float32)"),
]


@pytest.mark.parametrize("case", range(len(FORMATS)))
def test_format(case):
    v, dt, spec, want = FORMATS[case]
    assert format(nuvec.array(v, dtype=getattr(nuvec, dt)), spec) == want
    mlx = need_mlx()
    assert format(mlx.array(v, dtype=getattr(mlx, dt)), spec) == want


@pytest.mark.parametrize("v", [[1.0, 2.0], [1.5], [[1.5]]])
def test_format_spec_of_non_scalar_raises_type_error(v):
    # Only 0-d arrays format their value; others only with an empty spec (their repr).
    with pytest.raises(TypeError):
        format(nuvec.array(v), ".2f")
    mlx = need_mlx()
    with pytest.raises(TypeError):
        format(mlx.array(v), ".2f")


SCALARS = [  # (value, dtype name, float(), complex())
    (1 + 2j, "complex64", TypeError, 1 + 2j),
    (1 + 0j, "complex64", TypeError, 1 + 0j),
    ([1 + 1j], "complex64", TypeError, 1 + 1j),
    (2.5, "float32", 2.5, 2.5 + 0j),
    (2, "int32", 2.0, 2 + 0j),
    (True, "bool_", 1.0, 1 + 0j),
    ([1.5], "float32", 1.5, 1.5 + 0j),
    ([1.0, 2.0], "float32", ValueError, ValueError),
]


def check_scalar(mod, v, dt, want_float, want_complex):
    x = mod.array(v, dtype=getattr(mod, dt))
    for conv, want in ((float, want_float), (complex, want_complex)):
        if isinstance(want, type) and issubclass(want, Exception):
            with pytest.raises(want):
                conv(x)
        else:
            got = conv(x)
            assert type(got) is conv and got == want


@pytest.mark.parametrize("case", range(len(SCALARS)))
def test_float_and_complex_of_arrays(case):
    check_scalar(nuvec, *SCALARS[case])
    check_scalar(need_mlx(), *SCALARS[case])


def test_int_of_complex_raises_type_error():
    with pytest.raises(TypeError):
        int(nuvec.array(1 + 2j))


# ---- float64 from Python floats ----

F64 = [0.1, 1 / 3, 1e300, -2.5e-310, 123456789.123456789]


def float64_values(mod):
    f64 = mod.float64
    return ([mod.array(v, dtype=f64).item() for v in F64] + mod.array(F64, dtype=f64).tolist() +
            [mod.full((2,), v, dtype=f64).tolist()[1] for v in F64] +
            [mod.full_like(mod.zeros((1,), f64), v).tolist()[0] for v in F64] +
            [mod.full_like(mod.zeros((1,)), v, dtype=f64).tolist()[0] for v in F64] +
            (mod.array([1.0], f64) * 0.1).tolist())


def test_float64_keeps_python_floats_exactly():
    want = F64 * 5 + [0.1]
    assert float64_values(nuvec) == want
    assert nuvec.array(0.1, dtype=nuvec.float64).dtype == nuvec.float64
    assert float64_values(need_mlx()) == want


def test_float32_from_python_floats_still_rounds():
    assert nuvec.array(0.1).item() == np.float32(0.1)
    assert nuvec.array(0.1).dtype == nuvec.float32
    assert nuvec.array(0.1, dtype=nuvec.float16).item() == np.float16(0.1)


# ---- device_info ----

def test_device_info_cpu():
    import platform
    info = nuvec.device_info(nuvec.cpu)
    assert set(info) == {"architecture", "device_name"}
    assert info["architecture"] == platform.machine()
    assert isinstance(info["device_name"], str)
    assert nuvec.device_info(nuvec.Device(nuvec.cpu)) == info
    # The default device's (a GPU's free memory changes between two calls).
    moving = {"free_memory"}
    drop = lambda d: {k: v for k, v in d.items() if k not in moving}  # noqa: E731
    assert drop(nuvec.device_info()) == drop(nuvec.device_info(nuvec.default_device()))
    mlx = need_mlx()
    assert mlx.device_info(mlx.cpu) == info


def test_device_info_gpu():
    info = nuvec.device_info(nuvec.gpu)
    assert nuvec.device_info(nuvec.Device(nuvec.gpu, 1000)) == {}
    if not nuvec.cuda.is_available():
        assert info == {}
        return
    assert {"device_name", "architecture", "total_memory", "uuid", "pci_bus_id",
            "compute_capability_major", "compute_capability_minor"} <= set(info)
    assert info["total_memory"] > 0 and info["architecture"].startswith("sm_")
    assert info.get("free_memory", 0) <= info["total_memory"]


def test_device_info_rejects_other_arguments():
    with pytest.raises(TypeError):
        nuvec.device_info("cpu")


def test_metal_device_info_is_empty_here():
    assert nuvec.metal.is_available() is False
    with pytest.warns(DeprecationWarning):
        assert nuvec.metal.device_info() == {}
    assert isinstance(nuvec.cuda.is_available(), bool)


def test_array_namespace_is_the_module():
    assert nuvec.array([1]).__array_namespace__() is nuvec
    assert nuvec.array([1]).__array_namespace__(api_version=None) is nuvec


def test_astype_takes_a_positional_stream():
    x = nuvec.array([1, 2])
    assert x.astype(nuvec.float32, nuvec.cpu).dtype == nuvec.float32
    assert x.astype(nuvec.float16, stream=nuvec.cpu).dtype == nuvec.float16


def test_from_dlpack_copy_keyword():
    src = np.arange(4, dtype=np.float32)
    view = nuvec.from_dlpack(src)
    copied = nuvec.from_dlpack(src, copy=True)
    src[0] = 9
    assert view.tolist()[0] == 9 and copied.tolist()[0] == 0
    assert nuvec.from_dlpack(src, copy=False).tolist()[0] == 9
    with pytest.raises(TypeError):
        nuvec.from_dlpack(src, True)


def test_arange_widens_to_int64_past_int32():
    assert nuvec.arange(2**40, 2**40 + 2).dtype == nuvec.int64
    assert nuvec.arange(2**40, 2**40 + 2).tolist() == [2**40, 2**40 + 1]
    assert nuvec.arange(3).dtype == nuvec.int32
    assert nuvec.arange(0, 3, 2**33).dtype == nuvec.int64


def test_eye_of_zero_and_meshgrid_tuple():
    assert nuvec.eye(0).shape == (0, 0)
    assert nuvec.eye(0, 3).shape == (0, 3) and nuvec.eye(2, 0).shape == (2, 0)
    with pytest.raises(ValueError):
        nuvec.eye(-1)
    g = nuvec.meshgrid(nuvec.array([1, 2]), nuvec.array([3]))
    assert isinstance(g, tuple) and len(g) == 2


def test_async_eval_inside_a_transform_raises():
    def f(x):
        nuvec.async_eval(x)
        return x.sum()
    with pytest.raises(ValueError, match="async_eval"):
        nuvec.grad(f)(nuvec.array([1.0]))
    y = nuvec.array([1.0]) * 2
    nuvec.async_eval(y)  # outside: fine
    assert y.tolist() == [2.0]
