"""The fast family's serving kernels through the C API against NumPy float64 references:
sorted_offsets over every integer dtype (sizes 0..4097, groups 0..300, ids outside [0, groups),
strided and transposed ids, int32 offsets), causal_softmax over every float dtype (row lengths
1..4097, rows per block from 1 to more than the row length, strided, transposed and reversed
inputs, NaN/+-inf rows, empty arrays) and fast softmax, and the argument errors."""
import ctypes as C

import numpy as np
import pytest

from conftest import sample
from nvc import FLOATS, INTS, Device, assert_close, lib, np_dtype, ref64, sig

P = C.c_void_p
sig("nv_fast_sorted_offsets", P, P, C.c_int)
sig("nv_fast_causal_softmax", P, P, C.c_int)
sig("nv_fast_softmax", P, P)
sig("nv_cpu", Device)
sig("nv_default_device", Device)
sig("nv_set_default_device", C.c_int, Device)

LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]
# Tolerances against float64: rows accumulate in float32 (float64 for float64), rounded once
# (these files also run with the GPU as the default device, which sums in another order).
TOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}


def error_of(nv, h):
    st, msg = nv.status(nv.own(h))
    assert st != 0
    return msg


# ---- sorted_offsets ----

def sorted_ids(rng, n, groups, dtype):
    """n ascending ids of `dtype` mostly in [0, groups), a few below (signed) and above it."""
    lo = -3 if np.dtype(np_dtype(dtype)).kind == "i" else 0
    hi = min(groups + 3, np.iinfo(np_dtype(dtype)).max)
    return np.sort(rng.integers(lo, hi + 1, n)).astype(np_dtype(dtype))


def offsets_ref(ids, groups):
    return np.searchsorted(ids.reshape(-1), np.arange(groups + 1), side="left")


OFFSET_CASES = [(dt, n, g) for dt in INTS for n in [0, 1, 7, 1000, 4097]
                for g in [0, 1, 5, 64, 300]]


@pytest.mark.parametrize("dtype,n,groups", sample(OFFSET_CASES, 60, salt=301))
def test_sorted_offsets(nv, rng, dtype, n, groups):
    g = min(groups, np.iinfo(np_dtype(dtype)).max - 3)
    ids = sorted_ids(rng, n, g, dtype)
    got = nv.read(nv.own(lib.nv_fast_sorted_offsets(nv.array(ids), g)))
    assert got.dtype == np.int32 and got.shape == (g + 1,)
    np.testing.assert_array_equal(got, offsets_ref(ids, g))


@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_sorted_offsets_layouts(nv, rng, layout):
    """Ids of any layout are read flat, in row-major order of their shape."""
    ids = sorted_ids(rng, 6 * 35, 40, "int32").reshape(6, 35)
    got = nv.read(nv.own(lib.nv_fast_sorted_offsets(nv.view(ids, layout), 40)))
    np.testing.assert_array_equal(got, offsets_ref(ids, 40))


def test_sorted_offsets_runs(nv):
    """Each group's run is [offsets[g], offsets[g+1]): empty groups repeat the offset."""
    ids = np.array([0, 0, 2, 2, 2, 5], np.int64)
    got = nv.read(nv.own(lib.nv_fast_sorted_offsets(nv.array(ids), 7)))
    np.testing.assert_array_equal(got, [0, 2, 2, 5, 5, 5, 6, 6])
    big = np.array([np.iinfo(np.uint64).max - 1, np.iinfo(np.uint64).max], np.uint64)
    got = nv.read(nv.own(lib.nv_fast_sorted_offsets(nv.array(big), 2)))
    np.testing.assert_array_equal(got, [0, 0, 0])
    neg = np.array([np.iinfo(np.int64).min, -1, 0], np.int64)
    got = nv.read(nv.own(lib.nv_fast_sorted_offsets(nv.array(neg), 1)))
    np.testing.assert_array_equal(got, [2, 3])


