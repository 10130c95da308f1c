/* Helpers shared by hrx's tests: an engine-independent kernel, staging through host-visible
 * buffers, and a gate that holds a region "running" until the test opens it. */
#ifndef HRX_TEST_UTIL_H
#define HRX_TEST_UTIL_H

#include <hrx.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef HRX_TEST_ENGINE
#define HRX_TEST_ENGINE HRX_ENGINE_HOST
#endif

/* Creates a runtime of the tested engine; returns HRX_E_NO_DEVICE where no GPU is present so
 * the caller can skip. */
static inline hrx_status ut_runtime(uint32_t slots, uint32_t capacity, hrx_runtime **out) {
  hrx_runtime_options o;
  hrx_runtime_options_init(&o);
  o.engine = HRX_TEST_ENGINE;
  if (slots) o.graph_slots = slots;
  if (capacity) o.capacity = capacity;
  return hrx_runtime_create(&o, out);
}

/* ---- the "add" kernel: x[i] += c over n floats (binding 0 read-write, constant 0 f32) ---- */

static inline hrx_status ut_add_host(const hrx_host_launch *l, void *user) {
  (void)user;
  float *x = (float *)l->bindings[0];
  size_t n = l->lengths[0] / sizeof(float);
  for (size_t i = 0; i < n; i++) x[i] += l->constants[0].value.f32;
  return HRX_OK;
}

/* y[i] = a * x[i] + y[i]: binding 0 read (x), binding 1 read-write (y), constant 0 f32 (a). */
static inline hrx_status ut_axpy_host(const hrx_host_launch *l, void *user) {
  (void)user;
  const float *x = (const float *)l->bindings[0];
  float *y = (float *)l->bindings[1];
  size_t n = l->lengths[1] / sizeof(float);
  for (size_t i = 0; i < n; i++) y[i] = l->constants[0].value.f32 * x[i] + y[i];
  return HRX_OK;
}

static const char ut_cuda_source[] =
    "extern \"C\" __global__ void add(float *x, float c) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < N) x[i] += c;\n"
    "}\n"
    "extern \"C\" __global__ void axpy(const float *x, float *y, float a) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < N) y[i] = a * x[i] + y[i];\n"
    "}\n";

static inline hrx_status ut_kernel(hrx_runtime *rt, const char *name, size_t n, float c,
                                   hrx_kernel **out) {
  int axpy = strcmp(name, "axpy") == 0;
  hrx_binding_contract b[2] = {{HRX_ACCESS_READ_WRITE, 4, n * sizeof(float)},
                               {HRX_ACCESS_READ_WRITE, 4, n * sizeof(float)}};
  if (axpy) b[0].access = HRX_ACCESS_READ;
  hrx_constant k;
  memset(&k, 0, sizeof k);
  k.size = 4;
  k.value.f32 = c;
  hrx_kernel_contract contract = {b, axpy ? 2u : 1u, &k, 1};
  uint32_t grid[3] = {(uint32_t)((n + 255) / 256), 1, 1}, block[3] = {256, 1, 1};
  if (hrx_runtime_engine(rt) == HRX_ENGINE_HOST)
    return hrx_kernel_create_host(rt, &contract, grid, block, axpy ? ut_axpy_host : ut_add_host,
                                  NULL, out);
  char def[64];
  snprintf(def, sizeof def, "-DN=%zuu", n);
  const char *opts[1] = {def};
  return hrx_kernel_create_source(rt, ut_cuda_source, name, opts, 1, &contract, grid, block, out);
}

/* ---- staging ---- */

/* Writes `bytes` from `data` into dst (any memory) through a host-visible staging buffer. */
static inline hrx_status ut_put(hrx_runtime *rt, hrx_buffer *dst, size_t offset, const void *data,
                                size_t bytes) {
  if (hrx_buffer_memory(dst) != HRX_MEMORY_DEVICE) {
    void *p;
    hrx_status s = hrx_buffer_map(dst, HRX_ACCESS_WRITE, &p);
    if (s != HRX_OK) return s;
    memcpy((char *)p + offset, data, bytes);
    return hrx_buffer_unmap(dst, HRX_ACCESS_WRITE);
  }
  hrx_buffer *st = NULL;
  hrx_graph *g = NULL;
  hrx_prepared *pg = NULL;
  hrx_completion *c = NULL;
  hrx_status s = hrx_buffer_create(rt, HRX_MEMORY_HOST_VISIBLE, bytes, &st);
  if (s == HRX_OK) s = ut_put(rt, st, 0, data, bytes);
  if (s == HRX_OK) s = hrx_graph_create(rt, &g);
  if (s == HRX_OK)
    s = hrx_graph_copy(g, hrx_view_make(dst, offset, bytes), hrx_view_whole(st), NULL);
  if (s == HRX_OK) s = hrx_graph_prepare(g, &pg);
  if (s == HRX_OK) g = NULL;
  if (s == HRX_OK) s = hrx_submit(pg, &c);
  if (s == HRX_OK) s = hrx_completion_wait(c, 20000000000ull);
  hrx_completion_release(c);
  hrx_prepared_release(pg);
  hrx_graph_release(g);
  hrx_buffer_release(st);
  return s;
}

