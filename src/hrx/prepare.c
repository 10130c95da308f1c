/* Prepare: region split, hazard frontiers, use summaries, lowering, and update in place. */
#include "hrx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool hrx__uses_conflict(const hrx__use *a, size_t na, const hrx__use *b, size_t nb) {
  for (size_t i = 0; i < na; i++)
    for (size_t j = 0; j < nb; j++)
      if (hrx_view_overlaps(a[i].view, b[j].view) &&
          (hrx__writes(a[i].access) || hrx__writes(b[j].access)))
        return true;
  return false;
}

/* A frontier over earlier accesses: each item is the latest access of its range that later
 * work may conflict with. A write drops the items it fully covers (it already depends on them,
 * so later work ordered after it is ordered after them), so a chain stays O(1) per step. */
typedef struct frontier {
  hrx__use *items;
  size_t *owner;
  size_t n, cap;
} frontier;

static bool covers(hrx_view outer, hrx_view inner) {
  return outer.buffer == inner.buffer && outer.offset <= inner.offset &&
         inner.offset + inner.length <= outer.offset + outer.length;
}

static bool add_unique(size_t **v, size_t *n, size_t *cap, size_t x) {
  for (size_t i = 0; i < *n; i++)
    if ((*v)[i] == x) return true;
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 4;
    size_t *p = hrx__realloc(*v, c * sizeof *p);
    if (!p) return false;
    *v = p;
    *cap = c;
  }
  (*v)[(*n)++] = x;
  return true;
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Computes the dependencies of `self` (sorted) and advances the frontier past its uses. */
static bool frontier_step(frontier *f, const hrx__use *uses, size_t nuses, size_t self,
                          size_t **deps, size_t *ndeps) {
  size_t cap = 0;
  *deps = NULL;
  *ndeps = 0;
  for (size_t u = 0; u < nuses; u++)
    for (size_t i = 0; i < f->n; i++)
      if (hrx_view_overlaps(uses[u].view, f->items[i].view) &&
          (hrx__writes(uses[u].access) || hrx__writes(f->items[i].access)))
        if (!add_unique(deps, ndeps, &cap, f->owner[i])) return false;
  if (*ndeps > 1) qsort(*deps, *ndeps, sizeof **deps, cmp_size);
  for (size_t u = 0; u < nuses; u++) {
    if (!hrx__writes(uses[u].access)) continue;
    size_t k = 0;
    for (size_t i = 0; i < f->n; i++) {
      if (covers(uses[u].view, f->items[i].view)) continue;
      f->items[k] = f->items[i];
      f->owner[k++] = f->owner[i];
    }
    f->n = k;
  }
  for (size_t u = 0; u < nuses; u++) {
    if (f->n == f->cap) {
      size_t c = f->cap ? f->cap * 2 : 16;
      hrx__use *it = hrx__realloc(f->items, c * sizeof *it);
      if (!it) return false;
      f->items = it;
      size_t *ow = hrx__realloc(f->owner, c * sizeof *ow);
      if (!ow) return false;
      f->owner = ow;
      f->cap = c;
    }
    f->items[f->n] = uses[u];
    f->owner[f->n++] = self;
  }
  return true;
}

static void frontier_free(frontier *f) {
  hrx__free(f->items);
  hrx__free(f->owner);
}

static int cmp_use(const void *pa, const void *pb) {
  const hrx__use *a = pa, *b = pb;
  uintptr_t ba = (uintptr_t)a->view.buffer, bb = (uintptr_t)b->view.buffer;
  if (ba != bb) return ba < bb ? -1 : 1;
  if (a->access != b->access) return a->access < b->access ? -1 : 1;
  if (a->view.offset != b->view.offset) return a->view.offset < b->view.offset ? -1 : 1;
  return 0;
}

/* Merges uses per buffer and kind (reads; writes, read-write counted as writes) into sorted,
 * disjoint ranges. */
