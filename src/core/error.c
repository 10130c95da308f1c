/* Status strings, thread-local last error, shared error objects, the host allocation hook. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/internal.h"

#define NV__MSG_MAX 1024
static _Thread_local char last_error[NV__MSG_MAX];
static _Thread_local nv_status last_status;

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
void nv_clear_error(void) {
  last_error[0] = 0;
  last_status = NV_OK;
}

nv_status nv__last_status(void) { return last_status; }

nv_status nv__set_error(nv_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  last_status = status;
  return status;
}

nv_status nv__set_error_obj(const nv__error *e) {
  snprintf(last_error, sizeof last_error, "%s", e->msg);
  last_status = e->status;
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

/* Host allocations carry a 16-byte header with their size class. Small blocks (up to 1 KiB,
 * in 64-byte classes) are recycled through a per-thread free list, since graph building
 * allocates and frees a node, a handle and a buffer object per op; sanitizer builds skip the
 * cache so that use-after-free stays visible. */
#define HDR 16
#define CLASS_BYTES 64
#define NCLASS 16
/* Each class caches at most this many bytes per thread. */
#define CACHE_BYTES (4u << 20)
#define LARGE 0xff

typedef struct free_block {
  struct free_block *next;
} free_block;

typedef struct thread_cache {
  free_block *head[NCLASS];
  int count[NCLASS];
} thread_cache;

/* The global-dynamic TLS model stays: libnuvec.so is often dlopen'ed (Python), where the
 * static TLS block may have no room. */
#ifndef NV_DEBUG_ASSERTS
static _Thread_local thread_cache *tcache;
static pthread_key_t tcache_key;
static pthread_once_t tcache_once = PTHREAD_ONCE_INIT;

/* Set once the thread's cache is gone: other thread-exit destructors (the scope stack's) may
 * still free blocks, which then go straight back to malloc. */
static _Thread_local bool tcache_gone;

static void tcache_destroy(void *arg) {
  thread_cache *c = arg;
  tcache = NULL;
  tcache_gone = true;
  for (int k = 0; k < NCLASS; k++)
    while (c->head[k]) {
      free_block *b = c->head[k];
      c->head[k] = b->next;
      free(b);
    }
  free(c);
}

static void tcache_key_init(void) { pthread_key_create(&tcache_key, tcache_destroy); }
#endif

static thread_cache *get_tcache(void) {
#ifdef NV_DEBUG_ASSERTS
  /* Debug and sanitizer builds keep no cache (ASan sees every block); the cache's pieces are
   * not compiled there. */
  return NULL;
#else
  if (!tcache && !tcache_gone) {
    pthread_once(&tcache_once, tcache_key_init);
    tcache = calloc(1, sizeof *tcache);
    if (tcache) pthread_setspecific(tcache_key, tcache);
  }
  return tcache;
#endif
}

void *nv__mem_alloc(size_t n) {
  unsigned cls = n <= (size_t)NCLASS * CLASS_BYTES - HDR ? (unsigned)((n + HDR - 1) / CLASS_BYTES) : LARGE;
  unsigned char *p = NULL;
  if (cls != LARGE) {
    thread_cache *c = get_tcache();
    if (c && c->head[cls]) {
      p = (unsigned char *)c->head[cls];
      c->head[cls] = ((free_block *)p)->next;
      c->count[cls]--;
    } else {
      p = malloc((size_t)(cls + 1) * CLASS_BYTES);
    }
  } else {
    p = n > SIZE_MAX - HDR ? NULL : malloc(n + HDR);
  }
  if (!p) return NULL;
  p[0] = (unsigned char)cls;
  return p + HDR;
}

void nv__mem_free(void *ptr) {
  if (!ptr) return;
  unsigned char *p = (unsigned char *)ptr - HDR;
  unsigned cls = p[0];
  if (cls != LARGE) {
    thread_cache *c = get_tcache();
    if (c && (size_t)c->count[cls] * (cls + 1) * CLASS_BYTES < CACHE_BYTES) {
      ((free_block *)p)->next = c->head[cls];
      c->head[cls] = (free_block *)p;
      c->count[cls]++;
      return;
    }
  }
  free(p);
}

void *nv__malloc(size_t n) {
  if (nv__alloc_should_fail()) return NULL;
  return nv__mem_alloc(n);
}

void *nv__calloc(size_t count, size_t n) {
  if (n && count > SIZE_MAX / n) return NULL;
  void *p = nv__malloc(count * n);
  if (p) memset(p, 0, count * n);
  return p;
}

void *nv__realloc(void *ptr, size_t n) {
  if (nv__alloc_should_fail()) return NULL;
  if (!ptr) return nv__mem_alloc(n);
  unsigned char *p = (unsigned char *)ptr - HDR;
  size_t old = p[0] == LARGE ? SIZE_MAX : (size_t)(p[0] + 1) * CLASS_BYTES - HDR;
  if (p[0] != LARGE && n <= old) return ptr;
  if (p[0] == LARGE) {
    unsigned char *q = n > SIZE_MAX - HDR ? NULL : realloc(p, n + HDR);
    if (!q) return NULL;
    if (n <= (size_t)NCLASS * CLASS_BYTES - HDR) {
      /* A shrunk large block stays marked large. */
    }
    return q + HDR;
  }
  void *q = nv__mem_alloc(n);
  if (!q) return NULL;
  memcpy(q, ptr, old);
  nv__mem_free(ptr);
  return q;
}

void nv__free(void *p) { nv__mem_free(p); }
