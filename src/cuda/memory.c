/* Device memory (DESIGN §13): a per-device size-class cache over hrx device buffers, counted as
 * the CPU's (active, peak, cache, limit); pinned host buffers for staging; the device side of
 * nv__buffer (where the valid data is, its writer, the cached other copy) and the hooks through
 * which the core reads GPU data back. */
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda_internal.h"

/* Size classes as the CPU's: multiples of 256 bytes up to 4 KiB, then four per power of two.
 * Returns -1 for sizes that have no class (too large for any device). */
static int size_class(size_t n, size_t *cap) {
  if (n == 0) n = 1;
  if (n <= 4096) {
    size_t c = (n + 255) / 256;
    *cap = c * 256;
    return (int)c - 1; /* 0..15 */
  }
  if (n > ((size_t)1 << 52)) return -1;
  int p = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^p < n <= 2^(p+1) */
  size_t base = (size_t)1 << p, quarter = base / 4;
  size_t sub = (n - base + quarter - 1) / quarter; /* 1..4 */
  *cap = base + sub * quarter;
  int cls = 16 + (p - 12) * 4 + (int)sub - 1;
  return cls < NV__GPU_CLASSES ? cls : -1;
}

static void free_locked(nv__gpu_dev *d, hrx_buffer *hb, size_t cap);

/* Deferred memory that no open recording can reach goes back to the cache (under d->lock). */
static void release_deferred_locked(nv__gpu_dev *d) {
  uint64_t min_open = UINT64_MAX;
  for (size_t i = 0; i < d->nopen; i++)
    if (d->open[i]->open_gen < min_open) min_open = d->open[i]->open_gen;
  size_t w = 0;
  for (size_t i = 0; i < d->ndeferred; i++) {
    struct nv__gpu_deferred e = d->deferred[i];
    if (e.gen < min_open) {
      d->cached -= e.cap;
      free_locked(d, e.hb, e.cap);
    } else {
      d->deferred[w++] = e;
    }
  }
  d->ndeferred = w;
}

void nv__gpu_open_add(nv__gpu_dev *d, struct nv__gpu_ctx *ctx) {
  pthread_mutex_lock(&d->lock);
  ctx->open_gen = ++d->gen;
  if (d->nopen == d->copen) {
    size_t nc = d->copen ? d->copen * 2 : 16;
    struct nv__gpu_ctx **p = realloc(d->open, nc * sizeof *p);
    if (p) {
      d->open = p;
      d->copen = nc;
    }
  }
  if (d->nopen < d->copen) d->open[d->nopen++] = ctx;
  pthread_mutex_unlock(&d->lock);
}

void nv__gpu_open_remove(nv__gpu_dev *d, struct nv__gpu_ctx *ctx) {
  pthread_mutex_lock(&d->lock);
  for (size_t i = 0; i < d->nopen; i++)
    if (d->open[i] == ctx) {
      d->open[i] = d->open[--d->nopen];
      break;
    }
  release_deferred_locked(d);
  pthread_mutex_unlock(&d->lock);
}

static void trim_locked(nv__gpu_dev *d, size_t target) {
  /* Deferred memory too: recorded work keeps its own reference, so dropping ours is safe. */
  for (size_t i = 0; i < d->ndeferred && d->cached > target; i++) {
    d->cached -= d->deferred[i].cap;
    hrx_buffer_release(d->deferred[i].hb);
    d->deferred[i] = d->deferred[--d->ndeferred];
    i--;
  }
  for (int c = NV__GPU_CLASSES - 1; c >= 0 && d->cached > target; c--) {
    while (d->free_n[c] && d->cached > target) {
      hrx_buffer *hb = d->free_list[c][--d->free_n[c]];
      d->cached -= hrx_buffer_size(hb);
      hrx_buffer_release(hb);
    }
  }
}

void nv__gpu_graphs_clear(nv__gpu_dev *d); /* backend.c, under d->lock */

/* Everything the device caches goes: free memory, prepared graphs, pinned buffers. */
static void trim_all_locked(nv__gpu_dev *d) {
  trim_locked(d, 0);
  nv__gpu_graphs_clear(d);
  for (size_t i = 0; i < d->npinned; i++) hrx_buffer_release(d->pinned[i].hb);
  d->npinned = 0;
}

void nv__gpu_trim(nv__gpu_dev *d) {
  pthread_mutex_lock(&d->lock);
  trim_all_locked(d);
  pthread_mutex_unlock(&d->lock);
}

