"""The indexing ops against NumPy: take, take_along_axis, put_along_axis, gather, scatter*,
masked_scatter, dynamic slices, slice_update_*, diagonal, diag — every dtype, strided inputs,
negative and out-of-range indices, duplicates, error cases."""
import ctypes as C
import itertools

import numpy as np
import pytest

from conftest import sample
from index_helpers import (ALL, INDEX_DTYPES, LAYOUTS, PP, P, I, IP, arrays, assert_same,
                           data_ptr, expect_error, rand)
from nvc import CODE, FLOATS, INTS, NuvecError, assert_close, ints, lib, np_dtype, sig

sig("nv_take", P, P, P, I)
sig("nv_take_flat", P, P, P)
sig("nv_take_along_axis", P, P, P, I)
sig("nv_put_along_axis", P, P, P, P, I)
sig("nv_gather", P, P, PP, I, IP, IP, I)
for _n in ["nv_scatter", "nv_scatter_add", "nv_scatter_prod", "nv_scatter_max", "nv_scatter_min"]:
    sig(_n, P, P, PP, I, P, IP)
sig("nv_masked_scatter", P, P, P, P)
sig("nv_slice_dynamic", P, P, P, IP, I, IP, I)
sig("nv_slice_update_dynamic", P, P, P, P, IP, I)
for _n in ["nv_slice_update_add", "nv_slice_update_prod", "nv_slice_update_max",
           "nv_slice_update_min"]:
    sig(_n, P, P, P, IP, IP, IP, I)
sig("nv_diagonal", P, P, I, I, I)
sig("nv_diag", P, P, I)
sig("nv_add", P, P, P)


def rand_index(rng, shape, n, dtype, negative=True):
    """Random valid indices into an axis of size n (negative ones where the dtype allows)."""
    lo = -n if negative and dtype.startswith("int") else 0
    x = rng.integers(lo, n, shape) if n > 0 else np.zeros(shape, np.int64)
    return x.astype(dtype)


# ---- take ----

def take_cases():
    shapes = [((7,), 0), ((4, 5), 1), ((4, 5), -2), ((2, 3, 4), 1), ((3, 1, 2), 2)]
    for dt, (shape, axis), ishape, layout, idt in itertools.product(
            ALL, shapes, [(5,), (), (2, 3), (0,)], LAYOUTS, ["int32", "int64", "uint8", "int16"]):
        yield dt, shape, axis, ishape, layout, idt


@pytest.mark.parametrize("dt,shape,axis,ishape,layout,idt", sample(take_cases(), 80, salt=11))
def test_take_matches_numpy(nv, rng, dt, shape, axis, ishape, layout, idt):
    a = rand(rng, shape, dt)
    idx = rand_index(rng, ishape, shape[axis], idt)
    got = nv.read(nv.own(lib.nv_take(nv.view(a, layout), nv.array(idx), axis)))
    assert_same(got, np.take(a, idx.astype(np.int64), axis=axis))


@pytest.mark.parametrize("dt", sample(ALL, 6, salt=12))
def test_take_flat_and_strided_indices(nv, rng, dt):
    a = rand(rng, (3, 4), dt)
    idx = rand_index(rng, (4, 6), 12, "int64")
    got = nv.read(nv.own(lib.nv_take_flat(nv.view(a, "transposed"), nv.view(idx, "strided"))))
    assert_same(got, np.take(a, idx))


def test_take_large_is_parallel_and_exact(nv, rng):
    a = rng.standard_normal(1 << 18).astype(np.float32)
    idx = rng.integers(-(1 << 18), 1 << 18, 1 << 17).astype(np.int32)
    got = nv.read(nv.own(lib.nv_take(nv.array(a), nv.array(idx), 0)))
    assert_same(got, a[idx])
    a2 = rand(rng, (300, 257), "float64")
    idx2 = rng.integers(0, 300, 200).astype(np.uint32)
    got2 = nv.read(nv.own(lib.nv_take(nv.view(a2, "strided"), nv.array(idx2), 0)))
    assert_same(got2, a2[idx2])


@pytest.mark.parametrize("bad,idt", [(5, "int32"), (-6, "int32"), (2**40, "int64"),
                                     (2**63 + 5, "uint64"), (-(2**63), "int64")])
