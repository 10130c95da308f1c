/* The serving kernels' internal builders (src/ops/fast_serving.c), shared with their rules
 * (src/transforms/rules_fast_serving.c) and kernels: the primitives' parameters, the nodes
 * over prepared inputs and the composed forms the transforms go through. */
#ifndef NUVEC_OPS_FAST_SERVING_H
#define NUVEC_OPS_FAST_SERVING_H

#include "core/internal.h"

/* sorted_offsets: groups >= 0; the output has groups + 1 elements. */
typedef struct nv__fast_offsets_params {
  int groups;
} nv__fast_offsets_params;

/* causal_softmax: rows >= 1 rows a block (dividing the number of rows of the last axis). */
typedef struct nv__fast_causal_params {
  int rows;
} nv__fast_causal_params;

/* A causal_softmax node over x (a real floating dtype, converted row-contiguous here: the same
 * array when it already is, so that a caller's x can be donated). Arguments not checked
 * again. New reference (not scoped). */
nv_array *nv__fast_causal_node(const nv_array *x, int rows);

/* A sorted_offsets node over ids (an integer dtype; int8/int16/uint8/uint16 converted to int32,
 * any layout made row-contiguous). New reference. */
nv_array *nv__fast_offsets_node(const nv_array *ids, int groups);

/* sorted_offsets of each batch of ids (leading axis of `ids`, the rest taken flat) in core
 * ops, as the count of ids < g: [batches, groups + 1] of dtype `dt`. What vmap runs (equal to
 * the fused search for sorted ids). New reference. */
nv_array *nv__fast_offsets_composed(const nv_array *ids, int groups, nv_dtype dt);

/* causal_softmax in core ops: where(seen, softmax(where(seen, x, -inf)), 0) in the compute
 * type, rounded to x's dtype. New reference. */
nv_array *nv__fast_causal_composed(const nv_array *x, int rows);

/* A paged_write node over the pool (kept in its dtype), the values (converted to the pool's
 * dtype) and the slots (int64 unless int32), each made row-contiguous (the pool itself when it
 * already is, so that a caller's pool can be donated). Arguments not checked again. */
nv_array *nv__fast_paged_node(const nv_array *pool, const nv_array *values, const nv_array *slots);

/* paged_write in core ops: the pool flattened to [num_blocks * B + 1, D] (a last row for the
 * skipped tokens), the values' rows scattered at their slots (negative ones at the last row),
 * the last row dropped and the pool's shape restored. New reference. */
nv_array *nv__fast_paged_composed(const nv_array *pool, const nv_array *values,
                                  const nv_array *slots);

/* conv_slots: silu after the sum, and whether the bias (input 4) is given. */
typedef struct nv__fast_conv_params {
  bool silu, has_bias;
} nv__fast_conv_params;

/* The conv_slots node over x, weight, pool, slots (int64 unless int32) and the optional bias
 * (weight and bias converted to x's dtype, everything row-contiguous; the pool itself when it
 * already is, so that a caller's pool can be donated). Arguments not checked again. New
 * reference to the node (outputs: the pool, then y), or NULL with the thread error set. */
nv__node *nv__fast_conv_node(const nv_array *x, const nv_array *w, const nv_array *pool,
                             const nv_array *slots, const nv_array *bias, bool silu);

/* conv_slots in core ops: out[0] the updated pool, out[1] y (new references). */
void nv__fast_conv_composed(const nv_array *x, const nv_array *w, const nv_array *pool,
                            const nv_array *slots, const nv_array *bias, bool silu,
                            nv_array **out);

#endif
