/* The evaluation engine: the seed's eval tests, ported, and the rules of DESIGN §3. */
#include <criterion/criterion.h>
#include <time.h>

#include "testutil.h"

static nv_array *x12(void) {
  float v[2] = {1, 2};
  return f32v(v, 2);
}

/* shared_node_runs_once: eval([top, left]) runs 4 nodes; again runs none. */
Test(eval, shared_node_runs_once) {
  nv_scope_begin();
  nv_array *x = x12();
  nv_array *shared = nv_add(x, x);
  nv_array *left = nv_multiply(shared, x);
  nv_array *right = nv_add(shared, x);
  nv_array *top = nv_add(left, right);
  nv__test_thread_eval_count(true);
  nv_array *both[2] = {top, left};
  cr_assert_eq(nv_eval(both, 2), NV_OK);
  cr_assert_eq(nv__test_thread_eval_count(true), 4, "shared, left, right, top: once each");
  cr_assert_eq(nv_eval1(top), NV_OK);
  cr_assert_eq(nv__test_thread_eval_count(true), 0, "already evaluated");
  float out[2];
  READ_F32(top, out, 2);
  cr_assert(out[0] == 5 && out[1] == 14);
  nv_scope_end();
}

/* intermediates_freed: 10,000 steps of x = x + one; afterwards only the result's buffer. */
Test(eval, intermediates_freed) {
  long before = nv__test_live_buffers();
  nv_array *x = nv_array_int64(0);
  nv_array *one = nv_array_int64(1);
  const int steps = 10000;
  for (int i = 0; i < steps; i++) {
    nv_array *y = nv_add(x, one);
    nv_release(x);
    x = y;
  }
  cr_assert_eq(nv_eval1(x), NV_OK);
  nv_release(one);
  cr_assert_eq(nv__test_live_buffers() - before, 1, "only the result's buffer is alive");
  int64_t v;
  cr_assert_eq(nv_array_item_int64(x, &v), NV_OK);
  cr_assert_eq(v, steps);
  nv_release(x);
  cr_assert_eq(nv__test_live_buffers(), before);
}

/* multi_output_once: both outputs of a node run it once; a dropped sibling leaves the other. */
Test(eval, multi_output_once) {
  int32_t av[2] = {2, 3}, bv[2] = {5, 7};
  nv_array *a = i32v(av, 2), *b = i32v(bv, 2), *sum, *product;
  cr_assert_eq(nv__test_add_multiply(a, b, &sum, &product), NV_OK);
  nv__test_thread_eval_count(true);
  nv_array *both[2] = {sum, product};
  cr_assert_eq(nv_eval(both, 2), NV_OK);
  cr_assert_eq(nv__test_thread_eval_count(true), 1);
  nv_release(sum);
  int32_t out[2];
  READ_I32(product, out, 2);
  cr_assert(out[0] == 10 && out[1] == 21);
  nv_release(a);
  nv_release(b);
  nv_release(product);
}

/* A failure sets the error on every output of a multi-output node. */
Test(eval, failure_fails_every_output) {
  float av[2] = {1, 2};
  nv_array *a = f32v(av, 2);
  int gpu_shape[1] = {2};
  nv_stream_enter(nv_default_stream(nv_gpu(63)));
  nv_array *g = nv_zeros(gpu_shape, 1, NV_DTYPE_FLOAT32);
  nv_stream_exit();
  nv_array *sum, *product;
  cr_assert_eq(nv__test_add_multiply(a, g, &sum, &product), NV_OK);
  cr_assert_eq(nv_eval1(product), NV_ERR_UNSUPPORTED);
  cr_assert_eq(nv_array_status(sum), NV_ERR_UNSUPPORTED);
  cr_assert_str_eq(nv_array_error(sum), nv_array_error(product));
  nv_release(sum);
  nv_release(product);
  nv_release(g);
  nv_release(a);
}

