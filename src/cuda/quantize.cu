/* The quantize family on the GPU. quantize and dequantize use the CPU kernels' per-group
 * arithmetic (src/ops/quantize_codec.h, explicitly rounded) and write the same bits; they run
 * one thread per group (quantize) or per output element (dequantize; per packed word for bits
 * 2, 4 and 8), grid-stride loops with 64-bit indices. quantized_matmul has two kernels:
 *   - the decode gemv (M <= 8, transposed w): one warp per output column streams that row of
 *     packed w with 16-byte loads (bits 1, 2, 4, 8 on 16-byte aligned rows; element by
 *     element otherwise), dequantizes in registers and keeps one float32 sum per row of x;
 *   - the tiled kernel (M > 8 or w not transposed; the builder sends more than 32 rows per
 *     matrix to dequantize + matmul instead): 64 x 64 output tiles, x and dequantized w staged
 *     in shared memory as float32 a K step of 32 at a time, 4 x 4 outputs per thread.
 * Products accumulate in float32 (not bit-identical to the CPU's order of summation). */
#include <stdint.h>

#include "cuda/convert.cuh"
#include "cuda/quantize_kernels.h"
#include "ops/quantize_codec.h"
#include "ops/quantize_params.h"

using namespace nvg;

namespace {

/* A float scale or bias of runtime dtype `dt` (the affine scales of quantized_matmul). */
__device__ __forceinline__ float load_any(int dt, const void *p, int64_t i) {
  switch (dt) {
    case DT_F16: return f16_to_f32(((const uint16_t *)p)[i]);
    case DT_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case DT_F64: return f64_to_f32(((const double *)p)[i]);
    default: return ((const float *)p)[i];
  }
}

/* The value of an fp-mode scale code (the CPU's nv__q_scale_value). */
__device__ __forceinline__ float scale_value(int mode, uint8_t code) {
  if (mode == NV__QMODE_NVFP4) return fp8_to_f32(code);
  return code == 255 ? __uint_as_float(0x7fc00000u) : ldexpf(1.0f, (int)code - 127);
}

/* The value of an fp-mode element code. */
__device__ __forceinline__ float element_value(int mode, uint32_t c) {
  return mode == NV__QMODE_MXFP8 ? fp8_to_f32((uint8_t)c) : nv__qfp4_value(c);
}

/* ---- quantize: one thread per group ---- */

template <int DT>
__global__ void quantize_kernel(uint32_t *packed, void *scales, void *biases,
                                const typename f32io<DT>::S *w, nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  packed += p.off[0];
  w += p.off[3];
  const int gs = p.group_size, bits = p.bits;
  const int64_t words = (int64_t)gs * bits / 32;
  for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < p.n;
       g += (int64_t)gridDim.x * blockDim.x) {
    const typename F::S *v = w + g * gs;
    float s = 1, b = 0;
    uint8_t sc = 0;
    if (p.mode == NV__QMODE_AFFINE) {
      float wmin = __int_as_float(0x7f800000), wmax = -wmin;
      for (int i = 0; i < gs; i++) {
        float x = F::ld(v[i]);
        wmax = nv__qmax(wmax, x);
        wmin = nv__qmin(wmin, x);
      }
      nv__qaffine_params(wmin, wmax, bits, &s, &b);
      ((typename F::S *)scales)[p.off[1] + g] = F::st(s);
      ((typename F::S *)biases)[p.off[2] + g] = F::st(b);
    } else {
      float amax = 0;
      for (int i = 0; i < gs; i++) amax = nv__qmax(amax, fabsf(F::ld(v[i])));
      if (p.mode == NV__QMODE_NVFP4) {
        sc = f32_to_fp8(amax / 6.0f);
        s = fp8_to_f32(sc);
      } else {
        /* The quotient in the weights' dtype, as the CPU and MLX (nv__qmx_scale). */
        sc = nv__qmx_scale(F::ld(F::st(amax / (p.mode == NV__QMODE_MXFP8 ? 448.0f : 6.0f))), &s);
      }
      ((uint8_t *)scales)[p.off[1] + g] = sc;
    }
    /* The group's codes as one little-endian bit stream, a word at a time. */
    uint64_t acc = 0;
    int have = 0;
    uint32_t *out = packed + g * words;
    for (int i = 0; i < gs; i++) {
      float x = F::ld(v[i]);
      uint32_t c;
      if (p.mode == NV__QMODE_AFFINE)
        c = nv__qaffine_code(x, s, b, bits);
      else {
        float q = s == 0 ? 0.0f : x / s;
        c = p.mode == NV__QMODE_MXFP8 ? (uint32_t)f32_to_fp8(q) : nv__qfp4_code(q);
      }
      acc |= (uint64_t)c << have;
      have += bits;
      if (have >= 32) {
        *out++ = (uint32_t)acc;
        acc >>= 32;
        have -= 32;
      }
    }
  }
}

