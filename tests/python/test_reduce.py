"""The reduce family against NumPy (float64 references, bfloat16 through ml_dtypes):
reductions, scans, softmax, sorts and searches over dtypes, shapes (empty, 0-d, strided,
transposed, reversed views), edge values (NaN, +-inf, -0.0, integer overflow) and errors."""
import ctypes as C
import itertools

import numpy as np
import pytest

from conftest import sample
from nvc import CODE, FLOATS, INTS, NuvecError, assert_close, ints, lib, np_dtype, ref64, sig

P = C.c_void_p
IP = C.POINTER(C.c_int)
for name in ["nv_sum", "nv_prod", "nv_max", "nv_min", "nv_all", "nv_any", "nv_mean",
             "nv_count_nonzero", "nv_median", "nv_logsumexp"]:
    sig(name, P, P, IP, C.c_int, C.c_bool)
for name in ["nv_var", "nv_std"]:
    sig(name, P, P, IP, C.c_int, C.c_bool, C.c_int)
for name in ["nv_argmax", "nv_argmin"]:
    sig(name, P, P, IP, C.c_bool)
sig("nv_softmax", P, P, IP, C.c_int, C.c_bool)
sig("nv_trace", P, P, C.c_int, C.c_int, C.c_int, C.c_int)
for name in ["nv_cumsum", "nv_cumprod", "nv_cummax", "nv_cummin", "nv_logcumsumexp"]:
    sig(name, P, P, IP, C.c_bool, C.c_bool)
sig("nv_sort", P, P, IP)
sig("nv_argsort", P, P, IP)
sig("nv_partition", P, P, C.c_int, IP)
sig("nv_argpartition", P, P, C.c_int, IP)
sig("nv_topk", P, P, C.c_int, IP)
sig("nv_searchsorted", P, P, P, C.c_bool)

ALL = ["bool"] + INTS + FLOATS + ["complex64"]
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]
HALF_TOL = {"float16": (1e-2, 1e-2), "bfloat16": (4e-2, 4e-2)}


def rand(rng, shape, dtype, edges=False):
    """Seeded random values of `dtype` (never all zeros); with `edges`, floats get NaN, +-inf
    and -0.0 sprinkled in."""
    dt = np_dtype(dtype)
    if dtype == "bool":
        x = rng.integers(0, 2, shape).astype(bool)
    elif dtype in INTS:
        info = np.iinfo(dt)
        x = rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dt)
    elif dtype == "complex64":
        x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    else:
        x = (rng.standard_normal(shape) * 3).astype(dt)
        if edges and x.size:
            flat = x.reshape(-1)
            for v in [np.nan, np.inf, -np.inf, -0.0]:
                if rng.random() < 0.5:
                    flat[rng.integers(0, flat.size)] = v
    if x.size and not np.any(x):
        x.reshape(-1)[0] = 1
    return x


def axes_arg(axes):
    if axes is None:
        return None, 0
    return ints(axes)


def call_axes(fn, h, axes, *rest):
    arr, n = axes_arg(axes)
    return fn(h, arr, n, *rest)


def axis_ptr(axis):
    if axis is None:
        return None
    return C.pointer(C.c_int(axis))


def np_axes(axes):
    return None if axes is None else tuple(axes)


# ---- plain reductions ----

REDUCE_CASES = [((4, 5, 6), None), ((4, 5, 6), (0,)), ((4, 5, 6), (1,)), ((4, 5, 6), (-1,)),
                ((4, 5, 6), (0, 2)), ((4, 5, 6), (2, 0, 1)), ((7,), (0,)), ((), None),
                ((3, 0), (1,)), ((3, 0), (0,)), ((1, 9), (0,)), ((40, 33), (0,)), ((33, 40), (1,))]
# MLX's sum/prod dtypes: small integers and bool widen to 32 bits, wider types keep theirs.
SUM_DT = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "uint32", "uint16": "uint32"}
PLAIN = ["nv_sum", "nv_prod", "nv_max", "nv_min", "nv_all", "nv_any", "nv_mean", "nv_count_nonzero"]


def plain_ref(op, x, axes, keepdims):
    dt = "bool" if x.dtype == bool else (("bfloat16" if x.dtype == np_dtype("bfloat16") else x.dtype.name))
    ax = np_axes(axes)
    if op in ("nv_sum", "nv_prod"):
        f = np.sum if op == "nv_sum" else np.prod
        if dt == "bool" or dt in INTS:
            acc = np.uint64 if dt.startswith("uint") else np.int64
            with np.errstate(over="ignore"):
                r = f(x.astype(acc), axis=ax, keepdims=keepdims)
            out = SUM_DT.get(dt, dt)
            return np.asarray(r).astype(np_dtype(out)), out
        r = f(ref64(x), axis=ax, keepdims=keepdims)
        return r, dt
    if op in ("nv_max", "nv_min"):
        f = np.max if op == "nv_max" else np.min
        if dt == "complex64":
            # NumPy orders complex lexicographically, as nuvec.
            return f(x, axis=ax, keepdims=keepdims), dt
        if dt == "bool" or dt in INTS:
            return f(x, axis=ax, keepdims=keepdims), dt
        return f(ref64(x), axis=ax, keepdims=keepdims), dt
    if op in ("nv_all", "nv_any"):
        f = np.all if op == "nv_all" else np.any
        return f(x, axis=ax, keepdims=keepdims), "bool"
    if op == "nv_mean":
        with np.errstate(all="ignore"):
            r = np.mean(ref64(x), axis=ax, keepdims=keepdims)
        return r, dt if dt in FLOATS + ["complex64"] else "float32"
    r = np.count_nonzero(x, axis=ax, keepdims=keepdims)
    return np.asarray(r).astype(np.int32), "int32"


def plain_cases():
    for op, dt, (shape, axes), layout, keep in itertools.product(
            PLAIN, ALL, REDUCE_CASES, LAYOUTS, [False, True]):
        if op in ("nv_max", "nv_min") and 0 in shape:
            continue
        yield op, dt, shape, axes, layout, keep


@pytest.mark.parametrize("op,dt,shape,axes,layout,keep", sample(plain_cases(), 400, salt=11))
def test_plain_reductions_match_numpy(nv, rng, op, dt, shape, axes, layout, keep):
    x = rand(rng, shape, dt, edges=True)
    got = nv.read(nv.own(call_axes(getattr(lib, op), nv.view(x, layout), axes, keep)))
    want, out_dt = plain_ref(op, x, axes, keep)
    rtol, atol = HALF_TOL.get(dt, (None, None))
    if op == "nv_prod" and dt in FLOATS:
        rtol = 1e-5 if dt == "float32" else rtol
    assert_close(got, want, out_dt, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("op", ["nv_max", "nv_min"])
def test_max_min_propagate_nan_and_keep_signed_zero_values(nv, dt, op):
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, np.inf, -0.0], [2.0, 5.0, -1.0]]).astype(np_dtype(dt))
    for axes in [None, (0,), (1,)]:
        got = nv.read(nv.own(call_axes(getattr(lib, op), nv.array(x), axes, False)))
        f = np.max if op == "nv_max" else np.min
        np.testing.assert_array_equal(ref64(got), f(ref64(x), axis=np_axes(axes)))


