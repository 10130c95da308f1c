"""The CUDA backend's quantize family on the GPU against nuvec's CPU results: quantize and
dequantize in every mode, bits and group size (bit for bit: both run src/ops/quantize_codec.h's
arithmetic; NaNs of any payload equal), over float16, bfloat16 and float32 weights with edge
values; quantized_matmul through the decode gemvs (M <= 8, transposed: the tensor-core one of
src/cuda/quantize_gemv.cu for 4-bit affine float16/bfloat16 with K a multiple of 128, its
split-K one for one row of x (the default; the streaming one in a child process with
NUVEC_QMV_V2=0), its streaming one for K a multiple of 32, its element-by-element loop for
unaligned views,
quantize.cu's for other K), the tiled kernel
(up to 32 rows, not transposed, batched w) and the dense path of more rows (dequantize into the
product's dtype, then matmul), within a float32 accumulation tolerance. Every op is
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
from gpucommon import On, gpu_and_cpu, needs_gpu, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import BF16, CODE, IP, NuvecError, Session, ints, lib, np_dtype, ref64, sig  # noqa: E402

P = C.c_void_p
I = C.c_int
sig("nv_quantize", I, P, I, I, C.c_char_p, P)
sig("nv_dequantize", P, P, P, P, I, I, C.c_char_p, I)
sig("nv_quantized_matmul", P, P, P, P, P, C.c_bool, I, I, C.c_char_p)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_size", C.c_size_t, P)
sig("nv_vec_get", P, P, C.c_size_t)

pytestmark = needs_gpu

MODES = [("affine", g, b) for b in (1, 2, 3, 4, 5, 6, 8) for g in (32, 64, 128)] + \
    [("mxfp4", 32, 4), ("mxfp8", 32, 8), ("nvfp4", 16, 4)]
DTYPES = ["float16", "bfloat16", "float32"]


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def weights(rng, shape, dtype):
    x = rng.standard_normal(shape) * np.exp(rng.uniform(-5, 5, shape[:-1] + (1,)))
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, max(1, flat.size // 40))] = 0.0
    flat[rng.integers(0, flat.size, max(1, flat.size // 60))] = -0.0
    return x.astype(np.float32).astype(np_dtype(dtype))


def quantize_here(nv, w, mode, gs, bits):
    v = lib.nv_vec_new()
    try:
        st = lib.nv_quantize(nv.array(w), gs, bits, mode.encode(), v)
        if st != 0:
            raise NuvecError(st, lib.nv_last_error().decode())
        hs = [lib.nv_vec_get(v, i) for i in range(lib.nv_vec_size(v))]
        before = lib.nv_gpu_fallback_count()
        out = [nv.read(h) for h in hs]
        return out, lib.nv_gpu_fallback_count() - before
    finally:
        lib.nv_vec_free(v)


def same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f" or got.dtype == BF16:
        g, w = ref64(got), ref64(want)
        nan = np.isnan(g) & np.isnan(w)
        np.testing.assert_array_equal(np.where(nan, 0, g), np.where(nan, 0, w))
        np.testing.assert_array_equal(np.signbit(g[~nan]), np.signbit(w[~nan]))
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode,gs,bits", sample(MODES, 12))
@pytest.mark.parametrize("dtype", DTYPES)
def test_quantize_and_dequantize_bits(nv, rng, mode, gs, bits, dtype):
    w = weights(rng, (37, 4 * gs), dtype)
    with On("cpu"):
        want, _ = quantize_here(nv, w, mode, gs, bits)
    with On("gpu"):
        got, fell = quantize_here(nv, w, mode, gs, bits)
    assert fell == 0, "quantize fell back to the CPU"
    for g, wv in zip(got, want):
        same_bits(g, wv)
    biases = want[2] if mode == "affine" else None
    for out in ([None] if mode == "affine" else [None, "float32", "float16", "float64"]):
        code = len(CODE) if out is None else CODE[out]

        def make():
            return nv.own(lib.nv_dequantize(nv.array(want[0]), nv.array(want[1]),
                                            nv.array(biases) if biases is not None else None,
                                            gs, bits, mode.encode(), code))
        dg, dw = gpu_and_cpu(nv, make, "dequantize")
        same_bits(dg, dw)


def test_dequantize_every_fp_scale_code(nv, rng):
    """Every E8M0 / E4M3 scale code (NaN codes included) against the CPU."""
    for mode, gs, bits in MODES[-3:]:
        codes = rng.integers(0, 2**32, (256, gs * bits // 32), dtype=np.uint64).astype(np.uint32)
        scales = np.arange(256, dtype=np.uint8).reshape(256, 1)

        def make():
            return nv.own(lib.nv_dequantize(nv.array(codes), nv.array(scales), None, gs, bits,
                                            mode.encode(), CODE["float32"]))
        with On("cpu"):
            dw = nv.read(make())
        with On("gpu"):
            dg = nv.read(make())
        same_bits(dg, dw)


QMM = [
    # (x shape, N, K, transpose, w batch): decode shapes (gemv), the tiled kernel (9 to 32 rows
    # of x per matrix, or w not transposed), and more than 32 rows (dequantize + matmul).
    ((1, 512), 40, 512, True, ()),
    ((8, 256), 33, 256, True, ()),
    ((3, 128), 7, 128, True, ()),
    ((2, 4, 256), 19, 256, True, ()),
    ((1, 96), 5, 96, True, ()),  # 96 * 4 / 32 = 12 words: rows not 16-byte aligned
    ((9, 256), 70, 256, True, ()),
    ((130, 128), 65, 128, True, ()),
    ((5, 128), 64, 128, False, ()),
    ((70, 256), 128, 256, False, ()),
    ((2, 3, 128), 16, 128, True, (2,)),
    ((2, 67, 64), 64, 64, False, (2,)),
    ((32, 128), 48, 128, True, ()),
    ((2, 20, 64), 64, 64, False, (2,)),
]


QMM_MODES = [("affine", 64, 4), ("affine", 32, 3), ("affine", 32, 8), ("affine", 32, 2),
             ("affine", 32, 1), ("affine", 32, 6), ("mxfp4", 32, 4), ("mxfp8", 32, 8),
             ("nvfp4", 16, 4)]
QMM_CASES = [c + m + (d,) for c in QMM for m in QMM_MODES for d in ("float32", "bfloat16")]


@pytest.mark.parametrize("xshape,N,K,transpose,wb,mode,gs,bits,dtype", sample(QMM_CASES, 60, 1))
def test_quantized_matmul(nv, rng, xshape, N, K, transpose, wb, mode, gs, bits, dtype):
    if K % gs or (not transpose and N % gs):
        pytest.skip("not a multiple of the group size")
    wshape = wb + ((N, K) if transpose else (K, N))
    w = rng.standard_normal(wshape).astype(np.float32).astype(np_dtype(dtype))
    with On("cpu"):
        parts, _ = quantize_here(nv, w, mode, gs, bits)
    x = rng.standard_normal(xshape).astype(np.float32).astype(np_dtype(dtype))
    b = parts[2] if mode == "affine" else None

    def make():
        return nv.own(lib.nv_quantized_matmul(nv.array(x), nv.array(parts[0]),
                                              nv.array(parts[1]),
                                              nv.array(b) if b is not None else None,
                                              transpose, gs, bits, mode.encode()))
    got, want = gpu_and_cpu(nv, make, "quantized_matmul")
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = 1.6e-2 if dtype == "bfloat16" else 1e-4
    g, wv = ref64(got), ref64(want)
    np.testing.assert_allclose(g, wv, rtol=tol, atol=tol * (1 + np.abs(wv).max()))


def test_quantized_matmul_empty_and_zero_k(nv, rng):
    w = rng.standard_normal((16, 64)).astype(np.float32)
    with On("cpu"):
        parts, _ = quantize_here(nv, w, "affine", 64, 4)
    with On("gpu"):
        h = nv.own(lib.nv_quantized_matmul(nv.array(np.zeros((0, 64), np.float32)),
                                           nv.array(parts[0]), nv.array(parts[1]),
                                           nv.array(parts[2]), True, 64, 4, b"affine"))
        assert nv.read(h).shape == (0, 16)


sig("nv_reshape", P, P, IP, I)

# The streaming decode gemv (src/cuda/quantize_gemv.cu: K a multiple of 32): every mode, bits
# and group size; rows of x 1 to 8 (its 1-, 4- and 8-row variants: 1, 2 or 4 rows of w per
# warp, so N not a multiple of those, and N below them); K of fewer units than lanes, exactly
# one step, and steps with a partial last one (4 units a lane for 4 bits and one row of w per
# warp: 4224 = 132 units); batched x over one w and batched w.
DECODE = [
    # (x shape, N, K, w batch)
    ((1, 4224), 37, 4224, ()),
    ((2, 1024), 13, 1024, ()),
    ((3, 128), 1, 128, ()),
    ((4, 4096), 9, 4096, ()),
    ((5, 2176), 23, 2176, ()),
    ((8, 512), 70, 512, ()),
    ((7, 384), 3, 384, ()),
    ((3, 2, 256), 11, 256, ()),
    ((2, 6, 1280), 6, 1280, (2,)),
]
DECODE_MODES = [("affine", g, b) for b in (1, 2, 3, 4, 5, 6, 8) for g in (32, 64, 128)] + \
    [("mxfp4", 32, 4), ("mxfp8", 32, 8), ("nvfp4", 16, 4)]
DECODE_CASES = [c + m + (d,) for c in DECODE for m in DECODE_MODES
                for d in ("float16", "bfloat16", "float32")]


def decode_check(nv, rng, xshape, N, K, wb, mode, gs, bits, dtype, offset=0, sdtype=None):
    """x @ dequantize(w).T on the GPU against the CPU; `offset` > 0 gives x and the packed w
    as contiguous views that start `offset` elements into a larger array (not 16-byte aligned
    for odd offsets); `sdtype`: the affine scales and biases in another dtype."""
    w = (rng.standard_normal(wb + (N, K)) * rng.uniform(0.5, 2, wb + (N, 1)))
    w = w.astype(np.float32).astype(np_dtype(dtype))
    with On("cpu"):
        parts, _ = quantize_here(nv, w, mode, gs, bits)
    if sdtype is not None:
        parts = [parts[0]] + [p.astype(np_dtype(sdtype)) for p in parts[1:]]
    x = rng.standard_normal(xshape).astype(np.float32).astype(np_dtype(dtype))
    b = parts[2] if mode == "affine" else None

    def placed(a):
        if not offset:
            return nv.array(a)
        flat = np.zeros(a.size + offset, a.dtype)
        flat[offset:] = a.reshape(-1)
        start, n = ints([offset])
        stop, _ = ints([flat.size])
        step, _ = ints([1])
        v = nv.own(lib.nv_slice(nv.array(flat), start, stop, step, n))
        shape, nd = ints(a.shape)
        return nv.own(lib.nv_reshape(v, shape, nd))

    def make():
        return nv.own(lib.nv_quantized_matmul(placed(x), placed(parts[0]), nv.array(parts[1]),
                                              nv.array(b) if b is not None else None,
                                              True, gs, bits, mode.encode()))
    got, want = gpu_and_cpu(nv, make, "quantized_matmul")
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.shape == np.broadcast_shapes(xshape[:-2], wb) + (xshape[-2], N)
    tol = {"bfloat16": 1.6e-2, "float16": 2e-3}.get(dtype, 1e-4)
    g, wv = ref64(got), ref64(want)
    np.testing.assert_allclose(g, wv, rtol=tol, atol=tol * (1 + np.abs(wv).max()))


@pytest.mark.parametrize("xshape,N,K,wb,mode,gs,bits,dtype", sample(DECODE_CASES, 80, 2))
def test_quantized_matmul_decode(nv, rng, xshape, N, K, wb, mode, gs, bits, dtype):
    decode_check(nv, rng, xshape, N, K, wb, mode, gs, bits, dtype)


# The tensor-core decode gemv (NUVEC_QMV_TC=1; 4-bit affine, float16/bfloat16, K a multiple of
# 128): every
# group size quantize makes (32, 64 and 128: four, two or one groups per 128-element
# superchunk), rows of x 1 to 8, N below, at and past a 16-row tile and large, K of one
# superchunk, of fewer superchunks than warps and of several rounds of loads (14336), batched
# x and batched w; x staged in shared memory up to its limit (8 rows of 2048).
TC_DECODE = [
    ((1, 128), 17, 128, ()),
    ((1, 4096), 300, 4096, ()),
    ((1, 14336), 24, 14336, ()),
    ((2, 384), 16, 384, ()),
    ((8, 2048), 33, 2048, ()),
    ((5, 1024), 1, 1024, ()),
    ((2, 1, 256), 8200, 256, ()),
    ((2, 3, 512), 40, 512, (2,)),
]


@pytest.mark.parametrize("gs", [32, 64, 128])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("xshape,N,K,wb", TC_DECODE)
def test_quantized_matmul_decode_tensor_cores(nv, rng, monkeypatch, xshape, N, K, wb, gs, dtype):
    monkeypatch.setenv("NUVEC_QMV_TC", "1")  # read at each recording
    decode_check(nv, rng, xshape, N, K, wb, "affine", gs, 4, dtype)


@pytest.mark.parametrize("mode,gs,bits", [("affine", 64, 4), ("affine", 32, 2),
                                          ("affine", 128, 8), ("affine", 32, 3),
                                          ("affine", 64, 6), ("mxfp4", 32, 4),
                                          ("nvfp4", 16, 4)])
@pytest.mark.parametrize("offset", [1, 2, 4])
def test_quantized_matmul_decode_unaligned(nv, rng, mode, gs, bits, offset):
    """x and the packed w starting 1, 2 or 4 elements into their buffers: the vector loads'
    alignment fails (the element-by-element loop) or, for some bits, holds."""
    decode_check(nv, rng, (3, 512), 21, 512, (), mode, gs, bits, "bfloat16", offset=offset)


@pytest.mark.parametrize("sdtype", ["float32", "float16"])
@pytest.mark.parametrize("m", [1, 6])
def test_quantized_matmul_decode_scales_dtype(nv, rng, sdtype, m):
    """Affine scales and biases of another dtype than x's."""
    decode_check(nv, rng, (m, 1024), 29, 1024, (), "affine", 64, 4, "bfloat16", sdtype=sdtype)


