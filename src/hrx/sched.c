/* Submission, the scheduler (workers and lane watchers), failure propagation, completions. */
#include "hrx_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- run bookkeeping (all under rt->lock) ---- */

static hrx__region *region_of(hrx__run *run, size_t r) { return &run->prepared->plan.regions[r]; }

static void finalize_locked(hrx_runtime *rt, hrx__run *run) {
  if (run->prev) run->prev->next = run->next;
  else rt->head = run->next;
  if (run->next) run->next->prev = run->prev;
  else rt->tail = run->prev;
  run->next = run->prev = NULL;
  if (--rt->active == 0) pthread_cond_broadcast(&rt->idle);
  hrx_prepared *p = run->prepared;
  p->slots[run->slot].occupied = false;
  p->slots[run->slot].run = NULL;
  hrx_completion *sig = run->signal;
  sig->finished = true;
  sig->status = run->failure;
  snprintf(sig->message, sizeof sig->message, "%s", run->message);
  sig->run = NULL;
  for (size_t i = 0; i < p->plan.nuses; i++) {
    hrx_buffer *b = p->plan.uses[i].view.buffer;
    if (hrx__writes(p->plan.uses[i].access)) b->pending_writes--;
    else b->pending_reads--;
  }
  /* Later runs ordered after this one, or depending on it, no longer wait for it. */
  for (hrx__run *a = rt->head; a; a = a->next) {
    for (size_t r = 0; r < a->prepared->plan.nregions; r++) {
      hrx__ri *ri = &a->ri[r];
      size_t k = 0;
      for (size_t e = 0; e < ri->norder; e++)
        if (ri->order[e].run != run) ri->order[k++] = ri->order[e];
      ri->norder = k;
    }
    size_t k = 0;
    for (size_t i = 0; i < a->nproducers; i++)
      if (a->producers[i] != run) a->producers[k++] = a->producers[i];
    a->nproducers = k;
  }
  hrx_completion_retain(sig);
  run->grave_next = rt->graveyard;
  rt->graveyard = run;
  hrx__wake_locked(rt);
}

static bool has_producer(const hrx__run *a, const hrx__run *p) {
  for (size_t i = 0; i < a->nproducers; i++)
    if (a->producers[i] == p) return true;
  return false;
}

static bool run_active(hrx_runtime *rt, const hrx__run *run) {
  for (hrx__run *a = rt->head; a; a = a->next)
    if (a == run) return true;
  return false;
}

void hrx__run_fail_locked(hrx_runtime *rt, hrx__run *run, hrx_status status, const char *msg) {
  if (run->failure != HRX_OK) return;
  run->failure = status;
  snprintf(run->message, sizeof run->message, "%s", msg);
  for (size_t r = 0; r < run->prepared->plan.nregions; r++) {
    if (run->ri[r].state == HRX_RI_PENDING) {
      run->ri[r].state = HRX_RI_SKIPPED;
      run->remaining--;
    }
  }
  /* A failed or cancelled producer stops its dependents, overlapping or not. */
  char why[HRX_MSG];
  snprintf(why, sizeof why, "producer %s: %.400s",
           status == HRX_E_CANCELLED ? "cancelled" : "failed", msg);
  for (;;) {
    hrx__run *dep = NULL;
    for (hrx__run *a = rt->head; a && !dep; a = a->next)
      if (a != run && a->failure == HRX_OK && has_producer(a, run)) dep = a;
    if (!dep) break;
    hrx__run_fail_locked(rt, dep, HRX_E_CANCELLED, why);
  }
  if (run->remaining == 0 && run_active(rt, run)) finalize_locked(rt, run);
  hrx__wake_locked(rt);
}

/* Marks one region of a run finished; records writers and bytes on success. */
static void ri_finish_locked(hrx_runtime *rt, hrx__run *run, size_t r, hrx_status status,
                             const char *msg) {
  hrx__region *reg = region_of(run, r);
  run->ri[r].state = HRX_RI_DONE;
  run->remaining--;
  if (status == HRX_OK) {
    if (reg->copy_bytes) {
      atomic_fetch_add(&rt->counters.lane_bytes[reg->lane], reg->copy_bytes);
      atomic_fetch_add(&rt->counters.copied, reg->copy_bytes);
    }
    hrx_writer w = reg->kind == HRX_REG_HOST ? HRX_WRITER_HOST : HRX_WRITER_GPU;
    for (size_t u = 0; u < reg->nuses; u++)
      if (hrx__writes(reg->uses[u].access)) atomic_store(&reg->uses[u].view.buffer->last_writer, w);
  } else {
    atomic_fetch_add(&rt->counters.regions_failed, 1);
    hrx__run_fail_locked(rt, run, status, msg);
  }
  if (run->remaining == 0 && run_active(rt, run)) finalize_locked(rt, run);
  hrx__wake_locked(rt);
}

/* A native failure: the prepared graph is quarantined and the buffers the region writes are
 * poisoned; a failed scoped callback is kept alive with its bindings' memory. */
