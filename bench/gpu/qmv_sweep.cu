/* qmv_sweep: candidate kernels for quantized_matmul's decode gemv (x @ w.T, M <= 8 rows of x,
 * affine codes, bfloat16 x and bfloat16 scales and biases) on one GPU, each checked against a
 * float64 reference and timed against a copy of the same bytes. A standalone CUDA program (it
 * compiles the library's src/cuda/quantize_gemv.cu into itself and does not link nuvec):
 *
 *   qmv_sweep [filter]        (filter: only candidates or shapes whose name contains it)
 *
 * Candidates (the library's arithmetic in every one but fac: each weight dequantized as
 * fma(c, s, b) in float32 by quantize_gemv.cu's own dequant, then multiplied with x and summed
 * in float32; they differ in who sums what and where x comes from):
 *   lib          the library's default launch, exactly as quantize.c makes it: for M = 1
 *                and 2- or 4-bit codes quantize_gemv.cu's split-K qmv_v2_kernel in
 *                nv__gpu_qmv_v2_plan's variant and persistent grid (R2_PF or R4 by rows an SM:
 *                KINFO's plan=), for 8-bit codes and M > 1 its
 *                qmv_kernel (NV__GPU_QMV_WARPS warps a block, nv__gpu_qmv_rows_per_warp rows a
 *                warp, one block per group of rows: a single wave);
 *   lib.r2.pf, lib.r4   M = 1: the split-K kernel's two variants in the plan's grid whichever
 *                the rule picks (xreg.k4.r2.pf's and xreg.k4.r4's designs for any K up to
 *                16384, K / 1024 warps a block, 96 registers a thread at 4 bits);
 *   lib.old      M = 1: the streaming qmv_kernel as quantize.c launches it under
 *                NUVEC_QMV_V2=0 (the default before the split-K kernel);
 *   libwW        the same product (qmv_product) with W warps a block (1, 2 or 8): fewer or
 *                more rows a block, the same bytes in flight a lane;
 *   xreg.kKW.rRS[.pf]   M = 1: a block of KW warps splits K (each lane owns one 32-element
 *                unit of K per 32 KW units, its x converted to float32 once into registers, so
 *                the inner loop reads no x at all); a persistent grid (blocks a multiprocessor
 *                from the occupancy API) where each block walks sets of RS rows, every lane's RS
 *                units loaded with 16-byte loads; .pf: the next set's weights, scales and biases
 *                are loaded before the current set is computed (double buffer); the RS row sums
 *                leave a warp by a reduce-scatter of shuffles and meet across the KW warps in
 *                shared memory;
 *   fac.kKW.rRS.pf   xreg's layout with the factored form s * sum(c x) + b * sum(x) per unit
 *                (x pre-scaled by the codes' 2^-o, so 3 instructions a weight instead of 4):
 *                the CPU kernel's factorisation, NOT the GPU kernels' rounding contract
 *                (reported for what the instruction count buys);
 *   xsm.lL.uU.T  x staged once per block in shared memory (T: f32, converted once, or bf16 as
 *                stored), L lanes per row of w (32 / L rows a warp, so lanes at the same place
 *                of different rows read the same x: broadcast), U units a lane per step (all
 *                of a step's loads issued first), a persistent grid walking the rows.
 * Shapes: M = 1 with N = 4096 and 14336, M = 4 and 8 with N = 4096 (K = 4096, 4-bit, group 64),
 * and M = 1, N = 4096 with 8-bit codes and with group 128. Codes are random, every group has its
 * own scale (2^-8 .. 2^-3, a few negative, one zero) and bias; row 3 has scales 2^12 larger and
 * x has a large element (48) and a small one, so rounding is tested at several magnitudes.
 * Checks: maxerr = max |y - ref| / max(|ref|, 2^-10 A) over the outputs (A: sum of |w x| of the
 * output, ref in float64 from the same bfloat16 inputs), at most 8e-3 (bfloat16 output rounding
 * plus float32 sums); and every output within one bfloat16 ulp (plus 2^-18 A) of lib's.
 * Times: the weights, scales and biases exist in enough copies to exceed twice the L2 cache and
 * each launch reads the next copy (DRAM-cold, as a decode step reads a model's layers); the
 * primary time is the per-launch time of 20 launches captured in one CUDA graph (median of 7
 * replays); beside it the median of 50 single launches timed by CUDA events (ev=) and the graph
 * time on one L2-resident copy (hot=). Output lines:
 *   SWEEP <shape> <candidate> <us> <TB/s on packed bytes> <maxerr> <ok|FAIL...> ev=.. hot=..
 *   SWEEP <shape> copy <us> <TB/s read+written> - ok   (cudaMemcpyAsync of the packed bytes)
 *   SWEEP <shape> read <us> <TB/s read> - ok           (a kernel that only reads them)
 *   KINFO <shape> <candidate> regs= local= smem= blocks/SM= block= grid=
 *   BEST <shape> <candidate> <us> <TB/s> | lib <us> | copy ...   (fastest correct, fac aside)
 * Exit status 0 when every candidate is correct, 1 when one failed, 2 on a CUDA error (no GPU
 * included). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cuda/quantize_gemv.cu"

#define CK(call)                                                                         \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(2);                                                                           \
    }                                                                                    \
  } while (0)

namespace qs {

typedef f32io<DT_BF16> FB;
typedef uint16_t bf16_t;
constexpr int AFF = NV__QMODE_AFFINE;
constexpr int MAX_KW = 8, MAX_RS = 8;

/* ---- libwW: the library's product with W warps a block ---- */

