"""The CUDA backend's norm_rope and gated_delta_slots on the GPU against nuvec's CPU results.
norm_rope over every float dtype: the vector kernel's rows (D = 64, 128, 256 rotated whole,
float16/bfloat16/float32, a warp holding the row, v elements a lane, traditional pairs in a
lane and the others across lanes l and l ^ 16) and the any-row kernel's (float64, partial
rotation, odd D, D = 4096), strided inputs (copied first), 1 to 64 rows a token (token groups of
8 rows a block, the angles in shared memory when tpb * dims/2 <= 1024, else per element),
weight and freqs or not, with a cache (padding, int32 and int64 positions, an out-of-range
position), a donated cache and a held one. gated_delta_slots over every dtype of the inputs and
of the pool, Dk from 1 to 256 (1 to 8 lanes a column), Dk = 1100 (the wide kernel with
scratch states), Dv not a multiple of a block's columns, grouped heads, decode and several
tokens, padding slots, an empty pool, an out-of-range slot, a donated pool and a held one.

Values compare within a tolerance of the dtype (sums in another order, CUDA's sincosf and
expf); the rows a cache or pool does not update must equal the CPU's exactly. Every op is
built with the GPU as the default device (skipped where no GPU is usable) and must run there
(no CPU fallback); the references are built with the CPU as the default device.
`NUVEC_TEST_FULL=1` runs every case."""
import ctypes as C
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import On, needs_gpu, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import FLOATS, Session, lib, np_dtype, nv_name, ref64, sig  # noqa: E402

P = C.c_void_p
sig("nv_fast_norm_rope", P, P, P, C.c_double, C.c_int, C.c_bool, C.c_double, C.c_double, P, P,
    P, P)
sig("nv_fast_gated_delta_slots", C.c_int, P, P, P, P, P, P, P, C.c_double, C.POINTER(P))
sig("nv_multiply_scalar", P, P, C.c_double)
sig("nv_gpu_fallback_count", C.c_uint64)

pytestmark = needs_gpu

TOL = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 5e-5, "float64": 1e-11}


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def close(got, want, tol=None):
    assert got.dtype == want.dtype and got.shape == want.shape
    t = tol if tol is not None else TOL[nv_name(got.dtype)]
    g, w = ref64(got), ref64(want)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    fin = np.isfinite(w)
    np.testing.assert_allclose(g[fin], w[fin], rtol=t, atol=t)


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


# ---- norm_rope ----

def nr_make(nv, x, w, dims, trad, freqs, pos, cache=None, cpos=None, layout="contiguous",
            intermediate=False):
    ca = None
    if cache is not None:
        ca = nv.view(cache, layout)
        if intermediate:
            ca = lib.nv_multiply_scalar(ca, 1.0)  # only norm_rope reads it: donated
    h = lib.nv_fast_norm_rope(nv.view(x, layout), nv.array(w) if w is not None else None, 1e-6,
                              dims, trad, np.nan if freqs is not None else 10000.0, 0.75,
                              nv.array(pos), nv.array(freqs) if freqs is not None else None, ca,
                              nv.array(cpos) if cpos is not None else None)
    if intermediate and ca is not None:
        lib.nv_release(ca)
    return [nv.own(h)]


NR_CASES = [(dt, shape, dims, trad, weight, freqs, lay)
            for dt in FLOATS
            for shape, dims in [((300, 8, 128), 128), ((33, 64), 64), ((17, 3, 256), 256),
                                ((40, 2, 128), 64), ((9, 5, 80), 80), ((5, 1, 33), 32),
                                ((3, 2, 4096), 4096), ((70, 4, 2, 64), 64), ((1, 1, 2), 2)]
            for trad in [False, True] for weight in [False, True] for freqs in [False, True]
            for lay in ["contiguous", "strided"]]


@pytest.mark.parametrize("dtype,shape,dims,trad,weight,freqs,layout",
                         sample(NR_CASES, 70, salt=801))
