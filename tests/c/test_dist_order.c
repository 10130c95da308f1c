/* Program order of a group's collectives across streams and threads (seed 004 D13, D18, D31,
 * D41, D42, D46; DESIGN §10), over the fake communicator (D48). A GPU-stream collective takes
 * its ticket when its recording is submitted and runs later on a host worker: here a thread
 * plays that part with the same internal calls (nv__group_reserve, nv__dist_run_reserved), so
 * the ordering runs on the CPU. tests/gpu/test_gpu_dist_order.c runs the seed's GPU tests. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "dist_fake.h"
#include "distributed/dist_ops.h"
#include "testutil.h"

/* Every test here is about CPU streams. */
TestSuite(dist_order, .init = test_on_cpu, .fini = test_back);

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static nv_array *filled(int n, float v) {
  int shape[1] = {n};
  return nv_full(shape, 1, v, NV_DTYPE_FLOAT32);
}

/* An all_sum of n float32 elements as a GPU job sees it, and its staging. */
typedef struct pending {
  nv__dist_job job;
  uint64_t ticket;
  float data[8];
  int delay_ms;
  nv_status st;
} pending;

static pending pending_sum(nv_group g, int n, float v) {
  pending p;
  memset(&p, 0, sizeof p);
  p.job.prim = NV__PRIM_ALL_SUM;
  p.job.group = g;
  p.job.dtype = NV_DTYPE_FLOAT32;
  p.job.in_count = p.job.out_count = n;
  p.job.ndim = 1;
  p.job.shape[0] = n;
  for (int i = 0; i < n; i++) p.data[i] = v;
  cr_assert_eq(nv__group_reserve(g, "all_sum", &p.ticket), NV_OK, "%s", nv_last_error());
  return p;
}

/* The host worker: runs the pending jobs in order after a delay. */
typedef struct worker {
  pending *jobs[4];
  int n;
  pthread_t t;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int i = 0; i < w->n; i++) {
    sleep_ms(w->jobs[i]->delay_ms);
    w->jobs[i]->st =
        nv__dist_run_reserved(&w->jobs[i]->job, w->jobs[i]->ticket, w->jobs[i]->data,
                              w->jobs[i]->data);
  }
  return NULL;
}

static void start(worker *w) { cr_assert_eq(pthread_create(&w->t, NULL, work, w), 0); }

/* D40t on the CPU: two collectives issued to the worker, then a CPU-stream one that has to
 * wait for both (it was issued after them), whatever the worker's delay. */
Test(dist_order, a_cpu_collective_runs_after_earlier_queued_ones) {
  nv_group g;
  fake_comm *f = fake_group(-1, 2, &g);
  pending a = pending_sum(g, 1, 3), b = pending_sum(g, 2, 3);
  a.delay_ms = 30;
  worker w = {{&a, &b}, 2, 0};
  start(&w);
  nv_array *x = filled(3, 1);
  nv_array *c = nv_dist_all_sum(x, g);
  float out[3];
  READ_F32(c, out, 3);
  pthread_join(w.t, NULL);
  cr_assert_eq(a.st, NV_OK);
  cr_assert_eq(b.st, NV_OK);
  cr_assert(out[0] == 2 && out[2] == 2);
  cr_assert(a.data[0] == 6 && b.data[0] == 6 && b.data[1] == 6);
  cr_assert_str_eq(fake_log(f), "reduce 1, reduce 2, reduce 3");
  nv_release(x);
  nv_release(c);
  nv_group_close(g);
}

/* Collectives on two CPU streams, evaluated from two threads at once, never interleave: each
 * runs whole before the next starts (the fake logs an operation when it ends, after its
 * delay), and all of them run. */
typedef struct evaluator {
  nv_group g;
  nv_stream s;
  int n;
  nv_status st;
  float first[8];
  char why[256];
} evaluator;