def test_sorted_offsets_errors(nv):
    f = nv.array(np.array([0.0, 1.0], np.float32))
    assert "integer dtype" in error_of(nv, lib.nv_fast_sorted_offsets(f, 3))
    b = nv.array(np.array([True, False]))
    assert "sorted_offsets" in error_of(nv, lib.nv_fast_sorted_offsets(b, 3))
    i = nv.array(np.array([0, 1], np.int32))
    assert "groups must be in" in error_of(nv, lib.nv_fast_sorted_offsets(i, -1))
    assert "sorted_offsets" in error_of(nv, lib.nv_fast_sorted_offsets(None, 2))


# ---- causal_softmax ----

def causal_ref(x, rows):
    """Row i of each block of `rows` sees columns j <= C - rows + i (softmax there, 0 else)."""
    x = ref64(x)
    c = x.shape[-1]
    flat = x.reshape(-1, c)
    k = np.clip(c - rows + np.arange(flat.shape[0]) % rows + 1, 0, c)
    seen = np.arange(c)[None, :] < k[:, None]
    with np.errstate(invalid="ignore"):
        v = np.where(seen, flat, -np.inf)
        m = v.max(axis=-1, keepdims=True) if c else v
        e = np.where(seen, np.exp(v - m), 0)
        out = np.where(seen, e / e.sum(axis=-1, keepdims=True), 0)
    return out.reshape(x.shape)


def rand(rng, shape, dtype, scale=3.0):
    return (rng.standard_normal(shape) * scale).astype(np_dtype(dtype))


def close(got, want, dtype):
    assert_close(got, want, dtype, rtol=TOL[dtype], atol=TOL[dtype])


CAUSAL_CASES = [(dt, c, rk, lay) for dt in FLOATS for c in [1, 7, 64, 100, 257, 4097]
                for rk in ["one", "few", "equal", "more"] for lay in LAYOUTS
                if not (rk == "more" and c > 257)]  # (rows > C is the same kernel path at any C)


def rows_for(kind, c):
    return {"one": 1, "few": 3, "equal": 6, "more": c + 2}[kind]


@pytest.mark.parametrize("dtype,c,rk,layout", sample(CAUSAL_CASES, 60, salt=302))
def test_causal_softmax(nv, rng, dtype, c, rk, layout):
    rows = rows_for(rk, c)
    x = rand(rng, (2, rows * (2 if rows < 4 else 1), c), dtype)
    got = nv.read(nv.own(lib.nv_fast_causal_softmax(nv.view(x, layout), rows)))
    close(got, causal_ref(x, rows), dtype)


@pytest.mark.parametrize("c", [1, 9, 4096, 20000])
def test_causal_softmax_square(nv, rng, c):
    """rows == C (prefill): row i sees columns 0..i, the last row every column."""
    r = min(c, 40)
    x = rand(rng, (r, c), "float32")
    got = nv.read(nv.own(lib.nv_fast_causal_softmax(nv.array(x), r)))
    close(got, causal_ref(x, r), "float32")


def test_causal_softmax_edge_values(nv):
    ni, pi = -np.inf, np.inf
    x = np.array([[1.0, 5.0, np.nan],     # row 0 sees 2 columns: the NaN is not seen
                  [1.0, np.nan, 2.0],     # a seen NaN: NaN over the row
                  [ni, ni, 3.0],          # row 0 again: sees only -inf -> NaN
                  [pi, 1.0, 1.0],         # a seen +inf -> NaN
                  [ni, 0.0, 5.0],         # ...
                  [ni, 2.0, ni]], np.float32)
    got = nv.read(nv.own(lib.nv_fast_causal_softmax(nv.array(x), 2)))
    close(got[0], causal_ref(x[:2], 2)[0], "float32")
    assert got[0, 2] == 0
    assert np.isnan(got[1]).all()
    assert np.isnan(got[2, :2]).all() and got[2, 2] == 0
    assert np.isnan(got[3]).all()
    close(got[4:6], causal_ref(x[4:6], 2), "float32")


@pytest.mark.parametrize("shape", [(0, 4), (3, 0), (2, 0, 5)])
def test_causal_softmax_empty(nv, shape):
    x = np.zeros(shape, np.float32)
    assert nv.read(nv.own(lib.nv_fast_causal_softmax(nv.array(x), 1))).shape == shape