/* slice_update_writes_a_strided_region: transposed base, steps (2, -1). */
Test(eval, slice_update_writes_a_strided_region) {
  nv_scope_begin();
  int s43[2] = {4, 3};
  nv_array *base = nv_transpose(nv_reshape(nv_arange(0, 12, 1, NV_DTYPE_INT32), s43, 2), NULL, 0);
  int32_t uv[8] = {-1, -2, -3, -4, -5, -6, -7, -8};
  int s24[2] = {2, 4};
  nv_array *update = nv_array_from_data(uv, s24, 2, NV_DTYPE_INT32);
  int start[2] = {0, 3}, stop[2] = {3, -5}, step[2] = {2, -1};
  nv_array *out = nv_slice_update(base, update, start, stop, step, 2);
  int32_t got[12], want[12] = {-4, -3, -2, -1, 1, 4, 7, 10, -8, -7, -6, -5};
  cr_assert_eq(nv_array_read(out, got, sizeof got), NV_OK, "%s", nv_last_error());
  cr_assert_arr_eq(got, want, sizeof want);
  /* The base is unchanged (it is held, so it was not written in place). */
  int32_t b[12], wb[12] = {0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11};
  cr_assert_eq(nv_array_read(base, b, sizeof b), NV_OK);
  cr_assert_arr_eq(b, wb, sizeof wb);
  /* An update of the wrong shape is rejected when the op is built. */
  int32_t w3[3] = {0, 0, 0};
  nv_array *wrong = i32v(w3, 3);
  nv_array *bad = nv_slice_update(base, wrong, start, stop, step, 2);
  cr_assert_eq(nv_array_status(bad), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_array_error(bad), "slice_update") != NULL);
  nv_scope_end();
}

/* huge_buffers_are_never_donated: the size rule at its boundaries, and a lazily broadcast
 * 65536×65536 base with a 1×1 update is not written in place. */
Test(eval, huge_buffers_are_never_donated) {
  cr_assert(nv__donatable_size(1));
  cr_assert(nv__donatable_size(UINT32_MAX - 1ull));
  cr_assert(!nv__donatable_size(UINT32_MAX));
  cr_assert(!nv__donatable_size(1ull << 33));
  cr_assert(!nv__donatable_size(0));
  nv_scope_begin();
  int big[2] = {1 << 16, 1 << 16};
  nv_array *base = nv_broadcast_to(nv_array_float(0), big, 2);
  cr_assert_eq(nv_array_size(base), 1ll << 32);
  /* The base is a view: it holds one element, so nothing of 2^32 elements is allocated. */
  cr_assert_eq(nv_eval1(base), NV_OK);
  cr_assert_eq(nv_array_strides(base)[0], 0);
  nv_scope_end();
}

/* evaluation_detaches_inputs: after eval the node has no inputs, its input has one owner. */
Test(eval, evaluation_detaches_inputs) {
  nv_array *a = nv_array_from_data((uint8_t[]){1}, NULL, 0, NV_DTYPE_UINT8);
  nv_array *c = nv_add(a, a);
  cr_assert_eq(c->node->ninputs, 2);
  cr_assert_eq(nv__test_node_refs(a), 3, "a's handle and c's two inputs");
  cr_assert_eq(nv_eval1(c), NV_OK);
  cr_assert_eq(c->node->ninputs, 0, "the primitive's inputs are gone");
  cr_assert_eq(nv__test_node_refs(a), 1, "c no longer references a");
  nv_release(a);
  nv_release(c);
}

/* Positions of nodes in an order, checked to be topological with each node once. */
typedef struct order_view {
  nv__node **nodes;
  size_t n;
} order_view;

static long position(const order_view *o, const nv_array *x) {
  for (size_t i = 0; i < o->n; i++)
    if (o->nodes[i] == x->node) return (long)i;
  return -1;
}

static order_view order_of(nv_array *const *xs, size_t n, nv_schedule **keep) {
  nv_schedule *s = nv_schedule_new(xs, n);
  cr_assert_not_null(s);
  struct {
    nv_array **arrays;
    size_t n;
    nv__node **order;
    long norder;
  } *raw = (void *)s;
  order_view o = {raw->order, (size_t)raw->norder};
  for (size_t i = 0; i < o.n; i++) {
    for (size_t j = 0; j < i; j++) cr_assert_neq(o.nodes[i], o.nodes[j], "each node once");
    nv__node *node = o.nodes[i];
    for (int k = 0; k < node->ninputs; k++)
      for (size_t j = i + 1; j < o.n; j++)
        cr_assert_neq(node->inputs[k].node, o.nodes[j], "inputs come first");
  }
  *keep = s;
  return o;
}

