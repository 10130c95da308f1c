/* adam_update, the fused Adam/AdamW step (src/ops/optim.h): its values against the composed
 * update built from element-wise ops (the formulas of src/nn/optimizer.c, in float32 for
 * float16/bfloat16 and rounded once, as the primitive promises), over dtypes, shapes (0-d,
 * empty, odd sizes, 2-D, a size the CPU splits over its pool), layouts (transposed, reversed,
 * unaligned offsets, broadcast state), edge values (zeros, huge, NaN and infinite gradients)
 * and several steps of Adam and AdamW with and without bias correction; its errors; the
 * transforms (no vjp/jvp, vmap element-wise); and the optimizer's use of it. The default
 * device computes both sides, so NUVEC_DEFAULT_DEVICE=gpu runs the CUDA kernel against the
 * CUDA element-wise kernels. */
#include <criterion/criterion.h>

#include "gradcheck.h"
#include "ops/optim.h"
#include "testutil.h"

static const nv_dtype DTYPES[] = {NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16, NV_DTYPE_FLOAT32,
                                  NV_DTYPE_FLOAT64};

/* An optimizer configuration: the primitive's parameters and the scalars' sources. */
typedef struct cfg {
  nv__adam_params prm;
  double lr, wd;
} cfg;

static const cfg CFGS[] = {
    {{0.9, 0.999, 1e-8, false, false}, 0.05, 0},   /* Adam */
    {{0.9, 0.999, 1e-8, false, true}, 0.05, 0},    /* Adam, bias correction */
    {{0.9, 0.999, 1e-8, true, false}, 0.05, 0.01}, /* AdamW */
    {{0.5, 0.75, 1e-3, true, true}, 0.1, 0.1},     /* AdamW, bias correction */
};
#define NCFG (int)(sizeof CFGS / sizeof *CFGS)

/* The 0-d scalars of step t (>= 1), as the optimizer makes them: in the arrays' dtype. */
typedef struct scalars {
  nv_array *lr, *decay, *c1, *c2;
} scalars;

static scalars scalars_at(const cfg *c, int t, nv_dtype dt) {
  scalars s = {nv_array_scalar(c->lr, dt), nv_array_scalar(1 - c->lr * c->wd, dt),
               nv_array_scalar(c->lr / (1 - pow(c->prm.beta1, t)), dt),
               nv_array_scalar(1 / sqrt(1 - pow(c->prm.beta2, t)), dt)};
  return s;
}

static bool is_half(nv_dtype dt) { return dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16; }

/* The composed update (optimizer.c's adam_single without the fused branch) in the compute
 * type, rounded to the arrays' dtype once per output. */
static void composed(const cfg *c, nv_array *const *x, const scalars *s, nv_array **out) {
  nv_dtype dt = nv_array_dtype(x[0]), ct = is_half(dt) ? NV_DTYPE_FLOAT32 : dt;
  const nv__adam_params *q = &c->prm;
  nv_array *p = nv_astype(x[0], ct), *g = nv_astype(x[1], ct);
  nv_array *m = nv_astype(x[2], ct), *v = nv_astype(x[3], ct);
  if (q->decoupled) p = nv_multiply(p, nv_astype(s->decay, ct));
  m = nv_add(nv_multiply_scalar(m, q->beta1), nv_multiply_scalar(g, 1 - q->beta1));
  v = nv_add(nv_multiply_scalar(v, q->beta2), nv_multiply_scalar(nv_square(g), 1 - q->beta2));
  nv_array *step;
  if (!q->bias_correction) {
    step = nv_divide(nv_multiply(nv_astype(s->lr, ct), m), nv_add_scalar(nv_sqrt(v), q->eps));
  } else {
    nv_array *den = nv_add_scalar(nv_multiply(nv_sqrt(v), nv_astype(s->c2, ct)), q->eps);
    step = nv_divide(nv_multiply(nv_astype(s->c1, ct), m), den);
  }
  out[0] = nv_astype(nv_subtract(p, step), dt);
  out[1] = nv_astype(m, dt);
  out[2] = nv_astype(v, dt);
}

static nv_status fused(const cfg *c, nv_array *const *x, const scalars *s, nv_array **out) {
  return nv__adam_update(x[0], x[1], x[2], x[3], s->lr, s->decay, s->c1, s->c2, &c->prm, out);
}

static double *read_f64(nv_array *x) {
  size_t n = (size_t)nv_array_size(x);
  double *v = malloc((n ? n : 1) * sizeof *v);
  nv_array *d = nv_astype(x, NV_DTYPE_FLOAT64);
  cr_assert_eq(nv_array_read(d, v, n * sizeof *v), NV_OK, "%s", nv_last_error());
  nv_release(d);
  return v;
}

