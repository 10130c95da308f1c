/* Threading stress on the host engine (a plain executable, so it also runs under TSan):
 * several threads submit conflicting and independent work to one runtime at once, poll,
 * cancel and release; every conflicting add must land exactly once, in some order. */
#include "hrx_test_util.h"

enum { THREADS = 4, ROUNDS = 150, N = 64 };

static hrx_runtime *rt;
static hrx_buffer *shared_buf;
static hrx_kernel *add;
static int failures;
static hrx_buffer *own_bufs[THREADS];
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *what, hrx_status s) {
  pthread_mutex_lock(&fail_lock);
  failures++;
  fprintf(stderr, "FAIL %s: %s (%s)\n", what, hrx_status_name(s), hrx_last_error());
  pthread_mutex_unlock(&fail_lock);
}

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  hrx_buffer *own = NULL;
  hrx_graph *g = NULL;
  hrx_prepared *p = NULL;
  hrx_status s = hrx_buffer_create(rt, HRX_MEMORY_DEVICE, N * 4, &own);
  if (s == HRX_OK) s = hrx_graph_create(rt, &g);
  hrx_view vs = hrx_view_whole(shared_buf), vo = hrx_view_whole(own);
  if (s == HRX_OK) s = hrx_graph_dispatch(g, add, &vs, 1, NULL, 0, NULL);
  if (s == HRX_OK) s = hrx_graph_dispatch(g, add, &vo, 1, NULL, 0, NULL);
  if (s == HRX_OK) s = hrx_graph_prepare(g, &p);
  if (s != HRX_OK) {
    fail("setup", s);
    hrx_graph_release(g);
    hrx_buffer_release(own);
    return NULL;
  }
  hrx_completion *prev = NULL;
  int accepted = 0;
  while (accepted < ROUNDS) {
    hrx_completion *c = NULL;
    s = prev ? hrx_submit_after(p, &prev, 1, &c) : hrx_submit(p, &c);
    if (s == HRX_E_BUSY) {
      if (prev) {
        hrx_status w = hrx_completion_wait(prev, 20000000000ull);
        if (w != HRX_OK) fail("wait", w);
        hrx_completion_release(prev);
        prev = NULL;
      }
      continue;
    }
    if (s != HRX_OK) {
      fail("submit", s);
      break;
    }
    accepted++;
    int done;
    hrx_completion_poll(c, &done);
    hrx_completion_release(prev);
    prev = c;
  }
  if (prev) {
    hrx_status w = hrx_completion_wait(prev, 20000000000ull);
    if (w != HRX_OK) fail("final wait", w);
    hrx_completion_release(prev);
  }
  own_bufs[id] = own; /* read by main once every thread is done */
  hrx_prepared_release(p);
  return NULL;
}

int main(void) {
  hrx_runtime_options o;
  hrx_runtime_options_init(&o);
  o.graph_slots = 3;
  o.capacity = 8;
  hrx_status s = hrx_runtime_create(&o, &rt);
  if (s != HRX_OK) {
    fprintf(stderr, "runtime: %s\n", hrx_last_error());
    return 1;
  }
  s = hrx_buffer_create(rt, HRX_MEMORY_DEVICE, N * 4, &shared_buf);
  if (s == HRX_OK) s = ut_kernel(rt, "add", N, 1.0f, &add);
  if (s != HRX_OK) {
    fprintf(stderr, "setup: %s\n", hrx_last_error());
    return 1;
  }
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  float out[N];
  s = hrx_runtime_drain(rt);
  for (int t_i = 0; t_i < THREADS && s == HRX_OK; t_i++) {
    if (!own_bufs[t_i]) continue;
    s = ut_get(rt, own_bufs[t_i], 0, out, sizeof out);
    for (int i = 0; i < N && s == HRX_OK; i++)
      if (out[i] != (float)ROUNDS) {
        fprintf(stderr, "thread %d: own[%d] = %g, wanted %d\n", t_i, i, out[i], ROUNDS);
        failures++;
        break;
      }
    hrx_buffer_release(own_bufs[t_i]);
  }
  if (s == HRX_OK) s = ut_get(rt, shared_buf, 0, out, sizeof out);
  if (s != HRX_OK) fail("read shared", s);
  for (int i = 0; i < N && s == HRX_OK; i++)
    if (out[i] != (float)(THREADS * ROUNDS)) {
      fprintf(stderr, "shared[%d] = %g, wanted %d\n", i, out[i], THREADS * ROUNDS);
      failures++;
      break;
    }
  hrx_counters c;
  hrx_runtime_counters(rt, &c);
  hrx_kernel_release(add);
  hrx_buffer_release(shared_buf);
  hrx_runtime_release(rt);
  printf("threads: %d threads x %d submissions, %llu accepted, %d failures\n", THREADS, ROUNDS,
         (unsigned long long)c.submissions, failures);
  return failures ? 1 : 0;
}
