/* charlm's training loop pieces (see train.h). */
#include "train.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The corpus ---- */

nv_status charlm_corpus_load(const char *path, int context, charlm_corpus *corpus) {
  memset(corpus, 0, sizeof *corpus);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "charlm: cannot open the corpus %s: %s\n", path, strerror(errno));
    return NV_ERR_IO;
  }
  size_t cap = 1 << 20, n = 0;
  uint8_t *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    uint8_t *bigger = realloc(buf, cap *= 2);
    if (!bigger) free(buf);
    buf = bigger;
  }
  bool read_error = ferror(f);
  fclose(f);
  if (!buf || read_error) {
    free(buf);
    fprintf(stderr, "charlm: cannot read the corpus %s\n", path);
    return buf ? NV_ERR_IO : NV_ERR_OUT_OF_MEMORY;
  }
  bool seen[256] = {false};
  for (size_t i = 0; i < n; i++) seen[buf[i]] = true;
  int index[256];
  for (int b = 0; b < 256; b++)
    if (seen[b]) {
      index[b] = corpus->vocab_size;
      corpus->vocab[corpus->vocab_size++] = (unsigned char)b;
    }
  for (size_t i = 0; i < n; i++) buf[i] = (uint8_t)index[buf[i]];
  corpus->ids = buf;
  corpus->n = n;
  corpus->n_train = n / 10 * 9 + n % 10 * 9 / 10;
  /* Each split must hold at least one window of context + 1 characters. */
  if (corpus->vocab_size < 2 || corpus->n_train < (size_t)context + 1 ||
      n - corpus->n_train < (size_t)context + 1) {
    fprintf(stderr, "charlm: the corpus %s is too small for a context of %d\n", path, context);
    charlm_corpus_free(corpus);
    return NV_ERR_INVALID_ARGUMENT;
  }
  return NV_OK;
}

void charlm_corpus_free(charlm_corpus *corpus) {
  free(corpus->ids);
  memset(corpus, 0, sizeof *corpus);
}

/* ---- Batches ---- */

/* splitmix64: a well-mixed 64-bit value from a counter, so the batch of a step depends on
 * (seed, step) alone. */
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Token and target arrays (int32, rows × length) of the windows starting at `starts`. */
static nv_status make_batch(const charlm_corpus *c, const size_t *starts, int rows, int length,
                            nv_array **tokens, nv_array **targets) {
  int32_t *buf = malloc(sizeof *buf * (size_t)rows * (size_t)length * 2);
  if (!buf) return NV_ERR_OUT_OF_MEMORY;
  int32_t *tok = buf, *tgt = buf + (size_t)rows * length;
  for (int r = 0; r < rows; r++)
    for (int i = 0; i < length; i++) {
      tok[(size_t)r * length + i] = c->ids[starts[r] + (size_t)i];
      tgt[(size_t)r * length + i] = c->ids[starts[r] + (size_t)i + 1];
    }
  int shape[2] = {rows, length};
  *tokens = nv_array_from_data(tok, shape, 2, NV_DTYPE_INT32);
  *targets = nv_array_from_data(tgt, shape, 2, NV_DTYPE_INT32);
  free(buf);
  return NV_OK;
}

/* ---- The trainer ---- */

/* AdamW with linear warm-up to the peak, then cosine decay to min_lr at the last step. */
static nv_status make_optimizer(const charlm_train_options *o, nv_optimizer **out) {
  int64_t warmup = o->warmup < 1 ? 1 : o->warmup;
  int64_t decay = o->steps - warmup < 1 ? 1 : o->steps - warmup;
  nv_lr_schedule *parts[2] = {NULL, NULL}, *schedule = NULL;
  nv_status s = nv_linear_schedule(o->lr / (double)warmup, o->lr, warmup, &parts[0]);
  if (s == NV_OK) s = nv_cosine_decay(o->lr, decay, o->min_lr, &parts[1]);
  if (s == NV_OK) {
    const nv_lr_schedule *join[2] = {parts[0], parts[1]};
    s = nv_join_schedules(join, 2, &warmup, 1, &schedule);
  }
  if (s == NV_OK) {
    nv_adam_options a = nv_adamw_defaults(o->lr);
    a.schedule = schedule;
    a.weight_decay = o->weight_decay;
    s = nv_optimizer_adamw(&a, out);
  }
  nv_lr_schedule_free(parts[0]);
  nv_lr_schedule_free(parts[1]);
  nv_lr_schedule_free(schedule);
  return s;
}

