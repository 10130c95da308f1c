/* Transforms of the random family: vmap over a batch of keys equals a loop over the keys (bits
 * of every width, split, uniform, gumbel, permutation, categorical), nested over a grid of
 * keys, with keys unmapped beside mapped parameters; and random values carry no gradient. */
#include <criterion/criterion.h>

#include "gradcheck.h"
#include "testutil.h"

typedef enum { R_BITS4, R_BITS2, R_BITS1, R_SPLIT, R_UNIT, R_UNIFORM, R_GUMBEL, R_PERM, R_CAT } rkind;

static nv_array *draw(rkind k, const nv_array *key, const nv_array *logits) {
  int shape[2] = {3, 5};
  switch (k) {
    case R_BITS4: return nv_random_bits(shape, 2, 4, key);
    case R_BITS2: return nv_random_bits(shape, 2, 2, key);
    /* An odd byte count per key: the key's last word is cut. */
    case R_BITS1: return nv_random_bits((int[]){7}, 1, 1, key);
    case R_SPLIT: return nv_random_split(key, 3);
    case R_UNIT: return nv_random_uniform_scalar(0, 1, shape, 2, NV_DTYPE_FLOAT32, key);
    case R_UNIFORM: return nv_random_uniform_scalar(-2, 3, shape, 2, NV_DTYPE_BFLOAT16, key);
    case R_GUMBEL: return nv_random_gumbel(shape, 2, NV_DTYPE_FLOAT16, key);
    case R_PERM: return nv_random_permutation_n(9, key);
    default: return nv_random_categorical(logits, -1, NULL, 0, key);
  }
}

static nv_status draw_call(void *payload, const nv_vec *in, nv_vec *out) {
  const nv_array *logits = nv_vec_size(in) > 1 ? nv_vec_get(in, 1) : NULL;
  return nv_vec_push(out, draw((rkind)(intptr_t)payload, nv_vec_get(in, 0), logits));
}

/* `n` keys split from a seeded key, as a (n, 2) uint32 array. */
static nv_array *keys(uint64_t seed, int n) {
  nv_array *k = nv_random_key(seed);
  nv_array *r = nv_random_split(k, n);
  nv_array *c = nv_copy(r);
  nv_release(k);
  nv_release(r);
  return c;
}

Test(transforms_random, vmap_over_keys_equals_a_loop_over_keys) {
  unsigned seed = test_seed();
  char why[512];
  nv_array *k = keys(seed, 4);
  nv_array *kt = nv_transpose(k, NULL, 0); /* (2, 4): the batch on axis 1, a strided view */
  int lshape[2] = {2, 6};
  unsigned st = seed;
  double lv[12];
  for (int i = 0; i < 12; i++) lv[i] = test_randf(&st) * 3;
  nv_array *logits = nv_array_from_data(lv, lshape, 2, NV_DTYPE_FLOAT64);
  for (int kind = R_BITS4; kind <= R_CAT; kind++) {
    nv_closure *f = nv_closure_new(draw_call, (void *)(intptr_t)kind, NULL);
    const struct {
      nv_array *key;
      int ax;
    } cfg[3] = {{k, 0}, {kt, 1}, {kt, -1}};
    for (int c = 0; c < 3; c++) {
      nv_vec *in = nv_vec_new();
      nv_vec_push(in, cfg[c].key);
      int axes[2] = {cfg[c].ax, NV_VMAP_NONE};
      if (kind == R_CAT) nv_vec_push(in, logits);
      cr_assert(nv_vmapcheck(f, in, axes, 0, why, sizeof why), "kind %d, in_axes %d: %s", kind,
                cfg[c].ax, why);
      nv_vec_free(in);
    }
    nv_closure_release(f);
  }
  nv_release(logits);
  nv_release(k);
  nv_release(kt);
}