static void native_failure_locked(hrx_runtime *rt, hrx__run *run, size_t r, const char *msg) {
  hrx__region *reg = region_of(run, r);
  atomic_store(&run->prepared->quarantined, 1);
  for (size_t u = 0; u < reg->nuses; u++) {
    hrx_buffer *b = reg->uses[u].view.buffer;
    if (!hrx__writes(reg->uses[u].access) || b->poison) continue;
    char text[HRX_MSG];
    snprintf(text, sizeof text, "buffer poisoned by a failed native region: %.400s", msg);
    b->poison = hrx__calloc(strlen(text) + 1, 1);
    if (b->poison) memcpy(b->poison, text, strlen(text) + 1);
  }
  if (reg->kind == HRX_REG_SCOPED) {
    hrx__op *op = &run->prepared->plan.ops[reg->first];
    hrx__quarantine *q = hrx__calloc(1, sizeof *q);
    hrx__alloc **allocs = hrx__calloc(op->nviews, sizeof *allocs);
    if (q && allocs) {
      atomic_fetch_add(&op->callback->refs, 1);
      q->callback = op->callback;
      for (size_t i = 0; i < op->nviews; i++) {
        allocs[i] = op->views[i].buffer->alloc;
        atomic_fetch_add(&allocs[i]->refs, 1);
      }
      q->allocs = allocs;
      q->nallocs = op->nviews;
      q->next = rt->quarantine;
      rt->quarantine = q;
      atomic_fetch_add(&rt->counters.quarantined_callbacks, 1);
    } else {
      /* Without memory to record the quarantine, leaking keeps the same guarantee. */
      hrx__free(q);
      hrx__free(allocs);
      atomic_fetch_add(&op->callback->refs, 1);
      for (size_t i = 0; i < op->nviews; i++) atomic_fetch_add(&op->views[i].buffer->alloc->refs, 1);
    }
  }
}

/* ---- readiness ---- */

static bool host_like(hrx_runtime *rt, const hrx__region *reg) {
  return !hrx__gpu_engine(rt) || reg->kind == HRX_REG_SCOPED || reg->kind == HRX_REG_HOST;
}

static bool pred_ok(hrx__ri_state s, bool host) {
  return s == HRX_RI_DONE || s == HRX_RI_SKIPPED || (!host && s == HRX_RI_ISSUED);
}

static bool ready_locked(hrx_runtime *rt, hrx__run *run, size_t r) {
  hrx__region *reg = region_of(run, r);
  bool host = host_like(rt, reg);
  for (size_t d = 0; d < reg->ndeps; d++)
    if (!pred_ok(run->ri[reg->deps[d]].state, host)) return false;
  for (size_t e = 0; e < run->ri[r].norder; e++) {
    hrx__edge *ed = &run->ri[r].order[e];
    if (!pred_ok(ed->run->ri[ed->region].state, host)) return false;
  }
  for (size_t i = 0; i < run->nproducers; i++) {
    hrx__run *p = run->producers[i];
    for (size_t k = 0; k < p->prepared->plan.nregions; k++) {
      hrx__ri_state s = p->ri[k].state;
      if (s == HRX_RI_SKIPPED || !pred_ok(s, host)) return false;
    }
  }
  return true;
}

static bool find_ready_locked(hrx_runtime *rt, int queue, hrx__run **out_run, size_t *out_r) {
  for (hrx__run *run = rt->head; run; run = run->next) {
    if (run->failure != HRX_OK) continue;
    for (size_t r = 0; r < run->prepared->plan.nregions; r++) {
      if (run->ri[r].state != HRX_RI_PENDING || region_of(run, r)->queue != queue) continue;
      if (ready_locked(rt, run, r)) {
        *out_run = run;
        *out_r = r;
        return true;
      }
    }
  }
  return false;
}

void hrx__wake_locked(hrx_runtime *rt) {
  if (rt->shutdown) {
    for (int q = 0; q < HRX_QUEUES; q++) pthread_cond_broadcast(&rt->work[q]);
    for (int l = 0; l < 3; l++) pthread_cond_broadcast(&rt->watch[l]);
    return;
  }
  /* Only the workers with something to do are woken, so a submission costs one wake-up,
   * not one per thread. Finished runs waiting to be freed wake nobody: the thread that
   * finished them frees them when it unlocks (hrx__unlock), or before it sleeps (the worker
   * and watcher loops), so a wake-up would only contend for the lock. */
  for (int q = 0; q < HRX_QUEUES; q++) {
    hrx__run *run;
    size_t r;
    if (find_ready_locked(rt, q, &run, &r)) pthread_cond_signal(&rt->work[q]);
  }
}

/* ---- execution ---- */

typedef enum { EXEC_DONE, EXEC_ISSUED } exec_kind;

typedef struct exec_result {
  hrx_status status;
  bool native;  /* a native failure: quarantine and poison */
  bool copy;    /* a copy-stream failure: quarantine the lane's copy stream */
  bool sticky;  /* the CUDA context is unusable: fail the runtime */
  exec_kind kind;
  char message[HRX_MSG];
} exec_result;

