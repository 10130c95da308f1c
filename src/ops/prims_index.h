/* Primitives of the index family (see src/core/prims.h for the entry format). The scatter and
 * slice_update_* primitives take their base as input 0 and write into it when donated. */
#ifndef NUVEC_OPS_PRIMS_INDEX_H
#define NUVEC_OPS_PRIMS_INDEX_H

#define NV__PRIMS_INDEX(X)                                          \
  X(TAKE, "take", D_NONE, false, false)                             \
  X(GATHER, "gather", D_NONE, false, false)                         \
  X(GATHER_AXIS, "take_along_axis", D_NONE, false, false)           \
  X(SCATTER, "scatter", D_0, false, false)                          \
  X(SCATTER_ADD, "scatter_add", D_0, false, false)                  \
  X(SCATTER_PROD, "scatter_prod", D_0, false, false)                \
  X(SCATTER_MAX, "scatter_max", D_0, false, false)                  \
  X(SCATTER_MIN, "scatter_min", D_0, false, false)                  \
  X(SCATTER_AXIS, "put_along_axis", D_0, false, false)              \
  X(MASKED_SCATTER, "masked_scatter", D_0, false, false)            \
  X(DYNAMIC_SLICE, "slice_dynamic", D_NONE, false, false)           \
  X(DYNAMIC_SLICE_UPDATE, "slice_update_dynamic", D_0, false, false) \
  X(SLICE_UPDATE_ADD, "slice_update_add", D_0, false, false)        \
  X(SLICE_UPDATE_PROD, "slice_update_prod", D_0, false, false)      \
  X(SLICE_UPDATE_MAX, "slice_update_max", D_0, false, false)        \
  X(SLICE_UPDATE_MIN, "slice_update_min", D_0, false, false)        \
  X(DIAGONAL, "diagonal", D_NONE, false, true)                      \
  X(DIAG, "diag", D_NONE, false, false)                             \
  X(CONCATENATE, "concatenate", D_NONE, false, false)               \
  X(PAD, "pad", D_NONE, false, false)                               \
  X(DIFF, "diff", D_NONE, false, false)

#endif
