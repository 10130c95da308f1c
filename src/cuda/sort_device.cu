/* CUB's device-wide radix sort behind a C call (sort_kernels.h), for the sort family's
 * capture function (sort.c): rows too long for one block. Four instantiations: uint32 or
 * uint64 keys, keys alone or with uint32 values. CUB's sorts are stable, so items of equal keys
 * keep the order they are given in (row-major positions). */
#include <cub/device/device_radix_sort.cuh>

#include "cuda/sort_kernels.h"

namespace {

template <typename K>
cudaError_t radix(void *temp, size_t *bytes, int pairs, const void *kin, void *kout,
                  const void *vin, void *vout, int n, int end_bit, cudaStream_t stream) {
  if (pairs)
    return cub::DeviceRadixSort::SortPairs(temp, *bytes, (const K *)kin, (K *)kout,
                                           (const uint32_t *)vin, (uint32_t *)vout, n, 0, end_bit,
                                           stream);
  return cub::DeviceRadixSort::SortKeys(temp, *bytes, (const K *)kin, (K *)kout, n, 0, end_bit,
                                        stream);
}

}  // namespace

extern "C" int nv__sort_device_radix(void *temp, size_t *bytes, int key64, int pairs,
                                     const void *kin, void *kout, const void *vin, void *vout,
                                     int n, int end_bit, void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  if (key64)
    return (int)radix<unsigned long long>(temp, bytes, pairs, kin, kout, vin, vout, n, end_bit, s);
  return (int)radix<uint32_t>(temp, bytes, pairs, kin, kout, vin, vout, n, end_bit, s);
}
