/* The sort family's element kernels: the device-wide path's key and finishing kernels around
 * CUB's radix sort (sort_device.cu), argtopk's selection, and searchsorted. The host side is
 * sort.c; the parameter blocks are in sort_kernels.h, the keys in sort_keys.cuh. */
#include "cuda/sort_keys.cuh"
#include "cuda/sort_kernels.h"

using namespace nvs;

namespace {

#define GRID_STRIDE(i, n) \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
       i += (int64_t)gridDim.x * blockDim.x)

/* Composite keys and payloads of every item (its row r = e / len, position e - r * len). */
__global__ void k_keys(const void *src, void *keys, void *vals, nv__sort_dev_params p) {
  const int dt = p.s.dtype, isz = dtype_size(dt);
  const bool canon0 = p.s.canon0 != 0;
  GRID_STRIDE(e, p.n) {
    int64_t r = p.s.nrows == 1 ? 0 : e / p.s.len; /* one row: no 64-bit division */
    uint64_t k = key_of(dt, load_bits(src, p.s.soff + e, isz), canon0);
    if (p.s.bits < 64) k |= (uint64_t)r << p.s.bits;
    if (p.key64) ((unsigned long long *)keys)[e] = k;
    else ((uint32_t *)keys)[e] = (uint32_t)k;
    if (p.payload == 1) ((uint32_t *)vals)[e] = (uint32_t)(e - r * p.s.len);
    else if (p.payload == 2) ((uint32_t *)vals)[e] = (uint32_t)e;
  }
}

/* The two-sort path: the rows of the globally sorted items, as the second sort's keys. */
__global__ void k_row_keys(const void *vals, void *rkeys, nv__sort_dev_params p) {
  GRID_STRIDE(e, p.n) {
    ((uint32_t *)rkeys)[e] = (uint32_t)(((const uint32_t *)vals)[e] / (uint64_t)p.s.len);
  }
}

/* The key of sorted item e: its key bits, or (two-sort path) the key of its element again. */
__device__ __forceinline__ uint64_t item_key(const void *src, const void *keys, const void *vals,
                                             const nv__sort_dev_params &p, int64_t e) {
  if (p.gidx)
    return key_of(p.s.dtype,
                  load_bits(src, p.s.soff + ((const uint32_t *)vals)[e], dtype_size(p.s.dtype)),
                  p.s.canon0 != 0);
  uint64_t k = p.key64 ? ((const unsigned long long *)keys)[e] : ((const uint32_t *)keys)[e];
  return p.s.bits < 64 ? k & ((1ull << p.s.bits) - 1) : k;
}

/* The position in its row of sorted item e (of row e / len). */
__device__ __forceinline__ int64_t item_pos(const void *vals, const nv__sort_dev_params &p,
                                            int64_t e) {
  int64_t v = ((const uint32_t *)vals)[e];
  return p.gidx ? v - (e / p.s.len) * p.s.len : v;
}

__global__ void k_finish(const void *src, const void *keys, const void *vals, void *dst,
                         nv__sort_dev_params p) {
  const int dt = p.s.dtype, isz = dtype_size(dt);
  const int64_t len = p.s.len;
  switch (p.s.mode) {
    case NV__SORT_VALUES:
      GRID_STRIDE(e, p.n) {
        uint64_t b;
        if (dt == DT_C64) b = load_bits(src, p.s.soff + (e / len) * len + item_pos(vals, p, e), 8);
        else b = value_of(dt, item_key(src, keys, vals, p, e));
        store_bits(dst, p.s.doff + e, isz, b);
      }
      break;
    case NV__SORT_INDICES:
      GRID_STRIDE(e, p.n) { ((uint32_t *)dst)[p.s.doff + e] = (uint32_t)item_pos(vals, p, e); }
      break;
    case NV__SORT_TOPK:
      GRID_STRIDE(t, p.s.nrows * p.s.k) {
        int64_t r = t / p.s.k, q = t - r * p.s.k;
        ((uint32_t *)dst)[p.s.doff + t] = (uint32_t)item_pos(vals, p, r * len + len - p.s.k + q);
      }
      break;
    default: /* MEDIAN */
      GRID_STRIDE(r, p.s.nrows) {
        uint64_t lo = 0, hi = 0, last = 0;
        if (len > 0) {
          lo = item_key(src, keys, vals, p, r * len + (len - 1) / 2);
          hi = item_key(src, keys, vals, p, r * len + len / 2);
          last = item_key(src, keys, vals, p, r * len + len - 1);
        }
        store_bits(dst, p.s.doff + r, dtype_size(p.s.odtype),
                   median_bits(dt, p.s.odtype, lo, hi, last, len == 0));
      }
      break;
  }
}

