/* Evaluation (DESIGN §3; the seed's eval): order, run once across threads, sticky errors,
 * detach, donation. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/backend.h"
#include "core/internal.h"
#include "core/ptrmap.h"

/* ---- Counters (test hooks) ---- */
static atomic_long eval_count;
static _Thread_local long thread_eval_count;
long nv__test_eval_count(void) { return atomic_load(&eval_count); }
long nv__test_thread_eval_count(bool reset) {
  long r = thread_eval_count;
  if (reset) thread_eval_count = 0;
  return r;
}

static atomic_long donations;
long nv__test_donations(void) { return atomic_load(&donations); }

static _Thread_local int tracing_depth;
int nv__tracing_depth(void) { return tracing_depth; }

/* ---- Tracing sessions ----
 * A session spans a thread's outermost transform; the nodes traced in it point to it. Keying
 * tracers to a session rather than a flag on the node is what lets a transform's outputs, and
 * everything built on them, be ordinary arrays once it has ended: a later transform, on this
 * thread or another, neither walks their graphs nor keeps them, and another thread's
 * evaluation may detach and donate them. While a session is live its tracer nodes are
 * detached only when it ends: its own thread keeps them (Retained) when it evaluates them, and
 * another thread that evaluates one keeps its inputs (the transform may still walk them). */
_Thread_local nv__trace *nv__current_trace;

void nv__trace_release(nv__trace *t) {
  if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) nv__free(t);
}

/* Tracer nodes this thread evaluated inside its transforms (Retained), each held once; the
 * outermost transform releases them when it ends (an inner one's graph may still be needed by
 * an outer one). */
static _Thread_local nv__node **retained;
static _Thread_local size_t nretained, cretained;

nv_status nv__tracing_enter(void) {
  if (tracing_depth == 0) {
    nv__trace *t = nv__malloc(sizeof *t);
    if (!t) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory starting a transform");
    atomic_init(&t->refs, 1);
    atomic_init(&t->live, true);
    nv__current_trace = t;
  }
  tracing_depth++;
  return NV_OK;
}

void nv__tracing_leave(void) {
  if (tracing_depth <= 0 || --tracing_depth > 0) return;
  nv__trace *t = nv__current_trace;
  /* The session ends before its graphs are let go: from here on no thread keeps them. */
  nv__current_trace = NULL;
  atomic_store_explicit(&t->live, false, memory_order_release);
  for (size_t i = 0; i < nretained; i++) {
    nv__node *n = retained[i];
    nv__node_lock(n);
    if (atomic_load_explicit(&n->state, memory_order_relaxed) == NV__RETAINED)
      atomic_store_explicit(&n->state, NV__DONE, memory_order_release);
    nv__node_unlock(n);
    nv__node_detach(n);
    nv__node_release(n);
  }
  free(retained);
  retained = NULL;
  nretained = cretained = 0;
  nv__trace_release(t);
}

/* Records a node about to be Retained; false when out of memory (it is then detached). */
static bool retain_record(nv__node *n) {
  if (nretained == cretained) {
    size_t nc = cretained ? cretained * 2 : 64;
    nv__node **p = realloc(retained, nc * sizeof *p);
    if (!p) return false;
    retained = p;
    cretained = nc;
  }
  retained[nretained++] = nv__node_retain(n);
  return true;
}

/* ---- Donation size rule ---- */
static _Atomic uint64_t donation_limit = 0xffffffffull; /* 2^32 - 1, exclusive */
void nv__test_set_donation_limit(uint64_t limit) {
  atomic_store(&donation_limit, limit ? limit : 0xffffffffull);
}
bool nv__donatable_size(uint64_t n) { return n > 0 && n < atomic_load(&donation_limit); }

/* ---- Completions: created by the first thread that waits for a running node ---- */
struct nv__completion {
  atomic_long refs;
  pthread_mutex_t m;
  pthread_cond_t c;
  bool done;
};

static atomic_long live_completions;
long nv__test_live_completions(void) { return atomic_load(&live_completions); }

static void completion_release(nv__completion *c) {
  if (atomic_fetch_sub(&c->refs, 1) == 1) {
    atomic_fetch_sub(&live_completions, 1);
    pthread_mutex_destroy(&c->m);
    pthread_cond_destroy(&c->c);
    free(c);
  }
}


