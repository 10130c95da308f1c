/* The random family from C: the global key sequence under concurrent use, batched keys in the
 * random_bits kernel, scopes, and allocation failures (clean errors, no leaks). */
#include <criterion/criterion.h>
#include <pthread.h>

#include "ops/ops_internal.h"
#include "ops/random_params.h"
#include "testutil.h"

/* Draws one random uint32 with the global sequence (key NULL) and returns it. */
static uint32_t draw(void) {
  int one = 1;
  nv_array *b = nv_random_bits(&one, 1, 4, NULL);
  uint32_t v = 0;
  cr_assert_eq(nv_array_read(b, &v, sizeof v), NV_OK, "%s", nv_last_error());
  nv_release(b);
  return v;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

#define THREADS 4
#define PER_THREAD 100

static void *drawer(void *arg) {
  uint32_t *out = arg;
  for (int i = 0; i < PER_THREAD; i++) out[i] = draw();
  return NULL;
}

Test(random, global_sequence_hands_each_key_out_once_across_threads) {
  /* Threads racing on the sequence get exactly the keys one thread would get, in some order. */
  uint32_t seq[THREADS * PER_THREAD], par[THREADS * PER_THREAD];
  nv_random_seed(77);
  for (int i = 0; i < THREADS * PER_THREAD; i++) seq[i] = draw();
  nv_random_seed(77);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, drawer, par + i * PER_THREAD), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  qsort(seq, THREADS * PER_THREAD, sizeof *seq, cmp_u32);
  qsort(par, THREADS * PER_THREAD, sizeof *par, cmp_u32);
  for (int i = 0; i < THREADS * PER_THREAD; i++) cr_assert_eq(seq[i], par[i], "at %d", i);
  for (int i = 1; i < THREADS * PER_THREAD; i++) cr_assert_neq(seq[i], seq[i - 1]);
}

Test(random, batched_keys_fill_their_own_rows) {
  /* The kernel takes keys of shape (K..., 2) (vmap over keys): row k holds key k's bits. */
  uint32_t kv[6] = {1, 2, 30, 40, 0xffffffffu, 7};
  int ks[2] = {3, 2};
  nv_array *keys = nv_array_from_data(kv, ks, 2, NV_DTYPE_UINT32);
  int shape[2] = {3, 5};
  nv__node *n = nv__op_node(NV__PRIM_RANDOM_BITS, &keys, 1, NV_DTYPE_UINT16, shape, 2,
                            sizeof(nv__random_bits_params));
  cr_assert_not_null(n);
  ((nv__random_bits_params *)n->params)->width = 2;
  nv_array *all = nv__op_finish("bits", n);
  uint16_t got[15];
  cr_assert_eq(nv_array_read(all, got, sizeof got), NV_OK, "%s", nv_last_error());
  for (int k = 0; k < 3; k++) {
    int two = 2, five = 5;
    nv_array *key = nv_array_from_data(kv + 2 * k, &two, 1, NV_DTYPE_UINT32);
    nv_array *row = nv_random_bits(&five, 1, 2, key);
    uint16_t want[5];
    cr_assert_eq(nv_array_read(row, want, sizeof want), NV_OK);
    for (int i = 0; i < 5; i++) cr_assert_eq(got[5 * k + i], want[i], "key %d elem %d", k, i);
    nv_release(key);
    nv_release(row);
  }
  nv_release(all);
  nv_release(keys);
}

/* Builds and evaluates one of each sampler in a scope; returns the first error. */
static nv_status samplers(void) {
  nv_status st = nv_scope_begin();
  if (st != NV_OK) return st;
  int shape[2] = {4, 6};
  nv_array *k = nv_random_key(3);
  float lv[6] = {0.5f, -1, 2, 0, 1, 1};
  nv_array *logits = f32v(lv, 6);
  nv_array *xs[9] = {
      nv_random_normal(shape, 2, NV_DTYPE_FLOAT16, 1.0, 2.0, k),
      nv_random_normal(shape, 2, NV_DTYPE_COMPLEX64, 0.0, 1.0, NULL),
      nv_random_uniform_scalar(-1, 1, shape, 2, NV_DTYPE_BFLOAT16, k),
      nv_random_randint_scalar(0, 9, shape, 2, NV_DTYPE_INT8, k),
      nv_random_bernoulli_scalar(0.25, shape, 2, k),
      nv_random_truncated_normal_scalar(-1, 1, shape, 2, NV_DTYPE_FLOAT32, k),
      nv_random_laplace(shape, 2, NV_DTYPE_FLOAT64, 0.0, 1.0, k),
      nv_random_categorical_samples(logits, 0, 5, k),
      nv_random_permutation(nv_random_gumbel(shape, 2, NV_DTYPE_FLOAT32, k), 1, k),
  };
  st = nv_eval(xs, 9);
  if (st != NV_OK) {
    cr_assert_eq(st, NV_ERR_OUT_OF_MEMORY, "status %d: %s", st, nv_last_error());
  } else {
    float h[24];
    nv_array *c = nv_astype(xs[0], NV_DTYPE_FLOAT32);
    st = nv_array_read(c, h, sizeof h);
    if (st == NV_OK) {
      bool nonzero = false;
      for (int i = 0; i < 24; i++) nonzero |= h[i] != 0 && isfinite(h[i]);
      cr_assert(nonzero);
    }
  }
  nv_scope_end();
  return st;
}

Test(random, scoped_samplers_free_everything) {
  long base = nv__test_live_buffers();
  cr_assert_eq(samplers(), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv__test_live_buffers(), base);
}

Test(random, every_allocation_failure_is_clean) {
  long base = nv__test_live_buffers();
  for (long k = 1; k < 20000; k++) {
    nv__test_fail_alloc_at(k);
    nv_status st = samplers();
    nv__test_fail_alloc_at(0);
    cr_assert_eq(nv__test_live_buffers(), base, "k=%ld leaked a buffer", k);
    if (st == NV_OK) return;
  }
  cr_assert_fail("the samplers never ran without an injected failure");
}

Test(random, threefry_known_answer) {
  /* Random123's known-answer vectors for threefry2x32 with 20 rounds. */
  uint32_t a = 0, b = 0;
  nv__threefry2x32(0, 0, &a, &b);
  cr_assert_eq(a, 0x6b200159u);
  cr_assert_eq(b, 0x99ba4efeu);
  a = 0xffffffffu;
  b = 0xffffffffu;
  nv__threefry2x32(0xffffffffu, 0xffffffffu, &a, &b);
  cr_assert_eq(a, 0x1cb996fcu);
  cr_assert_eq(b, 0xbb002be7u);
  a = 0x243f6a88u;
  b = 0x85a308d3u;
  nv__threefry2x32(0x13198a2eu, 0x03707344u, &a, &b);
  cr_assert_eq(a, 0xc4923a9cu);
  cr_assert_eq(b, 0x483df7a0u);
}
