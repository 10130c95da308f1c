/* Helpers shared by src/nn: a key index over an nv_map (so that walking two maps by key costs
 * O(n) rather than nv_map_get's O(n) per lookup), key building, and the scope pattern the
 * composed functions use. */
#ifndef NUVEC_NN_INTERNAL_H
#define NUVEC_NN_INTERNAL_H

#include "core/internal.h"
#include "nuvec/nn.h"

/* An open-addressing hash index from the keys of a map to their positions. It borrows the
 * map's key strings, so it is valid while the map is not changed. */
typedef struct nv__keyindex {
  const nv_map *map;
  size_t *slots; /* position + 1, 0 for an empty slot */
  size_t mask;
} nv__keyindex;

/* Builds the index of `m` (NULL allowed: an empty index). Fails with NV_ERR_OUT_OF_MEMORY. */
nv_status nv__keyindex_build(nv__keyindex *ix, const nv_map *m);
/* The position of `key` in the indexed map, or -1. */
long nv__keyindex_find(const nv__keyindex *ix, const char *key);
/* The array under `key`, borrowed, or NULL. */
nv_array *nv__keyindex_get(const nv__keyindex *ix, const char *key);
void nv__keyindex_free(nv__keyindex *ix);

/* "a.b" from "a" and "b" ("b" when `a` is empty) into a new string (nv__malloc; NULL when out
 * of memory). */
char *nv__join_key(const char *a, const char *b);

/* Opens a scope for a composed function, so the temporaries it builds are released when it
 * calls nv__nn_scope_end; what it keeps it retains (maps retain what they hold). */
nv_status nv__nn_scope_begin(const char *op);
void nv__nn_scope_end(void);
/* Hands `r` (a reference the function owns, made unscoped by a retain before the scope ended)
 * to the caller's scope as any builder result. */
nv_array *nv__nn_result(nv_array *r);

#endif
