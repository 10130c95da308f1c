/* Internals of compile shared by the trace and replay (compile.c) and the
 * fusion of element-wise chains into generated kernels (fuse.c). */
#ifndef NUVEC_TRANSFORMS_COMPILE_INTERNAL_H
#define NUVEC_TRANSFORMS_COMPILE_INTERNAL_H

#include "transforms/transforms_internal.h"

/* ---- Recipes ---- */

enum { R_SRC, R_NODE, R_CONST };

/* Where a value comes from: source i (an input of the call, then the captured
 * state), output `idx` of recipe node i, or output `idx` of constant i. */
typedef struct ref {
  int kind, i, idx;
} ref;

typedef struct rout {
  nv_dtype dtype;
  int ndim;
  uint8_t weak;
  int shape[NV__MAX_DIMS];
  int64_t strides[NV__MAX_DIMS];
} rout;

typedef struct rnode {
  int prim, nin, nout;
  nv_stream stream;
  size_t params_size;
  void *params;
  ref *in;
  rout *out;
} rnode;

typedef struct recipe {
  rnode *nodes;
  size_t n, traced;
  nv__input *consts; /* held node references */
  size_t nconst;
  ref *outs;
  size_t nout;
  bool poly; /* every node element-wise: replayable on other shapes of the same
                rank */
} recipe;

void nv__recipe_free(recipe *r);
/* The recipe metadata of an output. */
void nv__rout_of(rout *r, const nv__output *o);

/* ---- Fusion (fuse.c) ---- */

/* A generated kernel: its outputs out[0..) for the indices e in [lo, hi) of output 0 (its
 * elements, or for a chain ending in a reduction its rows), from the inputs' element-0
 * pointers. Outputs after the first are intermediates of the chain used outside it. */
typedef void (*nv__fused_fn)(int64_t lo, int64_t hi, const void *const *in, void *const *out);

/* A compiled kernel shared by the COMPILED nodes that run it, counted (the
 * nodes hold it through a keeper input, as custom functions hold their
 * closures). */
typedef struct nv__fused {
  atomic_long refs;
  nv__fused_fn fn;
  int nin; /* data inputs (the keeper follows them) */
} nv__fused;

/* The most outputs of a COMPILED node: its root and the intermediates used outside it. */
#define NV__COMPILED_MAX_OUT 8

typedef struct nv__compiled_params {
  nv__fused *k;
} nv__compiled_params;

/* Replaces chains of element-wise nodes of `r` (CPU streams only) by COMPILED
 * nodes running generated kernels, compiled by the system C compiler; `src` are
 * the sources' metadata at the trace. Chains it cannot compile stay as they
 * are. Sets *nfused to the kernels made. */
nv_status nv__fuse_recipe(recipe *r, const nv__output *const *src, size_t *nfused);

/* Drops the nodes no output of `r` reaches, keeping the others' order and renumbering the
 * references to them (fuse.c; simplify's last step too). */
nv_status nv__compile_compact(recipe *r);

/* A deep copy of a recipe (constants retained). */
nv_status nv__recipe_copy(recipe *dst, const recipe *src);

#endif
