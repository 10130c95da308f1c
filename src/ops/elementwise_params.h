/* Parameters of the elementwise family's primitives, shared by the builders and the kernels.
 * All are plain data stored inline in the node. */
#ifndef NUVEC_OPS_ELEMENTWISE_PARAMS_H
#define NUVEC_OPS_ELEMENTWISE_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

/* round: decimal places (negative: tens, hundreds, ...), with scale = 10^|decimals| as a
 * double and, for integers (decimals < 0), as an exact uint64 (0 when beyond 2^64). */
typedef struct nv__round_params {
  int decimals;
  double scale;
  uint64_t iscale;
} nv__round_params;

/* nan_to_num: the replacements, already rounded to the array's dtype. */
typedef struct nv__nan_to_num_params {
  double nan, posinf, neginf;
} nv__nan_to_num_params;

/* isclose / allclose / array_equal: |a - b| <= atol + rtol * |b| (array_equal: a == b). */
typedef struct nv__isclose_params {
  double rtol, atol;
  bool equal_nan;
} nv__isclose_params;

/* tri: ones where column - row <= k. */
typedef struct nv__tri_params {
  int k;
} nv__tri_params;

/* view: whether the output is a row-major copy of the input's bytes (the strides do not allow
 * a shared buffer) rather than a view of them. */
typedef struct nv__view_dtype_params {
  bool copy;
} nv__view_dtype_params;

/* number_of_elements: the axes (sorted, distinct) whose sizes multiply, or, when `inverted`,
 * the axes whose sizes are left out. */
typedef struct nv__count_params {
  bool inverted;
  int naxes;
  int axes[];
} nv__count_params;

/* gelu and act_vjp: the function. gelu(x) takes the three GELU forms; act_vjp(a, g) computes
 * g f'(x) in one pass, with a = x for the GELU forms and a = the output y = f(x) for tanh and
 * sigmoid (whose derivatives are read from it). */
enum { NV__ACT_GELU, NV__ACT_GELU_TANH, NV__ACT_GELU_FAST, NV__ACT_TANH, NV__ACT_SIGMOID };
typedef struct nv__act_params {
  int mode;
} nv__act_params;

#endif
