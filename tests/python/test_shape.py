"""The shape ops against NumPy: flatten, unflatten, flip, split, unstack, concatenate, stack,
repeat, tile, swapaxes, moveaxis, pad, broadcast_arrays, atleast_*, roll, diff — every dtype,
strided inputs, views where the strides allow, error cases."""
import ctypes as C
import itertools

import numpy as np
import pytest

from conftest import sample
from index_helpers import (ALL, LAYOUTS, PP, P, I, IP, arrays, assert_same, data_ptr,
                           expect_error, rand, read_vec)
from nvc import CODE, FLOATS, INTS, NuvecError, ints, lib, np_dtype, sig

sig("nv_flatten", P, P, I, I)
sig("nv_unflatten", P, P, I, IP, I)
sig("nv_flip", P, P, IP, I)
sig("nv_split", I, P, I, I, P)
sig("nv_split_at", I, P, IP, I, I, P)
sig("nv_unstack", I, P, I, P)
sig("nv_concatenate", P, PP, I, I)
sig("nv_concatenate_flat", P, PP, I)
sig("nv_stack", P, PP, I, I)
sig("nv_repeat", P, P, I, I)
sig("nv_repeat_flat", P, P, I)
sig("nv_tile", P, P, IP, I)
sig("nv_swapaxes", P, P, I, I)
sig("nv_moveaxis", P, P, I, I)
sig("nv_pad", P, P, IP, IP, I, I, P)
sig("nv_broadcast_arrays", I, PP, I, P)
for _n in ["nv_atleast_1d", "nv_atleast_2d", "nv_atleast_3d"]:
    sig(_n, P, P)
sig("nv_roll", P, P, IP, I, IP, I)
sig("nv_diff", P, P, I, I, P, P)


@pytest.fixture
def vec():
    v = lib.nv_vec_new()
    yield v
    lib.nv_vec_free(v)


def extent(h):
    """The byte range [lo, hi] the elements of `h` occupy in its buffer."""
    nd = lib.nv_array_ndim(h)
    shape = lib.nv_array_shape(h)
    st = lib.nv_array_strides(h)
    isz = lib.nv_array_nbytes(h) // max(1, int(np.prod([shape[i] for i in range(nd)])))
    p = data_ptr(h)
    lo = hi = p
    for i in range(nd):
        span = (shape[i] - 1) * st[i] * isz
        lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
    return lo, hi


def is_view_of(nv, view, base):
    """The view's elements lie among the base's (no copy was made)."""
    nv.read(view)
    if lib.nv_array_nbytes(view) == 0:
        return True
    (vlo, vhi), (blo, bhi) = extent(view), extent(base)
    return blo <= vlo and vhi <= bhi


sig("nv_array_nbytes", C.c_size_t, P)


# ---- flatten / unflatten ----

@pytest.mark.parametrize("dt,layout,se", sample(list(itertools.product(
    ALL, LAYOUTS, [(0, -1), (1, 2), (-2, -1), (0, 0), (-9, 9)])), 30, salt=31))
def test_flatten_matches_numpy(nv, rng, dt, layout, se):
    a = rand(rng, (2, 3, 4), dt)
    s, e = se
    got = nv.read(nv.own(lib.nv_flatten(nv.view(a, layout), s, e)))
    s2, e2 = max(0, s % 3 if s < 0 else s), min(2, e % 3 if e < 0 else e)
    want = a.reshape(a.shape[:s2] + (-1,) + a.shape[e2 + 1:])
    assert_same(got, want)