nv_status nv__gpu_mem_alloc(nv__gpu_dev *d, size_t bytes, hrx_buffer **out, size_t *cap_out) {
  size_t cap;
  int cls = size_class(bytes, &cap);
  if (cls < 0)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY,
                         "out of memory: %zu bytes requested on gpu:%d, more than any device has",
                         bytes, d->index);
  if (nv__alloc_should_fail())
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes on gpu:%d (injected)",
                         bytes, d->index);
  pthread_mutex_lock(&d->lock);
  if (d->free_n[cls]) {
    /* The buffer the last evaluation got here, if it is free: moved to the list's end. */
    size_t pos = d->hint_pos++;
    if (pos < d->hint_n && d->hint[pos].cls == cls) {
      hrx_buffer **fl = d->free_list[cls];
      for (size_t i = d->free_n[cls]; i-- > 0;)
        if (fl[i] == d->hint[pos].hb) {
          fl[i] = fl[d->free_n[cls] - 1];
          fl[d->free_n[cls] - 1] = d->hint[pos].hb;
          break;
        }
    }
    hrx_buffer *hb = d->free_list[cls][--d->free_n[cls]];
    if (d->rec_n < NV__GPU_ALLOC_TRACE) d->rec[d->rec_n++] = (struct nv__gpu_alloc_rec){hb, cls};
    d->cached -= cap;
    d->active += cap;
    if (d->active > d->peak) d->peak = d->active;
    pthread_mutex_unlock(&d->lock);
    *out = hb;
    *cap_out = cap;
    return NV_OK;
  }
  if (d->active + d->cached + cap > d->limit) trim_locked(d, 0);
  if (d->active + cap > d->limit) {
    size_t active = d->active, limit = d->limit;
    pthread_mutex_unlock(&d->lock);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY,
                         "out of memory on gpu:%d: %zu bytes requested, %zu active, limit %zu",
                         d->index, bytes, active, limit);
  }
  d->active += cap; /* reserved while the allocation runs outside the lock */
  atomic_fetch_add(&nv__gpu_stat_device_allocs, 1);
  pthread_mutex_unlock(&d->lock);
  hrx_buffer *hb = NULL;
  hrx_status hs = hrx_buffer_create(d->rt, HRX_MEMORY_DEVICE, cap, &hb);
  if (hs == HRX_E_OUT_OF_MEMORY || hs == HRX_E_CUDA) {
    /* The device's own memory ran out (other processes, cached graphs): drop what we cache. */
    nv__gpu_trim(d);
    hs = hrx_buffer_create(d->rt, HRX_MEMORY_DEVICE, cap, &hb);
  }
  pthread_mutex_lock(&d->lock);
  if (hs != HRX_OK) {
    d->active -= cap;
    pthread_mutex_unlock(&d->lock);
    char why[512];
    snprintf(why, sizeof why, "%s", hrx_last_error());
    return nv__set_error(hs == HRX_E_DEVICE_LOST ? NV_ERR_DEVICE_LOST : NV_ERR_OUT_OF_MEMORY,
                         "out of memory allocating %zu bytes on gpu:%d: %s", bytes, d->index, why);
  }
  if (d->active > d->peak) d->peak = d->active;
  d->hint_pos++;
  if (d->rec_n < NV__GPU_ALLOC_TRACE) d->rec[d->rec_n++] = (struct nv__gpu_alloc_rec){hb, cls};
  pthread_mutex_unlock(&d->lock);
  *out = hb;
  *cap_out = cap;
  return NV_OK;
}

/* An evaluation starts using the device: its allocations are recorded from here, and hinted by
 * the last evaluation's. */
void nv__gpu_alloc_trace_begin(nv__gpu_dev *d) {
  pthread_mutex_lock(&d->lock);
  d->hint_pos = 0;
  d->rec_n = 0;
  pthread_mutex_unlock(&d->lock);
}

/* It ended: its trace (when it allocated more than a few buffers, so that a small evaluation
 * between two steps leaves the steps' trace) hints the next one. A hinted buffer that has been
 * released since is only a pointer compared against the free lists, never used. */
void nv__gpu_alloc_trace_end(nv__gpu_dev *d) {
  pthread_mutex_lock(&d->lock);
  if (d->rec_n >= 8) {
    memcpy(d->hint, d->rec, d->rec_n * sizeof *d->rec);
    d->hint_n = d->rec_n;
  }
  d->rec_n = 0;
  pthread_mutex_unlock(&d->lock);
}

