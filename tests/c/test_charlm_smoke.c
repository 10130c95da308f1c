/* charlm (examples/charlm) on a tiny model: the loss is finite and goes down over a few steps,
 * gradients match finite differences in one direction, a checkpoint resumes to the same next
 * loss, and bad inputs fail with messages instead of crashing. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "model.h"
#include "train.h"

static charlm_corpus corpus;

static void load_corpus(void) {
  cr_assert_eq(charlm_corpus_load(CHARLM_CORPUS, 32, &corpus), NV_OK, "%s", nv_last_error());
}

static void free_corpus(void) { charlm_corpus_free(&corpus); }

TestSuite(charlm, .init = load_corpus, .fini = free_corpus);

static charlm_config tiny(void) {
  return (charlm_config){.vocab = corpus.vocab_size, .context = 32, .layers = 1, .dim = 32,
                         .heads = 2, .mlp = 128};
}

static charlm_train_options tiny_train(void) {
  return (charlm_train_options){.batch = 8, .steps = 40, .warmup = 1, .lr = 1e-2,
                                .min_lr = 1e-3, .weight_decay = 0.01, .clip = 1.0, .seed = 7};
}

Test(charlm, corpus_split_and_vocabulary) {
  /* 535,314 bytes of ASCII text with 73 distinct characters; 90% train. */
  cr_expect_eq(corpus.vocab_size, 73);
  cr_expect_eq(corpus.n, 535314u);
  cr_expect_eq(corpus.n_train, 535314u * 9 / 10);
  for (int i = 1; i < corpus.vocab_size; i++) cr_expect_lt(corpus.vocab[i - 1], corpus.vocab[i]);
}

Test(charlm, loss_finite_and_decreasing) {
  charlm_trainer t;
  charlm_config c = tiny();
  charlm_train_options o = tiny_train();
  cr_assert_eq(charlm_trainer_init(&t, &c, &o, &corpus), NV_OK, "%s", nv_last_error());
  double before, after, loss[6], norm, lr;
  cr_assert_eq(charlm_trainer_eval(&t, 16, &before), NV_OK, "%s", nv_last_error());
  /* At initialization the logits have a standard deviation of about 1 (unit-RMS hidden state
   * times N(0, 1/dim) embeddings), so the loss is about log(vocab) + 1/2. */
  cr_expect(before > log(corpus.vocab_size) && before < log(corpus.vocab_size) + 1.2,
            "initial loss %f", before);
  for (int i = 0; i < 6; i++) {
    cr_assert_eq(charlm_trainer_step(&t, &loss[i], &norm, &lr), NV_OK, "%s", nv_last_error());
    cr_assert(isfinite(loss[i]) && isfinite(norm) && norm > 0, "step %d: loss %f norm %f", i,
              loss[i], norm);
    cr_expect(lr > 0 && lr <= o.lr * (1 + 1e-6), "lr %g", lr);
  }
  cr_assert_eq(charlm_trainer_eval(&t, 16, &after), NV_OK, "%s", nv_last_error());
  cr_expect_eq(t.step, 6);
  cr_expect_lt(loss[5], loss[0] - 0.3, "training loss %f -> %f", loss[0], loss[5]);
  cr_expect_lt(after, before - 0.3, "validation loss %f -> %f", before, after);
  charlm_trainer_free(&t);
}

/* The gradient of each parameter array along a random direction equals the central
 * difference of the loss, computed in float64 (the model runs in any float dtype) after a few
 * training steps, so that attention is no longer uniform and every block matters. */
Test(charlm, gradients_match_finite_differences) {
  charlm_trainer t;
  charlm_config c = tiny();
  charlm_train_options o = tiny_train();
  cr_assert_eq(charlm_trainer_init(&t, &c, &o, &corpus), NV_OK, "%s", nv_last_error());
  double loss, norm, lr;
  for (int i = 0; i < 5; i++) cr_assert_eq(charlm_trainer_step(&t, &loss, &norm, &lr), NV_OK);
  int n = charlm_param_count(&c), shape[2] = {2, 32};
  nv_array **p32 = calloc((size_t)n, sizeof *p32), **p = calloc((size_t)n, sizeof *p),
           **moved = calloc((size_t)n, sizeof *moved);
  cr_assert_eq(charlm_param_order(&c, t.params, p32), NV_OK);
  nv_scope_begin();
  int32_t tok[64], tgt[64];
  for (int i = 0; i < 64; i++) tok[i] = corpus.ids[5000 + i], tgt[i] = corpus.ids[5001 + i];
  nv_array *tokens = nv_array_from_data(tok, shape, 2, NV_DTYPE_INT32);
  nv_array *targets = nv_array_from_data(tgt, shape, 2, NV_DTYPE_INT32);
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  for (int i = 0; i < n; i++) nv_vec_push(in, p[i] = nv_astype(p32[i], NV_DTYPE_FLOAT64));
  nv_vec_push(in, tokens);
  nv_vec_push(in, targets);
  cr_assert_eq(nv_closure_apply(t.value_and_grad, in, out), NV_OK, "%s", nv_last_error());
  cr_assert_eq(nv_array_dtype(nv_vec_get(out, 0)), NV_DTYPE_FLOAT64);
  nv_random_seed(11);
  for (int i = 0; i < n; i++) {
    const double eps = 1e-5;
    nv_array *d = nv_random_normal(nv_array_shape(p[i]), nv_array_ndim(p[i]),
                                   NV_DTYPE_FLOAT64, 0.0, 1.0, NULL);
    double g, lp, lm;
    nv_array *gi = nv_vec_get(out, 1 + (size_t)i);
    cr_assert_eq(nv_array_item_double(nv_sum(nv_multiply(gi, d), NULL, 0, false), &g), NV_OK);
    for (int k = 0; k < n; k++) moved[k] = p[k];
    moved[i] = nv_add(p[i], nv_multiply_scalar(d, eps));
    cr_assert_eq(nv_array_item_double(charlm_loss(&c, moved, tokens, targets), &lp), NV_OK);
    moved[i] = nv_subtract(p[i], nv_multiply_scalar(d, eps));
    cr_assert_eq(nv_array_item_double(charlm_loss(&c, moved, tokens, targets), &lm), NV_OK);
    double fd = (lp - lm) / (2 * eps);
    char name[64];
    charlm_param_name(&c, i, name, sizeof name);
    cr_expect(fabs(fd - g) <= 1e-5 * fabs(g) + 1e-7, "%s: finite difference %.9g, gradient %.9g",
              name, fd, g);
  }
  nv_vec_free(in);
  nv_vec_free(out);
  nv_scope_end();
  free(p32);
  free(p);
  free(moved);
  charlm_trainer_free(&t);
}