def test_quantized_matmul_decode_edge_values(nv, rng):
    """NaN and infinities in x (rows 0-2) reach only their rows' outputs, as on the CPU; row 3
    stays finite."""
    w = rng.standard_normal((10, 256)).astype(np.float32)
    with On("cpu"):
        parts, _ = quantize_here(nv, w, "affine", 64, 4)
    x = rng.standard_normal((4, 256)).astype(np.float32)
    x[0, 5], x[1, 200], x[2, 7] = np.nan, np.inf, -np.inf

    def make():
        return nv.own(lib.nv_quantized_matmul(nv.array(x), nv.array(parts[0]),
                                              nv.array(parts[1]), nv.array(parts[2]), True, 64,
                                              4, b"affine"))
    got, want = gpu_and_cpu(nv, make, "quantized_matmul")
    # Non-finite in the same places; a NaN in x gives NaN. An infinity gives ±inf on the GPU
    # (each weight dequantized, then multiplied) and ±inf or NaN on the CPU, which factors the
    # group's bias out (s·Σ x q + b·Σ x: inf·0 or inf - inf where q = 0 or the signs differ).
    fin = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), fin)
    assert fin[3].all() and not fin[:3].any()
    assert np.isnan(got[0]).all() and np.isnan(want[0]).all()
    both_inf = np.isinf(got) & np.isinf(want)
    np.testing.assert_array_equal(got[both_inf], want[both_inf])
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-4, atol=1e-4 * np.abs(want[fin]).max())