@pytest.mark.parametrize("dt", INTS)
def test_integer_sum_and_prod_wrap(nv, dt):
    info = np.iinfo(np_dtype(dt))
    x = np.array([info.max, info.max, 3, info.min], dtype=np_dtype(dt))
    acc = np.uint64 if dt.startswith("uint") else np.int64
    with np.errstate(over="ignore"):
        for op, f in [("nv_sum", np.sum), ("nv_prod", np.prod)]:
            got = nv.read(nv.own(getattr(lib, op)(nv.array(x), None, 0, False)))
            out = SUM_DT.get(dt, dt)  # int8/16 widen (no wrap), int32/64 wrap
            assert got.dtype == np_dtype(out)
            np.testing.assert_array_equal(got, np.asarray(f(x.astype(acc))).astype(np_dtype(out)))


def test_large_sums_are_accurate_and_parallel(nv, rng):
    x = (rng.random(3 << 20) * 1e3 + 1e4).astype(np.float32)
    want = np.sum(x.astype(np.float64))
    got = nv.read(nv.own(lib.nv_sum(nv.array(x), None, 0, False)))
    assert abs(float(got) - want) / want < 1e-7
    got = nv.read(nv.own(lib.nv_mean(nv.array(x), None, 0, False)))
    assert abs(float(got) - want / x.size) / (want / x.size) < 1e-7
    h = (x[: 1 << 20] / 1e4).astype(np.float16)
    got = nv.read(nv.own(lib.nv_mean(nv.array(h), None, 0, False)))
    np.testing.assert_allclose(float(got), np.mean(h.astype(np.float64)), rtol=1e-3)
    m = x[: 1 << 20].reshape(1024, 1024)
    for axes in [(0,), (1,)]:
        got = nv.read(nv.own(call_axes(lib.nv_max, nv.array(m), axes, False)))
        np.testing.assert_array_equal(got, np.max(m, axis=axes))


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("shape,axes", [((3, 40, 37), (1,)), ((3, 40, 37), (0,)),
                                        ((3, 40, 37), (0, 1)), ((2, 300, 600), (1,)),
                                        ((700, 20), (0,)), ((5, 4, 33), (0, 1))])
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_column_reductions_match_numpy(nv, rng, dt, shape, axes, layout):
    """Reductions over strided axes into contiguous outputs (the column layout): blocks of
    outputs, groups of rows, NaN and infinities per lane."""
    x = rng.standard_normal(shape).astype(np_dtype(dt)) * 100
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, 5)] = np.nan
    flat[rng.integers(0, flat.size, 5)] = np.inf
    flat[rng.integers(0, flat.size, 5)] = -np.inf
    h = nv.view(x, layout)
    xs = x
    for op, f in [("nv_sum", np.sum), ("nv_mean", np.mean), ("nv_max", np.max),
                  ("nv_min", np.min)]:
        got = nv.read(nv.own(call_axes(getattr(lib, op), h, axes, False)))
        with np.errstate(invalid="ignore"):
            want = f(xs.astype(np.float64), axis=axes)
        assert got.dtype == np_dtype(dt)
        # float64: cancellation leaves an absolute error of a few ulps of the summands' scale.
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6 if dt == "float32" else 1e-12,
                                   atol=0 if dt == "float32" else 1e-9, err_msg=f"{op} {shape} {axes}")
    big = (rng.random((4096, 24)) * 1e3 + 1e4).astype(np.float32)
    got = nv.read(nv.own(call_axes(lib.nv_sum, nv.array(big), (0,), False)))
    np.testing.assert_allclose(got, big.astype(np.float64).sum(0), rtol=1e-7)


def test_empty_reductions(nv):
    e = nv.array(np.zeros((0, 3), np.float32))
    np.testing.assert_array_equal(nv.read(nv.own(call_axes(lib.nv_sum, e, (0,), False))), [0, 0, 0])
    np.testing.assert_array_equal(nv.read(nv.own(call_axes(lib.nv_prod, e, (0,), False))), [1, 1, 1])
    assert nv.read(nv.own(call_axes(lib.nv_all, e, None, False))) == True  # noqa: E712
    assert nv.read(nv.own(call_axes(lib.nv_any, e, None, False))) == False  # noqa: E712
    assert np.isnan(nv.read(nv.own(call_axes(lib.nv_mean, e, None, False))))
    assert np.all(np.isnan(nv.read(nv.own(call_axes(lib.nv_var, e, (0,), False, 0)))))
    assert np.isnan(nv.read(nv.own(call_axes(lib.nv_median, e, None, False))))



@pytest.mark.parametrize("shape,axis", [((0, 3), 1), ((3, 0), 0), ((2, 0, 4), 2)])
def test_max_argmax_over_a_full_axis_of_empty_rows(nv, shape, axis):
    """max/min/argmax/argmin over a non-empty axis of an array with no rows: an empty
    result (NumPy, MLX); over an empty axis: the error naming the op."""
    e = nv.array(np.zeros(shape, np.float32))
    want = np.zeros(shape, np.float32).max(axis=axis).shape
    for fn in (lib.nv_max, lib.nv_min):
        assert nv.read(nv.own(call_axes(fn, e, (axis,), False))).shape == want
    for fn in (lib.nv_argmax, lib.nv_argmin):
        assert nv.read(nv.own(fn(e, axis_ptr(axis), False))).shape == want
    empty_axis = shape.index(0)
    for fn, name in ((lib.nv_max, "max"), (lib.nv_min, "min")):
        with pytest.raises(NuvecError, match=name + ": cannot " + name + "-reduce an empty axis"):
            nv.read(nv.own(call_axes(fn, e, (empty_axis,), False)))
    with pytest.raises(NuvecError, match="argmax: cannot reduce an empty axis"):
        nv.read(nv.own(lib.nv_argmax(e, axis_ptr(empty_axis), False)))


# ---- row reductions ----

ROW_CASES = [((4, 5, 6), None), ((4, 5, 6), (1,)), ((4, 5, 6), (0, 2)), ((4, 5, 6), (-1,)),
             ((9,), (0,)), ((), None), ((6, 1), (0,)), ((2, 300), (1,))]


def row_cases(ops, dts):
    for op, dt, (shape, axes), layout, keep in itertools.product(ops, dts, ROW_CASES, LAYOUTS,
                                                                  [False, True]):
        yield op, dt, shape, axes, layout, keep


REAL = ["bool"] + INTS + FLOATS


@pytest.mark.parametrize("op,dt,shape,axes,layout,keep",
                         sample(row_cases(["var", "std", "median", "logsumexp"], REAL), 200, salt=12))
