/* A table-driven harness for the rules tests of an op family (test_transforms_index.c,
 * test_transforms_linalg.c): each case is an op written as a function of its inputs, with the
 * inputs' shapes and kinds (float data, integer indices in a range, a bool mask).
 *
 * - case_gradcheck: nv_gradcheck with the float inputs as the primals (float64, random, both
 *   contiguous and as strided views) and the index and mask inputs fixed.
 * - case_vmapcheck: nv_vmapcheck with a batch of 3 on every non-empty subset of the inputs
 *   (indices and masks included), at axes 0, 1 and -1 in turn, the others not mapped. */
#ifndef NUVEC_TEST_TRANSFORMS_CASES_H
#define NUVEC_TEST_TRANSFORMS_CASES_H

#include <criterion/criterion.h>

#include "gradcheck.h"
#include "testutil.h"

#define TC_MAX_IN 4

/* The case tables leave the trailing fields (index ranges, nograd) zero where unused. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* An op: pushes its outputs (it runs inside a scope: temporaries need no release). */
typedef nv_status (*tc_fn)(nv_array *const *x, nv_vec *out);

enum { TC_FLOAT = 0, TC_INDEX = 1, TC_MASK = 2 };

typedef struct tc_case {
  const char *name;
  tc_fn fn;
  int nin;
  int nd[TC_MAX_IN];
  int shape[TC_MAX_IN][6];
  int kind[TC_MAX_IN];
  int lo[TC_MAX_IN], hi[TC_MAX_IN]; /* indices: uniform in [lo, hi) */
  bool nograd;                      /* vmap only */
} tc_case;

/* One-output ops. */
#define TC_OP(name, expr)                                    \
  static nv_status name(nv_array *const *x, nv_vec *out) {  \
    nv_array *r = (expr);                                    \
    nv_status s = nv_array_status(r);                        \
    return s == NV_OK ? nv_vec_push(out, r) : s;             \
  }

/* A random double in [-1, 1) with about 32 bits of resolution (ties are improbable), never 0. */
static double tc_rand(unsigned *st) {
  double v = test_randf(st) + test_randf(st) / 65536.0;
  return v == 0 ? 0.25 : v;
}

static int64_t tc_size(const int *shape, int nd) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  return n;
}

/* A random input of kind `kind` and `shape`. */
static nv_array *tc_input(int kind, int lo, int hi, const int *shape, int nd, unsigned *st) {
  int64_t n = tc_size(shape, nd);
  nv_array *r;
  if (kind == TC_FLOAT) {
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = tc_rand(st);
    r = nv_array_from_data(v, shape, nd, NV_DTYPE_FLOAT64);
    free(v);
  } else if (kind == TC_INDEX) {
    int32_t *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) {
      int k = lo + (int)((test_randf(st) + 1) / 2 * (hi - lo));
      v[i] = k < lo ? lo : k >= hi ? hi - 1 : k;
    }
    r = nv_array_from_data(v, shape, nd, NV_DTYPE_INT32);
    free(v);
  } else {
    bool *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = test_randf(st) > 0;
    r = nv_array_from_data(v, shape, nd, NV_DTYPE_BOOL);
    free(v);
  }
  return r;
}

/* `a` as a strided view with the same values: the transpose of a transposed copy (2+ dims) or
 * a negative-step view of a reversed copy (1-D). Takes over `a`. */
static nv_array *tc_strided(nv_array *a) {
  int nd = nv_array_ndim(a);
  if (nd == 0 || nv_array_size(a) == 0) return a;
  nv_array *r;
  if (nd >= 2) {
    nv_array *t = nv_transpose(a, NULL, 0), *c = nv_copy(t);
    r = nv_transpose(c, NULL, 0);
    nv_release(t);
    nv_release(c);
  } else {
    int n = nv_array_dim(a, 0), start = n - 1, stop = -n - 1, step = -1;
    nv_array *rev = nv_slice(a, &start, &stop, &step, 1), *c = nv_copy(rev);
    r = nv_slice(c, &start, &stop, &step, 1);
    nv_release(rev);
    nv_release(c);
  }
  nv_release(a);
  return r;
}

/* The closure of a case: the float inputs come from the call, the others from `fixed`. */
typedef struct tc_bound {
  const tc_case *c;
  nv_array *fixed[TC_MAX_IN]; /* NULL: passed in the call */
} tc_bound;

static nv_status tc_call(void *payload, const nv_vec *in, nv_vec *out) {
  const tc_bound *b = payload;
  nv_array *x[TC_MAX_IN];
  size_t k = 0;
  for (int i = 0; i < b->c->nin; i++) x[i] = b->fixed[i] ? b->fixed[i] : nv_vec_get(in, k++);
  return b->c->fn(x, out);
}

static void tc_gradcheck(const tc_case *c, unsigned *st, double tol) {
  char why[512];
  for (int layout = 0; layout < 2; layout++) {
    tc_bound b = {c, {NULL}};
    nv_vec *p = nv_vec_new();
    for (int i = 0; i < c->nin; i++) {
      nv_array *a = tc_input(c->kind[i], c->lo[i], c->hi[i], c->shape[i], c->nd[i], st);
      if (c->kind[i] != TC_FLOAT) {
        b.fixed[i] = a;
        continue;
      }
      if (layout) a = tc_strided(a);
      nv_vec_push(p, a);
      nv_release(a);
    }
    nv_closure *f = nv_closure_new(tc_call, &b, NULL);
    gc_seed(*st);
    cr_assert(nv_gradcheck(f, p, 1e-6, tol, why, sizeof why), "%s (layout %d): %s", c->name,
              layout, why);
    nv_closure_release(f);
    nv_vec_free(p);
    for (int i = 0; i < c->nin; i++) nv_release(b.fixed[i]);
  }
}

static void tc_vmapcheck(const tc_case *c, unsigned *st, double tol) {
  static const int choice[3] = {0, 1, -1};
  char why[512];
  tc_bound b = {c, {NULL}};
  nv_closure *f = nv_closure_new(tc_call, &b, NULL);
  for (int set = 1; set < (1 << c->nin); set++) {
    for (int turn = 0; turn < 3; turn++) {
      int axes[TC_MAX_IN];
      nv_vec *in = nv_vec_new();
      for (int i = 0; i < c->nin; i++) {
        int nd = c->nd[i], shape[8];
        if (!(set & (1 << i))) {
          axes[i] = NV_VMAP_NONE;
          memcpy(shape, c->shape[i], sizeof(int) * (size_t)nd);
        } else {
          int ax = choice[(turn + i) % 3];
          if (ax == 1 && nd == 0) ax = 0;
          axes[i] = ax;
          int at = ax < 0 ? ax + nd + 1 : ax;
          for (int d = 0, k = 0; d <= nd; d++) shape[d] = d == at ? 3 : c->shape[i][k++];
          nd++;
        }
        nv_array *a = tc_input(c->kind[i], c->lo[i], c->hi[i], shape, nd, st);
        nv_vec_push(in, a);
        nv_release(a);
      }
      cr_assert(nv_vmapcheck(f, in, axes, tol, why, sizeof why), "%s, inputs mapped %#x, turn %d: %s",
                c->name, set, turn, why);
      nv_vec_free(in);
    }
  }
  nv_closure_release(f);
}

#endif
