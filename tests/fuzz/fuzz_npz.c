/* libFuzzer target: nv_load_npz_from_memory (minizip over an in-memory archive). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  nv_map *m = NULL;
  fuzz_consume(nv_load_npz_from_memory(data, size, &m), m, NULL);
  return 0;
}
