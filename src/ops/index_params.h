/* Parameters of the index family's primitives, shared by the builders and the kernels. Plain
 * data stored inline in the node. Axes are normalized (non-negative). */
#ifndef NUVEC_OPS_INDEX_PARAMS_H
#define NUVEC_OPS_INDEX_PARAMS_H

#include <stdint.h>

/* take (axis of a), take_along_axis / put_along_axis (the axis), concatenate (the axis),
 * diff (the axis), diag (the diagonal k). */
typedef struct nv__axis_params {
  int axis;
} nv__axis_params;

/* gather / scatter*: inputs are (a, indices[0..naxes), [updates]); `data` holds the axes of a
 * indexed by each index array, then (gather) a.ndim slice sizes. dynamic slice / slice update:
 * the axes of the start values, then (slice) a.ndim slice sizes. */
typedef struct nv__gather_params {
  int naxes;
  int data[];
} nv__gather_params;

/* pad: the mode (nv_pad_mode) and per axis of the input the low then high widths. */
typedef struct nv__pad_params {
  int mode;
  int ndim;
  int width[];
} nv__pad_params;

#endif