static bool summarize(const hrx__use *in, size_t n, hrx__use **out, size_t *nout) {
  hrx__use *u = hrx__calloc(n, sizeof *u);
  if (!u) return false;
  for (size_t i = 0; i < n; i++) {
    u[i] = in[i];
    u[i].access = hrx__writes(in[i].access) ? HRX_ACCESS_WRITE : HRX_ACCESS_READ;
  }
  if (n > 1) qsort(u, n, sizeof *u, cmp_use);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (k > 0 && u[k - 1].view.buffer == u[i].view.buffer && u[k - 1].access == u[i].access &&
        u[i].view.offset <= u[k - 1].view.offset + u[k - 1].view.length) {
      size_t end = u[i].view.offset + u[i].view.length;
      size_t prev_end = u[k - 1].view.offset + u[k - 1].view.length;
      if (end > prev_end) u[k - 1].view.length = end - u[k - 1].view.offset;
      continue;
    }
    u[k++] = u[i];
  }
  *out = u;
  *nout = k;
  return true;
}

static hrx_status oom(const char *call) {
  return hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
}

hrx_status hrx__plan_build(hrx_runtime *rt, hrx__op *ops, size_t nops, uint32_t slots,
                           const char *call, hrx__plan *p) {
  (void)rt;
  (void)slots;
  memset(p, 0, sizeof *p);
  p->ops = ops;
  p->nops = nops;
  p->op_deps = hrx__calloc(nops, sizeof *p->op_deps);
  p->op_ndeps = hrx__calloc(nops, sizeof *p->op_ndeps);
  p->regions = hrx__calloc(nops, sizeof *p->regions);
  if (!p->op_deps || !p->op_ndeps || !p->regions) return oom(call);
  for (size_t i = 0; i < nops;) {
    hrx__region *r = &p->regions[p->nregions++];
    r->first = i;
    /* Callbacks run on the host between regions; a captured operation is lowered into the
     * native graph like a kernel, so it stays in the compute lane's run. */
    if (ops[i].kind == HRX_OP_SCOPED || ops[i].kind == HRX_OP_HOST) {
      r->kind = ops[i].kind == HRX_OP_SCOPED ? HRX_REG_SCOPED : HRX_REG_HOST;
      r->lane = HRX_LANE_COMPUTE;
      r->queue = ops[i].kind == HRX_OP_SCOPED ? HRX_QUEUE_SCOPED : HRX_QUEUE_HOST;
      r->count = 1;
      i++;
    } else {
      r->lane = ops[i].lane;
      r->queue = (int)r->lane;
      bool copies = true;
      while (i < nops && ops[i].kind != HRX_OP_SCOPED && ops[i].kind != HRX_OP_HOST &&
             ops[i].lane == r->lane) {
        if (ops[i].kind != HRX_OP_COPY) copies = false;
        else r->copy_bytes += ops[i].dst.length;
        i++;
      }
      r->count = i - r->first;
      r->kind = copies ? HRX_REG_COPY : HRX_REG_NATIVE;
    }
    pthread_mutex_init(&r->lock, NULL);
    /* Edges inside the region, from a frontier over its operations. */
    frontier f = {0};
    size_t nall = 0;
    for (size_t k = r->first; k < r->first + r->count; k++) {
      if (!frontier_step(&f, ops[k].uses, ops[k].nuses, k, &p->op_deps[k], &p->op_ndeps[k])) {
        frontier_free(&f);
        return oom(call);
      }
      nall += ops[k].nuses;
    }
    frontier_free(&f);
    hrx__use *all = hrx__calloc(nall, sizeof *all);
    if (!all) return oom(call);
    size_t w = 0;
    for (size_t k = r->first; k < r->first + r->count; k++)
      for (size_t u = 0; u < ops[k].nuses; u++) all[w++] = ops[k].uses[u];
    bool ok = summarize(all, nall, &r->uses, &r->nuses);
    hrx__free(all);
    if (!ok) return oom(call);
  }
  /* Edges between regions, from a frontier over the regions' summarized uses. */
  frontier f = {0};
  size_t nall = 0;
  for (size_t r = 0; r < p->nregions; r++) {
    hrx__region *reg = &p->regions[r];
    if (!frontier_step(&f, reg->uses, reg->nuses, r, &reg->deps, &reg->ndeps)) {
      frontier_free(&f);
      return oom(call);
    }
    nall += reg->nuses;
    if (r > 0) {
      bool after_previous = false;
      for (size_t d = 0; d < reg->ndeps; d++) after_previous |= reg->deps[d] == r - 1;
      if (!after_previous) p->parallel = true;
    }
  }
  frontier_free(&f);
  hrx__use *all = hrx__calloc(nall, sizeof *all);
  if (!all) return oom(call);
  size_t w = 0;
  for (size_t r = 0; r < p->nregions; r++)
    for (size_t u = 0; u < p->regions[r].nuses; u++) all[w++] = p->regions[r].uses[u];
  bool ok = summarize(all, nall, &p->uses, &p->nuses);
  hrx__free(all);
  return ok ? HRX_OK : oom(call);
}

