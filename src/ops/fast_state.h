/* The internal builders of norm_rope (src/ops/fast_norm_rope.c) and gated_delta_slots
 * (src/ops/fast_delta.c), shared with their rules (src/transforms/rules_fast_state.c) and
 * kernels: the primitives' parameters, the nodes over prepared inputs and the composed forms
 * the transforms go through. The definitions are in include/nuvec/fast.h. */
#ifndef NUVEC_OPS_FAST_STATE_H
#define NUVEC_OPS_FAST_STATE_H

#include "core/internal.h"

/* norm_rope (FAST_NORM_ROPE: inputs x, positions, then the weight and the freqs when given;
 * FAST_NORM_ROPE_CACHE: inputs the cache, x, positions, cache positions, then the weight and
 * the freqs). x, the cache and the weight have the output's dtype, positions are int32, cache
 * positions int32 or int64, freqs the compute dtype; all row-contiguous. The rope's
 * parameters as nv__fast_rope_params (base unused with freqs). */
typedef struct nv__fast_norm_rope_params {
  double eps, base, scale;
  int dims;
  bool traditional, has_weight, has_freqs;
} nv__fast_norm_rope_params;

/* The norm_rope node (cache and cpos NULL for none; w and freqs NULL where the params say
 * absent), its inputs prepared as above (the cache itself when it is row-contiguous, so that
 * a caller's cache can be donated). Arguments not checked again. New reference. */
nv_array *nv__fast_norm_rope_node(const nv_array *x, const nv_array *pos, const nv_array *w,
                                  const nv_array *freqs, const nv_array *cache,
                                  const nv_array *cpos, const nv__fast_norm_rope_params *p);

/* norm_rope in core ops (the reference): x in the compute type, normalized, scaled by w, the
 * rope's composed fallback at the tokens' positions, rounded to x's dtype; with a cache,
 * paged_write's composed scatter of the rows into it. New reference. */
nv_array *nv__fast_norm_rope_composed(const nv_array *x, const nv_array *pos, const nv_array *w,
                                      const nv_array *freqs, const nv_array *cache,
                                      const nv_array *cpos, const nv__fast_norm_rope_params *p);

/* gated_delta_slots (FAST_GATED_DELTA: inputs q, k, v, g, beta, the state pool (input 5,
 * written in place when donated), the slots; outputs the updated pool (output 0, so that it
 * takes a donated pool's buffer), then o). q, k, v have o's dtype, g and beta the compute
 * dtype, the slots int32 or int64; all row-contiguous. */
typedef struct nv__fast_delta_params {
  double scale;
} nv__fast_delta_params;

/* The compute dtype of gated_delta_slots for inputs of dtype dt and a pool of dtype sdt. */
nv_dtype nv__fast_delta_compute_type(nv_dtype dt, nv_dtype sdt);

/* The gated_delta_slots node over prepared inputs (converted here; the pool itself when it is
 * row-contiguous). Arguments not checked again. New reference to the node, or NULL with the
 * thread error set. */
nv__node *nv__fast_delta_node(const nv_array *q, const nv_array *k, const nv_array *v,
                              const nv_array *g, const nv_array *beta, const nv_array *pool,
                              const nv_array *slots, double scale);

/* gated_delta_slots in core ops: out[0] the updated pool, out[1] o (new references). */
void nv__fast_delta_composed(const nv_array *q, const nv_array *k, const nv_array *v,
                             const nv_array *g, const nv_array *beta, const nv_array *pool,
                             const nv_array *slots, double scale, nv_array **out);

#endif
