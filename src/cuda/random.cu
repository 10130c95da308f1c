/* random_bits and random_unit on the GPU: the CPU kernel's threefry-2x32 streams (src/cpu/
 * random.c; the layout is in random_kernels.h), bit for bit. Each thread hashes a group of 4
 * consecutive counter pairs of one key (4 independent hash chains, for instruction-level
 * parallelism) and writes the 4 first results and the 4 second results as one 16-byte vector
 * each where the destination is aligned for it (always for the first results of a single key;
 * for the second results when H + odd is a multiple of 4), else word by word. random_bits'
 * bytes are cut at each key's end as the CPU's memcpy cuts them; random_unit maps each word to
 * a sample as the CPU does: the word as float32 (rounded to nearest) times 2^-32 (exact),
 * clamped to the largest value below one in the output dtype, rounded to it (float16 and
 * bfloat16 through the CPU's conversions, convert.cuh). Grid-stride loops, 64-bit indices. */
#include <stdint.h>

#include "cuda/convert.cuh"
#include "cuda/random_kernels.h"

namespace {

typedef nv__gpu_random_params params;

/* One round of threefry-2x32: add, rotate left by R, xor. */
template <int R> __device__ __forceinline__ void mix(uint32_t &a, uint32_t &b) {
  a += b;
  b = (b << R) | (b >> (32 - R));
  b ^= a;
}

/* Threefry-2x32 with 20 rounds keyed by (k0, k1) on the counters (x0, x1) in place: the CPU's
 * nv__threefry2x32 (src/ops/random_params.h), the same rotations and key schedule. */
__device__ __forceinline__ void threefry(uint32_t k0, uint32_t k1, uint32_t &x0, uint32_t &x1) {
  const uint32_t k2 = k0 ^ k1 ^ 0x1BD11BDAu;
  uint32_t a = x0 + k0, b = x1 + k1;
#define NVG_TF_EVEN mix<13>(a, b); mix<15>(a, b); mix<26>(a, b); mix<6>(a, b);
#define NVG_TF_ODD mix<17>(a, b); mix<29>(a, b); mix<16>(a, b); mix<24>(a, b);
  NVG_TF_EVEN a += k1; b += k2 + 1u;
  NVG_TF_ODD a += k2; b += k0 + 2u;
  NVG_TF_EVEN a += k0; b += k1 + 3u;
  NVG_TF_ODD a += k1; b += k2 + 4u;
  NVG_TF_EVEN a += k2; b += k0 + 5u;
#undef NVG_TF_EVEN
#undef NVG_TF_ODD
  x0 = a;
  x1 = b;
}

/* A word as a sample on [0, 1) before the clamp (random_unit's float32 step). */
__device__ __forceinline__ float unit(uint32_t w) { return (float)w * 0x1p-32f; }

/* Where the `n` (1 to 4) stream words v of key k go, from word w on, per mode. */
template <int MODE> struct put;

/* random_bits: the words' little-endian bytes at byte 4w of the key's `bytes`, cut there. */
template <> struct put<NV__GPU_RANDOM_BITS> {
  static __device__ __forceinline__ void at(unsigned char *out, const params &p, int64_t k,
                                            int64_t w, const uint32_t *v, int n) {
    unsigned char *d = out + k * p.bytes + 4 * w;
    int64_t left = p.bytes - 4 * w; /* > 4 (n - 1): every word given has a byte here */
    if (n == 4 && left >= 16 && ((uintptr_t)d & 15) == 0) {
      *(uint4 *)d = make_uint4(v[0], v[1], v[2], v[3]);
      return;
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
      if (r >= n) break;
      unsigned char *e = d + 4 * r;
      int64_t m = left - 4 * r;
      if (m >= 4 && ((uintptr_t)e & 3) == 0) {
        *(uint32_t *)e = v[r];
      } else {
        for (int b = 0; b < 4 && b < m; b++) e[b] = (unsigned char)(v[r] >> (8 * b));
      }
    }
  }
};

template <> struct put<NV__GPU_RANDOM_UNIT_F32> {
  static __device__ __forceinline__ void at(unsigned char *out, const params &p, int64_t k,
                                            int64_t w, const uint32_t *v, int n) {
    float *o = (float *)out + k * p.samples + w;
    const float upper = 1.0f - 0x1p-24f;
    float f[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
      float u = unit(v[r]);
      f[r] = u < upper ? u : upper;
    }
    if (n == 4 && ((uintptr_t)o & 15) == 0) {
      *(float4 *)o = make_float4(f[0], f[1], f[2], f[3]);
      return;
    }
#pragma unroll
    for (int r = 0; r < 4; r++)
      if (r < n) o[r] = f[r];
  }
};

/* float16 and bfloat16 samples: 4 of them are one 8-byte vector. */
template <int MODE> struct put_half {
  static __device__ __forceinline__ void at(unsigned char *out, const params &p, int64_t k,
                                            int64_t w, const uint32_t *v, int n) {
    uint16_t *o = (uint16_t *)out + k * p.samples + w;
    const float upper = MODE == NV__GPU_RANDOM_UNIT_F16 ? 1.0f - 0x1p-11f : 1.0f - 0x1p-8f;
    uint32_t h[4];
#pragma unroll
    for (int r = 0; r < 4; r++) {
      float u = unit(v[r]);
      u = u < upper ? u : upper;
      h[r] = MODE == NV__GPU_RANDOM_UNIT_F16 ? nvg::f32_to_f16(u) : nvg::f32_to_bf16(u);
    }
    if (n == 4 && ((uintptr_t)o & 7) == 0) {
      *(uint2 *)o = make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
      return;
    }
#pragma unroll
    for (int r = 0; r < 4; r++)
      if (r < n) o[r] = (uint16_t)h[r];
  }
};
template <> struct put<NV__GPU_RANDOM_UNIT_F16> : put_half<NV__GPU_RANDOM_UNIT_F16> {};
template <> struct put<NV__GPU_RANDOM_UNIT_BF16> : put_half<NV__GPU_RANDOM_UNIT_BF16> {};

/* Group g of key k (k0, k1): items [4g, 4g + 4) of the key's H + odd. Item i < H hashes
 * (i, H + odd + i) into words i and H + odd + i; item H (odd word counts) hashes (H, 0) into
 * word H, right after the first results of the pairs before it, so the first results of a
 * group are always consecutive words. Items past the key's end are hashed and dropped. */
template <int MODE>
__device__ __forceinline__ void group(uint32_t k0, uint32_t k1, unsigned char *__restrict__ out,
                                      const params &p, int64_t k, int64_t g) {
  const int64_t i0 = g * NV__GPU_RANDOM_ITEMS;
  uint32_t lo[4], hi[4];
#pragma unroll
  for (int r = 0; r < 4; r++) {
    int64_t i = i0 + r;
    uint32_t a = (uint32_t)i, b = i < p.half ? (uint32_t)(p.second + i) : 0u;
    threefry(k0, k1, a, b);
    lo[r] = a;
    hi[r] = b;
  }
  int64_t nlo = p.per_key - i0, nhi = p.half - i0;
  put<MODE>::at(out, p, k, i0, lo, nlo < 4 ? (int)nlo : 4);
  if (nhi > 0) put<MODE>::at(out, p, k, p.second + i0, hi, nhi < 4 ? (int)nhi : 4);
}

/* Work item t is group t % groups of key t / groups. One key (the common case) is read once;
 * a batch divides in 32 bits where the items fit. */
template <int MODE>
__global__ void __launch_bounds__(NV__GPU_RANDOM_THREADS)
    k_random(const uint32_t *__restrict__ keys, unsigned char *__restrict__ out, params p) {
  keys += p.key_off;
  out += p.out_off;
  const int64_t step = (int64_t)gridDim.x * blockDim.x;
  const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (p.nkeys == 1) {
    const uint32_t k0 = keys[0], k1 = keys[1];
    for (int64_t t = first; t < p.items; t += step) group<MODE>(k0, k1, out, p, 0, t);
    return;
  }
  for (int64_t t = first; t < p.items; t += step) {
    int64_t k;
    if (p.items <= (int64_t)UINT32_MAX) k = (uint32_t)t / (uint32_t)p.groups;
    else k = t / p.groups;
    group<MODE>(keys[2 * k], keys[2 * k + 1], out, p, k, t - k * p.groups);
  }
}

} /* namespace */

extern "C" const void *nv__gpu_kernel_random(int mode) {
  switch (mode) {
    case NV__GPU_RANDOM_BITS: return (const void *)&k_random<NV__GPU_RANDOM_BITS>;
    case NV__GPU_RANDOM_UNIT_F32: return (const void *)&k_random<NV__GPU_RANDOM_UNIT_F32>;
    case NV__GPU_RANDOM_UNIT_F16: return (const void *)&k_random<NV__GPU_RANDOM_UNIT_F16>;
    case NV__GPU_RANDOM_UNIT_BF16: return (const void *)&k_random<NV__GPU_RANDOM_UNIT_BF16>;
    default: return NULL;
  }
}
