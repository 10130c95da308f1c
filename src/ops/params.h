/* Parameters of the primitives, shared by the op builders and the backends' kernels. All are
 * plain data stored inline in the node (nv__node.params). */
#ifndef NUVEC_OPS_PARAMS_H
#define NUVEC_OPS_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

/* Constants: the exact value of a weakly typed scalar. */
typedef struct nv__constant_params {
  double f;
  int64_t i;
  bool is_int;
} nv__constant_params;

/* View primitives (transpose, broadcast, slice, squeeze, expand_dims, reshape, as_strided):
 * the output shares input 0's buffer at `delta` elements further, or, when `copy`, is a
 * row-major copy of input 0 read with the output's shape (a reshape the strides do not allow).
 * `axes` holds the permutation (transpose), or start then step per axis (slice). */
typedef struct nv__view_params {
  int64_t delta;
  bool copy;
  int ndim;
  /* reshape: 1 + the axis the caller gave as -1 (0: none), which a shapeless compile's replay
   * infers again from its input's size. */
  int infer;
  int axes[];
} nv__view_params;

/* slice_update: start, step, then length per axis of the region. */
typedef struct nv__slice_update_params {
  int ndim;
  int data[];
} nv__slice_update_params;

/* arange: value i = start + i * step, in double. */
typedef struct nv__arange_params {
  double start, step;
} nv__arange_params;

/* eye: ones where column - row == k. */
typedef struct nv__eye_params {
  int k;
} nv__eye_params;

/* Reductions: sorted, distinct, non-negative axes of the input. */
typedef struct nv__reduce_params {
  bool keepdims;
  int naxes;
  int axes[];
} nv__reduce_params;

#endif