def test_row_reductions_match_numpy(nv, rng, op, dt, shape, axes, layout, keep):
    x = rand(rng, shape, dt, edges=op != "var")
    xf = ref64(x)
    ax = np_axes(axes)
    ddof = int(rng.integers(0, 3))
    h = nv.view(x, layout)
    with np.errstate(all="ignore"):
        if op in ("var", "std"):
            got = nv.read(nv.own(call_axes(getattr(lib, "nv_" + op), h, axes, keep, ddof)))
            want = (np.var if op == "var" else np.std)(xf, axis=ax, keepdims=keep, ddof=ddof)
        elif op == "median":
            got = nv.read(nv.own(call_axes(lib.nv_median, h, axes, keep)))
            want = np.median(xf, axis=ax, keepdims=keep)
        else:
            got = nv.read(nv.own(call_axes(lib.nv_logsumexp, h, axes, keep)))
            m = np.max(xf, axis=ax, keepdims=True)
            ms = np.where(np.isfinite(m), m, 0)
            want = np.log(np.sum(np.exp(xf - ms), axis=ax, keepdims=True)) + ms
            if not keep:
                want = want.reshape(np.max(xf, axis=ax).shape)
    out_dt = dt if dt in FLOATS else "float32"
    rtol, atol = HALF_TOL.get(dt, (1e-5 if out_dt == "float32" else None, None))
    assert_close(got, want, out_dt, rtol=rtol, atol=atol)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_float32_logsumexp_long_rows(nv, rng, layout):
    """float32 rows go through the vectorized exponential: long rows, wide ranges, and rows
    with NaN, +inf and only -inf."""
    x = (rng.standard_normal((9, 3001)) * 30).astype(np.float32)
    x[1, 7] = np.nan
    x[2, 100] = np.inf
    x[3, :] = -np.inf
    x[4, :] = 80.0
    x[5, ::2] = -np.inf
    x[6, :] = rng.uniform(-200, -100, 3001)
    got = nv.read(nv.own(call_axes(lib.nv_logsumexp, nv.view(x, layout), (1,), False)))
    r = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(r, axis=1, keepdims=True)
        ms = np.where(np.isfinite(m), m, 0)
        want = (np.log(np.sum(np.exp(r - ms), axis=1, keepdims=True)) + ms)[:, 0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-7, atol=0)


def test_logsumexp_infinities(nv):
    x = np.array([[0.0, np.inf], [-np.inf, -np.inf], [1000.0, 1000.0], [np.nan, 1.0]], np.float32)
    got = nv.read(nv.own(call_axes(lib.nv_logsumexp, nv.array(x), (1,), False)))
    np.testing.assert_allclose(got, [np.inf, -np.inf, 1000 + np.log(2), np.nan], rtol=1e-6)


@pytest.mark.parametrize("op,dt,shape,axes,layout,keep",
                         sample((c for c in row_cases(["argmax", "argmin"], ALL)
                                 if c[3] is None or len(c[3]) == 1), 160, salt=13))
def test_argmax_argmin_match_numpy(nv, rng, op, dt, shape, axes, layout, keep):
    x = rand(rng, shape, dt, edges=True)
    if dt in INTS:
        x = (x % 7).astype(x.dtype)  # repeated values: the first occurrence must win
    axis = None if axes is None else axes[0]
    got = nv.read(nv.own(getattr(lib, "nv_" + op)(nv.view(x, layout), axis_ptr(axis), keep)))
    xr = x if dt in ("complex64", "bool") or dt in INTS else ref64(x)
    want = (np.argmax if op == "argmax" else np.argmin)(xr, axis=axis, keepdims=keep)
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, np.asarray(want).astype(np.uint32))


def test_argmax_nan_and_signed_zero(nv):
    x = np.array([1.0, -0.0, 0.0, np.nan, 5.0, np.nan], np.float32)
    assert nv.read(nv.own(lib.nv_argmax(nv.array(x), None, False))) == 3
    assert nv.read(nv.own(lib.nv_argmin(nv.array(x), None, False))) == 3
    z = np.array([0.0, -0.0, 1.0], np.float64)
    assert nv.read(nv.own(lib.nv_argmin(nv.array(z), None, False))) == 0
    assert nv.read(nv.own(lib.nv_argmin(nv.array(z[::-1].copy()[1:]), None, False))) == 0


@pytest.mark.parametrize("dt", ["float32", "float64", "int32", "float16"])
@pytest.mark.parametrize("shape,axis", [((3, 40, 37), 1), ((3, 40, 37), 0), ((50, 600), 0),
                                        ((2, 5, 1100), 1)])
def test_argmax_argmin_over_strided_axes(nv, rng, dt, shape, axis):
    """Arg-reductions over a strided axis into contiguous outputs (the column path): ties keep
    the first index, the first NaN wins."""
    x = rng.integers(-3, 4, shape).astype(np_dtype(dt))
    if dt in FLOATS:
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 40)] = np.nan
        flat[rng.integers(0, flat.size, 10)] = np.inf
        flat[rng.integers(0, flat.size, 10)] = -np.inf
    for op, f in [(lib.nv_argmax, np.argmax), (lib.nv_argmin, np.argmin)]:
        got = nv.read(nv.own(op(nv.array(x), axis_ptr(axis), False)))
        np.testing.assert_array_equal(got, f(ref64(x) if dt in FLOATS else x, axis=axis))


# ---- softmax ----

@pytest.mark.parametrize("dt,shape,axes,layout,precise", sample(itertools.product(
    REAL, [(4, 7), (3, 4, 5), (5,), (2, 1000), (0, 3)], [None, (-1,), (0,), (0, 1)], LAYOUTS,
    [False, True]), 120, salt=14))
def test_softmax_matches_numpy(nv, rng, dt, shape, axes, layout, precise):
    if axes is not None and max(a if a >= 0 else a + len(shape) for a in axes) >= len(shape):
        axes = (-1,)
    x = rand(rng, shape, dt)
    got = nv.read(nv.own(call_axes(lib.nv_softmax, nv.view(x, layout), axes, precise)))
    xf = ref64(x)
    ax = np_axes(axes)
    with np.errstate(all="ignore"):
        e = np.exp(xf - np.max(xf, axis=ax, keepdims=True)) if xf.size else xf
        want = e / np.sum(e, axis=ax, keepdims=True) if xf.size else xf
    out_dt = dt if dt in FLOATS else "float32"
    rtol, atol = HALF_TOL.get(dt, (2e-6, 1e-7))
    assert_close(got, want, out_dt, rtol=rtol, atol=atol)


def test_softmax_edges_and_wide_range(nv, rng):
    x = np.array([[np.nan, 1.0, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0],
                  [-np.inf, 0.0, 1.0], [-200.0, 0.0, 80.0]], np.float32)
    got = nv.read(nv.own(call_axes(lib.nv_softmax, nv.array(x), (-1,), False)))
    with np.errstate(all="ignore"):
        e = np.exp(x.astype(np.float64) - np.max(x, axis=1, keepdims=True))
        want = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-30, equal_nan=True)
    # Every exponent the float32 kernel sees, against float64.
    t = np.linspace(-87, 0, 100001).astype(np.float32)
    row = np.concatenate([t, [0.0]]).astype(np.float32)
    got = nv.read(nv.own(call_axes(lib.nv_softmax, nv.array(row), None, False)))
    want = np.exp(row.astype(np.float64)) / np.exp(row.astype(np.float64)).sum()
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-44)  # float32 subnormal spacing


# ---- trace ----

@pytest.mark.parametrize("dt,shape,offset,a1,a2,out", sample(itertools.product(
    REAL + ["complex64"], [(4, 4), (3, 5), (2, 3, 4)], [0, 1, -2, 7], [0, -1], [1, -2],
    [None, "int32", "float64"]), 60, salt=15))