# ---- gather_qmm (src/cuda/quantize_gemv.cu's gemv indexed by pair, and by runs) ----

sig("nv_gather_qmm", P, P, P, P, P, P, P, C.c_bool, I, I, C.c_char_p, C.c_bool)

GATHER = [
    # (x shape, E, N, K, lhs, rhs, sorted): the per-pair kernel for M <= 8 (1, 4 and 8 rows),
    # the runs kernel (sorted, one row per pair, more pairs than matrices: chunks of 4 and 8),
    # and the composed path (more than 8 rows per pair)
    ((1, 1, 4224), 4, 37, 4224, None, [[2, 0, 2, 3]], False),
    ((6, 3, 512), 5, 13, 512, [0, 1, 2, 3, 4, 5, 5], [4, 0, 4, 1, 0, 2, -1], False),
    ((3, 8, 256), 3, 70, 256, [[0, 2], [1, -1]], [[2, 2], [0, 1]], False),
    ((40, 1, 1024), 16, 23, 1024, None, "sorted", True),
    ((100, 1, 512), 16, 9, 512, None, "sorted", True),
    ((100, 1, 512), 16, 9, 512, None, "shuffled", True),
    ((2, 12, 256), 4, 16, 256, [0, 1, 1], [3, 0, 3], False),
]
GATHER_MODES = [("affine", 64, 4), ("affine", 32, 2), ("affine", 128, 8), ("affine", 32, 3),
                ("affine", 64, 5), ("affine", 64, 6), ("affine", 32, 1), ("mxfp4", 32, 4),
                ("mxfp8", 32, 8), ("nvfp4", 16, 4)]