template <int W, int MT, int BITS>
__global__ void __launch_bounds__(W * 32)
    k_libw(bf16_t *out, const bf16_t *x, const uint32_t *w, const void *scales,
           const void *biases, nv__gpu_quant_params p) {
  const int64_t n0 =
      ((int64_t)blockIdx.x * W + (threadIdx.x >> 5)) * gemv_shape<MT, BITS>::R;
  if (n0 >= p.N) return;
  const bool aligned = qmv_aligned<BITS>(w, x);
  const x_batch<bf16_t> xr = {x, p.K};
  qmv_product<FB, BITS, AFF, MT>(out, 0, xr, (int)p.M, w, scales, biases, 0, n0, aligned, p);
}

/* ---- the candidates' dequantization: quantize_gemv.cu's shift-free affine arithmetic ----
 * (x & (mask << o)) | 2^23 as a float, minus 2^23, is c * 2^o exactly; fma(c * 2^o, s * 2^-o, b)
 * is the library's fma(c, s, b). The and-or is one lop3 here: written in C, the compiler
 * emits an and and an or, since a lop3 holds one 32-bit immediate and both the mask and 2^23
 * are constants (the magic is kept in a register instead). */
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(r) : "r"(a), "r"(b), "r"(c));
  return r;
}

/* Elements 8 c .. 8 c + 7 of a unit q (BITS 4 or 8) with scale s and bias b. */
template <int BITS>
__device__ __forceinline__ void dq8(const uint32_t *q, int c, float s, float b, uint32_t magic,
                                    float *dq) {
#pragma unroll
  for (int t = 0; t < 8; t++) {
    const int k = 8 * c + t, bit = k * BITS, wi = bit >> 5, o = bit & 15;
    const uint32_t src = (bit & 16) ? q[wi] >> 16 : q[wi];
    const float v = __uint_as_float(and_or(src, ((1u << BITS) - 1) << o, magic)) - 8388608.0f;
    dq[t] = __fmaf_rn(v, __fmul_rn(s, __uint_as_float((uint32_t)(127 - o) << 23)), b);
  }
}

/* 2^23's bits in a register the compiler cannot fold back into an immediate. */
__device__ __forceinline__ uint32_t magic_reg() {
  uint32_t m;
  asm volatile("mov.b32 %0, 0x4B000000;" : "=r"(m));
  return m;
}

/* ---- xreg and fac: split K, x in registers, persistent grid over sets of RS rows ---- */

/* A lane's loads for one set of RS rows: J units of each row (16-byte loads of BITS words). */
template <int BITS, int J, int RS> struct xbuf {
  uint32_t q[RS][J][BITS];
  float s[RS][J], b[RS][J];
};

/* Unit j of lane `lane` in warp `warp` of a block of KW warps. */
__device__ __forceinline__ int64_t xreg_unit(int j, int lane, int warp, int kw) {
  return ((int64_t)warp + (int64_t)kw * j) * 32 + lane;
}

template <int BITS, int J, int RS>
__device__ __forceinline__ void xreg_load(xbuf<BITS, J, RS> &B, const uint32_t *w,
                                          const void *scales, const void *biases, int64_t set,
                                          int lane, int warp, int kw, int gshift,
                                          const nv__gpu_quant_params &p) {
  const int64_t ssz = dtype_size(p.sdt);
#pragma unroll
  for (int r = 0; r < RS; r++) {
    int64_t n = set * RS + r;
    n = n < p.N ? n : p.N - 1;
#pragma unroll
    for (int j = 0; j < J; j++)
      load_unit<BITS>(w + n * p.words + xreg_unit(j, lane, warp, kw) * BITS, B.q[r][j]);
  }
#pragma unroll
  for (int r = 0; r < RS; r++) {
    int64_t n = set * RS + r;
    n = n < p.N ? n : p.N - 1;
    const char *sr = (const char *)scales + n * p.groups * ssz;
    const char *br = (const char *)biases + n * p.groups * ssz;
#pragma unroll
    for (int j = 0; j < J; j++) {
      const int64_t g = (xreg_unit(j, lane, warp, kw) * 32) >> gshift;
      B.s[r][j] = load_scale(p.sdt, sr, g);
      B.b[r][j] = load_scale(p.sdt, br, g);
    }
  }
}

/* Row sums across a warp: the library's v2_reduce (quantize_gemv.cu, included above). */

/* One set's products: the exact form (fma(c, s, b) then * x) or the factored one (FAC: x
 * pre-scaled by 2^-o in xf, xsum the unit's sum of x). */