def test_flatten_views_and_errors(nv, rng):
    a = rand(rng, (3, 4), "float32")
    base = nv.array(a)
    flat = nv.own(lib.nv_flatten(base, 0, -1))
    assert data_ptr(flat) == data_ptr(base)
    assert nv.read(nv.own(lib.nv_flatten(nv.array(np.array(5.0)), 0, -1))).shape == (1,)
    expect_error(nv, nv.own(lib.nv_flatten(base, 1, 0)), "flatten", "start_axis")
    expect_error(nv, nv.own(lib.nv_flatten(base, 2, 3)), "flatten", "start_axis")
    expect_error(nv, nv.own(lib.nv_flatten(nv.array(np.zeros((2, 3, 4))), 3, 5)), "flatten", "start_axis")


def test_unflatten(nv, rng):
    a = rand(rng, (2, 12, 3), "int16")
    base = nv.array(a)
    sh, n = ints([3, -1, 2])
    u = nv.own(lib.nv_unflatten(base, 1, sh, n))
    assert_same(nv.read(u), a.reshape(2, 3, 2, 2, 3))
    assert data_ptr(u) == data_ptr(base)
    bad, n = ints([5, -1])
    expect_error(nv, nv.own(lib.nv_unflatten(base, 1, bad, n)), "unflatten", "divide")
    expect_error(nv, nv.own(lib.nv_unflatten(base, 1, bad, 0)), "unflatten", "empty")
    expect_error(nv, nv.own(lib.nv_unflatten(base, 3, sh, 3)), "unflatten", "axis 3")


# ---- flip / swapaxes / moveaxis ----

@pytest.mark.parametrize("dt,layout,axes", sample(list(itertools.product(
    ALL, LAYOUTS, [None, (0,), (-1,), (0, 2)])), 30, salt=32))
def test_flip_is_a_view_matching_numpy(nv, rng, dt, layout, axes):
    a = rand(rng, (3, 4, 2), dt)
    base = nv.view(a, layout)
    ax, n = ints(axes or [])
    f = nv.own(lib.nv_flip(base, ax if axes else None, n))
    assert_same(nv.read(f), np.flip(a, axes))
    assert is_view_of(nv, f, base)


def test_flip_errors_and_empty(nv):
    base = nv.array(np.zeros((0, 3), np.float32))
    assert nv.read(nv.own(lib.nv_flip(base, None, 0))).shape == (0, 3)
    ax, _ = ints([1, 1])
    expect_error(nv, nv.own(lib.nv_flip(base, ax, 2)), "flip", "repeated")


@pytest.mark.parametrize("dt", sample(ALL, 5, salt=33))
def test_swapaxes_moveaxis(nv, rng, dt):
    a = rand(rng, (2, 3, 4), dt)
    base = nv.array(a)
    s = nv.own(lib.nv_swapaxes(base, 0, -1))
    assert_same(nv.read(s), np.swapaxes(a, 0, -1))
    assert data_ptr(s) == data_ptr(base)
    for src, dst in [(0, 2), (2, 0), (-1, 1), (1, 1)]:
        m = nv.own(lib.nv_moveaxis(base, src, dst))
        assert_same(nv.read(m), np.moveaxis(a, src, dst))
    expect_error(nv, nv.own(lib.nv_swapaxes(base, 0, 3)), "swapaxes", "axis 3")
    expect_error(nv, nv.own(lib.nv_moveaxis(base, -4, 0)), "moveaxis", "axis -4")


# ---- split / unstack / broadcast_arrays ----

@pytest.mark.parametrize("dt,layout", sample(list(itertools.product(ALL, LAYOUTS)), 12, salt=34))
def test_split_matches_numpy(nv, rng, dt, layout, vec):
    a = rand(rng, (6, 4), dt)
    base = nv.view(a, layout)
    assert lib.nv_split(base, 3, 0, vec) == 0
    got = read_vec(nv, vec)
    for g, w in zip(got, np.split(a, 3, 0)):
        assert_same(g, w)
    assert len(got) == 3
    for indices in [[1, 3], [-1], [5, 2, 9], []]:
        v = lib.nv_vec_new()
        ix, n = ints(indices)
        assert lib.nv_split_at(base, ix, n, 1, v) == 0
        got = read_vec(nv, v)
        want = np.split(a, indices, 1)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)
        lib.nv_vec_free(v)
    vec_new = lib.nv_vec_new()
    assert lib.nv_split(base, 4, 0, vec_new) == 1  # 6 rows do not split in 4
    assert b"split" in lib.nv_last_error() and lib.nv_vec_size(vec_new) == 0
    assert lib.nv_split(base, 2, 2, vec_new) == 1
    lib.nv_vec_free(vec_new)


