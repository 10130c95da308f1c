/* Shared helpers of src/nn: the key index, key joining, and the scope pattern. */
#include "nn/nn_internal.h"

/* FNV-1a: keys are short dotted paths, and a simple well-mixed hash is all the index needs. */
static uint64_t hash_key(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

nv_status nv__keyindex_build(nv__keyindex *ix, const nv_map *m) {
  size_t n = nv_map_size(m), cap = 8;
  while (cap < 2 * n) cap *= 2;
  ix->map = m;
  ix->mask = cap - 1;
  ix->slots = nv__calloc(cap, sizeof *ix->slots);
  if (!ix->slots) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "nn: out of memory");
  for (size_t i = 0; i < n; i++) {
    /* Linear probing; the table is at most half full, so probes stay short. */
    size_t at = (size_t)hash_key(nv_map_key(m, i)) & ix->mask;
    while (ix->slots[at]) at = (at + 1) & ix->mask;
    ix->slots[at] = i + 1;
  }
  return NV_OK;
}

long nv__keyindex_find(const nv__keyindex *ix, const char *key) {
  if (!ix->slots || !key) return -1;
  size_t at = (size_t)hash_key(key) & ix->mask;
  while (ix->slots[at]) {
    size_t i = ix->slots[at] - 1;
    if (!strcmp(nv_map_key(ix->map, i), key)) return (long)i;
    at = (at + 1) & ix->mask;
  }
  return -1;
}

nv_array *nv__keyindex_get(const nv__keyindex *ix, const char *key) {
  long i = nv__keyindex_find(ix, key);
  return i < 0 ? NULL : nv_map_value(ix->map, (size_t)i);
}

void nv__keyindex_free(nv__keyindex *ix) {
  nv__free(ix->slots);
  ix->slots = NULL;
}

char *nv__join_key(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *k = nv__malloc(la + lb + 2);
  if (!k) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "nn: out of memory");
    return NULL;
  }
  if (la == 0) {
    memcpy(k, b, lb + 1);
    return k;
  }
  memcpy(k, a, la);
  k[la] = '.';
  memcpy(k + la + 1, b, lb + 1);
  return k;
}

nv_status nv__nn_scope_begin(const char *op) {
  if (nv_scope_begin() != NV_OK)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  return NV_OK;
}

void nv__nn_scope_end(void) { nv_scope_end(); }

nv_array *nv__nn_result(nv_array *r) {
  nv__scope_register(r);
  return r;
}
