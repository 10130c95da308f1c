"""The CUDA backend's scaled_dot_product_attention on the GPU against nuvec's CPU results: the
tensor-core kernel (float16/bfloat16, head sizes 64/80/96/128/256, more than 16 queries), the
SIMT kernel (float32, other head sizes, short query blocks) and its split-KV decode path with
the combine pass (few rows, long keys), over odd query/key lengths up to 4097, every mask kind
(causal with Lq < Lk and Lq > Lk, additive, bool, broadcast), grouped-query heads, sinks,
strided inputs (copied contiguous first), inputs not 16-byte aligned (the kernels' scalar
loads), the vectorized decode kernel (head sizes 16..256, 1 to 4 rows, one split or several),
Lk = 0, NaN and fully masked rows.

float32 results agree with the CPU within float32 accumulation error; float16/bfloat16 within a
few units of the output dtype (the tensor-core kernel rounds the softmax weights to the input
dtype before p·v, as flash attention does). Every op is built with the GPU as the default
device (skipped where no GPU is usable) and must run there (no CPU fallback); the references
are built with the CPU as the default device. `NUVEC_TEST_FULL=1` runs every case."""
import ctypes as C
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import gpu_and_cpu, needs_gpu, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import Session, ints, lib, np_dtype, nv_name, ref64, sig  # noqa: E402

P = C.c_void_p
sig("nv_fast_scaled_dot_product_attention", P, P, P, P, C.c_float, C.c_char_p, P, P)
sig("nv_reshape", P, P, C.POINTER(C.c_int), C.c_int)

pytestmark = needs_gpu

TOL = {"float16": 6e-3, "bfloat16": 4e-2, "float32": 3e-5}


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def rand(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np_dtype(dtype))


def unaligned(nv, x):
    """x as a view whose first element sits 1 element past an aligned start (a slice of a flat
    buffer, reshaped): the kernels' scalar-load paths."""
    flat = np.concatenate([np.zeros(1, x.dtype), x.ravel()])
    base = nv.array(flat)
    start, n = ints([1])
    stop, _ = ints([flat.size])
    sl = nv.own(lib.nv_slice(base, start, stop, None, n))
    shape, nd = ints(x.shape)
    return nv.own(lib.nv_reshape(sl, shape, nd))


def attend(nv, q, k, v, scale, mode, mask, sinks, layout):
    def put(x):
        if layout == "unaligned":
            return unaligned(nv, x)
        return nv.view(x, layout)
    hm = nv.array(mask) if mask is not None else None
    hs = nv.array(sinks) if sinks is not None else None
    return nv.own(lib.nv_fast_scaled_dot_product_attention(
        put(q), put(k), put(v), scale, mode.encode() if mode else None, hm, hs))


def close(got, want, dtype, vmax):
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = ref64(got), ref64(want)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    ok = ~np.isnan(w)
    err = np.abs(g[ok] - w[ok])
    tol = TOL[dtype] * max(vmax, 1.0)
    assert err.size == 0 or err.max() <= tol, f"max error {err.max()} > {tol}"


def mask_of(rng, kind, B, Hq, Lq, Lk, dtype):
    if kind == "add":
        return rand(rng, (B, Hq, Lq, Lk), dtype)
    if kind == "add_broadcast":
        return rand(rng, (Lq, Lk), dtype)
    if kind == "bool":
        return rng.random((B, Hq, Lq, Lk)) < 0.8
    if kind == "bool_broadcast":
        return rng.random((B, 1, 1, Lk)) < 0.8
    return None


def run_case(nv, rng, shape, dtype, mask, sinks, layout="contiguous", scale=None):
    B, Hq, Hkv, Lq, Lk, D, Dv = shape
    q, k, v = rand(rng, (B, Hq, Lq, D), dtype), rand(rng, (B, Hkv, Lk, D), dtype), \
        rand(rng, (B, Hkv, Lk, Dv), dtype)
    mode = "causal" if mask == "causal" else ("array" if mask != "none" else None)
    m = mask_of(rng, mask, B, Hq, Lq, Lk, dtype)
    s = rand(rng, (Hq,), dtype) if sinks else None
    scale = float(1 / np.sqrt(D)) if scale is None else scale
    got, want = gpu_and_cpu(nv, lambda: attend(nv, q, k, v, scale, mode, m, s, layout))
    close(got, want, dtype, float(np.abs(ref64(v)).max(initial=0)))


