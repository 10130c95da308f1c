"""The CUDA backend's sort family on the GPU against nuvec's own CPU kernels, bit for bit: sort,
argsort, partition and argpartition (the CPU returns the full sorted arrangement; so does the
GPU), topk (argtopk), median and searchsorted, over every dtype, rows of every size class the
kernels switch on (the block tiers of 128, 512, 2048 and 4096 elements, the device-wide sort
of one long row, of several long rows by composite keys, and of several long rows of 64-bit
keys by two sorts; argtopk's selection with one and with several chunks a row), axes last and
not last, flattened, 0-d and empty inputs, transposed, step-2 and reversed layouts, and edge
values (NaN of both signs, +-inf, -0.0 next to +0.0, integer extremes, many equal keys for
stability). Every GPU op must run on the GPU: nv_gpu_fallback_count must not move (topk's
take_along_axis is allowed exactly the fallbacks that take_along_axis alone costs).

Built with the GPU as the default device (skipped where no GPU is usable); the references are
built with the CPU as the default device. `NUVEC_TEST_FULL=1` runs every case."""
import ctypes as C
import itertools
import os
import random
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import needs_gpu, On, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import (DTYPES, FLOATS, INTS, Session, ints, lib, np_dtype,  # noqa: E402
                 sig)


P = C.c_void_p
I = C.c_int
IP = C.POINTER(C.c_int)
sig("nv_sort", P, P, IP)
sig("nv_argsort", P, P, IP)
sig("nv_partition", P, P, I, IP)
sig("nv_argpartition", P, P, I, IP)
sig("nv_topk", P, P, I, IP)
sig("nv_median", P, P, IP, I, C.c_bool)
sig("nv_searchsorted", P, P, P, C.c_bool)
sig("nv_take_along_axis", P, P, P, I)

pytestmark = needs_gpu

LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]
REAL = [d for d in DTYPES if d != "complex64"]


@pytest.fixture
def nv():
    with Session() as s, On("gpu"):
        yield s


def axis_ptr(axis):
    return None if axis is None else C.pointer(C.c_int(axis))


def bits(a):
    """The array's raw bits (NaN payloads and zero signs compared too)."""
    a = np.ascontiguousarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.itemsize in (1, 2, 4, 8) else a


def gpu_and_cpu(nv, build, allowed=0):
    """build() evaluated with the GPU and with the CPU as the default device; the GPU run may
    fall back `allowed` times (0: it ran on the GPU)."""
    before = lib.nv_gpu_fallback_count()
    got = nv.read(nv.own(build()))
    assert lib.nv_gpu_fallback_count() - before == allowed, "a node fell back to the CPU"
    with On("cpu"):
        want = nv.read(nv.own(build()))
    return got, want


def assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(bits(got), bits(want))


NAN_NEG = np.frombuffer(np.uint32(0xffc00001).tobytes(), np.float32)[0]  # -NaN with a payload


