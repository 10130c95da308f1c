/* The CUDA backend's own objects (host C): devices, device copies of buffers, submissions and
 * recordings. Kernel families see only gpu.h. */
#ifndef NUVEC_CUDA_INTERNAL_H
#define NUVEC_CUDA_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "core/backend.h"
#include "cuda/gpu.h"

#define NV__GPU_MAX_DEVICES 16
#define NV__GPU_CLASSES 256

/* One submission of an evaluation's recorded work: observed by the buffers it wrote. Its hrx
 * completion is released as soon as it is seen finished (so prepared graphs can be updated),
 * keeping only the status and message. */
/* A recorded node's index check (gpu.h): its record's slot in the device's check pool. */
typedef struct nv__gpu_check {
  uint32_t slot;
  const char *op;
} nv__gpu_check;

/* A submission also holds the index checks its nodes recorded and the unfinished submissions it
 * ran after (it read what they wrote): when it is seen finished, a raised check or a failed one
 * of those fails it (a dependency hrx saw succeed may have written data from a failed check). */
/* What a callback of a recording (a host collective, a library call in a scoped region or a
 * capture) reports when it fails: its status and message, which become the submission's error
 * in place of hrx's "callback failed". The recording holds one reference, each callback's
 * user data one, the submission one. The first failure is kept. */
typedef struct nv__gpu_note {
  atomic_int refs;
  atomic_int status; /* 0 until a failure; -1 while its message is written */
  char msg[512];
} nv__gpu_note;