GATHER_CASES = [c + m + (d,) for c in GATHER for m in GATHER_MODES
                for d in ("float16", "bfloat16", "float32")]


def gather_make(nv, rng, xshape, E, N, K, li, ri, mode, gs, bits, dtype, x_offset=0):
    """A make() for gather_qmm of E random experts (quantized on the CPU) and x."""
    w = (rng.standard_normal((E, N, K)) * rng.uniform(0.5, 2, (E, N, 1)))
    w = w.astype(np.float32).astype(np_dtype(dtype))
    with On("cpu"):
        parts, _ = quantize_here(nv, w, mode, gs, bits)
    x = rng.standard_normal(xshape).astype(np.float32).astype(np_dtype(dtype))
    if isinstance(ri, str):
        r = np.sort(rng.integers(0, E, xshape[0]))
        ri = r if ri == "sorted" else rng.permutation(r)
    li = None if li is None else np.array(li, np.int32)
    ri = np.array(ri)
    ri = ri.astype(np.uint32 if ri.size and ri.min() >= 0 else np.int32)
    b = parts[2] if mode == "affine" else None

    def xarr():
        if not x_offset:
            return nv.array(x)
        flat = np.zeros(x.size + x_offset, x.dtype)
        flat[x_offset:] = x.reshape(-1)
        start, n = ints([x_offset])
        stop, _ = ints([flat.size])
        step, _ = ints([1])
        v = nv.own(lib.nv_slice(nv.array(flat), start, stop, step, n))
        shape, nd = ints(x.shape)
        return nv.own(lib.nv_reshape(v, shape, nd))

    def make(sorted_=False):
        return nv.own(lib.nv_gather_qmm(xarr(), nv.array(parts[0]), nv.array(parts[1]),
                                        nv.array(b) if b is not None else None,
                                        nv.array(li) if li is not None else None,
                                        nv.array(ri), True, gs, bits, mode.encode(), sorted_))
    return make


