/* The NCCL backend (DESIGN §10): libnccl.so.2 loaded at run time (NUVEC_NCCL_LIBRARY, the
 * loader's path, or the CUDA toolkit's lib64/lib). An NCCL group is the ring's group (the same environment: MLX_RANK/MLX_HOSTFILE or NUVEC_*) plus an NCCL communicator
 * bootstrapped over it: rank 0's ncclUniqueId reaches the others through the ring's
 * all_gather, then ncclCommInitRank on this rank's GPU (NUVEC_NCCL_DEVICE, else LOCAL_RANK,
 * else the rank, modulo the GPU count). Collectives over host memory (CPU streams, send/recv
 * with their header, and what NCCL lacks: 16-bit integers, complex max/min) run on the ring;
 * GPU-stream all_sum/max/min, all_gather and sum_scatter are NCCL calls captured into the
 * evaluation's CUDA graph (src/cuda/distributed.c, nv__nccl_enqueue). NCCL does not report a
 * lost peer by itself: communicators are non-blocking (ncclCommInitRankConfig and
 * ncclCommSplit with blocking = 0, where the library has them: NCCL >= 2.14 / 2.18), so no NCCL
 * call can hang a thread; their pending work is polled with ncclCommGetAsyncError, bounded by
 * NUVEC_DIST_TIMEOUT and the ring's health; and a heartbeat thread checks the ring's
 * connections and the communicator's asynchronous error every 100 ms and on a loss aborts the
 * communicator (ncclCommAbort), so GPU work waiting on the peer ends, and the group fails.
 * float16/bfloat16 sums on the GPU are NCCL's (accumulated in the dtype). */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distributed/dist_internal.h"
#include "distributed/dist_ops.h"

#ifdef NUVEC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* NCCL's C interface (nccl.h), declared here so that builds need no NCCL headers. */
typedef struct {
  char internal[128];
} nccl_id;
typedef void *nccl_comm_t;
enum { NCCL_SUCCESS = 0, NCCL_REMOTE_ERROR = 6, NCCL_IN_PROGRESS = 7 };
/* ncclConfig_t as NCCL 2.18 lays it out (later versions read a config by its size and version
 * field, so this prefix stays valid); fields left unset are NCCL's "undefined" INT_MIN / NULL. */
typedef struct {
  size_t size;
  unsigned int magic, version;
  int blocking, cga_cluster_size, min_ctas, max_ctas;
  const char *net_name;
  int split_share;
} nccl_config;
#define NCCL_CONFIG_MAGIC 0xcafebeefu
#define NCCL_CONFIG_VERSION 21800u /* NCCL_VERSION(2, 18, 0) */
#define NCCL_UNDEF INT_MIN

/* A non-blocking communicator's configuration. */
static nccl_config nonblocking(void) {
  return (nccl_config){sizeof(nccl_config), NCCL_CONFIG_MAGIC, NCCL_CONFIG_VERSION, 0,
                       NCCL_UNDEF, NCCL_UNDEF, NCCL_UNDEF, NULL, NCCL_UNDEF};
}
enum { NCCL_SUM = 0, NCCL_MAX = 2, NCCL_MIN = 3 };
enum {
  NCCL_INT8 = 0, NCCL_UINT8 = 1, NCCL_INT32 = 2, NCCL_UINT32 = 3, NCCL_INT64 = 4,
  NCCL_UINT64 = 5, NCCL_FLOAT16 = 6, NCCL_FLOAT32 = 7, NCCL_FLOAT64 = 8, NCCL_BFLOAT16 = 9
};

static struct nccl_api {
  void *lib;
  int (*GetUniqueId)(nccl_id *);
  int (*CommInitRank)(nccl_comm_t *, int, nccl_id, int);
  int (*CommInitRankConfig)(nccl_comm_t *, int, nccl_id, int, nccl_config *);
  int (*CommGetAsyncError)(nccl_comm_t, int *);
  int (*CommSplit)(nccl_comm_t, int, int, nccl_comm_t *, nccl_config *);
  int (*CommAbort)(nccl_comm_t);
  int (*CommDestroy)(nccl_comm_t);
  int (*AllReduce)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
  int (*AllGather)(const void *, void *, size_t, int, nccl_comm_t, void *);
  int (*ReduceScatter)(const void *, void *, size_t, int, int, nccl_comm_t, void *);
  const char *(*GetErrorString)(int);
} api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
#ifdef NUVEC_HAVE_CUDA
  /* NUVEC_NCCL_LIBRARY, the loader's path, then the CUDA toolkit's own copy. */
  const char *names[] = {getenv("NUVEC_NCCL_LIBRARY"), "libnccl.so.2",
                         "/usr/local/cuda/lib64/libnccl.so.2", "/usr/local/cuda/lib/libnccl.so.2"};
  for (size_t i = 0; i < sizeof names / sizeof *names && !api.lib; i++)
    if (names[i] && *names[i]) api.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!api.lib) return;
