/* nuvec — what C programs train with (src/nn): parameter trees, initialisers, optimizers,
 * learning-rate schedules and gradient clipping, with the semantics of MLX 0.32 (mlx.utils'
 * tree functions, mlx.nn.init, mlx.optimizers).
 *
 * A model's parameters are an nv_map of named arrays whose keys are dotted paths
 * ("layers.0.weight"): the flat form MLX's tree_flatten gives. nv_tree is the nested form
 * (dicts and lists of arrays) for code that builds or walks structure; nv_tree_flatten and
 * nv_tree_unflatten convert between the two as MLX's tree_flatten and tree_unflatten do.
 *
 * Everything here is lazy: optimizer updates, schedules and clipping build unevaluated arrays
 * and never wait for a device. Evaluate the new parameters together with the optimizer's state
 * once per step (nv_params_eval), as MLX's mx.eval(model.parameters(), optimizer.state).
 *
 * Ownership: arrays, maps and trees passed in are borrowed unless a comment says otherwise.
 * Maps returned through out-parameters are new: the caller frees them with nv_map_free (they
 * hold references to their arrays, which no scope owns). Arrays returned directly are new
 * references owned by the caller or by the innermost scope, as op builders' results. Calls
 * that return nv_status set nv_last_error() on failure and write their out-parameters only on
 * success. Objects (trees, optimizers, schedules) are not thread-safe; use one per thread or
 * lock around them. */
#ifndef NUVEC_NN_H
#define NUVEC_NN_H

#include "nuvec/array.h"
#include "nuvec/random.h"
#include "nuvec/transforms.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Nested parameter trees ---- */

/* What a tree node is: an array (a leaf), a dict (string keys in insertion order) or a list. */
typedef enum nv_tree_kind {
  NV_TREE_ARRAY = 0,
  NV_TREE_DICT = 1,
  NV_TREE_LIST = 2,
} nv_tree_kind;

/* A node of a nested tree. A tree owns its children and holds a reference to each array. */
typedef struct nv_tree nv_tree;

/* A leaf holding `x` (retained), an empty dict, an empty list. NULL when out of memory or for
 * a NULL `x` (see nv_last_error). */
NV_API nv_tree *nv_tree_new_array(nv_array *x);
NV_API nv_tree *nv_tree_new_dict(void);
NV_API nv_tree *nv_tree_new_list(void);

/* Frees `t`, its children and their array references; NULL-safe. */
NV_API void nv_tree_free(nv_tree *t);

/* Puts `child` under `key` in `dict`, replacing (and freeing) a child already there, in place.
 * Takes ownership of `child` in every case (it is freed when the call fails), so calls nest:
 * nv_tree_dict_set(d, "w", nv_tree_new_array(w)). A child belongs to one parent. Fails with
 * NV_ERR_INVALID_ARGUMENT when `dict` is not a dict, `child` is NULL, or `key` is empty or
 * contains '.' (the path separator of flat names), or NV_ERR_OUT_OF_MEMORY. */
NV_API nv_status nv_tree_dict_set(nv_tree *dict, const char *key, nv_tree *child);

/* Appends `child` to `list`, taking ownership of it as nv_tree_dict_set. Fails with
 * NV_ERR_INVALID_ARGUMENT when `list` is not a list or `child` is NULL. */
NV_API nv_status nv_tree_list_append(nv_tree *list, nv_tree *child);

/* The node's kind (NV_TREE_ARRAY for NULL). */
NV_API nv_tree_kind nv_tree_get_kind(const nv_tree *t);
/* Number of children of a dict or list (0 for a leaf or NULL). */
NV_API size_t nv_tree_size(const nv_tree *t);
/* The i-th key of a dict (borrowed; NULL for a list, a leaf or i out of range). */
NV_API const char *nv_tree_key(const nv_tree *t, size_t i);
/* The i-th child of a dict or list, borrowed; NULL when out of range. */
NV_API nv_tree *nv_tree_child(const nv_tree *t, size_t i);
/* The child of a dict under `key`, borrowed; NULL if absent or `t` is not a dict. */
NV_API nv_tree *nv_tree_find(const nv_tree *t, const char *key);
/* The array of a leaf, borrowed; NULL for a dict or list. */
NV_API nv_array *nv_tree_array(const nv_tree *t);

