/* quantized_matmul's decode gemv (x @ w.T with M <= 8 rows of x per matrix), streaming the
 * packed weights at memory speed, and gather_qmm's (the same product, qmv_product, with each
 * pair's matrix of w read in place: by pair, or by runs of consecutive pairs of one matrix).
 * Each lane of a warp owns "units" of 32 consecutive elements of K (exactly BITS packed words
 * of a row, inside one group for group sizes >= 32, two for nvfp4's 16) and walks the row's
 * units 32 apart. Per step it first issues every load of the
 * step (UNROLL units of R rows of w with 16-, 8- or 4-byte loads that do not allocate in L1,
 * plus their scales and biases), then dequantizes in registers and multiplies with x, read
 * 4 or 8 elements at a time with 8- or 16-byte loads (x stays in L1: every warp of the SM
 * reads it).
 * One float32 sum per row of x and row of w; a warp-shuffle reduction once at the end.
 *
 * Affine dequantization for bits 2, 4 and 8 without shifts: a code at bit o (< 16) of a
 * 16-bit half of a word, or'ed into the float 2^23, reads as 2^23 + c * 2^o; minus 2^23 that
 * is exactly c * 2^o, and fma(c * 2^o, s * 2^-o, bias) is the fma(c, s, bias) of the CPU
 * kernel and the element-by-element gemv (s * 2^-o is exact for every scale but those below
 * 2^-112). Bits 1, 3, 5 and 6 (and 2 where a warp has several rows of w: the 8 variants of
 * s * 2^-o per row would cost too many registers) extract each code with a (funnel) shift.
 *
 * The host (quantize.c) sends here float16, bfloat16 and float32 products with K a multiple of
 * 32 (anything else goes to quantize.cu's gemv); x or w not aligned for the vector loads (a
 * view's offset) take an element-by-element loop here. */
#include <stdint.h>
#include <stdlib.h>

#include <atomic>

#include "cuda/convert.cuh"
#include "cuda/quantize_kernels.h"
#include "ops/quantize_codec.h"
#include "ops/quantize_params.h"

using namespace nvg;

