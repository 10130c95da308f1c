/* Optimizers (SGD, Adam, AdamW) with MLX's update formulas, dtypes and defaults. The state is a
 * flat map keyed as MLX's tree_flatten(optimizer.state): "step", "learning_rate", then a slot
 * per parameter and moment ("<key>.m", "<key>.v"). Updates are lazy ops: SGD's composed of
 * element-wise ones, Adam's one adam_update node per parameter (one pass over p, g, m, v) where
 * the four share a dtype and a shape, else composed of element-wise ops too. */
#include <math.h>
#include <stdlib.h>

#include "nn/nn_internal.h"
#include "ops/optim.h"

nv_lr_schedule *nv__lr_schedule_copy(const nv_lr_schedule *s);

#define MAX_SLOTS 2

struct nv_optimizer {
  const char *name; /* "sgd", "adam", "adamw": error messages */
  nv_lr_schedule *schedule;
  int nslots;
  const char *slots[MAX_SLOTS];
  bool adam, decoupled;
  double momentum, weight_decay, dampening;
  bool nesterov;
  double beta1, beta2, eps;
  bool bias_correction;
  nv_map *state;
};

/* ---- Construction ---- */

nv_sgd_options nv_sgd_defaults(double learning_rate) {
  return (nv_sgd_options){.learning_rate = learning_rate};
}

nv_adam_options nv_adam_defaults(double learning_rate) {
  return (nv_adam_options){
      .learning_rate = learning_rate, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

nv_adam_options nv_adamw_defaults(double learning_rate) {
  nv_adam_options o = nv_adam_defaults(learning_rate);
  o.weight_decay = 0.01;
  return o;
}

/* Finishes an optimizer: copies the schedule and makes the state (step 0 and the learning
 * rate, the schedule's value at step 0 as MLX's _maybe_schedule). */
static nv_status finish(nv_optimizer *o, const nv_lr_schedule *schedule, double lr,
                        nv_optimizer **out) {
  o->state = nv_map_new();
  if (schedule) o->schedule = nv__lr_schedule_copy(schedule);
  nv_status st = o->state && (!schedule || o->schedule)
                     ? NV_OK
                     : nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", o->name);
  if (st == NV_OK) st = nv__nn_scope_begin(o->name);
  if (st == NV_OK) {
    /* The scope owns these arrays; the state map keeps its own references. */
    nv_array *step = nv_array_uint64(0);
    nv_array *rate = o->schedule ? nv_lr_schedule_at(o->schedule, step) : nv_array_float((float)lr);
    st = nv_array_status(step);
    if (st == NV_OK) st = nv_array_status(rate);
    if (st == NV_OK) st = nv__map_append(o->state, "step", step);
    if (st == NV_OK) st = nv__map_append(o->state, "learning_rate", rate);
    nv__nn_scope_end();
  }
  if (st != NV_OK) {
    nv_optimizer_free(o);
    return st;
  }
  *out = o;
  return NV_OK;
}

static nv_optimizer *alloc_opt(const char *name) {
  nv_optimizer *o = nv__calloc(1, sizeof *o);
  if (!o) nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
  else o->name = name;
  return o;
}

nv_status nv_optimizer_sgd(const nv_sgd_options *opt, nv_optimizer **out) {
  if (!opt || !out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "sgd: NULL argument");
  if (!isfinite(opt->momentum) || !isfinite(opt->weight_decay) || !isfinite(opt->dampening) ||
      (!opt->schedule && !isfinite(opt->learning_rate)))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "sgd: options must be finite (learning_rate %g, momentum %g, "
                         "weight_decay %g, dampening %g)",
                         opt->learning_rate, opt->momentum, opt->weight_decay, opt->dampening);
  if (opt->nesterov && (opt->momentum <= 0 || opt->dampening != 0))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "sgd: Nesterov momentum requires a momentum and zero dampening "
                         "(momentum %g, dampening %g)",
                         opt->momentum, opt->dampening);
  nv_optimizer *o = alloc_opt("sgd");
  if (!o) return NV_ERR_OUT_OF_MEMORY;
  o->momentum = opt->momentum;
  o->weight_decay = opt->weight_decay;
  o->dampening = opt->dampening;
  o->nesterov = opt->nesterov;
  /* MLX keeps a "v" slot even without momentum; it is never read then, so nuvec keeps none. */
  if (o->momentum > 0) o->slots[o->nslots++] = "v";
  return finish(o, opt->schedule, opt->learning_rate, out);
}