static void *evaluate_on(void *arg) {
  evaluator *e = arg;
  nv_stream_enter(e->s);
  nv_array *x = filled(e->n, 2);
  nv_array *y = nv_dist_all_sum(nv_dist_all_sum(x, e->g), e->g);
  e->st = nv_array_read(y, e->first, (size_t)e->n * sizeof(float));
  if (e->st != NV_OK) snprintf(e->why, sizeof e->why, "%s", nv_last_error());
  nv_release(x);
  nv_release(y);
  nv_stream_exit();
  return NULL;
}

Test(dist_order, two_cpu_streams_on_two_threads) {
  nv_group g;
  fake_comm *f = fake_group(-1, 3, &g);
  nv_scope_begin();
  evaluator e1 = {g, nv_new_stream(nv_cpu()), 4, NV_OK, {0}, ""};
  evaluator e2 = {g, nv_new_stream(nv_cpu()), 5, NV_OK, {0}, ""};
  pthread_t t1, t2;
  pthread_create(&t1, NULL, evaluate_on, &e1);
  pthread_create(&t2, NULL, evaluate_on, &e2);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  nv_scope_end();
  cr_assert_eq(e1.st, NV_OK, "%s", e1.why);
  cr_assert_eq(e2.st, NV_OK, "%s", e2.why);
  cr_assert(e1.first[0] == 8 && e1.first[3] == 8 && e2.first[4] == 8);
  cr_assert_eq(f->nlog, 4, "%s", fake_log(f));
  nv_group_close(g);
}

/* D41 on the CPU: a ticket given up before its turn (a recording never submitted) does not hold
 * the later ones back, in whichever order the earlier ones settle. */
Test(dist_order, a_cancelled_ticket_lets_later_ones_run) {
  nv_group g;
  fake_comm *f = fake_group(-1, 1, &g);
  pending a = pending_sum(g, 1, 1), b = pending_sum(g, 2, 1);
  nv__group_cancel(g, b.ticket, NULL); /* later than the one serving: remembered */
  a.delay_ms = 20;
  worker w = {{&a}, 1, 0};
  start(&w);
  nv_array *x = filled(4, 2);
  nv_array *c = nv_dist_all_sum(x, g);
  float out[4];
  READ_F32(c, out, 4);
  pthread_join(w.t, NULL);
  cr_assert(out[0] == 4 && out[3] == 4);
  cr_assert_str_eq(fake_log(f), "reduce 1, reduce 4");
  /* Cancelled while serving: the next one runs at once. */
  pending d = pending_sum(g, 1, 1);
  nv__group_cancel(g, d.ticket, NULL);
  nv_array *e = nv_dist_all_sum(x, g);
  READ_F32(e, out, 4);
  cr_assert_str_eq(fake_log(f), "reduce 1, reduce 4, reduce 4");
  nv_release(x);
  nv_release(c);
  nv_release(e);
  nv_group_close(g);
}

/* A submitted collective that never ran (its GPU work failed before it): the peers ran it, so
 * the group is failed with the reason, and nothing waits for ever. */
Test(dist_order, a_collective_given_up_after_submission_fails_the_group) {
  nv_group g;
  fake_comm *f = fake_group(-1, 0, &g);
  pending a = pending_sum(g, 3, 1);
  nv__group_cancel(g, a.ticket, "a collective did not run");
  nv_array *x = filled(2, 1);
  nv_array *c = nv_dist_all_sum(x, g);
  cr_assert_eq(nv_eval1(c), NV_ERR_PEER_LOST);
  cr_assert(strstr(nv_last_error(), "all_sum") && strstr(nv_last_error(), "did not run"), "%s",
            nv_last_error());
  cr_assert_eq(f->nlog, 0);
  cr_assert_eq(nv_group_health(g), NV_ERR_PEER_LOST);
  nv_release(x);
  nv_release(c);
  nv_group_close(g);
}

