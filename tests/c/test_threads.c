/* Run-once across threads (a plain executable, so it also runs under ThreadSanitizer):
 * 8 threads evaluate overlapping graphs 1000 times; every node runs exactly once (global
 * counter), values are right, and a thread waiting on another's node receives its error. */
#include <pthread.h>

#include "testutil.h"

#define THREADS 8
#define SHARED 24
#define ITERS_DEFAULT 1000

static pthread_barrier_t start_bar, done_bar;
static nv_array *shared[SHARED];
static float shared_val[SHARED];
static int iters;
static atomic_int failures;

/* Each thread builds a small graph over some shared nodes and evaluates it concurrently. */
static void *worker(void *arg) {
  int t = (int)(intptr_t)arg;
  for (int it = 0; it < iters; it++) {
    pthread_barrier_wait(&start_bar);
    /* top = sum over picked shared nodes of (s * (t+1)), built from several nodes. */
    nv_array *acc = NULL;
    float want = 0;
    for (int k = 0; k < 4; k++) {
      int pick = (t * 7 + k * 5 + it) % SHARED;
      nv_array *term = nv_multiply_scalar(shared[pick], t + 1);
      want += shared_val[pick] * (float)(t + 1);
      nv_array *next = acc ? nv_add(acc, term) : nv_retain(term);
      nv_release(acc);
      nv_release(term);
      acc = next;
    }
    float got;
    if (nv_array_item_float(acc, &got) != NV_OK || fabsf(got - want) > 1e-3f * fabsf(want)) {
      fprintf(stderr, "thread %d iter %d: got %f want %f (%s)\n", t, it, got, want,
              nv_last_error());
      atomic_fetch_add(&failures, 1);
    }
    nv_release(acc);
    pthread_barrier_wait(&done_bar);
  }
  return NULL;
}

static void run_once_across_threads(void) {
  pthread_t th[THREADS];
  pthread_barrier_init(&start_bar, NULL, THREADS + 1);
  pthread_barrier_init(&done_bar, NULL, THREADS + 1);
  for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
  for (int it = 0; it < iters; it++) {
    /* A fresh shared graph: a chain with a diamond, SHARED nodes over one input. */
    float v = 0.5f + (float)(it % 7);
    nv_array *x = f32v(&v, 1);
    shared[0] = nv_add_scalar(x, 1);
    shared_val[0] = v + 1;
    for (int i = 1; i < SHARED; i++) {
      nv_array *a = shared[i - 1], *b = shared[i / 2];
      shared[i] = i % 3 ? nv_add(a, b) : nv_multiply_scalar(a, 0.5);
      shared_val[i] = i % 3 ? shared_val[i - 1] + shared_val[i / 2] : shared_val[i - 1] * 0.5f;
    }
    long before = nv__test_eval_count();
    pthread_barrier_wait(&start_bar);
    pthread_barrier_wait(&done_bar);
    /* Every shared node the threads reached ran once; every thread node ran once. */
    long ran = nv__test_eval_count() - before;
    long reached = 0;
    for (int i = 0; i < SHARED; i++) reached += nv_array_is_evaluated(shared[i]);
    /* Per thread: 4 multiplies and 3 adds. */
    long want = reached + THREADS * 7;
    CHECK(ran == want, "iteration %d: %ld nodes ran, expected %ld", it, ran, want);
    for (int i = 0; i < SHARED; i++) nv_release(shared[i]);
    nv_release(x);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  CHECK(atomic_load(&failures) == 0, "%d wrong values", atomic_load(&failures));
  pthread_barrier_destroy(&start_bar);
  pthread_barrier_destroy(&done_bar);
}

/* A thread that needs a node another thread is running waits for it and gets its error. */
static nv_array *waited_on;
static nv_status waiter_status;
static char waiter_msg[256];
static void *waiter(void *arg) {
  (void)arg;
  nv_array *y = nv_exp(waited_on);
  waiter_status = nv_eval1(y);
  snprintf(waiter_msg, sizeof waiter_msg, "%s", nv_last_error());
  nv_release(y);
  return NULL;
}

static void waiters_receive_the_owners_error(void) {
  float v = 1;
  nv_array *x = f32v(&v, 1);
  waited_on = nv_add_scalar(x, 1);
  nv__test_begin_running(waited_on, 999999); /* "another thread" runs it */
  pthread_t th;
  pthread_create(&th, NULL, waiter, NULL);
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL); /* the waiter blocks on the running node meanwhile */
  nv__test_end_running(waited_on, NV_ERR_BACKEND, "add: the kernel failed (injected)");
  pthread_join(th, NULL);
  CHECK(waiter_status == NV_ERR_BACKEND, "status %d", waiter_status);
  CHECK(nv__test_live_completions() == 0, "the completion was released");
  CHECK(strstr(waiter_msg, "injected") != NULL, "message '%s'", waiter_msg);
  nv_release(waited_on);
  nv_release(x);
}

/* Evaluating an array from inside its own evaluation is an error, not a deadlock. */
/* running_releases_its_completion: both ends of a running node release the completion its
 * waiters share — finishing normally and failing (the abnormal exit). */
typedef struct waiter_arg {
  nv_array *x;
  nv_status status;
} waiter_arg;

static void *plain_waiter(void *arg) {
  waiter_arg *w = arg;
  nv_array *y = nv_exp(w->x);
  w->status = nv_eval1(y);
  nv_release(y);
  return NULL;
}

static void running_releases_its_completion(void) {
  for (int fail = 0; fail <= 1; fail++) {
    float v = 2;
    nv_array *x = f32v(&v, 1);
    nv_array *n = nv_add_scalar(x, 1);
    nv__test_begin_running(n, 999998);
    pthread_t th[3];
    waiter_arg w[3];
    for (int i = 0; i < 3; i++) {
      w[i] = (waiter_arg){n, NV_OK};
      pthread_create(&th[i], NULL, plain_waiter, &w[i]);
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    nv__test_end_running(n, fail ? NV_ERR_BACKEND : NV_OK, "failed while running");
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK(nv__test_live_completions() == 0, "fail=%d: completion still alive", fail);
    for (int i = 0; i < 3; i++)
      CHECK(w[i].status == (fail ? NV_ERR_BACKEND : NV_OK), "fail=%d: status %d", fail,
            w[i].status);
    nv_release(n);
    nv_release(x);
  }
}

static void eval_inside_own_evaluation(void) {
  float v = 1;
  nv_array *x = f32v(&v, 1);
  nv_array *n = nv_add_scalar(x, 1);
  nv_array *y = nv_exp(n);
  nv__test_begin_running(n, 0);
  nv_status s = nv_eval1(y);
  CHECK(s == NV_ERR_INVALID_ARGUMENT, "status %d", s);
  CHECK(strstr(nv_last_error(), "within its own evaluation") != NULL, "%s", nv_last_error());
  nv__test_end_running(n, NV_OK, NULL);
  CHECK(nv_eval1(n) == NV_OK, "%s", nv_last_error());
  nv_release(y);
  nv_release(n);
  nv_release(x);
}

int main(void) {
  iters = (int)nv__env_long("NUVEC_TEST_THREAD_ITERS", ITERS_DEFAULT);
  run_once_across_threads();
  waiters_receive_the_owners_error();
  eval_inside_own_evaluation();
  running_releases_its_completion();
  printf("threads: %d iterations x %d threads, run-once held\n", iters, THREADS);
  return 0;
}
