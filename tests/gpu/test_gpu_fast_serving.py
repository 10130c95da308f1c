"""The CUDA backend's serving kernels on the GPU against nuvec's CPU results: sorted_offsets over
every integer dtype (the kernel reads int32, int64, uint32 and uint64 ids; narrower ones are
converted first), 0 to 100000 ids, 0 to 5000 groups, ids outside [0, groups), strided ids;
causal_softmax over every float dtype, row lengths 1 to 8193 (a warp a row with 8 rows a
block, up to 1024 threads a row), rows per block from 1 to more than the row length, more rows
than the grid's 2^20 blocks cover at once (the kernel walks row groups grid-stride), strided,
transposed and reversed inputs, NaN and +-inf rows, empty arrays; fast softmax; paged_write over
every dtype (element sizes 1 to 8 bytes), block sizes 1/5/16, token rows of 0 to 1024
elements, padding slots, int32 and int64 slots, an out-of-range slot; conv_slots over every
float dtype, 1 to 4 taps (no state for 1), 1 to 2048 channels, bias and silu, padding, an empty
pool, an out-of-range slot. For each updating op an intermediate is written in place (donated)
and a held input is left intact.

Offsets, paged_write's pools and conv_slots's states must equal the CPU's exactly. Softmax
values and conv_slots's y compare within a tolerance of the output dtype (the GPU sums exponentials in float32 in a tree, the CPU in float64 in order); NaN and
zero positions exactly. Every op is built with the GPU as the default device (skipped where no
GPU is usable) and must run there (no CPU fallback); the references are built with the CPU as
the default device. `NUVEC_TEST_FULL=1` runs every case."""
import ctypes as C
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import On, gpu_and_cpu, needs_gpu, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import FLOATS, INTS, Session, lib, np_dtype, nv_name, ref64, sig  # noqa: E402

P = C.c_void_p
sig("nv_fast_sorted_offsets", P, P, C.c_int)
sig("nv_fast_causal_softmax", P, P, C.c_int)
sig("nv_fast_softmax", P, P)
sig("nv_multiply_scalar", P, P, C.c_double)
sig("nv_gpu_fallback_count", C.c_uint64)

pytestmark = needs_gpu

TOL = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-12}
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def close(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    t = TOL[nv_name(got.dtype)]
    g, w = ref64(got), ref64(want)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_array_equal(g == 0, w == 0)  # unseen columns are exactly 0 on both
    fin = np.isfinite(w)
    np.testing.assert_allclose(g[fin], w[fin], rtol=t, atol=t)


# ---- sorted_offsets ----

def sorted_ids(rng, n, groups, dtype):
    lo = -3 if np.dtype(np_dtype(dtype)).kind == "i" else 0
    hi = min(groups + 3, np.iinfo(np_dtype(dtype)).max)
    return np.sort(rng.integers(lo, hi + 1, n)).astype(np_dtype(dtype))


OFFSET_CASES = [(dt, n, g) for dt in INTS for n in [0, 1, 7, 1000, 4097, 100000]
                for g in [0, 1, 5, 64, 300, 5000]]


@pytest.mark.parametrize("dtype,n,groups", sample(OFFSET_CASES, 60, salt=701))
def test_sorted_offsets(nv, rng, dtype, n, groups):
    g = min(groups, np.iinfo(np_dtype(dtype)).max - 3)
    ids = sorted_ids(rng, n, g, dtype)
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_sorted_offsets(nv.array(ids), g)))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, np.searchsorted(ids, np.arange(g + 1), side="left"))


@pytest.mark.parametrize("layout", ["transposed", "strided"])
def test_sorted_offsets_layouts(nv, rng, layout):
    ids = sorted_ids(rng, 40 * 77, 500, "int64").reshape(40, 77)
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_sorted_offsets(nv.view(ids, layout),
                                                                          500)))
    np.testing.assert_array_equal(got, want)


def test_sorted_offsets_extremes(nv):
    for ids, g in [(np.array([np.iinfo(np.uint64).max - 1, np.iinfo(np.uint64).max], np.uint64), 2),
                   (np.array([np.iinfo(np.int64).min, -1, 0, 0], np.int64), 1),
                   (np.array([np.iinfo(np.uint32).max] * 3, np.uint32), 4),
                   (np.array([np.iinfo(np.int32).min, np.iinfo(np.int32).max], np.int32), 3)]:
        got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_sorted_offsets(nv.array(ids), g)))
        np.testing.assert_array_equal(got, want)