def gather_compare(nv, make, dtype):
    got, want = gpu_and_cpu(nv, make, "gather_qmm")
    assert got.dtype == want.dtype and got.shape == want.shape
    tol = {"bfloat16": 1.6e-2, "float16": 2e-3}.get(dtype, 1e-4)
    g, wv = ref64(got), ref64(want)
    np.testing.assert_allclose(g, wv, rtol=tol, atol=tol * (1 + np.abs(wv).max()))


@pytest.mark.parametrize("xshape,E,N,K,li,ri,sorted_,mode,gs,bits,dtype",
                         sample(GATHER_CASES, 60, 3))
def test_gather_qmm(nv, rng, xshape, E, N, K, li, ri, sorted_, mode, gs, bits, dtype):
    make = gather_make(nv, rng, xshape, E, N, K, li, ri, mode, gs, bits, dtype)
    gather_compare(nv, lambda: make(sorted_), dtype)


@pytest.mark.parametrize("sorted_", [False, True])
@pytest.mark.parametrize("offset", [0, 1, 4])
def test_gather_qmm_unaligned_and_float64(nv, rng, sorted_, offset):
    """x starting 1 or 4 elements into its buffer (the element-by-element loop), and float64
    x (composed on the GPU: take and quantized_matmul)."""
    make = gather_make(nv, rng, (24, 1, 512), 8, 21, 512, None, "sorted", "affine", 64, 4,
                       "bfloat16", x_offset=offset)
    gather_compare(nv, lambda: make(sorted_), "bfloat16")
    make = gather_make(nv, rng, (3, 2, 256), 3, 8, 256, None, [2, 0, 2], "affine", 64, 4,
                       "float64")
    gather_compare(nv, lambda: make(sorted_), "float64")