static nv_status make_adam(const char *name, const nv_adam_options *opt, bool decoupled,
                           nv_optimizer **out) {
  if (!opt || !out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL argument", name);
  const double b[2] = {opt->beta1, opt->beta2};
  for (int i = 0; i < 2; i++)
    if (!(b[i] >= 0.0 && b[i] < 1.0))
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "%s: beta%d should be in [0, 1), %g was provided instead", name,
                           i + 1, b[i]);
  if (!(opt->eps >= 0.0) || !isfinite(opt->eps))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "%s: epsilon should be >= 0 and finite, %g was provided instead", name,
                         opt->eps);
  if (!isfinite(opt->weight_decay) || (!opt->schedule && !isfinite(opt->learning_rate)))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "%s: options must be finite (learning_rate %g, weight_decay %g)", name,
                         opt->learning_rate, opt->weight_decay);
  if (!decoupled && opt->weight_decay != 0)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "adam: Adam has no weight decay (got %g); use nv_optimizer_adamw",
                         opt->weight_decay);
  nv_optimizer *o = alloc_opt(name);
  if (!o) return NV_ERR_OUT_OF_MEMORY;
  o->adam = true;
  o->decoupled = decoupled;
  o->beta1 = opt->beta1;
  o->beta2 = opt->beta2;
  o->eps = opt->eps;
  o->weight_decay = opt->weight_decay;
  o->bias_correction = opt->bias_correction;
  o->slots[o->nslots++] = "m";
  o->slots[o->nslots++] = "v";
  return finish(o, opt->schedule, opt->learning_rate, out);
}

nv_status nv_optimizer_adam(const nv_adam_options *opt, nv_optimizer **out) {
  return make_adam("adam", opt, false, out);
}

nv_status nv_optimizer_adamw(const nv_adam_options *opt, nv_optimizer **out) {
  return make_adam("adamw", opt, true, out);
}

void nv_optimizer_free(nv_optimizer *o) {
  if (!o) return;
  nv_lr_schedule_free(o->schedule);
  nv_map_free(o->state);
  nv__free(o);
}

/* ---- The per-parameter rules (built inside the update's scope) ---- */

static bool same_shape(const nv_array *a, const nv_array *b) {
  int n = nv_array_ndim(a);
  return n == nv_array_ndim(b) &&
         (n == 0 || !memcmp(nv_array_shape(a), nv_array_shape(b), (size_t)n * sizeof(int)));
}

/* The scalars every parameter of one dtype shares within an update (MLX computes them per
 * parameter; the values are the same, built once): the learning rate in that dtype and, for
 * Adam, the decay factor and the two bias corrections. */
typedef struct shared {
  nv_dtype dt;
  nv_array *lr_g, *decay, *c1, *c2;
} shared;

#define MAX_SHARED 4 /* the real float dtypes */

/* 1 - beta^step, as Python's `1 - beta**step` with a weak int 1 and a weak float beta. */
static nv_array *one_minus_pow(double beta, nv_array *step) {
  return nv_subtract(nv_weak_int(1), nv_power(nv_weak_scalar(beta), step));
}

/* The shared scalars of dtype gt (built on first use; arrays owned by the update's scope). */
static const shared *shared_of(const nv_optimizer *o, shared *tab, int *n, nv_dtype gt,
                               nv_array *lr, nv_array *step) {
  for (int i = 0; i < *n; i++)
    if (tab[i].dt == gt) return &tab[i];
  shared *e = &tab[(*n)++];
  e->dt = gt;
  e->lr_g = nv_astype(lr, gt);
  e->decay = e->c1 = e->c2 = NULL;
  if (o->adam && o->decoupled)
    e->decay = nv_subtract(nv_weak_int(1), nv_multiply_scalar(e->lr_g, o->weight_decay));
  if (o->adam && o->bias_correction) {
    e->c1 = nv_astype(nv_divide(e->lr_g, one_minus_pow(o->beta1, step)), gt);
    e->c2 = nv_astype(nv_rsqrt(one_minus_pow(o->beta2, step)), gt);
  }
  return e;
}

