/* A reusable finite-difference checker for vjp/jvp rules, and a loop checker for vmap rules.
 * Every op family tests its rules with these: write the op as a closure, give float64 primals
 * (any layout: views and broadcasts are fine), and compare.
 *
 *   char why[512];
 *   cr_assert(nv_gradcheck(f, primals, 1e-6, 1e-6, why, sizeof why), "%s", why);
 *   cr_assert(nv_vmapcheck(f, inputs, in_axes, 1e-12, why, sizeof why), "%s", why);
 *
 * nv_gradcheck draws seeded random cotangents and tangents (never zero), then checks
 * vjp against Σ_o cot_o · (f(x + h e_k) − f(x − h e_k)) / 2h for every element k of every primal,
 * and jvp against (f(x + h t) − f(x − h t)) / 2h. nv_vmapcheck compares vmap(f) with a loop of f
 * over the mapped axis (out_axes 0). Both read outputs converted to float64 and accept
 * |a − b| ≤ tol · (1 + |b|). */
#ifndef NUVEC_TEST_GRADCHECK_H
#define NUVEC_TEST_GRADCHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "nuvec.h"

static unsigned gc_state = 12345;

/* Uniform in [-1, 1), never exactly zero. */
static double gc_rand(void) {
  gc_state = gc_state * 1103515245u + 12345u;
  double u = ((gc_state >> 8) & 0xffffff) / (double)0x1000000;
  double v = 2 * u - 1;
  return v == 0 ? 0.5 : v;
}

static void gc_seed(unsigned seed) { gc_state = seed ? seed : 1; }

static bool gc_fail(char *why, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, n, fmt, ap);
  va_end(ap);
  return false;
}

/* The values of `x` as float64 in row-major order (malloc'ed; NULL on failure). */
static double *gc_read(nv_array *x) {
  nv_array *d = nv_astype(x, NV_DTYPE_FLOAT64);
  size_t n = (size_t)nv_array_size(d);
  double *v = malloc((n ? n : 1) * sizeof *v);
  if (v && nv_array_read(d, v, n * sizeof *v) != NV_OK) {
    free(v);
    v = NULL;
  }
  nv_release(d);
  return v;
}

static nv_array *gc_like(const nv_array *x, const double *v) {
  return nv_array_from_data(v, nv_array_shape(x), nv_array_ndim(x), NV_DTYPE_FLOAT64);
}

static nv_array *gc_random_like(const nv_array *x) {
  size_t n = (size_t)nv_array_size(x);
  double *v = malloc((n ? n : 1) * sizeof *v);
  for (size_t i = 0; i < n; i++) v[i] = gc_rand();
  nv_array *r = nv_array_from_data(v, nv_array_shape(x), nv_array_ndim(x), NV_DTYPE_FLOAT64);
  free(v);
  return r;
}

static bool gc_close(double a, double b, double tol) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  if (a == b) return true; /* equal infinities */
  return fabs(a - b) <= tol * (1 + fabs(b));
}

/* a − b, with equal values (an output held at ±inf) differing by 0 rather than NaN. */
static double gc_diff(double a, double b) { return a == b ? 0 : a - b; }

/* f applied to primals whose values are `vals[i]` (contiguous), outputs appended to `out`. */
static nv_status gc_apply(const nv_closure *f, const nv_vec *primals, double **vals, nv_vec *out) {
  nv_vec *in = nv_vec_new();
  for (size_t i = 0; i < nv_vec_size(primals); i++) {
    nv_array *a = gc_like(nv_vec_get(primals, i), vals[i]);
    nv_vec_push(in, a);
    nv_release(a);
  }
  nv_status s = nv_closure_apply(f, in, out);
  nv_vec_free(in);
  return s;
}

/* Σ_o Σ_k cot_o[k] · (plus_o[k] − minus_o[k]) / 2h. */
static double gc_directional(nv_vec *plus, nv_vec *minus, double *const *cot, double h) {
  double acc = 0;
  for (size_t o = 0; o < nv_vec_size(plus); o++) {
    double *p = gc_read(nv_vec_get(plus, o)), *m = gc_read(nv_vec_get(minus, o));
    for (int64_t k = 0; p && m && k < nv_array_size(nv_vec_get(plus, o)); k++)
      acc += cot[o][k] * gc_diff(p[k], m[k]) / (2 * h);
    free(p);
    free(m);
  }
  return acc;
}

