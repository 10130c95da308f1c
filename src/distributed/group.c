/* Groups (DESIGN §10, seed 004 D13-D21, D31): the registry of communicators, the default group,
 * init, split, close and health, and the program order every operation of a group runs in.
 * Id 0 is the size-1 group; id i >= 1 is registry entry i - 1. Entries are never freed (ids
 * are never reused, so a stale id keeps failing with "the group was closed"): close releases
 * the transport only. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distributed/dist_internal.h"

/* Program order across streams (D31): an operation takes a ticket when it is issued (a CPU
 * collective when its kernel runs, a GPU one when its recording is submitted) and runs once
 * every earlier ticket of the group has run or was cancelled; `serving` is the oldest ticket
 * not yet finished, `cancelled` the later ones given up before their turn. */
typedef struct entry {
  pthread_mutex_t order; /* held while an operation of the group runs (close waits for it) */
  pthread_mutex_t seq;   /* the tickets: */
  pthread_cond_t turn;   /* broadcast when `serving` moves */
  uint64_t next, serving;
  uint64_t *cancelled;
  size_t ncancelled, ccancelled;
  nv__comm *comm; /* NULL once closed */
  int rank, size;
  const char *backend;
  bool closed;
  char *failed; /* the lost-peer message that failed the group, or NULL */
} entry;

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static entry **reg;
static size_t nreg, creg;
static nv_group default_group = NV_GROUP_SINGLE;
static nv_group init_group = -2; /* the group nv_dist_init made (-2: none yet) */

double nv__dist_timeout(void) {
  const char *v = getenv("NUVEC_DIST_TIMEOUT");
  if (v && *v) {
    char *end;
    double t = strtod(v, &end);
    if (!*end && t > 0) return t;
  }
  return 60.0;
}

nv_group nv__group_resolve(nv_group g) {
  if (g != NV_GROUP_DEFAULT) return g;
  pthread_mutex_lock(&reg_lock);
  nv_group d = default_group;
  pthread_mutex_unlock(&reg_lock);
  return d;
}

/* The entry of g (>= 1), or NULL with the "no group" error. */
static entry *lookup(nv_group g, const char *op) {
  entry *e = NULL;
  pthread_mutex_lock(&reg_lock);
  if (g >= 1 && (size_t)g <= nreg) e = reg[g - 1];
  pthread_mutex_unlock(&reg_lock);
  if (!e) {
    if (op)
      nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: no group %lld", op, (long long)g);
    else
      nv__set_error(NV_ERR_INVALID_ARGUMENT, "no group %lld", (long long)g);
  }
  return e;
}

static nv_status closed_error(const char *op) {
  return op ? nv__set_error(NV_ERR_BACKEND, "%s: the group was closed", op)
            : nv__set_error(NV_ERR_BACKEND, "the group was closed");
}

nv_group nv__group_register(nv__comm *c) {
  if (!c) return NV_GROUP_SINGLE;
  if (c->size <= 1) {
    c->ops->destroy(c);
    return NV_GROUP_SINGLE;
  }
  entry *e = nv__calloc(1, sizeof *e);
  if (!e) {
    c->ops->destroy(c);
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory registering a group");
    return -1;
  }
  pthread_mutex_init(&e->order, NULL);
  pthread_mutex_init(&e->seq, NULL);
  pthread_cond_init(&e->turn, NULL);
  e->next = e->serving = 1;
  e->comm = c;
  e->rank = c->rank;
  e->size = c->size;
  e->backend = c->backend;
  pthread_mutex_lock(&reg_lock);
  if (nreg == creg) {
    size_t nc = creg ? 2 * creg : 8;
    entry **r = nv__realloc(reg, nc * sizeof *r);
    if (!r) {
      pthread_mutex_unlock(&reg_lock);
      c->ops->destroy(c);
      pthread_mutex_destroy(&e->order);
      pthread_mutex_destroy(&e->seq);
      pthread_cond_destroy(&e->turn);
      nv__free(e);
      nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory registering a group");
      return -1;
    }
    reg = r;
    creg = nc;
  }
  reg[nreg++] = e;
  nv_group id = (nv_group)nreg;
  pthread_mutex_unlock(&reg_lock);
  return id;
}

nv__comm *nv__group_comm(nv_group g) {
  g = nv__group_resolve(g);
  if (g == NV_GROUP_SINGLE) return NULL;
  entry *e = NULL;
  pthread_mutex_lock(&reg_lock);
  if (g >= 1 && (size_t)g <= nreg) e = reg[g - 1];
  nv__comm *c = e && !e->closed && !e->failed ? e->comm : NULL;
  pthread_mutex_unlock(&reg_lock);
  return c;
}

