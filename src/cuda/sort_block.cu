/* The sort family's block kernels: rows of up to NV__SORT_BLOCK_MAX elements, one block a row.
 * Each thread loads its items striped (coalesced), the keys are exchanged to the blocked
 * arrangement cub::BlockRadixSort ranks in (thread t holds positions t*ITEMS ... of the row,
 * so that the stable sort keeps equal keys in position order), padding keys (all ones, after
 * every real key, NaN's included, since the sort is stable) fill the block's remaining slots,
 * and the sorted keys come back striped for coalesced stores of the mode's output. Only the
 * key's significant bits are ranked. Instantiated per key width, payload and size tier. */
#include <type_traits>

#include <cub/block/block_exchange.cuh>
#include <cub/block/block_radix_sort.cuh>

#include "cuda/sort_keys.cuh"
#include "cuda/sort_kernels.h"

using namespace nvs;

namespace {

template <typename K, bool PAIRS, int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS)
    k_block_sort(const void *src, void *dst, nv__sort_params p) {
  typedef cub::BlockRadixSort<K, THREADS, ITEMS, typename std::conditional<PAIRS, uint32_t,
                              cub::NullType>::type> Sort;
  typedef cub::BlockExchange<K, THREADS, ITEMS> Exchange;
  __shared__ union {
    typename Sort::TempStorage sort;
    typename Exchange::TempStorage exchange;
  } smem;
  __shared__ K med[3];
  const int dt = p.dtype, isz = dtype_size(dt);
  const int64_t len = p.len;
  const bool canon0 = p.canon0 != 0;
  for (int64_t r = blockIdx.x; r < p.nrows; r += gridDim.x) {
    const int64_t base = p.soff + r * len;
    K keys[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; i++) {
      int64_t pos = (int64_t)i * THREADS + threadIdx.x;
      keys[i] = pos < len ? (K)key_of(dt, load_bits(src, base + pos, isz), canon0) : (K)~(K)0;
    }
    Exchange(smem.exchange).StripedToBlocked(keys);
    __syncthreads();
    if constexpr (PAIRS) {
      uint32_t idx[ITEMS];
#pragma unroll
      for (int i = 0; i < ITEMS; i++) idx[i] = (uint32_t)(threadIdx.x * ITEMS + i);
      Sort(smem.sort).SortBlockedToStriped(keys, idx, 0, p.bits);
      /* Striped: item i of thread t is position i * THREADS + t of the sorted row. */
#pragma unroll
      for (int i = 0; i < ITEMS; i++) {
        int64_t pos = (int64_t)i * THREADS + threadIdx.x;
        if (pos >= len) continue;
        if (p.mode == NV__SORT_INDICES) {
          ((uint32_t *)dst)[p.doff + r * len + pos] = idx[i];
        } else if (p.mode == NV__SORT_TOPK) {
          if (pos >= len - p.k) ((uint32_t *)dst)[p.doff + r * p.k + (pos - (len - p.k))] = idx[i];
        } else { /* VALUES of complex64: the elements themselves, through their positions */
          store_bits(dst, p.doff + r * len + pos, isz, load_bits(src, base + idx[i], isz));
        }
      }
    } else {
      Sort(smem.sort).SortBlockedToStriped(keys, 0, p.bits);
      if (p.mode == NV__SORT_MEDIAN) {
        const int64_t at[3] = {(len - 1) / 2, len / 2, len - 1};
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
          int64_t pos = (int64_t)i * THREADS + threadIdx.x;
          for (int j = 0; j < 3; j++)
            if (pos == at[j]) med[j] = keys[i];
        }
        __syncthreads();
        if (threadIdx.x == 0)
          store_bits(dst, p.doff + r, dtype_size(p.odtype),
                     median_bits(dt, p.odtype, med[0], med[1], med[2], false));
      } else {
#pragma unroll
        for (int i = 0; i < ITEMS; i++) {
          int64_t pos = (int64_t)i * THREADS + threadIdx.x;
          if (pos < len) store_bits(dst, p.doff + r * len + pos, isz, value_of(dt, keys[i]));
        }
      }
    }
    /* The next row reuses the shared memory. */
    __syncthreads();
  }
}

/* Size tiers: threads x items a thread. */
#define TIERS(K, PAIRS)                                                        \
  {(const void *)k_block_sort<K, PAIRS, 32, 4>, 32, 128},                     \
  {(const void *)k_block_sort<K, PAIRS, 128, 4>, 128, 512},                   \
  {(const void *)k_block_sort<K, PAIRS, 256, 8>, 256, 2048},                  \
  {(const void *)k_block_sort<K, PAIRS, 512, 8>, 512, 4096}

const nv__sort_block_kernel tiers[2][2][4] = {
    {{TIERS(uint32_t, false)}, {TIERS(uint32_t, true)}},
    {{TIERS(unsigned long long, false)}, {TIERS(unsigned long long, true)}},
};

}  // namespace

extern "C" nv__sort_block_kernel nv__sort_block_kernel_for(int64_t len, int key64, int pairs) {
  const nv__sort_block_kernel *t = tiers[key64 ? 1 : 0][pairs ? 1 : 0];
  for (int i = 0; i < 4; i++)
    if (len <= t[i].capacity) return t[i];
  nv__sort_block_kernel none = {NULL, 0, 0};
  return none;
}
