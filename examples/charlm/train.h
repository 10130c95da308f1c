/* charlm's training: the corpus and its batches, the optimizer, one training step, the
 * validation loss, and checkpoints (parameters + optimizer state + step in one safetensors
 * file). charlm.c drives these; tests/c/test_charlm_smoke.c tests them. */
#ifndef CHARLM_TRAIN_H
#define CHARLM_TRAIN_H

#include <stdint.h>

#include "model.h"

/* A text as vocabulary indices. The vocabulary is the sorted set of the file's bytes; the
 * first 90% of the text is the training split, the rest the validation split. */
typedef struct charlm_corpus {
  uint8_t *ids;          /* n indices into vocab */
  size_t n;              /* characters */
  size_t n_train;        /* the first n_train are the training split */
  unsigned char vocab[256];
  int vocab_size;
} charlm_corpus;

/* Reads `path` into `corpus`. Fails (with a message on stderr) for an unreadable file or one
 * too short for a context of `context` characters in each split. */
nv_status charlm_corpus_load(const char *path, int context, charlm_corpus *corpus);
void charlm_corpus_free(charlm_corpus *corpus);

/* How to train. */
typedef struct charlm_train_options {
  int batch;            /* sequences per step */
  int64_t steps;        /* the schedule's length */
  int64_t warmup;       /* linear warm-up steps (from lr / warmup to lr) */
  double lr;            /* peak learning rate */
  double min_lr;        /* the cosine decay's end */
  double weight_decay;  /* AdamW's decoupled weight decay */
  double clip;          /* the global gradient norm's bound (0: no clipping) */
  uint64_t seed;        /* initialization and batch order */
  /* Data parallelism: each rank of the group takes its equal share of every batch's rows and
   * the gradients (and the reported loss) are averaged over the group with all_sum, so the
   * steps equal one process's at the same global batch. NV_GROUP_SINGLE: one process. */
  nv_group group;
} charlm_train_options;

/* A model being trained. */
typedef struct charlm_trainer {
  charlm_config config;
  charlm_train_options options;
  const charlm_corpus *corpus; /* borrowed */
  nv_map *params;
  nv_optimizer *opt;
  nv_closure *value_and_grad;
  int64_t step; /* steps done */
} charlm_trainer;

/* A new model with parameters drawn from options->seed, and its AdamW optimizer (warm-up then
 * cosine decay). `config->vocab` must equal corpus->vocab_size. */
nv_status charlm_trainer_init(charlm_trainer *t, const charlm_config *config,
                              const charlm_train_options *options, const charlm_corpus *corpus);
void charlm_trainer_free(charlm_trainer *t);

/* Changes the schedule's length to `steps` (> the steps done): warm-up then cosine decay
 * ending at `steps`, keeping the optimizer's state. Used to fit the schedule to a time budget. */
nv_status charlm_trainer_set_steps(charlm_trainer *t, int64_t steps);

/* One optimization step on the batch of step t->step (random windows of the training split,
 * determined by the seed and the step alone, so a resumed run sees the batches the original
 * would have). Writes the batch's loss before the update, the gradient norm before clipping
 * and the learning rate used. */
nv_status charlm_trainer_step(charlm_trainer *t, double *loss, double *grad_norm, double *lr);

/* The mean loss over non-overlapping windows of the validation split: all of them when
 * `max_windows` is 0, else that many spread evenly over the split. */
nv_status charlm_trainer_eval(charlm_trainer *t, int max_windows, double *loss);

/* Saves parameters ("model.<name>"), the optimizer's state ("optimizer.step",
 * "optimizer.learning_rate", "optimizer.<name>.m|v") and the vocabulary ("data.vocab") to a
 * safetensors file, with the model's shape and the schedule's length in the metadata. */
nv_status charlm_checkpoint_save(const charlm_trainer *t, const char *path);

/* Reads the model's shape from a checkpoint's metadata into `config`. */
nv_status charlm_checkpoint_config(const char *path, charlm_config *config);

/* Replaces the trainer's parameters, optimizer state, step and schedule length with a
 * checkpoint's. Fails when the checkpoint's vocabulary or model shape differ from the
 * trainer's. */
nv_status charlm_checkpoint_load(charlm_trainer *t, const char *path);

#endif /* CHARLM_TRAIN_H */