static void result_fail(exec_result *res, hrx_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void result_fail(exec_result *res, hrx_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(res->message, sizeof res->message, fmt, ap);
  va_end(ap);
  res->status = s;
}

static void *host_address(hrx_view v) { return (char *)v.buffer->alloc->host + v.offset; }

static void run_host_native(hrx__run *run, hrx__region *reg, exec_result *res) {
  hrx__plan *p = &run->prepared->plan;
  for (size_t k = reg->first; k < reg->first + reg->count; k++) {
    hrx__op *op = &p->ops[k];
    if (op->kind == HRX_OP_FILL) {
      memset(host_address(op->dst), op->value, op->dst.length);
    } else if (op->kind == HRX_OP_COPY) {
      memcpy(host_address(op->dst), host_address(op->src), op->dst.length);
    } else if (op->kind == HRX_OP_CAPTURED) {
      /* Never recorded on the host engine (hrx_graph_captured refuses it); kept as a failure
       * rather than a call through a kernel it does not have. */
      result_fail(res, HRX_E_UNSUPPORTED, "captured operation %zu needs the CUDA engine", k);
      return;
    } else {
      void *ptrs[64];
      size_t lens[64];
      for (size_t i = 0; i < op->nviews; i++) {
        ptrs[i] = host_address(op->views[i]);
        lens[i] = op->views[i].length;
      }
      hrx_host_launch launch = {ptrs, lens, op->nviews, op->constants, op->nconstants,
                                {0}, {0}, op->params, op->params_size};
      memcpy(launch.grid, op->kernel->grid, sizeof launch.grid);
      memcpy(launch.block, op->kernel->block, sizeof launch.block);
      hrx_status s = op->kernel->host_fn(&launch, op->kernel->host_user);
      if (s != HRX_OK) {
        result_fail(res, HRX_E_DEVICE_LOST, "kernel of operation %zu failed with %s", k,
                    hrx_status_name(s));
        res->native = true;
        return;
      }
    }
  }
}

static void run_callback(hrx_runtime *rt, hrx__run *run, hrx__region *reg, exec_result *res) {
  hrx__op *op = &run->prepared->plan.ops[reg->first];
  hrx_callback_view views[64];
  hrx_callback_view *v = op->nviews <= 64 ? views : hrx__calloc(op->nviews, sizeof *v);
  if (!v) {
    result_fail(res, HRX_E_OUT_OF_MEMORY, "out of host memory for callback views");
    return;
  }
  for (size_t i = 0; i < op->nviews; i++) {
    bool gpu = op->callback->scoped && hrx__gpu_engine(rt);
    v[i].address = gpu ? (void *)(uintptr_t)(op->views[i].buffer->alloc->gpu + op->views[i].offset)
                       : host_address(op->views[i]);
    v[i].length = op->views[i].length;
  }
  hrx__callback *cb = op->callback;
  pthread_mutex_lock(&cb->lock);
  hrx_status s = cb->scoped ? cb->scoped_fn(v, op->nviews, cb->user)
                            : cb->host_fn(v, op->nviews, cb->user);
  pthread_mutex_unlock(&cb->lock);
  if (v != views) hrx__free(v);
  if (s != HRX_OK) {
    if (cb->scoped) {
      result_fail(res, HRX_E_DEVICE_LOST, "scoped callback failed with %s", hrx_status_name(s));
      res->native = true;
    } else {
      result_fail(res, HRX_E_CALLBACK, "host callback failed with %s", hrx_status_name(s));
    }
  }
}

#ifdef HRX_HAVE_CUDA
static cudaEvent_t event_of(hrx__run *run, size_t r) { return region_of(run, r)->events[run->slot]; }

static void cuda_fail(exec_result *res, cudaError_t e, const char *what) {
  result_fail(res, hrx__cuda_sticky(e) ? HRX_E_DEVICE_LOST : HRX_E_CUDA, "%s: %s (%s)", what,
              cudaGetErrorString(e), cudaGetErrorName(e));
  res->sticky = hrx__cuda_sticky(e);
}

static void issue_cuda(hrx_runtime *rt, hrx__run *run, size_t r, cudaEvent_t *waits,
                       size_t nwaits, exec_result *res) {
  hrx__region *reg = region_of(run, r);
  hrx__plan *p = &run->prepared->plan;
  if (reg->kind == HRX_REG_NATIVE) {
    pthread_mutex_lock(&reg->lock);
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < nwaits && e == cudaSuccess; i++)
      e = cudaStreamWaitEvent(reg->stream, waits[i], 0);
    if (e == cudaSuccess) e = cudaGraphLaunch(reg->exec, reg->stream);
    if (e == cudaSuccess) e = cudaEventRecord(reg->events[run->slot], reg->stream);
    pthread_mutex_unlock(&reg->lock);
    if (e != cudaSuccess) {
      cuda_fail(res, e, "native region launch");
      res->native = true;
      return;
    }
  } else {
    pthread_mutex_lock(&rt->copy_lock[reg->lane]);
    cudaStream_t st = rt->copy_stream[reg->lane];
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < nwaits && e == cudaSuccess; i++) e = cudaStreamWaitEvent(st, waits[i], 0);
    for (size_t k = reg->first; k < reg->first + reg->count && e == cudaSuccess; k++) {
      hrx__op *op = &p->ops[k];
      e = cudaMemcpyAsync((void *)(uintptr_t)(op->dst.buffer->alloc->gpu + op->dst.offset),
                          (const void *)(uintptr_t)(op->src.buffer->alloc->gpu + op->src.offset),
                          op->dst.length, cudaMemcpyDefault, st);
    }
    if (e == cudaSuccess) e = cudaEventRecord(reg->events[run->slot], st);
    pthread_mutex_unlock(&rt->copy_lock[reg->lane]);
    if (e != cudaSuccess) {
      cuda_fail(res, e, "copy region");
      res->copy = true;
      return;
    }
  }
  res->kind = EXEC_ISSUED;
  atomic_fetch_add(&rt->counters.event_waits, nwaits);
}

/* Events a GPU region waits for: every predecessor that is issued but not yet seen done. */
static size_t gather_waits_locked(hrx__run *run, size_t r, cudaEvent_t **out) {
  hrx__region *reg = region_of(run, r);
  size_t n = reg->ndeps + run->ri[r].norder;
  for (size_t i = 0; i < run->nproducers; i++) n += run->producers[i]->prepared->plan.nregions;
  cudaEvent_t *ev = hrx__calloc(n, sizeof *ev);
  if (!ev) {
    *out = NULL;
    return 0;
  }
  size_t k = 0;
  for (size_t d = 0; d < reg->ndeps; d++)
    if (run->ri[reg->deps[d]].state == HRX_RI_ISSUED) ev[k++] = event_of(run, reg->deps[d]);
  for (size_t e = 0; e < run->ri[r].norder; e++) {
    hrx__edge *ed = &run->ri[r].order[e];
    if (ed->run->ri[ed->region].state == HRX_RI_ISSUED) ev[k++] = event_of(ed->run, ed->region);
  }
  for (size_t i = 0; i < run->nproducers; i++) {
    hrx__run *p = run->producers[i];
    for (size_t j = 0; j < p->prepared->plan.nregions; j++)
      if (p->ri[j].state == HRX_RI_ISSUED) ev[k++] = event_of(p, j);
  }
  *out = ev;
  return k;
}
#endif