def test_norm_rope(nv, rng, dtype, shape, dims, trad, weight, freqs, layout):
    x = (rng.standard_normal(shape) * 2).astype(np_dtype(dtype))
    w = (rng.standard_normal(shape[-1]) + 1).astype(np_dtype(dtype)) if weight else None
    fq = rng.uniform(1, 50, dims // 2).astype(np.float32) if freqs else None
    pos = rng.integers(0, 4096, shape[0]).astype(np.int32)
    got, want = both_devices(nv, lambda: nr_make(nv, x, w, dims, trad, fq, pos, layout=layout))
    # float32 angles of positions up to 4096 * 0.75: CUDA's sincosf and the CPU's differ by
    # an ulp of the angle
    close(got[0], want[0], None if dtype != "float32" else 2e-4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_norm_rope_cache(nv, rng, dtype):
    t, hd, d, s = 50, 8, 128, 80
    x = rng.standard_normal((t, hd, d)).astype(np_dtype(dtype))
    w = rng.standard_normal(d).astype(np_dtype(dtype))
    cache = rng.standard_normal((s, hd, d)).astype(np_dtype(dtype))
    pos = rng.integers(0, 100, t).astype(np.int32)
    cpos = rng.permutation(s)[:t]
    cpos = np.where(rng.random(t) < 0.2, -1, cpos).astype(np.int64 if dtype != "float16"
                                                          else np.int32)

    def make():
        a = nr_make(nv, x, w, d, False, None, pos, cache, cpos, intermediate=True)
        held = nv.array(cache)
        b = [nv.own(lib.nv_fast_norm_rope(nv.array(x), nv.array(w), 1e-6, d, False, 10000.0,
                                          0.75, nv.array(pos), None, held, nv.array(cpos)))]
        return a + b + [held]

    got, want = both_devices(nv, make)
    close(got[0], want[0])
    close(got[1], want[1])
    untouched = [r for r in range(s) if r not in cpos]
    np.testing.assert_array_equal(got[0][untouched], cache[untouched])
    np.testing.assert_array_equal(got[2], cache)  # the held cache keeps its values


def test_norm_rope_extremes(nv, rng):
    """No tokens, an empty cache with padding only, and a cache position past the cache failing
    with the CPU's message."""
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    pos = np.array([3, 9], np.int32)
    for args in [(np.zeros((0, 3, 64), np.float32), np.zeros(0, np.int32), None, None),
                 (x, pos, np.zeros((0, 3, 64), np.float32), np.array([-1, -1], np.int32))]:
        got, want = both_devices(nv, lambda: nr_make(nv, args[0], None, 64, False, None, args[1],
                                                     args[2], args[3]))
        assert got[0].shape == want[0].shape
    for where in ["cpu", "gpu"]:
        with On(where):
            h = nr_make(nv, x, None, 64, False, None, pos, np.zeros((4, 3, 64), np.float32),
                        np.array([1, 4], np.int32))[0]
            assert lib.nv_eval1(h) != 0
            assert ("norm_rope: index 4 is out of range for an axis of size 4"
                    in lib.nv_last_error().decode()), where


# ---- gated_delta_slots ----

def delta_make(nv, args, slots, scale, pool_h=None, layout="contiguous"):
    out = (P * 2)()
    q, k, v, g, beta, pool = args
    pv = pool_h if pool_h is not None else nv.view(pool, layout)
    lib.nv_fast_gated_delta_slots(nv.view(q, layout), nv.view(k, layout), nv.view(v, layout),
                                  nv.array(g), nv.array(beta), pv, nv.array(slots), scale, out)
    return [nv.own(out[0]), nv.own(out[1])]


def delta_inputs(rng, n, t, hk, hv, dk, dv, s, dt, sdt):
    q = rng.standard_normal((n, t, hk, dk))
    k = rng.standard_normal((n, t, hk, dk))
    k /= np.sqrt((k * k).sum(-1, keepdims=True)) + 1e-9
    v = rng.standard_normal((n, t, hv, dv))
    g = -rng.uniform(0.01, 0.5, (n, t, hv))
    beta = rng.uniform(0.1, 0.9, (n, t, hv))
    pool = rng.standard_normal((s, hv, dk, dv)) * 0.5
    f = lambda a, d: a.astype(np_dtype(d))  # noqa: E731
    return [f(q, dt), f(k, dt), f(v, dt), f(g, dt), f(beta, dt), f(pool, sdt)]


DELTA_CASES = [(dt, sdt, dims, lay)
               for dt in FLOATS for sdt in FLOATS
               for dims in [(32, 1, 4, 8, 128, 128), (5, 3, 2, 4, 64, 70), (3, 1, 1, 1, 1, 1),
                            (2, 2, 1, 2, 256, 33), (4, 1, 2, 2, 80, 96), (1, 2, 1, 1, 1100, 5),
                            (7, 1, 3, 3, 33, 257)]
               for lay in ["contiguous", "transposed"]]


@pytest.mark.parametrize("dtype,sdtype,dims,layout", sample(DELTA_CASES, 50, salt=802))
def test_gated_delta_slots(nv, rng, dtype, sdtype, dims, layout):
    n, t, hk, hv, dk, dv = dims
    s = n + 5
    args = delta_inputs(rng, n, t, hk, hv, dk, dv, s, dtype, sdtype)
    slots = rng.permutation(s)[:n]
    slots = np.where(rng.random(n) < 0.2, -1, slots).astype(np.int64 if n % 2 else np.int32)
    got, want = both_devices(nv, lambda: delta_make(nv, args, slots, dk ** -0.5, layout=layout))
    close(got[0], want[0], 4 * TOL[dtype] if dk > 64 else None)
    close(got[1], want[1], 4 * max(TOL[dtype], TOL[sdtype]) if dk > 64 else None)
    unused = [r for r in range(s) if r not in slots]
    np.testing.assert_array_equal(got[1][unused], want[1][unused])


@pytest.mark.parametrize("sdtype", ["float32", "bfloat16"])
def test_gated_delta_slots_in_place_and_held(nv, rng, sdtype):
    args = delta_inputs(rng, 16, 1, 4, 8, 128, 128, 40, "bfloat16", sdtype)
    slots = rng.permutation(40)[:16].astype(np.int32)

    def make():
        pa = lib.nv_multiply_scalar(nv.view(args[5], "contiguous"), 1.0)  # donated
        a = delta_make(nv, args, slots, 0.088, pool_h=pa)
        lib.nv_release(pa)
        held = nv.array(args[5])
        b = delta_make(nv, args, slots, 0.088, pool_h=held)
        return a + b + [held]

    got, want = both_devices(nv, make)
    for i in range(4):
        close(got[i], want[i], 4 * TOL["bfloat16"])
    np.testing.assert_array_equal(got[4], args[5])  # the held pool keeps its values


def test_gated_delta_slots_extremes(nv, rng):
    """No sequences, no tokens, an empty pool with padding only, and a slot past the pool failing
    with the CPU's message."""
    for n, t, s, slots in [(0, 1, 3, np.zeros(0, np.int32)), (2, 0, 3, np.array([0, 2], np.int32)),
                           (2, 1, 0, np.array([-1, -1], np.int32))]:
        args = delta_inputs(rng, n, t, 1, 2, 4, 4, s, "float32", "float32")
        got, want = both_devices(nv, lambda: delta_make(nv, args, slots, 0.5))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    args = delta_inputs(rng, 2, 1, 1, 2, 4, 4, 3, "float32", "float32")
    for where in ["cpu", "gpu"]:
        with On(where):
            ho = delta_make(nv, args, np.array([1, 3], np.int32), 0.5)[0]
            assert lib.nv_eval1(ho) != 0
            assert ("gated_delta_slots: index 3 is out of range for an axis of size 3"
                    in lib.nv_last_error().decode()), where


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_norm_rope_misaligned_weight(nv, rng, dtype):
    """A weight viewed one element into its buffer (row-contiguous, not 16-byte aligned): the
    vector kernel's rows take the any-row path."""
    from nvc import ints
    x = rng.standard_normal((20, 4, 128)).astype(np_dtype(dtype))
    big = rng.standard_normal(129).astype(np_dtype(dtype))
    pos = rng.integers(0, 50, 20).astype(np.int32)

    def make():
        start, n = ints([1])
        stop, _ = ints([129])
        w = nv.own(lib.nv_slice(nv.array(big), start, stop, None, n))
        return [nv.own(lib.nv_fast_norm_rope(nv.array(x), w, 1e-6, 128, False, 10000.0, 1.0,
                                             nv.array(pos), None, None, None))]

    got, want = both_devices(nv, make)
    close(got[0], want[0])