template <int BITS, int J, int RS, bool FAC>
__device__ __forceinline__ void xreg_compute(const xbuf<BITS, J, RS> &B, const float (&xf)[J][32],
                                             const float (&xsum)[J], uint32_t magic,
                                             float (&acc)[RS]) {
#pragma unroll
  for (int r = 0; r < RS; r++) acc[r] = 0.0f;
#pragma unroll
  for (int r = 0; r < RS; r++)
#pragma unroll
    for (int j = 0; j < J; j++) {
      if (FAC) {
        float cx = 0.0f;
#pragma unroll
        for (int k = 0; k < 32; k++) {
          const int bit = k * BITS, wi = bit >> 5, o = bit & 15;
          const uint32_t src = (bit & 16) ? B.q[r][j][wi] >> 16 : B.q[r][j][wi];
          const float v =
              __uint_as_float(and_or(src, ((1u << BITS) - 1) << o, magic)) - 8388608.0f;
          cx = __fmaf_rn(v, xf[j][k], cx);
        }
        acc[r] = __fmaf_rn(B.s[r][j], cx, __fmaf_rn(B.b[r][j], xsum[j], acc[r]));
      } else {
#pragma unroll
        for (int c = 0; c < 4; c++) {
          float dq[8];
          dq8<BITS>(B.q[r][j], c, B.s[r][j], B.b[r][j], magic, dq);
#pragma unroll
          for (int t = 0; t < 8; t++) acc[r] = __fmaf_rn(dq[t], xf[j][8 * c + t], acc[r]);
        }
      }
    }
}

/* The set's totals: lane totals reduced in the warp, then the KW warps' in shared memory
 * (double-buffered by the parity of the block's iteration, one barrier a set). */
template <int KW, int RS>
__device__ __forceinline__ void xreg_store(bf16_t *out, float (&acc)[RS], int64_t set, int it,
                                           int lane, int warp, float (*red)[MAX_KW][MAX_RS],
                                           int64_t N) {
  const float tot = v2_reduce<RS>(acc, lane);
  const int row = lane / (32 / RS);
  const bool holder = lane % (32 / RS) == 0;
  if (KW == 1) {
    if (holder && set * RS + row < N) out[set * RS + row] = FB::st(tot);
    return;
  }
  if (holder) red[it & 1][warp][row] = tot;
  __syncthreads();
  if (warp == 0 && lane < RS && set * RS + lane < N) {
    float s = red[it & 1][0][lane];
#pragma unroll
    for (int k = 1; k < KW; k++) s += red[it & 1][k][lane];
    out[set * RS + lane] = FB::st(s);
  }
}