/* Applies the consequences of a region's result (under the lock). */
static void settle_locked(hrx_runtime *rt, hrx__run *run, size_t r, exec_result *res) {
  hrx__region *reg = region_of(run, r);
  if (res->status == HRX_OK && res->kind == EXEC_ISSUED) {
    run->ri[r].state = HRX_RI_ISSUED;
    hrx__watch *w = hrx__calloc(1, sizeof *w);
    if (w) {
      w->run = run;
      w->region = r;
      if (rt->watch_tail[reg->lane]) rt->watch_tail[reg->lane]->next = w;
      else rt->watch_head[reg->lane] = w;
      rt->watch_tail[reg->lane] = w;
      atomic_fetch_add_explicit(&rt->watch_len[reg->lane], 1, memory_order_relaxed);
      pthread_cond_signal(&rt->watch[reg->lane]);
      hrx__wake_locked(rt); /* GPU regions that wait for this one can be issued now */
      return;
    }
    /* Without a watch entry nobody would observe the region: treat it as lost. */
    result_fail(res, HRX_E_OUT_OF_MEMORY, "out of host memory to watch an issued region");
    res->native = true;
  }
  if (res->status != HRX_OK) {
    if (res->sticky) hrx__runtime_fail_locked(rt, res->message);
    if (res->native) native_failure_locked(rt, run, r, res->message);
    if (res->copy) rt->copy_healthy[reg->lane] = false;
  }
  ri_finish_locked(rt, run, r, res->status, res->message);
}

static void execute(hrx_runtime *rt, hrx__run *run, size_t r, int fault, void *waits,
                    size_t nwaits, exec_result *res) {
  hrx__region *reg = region_of(run, r);
  (void)waits;
  (void)nwaits;
  if (fault == HRX_FAULT_NEXT_REGION) {
    result_fail(res, HRX_E_DEVICE_LOST, "injected region failure");
    if (reg->kind == HRX_REG_COPY) res->copy = true;
    else if (reg->kind != HRX_REG_HOST) res->native = true;
    else res->status = HRX_E_CALLBACK;
    return;
  }
  switch (reg->kind) {
  case HRX_REG_SCOPED:
  case HRX_REG_HOST:
    run_callback(rt, run, reg, res);
    return;
  case HRX_REG_NATIVE:
  case HRX_REG_COPY:
#ifdef HRX_HAVE_CUDA
    if (hrx__gpu_engine(rt)) {
      issue_cuda(rt, run, r, waits, nwaits, res);
      return;
    }
#endif
    if (reg->kind == HRX_REG_COPY) {
      pthread_mutex_lock(&rt->copy_lock[reg->lane]);
      run_host_native(run, reg, res);
      pthread_mutex_unlock(&rt->copy_lock[reg->lane]);
    } else {
      pthread_mutex_lock(&reg->lock);
      run_host_native(run, reg, res);
      pthread_mutex_unlock(&reg->lock);
    }
    return;
  }
}

/* Runs (or issues) region r of `run`, marked ready and picked by the caller (under the lock,
 * which it drops around the work). `fault` is the injected fault it consumed, or -1. */
static void run_region_locked(hrx_runtime *rt, hrx__run *run, size_t r, int fault) {
  run->ri[r].state = HRX_RI_RUNNING;
  hrx__region *reg = region_of(run, r);
  exec_result res;
  memset(&res, 0, sizeof res);
  if (fault == HRX_FAULT_RUNTIME) {
    hrx__runtime_fail_locked(rt, "injected runtime fault");
    ri_finish_locked(rt, run, r, HRX_E_DEVICE_LOST, rt->fail_message);
    return;
  }
  /* Before a region runs, any poisoned buffer among its uses fails it. */
  for (size_t u = 0; u < reg->nuses && res.status == HRX_OK; u++)
    if (reg->uses[u].view.buffer->poison)
      result_fail(&res, HRX_E_DEVICE_LOST, "%s", reg->uses[u].view.buffer->poison);
  if (res.status == HRX_OK && reg->kind == HRX_REG_COPY && !rt->copy_healthy[reg->lane])
    result_fail(&res, HRX_E_DEVICE_LOST, "copy stream is quarantined");
  if (res.status != HRX_OK) {
    ri_finish_locked(rt, run, r, res.status, res.message);
    return;
  }
  void *waits = NULL;
  size_t nwaits = 0;
#ifdef HRX_HAVE_CUDA
  if (hrx__gpu_engine(rt) && !host_like(rt, reg)) {
    cudaEvent_t *ev = NULL;
    nwaits = gather_waits_locked(run, r, &ev);
    waits = ev;
    if (!ev) {
      result_fail(&res, HRX_E_OUT_OF_MEMORY, "out of host memory for region waits");
      ri_finish_locked(rt, run, r, res.status, res.message);
      return;
    }
  }
#endif
  hrx__unlock(rt);
  execute(rt, run, r, fault, waits, nwaits, &res);
  hrx__free(waits);
  hrx__lock(rt);
  settle_locked(rt, run, r, &res);
}

void *hrx__worker_main(void *arg) {
  struct hrx__targ *t = arg;
  hrx_runtime *rt = t->rt;
  int queue = t->index;
  hrx__thread_runtime = t->token;
#ifdef HRX_HAVE_CUDA
  if (hrx__gpu_engine(rt)) cudaSetDevice(rt->device);
#endif
  hrx__lock(rt);
  for (;;) {
    if (rt->shutdown) break;
    hrx__run *run;
    size_t r;
    if (rt->graveyard) {
      /* Free finished runs and notify their completions before sleeping. */
      hrx__unlock(rt);
      hrx__lock(rt);
      continue;
    }
    if (!find_ready_locked(rt, queue, &run, &r)) {
      pthread_cond_wait(&rt->work[queue], &rt->lock);
      continue;
    }
    int fault = -1;
    if (rt->fault_count > 0) {
      fault = rt->faults[rt->fault_head];
      rt->fault_head = (rt->fault_head + 1) % HRX_MAX_FAULTS;
      rt->fault_count--;
    }
    run_region_locked(rt, run, r, fault);
  }
  hrx__unlock(rt);
  return NULL;
}

