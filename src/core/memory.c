/* Data buffers: a size-class cache over aligned allocations, active/peak/cache counters and
 * the hard memory limit (DESIGN §6). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/internal.h"

#define ALIGN 64
#define NCLASSES 256

/* A cached block: the raw allocation, linked through its first word. */
typedef struct block {
  struct block *next;
} block;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static block *cache[NCLASSES];
static size_t active, peak, cached, limit, cache_limit;
static bool limits_init;
static atomic_long live_buffers;

/* Sentinel guards (NUVEC_DEBUG_GUARDS=1, read once): every data buffer gets GUARD bytes of a
 * known pattern before it and after its last byte (through the end of its size class); freeing
 * checks them and counts violations, so tests catch kernels writing out of bounds. Guarded
 * buffers are not cached. */
#define GUARD 64
#define GUARD_BYTE 0xa5
static int guards = -1;
static atomic_long guard_violations;

static bool guards_on(void) {
  if (guards < 0) guards = nv__env_long("NUVEC_DEBUG_GUARDS", 0) ? 1 : 0;
  return guards == 1;
}

size_t nv_get_guard_violations(void) { return (size_t)atomic_load(&guard_violations); }

/* Buffers of HUGE bytes or more start on a 2 MiB boundary and are advised to the kernel as
 * transparent huge pages (as NumPy does for its arrays from 4 MiB): kernels walking strided
 * rows of such buffers (column sums, transposes) otherwise miss the TLB at every 4 KiB page. */
#define HUGE ((size_t)4 << 20)
#define HUGE_ALIGN ((size_t)2 << 20)

static void *host_alloc(size_t cap) {
  if (cap < HUGE) return aligned_alloc(ALIGN, cap);
  void *p = aligned_alloc(HUGE_ALIGN, (cap + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN);
#ifdef MADV_HUGEPAGE
  if (p) madvise(p, (cap + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN, MADV_HUGEPAGE);
#endif
  return p;
}

static void *guard_alloc(size_t nbytes, size_t cap) {
  unsigned char *p = malloc(cap + 2 * GUARD);
  if (!p) return NULL;
  memset(p, GUARD_BYTE, GUARD);
  memset(p + GUARD + nbytes, GUARD_BYTE, cap - nbytes + GUARD);
  return p + GUARD;
}

static void guard_free(void *ptr, size_t nbytes, size_t cap) {
  unsigned char *p = (unsigned char *)ptr - GUARD;
  bool bad = false;
  for (size_t i = 0; i < GUARD; i++) bad |= p[i] != GUARD_BYTE;
  for (size_t i = GUARD + nbytes; i < cap + 2 * GUARD; i++) bad |= p[i] != GUARD_BYTE;
  if (bad) {
    atomic_fetch_add(&guard_violations, 1);
    fprintf(stderr, "nuvec: a kernel wrote outside a buffer of %zu bytes (guard damaged)\n",
            nbytes);
  }
  free(p);
}

static size_t physical_memory(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || size <= 0) return (size_t)1 << 40;
  return (size_t)pages * (size_t)size;
}

static void init_limits_locked(void) {
  if (limits_init) return;
  limit = (size_t)nv__env_long("NUVEC_MEMORY_LIMIT", 0);
  if (!limit) limit = physical_memory();
  cache_limit = (size_t)nv__env_long("NUVEC_CACHE_LIMIT", 0);
  if (!cache_limit) cache_limit = limit;
  limits_init = true;
}

/* The largest request the size classes take: its class's capacity (at most 2n) and the guard
 * bytes around it still fit a size_t, and it is far past any memory limit. */
#define MAX_REQUEST (SIZE_MAX / 4)

/* Size classes: multiples of 64 bytes up to 1 KiB, then four classes per power of two; -1 for
 * a request too large to allocate. */
static int size_class(size_t n, size_t *cap) {
  if (n > MAX_REQUEST) return -1;
  if (n <= 1024) {
    size_t c = (n + ALIGN - 1) / ALIGN;
    if (c == 0) c = 1;
    *cap = c * ALIGN;
    return (int)c - 1; /* 0..15 */
  }
  int p = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^p < n <= 2^(p+1) */
  size_t base = (size_t)1 << p, quarter = base / 4;
  size_t sub = (n - base + quarter - 1) / quarter; /* 1..4 */
  *cap = base + sub * quarter;
  int cls = 16 + (p - 10) * 4 + (int)sub - 1;
  return cls < NCLASSES ? cls : -1;
}

static void trim_cache_locked(size_t target) {
  for (int c = NCLASSES - 1; c >= 0 && cached > target; c--) {
    while (cache[c] && cached > target) {
      block *b = cache[c];
      cache[c] = b->next;
      size_t cap;
      if (c < 16) cap = (size_t)(c + 1) * ALIGN;
      else {
        int p = (c - 16) / 4 + 10, sub = (c - 16) % 4 + 1;
        size_t base = (size_t)1 << p;
        cap = base + (size_t)sub * (base / 4);
      }
      cached -= cap;
      free(b);
    }
  }
}

static void *raw_alloc(size_t n, size_t *cap_out) {
  size_t cap;
  int cls = size_class(n, &cap);
  if (cls < 0) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "allocation of %zu bytes is too large", n);
    return NULL;
  }
  if (nv__alloc_should_fail()) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes (injected)", n);
    return NULL;
  }
  pthread_mutex_lock(&mem_lock);
  init_limits_locked();
  void *p = NULL;
  if (cache[cls] && !guards_on()) {
    block *b = cache[cls];
    cache[cls] = b->next;
    cached -= cap;
    p = b;
  } else {
    /* Written so that no sum can wrap: cap is at most SIZE_MAX / 2, active and cached at
     * most the limit. */
    if (cap > limit || active + cached > limit - cap) trim_cache_locked(0);
    if (cap > limit || active > limit - cap) {
      pthread_mutex_unlock(&mem_lock);
      nv__set_error(NV_ERR_OUT_OF_MEMORY,
                    "out of memory: %zu bytes requested, %zu active, limit %zu", n, active,
                    limit);
      return NULL;
    }
    pthread_mutex_unlock(&mem_lock);
    p = guards_on() ? guard_alloc(n, cap) : host_alloc(cap);
    if (!p) {
      pthread_mutex_lock(&mem_lock);
      trim_cache_locked(0);
      pthread_mutex_unlock(&mem_lock);
      p = guards_on() ? guard_alloc(n, cap) : host_alloc(cap);
      if (!p) {
        nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", n);
        return NULL;
      }
    }
    pthread_mutex_lock(&mem_lock);
  }
  active += cap;
  if (active > peak) peak = active;
  pthread_mutex_unlock(&mem_lock);
  *cap_out = cap;
  return p;
}