/* Flattens `t` into a new map of dotted paths, as MLX's tree_flatten(t, prefix="." + prefix):
 * dict children are named by their key, list children by their index ("layers.0.weight"),
 * depth first in order; empty dicts and lists contribute nothing. With a non-empty `prefix`
 * (NULL: none) every key starts with prefix + "."; a leaf at the root gets the key `prefix`
 * itself ("" without one). Fails with NV_ERR_INVALID_ARGUMENT for a NULL tree. */
NV_API nv_status nv_tree_flatten(const nv_tree *t, const char *prefix, nv_map **out);

/* Rebuilds a nested tree from a flat map, as MLX's tree_unflatten: keys split at '.', children
 * grouped by their first component in order of appearance; a group whose components are all
 * list indices (non-empty decimal digit strings naming distinct numbers; "01" and "1" name the
 * same one, so they make a dict) becomes a list ordered by index, with the missing indices
 * filled by empty dicts, else a dict. The map {"": x} gives the leaf x, and an empty map an
 * empty list, as MLX. Where MLX would build a dict with an empty key, nuvec fails with
 * NV_ERR_INVALID_ARGUMENT naming the key: a key with an empty component ("a..b", "a."), a key
 * that is both an array and the prefix of another ("a" and "a.b"). Indices above 2^24 fail
 * too (the gap would be filled with millions of dicts). */
NV_API nv_status nv_tree_unflatten(const nv_map *flat, nv_tree **out);

/* ---- Flat parameter maps ---- */

/* A new map with the entries of `params` under `prefix`: those whose key is `prefix` or starts
 * with prefix + ".", in order (an empty or NULL prefix selects all). With `strip` the prefix
 * and its dot are removed from the keys, so nv_params_filter(p, "layers.0", true, &q) gives a
 * sub-module's parameters ("weight", "bias"); an entry whose key is exactly `prefix` then gets
 * the key "". Fails with NV_ERR_INVALID_ARGUMENT for a NULL map. */
NV_API nv_status nv_params_filter(const nv_map *params, const char *prefix, bool strip,
                                  nv_map **out);

/* A new map with the entries of `params` under `prefix`: each key becomes prefix + "." + key
 * (key "" becomes `prefix`), the inverse of a stripping nv_params_filter. Fails with
 * NV_ERR_INVALID_ARGUMENT for a NULL map or an empty prefix. */
NV_API nv_status nv_params_prefix(const nv_map *params, const char *prefix, nv_map **out);

/* A new map with the entries of `a`, then those of `b` whose key `a` lacks, as MLX's
 * tree_merge. A key in both takes b's array in a's position when `overwrite` is true, and
 * fails otherwise (MLX: "Trees contain elements at the same locations"). Also fails, with
 * NV_ERR_INVALID_ARGUMENT naming both keys, when the result would hold an array at a key that
 * prefixes another ("x" and "x.y": an array and a subtree at one place). */
NV_API nv_status nv_params_merge(const nv_map *a, const nv_map *b, bool overwrite, nv_map **out);

/* Sets in `params`, in place, each entry of `updates` (retained; the old arrays released), as
 * MLX's Module.update. With `strict` every key of `updates` must already be in `params` (fails
 * with NV_ERR_INVALID_ARGUMENT naming the first one that is not, changing nothing); otherwise
 * new keys are appended. Shapes and dtypes are not checked, as MLX. */
NV_API nv_status nv_params_update(nv_map *params, const nv_map *updates, bool strict);

/* A new map with `f` applied to each leaf, as MLX's tree_map(f, maps[0], maps[1], ...): for
 * each key of maps[0], in order, `f` receives the arrays under that key in maps[0..n-1] (as its
 * input list) and must append exactly one array, the new leaf. Every map must hold each key of
 * maps[0] (fails with NV_ERR_INVALID_ARGUMENT naming the key otherwise); f's failure fails the
 * call with its status. `f` is borrowed. */
NV_API nv_status nv_params_map(const nv_closure *f, const nv_map *const *maps, size_t n,
                               nv_map **out);

/* The number of parameters: the sum of the arrays' sizes (0 for NULL). */
NV_API int64_t nv_params_count(const nv_map *params);

/* Evaluates every array of the `n` maps in one nv_eval (so the graphs they share run once),
 * e.g. the new parameters and the optimizer's state. Returns the first error in map order, or
 * NV_ERR_INVALID_ARGUMENT for a NULL map. */
