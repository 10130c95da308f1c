/* The scan kernels of one operation (scan_impl.cuh): cummax. */
#include "cuda/scan_impl.cuh"

extern "C" int nv__gpu_scan_lookup_max(int dtype, nv__gpu_scan_kernels *k) {
  return nvscan::fill_op<nvscan::MAX>(dtype, k);
}