/* Puts memory into its class's free list, or releases it past the cache limit (under d->lock;
 * `cached` counts it when kept). */
static void free_locked(nv__gpu_dev *d, hrx_buffer *hb, size_t cap) {
  size_t c2;
  int cls = size_class(cap, &c2);
  if (cls >= 0 && c2 == cap && d->cached + cap <= d->cache_limit) {
    if (d->free_n[cls] == d->free_cap[cls]) {
      size_t nc = d->free_cap[cls] ? d->free_cap[cls] * 2 : 8;
      hrx_buffer **p = realloc(d->free_list[cls], nc * sizeof *p);
      if (p) {
        d->free_list[cls] = p;
        d->free_cap[cls] = nc;
      }
    }
    if (d->free_n[cls] < d->free_cap[cls]) {
      d->free_list[cls][d->free_n[cls]++] = hb;
      d->cached += cap;
      return;
    }
  }
  hrx_buffer_release(hb);
}

void nv__gpu_mem_free(nv__gpu_dev *d, hrx_buffer *hb, size_t cap) {
  if (!hb) return;
  pthread_mutex_lock(&d->lock);
  d->active -= cap;
  if (d->nopen) {
    if (d->ndeferred == d->cdeferred) {
      size_t nc = d->cdeferred ? d->cdeferred * 2 : 64;
      struct nv__gpu_deferred *p = realloc(d->deferred, nc * sizeof *p);
      if (p) {
        d->deferred = p;
        d->cdeferred = nc;
      }
    }
    if (d->ndeferred < d->cdeferred) {
      d->deferred[d->ndeferred++] = (struct nv__gpu_deferred){hb, cap, d->gen};
      d->cached += cap;
      pthread_mutex_unlock(&d->lock);
      return;
    }
    /* No room to defer: dropping our reference is safe (recorded work holds its own). */
    pthread_mutex_unlock(&d->lock);
    hrx_buffer_release(hb);
    return;
  }
  free_locked(d, hb, cap);
  pthread_mutex_unlock(&d->lock);
}

nv_status nv__gpu_pinned_get(nv__gpu_dev *d, size_t bytes, nv__pinned *out) {
  size_t cap;
  if (size_class(bytes, &cap) < 0)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory: %zu bytes of pinned memory", bytes);
  pthread_mutex_lock(&d->lock);
  for (size_t i = 0; i < d->npinned; i++) {
    if (d->pinned[i].cap != cap) continue;
    /* A pooled buffer still used by unfinished GPU work refuses a write mapping: skip it. */
    void *p;
    if (hrx_buffer_map(d->pinned[i].hb, HRX_ACCESS_WRITE, &p) != HRX_OK) continue;
    hrx_buffer_unmap(d->pinned[i].hb, HRX_ACCESS_WRITE);
    *out = d->pinned[i];
    d->pinned[i] = d->pinned[--d->npinned];
    pthread_mutex_unlock(&d->lock);
    return NV_OK;
  }
  pthread_mutex_unlock(&d->lock);
  hrx_buffer *hb = NULL;
  hrx_status hs = hrx_buffer_create(d->rt, HRX_MEMORY_HOST_VISIBLE, cap, &hb);
  if (hs != HRX_OK) return nv__gpu_hrx_error(hs, "pinned host memory");
  out->hb = hb;
  out->cap = cap;
  return NV_OK;
}

void nv__gpu_pinned_put(nv__gpu_dev *d, nv__pinned p) {
  pthread_mutex_lock(&d->lock);
  if (d->npinned < 64 && p.cap <= ((size_t)64 << 20)) {
    if (d->npinned == d->cpinned) {
      size_t nc = d->cpinned ? d->cpinned * 2 : 16;
      nv__pinned *np = realloc(d->pinned, nc * sizeof *np);
      if (np) {
        d->pinned = np;
        d->cpinned = nc;
      }
    }
    if (d->npinned < d->cpinned) {
      d->pinned[d->npinned++] = p;
      p.hb = NULL;
    }
  }
  pthread_mutex_unlock(&d->lock);
  hrx_buffer_release(p.hb);
}

/* ---- device copies ---- */

atomic_long nv__gpu_stat_device_allocs;
static atomic_int hooks_set;