#ifdef HRX_HAVE_CUDA
/* A new run's GPU regions that are ready at once are issued by the submitting thread itself
 * (under the lock, dropped around the launch): a launch then costs no hand-over to a worker,
 * which is most of a small step's latency. Regions that must wait, host-like regions, and any
 * region while injected faults are armed (they go to the regions in the order workers start
 * them) are left to the workers. */
static void issue_inline_locked(hrx_runtime *rt, hrx__run *run) {
  int prev = -1;
  bool switched = false;
  for (size_t r = 0; r < run->prepared->plan.nregions; r++) {
    if (rt->failed || rt->shutdown || rt->fault_count > 0 || run->failure != HRX_OK) break;
    hrx__region *reg = region_of(run, r);
    if (run->ri[r].state != HRX_RI_PENDING || host_like(rt, reg)) continue;
    if (!ready_locked(rt, run, r)) continue;
    if (!switched) {
      /* The caller's thread may use another device: issue on ours, then give it back. */
      if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
      if (prev != rt->device && cudaSetDevice(rt->device) != cudaSuccess) {
        cudaGetLastError();
        return;
      }
      switched = true;
    }
    run_region_locked(rt, run, r, -1);
  }
  if (switched && prev >= 0 && prev != rt->device) cudaSetDevice(prev);
}
#endif

#ifdef HRX_HAVE_CUDA
/* Settles the head of `lane`'s watch list, whose event reported `e` (under the lock, and only
 * if the lane's count still equals `gen`, the one read with that head: else another thread
 * settled it meanwhile). */
static void settle_head_locked(hrx_runtime *rt, int lane, uint64_t gen, cudaError_t e) {
  hrx__watch *w = rt->watch_head[lane];
  if (!w || atomic_load(&rt->watch_gen[lane]) != gen || atomic_load(&rt->watch_busy[lane])) return;
  atomic_fetch_add(&rt->watch_gen[lane], 1);
  atomic_fetch_sub_explicit(&rt->watch_len[lane], 1, memory_order_relaxed);
  rt->watch_head[lane] = w->next;
  if (!w->next) rt->watch_tail[lane] = NULL;
  exec_result res;
  memset(&res, 0, sizeof res);
  if (e != cudaSuccess) {
    hrx__region *reg = region_of(w->run, w->region);
    cuda_fail(&res, e, reg->kind == HRX_REG_COPY ? "copy region" : "native region");
    if (reg->kind == HRX_REG_COPY) res.copy = true;
    else res.native = true;
  }
  settle_locked(rt, w->run, w->region, &res);
  hrx__free(w);
}

/* A waiter's help to the watchers: it follows one watched GPU region (the head of a lane
 * whose watcher is not already waiting for it), polls its event outside the lock and settles
 * it once finished, so that a short run's completion is observed by the thread that waits
 * for it rather than after a sleeping watcher wakes (a wake-up can cost more than the run).
 * The lock is taken only to pick a head and to settle it; the prepared graph that owns the
 * event is retained meanwhile. */
typedef struct wait_help {
  hrx_runtime *rt;
  hrx_prepared *held; /* NULL: no head followed */
  cudaEvent_t ev;
  uint64_t gen;
  int lane;
} wait_help;

static void help_drop(wait_help *h) {
  hrx_prepared_release(h->held);
  h->held = NULL;
}

static void help_step(wait_help *h) {
  hrx_runtime *rt = h->rt;
  if (h->held) {
    if (atomic_load(&rt->watch_busy[h->lane]) || atomic_load(&rt->watch_gen[h->lane]) != h->gen) {
      help_drop(h); /* the watcher has it, or it is settled */
      return;
    }
    cudaError_t e = cudaEventQuery(h->ev);
    if (e == cudaErrorNotReady) return;
    hrx__lock(rt);
    settle_head_locked(rt, h->lane, h->gen, e);
    hrx__unlock(rt);
    help_drop(h);
    return;
  }
  int lane = 0;
  while (lane < 3 && (!atomic_load_explicit(&rt->watch_len[lane], memory_order_relaxed) ||
                      atomic_load(&rt->watch_busy[lane])))
    lane++;
  if (lane == 3) return;
  hrx__lock(rt);
  hrx__watch *w = rt->watch_head[lane];
  if (w && !rt->failed && !atomic_load(&rt->watch_busy[lane])) {
    h->lane = lane;
    h->gen = atomic_load(&rt->watch_gen[lane]);
    h->held = hrx_prepared_retain(w->run->prepared);
    h->ev = event_of(w->run, w->region);
  }
  hrx__unlock(rt);
}
#endif

#ifdef HRX_HAVE_CUDA
/* How long a lane's watcher stays awake after its lane empties (HRX_WATCH_SPIN_US, default
 * 0: it sleeps at once; measured on the H200, 50 us of spin made every short round trip
 * slower, 10 -> 14 us for one operation, as the spinning watcher and the helping waiter then
 * contend for the driver). Read once. */
static uint64_t watch_spin_ns(void) {
  static atomic_llong ns = -1;
  long long v = atomic_load_explicit(&ns, memory_order_relaxed);
  if (v < 0) {
    const char *e = getenv("HRX_WATCH_SPIN_US");
    long us = e && *e ? strtol(e, NULL, 10) : 0;
    v = us < 0 ? 0 : us > 10000 ? 10000000ll : (long long)us * 1000;
    atomic_store_explicit(&ns, v, memory_order_relaxed);
  }
  return (uint64_t)v;
}

