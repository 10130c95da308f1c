/* nv_io_metadata: insertion-ordered typed key/values (GGUF's value model; safetensors uses its
 * strings). */
#include <math.h>
#include <stdlib.h>

#include "io/io_internal.h"

struct nv_io_metadata {
  char **keys;
  nv__meta_value *vals;
  size_t n, cap;
};

size_t nv__meta_type_size(nv_meta_type t) {
  switch (t) {
    case NV_META_UINT8: case NV_META_INT8: case NV_META_BOOL: return 1;
    case NV_META_UINT16: case NV_META_INT16: return 2;
    case NV_META_UINT32: case NV_META_INT32: case NV_META_FLOAT32: return 4;
    case NV_META_UINT64: case NV_META_INT64: case NV_META_FLOAT64: return 8;
    default: return 0;
  }
}

nv_io_metadata *nv_io_metadata_new(void) {
  nv_io_metadata *m = nv__calloc(1, sizeof *m);
  if (!m) nv__set_error(NV_ERR_OUT_OF_MEMORY, "io_metadata_new: out of memory");
  return m;
}

void nv__meta_value_clear(nv__meta_value *v) {
  if (v->type == NV_META_STRING) nv__free(v->v.s);
  if (v->type == NV_META_ARRAY) {
    if (v->elem == NV_META_STRING && v->v.strs)
      for (size_t i = 0; i < v->count; i++) nv__free(v->v.strs[i]);
    nv__free(v->v.data);
    nv__free(v->lens);
  }
  memset(v, 0, sizeof *v);
}

void nv_io_metadata_free(nv_io_metadata *m) {
  if (!m) return;
  for (size_t i = 0; i < m->n; i++) {
    nv__free(m->keys[i]);
    nv__meta_value_clear(&m->vals[i]);
  }
  nv__free(m->keys);
  nv__free(m->vals);
  nv__free(m);
}

size_t nv_io_metadata_size(const nv_io_metadata *m) { return m ? m->n : 0; }

const char *nv_io_metadata_key(const nv_io_metadata *m, size_t i) {
  return m && i < m->n ? m->keys[i] : NULL;
}

const nv__meta_value *nv__meta_at(const nv_io_metadata *m, size_t i) {
  return m && i < m->n ? &m->vals[i] : NULL;
}

static long find(const nv_io_metadata *m, const char *key) {
  if (!m || !key) return -1;
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->keys[i], key)) return (long)i;
  return -1;
}

bool nv_io_metadata_has(const nv_io_metadata *m, const char *key, nv_meta_type *type) {
  long at = find(m, key);
  if (at >= 0 && type) *type = m->vals[at].type;
  return at >= 0;
}

bool nv_io_metadata_remove(nv_io_metadata *m, const char *key) {
  long at = find(m, key);
  if (at < 0) return false;
  nv__free(m->keys[at]);
  nv__meta_value_clear(&m->vals[at]);
  size_t rest = m->n - (size_t)at - 1;
  memmove(m->keys + at, m->keys + at + 1, rest * sizeof *m->keys);
  memmove(m->vals + at, m->vals + at + 1, rest * sizeof *m->vals);
  m->n--;
  return true;
}

nv_status nv__meta_push(nv_io_metadata *m, char *key, nv__meta_value *val) {
  if (m->n == m->cap) {
    size_t nc = m->cap ? m->cap * 2 : 16;
    char **k = nv__realloc(m->keys, nc * sizeof *k);
    if (!k) return NV_ERR_OUT_OF_MEMORY;
    m->keys = k;
    nv__meta_value *v = nv__realloc(m->vals, nc * sizeof *v);
    if (!v) return NV_ERR_OUT_OF_MEMORY;
    m->vals = v;
    m->cap = nc;
  }
  m->keys[m->n] = key;
  m->vals[m->n] = *val;
  m->n++;
  return NV_OK;
}