# (B, Hq, Hkv, Lq, Lk, D, Dv)
PREFILL = [
    (1, 2, 2, 17, 17, 64, 64),
    (2, 4, 2, 100, 131, 80, 80),
    (1, 4, 1, 65, 200, 96, 96),
    (1, 2, 2, 129, 129, 128, 128),
    (1, 2, 1, 70, 50, 256, 256),
    (1, 2, 2, 600, 601, 128, 128),
]
SIMT = [
    (1, 1, 1, 1, 1, 8, 8),
    (2, 3, 3, 17, 29, 24, 40),
    (1, 8, 2, 5, 77, 64, 64),
    (1, 2, 2, 33, 70, 128, 128),
]
DECODE = [
    (2, 8, 2, 1, 1000, 128, 128),
    (1, 4, 4, 1, 4097, 64, 64),
    (1, 32, 8, 4, 3001, 128, 128),
    (1, 2, 1, 8, 777, 256, 256),
]
MASKS = ["none", "causal", "add", "add_broadcast", "bool", "bool_broadcast"]

CASES = ([(s, dt, mk, sk) for s in PREFILL for dt in ("float16", "bfloat16") for mk in MASKS
          for sk in (False, True)] +
         [(s, dt, mk, sk) for s in PREFILL[:3] + SIMT + DECODE
          for dt in ("float32", "float16", "bfloat16") for mk in MASKS for sk in (False, True)])


@pytest.mark.parametrize("shape,dtype,mask,sinks", sample(CASES, 50))
def test_against_cpu(nv, rng, shape, dtype, mask, sinks):
    run_case(nv, rng, shape, dtype, mask, sinks)


# The vectorized decode kernel (16-byte loads; aligned, D and Dv multiples of 8 float16/
# bfloat16 or 4 float32 elements): every lane-group width (4/8/16/32 lanes per key), two chunks
# per lane (float32 rows over 128), 1, 2, 3 and 4 rows (G x Lq), D != Dv, D not a power of two,
# one key, one split (Lk < 512: the sinks join in the kernel) and several (the combine), causal
# rows at different positions (Lq = 3).
DECODE_VEC = [
    (2, 4, 4, 1, 700, 64, 64),
    (1, 8, 2, 1, 1500, 128, 128),
    (1, 6, 3, 1, 513, 256, 256),
    (2, 3, 1, 1, 300, 32, 32),
    (1, 2, 2, 3, 900, 128, 128),
    (1, 2, 1, 1, 1031, 64, 128),
    (1, 4, 4, 1, 777, 80, 80),
    (1, 2, 2, 1, 1, 128, 128),
    (8, 4, 4, 1, 2000, 128, 128),
    (1, 2, 2, 1, 40, 16, 16),
]
VEC_CASES = [(s, dt, mk, sk) for s in DECODE_VEC for dt in ("float32", "float16", "bfloat16")
             for mk in MASKS for sk in (False, True)]


@pytest.mark.parametrize("shape,dtype,mask,sinks", sample(VEC_CASES, 60, salt=18))
def test_decode_vec(nv, rng, shape, dtype, mask, sinks):
    run_case(nv, rng, shape, dtype, mask, sinks)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("D", [64, 128, 256])
def test_decode_vec_heads(nv, rng, dtype, D):
    """Every head size the issue names, MHA and GQA, with several splits."""
    run_case(nv, rng, (2, 4, 4, 1, 2500, D, D), dtype, "none", False)
    run_case(nv, rng, (1, 8, 2, 1, 3000, D, D), dtype, "causal", True)