static bool on_gpu(void) { return nv_default_device().type == NV_DEVICE_GPU; }

/* Relative spacing of the dtype's values (one unit in the last place at 1). */
static double ulp(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return 0x1p-10;
    case NV_DTYPE_BFLOAT16: return 0x1p-7;
    case NV_DTYPE_FLOAT32: return 0x1p-23;
    default: return 0x1p-52;
  }
}

/* got == want element for element (NaN matching NaN). Both sides do the same correctly rounded
 * operations in the same order, so the CPU agrees bit for bit; on the GPU one unit in the last
 * place is allowed. */
static void expect_same(nv_array *got, nv_array *want, const char *what, const char *ctx) {
  cr_assert_eq(nv_array_size(got), nv_array_size(want));
  cr_assert_eq(nv_array_dtype(got), nv_array_dtype(want));
  double *a = read_f64(got), *b = read_f64(want);
  double tol = on_gpu() ? ulp(nv_array_dtype(got)) : 0;
  for (int64_t i = 0; i < nv_array_size(got); i++) {
    bool ok = (isnan(a[i]) && isnan(b[i])) || a[i] == b[i] ||
              (isfinite(b[i]) && fabs(a[i] - b[i]) <= tol * fabs(b[i]));
    cr_assert(ok, "%s %s at %lld: fused %.17g, composed %.17g", ctx, what, (long long)i, a[i],
              b[i]);
  }
  free(a);
  free(b);
}

/* An array of `shape` with the values `vals` (row-major) in dtype dt. */
static nv_array *make(const double *vals, const int *shape, int nd, nv_dtype dt) {
  nv_array *d = nv_array_from_data(vals, shape, nd, NV_DTYPE_FLOAT64);
  return nv_astype(d, dt);
}

static nv_array *random_array(const int *shape, int nd, nv_dtype dt, bool positive,
                              unsigned *st) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) {
    double r = test_randf(st);
    v[i] = positive ? fabs(r) * 0.5 : r;
  }
  nv_array *a = make(v, shape, nd, dt);
  free(v);
  return a;
}

enum { L_CONTIG, L_STRIDED, L_P_TRANSPOSED, L_OFFSET, L_BROADCAST_STATE };
static const char *const LAYOUTS[] = {"contiguous", "strided", "p transposed", "offset",
                                      "broadcast state"};

/* `a` (evaluated) laid out as `layout` asks for input i, with the same shape and values. */
static nv_array *laid_out(nv_array *a, int layout, int i) {
  int nd = nv_array_ndim(a);
  cr_assert_eq(nv_eval1(a), NV_OK, "%s", nv_last_error());
  switch (layout) {
    case L_STRIDED: return nd >= 1 ? nv_test_strided_view(nv_retain(a), nd >= 2) : a;
    case L_P_TRANSPOSED: return i == 0 && nd >= 2 ? nv_test_strided_view(nv_retain(a), true) : a;
    case L_OFFSET: {
      /* A row-contiguous slice one element into a bigger buffer: misaligned for vectors. */
      if (nd != 1) return a;
      int n = nv_array_dim(a, 0), one = 1, len = n + 1;
      nv_array *z = nv_zeros(&len, 1, nv_array_dtype(a));
      nv_array *big = nv_slice_update(z, a, &one, &len, NULL, 1);
      cr_assert_eq(nv_eval1(big), NV_OK, "%s", nv_last_error());
      return nv_slice(big, &one, &len, NULL, 1);
    }
    case L_BROADCAST_STATE:
      if (i < 2) return a;
      return nv_broadcast_to(nv_array_scalar(i == 2 ? 0.25 : 0.0625, nv_array_dtype(a)),
                             nv_array_shape(a), nd);
    default: return a;
  }
}

/* Three steps of the fused update against the composed one from the same inputs; each step
 * continues from the fused outputs, with a fresh gradient. */