nv__devcopy *nv__devcopy_new(nv__gpu_dev *d, size_t bytes) {
  if (!atomic_load(&hooks_set)) {
    atomic_store(&nv__gpu_hooks_ptr, &nv__gpu_buffer_hooks);
    atomic_store(&hooks_set, 1);
  }
  nv__devcopy *dc = nv__calloc(1, sizeof *dc);
  if (!dc) {
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
    return NULL;
  }
  if (nv__gpu_mem_alloc(d, bytes, &dc->hb, &dc->cap) != NV_OK) {
    nv__free(dc);
    return NULL;
  }
  atomic_init(&dc->refs, 1);
  dc->device = d->index;
  pthread_mutex_init(&dc->lock, NULL);
  pthread_cond_init(&dc->cond, NULL);
  dc->dev_valid = true;
  return dc;
}

/* Waits (under dc->lock) until no other thread's recording holds the copy unsubmitted. Fails
 * when the calling thread's own open recording holds it (a read that cannot be satisfied). */
static nv_status wait_submitted_locked(nv__devcopy *dc) {
  while (dc->pending) {
    if (dc->pending->thread == nv__thread_id())
      return nv__set_error(NV_ERR_BACKEND,
                           "internal error: reading GPU data whose recording is still open");
    pthread_cond_wait(&dc->cond, &dc->lock);
  }
  return NV_OK;
}

/* Waits for the copy's writer; its failure is the read's error. */
static nv_status wait_writer(nv__devcopy *dc) {
  pthread_mutex_lock(&dc->lock);
  nv_status s = wait_submitted_locked(dc);
  nv__gpu_sub *w = dc->writer;
  if (w) atomic_fetch_add(&w->refs, 1);
  pthread_mutex_unlock(&dc->lock);
  if (s != NV_OK) return s;
  if (w) {
    s = nv__gpu_sub_wait(w);
    nv__gpu_sub_release(w);
  }
  return s;
}

static nv_status hook_status(nv__buffer *b) {
  nv__devcopy *dc = atomic_load(&b->dev);
  return dc ? wait_writer(dc) : NV_OK;
}

/* Downloads the device copy into a pinned shadow and makes it (or the buffer's own host
 * memory) the valid host copy. */
static nv_status hook_to_host(nv__buffer *b) {
  nv__devcopy *dc = atomic_load(&b->dev);
  if (!dc) return NV_OK;
  pthread_mutex_lock(&dc->lock);
  bool valid = dc->host_valid;
  pthread_mutex_unlock(&dc->lock);
  if (valid) return NV_OK;
  nv_status s = wait_writer(dc);
  if (s != NV_OK) return s;
  nv__gpu_dev *d = nv__gpu_dev_get(dc->device);
  if (!d) return NV_ERR_DEVICE_LOST;
  pthread_mutex_lock(&dc->lock);
  if (dc->host_valid) {
    pthread_mutex_unlock(&dc->lock);
    return NV_OK;
  }
  size_t bytes = b->nbytes;
  if (!dc->shadow) {
    nv__pinned p;
    if ((s = nv__gpu_pinned_get(d, bytes ? bytes : 1, &p)) != NV_OK) {
      pthread_mutex_unlock(&dc->lock);
      return s;
    }
    dc->shadow = p.hb;
    dc->shadow_cap = p.cap;
  } else if (dc->shadow_mapped) {
    hrx_buffer_unmap(dc->shadow, HRX_ACCESS_READ);
    dc->shadow_mapped = false;
  }
  hrx_status hs = HRX_OK;
  if (bytes) {
    hrx_graph *g = NULL;
    hrx_prepared *p = NULL;
    hrx_completion *c = NULL;
    hs = hrx_graph_create(d->rt, &g);
    if (hs == HRX_OK)
      hs = hrx_graph_copy(g, hrx_view_make(dc->shadow, 0, bytes), hrx_view_make(dc->hb, 0, bytes),
                          NULL);
    if (hs == HRX_OK) hs = hrx_graph_prepare(g, &p);
    if (hs == HRX_OK) g = NULL;
    while (hs == HRX_OK && (hs = hrx_submit(p, &c)) == HRX_E_BUSY) nv__gpu_sweep(d, 0);
    if (hs == HRX_OK) hs = hrx_completion_wait(c, HRX_WAIT_FOREVER);
    hrx_completion_release(c);
    hrx_prepared_release(p);
    hrx_graph_release(g);
  }
  void *host = NULL;
  if (hs == HRX_OK) hs = hrx_buffer_map(dc->shadow, HRX_ACCESS_READ, &host);
  if (hs != HRX_OK) {
    pthread_mutex_unlock(&dc->lock);
    return nv__gpu_hrx_error(hs, "reading an array back from the GPU");
  }
  dc->shadow_mapped = true;
  if (b->ptr && b->ptr != host) memcpy(b->ptr, host, bytes); /* a host buffer written on the GPU */
  else b->ptr = host;
  dc->host_valid = true;
  pthread_mutex_unlock(&dc->lock);
  return NV_OK;
}

