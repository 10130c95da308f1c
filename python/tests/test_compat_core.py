"""mlx.core behaviours nuvec follows (issue 23): reduction dtypes, grad over trees with non-array
leaves, setitem broadcasting, construction errors. Each is stated explicitly and, where mlx.core
imports, checked against MLX itself."""
import numpy as np
import pytest

import nuvec as nx

SMALL = ["bool_", "int8", "int16", "uint8", "uint16", "int32", "uint32", "int64", "uint64",
         "float16", "bfloat16", "float32", "complex64"]
# MLX 0.32's result dtypes of sum and prod: small integers and bool widen to 32 bits.
SUM_DT = {"bool_": "int32", "int8": "int32", "int16": "int32", "uint8": "uint32",
          "uint16": "uint32"}


def mlx_or_skip():
    return pytest.importorskip("mlx.core")


def dt_name(d):
    return str(d).split(".")[-1]


@pytest.mark.parametrize("dt", SMALL)
@pytest.mark.parametrize("op", ["sum", "prod"])
def test_sum_prod_dtypes_and_values(op, dt):
    vals = [100, 100, 3] if dt != "bool_" else [True, True, False]
    x = nx.array(vals, dtype=getattr(nx, dt))
    r = getattr(nx, op)(x)
    want = SUM_DT.get(dt, dt)
    assert dt_name(r.dtype) == ("bool" if want == "bool_" else want)
    if dt in ("int8", "int16", "uint8", "uint16"):
        # Widened before reducing: no wrap at 8 or 16 bits.
        assert r.item() == (203 if op == "sum" else 30000)
    r = getattr(nx, op)(nx.reshape(x, (1, 3)), axis=1, keepdims=True)
    assert r.shape == (1, 1)


@pytest.mark.parametrize("dt", SMALL)
def test_reduction_and_scan_dtypes_match_mlx(dt):
    mx = mlx_or_skip()
    vals = [1, 2, 0] if dt != "bool_" else [True, True, False]
    ours, theirs = nx.array(vals, dtype=getattr(nx, dt)), mx.array(vals, dtype=getattr(mx, dt))
    for op in ["sum", "prod", "mean", "max", "min", "cumsum", "cumprod"]:
        a, b = getattr(nx, op)(ours), getattr(mx, op)(theirs)
        assert dt_name(a.dtype) == dt_name(b.dtype), op
        np.testing.assert_allclose(np.array(a.astype(nx.float32)), np.array(b.astype(mx.float32)),
                                   err_msg=op)
    m = [[1, 0], [1, 1]]
    a = nx.trace(nx.array(m, dtype=getattr(nx, dt)))
    b = mx.trace(mx.array(m, dtype=getattr(mx, dt)))
    assert dt_name(a.dtype) == dt_name(b.dtype) and a.item() == b.item()


def test_cumprod_of_bool_is_a_running_all():
    x = nx.array([[True, True, False, True], [True, True, True, True]])
    r = nx.cumprod(x, axis=1)
    assert r.dtype == nx.bool_
    np.testing.assert_array_equal(np.array(r), np.logical_and.accumulate(np.array(x), axis=1))
    r = nx.cumprod(x, axis=1, reverse=True, inclusive=False)
    assert r.dtype == nx.bool_
    want = np.flip(np.logical_and.accumulate(np.flip(np.array(x), 1), axis=1), 1)
    want = np.concatenate([want[:, 1:], np.ones((2, 1), bool)], axis=1)
    np.testing.assert_array_equal(np.array(r), want)
    assert nx.cumsum(x).dtype == nx.int32


def loss_first(t):
    return nx.sum(t[0] * 2)


@pytest.mark.parametrize("arg", [(nx.array([1.0]), 3), (nx.array([1.0]), "a"),
                                 [nx.array([1.0]), None], {"w": nx.array(1.0), "n": 2.0}])