def test_take_out_of_range_is_an_error(nv, bad, idt):
    a = nv.array(np.arange(5, dtype=np.float32))
    idx = nv.array(np.array([0, bad, 1], dtype=idt))
    msg = expect_error(nv, nv.own(lib.nv_take(a, idx, 0)), "take", "out of range", "size 5")
    assert str(bad if idt != "uint64" else 2**63 - 1) in msg or "index" in msg


def test_take_errors(nv):
    a = nv.array(np.arange(6, dtype=np.int32).reshape(2, 3))
    expect_error(nv, nv.own(lib.nv_take(a, nv.array(np.array([0.0])), 0)), "take", "integers")
    expect_error(nv, nv.own(lib.nv_take(a, nv.array(np.array([True])), 0)), "take", "integers")
    expect_error(nv, nv.own(lib.nv_take(a, nv.array(np.array([0])), 2)), "take", "axis 2")
    expect_error(nv, nv.own(lib.nv_take(nv.array(np.zeros((0, 3))), nv.array(np.array([0])), 0)),
                 "take", "empty")
    expect_error(nv, nv.own(lib.nv_take(None, a, 0)), "take", "NULL")
    # An empty take from an empty axis is fine.
    got = nv.read(nv.own(lib.nv_take(nv.array(np.zeros((0, 3))), nv.array(np.zeros(0, np.int32)), 0)))
    assert got.shape == (0, 3)


# ---- take_along_axis / put_along_axis ----

def along_cases():
    for dt, (shape, ishape, axis), layout in itertools.product(
            ALL, [((3, 4), (3, 2), 1), ((3, 4), (5, 4), 0), ((2, 3, 4), (2, 1, 4), 1),
                  ((2, 3, 4), (1, 3, 6), -1), ((5,), (7,), 0), ((3, 4), (3, 0), 1)], LAYOUTS):
        yield dt, shape, ishape, axis, layout


@pytest.mark.parametrize("dt,shape,ishape,axis,layout", sample(along_cases(), 50, salt=13))
def test_take_along_axis_matches_numpy(nv, rng, dt, shape, ishape, axis, layout):
    a = rand(rng, shape, dt)
    idx = rand_index(rng, ishape, shape[axis], "int32")
    got = nv.read(nv.own(lib.nv_take_along_axis(nv.view(a, layout), nv.view(idx, "transposed"), axis)))
    assert_same(got, np.take_along_axis(a, idx.astype(np.int64), axis=axis))


def test_take_along_axis_errors(nv):
    a = nv.array(np.zeros((3, 4), np.float32))
    expect_error(nv, nv.own(lib.nv_take_along_axis(a, nv.array(np.zeros(3, np.int32)), 1)),
                 "take_along_axis", "(3,)")
    expect_error(nv, nv.own(lib.nv_take_along_axis(a, nv.array(np.zeros((2, 4), np.int32)), 1)),
                 "take_along_axis")
    expect_error(nv, nv.own(lib.nv_take_along_axis(a, nv.array(np.full((3, 1), 4, np.int32)), 1)),
                 "take_along_axis", "out of range")


@pytest.mark.parametrize("dt,layout", sample(list(itertools.product(ALL, LAYOUTS)), 20, salt=14))
def test_put_along_axis_matches_numpy(nv, rng, dt, layout):
    a = rand(rng, (4, 6), dt)
    # Distinct indices per row, so NumPy's result does not depend on the write order.
    idx = np.stack([rng.permutation(6)[:3] for _ in range(4)]).astype(np.int64)
    idx[0, 0] -= 6  # a negative index
    vals = rand(rng, (4, 3), dt)
    got = nv.read(nv.own(lib.nv_put_along_axis(nv.view(a, layout), nv.array(idx), nv.array(vals), 1)))
    want = a.copy()
    np.put_along_axis(want, idx % 6, vals, axis=1)
    assert_same(got, want)