def test_trace_matches_numpy(nv, rng, dt, shape, offset, a1, a2, out):
    a1n, a2n = a1 % len(shape), a2 % len(shape)
    if a1n == a2n:
        a2 = (a1n + 1) % len(shape)
    x = rand(rng, shape, dt)
    code = -1 if out is None else CODE[out]
    if out is not None and dt == "complex64":
        return
    got = nv.read(nv.own(lib.nv_trace(nv.array(x), offset, a1, a2, code)))
    cast = dt if out is None else out
    res = SUM_DT.get(cast, cast)  # the diagonal cast to `cast`, summed with sum's dtype (MLX)
    if res in INTS:
        acc = np.uint64 if res.startswith("uint") else np.int64
        with np.errstate(over="ignore"):
            want = np.trace(x.astype(np_dtype(cast)).astype(acc), offset, a1, a2)
        want = np.asarray(want).astype(np_dtype(res))
    else:
        want = np.trace(x.astype(np.complex128 if dt == "complex64" else np.float64), offset, a1, a2)
    rtol, atol = HALF_TOL.get(res, (None, None))
    assert_close(got, want, res, rtol=rtol, atol=atol)


# ---- scans ----

def scan_ref(op, x, axis, reverse, inclusive):
    dt = "bfloat16" if x.dtype == np_dtype("bfloat16") else x.dtype.name
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    if reverse:
        x = np.flip(x, axis)
    if op in ("cumsum", "cumprod"):
        # MLX: cumsum of bool counts in int32, cumprod of bool stays bool (a running "all").
        out = "int32" if dt == "bool" and op == "cumsum" else dt
        if dt == "bool" or dt in INTS:
            acc = np.uint64 if dt.startswith("uint") else np.int64
            with np.errstate(over="ignore"):
                r = (np.cumsum if op == "cumsum" else np.cumprod)(x.astype(acc), axis)
            r = r.astype(np_dtype(out))
            ident = 0 if op == "cumsum" else 1
        else:
            r = (np.cumsum if op == "cumsum" else np.cumprod)(ref64(x), axis)
            ident = 0 if op == "cumsum" else 1
    elif op in ("cummax", "cummin"):
        out = dt
        f = np.maximum if op == "cummax" else np.minimum
        if dt == "bool" or dt in INTS:
            r = f.accumulate(x, axis)
            info = np.iinfo(np.uint8 if dt == "bool" else np_dtype(dt))
            ident = (info.min if op == "cummax" else info.max) if dt != "bool" else (op == "cummin")
        else:
            r = f.accumulate(ref64(x), axis)
            ident = -np.inf if op == "cummax" else np.inf
    else:
        out = dt if dt in FLOATS else "float32"
        r = np.logaddexp.accumulate(ref64(x), axis)
        ident = -np.inf
    if not inclusive:
        first = np.full_like(np.take(r, [0], axis), ident) if r.shape[axis] else np.take(r, [], axis)
        r = np.concatenate([first, np.take(r, range(r.shape[axis] - 1), axis)], axis) \
            if r.shape[axis] else r
    if reverse:
        r = np.flip(r, axis)
    return r, out


SCANS = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]


def scan_cases():
    for op, dt, (shape, axis), layout, rev, inc in itertools.product(
            SCANS, ALL, [((4, 5), 0), ((4, 5), 1), ((3, 4, 5), -2), ((7,), 0), ((2, 3), None),
                         ((), None), ((0, 3), 0), ((3, 200), 1)],
            LAYOUTS, [False, True], [True, False]):
        if dt == "complex64" and op == "logcumsumexp":
            continue
        yield op, dt, shape, axis, layout, rev, inc