static void run_case(const cfg *c, nv_dtype dt, const int *shape, int nd, int layout,
                     unsigned *st) {
  char ctx[160];
  snprintf(ctx, sizeof ctx, "%s, cfg (decoupled %d, bias %d), ndim %d (first dim %d), %s",
           nv_dtype_name(dt), c->prm.decoupled, c->prm.bias_correction, nd, nd ? shape[0] : 0,
           LAYOUTS[layout]);
  long live = nv__test_live_buffers();
  nv_scope_begin();
  nv_array *x[4];
  for (int i = 0; i < 4; i++)
    x[i] = laid_out(random_array(shape, nd, dt, i == 3, st), layout, i);
  for (int t = 1; t <= 3; t++) {
    scalars s = scalars_at(c, t, dt);
    nv_array *got[3], *want[3];
    cr_assert_eq(fused(c, x, &s, got), NV_OK, "%s: %s", ctx, nv_last_error());
    cr_assert_eq(got[0]->node->prim, NV__PRIM_ADAM_UPDATE);
    composed(c, x, &s, want);
    char step[200];
    snprintf(step, sizeof step, "%s, step %d:", ctx, t);
    expect_same(got[0], want[0], "p'", step);
    expect_same(got[1], want[1], "m'", step);
    expect_same(got[2], want[2], "v'", step);
    x[0] = got[0];
    x[1] = laid_out(random_array(shape, nd, dt, false, st), layout, 1);
    x[2] = got[1];
    x[3] = got[2];
  }
  nv_scope_end();
  cr_assert_eq(nv__test_live_buffers(), live, "%s: buffers left alive", ctx);
}

typedef struct shape_case {
  int nd;
  int shape[3];
} shape_case;

static const shape_case SHAPES[] = {
    {0, {0}},    {1, {0}},      {1, {1}},   {1, {7}},
    {1, {1000}}, {2, {33, 65}}, {2, {0, 3}}, {3, {3, 5, 7}},
};

Test(adam_update, matches_composed_over_dtypes_shapes_configs) {
  unsigned st = test_seed();
  for (size_t d = 0; d < sizeof DTYPES / sizeof *DTYPES; d++)
    for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++)
      for (int c = 0; c < NCFG; c++)
        run_case(&CFGS[c], DTYPES[d], SHAPES[s].shape, SHAPES[s].nd, L_CONTIG, &st);
}

Test(adam_update, matches_composed_over_layouts) {
  unsigned st = test_seed() + 1;
  const shape_case shapes[] = {{1, {7}}, {1, {1001}}, {2, {33, 65}}, {3, {4, 6, 9}}};
  for (size_t d = 0; d < sizeof DTYPES / sizeof *DTYPES; d++)
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int l = L_STRIDED; l <= L_BROADCAST_STATE; l++)
        run_case(&CFGS[(d + s + (size_t)l) % NCFG], DTYPES[d], shapes[s].shape, shapes[s].nd, l,
                 &st);
}

/* Past NV__PAR_GRAIN elements the CPU splits the pass over its pool; the GPU runs many blocks
 * and a vector tail. */
Test(adam_update, matches_composed_large) {
  unsigned st = test_seed() + 2;
  const int shape[2] = {257, 263};
  for (size_t d = 0; d < sizeof DTYPES / sizeof *DTYPES; d++) {
    run_case(&CFGS[3], DTYPES[d], shape, 2, L_CONTIG, &st);
    run_case(&CFGS[1], DTYPES[d], shape, 2, L_STRIDED, &st);
  }
}

/* Zeros, huge, tiny, NaN and infinite gradients and zero second moments propagate as in the
 * composed update (NaN where it gives NaN, infinities where it gives them). */
Test(adam_update, edge_values_propagate_as_composed) {
  for (size_t d = 0; d < sizeof DTYPES / sizeof *DTYPES; d++) {
    nv_dtype dt = DTYPES[d];
    double big = dt == NV_DTYPE_FLOAT16 ? 6e4 : dt == NV_DTYPE_FLOAT64 ? 1e300 : 3e38;
    const double g[] = {0, 0, big, -big, NAN, INFINITY, -INFINITY, 1e-30, 1, -0.0, 0.5, big};
    const double m[] = {0, 0.5, 0, 0.1, 0.1, 0, 0.2, 0, NAN, 0, INFINITY, big};
    const double v[] = {0, 0, 0, 0.3, 0.3, 0, 0.1, 0, 0.2, INFINITY, 0.1, big};
    const double p[] = {1, -2, 0.5, 3, 1, -1, 2, 0, 1, 4, 1, -big};
    int n = (int)(sizeof g / sizeof *g);
    for (int c = 0; c < NCFG; c++) {
      nv_scope_begin();
      nv_array *x[4] = {make(p, &n, 1, dt), make(g, &n, 1, dt), make(m, &n, 1, dt),
                        make(v, &n, 1, dt)};
      scalars s = scalars_at(&CFGS[c], 1, dt);
      nv_array *got[3], *want[3];
      cr_assert_eq(fused(&CFGS[c], x, &s, got), NV_OK, "%s", nv_last_error());
      composed(&CFGS[c], x, &s, want);
      char ctx[64];
      snprintf(ctx, sizeof ctx, "%s, cfg %d:", nv_dtype_name(dt), c);
      const char *names[3] = {"p'", "m'", "v'"};
      for (int i = 0; i < 3; i++) expect_same(got[i], want[i], names[i], ctx);
      /* Zero everything: the parameter only decays. */
      double out[12];
      nv_array *p64 = nv_astype(got[0], NV_DTYPE_FLOAT64);
      cr_assert_eq(nv_array_read(p64, out, sizeof out), NV_OK);
      double dec = CFGS[c].prm.decoupled ? 1 - CFGS[c].lr * CFGS[c].wd : 1;
      cr_assert(fabs(out[0] - dec) <= 4 * ulp(dt), "%s: %g", ctx, out[0]);
      cr_assert(isnan(out[4]) && isnan(out[5]), "%s: NaN and inf gradients give NaN", ctx);
      nv_scope_end();
    }
  }
}