def test_split_results_are_views(nv, rng, vec):
    a = rand(rng, (4, 4), "float32")
    base = nv.array(a)
    assert lib.nv_split(base, 2, 0, vec) == 0
    assert data_ptr(lib.nv_vec_get(vec, 1)) == data_ptr(base) + 8 * 4


@pytest.mark.parametrize("dt,axis", sample(list(itertools.product(ALL, [0, 1, -1])), 10, salt=35))
def test_unstack(nv, rng, dt, axis, vec):
    a = rand(rng, (3, 2, 4), dt)
    assert lib.nv_unstack(nv.view(a, "transposed"), axis, vec) == 0
    got = read_vec(nv, vec)
    assert len(got) == a.shape[axis]
    for i, g in enumerate(got):
        assert_same(g, np.take(a, i, axis=axis))


def test_unstack_errors(nv, vec):
    assert lib.nv_unstack(nv.array(np.array(1.0)), 0, vec) == 1
    assert b"unstack" in lib.nv_last_error()
    assert lib.nv_unstack(None, 0, vec) == 1


def test_broadcast_arrays(nv, rng, vec):
    xs = [rand(rng, s, "int32") for s in [(3, 1), (4,), (), (1, 4)]]
    hs = arrays(*[nv.array(x) for x in xs])
    assert lib.nv_broadcast_arrays(hs, 4, vec) == 0
    for g, w in zip(read_vec(nv, vec), np.broadcast_arrays(*xs)):
        assert_same(g, np.ascontiguousarray(w))
    bad = arrays(nv.array(np.zeros(3)), nv.array(np.zeros(4)))
    v2 = lib.nv_vec_new()
    assert lib.nv_broadcast_arrays(bad, 2, v2) == 1 and lib.nv_vec_size(v2) == 0
    assert b"(3,)" in lib.nv_last_error()
    lib.nv_vec_free(v2)


# ---- concatenate / stack ----

def concat_cases():
    for dt, dt2, axis, layout in itertools.product(ALL, ["same", "float32", "int8", "bool"],
                                                   [0, 1, -1], LAYOUTS):
        yield dt, dt2, axis, layout


@pytest.mark.parametrize("dt,dt2,axis,layout", sample(concat_cases(), 50, salt=36))
def test_concatenate_matches_numpy(nv, rng, dt, dt2, axis, layout):
    dt2 = dt if dt2 == "same" else dt2
    shapes = [(3, 4), (3, 4), (3, 4)]
    shapes[1] = tuple(2 if i == (axis % 2) else s for i, s in enumerate(shapes[1]))
    shapes[2] = tuple(0 if i == (axis % 2) else s for i, s in enumerate(shapes[2]))
    xs = [rand(rng, shapes[0], dt), rand(rng, shapes[1], dt2), rand(rng, shapes[2], dt)]
    hs = arrays(nv.view(xs[0], layout), nv.array(xs[1]), nv.array(xs[2]))
    got = nv.read(nv.own(lib.nv_concatenate(hs, 3, axis)))
    out = DTYPE_PROMOTE(dt, dt2)
    assert lib.nv_array_dtype(nv.own(lib.nv_concatenate(hs, 3, axis))) == CODE[out]
    want = np.concatenate([x.astype(np_dtype(out)) if x.dtype != np_dtype(out) else x for x in xs],
                          axis)
    if out == dt and dt2 == dt:
        assert_same(got, want)
    else:
        wide = np.complex128 if out == "complex64" else np.float64
        np.testing.assert_array_equal(got.astype(wide), want.astype(wide))