namespace {

constexpr int UNIT = 32; /* elements of K per unit */

/* The work of a warp for at most MT rows of x and BITS-bit codes: R rows of w (more as M grows,
 * so that each load of x serves more rows: x's L1 traffic), UNROLL units per lane and step
 * (about 64 bytes of weights in flight per lane), dequantized CH elements at a time, and the
 * minimum resident blocks (register budgets 64, 128 and 168). */
template <int MT, int BITS> struct gemv_shape {
  static constexpr int R = MT == 1 ? 1 : MT <= 4 || BITS > 4 ? 2 : 4;
  static constexpr int U0 = 16 / (R * BITS);
  static constexpr int UNROLL = U0 < 1 ? 1 : U0 > 4 ? 4 : U0;
  static constexpr int CH = R == 4 ? 4 : 8;
  static constexpr int MINB = MT == 1 ? 8 : MT <= 4 ? 4 : 3;
  /* Shift-free affine codes (see above) where the shared scale variants s * 2^-o fit. */
  static constexpr bool MAGIC = BITS == 4 || BITS == 8 || (BITS == 2 && R == 1);
};

/* A float scale or bias of runtime dtype `dt` (the affine scales may differ from x's dtype). */
__device__ __forceinline__ float load_scale(int dt, const void *p, int64_t i) {
  switch (dt) {
    case DT_F16: return f16_to_f32(__ldg((const uint16_t *)p + i));
    case DT_BF16: return bf16_to_f32(__ldg((const uint16_t *)p + i));
    case DT_F64: return f64_to_f32(__ldg((const double *)p + i));
    default: return __ldg((const float *)p + i);
  }
}

/* The value of an fp-mode scale code (quantize.cu's scale_value, the CPU's nv__q_scale_value). */
__device__ __forceinline__ float fp_scale(int mode, uint8_t code) {
  if (mode == NV__QMODE_NVFP4) return fp8_to_f32(code);
  return code == 255 ? __uint_as_float(0x7fc00000u) : ldexpf(1.0f, (int)code - 127);
}

/* Streaming loads of packed weights: read once, kept out of L1 (which holds x). */
__device__ __forceinline__ uint4 ld_stream4(const uint32_t *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ld_stream2(const uint32_t *p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t ld_stream1(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

/* One unit of a row: BITS words at p (aligned to 16 bytes when BITS is a multiple of 4, to 8
 * when even). */
template <int BITS>
__device__ __forceinline__ void load_unit(const uint32_t *p, uint32_t *q) {
  if (BITS % 4 == 0) {
#pragma unroll
    for (int j = 0; j < BITS / 4; j++) {
      uint4 t = ld_stream4(p + 4 * j);
      q[4 * j] = t.x;
      q[4 * j + 1] = t.y;
      q[4 * j + 2] = t.z;
      q[4 * j + 3] = t.w;
    }
  } else if (BITS % 2 == 0) {
#pragma unroll
    for (int j = 0; j < BITS / 2; j++) {
      uint2 t = ld_stream2(p + 2 * j);
      q[2 * j] = t.x;
      q[2 * j + 1] = t.y;
    }
  } else {
#pragma unroll
    for (int j = 0; j < BITS; j++) q[j] = ld_stream1(p + j);
  }
}

/* Element k (0..31, a compile-time constant after unrolling) of a unit's bit stream q. */
template <int BITS>
__device__ __forceinline__ uint32_t unit_code(const uint32_t *q, int k) {
  constexpr uint32_t MASK = (1u << BITS) - 1;
  const int bit = k * BITS, wi = bit >> 5, o = bit & 31;
  if (o + BITS <= 32) return (q[wi] >> o) & MASK;
  return __funnelshift_r(q[wi], q[wi + 1], o) & MASK;
}

/* CH dequantized elements CH*c .. CH*c+CH-1 of one row's unit q. s and b: the affine scale
 * and bias of the unit (s0/s1 the fp-mode scales of its halves: elements 0-15 and 16-31).
 * MAGIC: bits 2, 4 or 8 read shift-free. */
template <int BITS, int MODE, int CH, bool MAGIC>
__device__ __forceinline__ void dequant(const uint32_t *q, int c, float s0, float s1, float b,
                                        float *dq) {
  constexpr uint32_t F2_23 = 0x4B000000u; /* the float 2^23 */
#pragma unroll
  for (int t = 0; t < CH; t++) {
    const int k = CH * c + t;
    if (MODE == NV__QMODE_AFFINE && MAGIC) {
      const int bit = k * BITS, wi = bit >> 5, o = bit & 15;
      const uint32_t src = (bit & 16) ? q[wi] >> 16 : q[wi];
      const float v = __uint_as_float((src & (((1u << BITS) - 1) << o)) | F2_23) - 8388608.0f;
      /* s * 2^-o: an exact power-of-two scaling (the compiler shares it between elements). */
      dq[t] = __fmaf_rn(v, __fmul_rn(s0, __uint_as_float((uint32_t)(127 - o) << 23)), b);
    } else if (MODE == NV__QMODE_AFFINE) {
      const float v = __uint_as_float(unit_code<BITS>(q, k) | F2_23) - 8388608.0f;
      dq[t] = __fmaf_rn(v, s0, b);
    } else {
      const uint32_t code = unit_code<BITS>(q, k);
      const float e = MODE == NV__QMODE_MXFP8 ? fp8_to_f32((uint8_t)code) : nv__qfp4_value(code);
      dq[t] = __fmul_rn(k < 16 ? s0 : s1, e);
    }
  }
}

/* N (4 or 8) consecutive elements of x at p (aligned to their size, or to 16 bytes) as
 * float32: 16-byte loads, or one 8-byte load. */
template <class F, int N>
__device__ __forceinline__ void load_x(const typename F::S *p, float *out) {
  typedef typename F::S S;
  constexpr int BYTES = N * (int)sizeof(S);
  if (BYTES % 16 == 0) {
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
  } else { /* BYTES == 8 (the only other case the kernel uses) */
    union {
      uint2 u;
      S s[N];
    } t;
    t.u = __ldg((const uint2 *)p);
#pragma unroll
    for (int k = 0; k < N; k++) out[k] = F::ld(t.s[k]);
  }
}

/* x's rows of one product: a batch of x, row m at base + m * K. */
template <class S> struct x_batch {
  const S *base;
  int64_t K;
  __device__ __forceinline__ const S *row(int m) const { return base + m * K; }
};

/* x's rows of one run of gathered pairs (one row each): any rows of x. */
template <class S, int MT> struct x_rows {
  const S *r[MT];
  __device__ __forceinline__ const S *row(int m) const { return r[m]; }
};

/* One warp's product: rows n0 .. n0+R-1 of w's matrix wb (rows past N repeat row N-1 and are
 * not stored) times the M (<= MT) rows of x that `xr` gives, stored to output rows orow ..
 * orow+M-1 (of N elements each). `aligned`: w and x are aligned for the vector loads. */
template <class F, int BITS, int MODE, int MT, class XR>
__device__ __forceinline__ void qmv_product(typename F::S *out, int64_t orow, const XR &xr,
                                            int M, const uint32_t *w, const void *scales,
                                            const void *biases, int64_t wb, int64_t n0,
                                            bool aligned, const nv__gpu_quant_params &p) {
  typedef typename F::S S;
  typedef gemv_shape<MT, BITS> SH;
  constexpr int R = SH::R, UNROLL = SH::UNROLL, CH = SH::CH;
  constexpr int NS = MODE == NV__QMODE_NVFP4 ? 2 : 1; /* scales per unit */
  constexpr bool AFF = MODE == NV__QMODE_AFFINE;
  const int lane = threadIdx.x & 31;
  const int64_t U = aligned ? p.K / UNIT : 0;
  const int gshift = __ffs(p.group_size) - 1; /* group sizes are powers of two */
  const int64_t ssz = AFF ? dtype_size(p.sdt) : 1;
  const uint32_t *wr[R];
  const char *sr[R], *br[R];
#pragma unroll
  for (int r = 0; r < R; r++) {
    const int64_t rr = wb * p.R + (n0 + r < p.N ? n0 + r : p.N - 1);
    wr[r] = w + rr * p.words;
    sr[r] = (const char *)scales + (p.off[3] + rr * p.groups) * ssz;
    br[r] = (const char *)biases + (p.off[4] + rr * p.groups) * ssz;
  }
  float acc[MT][R];
#pragma unroll
  for (int m = 0; m < MT; m++)
#pragma unroll
    for (int r = 0; r < R; r++) acc[m][r] = 0;
  if (!aligned) {
    for (int64_t e = lane; e < p.K; e += 32) {
      const int64_t g = e >> gshift;
#pragma unroll
      for (int r = 0; r < R; r++) {
        const uint32_t c = nv__qextract(wr[r], e, BITS, p.words);
        float v;
        if (AFF)
          v = __fmaf_rn((float)c, load_scale(p.sdt, sr[r], g), load_scale(p.sdt, br[r], g));
        else
          v = __fmul_rn(fp_scale(MODE, ((const uint8_t *)sr[r])[g]),
                        MODE == NV__QMODE_MXFP8 ? fp8_to_f32((uint8_t)c) : nv__qfp4_value(c));
#pragma unroll
        for (int m = 0; m < MT; m++)
          if (m < M) acc[m][r] = __fmaf_rn(v, F::ld(xr.row(m)[e]), acc[m][r]);
      }
    }
  }
  for (int64_t u0 = lane; u0 < U; u0 += 32 * UNROLL) {
    /* Every load of the step first: weights, then their scales and biases. */
    uint32_t q[UNROLL][R][BITS];
    float sc[UNROLL][R][NS], bi[UNROLL][R];
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
      const int64_t u = u0 + 32 * j;
      if (u < U) {
#pragma unroll
        for (int r = 0; r < R; r++) load_unit<BITS>(wr[r] + u * BITS, q[j][r]);
      }
    }
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
      const int64_t u = u0 + 32 * j;
      if (u < U) {
        const int64_t g = (u * UNIT) >> gshift;
#pragma unroll
        for (int r = 0; r < R; r++) {
          if (AFF) {
            sc[j][r][0] = load_scale(p.sdt, sr[r], g);
            bi[j][r] = load_scale(p.sdt, br[r], g);
          } else {
            bi[j][r] = 0;
#pragma unroll
            for (int h = 0; h < NS; h++)
              sc[j][r][h] = fp_scale(MODE, __ldg((const uint8_t *)sr[r] + g + h));
          }
        }
      }
    }
#pragma unroll
    for (int j = 0; j < UNROLL; j++) {
      const int64_t u = u0 + 32 * j;
      if (u >= U) break; /* units only run out at the row's end */
#pragma unroll
      for (int c = 0; c < UNIT / CH; c++) {
        float dq[R][CH];
#pragma unroll
        for (int r = 0; r < R; r++)
          dequant<BITS, MODE, CH, SH::MAGIC>(q[j][r], c, sc[j][r][0], sc[j][r][NS - 1],
                                             bi[j][r], dq[r]);
#pragma unroll
        for (int m = 0; m < MT; m++) {
          if (m >= M) break;
          float xv[CH];
          load_x<F, CH>(xr.row(m) + u * UNIT + CH * c, xv);
#pragma unroll
          for (int r = 0; r < R; r++) {
            float a = acc[m][r];
#pragma unroll
            for (int t = 0; t < CH; t++) a = __fmaf_rn(dq[r][t], xv[t], a);
            acc[m][r] = a;
          }
        }
      }
    }
  }
  /* Butterfly sums (every lane ends with the totals); output i is stored by lane i % 32. */
#pragma unroll
  for (int m = 0; m < MT; m++) {
    if (m >= M) break;
#pragma unroll
    for (int r = 0; r < R; r++) {
      float s = acc[m][r];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == ((m * R + r) & 31) && n0 + r < p.N) out[(orow + m) * p.N + n0 + r] = F::st(s);
    }
  }
}

/* Packed rows and x aligned for the vector loads (every row and unit start is when their
 * starts are, K being a multiple of 32), else (a view's offset; uniform over the grid) element
 * by element. */
template <int BITS, class S>
__device__ __forceinline__ bool qmv_aligned(const uint32_t *w, const S *x) {
  constexpr uintptr_t WALIGN = BITS % 4 == 0 ? 16 : BITS % 2 == 0 ? 8 : 4;
  return ((uintptr_t)w & (WALIGN - 1)) == 0 && ((uintptr_t)x & 15) == 0;
}

/* The first row of w of this warp: (blockIdx.x * WARPS + warp) * R. */
template <int MT, int BITS> __device__ __forceinline__ int64_t qmv_first_row() {
  return ((int64_t)blockIdx.x * NV__GPU_QMV_WARPS + (threadIdx.x >> 5)) * gemv_shape<MT, BITS>::R;
}

/* Index `v` of an axis of `size` wrapped once (negative from the end) into *w; false (and
 * the node's check record raised) when out of range. Uniform over a warp. */
__device__ __forceinline__ bool wrap_index(int64_t v, int64_t size, nv__gpu_bad *bad,
                                           int64_t *w) {
  const int64_t t = v < 0 ? v + size : v;
  if (t < 0 || t >= size) {
    if ((threadIdx.x & 31) == 0) nv__gpu_raise_bad(bad, (long long)v, (long long)size);
    return false;
  }
  *w = t;
  return true;
}

/* quantized_matmul. Block NV__GPU_QMV_WARPS warps; warp w of block x computes rows
 * n0 .. n0+R-1 of w for every row of x in batch blockIdx.y (grid-stride over batches). MT: at
 * most this many rows of x. */
template <int DT, int BITS, int MODE, int MT>
__global__ void __launch_bounds__(NV__GPU_QMV_WARPS * 32, (gemv_shape<MT, BITS>::MINB))
    qmv_kernel(typename f32io<DT>::S *out, const typename f32io<DT>::S *x, const uint32_t *w,
               const void *scales, const void *biases, nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  typedef typename F::S S;
  out += p.off[0];
  x += p.off[1];
  w += p.off[2];
  const int64_t n0 = qmv_first_row<MT, BITS>();
  if (n0 >= p.N) return; /* the whole warp */
  const bool aligned = qmv_aligned<BITS>(w, x);
  for (int64_t bt = blockIdx.y; bt < p.B; bt += gridDim.y) {
    const x_batch<S> xr = {x + bt * p.M * p.K, p.K};
    qmv_product<F, BITS, MODE, MT>(out, bt * p.M, xr, (int)p.M, w, scales, biases,
                                   p.wbatch ? bt : 0, n0, aligned, p);
  }
}

/* gather_qmm, one pair at a time: as qmv_kernel with batch blockIdx.y (grid-stride over the
 * L = p.B pairs) being x's batch lhs[l] times w's matrix rhs[l]. */
template <int DT, int BITS, int MODE, int MT>
__global__ void __launch_bounds__(NV__GPU_QMV_WARPS * 32, (gemv_shape<MT, BITS>::MINB))
    gather_qmv_kernel(typename f32io<DT>::S *out, const typename f32io<DT>::S *x,
                      const uint32_t *w, const void *scales, const void *biases,
                      const int64_t *lhs, const int64_t *rhs, nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  typedef typename F::S S;
  out += p.off[0];
  x += p.off[1];
  w += p.off[2];
  lhs += p.off[5];
  rhs += p.off[6];
  const int64_t n0 = qmv_first_row<MT, BITS>();
  if (n0 >= p.N) return; /* the whole warp */
  const bool aligned = qmv_aligned<BITS>(w, x);
  for (int64_t l = blockIdx.y; l < p.B; l += gridDim.y) {
    int64_t xi, wi;
    if (!wrap_index(__ldg(lhs + l), p.Bx, p.bad, &xi)) continue;
    if (!wrap_index(__ldg(rhs + l), p.E, p.bad, &wi)) continue;
    const x_batch<S> xr = {x + xi * p.M * p.K, p.K};
    qmv_product<F, BITS, MODE, MT>(out, l * p.M, xr, (int)p.M, w, scales, biases, wi, n0,
                                   aligned, p);
  }
}

/* gather_qmm by runs (x has one row per pair, p.M == 1): block row blockIdx.y walks chunks of
 * MT consecutive pairs (grid-stride); in each chunk the runs of consecutive pairs of one
 * wrapped rhs index are one product of up to MT rows of x (the rows lhs[l]) with that matrix,
 * so sorted pairs read each matrix about once per chunk instead of once per pair. Any order
 * of the pairs gives the same result (shorter runs). */
template <int DT, int BITS, int MODE, int MT>
__global__ void __launch_bounds__(NV__GPU_QMV_WARPS * 32, (gemv_shape<MT, BITS>::MINB))
    gather_runs_kernel(typename f32io<DT>::S *out, const typename f32io<DT>::S *x,
                       const uint32_t *w, const void *scales, const void *biases,
                       const int64_t *lhs, const int64_t *rhs, nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  typedef typename F::S S;
  out += p.off[0];
  x += p.off[1];
  w += p.off[2];
  lhs += p.off[5];
  rhs += p.off[6];
  const int64_t n0 = qmv_first_row<MT, BITS>();
  if (n0 >= p.N) return; /* the whole warp */
  const bool aligned = qmv_aligned<BITS>(w, x);
  const int64_t chunks = (p.B + MT - 1) / MT;
  for (int64_t ch = blockIdx.y; ch < chunks; ch += gridDim.y) {
    const int64_t c0 = ch * MT, c1 = c0 + MT < p.B ? c0 + MT : p.B;
    for (int64_t i = c0; i < c1;) {
      int64_t wi, j = i + 1;
      if (!wrap_index(__ldg(rhs + i), p.E, p.bad, &wi)) {
        i++;
        continue;
      }
      /* A raw index out of range ends the run (it is reported as the next run's first). */
      while (j < c1) {
        const int64_t v = __ldg(rhs + j), t = v < 0 ? v + p.E : v;
        if (t < 0 || t >= p.E || t != wi) break;
        j++;
      }
      const int M = (int)(j - i);
      x_rows<S, MT> xr;
      bool ok = true;
#pragma unroll
      for (int m = 0; m < MT; m++) {
        int64_t xi = 0;
        if (m < M) ok &= wrap_index(__ldg(lhs + i + m), p.Bx, p.bad, &xi);
        xr.r[m] = x + xi * p.K;
      }
      if (ok)
        qmv_product<F, BITS, MODE, MT>(out, i, xr, M, w, scales, biases, wi, n0, aligned, p);
      i = j;
    }
  }
}

/* ---- The split-K decode gemv: one row of x, affine 2-, 4- or 8-bit codes (the default) ----
 * The streaming kernel above spends about nine instructions per weight at 4 bits: x is loaded
 * and converted for every weight, and each shift-free code takes an and and an or (a lop3
 * holds one 32-bit immediate, so the compiler splits (q & mask) | 2^23). Here a block of KW =
 * ceil(K / 1024) warps splits K: lane l of warp v owns unit 32 v + l of every row (32 elements,
 * one 16-, 8- or 4-byte load), so its 32 elements of x are converted to float32 once per
 * product and held in registers, and the and-or is one lop3 with 2^23 in a register: four
 * instructions a weight (lop3, the subtraction of 2^23, the dequantizing fma, the product's
 * fma), the same arithmetic as qmv_product's (each weight fma(c * 2^o, s * 2^-o, b), then
 * times x, summed in float32; only the order of the sums differs). The grid is persistent
 * over the rows (as many blocks as are resident, from the occupancy API: nv__gpu_qmv_v2_plan
 * below): blocks walk sets of RS rows; a set's sums leave each warp by a reduce-scatter of
 * shuffles and meet across the KW warps in shared memory. grid.y walks the products
 * (quantized_matmul's batches, gather_qmm's pairs). The weights' 16-byte loads of a warp are
 * 512 contiguous bytes of one row. Two variants (bench/gpu/qmv_sweep.cu's xreg.k4.r2.pf and
 * xreg.k4.r4):
 *   RS 2, PF: the next set's weights, scales and biases are loaded before the current set is
 *     computed (two sets' registers: 96 a thread at 4 bits);
 *   RS 4, no PF: one set's registers (96 a thread at 4 bits), the next set loaded once the
 *     current one's sums are stored. RS 4 with PF (the former NUVEC_QMV_V2=1 kernel) takes 128
 *     registers, so 4 blocks of 4 warps an SM instead of 5, and was slower than the streaming
 *     kernel at N = 14336.
 * nv__gpu_qmv_v2_plan (below; quantize_kernels.h says why) picks the variant by shape. */
constexpr int V2_MAX_RS = 4;

__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

/* 2^23's bits in a register the compiler cannot fold back into an immediate. */
__device__ __forceinline__ uint32_t magic_reg() {
  uint32_t m;
  asm volatile("mov.b32 %0, 0x4B000000;" : "=r"(m));
  return m;
}

/* One lane's loads for a set: its unit of each of the set's RS rows, with the unit's scale and
 * bias. */
template <int BITS, int RS> struct v2_set {
  uint32_t q[RS][BITS];
  float s[RS], b[RS];
};

/* A lane's view of one product's matrix: its unit in row 0 (w), the unit's scale and bias in
 * row 0 (s, b: elements of dtype p.sdt). The strides and N stay in the kernel's parameters
 * (constant memory, no registers). */
struct v2_lane {
  const uint32_t *w;
  const char *s, *b;
  bool live; /* a unit of K (lanes past K's last unit keep zero sums and load nothing) */
};

/* Set `set`'s loads (rows past N repeat row N - 1 and are not stored). */
template <int BITS, int RS>
__device__ __forceinline__ void v2_load(v2_set<BITS, RS> &S, const v2_lane &L, int64_t set,
                                        const nv__gpu_quant_params &p) {
  if (!L.live) return;
  int64_t n[RS];
#pragma unroll
  for (int r = 0; r < RS; r++) n[r] = set * RS + r < p.N ? set * RS + r : p.N - 1;
#pragma unroll
  for (int r = 0; r < RS; r++) load_unit<BITS>(L.w + n[r] * p.words, S.q[r]);
#pragma unroll
  for (int r = 0; r < RS; r++) {
    S.s[r] = load_scale(p.sdt, L.s, n[r] * p.groups);
    S.b[r] = load_scale(p.sdt, L.b, n[r] * p.groups);
  }
}

/* The set's RS partial sums of this lane (zero for a lane past K). */
template <int BITS, int RS>
__device__ __forceinline__ void v2_compute(const v2_set<BITS, RS> &S, const float (&xf)[UNIT],
                                           bool live, uint32_t magic, float (&acc)[RS]) {
#pragma unroll
  for (int r = 0; r < RS; r++) acc[r] = 0.0f;
  if (!live) return;
#pragma unroll
  for (int r = 0; r < RS; r++) {
    float a = 0.0f;
#pragma unroll
    for (int k = 0; k < UNIT; k++) {
      const int bit = k * BITS, wi = bit >> 5, o = bit & 15;
      const uint32_t src = (bit & 16) ? S.q[r][wi] >> 16 : S.q[r][wi];
      const float v = __uint_as_float(and_or(src, ((1u << BITS) - 1) << o, magic)) - 8388608.0f;
      /* s * 2^-o: an exact power-of-two scaling, shared by the elements of one o. */
      const float dq = __fmaf_rn(v, __fmul_rn(S.s[r], __uint_as_float((uint32_t)(127 - o) << 23)),
                                 S.b[r]);
      a = __fmaf_rn(dq, xf[k], a);
    }
    acc[r] = a;
  }
}

/* V2_RS values a lane (one a row) summed over the warp: row lane / (32 / V2_RS)'s total (a
 * reduce-scatter of V2_RS - 1 shuffles, then a butterfly over the lanes of one row). */
template <int V2_RS> __device__ __forceinline__ float v2_reduce(float (&v)[V2_RS], int lane) {
  int o = 16;
#pragma unroll
  for (int n = V2_RS; n > 1; n >>= 1, o >>= 1) {
    const bool up = (lane & o) != 0;
#pragma unroll
    for (int i = 0; i < n / 2; i++) {
      const float send = up ? v[i] : v[i + n / 2], keep = up ? v[i + n / 2] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
  }
  float s = v[0];
#pragma unroll
  for (; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

/* The set's totals to out (row n of the product at out[n]): each warp's in shared memory
 * (double-buffered by the parity `it` of the block's set, so one barrier a set), summed by
 * warp 0 in warp order. */
template <class F, int RS>
__device__ __forceinline__ void v2_store(typename F::S *out, float (&acc)[RS], int64_t set,
                                         int it, int lane, int warp, int kw,
                                         float (*red)[NV__GPU_QMV_V2_MAX_WARPS][V2_MAX_RS],
                                         int64_t N) {
  const float tot = v2_reduce<RS>(acc, lane);
  const int row = lane / (32 / RS);
  if (lane % (32 / RS) == 0) red[it & 1][warp][row] = tot;
  __syncthreads();
  if (warp == 0 && lane < RS && set * RS + lane < N) {
    float s = red[it & 1][0][lane];
    for (int k = 1; k < kw; k++) s += red[it & 1][k][lane];
    out[set * RS + lane] = F::st(s);
  }
}

/* One product of a block: x's row xrow times the rows of matrix wb of w, to out's row of N
 * elements; the block walks sets blockIdx.x, blockIdx.x + gridDim.x, ... The caller
 * guarantees K == UNIT * units with units <= 32 * blockDim.x / 32, and 16-byte aligned x and
 * w. `it` counts the block's sets over its products (the shared buffers' parity). */
template <class F, int BITS, int RS, bool PF>
__device__ __forceinline__ void v2_product(typename F::S *out, const typename F::S *xrow,
                                           const uint32_t *w, const char *sb, const char *bb,
                                           int64_t wb, const nv__gpu_quant_params &p,
                                           float (*red)[NV__GPU_QMV_V2_MAX_WARPS][V2_MAX_RS],
                                           int &it) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, kw = blockDim.x >> 5;
  const int64_t u = (int64_t)warp * 32 + lane, sets = (p.N + RS - 1) / RS;
  int64_t set = blockIdx.x;
  if (set >= sets) return; /* the whole block */
  const int64_t ssz = dtype_size(p.sdt), row0 = wb * p.R;
  const int64_t g = (u * UNIT) >> (__ffs(p.group_size) - 1);
  const v2_lane L = {w + row0 * p.words + u * BITS,
                     sb + (p.off[3] + row0 * p.groups + g) * ssz,
                     bb + (p.off[4] + row0 * p.groups + g) * ssz, u < p.K / UNIT};
  v2_set<BITS, RS> A;
  v2_load<BITS, RS>(A, L, set, p);
  /* x's unit while the first set's loads are in flight. */
  float xf[UNIT];
#pragma unroll
  for (int k = 0; k < UNIT; k++) xf[k] = 0.0f;
  if (L.live) {
    constexpr int CHX = sizeof(typename F::S) == 4 ? 4 : 8; /* 16 bytes a load */
#pragma unroll
    for (int c = 0; c < UNIT / CHX; c++) load_x<F, CHX>(xrow + u * UNIT + CHX * c, xf + CHX * c);
  }
  const uint32_t magic = magic_reg();
  float acc[RS];
  if (PF) {
    v2_set<BITS, RS> Bn; /* the prefetch's second set */
    for (;;) {
      int64_t next = set + gridDim.x;
      if (next < sets) v2_load<BITS, RS>(Bn, L, next, p);
      v2_compute<BITS, RS>(A, xf, L.live, magic, acc);
      v2_store<F, RS>(out, acc, set, it++, lane, warp, kw, red, p.N);
      if (next >= sets) return;
      set = next;
      next = set + gridDim.x;
      if (next < sets) v2_load<BITS, RS>(A, L, next, p);
      v2_compute<BITS, RS>(Bn, xf, L.live, magic, acc);
      v2_store<F, RS>(out, acc, set, it++, lane, warp, kw, red, p.N);
      if (next >= sets) return;
      set = next;
    }
  } else {
    for (;;) {
      const int64_t next = set + gridDim.x;
      v2_compute<BITS, RS>(A, xf, L.live, magic, acc);
      v2_store<F, RS>(out, acc, set, it++, lane, warp, kw, red, p.N);
      if (next >= sets) return;
      set = next;
      v2_load<BITS, RS>(A, L, set, p);
    }
  }
}

/* Registers a thread: 96 keep 5 blocks of 4 warps (K = 4096) resident an SM, as the sweep's
 * xreg.k4.r2.pf and xreg.k4.r4 (a warp's registers are allocated 256 at a time, so 97 to 104
 * a thread allow only 4: the former kernel's 128 did). 8-bit codes hold 8 words a row (in 96
 * registers the 4-row set spills): at most 128 (4 blocks). Every KW up to
 * NV__GPU_QMV_V2_MAX_WARPS stays launchable (512 threads of 128 registers fill the SM's 64K). */
template <int BITS, bool PF> struct v2_regs {
  static constexpr int N = BITS == 8 ? 128 : 96;
};

/* quantized_matmul with one row of x (p.M == 1): product bt of grid.y's walk is x's batch bt
 * times w's matrix bt (p.wbatch) or 0. */
template <int DT, int BITS, int RS, bool PF>
__global__ void __maxnreg__((v2_regs<BITS, PF>::N))
    qmv_v2_kernel(typename f32io<DT>::S *out, const typename f32io<DT>::S *x, const uint32_t *w,
                  const void *scales, const void *biases, nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  __shared__ float red[2][NV__GPU_QMV_V2_MAX_WARPS][V2_MAX_RS];
  out += p.off[0];
  x += p.off[1];
  w += p.off[2];
  int it = 0;
  for (int64_t bt = blockIdx.y; bt < p.B; bt += gridDim.y)
    v2_product<F, BITS, RS, PF>(out + bt * p.N, x + bt * p.K, w, (const char *)scales,
                                (const char *)biases, p.wbatch ? bt : 0, p, red, it);
}

/* gather_qmm with one row of x per pair (p.M == 1): pair l of grid.y's walk is x's batch
 * lhs[l] times w's matrix rhs[l] (an index out of range raises the check record and skips
 * the pair, as gather_qmv_kernel). */
template <int DT, int BITS, int RS, bool PF>
__global__ void __maxnreg__((v2_regs<BITS, PF>::N))
    gather_qmv_v2_kernel(typename f32io<DT>::S *out, const typename f32io<DT>::S *x,
                         const uint32_t *w, const void *scales, const void *biases,
                         const int64_t *lhs, const int64_t *rhs, nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  __shared__ float red[2][NV__GPU_QMV_V2_MAX_WARPS][V2_MAX_RS];
  out += p.off[0];
  x += p.off[1];
  w += p.off[2];
  lhs += p.off[5];
  rhs += p.off[6];
  int it = 0;
  for (int64_t l = blockIdx.y; l < p.B; l += gridDim.y) {
    int64_t xi, wi;
    if (!wrap_index(__ldg(lhs + l), p.Bx, p.bad, &xi)) continue;
    if (!wrap_index(__ldg(rhs + l), p.E, p.bad, &wi)) continue;
    v2_product<F, BITS, RS, PF>(out + l * p.N, x + xi * p.K, w, (const char *)scales,
                                (const char *)biases, wi, p, red, it);
  }
}

template <int DT, int BITS, int RS, bool PF> const void *v2_kernel(bool gather) {
  return gather ? (const void *)gather_qmv_v2_kernel<DT, BITS, RS, PF>
                : (const void *)qmv_v2_kernel<DT, BITS, RS, PF>;
}

/* The variant of `config` (NV__GPU_QMV_V2_R2_PF or NV__GPU_QMV_V2_R4). */
template <int DT, int BITS> const void *v2_bits(int config, bool gather) {
  return config == NV__GPU_QMV_V2_R2_PF ? v2_kernel<DT, BITS, 2, true>(gather)
                                        : v2_kernel<DT, BITS, 4, false>(gather);
}

template <int DT> const void *v2_for(int bits, int config, bool gather) {
  switch (bits) {
    case 2: return v2_bits<DT, 2>(config, gather);
    case 4: return v2_bits<DT, 4>(config, gather);
    case 8: return v2_bits<DT, 8>(config, gather);
    default: return nullptr;
  }
}

/* ---- The tensor-core decode gemv: 4-bit affine codes, float16/bfloat16 x ----
 * The streaming kernel above spends about ten instructions per weight (unpack, convert,
 * scale, multiply, x's conversion), so at 4 bits it is bound by issue, not by memory. Here
 * the codes go to mma.sync m16n8k16 as 16-bit integers held exactly: two codes of a word
 * per lop3, or'ed into the exponent of 128 (bfloat16: 128 + c) or 1024 (float16, where
 * 1024 + c then loses its 1024 in an exact subtraction). The 8 columns of the product are the
 * rows of x (M <= 8); the scale and bias of each group apply to the group's partial sums in
 * float32: s * sum(c x) + b * sum(x), sum(x) coming from one more mma with a tile of ones
 * (bfloat16's 128 folds into the bias: b - 128 s). The k order inside a mma is free as long
 * as both operands use it and each mma's k stay in one group: with CPG = group size / 32
 * (at most 4) words per load, lane (g, q) of a 128-element superchunk's row holds words
 * 4 CPG gi + CPG q + jj (group gi of the superchunk, one load per group), word jj being
 * chunk gi CPG + jj's operand; the mma takes pairs (c_i, c_i+4) of it and the matching pairs
 * of x through prmt from x's 16-byte row piece in shared memory (x is staged there per
 * batch). A block holds 16 rows of w; its QTC_WARPS warps take every QTC_WARPS-th
 * superchunk of K, U at a time (every load of a round issued first; the first round's while
 * x is staged, so that a K of QTC_WARPS U superchunks costs one memory round trip), and meet
 * in shared memory at the end. GPC: groups per superchunk (group
 * size 128 or more: 1, 64: 2, 32: 4). Infinite x gives NaN where the weights' signs mix, as
 * the factored form of MLX's kernels; the streaming kernel takes every other case. Opt-in
 * (NUVEC_QMV_TC=1, quantize.c): on the H200 it took 15 us for 4096 x 4096 (4-bit, group 64,
 * one row of x) at 25% occupancy and 13% of DRAM bandwidth, against the streaming kernel's
 * 12.4: latency-bound (two blocks an SM, 128 registers), not yet the 3-4 us the bytes allow. */
constexpr int QTC_WARPS = NV__GPU_QMV_TC_THREADS / 32;

template <int DT> struct tc_type;
template <> struct tc_type<DT_BF16> {
  static constexpr uint32_t MAGIC = 0x43004300u, ONES = 0x3f803f80u;
  static constexpr float OFFSET = 128.0f; /* folded into the bias */
};
template <> struct tc_type<DT_F16> {
  static constexpr uint32_t MAGIC = 0x64006400u, ONES = 0x3c003c00u;
  static constexpr float OFFSET = 0.0f; /* subtracted exactly */
};

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

/* Codes i and i + 4 of word v as a pair of 16-bit floats (exact small integers). */
template <int DT> __device__ __forceinline__ uint32_t code_pair(uint32_t v, int i) {
  uint32_t r = ((v >> (4 * i)) & 0x000f000fu) | tc_type<DT>::MAGIC;
  if (DT == DT_F16) asm("sub.rn.f16x2 %0, %0, %1;" : "+r"(r) : "r"(tc_type<DT>::MAGIC));
  return r;
}

template <int DT>
__device__ __forceinline__ void mma_tc(float *d, const uint32_t *a, uint32_t b0, uint32_t b1) {
  if (DT == DT_F16)
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* One round of a warp's loads: the packed words (CPG per load, one load per group) of rows
 * g and g + 8 of the tile and their groups' scales and biases, for superchunks base,
 * base + QTC_WARPS, ... (U of them, those below NSC). */
template <int GPC, int U>
__device__ __forceinline__ void qtc_load(uint32_t (&wv)[U][2][4], float (&sv)[U][2][GPC],
                                         float (&bv)[U][2][GPC], const uint32_t *const (&wr)[2],
                                         const char *const (&sr)[2], const char *const (&br)[2],
                                         int64_t base, int64_t NSC, int gshift, int sdt) {
  constexpr int CPG = 4 / GPC;
#pragma unroll
  for (int u = 0; u < U; u++) {
    const int64_t sc = base + (int64_t)u * QTC_WARPS;
    if (sc >= NSC) break;
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int gi = 0; gi < GPC; gi++) {
        const uint32_t *a = wr[h] + sc * 16 + 4 * CPG * gi;
        uint32_t *o = wv[u][h] + CPG * gi;
        if (CPG == 4) {
          const uint4 v = ld_stream4(a);
          o[0] = v.x, o[1] = v.y, o[2] = v.z, o[3] = v.w;
        } else if (CPG == 2) {
          const uint2 v = ld_stream2(a);
          o[0] = v.x, o[1] = v.y;
        } else {
          o[0] = ld_stream1(a);
        }
      }
#pragma unroll
    for (int gi = 0; gi < GPC; gi++) {
      const int64_t grp = (sc * 128 + 32 * CPG * gi) >> gshift;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        sv[u][h][gi] = load_scale(sdt, sr[h], grp);
        bv[u][h][gi] = load_scale(sdt, br[h], grp);
      }
    }
  }
}

template <int DT, int GPC>
__global__ void __launch_bounds__(QTC_WARPS * 32, 2)
    qmv_tc_kernel(typename f32io<DT>::S *out, const typename f32io<DT>::S *x, const uint32_t *w,
                  const void *scales, const void *biases, nv__gpu_quant_params p) {
  typedef f32io<DT> F;
  constexpr int CPG = 4 / GPC;           /* chunks of 32 per group */
  constexpr int U = GPC == 4 ? 2 : 4;    /* superchunks per warp and round (registers) */
  extern __shared__ uint4 qtc_smem[];
  uint16_t *xs = (uint16_t *)qtc_smem; /* M rows of K + 8 (16 bytes of padding) */
  __shared__ float red[QTC_WARPS][16][8];
  out += p.off[0];
  x += p.off[1];
  w += p.off[2];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int M = (int)p.M;
  const int64_t K = p.K, XS = K + 8, NSC = K / 128;
  const int64_t row0 = (int64_t)blockIdx.x * 16;
  const int gshift = __ffs(p.group_size) - 1;
  const int64_t ssz = dtype_size(p.sdt);
  for (int64_t bt = blockIdx.y; bt < p.B; bt += gridDim.y) {
    const int64_t wb = p.wbatch ? bt : 0;
    const uint32_t *wr[2];
    const char *sr[2], *br[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int64_t n = row0 + 8 * h + g;
      const int64_t rr = wb * p.R + (n < p.N ? n : p.N - 1);
      wr[h] = w + rr * p.words + CPG * q;
      sr[h] = (const char *)scales + (p.off[3] + rr * p.groups) * ssz;
      br[h] = (const char *)biases + (p.off[4] + rr * p.groups) * ssz;
    }
    /* The first round's weights and scales are in flight while x is staged. */
    uint32_t wv[U][2][4];
    float sv[U][2][GPC], bv[U][2][GPC];
    qtc_load<GPC, U>(wv, sv, bv, wr, sr, br, warp, NSC, gshift, p.sdt);
    __syncthreads(); /* the previous batch's reads of xs and red are done */
    const uint4 *xb = (const uint4 *)(x + bt * p.M * K);
    const int64_t per_row = K / 8;
    for (int64_t i = threadIdx.x; i < M * per_row; i += blockDim.x) {
      const int64_t r = i / per_row, c = i - r * per_row;
      *(uint4 *)(xs + r * XS + c * 8) = __ldg(xb + i);
    }
    __syncthreads();
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint16_t *xrow = xs + (g < M ? g : 0) * XS + 8 * CPG * q;
    for (int64_t base = warp; base < NSC; base += (int64_t)QTC_WARPS * U) {
      if (base != warp) qtc_load<GPC, U>(wv, sv, bv, wr, sr, br, base, NSC, gshift, p.sdt);
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int64_t sc = base + (int64_t)u * QTC_WARPS;
        if (sc >= NSC) break;
#pragma unroll
        for (int gi = 0; gi < GPC; gi++) {
          float d[4] = {0.0f, 0.0f, 0.0f, 0.0f}, dx[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
          for (int jj = 0; jj < CPG; jj++) {
            uint4 xv = make_uint4(0, 0, 0, 0);
            if (g < M) xv = *(const uint4 *)(xrow + sc * 128 + 32 * CPG * gi + 8 * jj);
            const uint32_t ones[4] = {tc_type<DT>::ONES, tc_type<DT>::ONES, tc_type<DT>::ONES,
                                      tc_type<DT>::ONES};
            const uint32_t v0 = wv[u][0][gi * CPG + jj], v1 = wv[u][1][gi * CPG + jj];
#pragma unroll
            for (int st = 0; st < 2; st++) {
              const uint32_t lo = st ? xv.y : xv.x, hi = st ? xv.w : xv.z;
              const uint32_t b0 = prmt(lo, hi, 0x5410), b1 = prmt(lo, hi, 0x7632);
              const uint32_t a[4] = {code_pair<DT>(v0, 2 * st), code_pair<DT>(v1, 2 * st),
                                     code_pair<DT>(v0, 2 * st + 1), code_pair<DT>(v1, 2 * st + 1)};
              mma_tc<DT>(d, a, b0, b1);
              mma_tc<DT>(dx, ones, b0, b1);
            }
          }
          /* s * sum(c x) + (b - OFFSET s) * sum(x); dx[0], dx[1]: sum(x) of columns 2q, 2q+1. */
#pragma unroll
          for (int h = 0; h < 2; h++) {
            const float s = sv[u][h][gi];
            const float b = __fmaf_rn(-tc_type<DT>::OFFSET, s, bv[u][h][gi]);
            acc[2 * h] = __fmaf_rn(s, d[2 * h], __fmaf_rn(b, dx[0], acc[2 * h]));
            acc[2 * h + 1] = __fmaf_rn(s, d[2 * h + 1], __fmaf_rn(b, dx[1], acc[2 * h + 1]));
          }
        }
      }
    }
    /* acc[r]: row g (r < 2) or g + 8 of the tile, column 2q + (r & 1). */
#pragma unroll
    for (int r = 0; r < 4; r++) red[warp][g + 8 * (r >> 1)][2 * q + (r & 1)] = acc[r];
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * M; i += blockDim.x) {
      const int m = i >> 4, r = i & 15;
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < QTC_WARPS; k++) s += red[k][r][m];
      if (row0 + r < p.N) out[(bt * p.M + m) * p.N + row0 + r] = F::st(s);
    }
  }
}