/* MLX's SGD.apply_single: returns the new parameter and writes the new "v" slot. */
static nv_array *sgd_single(const nv_optimizer *o, nv_array *g, nv_array *p, const shared *sh,
                            nv_array *const *slot, nv_array **slot_out) {
  if (o->weight_decay != 0) g = nv_add(g, nv_multiply_scalar(p, o->weight_decay));
  nv_array *lr_g = sh->lr_g;
  if (o->momentum <= 0) return nv_subtract(p, nv_multiply(lr_g, g));
  nv_array *v = nv_multiply_scalar(slot[0], o->momentum);
  v = nv_add(v, o->dampening > 0 ? nv_multiply_scalar(g, 1 - o->dampening) : g);
  nv_array *update = o->nesterov ? nv_add(g, nv_multiply_scalar(v, o->momentum)) : v;
  slot_out[0] = v;
  return nv_subtract(p, nv_multiply(lr_g, update));
}

/* Whether Adam's update of (p, g, m, v) may be the fused primitive: one dtype and one shape
 * for the four, and 0-d scalars. Otherwise the composed update keeps MLX's promotions. */
static bool fusable(nv_array *g, nv_array *p, nv_array *const *slot, const shared *sh) {
  nv_dtype dt = nv_array_dtype(g);
  nv_array *xs[3] = {p, slot[0], slot[1]};
  for (int i = 0; i < 3; i++)
    if (nv_array_dtype(xs[i]) != dt || !same_shape(xs[i], g)) return false;
  nv_array *sc[4] = {sh->lr_g, sh->decay, sh->c1, sh->c2};
  for (int i = 0; i < 4; i++)
    if (sc[i] && nv_array_ndim(sc[i]) != 0) return false;
  return true;
}

/* MLX's Adam.apply_single (and AdamW's, which decays the parameter first): one adam_update
 * node (one pass over the parameter, src/ops/optim.h) where the arrays allow it, else the
 * composed ops. */
static nv_array *adam_single(const nv_optimizer *o, nv_array *g, nv_array *p, const shared *sh,
                             nv_array *const *slot, nv_array **slot_out) {
  if (fusable(g, p, slot, sh)) {
    nv__adam_params prm = {.beta1 = o->beta1,
                           .beta2 = o->beta2,
                           .eps = o->eps,
                           .decoupled = o->decoupled,
                           .bias_correction = o->bias_correction};
    nv_array *out[3];
    nv__adam_update(p, g, slot[0], slot[1], sh->lr_g, sh->decay, sh->c1, sh->c2, &prm, out);
    slot_out[0] = out[1];
    slot_out[1] = out[2];
    return out[0];
  }
  nv_array *lr_g = sh->lr_g;
  if (o->decoupled) p = nv_multiply(p, sh->decay);
  nv_array *m = nv_add(nv_multiply_scalar(slot[0], o->beta1),
                       nv_multiply_scalar(g, 1 - o->beta1));
  nv_array *v = nv_add(nv_multiply_scalar(slot[1], o->beta2),
                       nv_multiply_scalar(nv_square(g), 1 - o->beta2));
  slot_out[0] = m;
  slot_out[1] = v;
  if (!o->bias_correction)
    return nv_subtract(p, nv_divide(nv_multiply(lr_g, m), nv_add_scalar(nv_sqrt(v), o->eps)));
  nv_array *den = nv_add_scalar(nv_multiply(nv_sqrt(v), sh->c2), o->eps);
  return nv_subtract(p, nv_divide(nv_multiply(sh->c1, m), den));
}

/* ---- Updates ---- */