sig("nv_promote_types", I, I, I)


def DTYPE_PROMOTE(a, b):
    from nvc import DTYPES
    return DTYPES[lib.nv_promote_types(CODE[a], CODE[b])]


def test_concatenate_large_and_flat(nv, rng):
    a = rng.standard_normal(1 << 17).astype(np.float32)
    b = rng.standard_normal(1 << 17).astype(np.float32)
    got = nv.read(nv.own(lib.nv_concatenate(arrays(nv.array(a), nv.array(b)), 2, 0)))
    assert_same(got, np.concatenate([a, b]))
    m = rand(rng, (2, 3), "uint16")
    got = nv.read(nv.own(lib.nv_concatenate_flat(arrays(nv.array(m), nv.view(m, "transposed")), 2)))
    assert_same(got, np.concatenate([m.ravel(), m.ravel()]))


def test_concatenate_errors(nv):
    a = nv.array(np.zeros((2, 3), np.float32))
    b = nv.array(np.zeros((3, 3), np.float32))
    expect_error(nv, nv.own(lib.nv_concatenate(arrays(a, b), 2, 1)), "concatenate", "(2,3)", "(3,3)")
    expect_error(nv, nv.own(lib.nv_concatenate(arrays(a, nv.array(np.zeros(3))), 2, 0)), "concatenate")
    expect_error(nv, nv.own(lib.nv_concatenate(arrays(a), 0, 0)), "concatenate", "no arrays")
    expect_error(nv, nv.own(lib.nv_concatenate(arrays(a, b), 2, 2)), "concatenate", "axis 2")
    s = nv.array(np.array(1.0))
    expect_error(nv, nv.own(lib.nv_concatenate(arrays(s, s), 2, 0)), "concatenate")


@pytest.mark.parametrize("dt,axis", sample(list(itertools.product(ALL, [0, 1, 2, -1, -3])), 12, salt=37))
def test_stack_matches_numpy(nv, rng, dt, axis):
    xs = [rand(rng, (2, 3), dt) for _ in range(3)]
    hs = arrays(*[nv.view(x, "strided") for x in xs])
    assert_same(nv.read(nv.own(lib.nv_stack(hs, 3, axis))), np.stack(xs, axis))


def test_stack_errors(nv):
    a = nv.array(np.zeros((2, 3)))
    expect_error(nv, nv.own(lib.nv_stack(arrays(a, nv.array(np.zeros((3, 2)))), 2, 0)), "stack", "differ")
    expect_error(nv, nv.own(lib.nv_stack(arrays(a, a), 2, 3)), "stack", "axis 3")


# ---- repeat / tile ----

@pytest.mark.parametrize("dt,layout,rep,axis", sample(list(itertools.product(
    ALL, LAYOUTS, [0, 1, 3], [0, 1, -1, None])), 40, salt=38))
def test_repeat_matches_numpy(nv, rng, dt, layout, rep, axis):
    a = rand(rng, (2, 3), dt)
    h = nv.view(a, layout)
    got = nv.read(nv.own(lib.nv_repeat_flat(h, rep) if axis is None else lib.nv_repeat(h, rep, axis)))
    assert_same(got, np.repeat(a, rep, axis))


def test_repeat_errors(nv):
    a = nv.array(np.zeros((2, 3)))
    expect_error(nv, nv.own(lib.nv_repeat(a, -1, 0)), "repeat", "negative")
    expect_error(nv, nv.own(lib.nv_repeat(a, 2, 2)), "repeat", "axis 2")


@pytest.mark.parametrize("dt,reps", sample(list(itertools.product(
    ALL, [(2,), (2, 1), (1, 3), (2, 0, 2), (3, 1, 1, 2)])), 25, salt=39))