template <int DT> const void *qmv_tc_for(int group_size) {
  if (group_size >= 128) return (const void *)qmv_tc_kernel<DT, 1>;
  if (group_size == 64) return (const void *)qmv_tc_kernel<DT, 2>;
  if (group_size == 32) return (const void *)qmv_tc_kernel<DT, 4>;
  return nullptr;
}

/* The kernel for m rows of x: quantized_matmul's (gather false), gather_qmm's by pair (runs 0)
 * or by runs of MT = runs pairs (4 or 8). */
template <int DT, int BITS, int MODE>
const void *kernel_for_m(bool gather, int64_t m, int runs) {
  if (gather && runs == 4) return (const void *)gather_runs_kernel<DT, BITS, MODE, 4>;
  if (gather && runs == 8) return (const void *)gather_runs_kernel<DT, BITS, MODE, 8>;
  if (gather && runs != 0) return nullptr;
  if (m <= 1)
    return gather ? (const void *)gather_qmv_kernel<DT, BITS, MODE, 1>
                  : (const void *)qmv_kernel<DT, BITS, MODE, 1>;
  if (m <= 4)
    return gather ? (const void *)gather_qmv_kernel<DT, BITS, MODE, 4>
                  : (const void *)qmv_kernel<DT, BITS, MODE, 4>;
  return gather ? (const void *)gather_qmv_kernel<DT, BITS, MODE, 8>
                : (const void *)qmv_kernel<DT, BITS, MODE, 8>;
}

