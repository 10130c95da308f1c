"""The CUDA backend's fast norms and rope (rms_norm, layer_norm, rope) on the GPU against
nuvec's CPU results over the cases the kernels switch on: every float dtype; row lengths from 1
to 65544 (a warp per row with 8 rows a block, up to 1024 threads a row with 1, 2, 4 or 8
16-byte vectors each held in registers, longer rows and lengths that are not a whole number of
vectors read from memory again); data whose first element is not 16-byte aligned; more than
65535 rows; weight and bias absent or given; transposed and strided inputs; rope's head dims
64/80/96/128/256, partial dims, traditional pairs, per-batch offsets, freqs instead of base and
the inverse rotation its vjp takes; NaN and inf; empty arrays.

Both backends accumulate in float32 (float64 for float64) but in different orders, and the GPU
may fuse multiply-adds, so values compare within a tolerance of the output dtype; NaN and inf
positions exactly. Every op is built with the GPU as the default device (skipped where no GPU
is usable) and must run there (no CPU fallback); the references are built with the CPU as the
default device. `NUVEC_TEST_FULL=1` runs every case."""
import ctypes as C
import math
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import gpu_and_cpu, needs_gpu, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import FLOATS, Session, ints, lib, np_dtype, nv_name, ref64, sig  # noqa: E402

P = C.c_void_p
IP = C.POINTER(C.c_int)
sig("nv_fast_rms_norm", P, P, P, C.c_double)
sig("nv_fast_layer_norm", P, P, P, P, C.c_double)
sig("nv_fast_rope", P, P, C.c_int, C.c_bool, C.c_double, C.c_double, P, P)
sig("nv_reshape", P, P, IP, C.c_int)
CLOSURE_FN = C.CFUNCTYPE(C.c_int, P, P, P)
sig("nv_closure_new", P, CLOSURE_FN, P, P)
sig("nv_closure_release", None, P)
sig("nv_vjp", C.c_int, P, P, P, P, P)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_push", C.c_int, P, P)
sig("nv_vec_get", P, P, C.c_size_t)

pytestmark = needs_gpu

TOL = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 1e-5, "float64": 1e-12}
LENGTHS = [1, 7, 64, 80, 96, 128, 256, 1000, 4096, 4097, 8192, 16384, 20000, 65544]


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def rand(rng, shape, dtype):
    x = (rng.standard_normal(shape) * 2).astype(np_dtype(dtype))
    if x.size and not np.any(x):
        x.reshape(-1)[0] = 1
    return x


def misaligned(nv, x):
    """x as a view starting one element into a buffer (its data not 16-byte aligned)."""
    flat = np.concatenate([np.zeros(1, x.dtype), x.reshape(-1)])
    base = nv.array(flat)
    start, n = ints([1])
    stop, _ = ints([flat.size])
    step, _ = ints([1])
    s = nv.own(lib.nv_slice(base, start, stop, step, n))
    shape, nd = ints(x.shape)
    return nv.own(lib.nv_reshape(s, shape, nd))


def close(got, want, tol=None):
    assert got.dtype == want.dtype and got.shape == want.shape
    dt = nv_name(got.dtype)
    t = tol if tol is not None else TOL[dt]
    g, w = ref64(got), ref64(want)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    inf = np.isinf(w)
    np.testing.assert_array_equal(g[inf], w[inf])
    fin = np.isfinite(w)
    np.testing.assert_allclose(g[fin], w[fin], rtol=t, atol=t)


def layout_of(nv, x, layout):
    return misaligned(nv, x) if layout == "misaligned" else nv.view(x, layout)


NORM_CASES = [(op, dt, d, opt, lay) for op in ["rms", "layer"] for dt in FLOATS for d in LENGTHS
              for opt in ["none", "weight", "bias", "both"]
              for lay in ["contiguous", "misaligned", "transposed"]
              if not (op == "rms" and opt == "bias")]