/* Publishes a running node's final state and wakes its waiters. The node's lock is held only
 * for the transition. */
static void finish(nv__node *n, int state, nv__error *err) {
  nv__node_lock(n);
  if (err) n->error = err;
  nv__completion *c = n->done;
  n->done = NULL;
  atomic_store_explicit(&n->state, state, memory_order_release);
  nv__node_unlock(n);
  if (c) {
    pthread_mutex_lock(&c->m);
    c->done = true;
    pthread_cond_broadcast(&c->c);
    pthread_mutex_unlock(&c->m);
    completion_release(c);
  }
}

/* Waits until `n`, if another thread is running it, has finished; commits our own open work
 * first (the owner may be waiting on it). Returns a new reference to the node's error if it
 * failed, else NULL. */
static nv__error *wait_running(nv__node *n, nv__ectx *ctx) {
  nv__node_lock(n);
  int st = atomic_load_explicit(&n->state, memory_order_acquire);
  if (st != NV__RUNNING) {
    nv__node_unlock(n);
    return st == NV__FAILED ? nv__error_retain(n->error) : NULL;
  }
  if (n->owner == nv__thread_id()) {
    nv__node_unlock(n);
    return nv__error_new(NV_ERR_INVALID_ARGUMENT,
                         "eval: an array was evaluated from within its own evaluation");
  }
  nv__completion *c = n->done;
  if (!c) {
    c = malloc(sizeof *c);
    if (c) {
      atomic_fetch_add(&live_completions, 1);
      atomic_init(&c->refs, 1);
      pthread_mutex_init(&c->m, NULL);
      pthread_cond_init(&c->c, NULL);
      c->done = false;
      n->done = c;
    }
  }
  if (c) atomic_fetch_add(&c->refs, 1);
  nv__node_unlock(n);
  nv__ectx_commit(ctx); /* the owner may be waiting for our open GPU work */
  if (c) {
    pthread_mutex_lock(&c->m);
    while (!c->done) pthread_cond_wait(&c->c, &c->m);
    pthread_mutex_unlock(&c->m);
    completion_release(c);
  } else {
    while (atomic_load_explicit(&n->state, memory_order_acquire) == NV__RUNNING) sched_yield();
  }
  if (atomic_load_explicit(&n->state, memory_order_acquire) == NV__FAILED)
    return nv__error_retain(n->error);
  return NULL;
}

void nv__test_begin_running(const nv_array *x, int owner) {
  nv__node *n = x->node;
  nv__node_lock(n);
  n->owner = owner ? owner : nv__thread_id();
  atomic_store_explicit(&n->state, NV__RUNNING, memory_order_release);
  nv__node_unlock(n);
}

static void evaluate(nv__node *n, nv__ectx *ctx);

void nv__test_end_running(const nv_array *x, nv_status status, const char *msg) {
  nv__node *n = x->node;
  if (status == NV_OK) {
    /* Computes the node for real; its waiters are woken by the normal finish. */
    nv__node_lock(n);
    atomic_store_explicit(&n->state, NV__PENDING, memory_order_release);
    nv__node_unlock(n);
    /* In an evaluation of its own (a GPU node records into one), waited for. */
    nv__ectx ctx = {0};
    evaluate(n, &ctx);
    nv__ectx_flush(&ctx);
    if (ctx.gpu_backend) ctx.gpu_backend->end(&ctx);
    return;
  }
  finish(n, NV__FAILED, nv__error_new(status, "%s", msg));
  nv__node_detach(n);
}

/* A growable array of ints / pointers. */
#define VEC_PUSH(arr, n, cap, val)                                  \
  do {                                                              \
    if ((n) == (cap)) {                                             \
      size_t nc_ = (cap) ? (cap) * 2 : 64;                          \
      void *p_ = realloc((arr), nc_ * sizeof *(arr));               \
      if (!p_) goto oom;                                            \
      (arr) = p_;                                                   \
      (cap) = nc_;                                                  \
    }                                                               \
    (arr)[(n)++] = (val);                                           \
  } while (0)

typedef struct entry {
  nv__node *node;
  size_t in_begin, in_count; /* inputs in `flat` (node refs) / `flat_idx` (entries) */
  long consumers;
} entry;