def test_causal_softmax_unseen_rows_are_zero(nv, rng):
    """More rows a block than columns: the first rows - C rows of each block see nothing."""
    x = rand(rng, (2, 6, 2), "float64")
    got = nv.read(nv.own(lib.nv_fast_causal_softmax(nv.array(x), 6)))
    assert (got[:, :4] == 0).all()
    close(got, causal_ref(x, 6), "float64")


def test_causal_softmax_errors(nv, rng):
    x = nv.array(rand(rng, (2, 3, 8), "float32"))
    assert "divide the 6 rows" in error_of(nv, lib.nv_fast_causal_softmax(x, 4))
    assert "rows must be positive" in error_of(nv, lib.nv_fast_causal_softmax(x, 0))
    xi = nv.array(np.ones((2, 8), np.int32))
    assert "floating type" in error_of(nv, lib.nv_fast_causal_softmax(xi, 1))
    s = nv.array(np.float32(1))
    assert "at least 1 dimension" in error_of(nv, lib.nv_fast_causal_softmax(s, 1))


# ---- softmax ----

@pytest.mark.parametrize("dtype,c,layout", sample([(dt, c, lay) for dt in FLOATS
                                                   for c in [1, 7, 128, 4097] for lay in LAYOUTS],
                                                  24, salt=303))
def test_fast_softmax(nv, rng, dtype, c, layout):
    x = rand(rng, (3, 4, c), dtype)
    got = nv.read(nv.own(lib.nv_fast_softmax(nv.view(x, layout))))
    close(got, causal_ref(x, 1), dtype)  # rows = 1: every column seen


# ---- paged_write ----

sig("nv_fast_paged_write", P, P, P, P)
ALL = FLOATS + INTS + ["bool", "complex64"]


def paged_ref(pool, values, slots):
    out = pool.copy()
    flat = out.reshape((pool.shape[0] * pool.shape[1],) + pool.shape[2:])
    for t, s in enumerate(np.asarray(slots).reshape(-1)):
        if s >= 0:
            flat[s] = values[t]
    return out


def of_dtype(rng, shape, dtype):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    if dtype in INTS:
        return rng.integers(0, 100, shape).astype(np_dtype(dtype))
    return rng.standard_normal(shape).astype(np_dtype(dtype))


def slot_map(rng, t, nslots, dtype="int32"):
    """t distinct slots of [0, nslots), about a quarter of them -1 (padding)."""
    s = rng.permutation(nslots)[:t] if t <= nslots else np.full(t, -1)
    s = np.where(rng.random(t) < 0.25, -1, s)
    return s.astype(np_dtype(dtype))


PAGED_CASES = [(dt, blk, feat, t) for dt in ALL for blk in [1, 5, 16]
               for feat in [(), (3,), (2, 80), (4, 0)] for t in [0, 1, 7, 40]]


@pytest.mark.parametrize("dtype,blk,feat,t", sample(PAGED_CASES, 60, salt=304))
def test_paged_write(nv, rng, dtype, blk, feat, t):
    nb = 9
    pool = of_dtype(rng, (nb, blk) + feat, dtype)
    vals = of_dtype(rng, (t,) + feat, dtype)
    slots = slot_map(rng, t, nb * blk, "int64" if t % 2 else "int32")
    h = nv.own(lib.nv_fast_paged_write(nv.array(pool), nv.array(vals), nv.array(slots)))
    got = nv.read(h)
    assert got.dtype == pool.dtype
    np.testing.assert_array_equal(got, paged_ref(pool, vals, slots))


@pytest.mark.parametrize("layout", ["transposed", "strided", "reversed"])
def test_paged_write_layouts(nv, rng, layout):
    pool = of_dtype(rng, (4, 3, 6), "float32")
    vals = of_dtype(rng, (5, 6), "float32")
    slots = slot_map(rng, 5, 12)
    sl = np.ascontiguousarray(slots)
    h = nv.own(lib.nv_fast_paged_write(nv.view(pool, layout), nv.view(vals, layout),
                                       nv.view(sl, "strided")))
    np.testing.assert_array_equal(nv.read(h), paged_ref(pool, vals, slots))


