/* Status strings, thread-local last error, shared error objects, the host allocation hook. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/internal.h"

#define NV__MSG_MAX 1024
static _Thread_local char last_error[NV__MSG_MAX];

const char *nv_version(void) { return "0.1.0"; }

const char *nv_status_string(nv_status s) {
  switch (s) {
    case NV_OK: return "ok";
    case NV_ERR_INVALID_ARGUMENT: return "invalid argument";
    case NV_ERR_OUT_OF_MEMORY: return "out of memory";
    case NV_ERR_BACKEND: return "backend error";
    case NV_ERR_DEVICE_LOST: return "device lost";
    case NV_ERR_BUSY: return "busy";
    case NV_ERR_IO: return "I/O error";
    case NV_ERR_UNSUPPORTED: return "unsupported";
    case NV_ERR_PEER_LOST: return "peer lost";
  }
  return "unknown status";
}

const char *nv_last_error(void) { return last_error; }
void nv_clear_error(void) { last_error[0] = 0; }

nv_status nv__set_error(nv_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return status;
}

nv_status nv__set_error_obj(const nv__error *e) {
  snprintf(last_error, sizeof last_error, "%s", e->msg);
  return e->status;
}

/* The out-of-memory error used when no message can be allocated: static storage, laid out
 * as an nv__error with its message, set up once. */
static _Alignas(16) unsigned char oom_storage[sizeof(nv__error) + 32];
#define OOM_ERROR ((nv__error *)oom_storage)
static pthread_once_t oom_once = PTHREAD_ONCE_INIT;
static void oom_init(void) {
  atomic_init(&OOM_ERROR->refs, 1);
  OOM_ERROR->status = NV_ERR_OUT_OF_MEMORY;
  memcpy(OOM_ERROR->msg, "out of memory", 14);
}

nv__error *nv__error_oom(void) {
  pthread_once(&oom_once, oom_init);
  return OOM_ERROR;
}

nv__error *nv__error_newv(nv_status status, const char *fmt, va_list ap) {
  char tmp[NV__MSG_MAX];
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof tmp) n = sizeof tmp - 1;
  /* Error objects bypass the failure-injection hook: reporting a failure must not fail. */
  nv__error *e = malloc(sizeof *e + (size_t)n + 1);
  if (!e) return nv__error_oom();
  atomic_init(&e->refs, 1);
  e->status = status;
  memcpy(e->msg, tmp, (size_t)n + 1);
  return e;
}

nv__error *nv__error_new(nv_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nv__error *e = nv__error_newv(status, fmt, ap);
  va_end(ap);
  return e;
}

nv__error *nv__error_retain(nv__error *e) {
  if (e) atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
  return e;
}

void nv__error_release(nv__error *e) {
  if (!e || e == OOM_ERROR) return;
  if (atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1) free(e);
}

const char *nv__shape_str(const int *shape, int ndim, char *buf, size_t size) {
  size_t at = 0;
  at += (size_t)snprintf(buf + at, size - at, "(");
  for (int i = 0; i < ndim && at < size; i++)
    at += (size_t)snprintf(buf + at, size - at, i ? ",%d" : "%d", shape[i]);
  if (at < size) snprintf(buf + at, size - at, ndim == 1 ? ",)" : ")");
  return buf;
}

/* ---- The host allocation hook ---- */

static atomic_long alloc_count;
static atomic_long fail_at; /* the allocation number that must fail; 0: none */

bool nv__alloc_should_fail(void) {
  long n = atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed) + 1;
  long f = atomic_load_explicit(&fail_at, memory_order_relaxed);
  if (f && n == f) {
    atomic_store(&fail_at, 0);
    return true;
  }
  return false;
}

void nv__test_fail_alloc_at(long k) {
  atomic_store(&fail_at, k > 0 ? atomic_load(&alloc_count) + k : 0);
}

long nv__test_alloc_count(void) { return atomic_load(&alloc_count); }

void *nv__malloc(size_t n) {
  if (nv__alloc_should_fail()) return NULL;
  return malloc(n ? n : 1);
}

void *nv__calloc(size_t count, size_t n) {
  if (nv__alloc_should_fail()) return NULL;
  return calloc(count ? count : 1, n ? n : 1);
}

void *nv__realloc(void *p, size_t n) {
  if (nv__alloc_should_fail()) return NULL;
  return realloc(p, n ? n : 1);
}

void nv__free(void *p) { free(p); }