def test_grad_over_non_array_leaves_raises(arg):
    f = (lambda t: nx.sum(t["w"])) if isinstance(arg, dict) else loss_first
    with pytest.raises(ValueError, match=r"\[tree_flatten\] The argument should contain only arrays"):
        nx.grad(f)(arg)
    with pytest.raises(ValueError, match=r"\[tree_flatten\]"):
        nx.value_and_grad(f)(arg)


def test_grad_non_array_leaves_keyword_and_undifferentiated():
    f = lambda x, y: nx.sum(x["a"])
    with pytest.raises(ValueError, match=r"\[tree_flatten\]"):
        nx.grad(f, argnames="x", argnums=[])(x={"a": nx.array(1.0), "b": 2}, y=1)
    with pytest.raises(ValueError, match=r"\[tree_flatten\]"):
        nx.grad(lambda x: x)(3.0)
    # A non-array argument that is not differentiated is fine, as in MLX.
    g = nx.grad(lambda x, n: nx.sum(x) * n)(nx.array([1.0, 2.0]), 3)
    np.testing.assert_array_equal(np.array(g), [3.0, 3.0])
    g = nx.grad(lambda t: nx.sum(t[0]) + nx.sum(t[1]["b"]))(
        (nx.array([1.0]), {"b": nx.array([2.0, 3.0])}))
    np.testing.assert_array_equal(np.array(g[1]["b"]), [1.0, 1.0])


def test_grad_non_array_leaves_as_mlx():
    mx = mlx_or_skip()
    for lib in (mx, nx):
        with pytest.raises(ValueError, match=r"\[tree_flatten\]"):
            lib.grad(lambda t: lib.sum(t[0]))((lib.array([1.0]), 3))


def assign(lib, target, key, value):
    a = target
    a[key] = value
    return a


SETITEM = [  # (target, key, value): value broadcasts after its leading 1s are dropped
    ("scalar", Ellipsis, [5]),
    ("scalar", Ellipsis, [[5]]),
    ("matrix", 0, [[5, 6]]),
    ("matrix", slice(None), [[[5, 6]]]),
    ("matrix", (None, 0), [[[5, 6]]]),
    ("matrix", "idx", [[[5, 6]]]),
    ("matrix", "mask", [[7, 8]]),
]


def make(lib, target, key, value):
    t = lib.array(1) if target == "scalar" else lib.zeros((2, 2))
    k = {"idx": lib.array([0, 1]), "mask": lib.array([True, False])}.get(key, key) \
        if isinstance(key, str) else key
    return t, k, lib.array(value)


@pytest.mark.parametrize("case", range(len(SETITEM)))
def test_setitem_drops_leading_unit_dims(case):
    target, key, value = SETITEM[case]
    t, k, v = make(nx, target, key, value)
    n = np.array(t)
    nk = {"idx": np.array([0, 1]), "mask": np.array([True, False])}.get(key, key) \
        if isinstance(key, str) else key
    nv = np.array(value)
    while nv.ndim > n[nk].ndim and nv.shape[0] == 1:
        nv = nv[0]
    n[nk] = nv
    r = assign(nx, t, k, v)
    assert r.dtype == (nx.int32 if target == "scalar" else nx.float32)
    np.testing.assert_array_equal(np.array(r), n)


@pytest.mark.parametrize("case", range(len(SETITEM)))
def test_setitem_broadcasting_as_mlx(case):
    mx = mlx_or_skip()
    target, key, value = SETITEM[case]
    ours, theirs = assign(nx, *make(nx, target, key, value)), assign(mx, *make(mx, target, key, value))
    np.testing.assert_array_equal(np.array(ours), np.array(theirs))


@pytest.mark.parametrize("value", [[[5], [6]], [[[5, 6]], [[5, 6]]]])
def test_setitem_non_unit_extra_dims_raise(value):
    a = nx.zeros((2, 2))
    with pytest.raises(ValueError, match="broadcast"):
        a[0] = nx.array(value)
    np.testing.assert_array_equal(np.array(a), np.zeros((2, 2)))


