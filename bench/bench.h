/* Timing helpers for the C benchmarks: the median of repeated runs, printed as
 * "BENCH <case> <seconds>" for bench/benchlib.py. */
#ifndef NUVEC_BENCH_H
#define NUVEC_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int bench_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Runs fn(ctx) `warmup` + `repeat` times and prints the median of the timed runs. */
static inline double bench_run(const char *name, void (*fn)(void *), void *ctx, int warmup,
                               int repeat) {
  double t[64];
  if (repeat > 64) repeat = 64;
  for (int i = 0; i < warmup; i++) fn(ctx);
  for (int i = 0; i < repeat; i++) {
    double s = bench_now();
    fn(ctx);
    t[i] = bench_now() - s;
  }
  qsort(t, (size_t)repeat, sizeof *t, bench_cmp);
  double med = t[repeat / 2];
  printf("BENCH %s %.9g\n", name, med);
  fflush(stdout);
  return med;
}

#endif