template <int DT> const void *kernel_for(int mode, int bits, bool gather, int64_t m, int runs) {
  switch (mode) {
    case NV__QMODE_AFFINE:
      switch (bits) {
        case 1: return kernel_for_m<DT, 1, NV__QMODE_AFFINE>(gather, m, runs);
        case 2: return kernel_for_m<DT, 2, NV__QMODE_AFFINE>(gather, m, runs);
        case 3: return kernel_for_m<DT, 3, NV__QMODE_AFFINE>(gather, m, runs);
        case 4: return kernel_for_m<DT, 4, NV__QMODE_AFFINE>(gather, m, runs);
        case 5: return kernel_for_m<DT, 5, NV__QMODE_AFFINE>(gather, m, runs);
        case 6: return kernel_for_m<DT, 6, NV__QMODE_AFFINE>(gather, m, runs);
        case 8: return kernel_for_m<DT, 8, NV__QMODE_AFFINE>(gather, m, runs);
        default: return nullptr;
      }
    case NV__QMODE_MXFP4:
      return bits == 4 ? kernel_for_m<DT, 4, NV__QMODE_MXFP4>(gather, m, runs) : nullptr;
    case NV__QMODE_MXFP8:
      return bits == 8 ? kernel_for_m<DT, 8, NV__QMODE_MXFP8>(gather, m, runs) : nullptr;
    case NV__QMODE_NVFP4:
      return bits == 4 ? kernel_for_m<DT, 4, NV__QMODE_NVFP4>(gather, m, runs) : nullptr;
    default: return nullptr;
  }
}