/* Creates the lane's cached copy stream the first time a copy region needs it. */
static hrx_status ensure_copy_stream(hrx_runtime *rt, hrx_lane lane, const char *call) {
  (void)call;
  hrx_status s = HRX_OK;
  hrx__lock(rt);
  if (!rt->copy_created[lane]) {
#ifdef HRX_HAVE_CUDA
    if (hrx__gpu_engine(rt)) {
      cudaError_t e = cudaSetDevice(rt->device);
      if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&rt->copy_stream[lane], cudaStreamNonBlocking);
      if (e != cudaSuccess) s = hrx__cuda_err(e, call);
    }
#endif
    if (s == HRX_OK) {
      rt->copy_created[lane] = true;
      atomic_fetch_add(&rt->counters.copy_streams, 1);
    }
  }
  hrx__unlock(rt);
  return s;
}

#ifdef HRX_HAVE_CUDA
static hrx_status instantiate_region(hrx_runtime *rt, hrx__plan *p, hrx__region *r,
                                     const char *call) {
  cudaGraph_t g = NULL;
  cudaGraphNode_t *nodes = NULL;
  hrx_status s = hrx__cuda_build_region(rt, p, r, call, &g, &nodes);
  if (s != HRX_OK) return s;
  cudaGraphExec_t exec = NULL;
  cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
  if (e != cudaSuccess) {
    hrx__free(nodes);
    cudaGraphDestroy(g);
    return hrx__cuda_err(e, call);
  }
  if (r->exec) cudaGraphExecDestroy(r->exec);
  if (r->graph) cudaGraphDestroy(r->graph);
  hrx__free(r->nodes);
  r->graph = g;
  r->exec = exec;
  r->nodes = nodes;
  return HRX_OK;
}
#endif

hrx_status hrx__plan_materialize(hrx_runtime *rt, hrx__plan *p, uint32_t slots, const char *call) {
  for (size_t i = 0; i < p->nregions; i++) {
    hrx__region *r = &p->regions[i];
    if (r->kind == HRX_REG_COPY) {
      hrx_status s = ensure_copy_stream(rt, r->lane, call);
      if (s != HRX_OK) return s;
    }
#ifdef HRX_HAVE_CUDA
    if (hrx__gpu_engine(rt) && (r->kind == HRX_REG_NATIVE || r->kind == HRX_REG_COPY)) {
      cudaError_t e = cudaSetDevice(rt->device);
      if (e != cudaSuccess) return hrx__cuda_err(e, call);
      r->events = hrx__calloc(slots, sizeof *r->events);
      if (!r->events) return oom(call);
      for (uint32_t k = 0; k < slots; k++) {
        e = cudaEventCreateWithFlags(&r->events[k], cudaEventDisableTiming);
        if (e != cudaSuccess) {
          r->events[k] = NULL;
          return hrx__cuda_err(e, call);
        }
      }
      if (r->kind == HRX_REG_NATIVE) {
        e = cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking);
        if (e != cudaSuccess) {
          r->stream = NULL;
          return hrx__cuda_err(e, call);
        }
        hrx_status s = instantiate_region(rt, p, r, call);
        if (s != HRX_OK) return s;
      }
    }
#else
    (void)slots;
#endif
    if (r->kind == HRX_REG_NATIVE) atomic_fetch_add(&rt->counters.native_prepared, 1);
  }
  return HRX_OK;
}