#define LOAD(f) (*(void **)&api.f = dlsym(api.lib, "nccl" #f))
  bool ok = LOAD(GetUniqueId) && LOAD(CommInitRank) && LOAD(CommAbort) && LOAD(CommDestroy) &&
            LOAD(AllReduce) && LOAD(AllGather) && LOAD(ReduceScatter) && LOAD(GetErrorString);
  LOAD(CommSplit); /* NCCL >= 2.18; without it split gives ring-only subgroups */
  /* NCCL >= 2.14; without both, communicators are blocking (the heartbeat still aborts). */
  if (!LOAD(CommInitRankConfig) || !LOAD(CommGetAsyncError))
    api.CommInitRankConfig = NULL, api.CommGetAsyncError = NULL;
#undef LOAD
  if (!ok) {
    dlclose(api.lib);
    api.lib = NULL;
  }
#endif
}

bool nv__nccl_available(void) {
  pthread_once(&load_once, load);
#ifdef NUVEC_HAVE_CUDA
  int n = 0;
  if (api.lib && cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return true;
#endif
  return false;
}

static nv_status nccl_error(int r, const char *what) {
  return nv__set_error(NV_ERR_BACKEND, "%s failed: %s", what, api.GetErrorString(r));
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct nccl_comm {
  nv__comm base;
  nv__comm *ring;   /* host-memory operations and the peers' liveness */
  nccl_comm_t nccl; /* NULL for a subgroup NCCL could not split */
  int device;
  pthread_t beat;
  bool beating;
  atomic_bool stop, lost;
  pthread_mutex_t calls; /* held around each call on `nccl` after init, and its abort */
} nccl_comm;

#define NC(c) ((nccl_comm *)(c))

/* Waits until the non-blocking communicator `nc`'s pending call (`r`, what it returned) has
 * finished: its asynchronous state polled every 100 us, bounded by NUVEC_DIST_TIMEOUT and by
 * `ring`'s health (a lost peer ends it). A failure or a timeout aborts the communicator.
 * `owner`, when `nc` is its communicator, serializes the polls with the heartbeat's (which may
 * abort it: a non-blocking communicator's calls all return at once, so `calls` is held briefly
 * and an abort never frees it under another call). */
static nv_status settle(nccl_comm *owner, nccl_comm_t nc, int r, nv__comm *ring,
                        const char *what) {
  if (r != NCCL_IN_PROGRESS || !api.CommGetAsyncError)
    return r == NCCL_SUCCESS ? NV_OK : nccl_error(r, what);
  double limit = now_s() + nv__dist_timeout(), next_health = now_s() + 0.1;
  for (;;) {
    nv_status st = NV_OK;
    int state = NCCL_SUCCESS;
    if (owner) pthread_mutex_lock(&owner->calls);
    if (owner && atomic_load(&owner->lost)) {
      st = nv__set_error(NV_ERR_PEER_LOST, "%s: a peer was lost: the NCCL communicator was "
                         "aborted", what);
    } else {
      int q = api.CommGetAsyncError(nc, &state);
      if (q != NCCL_SUCCESS) state = q;
      if (state == NCCL_SUCCESS) {
        if (owner) pthread_mutex_unlock(&owner->calls);
        return NV_OK;
      }
      if (state != NCCL_IN_PROGRESS) {
        st = nccl_error(state, what);
      } else if (now_s() > limit) {
        st = nv__set_error(NV_ERR_PEER_LOST, "%s: no progress in %g s (NUVEC_DIST_TIMEOUT): a "
                           "peer is not answering", what, nv__dist_timeout());
      } else if (ring && now_s() > next_health) {
        next_health = now_s() + 0.1;
        if (ring->ops->health(ring) != NV_OK) {
          char why[400];
          snprintf(why, sizeof why, "%s", nv_last_error());
          st = nv__set_error(NV_ERR_PEER_LOST, "%s: %s", what, why);
        }
      }
      if (st != NV_OK && (!owner || !atomic_exchange(&owner->lost, true))) api.CommAbort(nc);
    }
    if (owner) pthread_mutex_unlock(&owner->calls);
    if (st != NV_OK) return st;
    struct timespec ts = {0, 100 * 1000};
    nanosleep(&ts, NULL);
  }
}


static nv_status ring_all_reduce(nv__comm *c, const void *in, void *out, size_t n, nv_dtype t,
                                 int op) {
  return NC(c)->ring->ops->all_reduce(NC(c)->ring, in, out, n, t, op);
}
static nv_status ring_all_gather(nv__comm *c, const void *in, void *out, size_t n) {
  return NC(c)->ring->ops->all_gather(NC(c)->ring, in, out, n);
}
static nv_status ring_sum_scatter(nv__comm *c, const void *in, void *out, size_t n, nv_dtype t) {
  return NC(c)->ring->ops->sum_scatter(NC(c)->ring, in, out, n, t);
}
static nv_status ring_send(nv__comm *c, const void *b, size_t n, int dst) {
  return NC(c)->ring->ops->send(NC(c)->ring, b, n, dst);
}
static nv_status ring_recv(nv__comm *c, void *b, size_t n, int src) {
  return NC(c)->ring->ops->recv(NC(c)->ring, b, n, src);
}

static nv_status nccl_health(nv__comm *c) {
  if (atomic_load(&NC(c)->lost))
    return nv__set_error(NV_ERR_PEER_LOST, "a peer was lost: the NCCL communicator was aborted");
  return NC(c)->ring->ops->health(NC(c)->ring);
}

/* The heartbeat: the ring's health every 100 ms; a loss aborts the NCCL communicator. */
static void *heartbeat(void *arg) {
  nccl_comm *c = arg;
  while (!atomic_load(&c->stop)) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (atomic_load(&c->stop)) break;
    bool bad = c->ring->ops->health(c->ring) != NV_OK;
    nv_clear_error();
    pthread_mutex_lock(&c->calls);
    if (!bad && c->nccl && api.CommGetAsyncError && !atomic_load(&c->lost)) {
      /* NCCL's own view: a remote or network error of work in flight. */
      int state = NCCL_SUCCESS;
      int q = api.CommGetAsyncError(c->nccl, &state);
      bad = q != NCCL_SUCCESS || (state != NCCL_SUCCESS && state != NCCL_IN_PROGRESS);
    }
    if (bad && !atomic_exchange(&c->lost, true) && c->nccl) api.CommAbort(c->nccl);
    pthread_mutex_unlock(&c->calls);
    if (bad) break;
  }
  return NULL;
}

static void nccl_destroy(nv__comm *c) {
  nccl_comm *n = NC(c);
  atomic_store(&n->stop, true);
  if (n->beating) pthread_join(n->beat, NULL);
  if (n->nccl && !atomic_load(&n->lost)) api.CommDestroy(n->nccl);
  n->ring->ops->destroy(n->ring);
  pthread_mutex_destroy(&n->calls);
  nv__free(n);
}

static nv_status nccl_split(nv__comm *c, int color, int key, nv__comm **out);

static const nv__comm_ops nccl_ops = {ring_all_reduce, ring_all_gather, ring_sum_scatter,
                                      ring_send,       ring_recv,       nccl_split,
                                      nccl_health,     nccl_destroy};

static nccl_comm *wrap(nv__comm *ring, nccl_comm_t nc, int device) {
  nccl_comm *n = nv__calloc(1, sizeof *n);
  if (!n) return NULL;
  n->base = (nv__comm){&nccl_ops, "nccl", ring->rank, ring->size};
  n->ring = ring;
  n->nccl = nc;
  n->device = device;
  atomic_init(&n->stop, false);
  atomic_init(&n->lost, false);
  pthread_mutex_init(&n->calls, NULL);
  n->beating = pthread_create(&n->beat, NULL, heartbeat, n) == 0;
  return n;
}

static nv_status nccl_split(nv__comm *c, int color, int key, nv__comm **out) {
  nccl_comm *n = NC(c);
  nv__comm *sub = NULL;
  nv_status st = n->ring->ops->split(n->ring, color, key, &sub);
  if (st != NV_OK) return st;
  nccl_comm_t nc = NULL;
  /* ncclCommSplit is collective over every rank of the parent, also those left alone. */
  if (n->nccl && api.CommSplit) {
    nccl_config cfg = nonblocking();
    pthread_mutex_lock(&n->calls);
    int r = atomic_load(&n->lost)
                ? NCCL_REMOTE_ERROR
                : api.CommSplit(n->nccl, color, key < 0 ? c->rank : key, &nc,
                                api.CommGetAsyncError ? &cfg : NULL);
    pthread_mutex_unlock(&n->calls);
    /* The child is polled while it is being made (nobody else knows it yet). */
    st = nc ? settle(NULL, nc, r, n->ring, "ncclCommSplit")
            : r == NCCL_SUCCESS ? NV_OK : nccl_error(r, "ncclCommSplit");
    if (st != NV_OK && r != NCCL_IN_PROGRESS && nc) api.CommAbort(nc);
    if (st != NV_OK) {
      if (sub) sub->ops->destroy(sub);
      return st;
    }
  }
  *out = NULL;
  if (!sub) {
    if (nc) api.CommDestroy(nc);
    return NV_OK;
  }
  nccl_comm *w = wrap(sub, nc, n->device);
  if (!w) {
    if (nc) api.CommDestroy(nc);
    sub->ops->destroy(sub);
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  }
  *out = &w->base;
  return NV_OK;
}

nv_status nv__nccl_init(nv__comm **out, bool *configured) {
  *out = NULL;
  if (!nv__nccl_available())
    return nv__set_error(NV_ERR_UNSUPPORTED,
                         "init: NCCL not found (libnccl.so.2 could not be loaded, or no GPU is "
                         "usable)");
  nv__comm *ring = NULL;
  nv_status st = nv__ring_init(&ring, configured);
  if (st != NV_OK || !ring) return st; /* not configured, or one rank: the size-1 group */
#ifdef NUVEC_HAVE_CUDA
  int ndev = 0;
  cudaGetDeviceCount(&ndev);
  const char *dv = getenv("NUVEC_NCCL_DEVICE");
  if (!dv || !*dv) dv = getenv("LOCAL_RANK");
  int device = (dv && *dv ? atoi(dv) : ring->rank) % (ndev > 0 ? ndev : 1);
  nccl_id id;
  memset(&id, 0, sizeof id);
  int r = ring->rank == 0 ? api.GetUniqueId(&id) : NCCL_SUCCESS;
  nccl_id *all = nv__malloc((size_t)ring->size * sizeof *all);
  if (!all) st = nv__set_error(NV_ERR_OUT_OF_MEMORY, "init: out of memory");
  /* Every rank takes part in the exchange, also one whose GetUniqueId failed (its zero id
   * then makes the others' init fail rather than wait). */
  if (st == NV_OK) st = ring->ops->all_gather(ring, &id, all, sizeof id);
  nccl_comm_t nc = NULL;
  if (st == NV_OK && r != NCCL_SUCCESS) st = nccl_error(r, "init: ncclGetUniqueId");
  if (st == NV_OK && cudaSetDevice(device) != cudaSuccess)
    st = nv__set_error(NV_ERR_BACKEND, "init: cannot use gpu:%d for NCCL", device);
  if (st == NV_OK && api.CommInitRankConfig) {
    nccl_config cfg = nonblocking();
    r = api.CommInitRankConfig(&nc, ring->size, all[0], ring->rank, &cfg);
    st = nc ? settle(NULL, nc, r, ring, "init: ncclCommInitRankConfig")
            : nccl_error(r == NCCL_SUCCESS ? 3 : r, "init: ncclCommInitRankConfig");
    if (st != NV_OK && r != NCCL_IN_PROGRESS && nc) api.CommAbort(nc);
    if (st != NV_OK) nc = NULL; /* aborted (freed), or never made */
  } else if (st == NV_OK &&
             (r = api.CommInitRank(&nc, ring->size, all[0], ring->rank)) != NCCL_SUCCESS) {
    st = nccl_error(r, "init: ncclCommInitRank");
  }
  nv__free(all);
  nccl_comm *n = st == NV_OK ? wrap(ring, nc, device) : NULL;
  if (st == NV_OK && !n) {
    api.CommDestroy(nc);
    st = nv__set_error(NV_ERR_OUT_OF_MEMORY, "init: out of memory");
  }
  if (st != NV_OK) {
    ring->ops->destroy(ring);
    return st;
  }
  *out = &n->base;
  return NV_OK;
#else
  ring->ops->destroy(ring);
  return nv__set_error(NV_ERR_UNSUPPORTED, "init: the nccl backend needs the CUDA backend");
#endif
}

/* ---- The GPU side (src/cuda/distributed.c) ---- */

static int nccl_type(nv_dtype t, size_t *mult) {
  *mult = 1;
  switch (t) {
    case NV_DTYPE_BOOL: case NV_DTYPE_UINT8: return NCCL_UINT8;
    case NV_DTYPE_INT8: return NCCL_INT8;
    case NV_DTYPE_INT32: return NCCL_INT32;
    case NV_DTYPE_UINT32: return NCCL_UINT32;
    case NV_DTYPE_INT64: return NCCL_INT64;
    case NV_DTYPE_UINT64: return NCCL_UINT64;
    case NV_DTYPE_FLOAT16: return NCCL_FLOAT16;
    case NV_DTYPE_BFLOAT16: return NCCL_BFLOAT16;
    case NV_DTYPE_FLOAT32: return NCCL_FLOAT32;
    case NV_DTYPE_FLOAT64: return NCCL_FLOAT64;
    case NV_DTYPE_COMPLEX64: *mult = 2; return NCCL_FLOAT32; /* sums only */
    default: return -1; /* 16-bit integers */
  }
}

void *nv__nccl_comm_for(nv_group g, int prim, nv_dtype dtype, int device) {
  bool reduce = prim == NV__PRIM_ALL_SUM || prim == NV__PRIM_ALL_MAX || prim == NV__PRIM_ALL_MIN;
  if (!reduce && prim != NV__PRIM_ALL_GATHER && prim != NV__PRIM_SUM_SCATTER) return NULL;
  size_t mult;
  int t = nccl_type(dtype, &mult);
  if (t < 0 && prim != NV__PRIM_ALL_GATHER) return NULL;
  if (dtype == NV_DTYPE_COMPLEX64 && prim != NV__PRIM_ALL_SUM && prim != NV__PRIM_SUM_SCATTER &&
      prim != NV__PRIM_ALL_GATHER)
    return NULL;
  nv__comm *c = nv__group_comm(g);
  if (!c || strcmp(c->backend, "nccl") || !NC(c)->nccl || NC(c)->device != device ||
      atomic_load(&NC(c)->lost))
    return NULL;
  return NC(c);
}

nv_status nv__nccl_enqueue(void *comm, int prim, nv_dtype dtype, const void *send, void *recv,
                           size_t count, void *stream) {
  nccl_comm *n = comm;
  size_t mult;
  int t = nccl_type(dtype, &mult), r;
  int op = prim == NV__PRIM_ALL_MAX ? NCCL_MAX : prim == NV__PRIM_ALL_MIN ? NCCL_MIN : NCCL_SUM;
  if (dtype == NV_DTYPE_BOOL && prim != NV__PRIM_ALL_MIN) op = NCCL_MAX; /* "or" on 0/1 */
  pthread_mutex_lock(&n->calls);
  if (atomic_load(&n->lost)) {
    pthread_mutex_unlock(&n->calls);
    return nv__set_error(NV_ERR_PEER_LOST, "%s: a peer was lost: the NCCL communicator was "
                         "aborted", nv__prims[prim].name);
  }
  if (prim == NV__PRIM_ALL_GATHER) {
    size_t bytes = count * nv_dtype_size(dtype);
    r = api.AllGather(send, recv, bytes, NCCL_UINT8, n->nccl, stream);
  } else if (prim == NV__PRIM_SUM_SCATTER) {
    r = api.ReduceScatter(send, recv, count * mult, t, op, n->nccl, stream);
  } else {
    r = api.AllReduce(send, recv, count * mult, t, op, n->nccl, stream);
  }
  pthread_mutex_unlock(&n->calls);
  /* A non-blocking communicator may return while the call is still being enqueued: it must
   * finish before the capture ends (host polling only, no synchronization). */
  return settle(n, n->nccl, r, NULL, nv__prims[prim].name);
}