Test(charlm, checkpoint_resume_reproduces_next_loss) {
  char dir[] = "/tmp/charlm_smoke_XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char path[sizeof dir + 32];
  snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
  charlm_config c = tiny();
  charlm_train_options o = tiny_train();
  charlm_trainer a, b;
  double loss, norm, lr, next_a, next_b, lr_a, lr_b;
  cr_assert_eq(charlm_trainer_init(&a, &c, &o, &corpus), NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 3; i++) cr_assert_eq(charlm_trainer_step(&a, &loss, &norm, &lr), NV_OK);
  cr_assert_eq(charlm_checkpoint_save(&a, path), NV_OK, "%s", nv_last_error());
  cr_assert_eq(charlm_trainer_step(&a, &next_a, &norm, &lr_a), NV_OK);
  cr_assert_eq(charlm_trainer_step(&a, &next_a, &norm, &lr_a), NV_OK);

  /* A fresh trainer with another seed for its initial parameters, then the checkpoint. */
  charlm_train_options other = o;
  other.seed = 99;
  other.steps = 1000; /* the checkpoint brings its schedule length (40) */
  charlm_config read;
  cr_assert_eq(charlm_checkpoint_config(path, &read), NV_OK, "%s", nv_last_error());
  cr_expect_eq(read.dim, c.dim);
  cr_expect_eq(read.layers, c.layers);
  cr_assert_eq(charlm_trainer_init(&b, &c, &other, &corpus), NV_OK);
  b.options.seed = o.seed; /* the batch order of the original run */
  cr_assert_eq(charlm_checkpoint_load(&b, path), NV_OK, "%s", nv_last_error());
  cr_expect_eq(b.step, 3);
  cr_expect_eq(b.options.steps, 40);
  cr_assert_eq(charlm_trainer_step(&b, &next_b, &norm, &lr_b), NV_OK);
  cr_assert_eq(charlm_trainer_step(&b, &next_b, &norm, &lr_b), NV_OK);
  /* Bit for bit on the CPU. On the GPU the embedding's gradient adds duplicate rows with
   * atomics, in whatever order they land: the two runs agree to float32 rounding. */
  if (nv_default_device().type == NV_DEVICE_CPU)
    cr_expect_eq(next_a, next_b, "loss after resuming: %.9g, uninterrupted: %.9g", next_b, next_a);
  else
    cr_expect_leq(fabs(next_a - next_b), 1e-6 * fabs(next_a),
                  "loss after resuming: %.9g, uninterrupted: %.9g", next_b, next_a);
  cr_expect_eq(lr_a, lr_b);
  charlm_trainer_free(&a);
  charlm_trainer_free(&b);
  unlink(path);
  rmdir(dir);
}

Test(charlm, bad_inputs_fail_cleanly) {
  charlm_trainer t;
  charlm_config c = tiny();
  charlm_train_options o = tiny_train();
  c.heads = 3; /* 32 does not divide by 3 */
  cr_expect_neq(charlm_trainer_init(&t, &c, &o, &corpus), NV_OK);
  c = tiny();
  c.vocab = 10;
  cr_expect_neq(charlm_trainer_init(&t, &c, &o, &corpus), NV_OK);
  charlm_corpus small;
  cr_expect_eq(charlm_corpus_load("/nonexistent/charlm.txt", 32, &small), NV_ERR_IO);
  cr_expect_eq(charlm_corpus_load(CHARLM_CORPUS, 400000, &small), NV_ERR_INVALID_ARGUMENT);
  charlm_config read;
  cr_expect_neq(charlm_checkpoint_config("/nonexistent/ckpt.safetensors", &read), NV_OK);

  /* A checkpoint of another shape does not load into this model. */
  char dir[] = "/tmp/charlm_smoke_XXXXXX";
  cr_assert_not_null(mkdtemp(dir));
  char path[sizeof dir + 32];
  snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
  c = tiny();
  cr_assert_eq(charlm_trainer_init(&t, &c, &o, &corpus), NV_OK);
  cr_assert_eq(charlm_checkpoint_save(&t, path), NV_OK, "%s", nv_last_error());
  charlm_trainer_free(&t);
  c.dim = 64;
  cr_assert_eq(charlm_trainer_init(&t, &c, &o, &corpus), NV_OK);
  cr_expect_eq(charlm_checkpoint_load(&t, path), NV_ERR_INVALID_ARGUMENT);
  charlm_trainer_free(&t);
  unlink(path);
  rmdir(dir);
}