/* Polls (without the lock) until `lane` has a watch entry or the spin time has passed. */
static void spin_for_watch(hrx_runtime *rt, int lane) {
  uint64_t limit = watch_spin_ns();
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (unsigned i = 0;; i++) {
    if (atomic_load_explicit(&rt->watch_len[lane], memory_order_relaxed)) return;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      uint64_t ns = (uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t.tv_nsec -
                    (uint64_t)t0.tv_nsec;
      if (ns >= limit) return;
    }
  }
}

#endif

void *hrx__watcher_main(void *arg) {
  struct hrx__targ *t = arg;
  hrx_runtime *rt = t->rt;
#ifdef HRX_HAVE_CUDA
  int lane = t->index - HRX_QUEUES;
  bool spun = false; /* spun since the lane last emptied */
  cudaSetDevice(rt->device);
  hrx__lock(rt);
  for (;;) {
    if (rt->graveyard) {
      hrx__unlock(rt);
      hrx__lock(rt);
      continue;
    }
    hrx__watch *w = rt->watch_head[lane];
    if (!w) {
      if (rt->shutdown) break;
      /* Awake a while before sleeping: the next short run's region then needs no wake-up
       * (a futex call on the submitting thread, and the sleeper's latency). */
      if (watch_spin_ns() && !spun) {
        spun = true;
        hrx__unlock(rt);
        spin_for_watch(rt, lane);
        hrx__lock(rt);
        continue;
      }
      spun = false;
      pthread_cond_wait(&rt->watch[lane], &rt->lock);
      continue;
    }
    spun = false;
    /* While this thread waits for the head's event, no helping waiter settles it (busy). */
    uint64_t gen = atomic_load(&rt->watch_gen[lane]);
    cudaEvent_t ev = event_of(w->run, w->region);
    atomic_store(&rt->watch_busy[lane], true);
    hrx__unlock(rt);
    cudaError_t e = cudaEventSynchronize(ev);
    hrx__lock(rt);
    atomic_store(&rt->watch_busy[lane], false);
    settle_head_locked(rt, lane, gen, e);
  }
  hrx__unlock(rt);
#else
  (void)rt;
#endif
  return NULL;
}

/* ---- submission ---- */

static hrx_status submit_checks_locked(hrx_prepared *p, hrx_completion *const *deps, size_t ndeps,
                                       const char *call, uint32_t *slot_out) {
  hrx_runtime *rt = p->rt;
  if (rt->failed) return hrx__err(HRX_E_DEVICE_LOST, "%s: %s", call, rt->fail_message);
  if (atomic_load(&p->quarantined))
    return hrx__err(HRX_E_DEVICE_LOST, "%s: graph quarantined after native failure", call);
  for (size_t i = 0; i < p->plan.nuses; i++)
    if (p->plan.uses[i].view.buffer->poison)
      return hrx__err(HRX_E_DEVICE_LOST, "%s: %s", call, p->plan.uses[i].view.buffer->poison);
  for (size_t i = 0; i < ndeps; i++) {
    hrx_completion *d = deps[i];
    if (!d) return hrx__err(HRX_E_INVALID, "%s: dependency %zu is NULL", call, i);
    if (d->token == rt->token) continue;
    pthread_mutex_lock(&d->token->lock);
    int alive = d->token->alive;
    pthread_mutex_unlock(&d->token->lock);
    if (alive) return hrx__err(HRX_E_INVALID, "%s: completion belongs to another runtime", call);
    pthread_mutex_lock(&d->lock);
    bool done = d->done;
    pthread_mutex_unlock(&d->lock);
    if (!done) return hrx__err(HRX_E_INVALID, "%s: orphaned incomplete producer", call);
  }
  if (rt->active >= rt->options.capacity)
    return hrx__err(HRX_E_BUSY, "%s: runtime submission capacity exhausted", call);
  for (size_t i = 0; i < p->plan.nuses; i++) {
    hrx_buffer *b = p->plan.uses[i].view.buffer;
    bool w = hrx__writes(p->plan.uses[i].access);
    if ((w && b->map_read + b->map_write > 0) || (!w && b->map_write > 0))
      return hrx__err(HRX_E_BUSY, "%s: a buffer it %s has a live host mapping%s", call,
                      w ? "writes" : "reads", w ? "" : " for writing");
  }
  for (uint32_t k = 0; k < p->nslots; k++) {
    hrx__slot *sl = &p->slots[k];
    if (sl->occupied || atomic_load(&sl->signal->refs) != 1) continue;
    pthread_mutex_lock(&sl->signal->lock);
    bool done = sl->signal->done;
    pthread_mutex_unlock(&sl->signal->lock);
    if (done) {
      *slot_out = k;
      return HRX_OK;
    }
  }
  return hrx__err(HRX_E_BUSY,
                  "%s: prepared run slots are occupied; drop completed observers or reserve "
                  "more slots",
                  call);
}

static bool add_edge(hrx__ri *ri, size_t *cap, hrx__run *run, size_t region) {
  if (ri->norder == *cap) {
    size_t c = *cap ? *cap * 2 : 4;
    hrx__edge *e = hrx__realloc(ri->order, c * sizeof *e);
    if (!e) return false;
    ri->order = e;
    *cap = c;
  }
  ri->order[ri->norder++] = (hrx__edge){run, region};
  return true;
}