nv_status nv__group_info_get(nv_group g, const char *op, nv__group_info *out) {
  g = nv__group_resolve(g);
  if (g == NV_GROUP_SINGLE) {
    *out = (nv__group_info){0, 1};
    return NV_OK;
  }
  entry *e = lookup(g, op);
  if (!e) return nv__last_status();
  pthread_mutex_lock(&reg_lock);
  bool closed = e->closed;
  pthread_mutex_unlock(&reg_lock);
  if (closed) return closed_error(op);
  *out = (nv__group_info){e->rank, e->size};
  return NV_OK;
}

/* Under e->order: the error of a closed or failed group, else NV_OK. */
static nv_status usable(entry *e, const char *op) {
  if (e->closed) return closed_error(op);
  if (e->failed)
    return op ? nv__set_error(NV_ERR_PEER_LOST, "%s: the group failed before: %s", op, e->failed)
              : nv__set_error(NV_ERR_PEER_LOST, "the group failed before: %s", e->failed);
  return NV_OK;
}

/* Under e->order: records fn's failure; a lost peer fails the group. Sets "op: message". */
static nv_status failure(entry *e, const char *op, nv_status st) {
  const char *m = nv_last_error();
  size_t len = strlen(m);
  char *copy = nv__malloc(len + 1);
  if (!copy) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  memcpy(copy, m, len + 1);
  if (st == NV_ERR_PEER_LOST && !e->failed) {
    pthread_mutex_lock(&reg_lock); /* nv__group_comm reads it under reg_lock */
    e->failed = copy;
    pthread_mutex_unlock(&reg_lock);
    return nv__set_error(st, "%s: %s", op, e->failed);
  }
  nv__set_error(st, "%s: %s", op, copy);
  nv__free(copy);
  return st;
}

/* ---- Tickets ---- */

/* The entry of g for an operation, or NULL with the error set (the size-1 group has no peers). */
static entry *entry_for(nv_group g, const char *op) {
  g = nv__group_resolve(g);
  if (g == NV_GROUP_SINGLE) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: the size-1 group has no peers", op);
    return NULL;
  }
  return lookup(g, op);
}

nv_status nv__group_reserve(nv_group g, const char *op, uint64_t *ticket) {
  entry *e = entry_for(g, op);
  if (!e) return nv__last_status();
  pthread_mutex_lock(&e->seq);
  *ticket = e->next++;
  pthread_mutex_unlock(&e->seq);
  return NV_OK;
}

/* Under e->seq: moves `serving` past finished and cancelled tickets and wakes the waiters. */
static void advance_locked(entry *e) {
  e->serving++;
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t i = 0; i < e->ncancelled; i++)
      if (e->cancelled[i] == e->serving) {
        e->cancelled[i] = e->cancelled[--e->ncancelled];
        e->serving++;
        moved = true;
        break;
      }
  }
  pthread_cond_broadcast(&e->turn);
}

/* The hook that settles GPU-stream tickets whose work will never run (nv__dist_set_progress). */
static void (*_Atomic progress_hook)(void);

void nv__dist_set_progress(void (*fn)(void)) { atomic_store(&progress_hook, fn); }

/* Waits for `ticket`'s turn (under e->seq), letting the GPU side settle, a few ms apart, the
 * tickets of work that ended before its collective ran. A ticket holder never waits for a GPU
 * submission to be made: CPU collectives submit their evaluation's open work before taking a
 * ticket, GPU ones take theirs when submitted. */
static void wait_turn_locked(entry *e, uint64_t ticket) {
  long ms = 1;
  while (e->serving != ticket) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    if (pthread_cond_timedwait(&e->turn, &e->seq, &ts) == ETIMEDOUT) {
      void (*hook)(void) = atomic_load(&progress_hook);
      if (hook) {
        pthread_mutex_unlock(&e->seq);
        hook();
        pthread_mutex_lock(&e->seq);
      }
      if (ms < 20) ms *= 2;
    }
  }
}

