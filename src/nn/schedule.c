/* Learning-rate schedules, as MLX's mlx.optimizers schedule functions: each is composed of the
 * same ops with the same weak C scalars as MLX's Python, so a uint64 step gives the float32
 * values MLX gives. */
#include <math.h>

#include "nn/nn_internal.h"

typedef enum kind { LINEAR, COSINE, STEP, EXPONENTIAL, JOIN } kind;

struct nv_lr_schedule {
  kind kind;
  double init, end, rate;
  int64_t steps;            /* linear: steps; cosine: decay_steps; step: step_size */
  nv_lr_schedule **parts;   /* join */
  int64_t *boundaries;      /* join: nparts - 1 */
  size_t nparts;
};

static nv_status make(kind k, double init, double end, double rate, int64_t steps,
                      nv_lr_schedule **out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "lr_schedule: NULL out");
  nv_lr_schedule *s = nv__calloc(1, sizeof *s);
  if (!s) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "lr_schedule: out of memory");
  *s = (nv_lr_schedule){.kind = k, .init = init, .end = end, .rate = rate, .steps = steps};
  *out = s;
  return NV_OK;
}

nv_status nv_linear_schedule(double init, double end, int64_t steps, nv_lr_schedule **out) {
  if (steps < 1)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "linear_schedule: steps must be greater than 0, got %lld",
                         (long long)steps);
  return make(LINEAR, init, end, 0, steps, out);
}

nv_status nv_cosine_decay(double init, int64_t decay_steps, double end, nv_lr_schedule **out) {
  if (decay_steps < 1)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "cosine_decay: decay_steps must be greater than 0, got %lld",
                         (long long)decay_steps);
  return make(COSINE, init, end, 0, decay_steps, out);
}

nv_status nv_step_decay(double init, double decay_rate, int64_t step_size, nv_lr_schedule **out) {
  if (step_size < 1)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "step_decay: step_size must be greater than 0, got %lld",
                         (long long)step_size);
  return make(STEP, init, 0, decay_rate, step_size, out);
}

nv_status nv_exponential_decay(double init, double decay_rate, nv_lr_schedule **out) {
  return make(EXPONENTIAL, init, 0, decay_rate, 0, out);
}

void nv_lr_schedule_free(nv_lr_schedule *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nparts; i++) nv_lr_schedule_free(s->parts[i]);
  nv__free(s->parts);
  nv__free(s->boundaries);
  nv__free(s);
}

/* A deep copy (joins nest as deep as the caller built them; each level is one call). */
nv_lr_schedule *nv__lr_schedule_copy(const nv_lr_schedule *s) {
  nv_lr_schedule *c = nv__calloc(1, sizeof *c);
  if (!c) return NULL;
  *c = *s;
  c->parts = NULL;
  c->boundaries = NULL;
  c->nparts = 0;
  if (s->kind != JOIN) return c;
  c->parts = nv__calloc(s->nparts, sizeof *c->parts);
  /* nparts (not nparts - 1) entries, so that a join of one schedule allocates something. */
  c->boundaries = nv__malloc(s->nparts * sizeof *c->boundaries);
  if (!c->parts || !c->boundaries) {
    nv_lr_schedule_free(c);
    return NULL;
  }
  memcpy(c->boundaries, s->boundaries, (s->nparts - 1) * sizeof *c->boundaries);
  for (size_t i = 0; i < s->nparts; i++) {
    c->parts[i] = nv__lr_schedule_copy(s->parts[i]);
    c->nparts = i + 1;
    if (!c->parts[i]) {
      nv_lr_schedule_free(c);
      return NULL;
    }
  }
  return c;
}