NV_API nv_status nv_params_eval(const nv_map *const *maps, size_t n);

/* ---- Learning-rate schedules ---- */

/* A learning rate as a function of the step, as MLX's schedule functions. Schedules are
 * immutable values; joining or giving one to an optimizer copies it. */
typedef struct nv_lr_schedule nv_lr_schedule;

/* init + min(step, steps) * (end - init) / steps: linear from `init` to `end` over `steps`
 * steps, then `end` (MLX's linear_schedule, used for warm-up). Fails for steps < 1. */
NV_API nv_status nv_linear_schedule(double init, double end, int64_t steps,
                                    nv_lr_schedule **out);
/* end + (init - end) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) (MLX's
 * cosine_decay). Fails for decay_steps < 1. */
NV_API nv_status nv_cosine_decay(double init, int64_t decay_steps, double end,
                                 nv_lr_schedule **out);
/* init * decay_rate^(step // step_size) (MLX's step_decay). Fails for step_size < 1. */
NV_API nv_status nv_step_decay(double init, double decay_rate, int64_t step_size,
                               nv_lr_schedule **out);
/* init * decay_rate^step (MLX's exponential_decay). */
NV_API nv_status nv_exponential_decay(double init, double decay_rate, nv_lr_schedule **out);
/* Schedule i+1 takes over from step boundaries[i], receiving the steps since that boundary
 * (MLX's join_schedules: where(step < boundary, before, next(step - boundary)) for each
 * boundary in turn). `n` schedules (copied) and n - 1 boundaries (each ≥ 0). Fails for n == 0,
 * a NULL schedule, a wrong number of boundaries or a negative one. */
NV_API nv_status nv_join_schedules(const nv_lr_schedule *const *schedules, size_t n,
                                   const int64_t *boundaries, size_t nboundaries,
                                   nv_lr_schedule **out);
/* Frees a schedule; NULL-safe. */
NV_API void nv_lr_schedule_free(nv_lr_schedule *s);

/* The schedule's value at `step` (an array of steps of any real or bool dtype), lazily, with
 * MLX's dtypes: C scalars are weak, so an integer step (the optimizer's uint64 step) gives
 * float32, a float64 step float64. Fails (a failed array naming lr_schedule) for NULL
 * arguments or a complex step. */
NV_API nv_array *nv_lr_schedule_at(const nv_lr_schedule *s, const nv_array *step);

/* The schedule's value at the uint64 step `step` computed as the optimizer computes it
 * (float32), evaluated and converted to double: for printing or plotting. */
NV_API nv_status nv_lr_schedule_value(const nv_lr_schedule *s, uint64_t step, double *out);

/* ---- Optimizers ---- */

/* An optimizer and its state: the step count, the learning rate and per-parameter slots. */
typedef struct nv_optimizer nv_optimizer;

/* SGD options, MLX's defaults from nv_sgd_defaults: momentum 0, weight_decay 0, dampening 0,
 * nesterov false. `schedule`, when not NULL, sets the learning rate at each step and
 * `learning_rate` is unused; it is copied when the optimizer is made. */
typedef struct nv_sgd_options {
  double learning_rate;
  const nv_lr_schedule *schedule;
  double momentum;
  double weight_decay;
  double dampening;
  bool nesterov;
} nv_sgd_options;

NV_API nv_sgd_options nv_sgd_defaults(double learning_rate);

/* Adam / AdamW options, MLX's defaults from nv_adam_defaults (betas 0.9, 0.999, eps 1e-8,
 * weight_decay 0, bias_correction false — MLX's Adam does not bias-correct by default) and
 * nv_adamw_defaults (the same with weight_decay 0.01). `schedule` as for SGD. */
typedef struct nv_adam_options {
  double learning_rate;
  const nv_lr_schedule *schedule;
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
  bool bias_correction;
} nv_adam_options;

NV_API nv_adam_options nv_adam_defaults(double learning_rate);
NV_API nv_adam_options nv_adamw_defaults(double learning_rate);

/* Stochastic gradient descent, as MLX's SGD. Per parameter w with gradient g and learning rate
 * lr: g += weight_decay * w (when nonzero); without momentum w -= lr * g; with momentum
 * v = momentum * v + (1 - dampening) * g (state "<key>.v", zeros at first),
 * w -= lr * (nesterov ? g + momentum * v : v). Fails with NV_ERR_INVALID_ARGUMENT for nesterov
 * without a positive momentum and zero dampening, or non-finite options. */
