/* The CUDA backend's semantics (DESIGN §3, §13; the seeds' GPU rows E5, E6, E8, E13, E19,
 * E36-E56): evaluation over hrx, data movement, failure propagation, backpressure, donation,
 * freeing, fallbacks, memory limits, graph replay. Skipped without a usable CUDA device. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "ops/optim.h"
#include "testutil.h"

nv_status nv__gpu_test_inject_fault(int index, int kind);
void nv__gpu_graph_stats(long *prepared, long *updated);
void nv__gpu_test_force_fallback(int prim);

static void need_gpu(void) {
  if (!nv_device_is_available(nv_gpu(0))) cr_skip_test("no usable CUDA device");
}

/* Every test builds its ops on gpu:0's default stream. */
static void gpu_begin(void) {
  need_gpu();
  cr_assert_eq(nv_stream_enter(nv_default_stream(nv_gpu(0))), NV_OK);
}
static void gpu_end(void) { nv_stream_exit(); }

static nv_array *randn(int n, unsigned *st) {
  float *v = malloc((size_t)n * sizeof *v);
  for (int i = 0; i < n; i++) v[i] = test_randf(st);
  nv_array *a = f32v(v, n);
  free(v);
  return a;
}

Test(gpu, device_available_and_default) {
  need_gpu();
  cr_assert(nv_device_count(NV_DEVICE_GPU) >= 1);
  const char *e = getenv("NUVEC_DEFAULT_DEVICE");
  if (!e) cr_assert_eq(nv_default_device().type, NV_DEVICE_GPU, "gpu:0 is the default where present");
  char name[16];
  nv_device_name(nv_gpu(0), name, sizeof name);
  cr_assert_str_eq(name, "gpu:0");
}

/* Host data moves up on first GPU use; results come back on read (E5, E8). */
Test(gpu, round_trip_values) {
  gpu_begin();
  unsigned st = test_seed();
  nv_scope_begin();
  const int n = 100003;
  nv_array *a = randn(n, &st), *b = randn(n, &st);
  nv_array *y = nv_add(nv_multiply(a, b), a);
  float *out = malloc(n * sizeof *out);
  READ_F32(y, out, n);
  const float *pa = nv_array_data(a), *pb = nv_array_data(b);
  for (int i = 0; i < n; i++) cr_assert_float_eq(out[i], pa[i] * pb[i] + pa[i], 1e-6f, "at %d", i);
  free(out);
  nv_scope_end();
  gpu_end();
}

/* A chain of 10,000 dependent steps evaluates on the GPU (several submissions of 50 ops) and
 * leaves only the result's buffer alive (intermediates freed after their readers). */
Test(gpu, long_chain_and_freeing) {
  gpu_begin();
  long before = nv__test_live_buffers();
  nv_array *x = nv_array_float(0);
  nv_array *one = nv_array_float(1);
  for (int i = 0; i < 10000; i++) {
    nv_array *y = nv_add(x, one);
    nv_release(x);
    x = y;
  }
  cr_assert_eq(nv_eval1(x), NV_OK, "%s", nv_last_error());
  float v;
  cr_assert_eq(nv_array_item_float(x, &v), NV_OK);
  cr_assert_eq(v, 10000.0f);
  nv_release(one);
  cr_assert_eq(nv__test_live_buffers() - before, 1, "only the result's buffer is alive");
  nv_release(x);
  cr_assert_eq(nv__test_live_buffers(), before);
  gpu_end();
}

/* async_eval returns after submitting; a later read waits for just that work. */
Test(gpu, async_eval_then_read) {
  gpu_begin();
  unsigned st = test_seed();
  nv_scope_begin();
  nv_array *a = randn(1 << 20, &st);
  nv_array *y = a;
  for (int i = 0; i < 200; i++) y = nv_multiply(y, nv_array_float(1.0001f));
  cr_assert_eq(nv_async_eval(&y, 1), NV_OK);
  float first;
  cr_assert_eq(nv_array_read(nv_slice(y, (int[]){0}, (int[]){1}, NULL, 1), &first, 4), NV_OK);
  const float *pa = nv_array_data(a);
  cr_assert_float_eq(first, pa[0] * powf(1.0001f, 200), 1e-4f);
  nv_scope_end();
  gpu_end();
}