nv_status nv_join_schedules(const nv_lr_schedule *const *schedules, size_t n,
                            const int64_t *boundaries, size_t nboundaries,
                            nv_lr_schedule **out) {
  if (!out || (n && !schedules) || (nboundaries && !boundaries))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "join_schedules: NULL argument");
  if (n == 0)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "join_schedules: must provide at least 1 schedule to join");
  if (nboundaries != n - 1)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "join_schedules: received %zu boundaries but expected %zu", nboundaries,
                         n - 1);
  for (size_t i = 0; i < n; i++)
    if (!schedules[i])
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "join_schedules: schedule %zu is NULL", i);
  for (size_t i = 0; i < nboundaries; i++)
    if (boundaries[i] < 0)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                           "join_schedules: boundary %zu is negative (%lld)", i,
                           (long long)boundaries[i]);
  nv_lr_schedule tmp = {.kind = JOIN, .parts = (nv_lr_schedule **)schedules,
                        .boundaries = (int64_t *)boundaries, .nparts = n};
  nv_lr_schedule *c = nv__lr_schedule_copy(&tmp);
  if (!c) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "join_schedules: out of memory");
  *out = c;
  return NV_OK;
}

/* The schedule at `step`, built inside the caller's scope (expression style). */
static nv_array *at_impl(const nv_lr_schedule *s, const nv_array *step) {
  switch (s->kind) {
    case LINEAR: {
      nv_array *t = nv_minimum(step, nv_weak_int(s->steps));
      return nv_add_scalar(nv_multiply_scalar(t, (s->end - s->init) / (double)s->steps),
                           s->init);
    }
    case COSINE: {
      nv_array *t = nv_minimum(step, nv_weak_int(s->steps));
      nv_array *c = nv_cos(nv_multiply_scalar(t, M_PI / (double)s->steps));
      nv_array *decay = nv_multiply_scalar(nv_add_scalar(c, 1.0), 0.5);
      return nv_add_scalar(nv_multiply_scalar(decay, s->init - s->end), s->end);
    }
    case STEP: {
      nv_array *k = nv_floor_divide(step, nv_weak_int(s->steps));
      return nv_multiply_scalar(nv_power(nv_weak_scalar(s->rate), k), s->init);
    }
    case EXPONENTIAL:
      return nv_multiply_scalar(nv_power(nv_weak_scalar(s->rate), step), s->init);
    case JOIN: {
      nv_array *r = at_impl(s->parts[0], step);
      for (size_t i = 1; i < s->nparts; i++) {
        nv_array *b = nv_weak_int(s->boundaries[i - 1]);
        nv_array *next = at_impl(s->parts[i], nv_subtract(step, b));
        r = nv_where(nv_less(step, b), r, next);
      }
      return r;
    }
  }
  return nv__array_error(NV_ERR_INVALID_ARGUMENT, "lr_schedule: invalid schedule");
}

nv_array *nv_lr_schedule_at(const nv_lr_schedule *s, const nv_array *step) {
  if (!s) return nv__array_error(NV_ERR_INVALID_ARGUMENT, "lr_schedule: NULL schedule");
  if (!step) return nv__array_error(NV_ERR_INVALID_ARGUMENT, "lr_schedule: NULL step");
  if (nv_array_dtype(step) == NV_DTYPE_COMPLEX64)
    return nv__array_error(NV_ERR_INVALID_ARGUMENT,
                           "lr_schedule: the step must be real, got complex64");
  if (nv__nn_scope_begin("lr_schedule") != NV_OK)
    return nv__array_error(NV_ERR_OUT_OF_MEMORY, "lr_schedule: out of memory");
  nv_array *r = nv_retain(at_impl(s, step));
  nv__nn_scope_end();
  return nv__nn_result(r);
}

nv_status nv_lr_schedule_value(const nv_lr_schedule *s, uint64_t step, double *out) {
  if (!s || !out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "lr_schedule: NULL argument");
  /* Both arrays are released below, which takes them out of any scope the caller opened. */
  nv_array *t = nv_array_uint64(step), *r = nv_lr_schedule_at(s, t);
  double v = 0;
  nv_status st = nv_array_item_double(r, &v);
  nv_release(r);
  nv_release(t);
  if (st == NV_OK) *out = v;
  return st;
}
