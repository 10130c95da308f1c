/* The distributed family's test double (seed 004 D48): a communicator that is rank 0 of two,
 * whose peer holds the same data as this rank (so a sum doubles it and max/min keep it), that
 * echoes every send back as the next receive from it, runs each operation slowly, logs every
 * operation, and fails the reduction of a chosen element count as a lost peer would. Shared by
 * tests/c/test_dist_order.c (CPU streams, threads standing for the GPU side) and
 * tests/gpu/test_gpu_dist_order.c (the seed's GPU-stream tests D40t-D47t). */
#ifndef NUVEC_TEST_DIST_FAKE_H
#define NUVEC_TEST_DIST_FAKE_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "distributed/dist_internal.h"

typedef struct fake_comm {
  nv__comm base;
  pthread_mutex_t lock;
  char log[64][32]; /* "reduce N", "gather N", "scatter N", "send N", "recv N", "health" */
  int nlog;
  long fail_at;  /* the element count whose reduction fails ("rank 1 left"), or -1 */
  int delay_ms;  /* how long each operation takes */
  unsigned char echo[1 << 16]; /* what was sent and not yet received back, in order */
  size_t echo_head, echo_len;
  int destroyed; /* set by destroy (the group's close) */
} fake_comm;

static inline void fake_note(fake_comm *f, const char *what, size_t n) {
  pthread_mutex_lock(&f->lock);
  if (f->nlog < 64) snprintf(f->log[f->nlog++], sizeof f->log[0], "%s %zu", what, n);
  pthread_mutex_unlock(&f->lock);
}

static inline void fake_sleep(const fake_comm *f) {
  struct timespec ts = {0, (long)f->delay_ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* The peer's contribution to a sum of identical data: each element doubled. */
static inline void fake_double(void *buf, size_t count, nv_dtype t) {
  for (size_t i = 0; i < count; i++) {
    switch (t) {
      case NV_DTYPE_FLOAT32: ((float *)buf)[i] *= 2; break;
      case NV_DTYPE_FLOAT64: ((double *)buf)[i] *= 2; break;
      case NV_DTYPE_INT32: ((int32_t *)buf)[i] *= 2; break;
      case NV_DTYPE_INT64: ((int64_t *)buf)[i] *= 2; break;
      default: break; /* the tests sum these dtypes only */
    }
  }
}

static inline nv_status fake_all_reduce(nv__comm *c, const void *in, void *buf, size_t count,
                                        nv_dtype t, int op) {
  fake_comm *f = (fake_comm *)c;
  fake_sleep(f);
  fake_note(f, "reduce", count);
  if (f->fail_at >= 0 && (size_t)f->fail_at == count)
    return nv__set_error(NV_ERR_PEER_LOST, "rank 1 left");
  if (buf != in) memcpy(buf, in, count * nv_dtype_size(t));
  if (op == NV__RED_SUM) fake_double(buf, count, t);
  return NV_OK;
}

static inline nv_status fake_all_gather(nv__comm *c, const void *in, void *out, size_t n) {
  fake_comm *f = (fake_comm *)c;
  fake_sleep(f);
  fake_note(f, "gather", n);
  memcpy(out, in, n);
  memcpy((char *)out + n, in, n);
  return NV_OK;
}

static inline nv_status fake_sum_scatter(nv__comm *c, const void *in, void *out, size_t count,
                                         nv_dtype t) {
  fake_comm *f = (fake_comm *)c;
  fake_sleep(f);
  fake_note(f, "scatter", count);
  memcpy(out, in, count * nv_dtype_size(t)); /* rank 0's part */
  fake_double(out, count, t);
  return NV_OK;
}

static inline nv_status fake_send(nv__comm *c, const void *buf, size_t n, int dst) {
  fake_comm *f = (fake_comm *)c;
  (void)dst;
  fake_note(f, "send", n);
  pthread_mutex_lock(&f->lock);
  bool fits = f->echo_head + f->echo_len + n <= sizeof f->echo;
  if (fits) {
    memcpy(f->echo + f->echo_head + f->echo_len, buf, n);
    f->echo_len += n;
  }
  pthread_mutex_unlock(&f->lock);
  return fits ? NV_OK : nv__set_error(NV_ERR_BACKEND, "the fake's echo buffer is full");
}

static inline nv_status fake_recv(nv__comm *c, void *buf, size_t n, int src) {
  fake_comm *f = (fake_comm *)c;
  (void)src;
  fake_note(f, "recv", n);
  pthread_mutex_lock(&f->lock);
  bool have = f->echo_len >= n;
  if (have) {
    memcpy(buf, f->echo + f->echo_head, n);
    f->echo_head += n;
    f->echo_len -= n;
    if (!f->echo_len) f->echo_head = 0;
  }
  pthread_mutex_unlock(&f->lock);
  return have ? NV_OK : nv__set_error(NV_ERR_PEER_LOST, "rank 1 sent nothing");
}

static inline nv_status fake_split(nv__comm *c, int color, int key, nv__comm **out) {
  (void)c, (void)color, (void)key, (void)out;
  return nv__set_error(NV_ERR_UNSUPPORTED, "the fake does not split");
}

static inline nv_status fake_health(nv__comm *c) {
  fake_note((fake_comm *)c, "health", 0);
  return NV_OK;
}

/* The group's close destroys the communicator: the test owns the memory, so it only notes it. */
static inline void fake_destroy(nv__comm *c) { ((fake_comm *)c)->destroyed = 1; }

static const nv__comm_ops fake_ops = {fake_all_reduce, fake_all_gather, fake_sum_scatter,
                                      fake_send,       fake_recv,       fake_split,
                                      fake_health,     fake_destroy};

/* A fresh fake (static storage, reset per test) registered as a new group in *g. */
static inline fake_comm *fake_group(long fail_at, int delay_ms, nv_group *g) {
  static fake_comm f;
  memset(&f, 0, sizeof f);
  pthread_mutex_init(&f.lock, NULL);
  f.base = (nv__comm){&fake_ops, "fake", 0, 2};
  f.fail_at = fail_at;
  f.delay_ms = delay_ms;
  *g = nv__group_register(&f.base);
  return &f;
}

/* The log as one string ("reduce 1, reduce 2"). */
static inline const char *fake_log(fake_comm *f) {
  static char s[64 * 34];
  s[0] = 0;
  pthread_mutex_lock(&f->lock);
  for (int i = 0; i < f->nlog; i++) {
    if (i) strcat(s, ", ");
    strcat(s, f->log[i]);
  }
  pthread_mutex_unlock(&f->lock);
  return s;
}

#endif