nv_status charlm_trainer_init(charlm_trainer *t, const charlm_config *config,
                              const charlm_train_options *options, const charlm_corpus *corpus) {
  memset(t, 0, sizeof *t);
  char why[128];
  if (!charlm_config_valid(config, why, sizeof why) || config->vocab != corpus->vocab_size) {
    fprintf(stderr, "charlm: bad model shape: %s\n",
            config->vocab != corpus->vocab_size ? "the vocabulary differs from the corpus'" : why);
    return NV_ERR_INVALID_ARGUMENT;
  }
  int ranks = 1;
  nv_status gs = nv_group_size(options->group, &ranks);
  if (gs != NV_OK) return gs;
  if (options->batch % ranks) {
    fprintf(stderr, "charlm: the batch (%d) must divide by the number of ranks (%d)\n",
            options->batch, ranks);
    return NV_ERR_INVALID_ARGUMENT;
  }
  t->config = *config;
  t->options = *options;
  t->corpus = corpus;
  nv_array *key = nv_random_key(options->seed);
  nv_status s = charlm_init(config, key, &t->params);
  nv_release(key);
  if (s == NV_OK) s = make_optimizer(options, &t->opt);
  if (s == NV_OK) s = nv_optimizer_init(t->opt, t->params);
  if (s == NV_OK) {
    int n = charlm_param_count(config), *argnums = malloc(sizeof *argnums * (size_t)n);
    nv_closure *loss = charlm_loss_closure(config);
    for (int i = 0; argnums && i < n; i++) argnums[i] = i;
    t->value_and_grad = argnums && loss ? nv_value_and_grad(loss, argnums, (size_t)n) : NULL;
    nv_closure_release(loss);
    free(argnums);
    if (!t->value_and_grad) s = NV_ERR_OUT_OF_MEMORY;
  }
  if (s != NV_OK) charlm_trainer_free(t);
  return s;
}

void charlm_trainer_free(charlm_trainer *t) {
  nv_map_free(t->params);
  nv_optimizer_free(t->opt);
  nv_closure_release(t->value_and_grad);
  memset(t, 0, sizeof *t);
}

nv_status charlm_trainer_set_steps(charlm_trainer *t, int64_t steps) {
  if (steps <= t->step) return NV_ERR_INVALID_ARGUMENT;
  charlm_train_options o = t->options;
  o.steps = steps;
  nv_optimizer *next = NULL;
  nv_status s = make_optimizer(&o, &next);
  if (s == NV_OK) s = nv_optimizer_set_state(next, nv_optimizer_state(t->opt));
  if (s != NV_OK) {
    nv_optimizer_free(next);
    return s;
  }
  nv_optimizer_free(t->opt);
  t->opt = next;
  t->options.steps = steps;
  return NV_OK;
}

/* The inputs of the loss closure: the parameters in order, then tokens and targets. */
static nv_status loss_inputs(const charlm_trainer *t, nv_array *tokens, nv_array *targets,
                             nv_vec *inputs) {
  int n = charlm_param_count(&t->config);
  nv_array **order = malloc(sizeof *order * (size_t)n);
  if (!order) return NV_ERR_OUT_OF_MEMORY;
  nv_status s = charlm_param_order(&t->config, t->params, order);
  for (int i = 0; s == NV_OK && i < n; i++) s = nv_vec_push(inputs, order[i]);
  free(order);
  if (s == NV_OK) s = nv_vec_push(inputs, tokens);
  if (s == NV_OK) s = nv_vec_push(inputs, targets);
  return s;
}

