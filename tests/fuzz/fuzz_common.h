/* Shared by the libFuzzer targets: reads back every array a loader returned (so the sanitizers
 * check each view against its buffer) and frees everything. A loader must either succeed or
 * fail with a status and message; it must never crash, hang, leak or read out of bounds. */
#ifndef NUVEC_FUZZ_COMMON_H
#define NUVEC_FUZZ_COMMON_H

#include <stdlib.h>
#include <string.h>

#include "nuvec.h"

static void fuzz_read(nv_array *x) {
  size_t n = nv_array_nbytes(x);
  void *p = malloc(n ? n : 1);
  if (p && nv_array_read(x, p, n) != NV_OK) abort(); /* a loaded array always reads back */
  free(p);
}

static void fuzz_consume(nv_status st, nv_map *m, nv_io_metadata *md) {
  if (st != NV_OK) {
    if (!nv_last_error()[0]) abort(); /* every failure names its problem */
    return;
  }
  for (size_t i = 0; i < nv_map_size(m); i++) fuzz_read(nv_map_value(m, i));
  for (size_t i = 0; i < nv_io_metadata_size(md); i++) {
    const char *k = nv_io_metadata_key(md, i);
    nv_meta_type t;
    const void *v;
    size_t n;
    if (!nv_io_metadata_has(md, k, &t)) abort();
    if (t == NV_META_ARRAY && nv_io_metadata_get_array(md, k, &t, &n, &v) != NV_OK) abort();
  }
  nv_map_free(m);
  nv_io_metadata_free(md);
}

#endif