BAD_LISTS = [
    lambda lib: [lib.array([1, 2]), lib.array([1])],
    lambda lib: [lib.array([[1, 2]]), lib.array([1, 2])],
    lambda lib: [lib.array([1, 2]), [1, 2, 3]],
    lambda lib: [[1, 2], [1]],
    lambda lib: [[1, 2], 3],
]


@pytest.mark.parametrize("case", range(len(BAD_LISTS)))
def test_construction_of_non_uniform_lists_raises(case):
    with pytest.raises(ValueError, match="Initialization encountered non-uniform length"):
        nx.array(BAD_LISTS[case](nx))


@pytest.mark.parametrize("case", range(len(BAD_LISTS)))
def test_construction_of_non_uniform_lists_as_mlx(case):
    mx = mlx_or_skip()
    with pytest.raises(ValueError, match="Initialization encountered non-uniform length"):
        mx.array(BAD_LISTS[case](mx))


PRINT_CASES = [
    lambda lib: lib.array([1.123456789, 2.5]),
    lambda lib: lib.array(3.14159),
    lambda lib: lib.array([[1.5, -2.25], [1e3, 0.0]]),
    lambda lib: lib.array([1.0, 2.0], dtype=lib.float16),
    lambda lib: lib.array([1 + 2j, -0.5 - 1j], dtype=lib.complex64),
    lambda lib: lib.array([1, 2]),
    lambda lib: lib.array([True, False]),
]


def reprs(lib, precision):
    with lib.printoptions(precision=precision):
        inside = [repr(c(lib)) for c in PRINT_CASES]
    return inside


@pytest.mark.parametrize("precision", [0, 2, 3, 7])
def test_printoptions_fixed_decimals(precision):
    before = [repr(c(nx)) for c in PRINT_CASES]
    got = reprs(nx, precision)
    assert got[0] == f"array([{1.123456789:.{precision}f}, {2.5:.{precision}f}], dtype=float32)"
    assert got[5] == "array([1, 2], dtype=int32)" and got[6] == before[6]
    assert [repr(c(nx)) for c in PRINT_CASES] == before  # restored on exit
    assert nx.get_printoptions().precision == -1


def test_set_and_get_printoptions():
    try:
        nx.set_printoptions(precision=2)
        assert nx.get_printoptions().precision == 2
        assert repr(nx.array([1.0, 2.345])) == "array([1.00, 2.35], dtype=float32)"
        with nx.printoptions(precision=4):
            assert nx.get_printoptions().precision == 4
        assert nx.get_printoptions().precision == 2
        nx.set_printoptions(precision=10**30)  # huge: capped, never a crash
        assert len(repr(nx.array([1e38]))) < 1000
    finally:
        nx.set_printoptions()
    assert nx.get_printoptions().precision == -1
    assert repr(nx.array([1.5, 2.0])) == "array([1.5, 2], dtype=float32)"
    with pytest.raises(TypeError):
        nx.set_printoptions(precision=1.5)
    with pytest.raises(TypeError):
        nx.printoptions(precision="3")


@pytest.mark.parametrize("precision", [-1, 0, 2, 3, 7])
def test_printoptions_as_mlx(precision):
    mx = mlx_or_skip()
    assert reprs(nx, precision) == reprs(mx, precision)


MVN = [  # (mean, cov, shape)
    ([1.0, 2.0], [[2.0, 0.5], [0.5, 1.0]], (3,)),
    ([1.0, 2.0], [[2.0, 0.5], [0.5, 1.0]], ()),
    (np.ones((3, 2)).tolist(), [[2.0, 0.5], [0.5, 1.0]], (4, 3)),
    ([0.0, 0.0, 0.0], np.diag([1.0, 4.0, 0.0]).tolist(), (5,)),  # singular: still PSD
    ([0.5], [[[2.0]], [[3.0]]], ()),  # batched cov
]