def test_put_along_axis_broadcasts_and_last_wins(nv):
    a = np.zeros((2, 3), np.int32)
    idx = np.array([[1, 1, 2]], np.int32)  # broadcast over rows; 1 appears twice
    vals = np.array([[7, 8, 9]], np.int32)
    got = nv.read(nv.own(lib.nv_put_along_axis(nv.array(a), nv.array(idx), nv.array(vals), 1)))
    assert_same(got, np.array([[0, 8, 9], [0, 8, 9]], np.int32))
    # A scalar value and float values cast to the array's dtype.
    got = nv.read(nv.own(lib.nv_put_along_axis(nv.array(a), nv.array(np.array([[0], [2]])),
                                               nv.array(np.array(2.7)), 1)))
    assert_same(got, np.array([[2, 0, 0], [0, 0, 2]], np.int32))


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
        region = tuple(slice(s, s + n) for s, n in zip(start, slice_sizes))
        out[pos] = a[region]
    return out


def gather_cases():
    specs = [((6, 5), [0], [1, 5], [(4,)]), ((6, 5), [0, 1], [1, 1], [(3, 1), (1, 2)]),
             ((4, 5, 3), [2, 0], [2, 3, 1], [(2,), (2,)]), ((4, 5), [], [2, 2], []),
             ((4, 5), [1], [4, 2], [()]), ((5,), [0], [0], [(3,)])]
    for dt, spec, layout in itertools.product(ALL, specs, LAYOUTS):
        yield dt, spec, layout


@pytest.mark.parametrize("dt,spec,layout", sample(gather_cases(), 40, salt=15))
def test_gather_matches_reference(nv, rng, dt, spec, layout):
    shape, axes, sizes, ishapes = spec
    a = rand(rng, shape, dt)
    idxs = [rand_index(rng, s, shape[ax] - sizes[ax] + 1, "int64", negative=False) for s, ax in zip(ishapes, axes)]
    ax_c, nax = ints(axes)
    sz_c, nsz = ints(sizes)
    hs = arrays(*[nv.array(i) for i in idxs])
    got = nv.read(nv.own(lib.nv_gather(nv.view(a, layout), hs, len(idxs), ax_c, sz_c, nsz)))
    assert_same(got, gather_ref(a, idxs, axes, sizes))


def test_gather_errors(nv):
    a = nv.array(np.zeros((4, 5), np.float32))
    one = nv.array(np.array([3], np.int32))
    ax, _ = ints([0])
    sz, _ = ints([2, 5])
    # Slice of 2 rows from row 3 runs past the end.
    expect_error(nv, nv.own(lib.nv_gather(a, arrays(one), 1, ax, sz, 2)), "gather", "out of range")
    big, _ = ints([5, 5])
    expect_error(nv, nv.own(lib.nv_gather(a, arrays(one), 1, ax, big, 2)), "gather", "slice size")
    expect_error(nv, nv.own(lib.nv_gather(a, arrays(one), 1, ax, sz, 1)), "gather", "slice sizes")
    ax2, _ = ints([0, 0])
    expect_error(nv, nv.own(lib.nv_gather(a, arrays(one, one), 2, ax2, sz, 2)), "gather", "repeated")
    fl = nv.array(np.array([1.0]))
    expect_error(nv, nv.own(lib.nv_gather(a, arrays(fl), 1, ax, sz, 2)), "gather", "integers")


# ---- scatter ----

UFUNC = {"nv_scatter": None, "nv_scatter_add": np.add, "nv_scatter_prod": np.multiply,
         "nv_scatter_max": np.maximum, "nv_scatter_min": np.minimum}


def scatter_ref(op, a, idxs, upd, axes):
    out = a.copy()
    idxs = np.broadcast_arrays(*idxs) if idxs else []
    ishape = idxs[0].shape if idxs else ()
    S = upd.shape[len(ishape):]
    with np.errstate(all="ignore"):
        for pos in np.ndindex(*ishape):
            start = [0] * a.ndim
            for ix, ax in zip(idxs, axes):
                v = int(ix[pos])
                start[ax] = v + a.shape[ax] if v < 0 else v
            region = tuple(slice(s, s + n) for s, n in zip(start, S))
            f = UFUNC[op]
            out[region] = upd[pos] if f is None else f(out[region], upd[pos])
    return out


def scatter_cases():
    specs = [((8,), [0], [(10,)], (1,)), ((6, 4), [0], [(5,)], (1, 4)),
             ((6, 4), [0, 1], [(3, 1), (1, 2)], (1, 1)), ((5, 4, 3), [1], [(2, 2)], (2, 2, 3)),
             ((5, 4), [], [], (2, 3))]
    for op, dt, spec in itertools.product(UFUNC, ALL, specs):
        if dt == "complex64" and op in ("nv_scatter_max", "nv_scatter_min"):
            continue
        yield op, dt, spec


