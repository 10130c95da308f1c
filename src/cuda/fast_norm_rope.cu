/* norm_rope on the GPU (the CPU kernel's formulas, src/cpu/fast_norm_rope.c): a warp a row,
 * the mean square summed through warp shuffles in float32 (float64 for float64), then each
 * rotated pair normalized, scaled, turned and rounded once into its destination row (the
 * output row, or the cache row at the token's cache position: negative skipped, past the
 * cache the node's index check raised). A block walks groups of `tpb` tokens; each group's
 * angles (the inverse frequency in float64, the position and angle in the compute type, as the
 * CPU computes them; sincos in the compute type) are computed once into shared memory for all
 * the group's rows (heads) when they fit, else per element.
 *
 * Rows of d = 32 v elements (v = 2, 4, 8) rotated whole, of float16/bfloat16/float32, with
 * 16-byte (or the vector's) aligned data (checked on the device) are read once as vectors of v
 * elements a lane: a non-traditional pair (i, i + d/2) lies in lanes l and l ^ 16 at the same
 * vector index (one shuffle), a traditional pair (2i, 2i + 1) in one lane; without a cache a
 * warp has two rows' loads in flight. Other rows read the row a second time (from L1/L2) for
 * the rotation. 64-bit indices throughout. */
#include <stdint.h>

#include "cuda/convert.cuh"
#include "cuda/fast_state_kernels.h"

using namespace nvg;

