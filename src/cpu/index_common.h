/* Helpers shared by the index family's CPU kernels: a strided walker over several operands
 * (collapsed dimensions, optionally split over the pool), index loading with MLX's negative
 * wrap and a bounds check, and the element combiners of scatter and slice_update_*. */
#ifndef NUVEC_CPU_INDEX_COMMON_H
#define NUVEC_CPU_INDEX_COMMON_H

#include <stdatomic.h>

#include "cpu/kernels.h"

#define NV__IX_MAXOPS 4

/* A run of `n` positions: operand k at p[k], its stride s[k] in elements. */
typedef void (*nv__ix_run)(char **p, const int64_t *s, int64_t n, void *extra);

/* A walk over a shape with up to NV__IX_MAXOPS strided operands. */
typedef struct nv__ix_walk {
  int nd, nops;
  int64_t size;
  int64_t shape[NV__MAX_DIMS];
  int64_t st[NV__IX_MAXOPS][NV__MAX_DIMS];
  char *base[NV__IX_MAXOPS];
  int64_t isz[NV__IX_MAXOPS];
  nv__ix_run run;
  void *extra;
} nv__ix_walk;

/* Prepares a walk of `shape` over `nops` operands: base pointers, strides (elements, one
 * vector of `nd` per operand) and item sizes (bytes). */
void nv__ix_walk_init(nv__ix_walk *w, const int *shape, int nd, int nops,
                      const int64_t *const *strides, char *const *base, const int64_t *isz,
                      nv__ix_run run, void *extra);
/* Runs the walk; over the pool when `parallel` and the walk is large. */
void nv__ix_walk_run(nv__ix_walk *w, bool parallel);

/* Copies `shape` elements of `isz` bytes from a strided source to a strided destination,
 * splitting large copies over the pool. */
void nv__ix_copy(char *dst, const int64_t *dst_st, const char *src, const int64_t *src_st,
                 const int *shape, int nd, size_t isz);

/* Allocates `out` (row-contiguous) and copies operand `base` into it: the start of every
 * update-style kernel that was not given the base's buffer. */
nv_status nv__ix_copy_base(nv__output *out, const nv__operand *base);

/* Row-major strides of a shape. */
void nv__ix_row_strides(const int *shape, int nd, int64_t *st);

/* The first out-of-range index found (by any thread). */
typedef struct nv__ix_bad {
  atomic_int set;
  int64_t value, size;
} nv__ix_bad;

static inline void nv__ix_report(nv__ix_bad *b, int64_t value, int64_t size) {
  int expected = 0;
  if (atomic_compare_exchange_strong(&b->set, &expected, 1)) {
    b->value = value;
    b->size = size;
  }
}

/* NV_OK, or the error naming `op` and the bad index when one was reported. */
nv_status nv__ix_bad_status(nv__ix_bad *b, const char *op);

/* An index element of integer dtype `dt` at p, as int64 (uint64 values above INT64_MAX
 * saturate, so they stay out of range). */
static inline int64_t nv__ix_load(const char *p, nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_UINT8: return *(const uint8_t *)p;
    case NV_DTYPE_UINT16: return *(const uint16_t *)p;
    case NV_DTYPE_UINT32: return *(const uint32_t *)p;
    case NV_DTYPE_UINT64: {
      uint64_t u = *(const uint64_t *)p;
      return u > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)u;
    }
    case NV_DTYPE_INT8: return *(const int8_t *)p;
    case NV_DTYPE_INT16: return *(const int16_t *)p;
    case NV_DTYPE_INT32: return *(const int32_t *)p;
    case NV_DTYPE_INT64: return *(const int64_t *)p;
    default: return INT64_MAX;
  }
}

/* Wraps a negative index once (i + n) and checks 0 <= i and i + extent <= n. */
static inline bool nv__ix_wrap(int64_t *i, int64_t n, int64_t extent) {
  if (*i < 0) *i += n;
  return *i >= 0 && *i < n && *i + extent <= n;
}

/* How updates combine with the base: assign, add, multiply, maximum, minimum. */
enum { NV__IX_ASSIGN = 0, NV__IX_ADD, NV__IX_PROD, NV__IX_MAX, NV__IX_MIN };

/* Combines a run of n elements: d[i*ds] = d[i*ds] (op) s[i*ss] (strides in elements). */
typedef void (*nv__ix_combine_fn)(char *d, int64_t ds, const char *s, int64_t ss, int64_t n);

/* The combiner of `mode` for dtype `dt` (never NULL for a valid dtype). */
nv__ix_combine_fn nv__ix_combiner(int mode, nv_dtype dt);

/* The index family's kernels (src/cpu/index.c). */
nv_status nv__k_take(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_gather(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_gather_axis(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_scatter(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_scatter_axis(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_masked_scatter(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_dynamic_slice(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_dynamic_slice_update(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_slice_update_reduce(nv__node *node, const nv__operand *in, int donated);
nv_status nv__k_diag(nv__node *node, const nv__operand *in, int donated);

/* Registers the family's kernels (listed in src/cpu/register.c). */
void nv__cpu_register_index(nv__kernel_fn *k);

#endif