/* ---- argtopk by selection ----
 * Each lane keeps its best KMAX composites, ascending, in registers (static indices only); a
 * candidate better than the lane's worst replaces it and bubbles up. Lists start as zeros: a
 * zero composite stands for (key 0, position 0), which is the least real composite, so the
 * best k of the lists are the best k of the real composites whenever a row has k of them (a
 * selected zero is position 0 itself). The warp then pops its overall best k times. */

template <int KMAX>
__device__ __forceinline__ void insert(unsigned long long (&list)[KMAX], unsigned long long c) {
  if (c <= list[0]) return;
  list[0] = c;
#pragma unroll
  for (int j = 0; j + 1 < KMAX; j++) {
    unsigned long long a = list[j], b = list[j + 1];
    bool s = a > b;
    list[j] = s ? b : a;
    list[j + 1] = s ? a : b;
  }
}

/* The warp's best k composites, best first, to out(j, c) for j = 0..k-1 (lane 0 calls it). */
template <int KMAX, typename Out>
__device__ __forceinline__ void warp_best(unsigned long long (&list)[KMAX], int k, Out out) {
  const unsigned lane = threadIdx.x & 31;
  for (int j = 0; j < k; j++) {
    unsigned long long best = list[KMAX - 1];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      unsigned long long other = __shfl_xor_sync(0xffffffffu, best, o);
      best = other > best ? other : best;
    }
    if (list[KMAX - 1] == best) {
#pragma unroll
      for (int i = KMAX - 1; i > 0; i--) list[i] = list[i - 1];
      list[0] = 0;
    }
    if (lane == 0) out(j, best);
  }
}

/* Scans positions [b, e) of a row of dtype DT (32-bit keys, canon0 off as the CPU's argtopk),
 * four loads in flight a lane. */
template <int DT, int KMAX>
__device__ __forceinline__ void scan_row(const void *src, int64_t base, int64_t b, int64_t e,
                                         unsigned long long (&list)[KMAX]) {
  constexpr int isz = DT == DT_BOOL || DT == DT_U8 || DT == DT_I8     ? 1
                      : DT == DT_U16 || DT == DT_I16 || DT == DT_F16 || DT == DT_BF16 ? 2
                                                                                       : 4;
  const int64_t lane = threadIdx.x & 31;
  int64_t pos = b + lane;
  for (; pos + 96 < e; pos += 128) {
    uint64_t v[4];
#pragma unroll
    for (int u = 0; u < 4; u++) v[u] = load_bits(src, base + pos + 32 * u, isz);
#pragma unroll
    for (int u = 0; u < 4; u++)
      insert<KMAX>(list, key_of(DT, v[u], false) << 32 | (uint64_t)(pos + 32 * u));
  }
  for (; pos < e; pos += 32)
    insert<KMAX>(list, key_of(DT, load_bits(src, base + pos, isz), false) << 32 | (uint64_t)pos);
}