namespace {

template <int DT> using at = cio<DT>; /* convert.cuh */

__device__ __forceinline__ float inv_sqrt(float v) { return 1.0f / sqrtf(v); }
__device__ __forceinline__ double inv_sqrt(double v) { return 1.0 / sqrt(v); }
__device__ __forceinline__ void sin_cos(float v, float *s, float *c) { sincosf(v, s, c); }
__device__ __forceinline__ void sin_cos(double v, double *s, double *c) { sincos(v, s, c); }

template <class C> __device__ __forceinline__ C warp_sum(C v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* v elements of a row as one register vector (loaded and stored as 4-, 8- or 16-byte words). */
template <class S, int V> union __align__(16) rvec {
  uint32_t w[(V * sizeof(S) + 3) / 4];
  S v[V];
};

template <class S, int V> __device__ __forceinline__ void load_vec(rvec<S, V> &u, const S *p) {
  constexpr int B = V * (int)sizeof(S);
  static_assert(B == 4 || B == 8 || B % 16 == 0, "vector of 4, 8 or 16k bytes");
  if constexpr (B % 16 == 0) {
#pragma unroll
    for (int i = 0; i < B / 16; i++)
      reinterpret_cast<uint4 *>(u.w)[i] = reinterpret_cast<const uint4 *>(p)[i];
  } else if constexpr (B == 8) {
    *reinterpret_cast<uint2 *>(u.w) = *reinterpret_cast<const uint2 *>(p);
  } else {
    u.w[0] = *reinterpret_cast<const uint32_t *>(p);
  }
}

template <class S, int V> __device__ __forceinline__ void store_vec(S *p, const rvec<S, V> &u) {
  constexpr int B = V * (int)sizeof(S);
  if constexpr (B % 16 == 0) {
#pragma unroll
    for (int i = 0; i < B / 16; i++)
      reinterpret_cast<uint4 *>(p)[i] = reinterpret_cast<const uint4 *>(u.w)[i];
  } else if constexpr (B == 8) {
    *reinterpret_cast<uint2 *>(p) = *reinterpret_cast<const uint2 *>(u.w);
  } else {
    *reinterpret_cast<uint32_t *>(p) = u.w[0];
  }
}

/* The vector path's width in bytes for one load (its alignment requirement). */
template <class S, int V> __host__ __device__ constexpr int vec_align() {
  return V * (int)sizeof(S) < 16 ? V * (int)sizeof(S) : 16;
}

/* Row u (v elements a lane, the whole row over the warp) normalized, scaled by w (when has_w),
 * turned and stored at yr; angle(j, &c, &s) gives pair j's cosine and sine. A non-traditional
 * pair (i, i + d/2) lies in lanes l and l ^ 16 at the same vector index, a traditional one
 * (2i, 2i + 1) in one lane. Every lane of the warp calls it (shuffles). */
template <class A, int V, class F>
__device__ __forceinline__ void vec_row(const rvec<typename A::S, V> &u, typename A::S *yr,
                                        const typename A::S *w, bool has_w, bool trad,
                                        int64_t d, typename A::C eps, F angle) {
  typedef typename A::S S;
  typedef typename A::C C;
  const int lane = threadIdx.x & 31;
  rvec<S, V> o;
  C n[V], q = 0;
#pragma unroll
  for (int k = 0; k < V; k++) {
    n[k] = A::ld(u.v[k]);
    q += n[k] * n[k];
  }
  const C rs = inv_sqrt(warp_sum(q) / (C)d + eps);
  if (has_w) {
    rvec<S, V> wv;
    load_vec<S, V>(wv, w + lane * V);
#pragma unroll
    for (int k = 0; k < V; k++) n[k] = n[k] * rs * A::ld(wv.v[k]);
  } else {
#pragma unroll
    for (int k = 0; k < V; k++) n[k] = n[k] * rs;
  }
  if (!trad) {
    /* element lane*V + k pairs with the same k of lane ^ 16 (d/2 = 16 V further) */
    const bool first = lane < 16;
#pragma unroll
    for (int k = 0; k < V; k++) {
      const C pn = __shfl_xor_sync(0xffffffffu, n[k], 16);
      C c, s;
      angle((int64_t)(lane & 15) * V + k, &c, &s);
      o.v[k] = A::st(first ? n[k] * c - pn * s : pn * s + n[k] * c);
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; k += 2) {
      C c, s;
      angle(((int64_t)lane * V + k) / 2, &c, &s);
      o.v[k] = A::st(n[k] * c - n[k + 1] * s);
      o.v[k + 1] = A::st(n[k] * s + n[k + 1] * c);
    }
  }
  store_vec<S, V>(yr + lane * V, o);
}

/* Three blocks an SM at least (registers capped at 80: 24 warps, each with up to two rows'
 * loads in flight). */
template <int DT, int V>
__global__ void __launch_bounds__(NV__GPU_NR_THREADS, 3)
    k_norm_rope(typename at<DT>::S *out0, const typename at<DT>::S *x0, const int32_t *pos0,
                const void *cpos0, const typename at<DT>::S *w0, const typename at<DT>::C *freqs0,
                nv__gpu_norm_rope_params p) {
  typedef at<DT> A;
  typedef typename A::S S;
  typedef typename A::C C;
  __shared__ C tab[2 * NV__GPU_NR_TABLE]; /* (cos, sin) of pair j of group token tl at tl*h + j */
  S *out = out0 + p.off[0];
  const S *x = x0 + p.off[1], *w = w0 + p.off[4];
  const int32_t *pos = pos0 + p.off[2];
  const C *freqs = freqs0 + p.off[5];
  const int64_t h = p.dims / 2, d = p.d, m = p.m, dims = p.dims;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  const bool table = p.tpb * h <= NV__GPU_NR_TABLE;
  const C eps = (C)p.eps;
  auto inv_of = [&](int64_t j) -> C {
    return p.has_freqs ? (C)1 / freqs[j]
                       : (C)exp2(-(2.0 * (double)j / (double)dims) * p.log2_base);
  };
  auto position = [&](int64_t t) -> C { return (C)pos[t] * (C)p.scale; };
  /* cos and sin of pair j of group token tl (token t) */
  auto angle = [&](int64_t tl, int64_t t, int64_t j, C *c, C *s) {
    if (table) {
      *c = tab[2 * (tl * h + j)];
      *s = tab[2 * (tl * h + j) + 1];
    } else {
      sin_cos(position(t) * inv_of(j), s, c);
    }
  };
  bool vec_ok = false;
  if constexpr (V > 0) {
    const uintptr_t any = (uintptr_t)x | (uintptr_t)out | (p.has_w ? (uintptr_t)w : 0);
    vec_ok = (any % (uintptr_t)vec_align<S, V>()) == 0;
  }
  for (int64_t item = blockIdx.x; item < p.items; item += gridDim.x) {
    const int64_t t0 = item * p.tpb;
    if (table) {
      __syncthreads(); /* the previous group's rows have read the table */
      for (int64_t i = threadIdx.x; i < p.tpb * h; i += blockDim.x) {
        const int64_t tl = i / h, j = i - tl * h;
        if (t0 + tl >= p.ntok) break;
        C s, c;
        sin_cos(position(t0 + tl) * inv_of(j), &s, &c);
        tab[2 * i] = c;
        tab[2 * i + 1] = s;
      }
      __syncthreads();
    }
    if constexpr (V > 0) {
      if (vec_ok && !p.cache) {
        /* Rows without a cache, two a warp in flight: both loads are issued before either
         * row's sums. Row r of the group is row t0 * m + r of x and of the output. */
        const int64_t rows = p.tpb * m;
        for (int64_t r = warp; r < rows; r += 2 * nwarps) {
          const int64_t r2 = r + nwarps, tl = r / m, tl2 = r2 / m;
          if (t0 + tl >= p.ntok) break;
          const bool two = r2 < rows && t0 + tl2 < p.ntok; /* uniform over the warp */
          rvec<S, V> u, u2;
          load_vec<S, V>(u, x + (t0 * m + r) * d + lane * V);
          if (two) load_vec<S, V>(u2, x + (t0 * m + r2) * d + lane * V);
          vec_row<A, V>(u, out + (t0 * m + r) * d, w, p.has_w, p.traditional, d, eps,
                        [&](int64_t j, C *c, C *s) { angle(tl, t0 + tl, j, c, s); });
          if (two)
            vec_row<A, V>(u2, out + (t0 * m + r2) * d, w, p.has_w, p.traditional, d, eps,
                          [&](int64_t j, C *c, C *s) { angle(tl2, t0 + tl2, j, c, s); });
        }
        continue;
      }
    }
    /* A warp a row: every branch below is uniform over the warp. */
    for (int64_t r = warp; r < p.tpb * m; r += nwarps) {
      const int64_t tl = r / m, t = t0 + tl, hd = r - tl * m;
      if (t >= p.ntok) break;
      int64_t dst = t;
      if (p.cache) {
        dst = p.cpos64 ? static_cast<const int64_t *>(cpos0)[p.off[3] + t]
                       : (int64_t) static_cast<const int32_t *>(cpos0)[p.off[3] + t];
        if (dst < 0) continue; /* padding */
        if (dst >= p.nslots) {
          if (hd == 0 && lane == 0) nv__gpu_raise_bad(p.bad, dst, p.nslots);
          continue;
        }
      }
      const S *xr = x + (t * m + hd) * d;
      S *yr = out + (dst * m + hd) * d;
      if constexpr (V > 0) {
        if (vec_ok) {
          rvec<S, V> u;
          load_vec<S, V>(u, xr + lane * V);
          vec_row<A, V>(u, yr, w, p.has_w, p.traditional, d, eps,
                        [&](int64_t j, C *c, C *s) { angle(tl, t, j, c, s); });
          continue;
        }
      }
      /* Any row: the mean square, then each pair (and each feature past dims) from memory. */
      C q = 0;
      for (int64_t i = lane; i < d; i += 32) {
        const C v = A::ld(xr[i]);
        q += v * v;
      }
      const C rs = inv_sqrt(warp_sum(q) / (C)d + eps);
      for (int64_t j = lane; j < h + (d - dims); j += 32) {
        if (j >= h) {
          const int64_t i = dims + (j - h);
          C a = A::ld(xr[i]) * rs;
          if (p.has_w) a = a * A::ld(w[i]);
          yr[i] = A::st(a);
          continue;
        }
        const int64_t i1 = p.traditional ? 2 * j : j, i2 = p.traditional ? 2 * j + 1 : j + h;
        C a = A::ld(xr[i1]) * rs, b = A::ld(xr[i2]) * rs;
        if (p.has_w) {
          a = a * A::ld(w[i1]);
          b = b * A::ld(w[i2]);
        }
        C c, s;
        angle(tl, t, j, &c, &s);
        yr[i1] = A::st(a * c - b * s);
        yr[i2] = A::st(a * s + b * c);
      }
    }
  }
}

template <int DT> const void *norm_rope_for(int v) {
  switch (v) {
    case 0: return (const void *)&k_norm_rope<DT, 0>;
    case 2: return (const void *)&k_norm_rope<DT, 2>;
    case 4: return (const void *)&k_norm_rope<DT, 4>;
    case 8: return (const void *)&k_norm_rope<DT, 8>;
    default: return NULL;
  }
}

}  // namespace

extern "C" const void *nv__gpu_kernel_norm_rope(int dtype, int v) {
  switch (dtype) {
    case DT_F16: return norm_rope_for<DT_F16>(v);
    case DT_BF16: return norm_rope_for<DT_BF16>(v);
    case DT_F32: return norm_rope_for<DT_F32>(v);
    case DT_F64: return v == 0 ? (const void *)&k_norm_rope<DT_F64, 0> : NULL;
    default: return NULL;
  }
}