static void hook_host_written(nv__buffer *b) {
  nv__devcopy *dc = atomic_load(&b->dev);
  if (!dc) return;
  pthread_mutex_lock(&dc->lock);
  dc->host_valid = true;
  dc->dev_valid = false;
  pthread_mutex_unlock(&dc->lock);
}

static void hook_release(nv__buffer *b) {
  nv__devcopy *dc = atomic_exchange(&b->dev, NULL);
  if (!dc) return;
  nv__gpu_dev *d = nv__gpu_dev_get(dc->device);
  if (dc->shadow) {
    if (dc->shadow_mapped) hrx_buffer_unmap(dc->shadow, HRX_ACCESS_READ);
    /* The shadow is the buffer's host memory when the GPU made the buffer. */
    if (b->capacity == 0 && b->kind == NV__BUF_POOL) b->ptr = NULL;
    if (d) nv__gpu_pinned_put(d, (nv__pinned){dc->shadow, dc->shadow_cap});
    else hrx_buffer_release(dc->shadow);
  }
  pthread_mutex_lock(&dc->lock);
  hrx_buffer *hb = dc->hb;
  dc->hb = NULL;
  dc->shadow = NULL;
  pthread_mutex_unlock(&dc->lock);
  if (d) nv__gpu_mem_free(d, hb, dc->cap);
  else hrx_buffer_release(hb);
  nv__devcopy_release(dc);
}

void nv__devcopy_release(nv__devcopy *dc) {
  if (!dc || atomic_fetch_sub(&dc->refs, 1) != 1) return;
  nv__gpu_sub_release(dc->writer);
  pthread_mutex_destroy(&dc->lock);
  pthread_cond_destroy(&dc->cond);
  nv__free(dc);
}

static nv_status hook_device_ptr(nv__buffer *b, int *device, uint64_t *address) {
  nv__devcopy *dc = atomic_load(&b->dev);
  if (!dc) return NV_ERR_UNSUPPORTED;
  nv_status s = wait_writer(dc);
  if (s != NV_OK) return s;
  pthread_mutex_lock(&dc->lock);
  bool valid = dc->dev_valid;
  pthread_mutex_unlock(&dc->lock);
  if (!valid) return NV_ERR_UNSUPPORTED;
  if (hrx_buffer_gpu_address(dc->hb, address) != HRX_OK) return NV_ERR_BACKEND;
  *device = dc->device;
  return NV_OK;
}

const nv__gpu_hooks nv__gpu_buffer_hooks = {hook_to_host, hook_host_written, hook_release,
                                            hook_status, hook_device_ptr};

/* ---- statistics (src/core/memory.c asks) ---- */

size_t nv__gpu_memory(int index, int what, size_t arg) {
  if (index < 0 || index >= nv_device_count(NV_DEVICE_GPU)) return 0;
  nv__gpu_dev *d = nv__gpu_dev_get(index);
  if (!d) return 0;
  pthread_mutex_lock(&d->lock);
  size_t r = 0;
  switch (what) {
    case 0: r = d->active; break;
    case 1: r = d->peak; break;
    case 2: d->peak = 0; break; /* MLX's rule (memory.h) */
    case 3: r = d->cached; break;
    case 4: {
      r = d->limit;
      size_t total = 0, free_b = 0;
      if (!arg && cudaSetDevice(index) == cudaSuccess && cudaMemGetInfo(&free_b, &total) == cudaSuccess)
        arg = total;
      cudaGetLastError();
      d->limit = arg ? arg : r;
      if (d->active + d->cached > d->limit) trim_locked(d, d->limit > d->active ? d->limit - d->active : 0);
      break;
    }
    case 5: r = d->limit; break;
    case 6: trim_all_locked(d); break;
    default: break;
  }
  pthread_mutex_unlock(&d->lock);
  return r;
}