/* A new reference to the open recording's note (made on first use); NULL when out of memory. */
nv__gpu_note *nv__gpu_note_take(nv__gpu_ctx *ctx);
/* Records a failure (printf-style message) unless one is recorded already. */
void nv__gpu_note_fail(nv__gpu_note *n, nv_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The failure recorded (NV_OK: none); copies its message into msg[cap]. */
nv_status nv__gpu_note_read(nv__gpu_note *n, char *msg, size_t cap);
void nv__gpu_note_release(nv__gpu_note *n);

typedef struct nv__gpu_sub {
  atomic_int refs;
  pthread_mutex_t lock;
  hrx_completion *c; /* NULL once finished (or when the submission never happened) */
  bool done;
  nv_status status;
  char msg[512];
  struct nv__gpu_dev *dev;
  nv__gpu_check *checks;
  size_t nchecks;
  struct nv__gpu_sub *after[17];
  int nafter;
  nv__gpu_note *note; /* the recording's callbacks' failure, if any of them failed */
} nv__gpu_sub;

nv__gpu_sub *nv__gpu_sub_new(hrx_completion *c);
/* A submission that failed before reaching the GPU (status and message given). */
nv__gpu_sub *nv__gpu_sub_failed(nv_status status, const char *msg);
void nv__gpu_sub_release(nv__gpu_sub *s);
/* Waits for the submission; returns its status (setting the thread's error when it failed). */
nv_status nv__gpu_sub_wait(nv__gpu_sub *s);
/* Whether it finished (never blocks; records the result when it did). */
bool nv__gpu_sub_poll(nv__gpu_sub *s);

/* A buffer's device side, counted: the buffer holds one reference, and each recording that
 * wrote it holds one until its commit publishes the writer (the buffer may be freed first: its
 * memory then returns to the cache, where hrx orders any reuse after the recorded work).
 * Under `lock`: */
struct nv__devcopy {
  atomic_int refs;
  int device;
  hrx_buffer *hb; /* device memory of `cap` bytes (a size class of the device cache) */
  size_t cap;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct nv__gpu_ctx *pending; /* a recording that wrote it and has not submitted yet */
  nv__gpu_sub *writer;         /* the submission that last wrote it (or NULL) */
  bool dev_valid, host_valid;
  hrx_buffer *shadow; /* pinned host copy, mapped for reading while host_valid */
  size_t shadow_cap;
  bool shadow_mapped;
};

typedef struct nv__gpu_kentry nv__gpu_kentry;
typedef struct nv__gpu_gentry nv__gpu_gentry;

/* A pinned host buffer of a size class, kept for reuse (staging for uploads, download copies). */
typedef struct nv__pinned {
  hrx_buffer *hb;
  size_t cap;
} nv__pinned;

/* Allocations an evaluation's trace remembers (nv__gpu_dev's hint). */
#define NV__GPU_ALLOC_TRACE 1024

typedef struct nv__gpu_dev {
  int index;
  hrx_runtime *rt;
  pthread_mutex_t lock; /* memory, pools, kernels, graph cache, in-flight list */
  /* device memory: free lists by size class */
  hrx_buffer **free_list[NV__GPU_CLASSES];
  size_t free_n[NV__GPU_CLASSES], free_cap[NV__GPU_CLASSES];
  size_t active, peak, cached, limit, cache_limit;
  /* pinned host buffers */
  nv__pinned *pinned;
  size_t npinned, cpinned;
  /* interned kernels */
  nv__gpu_kentry **kernels;
  size_t nkernels;
  /* prepared graphs by structure */
  nv__gpu_gentry **graphs;
  size_t ngraphs;
  /* submissions not yet seen finished, oldest first */
  nv__gpu_sub **inflight;
  size_t ninflight, cinflight;
  hrx_buffer *dummy; /* a 16-byte placeholder view for empty arrays */
  /* Recordings with an open graph (their generation when they opened), and device memory
   * freed while some were open: an unsubmitted recording of another thread may still read or
   * write it, and reuse is ordered only among submitted work, so it returns to the cache once
   * every recording open at the free has been submitted. */
  uint64_t gen;
  struct nv__gpu_ctx **open;
  size_t nopen, copen;
  struct nv__gpu_deferred {
    hrx_buffer *hb;
    size_t cap;
    uint64_t gen;
  } *deferred;
  size_t ndeferred, cdeferred;
  /* index-check records (gpu.h): pages of mapped host memory, and the free slots */
  pthread_mutex_t check_lock;
  struct nv__gpu_check_page *check_pages;
  size_t ncheck_pages;
  uint32_t *check_free;
  size_t ncheck_free, ccheck_free;
  /* The last evaluation's allocations in order (memory.c): a repeated evaluation (a training
   * or decode step) asks for the buffer its predecessor got at the same place, when that one
   * is free, so that its recorded graph binds the same buffers and replays unchanged. */
  struct nv__gpu_alloc_rec {
    hrx_buffer *hb;
    int cls;
  } hint[NV__GPU_ALLOC_TRACE], rec[NV__GPU_ALLOC_TRACE];
  size_t hint_n, hint_pos, rec_n;
} nv__gpu_dev;

/* Device allocations made (cache misses), for the benchmarks' diagnostics. */
extern atomic_long nv__gpu_stat_device_allocs;

/* The device `index`, started on first use; NULL with the thread's error set when it cannot. */
nv__gpu_dev *nv__gpu_dev_get(int index);

/* Device memory of at least `bytes` from the device's cache (*cap gets the class size). */
nv_status nv__gpu_mem_alloc(nv__gpu_dev *d, size_t bytes, hrx_buffer **out, size_t *cap);
/* An evaluation's first use of the device, and its end: the allocation trace (memory.c). */
void nv__gpu_alloc_trace_begin(nv__gpu_dev *d);
void nv__gpu_alloc_trace_end(nv__gpu_dev *d);
/* Gives device memory back to the cache (GPU work still using it is ordered by hrx). */
void nv__gpu_mem_free(nv__gpu_dev *d, hrx_buffer *hb, size_t cap);
/* Pinned host memory of at least `bytes`, not mapped and not in use by unfinished GPU work
 * (mapping it for writing succeeds), and its return to the pool. */
nv_status nv__gpu_pinned_get(nv__gpu_dev *d, size_t bytes, nv__pinned *out);
void nv__gpu_pinned_put(nv__gpu_dev *d, nv__pinned p);
/* Opens / closes a recording's membership among the device's open recordings; closing
 * returns the deferred memory no open recording can reach any more. */
void nv__gpu_open_add(nv__gpu_dev *d, struct nv__gpu_ctx *ctx);
void nv__gpu_open_remove(nv__gpu_dev *d, struct nv__gpu_ctx *ctx);
/* Drops cached prepared graphs and free memory (an allocation failed). */
void nv__gpu_trim(nv__gpu_dev *d);

/* A new device copy with `bytes` of device memory (dev_valid, not host_valid). */
nv__devcopy *nv__devcopy_new(nv__gpu_dev *d, size_t bytes);

/* The hooks the core calls for buffers with a device copy. */
extern const nv__gpu_hooks nv__gpu_buffer_hooks;

/* One evaluation's recording on one device. */
typedef struct nv__gpu_ctx {
  nv__gpu_dev *dev;
  int thread;
  hrx_graph *g;
  size_t nops;
  uint64_t hash;
  nv__devcopy **written; /* device copies written here, held until the commit publishes */
  size_t nwritten, cwritten;
  struct nv__gpu_temp {
    hrx_buffer *hb;
    size_t cap;
  } *temps;
  size_t ntemps, ctemps;
  nv__pinned *staging;
  size_t nstaging, cstaging;
  hrx_buffer *ids[32]; /* buffers seen, for the structure hash's binding pattern */
  size_t nids;
  nv__gpu_sub *last; /* this evaluation's last submission on the device */
  uint64_t open_gen;  /* the device generation when the open graph began */
  nv__gpu_sub *deps[16]; /* other evaluations' in-flight writers of what it reads (E6c) */
  int ndeps;
  nv__gpu_check *checks; /* the index checks of the open recording */
  size_t nchecks, cchecks;
  nv__gpu_note *note; /* the open recording's callbacks' failure note (nv__gpu_note_take) */
  struct nv__gpu_dist *dist; /* the open recording's host collectives (src/cuda/distributed.c) */
} nv__gpu_ctx;

/* The collectives of a recording take their tickets in their groups' program order when it is
 * submitted (src/cuda/distributed.c): nv__gpu_dist_submitting before the submission (it holds a
 * lock until nv__gpu_dist_submitted, so tickets follow hrx's submission order), and
 * nv__gpu_dist_submitted after it with its completion, or NULL when nothing was submitted (then
 * or for a recording that was never submitting, the tickets are given up). No-ops for a
 * recording without collectives. */
void nv__gpu_dist_submitting(nv__gpu_ctx *ctx);
void nv__gpu_dist_submitted(nv__gpu_ctx *ctx, hrx_completion *c);

/* The recordings of one evaluation (nv__ectx.gpu). */
typedef struct nv__gpu_ectx {
  nv__gpu_ctx *dev[NV__GPU_MAX_DEVICES];
} nv__gpu_ectx;

/* Index checks (checks.c): hands the recording's checks to its submission `s` (NULL, or one
 * that failed before running: the records are freed at once); resolves a finished submission's
 * checks (sets its status and message when one was raised; under s->lock); frees a
 * submission's unresolved records once its work is finished; frees the device's pool. */
void nv__gpu_checks_submit(nv__gpu_ctx *ctx, nv__gpu_sub *s);
void nv__gpu_checks_resolve(nv__gpu_sub *s);
void nv__gpu_checks_drop(nv__gpu_dev *d, nv__gpu_check *checks, size_t n);

/* Submits the recording's open work (no wait). Failures reach the buffers it wrote. */
void nv__gpu_ctx_commit(nv__gpu_ctx *ctx);
/* Marks a device copy as written by this recording (pending until the commit). Called under
 * dc->lock. */
nv_status nv__gpu_ctx_wrote(nv__gpu_ctx *ctx, nv__devcopy *dc);
void nv__devcopy_release(nv__devcopy *dc);
/* Records an upload of host data into a device copy (the store kernel for small data, a
 * pinned staging copy otherwise). */
nv_status nv__gpu_record_upload(nv__gpu_ctx *ctx, hrx_view dst, const void *src, size_t bytes);
/* Mixes a value into the recording's structure hash. */
void nv__gpu_hash(nv__gpu_ctx *ctx, uint64_t v);
/* Mixes a buffer's position among the recording's buffers (its binding pattern). */
void nv__gpu_hash_buffer(nv__gpu_ctx *ctx, hrx_buffer *hb);
/* Ensures the recording has an open builder. */
nv_status nv__gpu_ctx_graph(nv__gpu_ctx *ctx);
/* Waits until the submission list is short enough, sweeps finished submissions. */
void nv__gpu_sweep(nv__gpu_dev *d, size_t keep);
/* An nv_status for an hrx status, with hrx's message in the thread's error after `what`. */
nv_status nv__gpu_hrx_error(hrx_status s, const char *what);

/* The upload kernels (backend_kernels.cu): `bytes` (<= NV__GPU_STORE_MAX) of a by-value block
 * stored at dst. *func and *params_size describe the launch for that size. */
#define NV__GPU_STORE_MAX 2048
void nv__gpu_store_kernel(size_t bytes, const void **func, size_t *params_size);

#endif
