"""mlx.core's names that are aliases, constants, dtype queries or conveniences over existing
ops, each compared with mlx.core: the aliases (the same objects), e/pi/inf/nan/euler_gamma/
newaxis, finfo/iinfo, result_type/can_cast/isdtype over every dtype pair, broadcast_shapes,
asarray, empty/empty_like, matrix_transpose, minmax, get_memory_limit, device_count — and the
ledger of what mlx.core has that nuvec does not yet."""
import math

import numpy as np
import pytest

import nuvec as nv
from conftest import DTYPES, assert_close, rand

mx = pytest.importorskip("mlx.core")

# What mlx.core 0.32 has and nuvec does not (yet): later issues (compile, conv, fft, linalg,
# distributed, quantization, fast, einsum, ...) and machinery without a C counterpart.
NOT_YET = {
    "ArrayAt", "ArrayIterator", "ArrayLike", "StreamContext",
    "ThreadLocalStream", "clear_streams", "conv1d", "conv2d",
    "conv3d", "conv_general", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "cuda", "device_info", "distributed",
    "fast",
    "gather_qqmm", "get_array_buffer_size",
    "matrix_norm",
    "metal", "new_thread_local_stream", "new_thread_unsafe_stream", "qqmm",
    "set_wired_limit", "unique",
}

ALIASES = {"acos": "arccos", "acosh": "arccosh", "asin": "arcsin", "asinh": "arcsinh",
           "atan": "arctan", "atanh": "arctanh", "atan2": "arctan2", "pow": "power",
           "bitwise_left_shift": "left_shift", "bitwise_right_shift": "right_shift",
           "cumulative_sum": "cumsum", "cumulative_prod": "cumprod", "empty": "zeros",
           "empty_like": "zeros_like"}


def name(d):
    return str(d).split(".")[-1]


def both(dtype_name):
    return getattr(nv, dtype_name), getattr(mx, dtype_name)


def test_ledger_of_missing_names():
    missing = {n for n in dir(mx) if not n.startswith("_")} - set(dir(nv))
    assert missing <= NOT_YET, sorted(missing - NOT_YET)


def test_aliases_are_the_same_functions_and_match_mlx(rng):
    for alias, target in ALIASES.items():
        assert getattr(nv, alias) is getattr(nv, target)
        assert getattr(mx, alias) is getattr(mx, target)
    x = np.clip(rand(rng, (7,), "float32"), -0.9, 0.9)
    for alias in ["acos", "asin", "atan", "asinh", "atanh"]:
        assert_close(np.array(getattr(nv, alias)(nv.array(x))), np.array(getattr(mx, alias)(mx.array(x))), "float32")
    assert_close(np.array(nv.acosh(nv.array(x * 0 + 2.5))), np.array(mx.acosh(mx.array(x * 0 + 2.5))), "float32")
    y = rand(rng, (7,), "float32")
    assert_close(np.array(nv.atan2(nv.array(x), nv.array(y))), np.arctan2(x, y), "float32")
    assert_close(np.array(nv.pow(nv.array(np.abs(y)), 1.5)), np.abs(y) ** 1.5, "float32")
    i = nv.array([1, 2, 8], nv.int32)
    assert nv.bitwise_left_shift(i, 2).tolist() == [4, 8, 32]
    assert nv.bitwise_right_shift(i, 1).tolist() == [0, 1, 4]
    m = rand(rng, (3, 4), "float32")
    assert_close(np.array(nv.cumulative_sum(nv.array(m), axis=1)), np.cumsum(m, axis=1), "float32")
    assert_close(np.array(nv.cumulative_prod(nv.array(m), 0, reverse=True)),
                 np.array(mx.cumulative_prod(mx.array(m), 0, reverse=True)), "float32")
    assert nv.empty((2, 3)).shape == (2, 3) and nv.empty((2,), nv.int8).dtype == nv.int8
    assert nv.empty_like(nv.ones((2,), nv.uint16)).dtype == nv.uint16


def test_constants():
    for c in ["e", "pi", "inf", "euler_gamma"]:
        assert getattr(nv, c) == getattr(mx, c) and type(getattr(nv, c)) is float
    assert math.isnan(nv.nan) and nv.newaxis is None
    assert nv.arange(3)[nv.newaxis].shape == (1, 3)


def test_finfo_iinfo_match_mlx():
    for d in ["float16", "bfloat16", "float32", "float64", "complex64"]:
        a, b = nv.finfo(getattr(nv, d)), mx.finfo(getattr(mx, d))
        for attr in ["min", "max", "eps", "smallest_normal", "bits"]:
            assert getattr(a, attr) == getattr(b, attr), (d, attr)
            assert type(getattr(a, attr)) is type(getattr(b, attr))
        assert name(a.dtype) == name(b.dtype) and repr(a) == repr(b) and str(a) == str(b)
    for d in ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]:
        a, b = nv.iinfo(getattr(nv, d)), mx.iinfo(getattr(mx, d))
        assert (a.min, a.max) == (b.min, b.max) and name(a.dtype) == name(b.dtype)
        assert repr(a) == repr(b)
        assert (a.min, a.max) == (np.iinfo(d).min, np.iinfo(d).max)
    assert nv.finfo(nv.float32).eps == np.finfo(np.float32).eps
    with pytest.raises(ValueError, match="not inexact"):
        nv.finfo(nv.int32)
    with pytest.raises(ValueError, match="Only integer types"):
        nv.iinfo(nv.float32)
    with pytest.raises(ValueError, match="bool"):
        nv.iinfo(nv.bool_)
    with pytest.raises(TypeError):
        nv.finfo("float32")


