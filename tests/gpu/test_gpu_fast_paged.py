"""The CUDA backend's paged_attention on the GPU against nuvec's CPU results: decode through
SDPA's vectorized decode kernel in its paged form (one token a sequence, at most 4 query heads
per key/value head, float16/bfloat16/float32, head sizes 64/80/96/128/256, its key splits over
contexts up to 4097, block sizes 16/32 and odd ones, padding sequences of length 0, a pool whose
view is not 16-byte aligned, which takes the general kernel) and the general kernel (chunked
prefill with chunks longer than their context, groups of more than 4 heads, float64, odd head
sizes, Dv != D, its splits); table entries past a context hold out-of-range garbage (never
read); a bad block id or context length fails the node with the CPU's message on both paths.
Values compare within a tolerance of the output dtype (the GPU accumulates in another order),
NaN and exact zeros (rows without keys) exactly. Every op is built with the GPU as the default
device (skipped where no GPU is usable) and must run there (no CPU fallback). `NUVEC_TEST_FULL=1`
runs every case."""
import ctypes as C
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import On, gpu_and_cpu, needs_gpu, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import FLOATS, Session, ints, lib, np_dtype, ref64, sig  # noqa: E402

P = C.c_void_p
sig("nv_fast_paged_attention", P, P, P, P, P, P, C.c_float)
sig("nv_gpu_fallback_count", C.c_uint64)
sig("nv_reshape", P, P, C.POINTER(C.c_int), C.c_int)

pytestmark = needs_gpu

TOL = {"float16": 6e-3, "bfloat16": 4e-2, "float32": 3e-5, "float64": 1e-12}


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np_dtype(dtype))