/* ---- dequantize ---- */

/* One dequantized element of code c: affine with the group's scale sv and bias bv (stored in
 * the output's dtype), else the fp modes with the group's scale code. */
template <int DT>
__device__ __forceinline__ typename f32io<DT>::S dequant_one(int mode, uint32_t c,
                                                             typename f32io<DT>::S sv,
                                                             typename f32io<DT>::S bv,
                                                             uint8_t code) {
  typedef f32io<DT> F;
  if (mode == NV__QMODE_AFFINE) {
    if (DT == DT_F64)
      return (typename F::S)__dadd_rn(__dmul_rn((double)sv, (double)c), (double)bv);
    /* In the scales' dtype: float16 and bfloat16 round the product and the sum. */
    float t = F::ld(F::st(__fmul_rn(F::ld(sv), (float)c)));
    return F::st(__fadd_rn(t, F::ld(bv)));
  }
  float s = scale_value(mode, code), ev = element_value(mode, c);
  if (DT == DT_F64) return (typename F::S)__dmul_rn((double)s, (double)ev);
  return F::st(__fmul_rn(F::ld(F::st(s)), ev));
}

/* One thread per output element (any bits and group size). DT is the output's dtype, and the
 * scales' in affine mode. */
template <int DT>
__global__ void dequantize_kernel(typename f32io<DT>::S *out, const uint32_t *packed,
                                  const void *scales, const void *biases,
                                  nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  out += p.off[0];
  packed += p.off[1];
  const int gs = p.group_size, bits = p.bits;
  const int64_t words = (int64_t)gs * bits / 32;
  const bool affine = p.mode == NV__QMODE_AFFINE;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < p.n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t g = e / gs;
    uint32_t c = nv__qextract(packed + g * words, e - g * gs, bits, words);
    typename F::S sv = 0, bv = 0;
    uint8_t code = 0;
    if (affine) {
      sv = ((const typename F::S *)scales)[p.off[2] + g];
      bv = ((const typename F::S *)biases)[p.off[3] + g];
    } else {
      code = ((const uint8_t *)scales)[p.off[2] + g];
    }
    out[e] = dequant_one<DT>(p.mode, c, sv, bv, code);
  }
}

/* One thread per packed word for bits 2, 4 and 8 (32 / BITS elements of one group: a word
 * never straddles groups, whose sizes are multiples of 16) with a power-of-two number of
 * words per group (`wshift`: its log2, in p.transpose's place): the group's scale and bias
 * read once, the word's elements stored with 16- or 8-byte stores where the output is aligned.
 * The same arithmetic per element as dequantize_kernel (dequant_one). */
template <int DT, int BITS>
__global__ void dequantize_words_kernel(typename f32io<DT>::S *out, const uint32_t *packed,
                                        const void *scales, const void *biases,
                                        nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  typedef typename F::S S;
  constexpr int EPW = 32 / BITS;
  constexpr int BYTES = EPW * (int)sizeof(S);
  out += p.off[0];
  packed += p.off[1];
  const int wshift = p.transpose;
  const int64_t nw = p.n / EPW;
  const bool affine = p.mode == NV__QMODE_AFFINE;
  const bool al16 = BYTES % 16 == 0 && ((uintptr_t)out & 15) == 0;
  const bool al8 = BYTES % 8 == 0 && ((uintptr_t)out & 7) == 0;
  for (int64_t wi = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; wi < nw;
       wi += (int64_t)gridDim.x * blockDim.x) {
    const int64_t g = wi >> wshift;
    const uint32_t word = __ldg(packed + wi);
    S sv = 0, bv = 0;
    uint8_t code = 0;
    if (affine) {
      sv = ((const S *)scales)[p.off[2] + g];
      bv = ((const S *)biases)[p.off[3] + g];
    } else {
      code = ((const uint8_t *)scales)[p.off[2] + g];
    }
    union {
      S v[EPW];
      uint4 q16[BYTES / 16 > 0 ? BYTES / 16 : 1];
      uint2 q8[BYTES / 8 > 0 ? BYTES / 8 : 1];
    } u;
#pragma unroll
    for (int k = 0; k < EPW; k++)
      u.v[k] = dequant_one<DT>(p.mode, (word >> (k * BITS)) & ((1u << BITS) - 1), sv, bv, code);
    S *o = out + wi * EPW;
    if (BYTES % 16 == 0 && al16) {
#pragma unroll
      for (int j = 0; j < BYTES / 16; j++) ((uint4 *)o)[j] = u.q16[j];
    } else if (BYTES % 8 == 0 && al8) {
#pragma unroll
      for (int j = 0; j < BYTES / 8; j++) ((uint2 *)o)[j] = u.q8[j];
    } else {
#pragma unroll
      for (int k = 0; k < EPW; k++) o[k] = u.v[k];
    }
  }
}