@pytest.mark.parametrize("op,dtype,d,opt,layout", sample(NORM_CASES, 90, salt=601))
def test_norm_rows(nv, rng, op, dtype, d, opt, layout):
    rows = 3 if d > 10000 else 13
    x = rand(rng, (rows, d), dtype)
    w = rand(rng, (d,), dtype) if opt in ("weight", "both") else None
    b = rand(rng, (d,), dtype) if opt in ("bias", "both") else None

    def make():
        xa = layout_of(nv, x, layout)
        wa = nv.array(w) if w is not None else None
        if op == "rms":
            return nv.own(lib.nv_fast_rms_norm(xa, wa, 1e-5))
        return nv.own(lib.nv_fast_layer_norm(xa, wa, nv.array(b) if b is not None else None, 1e-5))

    got, want = gpu_and_cpu(nv, make)
    close(got, want)


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_bias_only_rows(nv, rng, dtype):
    """The bias is the kernel's fourth pointer whether or not a weight comes before it."""
    x = rand(rng, (9, 96), dtype)
    b = rand(rng, (96,), dtype)
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_layer_norm(nv.array(x), None,
                                                                      nv.array(b), 1e-5)))
    close(got, want)


@pytest.mark.parametrize("op", ["rms", "layer"])
def test_norm_many_rows(nv, rng, op):
    """More rows than one grid dimension of 65535 blocks would hold at one row a block."""
    x = rand(rng, (70001, 24), "bfloat16")
    w = rand(rng, (24,), "bfloat16")
    fn = lib.nv_fast_rms_norm if op == "rms" else (
        lambda x, w, e: lib.nv_fast_layer_norm(x, w, None, e))
    got, want = gpu_and_cpu(nv, lambda: nv.own(fn(nv.array(x), nv.array(w), 1e-6)))
    close(got, want)


def test_norm_edges_and_empty(nv):
    x = np.array([[1.0, np.nan, 2.0, 0.5], [np.inf, 1.0, 1.0, 1.0], [0.0] * 4, [3.0, -4.0, 0, 1]],
                 dtype=np.float32)
    for fn in [lambda a: lib.nv_fast_rms_norm(a, None, 1e-5),
               lambda a: lib.nv_fast_layer_norm(a, None, None, 1e-5)]:
        got, want = gpu_and_cpu(nv, lambda: nv.own(fn(nv.array(x))))
        close(got, want)
        for shape in [(0, 8), (4, 0)]:
            e = np.zeros(shape, np.float32)
            got, want = gpu_and_cpu(nv, lambda: nv.own(fn(nv.array(e))))
            assert got.shape == want.shape == shape


def vjp_of(nv, fn, primals, cot, k):
    """Gradient k of fn(*primals) for the cotangent `cot` (arrays of this session)."""

    @CLOSURE_FN
    def body(payload, inputs, outputs):
        xs = [lib.nv_vec_get(inputs, i) for i in range(len(primals))]
        return lib.nv_vec_push(outputs, fn(*xs))

    f = lib.nv_closure_new(body, None, None)
    prim, cots, outs, vjps = (lib.nv_vec_new() for _ in range(4))
    try:
        for a in primals:
            lib.nv_vec_push(prim, a)
        lib.nv_vec_push(cots, cot)
        assert lib.nv_vjp(f, prim, cots, outs, vjps) == 0, lib.nv_last_error().decode()
        return nv.own(lib.nv_retain(lib.nv_vec_get(vjps, k)))
    finally:
        for v in (prim, cots, outs, vjps):
            lib.nv_vec_free(v)
        lib.nv_closure_release(f)


VJP_CASES = [(op, dt, d, k) for op in ["rms", "layer"] for dt in FLOATS
             for d in [1, 7, 128, 4097, 20000] for k in range(3) if not (op == "rms" and k == 2)]