/* E6: a failed submission fails its outputs and the same evaluation's later submissions, and
 * evaluations reading its results in flight; independent evaluations are unaffected. */
Test(gpu, failed_submission_propagation) {
  gpu_begin();
  nv_scope_begin();
  nv_array *x = nv_array_float(1);
  cr_assert_eq(nv_eval1(x), NV_OK);
  nv_array *y = x;
  for (int i = 0; i < 120; i++) y = nv_add(y, nv_array_float(1)); /* three submissions */
  cr_assert_eq(nv__gpu_test_inject_fault(0, 0), NV_OK);
  nv_status s = nv_eval1(y);
  cr_assert_neq(s, NV_OK, "the evaluation whose first region failed reports it");
  float v;
  cr_assert_neq(nv_array_item_float(y, &v), NV_OK, "its later submissions failed too");
  /* A reader of the failed results fails; an independent evaluation is fine. */
  nv_array *z = nv_multiply(y, nv_array_float(2));
  cr_assert_neq(nv_eval1(z), NV_OK);
  nv_array *w = nv_add(nv_array_float(2), nv_array_float(3));
  cr_assert_eq(nv_eval1(w), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_array_item_float(w, &v), NV_OK);
  cr_assert_eq(v, 5.0f);
  nv_scope_end();
  gpu_end();
}

/* E13: many submissions in flight do not fail: submission waits (backpressure). */
Test(gpu, backpressure_many_async) {
  gpu_begin();
  nv_scope_begin();
  nv_array *acc = nv_array_float(0);
  for (int i = 0; i < 3000; i++) {
    acc = nv_add(acc, nv_array_float(1));
    cr_assert_eq(nv_async_eval(&acc, 1), NV_OK, "%s", nv_last_error());
  }
  float v;
  cr_assert_eq(nv_array_item_float(acc, &v), NV_OK);
  cr_assert_eq(v, 3000.0f);
  nv_scope_end();
  gpu_end();
}

/* Element-wise donation on the GPU (E36, E44a): a chain writes into its own intermediate. */
Test(gpu, donation_in_place) {
  gpu_begin();
  unsigned st = test_seed();
  nv_array *a = randn(4096, &st);
  nv_array *held = nv_retain(a);
  long before = nv__test_donations();
  nv_array *t = nv_exp(a);
  nv_release(a);
  nv_array *u = nv_negative(t); /* t's only reader: donated */
  nv_release(t);
  cr_assert_eq(nv_eval1(u), NV_OK, "%s", nv_last_error());
  cr_assert_gt(nv__test_donations(), before, "the intermediate was written in place");
  float o[4096];
  READ_F32(u, o, 4096);
  const float *h = nv_array_data(held);
  for (int i = 0; i < 4096; i++) cr_assert_float_eq(o[i], -expf(h[i]), 1e-5f);
  nv_release(u);
  nv_release(held);
  gpu_end();
}

/* A held base is never written: slice_update copies it first. */
Test(gpu, slice_update_keeps_held_base) {
  gpu_begin();
  nv_scope_begin();
  float base_v[8] = {0, 1, 2, 3, 4, 5, 6, 7}, upd_v[2] = {-1, -2};
  nv_array *base = nv_add(f32v(base_v, 8), nv_array_float(0));
  cr_assert_eq(nv_eval1(base), NV_OK);
  nv_array *r = nv_slice_update(base, f32v(upd_v, 2), (int[]){2}, (int[]){4}, NULL, 1);
  float o[8], b[8];
  READ_F32(r, o, 8);
  READ_F32(base, b, 8);
  for (int i = 0; i < 8; i++) {
    cr_assert_eq(b[i], base_v[i], "the held base is unchanged");
    cr_assert_eq(o[i], i == 2 ? -1 : i == 3 ? -2 : base_v[i]);
  }
  nv_scope_end();
  gpu_end();
}

