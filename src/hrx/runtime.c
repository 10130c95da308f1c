/* Runtime lifetime, health, counters, fault injection and the scheduler lock. */
#include "hrx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

HRX_API void hrx_runtime_options_init(hrx_runtime_options *options) {
  if (!options) return;
  memset(options, 0, sizeof *options);
  options->engine = HRX_ENGINE_HOST;
  options->device_index = 0;
  options->graph_slots = 2;
  options->capacity = 256;
}

void hrx__token_release(hrx__token *t) {
  if (t && atomic_fetch_sub(&t->refs, 1) == 1) {
    pthread_mutex_destroy(&t->lock);
    hrx__free(t);
  }
}

_Thread_local hrx__token *hrx__thread_runtime;

void hrx__lock(hrx_runtime *rt) { pthread_mutex_lock(&rt->lock); }

static void run_free(hrx__run *run) {
  for (size_t r = 0; r < run->prepared->plan.nregions; r++) hrx__free(run->ri[r].order);
  hrx__free(run->ri);
  hrx__free(run->producers);
  hrx_prepared_release(run->prepared);
  hrx__free(run);
}

void hrx__unlock(hrx_runtime *rt) {
  hrx__run *grave = rt->graveyard;
  rt->graveyard = NULL;
  pthread_mutex_unlock(&rt->lock);
  /* Each finished run drops its prepared graph before its completion becomes observable, so
   * a caller that waits and then releases everything holds the last references itself. */
  while (grave) {
    hrx__run *next = grave->grave_next;
    hrx_completion *signal = grave->signal;
    run_free(grave);
    /* The reference taken for this notification is dropped in the same critical section
     * that publishes `done`, so whoever sees the run done also sees the slot's true count of
     * observers (a slot is reusable only once that count is back to one). */
    pthread_mutex_lock(&signal->lock);
    signal->done = true;
    atomic_store_explicit(&signal->done_hint, 1, memory_order_release);
    pthread_cond_broadcast(&signal->cond);
    int n = atomic_load(&signal->refs);
    while (n > 1 && !atomic_compare_exchange_weak(&signal->refs, &n, n - 1)) {
    }
    pthread_mutex_unlock(&signal->lock);
    if (n == 1) hrx_completion_release(signal);
    grave = next;
  }
}

void hrx__runtime_fail_locked(hrx_runtime *rt, const char *message) {
  if (!rt->failed) {
    rt->failed = true;
    snprintf(rt->fail_message, sizeof rt->fail_message, "runtime failed: %s", message);
    atomic_store_explicit(&rt->failed_flag, 1, memory_order_release);
  }
  for (hrx__run *run = rt->head; run; run = run->next)
    hrx__run_fail_locked(rt, run, HRX_E_DEVICE_LOST, rt->fail_message);
  hrx__wake_locked(rt);
}

hrx_status hrx__runtime_usable(hrx_runtime *rt, const char *call) {
  /* The healthy case without the lock: every recorded operation asks. */
  if (!atomic_load_explicit(&rt->failed_flag, memory_order_acquire)) return HRX_OK;
  hrx_status s = HRX_OK;
  hrx__lock(rt);
  if (rt->failed) s = hrx__err(HRX_E_DEVICE_LOST, "%s: %s", call, rt->fail_message);
  hrx__unlock(rt);
  return s;
}

static hrx_status start_threads(hrx_runtime *rt) {
  size_t n = hrx__gpu_engine(rt) ? HRX_QUEUES + 3 : HRX_QUEUES;
  for (size_t i = 0; i < n; i++) {
    rt->targs[i].rt = rt;
    rt->targs[i].token = rt->token;
    rt->targs[i].index = (int)i;
    void *(*fn)(void *) = i < HRX_QUEUES ? hrx__worker_main : hrx__watcher_main;
    if (pthread_create(&rt->threads[i], NULL, fn, &rt->targs[i]) != 0)
      return hrx__err(HRX_E_OUT_OF_MEMORY, "hrx_runtime_create: cannot start worker thread");
    rt->nthreads = i + 1;
  }
  return HRX_OK;
}

