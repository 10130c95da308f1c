"""Every bound op against NumPy for values (computed in float64) and against mlx.core for
result dtypes: unary and binary element-wise ops over dtypes, broadcasting, strided views and
edge values; operators with MLX's weak Python scalars and in-place forms; creation, shape,
indexing-family and product ops with MLX's keyword arguments; array methods."""
import itertools
import math

import numpy as np
import pytest

import nuvec as nv
from conftest import DTYPES, FLOATS, INTS, NP, assert_close, dt, rand, sample

mx = pytest.importorskip("mlx.core")

UNARY = {
    "abs": np.abs, "negative": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "sign": np.sign, "reciprocal": lambda x: 1 / x, "floor": np.floor, "ceil": np.ceil,
    "square": np.square, "rsqrt": lambda x: 1 / np.sqrt(x), "expm1": np.expm1, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "tanh": np.tanh, "arcsinh": np.arcsinh, "arccosh": np.arccosh,
    "arctanh": np.arctanh, "degrees": np.degrees, "radians": np.radians,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "isnan": np.isnan, "isinf": np.isinf,
    "isfinite": np.isfinite, "logical_not": np.logical_not, "positive": np.positive,
    "isposinf": np.isposinf, "isneginf": np.isneginf,
}
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power, "arctan2": np.arctan2,
    "logaddexp": np.logaddexp, "equal": np.equal, "not_equal": np.not_equal,
    "greater": np.greater, "greater_equal": np.greater_equal, "less": np.less,
    "less_equal": np.less_equal, "logical_and": np.logical_and, "logical_or": np.logical_or,
    "floor_divide": np.floor_divide, "remainder": np.remainder,
}
REAL = [d for d in DTYPES if d not in ("complex64",)]


def nm(d):
    """A dtype's short name ("float32", "bool"), from nuvec's or MLX's."""
    return str(d).split(".")[-1]


def mlx_dtype(name, *arrays):
    """The dtype MLX gives for op `name` on arrays of these dtypes (None when MLX refuses)."""
    args = [mx.array(np.ones((1,), dtype=np.float32)).astype(getattr(mx, nm(a.dtype).replace("bool", "bool_")))
            for a in arrays]
    try:
        return nm(getattr(mx, name)(*args).dtype)
    except Exception:
        return None


def f64(a):
    a = np.asarray(a)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_ops_match_numpy_and_mlx_dtypes(op, rng):
    for name in sample(REAL, 5, op):
        a = rand(rng, (3, 5), name)
        if op in ("sqrt", "log", "log2", "log10", "rsqrt", "arccosh"):
            a = np.abs(a) + (1 if name not in ("bool_",) else 0)
        if op in ("log1p", "arcsin", "arccos", "arctanh"):
            a = (a if name in FLOATS else np.abs(a) % 2).astype(NP[name]) / (8 if name in FLOATS else 1)
        if name in INTS and op in ("abs", "negative", "square", "sign"):
            a = a.astype(NP[name])
        x = nv.array(a, dt(name))
        try:
            got = getattr(nv, op)(x)
        except ValueError:
            assert mlx_dtype(op, x) is None, (op, name)
            continue
        want_dt = mlx_dtype(op, x)
        if want_dt is not None:
            assert nm(got.dtype) == want_dt, (op, name)
        with np.errstate(all="ignore"):
            want = UNARY[op](f64(a) if name not in ("bool_",) or op in ("logical_not", "isnan", "isinf", "isfinite", "positive", "isposinf", "isneginf") else f64(a))
        g = np.array(got)
        if g.dtype.kind in "biu" and np.asarray(want).dtype.kind == "f":
            want = np.asarray(want).astype(g.dtype)
        assert_close(g, want, want_dt if want_dt in FLOATS else str(g.dtype) if g.dtype.kind == "f" else None)
        # the same through the method where MLX has one, and on a strided view
        if hasattr(mx.array, op):
            assert_close(np.array(getattr(x, op)()), g, str(g.dtype) if g.dtype.kind == "f" else None)
        assert_close(np.array(getattr(nv, op)(x.T)), g.T, str(g.dtype) if g.dtype.kind == "f" else None)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_ops_match_numpy_and_broadcast(op, rng):
    pairs = sample(list(itertools.product(REAL, REAL)), 6, op)
    for da, db in pairs + [("float32", "float32"), ("int32", "int32")]:
        a, b = rand(rng, (4, 1, 3), da), rand(rng, (5, 1), db)
        if op in ("divide", "floor_divide", "remainder") and db not in FLOATS:
            b = np.where(b == 0, 1, b).astype(NP[db])
        if op == "power":
            if db in INTS or db == "bool_":
                b = (np.abs(b.astype(np.int64)) % 4).astype(NP[db])
            if da in FLOATS:
                a = np.abs(a).astype(NP[da])
        x, y = nv.array(a, dt(da)), nv.array(b, dt(db))
        try:
            got = getattr(nv, op)(x, y)
        except ValueError:
            assert mlx_dtype(op, x, y) is None, (op, da, db)
            continue
        want_dt = mlx_dtype(op, x, y)
        if want_dt is not None:
            assert nm(got.dtype) == want_dt, (op, da, db)
        rd = nm(got.dtype).replace("bool", "bool_")
        if rd in FLOATS:
            with np.errstate(all="ignore"):
                want = BINARY[op](f64(a), f64(b))
            assert_close(np.array(got), want.astype(NP[rd]), rd)
        elif rd == "bool_" and op == "subtract":  # MLX computes it in bool: a != b
            assert_close(np.array(got), a ^ b)
        else:
            with np.errstate(all="ignore"):
                want = BINARY[op](a.astype(NP[rd]) if rd != "bool_" else a, b.astype(NP[rd]) if rd != "bool_" else b)
            assert_close(np.array(got), np.asarray(want).astype(NP[rd]))


