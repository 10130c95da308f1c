/* libFuzzer target: nv_load_gguf_from_memory, raw, dequantizing and affine, and the same
 * bytes by path through nv_load_gguf (every mode) and nv_load (raw). */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  const char *path = fuzz_file(data, size, ".gguf");
  for (int mode = NV_GGUF_RAW; mode <= NV_GGUF_AFFINE; mode++) {
    nv_map *m = NULL, *pm = NULL, *lm = NULL;
    nv_io_metadata *md = NULL, *pmd = NULL, *lmd = NULL;
    nv_status st = FUZZ_LOAD(nv_load_gguf_from_memory(data, size, (nv_gguf_mode)mode, &m, &md));
    nv_status pst = FUZZ_LOAD(nv_load_gguf(path, (nv_gguf_mode)mode, &pm, &pmd));
    fuzz_same(st, m, pst, pm);
    if (st == NV_OK && nv_io_metadata_size(md) != nv_io_metadata_size(pmd)) abort();
    if (mode == NV_GGUF_RAW) {
      nv_status lst = FUZZ_LOAD(nv_load(path, &lm, &lmd));
      fuzz_same(st, m, lst, lm);
      fuzz_consume(lst, lm, lmd);
    }
    fuzz_consume(st, m, md);
    fuzz_consume(pst, pm, pmd);
  }
  return 0;
}
