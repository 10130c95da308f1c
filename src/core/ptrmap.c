/* The pointer map of graph walks. */
#include <stdint.h>

#include "core/internal.h"
#include "core/ptrmap.h"

static size_t hash_ptr(const void *p) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

static bool grow(nv__ptrmap *m) {
  size_t nc = m->cap ? m->cap * 2 : 64;
  const void **k = nv__calloc(nc, sizeof *k);
  long *v = nv__malloc(nc * sizeof *v);
  if (!k || !v) {
    nv__free(k);
    nv__free(v);
    return false;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i]) continue;
    size_t h = hash_ptr(m->keys[i]) & (nc - 1);
    while (k[h]) h = (h + 1) & (nc - 1);
    k[h] = m->keys[i];
    v[h] = m->vals[i];
  }
  nv__free(m->keys);
  nv__free(m->vals);
  m->keys = k;
  m->vals = v;
  m->cap = nc;
  return true;
}

long *nv__ptrmap_slot(nv__ptrmap *m, const void *key, bool *found) {
  if ((m->n + 1) * 2 > m->cap && !grow(m)) return NULL;
  size_t h = hash_ptr(key) & (m->cap - 1);
  while (m->keys[h] && m->keys[h] != key) h = (h + 1) & (m->cap - 1);
  *found = m->keys[h] != NULL;
  if (!*found) {
    m->keys[h] = key;
    m->vals[h] = -1;
    m->n++;
  }
  return &m->vals[h];
}

long nv__ptrmap_get(const nv__ptrmap *m, const void *key, long missing) {
  if (!m->cap) return missing;
  size_t h = hash_ptr(key) & (m->cap - 1);
  while (m->keys[h]) {
    if (m->keys[h] == key) return m->vals[h];
    h = (h + 1) & (m->cap - 1);
  }
  return missing;
}

void nv__ptrmap_free(nv__ptrmap *m) {
  nv__free(m->keys);
  nv__free(m->vals);
  m->keys = NULL;
  m->vals = NULL;
  m->cap = m->n = 0;
}