def test_edge_values_follow_numpy():
    a = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0], np.float32)
    x = nv.array(a)
    with np.errstate(all="ignore"):
        assert_close(np.array(x / 0.0), a / np.float32(0))
        assert_close(np.array(nv.maximum(x, 0.0)), np.maximum(a, 0))
        assert_close(np.array(nv.exp(x)), np.exp(a))
    assert np.signbit(np.array(-x)[4]) and not np.signbit(np.array(-x)[3])
    i = nv.array([np.iinfo(np.int32).max, np.iinfo(np.int32).min], nv.int32)
    assert (i + 1).tolist() == [np.iinfo(np.int32).min, np.iinfo(np.int32).min + 1]
    assert (i // -1).tolist()[1] == np.iinfo(np.int32).min
    assert (nv.array([7, -7]) // 0).tolist() == [0, 0]
    assert (nv.array([7, -7]) % 0).tolist() == [7, -7]
    assert (nv.array([1], nv.int32) << 40).tolist() == [0]
    assert nv.array(1) / 0 == float("inf")


def test_weak_scalars_keep_the_array_dtype():
    h = nv.array([1, 2], nv.float16)
    assert (h + 1.5).dtype == nv.float16 and (1 + h).dtype == nv.float16
    assert (h * 2).dtype == nv.float16 and (2 ** h).dtype == nv.float16
    assert (nv.array([1], nv.int8) + True).dtype == nv.int8
    assert (nv.array([True]) + True).dtype == nv.bool_
    assert (nv.array([True]) + 1).dtype == nv.int32
    assert (nv.array([1], nv.int32) + 1.5).dtype == nv.float32
    assert (nv.array([1], nv.uint8) + 200).tolist() == [201]
    assert (nv.array([1.0]) + 1j).dtype == nv.complex64
    assert nv.add(1, 2).dtype == nv.int32 and nv.add(1, 2.0).dtype == nv.float32
    assert (nv.array([1], nv.int64) + 2**40).tolist() == [2**40 + 1]
    with pytest.raises(ValueError, match="Converting -1 to uint8"):
        nv.array([1], nv.uint8) + (-1)
    with pytest.raises(ValueError, match="int32 would result in overflow"):
        nv.array([1]) + 2**40
    assert (h < 1.5).dtype == nv.bool_


def test_operators_match_numpy(rng):
    a, b = rand(rng, (3, 4), "int32"), rand(rng, (4,), "int32")
    b = np.where(b == 0, 3, b).astype(np.int32)
    x, y = nv.array(a), nv.array(b)
    cases = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide,
             "%": np.remainder, "&": np.bitwise_and, "|": np.bitwise_or, "^": np.bitwise_xor,
             "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
             "==": np.equal, "!=": np.not_equal}
    for sym, f in cases.items():
        assert_close(np.array(eval(f"x {sym} y")), f(a, b))
        assert_close(np.array(eval(f"3 {sym} y")), f(np.int32(3), b))
    assert_close(np.array(x / y), a / b.astype(np.float64), "float32")
    assert_close(np.array(x << 2), a << 2)
    assert_close(np.array(x >> 1), a >> 1)
    assert_close(np.array(~x), ~a)
    assert_close(np.array(-x), -a)
    assert_close(np.array(abs(x)), abs(a))
    assert_close(np.array(x ** 2), a ** 2)
    f = nv.array(rand(rng, (3, 4), "float32"))
    g = nv.array(rand(rng, (4, 2), "float32"))
    assert_close(np.array(f @ g), np.array(f).astype(np.float64) @ np.array(g), "float32")


def test_inplace_operators_rebind_the_object_as_mlx():
    a = nv.array([1, 2])
    b = a
    a += 1
    assert a is b and b.tolist() == [2, 3]
    c = nv.array([1, 2], nv.int8)
    c += 1.5
    assert c.dtype == nv.float32 and c.tolist() == [2.5, 3.5]
    for op in ("-=", "*=", "//=", "%=", "**=", "&=", "|=", "^=", "<<=", ">>="):
        z = nv.array([6, 7])
        w = z
        exec(f"z {op} 2")
        assert w is z
        want = np.array([6, 7])
        exec(f"want {op} 2")
        assert z.tolist() == want.tolist()
    m = nv.ones((2, 2))
    m @= nv.ones((2, 2))
    assert m.tolist() == [[2, 2], [2, 2]]


def test_creation_ops_match_numpy():
    assert_close(np.array(nv.zeros((2, 3))), np.zeros((2, 3)))
    assert nv.zeros(3).dtype == nv.float32 and nv.ones((2,), dtype=nv.int8).dtype == nv.int8
    assert nv.full((2,), 1.5).dtype == nv.float32 and nv.full((2,), 1).dtype == nv.int32
    assert_close(np.array(nv.full((2, 2), nv.array([1, 2]))), np.array([[1, 2], [1, 2]]))
    assert nv.full((2,), 3, dtype=nv.float16).dtype == nv.float16
    x = nv.array([[1, 2]], nv.uint8)
    assert nv.zeros_like(x).dtype == nv.uint8 and nv.ones_like(x, dtype=nv.float32).dtype == nv.float32
    assert nv.full_like(x, 7).tolist() == [[7, 7]]
    assert nv.arange(5).dtype == nv.int32 and nv.arange(0.0, 5).dtype == nv.float32
    assert_close(np.array(nv.arange(1, 10, 3)), np.arange(1, 10, 3))
    assert_close(np.array(nv.arange(5, 0, -1.5)), np.arange(5, 0, -1.5), "float32")
    assert_close(np.array(nv.arange(start=0, stop=4, step=2, dtype=nv.int64)), np.arange(0, 4, 2))
    assert_close(np.array(nv.linspace(0, 1, 5)), np.linspace(0, 1, 5), "float32")
    assert_close(np.array(nv.linspace(0, 1, 4, endpoint=False)), np.linspace(0, 1, 4, endpoint=False), "float32")
    assert_close(np.array(nv.eye(3, 4, k=1)), np.eye(3, 4, k=1))
    assert_close(np.array(nv.identity(3, dtype=nv.int32)), np.identity(3))
    assert_close(np.array(nv.tri(3, 4, k=0)), np.tri(3, 4, k=0))
    assert_close(np.array(nv.tril(nv.ones((3, 3)), k=-1)), np.tril(np.ones((3, 3)), -1))
    assert_close(np.array(nv.triu(nv.ones((3, 3)))), np.triu(np.ones((3, 3))))
    for w, f in (("hanning", np.hanning), ("hamming", np.hamming), ("bartlett", np.bartlett),
                 ("blackman", np.blackman)):
        assert_close(np.array(getattr(nv, w)(7)), f(7), "float32")
    with pytest.raises(ValueError):
        nv.arange(0, 10, 0)


def test_shape_ops_match_numpy(rng):
    a = rand(rng, (2, 3, 4), "float32")
    x = nv.array(a)
    checks = [
        (nv.reshape(x, (4, 6)), a.reshape(4, 6)), (x.reshape(6, -1), a.reshape(6, -1)),
        (x.reshape((24,)), a.reshape(24)), (nv.transpose(x, (2, 0, 1)), a.transpose(2, 0, 1)),
        (x.transpose(1, 0, 2), a.transpose(1, 0, 2)), (x.transpose(), a.T),
        (nv.permute_dims(x, [1, 2, 0]), a.transpose(1, 2, 0)),
        (nv.broadcast_to(nv.array(a[0, 0]), (3, 4)), np.broadcast_to(a[0, 0], (3, 4))),
        (nv.expand_dims(x, [0, 2]), np.expand_dims(a, (0, 2))),
        (nv.squeeze(nv.expand_dims(x, 1)), a), (nv.expand_dims(x, 1).squeeze(1), a),
        (x.flatten(), a.flatten()), (nv.flatten(x, 1), a.reshape(2, 12)),
        (nv.unflatten(x, 2, (2, 2)), a.reshape(2, 3, 2, 2)),
        (nv.swapaxes(x, 0, 2), a.swapaxes(0, 2)), (x.moveaxis(0, -1), np.moveaxis(a, 0, -1)),
        (nv.flip(x, axis=1), np.flip(a, 1)), (nv.flip(x), np.flip(a)),
        (nv.concatenate([x, x], axis=1), np.concatenate([a, a], 1)),
        (nv.concatenate([x, x], axis=None), np.concatenate([a.ravel(), a.ravel()])),
        (nv.concat([x, x]), np.concatenate([a, a])),
        (nv.stack([x, x], axis=-1), np.stack([a, a], -1)),
        (nv.repeat(x, 2, axis=1), np.repeat(a, 2, 1)), (nv.repeat(x, 2), np.repeat(a, 2)),
        (nv.tile(x, (2, 1, 1)), np.tile(a, (2, 1, 1))), (nv.tile(x, 2), np.tile(a, 2)),
        (nv.pad(x, 1), np.pad(a, 1)), (nv.pad(x, ((0, 1), (1, 0), (2, 2))), np.pad(a, ((0, 1), (1, 0), (2, 2)))),
        (nv.pad(x, (1, 2), mode="edge"), np.pad(a, (1, 2), mode="edge")),
        (nv.pad(x, 1, constant_values=5.0), np.pad(a, 1, constant_values=5)),
        (nv.roll(x, 2), np.roll(a, 2)), (nv.roll(x, (1, 2), axis=(0, 2)), np.roll(a, (1, 2), (0, 2))),
        (nv.diff(x), np.diff(a)), (nv.diff(x, n=2, axis=0), np.diff(a, 2, 0)),
        (nv.diagonal(x, 1, 1, 2), np.diagonal(a, 1, 1, 2)), (x[0].diagonal(), np.diagonal(a[0])),
        (nv.diag(nv.array(a[0, 0])), np.diag(a[0, 0])), (nv.atleast_3d(nv.array(a[0, 0])), np.atleast_3d(a[0, 0])),
        (nv.as_strided(x, (3, 2), (1, 4)), np.lib.stride_tricks.as_strided(a, (3, 2), (4, 16))),
        (nv.contiguous(x.T), a.T), (nv.astype(x, nv.float16), a.astype(np.float16)),
        (x.view(nv.int32), a.view(np.int32)), (nv.where(x > 0, x, 0.0), np.where(a > 0, a, 0)),
        (nv.clip(x, -1, 1), np.clip(a, -1, 1)), (nv.clip(x, None, 1), np.minimum(a, 1)),
        (nv.round(x, 1), np.round(a, 1)), (x.round(), np.round(a)),
        (nv.nan_to_num(nv.array([np.nan, np.inf])), np.nan_to_num(np.array([np.nan, np.inf], np.float32))),
        (nv.sum(x), a.sum()), (x.sum(axis=(0, 2)), a.sum((0, 2))), (x.sum(-1, keepdims=True), a.sum(-1, keepdims=True)),
    ]
    for got, want in checks:
        assert_close(np.array(got), want, str(np.asarray(want).dtype) if np.asarray(want).dtype.kind == "f" else None)
    parts = nv.split(x, 2, axis=2)
    assert isinstance(parts, list) and len(parts) == 2
    for p, q in zip(parts, np.split(a, 2, 2)):
        assert_close(np.array(p), q)
    for p, q in zip(x.split([1, 3], axis=2), np.split(a, [1, 3], 2)):
        assert_close(np.array(p), q)
    for p, q in zip(nv.unstack(x, axis=1), [a[:, i] for i in range(3)]):
        assert_close(np.array(p), q)
    b1, b2 = nv.broadcast_arrays(nv.array([1, 2]), nv.array([[1], [2]]))
    assert b1.shape == b2.shape == (2, 2)
    g = nv.meshgrid(nv.array([1, 2]), nv.array([3, 4, 5]), indexing="ij")
    for p, q in zip(g, np.meshgrid([1, 2], [3, 4, 5], indexing="ij")):
        assert_close(np.array(p), q)
    q, r = nv.divmod(nv.array([7, -7]), 3)
    assert q.tolist() == [2, -3] and r.tolist() == [1, 2]
    assert nv.isclose(nv.array([1.0, np.nan]), nv.array([1.0 + 1e-7, np.nan]), equal_nan=True).tolist() == [True, True]
    assert nv.allclose(x, x + 1e-9).item() and not nv.array_equal(x, x + 1).item()
    (d,) = nv.depends([x], [x + 1])
    assert_close(np.array(d), a)


def test_indexing_family_ops(rng):
    a = rand(rng, (4, 5), "float32")
    x = nv.array(a)
    i = np.array([3, 0, 1])
    assert_close(np.array(nv.take(x, nv.array(i), axis=1)), np.take(a, i, 1))
    assert_close(np.array(nv.take(x, nv.array(i))), np.take(a, i))
    assert_close(np.array(nv.take(x, 2, axis=0)), a[2])
    idx = np.argsort(a, axis=1)
    assert_close(np.array(nv.take_along_axis(x, nv.array(idx), axis=1)), np.take_along_axis(a, idx, 1))
    assert_close(np.array(nv.take_along_axis(x, nv.array(i), axis=None)), np.take_along_axis(a.ravel(), i, 0))
    want = a.copy()
    np.put_along_axis(want, idx[:, :1], 0.0, axis=1)
    assert_close(np.array(nv.put_along_axis(x, nv.array(idx[:, :1]), nv.array(0.0), axis=1)), want)
    assert_close(np.array(nv.slice(x, nv.array([1, 2]), [0, 1], [2, 2])), a[1:3, 2:4])
    assert_close(np.array(nv.slice_update(x, nv.zeros((1, 2)), nv.array([1, 1]), [0, 1])),
                 np.where(np.isin(np.arange(20).reshape(4, 5), [6, 7]), 0, a))
    with pytest.raises(ValueError, match="take"):
        nv.take(x, nv.array([1.5]))


def test_products_match_numpy(rng):
    a, b, c = (rand(rng, s, "float32") for s in ((3, 4), (4, 5), (3, 5)))
    x, y, z = nv.array(a), nv.array(b), nv.array(c)
    A, B, C = (v.astype(np.float64) for v in (a, b, c))
    assert_close(np.array(nv.matmul(x, y)), A @ B, "float32")
    assert_close(np.array(nv.addmm(z, x, y, alpha=2.0, beta=0.5)), 2 * A @ B + 0.5 * C, "float32")
    assert_close(np.array(nv.tensordot(x, y, axes=1)), np.tensordot(A, B, 1), "float32")
    assert_close(np.array(nv.tensordot(x, y, axes=([1], [0]))), np.tensordot(A, B, ([1], [0])), "float32")
    assert_close(np.array(nv.inner(x, x)), np.inner(A, A), "float32")
    assert_close(np.array(nv.outer(x[0], y[0])), np.outer(A[0], B[0]), "float32")
    assert_close(np.array(nv.kron(x, x)), np.kron(A, A), "float32")
    assert_close(np.array(nv.vecdot(x, x, axis=0)), (A * A).sum(0), "float32")
    with pytest.raises(ValueError, match="matmul"):
        nv.matmul(x, x)


def test_keyword_names_as_mlx():
    x = nv.arange(6.0).reshape(2, 3)
    assert nv.sum(a=x, axis=1, keepdims=True).shape == (2, 1)
    assert nv.reshape(x, shape=(3, 2)).shape == (3, 2)
    assert nv.transpose(x, axes=[1, 0]).shape == (3, 2)
    assert nv.moveaxis(x, source=0, destination=1).shape == (3, 2)
    assert nv.clip(x, a_min=1, a_max=2).tolist() == [[1, 1, 2], [2, 2, 2]]
    assert nv.zeros(shape=(2,), dtype=nv.int8).dtype == nv.int8
    assert nv.eye(n=2, m=3, k=1, dtype=nv.int32).shape == (2, 3)
    assert nv.take(x, indices=nv.array([0]), axis=1).shape == (2, 1)
    assert "stream" in nv.add.__doc__ and nv.add.__name__ == "add"
    assert x.sum(axis=0, stream=nv.cpu).tolist() == [3, 5, 7]
    assert x.astype(nv.int32, stream=nv.cpu).dtype == nv.int32


REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean,
          "all": np.all, "any": np.any, "logsumexp": lambda a, axis=None, keepdims=False:
          np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdims)), "median": np.median,
          "var": np.var, "std": np.std}


