"""The CUDA backend's scan family on the GPU against nuvec's CPU results: cumsum, cumprod,
cummax, cummin and logcumsumexp over every dtype, along every axis (and flattened), forward and
reversed, inclusive and exclusive, over the size classes the kernels switch on (rows of 1 to
8192 float32 elements held by groups of 1 to 32 lanes, longer rows by a block, few long rows
split into chunks; columns walked 2 or 4 adjacent ones per thread, few long columns split too), transposed, strided,
negative-stride and broadcast inputs, empty and 0-d arrays, integer wrap-around and the NaN/inf/
-0.0 rules; and diff over every dtype and layout.

Integer, max/min results must equal the CPU's exactly (NaNs of any payload equal); float sums,
products and logcumsumexp are associated differently on the GPU (in float64), so they compare
within a tolerance of the output dtype. Every op is built with the GPU as the default device
(skipped where no GPU is usable) and must run there (no CPU fallback); the references are built
with the CPU as the default device. `NUVEC_TEST_FULL=1` runs every case."""
import ctypes as C
import itertools
import os
import random
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import gpu_and_cpu, needs_gpu, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import (BF16, DTYPES, FLOATS, INTS, Session, ints, lib, np_dtype,  # noqa: E402
                 nv_name, ref64, sig)


P = C.c_void_p
I = C.c_int
IP = C.POINTER(C.c_int)
sig("nv_broadcast_to", P, P, IP, I)
sig("nv_reshape", P, P, IP, I)
sig("nv_diff", P, P, I, I, P, P)
SCANS = ["cumsum", "cumprod", "cummax", "cummin", "logcumsumexp"]
for _name in SCANS:
    sig("nv_" + _name, P, P, IP, C.c_bool, C.c_bool)

pytestmark = needs_gpu

LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]
TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-12,
       "complex64": 2e-6}


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def rand(rng, shape, dtype, op="cumsum"):
    """Seeded values of `dtype`, never all zeros: small integers (full range for sums and
    products, which wrap), floats near 1 for products (no overflow over long rows), else
    normal, with a few repeated values for max/min ties."""
    dt = np_dtype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in INTS:
        info = np.iinfo(dt)
        if op in ("cumsum", "cumprod"):
            return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dt)
        lo, hi = max(info.min, -100), min(info.max, 100)
        return rng.integers(lo, hi, shape, endpoint=True, dtype=dt)
    if op == "cumprod":
        re = rng.uniform(0.9, 1.1, shape)
        im = rng.uniform(-0.05, 0.05, shape)
    else:
        re = np.round(rng.standard_normal(shape) * 3, 1)
        im = np.round(rng.standard_normal(shape) * 3, 1)
    if dtype == "complex64":
        return (re + 1j * im).astype(dt)
    return re.astype(dt)