@pytest.mark.parametrize("op,dt,spec", sample(scatter_cases(), 60, salt=16))
def test_scatter_matches_reference(nv, rng, op, dt, spec):
    shape, axes, ishapes, slice_shape = spec
    # Complex products of infinities follow C's Annex G (inf), NumPy's naive formula gives NaN.
    a = rand(rng, shape, dt, edges=not (dt == "complex64" and op == "nv_scatter_prod"))
    idxs = [rand_index(rng, s, shape[ax] - slice_shape[ax] + 1, "int32", negative=slice_shape[ax] == 1)
            for s, ax in zip(ishapes, axes)]
    ishape = np.broadcast_shapes(*ishapes) if ishapes else ()
    upd = rand(rng, ishape + slice_shape, dt, edges=False)
    ax_c, _ = ints(axes)
    hs = arrays(*[nv.array(i) for i in idxs])
    got = nv.read(nv.own(getattr(lib, op)(nv.view(a, "strided"), hs, len(idxs), nv.array(upd), ax_c)))
    want = scatter_ref(op, a, idxs, upd, axes)
    if op in ("nv_scatter", "nv_scatter_max", "nv_scatter_min") or dt in INTS + ["bool"]:
        assert_same(got, want)
    else:
        assert_close(got, want, dt)


@pytest.mark.parametrize("it", [np.int32, np.int64])
@pytest.mark.parametrize("dt", ["float32", "int32", "float16", "int64", "uint8", "float64"])
def test_scatter_add_large_duplicates(nv, rng, dt, it):
    """Enough work for the pool: duplicates accumulate exactly as a serial loop."""
    n, m = 1 << 12, 1 << 16
    a = rand(rng, (n,), dt, edges=False)
    idx = rng.integers(-n, n, m).astype(it)
    upd = rand(rng, (m, 1), dt, edges=False)
    got = nv.read(nv.own(lib.nv_scatter_add(nv.array(a), arrays(nv.array(idx)), 1, nv.array(upd),
                                            ints([0])[0])))
    want = a.copy()
    with np.errstate(all="ignore"):
        np.add.at(want, idx, upd[:, 0])
    if dt in INTS:
        assert_same(got, want)
    else:
        ref = ref64 = a.astype(np.float64)
        np.add.at(ref64, idx, upd[:, 0].astype(np.float64))
        assert_close(got, ref, dt, rtol=1e-2 if dt == "float16" else 1e-4, atol=1 if dt == "float16" else 1e-3)