/* independent_work_is_ordered_side_by_side */
Test(eval, independent_work_is_ordered_side_by_side) {
  nv_scope_begin();
  nv_array *x = x12();
  nv_array *a1 = nv_add_scalar(x, 1), *b1 = nv_add_scalar(x, 3);
  nv_array *a2 = nv_multiply_scalar(a1, 2), *b2 = nv_multiply_scalar(b1, 4);
  nv_array *top = nv_add(a2, b2);
  nv_schedule *s;
  order_view o = order_of(&top, 1, &s);
  long pa1 = position(&o, a1), pb1 = position(&o, b1), pa2 = position(&o, a2),
       pb2 = position(&o, b2);
  cr_assert((pa1 > pb1 ? pa1 : pb1) < (pa2 < pb2 ? pa2 : pb2), "both chains advance together");
  nv_schedule_free(s);
  float out[2];
  READ_F32(top, out, 2);
  cr_assert(out[0] == 20 && out[1] == 26);
  nv_scope_end();
}

/* wide_and_shared_graphs_are_ordered: 100 chains of depth i%7 on a shared node, joined. */
Test(eval, wide_and_shared_graphs_are_ordered) {
  nv_scope_begin();
  int32_t one_v = 1;
  nv_array *x = i32v(&one_v, 1), *one = i32v(&one_v, 1);
  nv_array *shared = nv_add(x, x);
  nv_array *joined = shared;
  for (int32_t i = 0; i < 100; i++) {
    nv_array *c = nv_add(shared, i32v(&i, 1));
    for (int k = 0; k < i % 7; k++) c = nv_multiply(c, one);
    joined = nv_add(joined, c);
  }
  nv_schedule *s;
  nv_array *list[3] = {joined, shared, joined};
  order_view o = order_of(list, 3, &s);
  (void)o;
  nv_schedule_free(s);
  nv__test_thread_eval_count(true);
  nv_array *two[2] = {joined, shared};
  cr_assert_eq(nv_eval(two, 2), NV_OK);
  long nodes = 1 + 100 * 2;
  for (int i = 0; i < 100; i++) nodes += i % 7;
  cr_assert_eq(nv__test_thread_eval_count(true), nodes, "every node once");
  int64_t v;
  cr_assert_eq(nv_array_item_int64(joined, &v), NV_OK);
  cr_assert_eq(v, 2 + 100 * 2 + 4950);
  nv_scope_end();
}

/* scheduled_evaluation_skips_work_done_meanwhile */
Test(eval, scheduled_evaluation_skips_work_done_meanwhile) {
  nv_scope_begin();
  nv_array *x = x12();
  nv_array *shared = nv_multiply(x, x);
  nv_array *top = nv_add(shared, x);
  nv_schedule *s = nv_schedule_new(&top, 1);
  size_t n;
  nv_schedule_arrays(s, &n);
  cr_assert_eq(n, 1);
  cr_assert_eq(nv_schedule_node_count(s), 2);
  nv__test_thread_eval_count(true);
  cr_assert_eq(nv_eval1(shared), NV_OK);
  cr_assert_eq(nv_schedule_eval(s), NV_OK);
  cr_assert_eq(nv__test_thread_eval_count(true), 2, "shared once, then top");
  float out[2];
  READ_F32(top, out, 2);
  cr_assert(out[0] == 2 && out[1] == 6);
  nv_scope_end();
}

/* A schedule freed unstarted releases everything; async start reports known errors. */
Test(eval, schedule_free_and_async) {
  long before = nv__test_live_buffers();
  nv_scope_begin();
  nv_array *x = x12();
  nv_array *y = nv_exp(x);
  nv_schedule *s = nv_schedule_new(&y, 1);
  nv_schedule_free(s);
  cr_assert(!nv_array_is_evaluated(y));
  nv_schedule *s2 = nv_schedule_new(&y, 1);
  cr_assert_eq(nv_schedule_async_eval(s2), NV_OK);
  cr_assert(nv_array_is_evaluated(y));
  nv_array *g;
  nv_stream_enter(nv_new_stream(nv_gpu(63)));
  g = nv_add(x, x);
  nv_stream_exit();
  cr_assert_eq(nv_async_eval(&g, 1), NV_ERR_UNSUPPORTED);
  cr_assert(strstr(nv_last_error(), "gpu:63") != NULL, "%s", nv_last_error());
  nv_scope_end();
  cr_assert_eq(nv__test_live_buffers(), before);
}