def test_multivariate_normal_signature():
    import inspect
    params = list(inspect.signature(nx.random.multivariate_normal).parameters)
    assert params == ["mean", "cov", "shape", "dtype", "key", "stream"]


@pytest.mark.parametrize("case", range(len(MVN)))
def test_multivariate_normal_shapes_and_moments(case):
    mean, cov, shape = MVN[case]
    r = nx.random.multivariate_normal(nx.array(mean), nx.array(cov), shape, key=nx.random.key(5))
    m, c = np.array(mean), np.array(cov)
    want = np.broadcast_shapes(tuple(shape), m.shape[:-1], c.shape[:-2]) + (m.shape[-1],)
    assert r.shape == want and r.dtype == nx.float32
    # The draw is mean + z @ sqrt(cov) with z = normal(shape + (n,)) at the same key.
    z = np.array(nx.random.normal(want, key=nx.random.key(5))).astype(np.float64)
    w, v = np.linalg.eigh(c)
    root = (v * np.sqrt(np.clip(w, 0, None))[..., None, :]) @ np.swapaxes(v, -1, -2)
    np.testing.assert_allclose(np.array(r), m + (z[..., None, :] @ root)[..., 0, :],
                               rtol=1e-5, atol=1e-5)


def test_multivariate_normal_distribution():
    cov = np.array([[2.0, 0.6, 0.0], [0.6, 1.0, -0.3], [0.0, -0.3, 0.5]])
    r = np.array(nx.random.multivariate_normal(nx.array([1.0, -1.0, 0.0]), nx.array(cov),
                                               (20000,), key=nx.random.key(0)))
    np.testing.assert_allclose(r.mean(0), [1.0, -1.0, 0.0], atol=0.05)
    np.testing.assert_allclose(np.cov(r.T), cov, atol=0.06)


@pytest.mark.parametrize("args,msg", [
    ((nx.array(1.0), nx.eye(2)), "mean must have at least one dimension"),
    ((nx.array([1.0, 2.0]), nx.array([1.0, 2.0])), "cov must have at least two dimensions"),
    ((nx.array([1.0, 2.0]), nx.ones((3, 3))), "compatible shapes"),
    ((nx.array([1.0, 2.0]), nx.ones((2, 3))), "compatible shapes|must be equal"),
    ((nx.ones((2, 2)), nx.ones((3, 2, 2))), "broadcast"),
])
def test_multivariate_normal_errors(args, msg):
    with pytest.raises(ValueError, match=msg):
        nx.random.multivariate_normal(*args, key=nx.random.key(0))
    with pytest.raises(ValueError, match="dtype must be float32"):
        nx.random.multivariate_normal(nx.zeros(2), nx.eye(2), dtype=nx.float16)


@pytest.mark.parametrize("case", range(len(MVN)))
def test_multivariate_normal_as_mlx(case):
    mx = mlx_or_skip()
    mean, cov, shape = MVN[case]
    a = nx.random.multivariate_normal(nx.array(mean), nx.array(cov), shape, key=nx.random.key(1))
    b = mx.random.multivariate_normal(mx.array(mean), mx.array(cov), shape, key=mx.random.key(1))
    assert a.shape == b.shape
    np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-5)


def test_random_state_is_the_key_sequence():
    st = nx.random.state
    assert isinstance(st, list) and len(st) == 1
    nx.random.seed(3)
    np.testing.assert_array_equal(np.array(st[0]), [0, 3])
    a = np.array(nx.random.uniform(shape=(4,)))
    after = np.array(st[0])
    assert not np.array_equal(after, [0, 3])
    # The draw used the second half of split(key(3)); the state holds the first.
    pair = np.array(nx.random.split(nx.random.key(3)))
    np.testing.assert_array_equal(after, pair[0])
    np.testing.assert_array_equal(a, np.array(nx.random.uniform(shape=(4,), key=nx.array(pair[1]))))
    st[0] = nx.random.key(3)  # writable, as MLX's
    np.testing.assert_array_equal(np.array(nx.random.uniform(shape=(4,))), a)
    saved = st[0]
    st[0] = "not a key"
    with pytest.raises(TypeError, match="random.state"):
        nx.random.normal((2,))
    st[0] = saved