static int bfs_max_width(void) {
  static atomic_int w;
  int v = atomic_load_explicit(&w, memory_order_relaxed);
  if (!v) {
    v = (int)nv__env_long("NUVEC_BFS_MAX_WIDTH", 20);
    atomic_store(&w, v);
  }
  return v;
}

/* The unevaluated nodes reachable from `roots`, inputs before consumers, each once, each
 * retained once (MLX's order: a breadth-first tape back from the outputs, a node joining once
 * all its consumers have, run in reverse; past the width limit the walk goes depth-first).
 * Nodes Running elsewhere, Retained, Done or Failed are left out. Iterative. Returns the
 * number of nodes, or -1 when out of memory (thread error set). */
static long topological_order(nv__node *const *roots, size_t nroots, nv__node ***out) {
  nv__ptrmap map = {0};
  entry *ent = NULL;
  size_t nent = 0, cent = 0;
  nv__node **flat = NULL;
  size_t nflat = 0, cflat = 0;
  int *fidx = NULL;
  nv__node **stack = NULL;
  size_t nstack = 0, cstack = 0;
  long *tape = NULL;
  size_t ntape = 0, ctape = 0;
  struct def {
    long e;
    size_t j;
  } *deferred = NULL;
  size_t ndef = 0, cdef = 0;
  nv__node **order = NULL;
  long result = -1;

  for (size_t i = 0; i < nroots; i++) VEC_PUSH(stack, nstack, cstack, roots[i]);
  while (nstack) {
    nv__node *n = stack[--nstack];
    bool found;
    long *slot = nv__ptrmap_slot(&map, n, &found);
    if (!slot) goto oom;
    if (found) continue;
    nv__node_lock(n);
    if (atomic_load_explicit(&n->state, memory_order_relaxed) != NV__PENDING) {
      nv__node_unlock(n);
      *slot = -1;
      continue;
    }
    size_t begin = nflat;
    bool ok = true;
    for (int i = 0; i < n->ninputs; i++) {
      if (nflat == cflat) {
        size_t nc = cflat ? cflat * 2 : 64;
        void *p = realloc(flat, nc * sizeof *flat);
        if (!p) {
          ok = false;
          break;
        }
        flat = p;
        cflat = nc;
      }
      flat[nflat++] = nv__node_retain(n->inputs[i].node);
    }
    nv__node_unlock(n);
    if (!ok) goto oom;
    *slot = (long)nent;
    entry e = {n, begin, nflat - begin, 0};
    VEC_PUSH(ent, nent, cent, e);
    for (size_t i = begin; i < nflat; i++) VEC_PUSH(stack, nstack, cstack, flat[i]);
  }
  /* Inputs as entry indices, without the evaluated ones. */
  fidx = malloc((nflat ? nflat : 1) * sizeof *fidx);
  if (!fidx) goto oom;
  for (size_t e = 0; e < nent; e++) {
    size_t w = ent[e].in_begin;
    for (size_t i = ent[e].in_begin; i < ent[e].in_begin + ent[e].in_count; i++) {
      long v = nv__ptrmap_get(&map, flat[i], -2);
      if (v >= 0) {
        fidx[w++] = (int)v;
        ent[v].consumers++;
      }
    }
    ent[e].in_count = w - ent[e].in_begin;
  }
  /* The caller consumes the roots (each listed array counts once). */
  int *root_idx = malloc((nroots ? nroots : 1) * sizeof *root_idx);
  if (!root_idx) goto oom;
  size_t nri = 0;
  for (size_t i = 0; i < nroots; i++) {
    long v = nv__ptrmap_get(&map, roots[i], -2);
    if (v >= 0) {
      root_idx[nri++] = (int)v;
      ent[v].consumers++;
    }
  }
  size_t remaining = nent;
  int width = bfs_max_width();
  VEC_PUSH(tape, ntape, ctape, -1);
  size_t next = 0;
  while (remaining > 0 && (next < ntape || ndef > 0)) {
    long e;
    size_t j;
    if (next < ntape) {
      e = tape[next++];
      j = 0;
    } else {
      ndef--;
      e = deferred[ndef].e;
      j = deferred[ndef].j;
    }
    const int *list = e < 0 ? root_idx : fidx + ent[e].in_begin;
    size_t len = e < 0 ? nri : ent[e].in_count;
    for (; j < len; j++) {
      int in = list[j];
      if (ent[in].consumers <= 0) continue;
      if ((long)(ntape - next) >= width) {
        struct def d = {e, j};
        VEC_PUSH(deferred, ndef, cdef, d);
        break;
      }
      if (--ent[in].consumers == 0) {
        remaining--;
        VEC_PUSH(tape, ntape, ctape, in);
      }
    }
  }
  free(root_idx);
  order = malloc((nent ? nent : 1) * sizeof *order);
  if (!order) goto oom;
  size_t k = 0;
  for (size_t t = ntape; t-- > 0;)
    if (tape[t] >= 0) order[k++] = nv__node_retain(ent[tape[t]].node);
  NV_ASSERT(k == nent);
  *out = order;
  result = (long)k;
  goto done;
oom:
  nv__set_error(NV_ERR_OUT_OF_MEMORY, "eval: out of memory ordering the graph");
  free(order);
done:
  for (size_t i = 0; i < nflat; i++) nv__node_release(flat[i]);
  free(flat);
  free(fidx);
  free(ent);
  free(stack);
  free(tape);
  free(deferred);
  nv__ptrmap_free(&map);
  return result;
}

