/* The fast family's internal builders (src/ops/fast_norm.c), shared with its rules
 * (src/transforms/rules_fast.c): the primitives over prepared inputs, and the composed
 * fallbacks (MLX's formulas in core ops) that the transforms differentiate and batch. */
#ifndef NUVEC_OPS_FAST_H
#define NUVEC_OPS_FAST_H

#include "core/internal.h"
#include "ops/fast_params.h"

/* The compute dtype of an output dtype: float64 for float64, else float32. */
nv_dtype nv__fast_compute_type(nv_dtype dt);

/* Whether t is float16, bfloat16, float32 or float64; whether t is a (signed or unsigned)
 * integer dtype. */
bool nv__fast_real_float(nv_dtype t);
bool nv__fast_integer(nv_dtype t);

/* Releases `old` and returns `next`: one step of a chain of temporaries, y = nv__then(y, f(y)). */
nv_array *nv__then(nv_array *old, nv_array *next);

/* x converted to `dt` and row-contiguous (the same array, retained, when it is both). New
 * reference, not scoped (callers suspend the scopes). */
nv_array *nv__fast_prepared(const nv_array *x, nv_dtype dt);

/* A rms_norm (prim FAST_RMS_NORM) or layer_norm (FAST_LAYER_NORM) node of output dtype `dt`
 * over x and the optional w and b (NULL where the params say absent; converted to dt and made
 * row-contiguous here). Arguments are not checked again. New reference (not scoped). */
nv_array *nv__fast_norm_node(int prim, const nv_array *x, const nv_array *w, const nv_array *b,
                             const nv__fast_norm_params *p, nv_dtype dt);

/* A norm_vjp node (dx of output dtype dt) over x, the optional w and the cotangent g, each
 * converted to dt and made row-contiguous. */
nv_array *nv__fast_norm_vjp_node(const nv_array *x, const nv_array *w, const nv_array *g,
                                 const nv__fast_norm_params *p, nv_dtype dt);

/* norm_vjp's formula (src/ops/fast_params.h) in core ops, in the compute type, rounded to dt:
 * what its own transforms go through. */
nv_array *nv__fast_norm_vjp_composed(const nv_array *x, const nv_array *w, const nv_array *g,
                                     const nv__fast_norm_params *p, nv_dtype dt);

/* A rope node over x (kept in its dtype), the offsets (converted to int32) and freqs (when the
 * params say so; converted to the compute dtype), made row-contiguous. New reference. */
nv_array *nv__fast_rope_node(const nv_array *x, const nv_array *offset, const nv_array *freqs,
                             const nv__fast_rope_params *p);

/* The composed fallbacks, broadcasting as core ops do (so batched weights work): x converted
 * to the compute type, normalized over the last axis, rounded to `dt`, then scaled by w and
 * shifted by b in dt (either may be NULL). New references. */
nv_array *nv__fast_rms_composed(const nv_array *x, const nv_array *w, double eps, nv_dtype dt);
nv_array *nv__fast_layer_composed(const nv_array *x, const nv_array *w, const nv_array *b,
                                  double eps, nv_dtype dt);

/* rope composed of core ops: x of rank >= 3 with batch axis 0 and positions along axis -2,
 * `offset` with 1 or shape[0] elements, freqs (NULL for base). Result in x's dtype. */
nv_array *nv__fast_rope_composed(const nv_array *x, const nv_array *offset,
                                 const nv_array *freqs, const nv__fast_rope_params *p);

#endif