static char *dup_bytes(const char *s, size_t n) {
  char *d = nv__malloc(n + 1);
  if (d) {
    if (n) memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

/* Stores `val` (taken over) under `key`: in place of an existing value, else appended. */
static nv_status put(nv_io_metadata *m, const char *key, nv__meta_value *val) {
  long at = find(m, key);
  if (at >= 0) {
    nv__meta_value_clear(&m->vals[at]);
    m->vals[at] = *val;
    return NV_OK;
  }
  char *k = dup_bytes(key, strlen(key));
  if (!k || nv__meta_push(m, k, val) != NV_OK) {
    nv__free(k);
    nv__meta_value_clear(val);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "io_metadata: out of memory");
  }
  return NV_OK;
}

static bool int_fits(nv_meta_type t, int64_t v) {
  switch (t) {
    case NV_META_UINT8: return v >= 0 && v <= UINT8_MAX;
    case NV_META_INT8: return v >= INT8_MIN && v <= INT8_MAX;
    case NV_META_UINT16: return v >= 0 && v <= UINT16_MAX;
    case NV_META_INT16: return v >= INT16_MIN && v <= INT16_MAX;
    case NV_META_UINT32: return v >= 0 && v <= UINT32_MAX;
    case NV_META_INT32: return v >= INT32_MIN && v <= INT32_MAX;
    case NV_META_UINT64: return v >= 0;
    case NV_META_INT64: return true;
    case NV_META_BOOL: return v == 0 || v == 1;
    default: return false;
  }
}

nv_status nv_io_metadata_set_int(nv_io_metadata *m, const char *key, nv_meta_type type,
                                 int64_t value) {
  if (!m || !key) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "io_metadata_set_int: NULL argument");
  if (!int_fits(type, value))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "io_metadata_set_int: %lld does not fit the integer type %d of key %s",
                         (long long)value, (int)type, key);
  nv__meta_value v = {.type = type};
  if (type == NV_META_UINT64) v.v.u = (uint64_t)value;
  else v.v.i = value;
  return put(m, key, &v);
}

nv_status nv_io_metadata_set_uint64(nv_io_metadata *m, const char *key, uint64_t value) {
  if (!m || !key) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "io_metadata_set_uint64: NULL argument");
  nv__meta_value v = {.type = NV_META_UINT64, .v.u = value};
  return put(m, key, &v);
}

nv_status nv_io_metadata_set_float(nv_io_metadata *m, const char *key, nv_meta_type type,
                                   double value) {
  if (!m || !key || (type != NV_META_FLOAT32 && type != NV_META_FLOAT64))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "io_metadata_set_float: NULL argument or a type other than float32/64");
  nv__meta_value v = {.type = type, .v.f = type == NV_META_FLOAT32 ? (double)(float)value : value};
  return put(m, key, &v);
}

nv_status nv_io_metadata_set_bool(nv_io_metadata *m, const char *key, bool value) {
  return nv_io_metadata_set_int(m, key, NV_META_BOOL, value);
}

nv_status nv_io_metadata_set_string(nv_io_metadata *m, const char *key, const char *value,
                                    size_t len) {
  if (!m || !key || !value)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "io_metadata_set_string: NULL argument");
  if (len == (size_t)-1) len = strlen(value);
  nv__meta_value v = {.type = NV_META_STRING, .count = len, .v.s = dup_bytes(value, len)};
  if (!v.v.s) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "io_metadata: out of memory");
  return put(m, key, &v);
}

nv_status nv_io_metadata_set_array(nv_io_metadata *m, const char *key, nv_meta_type elem,
                                   const void *values, size_t count) {
  size_t item = nv__meta_type_size(elem);
  if (!m || !key || (!values && count) || !item)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "io_metadata_set_array: NULL argument or a non-scalar element type");
  if (count > SIZE_MAX / item / 2)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "io_metadata_set_array: too many elements");
  nv__meta_value v = {.type = NV_META_ARRAY, .elem = elem, .count = count};
  v.v.data = nv__malloc(count * item + 1);
  if (!v.v.data) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "io_metadata: out of memory");
  if (count) memcpy(v.v.data, values, count * item);
  return put(m, key, &v);
}

nv_status nv_io_metadata_set_string_array(nv_io_metadata *m, const char *key,
                                          const char *const *values, size_t count) {
  if (!m || !key || (!values && count) || count > SIZE_MAX / 16)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "io_metadata_set_string_array: NULL argument");
  for (size_t i = 0; i < count; i++)
    if (!values[i])
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "io_metadata_set_string_array: string %zu is NULL", i);
  nv__meta_value v = {.type = NV_META_ARRAY, .elem = NV_META_STRING, .count = count};
  v.v.strs = nv__calloc(count + 1, sizeof(char *));
  v.lens = nv__calloc(count + 1, sizeof(size_t));
  bool ok = v.v.strs && v.lens;
  for (size_t i = 0; ok && i < count; i++) {
    v.lens[i] = strlen(values[i]);
    ok = (v.v.strs[i] = dup_bytes(values[i], v.lens[i])) != NULL;
  }
  if (!ok) {
    nv__meta_value_clear(&v);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "io_metadata: out of memory");
  }
  return put(m, key, &v);
}