static void stop_and_free(hrx_runtime *rt) {
  hrx__lock(rt);
  rt->shutdown = true;
  hrx__wake_locked(rt);
  hrx__unlock(rt);
  for (size_t i = 0; i < rt->nthreads; i++) pthread_join(rt->threads[i], NULL);
#ifdef HRX_HAVE_CUDA
  if (hrx__gpu_engine(rt)) hrx__cuda_runtime_fini(rt);
#endif
  /* Quarantined callbacks and allocations were kept alive because device work might still
   * touch them; the device is idle now (hrx__cuda_runtime_fini synchronized it). */
  while (rt->quarantine) {
    hrx__quarantine *q = rt->quarantine;
    rt->quarantine = q->next;
    hrx__callback_release(q->callback);
    for (size_t i = 0; i < q->nallocs; i++) hrx__alloc_release(q->allocs[i]);
    hrx__free(q->allocs);
    hrx__free(q);
  }
  for (int l = 0; l < 3; l++) pthread_mutex_destroy(&rt->copy_lock[l]);
  pthread_mutex_destroy(&rt->capture_lock);
  for (int q = 0; q < HRX_QUEUES; q++) pthread_cond_destroy(&rt->work[q]);
  for (int l = 0; l < 3; l++) pthread_cond_destroy(&rt->watch[l]);
  pthread_cond_destroy(&rt->idle);
  pthread_mutex_destroy(&rt->lock);
  hrx__free(rt);
}

static void *reaper_main(void *arg) {
  stop_and_free(arg);
  return NULL;
}

static void runtime_destroy(hrx_runtime *rt) {
  pthread_mutex_lock(&rt->token->lock);
  rt->token->alive = 0;
  rt->token->rt = NULL;
  pthread_mutex_unlock(&rt->token->lock);
  hrx__token_release(rt->token);
  rt->token = NULL;
  /* The last reference can drop on one of the runtime's own threads (a callback releasing a
   * prepared graph); that thread cannot join itself, so a detached thread finishes. */
  pthread_t self = pthread_self();
  for (size_t i = 0; i < rt->nthreads; i++) {
    if (pthread_equal(self, rt->threads[i])) {
      pthread_t reaper;
      pthread_attr_t attr;
      pthread_attr_init(&attr);
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      int rc = pthread_create(&reaper, &attr, reaper_main, rt);
      pthread_attr_destroy(&attr);
      /* Without a thread the runtime is leaked rather than torn down unsafely. */
      (void)rc;
      return;
    }
  }
  stop_and_free(rt);
}

HRX_API hrx_status hrx_runtime_create(const hrx_runtime_options *options, hrx_runtime **out) {
  hrx_runtime_options o;
  hrx_runtime_options_init(&o);
  if (options) o = *options;
  if (!out) return hrx__err(HRX_E_INVALID, "hrx_runtime_create: out is NULL");
  if (o.engine == HRX_ENGINE_NPU)
    return hrx__err(HRX_E_UNSUPPORTED,
                    "hrx_runtime_create: the NPU engine does not exist on this hardware");
  if (o.engine != HRX_ENGINE_HOST && o.engine != HRX_ENGINE_CUDA)
    return hrx__err(HRX_E_INVALID, "hrx_runtime_create: unknown engine %d", (int)o.engine);
  if (o.graph_slots < 1 || o.graph_slots > 1024)
    return hrx__err(HRX_E_INVALID, "hrx_runtime_create: graph_slots %u is not in 1..1024",
                    o.graph_slots);
  if (o.capacity < 1 || o.capacity > 65536)
    return hrx__err(HRX_E_INVALID, "hrx_runtime_create: capacity %u is not in 1..65536",
                    o.capacity);
  if (o.device_index < 0)
    return hrx__err(HRX_E_INVALID, "hrx_runtime_create: device_index %d is negative",
                    o.device_index);
#ifndef HRX_HAVE_CUDA
  if (o.engine == HRX_ENGINE_CUDA)
    return hrx__err(HRX_E_UNSUPPORTED, "hrx_runtime_create: hrx was built without CUDA");
#endif
  hrx_runtime *rt = hrx__calloc(1, sizeof *rt);
  hrx__token *token = hrx__calloc(1, sizeof *token);
  if (!rt || !token) {
    hrx__free(rt);
    hrx__free(token);
    return hrx__err(HRX_E_OUT_OF_MEMORY, "hrx_runtime_create: out of host memory");
  }
  atomic_init(&rt->refs, 1);
  rt->options = o;
  atomic_init(&token->refs, 1);
  pthread_mutex_init(&token->lock, NULL);
  token->alive = 1;
  token->rt = rt;
  rt->token = token;
  pthread_mutex_init(&rt->lock, NULL);
  for (int q = 0; q < HRX_QUEUES; q++) pthread_cond_init(&rt->work[q], NULL);
  for (int l = 0; l < 3; l++) pthread_cond_init(&rt->watch[l], NULL);
  pthread_cond_init(&rt->idle, NULL);
  for (int l = 0; l < 3; l++) {
    pthread_mutex_init(&rt->copy_lock[l], NULL);
    rt->copy_healthy[l] = true;
  }
  pthread_mutex_init(&rt->capture_lock, NULL);
  hrx_status s = HRX_OK;
#ifdef HRX_HAVE_CUDA
  if (o.engine == HRX_ENGINE_CUDA) s = hrx__cuda_runtime_init(rt);
#endif
  if (s == HRX_OK) s = start_threads(rt);
  if (s != HRX_OK) {
    char saved[HRX_MSG];
    snprintf(saved, sizeof saved, "%s", hrx_last_error());
    runtime_destroy(rt);
    return hrx__err(s, "%s", saved);
  }
  *out = rt;
  return HRX_OK;
}

