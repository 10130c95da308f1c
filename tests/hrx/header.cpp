// Compiles hrx.h as C++ (beside cuda_runtime.h when CUDA is present) and links against the
// shared library, whose exported symbols must resolve.
#ifdef HRX_TEST_WITH_CUDA
#include <cuda_runtime.h>
#endif
#include <hrx.h>

#include <cstdio>
#include <cstring>

int main() {
  hrx_runtime_options o;
  hrx_runtime_options_init(&o);
  o.engine = HRX_ENGINE_NPU;
  hrx_runtime *rt = nullptr;
  if (hrx_runtime_create(&o, &rt) != HRX_E_UNSUPPORTED || rt != nullptr) return 1;
  if (std::strstr(hrx_last_error(), "NPU") == nullptr) return 2;
  o.engine = HRX_ENGINE_HOST;
  if (hrx_runtime_create(&o, &rt) != HRX_OK) return 3;
  hrx_buffer *b = nullptr;
  if (hrx_buffer_create(rt, HRX_MEMORY_HOST_VISIBLE, 64, &b) != HRX_OK) return 4;
  hrx_view v = hrx_view_whole(b);
  if (v.length != 64 || !hrx_view_overlaps(v, hrx_view_make(b, 63, 1))) return 5;
  hrx_buffer_release(b);
  hrx_runtime_release(rt);
  std::printf("hrx %s: header compiles as C++\n", hrx_version());
  return 0;
}