/* A repeated step replays its prepared graph (updated in place, not re-instantiated). */
Test(gpu, repeated_step_replays) {
  gpu_begin();
  unsigned st = test_seed();
  nv_array *w = randn(1000, &st);
  long p0 = 0, u0 = 0, p1 = 0, u1 = 0;
  for (int step = 0; step < 20; step++) {
    nv_scope_begin();
    nv_array *y = nv_add(nv_multiply(w, nv_array_float(0.5f)), nv_array_float(1));
    nv_scope_keep(y);
    nv_scope_end();
    cr_assert_eq(nv_eval1(y), NV_OK);
    nv_release(w);
    w = y;
    if (step == 4) nv__gpu_graph_stats(&p0, &u0);
  }
  nv__gpu_graph_stats(&p1, &u1);
  cr_assert_eq(p1 - p0, 0, "no new prepared graphs after the first steps (%ld)", p1 - p0);
  nv_release(w);
  gpu_end();
}

/* Out of device memory: a clean, sticky error, never a crash. */
Test(gpu, memory_limit) {
  gpu_begin();
  size_t old = nv_set_device_memory_limit(nv_gpu(0), (size_t)64 << 20);
  nv_scope_begin();
  nv_array *big = nv_zeros((int[]){1 << 26}, 1, NV_DTYPE_FLOAT32); /* 256 MiB */
  nv_array *y = nv_add(big, nv_array_float(1));
  nv_status s = nv_eval1(y);
  cr_assert_eq(s, NV_ERR_OUT_OF_MEMORY, "status %d: %s", s, nv_last_error());
  cr_assert_eq(nv_eval1(y), NV_ERR_OUT_OF_MEMORY, "sticky");
  nv_scope_end();
  nv_set_device_memory_limit(nv_gpu(0), old);
  nv_scope_begin();
  nv_array *ok = nv_add(nv_zeros((int[]){1 << 20}, 1, NV_DTYPE_FLOAT32), nv_array_float(1));
  cr_assert_eq(nv_eval1(ok), NV_OK, "%s", nv_last_error());
  nv_scope_end();
  gpu_end();
}

/* Memory statistics count device buffers on the device. */
Test(gpu, memory_statistics) {
  gpu_begin();
  nv_clear_cache();
  size_t a0 = nv_get_device_active_memory(nv_gpu(0));
  nv_array *y = nv_add(nv_zeros((int[]){1 << 20}, 1, NV_DTYPE_FLOAT32), nv_array_float(1));
  cr_assert_eq(nv_eval1(y), NV_OK);
  cr_assert_geq(nv_get_device_active_memory(nv_gpu(0)) - a0, (size_t)4 << 20);
  cr_assert_geq(nv_get_device_peak_memory(nv_gpu(0)), nv_get_device_active_memory(nv_gpu(0)));
  nv_release(y);
  cr_assert_geq(nv_get_device_cache_memory(nv_gpu(0)), (size_t)4 << 20, "freed into the cache");
  nv_clear_cache();
  cr_assert_eq(nv_get_device_cache_memory(nv_gpu(0)), 0);
  gpu_end();
}

/* A CPU node reading GPU results, and a GPU node reading CPU results, in one evaluation. */
Test(gpu, mixed_cpu_gpu_evaluation) {
  need_gpu();
  nv_scope_begin();
  float v[4] = {1, 2, 3, 4};
  nv_stream_enter(nv_default_stream(nv_gpu(0)));
  nv_array *g = nv_multiply(f32v(v, 4), nv_array_float(2));
  nv_stream_exit();
  nv_stream_enter(nv_default_stream(nv_cpu()));
  nv_array *c = nv_add(g, nv_array_float(1));
  nv_stream_exit();
  nv_stream_enter(nv_default_stream(nv_gpu(0)));
  nv_array *h = nv_multiply(c, c);
  nv_stream_exit();
  float o[4];
  READ_F32(h, o, 4);
  for (int i = 0; i < 4; i++) cr_assert_eq(o[i], (2 * v[i] + 1) * (2 * v[i] + 1));
  nv_scope_end();
}

