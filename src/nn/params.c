/* Functions over flat parameter maps (dotted keys): filter by prefix, prefix, merge, update,
 * map a closure over leaves, count, evaluate. */
#include <stdlib.h>

#include "nn/nn_internal.h"

/* Whether `key` is `prefix` or lies under it (prefix + "."); `*rest` gets what follows. */
static bool under_prefix(const char *key, const char *prefix, size_t plen, const char **rest) {
  if (plen == 0) {
    *rest = key;
    return true;
  }
  if (strncmp(key, prefix, plen)) return false;
  if (key[plen] == '\0') *rest = key + plen;
  else if (key[plen] == '.') *rest = key + plen + 1;
  else return false;
  return true;
}

nv_status nv_params_filter(const nv_map *params, const char *prefix, bool strip, nv_map **out) {
  if (!params || !out)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "params_filter: NULL argument");
  if (!prefix) prefix = "";
  size_t plen = strlen(prefix);
  nv_map *m = nv_map_new();
  if (!m) return NV_ERR_OUT_OF_MEMORY;
  const char *empty_from = NULL;
  for (size_t i = 0; i < nv_map_size(params); i++) {
    const char *key = nv_map_key(params, i), *rest;
    if (!under_prefix(key, prefix, plen, &rest)) continue;
    /* Distinct keys keep distinct suffixes after one prefix, except `prefix` and the
     * malformed `prefix.`, which both strip to "". */
    if (strip && !rest[0] && plen) {
      if (empty_from) {
        nv_map_free(m);
        return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                             "params_filter: keys '%s' and '%s' both strip to ''", empty_from,
                             key);
      }
      empty_from = key;
    }
    if (nv__map_append(m, strip ? rest : key, nv_map_value(params, i)) != NV_OK) {
      nv_map_free(m);
      return NV_ERR_OUT_OF_MEMORY;
    }
  }
  *out = m;
  return NV_OK;
}

nv_status nv_params_prefix(const nv_map *params, const char *prefix, nv_map **out) {
  if (!params || !out || !prefix)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "params_prefix: NULL argument");
  if (!prefix[0])
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "params_prefix: the prefix is empty");
  nv_map *m = nv_map_new();
  if (!m) return NV_ERR_OUT_OF_MEMORY;
  for (size_t i = 0; i < nv_map_size(params); i++) {
    const char *key = nv_map_key(params, i);
    char *k = key[0] ? nv__join_key(prefix, key) : NULL;
    nv_status st = key[0] && !k ? NV_ERR_OUT_OF_MEMORY
                                : nv__map_append(m, k ? k : prefix, nv_map_value(params, i));
    nv__free(k);
    if (st != NV_OK) {
      nv_map_free(m);
      return st;
    }
  }
  *out = m;
  return NV_OK;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Fails when a key of `m` is followed by '.' at the start of another key: an array and a
 * subtree at the same place. Sorted, the keys starting with k form one block after k, and
 * those starting with k + "." one block within it, found by binary search. */
static nv_status check_prefixes(const char *op, const nv_map *m) {
  size_t n = nv_map_size(m);
  if (n < 2) return NV_OK;
  const char **keys = nv__malloc(n * sizeof *keys);
  if (!keys) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < n; i++) keys[i] = nv_map_key(m, i);
  qsort(keys, n, sizeof *keys, cmp_str);
  nv_status st = NV_OK;
  for (size_t i = 0; i < n && st == NV_OK; i++) {
    size_t len = strlen(keys[i]);
    /* The first key not below keys[i] + ".". */
    size_t lo = i + 1, hi = n;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      int c = strncmp(keys[mid], keys[i], len);
      if (c < 0 || (c == 0 && (unsigned char)keys[mid][len] < '.')) lo = mid + 1;
      else hi = mid;
    }
    if (lo < n && !strncmp(keys[lo], keys[i], len) && keys[lo][len] == '.')
      st = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "%s: '%s' is an array and also the prefix of '%s'", op, keys[i],
                         keys[lo]);
  }
  nv__free(keys);
  return st;
}

nv_status nv_params_merge(const nv_map *a, const nv_map *b, bool overwrite, nv_map **out) {
  if (!a || !b || !out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "params_merge: NULL argument");
  nv__keyindex ib;
  if (nv__keyindex_build(&ib, b) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv__keyindex ia;
  if (nv__keyindex_build(&ia, a) != NV_OK) {
    nv__keyindex_free(&ib);
    return NV_ERR_OUT_OF_MEMORY;
  }
  nv_map *m = nv_map_new();
  nv_status st = m ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  for (size_t i = 0; i < nv_map_size(a) && st == NV_OK; i++) {
    const char *key = nv_map_key(a, i);
    nv_array *x = nv__keyindex_get(&ib, key);
    if (x && !overwrite)
      st = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "params_merge: both maps hold '%s' (pass overwrite to take the second's)",
                         key);
    else st = nv__map_append(m, key, x ? x : nv_map_value(a, i));
  }
  for (size_t i = 0; i < nv_map_size(b) && st == NV_OK; i++)
    if (nv__keyindex_find(&ia, nv_map_key(b, i)) < 0)
      st = nv__map_append(m, nv_map_key(b, i), nv_map_value(b, i));
  if (st == NV_OK) st = check_prefixes("params_merge", m);
  nv__keyindex_free(&ia);
  nv__keyindex_free(&ib);
  if (st != NV_OK) {
    nv_map_free(m);
    return st;
  }
  *out = m;
  return NV_OK;
}

