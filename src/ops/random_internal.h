/* Helpers shared by the random family's builders (src/ops/random*.c). */
#ifndef NUVEC_OPS_RANDOM_INTERNAL_H
#define NUVEC_OPS_RANDOM_INTERNAL_H

#include "ops/ops_internal.h"

/* The key to draw with: `key` retained, or (NULL) the next key of the global sequence. A new
 * reference registered with no scope. */
nv_array *nv__random_use_key(const nv_array *key);

/* Checks a sample shape (0 <= ndim <= NV__MAX_DIMS, no negative dimension) and a key (NULL, or
 * usable, uint32, of shape (2)). NULL when they are fine, else the failed array naming `op`. */
nv_array *nv__random_check(const char *op, const int *shape, int ndim, const nv_array *key);

/* Whether each of the `n` arrays broadcasts to `shape` (so that the samples keep that shape,
 * as MLX requires); else false with `*err` set to the failed array naming `op`. */
bool nv__random_fits(const char *op, const int *shape, int ndim, const nv_array *const *xs,
                     int n, nv_array **err);

/* Registers a result built with scopes suspended with the caller's innermost scope. */
nv_array *nv__random_scoped(nv_array *r);

/* Whether uniform samples `dt` (float16, bfloat16, float32, as MLX 0.32), and the error
 * naming `op` for a dtype it does not take (`what` says which it takes). */
bool nv__random_uniform_dtype(nv_dtype dt);
nv_array *nv__random_dtype_error(const char *op, nv_dtype dt, const char *what);

/* The builders below take checked arguments, return arrays registered with no scope, and
 * expect the caller to have suspended scopes (nv__scope_suspend), except bits, which
 * suspends them itself. A NULL key draws from the global sequence (once per call). */
nv_array *nv__random_bits_unscoped(const int *shape, int ndim, int width, const nv_array *key);
/* Samples on [0, 1) in `dtype`: MLX's uniform(shape, dtype) without its no-op 1 * u + 0. */
nv_array *nv__random_unit(const int *shape, int ndim, nv_dtype dtype, const nv_array *key);
/* MLX's uniform(low, high, shape, dtype). */
nv_array *nv__random_uniform(const nv_array *low, const nv_array *high, const int *shape,
                             int ndim, nv_dtype dtype, const nv_array *key);

#endif