/* The keys of a batch draw different values (the map did not reuse one key). */
Test(transforms_random, batched_keys_draw_independent_streams) {
  nv_array *k = keys(test_seed() + 1, 3);
  nv_closure *f = nv_closure_new(draw_call, (void *)(intptr_t)R_BITS4, NULL);
  nv_closure *v = nv_vmap(f, NULL, 0, NULL, 0);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, k);
  cr_assert_eq(nv_closure_apply(v, in, out), NV_OK, "%s", nv_last_error());
  nv_array *b = nv_vec_get(out, 0);
  cr_assert(nv_array_ndim(b) == 3 && nv_array_dim(b, 0) == 3 && nv_array_dim(b, 1) == 3 &&
            nv_array_dim(b, 2) == 5);
  uint32_t bits[45];
  cr_assert_eq(nv_array_read(b, bits, sizeof bits), NV_OK, "%s", nv_last_error());
  int same = 0;
  for (int i = 0; i < 15; i++) same += bits[i] == bits[15 + i] || bits[i] == bits[30 + i];
  cr_assert_lt(same, 3, "the keys' streams should differ");
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(v);
  nv_closure_release(f);
  nv_release(k);
}

/* vmap of vmap: a (2, 3) grid of keys, each drawing its own stream. */
Test(transforms_random, nested_vmap_over_a_grid_of_keys) {
  char why[512];
  nv_array *flat = keys(test_seed() + 2, 6);
  int shape[3] = {2, 3, 2};
  nv_array *grid = nv_reshape(flat, shape, 3);
  for (int kind = R_BITS4; kind <= R_UNIT; kind++) {
    nv_closure *f = nv_closure_new(draw_call, (void *)(intptr_t)kind, NULL);
    int zero = 0;
    nv_closure *inner = nv_vmap(f, &zero, 1, NULL, 0);
    nv_vec *in = nv_vec_new();
    nv_vec_push(in, grid);
    cr_assert(nv_vmapcheck(inner, in, &zero, 0, why, sizeof why), "kind %d: %s", kind, why);
    nv_vec_free(in);
    nv_closure_release(inner);
    nv_closure_release(f);
  }
  nv_release(grid);
  nv_release(flat);
}

/* uniform(low, high) with the key not mapped and the bounds mapped: one draw shared by the
 * batch, shifted and scaled per example; and with both mapped. */
static nv_status uniform_between(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  int shape[2] = {2, 3};
  nv_array *lo = nv_vec_get(in, 1);
  nv_array *hi = nv_add_scalar(lo, 2.0);
  return nv_vec_push(out, nv_random_uniform(lo, hi, shape, 2, NV_DTYPE_FLOAT32, nv_vec_get(in, 0)));
}

Test(transforms_random, unmapped_key_with_mapped_parameters) {
  char why[512];
  unsigned st = test_seed() + 3;
  nv_array *k = keys(test_seed() + 3, 4);
  int ls[2] = {4, 3};
  float lv[12];
  for (int i = 0; i < 12; i++) lv[i] = test_randf(&st);
  nv_array *lo = nv_array_from_data(lv, ls, 2, NV_DTYPE_FLOAT32);
  nv_closure *f = nv_closure_new(uniform_between, NULL, NULL);
  int start[2] = {0, 0}, stop[2] = {1, 2};
  nv_array *k0s = nv_slice(k, start, stop, NULL, 2);
  int two = 2;
  nv_array *k0 = nv_reshape(k0s, &two, 1);
  nv_vec *in = nv_vec_new();
  nv_vec_push(in, k0);
  nv_vec_push(in, lo);
  cr_assert(nv_vmapcheck(f, in, (int[]){NV_VMAP_NONE, 0}, 0, why, sizeof why), "%s", why);
  nv_vec_clear(in);
  nv_vec_push(in, k);
  nv_vec_push(in, lo);
  cr_assert(nv_vmapcheck(f, in, (int[]){0, 0}, 0, why, sizeof why), "%s", why);
  nv_vec_free(in);
  nv_closure_release(f);
  nv_release(k0s);
  nv_release(k0);
  nv_release(lo);
  nv_release(k);
}

/* f(x, key) = Σ x · uniform(key): the gradient in x is the sample itself; the key (uint32)
 * gets a zero gradient, and a jvp along x is Σ t · sample. */
static nv_status scaled_noise(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  int shape[1] = {4};
  nv_array *u = nv_random_uniform_scalar(0, 1, shape, 1, NV_DTYPE_FLOAT32, nv_vec_get(in, 1));
  nv_array *u64 = nv_astype(u, NV_DTYPE_FLOAT64);
  return nv_vec_push(out, nv_sum(nv_multiply(nv_vec_get(in, 0), u64), NULL, 0, false));
}