static hrx_status submit(hrx_prepared *p, hrx_completion *const *deps, size_t ndeps,
                         uint32_t flags, hrx_completion **out, const char *call) {
  if (!p || !out || (ndeps && !deps))
    return hrx__err(HRX_E_INVALID, "%s: prepared, deps or out is NULL", call);
  hrx_runtime *rt = p->rt;
  size_t nreg = p->plan.nregions;
  hrx__run *run = hrx__calloc(1, sizeof *run);
  hrx__ri *ri = hrx__calloc(nreg, sizeof *ri);
  hrx__run **producers = hrx__calloc(ndeps, sizeof *producers);
  if (!run || !ri || !producers) {
    hrx__free(run);
    hrx__free(ri);
    hrx__free(producers);
    return hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
  }
  run->ri = ri;
  run->producers = producers;
  hrx__lock(rt);
  uint32_t slot = 0;
  hrx_status s = submit_checks_locked(p, deps, ndeps, call, &slot);
  /* Order after earlier unfinished regions whose accesses conflict (any graph, any slot). */
  for (size_t r = 0; r < nreg && s == HRX_OK; r++) {
    size_t cap = 0;
    hrx__region *reg = &p->plan.regions[r];
    for (hrx__run *e = rt->head; e && s == HRX_OK; e = e->next)
      for (size_t k = 0; k < e->prepared->plan.nregions && s == HRX_OK; k++) {
        if (e->ri[k].state == HRX_RI_DONE || e->ri[k].state == HRX_RI_SKIPPED) continue;
        hrx__region *er = region_of(e, k);
        if (hrx__uses_conflict(er->uses, er->nuses, reg->uses, reg->nuses) &&
            !add_edge(&ri[r], &cap, e, k))
          s = hrx__err(HRX_E_OUT_OF_MEMORY, "%s: out of host memory", call);
      }
  }
  if (s != HRX_OK) {
    hrx__unlock(rt);
    for (size_t r = 0; r < nreg; r++) hrx__free(ri[r].order);
    hrx__free(ri);
    hrx__free(producers);
    hrx__free(run);
    return s;
  }
  char cancel[HRX_MSG] = "";
  for (size_t i = 0; i < ndeps; i++) {
    hrx_completion *d = deps[i];
    hrx_status ds;
    const char *dm;
    if (d->token == rt->token) {
      if (!d->finished) {
        bool seen = false;
        for (size_t j = 0; j < run->nproducers; j++) seen |= run->producers[j] == d->run;
        if (!seen && d->run) run->producers[run->nproducers++] = d->run;
        continue;
      }
      ds = d->status;
      dm = d->message;
    } else {
      ds = d->status; /* complete (checked), so frozen */
      dm = d->message;
    }
    if (ds != HRX_OK && !cancel[0])
      snprintf(cancel, sizeof cancel, "producer %s: %.400s",
               ds == HRX_E_CANCELLED ? "cancelled" : "failed", dm);
  }
  hrx__slot *sl = &p->slots[slot];
  hrx_completion *sig = sl->signal;
  pthread_mutex_lock(&sig->lock);
  sig->done = false;
  atomic_store_explicit(&sig->done_hint, 0, memory_order_relaxed);
  pthread_mutex_unlock(&sig->lock);
  sig->finished = false;
  sig->status = HRX_OK;
  sig->message[0] = 0;
  sig->run = run;
  sl->occupied = true;
  sl->run = run;
  run->prepared = hrx_prepared_retain(p);
  run->slot = slot;
  run->signal = sig;
  run->remaining = nreg;
  run->seq = ++rt->seq;
  for (size_t i = 0; i < p->plan.nuses; i++) {
    hrx_buffer *b = p->plan.uses[i].view.buffer;
    if (hrx__writes(p->plan.uses[i].access)) b->pending_writes++;
    else b->pending_reads++;
  }
  run->prev = rt->tail;
  if (rt->tail) rt->tail->next = run;
  else rt->head = run;
  rt->tail = run;
  rt->active++;
  atomic_fetch_add(&rt->counters.submissions, 1);
  *out = hrx_completion_retain(sig);
  if (cancel[0]) hrx__run_fail_locked(rt, run, HRX_E_CANCELLED, cancel);
  /* The completion reference is taken: the run may finish (and be freed) while the lock is
   * dropped around an inline launch, and `sig` stays valid for the caller. */
#ifdef HRX_HAVE_CUDA
  if (hrx__gpu_engine(rt) && !cancel[0] && !(flags & HRX_SUBMIT_DEFERRED) &&
      hrx__thread_runtime != rt->token)
    issue_inline_locked(rt, run);
#else
  (void)flags; /* the host engine runs every region on its workers */
#endif
  hrx__wake_locked(rt);
  hrx__unlock(rt);
  return HRX_OK;
}

HRX_API hrx_status hrx_submit(hrx_prepared *prepared, hrx_completion **out) {
  return submit(prepared, NULL, 0, 0, out, "hrx_submit");
}

HRX_API hrx_status hrx_submit_after(hrx_prepared *prepared, hrx_completion *const *deps,
                                    size_t dep_count, hrx_completion **out) {
  return submit(prepared, deps, dep_count, 0, out, "hrx_submit_after");
}

HRX_API hrx_status hrx_submit_after_ex(hrx_prepared *prepared, hrx_completion *const *deps,
                                       size_t dep_count, uint32_t flags, hrx_completion **out) {
  if (flags & ~(uint32_t)HRX_SUBMIT_DEFERRED)
    return hrx__err(HRX_E_INVALID, "hrx_submit_after_ex: unknown flags 0x%x", flags);
  return submit(prepared, deps, dep_count, flags, out, "hrx_submit_after_ex");
}

/* ---- completions ---- */

HRX_API hrx_completion *hrx_completion_retain(hrx_completion *completion) {
  if (completion) atomic_fetch_add(&completion->refs, 1);
  return completion;
}

HRX_API void hrx_completion_release(hrx_completion *completion) {
  if (!completion || atomic_fetch_sub(&completion->refs, 1) != 1) return;
  pthread_cond_destroy(&completion->cond);
  pthread_mutex_destroy(&completion->lock);
  hrx__token_release(completion->token);
  hrx__free(completion);
}

static hrx_status final_status(hrx_completion *c, const char *call) {
  if (c->status == HRX_OK) return HRX_OK;
  return hrx__err(c->status, "%s: %s", call, c->message);
}

/* The runtime of a completion, retained, while it still lives (NULL once it is gone: its
 * run has then long finished). */
