/* hrx internals shared by the library's source files. Never installed. */
#ifndef HRX_INTERNAL_H
#define HRX_INTERNAL_H

#include "hrx.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#ifdef HRX_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define HRX_MSG 512
/* Queues: one worker each. 0..2 are the GPU lanes, 3 runs scoped callbacks, 4 host callbacks. */
#define HRX_QUEUE_SCOPED 3
#define HRX_QUEUE_HOST 4
#define HRX_QUEUES 5
#define HRX_MAX_FAULTS 64

/* ---- errors and allocation (error.c) ---- */
hrx_status hrx__err(hrx_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void hrx__clear_error(void);
void *hrx__calloc(size_t count, size_t size);
bool hrx__alloc_fails(void);
void hrx__test_fail_allocations_after(long n);
void *hrx__realloc(void *p, size_t size);
void hrx__free(void *p);
#ifdef HRX_HAVE_CUDA
/* Wraps a CUDA error into an hrx status with CUDA's name and text after `what`. */
hrx_status hrx__cuda_err(cudaError_t e, const char *what);
/* True for errors that leave the CUDA context unusable (illegal address, trap, ...). */
bool hrx__cuda_sticky(cudaError_t e);
#endif

/* ---- objects ---- */

/* The target of completions' weak link to their runtime. */
typedef struct hrx__token {
  atomic_int refs;
  pthread_mutex_t lock;
  int alive;              /* under lock */
  struct hrx_runtime *rt; /* valid while alive */
} hrx__token;
void hrx__token_release(hrx__token *t);

/* One allocation; buffers own one, and quarantine can keep one alive past its buffer. */
typedef struct hrx__alloc {
  atomic_int refs;
  hrx_engine engine;
  hrx_memory memory;
  void *host;    /* host address: host-visible and host-only memory, any host-engine memory */
  uint64_t gpu;  /* address the GPU (or host engine) kernels see; 0 for host-only */
  void *base;    /* what to free */
} hrx__alloc;
void hrx__alloc_release(hrx__alloc *a);

struct hrx_buffer {
  atomic_int refs;
  struct hrx_runtime *rt;
  hrx__alloc *alloc;
  hrx_memory memory;
  size_t size;
  atomic_int last_writer;
  /* Under rt->lock: */
  char *poison;
  int map_read, map_write;
  int pending_reads, pending_writes;
};

struct hrx_kernel {
  atomic_int refs;
  struct hrx_runtime *rt;
  hrx_kernel_contract contract;
  hrx_binding_contract *bindings;
  hrx_constant *constants;
  uint32_t grid[3], block[3];
  hrx_host_kernel_fn host_fn;
  void *host_user;
  const void *stub;      /* hrx_kernel_create_function: the nvcc function's host address */
  size_t params_size;    /* bytes of the by-value parameter block (0: none) */
  uint32_t shared_bytes; /* dynamic shared memory per launch */
#ifdef HRX_HAVE_CUDA
  cudaLibrary_t library;
  cudaKernel_t function;
#endif
};

/* A callback with its user data; one lock serializes its runs (across slots too). A captured
 * operation's function (capture_fn) is called at prepare and update time instead, under the
 * runtime's capture lock. */
typedef struct hrx__callback {
  atomic_int refs;
  pthread_mutex_t lock;
  bool scoped;
  hrx_scoped_fn scoped_fn;
  hrx_host_fn host_fn;
  hrx_capture_fn capture_fn;
  void *user;
  hrx_destroy_fn destroy;
  void *key; /* captured: the work apart from the views (owned copy), or NULL */
  size_t key_size;
} hrx__callback;
void hrx__callback_release(hrx__callback *c);

/* Whether two captured operations' callbacks enqueue the same work over the same views: the
 * same function, and the same user data or the same key. */
static inline bool hrx__captured_same(const hrx__callback *a, const hrx__callback *b) {
  if (a == b) return true;
  if (a->capture_fn != b->capture_fn) return false;
  if (a->user == b->user) return true;
  return a->key_size && a->key_size == b->key_size && !memcmp(a->key, b->key, a->key_size);
}

/* A declared access; `access` keeps the declared kind. */
typedef struct hrx__use {
  hrx_view view;
  hrx_access access;
} hrx__use;
static inline bool hrx__writes(hrx_access a) { return (a & HRX_ACCESS_WRITE) != 0; }
bool hrx__uses_conflict(const hrx__use *a, size_t na, const hrx__use *b, size_t nb);

/* A captured operation is a native operation like a dispatch: it lives in a native region. */
typedef enum {
  HRX_OP_FILL,
  HRX_OP_COPY,
  HRX_OP_DISPATCH,
  HRX_OP_SCOPED,
  HRX_OP_HOST,
  HRX_OP_CAPTURED
} hrx__op_kind;

typedef struct hrx__op {
  hrx__op_kind kind;
  hrx_lane lane;
  uint8_t value;           /* fill */
  hrx_view dst, src;       /* fill: dst; copy: dst, src */
  hrx_kernel *kernel;      /* dispatch (retained) */
  hrx_view *views;         /* dispatch bindings, or callback and captured bindings */
  size_t nviews;
  hrx_constant *constants; /* dispatch */
  size_t nconstants;
  void *params;            /* dispatch: by-value parameter block (owned) */
  size_t params_size;
  hrx__callback *callback; /* scoped, host, captured (retained) */
  hrx__use *uses;          /* each use's buffer retained once */
  size_t nuses;
  bool one_block;          /* dispatch: views, constants and params live in uses' allocation */
} hrx__op;
void hrx__op_clear(hrx__op *op);

struct hrx_graph {
  struct hrx_runtime *rt;
  hrx__op *ops;
  size_t count, cap;
};

typedef enum { HRX_REG_NATIVE, HRX_REG_COPY, HRX_REG_SCOPED, HRX_REG_HOST } hrx__region_kind;

typedef struct hrx__region {
  hrx__region_kind kind;
  hrx_lane lane;
  int queue;
  size_t first, count; /* operations [first, first + count) */
  size_t copy_bytes;
  hrx__use *uses; /* summarized; views borrowed from the ops */
  size_t nuses;
  size_t *deps; /* regions this one depends on */
  size_t ndeps;
  pthread_mutex_t lock; /* one launch at a time per executable */
#ifdef HRX_HAVE_CUDA
  cudaGraph_t graph; /* what exec was instantiated from: the source of node handles only */
  cudaGraphExec_t exec;
  cudaStream_t stream;
  cudaEvent_t *events;    /* one per slot */
  cudaGraphNode_t *nodes; /* the graph's node of each operation, for updates in place */
  /* Each captured operation's captured graph (what the executable's child node holds now),
   * NULL for other operations; the array is NULL while none was captured. It belongs to the
   * plan's operations, not to the executable: a region is rebuilt from it without calling
   * the capture functions again (the fallback and the rollback of a failed update). */
  cudaGraph_t *children;
#endif
} hrx__region;

/* The prepared form of a list of operations. */
typedef struct hrx__plan {
  hrx__op *ops;
  size_t nops;
  size_t **op_deps; /* per op: ops (global indices) it depends on inside its region */
  size_t *op_ndeps;
  hrx__region *regions;
  size_t nregions;
  hrx__use *uses; /* graph-wide summary */
  size_t nuses;
  bool parallel;
} hrx__plan;

typedef struct hrx__slot {
  bool occupied;
  struct hrx_completion *signal; /* one reference held by the slot */
  struct hrx__run *run;
} hrx__slot;

struct hrx_prepared {
  atomic_int refs;
  struct hrx_runtime *rt;
  hrx__plan plan;
  atomic_int quarantined;
  uint32_t nslots;
  hrx__slot *slots; /* under rt->lock */
};

struct hrx_completion {
  atomic_int refs;
  hrx__token *token;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool done;      /* under lock: observable completion */
  atomic_int done_hint; /* `done` for a waiter's spin before it sleeps (the lock decides) */
  /* Under the runtime's lock while the runtime lives; frozen once finished. */
  bool finished;
  hrx_status status;
  char message[HRX_MSG];
  struct hrx__run *run;
};

typedef enum { HRX_RI_PENDING, HRX_RI_RUNNING, HRX_RI_ISSUED, HRX_RI_DONE, HRX_RI_SKIPPED } hrx__ri_state;

typedef struct hrx__edge {
  struct hrx__run *run;
  size_t region;
} hrx__edge;

/* A region of one run. */
typedef struct hrx__ri {
  hrx__ri_state state;
  hrx__edge *order; /* regions of earlier runs it is ordered after (conflicting accesses) */
  size_t norder;
} hrx__ri;

/* One accepted submission. Lives in the runtime's active list until it finishes. */
typedef struct hrx__run {
  struct hrx__run *next, *prev;
  uint64_t seq;
  hrx_prepared *prepared; /* retained */
  uint32_t slot;
  struct hrx_completion *signal;
  hrx__ri *ri;
  size_t remaining;
  hrx_status failure;
  char message[HRX_MSG];
  struct hrx__run **producers; /* explicit producers still unfinished */
  size_t nproducers;
  struct hrx__run *grave_next;
} hrx__run;

typedef struct hrx__watch {
  hrx__run *run;
  size_t region;
  struct hrx__watch *next;
} hrx__watch;

typedef struct hrx__quarantine {
  hrx__callback *callback;
  hrx__alloc **allocs;
  size_t nallocs;
  struct hrx__quarantine *next;
} hrx__quarantine;

struct hrx_runtime {
  atomic_int refs;
  hrx_runtime_options options;
  hrx__token *token;
  pthread_mutex_t lock;
  pthread_cond_t work[HRX_QUEUES]; /* one per queue worker: signalled when it has ready work */
  pthread_cond_t watch[3];         /* one per lane watcher: signalled when a region is issued */
  pthread_cond_t idle;
  bool shutdown;
  bool failed;
  atomic_int failed_flag; /* `failed`, readable without the lock (set once, after the message) */
  char fail_message[HRX_MSG];
  hrx__run *head, *tail;
  size_t active;
  uint64_t seq;
  int faults[HRX_MAX_FAULTS];
  size_t fault_head, fault_count;
  bool copy_created[3];
  bool copy_healthy[3];
  pthread_mutex_t copy_lock[3];
  hrx__watch *watch_head[3], *watch_tail[3];
  /* Per lane (written under the lock, readable without it): how many watch entries have
   * been settled, how many are queued, and whether the lane's watcher is waiting for its
   * head's event outside the lock. A waiter helping the watcher (polling a head's event
   * outside the lock) settles that head only if the settled count has not moved and the
   * watcher is not waiting for it, so the watcher's head stays valid while it waits. */
  atomic_uint_least64_t watch_gen[3];
  atomic_int watch_len[3];
  atomic_bool watch_busy[3];
  hrx__quarantine *quarantine;
  hrx__run *graveyard; /* finished runs to free outside the lock */
  pthread_t threads[HRX_QUEUES + 3];
  struct hrx__targ {
    struct hrx_runtime *rt;
    hrx__token *token; /* written before the thread starts; rt->token is cleared at teardown */
    int index; /* 0..4: queue workers; 5..7: lane watchers (CUDA engine) */
  } targs[HRX_QUEUES + 3];
  size_t nthreads;
  struct {
    atomic_uint_least64_t submissions, native_prepared, native_updated, copy_streams,
        lane_bytes[3], copied, regions_failed, quarantined_callbacks, event_waits;
  } counters;
  /* Serializes captures of captured operations: one capture stream per runtime. */
  pthread_mutex_t capture_lock;
#ifdef HRX_HAVE_CUDA
  int device;
  int cc_major, cc_minor;
  cudaStream_t copy_stream[3];
  cudaStream_t capture_stream; /* under capture_lock; made on first use */
#endif
};

/* ---- runtime.c ---- */
/* The token of the runtime whose worker or watcher the calling thread is (NULL elsewhere):
 * waits that only that runtime's threads could satisfy are refused instead of deadlocking. */
extern _Thread_local hrx__token *hrx__thread_runtime;
void hrx__lock(hrx_runtime *rt);
/* Unlocks, then frees finished runs and notifies their completions outside the lock. */
void hrx__unlock(hrx_runtime *rt);
/* Wakes the workers that have ready work, or all threads at shutdown (under rt->lock). */
void hrx__wake_locked(hrx_runtime *rt);
/* Fails the whole runtime (under rt->lock): every active run fails with device lost. */
void hrx__runtime_fail_locked(hrx_runtime *rt, const char *message);
/* Checks the runtime is healthy; sets the last error naming `call` if not. */
hrx_status hrx__runtime_usable(hrx_runtime *rt, const char *call);

/* ---- graph.c ---- */
hrx_status hrx__view_check(hrx_runtime *rt, const char *call, const char *what, hrx_view v);

/* ---- prepare.c ---- */
hrx_status hrx__plan_build(hrx_runtime *rt, hrx__op *ops, size_t nops, uint32_t slots,
                           const char *call, hrx__plan *out);
hrx_status hrx__plan_materialize(hrx_runtime *rt, hrx__plan *plan, uint32_t slots,
                                 const char *call);
void hrx__plan_destroy(hrx__plan *plan, uint32_t slots);
bool hrx__plan_same_topology(const hrx__plan *a, const hrx__plan *b);
/* Whether two operations of the same kind and topology lower to identical node parameters:
 * views, constants, parameter blocks, fill values; a captured operation's work is the same
 * only for the same function and user data (or key). */
bool hrx__op_same_params(const hrx__op *a, const hrx__op *b);

/* ---- sched.c ---- */
void *hrx__worker_main(void *arg);
void *hrx__watcher_main(void *arg);
void hrx__run_fail_locked(hrx_runtime *rt, hrx__run *run, hrx_status status, const char *msg);

/* ---- cuda.c (CUDA engine) ---- */
#ifdef HRX_HAVE_CUDA
hrx_status hrx__cuda_runtime_init(hrx_runtime *rt);
void hrx__cuda_runtime_fini(hrx_runtime *rt);
hrx_status hrx__cuda_alloc(hrx_runtime *rt, hrx_memory memory, size_t bytes, hrx__alloc *a);
/* Builds the region's native graph (captured operations are captured into child graphs);
 * `*nodes` receives its node of each operation. Errors name `call`. */
hrx_status hrx__cuda_build_region(hrx_runtime *rt, const hrx__plan *plan, hrx__region *reg,
                                  const char *call, cudaGraph_t *out, cudaGraphNode_t **nodes);
/* Rewrites, in reg's executable, the parameters of the nodes whose operation changed between
 * `old` and `fresh` (same topology), capturing changed captured operations again. *updated
 * says whether anything changed (set before the first node is touched, so after a failure it
 * says whether the executable may be part-updated). On failure *refused says whether the
 * driver refused a change (the caller then instantiates the region again) rather than a
 * captured operation failing (an error of the update). */
hrx_status hrx__cuda_update_region(hrx_runtime *rt, const hrx__plan *old, hrx__plan *fresh,
                                   hrx__region *reg, bool *updated, bool *refused);
/* Whether some operation of region `region` lowers to other node parameters in `fresh` than in
 * `old` (same topology): the update in place rewrites that region's executable. */
bool hrx__cuda_region_changed(const hrx__plan *old, const hrx__plan *fresh, size_t region);
/* After a successful update in place: the captured graphs of `from`'s operations that were not
 * captured again pass to the same operations of `to` (the region of the updated plan). */
void hrx__cuda_adopt_children(hrx__region *to, hrx__region *from);
/* Fill kernel for host-visible memory, compiled by nvcc (fill.cu). */
const void *hrx__fill_kernel(void);
#endif

/* Whether an engine's copy regions/graph regions run on the GPU asynchronously. */
static inline bool hrx__gpu_engine(const hrx_runtime *rt) {
  return rt->options.engine == HRX_ENGINE_CUDA;
}

#endif