# ---- causal_softmax ----

LENGTHS = [1, 7, 31, 32, 33, 64, 100, 255, 256, 257, 1000, 1024, 1025, 4097, 8193]
CAUSAL_CASES = [(dt, c, rk, lay) for dt in FLOATS for c in LENGTHS
                for rk in ["one", "few", "equal", "more"] for lay in LAYOUTS
                if not (rk == "more" and c > 257)]


def rows_for(kind, c):
    return {"one": 1, "few": 3, "equal": min(c, 40), "more": c + 2}[kind]


@pytest.mark.parametrize("dtype,c,rk,layout", sample(CAUSAL_CASES, 90, salt=702))
def test_causal_softmax(nv, rng, dtype, c, rk, layout):
    rows = rows_for(rk, c)
    blocks = 2 if rows * c < 100000 else 1
    x = (rng.standard_normal((blocks, rows, c)) * 3).astype(np_dtype(dtype))
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_causal_softmax(nv.view(x, layout),
                                                                          rows)))
    close(got, want)


def test_causal_softmax_grid_stride(nv, rng):
    """More row groups (8 rows a block) than the grid's 2^20 blocks: walked grid-stride."""
    x = rng.standard_normal((8_500_001 // 7 * 7, 2)).astype(np.float32)
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_causal_softmax(nv.array(x), 7)))
    close(got, want)


def test_causal_softmax_edges_and_empty(nv):
    ni, pi = -np.inf, np.inf
    x = np.array([[1.0, 5.0, np.nan], [1.0, np.nan, 2.0], [ni, ni, 3.0], [pi, 1.0, 1.0],
                  [ni, 0.0, 5.0], [ni, 2.0, ni]], np.float32)
    for dt in FLOATS:
        xd = x.astype(np_dtype(dt))
        got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_causal_softmax(nv.array(xd), 2)))
        close(got, want)
    for shape in [(0, 4), (3, 0), (2, 0, 5)]:
        e = np.zeros(shape, np.float32)
        got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_causal_softmax(nv.array(e), 1)))
        assert got.shape == want.shape == shape


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_causal_softmax_in_place(nv, rng, dtype):
    """An intermediate only causal_softmax reads is written in place on the GPU; the caller's
    array keeps its values."""
    x = (rng.standard_normal((6, 4097)) * 2).astype(np_dtype(dtype))

    def make():
        xa = nv.array(x)
        t = lib.nv_multiply_scalar(xa, 2.0)
        y = nv.own(lib.nv_fast_causal_softmax(t, 3))
        lib.nv_release(t)  # y holds the only reference: t's buffer may take the result
        held = nv.own(lib.nv_fast_causal_softmax(xa, 3))  # xa is held: never written
        s = lib.nv_multiply_scalar(xa, 1.0)
        sm = nv.own(lib.nv_fast_softmax(s))
        lib.nv_release(s)
        return y, held, sm, xa

    with On("cpu"):
        want = [nv.read(h) for h in make()]
    with On("gpu"):
        hs = make()
        before = lib.nv_gpu_fallback_count()
        got = [nv.read(h) for h in hs]
        assert lib.nv_gpu_fallback_count() == before, "fell back to the CPU"
    for g, w in zip(got[:3], want[:3]):
        close(g, w)
    np.testing.assert_array_equal(got[3], x)


@pytest.mark.parametrize("dtype,c", sample([(dt, c) for dt in FLOATS for c in [1, 33, 4097]],
                                           8, salt=703))
def test_fast_softmax(nv, rng, dtype, c):
    x = (rng.standard_normal((5, c)) * 3).astype(np_dtype(dtype))
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_softmax(nv.array(x))))
    close(got, want)


# ---- paged_write ----

sig("nv_fast_paged_write", P, P, P, P)
sig("nv_eval1", C.c_int, P)
sig("nv_last_error", C.c_char_p)
ALL = FLOATS + INTS + ["bool", "complex64"]