def case(rng, dtype, S, c, Hq, Hkv, D, Dv, BS, lens):
    """q [S c, Hq, D], pools of distinct shuffled blocks per sequence (and 3 spare), tables
    whose entries past a context are out of range."""
    M = max([-(-L // BS) for L in lens] + [1]) + 1
    NB = sum(-(-L // BS) for L in lens) + 3
    perm = rng.permutation(NB).astype(np.int32)
    tables = np.full((S, M), NB + 7, np.int32)
    at = 0
    for s, L in enumerate(lens):
        nb = -(-L // BS)
        tables[s, :nb] = perm[at:at + nb]
        at += nb
    return (rand(rng, (S * c, Hq, D), dtype), rand(rng, (NB, BS, Hkv, D), dtype),
            rand(rng, (NB, BS, Hkv, Dv), dtype), tables, np.array(lens, np.int32))


def offset_view(nv, x):
    """x as a row-contiguous view starting one element into a flat buffer (not 16-byte
    aligned)."""
    flat = np.concatenate([np.zeros(1, x.dtype), x.reshape(-1)])
    base = nv.array(flat)
    start, _ = ints([1])
    stop, _ = ints([flat.size])
    step, _ = ints([1])
    part = nv.own(lib.nv_slice(base, start, stop, step, 1))
    shape, nd = ints(x.shape)
    return nv.own(lib.nv_reshape(part, shape, nd))


def run_both(nv, q, kp, vp, tables, lens, scale, unaligned=False):
    def make():
        k = offset_view(nv, kp) if unaligned else nv.array(kp)
        return nv.own(lib.nv_fast_paged_attention(nv.array(q), k, nv.array(vp),
                                                  nv.array(tables), nv.array(lens), scale))
    return gpu_and_cpu(nv, make, "paged_attention")


def close(got, want, dtype, vmax):
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = ref64(got), ref64(want)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    np.testing.assert_array_equal(g == 0, w == 0)
    ok = ~np.isnan(w)
    err = np.abs(g[ok] - w[ok])
    tol = TOL[dtype] * max(vmax, 1.0)
    assert err.size == 0 or err.max() <= tol, f"max error {err.max()} > {tol}"


# (S, Hq, Hkv, D, BS, context lengths): one token a sequence, G <= 4
DECODE = [
    (8, 8, 8, 128, 16, [4096] * 2 + [1, 17, 300, 0, 4097 - 16, 1000]),
    (3, 8, 2, 64, 16, [37, 1, 300]),
    (2, 12, 4, 80, 32, [129, 64]),
    (2, 6, 2, 96, 7, [50, 13]),
    (1, 4, 1, 128, 16, [4097]),
    (2, 2, 2, 256, 32, [70, 0]),
    (1, 2, 1, 64, 5, [4097]),
]
DECODE_CASES = [(s, dt) for s in DECODE for dt in ["float16", "bfloat16", "float32"]]


@pytest.mark.parametrize("shape,dtype", sample(DECODE_CASES, 21, salt=1801))
def test_decode(nv, rng, shape, dtype):
    S, Hq, Hkv, D, BS, lens = shape
    q, kp, vp, tables, cl = case(rng, dtype, S, 1, Hq, Hkv, D, D, BS, lens)
    got, want = run_both(nv, q, kp, vp, tables, cl, D ** -0.5)
    close(got, want, dtype, np.abs(ref64(vp)).max())


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_decode_unaligned_pool(nv, rng, dtype):
    q, kp, vp, tables, cl = case(rng, dtype, 2, 1, 4, 2, 64, 64, 16, [300, 41])
    got, want = run_both(nv, q, kp, vp, tables, cl, 0.125, unaligned=True)
    close(got, want, dtype, np.abs(ref64(vp)).max())


# (S, c, Hq, Hkv, D, Dv, BS, context lengths): the general kernel
GENERAL = [
    (2, 4, 4, 2, 64, 64, 16, [9, 2]),        # chunks longer than their context
    (1, 17, 8, 2, 128, 128, 32, [1000]),
    (2, 1, 16, 2, 128, 128, 16, [4097, 5]),  # decode with G = 8 (split)
    (1, 1, 8, 1, 64, 64, 5, [2000]),         # MQA decode, odd block size
    (2, 3, 3, 3, 24, 40, 3, [11, 5]),        # odd head sizes, Dv != D
    (1, 64, 4, 4, 96, 96, 16, [200]),
    (3, 2, 2, 1, 256, 256, 32, [0, 70, 1]),
    (1, 1, 2, 2, 36, 36, 16, [100]),         # decode, a head size of no 16-byte rows
]
GENERAL_CASES = [(s, dt) for s in GENERAL for dt in FLOATS]


@pytest.mark.parametrize("shape,dtype", sample(GENERAL_CASES, 24, salt=1802))
def test_general(nv, rng, shape, dtype):
    S, c, Hq, Hkv, D, Dv, BS, lens = shape
    q, kp, vp, tables, cl = case(rng, dtype, S, c, Hq, Hkv, D, Dv, BS, lens)
    got, want = run_both(nv, q, kp, vp, tables, cl, D ** -0.5)
    close(got, want, dtype, np.abs(ref64(vp)).max())


def test_decode_float64(nv, rng):
    """float64 decode takes the general kernel (computing in double)."""
    q, kp, vp, tables, cl = case(rng, "float64", 2, 1, 4, 2, 64, 64, 16, [300, 41])
    got, want = run_both(nv, q, kp, vp, tables, cl, 0.125)
    close(got, want, "float64", np.abs(vp).max())


def test_nan_and_empty(nv, rng):
    q, kp, vp, tables, cl = case(rng, "float32", 2, 1, 2, 2, 64, 64, 16, [40, 0])
    kp[tables[0, 1], 3, 0, 5] = np.nan  # sequence 0, head 0
    got, want = run_both(nv, q, kp, vp, tables, cl, 0.125)
    assert np.isnan(got[0, 0]).all() and not np.isnan(got[0, 1]).any()
    assert (got[1] == 0).all()
    close(got, want, "float32", 4.0)


@pytest.mark.parametrize("c,G", [(1, 1), (1, 8), (3, 1)])  # the decode and the general kernel
def test_bad_tables_fail(nv, rng, c, G):
    q, kp, vp, tables, cl = case(rng, "float32", 2, c, 2 * G, 2, 64, 64, 16, [40, 20])
    NB, M = kp.shape[0], tables.shape[1]
    bad = tables.copy()
    bad[1, 1] = NB
    long = np.array([40, M * 16 + 1], np.int32)
    for t, l, msg in [(bad, cl, f"index {NB} is out of range for an axis of size {NB}"),
                      (tables, long,
                       f"index {M * 16 + 1} is out of range for an axis of size {M * 16 + 1}")]:
        for where in ["cpu", "gpu"]:
            with On(where):
                h = nv.own(lib.nv_fast_paged_attention(nv.array(q), nv.array(kp), nv.array(vp),
                                                       nv.array(t), nv.array(l), 0.125))
                assert lib.nv_eval1(h) != 0
                assert "paged_attention: " + msg in lib.nv_last_error().decode(), where
