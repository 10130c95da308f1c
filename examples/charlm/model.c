/* charlm's transformer: parameters, forward pass and loss (see model.h). */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Parameter arrays per block and outside the blocks (wte, wpe, the final norm). The queries,
 * keys and values have a matrix each rather than one fused matrix: slicing a fused product
 * would cost the backward pass a zero-filled gradient of the whole product per slice. */
enum { PER_LAYER = 8, OUTSIDE = 3 };
enum { P_ATTN_NORM, P_WQ, P_WK, P_WV, P_WO, P_MLP_NORM, P_FC, P_PROJ };

static const char *const layer_names[PER_LAYER] = {
    "attn_norm.weight", "attn.wq", "attn.wk", "attn.wv",
    "attn.wo",          "mlp_norm.weight", "mlp.fc", "mlp.proj",
};

bool charlm_config_valid(const charlm_config *c, char *why, size_t why_size) {
  const char *msg = NULL;
  if (c->vocab < 2 || c->vocab > 256) msg = "the vocabulary must have 2 to 256 characters";
  else if (c->context < 1 || c->context > 4096) msg = "the context must be 1 to 4096";
  else if (c->layers < 1 || c->layers > 64) msg = "the number of layers must be 1 to 64";
  else if (c->dim < 1 || c->dim > 8192) msg = "the model width must be 1 to 8192";
  else if (c->heads < 1 || c->dim % c->heads != 0) msg = "the width must divide by the heads";
  else if (c->mlp < 1 || c->mlp > 65536) msg = "the MLP width must be 1 to 65536";
  if (msg) snprintf(why, why_size, "%s", msg);
  return msg == NULL;
}

int charlm_param_count(const charlm_config *c) { return OUTSIDE + PER_LAYER * c->layers; }

/* The name and shape of parameter `i` in the forward pass's order. */
static void param_info(const charlm_config *c, int i, char *name, size_t size, int shape[2],
                       int *ndim) {
  int d = c->dim;
  *ndim = 2;
  if (i == 0) {
    snprintf(name, size, "wte");
    shape[0] = c->vocab, shape[1] = d;
    return;
  }
  if (i == 1) {
    snprintf(name, size, "wpe");
    shape[0] = c->context, shape[1] = d;
    return;
  }
  if (i == charlm_param_count(c) - 1) {
    snprintf(name, size, "norm.weight");
    shape[0] = d, *ndim = 1;
    return;
  }
  int layer = (i - 2) / PER_LAYER, k = (i - 2) % PER_LAYER;
  snprintf(name, size, "layers.%d.%s", layer, layer_names[k]);
  shape[0] = k == P_PROJ ? c->mlp : d;
  shape[1] = k == P_FC ? c->mlp : d;
  if (k == P_ATTN_NORM || k == P_MLP_NORM) *ndim = 1;
}

void charlm_param_name(const charlm_config *c, int i, char *buf, size_t size) {
  int shape[2], ndim;
  param_info(c, i, buf, size, shape, &ndim);
}

/* The initial value of parameter `i`, as MLX's layers initialize theirs: norm weights 1,
 * embeddings N(0, 1/dim) (nn.Embedding), projections uniform on ±1/sqrt(fan_in) (nn.Linear).
 * GPT-2's N(0, 0.02²) is too small for a narrow model: queries and keys start so close to 0
 * that attention stays uniform for hundreds of steps with some seeds. */
static nv_array *param_init(const charlm_config *c, int i, const nv_array *key) {
  char name[64];
  int shape[2], ndim;
  param_info(c, i, name, sizeof name, shape, &ndim);
  if (ndim == 1) return nv_ones(shape, 1, NV_DTYPE_FLOAT32);
  if (i < 2) return nv_init_normal(shape, 2, 0.0, 1.0 / sqrt(c->dim), NV_DTYPE_FLOAT32, key);
  double limit = 1.0 / sqrt(shape[0]);
  int k = (i - 2) % PER_LAYER;
  /* The layers that write into the residual stream are scaled down by 1/sqrt(2 × layers), as
   * GPT-2 does, so the stream's variance does not grow with depth at initialization. */
  if (k == P_WO || k == P_PROJ) limit /= sqrt(2.0 * c->layers);
  return nv_init_uniform(shape, 2, -limit, limit, NV_DTYPE_FLOAT32, key);
}