/* float16 in float32: eps = 1e-8 survives (the composed float16 chain rounds it to 0), so a
 * zero gradient with zero moments leaves the parameter as it is rather than 0/0 = NaN. */
Test(adam_update, float16_keeps_a_small_eps) {
  nv_scope_begin();
  int n = 1;
  double z = 0, one = 1;
  nv_array *x[4] = {make(&one, &n, 1, NV_DTYPE_FLOAT16), make(&z, &n, 1, NV_DTYPE_FLOAT16),
                    make(&z, &n, 1, NV_DTYPE_FLOAT16), make(&z, &n, 1, NV_DTYPE_FLOAT16)};
  scalars s = scalars_at(&CFGS[0], 1, NV_DTYPE_FLOAT16);
  nv_array *got[3];
  cr_assert_eq(fused(&CFGS[0], x, &s, got), NV_OK, "%s", nv_last_error());
  float v = 0;
  cr_assert_eq(nv_array_item_float(got[0], &v), NV_OK, "%s", nv_last_error());
  cr_assert_eq(v, 1.0f);
  nv_scope_end();
}

/* ---- Errors ---- */

static void expect_failed(nv_status st, nv_array **out, const char *needle) {
  cr_assert_eq(st, NV_ERR_INVALID_ARGUMENT, "status %d: %s", (int)st, nv_last_error());
  for (int i = 0; i < 3; i++) {
    cr_assert_neq(nv_array_status(out[i]), NV_OK);
    cr_assert_eq(nv_eval1(out[i]), NV_ERR_INVALID_ARGUMENT);
  }
  cr_assert(strstr(nv_last_error(), "adam_update") && strstr(nv_last_error(), needle), "%s",
            nv_last_error());
}

Test(adam_update, bad_arguments_fail_naming_it) {
  nv_scope_begin();
  int shape[1] = {4}, other[1] = {5};
  unsigned st = test_seed();
  nv_array *f32 = random_array(shape, 1, NV_DTYPE_FLOAT32, false, &st);
  nv_array *f16 = nv_astype(f32, NV_DTYPE_FLOAT16);
  nv_array *wide = random_array(other, 1, NV_DTYPE_FLOAT32, false, &st);
  nv_array *ints = nv_astype(f32, NV_DTYPE_INT32);
  scalars s = scalars_at(&CFGS[3], 1, NV_DTYPE_FLOAT32);
  const nv__adam_params *q = &CFGS[3].prm;
  nv_array *out[3];
  expect_failed(nv__adam_update(f32, f16, f32, f32, s.lr, s.decay, s.c1, s.c2, q, out),
                out, "dtype");
  expect_failed(nv__adam_update(f32, f32, wide, f32, s.lr, s.decay, s.c1, s.c2, q, out),
                out, "shape");
  expect_failed(nv__adam_update(ints, ints, ints, ints, s.lr, s.decay, s.c1, s.c2, q, out),
                out, "int32");
  expect_failed(nv__adam_update(f32, f32, f32, f32, s.lr, f32, s.c1, s.c2, q, out), out,
                "0-d");
  expect_failed(nv__adam_update(f32, f32, f32, f32, s.lr, s.decay, s.c1, NULL, q, out), out,
                "NULL");
  /* The scalars a configuration does not use may be NULL. */
  cr_assert_eq(nv__adam_update(f32, f32, f32, f32, s.lr, NULL, NULL, NULL, &CFGS[0].prm, out),
               NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_eval(out, 3), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv__adam_update(f32, f32, f32, f32, NULL, s.decay, s.c1, s.c2, q, NULL),
               NV_ERR_INVALID_ARGUMENT);
  nv_scope_end();
}