def test_gather_qmm_empty_and_out_of_range(nv, rng):
    make = gather_make(nv, rng, (2, 1, 256), 4, 8, 256, [], [], "affine", 64, 4, "float32")
    with On("gpu"):
        assert nv.read(make()).shape == (0, 1, 8)
    for li, ri, sorted_, bad in [([0, 1], [0, 9], False, "index 9 is out of range for an axis "
                                  "of size 4"),
                                 ([0, 5], [0, 1], False, "index 5 is out of range for an axis "
                                  "of size 2"),
                                 ([0, 1, 0, 1, 0, 1], [0, 0, 1, 1, 2, 7], True,
                                  "index 7 is out of range for an axis of size 4"),
                                 ([0, 1, 0, 1, 0, -3], [0, 0, 1, 1, 2, 2], True,
                                  "index -3 is out of range for an axis of size 2")]:
        make = gather_make(nv, rng, (2, 1, 256), 4, 8, 256, li, ri, "affine", 64, 4, "float32")
        for device in ("cpu", "gpu"):
            with On(device):
                with pytest.raises(NuvecError, match="gather_qmm: " + bad):
                    nv.read(make(sorted_))


# ---- the split-K decode gemv (the default for one row of x) ----
# quantize_gemv.cu's qmv_v2_kernel and gather_qmv_v2_kernel take one row of x, affine 2-, 4- and
# 8-bit codes, K a multiple of 32 up to 16384 (K / 1024 warps a block), in two variants that
# nv__gpu_qmv_v2_plan picks by the rows an SM (N times the products, at most 64 an SM: 2 rows a
# set with the next set's loads in flight; beyond: 4 rows a set). Cases: K of one unit (31 idle
# lanes; group size 32 only), of exactly one warp, of a partial last warp, at the limit of 16
# warps and past it (the streaming kernel again); N below a set of rows, not a multiple of one,
# and many sets per block (the persistent walk, double-buffered); the 4-row variant by N alone
# (12289 and 12291 rows: more than 64 an SM on GPUs of up to 192 SMs; N = 1 and 3 modulo 4) and
# by the products (batched x and w: 3 x 4001 rows; 66000 products, grid.y's walk past its
# 65535 cap, with N = 3 below a set; batches of x over one w are one product of their rows); scales in float32 and float16
# (test_quantized_matmul_decode_scales_dtype); x and w views at offsets; gather_qmm by pair
# (unsorted, sorted with fewer pairs than matrices, negative indices, the 4-row variant by the
# pairs) and its index errors. 8-bit codes take the streaming kernel by default and the split-K
# one with NUVEC_QMV_V2=1; NUVEC_QMV_V2=0 gives the streaming kernel back for every width (read
# once per process: children run those cases).
V2_DECODE = [
    ((1, 32), 5, 32, ()),
    ((1, 1024), 37, 1024, ()),
    ((1, 4224), 1, 4224, ()),
    ((1, 16384), 9, 16384, ()),
    ((1, 16512), 6, 16512, ()),
    ((2, 1, 1280), 6, 1280, (2,)),
    ((2, 1, 2048), 2, 2048, (2,)),
]
V2_MODES = [("affine", 64, 4), ("affine", 32, 2), ("affine", 128, 8), ("affine", 32, 4),
            ("affine", 64, 8), ("affine", 128, 4), ("affine", 32, 8), ("affine", 128, 2)]
# The 4-row variant by N alone, and by many products: fewer modes (the CPU reference's time).
V2_BIG = [
    ((1, 1024), 12289, 1024, ()),
    ((1, 512), 12291, 512, ()),
    ((3, 1, 256), 4001, 256, (3,)),
    ((66000, 1, 32), 3, 32, (66000,)),
]
V2_BIG_MODES = [("affine", 64, 4), ("affine", 128, 8), ("affine", 32, 2), ("affine", 32, 4)]
V2_DECODE_CASES = [c + m + (d,) for c in V2_DECODE for m in V2_MODES for d in DTYPES
                   if c[2] % m[1] == 0] + \
    [c + m + (d,) for c in V2_BIG for m in V2_BIG_MODES for d in DTYPES if c[2] % m[1] == 0]