def test_tile_matches_numpy(nv, rng, dt, reps):
    a = rand(rng, (2, 3), dt)
    r, n = ints(reps)
    assert_same(nv.read(nv.own(lib.nv_tile(nv.view(a, "reversed"), r, n))), np.tile(a, reps))


def test_tile_errors(nv):
    r, n = ints([2, -1])
    expect_error(nv, nv.own(lib.nv_tile(nv.array(np.zeros(3)), r, n)), "tile", "negative")


# ---- pad ----

MODES = {"constant": 0, "edge": 1, "reflect": 2, "symmetric": 3}


def pad_cases():
    widths = [[(1, 2), (0, 3)], [(2, 2), (2, 2)], [(0, 0), (7, 9)], [(3, 0), (1, 1)]]
    for dt, mode, w, layout in itertools.product(ALL, MODES, widths, LAYOUTS):
        yield dt, mode, w, layout


@pytest.mark.parametrize("dt,mode,w,layout", sample(pad_cases(), 50, salt=40))
def test_pad_matches_numpy(nv, rng, dt, mode, w, layout):
    a = rand(rng, (3, 4), dt)
    lo, n = ints([x[0] for x in w])
    hi, _ = ints([x[1] for x in w])
    value = None
    kwargs = {}
    if mode == "constant":
        v = rand(rng, (), dt, edges=False)
        value = nv.array(v)
        kwargs["constant_values"] = v
    got = nv.read(nv.own(lib.nv_pad(nv.view(a, layout), lo, hi, n, MODES[mode], value)))
    assert_same(got, np.pad(a, w, mode=mode, **kwargs))


def test_pad_defaults_and_errors(nv, rng):
    a = rand(rng, (2, 3, 2), "float16")
    lo, _ = ints([1])
    hi, _ = ints([2])
    got = nv.read(nv.own(lib.nv_pad(nv.array(a), lo, hi, 1, 0, None)))
    assert_same(got, np.pad(a, (1, 2)))
    # A float pad value is cast to an integer array's dtype.
    got = nv.read(nv.own(lib.nv_pad(nv.array(np.arange(3, dtype=np.int32)), lo, hi, 1, 0,
                                    nv.array(np.array(2.7)))))
    assert_same(got, np.array([2, 0, 1, 2, 2, 2], np.int32))
    e = nv.array(np.zeros((0, 2)))
    assert nv.read(nv.own(lib.nv_pad(e, lo, hi, 1, 0, None))).shape == (3, 5)
    expect_error(nv, nv.own(lib.nv_pad(e, lo, hi, 1, 1, None)), "pad", "empty axis")
    neg, _ = ints([-1])
    expect_error(nv, nv.own(lib.nv_pad(nv.array(a), neg, hi, 1, 0, None)), "pad", "negative")
    two, _ = ints([1, 1])
    expect_error(nv, nv.own(lib.nv_pad(nv.array(a), two, two, 2, 0, None)), "pad", "every axis")
    expect_error(nv, nv.own(lib.nv_pad(nv.array(a), lo, hi, 1, 7, None)), "pad", "mode")
    expect_error(nv, nv.own(lib.nv_pad(nv.array(a), lo, hi, 1, 0, nv.array(np.zeros(2)))), "pad", "scalar")


def test_pad_large_edge(nv, rng):
    a = rng.standard_normal((300, 200)).astype(np.float32)
    lo, n = ints([5, 17])
    hi, _ = ints([0, 3])
    got = nv.read(nv.own(lib.nv_pad(nv.array(a), lo, hi, n, 1, None)))
    assert_same(got, np.pad(a, [(5, 0), (17, 3)], mode="edge"))


# ---- atleast ----