nv_status charlm_init(const charlm_config *c, const nv_array *key, nv_map **out) {
  int n = charlm_param_count(c);
  nv_map *m = nv_map_new();
  if (!m) return NV_ERR_OUT_OF_MEMORY;
  nv_status s = nv_scope_begin();
  if (s != NV_OK) {
    nv_map_free(m);
    return s;
  }
  nv_array *keys = nv_random_split(key, n);
  for (int i = 0; s == NV_OK && i < n; i++) {
    int start[2] = {i, 0}, stop[2] = {i + 1, 2}, two = 2;
    nv_array *ki = nv_reshape(nv_slice(keys, start, stop, NULL, 2), &two, 1);
    char name[64];
    int shape[2], ndim;
    param_info(c, i, name, sizeof name, shape, &ndim);
    s = nv_map_set(m, name, param_init(c, i, ki));
  }
  /* Evaluate once here so that every later step starts from materialized parameters. */
  const nv_map *maps[1] = {m};
  if (s == NV_OK) s = nv_params_eval(maps, 1);
  nv_scope_end();
  if (s != NV_OK) {
    nv_map_free(m);
    return s;
  }
  *out = m;
  return NV_OK;
}

nv_status charlm_param_order(const charlm_config *c, const nv_map *params, nv_array **out) {
  for (int i = 0; i < charlm_param_count(c); i++) {
    char name[64];
    int shape[2], ndim;
    param_info(c, i, name, sizeof name, shape, &ndim);
    nv_array *p = nv_map_get(params, name);
    if (!p) {
      fprintf(stderr, "charlm: the parameter %s is missing\n", name);
      return NV_ERR_INVALID_ARGUMENT;
    }
    const int *got = nv_array_shape(p);
    if (nv_array_ndim(p) != ndim || got[0] != shape[0] || (ndim == 2 && got[1] != shape[1])) {
      fprintf(stderr, "charlm: the parameter %s has the wrong shape for this model\n", name);
      return NV_ERR_INVALID_ARGUMENT;
    }
    out[i] = p;
  }
  return NV_OK;
}

/* ---- The forward pass. Everything below runs inside a scope, which owns the temporaries. */

static const int last = -1;

/* logsumexp and softmax over the last axis: the library's fused ops (one pass per row), whose
 * gradients are the reduce family's rules. */
static nv_array *logsumexp_last(nv_array *x) { return nv_logsumexp(x, &last, 1, true); }

static nv_array *softmax_last(nv_array *x) { return nv_softmax(x, &last, 1, false); }

/* RMSNorm: x / sqrt(mean(x²) + eps) * weight, over the last axis, as the library's fused op (one
 * pass per row, a fused gradient), as MLX's and PyTorch's RMSNorm modules compute it. */
static nv_array *rms_norm(nv_array *x, nv_array *weight) {
  return nv_fast_rms_norm(x, weight, 1e-5);
}

/* GELU in its sigmoid form x * sigmoid(1.702 x) (MLX's gelu_fast_approx), one fused op whose
 * gradient is one pass too. */
static nv_array *gelu(nv_array *x) { return nv_gelu_fast_approx(x); }

/* The additive causal mask of a length × length attention: 0 on and below the diagonal,
 * -inf above it, so a position attends to itself and to earlier ones only. */
static nv_array *causal_mask(int length) {
  nv_array *allowed = nv_tri(length, length, 0, NV_DTYPE_BOOL);
  nv_array *zero = nv_array_float(0.0f), *neg_inf = nv_array_float(-INFINITY);
  return nv_where(allowed, zero, neg_inf);
}

/* Causal multi-head self-attention of x (batch·length × dim). */
static nv_array *attention(const charlm_config *c, nv_array *const *p, nv_array *x, int batch,
                           int length, nv_array *mask) {
  int hd = c->dim / c->heads;
  int split[4] = {batch, length, c->heads, hd}, heads[4] = {0, 2, 1, 3}, keys[4] = {0, 2, 3, 1};
  /* q, v: batch × heads × length × hd; k transposed: batch × heads × hd × length (views). */
  nv_array *q = nv_multiply_scalar(nv_matmul(x, p[P_WQ]), 1.0 / sqrt((double)hd));
  q = nv_transpose(nv_reshape(q, split, 4), heads, 4);
  nv_array *kt = nv_transpose(nv_reshape(nv_matmul(x, p[P_WK]), split, 4), keys, 4);
  nv_array *v = nv_transpose(nv_reshape(nv_matmul(x, p[P_WV]), split, 4), heads, 4);
  nv_array *att = softmax_last(nv_add(nv_matmul(q, kt), mask));
  nv_array *y = nv_matmul(att, v);
  int flat[2] = {batch * length, c->dim};
  y = nv_reshape(nv_transpose(y, heads, 4), flat, 2);
  return nv_matmul(y, p[P_WO]);
}