/* A node its CUDA kernel declines runs on the CPU, correctly, between GPU nodes, and is
 * counted (every primitive has a kernel: the test hook makes sort's decline). */
Test(gpu, fallback_is_counted_and_correct) {
  gpu_begin();
  nv_scope_begin();
  float v[5] = {3, 1, 4, 1, 5};
  size_t before = nv_gpu_fallback_count();
  nv__gpu_test_force_fallback(NV__PRIM_SORT);
  nv_array *s = nv_multiply(nv_sort(nv_add(f32v(v, 5), nv_array_float(0)), NULL), nv_array_float(2));
  float o[5];
  nv_status st = nv_eval1(s);
  nv__gpu_test_force_fallback(-1);
  cr_assert_eq(st, NV_OK, "%s", nv_last_error());
  READ_F32(s, o, 5);
  cr_assert(o[0] == 2 && o[1] == 2 && o[2] == 6 && o[3] == 8 && o[4] == 10);
  cr_assert_eq(nv_gpu_fallback_count(), before + 1);
  nv_scope_end();
  gpu_end();
}

/* Out-of-range indices on the GPU fail the node with the CPU's message, and what is computed
 * from it (in the same evaluation, or in a later one while the first is in flight); the device
 * stays healthy and nothing outside the arrays is touched. */
Test(gpu, index_out_of_range_fails_like_the_cpu) {
  gpu_begin();
  nv_scope_begin();
  float v[5] = {1, 2, 3, 4, 5};
  int32_t bad[3] = {0, 7, -1}, good[3] = {4, -5, 2};
  nv_array *a = nv_add(f32v(v, 5), nv_array_float(0));
  cr_assert_eq(nv_eval1(a), NV_OK);
  size_t before = nv_gpu_fallback_count();
  nv_array *y = nv_take(a, i32v(bad, 3), 0);
  nv_array *z = nv_add(y, nv_array_float(1));
  cr_assert_neq(nv_eval1(z), NV_OK);
  cr_assert(strstr(nv_last_error(), "take: index 7 is out of range for an axis of size 5"),
            "%s", nv_last_error());
  float o[3];
  cr_assert_neq(nv_array_read(y, o, sizeof o), NV_OK, "the take itself failed");
  /* Asynchronously: a later evaluation reading the failed result fails too. */
  nv_array *y2 = nv_take(a, i32v(bad, 3), 0);
  cr_assert_eq(nv_async_eval(&y2, 1), NV_OK, "%s", nv_last_error());
  nv_array *z2 = nv_multiply(nv_add(y2, nv_array_float(1)), nv_array_float(3));
  cr_assert_neq(nv_eval1(z2), NV_OK);
  cr_assert(strstr(nv_last_error(), "take: index 7"), "%s", nv_last_error());
  /* Healthy afterwards; negative indices wrap as NumPy's. */
  nv_array *g = nv_take(a, i32v(good, 3), 0);
  READ_F32(g, o, 3);
  cr_assert(o[0] == 5 && o[1] == 1 && o[2] == 3, "%g %g %g", o[0], o[1], o[2]);
  cr_assert_eq(nv_gpu_fallback_count(), before, "take ran on the GPU");
  nv_scope_end();
  gpu_end();
}

/* Empty arrays and scalars on the GPU. */
Test(gpu, empty_and_scalar) {
  gpu_begin();
  nv_scope_begin();
  nv_array *e = nv_add(nv_zeros((int[]){0, 3}, 2, NV_DTYPE_FLOAT32), nv_array_float(1));
  cr_assert_eq(nv_eval1(e), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_array_size(e), 0);
  nv_array *s = nv_multiply(nv_array_float(3), nv_array_float(4));
  float v;
  cr_assert_eq(nv_array_item_float(s, &v), NV_OK);
  cr_assert_eq(v, 12.0f);
  nv_scope_end();
  gpu_end();
}