/* A failed input fails the three outputs with its error, at once and at evaluation. */
Test(adam_update, failed_input_fails_every_output) {
  nv_scope_begin();
  int shape[1] = {4}, bad[1] = {3};
  unsigned st = test_seed();
  nv_array *x = random_array(shape, 1, NV_DTYPE_FLOAT32, false, &st);
  nv_array *broken = nv_reshape(x, bad, 1);
  nv__error *err = nv__node_known_error(broken->node);
  cr_assert(err);
  nv_array *g = nv__array_failed(err, NV_DTYPE_FLOAT32, shape, 1);
  scalars s = scalars_at(&CFGS[0], 1, NV_DTYPE_FLOAT32);
  nv_array *out[3];
  nv_status rc = nv__adam_update(x, g, x, x, s.lr, NULL, NULL, NULL, &CFGS[0].prm, out);
  cr_assert_eq(rc, nv_array_status(broken));
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(nv_eval1(out[i]), rc);
    cr_assert_eq(nv_array_ndim(out[i]), 1, "the outputs keep their metadata");
  }
  nv_scope_end();
}

/* ---- Transforms ---- */

/* f(p, g, m, v, s1) = adam_update's three outputs (AdamW without bias correction: s1 is lr and
 * the decay a constant). */
static nv_status adam_call(void *payload, const nv_vec *in, nv_vec *out) {
  const cfg *c = payload;
  nv_array *decay = nv_array_scalar(1 - c->lr * c->wd, nv_array_dtype(nv_vec_get(in, 0)));
  nv_array *r[3];
  nv_status st = nv__adam_update(nv_vec_get(in, 0), nv_vec_get(in, 1), nv_vec_get(in, 2),
                                 nv_vec_get(in, 3), nv_vec_get(in, 4), decay, NULL, NULL, &c->prm,
                                 r);
  for (int i = 0; st == NV_OK && i < 3; i++) st = nv_vec_push(out, r[i]);
  return st;
}

static nv_status adam_sum_call(void *payload, const nv_vec *in, nv_vec *out) {
  nv_vec *r = nv_vec_new();
  nv_status st = adam_call(payload, in, r);
  if (st == NV_OK) st = nv_vec_push(out, nv_sum(nv_vec_get(r, 0), NULL, 0, false));
  nv_vec_free(r);
  return st;
}

static nv_vec *adam_inputs(int batch, int n, unsigned *st) {
  nv_vec *in = nv_vec_new();
  int shape[2] = {batch, n};
  for (int i = 0; i < 4; i++)
    nv_vec_push(in, random_array(shape, 2, NV_DTYPE_FLOAT64, i == 3, st));
  nv_vec_push(in, nv_array_scalar(0.05, NV_DTYPE_FLOAT64));
  return in;
}

