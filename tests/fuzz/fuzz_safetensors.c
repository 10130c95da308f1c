/* libFuzzer target: nv_load_safetensors_from_memory (the strict JSON header reader). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  nv_map *m = NULL;
  nv_io_metadata *md = NULL;
  fuzz_consume(nv_load_safetensors_from_memory(data, size, &m, &md), m, md);
  return 0;
}
