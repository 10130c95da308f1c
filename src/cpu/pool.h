/* The process-wide CPU thread pool (DESIGN §6), started lazily. */
#ifndef NUVEC_CPU_POOL_H
#define NUVEC_CPU_POOL_H

#include <stdint.h>

typedef void (*nv__range_fn)(void *ctx, int64_t begin, int64_t end);

/* Runs fn over [0, n) split into chunks of at least `grain` items across the pool and the
 * calling thread; returns when every chunk is done. Runs inline when n is small, the pool has
 * one thread, or the caller is itself a pool task. */
void nv__parallel_for(int64_t n, int64_t grain, nv__range_fn fn, void *ctx);

/* Threads in the pool, the caller included. */
int nv__pool_threads(void);

#endif
