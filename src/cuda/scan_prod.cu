/* The scan kernels of one operation (scan_impl.cuh): cumprod. */
#include "cuda/scan_impl.cuh"

extern "C" int nv__gpu_scan_lookup_prod(int dtype, nv__gpu_scan_kernels *k) {
  return nvscan::fill_op<nvscan::PROD>(dtype, k);
}