HRX_API hrx_runtime *hrx_runtime_retain(hrx_runtime *runtime) {
  if (runtime) atomic_fetch_add(&runtime->refs, 1);
  return runtime;
}

HRX_API void hrx_runtime_release(hrx_runtime *runtime) {
  if (runtime && atomic_fetch_sub(&runtime->refs, 1) == 1) runtime_destroy(runtime);
}

HRX_API hrx_engine hrx_runtime_engine(const hrx_runtime *runtime) {
  return runtime ? runtime->options.engine : HRX_ENGINE_HOST;
}

HRX_API hrx_status hrx_runtime_health(hrx_runtime *runtime) {
  if (!runtime) return hrx__err(HRX_E_INVALID, "hrx_runtime_health: runtime is NULL");
  return hrx__runtime_usable(runtime, "hrx_runtime_health");
}

HRX_API hrx_status hrx_runtime_counters(hrx_runtime *runtime, hrx_counters *out) {
  if (!runtime || !out)
    return hrx__err(HRX_E_INVALID, "hrx_runtime_counters: runtime or out is NULL");
  hrx_counters c;
  memset(&c, 0, sizeof c);
  c.submissions = atomic_load(&runtime->counters.submissions);
  c.native_graphs_prepared = atomic_load(&runtime->counters.native_prepared);
  c.native_graphs_updated = atomic_load(&runtime->counters.native_updated);
  c.copy_streams_created = atomic_load(&runtime->counters.copy_streams);
  for (int l = 0; l < 3; l++) c.lane_copy_bytes[l] = atomic_load(&runtime->counters.lane_bytes[l]);
  c.copied_bytes = atomic_load(&runtime->counters.copied);
  c.regions_failed = atomic_load(&runtime->counters.regions_failed);
  c.quarantined_callbacks = atomic_load(&runtime->counters.quarantined_callbacks);
  c.gpu_event_waits = atomic_load(&runtime->counters.event_waits);
  *out = c;
  return HRX_OK;
}

HRX_API hrx_status hrx_runtime_inject_fault(hrx_runtime *runtime, hrx_fault fault) {
  if (!runtime) return hrx__err(HRX_E_INVALID, "hrx_runtime_inject_fault: runtime is NULL");
  if (fault != HRX_FAULT_NEXT_REGION && fault != HRX_FAULT_RUNTIME)
    return hrx__err(HRX_E_INVALID, "hrx_runtime_inject_fault: unknown fault %d", (int)fault);
  hrx_status s = HRX_OK;
  hrx__lock(runtime);
  if (runtime->fault_count == HRX_MAX_FAULTS) {
    s = hrx__err(HRX_E_BUSY, "hrx_runtime_inject_fault: %d faults are already armed",
                 HRX_MAX_FAULTS);
  } else {
    runtime->faults[(runtime->fault_head + runtime->fault_count) % HRX_MAX_FAULTS] = fault;
    runtime->fault_count++;
  }
  hrx__unlock(runtime);
  return s;
}

HRX_API hrx_status hrx_runtime_drain(hrx_runtime *runtime) {
  if (!runtime) return hrx__err(HRX_E_INVALID, "hrx_runtime_drain: runtime is NULL");
  if (hrx__thread_runtime == runtime->token)
    return hrx__err(HRX_E_INVALID,
                    "hrx_runtime_drain: called from a callback of the same runtime (it would "
                    "wait for itself)");
  hrx__lock(runtime);
  while (runtime->active > 0) pthread_cond_wait(&runtime->idle, &runtime->lock);
  hrx__unlock(runtime);
  return hrx__runtime_usable(runtime, "hrx_runtime_drain");
}
