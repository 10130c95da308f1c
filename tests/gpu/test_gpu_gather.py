"""The CUDA backend's gather family on the GPU (take, take_along_axis, gather, slice_dynamic,
diag) against NumPy and nuvec's CPU results, bit for bit: every data dtype and index dtype,
negative indices, strided / transposed / negative-stride / broadcast data and indices, empty
and scalar indices, the flattened take, embedding-shaped takes (the row-copy path), the kernel
paths' size classes, and out-of-range indices: the evaluation fails with the CPU's message
naming the op (so do arrays computed from the result), and the GPU keeps working after it.
Every test asserts that nothing ran through the CPU fallback.

Every op is built with the GPU as the default device (skipped where no GPU is usable); the CPU
references are built with the CPU as the default device. `NUVEC_TEST_FULL=1` runs every case."""
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
from index_helpers import PP, P, I, IP, arrays, assert_same, rand  # noqa: E402
from nvc import DTYPES, NuvecError, Session, ints, lib, np_dtype, sig  # noqa: E402


sig("nv_take", P, P, P, I)
sig("nv_take_flat", P, P, P)
sig("nv_take_along_axis", P, P, P, I)
sig("nv_gather", P, P, PP, I, IP, IP, I)
sig("nv_slice_dynamic", P, P, P, IP, I, IP, I)
sig("nv_diag", P, P, I)
sig("nv_add", P, P, P)

pytestmark = needs_gpu

INDEX_DTYPES = ["int32", "int64", "uint32", "int8", "uint8", "int16", "uint16", "uint64"]
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]


@pytest.fixture
def nv():
    """A session on the GPU; the test fails if any node ran through the CPU fallback."""
    before = lib.nv_gpu_fallback_count()
    with Session() as s, On("gpu"):
        yield s
    assert lib.nv_gpu_fallback_count() == before, "a gather-family node fell back to the CPU"


def read(nv, h):
    return nv.read(nv.own(h))


def on_cpu(build):
    """The same op built on the CPU (the reference for the exact rules)."""
    with On("cpu"):
        return build()


def rand_index(rng, shape, n, dtype, negative=True):
    """Random valid indices into an axis of size n (negative ones where the dtype allows)."""
    info = np.iinfo(np.dtype(dtype))
    lo = max(-n, info.min) if negative and dtype.startswith("int") else 0
    hi = min(n, info.max + 1)
    return rng.integers(lo, hi, shape).astype(dtype)


def index_view(nv, idx, layout):
    """Index array `idx` on the device as `layout` says, or broadcast from its first row."""
    if layout == "broadcast":
        shape, nd = ints(idx.shape)
        return nv.own(lib.nv_broadcast_to(nv.array(idx[:1]), shape, nd))
    return nv.view(idx, layout)


def outcome(nv, h):
    """("ok", the values) or ("error", the message) of evaluating h."""
    try:
        return "ok", nv.read(h)
    except NuvecError as e:
        return "error", e.message


def outcome_same(got, want):
    assert got[0] == want[0], (got, want)
    if got[0] == "ok":
        assert_same(got[1], want[1])
    else:
        assert want[1] in got[1] or got[1] in want[1], (got, want)
    return True


def error_of(nv, h):
    try:
        nv.read(h)
    except NuvecError as e:
        return e.message
    raise AssertionError("no error")


# ---- take ----

# (shape, axis): the paths of take on a row-contiguous array: one element per index (1-D, last
# axis), whole rows (axis 0 of a matrix, rows of 16-byte multiples and odd ones, outer dims).
TAKE_SHAPES = [((1000,), 0), ((37, 129), 1), ((37, 129), 0), ((64, 8), 0), ((5, 6, 7), 1),
               ((3, 1, 2), 2), ((4, 5), -2)]


def take_cases():
    for dt, (shape, axis), ishape, layout, idt in itertools.product(
            DTYPES, TAKE_SHAPES, [(300,), (), (2, 3)], LAYOUTS, INDEX_DTYPES):
        yield dt, shape, axis, ishape, layout, idt


@pytest.mark.parametrize("dt,shape,axis,ishape,layout,idt", sample(take_cases(), 120, salt=1))
def test_take_matches_numpy(nv, rng, dt, shape, axis, ishape, layout, idt):
    a = rand(rng, shape, dt)
    idx = rand_index(rng, ishape, shape[axis], idt)
    got = read(nv, lib.nv_take(nv.view(a, layout), nv.array(idx), axis))
    assert_same(got, np.take(a, idx.astype(np.int64), axis=axis))


