/* libFuzzer target: nv_load_npy_from_memory, and the same bytes by path through nv_load_npy
 * and nv_load (which names the array "arr_0"). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  nv_array *x = NULL, *y = NULL;
  nv_map *m = NULL, *lm = NULL;
  nv_status st = FUZZ_LOAD(nv_load_npy_from_memory(data, size, &x));
  if (st == NV_OK && !(m = nv_map_new())) abort();
  if (st == NV_OK && nv_map_set(m, "arr_0", x) != NV_OK) abort();
  nv_release(x);
  const char *path = fuzz_file(data, size, ".npy");
  nv_status pst = FUZZ_LOAD(nv_load_npy(path, &y));
  if (pst == NV_OK) {
    if (st != NV_OK) abort();
    fuzz_same_array(nv_map_value(m, 0), y);
    nv_release(y);
  } else if (pst != st) {
    abort();
  }
  nv_status lst = FUZZ_LOAD(nv_load(path, &lm, NULL));
  fuzz_same(st, m, lst, lm);
  fuzz_consume(st, m, NULL);
  fuzz_consume(lst, lm, NULL);
  return 0;
}