nv_status nv_params_update(nv_map *params, const nv_map *updates, bool strict) {
  if (!params || !updates)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "params_update: NULL argument");
  nv__keyindex ix;
  if (nv__keyindex_build(&ix, params) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  /* Check every key first, so a failing update changes nothing. */
  nv_status st = NV_OK;
  for (size_t i = 0; i < nv_map_size(updates) && strict && st == NV_OK; i++)
    if (nv__keyindex_find(&ix, nv_map_key(updates, i)) < 0)
      st = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "params_update: '%s' is not a parameter (strict update)",
                         nv_map_key(updates, i));
  nv__keyindex_free(&ix);
  if (st != NV_OK) return st;
  /* nv_map_set replaces in place and appends new keys; each lookup is linear, which only
   * matters for maps far larger than models have. */
  for (size_t i = 0; i < nv_map_size(updates) && st == NV_OK; i++)
    st = nv_map_set(params, nv_map_key(updates, i), nv_map_value(updates, i));
  return st;
}

/* Applies `f` to the leaves under one key; `*leaf` gets a new reference. */
static nv_status map_leaf(const nv_closure *f, nv_vec *in, nv_vec *res, const char *key,
                          nv_array **leaf) {
  nv_status st = nv_closure_apply(f, in, res);
  if (st != NV_OK) return st;
  if (nv_vec_size(res) != 1)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "params_map: the function returned %zu arrays for '%s' (1 expected)",
                         nv_vec_size(res), key);
  *leaf = nv_retain(nv_vec_get(res, 0));
  return NV_OK;
}

nv_status nv_params_map(const nv_closure *f, const nv_map *const *maps, size_t n,
                        nv_map **out) {
  if (!f || !maps || n == 0 || !out)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "params_map: NULL argument or no maps");
  for (size_t j = 0; j < n; j++)
    if (!maps[j]) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "params_map: map %zu is NULL", j);
  nv__keyindex *ix = nv__calloc(n, sizeof *ix);
  nv_vec *in = nv_vec_new(), *res = nv_vec_new();
  nv_map *m = nv_map_new();
  nv_status st = ix && in && res && m
                     ? NV_OK
                     : nv__set_error(NV_ERR_OUT_OF_MEMORY, "params_map: out of memory");
  for (size_t j = 1; j < n && st == NV_OK; j++) st = nv__keyindex_build(&ix[j], maps[j]);
  for (size_t i = 0; i < nv_map_size(maps[0]) && st == NV_OK; i++) {
    const char *key = nv_map_key(maps[0], i);
    nv_vec_clear(in);
    nv_vec_clear(res);
    st = nv_vec_push(in, nv_map_value(maps[0], i));
    for (size_t j = 1; j < n && st == NV_OK; j++) {
      nv_array *x = nv__keyindex_get(&ix[j], key);
      st = x ? nv_vec_push(in, x)
             : nv__set_error(NV_ERR_INVALID_ARGUMENT, "params_map: map %zu has no '%s'", j, key);
    }
    nv_array *leaf = NULL;
    if (st == NV_OK) st = map_leaf(f, in, res, key, &leaf);
    if (st == NV_OK) st = nv__map_append(m, key, leaf);
    nv_release(leaf);
  }
  if (ix)
    for (size_t j = 0; j < n; j++) nv__keyindex_free(&ix[j]);
  nv__free(ix);
  nv_vec_free(in);
  nv_vec_free(res);
  if (st != NV_OK) {
    nv_map_free(m);
    return st;
  }
  *out = m;
  return NV_OK;
}

int64_t nv_params_count(const nv_map *params) {
  int64_t total = 0;
  for (size_t i = 0; i < nv_map_size(params); i++) total += nv_array_size(nv_map_value(params, i));
  return total;
}

nv_status nv_params_eval(const nv_map *const *maps, size_t n) {
  if (!maps && n) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "params_eval: NULL maps");
  size_t total = 0;
  for (size_t j = 0; j < n; j++) {
    if (!maps[j]) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "params_eval: map %zu is NULL", j);
    total += nv_map_size(maps[j]);
  }
  if (total == 0) return NV_OK;
  nv_array **xs = nv__malloc(total * sizeof *xs);
  if (!xs) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "params_eval: out of memory");
  size_t k = 0;
  for (size_t j = 0; j < n; j++)
    for (size_t i = 0; i < nv_map_size(maps[j]); i++) xs[k++] = nv_map_value(maps[j], i);
  nv_status st = nv_eval(xs, total);
  nv__free(xs);
  return st;
}