template <int BITS, int KW, int J, int RS, bool PF, bool FAC>
__global__ void __launch_bounds__(KW * 32)
    k_xreg(bf16_t *out, const bf16_t *x, const uint32_t *w, const void *scales,
           const void *biases, nv__gpu_quant_params p) {
  __shared__ float red[2][MAX_KW][MAX_RS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gshift = __ffs(p.group_size) - 1;
  const int64_t sets = (p.N + RS - 1) / RS;
  int64_t set = blockIdx.x;
  if (set >= sets) return; /* the whole block */
  xbuf<BITS, J, RS> A, Bn;
  xreg_load<BITS, J, RS>(A, w, scales, biases, set, lane, warp, KW, gshift, p);
  /* x's units of this lane as float32 (FAC: times 2^-o of each element's code position). */
  float xf[J][32], xsum[J];
#pragma unroll
  for (int j = 0; j < J; j++) {
    const bf16_t *xp = x + xreg_unit(j, lane, warp, KW) * 32;
#pragma unroll
    for (int c = 0; c < 4; c++) load_x<FB, 8>(xp + 8 * c, xf[j] + 8 * c);
    xsum[j] = 0.0f;
    if (FAC) {
#pragma unroll
      for (int k = 0; k < 32; k++) {
        xsum[j] += xf[j][k];
        xf[j][k] = __fmul_rn(xf[j][k], __uint_as_float((uint32_t)(127 - ((k * BITS) & 15)) << 23));
      }
    }
  }
  const uint32_t magic = magic_reg();
  float acc[RS];
  for (int it = 0;; it += 2) {
    int64_t next = set + gridDim.x;
    if (PF && next < sets)
      xreg_load<BITS, J, RS>(Bn, w, scales, biases, next, lane, warp, KW, gshift, p);
    xreg_compute<BITS, J, RS, FAC>(A, xf, xsum, magic, acc);
    xreg_store<KW, RS>(out, acc, set, it, lane, warp, red, p.N);
    if (next >= sets) break;
    set = next;
    next = set + gridDim.x;
    if (PF) {
      if (next < sets)
        xreg_load<BITS, J, RS>(A, w, scales, biases, next, lane, warp, KW, gshift, p);
      xreg_compute<BITS, J, RS, FAC>(Bn, xf, xsum, magic, acc);
    } else {
      xreg_load<BITS, J, RS>(A, w, scales, biases, set, lane, warp, KW, gshift, p);
      xreg_compute<BITS, J, RS, FAC>(A, xf, xsum, magic, acc);
    }
    xreg_store<KW, RS>(out, acc, set, it + 1, lane, warp, red, p.N);
    if (next >= sets) break;
    set = next;
    if (!PF) xreg_load<BITS, J, RS>(A, w, scales, biases, set, lane, warp, KW, gshift, p);
  }
}

/* ---- xsm: x in shared memory, L lanes a row of w, persistent grid ---- */

template <class T> struct xsm_t;
template <> struct xsm_t<float> {
  static __device__ __forceinline__ float put(bf16_t v) { return bf16_to_f32(v); }
  /* 8 elements at p (16-byte aligned). */
  static __device__ __forceinline__ void get8(const float *p, float *o) {
    const float4 a = *(const float4 *)p, b = *(const float4 *)(p + 4);
    o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = b.x, o[5] = b.y, o[6] = b.z,
    o[7] = b.w;
  }
};
template <> struct xsm_t<bf16_t> {
  static __device__ __forceinline__ bf16_t put(bf16_t v) { return v; }
  static __device__ __forceinline__ void get8(const bf16_t *p, float *o) {
    const uint4 a = *(const uint4 *)p;
    const uint32_t u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      o[2 * i] = __uint_as_float(u[i] << 16);
      o[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
    }
  }
};

template <int BITS, int MT, int L, int UNR, class T>
__global__ void __launch_bounds__(128)
    k_xsm(bf16_t *out, const bf16_t *x, const uint32_t *w, const void *scales,
          const void *biases, nv__gpu_quant_params p) {
  extern __shared__ uint4 xsm_raw[];
  T *xs = (T *)xsm_raw;
  constexpr int RPW = 32 / L; /* rows a warp */
  const uint32_t magic = magic_reg();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int g = lane / L, pl = lane % L;
  const int M = (int)p.M;
  const int64_t K = p.K, U = K / 32;
  const int gshift = __ffs(p.group_size) - 1;
  const int64_t ssz = dtype_size(p.sdt);
  const int64_t step = (int64_t)gridDim.x * nw * RPW;
  int64_t base = ((int64_t)blockIdx.x * nw + warp) * RPW;
  /* The first step's weights are in flight while x is staged. */
  uint32_t q[UNR][BITS];
  float sc[UNR], bi[UNR];
  auto load = [&](int64_t n, int64_t u0) {
#pragma unroll
    for (int i = 0; i < UNR; i++) {
      const int64_t u = u0 + (int64_t)L * i;
      if (u < U) load_unit<BITS>(w + n * p.words + u * BITS, q[i]);
    }
#pragma unroll
    for (int i = 0; i < UNR; i++) {
      const int64_t u = u0 + (int64_t)L * i;
      if (u < U) {
        const int64_t gi = n * p.groups + ((u * 32) >> gshift);
        sc[i] = load_scale(p.sdt, scales, gi);
        bi[i] = load_scale(p.sdt, biases, gi);
      }
    }
  };
  auto row_of = [&](int64_t b) { return b + g < p.N ? b + g : p.N - 1; };
  if (base < p.N) load(row_of(base), pl);
  for (int64_t i = threadIdx.x; i < M * K; i += blockDim.x) xs[i] = xsm_t<T>::put(x[i]);
  __syncthreads();
  for (; base < p.N; base += step) {
    const int64_t n = row_of(base);
    float acc[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) acc[m] = 0.0f;
    for (int64_t u0 = pl; u0 < U; u0 += (int64_t)L * UNR) {
      if (u0 != pl) load(n, u0);
#pragma unroll
      for (int i = 0; i < UNR; i++) {
        const int64_t u = u0 + (int64_t)L * i;
        if (u >= U) break;
#pragma unroll
        for (int c = 0; c < 4; c++) {
          float dq[8];
          dq8<BITS>(q[i], c, sc[i], bi[i], magic, dq);
#pragma unroll
          for (int m = 0; m < MT; m++) {
            if (m >= M) break;
            float xv[8];
            xsm_t<T>::get8(xs + m * K + u * 32 + 8 * c, xv);
#pragma unroll
            for (int t = 0; t < 8; t++) acc[m] = __fmaf_rn(dq[t], xv[t], acc[m]);
          }
        }
      }
    }
    /* The next row's first step before this row's sums leave the lanes. */
    if (base + step < p.N) load(row_of(base + step), pl);
#pragma unroll
    for (int m = 0; m < MT; m++) {
      if (m >= M) break;
      float s = acc[m];
#pragma unroll
      for (int o = L / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (pl == 0 && base + g < p.N) out[m * p.N + base + g] = FB::st(s);
    }
  }
}

/* ---- the memory references ---- */

__global__ void k_read(const uint4 *a, int64_t n, uint32_t never, uint32_t *sink) {
  uint32_t v = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const uint4 t = ld_stream4((const uint32_t *)(a + i));
    v ^= t.x ^ t.y ^ t.z ^ t.w;
  }
  if (v == never) sink[0] = v; /* keeps the loads */
}

}  // namespace qs

/* ---- host side ---- */

using qs::bf16_t;

struct Shape {
  const char *name;
  int M, N, K, bits, gs;
};

struct Dev {
  /* NC copies of the packed weights, scales and biases (one allocation each). */
  uint32_t *w;
  bf16_t *s, *b;
  bf16_t *x, *out;
  int64_t wwords, groups, nc;
};

