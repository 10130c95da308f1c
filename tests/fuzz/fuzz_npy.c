/* libFuzzer target: nv_load_npy_from_memory. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  nv_array *x = NULL;
  if (nv_load_npy_from_memory(data, size, &x) == NV_OK) {
    fuzz_read(x);
    nv_release(x);
  } else if (!nv_last_error()[0]) {
    abort();
  }
  return 0;
}