Test(transforms_random, random_values_carry_no_gradient) {
  double xv[4] = {0.5, -1, 2, 3};
  nv_array *x = nv_array_from_data(xv, (int[]){4}, 1, NV_DTYPE_FLOAT64);
  nv_array *key = nv_random_key(test_seed() + 4);
  nv_closure *f = nv_closure_new(scaled_noise, NULL, NULL);
  nv_closure *g = nv_grad(f, (int[]){0, 1}, 2);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, x);
  nv_vec_push(in, key);
  cr_assert_eq(nv_closure_apply(g, in, out), NV_OK, "%s", nv_last_error());
  nv_array *u = nv_random_uniform_scalar(0, 1, (int[]){4}, 1, NV_DTYPE_FLOAT32, key);
  float uv[4];
  double gx[4];
  uint32_t gk[2];
  cr_assert_eq(nv_array_read(u, uv, sizeof uv), NV_OK);
  cr_assert_eq(nv_array_read(nv_vec_get(out, 0), gx, sizeof gx), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_array_dtype(nv_vec_get(out, 1)), NV_DTYPE_UINT32);
  cr_assert_eq(nv_array_read(nv_vec_get(out, 1), gk, sizeof gk), NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 4; i++) cr_assert_eq(gx[i], (double)uv[i], "d/dx[%d]", i);
  cr_assert(gk[0] == 0 && gk[1] == 0, "the key gets no gradient");
  /* jvp: tangents on x and on the key (the key's tangent changes nothing). */
  nv_vec *t = nv_vec_new(), *jv = nv_vec_new();
  double tv[4] = {1, 2, -1, 0.5};
  nv_array *tx = nv_array_from_data(tv, (int[]){4}, 1, NV_DTYPE_FLOAT64);
  nv_array *tk = nv_ones_like(key);
  nv_vec_push(t, tx);
  nv_vec_push(t, tk);
  cr_assert_eq(nv_jvp(f, in, t, NULL, jv), NV_OK, "%s", nv_last_error());
  double j, want = 0;
  for (int i = 0; i < 4; i++) want += tv[i] * uv[i];
  cr_assert_eq(nv_array_item_double(nv_vec_get(jv, 0), &j), NV_OK, "%s", nv_last_error());
  cr_assert_float_eq(j, want, 1e-12);
  nv_vec_free(t);
  nv_vec_free(jv);
  nv_release(tx);
  nv_release(tk);
  nv_release(u);
  nv_vec_free(in);
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  nv_release(key);
  nv_release(x);
}

/* A model with noise drawn from a fixed key (the payload): x · u + exp(x) · g, for u uniform
 * and g Gumbel samples. Its gradient treats the samples as constants. */
static nv_status noisy_model(void *payload, const nv_vec *in, nv_vec *out) {
  int shape[2] = {2, 3};
  nv_array *x = nv_vec_get(in, 0);
  nv_array *u = nv_astype(nv_random_uniform_scalar(-1, 1, shape, 2, NV_DTYPE_FLOAT32, payload),
                          NV_DTYPE_FLOAT64);
  nv_array *g = nv_astype(nv_random_gumbel(shape, 2, NV_DTYPE_FLOAT32, payload), NV_DTYPE_FLOAT64);
  return nv_vec_push(out, nv_add(nv_multiply(x, u), nv_multiply(nv_exp(x), g)));
}

Test(transforms_random, gradients_through_noise_match_finite_differences) {
  unsigned st = test_seed() + 5;
  gc_seed(st);
  char why[512];
  nv_array *key = nv_random_key(st);
  double xv[6];
  for (int i = 0; i < 6; i++) xv[i] = test_randf(&st);
  nv_array *x = nv_array_from_data(xv, (int[]){2, 3}, 2, NV_DTYPE_FLOAT64);
  nv_closure *f = nv_closure_new(noisy_model, key, NULL);
  nv_vec *p = nv_vec_new();
  nv_vec_push(p, x);
  cr_assert(nv_gradcheck(f, p, 1e-6, 1e-6, why, sizeof why), "%s", why);
  nv_vec_free(p);
  nv_closure_release(f);
  nv_release(x);
  nv_release(key);
}