def values(rng, shape, dt, distinct=None):
    """Seeded values of dt: edge values and many duplicates (stability), or at most `distinct`
    different values."""
    n = int(np.prod(shape))
    d = np_dtype(dt)
    if dt == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dt in INTS:
        info = np.iinfo(d)
        pool = rng.integers(info.min, info.max, max(n, 1), endpoint=True, dtype=d)
        pool[:2] = [info.min, info.max][: pool.size]
    elif dt == "complex64":
        base = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.5], np.float32)
        re = rng.choice(base, max(n, 1))
        im = rng.choice(base, max(n, 1))
        re[::3] = rng.standard_normal(re[::3].size)
        pool = (re + 1j * im.astype(np.float64)).astype(np.complex64)
        pool.view(np.float32)[1::14] = NAN_NEG  # a NaN imaginary part with a payload
    else:
        pool = (rng.standard_normal(max(n, 1)) * 100).astype(np.float64)
        edges = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 65504.0, -65504.0]
        with np.errstate(all="ignore"):
            pool = pool.astype(d)
            pool[: min(len(edges), pool.size)] = np.array(edges[: pool.size]).astype(d)
            if dt == "float32":
                pool[len(edges) % pool.size] = NAN_NEG
    if distinct is not None:
        pool = rng.choice(pool[:distinct], max(n, 1))
    else:
        pool[rng.integers(0, pool.size, pool.size // 3 + 1)] = pool[0]
    rng.shuffle(pool)
    return pool[:n].reshape(shape)


# ---- sort, argsort, partition, argpartition ----

# (shape, axis): the block tiers (<= 128, 512, 2048, 4096 a row), the device-wide path (one
# long row; several long rows), axes not last, flattened, 0-d and empty.
SHAPES = [((5,), 0), ((3, 7), 1), ((3, 7), 0), ((4, 5, 6), 1), ((2, 3, 4), None), ((), None),
          ((0, 4), 1), ((4, 0), 1), ((3, 100), 1), ((2, 500), -1), ((3, 1500), 1), ((2, 4096), 1),
          ((2, 4097), 1), ((9000,), 0), ((5000, 3), 0), ((3, 2, 300), 2), ((40, 33), 0)]
OPS = ["sort", "argsort", "partition", "argpartition"]


def build_sort(op, h, axis, kth):
    if op == "sort":
        return lib.nv_sort(h, axis_ptr(axis))
    if op == "argsort":
        return lib.nv_argsort(h, axis_ptr(axis))
    if op == "partition":
        return lib.nv_partition(h, kth, axis_ptr(axis))
    return lib.nv_argpartition(h, kth, axis_ptr(axis))


def sort_cases():
    for op, dt, (shape, axis), layout in itertools.product(OPS, DTYPES, SHAPES, LAYOUTS):
        yield op, dt, shape, axis, layout


@pytest.mark.parametrize("op,dt,shape,axis,layout", sample(sort_cases(), 220, salt=301))
def test_sort_family_matches_cpu(nv, rng, op, dt, shape, axis, layout):
    x = values(rng, shape, dt)
    n = x.size if axis is None else (shape[axis] if shape else 1)
    if op.endswith("partition") and n == 0:
        pytest.skip("no kth for an empty row")
    kth = int(rng.integers(0, n)) if op.endswith("partition") else 0
    got, want = gpu_and_cpu(nv, lambda: build_sort(op, nv.view(x, layout), axis, kth))
    assert_same(got, want)


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64", "int8", "uint16",
                                "int64", "complex64", "bool"])
@pytest.mark.parametrize("shape,axis", [((64, 100), 1), ((8, 3000), 1), ((3, 6000), 1),
                                        ((20000,), 0), ((7000, 2), 0)])