/* Reads `bytes` of src into `data`. */
static inline hrx_status ut_get(hrx_runtime *rt, hrx_buffer *src, size_t offset, void *data,
                                size_t bytes) {
  if (hrx_buffer_memory(src) != HRX_MEMORY_DEVICE) {
    void *p;
    hrx_status s = hrx_buffer_map(src, HRX_ACCESS_READ, &p);
    if (s != HRX_OK) return s;
    memcpy(data, (char *)p + offset, bytes);
    return hrx_buffer_unmap(src, HRX_ACCESS_READ);
  }
  hrx_buffer *st = NULL;
  hrx_graph *g = NULL;
  hrx_prepared *pg = NULL;
  hrx_completion *c = NULL;
  hrx_status s = hrx_buffer_create(rt, HRX_MEMORY_HOST_VISIBLE, bytes, &st);
  if (s == HRX_OK) s = hrx_graph_create(rt, &g);
  if (s == HRX_OK)
    s = hrx_graph_copy(g, hrx_view_whole(st), hrx_view_make(src, offset, bytes), NULL);
  if (s == HRX_OK) s = hrx_graph_prepare(g, &pg);
  if (s == HRX_OK) g = NULL;
  if (s == HRX_OK) s = hrx_submit(pg, &c);
  if (s == HRX_OK) s = hrx_completion_wait(c, 20000000000ull);
  if (s == HRX_OK) s = ut_get(rt, st, 0, data, bytes);
  hrx_completion_release(c);
  hrx_prepared_release(pg);
  hrx_graph_release(g);
  hrx_buffer_release(st);
  return s;
}

/* Fresh random floats in [-1, 1) from a seeded generator (the seed is printed once). */
static inline void ut_random(float *x, size_t n, unsigned *seed) {
  for (size_t i = 0; i < n; i++) {
    *seed = *seed * 1664525u + 1013904223u;
    x[i] = (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

static inline unsigned ut_seed(void) {
  static unsigned s;
  if (!s) {
    s = (unsigned)time(NULL) | 1u;
    fprintf(stderr, "hrx tests: random seed %u\n", s);
  }
  return s++;
}

/* ---- gate: a host callback that blocks until opened (10 s at most, then fails) ---- */

typedef struct ut_gate {
  pthread_mutex_t m;
  pthread_cond_t c;
  int open;
  int entered;
  int fail; /* return HRX_E_CALLBACK instead of HRX_OK */
} ut_gate;

/* A global log of marks, written by ut_mark_cb (user data: the mark, cast to a pointer). */
static pthread_mutex_t ut_log_lock = PTHREAD_MUTEX_INITIALIZER;
static int ut_log[256];
static int ut_log_n;

static inline hrx_status ut_mark_cb(const hrx_callback_view *v, size_t n, void *user) {
  (void)v;
  (void)n;
  pthread_mutex_lock(&ut_log_lock);
  if (ut_log_n < 256) ut_log[ut_log_n++] = (int)(intptr_t)user;
  pthread_mutex_unlock(&ut_log_lock);
  return HRX_OK;
}

static inline void ut_log_reset(void) {
  pthread_mutex_lock(&ut_log_lock);
  ut_log_n = 0;
  pthread_mutex_unlock(&ut_log_lock);
}

/* Returns the position of mark m in the log, or -1. */
static inline int ut_log_pos(int m) {
  int pos = -1;
  pthread_mutex_lock(&ut_log_lock);
  for (int i = 0; i < ut_log_n && pos < 0; i++)
    if (ut_log[i] == m) pos = i;
  pthread_mutex_unlock(&ut_log_lock);
  return pos;
}

static inline void ut_gate_init(ut_gate *g) {
  memset(g, 0, sizeof *g);
  pthread_mutex_init(&g->m, NULL);
  pthread_cond_init(&g->c, NULL);
}

static inline void ut_gate_destroy(ut_gate *g) {
  pthread_cond_destroy(&g->c);
  pthread_mutex_destroy(&g->m);
}

static inline struct timespec ut_deadline(int seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += seconds;
  return ts;
}

static inline hrx_status ut_gate_cb(const hrx_callback_view *v, size_t n, void *user) {
  (void)v;
  (void)n;
  ut_gate *g = user;
  struct timespec ts = ut_deadline(10);
  pthread_mutex_lock(&g->m);
  g->entered++;
  pthread_cond_broadcast(&g->c);
  int rc = 0;
  while (!g->open && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g->c, &g->m, &ts);
  int fail = g->fail || !g->open;
  pthread_mutex_unlock(&g->m);
  return fail ? HRX_E_CALLBACK : HRX_OK;
}

static inline void ut_gate_open(ut_gate *g) {
  pthread_mutex_lock(&g->m);
  g->open = 1;
  pthread_cond_broadcast(&g->c);
  pthread_mutex_unlock(&g->m);
}

/* Waits until the gate's callback has been entered `k` times; returns 0 on timeout. */
static inline int ut_gate_entered(ut_gate *g, int k) {
  struct timespec ts = ut_deadline(10);
  int rc = 0;
  pthread_mutex_lock(&g->m);
  while (g->entered < k && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g->c, &g->m, &ts);
  int ok = g->entered >= k;
  pthread_mutex_unlock(&g->m);
  return ok;
}

#endif