def test_decode_vec_nan(nv, rng):
    """A NaN in one head's query makes that head's output NaN, the others' finite."""
    for dt in ("bfloat16", "float32"):
        q, k, v = rand(rng, (1, 4, 1, 128), dt), rand(rng, (1, 2, 1200, 128), dt), \
            rand(rng, (1, 2, 1200, 128), dt)
        q[0, 1, 0, 7] = np.nan
        got, want = gpu_and_cpu(nv, lambda: attend(nv, q, k, v, 0.09, None, None, None,
                                                  "contiguous"))
        close(got, want, dt, float(np.abs(ref64(v)).max()))
        assert np.isnan(ref64(got)[0, 1]).all() and not np.isnan(ref64(got)[0, [0, 2, 3]]).any()


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("layout", ["transposed", "strided", "unaligned"])
def test_sdpa_layouts(nv, rng, dtype, layout):
    run_case(nv, rng, (1, 4, 2, 40, 90, 64, 64), dtype, "causal", False, layout)
    run_case(nv, rng, (1, 4, 2, 1, 300, 64, 64), dtype, "bool", True, layout)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_long_causal_prefill(nv, rng, dtype):
    """4097 queries and keys: tiles past the last full block, causal skipping."""
    run_case(nv, rng, (1, 2, 1, 4097, 4097, 128, 128), dtype, "causal", False)


@pytest.mark.parametrize("D", [64, 80, 96, 128, 256])
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_mma_head_sizes(nv, rng, D, mask):
    """Every head size of the tensor-core kernel (128 queries a block for D <= 128, 64 for 256)
    with grouped heads, a block past the last query and a partial last key tile."""
    dtype = "bfloat16" if D in (64, 96, 256) else "float16"
    run_case(nv, rng, (1, 4, 2, 150, 187, D, D), dtype, mask, False)


@pytest.mark.parametrize("scale", [-0.3, 0.0, 2.0])
@pytest.mark.parametrize("mask", ["none", "causal"])
def test_mma_scales(nv, rng, scale, mask):
    """The tensor-core kernel's unmasked key steps fold a positive scale into the exponent and
    multiply the scores first otherwise; 2.0 makes the rows' maxima move by large steps."""
    run_case(nv, rng, (1, 2, 1, 200, 333, 64, 64), "bfloat16", mask, True, scale=scale)
    run_case(nv, rng, (1, 2, 2, 130, 260, 128, 128), "float16", mask, False, scale=scale)


@pytest.mark.parametrize("Lq,Lk", [(3, 500), (500, 3), (100, 40), (1, 1)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_causal_alignment(nv, rng, Lq, Lk, dtype):
    """Queries are the last Lq positions; with Lq > Lk the first rows see no key (they average
    v, on every kernel)."""
    run_case(nv, rng, (1, 2, 2, Lq, Lk, 64, 64), dtype, "causal", False)


def test_sdpa_edges(nv, rng):
    q, k, v = rand(rng, (1, 2, 20, 64), "float16"), rand(rng, (1, 2, 30, 64), "float16"), \
        rand(rng, (1, 2, 30, 64), "float16")
    q[0, 1, 3, 5] = np.nan
    m = np.ones((20, 30), bool)
    m[7] = False  # a fully masked row averages v
    for dt in ("float16", "float32"):
        c = lambda x: x.astype(np_dtype(dt))
        got, want = gpu_and_cpu(nv, lambda: attend(nv, c(q), c(k), c(v), 0.125, "array", m,
                                                  None, "contiguous"))
        close(got, want, dt, 5.0)
        assert np.isnan(ref64(got)[0, 1, 3]).all()
    empty = np.zeros((1, 2, 0, 64), np.float16)
    got, want = gpu_and_cpu(nv, lambda: attend(nv, q, empty, empty, 0.1, None, None, None,
                                              "contiguous"))
    assert got.shape == (1, 2, 20, 64) and (ref64(got) == 0).all()
    for lq in (1, 20):  # head size 0 (uniform weights) on the decode and SIMT kernels
        z = np.zeros((1, 2, lq, 0), np.float32)
        got, want = gpu_and_cpu(nv, lambda: attend(nv, z, np.zeros((1, 2, 30, 0), np.float32),
                                                  c(v), 0.1, None, None, None, "contiguous"))
        close(got, want, "float32", 5.0)
