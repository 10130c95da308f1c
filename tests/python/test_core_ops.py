"""The core ops against NumPy: element-wise arithmetic with broadcasting, promotion and weak
scalars, astype conversions and their edge values, sum, views."""
import ctypes as C
import itertools

import numpy as np
import pytest

from conftest import sample
from nvc import CODE, FLOATS, INTS, NuvecError, assert_close, ints, lib, np_dtype, ref64, sig

P = C.c_void_p
for name in ["nv_add", "nv_subtract", "nv_multiply", "nv_divide", "nv_maximum", "nv_minimum"]:
    sig(name, P, P, P)
for name in ["nv_negative", "nv_abs", "nv_exp", "nv_log", "nv_sqrt"]:
    sig(name, P, P)
sig("nv_sum", P, P, C.POINTER(C.c_int), C.c_int, C.c_bool)

SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 5), (1, 7)]
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]


def rand(rng, shape, dtype):
    dt = np_dtype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in INTS:
        info = np.iinfo(dt)
        lo, hi = max(info.min, -1000), min(info.max, 1000)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dt)
    if dtype == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    x = rng.standard_normal(shape) * 3
    return x.astype(dt)


BINARY = {
    "nv_add": np.add,
    "nv_subtract": np.subtract,
    "nv_multiply": np.multiply,
    "nv_divide": np.true_divide,
    "nv_maximum": np.maximum,
    "nv_minimum": np.minimum,
}
ALL = ["bool"] + INTS + FLOATS + ["complex64"]


def binary_cases():
    for op, dt, (sa, sb), layout in itertools.product(
        BINARY, ALL, [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 5), (3, 1)), ((), (5,)), ((0, 3), (3,))],
        LAYOUTS,
    ):
        if op in ("nv_maximum", "nv_minimum") and dt == "complex64":
            continue
        yield op, dt, sa, sb, layout


@pytest.mark.parametrize("op,dt,sa,sb,layout", sample(binary_cases(), 120, salt=1))
def test_binary_matches_numpy(nv, rng, op, dt, sa, sb, layout):
    a, b = rand(rng, sa, dt), rand(rng, sb, dt)
    if op == "nv_divide" and dt in INTS + ["bool"]:
        b = np.where(b == 0, 1, b).astype(b.dtype)
    got = nv.read(nv.own(getattr(lib, op)(nv.view(a, layout), nv.view(b, "contiguous"))))
    ra, rb = ref64(a), ref64(b)
    want = BINARY[op](ra, rb)
    if dt == "bool" and op != "nv_divide":
        want = {"nv_add": a | b, "nv_multiply": a & b, "nv_maximum": a | b,
                "nv_minimum": a & b, "nv_subtract": a ^ b}[op]
    out_dt = dt
    if op == "nv_divide" and dt in INTS + ["bool"]:
        out_dt = "float32"
    if dt in INTS and op != "nv_divide":
        # Integer arithmetic wraps in the type, as NumPy's.
        want = BINARY[op](a, b)
    assert_close(got, want, out_dt)


@pytest.mark.parametrize("dt", INTS)
def test_integer_overflow_wraps(nv, dt):
    info = np.iinfo(np_dtype(dt))
    a = np.array([info.max, info.min, info.max], dtype=dt)
    b = np.array([1, 1, 2], dtype=dt)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(nv.read(nv.own(lib.nv_add(nv.array(a), nv.array(b)))), a + b)
        np.testing.assert_array_equal(nv.read(nv.own(lib.nv_subtract(nv.array(a), nv.array(b)))), a - b)
        np.testing.assert_array_equal(nv.read(nv.own(lib.nv_multiply(nv.array(a), nv.array(b)))), a * b)


@pytest.mark.parametrize("a_dt,b_dt,want", [
    ("int64", "float32", "float32"), ("uint8", "int8", "int16"), ("uint64", "int8", "float32"),
    ("int32", "float16", "float16"), ("bfloat16", "float16", "float32"), ("bool", "int8", "int8"),
    ("uint32", "int32", "int64"), ("float64", "complex64", "complex64"), ("bfloat16", "int64", "bfloat16"),
])
def test_promotion_table(nv, a_dt, b_dt, want):
    a = nv.array(np.ones(2, dtype=np_dtype(a_dt)))
    b = nv.array(np.ones(2, dtype=np_dtype(b_dt)))
    assert lib.nv_array_dtype(nv.own(lib.nv_add(a, b))) == CODE[want]


