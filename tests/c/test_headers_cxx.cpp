// The public headers compile as C++ (extern "C"), and together with cuda_runtime.h where CUDA
// is installed (no NV_ constant collides with CUDA's or CCCL's macros).
#ifdef NUVEC_TEST_WITH_CUDA
#include <cuda_runtime.h>
#endif
#include "nuvec.h"

#include <cstdio>

int main() {
  nv_array *x = nv_array_float(2.0f);
  nv_array *y = nv_multiply(x, x);
  float v = 0;
  nv_status s = nv_array_item_float(y, &v);
  nv_release(x);
  nv_release(y);
  if (s != NV_OK || v != 4.0f) {
    std::printf("C++ call failed: %s\n", nv_last_error());
    return 1;
  }
#ifdef NUVEC_TEST_WITH_CUDA
  static_assert(sizeof(cudaError_t) > 0, "cuda_runtime.h is included");
  std::printf("headers compile as C++ with cuda_runtime.h\n");
#else
  std::printf("headers compile as C++ (CUDA not installed)\n");
#endif
  return 0;
}