/* The loss and gradients of one batch, the update, and one evaluation of everything the next
 * step needs (new parameters, optimizer state) with the loss and norm. */
static nv_status step_batch(charlm_trainer *t, nv_array *tokens, nv_array *targets, nv_map **next,
                            double *loss, double *grad_norm) {
  int n = charlm_param_count(&t->config);
  nv_vec *inputs = nv_vec_new(), *outs = nv_vec_new();
  nv_map *grads = nv_map_new(), *clipped = NULL;
  nv_array *norm = NULL;
  nv_status s = inputs && outs && grads ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  if (s == NV_OK) s = loss_inputs(t, tokens, targets, inputs);
  if (s == NV_OK) s = nv_closure_apply(t->value_and_grad, inputs, outs);
  int ranks = 1;
  if (s == NV_OK) s = nv_group_size(t->options.group, &ranks);
  for (int i = 0; s == NV_OK && i < n; i++) {
    char name[64];
    charlm_param_name(&t->config, i, name, sizeof name);
    nv_array *g = nv_vec_get(outs, 1 + (size_t)i);
    /* The mean of the ranks' gradients is the gradient of the global batch's mean loss. */
    if (ranks > 1) g = nv_multiply_scalar(nv_dist_all_sum(g, t->options.group), 1.0 / ranks);
    s = nv_map_set(grads, name, g);
  }
  if (s == NV_OK && t->options.clip > 0)
    s = nv_clip_grad_norm(grads, t->options.clip, &clipped, &norm);
  if (s == NV_OK) s = nv_optimizer_update(t->opt, t->params, clipped ? clipped : grads, next);
  if (s == NV_OK) {
    nv_array *value = nv_vec_get(outs, 0);
    if (ranks > 1)
      value = nv_multiply_scalar(nv_dist_all_sum(value, t->options.group), 1.0 / ranks);
    const nv_map *maps[2] = {*next, nv_optimizer_state(t->opt)};
    nv_array *scalars[2] = {value, norm ? norm : value};
    s = nv_eval(scalars, 2);
    if (s == NV_OK) s = nv_params_eval(maps, 2);
    if (s == NV_OK) s = nv_array_item_double(value, loss);
    if (s == NV_OK) s = nv_array_item_double(norm ? norm : value, grad_norm);
    if (s != NV_OK) nv_map_free(*next), *next = NULL;
  }
  nv_release(norm);
  nv_map_free(clipped);
  nv_map_free(grads);
  nv_vec_free(outs);
  nv_vec_free(inputs);
  return s;
}

nv_status charlm_trainer_step(charlm_trainer *t, double *loss, double *grad_norm, double *lr) {
  const charlm_corpus *c = t->corpus;
  int rows = t->options.batch, length = t->config.context, rank = 0, ranks = 1;
  nv_status gs = nv_group_rank(t->options.group, &rank);
  if (gs == NV_OK) gs = nv_group_size(t->options.group, &ranks);
  if (gs != NV_OK) return gs;
  size_t *starts = malloc(sizeof *starts * (size_t)rows);
  if (!starts) return NV_ERR_OUT_OF_MEMORY;
  uint64_t span = c->n_train - (size_t)length; /* windows of length + 1 characters */
  /* The global batch's rows, the same on every rank; this rank takes its share. */
  for (int r = 0; r < rows; r++)
    starts[r] = mix64(mix64(t->options.seed) ^ ((uint64_t)t->step * 1000003u + (uint64_t)r)) % span;
  int share = rows / ranks;
  memmove(starts, starts + (size_t)rank * (size_t)share, sizeof *starts * (size_t)share);
  rows = share;
  nv_status s = nv_scope_begin();
  nv_array *tokens = NULL, *targets = NULL;
  nv_map *next = NULL;
  if (s == NV_OK) s = make_batch(c, starts, rows, length, &tokens, &targets);
  free(starts);
  if (s == NV_OK) s = step_batch(t, tokens, targets, &next, loss, grad_norm);
  if (s == NV_OK) s = nv_array_item_double(nv_optimizer_learning_rate(t->opt), lr);
  nv_scope_end();
  if (s != NV_OK) {
    nv_map_free(next);
    return s;
  }
  nv_map_free(t->params);
  t->params = next;
  t->step++;
  return NV_OK;
}