@pytest.mark.parametrize("dt", ["float32", "float64", "uint8", "float16", "complex64", "bool"])
@pytest.mark.parametrize("ilayout", ["transposed", "strided", "reversed", "broadcast"])
def test_take_strided_and_broadcast_indices(nv, rng, dt, ilayout):
    a = rand(rng, (50, 9), dt)
    idx = rand_index(rng, (6, 40), 50, "int64")
    if ilayout == "broadcast":
        idx[:] = idx[:1]
    for axis, n in [(0, 50), (1, 9)]:
        ix = idx % n - (n if axis == 1 else 0) * (idx % 2)
        got = read(nv, lib.nv_take(nv.array(a), index_view(nv, ix, ilayout), axis))
        assert_same(got, np.take(a, ix, axis=axis))


@pytest.mark.parametrize("dt", ["float32", "int16", "float64", "bfloat16"])
def test_take_flat_and_scalar_and_empty(nv, rng, dt):
    a = rand(rng, (7, 11), dt)
    idx = rand_index(rng, (5, 4), 77, "int32")
    # axis None: the flattened array (a transposed view is copied row-major first).
    got = read(nv, lib.nv_take_flat(nv.view(a, "transposed"), nv.array(idx)))
    assert_same(got, np.take(a, idx))
    # A scalar index drops the axis.
    got = read(nv, lib.nv_take(nv.array(a), nv.array(np.array(-3, np.int64)), 1))
    assert_same(got, a[:, -3])
    # Empty indices, and an empty array with empty indices.
    got = read(nv, lib.nv_take(nv.array(a), nv.array(np.zeros(0, np.int32)), 0))
    assert got.shape == (0, 11)
    got = read(nv, lib.nv_take(nv.array(np.zeros((0, 3), np_dtype(dt))),
                               nv.array(np.zeros(0, np.int32)), 0))
    assert got.shape == (0, 3)
    # Empty inner dims: an empty result, yet the indices are checked as on the CPU.
    e = np.zeros((3, 0), np_dtype(dt))
    got = read(nv, lib.nv_take(nv.array(e), nv.array(np.array([2, -1], np.int32)), 0))
    assert got.shape == (2, 0)
    def bad():
        return outcome(nv, nv.own(lib.nv_take(nv.array(e), nv.array(np.array([3], np.int32)), 0)))

    assert outcome_same(bad(), on_cpu(bad))


