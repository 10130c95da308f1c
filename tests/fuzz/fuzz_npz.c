/* libFuzzer target: nv_load_npz_from_memory (minizip over an in-memory archive), and the same
 * bytes by path through nv_load_npz and nv_load (the zip read from a file mapping). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  nv_map *m = NULL, *pm = NULL, *lm = NULL;
  nv_status st = FUZZ_LOAD(nv_load_npz_from_memory(data, size, &m));
  const char *path = fuzz_file(data, size, ".npz");
  nv_status pst = FUZZ_LOAD(nv_load_npz(path, &pm));
  nv_status lst = FUZZ_LOAD(nv_load(path, &lm, NULL));
  fuzz_same(st, m, pst, pm);
  fuzz_same(st, m, lst, lm);
  fuzz_consume(st, m, NULL);
  fuzz_consume(pst, pm, NULL);
  fuzz_consume(lst, lm, NULL);
  return 0;
}