const void *kernel_for_dtype(int dtype, int mode, int bits, bool gather, int64_t m, int runs) {
  switch (dtype) {
    case DT_F16: return kernel_for<DT_F16>(mode, bits, gather, m, runs);
    case DT_BF16: return kernel_for<DT_BF16>(mode, bits, gather, m, runs);
    case DT_F32: return kernel_for<DT_F32>(mode, bits, gather, m, runs);
    default: return nullptr;
  }
}

}  // namespace

extern "C" const void *nv__gpu_kernel_qmv(int dtype, int mode, int bits, int64_t m) {
  return kernel_for_dtype(dtype, mode, bits, false, m, 0);
}

/* The split-K kernels' resident blocks an SM by variant and warps a block (0: not yet asked;
 * else the count + 1): they depend only on the kernel's resources and the architecture's
 * limits, the same for every GPU the library is built for (sm_90). */
static std::atomic<int> v2_occupancy[3][3][2][2][NV__GPU_QMV_V2_MAX_WARPS + 1];

static int v2_dtype_index(int dtype) {
  return dtype == DT_F16 ? 0 : dtype == DT_BF16 ? 1 : dtype == DT_F32 ? 2 : -1;
}

static int v2_bits_index(int bits) { return bits == 2 ? 0 : bits == 4 ? 1 : bits == 8 ? 2 : -1; }