/* One gradient to apply: its key, arrays and state slots. */
typedef struct entry {
  const char *key;
  nv_array *g, *p;
  nv_array *slot[MAX_SLOTS];     /* the current slots (borrowed), NULL when new */
  nv_array *slot_new[MAX_SLOTS]; /* the updated slots (retained) */
  nv_array *p_new;               /* the updated parameter (retained) */
} entry;

static bool is_real_float(nv_dtype t) {
  return t == NV_DTYPE_FLOAT16 || t == NV_DTYPE_BFLOAT16 || t == NV_DTYPE_FLOAT32 ||
         t == NV_DTYPE_FLOAT64;
}

/* Whether `key` is "step" or "learning_rate" or lies under one: its slots would collide with
 * the state's own entries. */
static bool reserved(const char *key) {
  static const char *names[] = {"step", "learning_rate"};
  for (int i = 0; i < 2; i++) {
    size_t n = strlen(names[i]);
    if (!strncmp(key, names[i], n) && (key[n] == '\0' || key[n] == '.')) return true;
  }
  return false;
}

static nv_status check_arrays(const nv_optimizer *o, const char *key, nv_array *p, nv_array *g) {
  char sp[NV__SHAPE_BUF], sg[NV__SHAPE_BUF];
  if (reserved(key))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "%s: parameter '%s' collides with the state's own entries ('step', "
                         "'learning_rate'); rename it",
                         o->name, key);
  if (!p)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: gradient '%s' has no parameter",
                         o->name, key);
  /* Errors before shapes: a failed array's shape may be no shape of its own (out of memory
   * while it was built), and its error is what the caller must see. */
  nv__error *err = nv__node_known_error(g->node);
  if (!err) err = nv__node_known_error(p->node);
  if (err) return nv__set_error_obj(err);
  if (!is_real_float(nv_array_dtype(p)) || !is_real_float(nv_array_dtype(g)))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "%s: '%s' has parameter dtype %s and gradient dtype %s; optimizers "
                         "update real floating arrays",
                         o->name, key, nv_dtype_name(nv_array_dtype(p)),
                         nv_dtype_name(nv_array_dtype(g)));
  if (!same_shape(p, g))
    return nv__set_error(
        NV_ERR_INVALID_ARGUMENT, "%s: '%s' has parameter shape %s and gradient shape %s",
        o->name, key, nv__shape_str(nv_array_shape(p), nv_array_ndim(p), sp, sizeof sp),
        nv__shape_str(nv_array_shape(g), nv_array_ndim(g), sg, sizeof sg));
  return NV_OK;
}

/* Finds the entry's slots in the state: all of them or none. */
static nv_status find_slots(const nv_optimizer *o, const nv__keyindex *ist, entry *e) {
  int found = 0;
  for (int s = 0; s < o->nslots; s++) {
    char *k = nv__join_key(e->key, o->slots[s]);
    if (!k) return NV_ERR_OUT_OF_MEMORY;
    e->slot[s] = nv__keyindex_get(ist, k);
    nv__free(k);
    if (!e->slot[s]) continue;
    found++;
    if (!same_shape(e->slot[s], e->g)) {
      char ss[NV__SHAPE_BUF], sg[NV__SHAPE_BUF];
      return nv__set_error(
          NV_ERR_INVALID_ARGUMENT, "%s: state '%s.%s' has shape %s but the gradient %s",
          o->name, e->key, o->slots[s],
          nv__shape_str(nv_array_shape(e->slot[s]), nv_array_ndim(e->slot[s]), ss, sizeof ss),
          nv__shape_str(nv_array_shape(e->g), nv_array_ndim(e->g), sg, sizeof sg));
    }
  }
  if (found && found != o->nslots)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: the state of '%s' lacks some of its slots",
                         o->name, e->key);
  return NV_OK;
}

/* Validates every gradient against its parameter and the state, filling `entries` (one per
 * gradient, in order), before anything is built: a failing update changes nothing. */