@pytest.mark.parametrize("dt,V,D", [("float32", 1000, 64), ("float16", 513, 128),
                                    ("bfloat16", 300, 4096 // 2), ("float32", 1000, 3),
                                    ("float64", 77, 33), ("int8", 100, 48), ("int8", 100, 5)])
@pytest.mark.parametrize("idt", ["int32", "int64"])
def test_take_embedding_lookup(nv, rng, dt, V, D, idt):
    table = rand(rng, (V, D), dt)
    ids = rand_index(rng, (16, 33), V, idt, negative=False)
    got = read(nv, lib.nv_take(nv.array(table), nv.array(ids), 0))
    assert_same(got, table[ids.astype(np.int64)])
    # A row of the table that is a strided view takes the general walk.
    got = read(nv, lib.nv_take(nv.view(table, "strided"), nv.array(ids), 0))
    assert_same(got, table[ids.astype(np.int64)])


def test_take_large_random(nv, rng):
    a = rng.standard_normal(1 << 22).astype(np.float32)
    idx = rng.integers(-(1 << 22), 1 << 22, 1 << 20).astype(np.int64)
    got = read(nv, lib.nv_take(nv.array(a), nv.array(idx), 0))
    assert_same(got, a[idx])
    idx32 = rng.integers(0, 1 << 22, (1 << 20) + 3).astype(np.int32)
    got = read(nv, lib.nv_take(nv.array(a), nv.array(idx32), 0))
    assert_same(got, a[idx32])
    b = rng.integers(0, 255, (4096, 77)).astype(np.uint8)
    idx2 = rng.integers(-77, 77, 5000).astype(np.int16)
    got = read(nv, lib.nv_take(nv.array(b), nv.array(idx2), 1))
    assert_same(got, np.take(b, idx2.astype(np.int64), axis=1))


# ---- out-of-range indices ----

BAD_TAKES = [
    # (shape, axis, layout, indices, dtype, bad value as reported, axis size)
    ((5,), 0, "contiguous", [0, 5, 1], "int32", 5, 5),
    ((5,), 0, "contiguous", [0, -6, 1], "int64", -6, 5),
    ((5,), 0, "contiguous", [2**63 + 5], "uint64", 2**63 - 1, 5),
    ((4, 6), 0, "contiguous", [1, 2**40], "int64", 2**40, 4),
    ((4, 6), 1, "contiguous", [7], "uint8", 7, 6),
    ((4, 6), 0, "transposed", [-5], "int8", -5, 4),
    ((40, 16), 0, "contiguous", [3, 40, 2], "int32", 40, 40),
]


@pytest.mark.parametrize("shape,axis,layout,vals,idt,bad,n", BAD_TAKES)
def test_take_out_of_range_fails_like_the_cpu(nv, shape, axis, layout, vals, idt, bad, n):
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    idx = np.array(vals, dtype=idt)
    want = f"take: index {bad} is out of range for an axis of size {n}"
    cpu = on_cpu(lambda: error_of(nv, nv.own(lib.nv_take(nv.view(a, layout), nv.array(idx),
                                                          axis))))
    assert want in cpu
    t = nv.own(lib.nv_take(nv.view(a, layout), nv.array(idx), axis))
    # Something computed from the result fails too, with the same message.
    s = nv.own(lib.nv_add(t, t))
    assert want in error_of(nv, s)
    assert want in error_of(nv, t)
    # The GPU is healthy afterwards: a correct take works.
    ok = np.array([0, n - 1, -1], np.int64)
    got = read(nv, lib.nv_take(nv.view(a, layout), nv.array(ok), axis))
    assert_same(got, np.take(a, ok, axis=axis))


def test_take_along_axis_and_gather_out_of_range(nv, rng):
    a = rand(rng, (3, 4), "float32")
    idx = np.array([[0], [4], [1]], np.int32)
    want = "take_along_axis: index 4 is out of range for an axis of size 4"
    h = nv.own(lib.nv_take_along_axis(nv.array(a), nv.array(idx), 1))
    assert want in error_of(nv, nv.own(lib.nv_add(h, h)))
    ax, _ = ints([0])
    sz, _ = ints([2, 4])
    # A slice of 2 rows from row 2 runs past the end of an axis of 3 (one index array).
    g = nv.own(lib.nv_gather(nv.array(a), arrays(nv.array(np.array([2], np.int64))), 1, ax, sz, 2))
    assert "gather: index 2 is out of range for an axis of size 3" in error_of(nv, g)
    # Several index arrays: the second one is out of range.
    ax2, _ = ints([0, 1])
    sz2, _ = ints([1, 1])
    i0, i1 = nv.array(np.array([0, 1], np.int32)), nv.array(np.array([1, -5], np.int16))
    g2 = nv.own(lib.nv_gather(nv.array(a), arrays(i0, i1), 2, ax2, sz2, 2))
    assert "gather: index -5 is out of range for an axis of size 4" in error_of(nv, g2)
    # The GPU still works.
    got = read(nv, lib.nv_take_along_axis(nv.array(a), nv.array(np.array([[3], [0], [-1]])), 1))
    assert_same(got, np.take_along_axis(a, np.array([[3], [0], [3]]), 1))


# ---- take_along_axis ----

def along_cases():
    specs = [((3, 4), (3, 2), 1), ((3, 4), (5, 4), 0), ((2, 3, 4), (2, 1, 4), 1),
             ((2, 3, 4), (1, 3, 6), -1), ((5,), (7,), 0), ((3, 4), (3, 0), 1),
             ((64, 300), (64, 50), 1), ((300, 64), (20, 64), 0)]
    for dt, spec, layout, ilayout, idt in itertools.product(
            DTYPES, specs, LAYOUTS, ["contiguous", "transposed", "reversed"], INDEX_DTYPES):
        yield dt, spec, layout, ilayout, idt


@pytest.mark.parametrize("dt,spec,layout,ilayout,idt", sample(along_cases(), 60, salt=2))
def test_take_along_axis_matches_numpy(nv, rng, dt, spec, layout, ilayout, idt):
    shape, ishape, axis = spec
    a = rand(rng, shape, dt)
    idx = rand_index(rng, ishape, shape[axis], idt)
    got = read(nv, lib.nv_take_along_axis(nv.view(a, layout), index_view(nv, idx, ilayout), axis))
    assert_same(got, np.take_along_axis(a, idx.astype(np.int64), axis=axis))


# ---- gather ----

def gather_ref(a, idxs, axes, slice_sizes):
    idxs = np.broadcast_arrays(*idxs) if idxs else []
    ishape = idxs[0].shape if idxs else ()
    out = np.empty(ishape + tuple(slice_sizes), a.dtype)
    for pos in np.ndindex(*ishape):
        start = [0] * a.ndim
        for ix, ax in zip(idxs, axes):
            v = int(ix[pos])
            start[ax] = v + a.shape[ax] if v < 0 else v
        out[pos] = a[tuple(slice(s, s + n) for s, n in zip(start, slice_sizes))]
    return out


GATHER_SPECS = [((6, 5), [0], [1, 5], [(4,)]), ((6, 5), [0, 1], [1, 1], [(3, 1), (1, 2)]),
                ((4, 5, 3), [2, 0], [2, 3, 1], [(2,), (2,)]), ((4, 5), [], [2, 2], []),
                ((4, 5), [1], [4, 2], [()]), ((5,), [0], [0], [(3,)]),
                ((6, 7, 3), [0, 1, 2], [2, 1, 3], [(2, 3), (3,), (1, 1)]),
                ((50, 40), [1], [50, 3], [(7, 5)])]


@pytest.mark.parametrize("dt,spec,layout,idt", sample(
    itertools.product(DTYPES, GATHER_SPECS, LAYOUTS, ["int64", "int32", "uint16", "int8"]), 60,
    salt=3))
def test_gather_matches_reference(nv, rng, dt, spec, layout, idt):
    shape, axes, sizes, ishapes = spec
    a = rand(rng, shape, dt)
    idxs = []
    for s, ax in zip(ishapes, axes):
        hi = shape[ax] - sizes[ax] + 1
        # Negative indices wrap once: -shape[ax] .. hi - 1 - shape[ax] stay in range.
        v = rng.integers(0, hi, s)
        if idt.startswith("int") and shape[ax] <= 127:
            v = np.where(rng.integers(0, 2, s) == 1, v - shape[ax], v)
        idxs.append(np.asarray(v).astype(idt))
    ax_c, _ = ints(axes)
    sz_c, nsz = ints(sizes)
    hs = arrays(*[index_view(nv, i, "transposed" if i.ndim == 2 else "contiguous") for i in idxs])
    got = read(nv, lib.nv_gather(nv.view(a, layout), hs, len(idxs), ax_c, sz_c, nsz))
    assert_same(got, gather_ref(a, idxs, axes, sizes))


# ---- slice_dynamic ----

@pytest.mark.parametrize("dt,layout,sdt", sample(
    itertools.product(DTYPES, LAYOUTS, ["int64", "int32", "uint8", "int16", "uint64"]), 30,
    salt=4))
def test_slice_dynamic_matches_the_cpu(nv, rng, dt, layout, sdt):
    a = rand(rng, (6, 7), dt)
    for start, size in [((2, 3), (3, 2)), ((-2, -9), (2, 4)), ((5, 6), (4, 4)), ((0, 100), (6, 0)),
                        ((1, 0), (5, 7)), ((-100, 3), (1, 1))]:
        if not sdt.startswith("int") and min(start) < 0:
            continue
        st = np.array(start).astype(sdt)
        ax, nax = ints([0, 1])
        sz, nsz = ints(size)

        def build():
            return nv.read(nv.own(lib.nv_slice_dynamic(nv.view(a, layout), nv.array(st), ax, nax,
                                                       sz, nsz)))

        assert_same(build(), on_cpu(build))
    # One axis, a 0-d start, a start counted from the end and one far past it.
    ax1, _ = ints([-1])
    sz1, _ = ints([6, 3])
    for s in [1, 100, -1] if sdt.startswith("int") else [1, 100]:
        s0 = np.array(s).astype(sdt)

        def build1():
            return nv.read(nv.own(lib.nv_slice_dynamic(nv.view(a, layout), nv.array(s0), ax1, 1,
                                                       sz1, 2)))

        assert_same(build1(), on_cpu(build1))


def test_slice_dynamic_large(nv, rng):
    a = rng.standard_normal((2048, 1024)).astype(np.float32)
    st = np.array([1000, 17], np.int32)
    ax, nax = ints([0, 1])
    sz, nsz = ints([1000, 1000])
    got = read(nv, lib.nv_slice_dynamic(nv.array(a), nv.array(st), ax, nax, sz, nsz))
    assert_same(got, a[1000:2000, 17:1017])


# ---- diag ----

@pytest.mark.parametrize("dt,layout", sample(itertools.product(DTYPES, LAYOUTS[:1] + LAYOUTS[2:]),
                                             24, salt=5))
def test_diag_matches_numpy(nv, rng, dt, layout):
    v = rand(rng, (9,), dt)
    for k in [0, 3, -2]:
        got = read(nv, lib.nv_diag(nv.view(v, layout), k))
        assert_same(got, np.diag(v, k))
    m = rand(rng, (5, 7), dt)
    for k in [0, 2, -3]:
        assert_same(read(nv, lib.nv_diag(nv.view(m, layout), k)), np.diag(m, k))
    # An empty vector: a |k| x |k| zero matrix.
    e = np.zeros(0, np_dtype(dt))
    assert_same(read(nv, lib.nv_diag(nv.array(e), 2)), np.diag(e, 2))
    assert read(nv, lib.nv_diag(nv.array(e), 0)).shape == (0, 0)


def test_diag_large(nv, rng):
    v = rng.standard_normal(3000).astype(np.float32)
    assert_same(read(nv, lib.nv_diag(nv.array(v), -5)), np.diag(v, -5))