static bool nv_gradcheck(const nv_closure *f, const nv_vec *primals, double h, double tol,
                         char *why, size_t whylen) {
  size_t n = nv_vec_size(primals);
  bool ok = true;
  nv_vec *outs = nv_vec_new(), *cots = nv_vec_new(), *tans = nv_vec_new();
  nv_vec *vjps = nv_vec_new(), *jvps = nv_vec_new(), *o2 = nv_vec_new();
  double **x = calloc(n + 1, sizeof *x), **t = calloc(n + 1, sizeof *t);
  for (size_t i = 0; i < n; i++) x[i] = gc_read(nv_vec_get(primals, i));
  if (nv_closure_apply(f, primals, outs) != NV_OK) {
    ok = gc_fail(why, whylen, "the function failed: %s", nv_last_error());
    goto done;
  }
  size_t m = nv_vec_size(outs);
  double **c = calloc(m + 1, sizeof *c);
  for (size_t o = 0; o < m; o++) {
    nv_array *r = gc_random_like(nv_vec_get(outs, o));
    nv_vec_push(cots, r);
    c[o] = gc_read(r);
    nv_release(r);
  }
  for (size_t i = 0; i < n; i++) {
    nv_array *r = gc_random_like(nv_vec_get(primals, i));
    nv_vec_push(tans, r);
    t[i] = gc_read(r);
    nv_release(r);
  }
  if (nv_vjp(f, primals, cots, o2, vjps) != NV_OK) {
    ok = gc_fail(why, whylen, "vjp failed: %s", nv_last_error());
  } else if (nv_jvp(f, primals, tans, NULL, jvps) != NV_OK) {
    ok = gc_fail(why, whylen, "jvp failed: %s", nv_last_error());
  }
  /* vjp against finite differences, element by element. */
  for (size_t i = 0; ok && i < n; i++) {
    double *g = gc_read(nv_vec_get(vjps, i));
    if (!g) {
      ok = gc_fail(why, whylen, "vjp %zu could not be read: %s", i, nv_last_error());
      break;
    }
    for (int64_t k = 0; ok && k < nv_array_size(nv_vec_get(primals, i)); k++) {
      nv_vec *p = nv_vec_new(), *q = nv_vec_new();
      double keep = x[i][k];
      x[i][k] = keep + h;
      gc_apply(f, primals, x, p);
      x[i][k] = keep - h;
      gc_apply(f, primals, x, q);
      x[i][k] = keep;
      double fd = gc_directional(p, q, c, h);
      if (!gc_close(g[k], fd, tol))
        ok = gc_fail(why, whylen, "vjp of primal %zu, element %lld: %.10g, finite differences %.10g",
                     i, (long long)k, g[k], fd);
      nv_vec_free(p);
      nv_vec_free(q);
    }
    free(g);
  }
  /* jvp against one directional difference per output. */
  if (ok) {
    double **xp = calloc(n + 1, sizeof *xp), **xm = calloc(n + 1, sizeof *xm);
    for (size_t i = 0; i < n; i++) {
      size_t len = (size_t)nv_array_size(nv_vec_get(primals, i));
      xp[i] = malloc((len ? len : 1) * sizeof(double));
      xm[i] = malloc((len ? len : 1) * sizeof(double));
      for (size_t k = 0; k < len; k++) {
        xp[i][k] = x[i][k] + h * t[i][k];
        xm[i][k] = x[i][k] - h * t[i][k];
      }
    }
    nv_vec *p = nv_vec_new(), *q = nv_vec_new();
    gc_apply(f, primals, xp, p);
    gc_apply(f, primals, xm, q);
    for (size_t o = 0; ok && o < m; o++) {
      double *a = gc_read(nv_vec_get(jvps, o)), *pp = gc_read(nv_vec_get(p, o)),
             *qq = gc_read(nv_vec_get(q, o));
      for (int64_t k = 0; ok && a && k < nv_array_size(nv_vec_get(outs, o)); k++) {
        double fd = gc_diff(pp[k], qq[k]) / (2 * h);
        if (!gc_close(a[k], fd, tol))
          ok = gc_fail(why, whylen, "jvp of output %zu, element %lld: %.10g, finite differences %.10g",
                       o, (long long)k, a[k], fd);
      }
      if (!a) ok = gc_fail(why, whylen, "jvp %zu could not be read: %s", o, nv_last_error());
      free(a);
      free(pp);
      free(qq);
    }
    nv_vec_free(p);
    nv_vec_free(q);
    for (size_t i = 0; i < n; i++) {
      free(xp[i]);
      free(xm[i]);
    }
    free(xp);
    free(xm);
  }
  for (size_t o = 0; o < m; o++) free(c[o]);
  free(c);
done:
  for (size_t i = 0; i < n; i++) {
    free(x[i]);
    free(t[i]);
  }
  free(x);
  free(t);
  nv_vec_free(outs);
  nv_vec_free(cots);
  nv_vec_free(tans);
  nv_vec_free(vjps);
  nv_vec_free(jvps);
  nv_vec_free(o2);
  return ok;
}