def test_result_type_can_cast_isdtype_match_mlx():
    for a in DTYPES:
        for b in DTYPES:
            (na, ma), (nb, mb) = both(a), both(b)
            assert name(nv.result_type(na, nb)) == name(mx.result_type(ma, mb)), (a, b)
            assert nv.can_cast(na, nb) == mx.can_cast(ma, mb), (a, b)
        assert name(nv.result_type(nv.zeros((1,), both(a)[0]))) == a.rstrip("_")
        kinds = ["bool", "signed integer", "unsigned integer", "integral", "real floating",
                 "complex floating", "numeric", "float32", ("bool", "float16"), ("integral", "numeric")]
        for k in kinds:
            nk = tuple(getattr(nv, x) if x in DTYPES else x for x in k) if isinstance(k, tuple) \
                else (getattr(nv, k) if k in DTYPES else k)
            mk = tuple(getattr(mx, x) if x in DTYPES else x for x in k) if isinstance(k, tuple) \
                else (getattr(mx, k) if k in DTYPES else k)
            assert nv.isdtype(both(a)[0], nk) == mx.isdtype(both(a)[1], mk), (a, k)
    assert name(nv.result_type(nv.array([1], nv.int16), nv.float16, nv.uint8)) == "float16"
    assert nv.can_cast(nv.array([1], nv.int32), nv.float32)
    with pytest.raises(ValueError, match="Inputs must be arrays or dtypes"):
        nv.result_type(nv.array([1]), 1.0)
    with pytest.raises(ValueError, match="At least one"):
        nv.result_type()
    with pytest.raises(ValueError, match="Unknown data type kind: 'foo'"):
        nv.isdtype(nv.float32, "foo")
    with pytest.raises(ValueError, match="kind"):
        nv.isdtype(nv.float32, nv.floating)
    with pytest.raises(TypeError):
        nv.isdtype(nv.array(1.0), "numeric")


def test_broadcast_shapes():
    for shapes in [[(2, 1, 3), (4, 1), [3]], [(2, 3)], [(), (3,)], [(1,), (0,)], [(0, 1), (1, 5)],
                   [(5, 1, 1), (1, 4, 1), (1, 1, 3)]]:
        got = nv.broadcast_shapes(*shapes)
        assert got == tuple(mx.broadcast_shapes(*shapes)) == np.broadcast_shapes(*map(tuple, shapes))
        assert type(got) is tuple
    with pytest.raises(ValueError, match=r"Shapes \(2,3\) and \(4,3\) cannot be broadcast"):
        nv.broadcast_shapes((2, 3), (4, 3))
    with pytest.raises(ValueError, match=r"Shapes \(2\) and \(3\)"):
        nv.broadcast_shapes((2,), (1,), (3,))
    with pytest.raises(ValueError, match="at least one shape"):
        nv.broadcast_shapes()


def test_asarray():
    a = nv.array([1, 2])
    b = nv.asarray(a)
    assert b.tolist() == [1, 2] and b.dtype == nv.int32
    assert nv.asarray(a, nv.float32).dtype == nv.float32
    assert name(nv.asarray([1.0, 2]).dtype) == name(mx.asarray([1.0, 2]).dtype)
    x = np.arange(3.0)
    c = nv.asarray(x)
    x[0] = 9
    assert c.tolist() == [0, 1, 2] and name(c.dtype) == name(mx.asarray(np.arange(3.0)).dtype)
    assert nv.asarray(a, copy=True).tolist() == [1, 2]
    assert nv.asarray(a, copy=False).tolist() == [1, 2]  # no copy needed (MLX always refuses)
    for args in [(a, nv.float32), ([1, 2], None)]:
        with pytest.raises(ValueError, match="Unable to avoid copy"):
            nv.asarray(*args, copy=False)


def test_matrix_transpose_and_minmax(rng):
    x = rand(rng, (2, 3, 4), "float32")
    assert_close(np.array(nv.matrix_transpose(nv.array(x))), np.swapaxes(x, -1, -2), "float32")
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        nv.matrix_transpose(nv.arange(3))
    lo, hi = nv.minmax(nv.array(x))
    assert lo.item() == x.min() and hi.item() == x.max()
    for kw in [{"axis": 0}, {"axis": (0, 2), "keepdims": True}, {"axis": -1}]:
        a = nv.minmax(nv.array(x), **kw)
        b = mx.minmax(mx.array(x), **kw)
        assert isinstance(a, tuple) and len(a) == 2
        for p, q in zip(a, b):
            assert_close(np.array(p), np.array(q), "float32")
    with pytest.raises(ValueError):
        nv.minmax(nv.array([]))


def test_memory_limit_and_devices():
    old = nv.get_memory_limit()
    assert isinstance(old, int) and old > 0
    try:
        assert nv.set_memory_limit(old // 2) == old
        assert nv.get_memory_limit() == old // 2
    finally:
        nv.set_memory_limit(old)
    assert nv.get_memory_limit() == old
    assert nv.device_count(nv.cpu) == 1 == mx.device_count(mx.cpu)
    n = nv.device_count(nv.gpu)
    assert all(nv.is_available(nv.Device(nv.gpu, i)) for i in range(n))
    assert not nv.is_available(nv.Device(nv.gpu, n))
    with pytest.raises(TypeError):
        nv.device_count("cpu")