def test_random_state_captured_by_compile_draws_fresh_numbers():
    st = nx.random.state
    nx.random.seed(7)
    f = nx.compile(lambda x: x + nx.random.uniform(shape=(3,)), inputs=[st], outputs=[st])
    a, b = np.array(f(nx.zeros(3))), np.array(f(nx.zeros(3)))
    assert not np.array_equal(a, b)
    nx.random.seed(7)
    np.testing.assert_array_equal(np.array(nx.random.uniform(shape=(3,))), a)
    np.testing.assert_array_equal(np.array(nx.random.uniform(shape=(3,))), b)


def test_random_state_as_mlx():
    mx = mlx_or_skip()
    out = []
    for lib in (nx, mx):
        lib.random.seed(11)
        f = lib.compile(lambda x: x * lib.random.normal((2,)), inputs=[lib.random.state],
                        outputs=[lib.random.state])
        out.append([np.array(f(lib.ones(2))) for _ in range(3)] +
                   [np.array(lib.random.uniform(shape=(3,))), np.array(lib.random.state[0])])
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["var", "std"])
def test_complex_var_std_are_real(op):
    v = [[1 + 2j, 3 - 1j, -2 + 0.5j], [0j, 1j, 2 + 2j]]
    for kw in [{}, {"axis": 0, "ddof": 1}, {"axis": 1, "keepdims": True}]:
        r = getattr(nx, op)(nx.array(v, dtype=nx.complex64), **kw)
        assert r.dtype == nx.float32
        np_kw = {"axis": kw.get("axis"), "ddof": kw.get("ddof", 0), "keepdims": kw.get("keepdims", False)}
        np.testing.assert_allclose(np.array(r), getattr(np, op)(np.array(v), **np_kw), rtol=1e-5)
        try:
            import mlx.core as mx
        except ImportError:
            continue
        if kw == {}:
            m = getattr(mx, op)(mx.array(v, dtype=mx.complex64))
            assert dt_name(m.dtype) == "float32"
            np.testing.assert_allclose(np.array(r), np.array(m), rtol=1e-5)


def test_complex_median_as_mlx():
    v = [[1 + 2j, 3 - 1j, -2 + 0.5j, 0j], [0j, 5j, 1, 1 - 1j]]
    a = nx.median(nx.array(v, dtype=nx.complex64), axis=1)
    assert a.dtype == nx.complex64
    np.testing.assert_allclose(np.array(a), np.median(np.array(v), axis=1), rtol=1e-6)
    mx = mlx_or_skip()
    for kw in [{}, {"axis": 0}, {"axis": 1, "keepdims": True}]:
        a = nx.median(nx.array(v, dtype=nx.complex64), **kw)
        b = mx.median(mx.array(v, dtype=mx.complex64), **kw)
        assert dt_name(a.dtype) == dt_name(b.dtype) and a.shape == b.shape
        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-6)


def test_complex_logaddexp_as_mlx():
    a = [1 + 3j, 100 + 1j, -1e3 + 1j, 2 - 3j, float("-inf") + 0j, 1 + 1j]
    b = [0.5 + 3j, 99 + 2j, 0j, 2.5 - 3.1j, float("-inf") + 0j, 2.0]
    r = nx.logaddexp(nx.array(a, dtype=nx.complex64), nx.array(b, dtype=nx.complex64))
    assert r.dtype == nx.complex64
    mx = mlx_or_skip()
    m = mx.logaddexp(mx.array(a, dtype=mx.complex64), mx.array(b, dtype=mx.complex64))
    np.testing.assert_allclose(np.array(r), np.array(m), rtol=1e-6)
    assert repr(nx.array([complex(1, float("nan")), complex(1, -0.0)])) == \
        repr(mx.array([complex(1, float("nan")), complex(1, -0.0)]))