struct Cand {
  std::string name;
  const void *func;
  int block, grid;
  size_t smem;
  bool exact;       /* the library's rounding contract */
  std::string note; /* printed on the KINFO line (the library's plan) */
};

static int sm_count, device;

static uint16_t to_bf16(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1); /* nearest even (no NaN here) */
  return (uint16_t)(u >> 16);
}
static double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd() {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static double unif() { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }

static int occupancy(const void *f, int block, size_t smem) {
  int per = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, f, block, smem));
  return per;
}

static nv__gpu_quant_params params_of(const Shape &s) {
  nv__gpu_quant_params p;
  memset(&p, 0, sizeof p);
  p.mode = NV__QMODE_AFFINE;
  p.group_size = s.gs;
  p.bits = s.bits;
  p.transpose = 1;
  p.B = 1;
  p.M = s.M;
  p.K = s.K;
  p.N = s.N;
  p.R = s.N;
  p.words = (int64_t)s.K * s.bits / 32;
  p.groups = s.K / s.gs;
  p.sdt = DT_BF16;
  return p;
}

template <int MT, int BITS> static void add_libw(std::vector<Cand> &v, const Shape &s) {
  const int R = gemv_shape<MT, BITS>::R;
  const void *f[3] = {(const void *)qs::k_libw<1, MT, BITS>, (const void *)qs::k_libw<2, MT, BITS>,
                      (const void *)qs::k_libw<8, MT, BITS>};
  const int W[3] = {1, 2, 8};
  for (int i = 0; i < 3; i++) {
    const int rows = R * W[i];
    v.push_back({"libw" + std::to_string(W[i]), f[i], 32 * W[i], (s.N + rows - 1) / rows, 0, true});
  }
}

template <int BITS, int KW, int J, int RS, bool PF, bool FAC>
static void add_xreg(std::vector<Cand> &v, const Shape &s) {
  if (s.M != 1 || s.K != 32 * 32 * KW * J) return;
  const void *f = (const void *)qs::k_xreg<BITS, KW, J, RS, PF, FAC>;
  const int sets = (s.N + RS - 1) / RS;
  const int grid = std::min(sets, occupancy(f, 32 * KW, 0) * sm_count);
  std::string n = std::string(FAC ? "fac" : "xreg") + ".k" + std::to_string(KW) + ".r" +
                  std::to_string(RS) + (PF ? ".pf" : "");
  v.push_back({n, f, 32 * KW, grid, 0, !FAC});
}

template <int BITS, int MT, int L, int UNR, class T>
static void add_xsm(std::vector<Cand> &v, const Shape &s) {
  if (s.M > MT) return;
  const void *f = (const void *)qs::k_xsm<BITS, MT, L, UNR, T>;
  const size_t smem = (size_t)s.M * s.K * sizeof(T);
  if (smem > 48 * 1024)
    CK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const int rpb = 4 * (32 / L); /* 4 warps */
  const int grid = std::min((s.N + rpb - 1) / rpb, occupancy(f, 128, smem) * sm_count);
  std::string n = "xsm.l" + std::to_string(L) + ".u" + std::to_string(UNR) +
                  (sizeof(T) == 4 ? ".f32" : ".bf16");
  v.push_back({n, f, 128, grid, smem, true});
}

template <int BITS> static std::vector<Cand> candidates(const Shape &s) {
  std::vector<Cand> v;
  /* The streaming kernel as quantize.c launches it (one block per group of rows). */
  const int rows = nv__gpu_qmv_rows_per_warp(s.M, s.bits) * NV__GPU_QMV_WARPS;
  const Cand old = {"lib", nv__gpu_kernel_qmv(DT_BF16, NV__QMODE_AFFINE, s.bits, s.M),
                    32 * NV__GPU_QMV_WARPS, (s.N + rows - 1) / rows, 0, true};
  if (s.M != 1) {
    v.push_back(old);
  } else {
    /* M = 1: the split-K kernel in quantize.c's plan (nv__gpu_qmv_v2_plan, one product), its
     * two variants whatever the rule picks, and the streaming kernel. */
    const struct {
      const char *name;
      int config;
    } plans[3] = {{"lib", NV__GPU_QMV_V2_AUTO},
                  {"lib.r2.pf", NV__GPU_QMV_V2_R2_PF},
                  {"lib.r4", NV__GPU_QMV_V2_R4}};
    for (const auto &pl : plans) {
      nv__gpu_qmv_v2_launch l;
      const int e = nv__gpu_qmv_v2_plan(DT_BF16, s.bits, 0, pl.config, s.K, s.N, 1, device, &l);
      if (e != 0) CK((cudaError_t)e);
      if (!l.func) {
        if (pl.config == NV__GPU_QMV_V2_AUTO) v.push_back(old); /* quantize.c's fallback */
        continue;
      }
      v.push_back({pl.name, l.func, (int)l.block, (int)l.grid[0], 0, true,
                   l.config == NV__GPU_QMV_V2_R2_PF ? " plan=r2.pf" : " plan=r4"});
    }
    Cand o = old;
    o.name = "lib.old";
    v.push_back(o);
  }
  if (s.M == 1) add_libw<1, BITS>(v, s);
  else if (s.M <= 4) add_libw<4, BITS>(v, s);
  else add_libw<8, BITS>(v, s);
  add_xreg<BITS, 4, 1, 4, false, false>(v, s);
  add_xreg<BITS, 4, 1, 4, true, false>(v, s);
  add_xreg<BITS, 4, 1, 2, true, false>(v, s);
  add_xreg<BITS, 4, 1, 8, true, false>(v, s);
  add_xreg<BITS, 2, 2, 2, true, false>(v, s);
  add_xreg<BITS, 4, 1, 4, true, true>(v, s);
  constexpr int UW = BITS == 4 ? 8 : 4; /* 32 words a lane and step */
  if (s.M == 1) {
    add_xsm<BITS, 1, 32, 4, float>(v, s);
    add_xsm<BITS, 1, 16, UW, float>(v, s);
    add_xsm<BITS, 1, 8, UW, float>(v, s);
  } else if (s.M <= 4) {
    add_xsm<BITS, 4, 16, UW, float>(v, s);
    add_xsm<BITS, 4, 8, UW, float>(v, s);
    add_xsm<BITS, 4, 16, UW, bf16_t>(v, s);
  } else {
    add_xsm<BITS, 8, 16, UW / 2, bf16_t>(v, s);
    add_xsm<BITS, 8, 8, UW / 2, bf16_t>(v, s);
  }
  return v;
}