static void raw_free(void *p, size_t nbytes, size_t cap) {
  size_t c2;
  int cls = size_class(cap, &c2);
  pthread_mutex_lock(&mem_lock);
  active -= cap;
  if (guards_on()) {
    pthread_mutex_unlock(&mem_lock);
    guard_free(p, nbytes, cap);
    return;
  }
  if (cls >= 0 && cached + cap <= cache_limit) {
    block *b = p;
    b->next = cache[cls];
    cache[cls] = b;
    cached += cap;
    p = NULL;
  }
  pthread_mutex_unlock(&mem_lock);
  free(p);
}

nv__buffer *nv__buffer_alloc(size_t nbytes) {
  if (nbytes <= NV__INLINE_BYTES && !guards_on()) {
    if (nv__alloc_should_fail()) {
      nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory allocating a buffer (injected)");
      return NULL;
    }
    nv__buffer *b = nv__mem_alloc(sizeof *b + NV__INLINE_BYTES);
    if (!b) {
      nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory allocating a buffer");
      return NULL;
    }
    atomic_init(&b->refs, 1);
    b->ptr = b->inl;
    b->nbytes = nbytes;
    b->capacity = 0;
    b->kind = NV__BUF_INLINE;
    b->destroy = NULL;
    b->ctx = NULL;
    atomic_init(&b->dev, NULL);
    atomic_fetch_add_explicit(&live_buffers, 1, memory_order_relaxed);
    return b;
  }
  nv__buffer *b = nv__malloc(sizeof *b);
  if (!b) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory allocating a buffer");
    return NULL;
  }
  size_t cap;
  void *p = raw_alloc(nbytes, &cap);
  if (!p) {
    nv__free(b);
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->ptr = p;
  b->nbytes = nbytes;
  b->capacity = cap;
  b->kind = NV__BUF_POOL;
  b->destroy = NULL;
  b->ctx = NULL;
  atomic_init(&b->dev, NULL);
  atomic_fetch_add_explicit(&live_buffers, 1, memory_order_relaxed);
  return b;
}

const nv__gpu_hooks *_Atomic nv__gpu_hooks_ptr;

nv__buffer *nv__buffer_new_device(size_t nbytes, nv__devcopy *dev) {
  nv__buffer *b = nv__malloc(sizeof *b);
  if (!b) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory allocating a buffer");
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->ptr = NULL;
  b->nbytes = nbytes;
  b->capacity = 0;
  b->kind = NV__BUF_POOL;
  b->destroy = NULL;
  b->ctx = NULL;
  atomic_init(&b->dev, dev);
  atomic_fetch_add_explicit(&live_buffers, 1, memory_order_relaxed);
  return b;
}

nv__buffer *nv__buffer_wrap(void *ptr, size_t nbytes, int kind, void (*destroy)(void *),
                            void *ctx) {
  nv__buffer *b = nv__malloc(sizeof *b);
  if (!b) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory wrapping a buffer");
    return NULL;
  }
  atomic_init(&b->refs, 1);
  b->ptr = ptr;
  b->nbytes = nbytes;
  b->capacity = 0;
  b->kind = kind;
  b->destroy = destroy;
  b->ctx = ctx;
  atomic_init(&b->dev, NULL);
  atomic_fetch_add_explicit(&live_buffers, 1, memory_order_relaxed);
  return b;
}

