/* libFuzzer target: nv_load_gguf_from_memory, raw and dequantizing. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  for (int mode = NV_GGUF_RAW; mode <= NV_GGUF_DEQUANTIZE; mode++) {
    nv_map *m = NULL;
    nv_io_metadata *md = NULL;
    fuzz_consume(nv_load_gguf_from_memory(data, size, (nv_gguf_mode)mode, &m, &md), m, md);
  }
  return 0;
}