void nv__group_cancel(nv_group g, uint64_t ticket, const char *why) {
  entry *e = entry_for(g, "cancel");
  if (!e) {
    nv_clear_error();
    return;
  }
  if (why) {
    /* The peers expect the operation: the group cannot stay in step without it. */
    pthread_mutex_lock(&e->order);
    char *m = NULL;
    size_t len = strlen(why);
    if (!e->failed && (m = nv__malloc(len + 1))) memcpy(m, why, len + 1);
    pthread_mutex_lock(&reg_lock);
    if (!e->failed) e->failed = m;
    pthread_mutex_unlock(&reg_lock);
    pthread_mutex_unlock(&e->order);
  }
  pthread_mutex_lock(&e->seq);
  if (ticket == e->serving) {
    advance_locked(e);
  } else if (ticket > e->serving) {
    if (e->ncancelled == e->ccancelled) {
      size_t nc = e->ccancelled ? 2 * e->ccancelled : 8;
      uint64_t *c = nv__realloc(e->cancelled, nc * sizeof *c);
      /* Out of memory: wait for the turn instead of recording the ticket, then give it up. */
      if (!c) {
        wait_turn_locked(e, ticket);
        advance_locked(e);
        pthread_mutex_unlock(&e->seq);
        return;
      }
      e->cancelled = c;
      e->ccancelled = nc;
    }
    e->cancelled[e->ncancelled++] = ticket;
  }
  pthread_mutex_unlock(&e->seq);
}

nv_status nv__group_run_reserved(nv_group g, uint64_t ticket, const char *op,
                                 nv_status (*fn)(nv__comm *, void *), void *user) {
  entry *e = entry_for(g, op);
  if (!e) return nv__last_status();
  pthread_mutex_lock(&e->seq);
  wait_turn_locked(e, ticket);
  pthread_mutex_unlock(&e->seq);
  pthread_mutex_lock(&e->order);
  nv_status st = usable(e, op);
  if (st == NV_OK) {
    st = fn(e->comm, user);
    if (st != NV_OK) st = failure(e, op, st);
  }
  pthread_mutex_unlock(&e->order);
  pthread_mutex_lock(&e->seq);
  advance_locked(e);
  pthread_mutex_unlock(&e->seq);
  return st;
}

nv_status nv__group_run(nv_group g, const char *op, nv_status (*fn)(nv__comm *, void *),
                        void *user) {
  uint64_t ticket = 0;
  nv_status st = nv__group_reserve(g, op, &ticket);
  return st != NV_OK ? st : nv__group_run_reserved(g, ticket, op, fn, user);
}

/* ---- The public group functions ---- */

bool nv_dist_is_available(const char *backend) {
  if (!backend || !strcmp(backend, "any") || !strcmp(backend, "ring")) return true;
  if (!strcmp(backend, "mpi")) return nv__mpi_available();
  if (!strcmp(backend, "nccl")) return nv__nccl_available();
  return false;
}

static nv_status init_locked(const char *backend, bool strict, nv_group *out);

/* Concurrent calls are serialized: the first one's group is the one later calls return. */
nv_status nv_dist_init(const char *backend, bool strict, nv_group *out) {
  static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "init: the output is NULL");
  pthread_mutex_lock(&init_lock);
  nv_status st = init_locked(backend, strict, out);
  pthread_mutex_unlock(&init_lock);
  return st;
}

static nv_status init_locked(const char *backend, bool strict, nv_group *out) {
  const char *b = backend ? backend : "any";
  bool any = !strcmp(b, "any");
  if (!any && strcmp(b, "ring") && strcmp(b, "mpi") && strcmp(b, "nccl"))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "init: unknown backend '%s' (ring, mpi, nccl or any)", b);
  pthread_mutex_lock(&reg_lock);
  nv_group made = init_group;
  pthread_mutex_unlock(&reg_lock);
  if (made >= 0 && !(strict && made == NV_GROUP_SINGLE)) {
    const char *have = made == NV_GROUP_SINGLE ? "single" : nv_group_backend(made);
    if (any || !strcmp(have, b) || !strict) {
      *out = made;
      return NV_OK;
    }
  }
  nv__comm *c = NULL;
  nv_status st = NV_OK;
  bool configured = false;
  if (!strcmp(b, "nccl")) {
    st = nv__nccl_init(&c, &configured);
  } else {
    if (any || !strcmp(b, "ring")) st = nv__ring_init(&c, &configured);
    if (st == NV_OK && !configured && (any || !strcmp(b, "mpi"))) {
      nv_status ms = nv__mpi_init(&c);
      if (ms != NV_OK && !any) st = ms;
      configured = c != NULL;
    }
  }
  if (st == NV_OK && !configured && strict)
    st = nv__set_error(NV_ERR_INVALID_ARGUMENT,
                       "init: the %s backend is not configured (for the ring and nccl: MLX_RANK "
                       "and MLX_HOSTFILE, or NUVEC_RANK and NUVEC_HOSTFILE; for mpi: mpirun; "
                       "nuvec-launch sets them)",
                       b);
  if (st != NV_OK) {
    if (strict) return st;
    nv_clear_error();
    c = NULL;
  }
  nv_group g = nv__group_register(c);
  if (g < 0) return nv__last_status();
  pthread_mutex_lock(&reg_lock);
  if (init_group < 0) {
    init_group = g;
    if (default_group == NV_GROUP_SINGLE) default_group = g;
  }
  pthread_mutex_unlock(&reg_lock);
  *out = g;
  return NV_OK;
}