/* The hidden state after the blocks, before the final norm: batch·length × dim. */
static nv_array *trunk(const charlm_config *c, nv_array *const *params, const nv_array *tokens) {
  int batch = nv_array_dim(tokens, 0), length = nv_array_dim(tokens, 1);
  int start[2] = {0, 0}, stop[2] = {length, c->dim}, flat[2] = {batch * length, c->dim};
  nv_array *pos = length == c->context ? params[1] : nv_slice(params[1], start, stop, NULL, 2);
  nv_array *tok = nv_take(params[0], tokens, 0); /* batch × length × dim */
  nv_array *x = nv_reshape(nv_add(tok, pos), flat, 2);
  nv_array *mask = causal_mask(length);
  for (int l = 0; l < c->layers; l++) {
    nv_array *const *p = params + 2 + l * PER_LAYER;
    x = nv_add(x, attention(c, p, rms_norm(x, p[P_ATTN_NORM]), batch, length, mask));
    nv_array *h = gelu(nv_matmul(rms_norm(x, p[P_MLP_NORM]), p[P_FC]));
    x = nv_add(x, nv_matmul(h, p[P_PROJ]));
  }
  return rms_norm(x, params[charlm_param_count(c) - 1]);
}

/* Logits of the flattened positions: the final hidden state times the token embedding's
 * transpose (weight tying). */
static nv_array *flat_logits(const charlm_config *c, nv_array *const *params,
                             const nv_array *tokens) {
  return nv_matmul(trunk(c, params, tokens), nv_transpose(params[0], NULL, 0));
}

nv_array *charlm_logits(const charlm_config *c, nv_array *const *params, const nv_array *tokens) {
  if (nv_scope_begin() != NV_OK) return nv_reshape(tokens, NULL, -1);
  int shape[3] = {nv_array_dim(tokens, 0), nv_array_dim(tokens, 1), c->vocab};
  nv_array *out = nv_scope_keep(nv_reshape(flat_logits(c, params, tokens), shape, 3));
  nv_scope_end();
  return out;
}

nv_array *charlm_loss(const charlm_config *c, nv_array *const *params, const nv_array *tokens,
                      const nv_array *targets) {
  if (nv_scope_begin() != NV_OK) return nv_reshape(tokens, NULL, -1);
  int n = nv_array_dim(tokens, 0) * nv_array_dim(tokens, 1), column[2] = {n, 1};
  nv_array *logits = flat_logits(c, params, tokens);
  nv_array *target_logit = nv_take_along_axis(logits, nv_reshape(targets, column, 2), 1);
  nv_array *nll = nv_subtract(logsumexp_last(logits), target_logit);
  nv_array *out = nv_scope_keep(nv_multiply_scalar(nv_sum(nll, NULL, 0, false), 1.0 / n));
  nv_scope_end();
  return out;
}

/* ---- The loss as a closure ---- */

static nv_status loss_fn(void *payload, const nv_vec *inputs, nv_vec *outputs) {
  const charlm_config *c = payload;
  size_t n = (size_t)charlm_param_count(c);
  if (nv_vec_size(inputs) != n + 2) {
    fprintf(stderr, "charlm: the loss takes %zu inputs, got %zu\n", n + 2, nv_vec_size(inputs));
    return NV_ERR_INVALID_ARGUMENT;
  }
  nv_array *const *in = nv_vec_data(inputs);
  return nv_vec_push(outputs, charlm_loss(c, in, in[n], in[n + 1]));
}

nv_closure *charlm_loss_closure(const charlm_config *c) {
  charlm_config *copy = malloc(sizeof *copy);
  if (!copy) return NULL;
  *copy = *c;
  nv_closure *f = nv_closure_new(loss_fn, copy, free);
  if (!f) free(copy);
  return f;
}