/* ---- quantized_matmul ---- */

/* The dequantized value of code `c` in group `g` of a row whose scales (and biases) start at
 * s and b. */
__device__ __forceinline__ float deq(const nv__gpu_quant_params &p, const void *s, const void *b,
                                     int64_t g, uint32_t c) {
  if (p.mode == NV__QMODE_AFFINE)
    return __fadd_rn(__fmul_rn((float)c, load_any(p.sdt, s, g)), load_any(p.sdt, b, g));
  return __fmul_rn(scale_value(p.mode, ((const uint8_t *)s)[g]), element_value(p.mode, c));
}

/* N consecutive elements of x from p (N * sizeof(S) bytes, aligned to that size or to 16 when
 * `vec`) as float32: 16-byte loads (8-byte for 8-byte runs) when `vec`, else one by one. */
template <class F, int N>
__device__ __forceinline__ void load_run(const typename F::S *p, bool vec, float *out) {
  typedef typename F::S S;
  constexpr int BYTES = N * (int)sizeof(S);
  if (vec && BYTES % 16 == 0) {
    constexpr int PER16 = 16 / (int)sizeof(S);
#pragma unroll
    for (int j = 0; j < BYTES / 16; j++) {
      union {
        uint4 u;
        S s[PER16];
      } t;
      t.u = __ldg((const uint4 *)p + j);
#pragma unroll
      for (int k = 0; k < PER16; k++) out[j * PER16 + k] = F::ld(t.s[k]);
    }
  } else if (vec && BYTES == 8) {
    union {
      uint2 u;
      S s[8 / sizeof(S)];
    } t;
    t.u = __ldg((const uint2 *)p);
#pragma unroll
    for (int k = 0; k < N; k++) out[k] = F::ld(t.s[k]);
  } else {
#pragma unroll
    for (int k = 0; k < N; k++) out[k] = F::ld(p[k]);
  }
}

/* The decode gemv: block (32, WARPS); warp y of block x computes column n = x * WARPS + y for
 * every row of x in batch blockIdx.y (grid-stride over batches). BITS is 1, 2, 4 or 8 (whole
 * words, 16-byte loads when the row is aligned for them) or 0 (any bits, element by element).
 */