def of_dtype(rng, shape, dtype):
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    if dtype in INTS:
        return rng.integers(0, 100, shape).astype(np_dtype(dtype))
    return rng.standard_normal(shape).astype(np_dtype(dtype))


def slot_map(rng, t, nslots, dtype):
    s = rng.permutation(nslots)[:t] if t <= nslots else np.full(t, -1)
    return np.where(rng.random(t) < 0.25, -1, s).astype(np_dtype(dtype))


PAGED_CASES = [(dt, blk, feat, t, sdt) for dt in ALL for blk in [1, 5, 16]
               for feat in [(), (3,), (8, 128), (4, 0)] for t in [0, 1, 7, 300]
               for sdt in ["int32", "int64"]]


@pytest.mark.parametrize("dtype,blk,feat,t,sdt", sample(PAGED_CASES, 60, salt=704))
def test_paged_write(nv, rng, dtype, blk, feat, t, sdt):
    nb = 40
    pool = of_dtype(rng, (nb, blk) + feat, dtype)
    vals = of_dtype(rng, (t,) + feat, dtype)
    slots = slot_map(rng, t, nb * blk, sdt)
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_paged_write(
        nv.array(pool), nv.array(vals), nv.array(slots))))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("layout", ["transposed", "strided", "reversed"])
def test_paged_write_layouts(nv, rng, layout):
    pool = of_dtype(rng, (6, 16, 40), "bfloat16")
    vals = of_dtype(rng, (30, 40), "float32")  # converted to the pool's dtype
    slots = slot_map(rng, 30, 96, "int32")
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_paged_write(
        nv.view(pool, layout), nv.view(vals, layout), nv.view(slots, "strided"))))
    np.testing.assert_array_equal(got, want)


def test_paged_write_in_place_and_held(nv, rng):
    """A pool only paged_write reads is written in place on the GPU; a held pool keeps its
    values."""
    pool = of_dtype(rng, (64, 16, 8, 64), "bfloat16")
    vals = of_dtype(rng, (100, 8, 64), "bfloat16")
    slots = slot_map(rng, 100, 1024, "int64")

    def make():
        pa = nv.array(pool)
        t = lib.nv_multiply_scalar(pa, 1.0)
        y = nv.own(lib.nv_fast_paged_write(t, nv.array(vals), nv.array(slots)))
        lib.nv_release(t)
        held = nv.own(lib.nv_fast_paged_write(pa, nv.array(vals), nv.array(slots)))
        return y, held, pa

    with On("cpu"):
        want = [nv.read(h) for h in make()]
    with On("gpu"):
        hs = make()
        before = lib.nv_gpu_fallback_count()
        got = [nv.read(h) for h in hs]
        assert lib.nv_gpu_fallback_count() == before, "fell back to the CPU"
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(got[2], pool)


def test_paged_write_out_of_range_slot(nv):
    """A slot past the pool fails the node with the CPU's message."""
    pool = np.zeros((2, 4, 3), np.float32)
    vals = np.ones((2, 3), np.float32)
    for where in ["cpu", "gpu"]:
        with On(where):
            h = nv.own(lib.nv_fast_paged_write(nv.array(pool), nv.array(vals),
                                               nv.array(np.array([1, 8], np.int32))))
            assert lib.nv_eval1(h) != 0
            assert ("paged_write: index 8 is out of range for an axis of size 8"
                    in lib.nv_last_error().decode()), where


# ---- conv_slots ----

sig("nv_fast_conv_slots", C.c_int, P, P, P, P, P, C.c_bool, C.POINTER(P))


def conv_make(nv, x, w, b, pool, slots, silu, layout="contiguous", intermediate=False):
    """(y, pool) handles of conv_slots built on the default device."""
    out = (P * 2)()
    pa = nv.view(pool, layout)
    if intermediate:
        pa = lib.nv_multiply_scalar(pa, 1.0)  # only conv_slots reads it: donated
    lib.nv_fast_conv_slots(nv.view(x, layout), nv.view(w, layout),
                           nv.array(b) if b is not None else None, pa, nv.array(slots), silu, out)
    if intermediate:
        lib.nv_release(pa)
    return nv.own(out[0]), nv.own(out[1])