@pytest.mark.parametrize("dt,scalar,want", [
    ("float16", 0.5, "float16"), ("bfloat16", 2.0, "bfloat16"), ("int8", 0.5, "float32"),
    ("int32", 1.5, "float32"), ("bool", 1.0, "float32"), ("float64", 0.1, "float64"),
])
def test_weak_float_scalar(nv, dt, scalar, want):
    x = np.arange(4).astype(np_dtype(dt))
    out = nv.own(lib.nv_add(nv.array(x), nv.own(lib.nv_weak_scalar(scalar))))
    assert lib.nv_array_dtype(out) == CODE[want]
    assert_close(nv.read(out), ref64(x) + scalar, want)


@pytest.mark.parametrize("dt,want", [("int8", "int8"), ("uint16", "uint16"), ("bool", "int32"),
                                     ("float16", "float16")])
def test_weak_int_scalar(nv, dt, want):
    x = np.arange(4).astype(np_dtype(dt))
    out = nv.own(lib.nv_add(nv.array(x), nv.own(lib.nv_weak_int(3))))
    assert lib.nv_array_dtype(out) == CODE[want]
    assert_close(nv.read(out), ref64(x) + 3, want)


def test_weak_scalar_keeps_float64_precision(nv):
    x = np.zeros(1, dtype=np.float64)
    got = nv.read(nv.own(lib.nv_add(nv.array(x), nv.own(lib.nv_weak_scalar(0.1)))))
    assert got[0] == 0.1


UNARY = {"nv_negative": np.negative, "nv_abs": np.abs, "nv_exp": np.exp, "nv_log": np.log,
         "nv_sqrt": np.sqrt}


def unary_cases():
    for op, dt, shape, layout in itertools.product(UNARY, ALL, SHAPES, LAYOUTS):
        if op == "nv_negative" and dt == "bool":
            continue
        yield op, dt, shape, layout


@pytest.mark.parametrize("op,dt,shape,layout", sample(unary_cases(), 120, salt=2))
def test_unary_matches_numpy(nv, rng, op, dt, shape, layout):
    x = rand(rng, shape, dt)
    if op in ("nv_log", "nv_sqrt") and dt not in ("complex64",):
        x = np.abs(x) if dt != "bool" else x
    got = nv.read(nv.own(getattr(lib, op)(nv.view(x, layout))))
    if op in ("nv_exp", "nv_log", "nv_sqrt"):
        out_dt = dt if dt in FLOATS + ["complex64"] else "float32"
        with np.errstate(all="ignore"):
            want = UNARY[op](ref64(x))
        assert_close(got, want, out_dt)
    elif op == "nv_abs" and dt == "complex64":
        assert_close(got, np.abs(ref64(x)), "float32")
    else:
        with np.errstate(all="ignore"):
            want = UNARY[op](x)
        assert_close(got, want, dt)


def test_float_edge_values(nv):
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, 3.4e38], dtype=np.float32)
    y = np.array([1.0, np.nan, -np.inf, 0.0, -0.0, 1e-45, 3.4e38], dtype=np.float32)
    with np.errstate(all="ignore"):
        for op, f in [("nv_add", np.add), ("nv_multiply", np.multiply), ("nv_maximum", np.maximum),
                      ("nv_minimum", np.minimum), ("nv_divide", np.divide)]:
            got = nv.read(nv.own(getattr(lib, op)(nv.array(x), nv.array(y))))
            np.testing.assert_array_equal(got, f(x, y))
        got = nv.read(nv.own(lib.nv_negative(nv.array(x))))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(-x))


CONV = ["bool"] + INTS + FLOATS + ["complex64"]


@pytest.mark.parametrize("src,dst", sample(itertools.product(CONV, CONV), 80, salt=3))
def test_astype_matches_numpy(nv, rng, src, dst):
    x = rand(rng, (17,), src)
    if src == "complex64" and dst != "complex64":
        x = x.real.astype(np.complex64)  # NumPy warns on dropping imaginary parts
    got = nv.read(nv.own(lib.nv_astype(nv.array(x), CODE[dst])))
    with np.errstate(all="ignore"):
        want = x.astype(np_dtype(dst))
    if src in FLOATS and dst.startswith("uint"):
        # A negative float's unsigned value is undefined (C, NumPy): ml_dtypes 0.7 gives 0 from
        # bfloat16, NumPy wraps float32 on x86. Only the defined values are compared.
        keep = ~(x.astype(np.float64) < 0)
        got, want, x = got[keep], want[keep], x[keep]
    if dst == "bfloat16" or src == "bfloat16":
        # ml_dtypes rounds once to nearest even, as nuvec does.
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    else:
        np.testing.assert_array_equal(got, want)