static hrx_runtime *completion_runtime(hrx_completion *c) {
  hrx__token *t = c->token;
  /* A reference only while the runtime still has one: a count already at zero means its
   * teardown has begun. */
  pthread_mutex_lock(&t->lock);
  hrx_runtime *rt = NULL;
  if (t->alive) {
    int n = atomic_load(&t->rt->refs);
    while (n > 0 && !atomic_compare_exchange_weak(&t->rt->refs, &n, n + 1)) {
    }
    if (n > 0) rt = t->rt;
  }
  pthread_mutex_unlock(&t->lock);
  return rt;
}

#ifdef HRX_HAVE_CUDA
/* Whether waiters help the watchers (HRX_WAIT_HELP=0 turns it off: a diagnostic, to measure
 * what the help saves). Read once. */
static bool wait_help_enabled(void) {
  static atomic_int on = -1;
  int v = atomic_load_explicit(&on, memory_order_relaxed);
  if (v < 0) {
    const char *e = getenv("HRX_WAIT_HELP");
    v = !(e && e[0] == '0');
    atomic_store_explicit(&on, v, memory_order_relaxed);
  }
  return v != 0;
}

#endif

/* Busy-waits for the completion's done hint for at most HRX_SPIN_NS (or the timeout). On the
 * CUDA engine the waiter meanwhile observes finished GPU regions itself (help_step). */
#define HRX_SPIN_NS 100000ull
static void spin_until_done(hrx_completion *c, uint64_t timeout_ns) {
  uint64_t limit = timeout_ns < HRX_SPIN_NS ? timeout_ns : HRX_SPIN_NS;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
#ifdef HRX_HAVE_CUDA
  wait_help h = {wait_help_enabled() ? completion_runtime(c) : NULL, NULL, NULL, 0, 0};
  if (h.rt && !hrx__gpu_engine(h.rt)) {
    hrx_runtime_release(h.rt);
    h.rt = NULL;
  }
#endif
  for (unsigned i = 0;; i++) {
    if (atomic_load_explicit(&c->done_hint, memory_order_acquire)) break;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
#ifdef HRX_HAVE_CUDA
    /* Every ~0.5 us at first (a short run's latency), every ~4 us after the first 1024
     * iterations (a longer run's watcher is waiting for it anyway). */
    if (h.rt && (i & (i < 1024 ? 15 : 127)) == 15) help_step(&h);
#endif
    if ((i & 63) == 63) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      uint64_t ns = (uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t.tv_nsec -
                    (uint64_t)t0.tv_nsec;
      if (ns >= limit) break;
    }
  }
#ifdef HRX_HAVE_CUDA
  help_drop(&h);
  hrx_runtime_release(h.rt);
#endif
}

HRX_API hrx_status hrx_completion_wait(hrx_completion *completion, uint64_t timeout_ns) {
  const char *call = "hrx_completion_wait";
  if (!completion) return hrx__err(HRX_E_INVALID, "%s: completion is NULL", call);
  pthread_mutex_lock(&completion->lock);
  if (!completion->done && hrx__thread_runtime && hrx__thread_runtime == completion->token) {
    pthread_mutex_unlock(&completion->lock);
    return hrx__err(HRX_E_INVALID,
                    "%s: called from a callback of the same runtime while the run is unfinished "
                    "(it could wait for itself)",
                    call);
  }
  if (!completion->done) {
    /* Spin a little before sleeping: a short run finishes sooner than a sleeping thread is
     * woken (tens of microseconds), and a step that waits for its result is mostly short. */
    pthread_mutex_unlock(&completion->lock);
    spin_until_done(completion, timeout_ns);
    pthread_mutex_lock(&completion->lock);
  }
  if (timeout_ns == HRX_WAIT_FOREVER) {
    while (!completion->done) pthread_cond_wait(&completion->cond, &completion->lock);
  } else if (!completion->done) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + timeout_ns % 1000000000ull;
    ts.tv_sec += (time_t)(timeout_ns / 1000000000ull + ns / 1000000000ull);
    ts.tv_nsec = (long)(ns % 1000000000ull);
    while (!completion->done)
      if (pthread_cond_timedwait(&completion->cond, &completion->lock, &ts) == ETIMEDOUT) break;
  }
  bool done = completion->done;
  pthread_mutex_unlock(&completion->lock);
  if (!done) return hrx__err(HRX_E_TIMEOUT, "%s: the run has not finished", call);
  return final_status(completion, call);
}

HRX_API hrx_status hrx_completion_poll(hrx_completion *completion, int *done) {
  if (!completion || !done)
    return hrx__err(HRX_E_INVALID, "hrx_completion_poll: completion or done is NULL");
  pthread_mutex_lock(&completion->lock);
  *done = completion->done ? 1 : 0;
  pthread_mutex_unlock(&completion->lock);
  return HRX_OK;
}

HRX_API hrx_status hrx_completion_status(hrx_completion *completion) {
  const char *call = "hrx_completion_status";
  if (!completion) return hrx__err(HRX_E_INVALID, "%s: completion is NULL", call);
  pthread_mutex_lock(&completion->lock);
  bool done = completion->done;
  pthread_mutex_unlock(&completion->lock);
  if (!done) return hrx__err(HRX_E_NOT_READY, "%s: the run has not finished", call);
  return final_status(completion, call);
}

HRX_API hrx_status hrx_completion_cancel(hrx_completion *completion) {
  if (!completion) return hrx__err(HRX_E_INVALID, "hrx_completion_cancel: completion is NULL");
  hrx_runtime *rt = completion_runtime(completion);
  if (!rt) return HRX_OK; /* the runtime is gone, so the run has long finished */
  hrx__lock(rt);
  if (completion->run)
    hrx__run_fail_locked(rt, completion->run, HRX_E_CANCELLED, "cancelled by hrx_completion_cancel");
  hrx__unlock(rt);
  hrx_runtime_release(rt);
  return HRX_OK;
}