template <int DT, int BITS>
__global__ void qmm_gemv_kernel(typename f32io<DT>::S *out, const typename f32io<DT>::S *x,
                                const uint32_t *w, const void *scales, const void *biases,
                                nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  out += p.off[0];
  x += p.off[1];
  w += p.off[2];
  const int lane = threadIdx.x;
  const int64_t n = (int64_t)blockIdx.x * NV__GPU_QMM_GEMV_WARPS + threadIdx.y;
  if (n >= p.N) return;
  const int gs = p.group_size, M = (int)p.M;
  const size_t ssz = p.mode == NV__QMODE_AFFINE ? (size_t)dtype_size(p.sdt) : 1;
  for (int64_t bt = blockIdx.y; bt < p.B; bt += gridDim.y) {
    int64_t rr = (p.wbatch ? bt : 0) * p.R + n;
    const uint32_t *row = w + rr * p.words;
    const char *srow = (const char *)scales + (p.off[3] + rr * p.groups) * (int64_t)ssz;
    const char *brow = (const char *)biases + (p.off[4] + rr * p.groups) * (int64_t)ssz;
    const typename F::S *xb = x + bt * p.M * p.K;
    float acc[NV__GPU_QMM_GEMV_MAX_M];
#pragma unroll
    for (int m = 0; m < NV__GPU_QMM_GEMV_MAX_M; m++) acc[m] = 0;
    if (BITS > 0 && (p.words & 3) == 0 && ((uintptr_t)row & 15) == 0) {
      constexpr int PER = BITS > 0 ? 32 / BITS : 1; /* elements per word */
      constexpr uint32_t MASK = BITS == 0 ? 0xffffffffu : (1u << BITS) - 1;
      /* x's rows read PER elements at a time with vector loads when every row start is
       * aligned for them (uniform over the grid). */
      const bool xvec = ((uintptr_t)xb & 15) == 0 && (p.K * (int64_t)sizeof(typename F::S)) % 16 == 0;
      const int64_t nvec = p.words / 4;
      const int gshift = __ffs(gs) - 1; /* group sizes are powers of two */
      for (int64_t v = lane; v < nvec; v += 32) {
        uint4 q4 = __ldg((const uint4 *)row + v);
        uint32_t wd[4] = {q4.x, q4.y, q4.z, q4.w};
        /* A word lies in one group; the group's scale (and bias) is read again only where a
         * new group starts inside the vector (at the same word for every lane: vectors and
         * groups are powers of two elements long). */
        int64_t gcur = -1;
        float sv = 0, bv = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
          int64_t e0 = (v * 4 + i) * PER, g = e0 >> gshift;
          if (g != gcur) {
            gcur = g;
            if (p.mode == NV__QMODE_AFFINE) {
              sv = load_any(p.sdt, srow, g);
              bv = load_any(p.sdt, brow, g);
            } else {
              sv = scale_value(p.mode, ((const uint8_t *)srow)[g]);
            }
          }
          float dq[PER];
          if (p.mode == NV__QMODE_AFFINE) {
#pragma unroll
            for (int k = 0; k < PER; k++)
              dq[k] = __fmaf_rn((float)((wd[i] >> (k * BITS)) & MASK), sv, bv);
          } else {
#pragma unroll
            for (int k = 0; k < PER; k++)
              dq[k] = __fmul_rn(sv, element_value(p.mode, (wd[i] >> (k * BITS)) & MASK));
          }
#pragma unroll
          for (int m = 0; m < NV__GPU_QMM_GEMV_MAX_M; m++) {
            if (m >= M) break;
            float xv[PER];
            load_run<F, PER>(xb + m * p.K + e0, xvec, xv);
            float a = acc[m];
#pragma unroll
            for (int k = 0; k < PER; k++) a = __fmaf_rn(dq[k], xv[k], a);
            acc[m] = a;
          }
        }
      }
    } else {
      for (int64_t e = lane; e < p.K; e += 32) {
        uint32_t c = nv__qextract(row, e, p.bits, p.words);
        float val = deq(p, srow, brow, e / gs, c);
#pragma unroll
        for (int m = 0; m < NV__GPU_QMM_GEMV_MAX_M; m++)
          if (m < M) acc[m] = __fmaf_rn(val, F::ld(xb[m * p.K + e]), acc[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < NV__GPU_QMM_GEMV_MAX_M; m++) {
      if (m >= M) break;
      float s = acc[m];
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) out[(bt * p.M + m) * p.N + n] = F::st(s);
    }
  }
}

/* The tiled kernel: block (16, 16) computes the 64 x 64 output tile (blockIdx.y, blockIdx.x)
 * of batch blockIdx.z, grid-stride over row tiles and batches. Element (k, n) of the
 * dequantized matrix is row n, element k of w (transposed) or row k, element n. */
template <int DT>
__global__ void qmm_tiled_kernel(typename f32io<DT>::S *out, const typename f32io<DT>::S *x,
                                 const uint32_t *w, const void *scales, const void *biases,
                                 nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  constexpr int T = NV__GPU_QMM_TILE, KS = NV__GPU_QMM_KSTEP;
  __shared__ float xs[T][KS + 1];
  __shared__ float ws[KS][T + 1];
  out += p.off[0];
  x += p.off[1];
  w += p.off[2];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
  const int64_t n0 = (int64_t)blockIdx.x * T;
  const size_t ssz = p.mode == NV__QMODE_AFFINE ? (size_t)dtype_size(p.sdt) : 1;
  for (int64_t bt = blockIdx.z; bt < p.B; bt += gridDim.z) {
    int64_t wb = p.wbatch ? bt : 0;
    for (int64_t m0 = (int64_t)blockIdx.y * T; m0 < p.M; m0 += (int64_t)gridDim.y * T) {
      float acc[4][4];
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0;
      for (int64_t k0 = 0; k0 < p.K; k0 += KS) {
        for (int t = tid; t < T * KS; t += 256) {
          int r = t / KS, c = t % KS;
          int64_t m = m0 + r, k = k0 + c;
          xs[r][c] = m < p.M && k < p.K ? F::ld(x[(bt * p.M + m) * p.K + k]) : 0.0f;
        }
        for (int t = tid; t < T * KS; t += 256) {
          int kk = t / T, c = t % T;
          int64_t k = k0 + kk, n = n0 + c;
          float v = 0;
          if (k < p.K && n < p.N) {
            int64_t r = p.transpose ? n : k, e = p.transpose ? k : n;
            int64_t rr = wb * p.R + r;
            const char *srow = (const char *)scales + (p.off[3] + rr * p.groups) * (int64_t)ssz;
            const char *brow = (const char *)biases + (p.off[4] + rr * p.groups) * (int64_t)ssz;
            uint32_t code = nv__qextract(w + rr * p.words, e, p.bits, p.words);
            v = deq(p, srow, brow, e / p.group_size, code);
          }
          ws[kk][c] = v;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < KS; kk++) {
          float a[4], b[4];
#pragma unroll
          for (int i = 0; i < 4; i++) a[i] = xs[ty + 16 * i][kk];
#pragma unroll
          for (int j = 0; j < 4; j++) b[j] = ws[kk][tx + 16 * j];
#pragma unroll
          for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) acc[i][j] = __fmaf_rn(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
      }
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
          int64_t m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;
          if (m < p.M && n < p.N) out[(bt * p.M + m) * p.N + n] = F::st(acc[i][j]);
        }
    }
  }
}

}  // namespace