NV_API nv_status nv_optimizer_sgd(const nv_sgd_options *options, nv_optimizer **out);

/* Adam, as MLX's: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g² (state "<key>.m", "<key>.v"),
 * w -= lr m / (sqrt(v) + eps); with bias_correction (t = the step after the increment),
 * w -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps). Where a parameter, its
 * gradient and its state share one dtype the step is one pass over them (a fused primitive):
 * float16 and bfloat16 then compute in float32 and round w, m and v once each, which is more
 * accurate than MLX (which rounds every intermediate, eps included, so that tiny gradients can
 * give infinities there); float32 and float64 give the composed ops' values. Fails for betas
 * outside [0, 1), eps < 0, or a nonzero weight_decay (use AdamW). */
NV_API nv_status nv_optimizer_adam(const nv_adam_options *options, nv_optimizer **out);

/* AdamW, as MLX's: decoupled weight decay w *= 1 - lr * weight_decay before the Adam step.
 * Fails as Adam (any finite weight_decay is accepted). */
NV_API nv_status nv_optimizer_adamw(const nv_adam_options *options, nv_optimizer **out);

/* Frees an optimizer and its state; NULL-safe. */
NV_API void nv_optimizer_free(nv_optimizer *opt);

/* One optimization step, as MLX's apply_gradients: sets the learning rate from the schedule at
 * the current step, increments the step, and updates each parameter that has a gradient.
 * `new_params` gets a new map with the keys of `params` in order: the updated arrays, lazily
 * (nothing is evaluated), and the same arrays where `grads` has no entry. State slots are
 * created (zeros like the gradient, as MLX) for keys seen for the first time. Parameters and
 * gradients must have real floating dtypes (the update computes with MLX's promotion: float32
 * learning rate cast to the gradient's dtype, weak C scalars) and equal shapes. Fails, changing
 * nothing, with NV_ERR_INVALID_ARGUMENT naming the key for a gradient without a parameter, a
 * shape or dtype mismatch, a slot of the wrong shape, or a key "step"/"learning_rate" (or
 * under them), which would collide with the state's own entries; and, before any shape is
 * checked, with the error (and status) of a parameter or gradient that already failed. */
NV_API nv_status nv_optimizer_update(nv_optimizer *opt, const nv_map *params,
                                     const nv_map *grads, nv_map **new_params);

/* Creates the state slots of the keys of `params` that have none yet, as MLX's init: useful
 * to see or save the state before the first update. Fails as nv_optimizer_update. */
NV_API nv_status nv_optimizer_init(nv_optimizer *opt, const nv_map *params);

/* The state as a flat map (borrowed; valid until the next call that changes the optimizer):
 * "step" (uint64, 0-d), "learning_rate" (float32, 0-d), then the slots "<key>.m", "<key>.v" —
 * the keys of MLX's tree_flatten(optimizer.state), so it saves to and loads from the same
 * files. Evaluate it with the new parameters each step. */
NV_API const nv_map *nv_optimizer_state(const nv_optimizer *opt);

/* Replaces the state (e.g. loaded from a checkpoint) with the entries of `state`: "step" (one
 * element, converted to uint64) and "learning_rate" (one element, converted to float32) are
 * required; every other key must be a slot of this optimizer ("<key>.m" or "<key>.v" for
 * Adam, "<key>.v" for SGD with momentum). Fails, changing nothing, with
 * NV_ERR_INVALID_ARGUMENT naming the offending key. */
NV_API nv_status nv_optimizer_set_state(nv_optimizer *opt, const nv_map *state);

/* The step count (uint64, 0-d) and the learning rate (float32, 0-d), borrowed from the state
 * (valid until the next update). */
NV_API nv_array *nv_optimizer_step(const nv_optimizer *opt);
NV_API nv_array *nv_optimizer_learning_rate(const nv_optimizer *opt);

/* Sets the learning rate (float32), as MLX's learning_rate setter. With a schedule the next
 * update overrides it, as in MLX. */
NV_API nv_status nv_optimizer_set_learning_rate(nv_optimizer *opt, double learning_rate);