@pytest.mark.parametrize("op,dt,shape,axis,layout,rev,inc", sample(scan_cases(), 250, salt=16))
def test_scans_match_numpy(nv, rng, op, dt, shape, axis, layout, rev, inc):
    x = rand(rng, shape, dt, edges=op in ("cummax", "cummin", "cumsum"))
    if op == "cumprod" and dt in FLOATS:
        x = (np.sign(ref64(x)) * (0.5 + np.abs(ref64(x)) % 1.5)).astype(x.dtype)
    got = nv.read(nv.own(getattr(lib, "nv_" + op)(nv.view(x, layout), axis_ptr(axis), rev, inc)))
    with np.errstate(all="ignore"):
        want, out = scan_ref(op, x, axis, rev, inc)
    rtol, atol = HALF_TOL.get(out, (None, None))
    if out == "float32" and op in ("cumprod", "logcumsumexp", "cumsum"):
        rtol, atol = 1e-5, 1e-5
    assert_close(got, want, out, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dt", ["int8", "uint8", "int32", "uint64", "int64"])
def test_integer_scans_wrap(nv, dt):
    info = np.iinfo(np_dtype(dt))
    x = np.array([info.max, 1, info.max, 2], np_dtype(dt))
    acc = np.uint64 if dt.startswith("uint") else np.int64
    with np.errstate(over="ignore"):
        got = nv.read(nv.own(lib.nv_cumsum(nv.array(x), None, False, True)))
        np.testing.assert_array_equal(got, np.cumsum(x.astype(acc)).astype(np_dtype(dt)))
        got = nv.read(nv.own(lib.nv_cumprod(nv.array(x), None, False, True)))
        np.testing.assert_array_equal(got, np.cumprod(x.astype(acc)).astype(np_dtype(dt)))


# ---- sorting ----

SORT_SHAPES = [((5,), 0), ((4, 6), 1), ((4, 6), 0), ((3, 4, 5), 1), ((2, 3), None), ((), None),
               ((0, 4), 1), ((3, 1000), 1), ((5000,), 0)]


def sort_cases():
    for op, dt, (shape, axis), layout in itertools.product(
            ["sort", "argsort"], ALL, SORT_SHAPES, LAYOUTS):
        yield op, dt, shape, axis, layout


def sortable(rng, shape, dt):
    x = rand(rng, shape, dt, edges=dt != "complex64")
    if dt in INTS or dt in FLOATS:
        # Duplicates exercise stability; full-range integers exercise every key byte.
        if x.size:
            flat = x.reshape(-1)
            flat[rng.integers(0, flat.size, flat.size // 3 + 1)] = flat[0]
        if dt in INTS and x.size:
            info = np.iinfo(np_dtype(dt))
            flat = x.reshape(-1)
            flat[:2] = [info.min, info.max][:flat.size]
    return x


@pytest.mark.parametrize("op,dt,shape,axis,layout", sample(sort_cases(), 150, salt=17))
def test_sort_argsort_match_numpy(nv, rng, op, dt, shape, axis, layout):
    x = sortable(rng, shape, dt)
    h = nv.view(x, layout)
    xs = x if dt in ("bool", "complex64") or dt in INTS else ref64(x)
    ax = -1 if axis is None else axis
    xs_flat = xs.reshape(-1) if axis is None else xs
    if op == "sort":
        got = nv.read(nv.own(lib.nv_sort(h, axis_ptr(axis))))
        want = np.sort(xs_flat, axis=ax, kind="stable")
        np.testing.assert_array_equal(ref64(got) if dt in FLOATS else got,
                                      want if dt not in ("bool",) else want.astype(bool))
        if dt in FLOATS:  # -0.0 and +0.0 both survive the round trip
            assert np.sum(np.signbit(ref64(got)) & (ref64(got) == 0)) == \
                np.sum(np.signbit(xs_flat) & (xs_flat == 0))
    else:
        got = nv.read(nv.own(lib.nv_argsort(h, axis_ptr(axis))))
        assert got.dtype == np.uint32
        np.testing.assert_array_equal(got, np.argsort(xs_flat, axis=ax, kind="stable"))


def test_large_sort_is_parallel_and_exact(nv, rng):
    x = rng.standard_normal(1 << 18).astype(np.float32)
    x[::1000] = np.nan
    x[5::997] = -0.0
    got = nv.read(nv.own(lib.nv_sort(nv.array(x), None)))
    np.testing.assert_array_equal(got, np.sort(x))
    idx = nv.read(nv.own(lib.nv_argsort(nv.array(x), None)))
    np.testing.assert_array_equal(idx, np.argsort(x, kind="stable"))
    y = rng.integers(-2**62, 2**62, 1 << 17)
    np.testing.assert_array_equal(nv.read(nv.own(lib.nv_sort(nv.array(y), None))), np.sort(y))


@pytest.mark.parametrize("dt,case,kth,arg", sample(itertools.product(
    REAL, [((9,), 0), ((4, 7), 1), ((4, 7), 0), ((2, 3, 4), None)], [0, 3, -1], [False, True]
), 60, salt=18))
def test_partition_property(nv, rng, dt, case, kth, arg):
    shape, ax = case
    x = sortable(rng, shape, dt)
    xs = x.reshape(-1) if ax is None else x
    a = -1 if ax is None else ax
    if arg:
        idx = nv.read(nv.own(lib.nv_argpartition(nv.array(x), kth, axis_ptr(ax))))
        assert idx.dtype == np.uint32
        np.testing.assert_array_equal(np.sort(idx, axis=a), np.broadcast_to(
            np.arange(xs.shape[a]).reshape([-1 if i == a % xs.ndim else 1 for i in range(xs.ndim)]),
            xs.shape))
        got = np.take_along_axis(xs, idx.astype(np.int64), axis=a)
    else:
        got = nv.read(nv.own(lib.nv_partition(nv.array(x), kth, axis_ptr(ax))))
    g, s = ref64(got), np.sort(ref64(xs), axis=a)
    k = kth % xs.shape[a]
    pivot = np.take(s, [k], axis=a)
    np.testing.assert_array_equal(np.take(g, [k], axis=a), pivot)
    with np.errstate(invalid="ignore"):
        before = np.take(g, range(k), axis=a)
        after = np.take(g, range(k + 1, xs.shape[a]), axis=a)
        assert np.all((before <= pivot) | np.isnan(pivot))
        assert np.all((after >= pivot) | np.isnan(after))
    np.testing.assert_array_equal(np.sort(g, axis=a), s)


@pytest.mark.parametrize("dt,k,axis", sample(itertools.product(REAL, [0, 1, 3, 6], [None, 0, 1, -1]), 40, salt=19))
def test_topk_matches_numpy(nv, rng, dt, k, axis):
    x = sortable(rng, (6, 6), dt)
    got = nv.read(nv.own(lib.nv_topk(nv.array(x), k, axis_ptr(axis))))
    xs = ref64(x).reshape(-1) if axis is None else ref64(x)
    a = -1 if axis is None else axis
    want = np.take(np.sort(xs, axis=a), range(xs.shape[a] - k, xs.shape[a]), axis=a)
    np.testing.assert_array_equal(np.sort(ref64(got), axis=a), want)


@pytest.mark.parametrize("dt", ["float32", "float64", "int32", "float16", "uint8", "int64"])
@pytest.mark.parametrize("shape,axis,k", [((7, 300), -1, 5), ((300, 7), 0, 3), ((4, 200, 3), 1, 9),
                                          ((5, 90), 1, 40), ((1000,), None, 7), ((3, 4, 50), None, 1)])
def test_topk_selection_matches_a_stable_sort(nv, rng, dt, shape, axis, k):
    """topk selects without sorting the row (a heap of the k best for small k): the values and
    their order must be those of a stable ascending sort's last k, ties and NaN included."""
    x = rng.integers(-5, 6, shape).astype(np_dtype(dt))
    if dt in FLOATS:
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, 6)] = np.nan
        flat[rng.integers(0, flat.size, 6)] = -0.0
        flat[rng.integers(0, flat.size, 3)] = np.inf
    for layout in ["contiguous", "transposed"]:
        got = nv.read(nv.own(lib.nv_topk(nv.view(x, layout), k, axis_ptr(axis))))
        xs = ref64(x).reshape(-1) if axis is None else ref64(x)
        a = -1 if axis is None else axis
        n = xs.shape[a]
        want = np.take(np.sort(xs, axis=a, kind="stable"), range(n - k, n), axis=a)
        np.testing.assert_array_equal(ref64(got), want)


@pytest.mark.parametrize("dt,right,vshape,layout", sample(itertools.product(
    REAL, [False, True], [(), (7,), (3, 5)], ["contiguous", "transposed", "reversed"]), 60, salt=20))
def test_searchsorted_matches_numpy(nv, rng, dt, right, vshape, layout):
    a = sortable(rng, (25,), dt)
    a = a[np.argsort(ref64(a) if dt in FLOATS else a, kind="stable")]  # ml_dtypes' sort misplaces NaN
    v = rand(rng, vshape, dt, edges=True)
    if v.size and dt not in ("bool",):
        v.reshape(-1)[0] = a[3]
    got = nv.read(nv.own(lib.nv_searchsorted(nv.array(a), nv.view(v, layout), right)))
    want = np.searchsorted(ref64(a) if dt in FLOATS else a, ref64(v) if dt in FLOATS else v,
                           side="right" if right else "left")
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(got, np.asarray(want).astype(np.uint32))


def test_searchsorted_promotes_weak_scalar(nv):
    a = np.array([1, 2, 3, 5], np.int32)
    got = nv.read(nv.own(lib.nv_searchsorted(nv.array(a), nv.own(lib.nv_weak_scalar(2.5)), False)))
    assert got == 2


# ---- errors ----

def error_of(nv, h):
    h = nv.own(h)
    st, msg = nv.status(h)
    assert st != 0
    return msg


def test_errors_name_the_op_and_problem(nv):
    x = nv.array(np.ones((2, 3), np.float32))
    e = nv.array(np.ones((0, 3), np.float32))
    c = nv.array(np.ones((3,), np.complex64))
    three, n = ints([2])
    rep, rn = ints([0, -2])
    assert "max: axis 2 is out of range for shape (2,3)" == error_of(nv, lib.nv_max(x, three, n, False))
    assert "repeated" in error_of(nv, lib.nv_mean(x, rep, rn, False))
    assert error_of(nv, lib.nv_max(e, None, 0, False)).startswith("max: cannot")
    assert error_of(nv, lib.nv_argmax(e, None, False)).startswith("argmax:")
    assert error_of(nv, lib.nv_logsumexp(e, None, 0, False)).startswith("logsumexp:")
    assert "median: axis 2" in error_of(nv, call_axes(lib.nv_median, c, (2,), False))
    assert "var: axis 2" in error_of(nv, call_axes(lib.nv_var, c, (2,), False, 0))
    assert "complex64" in error_of(nv, lib.nv_softmax(c, None, 0, False))
    assert error_of(nv, lib.nv_trace(nv.array(np.ones(3)), 0, 0, 1, -1)).startswith("trace: needs")
    assert "both" in error_of(nv, lib.nv_trace(x, 0, 1, -1, -1))
    assert error_of(nv, lib.nv_partition(x, 3, axis_ptr(1))).startswith("partition: kth 3")
    assert error_of(nv, lib.nv_topk(x, 4, axis_ptr(-1))).startswith("topk: k 4")
    assert error_of(nv, lib.nv_cumsum(x, axis_ptr(2), False, True)).startswith("cumsum: axis 2")
    assert error_of(nv, lib.nv_sort(x, axis_ptr(-3))).startswith("sort: axis -3")
    assert error_of(nv, lib.nv_searchsorted(x, x, False)).startswith("searchsorted: a must be 1-D")
    assert "NULL" in error_of(nv, lib.nv_sum(None, None, 0, False))
    assert "NULL" in error_of(nv, lib.nv_searchsorted(x, None, False))
    # Errors are sticky through later ops.
    bad = nv.own(lib.nv_max(x, three, n, False))
    assert error_of(nv, lib.nv_sort(bad, None)).startswith("max: axis 2")


def _sort_inputs(rng, n):
    """float32 inputs of length n shaped to stress the vectorized quicksort's partitions, its
    sorting networks (n <= 16) and its parallel split."""
    normal = rng.standard_normal(n).astype(np.float32)
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45,
                         np.finfo(np.float32).max, np.finfo(np.float32).min], np.float32)
    mixed = normal.copy()
    if n:
        mixed[rng.integers(0, n, n // 4 + 1)] = rng.choice(specials, n // 4 + 1)
    yield "normal", normal
    yield "specials", mixed
    yield "equal", np.full(n, 2.5, np.float32)
    yield "few", rng.integers(-2, 3, n).astype(np.float32)
    yield "sorted", np.sort(normal)
    yield "reversed", np.sort(normal)[::-1].copy()
    yield "organ", np.concatenate([np.arange(n // 2), np.arange(n - n // 2)[::-1]]).astype(np.float32)
    yield "sawtooth", (np.arange(n) % 17).astype(np.float32)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000,
                               (1 << 16) + 3, (1 << 18) + 5])
def test_float32_sort_every_layout_of_values(nv, rng, n):
    for name, x in _sort_inputs(rng, n):
        got = nv.read(nv.own(lib.nv_sort(nv.array(x), None)))
        want = np.sort(x)
        np.testing.assert_array_equal(got, want, err_msg=f"{name} n={n}")
        # -0.0 before +0.0, NaN (of either sign) last.
        z = np.flatnonzero(got == 0)
        assert np.all(np.diff(np.signbit(got[z]).astype(np.int8)) <= 0), name
        assert np.sum(np.signbit(got[z])) == np.sum(np.signbit(x[x == 0])), name
        assert np.all(np.isnan(got[n - np.isnan(x).sum():])), name


@pytest.mark.parametrize("op", ["nv_var", "nv_std"])
@pytest.mark.parametrize("shape,axes,ddof", [((7,), None, 0), ((4, 5), (0,), 1), ((4, 5), (1,), 0),
                                             ((3, 4, 5), (2, 0), 2), ((0, 3), (0,), 0),
                                             ((1,), None, 1), ((), None, 0)])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_complex_var_std_are_float32_as_numpy(nv, rng, op, shape, axes, ddof, layout):
    # MLX and NumPy: the mean of |x - mean|^2 (a real float32), also for NaN and inf parts.
    x = (rand(rng, shape, "float32") + 1j * rand(rng, shape, "float32")).astype(np.complex64)
    if x.size > 2:
        x.flat[1] = complex(np.nan, 1.0)
        x.flat[2] = complex(1.0, np.inf)
    for keep in [False, True]:
        got = nv.read(nv.own(call_axes(getattr(lib, op), nv.view(x, layout), axes, keep, ddof)))
        with np.errstate(all="ignore"):
            want = (np.var if op == "nv_var" else np.std)(x.astype(np.complex128), axis=np_axes(axes),
                                                          keepdims=keep, ddof=ddof)
        assert got.dtype == np.float32
        assert_close(got, want, "float32", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,axes", [((7,), None), ((4, 6), (0,)), ((4, 5), (1,)),
                                        ((3, 4, 5), (2, 0)), ((2, 3), None), ((), None),
                                        ((1,), (0,))])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_complex_median_matches_numpy(nv, rng, shape, axes, layout):
    # MLX: lexicographic order (real part first), the mean of the two middle values.
    x = (rng.integers(-3, 4, shape) + 1j * rng.integers(-3, 4, shape)).astype(np.complex64)
    for keep in [False, True]:
        got = nv.read(nv.own(call_axes(lib.nv_median, nv.view(x, layout), axes, keep)))
        want = np.median(x.astype(np.complex128), axis=np_axes(axes), keepdims=keep)
        assert got.dtype == np.complex64
        assert_close(got, want, "complex64", rtol=1e-6, atol=1e-6)
    if x.size > 1:
        x.flat[0] = complex(np.nan, 0.0)
        got = nv.read(nv.own(lib.nv_median(nv.array(x), None, 0, False)))
        assert np.isnan(got.real)
    e = nv.read(nv.own(call_axes(lib.nv_median, nv.array(np.zeros((0, 3), np.complex64)), (0,), False)))
    assert e.shape == (3,) and np.all(np.isnan(e.real))


# ---- the row kernels of the fast paths (AVX-512 where the CPU has it) ----

ROW_LENGTHS = [1, 2, 15, 16, 17, 33, 63, 64, 65, 100, 255, 256, 257, 300, 511, 512, 513, 700,
               1024, 1025]


def _rows(rng, n):
    """Rows of float32 of length n, one per kind: random, ties, specials, sorted, reversed."""
    specials = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32)
    normal = (rng.standard_normal(n) * 3).astype(np.float32)
    mixed = normal.copy()
    mixed[rng.integers(0, n, n // 4 + 1)] = rng.choice(specials, n // 4 + 1)
    zeros = rng.choice(np.array([-0.0, 0.0], np.float32), n)
    return np.stack([normal, mixed, zeros, rng.integers(-3, 4, n).astype(np.float32),
                     np.sort(normal), np.sort(normal)[::-1], np.full(n, np.nan, np.float32),
                     np.full(n, -np.inf, np.float32)])


def _zeros_in_order(row):
    z = np.flatnonzero(row == 0)
    return np.all(np.diff(np.signbit(row[z]).astype(np.int8)) <= 0)


@pytest.mark.parametrize("n", ROW_LENGTHS)
@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
def test_float32_rows_sort_in_one_network(nv, rng, n, layout):
    """Rows of up to 512 float32 sort in one network of registers, longer ones after
    partitions: NumPy's order with NaN last and -0.0 before +0.0, the values' bits kept."""
    x = _rows(rng, n)
    axis = 0 if layout == "transposed" else 1
    xs = x.T.copy() if layout == "transposed" else x
    got = nv.read(nv.own(lib.nv_sort(nv.view(xs, layout), axis_ptr(axis))))
    got = got.T if layout == "transposed" else got
    np.testing.assert_array_equal(got, np.sort(x, axis=1), err_msg=f"n={n}")
    for r, row in zip(got, x):
        assert _zeros_in_order(r)
        assert np.sum(np.signbit(r) & (r == 0)) == np.sum(np.signbit(row) & (row == 0))


def test_float32_sort_of_a_broadcast_row(nv, rng):
    row = (rng.standard_normal(513) * 5).astype(np.float32)
    row[::9] = np.nan
    shape, nd = ints([6, 513])
    b = nv.own(lib.nv_broadcast_to(nv.array(row), shape, nd))
    got = nv.read(nv.own(lib.nv_sort(b, axis_ptr(-1))))
    np.testing.assert_array_equal(got, np.broadcast_to(np.sort(row), (6, 513)))


@pytest.mark.parametrize("n", ROW_LENGTHS + [4099])
@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16"])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "reversed"])
def test_argmax_argmin_rows_edges(nv, rng, n, dt, layout):
    """Float rows: the first extreme (ties), the first NaN wins, -0.0 equals +0.0, and the
    extreme anywhere (first element, the masked tail) is found."""
    x = _rows(rng, n)
    extra = rng.integers(-2, 3, (4, n)).astype(np.float32)
    extra[0, -1] = 9  # the extreme in the row's last (tail) lane
    extra[1, 0] = 9  # the extreme first: the tail's fill value
    extra[2, [n // 2, n - 1]] = np.nan
    extra[3, -1] = np.nan
    x = np.concatenate([x, extra]).astype(np_dtype(dt))
    for op, f in [(lib.nv_argmax, np.argmax), (lib.nv_argmin, np.argmin)]:
        got = nv.read(nv.own(op(nv.view(x, layout), axis_ptr(1), False)))
        np.testing.assert_array_equal(got, f(ref64(x), axis=1), err_msg=f"n={n}")


@pytest.mark.parametrize("rows", [1, 7, 8, 9, 15, 16, 17, 32, 255, 256, 257, 513])
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "broadcast"])
def test_column_sums_eight_rows_a_pass(nv, rng, rows, dt, layout):
    """Sums and means over a leading axis (eight rows a pass, row groups of 256) equal the
    float64 sums rounded once; NaN and infinities stay in their columns."""
    cols = 2049 if rows <= 32 else 40
    x = (rng.standard_normal((rows, cols)) * 100).astype(np_dtype(dt))
    x[rng.integers(0, rows, 3), rng.integers(0, cols, 3)] = np.nan
    x[rng.integers(0, rows, 3), rng.integers(0, cols, 3)] = np.inf
    if layout == "broadcast":
        x = np.broadcast_to(x[:1], x.shape)
        shape, nd = ints(x.shape)
        h = nv.own(lib.nv_broadcast_to(nv.array(x[:1]), shape, nd))
    else:
        h = nv.view(x, layout)
    for op, f in [(lib.nv_sum, np.sum), (lib.nv_mean, np.mean)]:
        got = nv.read(nv.own(call_axes(op, h, (0,), False)))
        with np.errstate(invalid="ignore"):
            want = f(x.astype(np.float64), axis=0)
        assert got.dtype == np_dtype(dt)
        if dt == "float32":
            np.testing.assert_array_equal(got, want.astype(np.float32), err_msg=f"rows={rows}")
        else:
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-10, err_msg=f"rows={rows}")


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "int8", "int16", "int32",
                                "uint8", "uint16", "uint32", "bool", "float64", "int64"])