/* ---- Getters ---- */

static const nv__meta_value *lookup(const nv_io_metadata *m, const char *key, const char *fn) {
  long at = find(m, key);
  if (at < 0) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: no key \"%s\"", fn, key ? key : "(null)");
    return NULL;
  }
  return &m->vals[at];
}

static bool is_int_type(nv_meta_type t) {
  return t != NV_META_FLOAT32 && t != NV_META_FLOAT64 && nv__meta_type_size(t);
}

nv_status nv_io_metadata_get_int(const nv_io_metadata *m, const char *key, int64_t *out) {
  const nv__meta_value *v = lookup(m, key, "io_metadata_get_int");
  if (!v) return NV_ERR_INVALID_ARGUMENT;
  if (!is_int_type(v->type) || (v->type == NV_META_UINT64 && v->v.u > INT64_MAX))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "io_metadata_get_int: key \"%s\" is not an integer within int64", key);
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "io_metadata_get_int: NULL output");
  *out = v->type == NV_META_UINT64 ? (int64_t)v->v.u : v->v.i;
  return NV_OK;
}

nv_status nv_io_metadata_get_uint64(const nv_io_metadata *m, const char *key, uint64_t *out) {
  const nv__meta_value *v = lookup(m, key, "io_metadata_get_uint64");
  if (!v) return NV_ERR_INVALID_ARGUMENT;
  if (!is_int_type(v->type) || (v->type != NV_META_UINT64 && v->v.i < 0))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "io_metadata_get_uint64: key \"%s\" is not a non-negative integer", key);
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "io_metadata_get_uint64: NULL output");
  *out = v->type == NV_META_UINT64 ? v->v.u : (uint64_t)v->v.i;
  return NV_OK;
}

nv_status nv_io_metadata_get_float(const nv_io_metadata *m, const char *key, double *out) {
  const nv__meta_value *v = lookup(m, key, "io_metadata_get_float");
  if (!v) return NV_ERR_INVALID_ARGUMENT;
  if (!nv__meta_type_size(v->type))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "io_metadata_get_float: key \"%s\" is not a number",
                         key);
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "io_metadata_get_float: NULL output");
  if (v->type == NV_META_FLOAT32 || v->type == NV_META_FLOAT64) *out = v->v.f;
  else if (v->type == NV_META_UINT64) *out = (double)v->v.u;
  else *out = (double)v->v.i;
  return NV_OK;
}

nv_status nv_io_metadata_get_string(const nv_io_metadata *m, const char *key,
                                    const char **value, size_t *len) {
  const nv__meta_value *v = lookup(m, key, "io_metadata_get_string");
  if (!v) return NV_ERR_INVALID_ARGUMENT;
  if (v->type != NV_META_STRING || !value)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "io_metadata_get_string: key \"%s\" is not a string (or NULL output)", key);
  *value = v->v.s;
  if (len) *len = v->count;
  return NV_OK;
}

nv_status nv_io_metadata_get_array(const nv_io_metadata *m, const char *key, nv_meta_type *elem,
                                   size_t *count, const void **values) {
  const nv__meta_value *v = lookup(m, key, "io_metadata_get_array");
  if (!v) return NV_ERR_INVALID_ARGUMENT;
  if (v->type != NV_META_ARRAY || !elem || !count || !values)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "io_metadata_get_array: key \"%s\" is not an array (or NULL output)", key);
  *elem = v->elem;
  *count = v->count;
  *values = v->v.data;
  return NV_OK;
}

nv_status nv_io_metadata_get_array_string_len(const nv_io_metadata *m, const char *key,
                                              size_t i, size_t *len) {
  const nv__meta_value *v = lookup(m, key, "io_metadata_get_array_string_len");
  if (!v) return NV_ERR_INVALID_ARGUMENT;
  if (v->type != NV_META_ARRAY || v->elem != NV_META_STRING || i >= v->count || !len)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "io_metadata_get_array_string_len: key \"%s\" is not a string array with "
                         "an element %zu", key, i);
  *len = v->lens[i];
  return NV_OK;
}