/* D42 on the CPU: the collective's own error (naming the peer and the op) fails its output and
 * what reads it; the group is failed after it, and later collectives say so. */
Test(dist_order, a_failed_collective_fails_what_follows) {
  nv_group g;
  fake_comm *f = fake_group(7, 0, &g);
  nv_array *x = filled(7, 2);
  nv_array *s = nv_dist_all_sum(x, g);
  nv_array *y = nv_add_scalar(s, 1);
  cr_assert_eq(nv_eval1(y), NV_ERR_PEER_LOST);
  cr_assert(strstr(nv_last_error(), "all_sum: rank 1 left"), "%s", nv_last_error());
  nv_array *z = nv_dist_all_max(x, g);
  cr_assert_eq(nv_eval1(z), NV_ERR_PEER_LOST);
  cr_assert(strstr(nv_last_error(), "all_max: the group failed before: rank 1 left"), "%s",
            nv_last_error());
  cr_assert_str_eq(fake_log(f), "reduce 7");
  nv_release(x);
  nv_release(s);
  nv_release(y);
  nv_release(z);
  nv_group_close(g);
}

/* D18: health runs no collective, waits for the operations queued before it, and never
 * interleaves with them. */
Test(dist_order, health_waits_for_queued_collectives) {
  nv_group g;
  fake_comm *f = fake_group(-1, 1, &g);
  pending a = pending_sum(g, 2, 1);
  a.delay_ms = 20;
  worker w = {{&a}, 1, 0};
  start(&w);
  cr_assert_eq(nv_group_health(g), NV_OK);
  pthread_join(w.t, NULL);
  cr_assert_str_eq(fake_log(f), "reduce 2, health 0");
  nv_group_close(g);
}

/* D17: a collective queued before a close runs after it and fails saying the group was closed
 * (the transport is released at once, nothing is left waiting). */
Test(dist_order, a_queued_collective_after_close_fails) {
  nv_group g;
  fake_comm *f = fake_group(-1, 0, &g);
  pending a = pending_sum(g, 2, 1);
  cr_assert_eq(nv_group_close(g), NV_OK);
  cr_assert(f->destroyed);
  a.st = nv__dist_run_reserved(&a.job, a.ticket, a.data, a.data);
  cr_assert_eq(a.st, NV_ERR_BACKEND);
  cr_assert(strstr(nv_last_error(), "all_sum: the group was closed"), "%s", nv_last_error());
  cr_assert_eq(f->nlog, 0);
}

/* D46 on the CPU: an all_sum writes its input's buffer only when nothing else holds it. */
Test(dist_order, only_inputs_nothing_else_holds_are_reduced_in_place) {
  nv_group g;
  fake_comm *f = fake_group(-1, 0, &g);
  float out[5];
  nv_array *held = nv_multiply_scalar(filled(5, 1), 3);
  cr_assert_eq(nv_eval1(held), NV_OK);
  long d0 = nv__test_donations();
  nv_array *sum = nv_dist_all_sum(held, g);
  READ_F32(sum, out, 5);
  cr_assert_eq(nv__test_donations(), d0, "held by the caller");
  cr_assert(out[0] == 6);
  READ_F32(held, out, 5);
  cr_assert(out[0] == 3 && out[4] == 3, "the held input keeps its values");

  nv_array *t = nv_multiply_scalar(held, 2);
  nv_array *inter = nv_dist_all_sum(t, g);
  nv_release(t);
  d0 = nv__test_donations();
  READ_F32(inter, out, 5);
  cr_assert_eq(nv__test_donations() - d0, 1, "an intermediate is reduced in place");
  cr_assert(out[0] == 12 && out[4] == 12);

  /* Read by another consumer of the same evaluation: not donated. */
  nv_array *x = nv_multiply_scalar(held, 4);
  nv_array *pair[2] = {nv_dist_all_sum(x, g), nv_add_scalar(x, 1)};
  nv_release(x);
  cr_assert_eq(nv_eval(pair, 2), NV_OK);
  READ_F32(pair[0], out, 5);
  cr_assert(out[0] == 24);
  READ_F32(pair[1], out, 5);
  cr_assert(out[0] == 13);
  cr_assert_str_eq(fake_log(f), "reduce 5, reduce 5, reduce 5");
  nv_release(held);
  nv_release(sum);
  nv_release(inter);
  nv_release(pair[0]);
  nv_release(pair[1]);
  nv_group_close(g);
}

