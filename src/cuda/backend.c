/* The CUDA backend (DESIGN §13): GPU nodes of an evaluation are recorded in order into an hrx
 * graph per device, committed every NV__GPU_COMMIT_OPS operations and at the end, and
 * submitted after the evaluation's previous submission on that device (so a failure fails the
 * evaluation's later work, E6). Each written buffer points at its submission; readers wait for
 * exactly that one. Prepared graphs are cached by structure and updated in place for new
 * buffers, so a repeated step replays. A primitive without a CUDA kernel runs its CPU kernel
 * on data read back (counted, NUVEC_LOG_FALLBACK=1 names it). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda_internal.h"

/* Operations recorded before an evaluation's open graph is submitted while the rest is still
 * being encoded (so the GPU starts on the first part): the first submission's and the later
 * ones'. NUVEC_GPU_FIRST_COMMIT_OPS / NUVEC_GPU_COMMIT_OPS set them (measurement switches, read
 * once per process). */
#define NV__GPU_COMMIT_OPS 50
static int commit_ops[2] = {NV__GPU_COMMIT_OPS, NV__GPU_COMMIT_OPS};
#define NV__GPU_INFLIGHT 64
#define NV__GPU_GRAPH_BUCKETS 1024
#define NV__GPU_KERNEL_BUCKETS 4096
#define NV__GPU_PREPARED_PER_KEY 4

void nv__gpu_register(void); /* register.c */
void nv__gpu_note_fallback(int prim); /* src/core/device.c */

/* Host-time profiling (NUVEC_GPU_PROFILE=1, read when a device starts; bench/gpu prints it):
 * off by default, as reading the clock ten times per recorded kernel costs a tenth of a tiny
 * operation's time. */
static atomic_int prof_on;

/* ---- errors ---- */

nv_status nv__gpu_hrx_error(hrx_status s, const char *what) {
  nv_status st = NV_ERR_BACKEND;
  if (s == HRX_E_OUT_OF_MEMORY) st = NV_ERR_OUT_OF_MEMORY;
  else if (s == HRX_E_DEVICE_LOST || s == HRX_E_CANCELLED) st = NV_ERR_DEVICE_LOST;
  else if (s == HRX_E_BUSY) st = NV_ERR_BUSY;
  else if (s == HRX_E_NO_DEVICE || s == HRX_E_UNSUPPORTED) st = NV_ERR_UNSUPPORTED;
  char why[512];
  snprintf(why, sizeof why, "%s", hrx_last_error());
  return nv__set_error(st, "%s: %s (%s)", what, why[0] ? why : "GPU failure", hrx_status_name(s));
}

/* ---- callbacks' failure notes ---- */

nv__gpu_note *nv__gpu_note_take(nv__gpu_ctx *ctx) {
  if (!ctx->note) {
    nv__gpu_note *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    atomic_init(&n->refs, 1);
    atomic_init(&n->status, 0);
    ctx->note = n;
  }
  atomic_fetch_add(&ctx->note->refs, 1);
  return ctx->note;
}

void nv__gpu_note_fail(nv__gpu_note *n, nv_status status, const char *fmt, ...) {
  int zero = 0;
  if (!n || !atomic_compare_exchange_strong(&n->status, &zero, -1)) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(n->msg, sizeof n->msg, fmt, ap);
  va_end(ap);
  atomic_store(&n->status, status != NV_OK ? (int)status : (int)NV_ERR_BACKEND);
}

nv_status nv__gpu_note_read(nv__gpu_note *n, char *msg, size_t cap) {
  int st = n ? atomic_load(&n->status) : 0;
  if (st <= 0) return NV_OK; /* none, or one still being written (not a finished run's) */
  snprintf(msg, cap, "%s", n->msg);
  return (nv_status)st;
}

void nv__gpu_note_release(nv__gpu_note *n) {
  if (n && atomic_fetch_sub(&n->refs, 1) == 1) free(n);
}

/* ---- submissions ---- */

static nv__gpu_sub *sub_alloc(void) {
  nv__gpu_sub *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  atomic_init(&s->refs, 1);
  pthread_mutex_init(&s->lock, NULL);
  return s;
}

nv__gpu_sub *nv__gpu_sub_new(hrx_completion *c) {
  nv__gpu_sub *s = sub_alloc();
  if (s) s->c = c;
  return s;
}

nv__gpu_sub *nv__gpu_sub_failed(nv_status status, const char *msg) {
  nv__gpu_sub *s = sub_alloc();
  if (!s) return NULL;
  s->done = true;
  s->status = status;
  snprintf(s->msg, sizeof s->msg, "%s", msg);
  return s;
}

