/* Helpers shared by the op builders: argument checks, broadcasting, promotion, node creation. */
#ifndef NUVEC_OPS_INTERNAL_H
#define NUVEC_OPS_INTERNAL_H

#include "core/internal.h"
#include "ops/params.h"

/* A failed array for op `op` with a formatted message ("op: ..."). */
nv_array *nv__op_error(nv_status status, const char *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks that the `n` inputs are non-NULL. Returns NULL when the builder can go on, else the
 * failed array to return: a NULL input is an invalid argument; a failed input without metadata
 * of its own (NV__FLAG_NOMETA) stops the builder with the first input error. Failed inputs
 * with their ops' metadata go on: the builder computes its metadata as for healthy inputs and
 * its node takes the first input error (nv__op_node), so every later op fails with it too. */
nv_array *nv__op_check(const char *op, const nv_array *const *xs, int n);

/* The broadcast shape of two shapes into `out` (NV__MAX_DIMS); false if incompatible. */
bool nv__broadcast_shapes(const int *a, int na, const int *b, int nb, int *out, int *nout);

/* A new node for `prim` whose inputs are `xs`, with one output of `dtype` and `shape`, and
 * `params_size` bytes of zeroed parameters (n->params). NULL on failure (thread error set).
 * When an input has a known error the node is already FAILED with it (and holds no inputs). */
nv__node *nv__op_node(int prim, nv_array *const *xs, int n, nv_dtype dtype, const int *shape,
                      int ndim, size_t params_size);

/* Finishes a builder: the handle for output 0 of `node`, or a failed array naming `op` when
 * `node` is NULL. */
nv_array *nv__op_finish(const char *op, nv__node *node);

/* For a result that does not depend on its inputs' values (zeros_like, imag of a real array):
 * a failed array with the given metadata and the first input error, or NULL when no input has
 * a known error. */
nv_array *nv__op_inherit(const nv_array *const *xs, int n, nv_dtype dtype, const int *shape,
                         int ndim);

/* Normalizes `axis` against `ndim` (negative from the end); false if out of range. */
bool nv__norm_axis(int *axis, int ndim);

/* Whether `x` is a weakly typed scalar. */
static inline bool nv__is_weak(const nv_array *x) { return nv__out(x)->flags & NV__FLAG_WEAK; }

/* The result dtype of a binary op with MLX's weak-scalar rules. */
nv_dtype nv__result_type(const nv_array *a, const nv_array *b);

/* `x` converted to `dtype`: the same array (retained, not scoped) when it already has it; a
 * weak scalar converts eagerly from its exact value. Returns a new reference that is not
 * registered with any scope (the caller releases it). */
nv_array *nv__cast_unscoped(const nv_array *x, nv_dtype dtype);

/* Runs `expr` with the calling thread's scopes suspended, so temporaries are owned by the
 * builder. */
void nv__scope_suspend(void);
void nv__scope_resume(void);

#endif