def with_edges(x, rng):
    """x (float or complex) with NaN, +-inf and +-0.0 at random places."""
    x = x.copy()
    flat = x.reshape(-1)
    n = flat.size
    for v in [np.nan, np.inf, -np.inf, 0.0, -0.0]:
        idx = rng.integers(0, n, max(1, n // 50))
        flat[idx] = v
    return x


def build(nv, op, x, axis, reverse, inclusive, layout):
    a = nv.view(x, layout)
    ax = (C.c_int * 1)(axis) if axis is not None else None
    return nv.own(getattr(lib, "nv_" + op)(a, ax, reverse, inclusive))


def same_bits(got, want):
    """Equal values, NaNs of any payload equal, signs of zeros equal."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind in "fc" or got.dtype == BF16:
        g, w = ref64(got), ref64(want)
        for part in ([g.real, w.real], [g.imag, w.imag]) if g.dtype.kind == "c" else ([g, w],):
            pg, pw = part
            nan = np.isnan(pg) & np.isnan(pw)
            np.testing.assert_array_equal(np.where(nan, 0, pg), np.where(nan, 0, pw))
            np.testing.assert_array_equal(np.signbit(pg[~nan]), np.signbit(pw[~nan]))
    else:
        np.testing.assert_array_equal(got, want)


def close(got, want):
    """Within the output dtype's tolerance (relative to the largest result magnitude too, for
    the cancellations of a sum); NaN and inf positions exactly."""
    assert got.dtype == want.dtype and got.shape == want.shape
    dt = nv_name(got.dtype)
    if dt not in TOL:
        np.testing.assert_array_equal(got, want)
        return
    g, w = ref64(got), ref64(want)
    parts = [(g.real, w.real), (g.imag, w.imag)] if g.dtype.kind == "c" else [(g, w)]
    for pg, pw in parts:
        np.testing.assert_array_equal(np.isnan(pg), np.isnan(pw))
        inf = np.isinf(pw)
        np.testing.assert_array_equal(pg[inf], pw[inf])
        fin = np.isfinite(pw)
        scale = np.abs(pw[fin]).max() if fin.any() else 1.0
        np.testing.assert_allclose(pg[fin], pw[fin], rtol=TOL[dt], atol=TOL[dt] * (1 + scale))


def check(op, got, want):
    if op in ("cummax", "cummin"):
        same_bits(got, want)
    else:
        close(got, want)


def ops_for(dtype):
    return [op for op in SCANS if not (op == "logcumsumexp" and dtype == "complex64")]


# ---- every dtype, every op, both directions and both kinds ----

DT_CASES = [(dt, op, rev, inc) for dt in DTYPES for op in ops_for(dt)
            for rev, inc in itertools.product([False, True], repeat=2)]


@pytest.mark.parametrize("dt,op,rev,inc", sample(DT_CASES, 60, 1))
def test_scan_dtypes(nv, rng, dt, op, rev, inc):
    # A short row (lane groups), a long one (a block per row), and a column scan.
    for shape, axis in [((7, 37), 1), ((3, 5000), 1), ((50, 9), 0)]:
        x = rand(rng, shape, dt, op)
        got, want = gpu_and_cpu(nv, lambda: build(nv, op, x, axis, rev, inc, "contiguous"))
        check(op, got, want)


# ---- the kernels' size classes ----

# Rows: lane tiles of min(8 * VEC, 32) elements per lane (32 float32, 16 float64), groups of
# 1, 4, 16 or 32 lanes, then a block per row past 256 lanes' worth (8192 float32), split into
# chunks of at least 4 block tiles when there are few rows.
ROW_SHAPES = [(5, 1), (9, 3), (4, 16), (6, 17), (3, 32), (3, 33), (3, 64), (3, 65), (2, 128),
              (2, 129), (2, 256), (2, 257), (2, 512), (2, 513), (40, 1000), (65, 1024),
              (3, 1025), (3, 4096), (2, 4097), (2, 8192), (2, 8193), (2, 20000), (1, 70000),
              (3, 300001), (1, 1 << 21)]
# Columns: tiles of 16 threads x 2 or 4 columns (partial tiles, inner not a multiple of 4), 128
# positions per block tile; the axis split below 528 column tiles when it has >= 1024 positions,
# not split at or above it ((17, 40, 2048): 544 tiles of float32).
COL_SHAPES = [((3, 5, 7), 1), ((2, 1000, 3), 1), ((4, 700, 33), 1), ((100, 64), 0),
              ((1, 5000, 2), 1), ((3000, 40), 0), ((2, 3, 4, 5), 2), ((6, 2, 1025), 1),
              ((2, 1100, 68), 1), ((5, 130, 6), 1), ((17, 40, 2048), 1)]


@pytest.mark.parametrize("dt", ["float32", "int32", "float16", "float64", "uint8"])
@pytest.mark.parametrize("rev,inc", [(False, True), (True, False)])
def test_scan_rows(nv, rng, dt, rev, inc):
    for shape in ROW_SHAPES:
        for op in sample(ops_for(dt), 2, hash(shape) % 1000):
            x = rand(rng, shape, dt, op)
            got, want = gpu_and_cpu(nv, lambda: build(nv, op, x, 1, rev, inc, "contiguous"))
            check(op, got, want)


@pytest.mark.parametrize("dt", ["float32", "int64", "bfloat16", "complex64", "bool"])
@pytest.mark.parametrize("rev,inc", [(False, True), (True, True), (False, False)])
def test_scan_columns(nv, rng, dt, rev, inc):
    for shape, axis in COL_SHAPES:
        for op in sample(ops_for(dt), 2, hash(shape) % 1000):
            x = rand(rng, shape, dt, op)
            got, want = gpu_and_cpu(nv, lambda: build(nv, op, x, axis, rev, inc, "contiguous"))
            check(op, got, want)


def test_scan_bench_shapes(nv, rng):
    """The benchmark's layouts at an eighth of their size: axis 2 and axis 1 of 8x1024x1024."""
    x = rng.standard_normal((8, 1024, 1024)).astype(np.float32)
    for axis in (2, 1):
        got, want = gpu_and_cpu(nv, lambda: build(nv, "cumsum", x, axis, False, True,
                                                  "contiguous"))
        close(got, want)


# ---- layouts, flattening, empty and 0-d arrays ----

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op", SCANS)
def test_scan_layouts(nv, rng, layout, op):
    for dt in ["float32", "int16"]:
        x = rand(rng, (6, 33, 20), dt, op)
        for axis in [0, 1, 2, None]:
            got, want = gpu_and_cpu(nv, lambda: build(nv, op, x, axis, False, True, layout))
            check(op, got, want)


def test_scan_broadcast(nv, rng):
    row = rand(rng, (1, 50), "float32")
    shape, n = ints([40, 50])

    def make(op, axis):
        b = nv.own(lib.nv_broadcast_to(nv.array(row), shape, n))
        return nv.own(getattr(lib, "nv_" + op)(b, (C.c_int * 1)(axis), False, True))

    for op in SCANS:
        for axis in (0, 1):
            got, want = gpu_and_cpu(nv, lambda: make(op, axis))
            check(op, got, want)


@pytest.mark.parametrize("op", SCANS)
def test_scan_empty_and_scalar(nv, rng, op):
    for shape, axis in [((0,), 0), ((3, 0), 1), ((3, 0), 0), ((0, 4), 1), ((), None),
                        ((1,), 0), ((0,), None)]:
        x = rand(rng, shape, "float32", op)
        got, want = gpu_and_cpu(nv, lambda: build(nv, op, x, axis, True, False, "contiguous"))
        check(op, got, want)


# ---- edge values and integer wrap-around ----

@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "bfloat16", "complex64"])
@pytest.mark.parametrize("op", SCANS)
def test_scan_edge_values(nv, rng, dt, op):
    if dt == "complex64" and op in ("logcumsumexp", "cumprod"):
        pytest.skip("no complex64 logcumsumexp; complex products of infinities depend on the "
                    "association")
    for shape, axis in [((4, 300), 1), ((300, 5), 0), ((2, 9000), 1)]:
        x = with_edges(rand(rng, shape, dt, op), rng)
        for rev, inc in [(False, True), (True, False)]:
            got, want = gpu_and_cpu(nv, lambda: build(nv, op, x, axis, rev, inc, "contiguous"))
            check(op, got, want)