/* ---- Donation ---- */

/* Whether the evaluation owns input `i`'s data outright (DESIGN §3 ownership rule): its node
 * is referenced by `edges` references only (the consumer's own input edges to it). */
static bool owned_refs(const nv__node *consumer, int i, int edges) {
  nv__node *in = consumer->inputs[i].node;
  if (nv__node_is_tracer(in)) return false;
  if (atomic_load_explicit(&in->refs, memory_order_acquire) != edges) return false;
  if (atomic_load_explicit(&in->state, memory_order_acquire) != NV__DONE) return false;
  const nv__output *o = &in->out[consumer->inputs[i].idx];
  if (!o->buf || o->offset != 0 || !(o->flags & NV__FLAG_ROW)) return false;
  if (o->buf->nbytes != (size_t)o->size * nv_dtype_size(o->dtype)) return false;
  if (atomic_load_explicit(&o->buf->refs, memory_order_acquire) != 1) return false;
  return nv__buffer_writable(o->buf);
}

static bool owned_on_cpu(const nv__node *consumer, int i) { return owned_refs(consumer, i, 1); }

/* Whether an input's output record has the dtype and shape of the output that would take its
 * buffer. */
static bool same_layout_meta(const nv__output *in, const nv__output *out) {
  return in->dtype == out->dtype && in->ndim == out->ndim &&
         !memcmp(in->shape, out->shape, (size_t)out->ndim * sizeof(int));
}

/* The input whose buffer the node's output takes over, or -1. */
static int donation(const nv__node *n) {
  if (tracing_depth > 0 || nv__node_is_tracer(n)) return -1;
  const nv__prim_info *info = &nv__prims[n->prim];
  /* A fused chain (COMPILED) donates into output 0 by the element-wise rule, any data input
   * a candidate; its other outputs (escaping intermediates) get buffers of their own. */
  bool compiled = n->prim == NV__PRIM_COMPILED;
  if (compiled ? !nv__compiled_donates(n) : (info->donate[0] < 0 || info->view)) return -1;
  if (!compiled && !info->elementwise) {
    int at = info->donate[0];
    if (at >= n->ninputs) return -1;
    const nv__output *base = &n->inputs[at].node->out[n->inputs[at].idx];
    if (!nv__donatable_size((uint64_t)base->size)) return -1;
    return owned_on_cpu(n, at) ? at : -1;
  }
  if (n->noutputs != 1 && !compiled) return -1;
  /* Any dtype, as MLX's rule (the seed took float16/bfloat16/float32 only): every element-wise
   * kernel reads element e before it writes it, by the same iteration or thread, whatever the
   * dtype; an integer state such as an optimizer's step counter then keeps its buffer from one
   * step to the next, so a repeated step binds the same buffers (a prepared GPU graph replays
   * unchanged). The input must still have the output's dtype and exact shape. */
  const nv__output *out = &n->out[0];
  if (out->size == 0) return -1;
  int ncand = compiled ? n->ninputs - 1 : 4;
  for (int k = 0; k < ncand && (compiled || info->donate[k] >= 0); k++) {
    int at = compiled ? k : info->donate[k];
    if (at >= n->ninputs) continue;
    const nv__output *in = &n->inputs[at].node->out[n->inputs[at].idx];
    if (same_layout_meta(in, out) && owned_on_cpu(n, at)) return at;
  }
  return -1;
}