nv_status charlm_trainer_eval(charlm_trainer *t, int max_windows, double *loss) {
  const charlm_corpus *c = t->corpus;
  int length = t->config.context, rows = t->options.batch;
  size_t total = (c->n - c->n_train - 1) / (size_t)length;
  size_t used = max_windows > 0 && (size_t)max_windows < total ? (size_t)max_windows : total;
  size_t *starts = malloc(sizeof *starts * (size_t)rows);
  nv_array **order = malloc(sizeof *order * (size_t)charlm_param_count(&t->config));
  nv_status s = starts && order ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  if (s == NV_OK) s = charlm_param_order(&t->config, t->params, order);
  double sum = 0;
  for (size_t w = 0; s == NV_OK && w < used; w += (size_t)rows) {
    int n = (int)(used - w < (size_t)rows ? used - w : (size_t)rows);
    /* Window k of `used` is window k * total / used of the split: evenly spread. */
    for (int r = 0; r < n; r++)
      starts[r] = c->n_train + (w + (size_t)r) * total / used * (size_t)length;
    s = nv_scope_begin();
    nv_array *tokens = NULL, *targets = NULL;
    if (s == NV_OK) s = make_batch(c, starts, n, length, &tokens, &targets);
    double part = 0;
    if (s == NV_OK)
      s = nv_array_item_double(charlm_loss(&t->config, order, tokens, targets), &part);
    nv_scope_end();
    sum += part * n;
  }
  free(starts);
  free(order);
  if (s == NV_OK) *loss = sum / (double)used;
  return s;
}

/* ---- Checkpoints ---- */

static nv_status config_to_meta(const charlm_trainer *t, nv_io_metadata *meta) {
  const charlm_config *c = &t->config;
  char text[160];
  snprintf(text, sizeof text, "vocab=%d context=%d layers=%d dim=%d heads=%d mlp=%d", c->vocab,
           c->context, c->layers, c->dim, c->heads, c->mlp);
  nv_status s = nv_io_metadata_set_string(meta, "charlm.config", text, (size_t)-1);
  snprintf(text, sizeof text, "%lld", (long long)t->options.steps);
  if (s == NV_OK) s = nv_io_metadata_set_string(meta, "charlm.schedule_steps", text, (size_t)-1);
  if (s == NV_OK) s = nv_io_metadata_set_string(meta, "charlm.format", "1", (size_t)-1);
  return s;
}

nv_status charlm_checkpoint_save(const charlm_trainer *t, const char *path) {
  nv_map *model = NULL, *state = NULL, *both = NULL;
  nv_io_metadata *meta = nv_io_metadata_new();
  nv_status s = meta ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  if (s == NV_OK) s = nv_params_prefix(t->params, "model", &model);
  if (s == NV_OK) s = nv_params_prefix(nv_optimizer_state(t->opt), "optimizer", &state);
  if (s == NV_OK) s = nv_params_merge(model, state, false, &both);
  if (s == NV_OK) {
    int shape = t->corpus->vocab_size;
    nv_array *vocab = nv_array_from_data(t->corpus->vocab, &shape, 1, NV_DTYPE_UINT8);
    s = nv_map_set(both, "data.vocab", vocab);
    nv_release(vocab);
  }
  if (s == NV_OK) s = config_to_meta(t, meta);
  if (s == NV_OK) s = nv_save_safetensors(path, both, meta);
  nv_map_free(model);
  nv_map_free(state);
  nv_map_free(both);
  nv_io_metadata_free(meta);
  return s;
}