Test(adam_update, grad_and_jvp_fail_naming_it) {
  nv_scope_begin();
  unsigned st = test_seed();
  nv_vec *in = adam_inputs(2, 3, &st);
  nv_closure *f = nv_closure_new(adam_sum_call, (void *)&CFGS[2], NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_vec *out = nv_vec_new();
  cr_assert_eq(nv_closure_apply(g, in, out), NV_ERR_UNSUPPORTED);
  cr_assert(strstr(nv_last_error(), "adam_update") && strstr(nv_last_error(), "differentiable"),
            "%s", nv_last_error());
  cr_assert_eq(nv_vec_size(out), 0);
  nv_vec *tan = nv_vec_new();
  for (size_t i = 0; i < nv_vec_size(in); i++)
    nv_vec_push(tan, nv_ones_like(nv_vec_get(in, i)));
  cr_assert_eq(nv_jvp(f, in, tan, NULL, out), NV_ERR_UNSUPPORTED);
  cr_assert(strstr(nv_last_error(), "jvp") && strstr(nv_last_error(), "adam_update"), "%s",
            nv_last_error());
  /* The gradient checker reports the same failure rather than a gradient. */
  gc_seed(st);
  char why[512];
  cr_assert(!nv_gradcheck(f, in, 1e-6, 1e-6, why, sizeof why));
  cr_assert(strstr(why, "adam_update"), "%s", why);
  nv_vec_free(tan);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_vec_free(in);
  nv_scope_end();
}

/* Inputs for in_axes `axes` (batch 3 of arrays of shape (5)): a batched array has the batch
 * at its axis, an unbatched one is (5), the scalar is 0-d. */
static nv_vec *vmap_inputs(const int *axes, unsigned *st) {
  nv_vec *in = nv_vec_new();
  for (int i = 0; i < 4; i++) {
    int a = axes[i], shape[2] = {3, 5};
    if (a == 1 || a == -1) {
      shape[0] = 5;
      shape[1] = 3;
    }
    nv_array *x = a == NV_VMAP_NONE ? random_array(shape + 1, 1, NV_DTYPE_FLOAT64, i == 3, st)
                                    : random_array(shape, 2, NV_DTYPE_FLOAT64, i == 3, st);
    nv_vec_push(in, x);
  }
  nv_vec_push(in, nv_array_scalar(0.05, NV_DTYPE_FLOAT64));
  return in;
}

Test(adam_update, vmap_is_element_wise) {
  nv_scope_begin();
  unsigned st = test_seed();
  nv_closure *f = nv_closure_new(adam_call, (void *)&CFGS[2], NULL);
  const int N = NV_VMAP_NONE;
  const int axes[][5] = {{0, 0, 0, 0, N}, {1, 1, 1, 1, N}, {0, N, N, N, N}, {N, 1, N, 0, N},
                         {-1, 0, N, -2, N}};
  char why[512];
  for (size_t k = 0; k < sizeof axes / sizeof *axes; k++) {
    nv_vec *vin = vmap_inputs(axes[k], &st);
    cr_assert(nv_vmapcheck(f, vin, axes[k], 0, why, sizeof why), "in_axes %zu: %s", k, why);
    nv_vec_free(vin);
  }
  nv_vec *in = adam_inputs(3, 5, &st);
  /* A batched scalar is not supported: the primitive takes 0-d ones. */
  nv_vec *in2 = nv_vec_new();
  for (int i = 0; i < 4; i++) nv_vec_push(in2, nv_vec_get(in, (size_t)i));
  int three = 3;
  nv_vec_push(in2, nv_full(&three, 1, 0.05, NV_DTYPE_FLOAT64));
  nv_closure *v = nv_vmap(f, (const int[]){0, 0, 0, 0, 0}, 5, NULL, 0);
  nv_vec *out = nv_vec_new();
  cr_assert_eq(nv_closure_apply(v, in2, out), NV_ERR_UNSUPPORTED);
  cr_assert(strstr(nv_last_error(), "adam_update"), "%s", nv_last_error());
  nv_vec_free(out);
  nv_vec_free(in2);
  nv_closure_release(v);
  nv_closure_release(f);
  nv_vec_free(in);
  nv_scope_end();
}

/* ---- The optimizer ---- */

static nv_map *one_param(const char *key, nv_array *x) {
  nv_map *m = nv_map_new();
  cr_assert_eq(nv_map_set(m, key, x), NV_OK);
  return m;
}

/* Adam and AdamW build one adam_update node per parameter when p, g and the state share a
 * dtype; the state's m and v are its other outputs, and the values are the primitive's. */
Test(adam_update, optimizer_uses_it) {
  unsigned st = test_seed();
  for (int kind = 0; kind < 3; kind++) {
    nv_scope_begin();
    nv_adam_options o = kind == 0 ? nv_adam_defaults(0.05) : nv_adamw_defaults(0.05);
    o.bias_correction = kind == 2;
    nv_optimizer *opt = NULL;
    cr_assert_eq((kind ? nv_optimizer_adamw : nv_optimizer_adam)(&o, &opt), NV_OK, "%s",
                 nv_last_error());
    int shape[2] = {6, 5};
    nv_array *p = random_array(shape, 2, NV_DTYPE_FLOAT32, false, &st);
    nv_map *params = one_param("w", p);
    for (int t = 1; t <= 3; t++) {
      nv_array *g = random_array(shape, 2, NV_DTYPE_FLOAT32, false, &st);
      nv_map *grads = one_param("w", g), *next = NULL;
      const nv_map *state = nv_optimizer_state(opt);
      nv_array *m0 = nv_map_get(state, "w.m"), *v0 = nv_map_get(state, "w.v");
      /* Held: the update replaces the state map that holds m and v. */
      nv_array *x[4] = {nv_retain(nv_map_get(params, "w")), nv_retain(g),
                        nv_retain(m0 ? m0 : nv_zeros_like(g)),
                        nv_retain(v0 ? v0 : nv_zeros_like(g))};
      cr_assert_eq(nv_optimizer_update(opt, params, grads, &next), NV_OK, "%s", nv_last_error());
      nv_array *pn = nv_map_get(next, "w");
      state = nv_optimizer_state(opt);
      cr_assert_eq(pn->node->prim, NV__PRIM_ADAM_UPDATE);
      cr_assert_eq(nv_map_get(state, "w.m")->node, pn->node);
      cr_assert_eq(nv_map_get(state, "w.v")->node, pn->node);
      cfg c = {{o.beta1, o.beta2, o.eps, kind > 0, o.bias_correction}, 0.05, o.weight_decay};
      /* The optimizer's learning rate is a float32 0.05. */
      c.lr = (float)0.05;
      scalars s = scalars_at(&c, t, NV_DTYPE_FLOAT32);
      nv_array *want[3];
      composed(&c, x, &s, want);
      const nv_map *maps[2] = {next, state};
      cr_assert_eq(nv_params_eval(maps, 2), NV_OK, "%s", nv_last_error());
      /* The optimizer's bias corrections go through float32 pow and rsqrt. */
      double *a = read_f64(pn), *b = read_f64(want[0]);
      for (int i = 0; i < 30; i++)
        cr_assert(fabs(a[i] - b[i]) <= 1e-6 * (1 + fabs(b[i])), "kind %d step %d at %d: %g %g",
                  kind, t, i, a[i], b[i]);
      free(a);
      free(b);
      for (int i = 0; i < 4; i++) nv_release(x[i]);
      nv_map_free(grads);
      nv_map_free(params);
      params = next;
    }
    nv_map_free(params);
    nv_optimizer_free(opt);
    nv_scope_end();
  }
}

/* A parameter whose dtype differs from its gradient's keeps the composed update (MLX's
 * promotions). */
Test(adam_update, optimizer_mixed_dtypes_compose) {
  nv_scope_begin();
  unsigned st = test_seed();
  nv_adam_options o = nv_adamw_defaults(0.05);
  nv_optimizer *opt = NULL;
  cr_assert_eq(nv_optimizer_adamw(&o, &opt), NV_OK, "%s", nv_last_error());
  int shape[1] = {9};
  nv_array *p = random_array(shape, 1, NV_DTYPE_FLOAT32, false, &st);
  nv_array *g = random_array(shape, 1, NV_DTYPE_FLOAT16, false, &st);
  nv_map *params = one_param("w", p), *grads = one_param("w", g), *next = NULL;
  cr_assert_eq(nv_optimizer_update(opt, params, grads, &next), NV_OK, "%s", nv_last_error());
  nv_array *pn = nv_map_get(next, "w");
  cr_assert_neq(pn->node->prim, NV__PRIM_ADAM_UPDATE);
  cr_assert_eq(nv_array_dtype(pn), NV_DTYPE_FLOAT32);
  cr_assert_eq(nv_eval1(pn), NV_OK, "%s", nv_last_error());
  nv_map_free(next);
  nv_map_free(grads);
  nv_map_free(params);
  nv_optimizer_free(opt);
  nv_scope_end();
}

/* Donation by pairs (src/core/eval.c): with the caller's handles on p, m and v dropped, the
 * update writes p', m' and v' into their buffers, with the values of the update that kept
 * them; with p held, only m and v are written in place (the partial path of the kernels). Over
 * every dtype, a size that fits one vector loop and one the CPU splits over its pool. */
static void donated_case(nv_dtype dt, int n, bool hold_p, const cfg *c, unsigned *st) {
  char ctx[96];
  snprintf(ctx, sizeof ctx, "%s, %d elements, p %s", nv_dtype_name(dt), n,
           hold_p ? "held" : "dropped");
  nv_array *x[4];
  for (int i = 0; i < 4; i++) {
    nv_scope_begin(); /* make's temporaries (an astype to the same dtype is its input) */
    x[i] = nv_scope_keep(random_array(&n, 1, dt, i == 3, st));
    nv_scope_end();
    cr_assert_eq(nv_eval1(x[i]), NV_OK, "%s", nv_last_error());
  }
  scalars s = scalars_at(c, 2, dt);
  /* The expected values from the same inputs, read before any handle goes. */
  nv_array *want[3];
  double *ref[3];
  nv_scope_begin(); /* composed's temporaries (an astype to the same dtype is x itself) */
  composed(c, x, &s, want);
  for (int k = 0; k < 3; k++) ref[k] = read_f64(want[k]);
  nv_scope_end();
  const void *ptr[4];
  for (int i = 0; i < 4; i++) ptr[i] = on_gpu() ? NULL : nv_array_data(x[i]);
  nv_array *got[3];
  cr_assert_eq(fused(c, x, &s, got), NV_OK, "%s: %s", ctx, nv_last_error());
  for (int i = 0; i < 4; i++)
    if (i != 1 && !(i == 0 && hold_p)) nv_release(x[i]);
  long d0 = nv__test_donations();
  cr_assert_eq(nv_eval(got, 3), NV_OK, "%s: %s", ctx, nv_last_error());
  long want_d = hold_p ? 2 : 3;
  cr_assert_eq(nv__test_donations() - d0, want_d, "%s: %ld outputs took an input's buffer", ctx,
               nv__test_donations() - d0);
  static const int from[3] = {0, 2, 3};
  for (int k = 0; k < 3; k++) {
    if (!on_gpu() && !(k == 0 && hold_p))
      cr_assert_eq(nv_array_data(got[k]), ptr[from[k]], "%s: output %d in place", ctx, k);
    double *a = read_f64(got[k]);
    for (int i = 0; i < n; i++) {
      double tol = on_gpu() ? ulp(dt) : 0;
      bool ok = (isnan(a[i]) && isnan(ref[k][i])) || a[i] == ref[k][i] ||
                fabs(a[i] - ref[k][i]) <= tol * fabs(ref[k][i]);
      cr_assert(ok, "%s: output %d at %d: in place %.17g, expected %.17g", ctx, k, i, a[i],
                ref[k][i]);
    }
    free(a);
    free(ref[k]);
    nv_release(got[k]);
  }
  if (hold_p) {
    /* The held p keeps its values. */
    double *pv = read_f64(x[0]);
    cr_assert(isfinite(pv[0]), "%s: held p readable", ctx);
    free(pv);
    nv_release(x[0]);
  }
  nv_release(x[1]);
  nv_release(s.lr), nv_release(s.decay), nv_release(s.c1), nv_release(s.c2);
}

Test(adam_update, dropped_state_is_updated_in_place) {
  unsigned st = 1234;
  static const int sizes[] = {1000, 300001};
  for (size_t d = 0; d < sizeof DTYPES / sizeof *DTYPES; d++)
    for (int k = 0; k < 2; k++)
      for (int hold = 0; hold < 2; hold++) donated_case(DTYPES[d], sizes[k], hold, &CFGS[3], &st);
}

/* Steps chained as an optimizer chains them: each update's three outputs (one node) feed the
 * next update with every handle dropped, so each step after the first writes in place. */
Test(adam_update, chained_steps_update_in_place) {
  unsigned st = 99;
  int n = 4099;
  const cfg *c = &CFGS[3];
  for (size_t d = 0; d < sizeof DTYPES / sizeof *DTYPES; d++) {
    nv_dtype dt = DTYPES[d];
    nv_array *x[4];
    for (int i = 0; i < 4; i++) {
      nv_scope_begin();
      x[i] = nv_scope_keep(random_array(&n, 1, dt, i == 3, &st));
      nv_scope_end();
      cr_assert_eq(nv_eval1(x[i]), NV_OK, "%s", nv_last_error());
    }
    for (int t = 1; t <= 3; t++) {
      scalars s = scalars_at(c, t, dt);
      nv_array *want[3], *got[3];
      double *ref[3];
      nv_scope_begin();
      composed(c, x, &s, want);
      for (int k = 0; k < 3; k++) ref[k] = read_f64(want[k]);
      nv_scope_end();
      cr_assert_eq(fused(c, x, &s, got), NV_OK, "%s", nv_last_error());
      for (int i = 0; i < 4; i++) nv_release(x[i]);
      long d0 = nv__test_donations();
      cr_assert_eq(nv_eval(got, 3), NV_OK, "%s", nv_last_error());
      cr_assert_eq(nv__test_donations() - d0, 3, "%s step %d: %ld donated", nv_dtype_name(dt), t,
                   nv__test_donations() - d0);
      for (int k = 0; k < 3; k++) {
        double *a = read_f64(got[k]);
        double tol = on_gpu() ? ulp(dt) : 0;
        for (int i = 0; i < n; i++)
          cr_assert((isnan(a[i]) && isnan(ref[k][i])) || a[i] == ref[k][i] ||
                        fabs(a[i] - ref[k][i]) <= tol * fabs(ref[k][i]),
                    "%s step %d output %d at %d: %.17g, expected %.17g", nv_dtype_name(dt), t, k,
                    i, a[i], ref[k][i]);
        free(a);
        free(ref[k]);
      }
      nv_release(s.lr), nv_release(s.decay), nv_release(s.c1), nv_release(s.c2);
      x[0] = got[0];
      x[2] = got[1];
      x[3] = got[2];
      nv_scope_begin();
      x[1] = nv_scope_keep(random_array(&n, 1, dt, false, &st));
      nv_scope_end();
      cr_assert_eq(nv_eval1(x[1]), NV_OK, "%s", nv_last_error());
    }
    for (int i = 0; i < 4; i++) nv_release(x[i]);
  }
}
