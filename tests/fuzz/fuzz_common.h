/* Shared by the libFuzzer targets: reads back every array a loader returned (so the sanitizers
 * check each view against its buffer) and frees everything. A loader must either succeed or
 * fail with a status and message; it must never crash, hang, leak or read out of bounds.
 *
 * Each input is loaded twice more by path: written to a file with the format's extension and
 * loaded through the format's path loader (a file mapping, views of it) and through nv_load
 * (the dispatch on the extension). Both must agree with the in-memory loader: the same status,
 * and on success the same names, dtypes, shapes and bytes. */
#ifndef NUVEC_FUZZ_COMMON_H
#define NUVEC_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nuvec.h"

/* The status of a load just made, which must name its problem when it fails. */
static nv_status fuzz_checked(nv_status st) {
  if (st != NV_OK && !nv_last_error()[0]) abort(); /* every failure names its problem */
  return st;
}

/* Runs one load with the thread's message cleared first, so that an old one cannot count. */
#define FUZZ_LOAD(call) (nv_clear_error(), fuzz_checked(call))

/* The array's elements in row-major order (malloc'd; a loaded array always reads back). */
static void *fuzz_bytes(nv_array *x) {
  size_t n = nv_array_nbytes(x);
  void *p = malloc(n ? n : 1);
  if (!p) abort();
  if (nv_array_read(x, p, n) != NV_OK) abort();
  return p;
}

static void fuzz_read(nv_array *x) { free(fuzz_bytes(x)); }

/* Two loads of one input give the same array. */
static void fuzz_same_array(nv_array *a, nv_array *b) {
  int nd = nv_array_ndim(a);
  if (nv_array_dtype(a) != nv_array_dtype(b) || nd != nv_array_ndim(b) ||
      (nd && memcmp(nv_array_shape(a), nv_array_shape(b), (size_t)nd * sizeof(int))) ||
      nv_array_nbytes(a) != nv_array_nbytes(b))
    abort();
  void *p = fuzz_bytes(a), *q = fuzz_bytes(b);
  if (memcmp(p, q, nv_array_nbytes(a))) abort();
  free(p);
  free(q);
}

/* Two loads of one input agree: both fail, or both give the same names and arrays. */
static void fuzz_same(nv_status st, nv_map *m, nv_status st2, nv_map *m2) {
  if (st != st2) abort();
  if (st != NV_OK) return;
  if (nv_map_size(m) != nv_map_size(m2)) abort();
  for (size_t i = 0; i < nv_map_size(m); i++) {
    if (strcmp(nv_map_key(m, i), nv_map_key(m2, i))) abort();
    fuzz_same_array(nv_map_value(m, i), nv_map_value(m2, i));
  }
}

static void fuzz_consume(nv_status st, nv_map *m, nv_io_metadata *md) {
  if (st != NV_OK) return;
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

/* ---- The input as a file ---- */

static char fuzz_dir[256], fuzz_path[300];

static void fuzz_remove_file(void) {
  unlink(fuzz_path);
  rmdir(fuzz_dir);
}

/* Writes the input to "<private dir>/input<ext>" (a fresh file each time: no mapping of an
 * earlier input is ever truncated under a reader) and returns that path. */
static const char *fuzz_file(const unsigned char *data, size_t size, const char *ext) {
  if (!fuzz_dir[0]) {
    const char *tmp = getenv("TMPDIR");
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/nuvec-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fuzz_dir)) abort();
    snprintf(fuzz_path, sizeof fuzz_path, "%s/input%s", fuzz_dir, ext);
    atexit(fuzz_remove_file);
  }
  unlink(fuzz_path);
  FILE *f = fopen(fuzz_path, "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
  return fuzz_path;
}

#endif