void nv__buffer_release(nv__buffer *b) {
  if (!b) return;
  if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1) return;
  atomic_fetch_sub_explicit(&live_buffers, 1, memory_order_relaxed);
  /* The device side first: it may own the host copy (a pinned download), which it frees. */
  if (atomic_load_explicit(&b->dev, memory_order_acquire))
    atomic_load(&nv__gpu_hooks_ptr)->release(b);
  if (b->kind == NV__BUF_POOL && b->capacity) raw_free(b->ptr, b->nbytes, b->capacity);
  else if (b->destroy) b->destroy(b->ctx);
  nv__free(b);
}

long nv__test_live_buffers(void) { return atomic_load(&live_buffers); }

static size_t cpu_active(void) {
  pthread_mutex_lock(&mem_lock);
  size_t r = active;
  pthread_mutex_unlock(&mem_lock);
  return r;
}

static size_t cpu_peak(void) {
  pthread_mutex_lock(&mem_lock);
  size_t r = peak;
  pthread_mutex_unlock(&mem_lock);
  return r;
}

static void cpu_reset_peak(void) {
  pthread_mutex_lock(&mem_lock);
  peak = 0; /* MLX's rule: 0 until the next allocation (memory.h) */
  pthread_mutex_unlock(&mem_lock);
}

static size_t cpu_cache(void) {
  pthread_mutex_lock(&mem_lock);
  size_t r = cached;
  pthread_mutex_unlock(&mem_lock);
  return r;
}

static size_t cpu_set_limit(size_t new_limit) {
  pthread_mutex_lock(&mem_lock);
  init_limits_locked();
  size_t old = limit;
  limit = new_limit ? new_limit : physical_memory();
  if (active + cached > limit) trim_cache_locked(limit > active ? limit - active : 0);
  pthread_mutex_unlock(&mem_lock);
  return old;
}

static size_t cpu_limit(void) {
  pthread_mutex_lock(&mem_lock);
  init_limits_locked();
  size_t r = limit;
  pthread_mutex_unlock(&mem_lock);
  return r;
}

#ifdef NUVEC_HAVE_CUDA
size_t nv__gpu_memory(int index, int what, size_t arg); /* src/cuda/memory.c */
#else
static size_t nv__gpu_memory(int index, int what, size_t arg) {
  (void)index, (void)what, (void)arg;
  return 0;
}
#endif

/* What nv__gpu_memory answers: 0 active, 1 peak, 2 reset peak, 3 cache, 4 set limit, 5 limit,
 * 6 clear cache. */
static size_t device_memory(nv_device d, int what, size_t arg) {
  if (d.type == NV_DEVICE_GPU) return nv__gpu_memory(d.index, what, arg);
  switch (what) {
    case 0: return cpu_active();
    case 1: return cpu_peak();
    case 2: cpu_reset_peak(); return 0;
    case 3: return cpu_cache();
    case 4: return cpu_set_limit(arg);
    case 5: return cpu_limit();
    default: return 0;
  }
}

size_t nv_get_device_active_memory(nv_device d) { return device_memory(d, 0, 0); }
size_t nv_get_device_peak_memory(nv_device d) { return device_memory(d, 1, 0); }
void nv_reset_device_peak_memory(nv_device d) { device_memory(d, 2, 0); }
size_t nv_get_device_cache_memory(nv_device d) { return device_memory(d, 3, 0); }
size_t nv_set_device_memory_limit(nv_device d, size_t limit) { return device_memory(d, 4, limit); }
size_t nv_get_device_memory_limit(nv_device d) { return device_memory(d, 5, 0); }
size_t nv_get_active_memory(void) { return device_memory(nv_default_device(), 0, 0); }
size_t nv_get_peak_memory(void) { return device_memory(nv_default_device(), 1, 0); }
void nv_reset_peak_memory(void) { device_memory(nv_default_device(), 2, 0); }
size_t nv_get_cache_memory(void) { return device_memory(nv_default_device(), 3, 0); }
size_t nv_set_memory_limit(size_t limit) { return device_memory(nv_default_device(), 4, limit); }
size_t nv_get_memory_limit(void) { return device_memory(nv_default_device(), 5, 0); }

size_t nv_set_cache_limit(size_t new_limit) {
  pthread_mutex_lock(&mem_lock);
  init_limits_locked();
  size_t old = cache_limit;
  cache_limit = new_limit;
  trim_cache_locked(cache_limit);
  pthread_mutex_unlock(&mem_lock);
  return old;
}

void nv_clear_cache(void) {
  pthread_mutex_lock(&mem_lock);
  trim_cache_locked(0);
  pthread_mutex_unlock(&mem_lock);
  for (int i = 0; i < nv_device_count(NV_DEVICE_GPU); i++) nv__gpu_memory(i, 6, 0);
}