@pytest.mark.parametrize("n", [8, 9, 16, 17, 64, 65, 200, 511, 512, 513, 4099])
def test_topk_long_rows_skip_blocks(nv, rng, dt, n):
    """topk along the last axis where most blocks are skipped against the heap's root: rows
    ascending (every element enters), descending, with ties, NaN and infinities; the values and
    order of a stable sort's last k."""
    if dt == "bool":
        x = rng.integers(0, 2, (5, n)).astype(bool)
    else:
        x = np.stack([np.arange(n), np.arange(n)[::-1], rng.integers(-4, 5, n),
                      rng.integers(-100, 100, n), rng.integers(0, 3, n)]).astype(np_dtype(dt))
        if dt in FLOATS:
            x[3, rng.integers(0, n, n // 10 + 1)] = np.nan
            x[4, rng.integers(0, n, 3)] = np.inf
            x[4, rng.integers(0, n, n // 3 + 1)] = -0.0
    for k in [1, 3, 8]:
        if k > n:
            continue
        for layout in ["contiguous", "strided"]:
            got = nv.read(nv.own(lib.nv_topk(nv.view(x, layout), k, axis_ptr(-1))))
            xs = x if dt == "bool" or dt in INTS else ref64(x)
            want = np.sort(xs, axis=-1, kind="stable")[:, n - k:]
            np.testing.assert_array_equal(got if dt == "bool" or dt in INTS else ref64(got), want,
                                          err_msg=f"n={n} k={k} {layout}")


# ---- column sums in registers, argmax rows with prefetch, rows of up to 1024 in networks, topk
# tested on float32 values ----

COL_LAYOUTS = ["contiguous", "strided", "reversed", "transposed", "broadcast"]


def _col_input(nv, rng, rows, cols, dt, layout, edges):
    """A (rows, cols) input of float dtype `dt` with its nuvec view as `layout` (broadcast: every
    row the first one); with `edges`, NaN, infinities, signed zeros and denormals."""
    x = (rng.standard_normal((rows, cols)) * 100).astype(np_dtype(dt))
    if edges:
        tiny = np.finfo(np_dtype(dt)).tiny
        specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, tiny / 4, -tiny / 8], np_dtype(dt))
        x.flat[rng.integers(0, x.size, x.size // 5 + 1)] = rng.choice(specials, x.size // 5 + 1)
    if layout == "broadcast":
        x = np.ascontiguousarray(np.broadcast_to(x[:1], x.shape))
        shape, nd = ints(x.shape)
        return x, nv.own(lib.nv_broadcast_to(nv.array(x[:1]), shape, nd))
    return x, nv.view(x, layout)


@pytest.mark.parametrize("rows", [1, 3, 8, 32, 41, 300])
@pytest.mark.parametrize("cols", [1, 7, 8, 31, 33, 100, 257])
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("layout", COL_LAYOUTS)
@pytest.mark.parametrize("edges", [False, True])
def test_column_sums_every_width_and_layout(nv, rng, rows, cols, dt, layout, edges):
    """Sums and means over axis 0 (the column kernels: 32 or 16 columns in registers, masked or
    portable tails) of every width around the vector widths, in every layout, with edge values:
    float32 results are the float64 sums rounded once, float64 ones within 1e-13."""
    x, h = _col_input(nv, rng, rows, cols, dt, layout, edges)
    for op, f in [(lib.nv_sum, np.sum), (lib.nv_mean, np.mean)]:
        got = nv.read(nv.own(call_axes(op, h, (0,), False)))
        with np.errstate(invalid="ignore", over="ignore"):
            want = f(x.astype(np.float64), axis=0)
        assert got.dtype == np_dtype(dt) and got.shape == (cols,)
        if dt == "float32":
            with np.errstate(over="ignore"):
                np.testing.assert_array_equal(got, want.astype(np.float32),
                                              err_msg=f"rows={rows} cols={cols} {layout}")
        else:  # within the float64 rounding of a sum of `rows` terms
            scale = np.abs(x).sum(axis=0) / (rows if f is np.mean else 1)
            with np.errstate(invalid="ignore"):
                bound = np.where(np.isfinite(scale), 2 * rows * 2.0 ** -53 * scale, 0)
                ok = (got == want) | (np.isnan(got) & np.isnan(want)) | (np.abs(got - want) <= bound)
            assert np.all(ok), f"rows={rows} cols={cols} {layout}: {got[~ok]} want {want[~ok]}"


@pytest.mark.parametrize("rows", [32, 256, 257, 3000])
@pytest.mark.parametrize("layout", ["contiguous", "reversed"])
def test_float32_column_sums_keep_float64_accuracy(nv, rng, rows, layout):
    """The accuracy kept: each column is summed in float64 (row groups of 256 joined with
    Neumaier's compensation) and rounded to float32 once, so against the exact sum the error
    is within half a float32 ulp of the result plus rows * 2^-52 * sum|x|. Inputs that cancel
    (values near 1e4 and their negatives with small ones between) would be off by many float32
    ulps in a float32 accumulation, pairwise included."""
    cols = 67
    big = (rng.uniform(1e3, 1e4, (rows // 2, cols))).astype(np.float32)
    small = rng.standard_normal((rows - 2 * (rows // 2), cols)).astype(np.float32)
    x = np.concatenate([big, small, -big[::-1] * np.float32(1.0000001)])
    x = x[rng.permutation(len(x))]
    got = nv.read(nv.own(call_axes(lib.nv_sum, nv.view(x, layout), (0,), False)))
    exact = np.array([sum(map(__import__("fractions").Fraction, map(float, c))) for c in x.T])
    err = np.abs(got.astype(np.float64) - exact.astype(np.float64))
    ulp = np.spacing(np.abs(got)).astype(np.float64)
    bound = 0.5 * ulp + rows * 2.0 ** -52 * np.abs(x.astype(np.float64)).sum(axis=0)
    assert np.all(err <= bound), f"worst error {np.max(err / bound):.3g} of the bound"


ARG_DTYPES = ["bool", "int8", "uint8", "int32", "uint32", "int64", "float16", "bfloat16",
              "float32", "float64"]


@pytest.mark.parametrize("n", [1, 16, 17, 511, 512, 513, 5000])
@pytest.mark.parametrize("dt", ARG_DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "strided", "reversed", "transposed", "broadcast"])
def test_argmax_argmin_many_rows(nv, rng, n, dt, layout):
    """Many rows one after the other (float32/float64 rows read in place prefetch the row two
    ahead; the last two rows prefetch none): NumPy's first extreme, first NaN, in every layout."""
    rows = 41
    if dt == "bool":
        x = rng.integers(0, 2, (rows, n)).astype(bool)
    elif dt in INTS:
        x = rng.integers(-50 if dt.startswith("int") else 0, 50, (rows, n)).astype(np_dtype(dt))
    else:
        x = rng.integers(-4, 5, (rows, n)).astype(np.float32)
        x[rng.integers(0, rows, rows // 3), rng.integers(0, n, rows // 3)] = np.nan
        x[rng.integers(0, rows, 5), rng.integers(0, n, 5)] = -0.0
        x[-1, -1], x[-2, 0] = np.inf, -np.inf
        x = x.astype(np_dtype(dt))
    if layout == "broadcast":
        x = np.ascontiguousarray(np.broadcast_to(x[:1], x.shape))
        shape, nd = ints(x.shape)
        h = nv.own(lib.nv_broadcast_to(nv.array(x[:1]), shape, nd))
        axis = 1
    else:  # transposed: x's values over a copy of x.T (rows of stride `rows`)
        h, axis = nv.view(x, layout), 1
    xr = x if dt == "bool" or dt in INTS else ref64(x)
    for op, f in [(lib.nv_argmax, np.argmax), (lib.nv_argmin, np.argmin)]:
        got = nv.read(nv.own(op(h, axis_ptr(axis), False)))
        np.testing.assert_array_equal(got, f(xr, axis=1), err_msg=f"n={n} {layout}")


SORT_ROW_LENGTHS = ROW_LENGTHS + [600, 767, 768, 769, 1000, 1023, 2048, 3001]


@pytest.mark.parametrize("n", SORT_ROW_LENGTHS)
@pytest.mark.parametrize("layout", ["contiguous", "reversed", "broadcast"])
def test_float32_rows_up_to_1024_sort_in_networks(nv, rng, n, layout):
    """Rows of up to 1024 float32 sort as two network runs of 512 and a merge, longer ones after
    partitions into such leaves: the values' bits of NumPy's order, NaN last, -0.0 before
    +0.0."""
    x = _rows(rng, n)
    if layout == "broadcast":
        x = np.ascontiguousarray(np.broadcast_to(x[1:2], x.shape))
        shape, nd = ints(x.shape)
        h = nv.own(lib.nv_broadcast_to(nv.array(x[:1]), shape, nd))
    else:
        h = nv.view(x, layout)
    got = nv.read(nv.own(lib.nv_sort(h, axis_ptr(1))))
    want = np.sort(x, axis=1)
    np.testing.assert_array_equal(got, want, err_msg=f"n={n}")
    for r, row in zip(got, x):
        assert _zeros_in_order(r)
        assert np.sum(np.signbit(r) & (r == 0)) == np.sum(np.signbit(row) & (row == 0))
        nan = np.isnan(row).sum()
        assert np.all(np.isnan(r[n - nan:]))


def _f32_keys(x):
    """float32 values as unsigned keys in nuvec's order: -0.0 below +0.0, every NaN last."""
    u = x.view(np.uint32)
    k = np.where(u & 0x80000000, ~u, u | 0x80000000).astype(np.uint32)
    return np.where(np.isnan(x), np.uint32(0xFFFFFFFF), k)


@pytest.mark.parametrize("n", [64, 200, 4096])
@pytest.mark.parametrize("k", [1, 8, 16, 64])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "transposed"])
def test_float32_topk_bits_at_the_threshold(nv, rng, n, k, layout):
    """topk of float32 rows tests blocks on the values against the heap root's float: rows whose
    k-th largest is a signed zero among both zeros, NaN-heavy rows (the root a NaN), denormals
    and infinities at the threshold; the values' bits and order are those of a stable sort by
    key (-0.0 below +0.0, NaN last) and index."""
    if 8 * k > n:
        k = n // 8
    tiny = np.float32(1e-45)
    rows = [rng.choice(np.array([-0.0, 0.0, -1.0], np.float32), n),
            np.where(rng.random(n) < 0.6, np.float32(np.nan), rng.standard_normal(n)).astype(np.float32),
            rng.choice(np.array([tiny, -tiny, 0.0, -0.0, 2 * tiny], np.float32), n),
            rng.choice(np.array([np.inf, -np.inf, 1.0, np.inf], np.float32), n),
            np.arange(n, dtype=np.float32), (rng.standard_normal(n) * 5).astype(np.float32)]
    x = np.stack(rows)
    got = nv.read(nv.own(lib.nv_topk(nv.view(x, layout), k, axis_ptr(1))))
    idx = np.argsort(_f32_keys(x), axis=1, kind="stable")[:, n - k:]
    want = np.take_along_axis(x, idx, axis=1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"n={n} k={k}")
