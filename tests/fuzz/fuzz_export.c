/* libFuzzer target: nv_import_function_from_memory (the exported-function reader), and the same
 * bytes by path through nv_import_function, which must agree. Each input is read twice more
 * with its header's size and checksum made to match its payload, so that the structural
 * checks behind the checksum (counts, sizes, names, layouts, references, views) see every
 * mutation: a reader must succeed or fail with a message, never crash, hang or leak. An
 * imported function is not called: its parameters are as trusted as the file's writer. */
#include <stdint.h>

#include "fuzz_common.h"

static nv_status import_one(const unsigned char *data, size_t size, nv_imported **out) {
  nv_clear_error();
  *out = nv_import_function_from_memory(data, size);
  if (*out)
    return NV_OK;
  if (!nv_last_error()[0])
    abort(); /* every failure names its problem */
  return NV_ERR_IO;
}

static void consume(nv_imported *m) {
  size_t len = 0;
  const char *md = nv_imported_metadata(m, &len);
  if (m && !md)
    abort();
  (void)nv_imported_traces(m);
  nv_imported_release(m);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  nv_imported *m = NULL, *pm = NULL;
  nv_status st = import_one(data, size, &m);
  const char *path = fuzz_file(data, size, ".nvfn");
  nv_clear_error();
  pm = nv_import_function(path);
  if ((pm != NULL) != (st == NV_OK))
    abort();
  if (!pm && !nv_last_error()[0])
    abort();
  consume(m);
  consume(pm);
  if (size >= 32) {
    unsigned char *b = malloc(size);
    if (!b)
      abort();
    memcpy(b, data, size);
    memcpy(b, "\x93NUVECFN", 8);
    uint64_t n = size - 32, h = 0xcbf29ce484222325ull;
    for (size_t i = 32; i < size; i++)
      h = (h ^ b[i]) * 0x100000001b3ull;
    memcpy(b + 16, &n, 8);
    memcpy(b + 24, &h, 8);
    import_one(b, size, &m);
    consume(m);
    memset(b + 8, 0, 8);
    b[8] = 1; /* the version this build reads, flags 0 */
    import_one(b, size, &m);
    consume(m);
    free(b);
  }
  return 0;
}
