/* nv_vec (arrays in order) and nv_map (string → array, insertion-ordered). */
#include <stdlib.h>

#include "core/internal.h"

struct nv_vec {
  nv_array **items;
  size_t n, cap;
};

nv_vec *nv_vec_new(void) {
  nv_vec *v = nv__calloc(1, sizeof *v);
  if (!v) nv__set_error(NV_ERR_OUT_OF_MEMORY, "vec_new: out of memory");
  return v;
}

void nv_vec_clear(nv_vec *v) {
  if (!v) return;
  for (size_t i = 0; i < v->n; i++) nv_release(v->items[i]);
  v->n = 0;
}

void nv_vec_free(nv_vec *v) {
  if (!v) return;
  nv_vec_clear(v);
  nv__free(v->items);
  nv__free(v);
}

nv_status nv_vec_push(nv_vec *v, nv_array *x) {
  if (!v || !x) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "vec_push: NULL argument");
  if (v->n == v->cap) {
    size_t nc = v->cap ? v->cap * 2 : 8;
    nv_array **it = nv__realloc(v->items, nc * sizeof *it);
    if (!it) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "vec_push: out of memory");
    v->items = it;
    v->cap = nc;
  }
  v->items[v->n++] = nv_retain(x);
  return NV_OK;
}

/* Appends the n arrays all, or none (on out of memory): ops returning several arrays keep
 * their out-list promise with it. */
nv_status nv__vec_push_all(nv_vec *v, nv_array *const *xs, size_t n) {
  if (!v) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "vec_push: NULL list");
  for (size_t i = 0; i < n; i++)
    if (!xs[i]) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "vec_push: NULL array");
  if (v->n + n > v->cap) {
    size_t nc = v->cap ? v->cap : 8;
    while (nc < v->n + n) nc *= 2;
    nv_array **it = nv__realloc(v->items, nc * sizeof *it);
    if (!it) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "vec_push: out of memory");
    v->items = it;
    v->cap = nc;
  }
  for (size_t i = 0; i < n; i++) v->items[v->n++] = nv_retain(xs[i]);
  return NV_OK;
}

size_t nv_vec_size(const nv_vec *v) { return v ? v->n : 0; }
nv_array *nv_vec_get(const nv_vec *v, size_t i) { return v && i < v->n ? v->items[i] : NULL; }
nv_array *const *nv_vec_data(const nv_vec *v) { return v ? v->items : NULL; }

nv_status nv_vec_set(nv_vec *v, size_t i, nv_array *x) {
  if (!v || !x || i >= v->n)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "vec_set: index %zu out of range or NULL", i);
  nv_retain(x);
  nv_release(v->items[i]);
  v->items[i] = x;
  return NV_OK;
}

struct nv_map {
  char **keys;
  nv_array **vals;
  size_t n, cap;
};

nv_map *nv_map_new(void) {
  nv_map *m = nv__calloc(1, sizeof *m);
  if (!m) nv__set_error(NV_ERR_OUT_OF_MEMORY, "map_new: out of memory");
  return m;
}

void nv_map_free(nv_map *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) {
    nv__free(m->keys[i]);
    nv_release(m->vals[i]);
  }
  nv__free(m->keys);
  nv__free(m->vals);
  nv__free(m);
}

static long find(const nv_map *m, const char *key) {
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->keys[i], key)) return (long)i;
  return -1;
}

nv_status nv_map_set(nv_map *m, const char *key, nv_array *x) {
  if (!m || !key || !x) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "map_set: NULL argument");
  long at = find(m, key);
  if (at >= 0) {
    nv_retain(x);
    nv_release(m->vals[at]);
    m->vals[at] = x;
    return NV_OK;
  }
  if (m->n == m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 8;
    char **k = nv__realloc(m->keys, nc * sizeof *k);
    if (!k) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "map_set: out of memory");
    m->keys = k;
    nv_array **v = nv__realloc(m->vals, nc * sizeof *v);
    if (!v) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "map_set: out of memory");
    m->vals = v;
    m->cap = nc;
  }
  size_t len = strlen(key);
  char *k = nv__malloc(len + 1);
  if (!k) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "map_set: out of memory");
  memcpy(k, key, len + 1);
  m->keys[m->n] = k;
  m->vals[m->n] = nv_retain(x);
  m->n++;
  return NV_OK;
}

nv_array *nv_map_get(const nv_map *m, const char *key) {
  if (!m || !key) return NULL;
  long at = find(m, key);
  return at >= 0 ? m->vals[at] : NULL;
}

bool nv_map_remove(nv_map *m, const char *key) {
  if (!m || !key) return false;
  long at = find(m, key);
  if (at < 0) return false;
  nv__free(m->keys[at]);
  nv_release(m->vals[at]);
  memmove(m->keys + at, m->keys + at + 1, (m->n - (size_t)at - 1) * sizeof *m->keys);
  memmove(m->vals + at, m->vals + at + 1, (m->n - (size_t)at - 1) * sizeof *m->vals);
  m->n--;
  return true;
}

size_t nv_map_size(const nv_map *m) { return m ? m->n : 0; }
const char *nv_map_key(const nv_map *m, size_t i) { return m && i < m->n ? m->keys[i] : NULL; }
nv_array *nv_map_value(const nv_map *m, size_t i) { return m && i < m->n ? m->vals[i] : NULL; }