void hrx__plan_destroy(hrx__plan *p, uint32_t slots) {
  (void)slots;
  for (size_t i = 0; i < p->nregions; i++) {
    hrx__region *r = &p->regions[i];
#ifdef HRX_HAVE_CUDA
    if (r->exec) cudaGraphExecDestroy(r->exec);
    if (r->graph) cudaGraphDestroy(r->graph);
    if (r->stream) cudaStreamDestroy(r->stream);
    hrx__free(r->nodes);
    if (r->children)
      for (size_t k = 0; k < r->count; k++)
        if (r->children[k]) cudaGraphDestroy(r->children[k]);
    hrx__free(r->children);
    if (r->events)
      for (uint32_t k = 0; k < slots; k++)
        if (r->events[k]) cudaEventDestroy(r->events[k]);
    hrx__free(r->events);
#endif
    pthread_mutex_destroy(&r->lock);
    hrx__free(r->uses);
    hrx__free(r->deps);
  }
  hrx__free(p->regions);
  if (p->op_deps)
    for (size_t i = 0; i < p->nops; i++) hrx__free(p->op_deps[i]);
  hrx__free(p->op_deps);
  hrx__free(p->op_ndeps);
  for (size_t i = 0; i < p->nops; i++) hrx__op_clear(&p->ops[i]);
  hrx__free(p->ops);
  hrx__free(p->uses);
  memset(p, 0, sizeof *p);
}

