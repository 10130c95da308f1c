"""The CUDA backend's scatter family on the GPU, against nuvec's CPU results: scatter,
scatter_add / _prod / _max / _min and put_along_axis over dtypes with many duplicate
destinations (10^5 updates into 10 slots), several index arrays and slices, broadcast updates,
strided / transposed / reversed bases, in place (donated) and not, empty cases, out-of-range
indices (the op's message, the GPU healthy after); masked_scatter (random, all-false, all-true
masks), slice_update_dynamic (negative and clamped starts), slice_update_add / _prod / _max /
_min and as_strided_vjp with overlapping windows.

Values are chosen so that every result is exact whatever the order of combination (small
integers for sums, powers of two for products), so GPU and CPU must agree bit for bit (NaNs
of any payload equal). Every GPU evaluation must not fall back to the CPU."""
import ctypes as C
import os
import random
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import needs_gpu, On, rng  # noqa: E402,F401  (rng: a fixture)
from nvc import (CODE, DTYPES, FLOATS, INTS, NuvecError, Session, ints, lib,  # noqa: E402
                 np_dtype, nv_name, ref64, sig)


P = C.c_void_p
I = C.c_int
IP = C.POINTER(C.c_int)
LP = C.POINTER(C.c_int64)
sig("nv_copy", P, P)
sig("nv_broadcast_to", P, P, IP, I)
sig("nv_scatter", P, P, C.POINTER(P), I, P, IP)
sig("nv_scatter_add", P, P, C.POINTER(P), I, P, IP)
sig("nv_scatter_prod", P, P, C.POINTER(P), I, P, IP)
sig("nv_scatter_max", P, P, C.POINTER(P), I, P, IP)
sig("nv_scatter_min", P, P, C.POINTER(P), I, P, IP)
sig("nv_put_along_axis", P, P, P, P, I)
sig("nv_masked_scatter", P, P, P, P)
sig("nv_slice_update_dynamic", P, P, P, P, IP, I)
for _n in ("add", "prod", "max", "min"):
    sig(f"nv_slice_update_{_n}", P, P, P, IP, IP, IP, I)
sig("nv_as_strided", P, P, IP, I, LP, C.c_int64)
sig("nv_add", P, P, P)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_push", I, P, P)
sig("nv_vec_get", P, P, C.c_size_t)
CLOSURE_FN = C.CFUNCTYPE(I, P, P, P)
sig("nv_closure_new", P, CLOSURE_FN, P, P)
sig("nv_closure_release", None, P)
sig("nv_vjp", I, P, P, P, P, P)
sig("nv_retain", P, P)

pytestmark = needs_gpu

ALL = DTYPES
NUMERIC = INTS + FLOATS + ["complex64"]
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def small(rng, shape, dtype, lo=-2, hi=2):
    """Small integer values of `dtype` (sums of many stay exact in every float dtype)."""
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == "complex64":
        return (rng.integers(lo, hi, shape, endpoint=True) +
                1j * rng.integers(lo, hi, shape, endpoint=True)).astype(np.complex64)
    if dtype.startswith("uint"):
        lo = 0
    return rng.integers(lo, hi, shape, endpoint=True).astype(np_dtype(dtype))


def pow2(rng, shape, dtype):
    """Factors whose products are exact: ±1, 2 and 0.5 (±1 and 2 for integers)."""
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    vals = [1, -1, 2] if dtype in INTS else [1, -1, 2, 0.5]
    if dtype.startswith("uint"):
        vals = [1, 2, 3]
    if dtype == "complex64":
        return np.array([1, -1, 1j, -1j, 2], np.complex64)[rng.integers(0, 5, shape)]
    return np.array(vals)[rng.integers(0, len(vals), shape)].astype(np_dtype(dtype))


