/* The quantize family's argument checks (src/ops/quantize.c), shared with gather_qmm
 * (src/ops/quantize_gather.c). Each returns NULL when the arguments are fine, else the failed
 * array naming `op`. */
#ifndef NUVEC_OPS_QUANTIZE_CHECKS_H
#define NUVEC_OPS_QUANTIZE_CHECKS_H

#include "core/internal.h"
#include "ops/quantize_params.h"

/* Parses `mode` (NULL: affine) and fills the defaults of *gs and *bits (0) as MLX does. */
nv_array *nv__quant_parse_mode(const char *op, const char *mode, int *gs, int *bits,
                               nv__quant_params *p);

/* Packed w (uint32, at least 2-D), its scales and (affine only) biases fit each other: one
 * shape but the last axis, the number of groups of a row. */
nv_array *nv__quant_check_scales(const char *op, const nv__output *w, const nv__output *s,
                                 const nv__output *b, const nv__quant_params *p);

/* gather_qmm of 3-D operands: x (Bx, M, K) (any dtype; converted to the product's), w, scales
 * and biases (NULL in the fp modes) (E, rows, *) checked against each other, and index arrays
 * li and ri of one shape (any integer dtype; flat indices into Bx and E). The result has the
 * indices' shape + (M, N). For the builder and the GATHER_QMM rules; an unscoped reference. */
nv_array *nv__gather_qmm3(const nv_array *x3, const nv_array *w3, const nv_array *s3,
                          const nv_array *b3, const nv_array *li, const nv_array *ri,
                          const nv__gather_qmm_params *p);

#endif
