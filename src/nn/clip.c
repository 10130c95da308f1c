/* clip_grad_norm, as MLX's optim.clip_grad_norm: the global L2 norm of the gradients and the
 * gradients scaled down to a maximum norm, lazily, with MLX's dtypes. */
#include <math.h>

#include "nn/nn_internal.h"

/* sum(g²), with float16 squared and summed in float32 so it does not overflow (MLX's rule;
 * bfloat16 has float32's range and stays in its own dtype). */
static nv_array *squared_norm(nv_array *g) {
  if (nv_array_dtype(g) == NV_DTYPE_FLOAT16) g = nv_astype(g, NV_DTYPE_FLOAT32);
  return nv_sum(nv_square(g), NULL, 0, false);
}

/* g scaled by `normalizer`; floating gradients are cast back after scaling, so that small
 * normalizers do not underflow in float16 (MLX's rule). */
static nv_array *scale(nv_array *g, nv_array *normalizer) {
  nv_array *r = nv_multiply(g, normalizer);
  return nv_issubdtype(nv_array_dtype(g), NV_CATEGORY_FLOATING) ? nv_astype(r, nv_array_dtype(g))
                                                                : r;
}

static nv_status check(const nv_map *grads, double max_norm) {
  if (!(max_norm >= 0))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "clip_grad_norm: max_norm should be >= 0, %g was provided instead",
                         max_norm);
  for (size_t i = 0; i < nv_map_size(grads); i++)
    if (nv_array_dtype(nv_map_value(grads, i)) == NV_DTYPE_COMPLEX64)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "clip_grad_norm: gradient '%s' is complex64; the norm is defined "
                           "for real gradients",
                           nv_map_key(grads, i));
  return NV_OK;
}

nv_status nv_clip_grad_norm(const nv_map *grads, double max_norm, nv_map **clipped,
                            nv_array **total_norm) {
  if (!grads || !clipped || !total_norm)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "clip_grad_norm: NULL argument");
  nv_status st = check(grads, max_norm);
  if (st == NV_OK) st = nv__nn_scope_begin("clip_grad_norm");
  if (st != NV_OK) return st;
  /* MLX reduces from the Python float 0.0: a weak scalar, so the first sum keeps its dtype. */
  nv_array *acc = nv_weak_scalar(0.0);
  for (size_t i = 0; i < nv_map_size(grads); i++)
    acc = nv_add(acc, squared_norm(nv_map_value(grads, i)));
  nv_array *norm = nv_sqrt(acc);
  nv_array *normalizer =
      nv_minimum_scalar(nv_divide(nv_weak_scalar(max_norm), nv_add_scalar(norm, 1e-6)), 1.0);
  nv_map *m = nv_map_new();
  st = m ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  for (size_t i = 0; i < nv_map_size(grads) && st == NV_OK; i++)
    st = nv__map_append(m, nv_map_key(grads, i), scale(nv_map_value(grads, i), normalizer));
  nv_array *r = nv_retain(norm);
  nv__nn_scope_end();
  if (st != NV_OK) {
    nv_release(r);
    nv_map_free(m);
    return st;
  }
  *clipped = m;
  *total_norm = nv__nn_result(r);
  return NV_OK;
}