/* D25/D27 over the fake's echo: a send's header and payload come back to the matching recv; a
 * recv of another dtype drains the payload (the connection stays aligned) and names both; a
 * message without the tag fails at once. */
Test(dist_order, recv_checks_the_header_and_drains_a_mismatch) {
  nv_group g;
  fake_comm *f = fake_group(-1, 0, &g);
  nv_array *x = filled(3, 5);
  nv_array *s = nv_dist_send(x, 1, g);
  cr_assert_eq(nv_eval1(s), NV_OK);
  int shape[1] = {3};
  nv_array *r = nv_dist_recv(shape, 1, NV_DTYPE_INT32, 1, g);
  cr_assert_eq(nv_eval1(r), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(),
                   "recv: rank 1 sent another dtype or shape than int32 (3,) (it sent float32 (3,))"),
            "%s", nv_last_error());
  cr_assert_eq(f->echo_len, 0, "the payload was drained");
  nv_array *s2 = nv_dist_send(x, 1, g);
  nv_array *r2 = nv_dist_recv_like(x, 1, g);
  cr_assert_eq(nv_eval1(s2), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_eval1(r2), NV_OK, "%s", nv_last_error());
  float out[3];
  READ_F32(r2, out, 3);
  cr_assert(out[0] == 5 && out[2] == 5);
  f->echo_len = 512; /* a message of zeros: no tag */
  memset(f->echo, 0, 512);
  nv_array *r3 = nv_dist_recv_like(x, 1, g);
  cr_assert_eq(nv_eval1(r3), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "recv: rank 1 sent no array header"), "%s", nv_last_error());
  nv_release(x);
  nv_release(s);
  nv_release(r);
  nv_release(s2);
  nv_release(r2);
  nv_release(r3);
  nv_group_close(g);
}

/* D34: a collective's errors name the op and the line that built it, both the builder's own
 * (a bad argument) and those of its evaluation. */
Test(dist_order, errors_name_the_op_and_the_callers_line) {
  nv_group g;
  fake_group(5, 0, &g);
  nv_array *x = filled(5, 1);
  int line = __LINE__ + 1;
  nv_array *bad = nv_dist_send(x, 0, g);
  char want[256];
  snprintf(want, sizeof want, "send: rank 0 is not another rank of a group of 2 (send called at %s:%d)",
           __FILE__, line);
  cr_assert_eq(nv_array_status(bad), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), want), "%s", nv_last_error());
  line = __LINE__ + 1;
  nv_array *s = nv_dist_all_sum(x, g);
  cr_assert_eq(nv_eval1(s), NV_ERR_PEER_LOST);
  snprintf(want, sizeof want, "all_sum: rank 1 left (all_sum called at %s:%d)", __FILE__, line);
  cr_assert(strstr(nv_last_error(), want), "%s", nv_last_error());
  /* A shape spec recv cannot take, and a place set but not used by the next builder. */
  nv_array *r = nv_dist_recv((int[]){2, -1}, 2, NV_DTYPE_FLOAT32, 1, g);
  cr_assert_eq(nv_array_status(r), NV_ERR_INVALID_ARGUMENT);
  cr_assert(strstr(nv_last_error(), "recv: negative dimension -1 in the shape (recv called at"),
            "%s", nv_last_error());
  nv_release(x);
  nv_release(bad);
  nv_release(s);
  nv_release(r);
  nv_group_close(g);
}