template <int KMAX>
__global__ void __launch_bounds__(NV__TOPK_THREADS)
    k_topk_select(const void *src, void *dst, nv__topk_params p) {
  const int64_t warps = (int64_t)gridDim.x * (NV__TOPK_THREADS / 32);
  for (int64_t w = (int64_t)blockIdx.x * (NV__TOPK_THREADS / 32) + threadIdx.x / 32;
       w < p.nrows * p.chunks; w += warps) {
    int64_t r = w / p.chunks, c = w - r * p.chunks;
    int64_t b = c * p.chunk, e = b + p.chunk < p.len ? b + p.chunk : p.len;
    unsigned long long list[KMAX];
#pragma unroll
    for (int i = 0; i < KMAX; i++) list[i] = 0;
    const int64_t base = p.soff + r * p.len;
    switch (p.dtype) {
      case DT_BOOL: case DT_U8: scan_row<DT_U8, KMAX>(src, base, b, e, list); break;
      case DT_I8: scan_row<DT_I8, KMAX>(src, base, b, e, list); break;
      case DT_U16: scan_row<DT_U16, KMAX>(src, base, b, e, list); break;
      case DT_I16: scan_row<DT_I16, KMAX>(src, base, b, e, list); break;
      case DT_F16: scan_row<DT_F16, KMAX>(src, base, b, e, list); break;
      case DT_BF16: scan_row<DT_BF16, KMAX>(src, base, b, e, list); break;
      case DT_U32: scan_row<DT_U32, KMAX>(src, base, b, e, list); break;
      case DT_I32: scan_row<DT_I32, KMAX>(src, base, b, e, list); break;
      default: scan_row<DT_F32, KMAX>(src, base, b, e, list); break;
    }
    const int k = p.k;
    if (p.chunks == 1) {
      uint32_t *out = (uint32_t *)dst + p.doff + r * k;
      warp_best<KMAX>(list, k, [=](int j, unsigned long long v) { out[k - 1 - j] = (uint32_t)v; });
    } else {
      unsigned long long *out = (unsigned long long *)dst + w * k;
      warp_best<KMAX>(list, k, [=](int j, unsigned long long v) { out[j] = v; });
    }
  }
}

/* Each row's answer from its chunks' composites (chunks * k of them at row * chunks * k). */
template <int KMAX>
__global__ void __launch_bounds__(NV__TOPK_THREADS)
    k_topk_merge(const void *cand, void *dst, nv__topk_params p) {
  const int64_t warps = (int64_t)gridDim.x * (NV__TOPK_THREADS / 32);
  const int64_t m = p.chunks * p.k;
  for (int64_t r = (int64_t)blockIdx.x * (NV__TOPK_THREADS / 32) + threadIdx.x / 32;
       r < p.nrows; r += warps) {
    unsigned long long list[KMAX];
#pragma unroll
    for (int i = 0; i < KMAX; i++) list[i] = 0;
    const unsigned long long *c = (const unsigned long long *)cand + r * m;
    for (int64_t i = threadIdx.x & 31; i < m; i += 32) insert<KMAX>(list, c[i]);
    const int k = p.k;
    uint32_t *out = (uint32_t *)dst + p.doff + r * k;
    warp_best<KMAX>(list, k, [=](int j, unsigned long long v) { out[k - 1 - j] = (uint32_t)v; });
  }
}

/* ---- searchsorted ---- */

__global__ void k_search(const void *a, const void *v, void *out, nv__search_params p) {
  const int dt = p.dtype, isz = dtype_size(dt);
  GRID_STRIDE(i, p.nv) {
    uint64_t kv = key_of(dt, load_bits(v, p.v_off + i, isz), true);
    int64_t lo = 0, hi = p.na;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      uint64_t ka = key_of(dt, load_bits(a, p.a_off + mid * p.a_st, isz), true);
      bool go_right = p.right ? ka <= kv : ka < kv;
      if (go_right) lo = mid + 1;
      else hi = mid;
    }
    ((uint32_t *)out)[p.out_off + i] = (uint32_t)lo;
  }
}

}  // namespace

extern "C" const void *nv__sort_kernel_keys(void) { return (const void *)k_keys; }
extern "C" const void *nv__sort_kernel_row_keys(void) { return (const void *)k_row_keys; }
extern "C" const void *nv__sort_kernel_finish(void) { return (const void *)k_finish; }
extern "C" const void *nv__topk_kernel_select(int kmax) {
  return kmax <= 8 ? (const void *)k_topk_select<8> : (const void *)k_topk_select<32>;
}
extern "C" const void *nv__topk_kernel_merge(int kmax) {
  return kmax <= 8 ? (const void *)k_topk_merge<8> : (const void *)k_topk_merge<32>;
}
extern "C" const void *nv__search_kernel(void) { return (const void *)k_search; }
