/* charlm's model: a small decoder-only transformer over characters (GPT-2's layout with
 * RMSNorm, no biases, and the output projection tied to the token embedding).
 *
 * The parameters live in an nv_map of dotted names, the flat form of MLX's tree_flatten
 * ("layers.0.attn.wqkv"), so src/nn's optimizers, clipping and the safetensors checkpoint work
 * on it directly. The forward pass is written with ordinary ops, so nv_value_and_grad
 * differentiates it with the library's rules. */
#ifndef CHARLM_MODEL_H
#define CHARLM_MODEL_H

#include "nuvec.h"

/* The shape of the model. */
typedef struct charlm_config {
  int vocab;   /* characters in the vocabulary */
  int context; /* the longest sequence (the position embedding's length) */
  int layers;  /* transformer blocks */
  int dim;     /* width of the residual stream */
  int heads;   /* attention heads (dim must divide by it) */
  int mlp;     /* hidden width of the MLP (4 × dim by default) */
} charlm_config;

/* Checks the configuration; on failure writes a sentence saying what is wrong into `why`. */
bool charlm_config_valid(const charlm_config *c, char *why, size_t why_size);

/* New parameters for `c`, drawn from `key` (a random key, borrowed), as MLX's layers draw
 * theirs: embeddings N(0, 1/dim), projections uniform on ±1/sqrt(fan_in) (those writing into
 * the residual stream scaled down by sqrt(2 × layers), as GPT-2 does), norm weights 1. Writes
 * a new map to `*out` (the caller frees it). */
nv_status charlm_init(const charlm_config *c, const nv_array *key, nv_map **out);

/* The logits (batch × length × vocab, float32) of the next character after each position of
 * `tokens` (int32, batch × length, length ≤ context), from the parameters in `params` (borrowed
 * arrays in the order of charlm_init's map, see charlm_param_order). A new array, lazy. */
nv_array *charlm_logits(const charlm_config *c, nv_array *const *params, const nv_array *tokens);

/* The mean cross-entropy (nats per character, a 0-d float32 array) of predicting `targets`
 * (int32, batch × length) from `tokens`: logsumexp(logits) − the target's logit, averaged. */
nv_array *charlm_loss(const charlm_config *c, nv_array *const *params, const nv_array *tokens,
                      const nv_array *targets);

/* The number of parameter arrays of a model of `c` (the size of charlm_init's map). */
int charlm_param_count(const charlm_config *c);

/* The name of parameter `i` (0 ≤ i < charlm_param_count) in the forward pass's order. */
void charlm_param_name(const charlm_config *c, int i, char *buf, size_t size);

/* The arrays of `params` in the order the forward pass reads them (the map's order). Writes
 * `charlm_param_count(c)` borrowed handles to `out`; fails with NV_ERR_INVALID_ARGUMENT naming
 * a missing parameter or one of the wrong shape. */
nv_status charlm_param_order(const charlm_config *c, const nv_map *params, nv_array **out);

/* A closure computing charlm_loss from its inputs: the parameters in charlm_param_order, then
 * tokens, then targets. Differentiate it with nv_value_and_grad over inputs 0..count-1. */
nv_closure *charlm_loss_closure(const charlm_config *c);

#endif /* CHARLM_MODEL_H */