nv_status charlm_checkpoint_config(const char *path, charlm_config *config) {
  nv_map *arrays = NULL;
  nv_io_metadata *meta = NULL;
  nv_status s = nv_load_safetensors(path, &arrays, &meta);
  const char *text = NULL;
  if (s == NV_OK) s = nv_io_metadata_get_string(meta, "charlm.config", &text, NULL);
  charlm_config c;
  if (s == NV_OK && sscanf(text, "vocab=%d context=%d layers=%d dim=%d heads=%d mlp=%d", &c.vocab,
                           &c.context, &c.layers, &c.dim, &c.heads, &c.mlp) != 6)
    s = NV_ERR_IO;
  if (s == NV_OK) *config = c;
  else fprintf(stderr, "charlm: %s is not a charlm checkpoint (%s)\n", path, nv_last_error());
  nv_map_free(arrays);
  nv_io_metadata_free(meta);
  return s;
}

/* Whether the checkpoint's vocabulary is the corpus'. */
static bool same_vocab(const nv_map *arrays, const charlm_corpus *c) {
  nv_array *v = nv_map_get(arrays, "data.vocab");
  unsigned char got[256];
  return v && nv_array_dtype(v) == NV_DTYPE_UINT8 && nv_array_size(v) == c->vocab_size &&
         nv_array_read(v, got, (size_t)c->vocab_size) == NV_OK &&
         memcmp(got, c->vocab, (size_t)c->vocab_size) == 0;
}

nv_status charlm_checkpoint_load(charlm_trainer *t, const char *path) {
  charlm_config c;
  nv_status s = charlm_checkpoint_config(path, &c);
  if (s != NV_OK) return s;
  if (memcmp(&c, &t->config, sizeof c) != 0) {
    fprintf(stderr, "charlm: %s holds a model of another shape\n", path);
    return NV_ERR_INVALID_ARGUMENT;
  }
  nv_map *arrays = NULL, *model = NULL, *state = NULL;
  nv_io_metadata *meta = NULL;
  s = nv_load_safetensors(path, &arrays, &meta);
  const char *text = NULL;
  long long schedule = 0;
  if (s == NV_OK &&
      (nv_io_metadata_get_string(meta, "charlm.schedule_steps", &text, NULL) != NV_OK ||
       sscanf(text, "%lld", &schedule) != 1 || schedule < 1)) {
    fprintf(stderr, "charlm: %s has no schedule length\n", path);
    s = NV_ERR_IO;
  }
  if (s == NV_OK && !same_vocab(arrays, t->corpus)) {
    fprintf(stderr, "charlm: %s was trained on another vocabulary\n", path);
    s = NV_ERR_INVALID_ARGUMENT;
  }
  if (s == NV_OK) s = nv_params_filter(arrays, "model", true, &model);
  if (s == NV_OK) {
    nv_array **order = malloc(sizeof *order * (size_t)charlm_param_count(&c));
    s = order ? charlm_param_order(&c, model, order) : NV_ERR_OUT_OF_MEMORY;
    free(order);
  }
  if (s == NV_OK) s = nv_params_filter(arrays, "optimizer", true, &state);
  /* The schedule first (a new optimizer), then the state into it. */
  if (s == NV_OK && schedule != t->options.steps) {
    charlm_train_options o = t->options;
    nv_optimizer *opt = NULL;
    o.steps = schedule;
    s = make_optimizer(&o, &opt);
    if (s == NV_OK) {
      nv_optimizer_free(t->opt);
      t->opt = opt;
      t->options.steps = schedule;
    }
  }
  if (s == NV_OK) s = nv_optimizer_set_state(t->opt, state);
  uint64_t step = 0;
  if (s == NV_OK) s = nv_array_item_uint64(nv_optimizer_step(t->opt), &step);
  if (s == NV_OK) {
    nv_map_free(t->params);
    t->params = model;
    model = NULL;
    t->step = (int64_t)step;
  }
  nv_map_free(arrays);
  nv_map_free(model);
  nv_map_free(state);
  nv_io_metadata_free(meta);
  return s;
}
