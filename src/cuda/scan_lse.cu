/* The scan kernels of one operation (scan_impl.cuh): logcumsumexp. */
#include "cuda/scan_impl.cuh"

extern "C" int nv__gpu_scan_lookup_lse(int dtype, nv__gpu_scan_kernels *k) {
  return nvscan::fill_op<nvscan::LSE>(dtype, k);
}