def test_paged_write_converts_values_and_slots(nv, rng):
    """values take the pool's dtype; narrow and unsigned slot dtypes are widened."""
    pool = np.zeros((2, 4, 3), np.float16)
    vals = rng.standard_normal((3, 3))
    for sdt in ["uint8", "int16", "uint32", "uint64"]:
        slots = np.array([7, 0, 2], np_dtype(sdt))
        got = nv.read(nv.own(lib.nv_fast_paged_write(nv.array(pool), nv.array(vals),
                                                     nv.array(slots))))
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, paged_ref(pool, vals.astype(np.float16), slots))


def test_paged_write_duplicate_slots_keep_the_last(nv):
    """On the CPU the last of two tokens on one slot stays (the GPU keeps either: pinned here,
    whatever the default device)."""
    pool = np.zeros((1, 4), np.float32)
    vals = np.array([1, 2, 3], np.float32)
    prev = lib.nv_default_device()
    assert lib.nv_set_default_device(lib.nv_cpu()) == 0
    try:
        got = nv.read(nv.own(lib.nv_fast_paged_write(nv.array(pool), nv.array(vals),
                                                     nv.array(np.array([2, 2, -1], np.int32)))))
    finally:
        lib.nv_set_default_device(prev)
    np.testing.assert_array_equal(got, [[0, 0, 2, 0]])


def test_paged_write_errors(nv, rng):
    pool = nv.array(np.zeros((2, 4, 3), np.float32))
    vals = nv.array(np.ones((2, 3), np.float32))
    bad = nv.own(lib.nv_fast_paged_write(pool, vals, nv.array(np.array([1, 8], np.int32))))
    st = lib.nv_eval1(bad)
    assert st != 0
    msg = lib.nv_last_error().decode()
    assert "paged_write: index 8 is out of range for an axis of size 8" in msg
    msg = error_of(nv, lib.nv_fast_paged_write(pool, nv.array(np.ones((2, 4), np.float32)),
                                               nv.array(np.array([0, 1], np.int32))))
    assert "values must have shape [2]" in msg and "(2,4,3)" in msg.replace(" ", "")
    msg = error_of(nv, lib.nv_fast_paged_write(pool, vals, nv.array(np.array([0.0, 1.0]))))
    assert "1-D integer" in msg
    msg = error_of(nv, lib.nv_fast_paged_write(pool, vals, nv.array(np.zeros((1, 2), np.int32))))
    assert "1-D integer" in msg
    msg = error_of(nv, lib.nv_fast_paged_write(nv.array(np.zeros(4, np.float32)),
                                               nv.array(np.ones(1, np.float32)),
                                               nv.array(np.array([0], np.int32))))
    assert "at least 2 dimensions" in msg


# ---- conv_slots ----

sig("nv_fast_conv_slots", C.c_int, P, P, P, P, P, C.c_bool, C.POINTER(P))


def conv_ref(x, w, b, pool, slots, silu):
    """y and the updated pool in float64 (pool rows of padding slots untouched)."""
    x, w, pool = ref64(x), ref64(w), ref64(pool).copy()
    y = np.zeros_like(x)
    for n, s in enumerate(slots):
        if s < 0:
            continue
        win = np.concatenate([pool[s], x[n][:, None]], axis=1)
        v = (win * w).sum(axis=1) + (ref64(b) if b is not None else 0)
        y[n] = v / (1 + np.exp(-v)) if silu else v
        pool[s] = win[:, 1:]
    return y, pool


def conv_call(nv, x, w, b, pool, slots, silu, layout="contiguous"):
    out = (P * 2)()
    lib.nv_fast_conv_slots(nv.view(x, layout), nv.view(w, layout),
                           nv.array(b) if b is not None else None, nv.view(pool, layout),
                           nv.array(slots), silu, out)
    return nv.own(out[0]), nv.own(out[1])