/* adam_update's CUDA kernel (src/cuda/optim.cu) against its CPU kernel, bit for bit: every
 * dtype, sizes around the 16-byte vectors (tails) and past a million elements, a misaligned
 * offset (the element path) and a reversed view (copied contiguous first), each of Adam and
 * AdamW with and without bias correction. No fallback to the CPU. */
Test(gpu, adam_update_matches_cpu) {
  need_gpu();
  unsigned st = test_seed();
  const nv_dtype dts[] = {NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16, NV_DTYPE_FLOAT32,
                          NV_DTYPE_FLOAT64};
  const int sizes[] = {1, 7, 8, 1003, (1 << 20) + 5};
  for (size_t d = 0; d < 4; d++)
    for (size_t z = 0; z < 5; z++)
      for (int layout = 0; layout < 3; layout++) {
        nv_scope_begin();
        nv_stream_enter(nv_default_stream(nv_cpu()));
        int n = sizes[z], len = n + 1, one = 1, rev_start = n - 1, rev_stop = -n - 1, back = -1;
        nv_array *x[4];
        double *v = malloc((size_t)len * sizeof *v);
        for (int i = 0; i < 4; i++) {
          for (int k = 0; k < len; k++) v[k] = i == 3 ? fabs(test_randf(&st)) : test_randf(&st);
          nv_array *a = nv_astype(nv_array_from_data(v, &len, 1, NV_DTYPE_FLOAT64), dts[d]);
          x[i] = layout == 0   ? nv_slice(a, (int[]){0}, &n, NULL, 1)
                 : layout == 1 ? nv_slice(a, &one, &len, NULL, 1)
                               : nv_slice(nv_slice(a, (int[]){0}, &n, NULL, 1), &rev_start,
                                          &rev_stop, &back, 1);
        }
        free(v);
        nv_array *s[4] = {nv_array_scalar(0.05, dts[d]), nv_array_scalar(0.9995, dts[d]),
                          nv_array_scalar(0.5, dts[d]), nv_array_scalar(31.6, dts[d])};
        cr_assert_eq(nv_eval(x, 4), NV_OK, "%s", nv_last_error());
        nv_stream_exit();
        nv__adam_params prm = {0.9, 0.999, 1e-8, (layout + z) % 2 == 1, (z / 2 + d) % 2 == 1};
        nv_array *got[2][3];
        size_t fallbacks = nv_gpu_fallback_count();
        for (int dev = 0; dev < 2; dev++) {
          nv_stream_enter(nv_default_stream(dev ? nv_gpu(0) : nv_cpu()));
          cr_assert_eq(nv__adam_update(x[0], x[1], x[2], x[3], s[0], s[1], s[2], s[3], &prm,
                                       got[dev]),
                       NV_OK, "%s", nv_last_error());
          nv_stream_exit();
          cr_assert_eq(nv_eval(got[dev], 3), NV_OK, "%s", nv_last_error());
        }
        cr_assert_eq(nv_gpu_fallback_count(), fallbacks, "adam_update ran on the GPU");
        size_t bytes = (size_t)n * nv_dtype_size(dts[d]);
        char *a = malloc(bytes), *b = malloc(bytes);
        for (int o = 0; o < 3; o++) {
          cr_assert_eq(nv_array_read(got[0][o], a, bytes), NV_OK, "%s", nv_last_error());
          cr_assert_eq(nv_array_read(got[1][o], b, bytes), NV_OK, "%s", nv_last_error());
          cr_assert(!memcmp(a, b, bytes), "%s, n %d, layout %d, output %d: GPU != CPU",
                    nv_dtype_name(dts[d]), n, layout, o);
        }
        free(a);
        free(b);
        nv_scope_end();
      }
}