/* Host data of a shape and its float64 reference (ref and A = sum |w x| per output). */
struct Host {
  std::vector<uint32_t> w;
  std::vector<uint16_t> s, b, x;
  std::vector<double> ref, A;
};

static void make_host(const Shape &sh, Host &h) {
  const int64_t words = (int64_t)sh.K * sh.bits / 32, groups = sh.K / sh.gs;
  h.w.resize((size_t)sh.N * words);
  h.s.resize((size_t)sh.N * groups);
  h.b.resize(h.s.size());
  h.x.resize((size_t)sh.M * sh.K);
  for (auto &v : h.w) v = (uint32_t)rnd();
  const double half = (double)(1 << (sh.bits - 1));
  for (int64_t n = 0; n < sh.N; n++)
    for (int64_t g = 0; g < groups; g++) {
      double sc = ldexp(1.0 + unif(), -8 + (int)(rnd() % 6)) * (rnd() % 16 == 0 ? -1 : 1);
      double bi = -sc * half * (0.75 + 0.5 * unif());
      if (n == 3) sc *= 4096, bi *= 4096;
      if (n == 7 && g == 1) sc = 0;
      h.s[n * groups + g] = to_bf16(sc);
      h.b[n * groups + g] = to_bf16(bi);
    }
  for (int64_t i = 0; i < (int64_t)h.x.size(); i++) {
    double u = 0;
    for (int k = 0; k < 4; k++) u += unif();
    h.x[i] = to_bf16((u - 2.0) * 1.7);
  }
  h.x[17] = to_bf16(48.0);
  h.x[sh.K / 2 + 5] = to_bf16(1.0 / 4096);
  h.ref.assign((size_t)sh.M * sh.N, 0.0);
  h.A.assign(h.ref.size(), 0.0);
  std::vector<double> xd(h.x.size()), wr(sh.K);
  for (size_t i = 0; i < xd.size(); i++) xd[i] = from_bf16(h.x[i]);
  const uint32_t mask = (1u << sh.bits) - 1;
  for (int64_t n = 0; n < sh.N; n++) {
    for (int64_t k = 0; k < sh.K; k++) {
      const int64_t bit = k * sh.bits;
      const uint32_t c = (h.w[n * words + (bit >> 5)] >> (bit & 31)) & mask; /* bits 4, 8 */
      wr[k] = c * from_bf16(h.s[n * groups + k / sh.gs]) + from_bf16(h.b[n * groups + k / sh.gs]);
    }
    for (int m = 0; m < sh.M; m++) {
      double r = 0, a = 0;
      const double *xm = &xd[(size_t)m * sh.K];
      for (int64_t k = 0; k < sh.K; k++) {
        r += wr[k] * xm[k];
        a += fabs(wr[k] * xm[k]);
      }
      h.ref[(size_t)m * sh.N + n] = r;
      h.A[(size_t)m * sh.N + n] = a;
    }
  }
}

struct Times {
  double graph, ev, hot;
};

/* launch(stream, copy): one launch on copy `copy` of the weights. */
static Times time_it(const std::function<void(cudaStream_t, int64_t)> &launch, int64_t nc,
                     cudaStream_t st, cudaEvent_t *ev) {
  Times t;
  for (int i = 0; i < 5; i++) launch(st, i % nc);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(st));
  std::vector<float> v;
  for (int i = 0; i < 50; i++) {
    CK(cudaEventRecord(ev[0], st));
    launch(st, (i + 5) % nc);
    CK(cudaEventRecord(ev[1], st));
    CK(cudaEventSynchronize(ev[1]));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    v.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(v.begin(), v.end());
  t.ev = 1e3 * (v[24] + v[25]) / 2;
  for (int pass = 0; pass < 2; pass++) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < 20; i++) launch(st, pass == 0 ? i % nc : 0);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaStreamSynchronize(st));
    v.clear();
    for (int i = 0; i < 7; i++) {
      CK(cudaEventRecord(ev[0], st));
      CK(cudaGraphLaunch(ge, st));
      CK(cudaEventRecord(ev[1], st));
      CK(cudaEventSynchronize(ev[1]));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
      v.push_back(ms);
    }
    std::sort(v.begin(), v.end());
    (pass == 0 ? t.graph : t.hot) = 1e3 * v[3] / 20;
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  return t;
}