/* Multi-output primitives that update their inputs in place (adam_update: p, m and v into
 * p', m' and v'): each output of a pair takes its input's buffer where the input is owned
 * outright and has the output's dtype and shape. Returns how many outputs took one. */
static int donate_pairs(nv__node *n) {
  static const int adam[3][2] = NV__ADAM_DONATE_PAIRS;
  if (n->prim != NV__PRIM_ADAM_UPDATE || tracing_depth > 0 || nv__node_is_tracer(n)) return 0;
  int taken = 0;
  for (int k = 0; k < 3; k++) {
    int o = adam[k][0], i = adam[k][1];
    if (o >= n->noutputs || i >= n->ninputs) continue;
    nv__output *out = &n->out[o];
    const nv__output *in = &n->inputs[i].node->out[n->inputs[i].idx];
    if (out->size == 0 || out->buf || !same_layout_meta(in, out)) continue;
    /* The last step's update is one node with three outputs, p, m and v of this one: its
     * references are this node's three edges when nothing else holds it. */
    int edges = 0;
    for (int j = 0; j < n->ninputs; j++) edges += n->inputs[j].node == n->inputs[i].node;
    if (!owned_refs(n, i, edges)) continue;
    nv__output *src = &n->inputs[i].node->out[n->inputs[i].idx];
    out->buf = src->buf; /* the only handle: taken over, not shared */
    out->offset = 0;
    src->buf = NULL;
    atomic_fetch_add_explicit(&donations, 1, memory_order_relaxed);
    taken++;
  }
  return taken;
}

/* ---- Running one node ---- */