@pytest.mark.parametrize("op", sorted(REDUCE))
def test_reductions_match_numpy(op, rng):
    for name in sample(["float32", "float64", "int32", "float16"], 2, op):
        a = rand(rng, (3, 4, 5), name)
        x = nv.array(a, dt(name))
        for axis, keep in ((None, False), (1, True), ((0, 2), False), (-1, False)):
            got = getattr(nv, op)(x, axis=axis, keepdims=keep)
            # Integer sums and products wrap in the type (the float64 reference would saturate).
            ref = a.astype(np.int64) if op in ("sum", "prod") and name == "int32" else f64(a)
            want = REDUCE[op](ref, axis=axis, keepdims=keep)
            want_dt = mlx_dtype(op, x)
            if want_dt is not None and op not in ("sum", "prod"):
                assert nm(got.dtype) == want_dt, (op, name)
            rd = nm(got.dtype).replace("bool", "bool_")
            if rd in INTS or rd == "bool_":
                assert_close(np.array(got), np.asarray(want).astype(NP[rd]))
            else:
                # The reference rounded to the result's dtype (a float16 product overflows to inf).
                with np.errstate(over="ignore"):
                    want = np.asarray(want).astype(NP[rd])
                assert_close(np.array(got), want, "float16" if name == "float16" else ("float32" if rd != "float64" else "float64"))


