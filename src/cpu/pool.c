/* A small fork-join pool: one job at a time, chunks claimed with an atomic counter. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <unistd.h>

#include "core/internal.h"
#include "cpu/pool.h"

extern void openblas_set_num_threads(int);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int nthreads = 1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;   /* guards the job fields */
static pthread_mutex_t submit = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static long generation;
static nv__range_fn job_fn;
static void *job_ctx;
static int64_t job_n, job_chunk;
static atomic_llong job_next;
static int busy_workers;
static bool job_active; /* workers join a job only while its submitter has not finished */
static _Thread_local bool in_pool;

static void run_chunks(nv__range_fn fn, void *ctx, int64_t n, int64_t chunk) {
  for (;;) {
    int64_t b = atomic_fetch_add(&job_next, chunk);
    if (b >= n) break;
    int64_t e = b + chunk < n ? b + chunk : n;
    fn(ctx, b, e);
  }
}

static void *worker(void *arg) {
  (void)arg;
  in_pool = true;
  long seen = 0;
  pthread_mutex_lock(&lock);
  for (;;) {
    while (generation == seen) pthread_cond_wait(&wake, &lock);
    seen = generation;
    if (!job_active) continue;
    nv__range_fn fn = job_fn;
    void *ctx = job_ctx;
    int64_t n = job_n, chunk = job_chunk;
    busy_workers++;
    pthread_mutex_unlock(&lock);
    run_chunks(fn, ctx, n, chunk);
    pthread_mutex_lock(&lock);
    if (--busy_workers == 0) pthread_cond_signal(&done_cv);
  }
  return NULL;
}

static void start(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  nthreads = (int)nv__env_long("NUVEC_NUM_THREADS", cores > 0 ? cores : 1);
  if (nthreads > 256) nthreads = 256;
  /* OpenBLAS computes on the calling thread; products are cut into slices over this pool
   * (linalg.c). Its own idle workers would spin on the cores the pool's kernels use. */
  openblas_set_num_threads(1);
  for (int i = 1; i < nthreads; i++) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, worker, NULL) != 0) {
      nthreads = i; /* run with the threads we have */
      pthread_attr_destroy(&attr);
      break;
    }
    pthread_attr_destroy(&attr);
  }
}

int nv__pool_threads(void) {
  pthread_once(&once, start);
  return nthreads;
}

int nv_get_num_threads(void) { return nv__pool_threads(); }

void nv__parallel_for(int64_t n, int64_t grain, nv__range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int t = nv__pool_threads();
  if (t == 1 || n <= grain || in_pool || pthread_mutex_trylock(&submit) != 0) {
    fn(ctx, 0, n);
    return;
  }
  int64_t chunks = n / grain;
  if (chunks > (int64_t)t * 4) chunks = (int64_t)t * 4;
  if (chunks < 1) chunks = 1;
  int64_t chunk = (n + chunks - 1) / chunks;
  pthread_mutex_lock(&lock);
  job_fn = fn;
  job_ctx = ctx;
  job_n = n;
  job_chunk = chunk;
  atomic_store(&job_next, 0);
  job_active = true;
  generation++;
  pthread_cond_broadcast(&wake);
  pthread_mutex_unlock(&lock);
  in_pool = true;
  run_chunks(fn, ctx, n, chunk);
  in_pool = false;
  pthread_mutex_lock(&lock);
  job_active = false;
  /* Workers that woke for this generation finish their chunks; the rest see no work left. */
  while (busy_workers > 0) pthread_cond_wait(&done_cv, &lock);
  pthread_mutex_unlock(&lock);
  pthread_mutex_unlock(&submit);
}