extern "C" int nv__gpu_qmv_v2_config(int64_t rows, int sms) {
  return rows <= (int64_t)NV__GPU_QMV_V2_PF_ROWS_PER_SM * (sms > 0 ? sms : 1)
             ? NV__GPU_QMV_V2_R2_PF
             : NV__GPU_QMV_V2_R4;
}

extern "C" int nv__gpu_qmv_v2_plan(int dtype, int bits, int gather, int config, int64_t K,
                                   int64_t N, int64_t products, int device,
                                   nv__gpu_qmv_v2_launch *plan) {
  plan->func = nullptr;
  const int di = v2_dtype_index(dtype), bi = v2_bits_index(bits);
  if (di < 0 || bi < 0 || K <= 0 || K % UNIT != 0 || N <= 0 || products <= 0) return 0;
  if (config == NV__GPU_QMV_V2_AUTO && bits >= 8) return 0; /* the streaming kernel's */
  const int64_t kw = (K / UNIT + 31) / 32;
  if (kw > NV__GPU_QMV_V2_MAX_WARPS) return 0;
  int sms = 0;
  cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return (int)e;
  if (config != NV__GPU_QMV_V2_R2_PF && config != NV__GPU_QMV_V2_R4)
    config = nv__gpu_qmv_v2_config(N * products, sms);
  const void *func = dtype == DT_F16    ? v2_for<DT_F16>(bits, config, gather != 0)
                     : dtype == DT_BF16 ? v2_for<DT_BF16>(bits, config, gather != 0)
                                        : v2_for<DT_F32>(bits, config, gather != 0);
  std::atomic<int> &cached = v2_occupancy[di][bi][config][gather != 0][kw];
  int occ = cached.load(std::memory_order_relaxed) - 1;
  if (occ < 0) {
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, func, (int)(32 * kw), 0);
    if (e != cudaSuccess) return (int)e;
    cached.store(occ + 1, std::memory_order_relaxed);
  }
  if (occ <= 0 || sms <= 0) return 0; /* cannot be resident: the streaming kernel */
  const int rs = config == NV__GPU_QMV_V2_R2_PF ? 2 : 4;
  const int64_t sets = (N + rs - 1) / rs, py = products < 65535 ? products : 65535;
  /* Every product's sets share the resident blocks (grid.y walks the products). */
  const int64_t per = (int64_t)occ * sms / py > 0 ? (int64_t)occ * sms / py : 1;
  plan->func = func;
  plan->grid[0] = (uint32_t)(sets < per ? sets : per);
  plan->grid[1] = (uint32_t)py;
  plan->block = (uint32_t)(32 * kw);
  plan->rows_per_set = rs;
  plan->prefetch = config == NV__GPU_QMV_V2_R2_PF;
  plan->config = config;
  return 0;
}