@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4)])
def test_atleast(nv, rng, shape):
    a = rand(rng, shape, "int8")
    for fn, ref in [(lib.nv_atleast_1d, np.atleast_1d), (lib.nv_atleast_2d, np.atleast_2d),
                    (lib.nv_atleast_3d, np.atleast_3d)]:
        base = nv.view(a, "reversed")
        h = nv.own(fn(base))
        assert_same(nv.read(h), ref(a))
        assert is_view_of(nv, h, base)


# ---- roll ----

def roll_cases():
    for dt, shift, axes in itertools.product(ALL, [(1,), (-7,), (2, 3), (0,)],
                                             [None, (0,), (1,), (0, 1), (-1, 0)]):
        if axes is None or len(shift) in (1, len(axes)) or len(axes) == 1:
            yield dt, shift, axes


@pytest.mark.parametrize("dt,shift,axes", sample(roll_cases(), 40, salt=41))
def test_roll_matches_numpy(nv, rng, dt, shift, axes):
    a = rand(rng, (3, 5), dt)
    s, ns = ints(shift)
    ax, na = ints(axes or [])
    got = nv.read(nv.own(lib.nv_roll(nv.view(a, "transposed"), s, ns, ax if axes else None, na)))
    if axes is None:
        want = np.roll(a, sum(shift))
    elif len(axes) == 1:
        want = np.roll(a, sum(shift), axes[0])
    else:
        want = np.roll(a, shift if len(shift) == len(axes) else shift * len(axes), axes)
    assert_same(got, want)


def test_roll_errors(nv):
    a = nv.array(np.zeros((2, 3)))
    s, _ = ints([1, 2, 3])
    ax, _ = ints([0, 1])
    expect_error(nv, nv.own(lib.nv_roll(a, s, 3, ax, 2)), "roll", "pair")
    expect_error(nv, nv.own(lib.nv_roll(a, s, 0, None, 0)), "roll", "shift")
    ax3, _ = ints([2])
    expect_error(nv, nv.own(lib.nv_roll(a, s, 1, ax3, 1)), "roll", "axis 2")


# ---- diff ----

@pytest.mark.parametrize("dt,n,axis,layout", sample(list(itertools.product(
    ALL, [0, 1, 2, 9], [0, -1], LAYOUTS)), 40, salt=42))
def test_diff_matches_numpy(nv, rng, dt, n, axis, layout):
    a = rand(rng, (4, 5), dt)
    got = nv.read(nv.own(lib.nv_diff(nv.view(a, layout), n, axis, None, None)))
    with np.errstate(all="ignore"):
        want = np.diff(a, n, axis)
    if dt in FLOATS + ["complex64"]:
        from nvc import assert_close
        assert_close(got, want.astype(np.float64) if dt != "complex64" else want, dt)
    else:
        assert_same(got, want)


def test_diff_prepend_append_and_errors(nv, rng):
    a = rand(rng, (3, 4), "int32", edges=False) % 100
    p = np.array(7, np.int32)
    ap = rand(rng, (3, 2), "int32") % 100
    got = nv.read(nv.own(lib.nv_diff(nv.array(a), 1, 1, nv.array(p), nv.array(ap))))
    assert_same(got, np.diff(a, 1, 1, prepend=p, append=ap))
    got = nv.read(nv.own(lib.nv_diff(nv.array(np.array([True, False, False])), 1, 0, None, None)))
    assert_same(got, np.array([True, False]))
    u = nv.read(nv.own(lib.nv_diff(nv.array(np.array([1, 5, 2], np.uint8)), 1, 0, None, None)))
    assert_same(u, np.array([4, 253], np.uint8))
    expect_error(nv, nv.own(lib.nv_diff(nv.array(np.array(3)), 1, 0, None, None)), "diff", "axis 0")
    expect_error(nv, nv.own(lib.nv_diff(nv.array(a), -1, 0, None, None)), "diff", "negative")
    expect_error(nv, nv.own(lib.nv_diff(nv.array(a), 1, 0, nv.array(np.zeros(2)), None)), "concatenate")