def both_devices(nv, make):
    """The handles `make()` returns, read on the CPU and on the GPU (no fallback there)."""
    with On("cpu"):
        want = [nv.read(h) for h in make()]
    with On("gpu"):
        hs = make()
        before = lib.nv_gpu_fallback_count()
        got = [nv.read(h) for h in hs]
        assert lib.nv_gpu_fallback_count() == before, "fell back to the CPU"
    return got, want


CONV_CASES = [(dt, k, c, silu, bias, lay, n) for dt in FLOATS for k in [1, 2, 4]
              for c in [1, 7, 130, 2048] for silu in [False, True] for bias in [False, True]
              for lay in ["contiguous", "transposed"] for n in [1, 5, 300]]


@pytest.mark.parametrize("dtype,k,c,silu,bias,layout,n", sample(CONV_CASES, 60, salt=705))
def test_conv_slots(nv, rng, dtype, k, c, silu, bias, layout, n):
    s = 2 * n + 1
    x = rng.standard_normal((n, c)).astype(np_dtype(dtype))
    w = rng.standard_normal((c, k)).astype(np_dtype(dtype))
    b = rng.standard_normal(c).astype(np_dtype(dtype)) if bias else None
    pool = rng.standard_normal((s, c, k - 1)).astype(np_dtype(dtype))
    slots = rng.permutation(s)[:n]
    slots = np.where(rng.random(n) < 0.2, -1, slots).astype(np.int64 if n % 2 else np.int32)
    got, want = both_devices(nv, lambda: conv_make(nv, x, w, b, pool, slots, silu, layout))
    close(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])  # states move unchanged


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_conv_slots_in_place_and_held(nv, rng, dtype):
    n, c, k, s = 64, 1024, 4, 256
    x = rng.standard_normal((n, c)).astype(np_dtype(dtype))
    w = rng.standard_normal((c, k)).astype(np_dtype(dtype))
    pool = rng.standard_normal((s, c, k - 1)).astype(np_dtype(dtype))
    slots = rng.permutation(s)[:n].astype(np.int32)

    def make():
        y, p = conv_make(nv, x, w, None, pool, slots, True, intermediate=True)
        held = nv.array(pool)
        y2, p2 = conv_make_held(nv, x, w, held, slots)
        return y, p, y2, p2, held

    got, want = both_devices(nv, make)
    close(got[0], want[0])
    close(got[2], want[2])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[3], want[3])
    np.testing.assert_array_equal(got[4], pool)  # the held pool keeps its values


def conv_make_held(nv, x, w, pool_handle, slots):
    out = (P * 2)()
    lib.nv_fast_conv_slots(nv.array(x), nv.array(w), None, pool_handle, nv.array(slots), True,
                           out)
    return nv.own(out[0]), nv.own(out[1])


def test_conv_slots_extremes(nv, rng):
    """No sequences, taps without state (K = 1), an empty pool with padding only, and a slot
    past the pool failing with the CPU's message."""
    pool = rng.standard_normal((3, 4, 2)).astype(np.float32)
    w3 = rng.standard_normal((4, 3)).astype(np.float32)
    x2 = rng.standard_normal((2, 4)).astype(np.float32)
    for x, w, p, s in [(np.zeros((0, 4), np.float32), w3, pool, np.zeros(0, np.int32)),
                       (x2, w3[:, :1].copy(), np.zeros((3, 4, 0), np.float32),
                        np.array([2, 0], np.int32)),
                       (x2, w3, np.zeros((0, 4, 2), np.float32), np.array([-1, -1], np.int32))]:
        got, want = both_devices(nv, lambda: conv_make(nv, x, w, None, p, s, True))
        for i, (g, wv) in enumerate(zip(got, want)):
            assert g.shape == wv.shape
            if i == 0:
                close(g, wv)  # y went through silu: CUDA's expf and the CPU's differ by an ulp
            else:
                np.testing.assert_array_equal(g, wv)
    for where in ["cpu", "gpu"]:
        with On(where):
            hy, _ = conv_make(nv, x2, w3, None, pool, np.array([1, 3], np.int32), False)
            assert lib.nv_eval1(hy) != 0
            assert ("conv_slots: index 3 is out of range for an axis of size 3"
                    in lib.nv_last_error().decode()), where
