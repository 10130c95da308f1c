"""nvfp4's global scale, qqmm and the GGUF affine triples' products on the GPU against nuvec's
CPU results. The global-scale quantize and dequantize and qqmm are compositions of existing
ops (division, comparisons, shifts, sums, to_fp8/from_fp8, quantize, dequantize,
quantized_matmul), so the GPU runs those ops' kernels: the packed words and scales must equal
the CPU's bit for bit (IEEE divisions and exact integer arithmetic on both), the products agree
within a float32 accumulation tolerance. Every op is built with the GPU as the default device
(skipped where no GPU is usable) and must run there (no CPU fallback); the references are built
with the CPU as the default device."""
import ctypes as C
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import On, gpu_and_cpu, needs_gpu, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import CODE, NuvecError, Session, lib, np_dtype, ref64, sig  # noqa: E402

P = C.c_void_p
I = C.c_int
sig("nv_quantize_scaled", I, P, I, I, C.c_char_p, P, P)
sig("nv_dequantize_scaled", P, P, P, P, I, I, C.c_char_p, P, I)
sig("nv_qqmm", P, P, P, P, I, I, C.c_char_p, P, P)
sig("nv_quantize", I, P, I, I, C.c_char_p, P)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_size", C.c_size_t, P)
sig("nv_vec_get", P, P, C.c_size_t)

pytestmark = needs_gpu

NONE_DTYPE = len(CODE)


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def weights(rng, shape, dtype):
    x = rng.standard_normal(shape) * np.exp(rng.uniform(-4, 4, shape[:-1] + (1,)))
    flat = x.reshape(-1)
    flat[rng.integers(0, flat.size, max(1, flat.size // 40))] = 0.0
    flat[rng.integers(0, flat.size, max(1, flat.size // 60))] = -0.0
    return x.astype(np.float32).astype(np_dtype(dtype))


def quantize_scaled(nv, w, g):
    """(words, scales) and the CPU-fallback count of evaluating them."""
    v = lib.nv_vec_new()
    try:
        st = lib.nv_quantize_scaled(nv.array(w), 0, 0, b"nvfp4", nv.array(np.float32(g)), v)
        if st != 0:
            raise NuvecError(st, lib.nv_last_error().decode())
        hs = [lib.nv_vec_get(v, i) for i in range(lib.nv_vec_size(v))]
        before = lib.nv_gpu_fallback_count()
        out = [nv.read(h) for h in hs]
        return out, lib.nv_gpu_fallback_count() - before
    finally:
        lib.nv_vec_free(v)


CASES = [(d, s, g) for d in ("float32", "float16", "bfloat16")
         for s in ((3, 32), (2, 5, 64), (64, 4096), (1, 16))
         for g in (0.01, 1.0, 300.0)]


@pytest.mark.parametrize("dtype,shape,g", sample(CASES, 14))
def test_global_scale_bits(nv, rng, dtype, shape, g):
    w = weights(rng, shape, dtype)
    with On("cpu"):
        want, _ = quantize_scaled(nv, w, g)
    with On("gpu"):
        got, fell = quantize_scaled(nv, w, g)
    assert fell == 0, "quantize (global scale) fell back to the CPU"
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)

    def make():
        return nv.own(lib.nv_dequantize_scaled(nv.array(want[0]), nv.array(want[1]), None, 0, 0,
                                               b"nvfp4", nv.array(np.float32(g)), NONE_DTYPE))
    dg, dw = gpu_and_cpu(nv, make, "dequantize (global scale)")
    np.testing.assert_array_equal(dg, dw)


QQ = [(mode, xs, n, k, packed, gscale)
      for mode in ("nvfp4", "mxfp8", "mxfp4")
      for xs, n, k in (((1, 512), 40, 512), ((4, 128), 24, 128), ((2, 3, 64), 16, 64),
                       ((64,), 8, 64), ((40, 256), 48, 256))
      for packed in (True, False)
      for gscale in ((False, True) if mode == "nvfp4" else (False,))]


@pytest.mark.parametrize("mode,xs,n,k,packed,gscale", sample(QQ, 16))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_qqmm(nv, rng, mode, xs, n, k, packed, gscale, dtype):
    x = weights(rng, xs, dtype)
    w = weights(rng, (n, k), "float32")
    md = mode.encode()
    gx = np.float32(np.abs(x.astype(np.float32)).max() or 1) if gscale else None
    gw = np.float32(np.abs(w).max() or 1) if gscale else None
    if packed:
        v = lib.nv_vec_new()
        assert lib.nv_quantize(nv.array(w), 0, 0, md, v) == 0
        with On("cpu"):
            wq, ws = nv.read(lib.nv_vec_get(v, 0)), nv.read(lib.nv_vec_get(v, 1))
        lib.nv_vec_free(v)

    def make():
        g1 = nv.array(gx) if gscale else None
        g2 = nv.array(gw) if gscale else None
        if packed:
            return nv.own(lib.nv_qqmm(nv.array(x), nv.array(wq), nv.array(ws), 0, 0, md, g1, g2))
        return nv.own(lib.nv_qqmm(nv.array(x), nv.array(w), None, 0, 0, md, g1, g2))
    got, want = gpu_and_cpu(nv, make, "qqmm")
    assert got.shape == want.shape == xs[:-1] + (n,)
    g64, w64 = ref64(got), ref64(want)
    tol = 1.6e-2 if dtype == "bfloat16" else 1e-4
    np.testing.assert_allclose(g64, w64, rtol=tol, atol=tol * (1 + np.abs(w64).max()))