nv_group nv_dist_default_group(void) { return nv__group_resolve(NV_GROUP_DEFAULT); }

nv_status nv_dist_set_default_group(nv_group g) {
  if (g != NV_GROUP_SINGLE && !lookup(g, "set_default_group")) return nv__last_status();
  pthread_mutex_lock(&reg_lock);
  default_group = g;
  pthread_mutex_unlock(&reg_lock);
  return NV_OK;
}

nv_status nv_group_rank(nv_group g, int *rank) {
  nv__group_info in = {0};
  nv_status st = nv__group_info_get(g, "rank", &in);
  if (st == NV_OK && rank) *rank = in.rank;
  return st;
}

nv_status nv_group_size(nv_group g, int *size) {
  nv__group_info in = {0};
  nv_status st = nv__group_info_get(g, "size", &in);
  if (st == NV_OK && size) *size = in.size;
  return st;
}

const char *nv_group_backend(nv_group g) {
  g = nv__group_resolve(g);
  if (g == NV_GROUP_SINGLE) return "single";
  entry *e = NULL;
  pthread_mutex_lock(&reg_lock);
  if (g >= 1 && (size_t)g <= nreg) e = reg[g - 1];
  pthread_mutex_unlock(&reg_lock);
  return e ? e->backend : NULL;
}

typedef struct split_args {
  int color, key;
  nv__comm *out;
} split_args;

static nv_status run_split(nv__comm *c, void *user) {
  split_args *a = user;
  return c->ops->split(c, a->color, a->key, &a->out);
}

nv_status nv_group_split(nv_group g, int color, int key, nv_group *out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "split: the output is NULL");
  g = nv__group_resolve(g);
  if (g == NV_GROUP_SINGLE) {
    *out = g;
    return NV_OK;
  }
  split_args a = {color, key, NULL};
  nv_status st = nv__group_run(g, "split", run_split, &a);
  if (st != NV_OK) return st;
  nv_group ng = nv__group_register(a.out);
  if (ng < 0) return nv__last_status();
  *out = ng;
  return NV_OK;
}

nv_status nv_group_close(nv_group g) {
  g = nv__group_resolve(g);
  if (g == NV_GROUP_SINGLE) return NV_OK;
  entry *e = lookup(g, "close");
  if (!e) return nv__last_status();
  pthread_mutex_lock(&e->order); /* the operation in progress finishes first */
  nv__comm *c = e->comm;
  e->comm = NULL;
  pthread_mutex_lock(&reg_lock);
  e->closed = true;
  pthread_mutex_unlock(&reg_lock);
  pthread_mutex_unlock(&e->order);
  if (c) c->ops->destroy(c);
  return NV_OK;
}

static nv_status run_health(nv__comm *c, void *user) {
  (void)user;
  return c->ops->health(c);
}

nv_status nv_group_health(nv_group g) {
  g = nv__group_resolve(g);
  if (g == NV_GROUP_SINGLE) return NV_OK;
  return nv__group_run(g, "health", run_health, NULL);
}

/* ---- Shared helpers ---- */

nv_status nv__comm_sum_scatter_by_reduce(nv__comm *c, const void *in, void *out, size_t count,
                                         nv_dtype dtype) {
  size_t isz = nv_dtype_size(dtype), total = count * (size_t)c->size * isz;
  void *tmp = nv__malloc(total ? total : 1);
  if (!tmp) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory (%zu bytes)", total);
  memcpy(tmp, in, total);
  nv_status st = c->ops->all_reduce(c, tmp, tmp, count * (size_t)c->size, dtype, NV__RED_SUM);
  if (st == NV_OK) memcpy(out, (char *)tmp + (size_t)c->rank * count * isz, count * isz);
  nv__free(tmp);
  return st;
}