@pytest.mark.parametrize("op,dtype,d,k", sample(VJP_CASES, 24, salt=603))
def test_norm_vjp_rows(nv, rng, op, dtype, d, k):
    """dx through the fused norm_vjp kernel, dw and db through the fused norm and sums."""
    x, w, b = rand(rng, (5, d), dtype), rand(rng, (d,), dtype), rand(rng, (d,), dtype)
    cot = rand(rng, (5, d), dtype)
    if op == "rms":
        fn, prims = (lambda x, w: lib.nv_fast_rms_norm(x, w, 1e-5)), (x, w)
    else:
        fn, prims = (lambda x, w, b: lib.nv_fast_layer_norm(x, w, b, 1e-5)), (x, w, b)
    got, want = gpu_and_cpu(nv, lambda: vjp_of(nv, fn, [nv.array(a) for a in prims],
                                               nv.array(cot), k))
    # dw and db sum over the rows: compare relative to the largest magnitude too.
    scale = float(np.abs(ref64(want)).max()) if want.size else 1.0
    close(got, want, tol=TOL[dtype] * (1 if k == 0 else 1 + scale))


ROPE_CASES = [(dt, hd, trad, opt) for dt in FLOATS for hd in [64, 80, 96, 128, 256, 10]
              for trad in [False, True]
              for opt in ["base", "freqs", "partial", "batch_offset", "strided"]]


@pytest.mark.parametrize("dtype,hd,trad,opt", sample(ROPE_CASES, 60, salt=602))
def test_rope_rows(nv, rng, dtype, hd, trad, opt):
    x = rand(rng, (2, 3, 9, hd), dtype)
    dims = hd // 4 * 2 if opt == "partial" else hd
    freqs = (rng.random(dims // 2) * 50 + 1).astype(np.float32) if opt == "freqs" else None
    offset = np.array([3, 4000], np.int32) if opt == "batch_offset" else np.array(7, np.int32)
    base = math.nan if freqs is not None else 10000.0

    def make():
        xa = nv.view(x, "strided") if opt == "strided" else nv.array(x)
        fa = nv.array(freqs) if freqs is not None else None
        return nv.own(lib.nv_fast_rope(xa, dims, trad, base, 0.5, nv.array(offset), fa))

    got, want = gpu_and_cpu(nv, make)
    # Angles up to ~2000 rad in float32: sin/cos of the same float argument, within a few ulps.
    close(got, want, tol={"float16": 4e-3, "bfloat16": 2e-2, "float32": 2e-5,
                          "float64": 1e-12}[dtype])


@pytest.mark.parametrize("shape", [(2, 6, 5, 64), (8, 32, 1, 128), (2, 2, 3, 5, 8), (1, 9, 33, 96),
                                   (3, 4097, 64)])
@pytest.mark.parametrize("trad", [False, True])
def test_rope_heads(nv, rng, shape, trad):
    """Heads sharing a position: chunks of them (all of them, one each for decode) rotate by
    one angle computation, four heads at a time and the rest one by one."""
    x = rand(rng, shape, "bfloat16")
    off = np.arange(1, shape[0] + 1, dtype=np.int32) * 5
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_rope(
        nv.array(x), shape[-1] - 2, trad, 10000.0, 1.0, nv.array(off), None)))
    close(got, want)


def test_rope_long_sequence_and_many_rows(nv, rng):
    x = rand(rng, (1, 4097, 128), "bfloat16")
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_rope(
        nv.array(x), 128, False, 10000.0, 1.0, nv.array(np.array(0, np.int32)), None)))
    close(got, want)
    y = rand(rng, (70000, 1, 1, 8), "float32")
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_rope(
        nv.array(y), 8, True, 10000.0, 1.0, nv.array(np.arange(70000, dtype=np.int32)), None)))
    close(got, want, tol=1e-4)


def test_rope_edges_and_empty(nv):
    x = np.array([[[np.nan, 1.0, 2.0, 3.0, np.inf, 5.0]]], np.float32)
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_rope(
        nv.array(x), 4, False, 10000.0, 1.0, nv.array(np.array(2, np.int32)), None)))
    close(got, want)
    e = np.zeros((2, 0, 8), np.float32)
    got, want = gpu_and_cpu(nv, lambda: nv.own(lib.nv_fast_rope(
        nv.array(e), 8, False, 10000.0, 1.0, nv.array(np.array(0, np.int32)), None)))
    assert got.shape == want.shape == (2, 0, 8)