def same(got, want):
    """Equal values and dtype; NaNs of any payload equal."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape)
    if got.dtype.kind in "fc" or nv_name(got.dtype) == "bfloat16":
        g, w = ref64(got), ref64(want)
        nan = np.isnan(g) & np.isnan(w)
        np.testing.assert_array_equal(np.where(nan, 0, g), np.where(nan, 0, w))
    else:
        np.testing.assert_array_equal(got, want)


def on_both(nv, build):
    """build() on the GPU (no CPU fallback allowed) and on the CPU; returns both results."""
    with On("gpu"):
        h = nv.own(build())
    before = lib.nv_gpu_fallback_count()
    got = nv.read(h)
    assert lib.nv_gpu_fallback_count() == before, "the op fell back to the CPU"
    with On("cpu"):
        want = nv.read(nv.own(build()))
    return got, want


def check(nv, build):
    got, want = on_both(nv, build)
    same(got, want)
    return got


SCATTERS = {"scatter": lib.nv_scatter, "scatter_add": lib.nv_scatter_add,
            "scatter_prod": lib.nv_scatter_prod, "scatter_max": lib.nv_scatter_max,
            "scatter_min": lib.nv_scatter_min}


def scatter_call(nv, op, a, idx_list, upd, axes):
    arr = (P * len(idx_list))(*idx_list)
    ax, n = ints(axes) if axes else (None, 0)
    return SCATTERS[op](a, arr, n, upd, ax)


def values_for(op, rng, shape, dt):
    if op == "scatter_prod":
        return pow2(rng, shape, dt)
    if op in ("scatter_max", "scatter_min") and dt in FLOATS:
        v = small(rng, shape, dt, -50, 50)
        v.flat[rng.integers(0, v.size)] = np.nan
        return v
    return small(rng, shape, dt)


# ---- scatter*: duplicates over dtypes ----

@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("op", list(SCATTERS))
def test_scatter_many_duplicates(nv, rng, op, dt):
    # Half-precision sums and products stay exact only over fewer terms per slot.
    half = dt in ("float16", "bfloat16")
    m = (40 if half else 200) if op == "scatter_prod" else (1000 if half else 100000)
    base = pow2(rng, (10,), dt) if op == "scatter_prod" else small(rng, (10,), dt)
    upd = values_for(op, rng, (m, 1), dt)
    if op == "scatter":
        upd = small(rng, (m, 1), dt, -100, 100) if dt != "bool" else upd
    idx = rng.integers(-10, 10, m).astype(np.int32)

    def build():
        return scatter_call(nv, op, nv.array(base), [nv.array(idx)], nv.array(upd), [0])
    check(nv, build)


@pytest.mark.parametrize("idt", INTS)
def test_scatter_index_dtypes(nv, rng, idt):
    idx = rng.integers(0, 10, 5000).astype(np_dtype(idt))
    base, upd = small(rng, (10, 3), "float32"), small(rng, (5000, 1, 3), "float32")
    for op in ("scatter", "scatter_add", "scatter_max"):
        check(nv, lambda: scatter_call(nv, op, nv.array(base), [nv.array(idx)], nv.array(upd), [0]))


@pytest.mark.parametrize("dt", ["float32", "int16", "bfloat16", "complex64", "uint8", "float64"])
@pytest.mark.parametrize("op", list(SCATTERS))
def test_scatter_two_index_arrays_and_slices(nv, rng, op, dt):
    # Index arrays on axes 2 and 0 broadcast to (40, 3); slices of (1, 4, 1, 2) overlap
    # partially on axis 1 when positions repeat.
    base = values_for(op, rng, (6, 9, 5, 4), dt)
    i2 = rng.integers(-5, 5, (40, 1)).astype(np.int64)
    i0 = rng.integers(0, 6, (1, 3)).astype(np.int32)
    upd = values_for(op, rng, (40, 3, 1, 4, 1, 2), dt)
    check(nv, lambda: scatter_call(nv, op, nv.array(base), [nv.array(i2), nv.array(i0)],
                                   nv.array(upd), [2, 0]))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", ["scatter", "scatter_add", "scatter_min"])
def test_scatter_base_layouts_and_broadcast_updates(nv, rng, op, layout):
    base = small(rng, (12, 16), "float32")
    idx = rng.integers(0, 12, 300).astype(np.int32)
    row = small(rng, (1, 16), "float32")

    def build():
        shape, n = ints((300, 1, 16))
        u = nv.own(lib.nv_broadcast_to(nv.array(row), shape, n))
        return scatter_call(nv, op, nv.view(base, layout), [nv.view(idx, "strided")], u, [0])
    check(nv, build)


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("op", ["scatter", "scatter_add", "scatter_prod"])
def test_scatter_in_place_and_not(nv, rng, op, in_place):
    base = pow2(rng, (50, 8), "float32")
    idx = rng.integers(0, 50, 2000).astype(np.int64)
    upd = values_for(op, rng, (2000, 1, 8), "float32")
    with On("cpu"):
        want = nv.read(nv.own(scatter_call(nv, op, nv.array(base), [nv.array(idx)],
                                           nv.array(upd), [0])))
    with On("gpu"):
        # A computed base released before the evaluation may be written in place.
        b = lib.nv_copy(nv.array(base))
        out = nv.own(scatter_call(nv, op, b, [nv.array(idx)], nv.array(upd), [0]))
        if in_place:
            lib.nv_release(b)
        else:
            nv.own(b)
        before = lib.nv_gpu_fallback_count()
        same(nv.read(out), want)
        if not in_place:
            same(nv.read(b), base)
        assert lib.nv_gpu_fallback_count() == before


def test_scatter_empty(nv, rng):
    base = small(rng, (10, 4), "float32")
    for op in SCATTERS:
        got = check(nv, lambda: scatter_call(nv, op, nv.array(base),
                                             [nv.array(np.zeros(0, np.int32))],
                                             nv.array(np.zeros((0, 1, 4), np.float32)), [0]))
        same(got, base)
        check(nv, lambda: scatter_call(nv, op, nv.array(np.zeros((0, 4), np.float32)),
                                       [nv.array(np.zeros(0, np.int32))],
                                       nv.array(np.zeros((0, 0, 4), np.float32)), [0]))


def test_scatter_without_index_arrays(nv, rng):
    base, upd = small(rng, (5, 6), "int32"), small(rng, (2, 3), "int32")
    for op in SCATTERS:
        check(nv, lambda: scatter_call(nv, op, nv.array(base), [], nv.array(upd), []))


@pytest.mark.parametrize("op", list(SCATTERS) + ["put_along_axis"])
def test_out_of_range_index_fails_with_the_op_name(nv, rng, op):
    base = small(rng, (10,), "float32")
    idx = np.array([1, 2, 10, 3], np.int32)
    upd = small(rng, (4,), "float32")
    with On("gpu"):
        if op == "put_along_axis":
            h = nv.own(lib.nv_put_along_axis(nv.array(base), nv.array(idx), nv.array(upd), 0))
        else:
            h = nv.own(scatter_call(nv, op, nv.array(base), [nv.array(idx)],
                                    nv.array(upd.reshape(4, 1)), [0]))
        with pytest.raises(NuvecError) as e:
            nv.read(h)
        assert f"{op}: index 10 is out of range for an axis of size 10" in e.value.message
        # The GPU still works.
        ok = nv.own(lib.nv_add(nv.array(base), nv.array(base)))
        np.testing.assert_array_equal(nv.read(ok), base + base)


# ---- put_along_axis ----

@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_put_along_axis(nv, rng, dt, axis):
    base = small(rng, (7, 9, 5), dt)
    ishape = list(base.shape)
    ishape[axis] = 30
    idx = rng.integers(-base.shape[axis], base.shape[axis], ishape).astype(np.int32)
    vals = small(rng, ishape, dt, -100, 100) if dt != "bool" else small(rng, ishape, dt)
    check(nv, lambda: lib.nv_put_along_axis(nv.view(base, "transposed"), nv.array(idx),
                                            nv.array(vals), axis))


# ---- masked_scatter ----

@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("kind", ["random", "none", "all"])
def test_masked_scatter(nv, rng, dt, kind):
    base = small(rng, (37, 129, 3), dt)
    mask = {"random": rng.integers(0, 2, (37, 129)).astype(bool),
            "none": np.zeros((37, 129), bool), "all": np.ones((37, 129), bool)}[kind]
    src = small(rng, (37 * 129 + 5, 3), dt, -100, 100) if dt != "bool" else small(rng, (37 * 129 + 5, 3), dt)
    check(nv, lambda: lib.nv_masked_scatter(nv.array(base), nv.view(mask, "transposed"),
                                            nv.array(src)))


def test_masked_scatter_large_and_elementwise(nv, rng):
    base = small(rng, (300000,), "float32")
    mask = rng.integers(0, 2, (300000,)).astype(bool)
    src = small(rng, (300000,), "float32", -100, 100)
    check(nv, lambda: lib.nv_masked_scatter(nv.array(base), nv.array(mask), nv.array(src)))


def test_masked_scatter_too_few_rows_fails(nv, rng):
    base = small(rng, (10,), "float32")
    mask = np.ones(10, bool)
    with On("gpu"):
        h = nv.own(lib.nv_masked_scatter(nv.array(base), nv.array(mask),
                                         nv.array(small(rng, (4,), "float32"))))
        with pytest.raises(NuvecError) as e:
            nv.read(h)
        assert "masked_scatter" in e.value.message


# ---- slice_update_dynamic ----

@pytest.mark.parametrize("dt", ALL)
@pytest.mark.parametrize("start", [(2, 3), (-3, -40), (100, 1), (0, -1)])
def test_slice_update_dynamic(nv, rng, dt, start):
    base, upd = small(rng, (20, 30), dt), small(rng, (5, 7), dt, -100, 100)
    for sdt in ("int32", "int64", "uint8"):
        st = np.array(start, np_dtype(sdt)) if sdt != "uint8" else np.abs(np.array(start)).astype(np.uint8)
        ax, n = ints((0, 1))
        check(nv, lambda: lib.nv_slice_update_dynamic(nv.view(base, "strided"), nv.array(upd),
                                                      nv.array(st), ax, n))


# ---- slice_update_add / prod / max / min ----

SU_CASES = [((2, 3), (7, 20), (1, 1), (5, 17)), ((0, 0), (20, 30), (2, 3), (10, 10)),
            ((-1, -1), (-21, -31), (-1, -2), (20, 15)), ((5, 4), (6, 29), (1, 1), ()),
            ((3, 0), (9, 30), (2, 1), (30,)), ((3, 3), (3, 9), (1, 1), (0, 6))]


@pytest.mark.parametrize("dt", ["float32", "uint8", "float16", "complex64", "int64", "bool",
                                "bfloat16", "int8"])
@pytest.mark.parametrize("case", range(len(SU_CASES)))
@pytest.mark.parametrize("op", ["add", "prod", "max", "min"])
def test_slice_update_reduce(nv, rng, dt, case, op):
    start, stop, step, us = SU_CASES[case]
    base = pow2(rng, (20, 30), dt) if op == "prod" else small(rng, (20, 30), dt)
    upd = pow2(rng, us, dt) if op == "prod" else small(rng, us, dt)
    st, n = ints(start)
    sp, _ = ints(stop)
    sd, _ = ints(step)
    fn = getattr(lib, f"nv_slice_update_{op}")
    check(nv, lambda: fn(nv.view(base, "reversed"), nv.array(upd), st, sp, sd, n))


# ---- as_strided_vjp ----

def strided_vjp(nv, x, cot, shape, strides, offset):
    """The vjp of as_strided(x, shape, strides, offset) at x for `cot`."""
    sh, nd = ints(shape)
    stv = (C.c_int64 * len(strides))(*strides)

    @CLOSURE_FN
    def body(payload, inputs, outputs):
        y = lib.nv_as_strided(lib.nv_vec_get(inputs, 0), sh, nd, stv, offset)
        return lib.nv_vec_push(outputs, y)

    f = lib.nv_closure_new(body, None, None)
    prim, cots, outs, vjps = (lib.nv_vec_new() for _ in range(4))
    try:
        lib.nv_vec_push(prim, x)
        lib.nv_vec_push(cots, cot)
        assert lib.nv_vjp(f, prim, cots, outs, vjps) == 0, lib.nv_last_error().decode()
        g = lib.nv_vec_get(vjps, 0)
        lib.nv_retain(g)
        return g
    finally:
        for v in (prim, cots, outs, vjps):
            lib.nv_vec_free(v)
        lib.nv_closure_release(f)


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "complex64"])
@pytest.mark.parametrize("case", [((40,), (8, 5), (4, 1), 2), ((6, 7), (5, 4, 3), (3, 7, 1), 1),
                                  ((1000,), (300, 50), (3, 1), 7)])
def test_as_strided_vjp_overlapping(nv, rng, dt, case):
    xs, shape, strides, offset = case
    x = small(rng, xs, dt)
    cot = small(rng, shape, dt)
    check(nv, lambda: strided_vjp(nv, nv.array(x), nv.view(cot, "transposed"), shape, strides,
                                  offset))