def test_scans_sorts_and_indices_match_numpy(rng):
    a = rand(rng, (4, 6), "float32")
    x = nv.array(a)
    A = a.astype(np.float64)
    assert_close(np.array(nv.cumsum(x, axis=1)), np.cumsum(A, 1), "float32")
    assert_close(np.array(x.cumprod(axis=0)), np.cumprod(A, 0), "float32")
    assert_close(np.array(nv.cummax(x, axis=1)), np.maximum.accumulate(A, 1), "float32")
    assert_close(np.array(nv.cumsum(x, axis=1, reverse=True)), np.cumsum(A[:, ::-1], 1)[:, ::-1], "float32")
    assert_close(np.array(nv.cumsum(x)), np.cumsum(A), "float32")
    assert_close(np.array(nv.sort(x)), np.sort(a))
    assert_close(np.array(nv.sort(x, axis=None)), np.sort(a, axis=None))
    assert_close(np.array(nv.argsort(x, axis=0)), np.argsort(a, axis=0, kind="stable"))
    assert_close(np.array(nv.argmax(x, axis=1)), np.argmax(a, 1))
    assert_close(np.array(x.argmin()), np.argmin(a))
    assert_close(np.array(nv.topk(x, 2, axis=1)), np.sort(a, 1)[:, -2:])
    assert_close(np.array(nv.partition(x, 2, axis=1))[:, 2], np.sort(a, 1)[:, 2])
    e = np.exp(A - A.max(1, keepdims=True))
    assert_close(np.array(nv.softmax(x, axis=-1)), e / e.sum(1, keepdims=True), "float32")
    assert_close(np.array(nv.trace(x, offset=1)), np.trace(A, 1), "float32")
    assert_close(np.array(nv.searchsorted(nv.array([1, 3, 5]), nv.array([3, 4]), side="right")), [2, 2])
    assert nv.count_nonzero(nv.array([0, 1, 2])).item() == 2
    with pytest.raises(ValueError, match="axis"):
        nv.mean(x, axis=4)