static nv_status prepare(const nv_optimizer *o, const nv_map *params, const nv_map *grads,
                         entry *entries) {
  nv__keyindex ip, ist;
  if (nv__keyindex_build(&ip, params) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  if (nv__keyindex_build(&ist, o->state) != NV_OK) {
    nv__keyindex_free(&ip);
    return NV_ERR_OUT_OF_MEMORY;
  }
  nv_status st = NV_OK;
  for (size_t i = 0; i < nv_map_size(grads) && st == NV_OK; i++) {
    entry *e = &entries[i];
    e->key = nv_map_key(grads, i);
    e->g = nv_map_value(grads, i);
    e->p = nv__keyindex_get(&ip, e->key);
    st = check_arrays(o, e->key, e->p, e->g);
    if (st == NV_OK) st = find_slots(o, &ist, e);
  }
  nv__keyindex_free(&ip);
  nv__keyindex_free(&ist);
  return st;
}

static void entries_free(entry *entries, size_t n) {
  for (size_t i = 0; i < n; i++) {
    nv_release(entries[i].p_new);
    for (int s = 0; s < MAX_SLOTS; s++) nv_release(entries[i].slot_new[s]);
  }
  nv__free(entries);
}

/* The updated slot a state key names ("<key>.<slot>" with <key> a gradient's key) into `*x`,
 * or NULL when no entry updates it. */
static nv_status updated_slot(const nv_optimizer *o, const nv__keyindex *ig,
                              const entry *entries, const char *skey, nv_array **x) {
  const char *dot = strrchr(skey, '.');
  *x = NULL;
  for (int s = 0; dot && s < o->nslots; s++) {
    if (strcmp(dot + 1, o->slots[s])) continue;
    size_t len = (size_t)(dot - skey);
    char *base = nv__malloc(len + 1);
    if (!base) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", o->name);
    memcpy(base, skey, len);
    base[len] = '\0';
    long i = nv__keyindex_find(ig, base);
    nv__free(base);
    if (i >= 0) *x = entries[i].slot_new[s];
    break;
  }
  return NV_OK;
}

/* The next state: step and learning rate, the slots in their order (updated where a gradient
 * came), then the new slots in gradient order. */
static nv_status next_state(const nv_optimizer *o, const nv_map *grads, const entry *entries,
                            nv_array *step, nv_array *lr, nv_map **out) {
  nv__keyindex ig;
  if (nv__keyindex_build(&ig, grads) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv_map *m = nv_map_new();
  nv_status st = m ? nv__map_append(m, "step", step) : NV_ERR_OUT_OF_MEMORY;
  if (st == NV_OK) st = nv__map_append(m, "learning_rate", lr);
  for (size_t i = 0; i < nv_map_size(o->state) && st == NV_OK; i++) {
    const char *k = nv_map_key(o->state, i);
    if (reserved(k)) continue;
    nv_array *x;
    st = updated_slot(o, &ig, entries, k, &x);
    if (st == NV_OK) st = nv__map_append(m, k, x ? x : nv_map_value(o->state, i));
  }
  for (size_t i = 0; i < nv_map_size(grads) && st == NV_OK; i++) {
    if (entries[i].slot[0] || !o->nslots) continue;
    for (int s = 0; s < o->nslots && st == NV_OK; s++) {
      char *k = nv__join_key(entries[i].key, o->slots[s]);
      st = k ? nv__map_append(m, k, entries[i].slot_new[s]) : NV_ERR_OUT_OF_MEMORY;
      nv__free(k);
    }
  }
  nv__keyindex_free(&ig);
  if (st != NV_OK) {
    nv_map_free(m);
    return st;
  }
  *out = m;
  return NV_OK;
}

/* The new parameter map: params' keys in order, updated where a gradient came. */
static nv_status next_params(const nv_map *params, const nv_map *grads, const entry *entries,
                             nv_map **out) {
  nv__keyindex ig;
  if (nv__keyindex_build(&ig, grads) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv_map *m = nv_map_new();
  nv_status st = m ? NV_OK : NV_ERR_OUT_OF_MEMORY;
  for (size_t i = 0; i < nv_map_size(params) && st == NV_OK; i++) {
    long gi = nv__keyindex_find(&ig, nv_map_key(params, i));
    st = nv__map_append(m, nv_map_key(params, i),
                        gi < 0 ? nv_map_value(params, i) : entries[gi].p_new);
  }
  nv__keyindex_free(&ig);
  if (st != NV_OK) {
    nv_map_free(m);
    return st;
  }
  *out = m;
  return NV_OK;
}

/* Builds every entry's new parameter and slots (retained), in the scope of the update. */
static void apply_all(const nv_optimizer *o, entry *entries, size_t n, nv_array *lr,
                      nv_array *step) {
  shared tab[MAX_SHARED];
  int ntab = 0;
  for (size_t i = 0; i < n; i++) {
    entry *e = &entries[i];
    nv_array *slot[MAX_SLOTS] = {0}, *slot_new[MAX_SLOTS] = {0};
    /* New slots are zeros like the gradient, as MLX's init(gradients). */
    for (int s = 0; s < o->nslots; s++) slot[s] = e->slot[s] ? e->slot[s] : nv_zeros_like(e->g);
    const shared *sh = shared_of(o, tab, &ntab, nv_array_dtype(e->g), lr, step);
    nv_array *p = o->adam ? adam_single(o, e->g, e->p, sh, slot, slot_new)
                          : sgd_single(o, e->g, e->p, sh, slot, slot_new);
    e->p_new = nv_retain(p);
    for (int s = 0; s < o->nslots; s++) e->slot_new[s] = nv_retain(slot_new[s]);
  }
}

nv_status nv_optimizer_update(nv_optimizer *o, const nv_map *params, const nv_map *grads,
                              nv_map **new_params) {
  if (!o || !params || !grads || !new_params)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "optimizer_update: NULL argument");
  size_t n = nv_map_size(grads);
  entry *entries = nv__calloc(n ? n : 1, sizeof *entries);
  if (!entries) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", o->name);
  nv_status st = prepare(o, params, grads, entries);
  if (st == NV_OK) st = nv__nn_scope_begin(o->name);
  if (st != NV_OK) {
    entries_free(entries, n);
    return st;
  }
  /* As MLX's apply_gradients: the learning rate from the schedule at the current step, then
   * the step incremented, then each parameter's rule (Adam's bias correction reads the new
   * step). */
  nv_array *step = nv_map_get(o->state, "step");
  nv_array *lr = o->schedule ? nv_lr_schedule_at(o->schedule, step)
                             : nv_map_get(o->state, "learning_rate");
  nv_array *step1 = nv_add(step, nv_weak_int(1));
  apply_all(o, entries, n, lr, step1);
  nv_map *state = NULL, *out = NULL;
  st = next_state(o, grads, entries, step1, lr, &state);
  if (st == NV_OK) st = next_params(params, grads, entries, &out);
  nv__nn_scope_end();
  entries_free(entries, n);
  if (st != NV_OK) {
    nv_map_free(state);
    return st;
  }
  nv_map_free(o->state);
  o->state = state;
  *new_params = out;
  return NV_OK;
}

nv_status nv_optimizer_init(nv_optimizer *o, const nv_map *params) {
  if (!o || !params) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "optimizer_init: NULL argument");
  size_t n = nv_map_size(params);
  entry *entries = nv__calloc(n ? n : 1, sizeof *entries);
  if (!entries) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", o->name);
  /* The parameters stand in for their gradients, as MLX's init(parameters). */
  nv_status st = prepare(o, params, params, entries);
  if (st == NV_OK) st = nv__nn_scope_begin(o->name);
  if (st != NV_OK) {
    entries_free(entries, n);
    return st;
  }
  for (size_t i = 0; i < n; i++)
    for (int s = 0; s < o->nslots && !entries[i].slot[0]; s++)
      entries[i].slot_new[s] = nv_retain(nv_zeros_like(entries[i].p));
  /* Only the new slots are set, so next_state keeps the existing ones as they are. */
  nv_map *state = NULL;
  st = next_state(o, params, entries, nv_map_get(o->state, "step"),
                  nv_map_get(o->state, "learning_rate"), &state);
  nv__nn_scope_end();
  entries_free(entries, n);
  if (st != NV_OK) return st;
  nv_map_free(o->state);
  o->state = state;
  return NV_OK;
}

/* ---- State ---- */

const nv_map *nv_optimizer_state(const nv_optimizer *o) { return o ? o->state : NULL; }
nv_array *nv_optimizer_step(const nv_optimizer *o) { return o ? nv_map_get(o->state, "step") : NULL; }

nv_array *nv_optimizer_learning_rate(const nv_optimizer *o) {
  return o ? nv_map_get(o->state, "learning_rate") : NULL;
}

nv_status nv_optimizer_set_learning_rate(nv_optimizer *o, double learning_rate) {
  if (!o) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "optimizer_set_learning_rate: NULL");
  if (!isfinite(learning_rate))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "%s: the learning rate must be finite, got %g", o->name, learning_rate);
  nv_status st = nv__nn_scope_begin(o->name);
  if (st != NV_OK) return st;
  nv_array *lr = nv_array_float((float)learning_rate);
  st = nv_array_status(lr);
  if (st == NV_OK) st = nv_map_set(o->state, "learning_rate", lr);
  nv__nn_scope_end();
  return st;
}

