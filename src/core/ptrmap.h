/* A map from pointers to longs (open addressing, linear probing), for graph walks: the
 * evaluation order (src/core/eval.c) and the transforms' tape (src/transforms/graph.c). */
#ifndef NUVEC_CORE_PTRMAP_H
#define NUVEC_CORE_PTRMAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct nv__ptrmap {
  const void **keys;
  long *vals;
  size_t cap, n;
} nv__ptrmap;

/* The value slot of `key`, inserted with -1 when new (`*found` says which); NULL when out of
 * memory (the map is unchanged). */
long *nv__ptrmap_slot(nv__ptrmap *m, const void *key, bool *found);

/* The value of `key`, or `missing` when it is absent. */
long nv__ptrmap_get(const nv__ptrmap *m, const void *key, long missing);

/* Frees the map's storage (the map itself is the caller's). */
void nv__ptrmap_free(nv__ptrmap *m);

#endif