static void evaluate(nv__node *n, nv__ectx *ctx) {
  nv__node_lock(n);
  if (atomic_load_explicit(&n->state, memory_order_relaxed) != NV__PENDING) {
    nv__node_unlock(n);
    return; /* evaluated, or running, on another thread */
  }
  n->owner = nv__thread_id();
  atomic_store_explicit(&n->state, NV__RUNNING, memory_order_relaxed);
  nv__node_unlock(n);
  atomic_fetch_add_explicit(&eval_count, 1, memory_order_relaxed);
  thread_eval_count++;

  nv__error *err = NULL; /* an owned reference */
  nv__operand ops_inline[8];
  nv__operand *ops = n->ninputs <= 8 ? ops_inline : malloc((size_t)n->ninputs * sizeof *ops);
  if (!ops) {
    err = nv__error_new(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", nv__prims[n->prim].name);
  }
  for (int i = 0; !err && i < n->ninputs; i++) {
    nv__node *in = n->inputs[i].node;
    int st = atomic_load_explicit(&in->state, memory_order_acquire);
    if (st == NV__RUNNING || st == NV__PENDING) {
      if ((err = wait_running(in, ctx))) break;
      st = atomic_load_explicit(&in->state, memory_order_acquire);
      if (st == NV__PENDING) {
        err = nv__error_new(NV_ERR_BACKEND, "%s: an input was not evaluated",
                            nv__prims[n->prim].name);
        break;
      }
    }
    if (st == NV__FAILED) {
      err = nv__error_retain(in->error);
      break;
    }
    const nv__output *o = &in->out[n->inputs[i].idx];
    ops[i] = (nv__operand){o, o->buf, o->offset};
  }
  if (!err) {
    const nv__backend *be = nv__backend_for(n->stream.device);
    if (!be) {
      char dev[32];
      nv_device_name(n->stream.device, dev, sizeof dev);
      err = nv__error_new(NV_ERR_UNSUPPORTED, "%s: unsupported device %s: no backend for it",
                          nv__prims[n->prim].name, dev);
    } else {
      int donated = donation(n);
      if (donated >= 0) {
        nv__output *src = &n->inputs[donated].node->out[n->inputs[donated].idx];
        n->out[0].buf = src->buf; /* the only handle: taken over, not shared */
        n->out[0].offset = 0;
        src->buf = NULL;
        atomic_fetch_add_explicit(&donations, 1, memory_order_relaxed);
      } else {
        donate_pairs(n);
      }
      nv_status s = be->encode(ctx, n, ops, donated);
      if (s != NV_OK) {
        err = nv__error_new(s, "%s", nv_last_error());
        for (int i = 0; i < n->noutputs; i++) {
          nv__buffer_release(n->out[i].buf);
          n->out[i].buf = NULL;
        }
      }
    }
  }
  if (ops != ops_inline) free(ops);
  /* A tracer of this thread's transform keeps its graph until the transform ends (Retained);
   * one of another thread's running transform keeps it too (that transform may still walk
   * it), Done; anything else is detached. */
  bool retain = nv__node_traced_here(n);
  bool keep = !retain && nv__node_is_tracer(n);
  if (retain && !retain_record(n) && !err)
    err = nv__error_new(NV_ERR_OUT_OF_MEMORY, "%s: out of memory keeping a traced graph",
                        nv__prims[n->prim].name);
  finish(n, err ? NV__FAILED : (retain ? NV__RETAINED : NV__DONE), err);
  if (!retain && !keep) nv__node_detach(n); /* outside the lock */
}

/* ---- Backends of an evaluation ---- */

void nv__ectx_commit(nv__ectx *ctx) {
  if (ctx && ctx->gpu_backend) ctx->gpu_backend->commit(ctx);
}

nv_status nv__ectx_flush(nv__ectx *ctx) {
  if (ctx && ctx->gpu_backend) return ctx->gpu_backend->flush(ctx);
  return NV_OK;
}

/* ---- eval / async_eval / schedule ---- */

struct nv_schedule {
  nv_array **arrays;
  size_t n;
  nv__node **order;
  long norder;
};

static nv_status check_args(const char *op, nv_array *const *xs, size_t n) {
  if (n && !xs) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL array list", op);
  for (size_t i = 0; i < n; i++)
    if (!xs[i]) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: array %zu is NULL", op, i);
  return NV_OK;
}

nv_schedule *nv_schedule_new(nv_array *const *xs, size_t n) {
  if (check_args("schedule", xs, n) != NV_OK) return NULL;
  nv_schedule *s = nv__calloc(1, sizeof *s);
  nv__node **roots = calloc(n ? n : 1, sizeof *roots);
  if (s) s->arrays = nv__malloc((n ? n : 1) * sizeof *s->arrays);
  if (!s || !roots || !s->arrays) {
    if (s) nv__free(s->arrays);
    nv__free(s);
    free(roots);
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "schedule: out of memory");
    return NULL;
  }
  for (size_t i = 0; i < n; i++) roots[i] = xs[i]->node;
  s->norder = topological_order(roots, n, &s->order);
  free(roots);
  if (s->norder < 0) {
    nv__free(s->arrays);
    nv__free(s);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) s->arrays[i] = nv_retain(xs[i]);
  s->n = n;
  return s;
}

nv_array *const *nv_schedule_arrays(const nv_schedule *s, size_t *n) {
  if (!s) {
    if (n) *n = 0;
    return NULL;
  }
  if (n) *n = s->n;
  return s->arrays;
}

size_t nv_schedule_node_count(const nv_schedule *s) { return s ? (size_t)s->norder : 0; }

void nv_schedule_free(nv_schedule *s) {
  if (!s) return;
  for (long i = 0; i < s->norder; i++) nv__node_release(s->order[i]);
  free(s->order);
  for (size_t i = 0; i < s->n; i++) nv_release(s->arrays[i]);
  nv__free(s->arrays);
  nv__free(s);
}

/* Runs the order, releasing each node after it ran so intermediates are freed as soon as
 * their last consumer has run. */
static void submit(nv_schedule *s, nv__ectx *ctx) {
  for (long i = 0; i < s->norder; i++) {
    evaluate(s->order[i], ctx);
    nv__node_release(s->order[i]);
  }
  s->norder = 0;
}

/* The first error among the arrays, in order; waits for arrays other threads are computing
 * when `wait` is set. */