extern "C" const void *nv__gpu_kernel_qmv_tc(int dtype, int group_size) {
  switch (dtype) {
    case DT_F16: return qmv_tc_for<DT_F16>(group_size);
    case DT_BF16: return qmv_tc_for<DT_BF16>(group_size);
    default: return nullptr;
  }
}

extern "C" uint32_t nv__gpu_qmv_tc_static_smem(void) {
  return (uint32_t)(QTC_WARPS * 16 * 8 * sizeof(float));
}

extern "C" const void *nv__gpu_kernel_gather_qmv(int dtype, int mode, int bits, int64_t m,
                                                 int runs) {
  return kernel_for_dtype(dtype, mode, bits, true, m, runs);
}

template <int BITS> static int qmv_rows(int64_t m) {
  return m <= 1 ? gemv_shape<1, BITS>::R : m <= 4 ? gemv_shape<4, BITS>::R : gemv_shape<8, BITS>::R;
}

extern "C" int nv__gpu_qmv_rows_per_warp(int64_t m, int bits) {
  switch (bits) {
    case 1: return qmv_rows<1>(m);
    case 2: return qmv_rows<2>(m);
    case 3: return qmv_rows<3>(m);
    case 4: return qmv_rows<4>(m);
    case 5: return qmv_rows<5>(m);
    case 6: return qmv_rows<6>(m);
    default: return qmv_rows<8>(m);
  }
}
