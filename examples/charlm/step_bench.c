/* Times charlm's training step for bench/bench_suite.py: the model of the given shape on the
 * shipped corpus, three warm-up steps, then the median of ten steps (loss and gradients, clip,
 * AdamW update, all evaluated), printed as "BENCH charlm_step <seconds>".
 * Usage: charlm_step_bench [layers dim heads context batch] (default: charlm's defaults). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "train.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  charlm_config c = {.layers = 2, .dim = 128, .heads = 4, .context = 128};
  charlm_train_options o = {.batch = 32, .steps = 1000, .warmup = 10, .lr = 3e-3,
                            .min_lr = 3e-4, .weight_decay = 0.01, .clip = 1.0, .seed = 1};
  if (argc == 6) {
    c.layers = atoi(argv[1]), c.dim = atoi(argv[2]), c.heads = atoi(argv[3]);
    c.context = atoi(argv[4]), o.batch = atoi(argv[5]);
  } else if (argc != 1) {
    fprintf(stderr, "usage: charlm_step_bench [layers dim heads context batch]\n");
    return 2;
  }
  c.mlp = 4 * c.dim;
  charlm_corpus corpus;
  if (charlm_corpus_load(CHARLM_CORPUS, c.context, &corpus) != NV_OK) return 1;
  c.vocab = corpus.vocab_size;
  charlm_trainer t;
  if (charlm_trainer_init(&t, &c, &o, &corpus) != NV_OK) {
    fprintf(stderr, "charlm_step_bench: %s\n", nv_last_error());
    return 1;
  }
  enum { WARMUP = 3, REPEAT = 10 };
  double times[REPEAT], loss, norm, lr;
  for (int i = 0; i < WARMUP + REPEAT; i++) {
    double start = now();
    if (charlm_trainer_step(&t, &loss, &norm, &lr) != NV_OK) {
      fprintf(stderr, "charlm_step_bench: %s\n", nv_last_error());
      return 1;
    }
    if (i >= WARMUP) times[i - WARMUP] = now() - start;
  }
  qsort(times, REPEAT, sizeof *times, cmp);
  printf("BENCH charlm_step %.9g\n", times[REPEAT / 2]);
  charlm_trainer_free(&t);
  charlm_corpus_free(&corpus);
  return 0;
}