def test_scan_zero_signs_and_ties(nv):
    """cummax keeps the earlier of -0.0 and 0.0; sums start from +0.0; logcumsumexp of -inf."""
    x = np.array([[-0.0, 0.0, -0.0], [0.0, -0.0, 0.0]], np.float32)
    for op in ["cummax", "cummin", "cumsum"]:
        for rev, inc in itertools.product([False, True], repeat=2):
            got, want = gpu_and_cpu(nv, lambda: build(nv, op, x, 1, rev, inc, "contiguous"))
            same_bits(got, want)
    y = np.array([-np.inf, -np.inf, 0.0, np.inf, np.nan, 1.0], np.float64)
    for rev, inc in itertools.product([False, True], repeat=2):
        got, want = gpu_and_cpu(nv, lambda: build(nv, "logcumsumexp", y, 0, rev, inc,
                                                   "contiguous"))
        same_bits(got, want)


@pytest.mark.parametrize("dt", INTS + ["bool"])
def test_scan_integer_wrap(nv, rng, dt):
    for op in ["cumsum", "cumprod", "cummax", "cummin"]:
        x = rand(rng, (3, 2000), dt, op)
        for axis in (0, 1):
            got, want = gpu_and_cpu(nv, lambda: build(nv, op, x, axis, False, False,
                                                      "contiguous"))
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype


# ---- diff ----

def build_diff(nv, x, n, axis, layout):
    return nv.own(lib.nv_diff(nv.view(x, layout), n, axis, None, None))


DIFF_CASES = [(dt, layout) for dt in DTYPES for layout in LAYOUTS]


@pytest.mark.parametrize("dt,layout", sample(DIFF_CASES, 24, 2))
def test_diff(nv, rng, dt, layout):
    for shape in [(7,), (5, 9), (3, 4, 130)]:
        x = rand(rng, shape, dt)
        if dt in FLOATS or dt == "complex64":
            x = with_edges(x, rng)
        for axis in range(-len(shape), len(shape)):
            for n in (1, 2):
                got, want = gpu_and_cpu(nv, lambda: build_diff(nv, x, n, axis, layout))
                same_bits(got, want)


def test_diff_empty(nv, rng):
    for shape, axis in [((1,), 0), ((0, 3), 1), ((4, 1), 1), ((4, 2), 1)]:
        x = rand(rng, shape, "int32")
        got, want = gpu_and_cpu(nv, lambda: build_diff(nv, x, 1, axis, "contiguous"))
        same_bits(got, want)