V2_GATHER = [
    ((1, 1, 4224), 4, 37, 4224, None, [[2, 0, 2, 3]], False),
    ((6, 1, 1024), 5, 13, 1024, [0, 1, 2, 3, 4, 5, 5], [4, 0, 4, 1, 0, 2, -1], False),
    ((3, 1, 512), 8, 9, 512, [2, -1, 0], [5, 1, 7], True),
    ((4, 1, 512), 3, 4099, 512, None, [2, 0, -1, 2], False),
]
V2_GATHER_CASES = [c + m + (d,) for c in V2_GATHER for m in V2_MODES[:3] + V2_MODES[5:7]
                   for d in DTYPES]


@pytest.mark.parametrize("xshape,N,K,wb,mode,gs,bits,dtype", V2_DECODE_CASES)
def test_decode_split_k(nv, rng, xshape, N, K, wb, mode, gs, bits, dtype):
    decode_check(nv, rng, xshape, N, K, wb, mode, gs, bits, dtype)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("offset", [1, 4, 8])
def test_decode_split_k_offsets(nv, rng, bits, offset):
    """One row of x and the packed w at 1, 4 or 8 elements into their buffers: x's 16-byte
    alignment fails (the streaming kernel) or holds (8 bfloat16 elements; w's 8 words)."""
    decode_check(nv, rng, (1, 512), 21, 512, (), "affine", 64, bits, "bfloat16", offset=offset)


@pytest.mark.parametrize("xshape,E,N,K,li,ri,sorted_,mode,gs,bits,dtype", V2_GATHER_CASES)
def test_gather_split_k(nv, rng, xshape, E, N, K, li, ri, sorted_, mode, gs, bits, dtype):
    make = gather_make(nv, rng, xshape, E, N, K, li, ri, mode, gs, bits, dtype)
    gather_compare(nv, lambda: make(sorted_), dtype)


GATHER_INDEX_ERRORS = [([0, 1], [0, 9], "index 9 is out of range for an axis of size 4"),
                       ([0, -3], [0, 1], "index -3 is out of range for an axis of size 2")]


@pytest.mark.parametrize("li,ri,bad", GATHER_INDEX_ERRORS)
def test_gather_split_k_index_errors(nv, rng, li, ri, bad):
    make = gather_make(nv, rng, (2, 1, 256), 4, 8, 256, li, ri, "affine", 64, 4, "float32")
    with On("gpu"):
        with pytest.raises(NuvecError, match="gather_qmm: " + bad):
            nv.read(make(False))


def streaming_child():
    """The split-K cases of one row of x with NUVEC_QMV_V2=0 (the streaming kernel; run by
    test_decode_streaming_one_row) against the CPU: every decode shape but the largest in the
    first three modes, every gather case in the first mode, the index errors; prints the
    number of cases checked."""
    rng = np.random.default_rng(int(os.environ.get("NUVEC_TEST_SEED", "1")) + 19)
    n = 0
    with Session() as nv:
        for xshape, N, K, wb in V2_DECODE:
            for mode, gs, bits in V2_MODES[:3]:
                if K % gs == 0:
                    decode_check(nv, rng, xshape, N, K, wb, mode, gs, bits, "bfloat16")
                    n += 1
        for xshape, E, N, K, li, ri, sorted_ in V2_GATHER:
            for dtype in DTYPES:
                make = gather_make(nv, rng, xshape, E, N, K, li, ri, "affine", 64, 4, dtype)
                gather_compare(nv, lambda: make(sorted_), dtype)
                n += 1
        for li, ri, bad in GATHER_INDEX_ERRORS:
            make = gather_make(nv, rng, (2, 1, 256), 4, 8, 256, li, ri, "affine", 64, 4,
                               "float32")
            with On("gpu"):
                with pytest.raises(NuvecError, match="gather_qmm: " + bad):
                    nv.read(make(False))
            n += 1
    print(n)