/* A one-element array of `state` as a 0-d array of `dtype` (for "step" and "learning_rate"),
 * owned by the caller's scope (nv_optimizer_set_state opens one). */
static nv_status state_scalar(const nv_optimizer *o, const nv_map *state, const char *key,
                              nv_dtype dtype, nv_array **out) {
  nv_array *x = nv_map_get(state, key);
  if (!x || nv_array_size(x) != 1 || nv_array_dtype(x) == NV_DTYPE_COMPLEX64)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "%s: the state needs '%s' as one real number%s", o->name, key,
                         x ? "" : " (missing)");
  nv_array *c = nv_astype(nv_reshape(x, NULL, 0), dtype);
  nv_status st = nv_array_status(c);
  if (st == NV_OK) *out = c;
  return st;
}

/* Whether `key` names a slot of this optimizer: "<non-empty key>.<slot>". */
static bool is_slot_key(const nv_optimizer *o, const char *key) {
  const char *dot = strrchr(key, '.');
  if (!dot || dot == key) return false;
  for (int s = 0; s < o->nslots; s++)
    if (!strcmp(dot + 1, o->slots[s])) return true;
  return false;
}

nv_status nv_optimizer_set_state(nv_optimizer *o, const nv_map *state) {
  if (!o || !state) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "optimizer_set_state: NULL");
  for (size_t i = 0; i < nv_map_size(state); i++) {
    const char *k = nv_map_key(state, i);
    if (strcmp(k, "step") && strcmp(k, "learning_rate") &&
        (reserved(k) || !is_slot_key(o, k)))
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: '%s' is not a state entry of %s",
                           o->name, k, o->name);
  }
  nv_array *step = NULL, *lr = NULL;
  nv_status st = nv__nn_scope_begin(o->name);
  if (st != NV_OK) return st;
  st = state_scalar(o, state, "step", NV_DTYPE_UINT64, &step);
  if (st == NV_OK) st = state_scalar(o, state, "learning_rate", NV_DTYPE_FLOAT32, &lr);
  nv_map *m = st == NV_OK ? nv_map_new() : NULL;
  if (st == NV_OK && !m) st = NV_ERR_OUT_OF_MEMORY;
  if (st == NV_OK) st = nv__map_append(m, "step", step);
  if (st == NV_OK) st = nv__map_append(m, "learning_rate", lr);
  for (size_t i = 0; i < nv_map_size(state) && st == NV_OK; i++)
    if (!reserved(nv_map_key(state, i)))
      st = nv__map_append(m, nv_map_key(state, i), nv_map_value(state, i));
  nv__nn_scope_end();
  if (st != NV_OK) {
    nv_map_free(m);
    return st;
  }
  nv_map_free(o->state);
  o->state = m;
  return NV_OK;
}