/* Element b of `x` along axis `ax` (a contiguous copy). */
static nv_array *gc_take(const nv_array *x, int ax, int b) {
  int nd = nv_array_ndim(x), start[64], stop[64];
  for (int i = 0; i < nd; i++) {
    start[i] = i == ax ? b : 0;
    stop[i] = i == ax ? b + 1 : nv_array_dim(x, i);
  }
  nv_array *s = nv_slice(x, start, stop, NULL, nd);
  nv_array *q = nv_squeeze(s, &ax, 1);
  nv_array *c = nv_copy(q);
  nv_release(s);
  nv_release(q);
  return c;
}

/* vmap(f, in_axes)(inputs) against f looped over the batch, stacked along axis 0. */
static bool nv_vmapcheck(const nv_closure *f, const nv_vec *inputs, const int *in_axes,
                         double tol, char *why, size_t whylen) {
  size_t n = nv_vec_size(inputs);
  int b = -1;
  int *ax = calloc(n + 1, sizeof *ax);
  for (size_t i = 0; i < n; i++) {
    int a = in_axes[i];
    if (a == NV_VMAP_NONE) {
      ax[i] = -1;
      continue;
    }
    ax[i] = a < 0 ? a + nv_array_ndim(nv_vec_get(inputs, i)) : a;
    b = nv_array_dim(nv_vec_get(inputs, i), ax[i]);
  }
  nv_closure *v = nv_vmap(f, in_axes, n, NULL, 0);
  nv_vec *got = nv_vec_new();
  bool ok = true;
  if (!v || nv_closure_apply(v, inputs, got) != NV_OK) {
    ok = gc_fail(why, whylen, "vmap failed: %s", nv_last_error());
    goto done;
  }
  for (int k = 0; ok && k < b; k++) {
    nv_vec *in = nv_vec_new(), *want = nv_vec_new();
    for (size_t i = 0; i < n; i++) {
      nv_array *x = nv_vec_get(inputs, i);
      nv_array *e = ax[i] >= 0 ? gc_take(x, ax[i], k) : nv_retain(x);
      nv_vec_push(in, e);
      nv_release(e);
    }
    if (nv_closure_apply(f, in, want) != NV_OK || nv_vec_size(want) != nv_vec_size(got)) {
      ok = gc_fail(why, whylen, "the loop failed or differs in outputs: %s", nv_last_error());
    }
    for (size_t o = 0; ok && o < nv_vec_size(want); o++) {
      nv_array *g = gc_take(nv_vec_get(got, o), 0, k);
      double *a = gc_read(g), *w = gc_read(nv_vec_get(want, o));
      if (!a || !w || nv_array_size(g) != nv_array_size(nv_vec_get(want, o))) {
        ok = gc_fail(why, whylen, "output %zu of batch %d: unreadable or wrong size (%s)", o, k,
                     nv_last_error());
      }
      for (int64_t e = 0; ok && e < nv_array_size(g); e++)
        if (!gc_close(a[e], w[e], tol))
          ok = gc_fail(why, whylen, "output %zu of batch %d, element %lld: vmap %.10g, loop %.10g",
                       o, k, (long long)e, a[e], w[e]);
      free(a);
      free(w);
      nv_release(g);
    }
    nv_vec_free(in);
    nv_vec_free(want);
  }
done:
  nv_vec_free(got);
  nv_closure_release(v);
  free(ax);
  return ok;
}

/* The values of `a` (consumed) as a non-contiguous view, so rules see strided inputs: the
 * transpose of a transposed copy (`transpose` and at least 2-D), else a negative-step slice of
 * a copy reversed along axis 0. 0-d arrays are returned as they are. */
static inline nv_array *nv_test_strided_view(nv_array *a, bool transpose) {
  int nd = nv_array_ndim(a);
  if (nd < 1) return a;
  const int *shape = nv_array_shape(a);
  nv_array *r;
  if (transpose && nd >= 2) {
    nv_array *t = nv_transpose(a, NULL, 0), *c = nv_copy(t);
    r = nv_transpose(c, NULL, 0);
    nv_release(t);
    nv_release(c);
  } else {
    int start[64], stop[64], step[64];
    for (int i = 0; i < nd; i++) {
      start[i] = i == 0 ? shape[0] - 1 : 0;
      stop[i] = i == 0 ? -shape[0] - 1 : shape[i];
      step[i] = i == 0 ? -1 : 1;
    }
    nv_array *rev = nv_slice(a, start, stop, step, nd), *c = nv_copy(rev);
    r = nv_slice(c, start, stop, step, nd);
    nv_release(rev);
    nv_release(c);
  }
  nv_release(a);
  return r;
}

#endif