extern "C" const void *nv__gpu_kernel_quantize(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)quantize_kernel<DT_F16>;
    case DT_BF16: return (const void *)quantize_kernel<DT_BF16>;
    case DT_F32: return (const void *)quantize_kernel<DT_F32>;
    default: return nullptr;
  }
}

extern "C" const void *nv__gpu_kernel_dequantize(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)dequantize_kernel<DT_F16>;
    case DT_BF16: return (const void *)dequantize_kernel<DT_BF16>;
    case DT_F32: return (const void *)dequantize_kernel<DT_F32>;
    case DT_F64: return (const void *)dequantize_kernel<DT_F64>;
    default: return nullptr;
  }
}

template <int DT> static const void *words_for_bits(int bits) {
  switch (bits) {
    case 2: return (const void *)dequantize_words_kernel<DT, 2>;
    case 4: return (const void *)dequantize_words_kernel<DT, 4>;
    case 8: return (const void *)dequantize_words_kernel<DT, 8>;
    default: return nullptr;
  }
}

extern "C" const void *nv__gpu_kernel_dequantize_words(int dtype, int bits) {
  switch (dtype) {
    case DT_F16: return words_for_bits<DT_F16>(bits);
    case DT_BF16: return words_for_bits<DT_BF16>(bits);
    case DT_F32: return words_for_bits<DT_F32>(bits);
    case DT_F64: return words_for_bits<DT_F64>(bits);
    default: return nullptr;
  }
}

template <int DT> static const void *gemv_for_bits(int bits) {
  switch (bits) {
    case 1: return (const void *)qmm_gemv_kernel<DT, 1>;
    case 2: return (const void *)qmm_gemv_kernel<DT, 2>;
    case 4: return (const void *)qmm_gemv_kernel<DT, 4>;
    case 8: return (const void *)qmm_gemv_kernel<DT, 8>;
    default: return (const void *)qmm_gemv_kernel<DT, 0>;
  }
}

extern "C" const void *nv__gpu_kernel_qmm_gemv(int dtype, int bits) {
  switch (dtype) {
    case DT_F16: return gemv_for_bits<DT_F16>(bits);
    case DT_BF16: return gemv_for_bits<DT_BF16>(bits);
    case DT_F32: return gemv_for_bits<DT_F32>(bits);
    case DT_F64: return gemv_for_bits<DT_F64>(bits);
    default: return nullptr;
  }
}

extern "C" const void *nv__gpu_kernel_qmm_tiled(int dtype) {
  switch (dtype) {
    case DT_F16: return (const void *)qmm_tiled_kernel<DT_F16>;
    case DT_BF16: return (const void *)qmm_tiled_kernel<DT_BF16>;
    case DT_F32: return (const void *)qmm_tiled_kernel<DT_F32>;
    case DT_F64: return (const void *)qmm_tiled_kernel<DT_F64>;
    default: return nullptr;
  }
}