void nv__gpu_sub_release(nv__gpu_sub *s) {
  if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
  if (s->nchecks) {
    /* Never seen finished: its records are free once its work is. */
    if (s->c) hrx_completion_wait(s->c, HRX_WAIT_FOREVER);
    nv__gpu_checks_drop(s->dev, s->checks, s->nchecks);
    free(s->checks);
  }
  for (int i = 0; i < s->nafter; i++) nv__gpu_sub_release(s->after[i]);
  hrx_completion_release(s->c);
  nv__gpu_note_release(s->note);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

/* Records a finished run's result (under s->lock) and drops its completion. */
static void sub_record_locked(nv__gpu_sub *s, hrx_status hs) {
  if (hs != HRX_OK) {
    char why[400];
    snprintf(why, sizeof why, "%s", hrx_last_error());
    s->status = hs == HRX_E_OUT_OF_MEMORY ? NV_ERR_OUT_OF_MEMORY : NV_ERR_DEVICE_LOST;
    snprintf(s->msg, sizeof s->msg, "GPU work failed: %s (%s)", why[0] ? why : "failure",
             hrx_status_name(hs));
    /* A callback that failed said why (a lost peer, a library's status): that is the error. */
    nv_status cs = nv__gpu_note_read(s->note, s->msg, sizeof s->msg);
    if (cs != NV_OK) s->status = cs;
  }
  /* A raised index check fails it; so does a failed submission it ran after (hrx saw that one
   * succeed: an index check of its failed it, and what this one read from it is not valid). */
  nv__gpu_checks_resolve(s);
  for (int i = 0; i < s->nafter; i++) {
    nv__gpu_sub *a = s->after[i];
    if (s->status == NV_OK && nv__gpu_sub_wait(a) != NV_OK) {
      pthread_mutex_lock(&a->lock);
      s->status = a->status;
      snprintf(s->msg, sizeof s->msg, "%s", a->msg);
      pthread_mutex_unlock(&a->lock);
    }
    nv__gpu_sub_release(a);
  }
  s->nafter = 0;
  s->done = true;
  hrx_completion_release(s->c);
  s->c = NULL;
}

nv_status nv__gpu_sub_wait(nv__gpu_sub *s) {
  pthread_mutex_lock(&s->lock);
  if (!s->done) sub_record_locked(s, hrx_completion_wait(s->c, HRX_WAIT_FOREVER));
  nv_status st = s->status;
  if (st != NV_OK) nv__set_error(st, "%s", s->msg);
  pthread_mutex_unlock(&s->lock);
  return st;
}

bool nv__gpu_sub_poll(nv__gpu_sub *s) {
  pthread_mutex_lock(&s->lock);
  if (!s->done) {
    int done = 0;
    if (hrx_completion_poll(s->c, &done) != HRX_OK || done)
      sub_record_locked(s, hrx_completion_status(s->c));
  }
  bool r = s->done;
  pthread_mutex_unlock(&s->lock);
  return r;
}

/* ---- devices ---- */

static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER;
static nv__gpu_dev *_Atomic devs[NV__GPU_MAX_DEVICES];
static pthread_once_t count_once = PTHREAD_ONCE_INIT;
static int device_count;

static void count_devices(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  cudaGetLastError();
  device_count = n < NV__GPU_MAX_DEVICES ? n : NV__GPU_MAX_DEVICES;
}

int nv__gpu_device_count(void) {
  pthread_once(&count_once, count_devices);
  return device_count;
}

nv__gpu_dev *nv__gpu_dev_get(int index) {
  if (index < 0 || index >= nv__gpu_device_count()) {
    nv__set_error(NV_ERR_UNSUPPORTED, "gpu:%d: no such CUDA device (%d present)", index,
                  nv__gpu_device_count());
    return NULL;
  }
  nv__gpu_dev *d = atomic_load_explicit(&devs[index], memory_order_acquire);
  if (d) return d;
  pthread_mutex_lock(&devs_lock);
  d = atomic_load(&devs[index]);
  if (!d) {
    nv__gpu_register();
    hrx_runtime_options o;
    hrx_runtime_options_init(&o);
    o.engine = HRX_ENGINE_CUDA;
    o.device_index = index;
    o.graph_slots = 2;
    o.capacity = 1024;
    hrx_runtime *rt = NULL;
    hrx_status hs = hrx_runtime_create(&o, &rt);
    nv__gpu_dev *nd = hs == HRX_OK ? calloc(1, sizeof *nd) : NULL;
    if (nd) {
      nd->index = index;
      nd->rt = rt;
      pthread_mutex_init(&nd->lock, NULL);
      pthread_mutex_init(&nd->check_lock, NULL);
      size_t free_b = 0, total = 0;
      if (cudaSetDevice(index) != cudaSuccess || cudaMemGetInfo(&free_b, &total) != cudaSuccess)
        total = (size_t)64 << 30;
      cudaGetLastError();
      atomic_store(&prof_on, nv__env_long("NUVEC_GPU_PROFILE", 0) != 0);
      commit_ops[0] = (int)nv__env_long("NUVEC_GPU_FIRST_COMMIT_OPS", NV__GPU_COMMIT_OPS);
      commit_ops[1] = (int)nv__env_long("NUVEC_GPU_COMMIT_OPS", NV__GPU_COMMIT_OPS);
      for (int k = 0; k < 2; k++)
        if (commit_ops[k] < 1) commit_ops[k] = NV__GPU_COMMIT_OPS;
      nd->limit = (size_t)nv__env_long("NUVEC_GPU_MEMORY_LIMIT", 0);
      if (!nd->limit) nd->limit = total;
      nd->cache_limit = nd->limit;
      nd->kernels = calloc(NV__GPU_KERNEL_BUCKETS, sizeof *nd->kernels);
      nd->graphs = calloc(NV__GPU_GRAPH_BUCKETS, sizeof *nd->graphs);
      if (!nd->kernels || !nd->graphs ||
          hrx_buffer_create(rt, HRX_MEMORY_DEVICE, 16, &nd->dummy) != HRX_OK) {
        free(nd->kernels);
        free(nd->graphs);
        free(nd);
        nd = NULL;
      }
    }
    if (!nd) {
      if (hs == HRX_OK) nv__set_error(NV_ERR_OUT_OF_MEMORY, "gpu:%d: out of memory starting", index);
      else nv__gpu_hrx_error(hs, "starting the CUDA backend");
      hrx_runtime_release(rt);
    } else {
      atomic_store_explicit(&devs[index], nd, memory_order_release);
      d = nd;
    }
  }
  pthread_mutex_unlock(&devs_lock);
  return d;
}

/* Records finished submissions and drops them from the list; then, while more than `keep` are
 * in flight, waits for the oldest (backpressure, E13). */
void nv__gpu_sweep(nv__gpu_dev *d, size_t keep) {
  for (;;) {
    nv__gpu_sub *oldest = NULL;
    pthread_mutex_lock(&d->lock);
    size_t w = 0;
    for (size_t i = 0; i < d->ninflight; i++) {
      nv__gpu_sub *s = d->inflight[i];
      if (nv__gpu_sub_poll(s)) nv__gpu_sub_release(s);
      else d->inflight[w++] = s;
    }
    d->ninflight = w;
    if (w > keep) {
      oldest = d->inflight[0];
      atomic_fetch_add(&oldest->refs, 1);
    }
    pthread_mutex_unlock(&d->lock);
    if (!oldest) return;
    nv__gpu_sub_wait(oldest);
    nv__gpu_sub_release(oldest);
  }
}

static void inflight_push(nv__gpu_dev *d, nv__gpu_sub *s) {
  pthread_mutex_lock(&d->lock);
  if (d->ninflight == d->cinflight) {
    size_t nc = d->cinflight ? d->cinflight * 2 : 64;
    nv__gpu_sub **p = realloc(d->inflight, nc * sizeof *p);
    if (p) {
      d->inflight = p;
      d->cinflight = nc;
    }
  }
  if (d->ninflight < d->cinflight) {
    atomic_fetch_add(&s->refs, 1);
    d->inflight[d->ninflight++] = s;
  }
  pthread_mutex_unlock(&d->lock);
}

nv_status nv__gpu_synchronize(int index) {
  nv__gpu_dev *d = nv__gpu_dev_get(index);
  if (!d) return NV_ERR_UNSUPPORTED;
  nv__gpu_sweep(d, 0);
  hrx_status hs = hrx_runtime_drain(d->rt);
  if (hs != HRX_OK) return nv__gpu_hrx_error(hs, "synchronize");
  return NV_OK;
}

/* ---- interned kernels: one hrx kernel per (function, launch shape, contract) ---- */

struct nv__gpu_kentry {
  nv__gpu_kentry *next;
  uint64_t hash;
  hrx_kernel *kernel;
  size_t keylen;
  uint64_t key[];
};

static uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

static nv_status kernel_for(nv__gpu_dev *d, const nv__gpu_launch *l, hrx_kernel **out) {
  uint64_t key[16 + 2 * 64 + 1 + NV__GPU_MAX_CONSTANTS];
  size_t n = 0;
  key[n++] = (uint64_t)(uintptr_t)l->func;
  key[n++] = (uint64_t)l->grid[0] | (uint64_t)l->grid[1] << 32;
  key[n++] = (uint64_t)l->grid[2] | (uint64_t)l->block[0] << 32;
  key[n++] = (uint64_t)l->block[1] | (uint64_t)l->block[2] << 32;
  key[n++] = (uint64_t)l->shared_bytes | (uint64_t)l->params_size << 32;
  key[n++] = (uint64_t)l->nviews;
  for (int i = 0; i < l->nviews; i++) {
    key[n++] = (uint64_t)l->access[i];
    key[n++] = (uint64_t)l->views[i].length;
  }
  key[n++] = (uint64_t)l->nconstants;
  for (int i = 0; i < l->nconstants; i++) key[n++] = l->constants[i].size;
  uint64_t h = 0;
  for (size_t i = 0; i < n; i++) h = mix(h, key[i]);
  size_t b = h % NV__GPU_KERNEL_BUCKETS;
  pthread_mutex_lock(&d->lock);
  for (nv__gpu_kentry *e = d->kernels[b]; e; e = e->next)
    if (e->hash == h && e->keylen == n && !memcmp(e->key, key, n * sizeof *key)) {
      *out = e->kernel;
      pthread_mutex_unlock(&d->lock);
      return NV_OK;
    }
  pthread_mutex_unlock(&d->lock);
  hrx_binding_contract bc[64];
  for (int i = 0; i < l->nviews; i++)
    bc[i] = (hrx_binding_contract){l->access[i], 1, l->views[i].length};
  hrx_kernel_contract c = {bc, (size_t)l->nviews, l->constants, (size_t)l->nconstants};
  hrx_kernel *k = NULL;
  hrx_status hs = hrx_kernel_create_function(d->rt, l->func, &c, l->params_size, l->shared_bytes,
                                             l->grid, l->block, &k);
  if (hs != HRX_OK) return nv__gpu_hrx_error(hs, "recording a GPU kernel");
  nv__gpu_kentry *e = malloc(sizeof *e + n * sizeof *key);
  if (!e) {
    hrx_kernel_release(k);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory recording a GPU kernel");
  }
  e->hash = h;
  e->kernel = k;
  e->keylen = n;
  memcpy(e->key, key, n * sizeof *key);
  pthread_mutex_lock(&d->lock);
  if (d->nkernels > 65536) { /* bounded: graphs keep the kernels they use */
    for (size_t i = 0; i < NV__GPU_KERNEL_BUCKETS; i++) {
      while (d->kernels[i]) {
        nv__gpu_kentry *x = d->kernels[i];
        d->kernels[i] = x->next;
        hrx_kernel_release(x->kernel);
        free(x);
      }
    }
    d->nkernels = 0;
  }
  e->next = d->kernels[b];
  d->kernels[b] = e;
  d->nkernels++;
  pthread_mutex_unlock(&d->lock);
  *out = k;
  return NV_OK;
}

/* ---- prepared graphs by structure ---- */

struct nv__gpu_gentry {
  nv__gpu_gentry *next;
  uint64_t hash;
  size_t nops;
  hrx_prepared *p[NV__GPU_PREPARED_PER_KEY];
  int n;
};

void nv__gpu_graphs_clear(nv__gpu_dev *d) {
  for (size_t i = 0; i < NV__GPU_GRAPH_BUCKETS; i++) {
    while (d->graphs[i]) {
      nv__gpu_gentry *e = d->graphs[i];
      d->graphs[i] = e->next;
      for (int k = 0; k < e->n; k++) hrx_prepared_release(e->p[k]);
      free(e);
    }
  }
  d->ngraphs = 0;
}

static atomic_long stat_prepared, stat_updated;

/* Where the host's time goes (bench/gpu prints it): nanoseconds per phase, summed. */
enum {
  PROF_ENCODE,
  PROF_PREPARE,
  PROF_SUBMIT,
  PROF_WAIT,
  PROF_COMMITS,
  PROF_OUTPUT,
  PROF_INPUT,
  PROF_KERNEL,
  PROF_RECORD,
  PROF_UNCHANGED,
  PROF_BUSY,
  PROF_NEWPREP,
  PROF_N
};
static atomic_llong prof[PROF_N];


static void prof_add(int what, long long v) {
  if (atomic_load_explicit(&prof_on, memory_order_relaxed))
    atomic_fetch_add_explicit(&prof[what], v, memory_order_relaxed);
}

static long long now_ns(void) {
  if (!atomic_load_explicit(&prof_on, memory_order_relaxed)) return 0;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000ll + t.tv_nsec;
}

/* The cache entry of a structure (under d->lock); made when `create` and there is room. */
static nv__gpu_gentry *graph_entry_locked(nv__gpu_dev *d, uint64_t hash, size_t nops, bool create) {
  size_t b = hash % NV__GPU_GRAPH_BUCKETS;
  nv__gpu_gentry *e = d->graphs[b];
  while (e && (e->hash != hash || e->nops != nops)) e = e->next;
  if (!e && create && d->ngraphs < 4096 && (e = calloc(1, sizeof *e))) {
    e->hash = hash;
    e->nops = nops;
    e->next = d->graphs[b];
    d->graphs[b] = e;
    d->ngraphs++;
  }
  return e;
}

/* A prepared graph for the builder `g` (consumed on success): a cached one of the same
 * structure updated in place (or replayed unchanged), else a new one. The caller holds it
 * exclusively (taken out of the cache, so another thread cannot update it before this one has
 * submitted it) and gives it back with graph_put after submitting. */
static nv_status prepared_for(nv__gpu_dev *d, hrx_graph *g, uint64_t hash, size_t nops,
                              hrx_prepared **out) {
  pthread_mutex_lock(&d->lock);
  nv__gpu_gentry *e = graph_entry_locked(d, hash, nops, false);
  hrx_prepared *cand[NV__GPU_PREPARED_PER_KEY];
  int ncand = 0;
  if (e) {
    for (int k = 0; k < e->n; k++) cand[ncand++] = e->p[k]; /* the cache's references */
    e->n = 0;
  }
  pthread_mutex_unlock(&d->lock);
  hrx_prepared *found = NULL;
  int used = -1;
  for (int k = 0; k < ncand && !found; k++) {
    hrx_update_mode mode;
    hrx_status us = hrx_prepared_update(cand[k], g, 0, &mode);
    if (us == HRX_E_BUSY) prof_add(PROF_BUSY, 1);
    if (us == HRX_OK) {
      atomic_fetch_add(mode == HRX_UPDATE_REINSTANTIATED ? &stat_prepared : &stat_updated, 1);
      if (mode == HRX_UPDATE_UNCHANGED) prof_add(PROF_UNCHANGED, 1);
      found = cand[k];
      used = k;
    }
  }
  /* The others go back (a quarantined or busy one stays usable for later or is dropped). */
  pthread_mutex_lock(&d->lock);
  e = graph_entry_locked(d, hash, nops, false);
  for (int k = 0; k < ncand; k++) {
    if (k == used) continue;
    if (e && e->n < NV__GPU_PREPARED_PER_KEY && !hrx_prepared_quarantined(cand[k]))
      e->p[e->n++] = cand[k];
    else hrx_prepared_release(cand[k]);
  }
  pthread_mutex_unlock(&d->lock);
  if (found) {
    *out = found;
    return NV_OK;
  }
  hrx_prepared *p = NULL;
  long long t0 = now_ns();
  hrx_status hs = hrx_graph_prepare(g, &p);
  prof_add(PROF_NEWPREP, now_ns() - t0);
  if (hs != HRX_OK) return nv__gpu_hrx_error(hs, "preparing GPU work");
  atomic_fetch_add(&stat_prepared, 1);
  *out = p;
  return NV_OK;
}

/* Gives a prepared graph (the caller's reference) back to the cache after its submission. */
static void graph_put(nv__gpu_dev *d, uint64_t hash, size_t nops, hrx_prepared *p) {
  pthread_mutex_lock(&d->lock);
  nv__gpu_gentry *e = graph_entry_locked(d, hash, nops, true);
  if (e && e->n < NV__GPU_PREPARED_PER_KEY && !hrx_prepared_quarantined(p)) {
    e->p[e->n++] = p;
    p = NULL;
  }
  pthread_mutex_unlock(&d->lock);
  hrx_prepared_release(p);
}

/* ---- recordings ---- */

#define HASH_SEED 0x6e75766563ull

nv_status nv__gpu_ctx_graph(nv__gpu_ctx *ctx) {
  if (ctx->g) return NV_OK;
  hrx_status hs = hrx_graph_create(ctx->dev->rt, &ctx->g);
  if (hs != HRX_OK) return nv__gpu_hrx_error(hs, "recording GPU work");
  nv__gpu_open_add(ctx->dev, ctx);
  ctx->nops = 0;
  ctx->hash = HASH_SEED;
  ctx->nids = 0;
  return NV_OK;
}

void nv__gpu_hash(nv__gpu_ctx *ctx, uint64_t v) { ctx->hash = mix(ctx->hash, v); }

void nv__gpu_hash_buffer(nv__gpu_ctx *ctx, hrx_buffer *hb) {
  size_t i = 0;
  while (i < ctx->nids && ctx->ids[i] != hb) i++;
  if (i == ctx->nids && ctx->nids < sizeof ctx->ids / sizeof *ctx->ids) ctx->ids[ctx->nids++] = hb;
  nv__gpu_hash(ctx, i == ctx->nids ? 1000 : i);
}

nv_status nv__gpu_ctx_wrote(nv__gpu_ctx *ctx, nv__devcopy *dc) {
  if (dc->pending == ctx) return NV_OK;
  if (ctx->nwritten == ctx->cwritten) {
    size_t nc = ctx->cwritten ? ctx->cwritten * 2 : 64;
    nv__devcopy **p = realloc(ctx->written, nc * sizeof *p);
    if (!p) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory recording GPU work");
    ctx->written = p;
    ctx->cwritten = nc;
  }
  atomic_fetch_add(&dc->refs, 1);
  ctx->written[ctx->nwritten++] = dc;
  dc->pending = ctx;
  return NV_OK;
}

/* Publishes the submission `s` (NULL: none was made) as the writer of the recording's buffers
 * and wakes their waiters; returns staging and scratch memory. */
static void publish(nv__gpu_ctx *ctx, nv__gpu_sub *s) {
  for (size_t i = 0; i < ctx->nwritten; i++) {
    nv__devcopy *dc = ctx->written[i];
    pthread_mutex_lock(&dc->lock);
    if (dc->pending == ctx) {
      if (s) atomic_fetch_add(&s->refs, 1);
      nv__gpu_sub_release(dc->writer);
      dc->writer = s;
      dc->pending = NULL;
      pthread_cond_broadcast(&dc->cond);
    }
    pthread_mutex_unlock(&dc->lock);
    nv__devcopy_release(dc);
  }
  ctx->nwritten = 0;
  for (size_t i = 0; i < ctx->nstaging; i++) nv__gpu_pinned_put(ctx->dev, ctx->staging[i]);
  ctx->nstaging = 0;
  for (size_t i = 0; i < ctx->ntemps; i++)
    nv__gpu_mem_free(ctx->dev, ctx->temps[i].hb, ctx->temps[i].cap);
  ctx->ntemps = 0;
}

/* Submits the recording. `final`: the evaluation (or a waiting thread) needs it now, so the
 * submitting thread launches it itself; otherwise (a full recording in the middle of an
 * evaluation) hrx's worker launches it while this thread records on. */
static void ctx_commit(nv__gpu_ctx *ctx, bool final) {
  if (!ctx->g) {
    if (ctx->nwritten) publish(ctx, ctx->last);
    return;
  }
  nv__gpu_dev *d = ctx->dev;
  hrx_graph *g = ctx->g;
  ctx->g = NULL;
  nv__gpu_sub *s = NULL;
  if (ctx->nops == 0) {
    hrx_graph_release(g);
    nv__gpu_dist_submitted(ctx, NULL);
    publish(ctx, ctx->last);
    nv__gpu_open_remove(d, ctx);
    return;
  }
  nv__gpu_sweep(d, NV__GPU_INFLIGHT);
  hrx_prepared *p = NULL;
  nv__gpu_dist_submitting(ctx);
  long long t0 = now_ns();
  nv_status st = prepared_for(d, g, ctx->hash, ctx->nops, &p);
  long long t1 = now_ns();
  prof_add(PROF_PREPARE, t1 - t0);
  prof_add(PROF_COMMITS, 1);
  if (st != NV_OK) {
    hrx_graph_release(g);
    nv__gpu_dist_submitted(ctx, NULL);
    /* A captured library call that failed while the graph was prepared said why. */
    char why[512];
    nv_status cs = nv__gpu_note_read(ctx->note, why, sizeof why);
    if (cs != NV_OK) st = nv__set_error(cs, "%s", why);
  } else {
    hrx_completion *c = NULL;
    hrx_status hs;
    /* After this evaluation's previous submission and the in-flight writers of what it read
     * (a failure of any of them cancels this one, E6). */
    hrx_completion *deps[17];
    size_t ndep = 0;
    for (int k = -1; k < ctx->ndeps; k++) {
      nv__gpu_sub *w = k < 0 ? ctx->last : ctx->deps[k];
      if (!w) continue;
      pthread_mutex_lock(&w->lock);
      if (!w->done && w->c) deps[ndep++] = hrx_completion_retain(w->c);
      pthread_mutex_unlock(&w->lock);
    }
    for (int tries = 0;; tries++) {
      hs = hrx_submit_after_ex(p, ndep ? deps : NULL, ndep, final ? 0 : HRX_SUBMIT_DEFERRED, &c);
      if (hs != HRX_E_BUSY || tries > 10000) break;
      /* Capacity or run slots: wait for the oldest work in flight, then try again. */
      pthread_mutex_lock(&d->lock);
      size_t before = d->ninflight;
      pthread_mutex_unlock(&d->lock);
      if (before) nv__gpu_sweep(d, before - 1);
      else {
        hrx_runtime_drain(d->rt);
        nv__gpu_sweep(d, 0);
      }
    }
    nv__gpu_dist_submitted(ctx, hs == HRX_OK ? c : NULL);
    for (size_t k = 0; k < ndep; k++) hrx_completion_release(deps[k]);
    graph_put(d, ctx->hash, ctx->nops, p);
    prof_add(PROF_SUBMIT, now_ns() - t1);
    if (hs != HRX_OK) st = nv__gpu_hrx_error(hs, "submitting GPU work");
    else if (!(s = nv__gpu_sub_new(c))) {
      hrx_completion_wait(c, HRX_WAIT_FOREVER);
      hrx_completion_release(c);
      st = nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory submitting GPU work");
    } else {
      /* What it ran after, and its index checks, before anyone can see it. */
      for (int k = -1; k < ctx->ndeps; k++) {
        nv__gpu_sub *w = k < 0 ? ctx->last : ctx->deps[k];
        if (!w || s->nafter == (int)(sizeof s->after / sizeof *s->after)) continue;
        pthread_mutex_lock(&w->lock);
        bool keep = !w->done || w->status != NV_OK;
        pthread_mutex_unlock(&w->lock);
        if (!keep) continue;
        atomic_fetch_add(&w->refs, 1);
        s->after[s->nafter++] = w;
      }
      nv__gpu_checks_submit(ctx, s);
      s->note = ctx->note; /* the recording's reference goes with its submission */
      ctx->note = NULL;
    }
  }
  nv__gpu_note_release(ctx->note); /* not submitted: nothing of it runs */
  ctx->note = NULL;
  nv__gpu_checks_submit(ctx, NULL); /* not submitted: its records are free at once */
  if (st == NV_OK && ctx->last && ctx->last->done && ctx->last->status != NV_OK) {
    /* An earlier submission of this evaluation failed: this one fails with it (E6b). */
    nv__gpu_sub_release(s);
    s = NULL;
    st = ctx->last->status;
    nv__set_error(st, "%s", ctx->last->msg);
  }
  if (st != NV_OK) s = nv__gpu_sub_failed(st, nv_last_error());
  if (s) inflight_push(d, s);
  publish(ctx, s);
  nv__gpu_sub_release(ctx->last);
  ctx->last = s;
  ctx->nops = 0;
  for (int k = 0; k < ctx->ndeps; k++) nv__gpu_sub_release(ctx->deps[k]);
  ctx->ndeps = 0;
  nv__gpu_open_remove(d, ctx);
}

void nv__gpu_ctx_commit(nv__gpu_ctx *ctx) { ctx_commit(ctx, true); }

/* ---- what kernels call (gpu.h) ---- */

int nv__gpu_device_index(const nv__gpu_ctx *ctx) { return ctx->dev->index; }

hrx_runtime *nv__gpu_runtime(const nv__gpu_ctx *ctx) { return ctx->dev->rt; }

/* The reach of a layout in elements: [lo, hi] relative to element 0. */
static void reach(const nv__output *m, int64_t *lo, int64_t *hi) {
  int64_t a = 0, b = 0;
  for (int i = 0; i < m->ndim; i++) {
    if (m->shape[i] <= 1) continue;
    int64_t e = m->strides[i] * (int64_t)(m->shape[i] - 1);
    if (e < 0) a += e;
    else b += e;
  }
  *lo = a;
  *hi = b;
}

nv_status nv__gpu_record_upload(nv__gpu_ctx *ctx, hrx_view dst, const void *src, size_t bytes) {
  nv_status st = nv__gpu_ctx_graph(ctx);
  if (st != NV_OK || !bytes) return st;
  if (bytes <= NV__GPU_STORE_MAX) {
    unsigned char block[16 + NV__GPU_STORE_MAX];
    const void *func;
    size_t psize;
    nv__gpu_store_kernel(bytes, &func, &psize);
    memset(block, 0, psize);
    uint32_t n32 = (uint32_t)bytes;
    memcpy(block, &n32, 4);
    memcpy(block + 16, src, bytes);
    hrx_view v = hrx_view_make(dst.buffer, dst.offset, bytes);
    hrx_access a = HRX_ACCESS_WRITE;
    uint32_t blocks = (uint32_t)((bytes + 255) / 256);
    nv__gpu_launch l = {func, {blocks, 1, 1}, {256, 1, 1}, 0, &v, &a, 1, block, psize, false,
                        NULL, 0};
    return nv__gpu_dispatch(ctx, &l);
  }
  nv__pinned p;
  if ((st = nv__gpu_pinned_get(ctx->dev, bytes, &p)) != NV_OK) return st;
  void *host = NULL;
  hrx_status hs = hrx_buffer_map(p.hb, HRX_ACCESS_WRITE, &host);
  if (hs == HRX_OK) {
    memcpy(host, src, bytes);
    hrx_buffer_unmap(p.hb, HRX_ACCESS_WRITE);
    hs = hrx_graph_copy(ctx->g, hrx_view_make(dst.buffer, dst.offset, bytes),
                        hrx_view_make(p.hb, 0, bytes), NULL);
  }
  if (ctx->nstaging == ctx->cstaging) {
    size_t nc = ctx->cstaging ? ctx->cstaging * 2 : 16;
    nv__pinned *np = realloc(ctx->staging, nc * sizeof *np);
    if (np) {
      ctx->staging = np;
      ctx->cstaging = nc;
    }
  }
  if (ctx->nstaging < ctx->cstaging) ctx->staging[ctx->nstaging++] = p;
  else hrx_buffer_release(p.hb);
  if (hs != HRX_OK) return nv__gpu_hrx_error(hs, "uploading an array to the GPU");
  nv__gpu_hash(ctx, 0x75706c64ull);
  nv__gpu_hash_buffer(ctx, dst.buffer);
  ctx->nops++;
  return NV_OK;
}

/* The device copy of `b` with valid data, uploading the host data once. */
static nv_status device_copy(nv__gpu_ctx *ctx, nv__buffer *b, nv__devcopy **out) {
  for (;;) {
    nv__devcopy *dc = atomic_load_explicit(&b->dev, memory_order_acquire);
    if (dc) {
      if (dc->device != ctx->dev->index)
        return nv__set_error(NV_ERR_UNSUPPORTED,
                             "an array on gpu:%d read by work on gpu:%d: copy it through the host "
                             "first (cross-device reads are not supported)",
                             dc->device, ctx->dev->index);
      pthread_mutex_lock(&dc->lock);
      while (dc->pending && dc->pending != ctx) pthread_cond_wait(&dc->cond, &dc->lock);
      nv_status st = NV_OK;
      nv__gpu_sub *w = dc->pending == ctx ? NULL : dc->writer;
      if (w && w != ctx->last) {
        /* Written by another submission: its failure is ours (a failed one fails this read at
         * once; one still in flight becomes a dependency of our submission). */
        pthread_mutex_lock(&w->lock);
        bool done = w->done;
        if (done && w->status != NV_OK) st = nv__set_error(w->status, "%s", w->msg);
        pthread_mutex_unlock(&w->lock);
        if (!done) {
          int k = 0;
          while (k < ctx->ndeps && ctx->deps[k] != w) k++;
          if (k == ctx->ndeps && ctx->ndeps < 16) {
            atomic_fetch_add(&w->refs, 1);
            ctx->deps[ctx->ndeps++] = w;
          }
        }
      }
      if (st != NV_OK) {
        pthread_mutex_unlock(&dc->lock);
        return st;
      }
      if (!dc->dev_valid) {
        /* The host copy was written in place since: upload it again. */
        st = nv__gpu_record_upload(ctx, hrx_view_whole(dc->hb), b->ptr, b->nbytes);
        if (st == NV_OK) st = nv__gpu_ctx_wrote(ctx, dc);
        if (st == NV_OK) dc->dev_valid = true;
      }
      pthread_mutex_unlock(&dc->lock);
      if (st != NV_OK) return st;
      *out = dc;
      return NV_OK;
    }
    /* Host data only: a device copy with an upload recorded here. */
    nv__devcopy *nd = nv__devcopy_new(ctx->dev, b->nbytes ? b->nbytes : 1);
    if (!nd) return NV_ERR_OUT_OF_MEMORY;
    nd->host_valid = true;
    pthread_mutex_lock(&nd->lock); /* readers of another thread wait until it is submitted */
    nv_status st = nv__gpu_ctx_wrote(ctx, nd);
    nv__devcopy *expected = NULL;
    if (st != NV_OK || !atomic_compare_exchange_strong(&b->dev, &expected, nd)) {
      pthread_mutex_unlock(&nd->lock);
      nv__buffer tmp = {0};
      atomic_init(&tmp.dev, nd);
      nv__gpu_buffer_hooks.release(&tmp); /* the recording keeps its reference until commit */
      if (st != NV_OK) return st;
      continue; /* another thread attached one first */
    }
    pthread_mutex_unlock(&nd->lock);
    st = nv__gpu_record_upload(ctx, hrx_view_whole(nd->hb), b->ptr, b->nbytes);
    if (st != NV_OK) {
      pthread_mutex_lock(&nd->lock);
      nd->dev_valid = false; /* the host copy stays the valid one */
      pthread_mutex_unlock(&nd->lock);
      return st;
    }
    *out = nd;
    return NV_OK;
  }
}

static nv_status arg_of(nv__gpu_ctx *ctx, const nv__output *m, nv__buffer *b, int64_t offset,
                        nv__gpu_arg *out) {
  size_t isz = nv_dtype_size(m->dtype);
  if (m->size == 0 || !b) {
    out->view = hrx_view_make(ctx->dev->dummy, 0, 16);
    out->offset = 0;
    return NV_OK;
  }
  nv__devcopy *dc;
  nv_status st = device_copy(ctx, b, &dc);
  if (st != NV_OK) return st;
  int64_t lo, hi;
  reach(m, &lo, &hi);
  int64_t first = offset + lo;
  if (first < 0 || (size_t)(offset + hi + 1) * isz > hrx_buffer_size(dc->hb))
    return nv__set_error(NV_ERR_BACKEND, "a layout reaches outside its buffer (offset %lld)",
                         (long long)offset);
  out->view = hrx_view_make(dc->hb, (size_t)first * isz, (size_t)(hi - lo + 1) * isz);
  out->offset = -lo;
  return NV_OK;
}

nv_status nv__gpu_input(nv__gpu_ctx *ctx, const nv__operand *op, nv__gpu_arg *out) {
  long long t0 = now_ns();
  nv_status st = nv__gpu_ctx_graph(ctx);
  if (st == NV_OK) st = arg_of(ctx, op->meta, op->buf, op->offset, out);
  prof_add(PROF_INPUT, now_ns() - t0);
  return st;
}

static nv_status gpu_output(nv__gpu_ctx *ctx, nv__output *o, nv__gpu_arg *out);

nv_status nv__gpu_output(nv__gpu_ctx *ctx, nv__output *o, nv__gpu_arg *out) {
  long long t0 = now_ns();
  nv_status st = gpu_output(ctx, o, out);
  prof_add(PROF_OUTPUT, now_ns() - t0);
  return st;
}

static nv_status gpu_output(nv__gpu_ctx *ctx, nv__output *o, nv__gpu_arg *out) {
  nv_status st = nv__gpu_ctx_graph(ctx);
  if (st != NV_OK) return st;
  size_t bytes = (size_t)o->size * nv_dtype_size(o->dtype);
  if (!o->buf) {
    nv__devcopy *dc = nv__devcopy_new(ctx->dev, bytes ? bytes : 1);
    if (!dc) return NV_ERR_OUT_OF_MEMORY;
    nv__buffer *b = nv__buffer_new_device(bytes, dc);
    if (!b) {
      nv__buffer tmp = {0};
      atomic_init(&tmp.dev, dc);
      nv__gpu_buffer_hooks.release(&tmp);
      return NV_ERR_OUT_OF_MEMORY;
    }
    if ((st = nv__gpu_ctx_wrote(ctx, dc)) != NV_OK) {
      nv__buffer_release(b);
      return st;
    }
    o->buf = b;
    o->offset = 0;
  } else {
    /* A donated buffer (or a second call): written here, so the host copy goes stale. */
    nv__devcopy *dc;
    if ((st = device_copy(ctx, o->buf, &dc)) != NV_OK) return st;
    pthread_mutex_lock(&dc->lock);
    st = nv__gpu_ctx_wrote(ctx, dc);
    if (dc->host_valid && dc->shadow_mapped) {
      hrx_buffer_unmap(dc->shadow, HRX_ACCESS_READ);
      dc->shadow_mapped = false;
    }
    dc->host_valid = false;
    pthread_mutex_unlock(&dc->lock);
    if (st != NV_OK) return st;
  }
  return arg_of(ctx, o, o->buf, o->offset, out);
}

nv_status nv__gpu_scratch(nv__gpu_ctx *ctx, size_t bytes, hrx_view *out) {
  nv_status st = nv__gpu_ctx_graph(ctx);
  if (st != NV_OK) return st;
  if (ctx->ntemps == ctx->ctemps) {
    size_t nc = ctx->ctemps ? ctx->ctemps * 2 : 16;
    struct nv__gpu_temp *p = realloc(ctx->temps, nc * sizeof *p);
    if (!p) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory recording GPU work");
    ctx->temps = p;
    ctx->ctemps = nc;
  }
  hrx_buffer *hb;
  size_t cap;
  if ((st = nv__gpu_mem_alloc(ctx->dev, bytes ? bytes : 1, &hb, &cap)) != NV_OK) return st;
  ctx->temps[ctx->ntemps++] = (struct nv__gpu_temp){hb, cap};
  *out = hrx_view_make(hb, 0, bytes ? bytes : 1);
  return NV_OK;
}

nv_status nv__gpu_dispatch(nv__gpu_ctx *ctx, const nv__gpu_launch *l) {
  nv_status st = nv__gpu_ctx_graph(ctx);
  if (st != NV_OK) return st;
  if (l->nviews < 0 || l->nviews > 64 || (l->nviews && (!l->views || !l->access)))
    return nv__set_error(NV_ERR_BACKEND, "recording a GPU kernel: bad launch (%d views)", l->nviews);
  if (l->nconstants < 0 || l->nconstants > NV__GPU_MAX_CONSTANTS || (l->nconstants && !l->constants))
    return nv__set_error(NV_ERR_BACKEND, "recording a GPU kernel: bad launch (%d constants)",
                         l->nconstants);
  hrx_kernel *k;
  long long t0 = now_ns();
  if ((st = kernel_for(ctx->dev, l, &k)) != NV_OK) return st;
  long long t1 = now_ns();
  hrx_status hs = hrx_graph_dispatch_ex(ctx->g, k, l->views, (size_t)l->nviews,
                                        l->nconstants ? l->constants : NULL,
                                        (size_t)l->nconstants, l->params,
                                        l->params_size, l->aliasing ? HRX_DISPATCH_ALIASING : 0,
                                        NULL);
  prof_add(PROF_KERNEL, t1 - t0);
  prof_add(PROF_RECORD, now_ns() - t1);
  if (hs != HRX_OK) return nv__gpu_hrx_error(hs, "recording a GPU kernel");
  nv__gpu_hash(ctx, (uint64_t)(uintptr_t)k);
  for (int i = 0; i < l->nviews; i++) nv__gpu_hash_buffer(ctx, l->views[i].buffer);
  ctx->nops++;
  return NV_OK;
}

nv_status nv__gpu_dispatch_1d(nv__gpu_ctx *ctx, const char *op, const void *func, uint32_t blocks,
                              uint32_t threads, const hrx_view *views, const hrx_access *access,
                              int nviews, const void *params, size_t params_size) {
  if (!func) return nv__set_error(NV_ERR_BACKEND, "%s: no kernel for this dtype or size", op);
  nv__gpu_launch l = {.func = func,
                      .grid = {blocks, 1, 1},
                      .block = {threads, 1, 1},
                      .views = views,
                      .access = access,
                      .nviews = nviews,
                      .params = params,
                      .params_size = params_size};
  return nv__gpu_dispatch(ctx, &l);
}

uint32_t nv__gpu_blocks(int64_t items, uint32_t threads, int64_t cap) {
  int64_t b = (items + threads - 1) / threads;
  if (b < 1) b = 1;
  return (uint32_t)(b < cap ? b : cap);
}

nv_status nv__gpu_captured(nv__gpu_ctx *ctx, const hrx_binding *bindings, size_t count,
                           hrx_capture_fn fn, void *user, hrx_destroy_fn destroy,
                           const void *key, size_t key_size) {
  nv_status st = nv__gpu_ctx_graph(ctx);
  hrx_status hs = HRX_OK;
  if (st == NV_OK)
    hs = hrx_graph_captured_keyed(ctx->g, bindings, count, fn, user, destroy, key, key_size,
                                  NULL);
  if (st != NV_OK || hs != HRX_OK) {
    if (destroy) destroy(user);
    return st != NV_OK ? st : nv__gpu_hrx_error(hs, "recording a library call");
  }
  /* The structure is the function and which buffers it reads and writes, as for a kernel; the
   * work (the key: shapes, algorithm) may differ between graphs of one structure, and an update
   * captures the operation again only then. */
  nv__gpu_hash(ctx, (uint64_t)(uintptr_t)fn);
  for (size_t i = 0; i < count; i++) nv__gpu_hash_buffer(ctx, bindings[i].view.buffer);
  ctx->nops++;
  return NV_OK;
}

nv_status nv__gpu_fill(nv__gpu_ctx *ctx, hrx_view dst, uint8_t value) {
  nv_status st = nv__gpu_ctx_graph(ctx);
  if (st != NV_OK) return st;
  hrx_status hs = hrx_graph_fill(ctx->g, dst, value, NULL);
  if (hs != HRX_OK) return nv__gpu_hrx_error(hs, "recording a fill");
  nv__gpu_hash(ctx, 0x66696c6cull);
  nv__gpu_hash_buffer(ctx, dst.buffer);
  ctx->nops++;
  return NV_OK;
}

nv_status nv__gpu_copy(nv__gpu_ctx *ctx, hrx_view dst, hrx_view src) {
  nv_status st = nv__gpu_ctx_graph(ctx);
  if (st != NV_OK) return st;
  hrx_status hs = hrx_graph_copy_on(ctx->g, dst, src, HRX_LANE_COMPUTE, NULL);
  if (hs != HRX_OK) return nv__gpu_hrx_error(hs, "recording a copy");
  nv__gpu_hash(ctx, 0x636f7079ull);
  nv__gpu_hash_buffer(ctx, dst.buffer);
  nv__gpu_hash_buffer(ctx, src.buffer);
  ctx->nops++;
  return NV_OK;
}

/* ---- the backend ---- */

static nv__gpu_ctx *ctx_get(nv__ectx *ectx, nv__gpu_dev *d) {
  nv__gpu_ectx *ge = ectx->gpu;
  if (!ge) {
    ge = calloc(1, sizeof *ge);
    if (!ge) return NULL;
    ectx->gpu = ge;
  }
  nv__gpu_ctx *ctx = ge->dev[d->index];
  if (!ctx) {
    ctx = calloc(1, sizeof *ctx);
    if (!ctx) return NULL;
    ctx->dev = d;
    ctx->thread = nv__thread_id();
    ge->dev[d->index] = ctx;
    nv__gpu_alloc_trace_begin(d);
  }
  return ctx;
}

static atomic_int log_fallback = -1;
/* A primitive whose kernel is treated as declining every node (a test hook; -1: none). */
static atomic_int forced_fallback = -1;

void nv__gpu_test_force_fallback(int prim) { atomic_store(&forced_fallback, prim); }

static nv_status gpu_encode(nv__ectx *ectx, nv__node *node, const nv__operand *in, int donated);
static void gpu_commit(nv__ectx *ectx);
static nv_status gpu_flush(nv__ectx *ectx);
static void gpu_end(nv__ectx *ectx);

static const nv__backend gpu_backend = {"cuda", gpu_encode, gpu_commit, gpu_flush, gpu_end};

const nv__backend *nv__gpu_backend_for(int index) {
  return nv__gpu_dev_get(index) ? &gpu_backend : NULL;
}

static nv_status gpu_encode(nv__ectx *ectx, nv__node *node, const nv__operand *in, int donated) {
  const char *name = nv__prims[node->prim].name;
  if (!ectx) return nv__set_error(NV_ERR_BACKEND, "%s: GPU work needs an evaluation", name);
  nv__gpu_dev *d = nv__gpu_dev_get(node->stream.device.index);
  if (!d) return NV_ERR_UNSUPPORTED;
  ectx->gpu_backend = &gpu_backend;
  nv__gpu_ctx *ctx = ctx_get(ectx, d);
  if (!ctx) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
  /* Inputs another thread has recorded but not submitted: commit our own open work first (that
   * thread may be waiting on it, E8), then wait until theirs is submitted (E50). */
  bool committed = false;
  for (int i = 0; i <= node->ninputs; i++) {
    nv__buffer *b = i < node->ninputs ? in[i].buf : donated >= 0 ? node->out[0].buf : NULL;
    nv__devcopy *dc = b ? atomic_load(&b->dev) : NULL;
    if (!dc) continue;
    pthread_mutex_lock(&dc->lock);
    bool foreign = dc->pending && dc->pending != ctx;
    pthread_mutex_unlock(&dc->lock);
    if (!foreign) continue;
    if (!committed) {
      gpu_commit(ectx);
      committed = true;
    }
    pthread_mutex_lock(&dc->lock);
    while (dc->pending && dc->pending != ctx) pthread_cond_wait(&dc->cond, &dc->lock);
    pthread_mutex_unlock(&dc->lock);
  }
  nv__gpu_kernel_fn k = nv__gpu_kernels[node->prim];
  nv_status st = NV__GPU_DECLINED;
  if (k && node->prim != atomic_load_explicit(&forced_fallback, memory_order_relaxed)) {
    long long t0 = now_ns();
    st = k(ctx, node, in, donated);
    prof_add(PROF_ENCODE, now_ns() - t0);
  }
  if (st != NV__GPU_DECLINED) {
    if (st != NV_OK) {
      char why[512];
      snprintf(why, sizeof why, "%s", nv_last_error());
      /* Named after the primitive unless the kernel's message names an op already (as
       * "vmap: ..." of vmap's stand-in inputs, the CPU kernel's words). */
      size_t w = strspn(why, "abcdefghijklmnopqrstuvwxyz_0123456789");
      if (strncmp(why, name, strlen(name)) != 0 && !(w > 0 && why[w] == ':'))
        nv__set_error(st, "%s: %s", name, why);
    }
    if (ctx->nops >= (size_t)commit_ops[ctx->last != NULL]) ctx_commit(ctx, false);
    return st;
  }
  /* No CUDA kernel (or one that declined the node): the CPU kernel on data read back (the CPU
   * backend submits this evaluation's GPU work and downloads the inputs); its outputs move up
   * on first GPU use. */
  nv__gpu_note_fallback(node->prim);
  int lf = atomic_load(&log_fallback);
  if (lf < 0) {
    lf = nv__env_long("NUVEC_LOG_FALLBACK", 0) ? 1 : 0;
    atomic_store(&log_fallback, lf);
  }
  if (lf)
    fprintf(stderr, "nuvec: %s ran on the CPU (%s)\n", name,
            k ? "its CUDA kernel has no path for this node" : "no CUDA kernel");
  return nv__cpu_backend.encode(ectx, node, in, donated);
}

static void gpu_commit(nv__ectx *ectx) {
  nv__gpu_ectx *ge = ectx ? ectx->gpu : NULL;
  if (!ge) return;
  for (int i = 0; i < NV__GPU_MAX_DEVICES; i++)
    if (ge->dev[i]) nv__gpu_ctx_commit(ge->dev[i]);
}

static nv_status gpu_flush(nv__ectx *ectx) {
  gpu_commit(ectx);
  nv__gpu_ectx *ge = ectx ? ectx->gpu : NULL;
  if (!ge) return NV_OK;
  nv_status r = NV_OK;
  for (int i = 0; i < NV__GPU_MAX_DEVICES; i++) {
    nv__gpu_ctx *ctx = ge->dev[i];
    if (ctx && ctx->last) {
      long long t0 = now_ns();
      nv_status s = nv__gpu_sub_wait(ctx->last);
      prof_add(PROF_WAIT, now_ns() - t0);
      if (r == NV_OK) r = s;
    }
  }
  return r;
}

static void gpu_end(nv__ectx *ectx) {
  nv__gpu_ectx *ge = ectx ? ectx->gpu : NULL;
  if (!ge) return;
  for (int i = 0; i < NV__GPU_MAX_DEVICES; i++) {
    nv__gpu_ctx *ctx = ge->dev[i];
    if (!ctx) continue;
    nv__gpu_ctx_commit(ctx);
    nv__gpu_sub_release(ctx->last);
    free(ctx->written);
    free(ctx->temps);
    free(ctx->staging);
    free(ctx->checks);
    nv__gpu_note_release(ctx->note);
    nv__gpu_alloc_trace_end(ctx->dev);
    free(ctx);
  }
  free(ge);
  ectx->gpu = NULL;
  ectx->gpu_backend = NULL;
}

/* ---- statistics for tests and benchmarks ---- */
void nv__gpu_graph_stats(long *prepared, long *updated) {
  if (prepared) *prepared = atomic_load(&stat_prepared);
  if (updated) *updated = atomic_load(&stat_updated);
}

long nv__gpu_stat_allocs(void) { return atomic_load(&nv__gpu_stat_device_allocs); }

/* The host's time per phase since the last call (microseconds), and hrx's graph counters. */
void nv__gpu_profile(char *buf, size_t n) {
  long long v[PROF_N];
  for (int i = 0; i < PROF_N; i++) v[i] = atomic_exchange(&prof[i], 0);
  hrx_counters c = {0};
  nv__gpu_dev *d = nv__gpu_device_count() > 0 ? atomic_load(&devs[0]) : NULL;
  if (d) hrx_runtime_counters(d->rt, &c);
  snprintf(buf, n,
           "encode_us=%.1f (output %.1f input %.1f kernel %.1f record %.1f) prepare_us=%.1f (new %.1f) "
           "submit_us=%.1f wait_us=%.1f commits=%lld unchanged=%lld busy=%lld "
           "hrx_submissions=%llu native_prepared=%llu native_updated=%llu event_waits=%llu",
           v[PROF_ENCODE] / 1e3, v[PROF_OUTPUT] / 1e3, v[PROF_INPUT] / 1e3, v[PROF_KERNEL] / 1e3,
           v[PROF_RECORD] / 1e3, v[PROF_PREPARE] / 1e3, v[PROF_NEWPREP] / 1e3, v[PROF_SUBMIT] / 1e3, v[PROF_WAIT] / 1e3,
           v[PROF_COMMITS], v[PROF_UNCHANGED], v[PROF_BUSY], (unsigned long long)c.submissions,
           (unsigned long long)c.native_graphs_prepared,
           (unsigned long long)c.native_graphs_updated, (unsigned long long)c.gpu_event_waits);
}

void nv__cpu_register(void); /* src/cpu/register.c */

/* The primitives that have a CPU kernel and no CUDA kernel, by name, comma-separated in table
 * order, into buf (truncated to n bytes); returns their number. Needs no device (the tables
 * are filled without one). Test hook: tests/gpu/test_gpu_kernel_table.c keeps the list. */
int nv__gpu_missing_kernels(char *buf, size_t n) {
  nv__cpu_register();
  nv__gpu_register();
  int count = 0;
  size_t used = 0;
  if (n) buf[0] = '\0';
  for (int p = 0; p < NV__PRIM_COUNT; p++) {
    if (!nv__cpu_kernels[p] || nv__gpu_kernels[p]) continue;
    if (n && used < n) {
      int w = snprintf(buf + used, n - used, "%s%s", count ? "," : "", nv__prims[p].name);
      if (w > 0) used += (size_t)w;
    }
    count++;
  }
  return count;
}

/* Arms hrx's fault injection on GPU `index`: the next region to start fails (kind 0), or the
 * whole runtime does (kind 1). Test hook. */
nv_status nv__gpu_test_inject_fault(int index, int kind) {
  nv__gpu_dev *d = nv__gpu_dev_get(index);
  if (!d) return NV_ERR_UNSUPPORTED;
  hrx_status hs = hrx_runtime_inject_fault(d->rt, kind ? HRX_FAULT_RUNTIME : HRX_FAULT_NEXT_REGION);
  return hs == HRX_OK ? NV_OK : nv__gpu_hrx_error(hs, "inject_fault");
}