struct Result {
  std::string shape, cand;
  double us, tbs;
  bool ok, exact;
};

/* One bfloat16 ulp of |v| (the spacing above it). */
static double ulp_bf16(double v) {
  int e;
  frexp(fabs(v) > 1e-38 ? fabs(v) : 1e-38, &e);
  return ldexp(1.0, e - 8);
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : "";
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    fprintf(stderr, "qmv_sweep: no usable CUDA device (cudaGetDeviceCount: %s)\n",
            e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 2;
  }
  CK(cudaGetDevice(&device));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, device));
  sm_count = prop.multiProcessorCount;
  printf("device: %s, %d multiprocessors, L2 %d MiB\n", prop.name, sm_count,
         prop.l2CacheSize >> 20);
  const Shape shapes[] = {
      {"m1_n4096_k4096_b4g64", 1, 4096, 4096, 4, 64},
      {"m1_n14336_k4096_b4g64", 1, 14336, 4096, 4, 64},
      {"m4_n4096_k4096_b4g64", 4, 4096, 4096, 4, 64},
      {"m8_n4096_k4096_b4g64", 8, 4096, 4096, 4, 64},
      {"m1_n4096_k4096_b8g64", 1, 4096, 4096, 8, 64},
      {"m1_n4096_k4096_b4g128", 1, 4096, 4096, 4, 128},
  };
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t ev[2];
  CK(cudaEventCreate(&ev[0]));
  CK(cudaEventCreate(&ev[1]));
  uint32_t *sink;
  CK(cudaMalloc(&sink, 16));
  std::vector<Result> results;
  bool all_ok = true;
  for (const Shape &sh : shapes) {
    const bool shape_hit = strstr(sh.name, filter) != NULL;
    std::vector<Cand> cands = sh.bits == 4 ? candidates<4>(sh) : candidates<8>(sh);
    const nv__gpu_quant_params p0 = params_of(sh);
    const int64_t wbytes = (int64_t)sh.N * p0.words * 4, sbytes = (int64_t)sh.N * p0.groups * 2;
    const int64_t packed = wbytes + 2 * sbytes;
    Host h;
    make_host(sh, h);
    Dev d;
    d.wwords = (int64_t)sh.N * p0.words;
    d.groups = (int64_t)sh.N * p0.groups;
    d.nc = std::max<int64_t>(2, (2 * (int64_t)prop.l2CacheSize) / packed + 1);
    CK(cudaMalloc(&d.w, d.nc * wbytes));
    CK(cudaMalloc(&d.s, d.nc * sbytes));
    CK(cudaMalloc(&d.b, d.nc * sbytes));
    CK(cudaMalloc(&d.x, h.x.size() * 2));
    CK(cudaMalloc(&d.out, (size_t)sh.M * sh.N * 2));
    for (int64_t c = 0; c < d.nc; c++) {
      CK(cudaMemcpy(d.w + c * d.wwords, h.w.data(), wbytes, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(d.s + c * d.groups, h.s.data(), sbytes, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(d.b + c * d.groups, h.b.data(), sbytes, cudaMemcpyHostToDevice));
    }
    CK(cudaMemcpy(d.x, h.x.data(), h.x.size() * 2, cudaMemcpyHostToDevice));
    printf("shape %s: packed %.2f MB, %lld copies\n", sh.name, packed / 1e6, (long long)d.nc);
    std::vector<uint16_t> lib_out, got((size_t)sh.M * sh.N);
    for (const Cand &c : cands) {
      if (!shape_hit && strstr(c.name.c_str(), filter) == NULL && c.name != "lib") continue;
      if (!c.func) {
        printf("SWEEP %s %s - - - FAIL(no kernel)\n", sh.name, c.name.c_str());
        all_ok = false;
        continue;
      }
      cudaFuncAttributes fa;
      CK(cudaFuncGetAttributes(&fa, c.func));
      printf("KINFO %s %s regs=%d local=%zu smem=%zu blocks/SM=%d block=%d grid=%d%s\n", sh.name,
             c.name.c_str(), fa.numRegs, (size_t)fa.localSizeBytes, c.smem,
             occupancy(c.func, c.block, c.smem), c.block, c.grid, c.note.c_str());
      auto launch = [&](cudaStream_t s, int64_t copy) {
        nv__gpu_quant_params p = p0;
        bf16_t *out = d.out, *x = d.x;
        uint32_t *w = d.w + copy * d.wwords;
        void *sc = d.s + copy * d.groups, *bi = d.b + copy * d.groups;
        void *args[] = {&out, &x, &w, &sc, &bi, &p};
        CK(cudaLaunchKernel(c.func, dim3((unsigned)c.grid), dim3((unsigned)c.block), args, c.smem,
                            s));
      };
      CK(cudaMemsetAsync(d.out, 0xff, got.size() * 2, st));
      launch(st, 0);
      CK(cudaGetLastError());
      CK(cudaStreamSynchronize(st));
      CK(cudaMemcpy(got.data(), d.out, got.size() * 2, cudaMemcpyDeviceToHost));
      if (c.name == "lib") lib_out = got;
      double maxerr = 0;
      int64_t far = 0, bad = 0;
      for (size_t i = 0; i < got.size(); i++) {
        const double y = from_bf16(got[i]);
        if (!std::isfinite(y)) {
          bad++;
          continue;
        }
        const double den = std::max(fabs(h.ref[i]), ldexp(h.A[i], -10));
        maxerr = std::max(maxerr, fabs(y - h.ref[i]) / (den > 0 ? den : 1));
        if (!lib_out.empty()) {
          const double yl = from_bf16(lib_out[i]);
          if (fabs(y - yl) > ulp_bf16(std::max(fabs(y), fabs(yl))) + ldexp(h.A[i], -18)) far++;
        }
      }
      const bool ok = bad == 0 && maxerr <= 8e-3 && (far == 0 || !c.exact);
      char verdict[96];
      if (ok) snprintf(verdict, sizeof verdict, "ok%s", far ? "(differs from lib)" : "");
      else
        snprintf(verdict, sizeof verdict, "FAIL(nonfinite=%lld, far_from_lib=%lld)",
                 (long long)bad, (long long)far);
      const Times t = time_it(launch, d.nc, st, ev);
      printf("SWEEP %s %s %.2f %.3f %.3g %s ev=%.2f hot=%.2f\n", sh.name, c.name.c_str(), t.graph,
             packed / t.graph / 1e6, maxerr, verdict, t.ev, t.hot);
      fflush(stdout);
      all_ok &= ok;
      results.push_back({sh.name, c.name, t.graph, packed / t.graph / 1e6, ok, c.exact});
    }
    /* The references: a copy of the packed bytes (read + written) and a read of them. */
    {
      uint8_t *dst;
      CK(cudaMalloc(&dst, d.nc * packed));
      auto copy = [&](cudaStream_t s, int64_t c) {
        CK(cudaMemcpyAsync(dst + c * packed, d.w + c * d.wwords, packed,
                           cudaMemcpyDeviceToDevice, s));
      };
      Times t = time_it(copy, d.nc - 1, st, ev);
      printf("SWEEP %s copy %.2f %.3f - ok ev=%.2f hot=%.2f\n", sh.name, t.graph,
             2.0 * packed / t.graph / 1e6, t.ev, t.hot);
      results.push_back({sh.name, "copy", t.graph, 2.0 * packed / t.graph / 1e6, true, false});
      /* Both read `packed` bytes of the weights' allocation from copy c on (the last copy
       * unused: they would run past its end). */
      auto read = [&](cudaStream_t s, int64_t c) {
        qs::k_read<<<sm_count * 8, 256, 0, s>>>((const uint4 *)(d.w + c * d.wwords), packed / 16,
                                                 0x9e3779b9u, sink);
      };
      CK(cudaFree(dst));
      t = time_it(read, d.nc - 1, st, ev);
      printf("SWEEP %s read %.2f %.3f - ok ev=%.2f hot=%.2f\n", sh.name, t.graph,
             packed / t.graph / 1e6, t.ev, t.hot);
      results.push_back({sh.name, "read", t.graph, packed / t.graph / 1e6, true, false});
    }
    CK(cudaFree(d.w));
    CK(cudaFree(d.s));
    CK(cudaFree(d.b));
    CK(cudaFree(d.x));
    CK(cudaFree(d.out));
  }
  printf("=== summary: the fastest correct candidate of the library's contract per shape "
         "(graph per-launch us, TB/s on packed bytes)\n");
  for (const Shape &sh : shapes) {
    const Result *best = NULL, *lib = NULL, *copy = NULL, *read = NULL, *fac = NULL;
    for (const Result &r : results) {
      if (r.shape != sh.name) continue;
      if (r.cand == "lib") lib = &r;
      else if (r.cand == "copy") copy = &r;
      else if (r.cand == "read") read = &r;
      if (r.cand.compare(0, 3, "fac") == 0 && r.ok && (!fac || r.us < fac->us)) fac = &r;
      if (r.ok && r.exact && (!best || r.us < best->us)) best = &r;
    }
    if (!best) continue;
    printf("BEST %s %s %.2f %.3f", sh.name, best->cand.c_str(), best->us, best->tbs);
    if (lib) printf(" | lib %.2f us %.3f TB/s", lib->us, lib->tbs);
    if (fac) printf(" | %s %.2f us", fac->cand.c_str(), fac->us);
    if (copy) printf(" | copy %.2f us %.3f TB/s (r+w)", copy->us, copy->tbs);
    if (read) printf(" | read %.2f us %.3f TB/s", read->us, read->tbs);
    printf("\n");
  }
  printf("%s\n", all_ok ? "all candidates correct" : "SOME CANDIDATES FAILED");
  return all_ok ? 0 : 1;
}