/* ---- Initialisers ---- */

/* Initialisers return a new array of `shape` (ndim dimensions) as mlx.nn.init's initialisers
 * return for an array of that shape. They are lazy builders like the samplers of
 * nuvec/random.h, which they use: `key` NULL draws the next key of the process-wide sequence
 * (nv_random_seed), so after nv_random_seed(s) the values equal MLX's after mx.random.seed(s);
 * errors give a failed array naming the initialiser. Dtypes are the samplers': normal and the
 * *_normal ones take float16, bfloat16, float32, float64 (and complex64 for normal); uniform and
 * the *_uniform ones float16, bfloat16, float32; constant and identity any dtype. */

/* The fans of a weight of `shape`, as MLX's: fan_in = shape[-1], fan_out = shape[0], both
 * times the product of the dimensions between them (a convolution's receptive field). Fails
 * with NV_ERR_INVALID_ARGUMENT for fewer than 2 dimensions. */
NV_API nv_status nv_init_fans(const int *shape, int ndim, int64_t *fan_in, int64_t *fan_out);

/* Which fan the He initialisers scale by. */
typedef enum nv_init_fan_mode {
  NV_INIT_FAN_IN = 0,
  NV_INIT_FAN_OUT = 1,
} nv_init_fan_mode;

/* `value` everywhere, in `dtype` (MLX's constant: full(shape, value, dtype)). */
NV_API nv_array *nv_init_constant(const int *shape, int ndim, double value, nv_dtype dtype);
/* Samples of the normal distribution N(mean, std²) (MLX's normal). */
NV_API nv_array *nv_init_normal(const int *shape, int ndim, double mean, double std,
                                nv_dtype dtype, const nv_array *key);
/* Samples uniform on [low, high) (MLX's uniform). */
NV_API nv_array *nv_init_uniform(const int *shape, int ndim, double low, double high,
                                 nv_dtype dtype, const nv_array *key);
/* The identity matrix of a square 2-D `shape` (MLX's identity); fails for another shape. */
NV_API nv_array *nv_init_identity(const int *shape, int ndim, nv_dtype dtype);
/* Glorot (Xavier) normal: N(0, std²) with std = gain * sqrt(2 / (fan_in + fan_out)); Glorot
 * uniform: uniform on [-limit, limit) with limit = gain * sqrt(6 / (fan_in + fan_out)). Fail for
 * fewer than 2 dimensions or zero fans (MLX divides by zero). */
NV_API nv_array *nv_init_glorot_normal(const int *shape, int ndim, double gain, nv_dtype dtype,
                                       const nv_array *key);
NV_API nv_array *nv_init_glorot_uniform(const int *shape, int ndim, double gain, nv_dtype dtype,
                                        const nv_array *key);
/* He (Kaiming) normal: N(0, std²) with std = gain / sqrt(fan); He uniform: uniform on
 * [-limit, limit) with limit = gain * sqrt(3 / fan); fan is fan_in or fan_out by `mode`. Fail
 * as Glorot's, and for an invalid mode. */
NV_API nv_array *nv_init_he_normal(const int *shape, int ndim, nv_init_fan_mode mode,
                                   double gain, nv_dtype dtype, const nv_array *key);
NV_API nv_array *nv_init_he_uniform(const int *shape, int ndim, nv_init_fan_mode mode,
                                    double gain, nv_dtype dtype, const nv_array *key);

/* ---- Gradient clipping ---- */

/* Scales the gradients so their global L2 norm is at most `max_norm`, as MLX's
 * clip_grad_norm: norm = sqrt(sum over arrays, in map order, of sum(g²)) (float16 squares are
 * summed in float32; other dtypes in their own, so integer squares wrap as MLX's), scale =
 * min(max_norm / (norm + 1e-6), 1), and each floating gradient becomes (g * scale) cast back
 * to its dtype (integers and bool: g * scale, float32). `clipped` gets a new map with the keys
 * of `grads`, `total_norm` the norm before clipping (a new 0-d array; float32 for an empty map)
 * — both lazy. Fails with NV_ERR_INVALID_ARGUMENT for max_norm < 0 or NaN, complex gradients,
 * or NULL arguments. */
NV_API nv_status nv_clip_grad_norm(const nv_map *grads, double max_norm, nv_map **clipped,
                                   nv_array **total_norm);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_NN_H */