def test_stable_with_many_equal_keys(nv, rng, dt, shape, axis):
    """Few distinct keys (NaN, -0.0 and +0.0 among them for floats): argsort keeps positions in
    order among equal keys (-0.0 equal to +0.0), sort orders -0.0 first."""
    x = values(rng, shape, dt, distinct=5)
    if dt in FLOATS:
        flat = x.reshape(-1)
        with np.errstate(all="ignore"):
            flat[rng.integers(0, flat.size, flat.size // 4)] = np.array(-0.0).astype(flat.dtype)
            flat[rng.integers(0, flat.size, flat.size // 4)] = np.array(0.0).astype(flat.dtype)
            flat[rng.integers(0, flat.size, flat.size // 8)] = np.array(np.nan).astype(flat.dtype)
    for op in ["argsort", "sort"]:
        got, want = gpu_and_cpu(nv, lambda: build_sort(op, nv.array(x), axis, 0))
        assert_same(got, want)
    if dt in ("float32", "float64", "int8", "uint16", "int64"):
        idx = nv.read(nv.own(lib.nv_argsort(nv.array(x), axis_ptr(axis))))
        np.testing.assert_array_equal(idx, np.argsort(x, axis=axis, kind="stable"))


@pytest.mark.parametrize("dt", ["float32", "int32", "float64", "uint64"])
def test_one_long_row(nv, rng, dt):
    x = values(rng, (1 << 20,), dt)
    for op in ["sort", "argsort"]:
        got, want = gpu_and_cpu(nv, lambda: build_sort(op, nv.array(x), None, 0))
        assert_same(got, want)


def test_sort_broadcast_input(nv, rng):
    row = values(rng, (1, 700), "float32")
    shape, n = ints((5, 700))
    for op in ["sort", "argsort"]:
        got, want = gpu_and_cpu(
            nv, lambda: build_sort(op, nv.own(lib.nv_broadcast_to(nv.array(row), shape, n)), 0, 0))
        assert_same(got, want)


# ---- topk (argtopk) ----

def topk_fallbacks(nv, x, k, axis):
    """The fallbacks topk's take_along_axis costs by itself on the GPU (0 once it has a kernel)."""
    a = -1 if axis is None else axis
    xs = x.reshape(-1) if axis is None else x
    shape = list(xs.shape)
    shape[a] = k
    idx = np.zeros(shape, np.uint32)
    before = lib.nv_gpu_fallback_count()
    nv.read(nv.own(lib.nv_take_along_axis(nv.array(xs), nv.array(idx), a)))
    return lib.nv_gpu_fallback_count() - before


TOPK = [((6, 6), 1, 3), ((6, 6), 0, 6), ((6, 6), None, 0), ((4, 300), 1, 8), ((4, 300), 1, 37),
        ((300, 5), 0, 8), ((3, 4096), -1, 8), ((2, 4096), 1, 32), ((3, 5000), 1, 20),
        ((2, 5000), 1, 600), ((1, 1 << 18), 1, 8), ((1, 1 << 18), 1, 25), ((50, 2, 700), 2, 5),
        ((3, 700, 4), 1, 9), ((1000,), None, 7)]


@pytest.mark.parametrize("dt", ["float32", "float16", "bfloat16", "float64", "int32", "uint8",
                                "int64", "bool", "int16"])
@pytest.mark.parametrize("shape,axis,k", TOPK)
def test_topk_matches_cpu(nv, rng, dt, shape, axis, k):
    """Selection (32-bit keys, small k; one chunk a row or several), the block and device
    sorts otherwise: the k largest in stable ascending order, ties and NaN included."""
    x = values(rng, shape, dt, distinct=None if dt in ("float32", "float64") else 7)
    allowed = topk_fallbacks(nv, x, k, axis) if k else 0
    for layout in ["contiguous", "transposed"]:
        got, want = gpu_and_cpu(nv, lambda: lib.nv_topk(nv.view(x, layout), k, axis_ptr(axis)),
                                allowed)
        assert_same(got, want)


# ---- median ----

MEDIAN = [((9,), None), ((4, 5, 6), (1,)), ((4, 5, 6), (0, 2)), ((4, 5, 6), None), ((), None),
          ((6, 1), (0,)), ((2, 300), (1,)), ((3, 5000), (1,)), ((5000, 2), (0,)), ((0, 3), (0,)),
          ((3, 0), (0,))]


@pytest.mark.parametrize("dt,case,keep,layout", sample(itertools.product(
    REAL, MEDIAN, [False, True], ["contiguous", "transposed", "reversed"]), 120, salt=302))
def test_median_matches_cpu(nv, rng, dt, case, keep, layout):
    shape, axes = case
    x = values(rng, shape, dt)
    if dt in FLOATS and x.size and rng.integers(0, 2):
        x = np.where(np.isnan(x.astype(np.float64)), np.array(1.5).astype(x.dtype), x)  # no NaN
    arr, n = (None, 0) if axes is None else ints(axes)
    got, want = gpu_and_cpu(nv, lambda: lib.nv_median(nv.view(x, layout), arr, n, keep))
    assert_same(got, want)


# ---- searchsorted ----

@pytest.mark.parametrize("dt,right,vshape,layout", sample(itertools.product(
    DTYPES, [False, True], [(), (7,), (3, 50)], ["contiguous", "transposed", "reversed"]),
    80, salt=303))
def test_searchsorted_matches_cpu(nv, rng, dt, right, vshape, layout):
    with On("cpu"):
        a = nv.read(nv.own(lib.nv_sort(nv.array(values(rng, (257,), dt)), None)))
    v = values(rng, vshape, dt)
    if v.size:
        v.reshape(-1)[0] = a[3]
    got, want = gpu_and_cpu(nv, lambda: lib.nv_searchsorted(nv.array(a), nv.view(v, layout), right))
    assert_same(got, want)
    # a read backwards (a negative stride), and an empty a.
    got, want = gpu_and_cpu(nv, lambda: lib.nv_searchsorted(nv.view(a[::-1].copy(), "reversed"),
                                                            nv.array(v), right))
    assert_same(got, want)
    got, want = gpu_and_cpu(nv, lambda: lib.nv_searchsorted(nv.array(a[:0]), nv.array(v), right))
    assert_same(got, want)
