/* The scan family's lookup of its kernels (one .cu file per operation: scan_sum.cu, ...) and
 * diff's kernels; the templates are scan_impl.cuh's. */
#include "cuda/scan_impl.cuh"

extern "C" int nv__gpu_scan_lookup_sum(int dtype, nv__gpu_scan_kernels *k);
extern "C" int nv__gpu_scan_lookup_prod(int dtype, nv__gpu_scan_kernels *k);
extern "C" int nv__gpu_scan_lookup_max(int dtype, nv__gpu_scan_kernels *k);
extern "C" int nv__gpu_scan_lookup_min(int dtype, nv__gpu_scan_kernels *k);
extern "C" int nv__gpu_scan_lookup_lse(int dtype, nv__gpu_scan_kernels *k);

extern "C" int nv__gpu_scan_lookup(int op, int dtype, nv__gpu_scan_kernels *k) {
  using namespace nvscan;
  switch (op) {
    case SUM: return nv__gpu_scan_lookup_sum(dtype, k);
    case PROD: return nv__gpu_scan_lookup_prod(dtype, k);
    case MAX: return nv__gpu_scan_lookup_max(dtype, k);
    case MIN: return nv__gpu_scan_lookup_min(dtype, k);
    case LSE: return nv__gpu_scan_lookup_lse(dtype, k);
    default: return 0;
  }
}

extern "C" const void *nv__gpu_kernel_diff(int dtype, int idx32) {
  using namespace nvscan;
  switch (dtype) {
    case DT_BOOL: return diff_of<DT_BOOL>(idx32);
    case DT_U8: return diff_of<DT_U8>(idx32);
    case DT_U16: return diff_of<DT_U16>(idx32);
    case DT_U32: return diff_of<DT_U32>(idx32);
    case DT_U64: return diff_of<DT_U64>(idx32);
    case DT_I8: return diff_of<DT_I8>(idx32);
    case DT_I16: return diff_of<DT_I16>(idx32);
    case DT_I32: return diff_of<DT_I32>(idx32);
    case DT_I64: return diff_of<DT_I64>(idx32);
    case DT_F16: return diff_of<DT_F16>(idx32);
    case DT_BF16: return diff_of<DT_BF16>(idx32);
    case DT_F32: return diff_of<DT_F32>(idx32);
    case DT_F64: return diff_of<DT_F64>(idx32);
    case DT_C64: return diff_of<DT_C64>(idx32);
    default: return nullptr;
  }
}