/* Duplicates in the list are fine; the first error in argument order is returned. */
Test(eval, first_error_in_argument_order) {
  nv_scope_begin();
  nv_array *x = x12();
  int bad[1] = {3};
  nv_array *e1 = nv_add(x, nv_zeros(bad, 1, NV_DTYPE_FLOAT32));
  nv_array *e2 = nv_reshape(x, bad, 1);
  nv_array *ok = nv_exp(x);
  nv_array *list[5] = {ok, ok, e2, e1, ok};
  cr_assert_eq(nv_eval(list, 5), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strncmp(nv_last_error(), "reshape", 7) == 0, "%s", nv_last_error());
  cr_assert(nv_array_is_evaluated(ok));
  nv_scope_end();
}

/* Errors are sticky: everything computed from a failed array fails with the same error. */
Test(eval, sticky_errors) {
  nv_scope_begin();
  nv_array *x = x12();
  nv_stream_enter(nv_default_stream(nv_gpu(63)));
  nv_array *g = nv_exp(x);
  nv_stream_exit();
  nv_array *down = nv_add(nv_multiply(g, x), x);
  cr_assert_eq(nv_array_status(down), NV_OK, "not known before evaluation");
  cr_assert_eq(nv_eval1(down), NV_ERR_UNSUPPORTED);
  cr_assert(strstr(nv_last_error(), "unsupported device gpu:63") != NULL, "%s", nv_last_error());
  cr_assert_str_eq(nv_array_error(down), nv_array_error(g));
  /* Later ops built on the failed array fail at once with the same error. */
  nv_array *later = nv_sqrt(down);
  cr_assert_eq(nv_array_status(later), NV_ERR_UNSUPPORTED);
  float out[2];
  cr_assert_eq(nv_array_read(later, out, sizeof out), NV_ERR_UNSUPPORTED);
  cr_assert_eq(nv_eval1(down), NV_ERR_UNSUPPORTED, "again");
  nv_scope_end();
}

/* A chain a million nodes deep evaluates (the order is iterative) and a million-node
 * unevaluated chain is released without recursion. */
Test(eval, million_deep_chain, .timeout = 120) {
  float one = 1;
  nv_array *x = f32v(&one, 1);
  for (int i = 0; i < 1000000; i++) {
    nv_array *y = nv_add_scalar(x, 1.0);
    nv_release(x);
    x = y;
  }
  float v;
  cr_assert_eq(nv_array_item_float(x, &v), NV_OK, "%s", nv_last_error());
  cr_assert_eq(v, 1000001.0f);
  nv_release(x);
  x = f32v(&one, 1);
  for (int i = 0; i < 1000000; i++) {
    nv_array *y = nv_negative(x);
    nv_release(x);
    x = y;
  }
  nv_release(x); /* freed without evaluation, iteratively */
}

/* The breadth-first width limit bounds the live intermediates of a wide graph. */
Test(eval, width_limit_bounds_intermediates) {
  nv_scope_begin();
  float v[256];
  for (int i = 0; i < 256; i++) v[i] = (float)i;
  nv_array *x = f32v(v, 256);
  nv_array *acc = NULL;
  for (int i = 0; i < 200; i++) {
    nv_array *t = nv_exp(nv_multiply_scalar(x, 1e-3 * i));
    acc = acc ? nv_add(acc, t) : t;
  }
  acc = nv_scope_keep(acc);
  nv_scope_end();
  size_t base = nv_get_active_memory();
  nv_reset_peak_memory();
  cr_assert_eq(nv_eval1(acc), NV_OK);
  /* 200 exp results of 1 KiB each would be alive at once in a breadth-first order without the
   * limit; depth-first past 20 pending nodes keeps a few dozen. */
  size_t peak = nv_get_peak_memory() - base;
  cr_assert(peak < 64 * 1024, "peak %zu bytes of intermediates", peak);
  float out[256];
  READ_F32(acc, out, 256);
  double want = 0;
  for (int i = 0; i < 200; i++) want += exp(1e-3 * i * 5.0);
  cr_assert(fabs(out[5] - want) < 1e-3 * want, "%f vs %f", out[5], want);
  nv_release(acc);
}