def streaming_child_cases():
    n = sum(1 for c in V2_DECODE for m in V2_MODES[:3] if c[2] % m[1] == 0)
    return n + len(V2_GATHER) * len(DTYPES) + len(GATHER_INDEX_ERRORS)


def split_k_8bit_child():
    """The 8-bit cases of one row of x with NUVEC_QMV_V2=1 (the split-K kernel for 8-bit codes;
    run by test_decode_split_k_8bit) against the CPU: every decode and gather shape in each
    8-bit mode and dtype; prints the number of cases checked."""
    rng = np.random.default_rng(int(os.environ.get("NUVEC_TEST_SEED", "1")) + 23)
    n = 0
    with Session() as nv:
        for xshape, N, K, wb in V2_DECODE + V2_BIG[:1]:
            for mode, gs, bits in EIGHT_BIT_MODES:
                for dtype in DTYPES:
                    if K % gs == 0:
                        decode_check(nv, rng, xshape, N, K, wb, mode, gs, bits, dtype)
                        n += 1
        for xshape, E, N, K, li, ri, sorted_ in V2_GATHER:
            for mode, gs, bits in EIGHT_BIT_MODES:
                make = gather_make(nv, rng, xshape, E, N, K, li, ri, mode, gs, bits, "bfloat16")
                gather_compare(nv, lambda: make(sorted_), "bfloat16")
                n += 1
    print(n)


EIGHT_BIT_MODES = [m for m in V2_MODES if m[2] == 8]


def split_k_8bit_child_cases():
    n = sum(len(DTYPES) for c in V2_DECODE + V2_BIG[:1] for m in EIGHT_BIT_MODES
            if c[2] % m[1] == 0)
    return n + len(V2_GATHER) * len(EIGHT_BIT_MODES)


def run_child(fn, env_v2, want):
    """fn (a function of this file) in a child process with NUVEC_QMV_V2=env_v2 (the library
    reads it once), its last line of output the number of cases it checked."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys; sys.path.insert(0, {here!r}); import test_gpu_quantize as t; "
            f"t.{fn}()")
    env = dict(os.environ, NUVEC_QMV_V2=env_v2, NUVEC_DEFAULT_DEVICE="gpu")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    assert p.stdout.strip().splitlines()[-1] == str(want), p.stdout[-2000:]


def test_decode_split_k_8bit():
    """The split-K kernel for 8-bit codes, taken with NUVEC_QMV_V2=1."""
    run_child("split_k_8bit_child", "1", split_k_8bit_child_cases())


def test_decode_streaming_one_row():
    """The streaming kernel for one row of x in a child process with NUVEC_QMV_V2=0 (the
    library reads it once)."""
    run_child("streaming_child", "0", streaming_child_cases())


# ---- block_masked_mm (composed of repeat, slice, where / multiply and matmul) ----

sig("nv_block_masked_mm", P, P, P, I, P, P, P)


@pytest.mark.parametrize("kind", ["bool", "float32"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_block_masked_mm(nv, rng, kind, dtype):
    a = rng.standard_normal((2, 70, 40)).astype(np.float32).astype(np_dtype(dtype))
    b = rng.standard_normal((40, 100)).astype(np.float32).astype(np_dtype(dtype))
    a[0, 0, 0] = np.nan

    def mask(shape):
        m = rng.random(shape)
        return m > 0.4 if kind == "bool" else m.astype(np.float32)
    mo, ml, mr = mask((3, 4)), mask((2, 3, 2)), mask((2, 4))

    def make():
        return nv.own(lib.nv_block_masked_mm(nv.array(a), nv.array(b), 32, nv.array(mo),
                                             nv.array(ml), nv.array(mr)))
    got, want = gpu_and_cpu(nv, make, "block_masked_mm")
    assert got.dtype == want.dtype and got.shape == want.shape == (2, 70, 100)
    tol = 1.6e-2 if dtype == "bfloat16" else 1e-4
    g, wv = ref64(got), ref64(want)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(wv))
    fin = ~np.isnan(wv)
    np.testing.assert_allclose(g[fin], wv[fin], rtol=tol, atol=tol * (1 + np.abs(wv[fin]).max()))