CONV_CASES = [(dt, k, c, silu, bias, lay) for dt in FLOATS for k in [1, 2, 4] for c in [1, 7, 130]
              for silu in [False, True] for bias in [False, True]
              for lay in ["contiguous", "transposed", "strided"]]
# float16/bfloat16 y are rounded once from float32; the states move unchanged.
CONV_TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-5, "float64": 1e-12}


@pytest.mark.parametrize("dtype,k,c,silu,bias,layout", sample(CONV_CASES, 60, salt=305))
def test_conv_slots(nv, rng, dtype, k, c, silu, bias, layout):
    n, s = 6, 9
    x, w = rand(rng, (n, c), dtype, 1.0), rand(rng, (c, k), dtype, 1.0)
    b = rand(rng, (c,), dtype, 1.0) if bias else None
    pool = rand(rng, (s, c, k - 1), dtype, 1.0)
    slots = np.array([3, -1, 0, 8, 5, -2], np.int64 if c % 2 else np.int32)
    hy, hp = conv_call(nv, x, w, b, pool, slots, silu, layout)
    y, p = nv.read(hy), nv.read(hp)
    wy, wp = conv_ref(x, w, b, pool, slots, silu)
    t = CONV_TOL[dtype]
    assert_close(y, wy, dtype, rtol=t, atol=t)
    assert_close(p, wp, dtype, rtol=0, atol=0)  # states are moved, never rounded


def test_conv_slots_edges(nv, rng):
    """No sequences: y is empty and the pool a copy; an empty pool with padding only."""
    pool = rand(rng, (3, 4, 2), "float32")
    hy, hp = conv_call(nv, np.zeros((0, 4), np.float32), rand(rng, (4, 3), "float32"), None,
                       pool, np.zeros(0, np.int32), False)
    assert nv.read(hy).shape == (0, 4)
    np.testing.assert_array_equal(nv.read(hp), pool)
    x = rand(rng, (2, 4), "float32")
    hy, hp = conv_call(nv, x, rand(rng, (4, 3), "float32"), None, np.zeros((0, 4, 2), np.float32),
                       np.array([-1, -1], np.int32), True)
    np.testing.assert_array_equal(nv.read(hy), np.zeros((2, 4), np.float32))
    assert nv.read(hp).shape == (0, 4, 2)


def test_conv_slots_errors(nv, rng):
    x, w = rand(rng, (2, 4), "float32"), rand(rng, (4, 3), "float32")
    pool = rand(rng, (3, 4, 2), "float32")
    hy, hp = conv_call(nv, x, w, None, pool, np.array([1, 3], np.int32), False)
    assert lib.nv_eval1(hy) != 0
    msg = lib.nv_last_error().decode()
    assert "conv_slots: index 3 is out of range for an axis of size 3" in msg

    def err(x, w, pool, slots, b=None):
        out = (P * 2)()
        hb = nv.array(b) if b is not None else None
        st = lib.nv_fast_conv_slots(nv.array(x), nv.array(w), hb, nv.array(pool),
                                    nv.array(slots), False, out)
        assert st != 0
        nv.own(out[0])
        nv.own(out[1])
        return nv.status(out[0])[1], nv.status(out[1])[1]

    s2 = np.array([0, 1], np.int32)
    m0, m1 = err(x, rand(rng, (4, 4), "float32"), pool, s2)
    assert "conv_state_pool must be [S, C, K - 1]" in m0 and m0 == m1
    assert "weight must be [C, K]" in err(x, rand(rng, (5, 3), "float32"), pool, s2)[0]
    assert "x must be [N, C]" in err(x.astype(np.int32), w, pool, s2)[0]
    assert "x's dtype" in err(x, w, pool.astype(np.float16), s2)[0]
    assert "slot_ids must be a 1-D integer" in err(x, w, pool, np.array([0.0, 1.0]))[0]
    assert "slot_ids" in err(x, w, pool, np.array([0], np.int32))[0]
    assert "bias must be [C]" in err(x, w, pool, s2, b=np.ones(3, np.float32))[0]
