/* Primitives of the fast family (see src/core/prims.h for the entry format):
 *   SDPA  scaled dot-product attention (inputs q, k, v[, mask][, sinks]; nv__sdpa_params) */
#ifndef NUVEC_OPS_PRIMS_FAST_H
#define NUVEC_OPS_PRIMS_FAST_H

#define NV__PRIMS_FAST(X) X(SDPA, "scaled_dot_product_attention", D_NONE, false, false)

#endif