@pytest.mark.parametrize("it", [np.int32, np.int64])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_scatter_large_duplicates_last_wins(nv, rng, dt, it):
    n, m = 1 << 10, 1 << 16
    a = rng.standard_normal(n).astype(dt)
    idx = rng.integers(-n, n, m).astype(it)
    upd = rng.standard_normal((m, 1)).astype(dt)
    got = nv.read(nv.own(lib.nv_scatter(nv.array(a), arrays(nv.array(idx)), 1, nv.array(upd),
                                        ints([0])[0])))
    want = a.copy()
    for i, u in zip(idx, upd[:, 0]):  # a serial loop: the last update of an index wins
        want[i] = u
    assert_same(got, want)
    bad = idx.copy()
    bad[m // 2] = n
    h = nv.own(lib.nv_scatter_add(nv.array(a), arrays(nv.array(bad)), 1, nv.array(upd), ints([0])[0]))
    expect_error(nv, h, "scatter_add", "out of range")


def test_scatter_duplicates_last_wins(nv):
    a = nv.array(np.zeros(4, np.float32))
    idx = nv.array(np.array([1, 3, 1, -3], np.int32))
    upd = nv.array(np.array([[1.0], [2.0], [3.0], [4.0]], np.float32))
    got = nv.read(nv.own(lib.nv_scatter(a, arrays(idx), 1, upd, ints([0])[0])))
    assert_same(got, np.array([0, 4, 0, 2], np.float32))


def test_scatter_nan_and_overflow(nv):
    a = nv.array(np.array([1.0, np.nan, 3.0], np.float32))
    idx = nv.array(np.array([0, 1, 2], np.int32))
    upd = nv.array(np.array([[np.nan], [5.0], [2.0]], np.float32))
    got = nv.read(nv.own(lib.nv_scatter_max(a, arrays(idx), 1, upd, ints([0])[0])))
    assert np.isnan(got[0]) and np.isnan(got[1]) and got[2] == 3.0
    b = nv.array(np.array([127, -128], np.int8))
    i2 = nv.array(np.array([0, 1, 0], np.int32))
    u2 = nv.array(np.array([[1], [-1], [1]], np.int8))
    got = nv.read(nv.own(lib.nv_scatter_add(b, arrays(i2), 1, u2, ints([0])[0])))
    assert_same(got, np.array([-127, 127], np.int8))


def test_scatter_errors(nv):
    a = nv.array(np.zeros((4, 3), np.float32))
    idx = nv.array(np.array([0, 5], np.int32))
    ax, _ = ints([0])
    good = nv.array(np.ones((2, 1, 3), np.float32))
    expect_error(nv, nv.own(lib.nv_scatter_add(a, arrays(idx), 1, good, ax)), "scatter_add",
                 "out of range")
    bad = nv.array(np.ones((2, 3), np.float32))
    expect_error(nv, nv.own(lib.nv_scatter(a, arrays(idx), 1, bad, ax)), "scatter", "updates")
    big = nv.array(np.ones((2, 1, 4), np.float32))
    expect_error(nv, nv.own(lib.nv_scatter(a, arrays(idx), 1, big, ax)), "scatter", "(2,1,4)")
    fl = nv.array(np.array([0.0, 1.0]))
    expect_error(nv, nv.own(lib.nv_scatter_min(a, arrays(fl), 1, good, ax)), "scatter_min", "integers")
    ok_idx = nv.array(np.array([0, 3], np.int32))
    two_rows = nv.array(np.ones((2, 2, 3), np.float32))
    # A 2-row slice starting at row 3 runs past the end.
    expect_error(nv, nv.own(lib.nv_scatter_prod(a, arrays(ok_idx), 1, two_rows, ax)), "out of range")


def test_scatter_into_temporary_base_is_correct(nv, rng):
    """The base is an intermediate the evaluation owns (donated): only updates are written."""
    x = rng.standard_normal(100).astype(np.float32)
    base = nv.own(lib.nv_add(nv.array(x), nv.array(x)))
    idx = rng.integers(0, 100, 30).astype(np.int32)
    upd = rng.standard_normal((30, 1)).astype(np.float32)
    h = lib.nv_scatter_add(base, arrays(nv.array(idx)), 1, nv.array(upd), ints([0])[0])
    nv.arrays.remove(base)
    lib.nv_release(base)
    got = nv.read(nv.own(h))
    want = (x + x).astype(np.float64)
    np.add.at(want, idx, upd[:, 0])
    assert_close(got, want, "float32", rtol=1e-5, atol=1e-5)


# ---- masked_scatter ----

def masked_ref(a, mask, src):
    out = a.copy()
    m = mask.ndim
    rows = src.reshape((src.shape[0],) + src.shape[1:]) if src.ndim == a.ndim - m + 1 else None
    k = 0
    for pos in np.ndindex(*mask.shape):
        if mask[pos]:
            if rows is None:
                out[pos] = np.broadcast_to(src, a.shape[m:])
            else:
                out[pos] = np.broadcast_to(rows[k], a.shape[m:])
            k += 1
    return out


@pytest.mark.parametrize("dt,case", sample(list(itertools.product(ALL, range(4))), 24, salt=17))
def test_masked_scatter_matches_reference(nv, rng, dt, case):
    shape, mshape, sshape = [((6,), (6,), (6,)), ((4, 3), (4,), (4, 3)), ((4, 3), (4,), (3,)),
                             ((2, 3, 2), (2, 3), (6, 1))][case]
    a = rand(rng, shape, dt)
    mask = rng.integers(0, 2, mshape).astype(bool)
    src = rand(rng, sshape, dt)
    got = nv.read(nv.own(lib.nv_masked_scatter(nv.view(a, "transposed"), nv.array(mask), nv.array(src))))
    assert_same(got, masked_ref(a, mask, src))


def test_masked_scatter_errors(nv):
    a = nv.array(np.zeros(4, np.float32))
    m = nv.array(np.array([True, True, False, True]))
    expect_error(nv, nv.own(lib.nv_masked_scatter(a, m, nv.array(np.ones(2, np.float32)))),
                 "masked_scatter", "more than the 2 rows")
    expect_error(nv, nv.own(lib.nv_masked_scatter(a, nv.array(np.ones(4, np.int32)), a)),
                 "masked_scatter", "bool")
    expect_error(nv, nv.own(lib.nv_masked_scatter(a, nv.array(np.ones(3, bool)), a)),
                 "masked_scatter", "mask of shape (3,)")
    expect_error(nv, nv.own(lib.nv_masked_scatter(a, m, nv.array(np.ones((4, 1), np.float32)))),
                 "masked_scatter")


# ---- dynamic slices ----

def clamp_start(v, n, size):
    v = v + n if v < 0 else v
    return min(max(v, 0), n - size)


@pytest.mark.parametrize("dt,layout", sample(list(itertools.product(ALL, LAYOUTS)), 16, salt=18))
def test_slice_dynamic_matches_numpy(nv, rng, dt, layout):
    a = rand(rng, (6, 7), dt)
    for start, size in [((2, 3), (3, 2)), ((-2, -9), (2, 4)), ((5, 6), (4, 4)), ((0, 100), (6, 0))]:
        st = np.array(start, np.int64)
        ax, nax = ints([0, 1])
        sz, nsz = ints(size)
        got = nv.read(nv.own(lib.nv_slice_dynamic(nv.view(a, layout), nv.array(st), ax, nax, sz, nsz)))
        r0, c0 = clamp_start(start[0], 6, size[0]), clamp_start(start[1], 7, size[1])
        assert_same(got, a[r0:r0 + size[0], c0:c0 + size[1]])


def test_slice_dynamic_one_axis_and_errors(nv, rng):
    a = rand(rng, (5, 4), "int32")
    ax, _ = ints([-1])
    sz, _ = ints([5, 2])
    got = nv.read(nv.own(lib.nv_slice_dynamic(nv.array(a), nv.array(np.array(1, np.uint8)), ax, 1, sz, 2)))
    assert_same(got, a[:, 1:3])
    expect_error(nv, nv.own(lib.nv_slice_dynamic(nv.array(a), nv.array(np.array([1.0])), ax, 1, sz, 2)),
                 "slice_dynamic", "integers")
    big, _ = ints([6, 2])
    expect_error(nv, nv.own(lib.nv_slice_dynamic(nv.array(a), nv.array(np.array([1])), ax, 1, big, 2)),
                 "slice_dynamic", "slice size")
    expect_error(nv, nv.own(lib.nv_slice_dynamic(nv.array(a), nv.array(np.array([1, 2])), ax, 1, sz, 2)),
                 "slice_dynamic", "2 start values")


@pytest.mark.parametrize("dt", sample(ALL, 6, salt=19))
def test_slice_update_dynamic_matches_numpy(nv, rng, dt):
    a = rand(rng, (5, 6), dt)
    upd = rand(rng, (2, 3), dt)
    for start in [(1, 2), (-1, -1), (4, 5)]:
        ax, nax = ints([0, 1])
        got = nv.read(nv.own(lib.nv_slice_update_dynamic(nv.view(a, "strided"), nv.array(upd),
                                                         nv.array(np.array(start, np.int32)), ax, nax)))
        want = a.copy()
        r0, c0 = clamp_start(start[0], 5, 2), clamp_start(start[1], 6, 3)
        want[r0:r0 + 2, c0:c0 + 3] = upd
        assert_same(got, want)
    # Leading axes of the update broadcast; the listed leading axis gets extent 1.
    row = rand(rng, (6,), dt)
    ax, _ = ints([0])
    got = nv.read(nv.own(lib.nv_slice_update_dynamic(nv.array(a), nv.array(row), nv.array(np.array([3])), ax, 1)))
    want = a.copy()
    want[3] = row
    assert_same(got, want)


# ---- slice_update_add / prod / max / min ----

SU = {"nv_slice_update_add": np.add, "nv_slice_update_prod": np.multiply,
      "nv_slice_update_max": np.maximum, "nv_slice_update_min": np.minimum}


def su_cases():
    regions = [((1, 0), (4, 5), (1, 2)), ((-1, 4), (0, -6), (-2, -1)), ((0, 0), (5, 5), (1, 1))]
    for op, dt, region in itertools.product(SU, ALL, regions):
        if dt == "complex64" and op in ("nv_slice_update_max", "nv_slice_update_min"):
            continue
        yield op, dt, region


@pytest.mark.parametrize("op,dt,region", sample(su_cases(), 40, salt=20))
def test_slice_update_reduce_matches_numpy(nv, rng, op, dt, region):
    a = rand(rng, (5, 6), dt, edges=not (dt == "complex64" and op == "nv_slice_update_prod"))
    start, stop, step = region
    sl = tuple(slice(s, e, k) for s, e, k in zip(start, stop, step))
    shape = a[sl].shape
    upd = rand(rng, shape[1:], dt, edges=False)  # broadcast over the first axis
    st, n = ints(start)
    sp, _ = ints(stop)
    sk, _ = ints(step)
    got = nv.read(nv.own(getattr(lib, op)(nv.view(a, "transposed"), nv.array(upd), st, sp, sk, n)))
    want = a.copy()
    with np.errstate(all="ignore"):
        want[sl] = SU[op](want[sl], upd)
    if dt in FLOATS + ["complex64"] and op in ("nv_slice_update_add", "nv_slice_update_prod"):
        assert_close(got, want, dt)
    else:
        assert_same(got, want)


def test_slice_update_reduce_errors(nv):
    a = nv.array(np.zeros((4, 4), np.float32))
    st, _ = ints([0, 0])
    sp, _ = ints([2, 2])
    expect_error(nv, nv.own(lib.nv_slice_update_add(a, nv.array(np.ones(3, np.float32)), st, sp, None, 2)),
                 "slice_update_add", "(3,)", "(2,2)")
    z, _ = ints([0, 0])
    expect_error(nv, nv.own(lib.nv_slice_update_max(a, a, st, sp, z, 2)), "slice_update_max", "zero")
    expect_error(nv, nv.own(lib.nv_slice_update_min(a, a, st, sp, None, 1)), "slice_update_min")


# ---- diagonal / diag ----

@pytest.mark.parametrize("dt,layout,offset,axes", sample(list(itertools.product(
    ALL, LAYOUTS, [0, 2, -1, 7, -9], [(0, 1), (1, 0), (0, 2), (-1, 1)])), 40, salt=21))
def test_diagonal_matches_numpy(nv, rng, dt, layout, offset, axes):
    a = rand(rng, (4, 5, 3), dt)
    got = nv.read(nv.own(lib.nv_diagonal(nv.view(a, layout), offset, *axes)))
    assert_same(got, np.diagonal(a, offset, *axes))


def test_diagonal_is_a_view(nv, rng):
    a = rand(rng, (4, 5), "float32")
    base = nv.array(a)
    d = nv.own(lib.nv_diagonal(base, 1, 0, 1))
    assert data_ptr(d) == data_ptr(base) + 4  # element (0, 1)
    assert_same(nv.read(d), np.diagonal(a, 1))
    expect_error(nv, nv.own(lib.nv_diagonal(nv.array(a[0]), 0, 0, 1)), "diagonal", "2 dimensions")
    expect_error(nv, nv.own(lib.nv_diagonal(base, 0, 1, -1)), "diagonal", "same axis")


@pytest.mark.parametrize("dt,k", sample(list(itertools.product(ALL, [0, 2, -3])), 20, salt=22))
def test_diag_matches_numpy(nv, rng, dt, k):
    v = rand(rng, (4,), dt)
    assert_same(nv.read(nv.own(lib.nv_diag(nv.view(v, "reversed"), k))), np.diag(v, k))
    m = rand(rng, (3, 5), dt)
    assert_same(nv.read(nv.own(lib.nv_diag(nv.view(m, "strided"), k))), np.diag(m, k))


def test_diag_errors(nv):
    expect_error(nv, nv.own(lib.nv_diag(nv.array(np.zeros((2, 2, 2))), 0)), "diag", "1-D or 2-D")
    expect_error(nv, nv.own(lib.nv_diag(nv.array(np.array(1.0)), 0)), "diag")