static nv_status arrays_status(nv_array *const *xs, size_t n, nv__ectx *ctx, bool wait) {
  for (size_t i = 0; i < n; i++) {
    nv__node *node = xs[i]->node;
    int st = atomic_load_explicit(&node->state, memory_order_acquire);
    if (st == NV__RUNNING && wait) {
      nv__error *e = wait_running(node, ctx);
      if (e) {
        nv_status s = nv__set_error_obj(e);
        nv__error_release(e);
        return s;
      }
      st = atomic_load_explicit(&node->state, memory_order_acquire);
    }
    if (st == NV__FAILED) return nv__set_error_obj(node->error);
  }
  return NV_OK;
}

/* Ends an evaluation's backend work: waits for it (eval) or only submits it (async_eval), then
 * reports the first error among the arrays; the GPU's errors of arrays it computed surface when
 * waited for. */
static nv_status finish_eval(nv__ectx *ctx, nv_array *const *xs, size_t n, bool wait) {
  if (wait) nv__ectx_flush(ctx);
  else nv__ectx_commit(ctx);
  nv_status r = arrays_status(xs, n, ctx, wait);
  if (r == NV_OK && wait && ctx->gpu_backend) {
    /* Arrays written on the GPU: their submissions' results. */
    for (size_t i = 0; i < n && r == NV_OK; i++) {
      const nv__output *o = nv__out(xs[i]);
      if (o->buf && atomic_load_explicit(&o->buf->dev, memory_order_acquire))
        r = atomic_load(&nv__gpu_hooks_ptr)->status(o->buf);
    }
  }
  if (ctx->gpu_backend) ctx->gpu_backend->end(ctx);
  return r;
}

static nv_status start(nv_schedule *s, bool wait) {
  nv__ectx ctx = {0};
  submit(s, &ctx);
  nv_status r = finish_eval(&ctx, s->arrays, s->n, wait);
  nv_schedule_free(s);
  return r;
}

nv_status nv_schedule_eval(nv_schedule *s) {
  if (!s) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "schedule_eval: NULL schedule");
  return start(s, true);
}

nv_status nv_schedule_async_eval(nv_schedule *s) {
  if (!s) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "schedule_async_eval: NULL schedule");
  return start(s, false);
}

/* The common path of eval and async_eval, without a heap-allocated schedule for one array. */
static nv_status eval_impl(const char *op, nv_array *const *xs, size_t n, bool wait) {
  nv_status s = check_args(op, xs, n);
  if (s != NV_OK) return s;
  /* Fast path: everything already evaluated. */
  bool all_done = true;
  for (size_t i = 0; i < n && all_done; i++) {
    int st = atomic_load_explicit(&xs[i]->node->state, memory_order_acquire);
    all_done = st == NV__DONE || st == NV__RETAINED;
  }
  if (all_done) return NV_OK;
  nv__node *roots_inline[8];
  nv__node **roots = n <= 8 ? roots_inline : malloc(n * sizeof *roots);
  if (!roots) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (size_t i = 0; i < n; i++) roots[i] = xs[i]->node;
  nv_schedule sch = {(nv_array **)xs, n, NULL, 0};
  sch.norder = topological_order(roots, n, &sch.order);
  if (roots != roots_inline) free(roots);
  if (sch.norder < 0) return NV_ERR_OUT_OF_MEMORY;
  nv__ectx ctx = {0};
  submit(&sch, &ctx);
  free(sch.order);
  return finish_eval(&ctx, xs, n, wait);
}

nv_status nv_eval(nv_array *const *xs, size_t n) { return eval_impl("eval", xs, n, true); }
nv_status nv_eval1(nv_array *x) { return eval_impl("eval", &x, 1, true); }
nv_status nv_async_eval(nv_array *const *xs, size_t n) {
  /* As MLX: a transform's function must not start work it does not wait for. */
  if (nv__current_trace)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "async_eval: not allowed inside a transform (grad, vjp, jvp, vmap)");
  return eval_impl("async_eval", xs, n, false);
}
nv_status nv_eval_vec(const nv_vec *v) {
  if (!v) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "eval: NULL list");
  return eval_impl("eval", nv_vec_data(v), nv_vec_size(v), true);
}
