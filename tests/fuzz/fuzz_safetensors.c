/* libFuzzer target: nv_load_safetensors_from_memory (the strict JSON header reader), and the
 * same bytes by path through nv_load_safetensors and nv_load (views of a file mapping). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  nv_map *m = NULL, *pm = NULL, *lm = NULL;
  nv_io_metadata *md = NULL, *pmd = NULL, *lmd = NULL;
  nv_status st = FUZZ_LOAD(nv_load_safetensors_from_memory(data, size, &m, &md));
  const char *path = fuzz_file(data, size, ".safetensors");
  nv_status pst = FUZZ_LOAD(nv_load_safetensors(path, &pm, &pmd));
  nv_status lst = FUZZ_LOAD(nv_load(path, &lm, &lmd));
  fuzz_same(st, m, pst, pm);
  fuzz_same(st, m, lst, lm);
  if (st == NV_OK && (nv_io_metadata_size(md) != nv_io_metadata_size(pmd) ||
                      nv_io_metadata_size(md) != nv_io_metadata_size(lmd)))
    abort();
  fuzz_consume(st, m, md);
  fuzz_consume(pst, pm, pmd);
  fuzz_consume(lst, lm, lmd);
  return 0;
}