static bool same_sizes(const size_t *a, size_t na, const size_t *b, size_t nb) {
  return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

bool hrx__plan_same_topology(const hrx__plan *a, const hrx__plan *b) {
  if (a->nops != b->nops || a->nregions != b->nregions) return false;
  for (size_t i = 0; i < a->nops; i++) {
    const hrx__op *x = &a->ops[i], *y = &b->ops[i];
    if (x->kind != y->kind || x->lane != y->lane || x->kernel != y->kernel ||
        x->nviews != y->nviews || x->nconstants != y->nconstants || x->nuses != y->nuses)
      return false;
    /* A fill lowers to a memset node on device memory and to a kernel node elsewhere. */
    if (x->kind == HRX_OP_FILL &&
        (x->dst.buffer->memory == HRX_MEMORY_DEVICE) != (y->dst.buffer->memory == HRX_MEMORY_DEVICE))
      return false;
    if (!same_sizes(a->op_deps[i], a->op_ndeps[i], b->op_deps[i], b->op_ndeps[i])) return false;
  }
  for (size_t r = 0; r < a->nregions; r++) {
    const hrx__region *x = &a->regions[r], *y = &b->regions[r];
    if (x->kind != y->kind || x->lane != y->lane || x->first != y->first || x->count != y->count)
      return false;
    if (!same_sizes(x->deps, x->ndeps, y->deps, y->ndeps)) return false;
  }
  return true;
}

/* ---- public: prepare, queries, update ---- */

static hrx_status prepared_new(hrx_graph *g, const char *call, hrx_prepared **out) {
  hrx_runtime *rt = g->rt;
  uint32_t slots = rt->options.graph_slots;
  hrx_prepared *p = hrx__calloc(1, sizeof *p);
  hrx__slot *sl = hrx__calloc(slots, sizeof *sl);
  if (!p || !sl) {
    hrx__free(p);
    hrx__free(sl);
    return oom(call);
  }
  atomic_init(&p->refs, 1);
  atomic_init(&p->quarantined, 0);
  p->nslots = slots;
  p->slots = sl;
  for (uint32_t k = 0; k < slots; k++) {
    hrx_completion *c = hrx__calloc(1, sizeof *c);
    if (!c) {
      for (uint32_t j = 0; j < k; j++) hrx_completion_release(sl[j].signal);
      hrx__free(sl);
      hrx__free(p);
      return oom(call);
    }
    atomic_init(&c->refs, 1);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->done = c->finished = true;
    atomic_init(&c->done_hint, 1);
    c->token = rt->token;
    atomic_fetch_add(&rt->token->refs, 1);
    sl[k].signal = c;
  }
  p->rt = rt;
  *out = p;
  return HRX_OK;
}

/* Builds and materializes a plan over the builder's operations without consuming them on
 * failure: the plan borrows the ops array until it succeeds. */
static hrx_status plan_from_graph(hrx_graph *g, const char *call, hrx__plan *plan) {
  hrx_runtime *rt = g->rt;
  uint32_t slots = rt->options.graph_slots;
  hrx_status s = hrx__plan_build(rt, g->ops, g->count, slots, call, plan);
  if (s == HRX_OK) s = hrx__plan_materialize(rt, plan, slots, call);
  if (s != HRX_OK) {
    /* Give the operations back to the builder before tearing the plan down. */
    plan->ops = NULL;
    plan->nops = 0;
    hrx_status keep = s;
    char saved[HRX_MSG];
    snprintf(saved, sizeof saved, "%s", hrx_last_error());
    size_t nops = g->count;
    size_t **op_deps = plan->op_deps;
    plan->op_deps = NULL;
    if (op_deps)
      for (size_t i = 0; i < nops; i++) hrx__free(op_deps[i]);
    hrx__free(op_deps);
    hrx__plan_destroy(plan, slots);
    return hrx__err(keep, "%s", saved);
  }
  return HRX_OK;
}

HRX_API hrx_status hrx_graph_prepare(hrx_graph *graph, hrx_prepared **out) {
  const char *call = "hrx_graph_prepare";
  if (!graph || !out) return hrx__err(HRX_E_INVALID, "%s: graph or out is NULL", call);
  if (graph->count == 0) return hrx__err(HRX_E_INVALID, "%s: cannot prepare an empty graph", call);
  hrx_status s = hrx__runtime_usable(graph->rt, call);
  if (s != HRX_OK) return s;
  hrx_prepared *p = NULL;
  s = prepared_new(graph, call, &p);
  if (s != HRX_OK) return s;
  s = plan_from_graph(graph, call, &p->plan);
  if (s != HRX_OK) {
    for (uint32_t k = 0; k < p->nslots; k++) hrx_completion_release(p->slots[k].signal);
    hrx__free(p->slots);
    hrx__free(p);
    return s;
  }
  /* The builder's operations now belong to the plan. */
  p->rt = hrx_runtime_retain(graph->rt);
  graph->ops = NULL;
  graph->count = graph->cap = 0;
  hrx_graph_release(graph);
  *out = p;
  return HRX_OK;
}

HRX_API hrx_prepared *hrx_prepared_retain(hrx_prepared *prepared) {
  if (prepared) atomic_fetch_add(&prepared->refs, 1);
  return prepared;
}

HRX_API void hrx_prepared_release(hrx_prepared *prepared) {
  if (!prepared || atomic_fetch_sub(&prepared->refs, 1) != 1) return;
  hrx__plan_destroy(&prepared->plan, prepared->nslots);
  for (uint32_t k = 0; k < prepared->nslots; k++) hrx_completion_release(prepared->slots[k].signal);
  hrx__free(prepared->slots);
  hrx_runtime *rt = prepared->rt;
  hrx__free(prepared);
  hrx_runtime_release(rt);
}

HRX_API size_t hrx_prepared_regions(const hrx_prepared *prepared) {
  return prepared ? prepared->plan.nregions : 0;
}

HRX_API int hrx_prepared_parallel(const hrx_prepared *prepared) {
  return prepared && prepared->plan.parallel ? 1 : 0;
}

HRX_API int hrx_prepared_quarantined(const hrx_prepared *prepared) {
  return prepared && atomic_load(&((hrx_prepared *)prepared)->quarantined) ? 1 : 0;
}

HRX_API hrx_status hrx_prepared_region_info(const hrx_prepared *prepared, size_t region,
                                            hrx_lane *lane, size_t *operations) {
  if (!prepared) return hrx__err(HRX_E_INVALID, "hrx_prepared_region_info: prepared is NULL");
  if (region >= prepared->plan.nregions)
    return hrx__err(HRX_E_INVALID, "hrx_prepared_region_info: region %zu of %zu", region,
                    prepared->plan.nregions);
  if (lane) *lane = prepared->plan.regions[region].lane;
  if (operations) *operations = prepared->plan.regions[region].count;
  return HRX_OK;
}

static hrx_status copy_out(const size_t *src, size_t n, size_t *out, size_t capacity,
                           size_t *count, const char *call) {
  if (!count || (capacity && !out)) return hrx__err(HRX_E_INVALID, "%s: count or out is NULL", call);
  for (size_t i = 0; i < n && i < capacity; i++) out[i] = src[i];
  *count = n;
  return HRX_OK;
}

HRX_API hrx_status hrx_prepared_region_deps(const hrx_prepared *prepared, size_t region,
                                            size_t *out, size_t capacity, size_t *count) {
  const char *call = "hrx_prepared_region_deps";
  if (!prepared) return hrx__err(HRX_E_INVALID, "%s: prepared is NULL", call);
  if (region >= prepared->plan.nregions)
    return hrx__err(HRX_E_INVALID, "%s: region %zu of %zu", call, region, prepared->plan.nregions);
  const hrx__region *r = &prepared->plan.regions[region];
  return copy_out(r->deps, r->ndeps, out, capacity, count, call);
}

HRX_API hrx_status hrx_prepared_operation_deps(const hrx_prepared *prepared, size_t index,
                                               size_t *out, size_t capacity, size_t *count) {
  const char *call = "hrx_prepared_operation_deps";
  if (!prepared) return hrx__err(HRX_E_INVALID, "%s: prepared is NULL", call);
  if (index >= prepared->plan.nops)
    return hrx__err(HRX_E_INVALID, "%s: operation %zu of %zu", call, index, prepared->plan.nops);
  return copy_out(prepared->plan.op_deps[index], prepared->plan.op_ndeps[index], out, capacity,
                  count, call);
}

/* Swaps region state that belongs to the executable (streams, events, executables) from
 * `from` into `to`, so an in-place update keeps what was instantiated. */
static void keep_native_state(hrx__region *to, hrx__region *from) {
#ifdef HRX_HAVE_CUDA
  cudaGraph_t g = to->graph;
  to->graph = from->graph;
  from->graph = g;
  cudaGraphExec_t x = to->exec;
  to->exec = from->exec;
  from->exec = x;
  cudaStream_t st = to->stream;
  to->stream = from->stream;
  from->stream = st;
  cudaEvent_t *ev = to->events;
  to->events = from->events;
  from->events = ev;
  cudaGraphNode_t *nodes = to->nodes;
  to->nodes = from->nodes;
  from->nodes = nodes;
#else
  (void)to;
  (void)from;
#endif
}

/* Updates every native region of `old` in place for the operations of `fresh` (same
 * topology), moving the executables over to `fresh`. On failure everything moves back and
 * the regions whose executables it may have changed are instantiated again from `old`'s
 * operations, so `old` stays whole; if that fails too, *lost is set: the old plan's
 * executables can no longer be trusted. */
static hrx_status update_in_place(hrx_runtime *rt, hrx__plan *old, hrx__plan *fresh,
                                  const char *call, bool *lost) {
  *lost = false;
  /* All executables move first, so a failure anywhere moves all of them back at once. */
  for (size_t k = 0; k < fresh->nregions; k++)
    keep_native_state(&fresh->regions[k], &old->regions[k]);
  hrx_status s = HRX_OK;
  size_t i = 0;
  for (; i < fresh->nregions && s == HRX_OK; i++) {
    hrx__region *nr = &fresh->regions[i];
    if (nr->kind != HRX_REG_NATIVE) continue;
#ifdef HRX_HAVE_CUDA
    if (hrx__gpu_engine(rt)) {
      bool updated = false, refused = false;
      s = hrx__cuda_update_region(rt, old, fresh, nr, &updated, &refused);
      if (s == HRX_OK) {
        if (updated) atomic_fetch_add(&rt->counters.native_updated, 1);
      } else if (refused) {
        /* The driver refused the update (a node it cannot change in place, or a captured
         * operation whose work changed shape): instantiate this region again, as a
         * topology change would. */
        s = instantiate_region(rt, fresh, nr, call);
        if (s == HRX_OK) atomic_fetch_add(&rt->counters.native_prepared, 1);
      }
      continue;
    }
#endif
    atomic_fetch_add(&rt->counters.native_updated, 1);
  }
  if (s == HRX_OK) {
#ifdef HRX_HAVE_CUDA
    for (size_t k = 0; k < fresh->nregions; k++)
      hrx__cuda_adopt_children(&fresh->regions[k], &old->regions[k]);
#endif
    return HRX_OK;
  }
  char saved[HRX_MSG];
  snprintf(saved, sizeof saved, "%s", hrx_last_error());
  for (size_t k = 0; k < fresh->nregions; k++)
    keep_native_state(&old->regions[k], &fresh->regions[k]);
#ifdef HRX_HAVE_CUDA
  /* Visited regions [0, i) with a changed operation may hold some of the fresh operations'
   * parameters, which the old plan's buffers and user data do not back. They are rebuilt from
   * the old operations and their kept captured graphs, with no capture function called. */
  for (size_t k = 0; k < i; k++)
    if (old->regions[k].kind == HRX_REG_NATIVE && hrx__gpu_engine(rt) &&
        hrx__cuda_region_changed(old, fresh, k)) {
      if (instantiate_region(rt, old, &old->regions[k], call) == HRX_OK)
        atomic_fetch_add(&rt->counters.native_prepared, 1);
      else *lost = true;
    }
#else
  (void)call;
#endif
  return hrx__err(s, "%s", saved);
}

static bool views_equal(hrx_view a, hrx_view b) {
  return a.buffer == b.buffer && a.offset == b.offset && a.length == b.length;
}

bool hrx__op_same_params(const hrx__op *a, const hrx__op *b) {
  if (a->kind == HRX_OP_CAPTURED && !hrx__captured_same(a->callback, b->callback)) return false;
  if (a->value != b->value || !views_equal(a->dst, b->dst) || !views_equal(a->src, b->src))
    return false;
  for (size_t i = 0; i < a->nviews; i++)
    if (!views_equal(a->views[i], b->views[i])) return false;
  if (a->params_size != b->params_size ||
      (a->params_size && memcmp(a->params, b->params, a->params_size) != 0))
    return false;
  for (size_t i = 0; i < a->nconstants; i++)
    if (a->constants[i].size != b->constants[i].size ||
        memcmp(&a->constants[i].value, &b->constants[i].value, a->constants[i].size) != 0)
      return false;
  return true;
}

/* Whether two operations would prepare to the same work: the same kind, lane, kernel, uses and
 * callbacks (the same one, or keyed captured work), and the same node parameters. */
static bool ops_identical(const hrx__op *a, const hrx__op *b) {
  if (a->kind != b->kind || a->lane != b->lane || a->kernel != b->kernel ||
      (a->kind != HRX_OP_CAPTURED && a->callback != b->callback) || a->nviews != b->nviews ||
      a->nuses != b->nuses || a->nconstants != b->nconstants)
    return false;
  for (size_t i = 0; i < a->nuses; i++)
    if (!views_equal(a->uses[i].view, b->uses[i].view) || a->uses[i].access != b->uses[i].access)
      return false;
  return hrx__op_same_params(a, b);
}

/* HRX_DEBUG_UPDATE=n: the first n updates that rewrite a prepared graph name, on stderr, the
 * first operation that differs from the prepared one and how (a developer's aid: why a
 * replayed step is not HRX_UPDATE_UNCHANGED). */
static void debug_update(const hrx__op *a, const hrx__op *b, size_t at, size_t count) {
  static atomic_int left = -1;
  int l = atomic_load(&left);
  if (l < 0) {
    const char *e = getenv("HRX_DEBUG_UPDATE");
    l = e ? atoi(e) : 0;
    atomic_store(&left, l);
  }
  if (l <= 0 || atomic_fetch_sub(&left, 1) <= 0) return;
  const char *why = a->kind != b->kind ? "kind" : a->kernel != b->kernel ? "kernel"
                    : a->nuses != b->nuses ? "number of uses" : "parameters";
  int use = -1;
  for (size_t i = 0; i < a->nuses && i < b->nuses && use < 0; i++)
    if (!views_equal(a->uses[i].view, b->uses[i].view) || a->uses[i].access != b->uses[i].access)
      use = (int)i, why = "a use's view";
  fprintf(stderr, "hrx: update: op %zu of %zu (kind %d) differs: %s", at, count, (int)a->kind, why);
  if (use >= 0)
    fprintf(stderr, " (use %d: buffer %p+%zu len %zu, was %p+%zu len %zu)", use,
            (void *)a->uses[use].view.buffer, a->uses[use].view.offset, a->uses[use].view.length,
            (void *)b->uses[use].view.buffer, b->uses[use].view.offset, b->uses[use].view.length);
  else if (a->params_size == b->params_size && a->params_size && memcmp(a->params, b->params, a->params_size))
    fprintf(stderr, " (params of %zu bytes)", a->params_size);
  fputc('\n', stderr);
}

HRX_API hrx_status hrx_prepared_update(hrx_prepared *prepared, hrx_graph *graph,
                                       uint32_t flags, hrx_update_mode *mode) {
  const char *call = "hrx_prepared_update";
  if (!prepared || !graph) return hrx__err(HRX_E_INVALID, "%s: prepared or graph is NULL", call);
  hrx_runtime *rt = prepared->rt;
  if (graph->rt != rt) return hrx__err(HRX_E_INVALID, "%s: graph belongs to another runtime", call);
  if (flags & ~(uint32_t)HRX_UPDATE_FORCE_REINSTANTIATE)
    return hrx__err(HRX_E_INVALID, "%s: unknown flags 0x%x", call, flags);
  if (graph->count == 0) return hrx__err(HRX_E_INVALID, "%s: cannot prepare an empty graph", call);
  hrx_status s = hrx__runtime_usable(rt, call);
  if (s != HRX_OK) return s;
  if (atomic_load(&prepared->quarantined))
    return hrx__err(HRX_E_DEVICE_LOST, "%s: graph quarantined after native failure", call);
  /* The same operations over the same views: nothing to rewrite, so runs in flight do not
   * matter (a replayed step usually gets the same buffers back from its allocator). */
  if (!(flags & HRX_UPDATE_FORCE_REINSTANTIATE) && graph->count == prepared->plan.nops) {
    size_t i = 0;
    while (i < graph->count && ops_identical(&graph->ops[i], &prepared->plan.ops[i])) i++;
    if (i < graph->count) debug_update(&graph->ops[i], &prepared->plan.ops[i], i, graph->count);
    if (i == graph->count) {
      hrx_graph_release(graph);
      if (mode) *mode = HRX_UPDATE_UNCHANGED;
      return HRX_OK;
    }
  }
  /* No run may be in flight or observed: the update rewrites what runs read. Marking every
   * slot occupied keeps submissions out while the update works without the lock. */
  hrx__lock(rt);
  for (uint32_t k = 0; k < prepared->nslots; k++) {
    hrx__slot *sl = &prepared->slots[k];
    pthread_mutex_lock(&sl->signal->lock);
    bool free_slot = !sl->occupied && sl->signal->done && atomic_load(&sl->signal->refs) == 1;
    pthread_mutex_unlock(&sl->signal->lock);
    if (!free_slot) {
      for (uint32_t j = 0; j < k; j++) prepared->slots[j].occupied = false;
      hrx__unlock(rt);
      return hrx__err(HRX_E_BUSY,
                      "%s: a run of the prepared graph is in flight or its completion is held",
                      call);
    }
    sl->occupied = true;
  }
  hrx__unlock(rt);

  uint32_t slots = prepared->nslots;
  hrx__plan fresh;
  s = hrx__plan_build(rt, graph->ops, graph->count, slots, call, &fresh);
  bool in_place = s == HRX_OK && !(flags & HRX_UPDATE_FORCE_REINSTANTIATE) &&
                  hrx__plan_same_topology(&prepared->plan, &fresh);
  if (s == HRX_OK) {
    if (in_place) {
      bool lost = false;
      s = update_in_place(rt, &prepared->plan, &fresh, call, &lost);
      /* Nothing can run the old executables safely any more: no later run may start them. */
      if (lost) atomic_store(&prepared->quarantined, 1);
    } else {
      s = hrx__plan_materialize(rt, &fresh, slots, call);
    }
  }
  if (s != HRX_OK) {
    /* A failed update in place has already given the executables back to the old plan. */
    char saved[HRX_MSG];
    snprintf(saved, sizeof saved, "%s", hrx_last_error());
    fresh.ops = NULL;
    size_t nops = graph->count;
    for (size_t i = 0; fresh.op_deps && i < nops; i++) hrx__free(fresh.op_deps[i]);
    hrx__free(fresh.op_deps);
    fresh.op_deps = NULL;
    fresh.nops = 0;
    hrx__plan_destroy(&fresh, slots);
    hrx__lock(rt);
    for (uint32_t k = 0; k < slots; k++) prepared->slots[k].occupied = false;
    hrx__unlock(rt);
    return hrx__err(s, "%s", saved);
  }
  hrx__plan old = prepared->plan;
  hrx__lock(rt);
  prepared->plan = fresh;
  for (uint32_t k = 0; k < slots; k++) prepared->slots[k].occupied = false;
  hrx__unlock(rt);
  hrx__plan_destroy(&old, slots);
  graph->ops = NULL;
  graph->count = graph->cap = 0;
  hrx_graph_release(graph);
  if (mode) *mode = in_place ? HRX_UPDATE_IN_PLACE : HRX_UPDATE_REINSTANTIATED;
  return HRX_OK;
}