def test_float_to_narrow_rounds_once(nv):
    # 1 + 2^-11 + 2^-40 in float64 rounds up in float16 when rounded once, but to 1.0 when
    # rounded through float32 first (the float32 value is exactly halfway, ties to even).
    v = np.array([1 + 2**-11 + 2**-40, 65520.0, 65519.99, 2**-25, -2**-25 * 1.5, 6e-8], dtype=np.float64)
    got = nv.read(nv.own(lib.nv_astype(nv.array(v), CODE["float16"])))
    np.testing.assert_array_equal(got, v.astype(np.float16))
    assert got[0] == np.float16(1 + 2**-10)
    assert np.isinf(got[1]) and got[2] == 65504
    bf = nv.read(nv.own(lib.nv_astype(nv.array(v), CODE["bfloat16"])))
    import ml_dtypes

    np.testing.assert_array_equal(bf.astype(np.float64), v.astype(ml_dtypes.bfloat16).astype(np.float64))


def test_float_to_int_edges_as_x86(nv):
    v = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 300.0, -1.5, 2.5, 1e20], dtype=np.float64)
    for dst, want in [
        ("int32", [-2**31, -2**31, -2**31, -2**31, -2**31, 300, -1, 2, -2**31]),
        ("int64", [-2**63, -2**63, -2**63, 3000000000, -3000000000, 300, -1, 2, -2**63]),
        ("int8", [0, 0, 0, 0, 0, 44, -1, 2, 0]),
        ("uint8", [0, 0, 0, 0, 0, 44, 255, 2, 0]),
        ("uint32", [0, 0, 0, 3000000000, 2**32 - 3000000000, 300, 2**32 - 1, 2, 1e20 % 2**64 % 2**32]),
    ]:
        got = nv.read(nv.own(lib.nv_astype(nv.array(v), CODE[dst])))
        if dst == "uint32":
            want[-1] = 0  # 1e20 is past int64: the indefinite value, whose low half is 0
        np.testing.assert_array_equal(got, np.array(want, dtype=np.float64).astype(np_dtype(dst)) if dst != "int64" else np.array(want, dtype=np.int64), err_msg=dst)


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "int8", "int32", "uint8", "int64", "complex64", "bool"])
@pytest.mark.parametrize("axes", [None, (0,), (1,), (0, 2), (-1,), (2, 0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_matches_numpy(nv, rng, dt, axes, keepdims):
    x = rand(rng, (4, 5, 6), dt)
    if axes is None:
        h = lib.nv_sum(nv.array(x), None, 0, keepdims)
    else:
        arr, n = ints(axes)
        h = lib.nv_sum(nv.view(x, "transposed"), arr, n, keepdims)
        x = x  # the transposed view has the same values
    got = nv.read(nv.own(h))
    # MLX's dtypes: bool/int8/int16 sum to int32, uint8/uint16 to uint32.
    out_dt = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "uint32",
              "uint16": "uint32"}.get(dt, dt)
    if dt in INTS or dt == "bool":
        with np.errstate(over="ignore"):
            want = np.sum(x.astype(np.int64), axis=axes, keepdims=keepdims).astype(np_dtype(out_dt))
    else:
        want = np.sum(ref64(x), axis=axes, keepdims=keepdims)
    assert_close(got, want, out_dt, rtol=1e-2 if dt in ("float16", "bfloat16") else None,
                 atol=5e-2 if dt in ("float16", "bfloat16") else None)


def test_sum_large_is_accurate(nv, rng):
    x = (rng.random(1 << 20) + 1e4).astype(np.float32)
    got = nv.read(nv.own(lib.nv_sum(nv.array(x), None, 0, False)))
    want = np.sum(x.astype(np.float64))
    assert abs(float(got) - want) / want < 1e-6


def test_sum_bad_axis_is_an_error(nv):
    arr, n = ints([3])
    h = nv.own(lib.nv_sum(nv.array(np.ones((2, 2), np.float32)), arr, n, False))
    st, msg = nv.status(h)
    assert st == 1 and "sum" in msg and "axis 3" in msg
    arr, n = ints([0, -2])
    h = nv.own(lib.nv_sum(nv.array(np.ones((2, 2), np.float32)), arr, n, False))
    assert "repeated" in nv.status(h)[1]


def test_broadcast_error_names_op_and_shapes(nv):
    h = nv.own(lib.nv_add(nv.array(np.ones((2, 3), np.float32)), nv.array(np.ones(4, np.float32))))
    st, msg = nv.status(h)
    assert st == 1 and msg == "add: shapes (2,3) and (4,) cannot be broadcast"
    with pytest.raises(NuvecError):
        nv.read(h)


def test_bool_subtract_is_xor_as_mlx(nv):
    """MLX computes bool - bool in bool (nonzero exactly when the values differ); NumPy refuses."""
    a = np.array([[True, False, True, False]])
    b = np.array([[True], [False]])
    got = nv.read(nv.own(lib.nv_subtract(nv.array(a), nv.array(b))))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, a ^ b)
