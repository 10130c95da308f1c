/* charlm: trains a small character-level transformer on a text, from C, with nuvec.
 *
 * The model is in model.c, the training pieces (batches, AdamW step, validation, checkpoints)
 * in train.c; this file reads the flags, runs the loop with a progress bar, writes the loss
 * log (CSV) and the checkpoint, and samples text at the end. Run with --help for the flags. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model.h"
#include "train.h"

typedef struct options {
  charlm_config model;
  charlm_train_options train;
  const char *data, *out, *device, *prompt;
  double time_budget, temperature;
  int eval_every, eval_windows, sample_chars, top_k;
  bool resume, steps_given, distributed;
} options;

static const char usage[] =
    "usage: charlm [flags]\n"
    "Trains a character-level transformer (token + position embeddings, causal multi-head\n"
    "self-attention, GELU MLP, RMSNorm, output tied to the embedding) with AdamW, linear\n"
    "warm-up then cosine decay and gradient clipping; reports the validation loss, saves a\n"
    "checkpoint, and samples text from a prompt.\n"
    "\n"
    "data and output:\n"
    "  --data PATH         text to train on (default examples/charlm/data/shakespeare.txt);\n"
    "                      the first 90%% trains, the last 10%% validates\n"
    "  --out DIR           where the checkpoint (charlm.safetensors) and the loss log\n"
    "                      (loss.csv) go (default charlm-out)\n"
    "  --resume            continue from DIR/charlm.safetensors (parameters, optimizer state,\n"
    "                      step; the model's shape comes from the checkpoint)\n"
    "model:\n"
    "  --layers N          transformer blocks (default 2)\n"
    "  --dim N             width of the residual stream (default 128)\n"
    "  --heads N           attention heads, dividing dim (default 4)\n"
    "  --mlp N             hidden width of the MLP (default 4 x dim)\n"
    "  --context N         characters of context (default 64)\n"
    "  --tiny              a tiny model for smoke tests: 1 layer, dim 32, 2 heads, context 32,\n"
    "                      batch 4 (later flags still override)\n"
    "training:\n"
    "  --steps N           optimization steps: the schedule's length (default 600; with\n"
    "                      --resume the checkpoint's unless given)\n"
    "  --batch N           sequences per step (default 32)\n"
    "  --lr X              peak learning rate (default 3e-3)\n"
    "  --min-lr X          learning rate at the end of the cosine decay (default 3e-4)\n"
    "  --warmup N          linear warm-up steps (default 50)\n"
    "  --weight-decay X    AdamW's decoupled weight decay (default 0.01)\n"
    "  --clip X            bound on the global gradient norm, 0 for none (default 1.0)\n"
    "  --time-budget S     seconds of training at most (default 240): when the measured speed\n"
    "                      says the steps will not fit, the schedule is shortened to end (its\n"
    "                      cosine decay complete) within the budget, and training stops at\n"
    "                      the budget in any case\n"
    "  --eval-every N      report the validation loss every N steps (default 100)\n"
    "  --eval-windows N    windows of context characters for those reports (default 128;\n"
    "                      the final report uses the whole validation split)\n"
    "  --seed N            initialization, batch order and sampling (default 1)\n"
    "  --distributed       data parallelism over the job nuvec-launch started: every rank takes\n"
    "                      its share of each batch, gradients are averaged with all_sum; rank\n"
    "                      r > 0 writes its files under OUT/rank<r>\n"
    "  --device cpu|gpu    where to compute (default gpu where a CUDA device is usable, else cpu)\n"
    "sampling:\n"
    "  --prompt TEXT       the text to continue (default \"ROMEO.\\n\")\n"
    "  --sample-chars N    characters to generate, 0 for none (default 400)\n"
    "  --temperature X     softmax temperature, 0 for greedy (default 0.8)\n"
    "  --top-k N           sample among the N most likely characters, 0 for all (default 10)\n"
    "  --help              this text\n";

static void defaults(options *o) {
  memset(o, 0, sizeof *o);
  o->model = (charlm_config){.context = 64, .layers = 2, .dim = 128, .heads = 4, .mlp = 0};
  o->train = (charlm_train_options){.batch = 32, .steps = 600, .warmup = 50, .lr = 3e-3,
                                    .min_lr = 3e-4, .weight_decay = 0.01, .clip = 1.0,
                                    .seed = 1};
  o->data = "examples/charlm/data/shakespeare.txt";
  o->out = "charlm-out";
  o->device = nv_device_is_available(nv_gpu(0)) ? "gpu" : "cpu";
  o->prompt = "ROMEO.\n";
  o->time_budget = 240;
  o->temperature = 0.8;
  o->eval_every = 100;
  o->eval_windows = 128;
  o->sample_chars = 400;
  o->top_k = 10;
}

/* Parses a number flag's value; false (with a message) when it is missing or malformed. */
static bool number(int argc, char **argv, int *i, double lo, double hi, double *out) {
  if (*i + 1 >= argc) {
    fprintf(stderr, "charlm: %s needs a value\n", argv[*i]);
    return false;
  }
  char *end;
  double v = strtod(argv[*i + 1], &end);
  if (*end != '\0' || end == argv[*i + 1] || !(v >= lo && v <= hi)) {
    fprintf(stderr, "charlm: %s %s: expected a number from %g to %g\n", argv[*i], argv[*i + 1],
            lo, hi);
    return false;
  }
  *out = v;
  ++*i;
  return true;
}

/* Parses the flags into `o`; returns 0 to go on, 1 after --help, -1 on a bad flag. */
static int parse(int argc, char **argv, options *o) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    double v = 0;
    bool ok = true;
#define INT_FLAG(name, lo, hi, dst) \
  else if (!strcmp(a, name)) { ok = number(argc, argv, &i, lo, hi, &v) && v == floor(v); dst = v; }
#define REAL_FLAG(name, lo, hi, dst) \
  else if (!strcmp(a, name)) { ok = number(argc, argv, &i, lo, hi, &v); dst = v; }
#define TEXT_FLAG(name, dst) \
  else if (!strcmp(a, name)) { ok = i + 1 < argc; if (ok) dst = argv[++i]; }
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(usage, stdout);
      return 1;
    } else if (!strcmp(a, "--resume")) {
      o->resume = true;
    } else if (!strcmp(a, "--distributed")) {
      o->distributed = true;
    } else if (!strcmp(a, "--steps")) {
      ok = number(argc, argv, &i, 1, 1e9, &v) && v == floor(v);
      o->train.steps = (int64_t)v, o->steps_given = true;
    } else if (!strcmp(a, "--tiny")) {
      o->model.layers = 1, o->model.dim = 32, o->model.heads = 2, o->model.context = 32;
      o->model.mlp = 0, o->train.batch = 4;
    }
    INT_FLAG("--layers", 1, 64, o->model.layers)
    INT_FLAG("--dim", 1, 8192, o->model.dim)
    INT_FLAG("--heads", 1, 1024, o->model.heads)
    INT_FLAG("--mlp", 1, 65536, o->model.mlp)
    INT_FLAG("--context", 1, 4096, o->model.context)
    INT_FLAG("--batch", 1, 1 << 16, o->train.batch)
    REAL_FLAG("--lr", 0, 10, o->train.lr)
    REAL_FLAG("--min-lr", 0, 10, o->train.min_lr)
    INT_FLAG("--warmup", 0, 1e9, o->train.warmup)
    REAL_FLAG("--weight-decay", 0, 10, o->train.weight_decay)
    REAL_FLAG("--clip", 0, 1e9, o->train.clip)
    REAL_FLAG("--time-budget", 0, 1e9, o->time_budget)
    INT_FLAG("--eval-every", 0, 1e9, o->eval_every)
    INT_FLAG("--eval-windows", 0, 1e9, o->eval_windows)
    INT_FLAG("--seed", 0, 9007199254740992.0, o->train.seed)
    INT_FLAG("--sample-chars", 0, 1e7, o->sample_chars)
    REAL_FLAG("--temperature", 0, 100, o->temperature)
    INT_FLAG("--top-k", 0, 256, o->top_k)
    TEXT_FLAG("--data", o->data)
    TEXT_FLAG("--out", o->out)
    TEXT_FLAG("--device", o->device)
    TEXT_FLAG("--prompt", o->prompt)
    else {
      fprintf(stderr, "charlm: unknown flag %s (see --help)\n", a);
      return -1;
    }
    if (!ok) {
      fprintf(stderr, "charlm: bad value for %s (see --help)\n", a);
      return -1;
    }
#undef INT_FLAG
#undef REAL_FLAG
#undef TEXT_FLAG
  }
  if (o->model.mlp == 0) o->model.mlp = 4 * o->model.dim;
  return 0;
}

/* Selects the device: the CPU, or a GPU once nuvec has a GPU backend. */
static bool select_device(const char *name) {
  if (!strcmp(name, "cpu")) return nv_set_default_device(nv_cpu()) == NV_OK;
  if (!strcmp(name, "gpu")) {
    if (!nv_device_is_available(nv_gpu(0))) {
      fprintf(stderr, "charlm: --device gpu: no usable CUDA device here (or a build without "
                      "CUDA); use --device cpu\n");
      return false;
    }
    return nv_set_default_device(nv_gpu(0)) == NV_OK;
  }
  fprintf(stderr, "charlm: --device %s: expected cpu or gpu\n", name);
  return false;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- The progress display ---- */

typedef struct progress {
  bool tty;
  int64_t first, last; /* steps of this run */
  int64_t requested;   /* the schedule's length before any fitting to the budget */
  double start, budget;
  double mark;         /* when the third step of this run ended (the speed is measured from
                        * there, past the first steps' allocations) */
  int width;           /* characters of the current bar line, to clear it */
} progress;

static void format_time(double s, char *buf, size_t size) {
  long t = s > 0 && s < 1e7 ? (long)(s + 0.5) : 0;
  snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

static void progress_clear(progress *p) {
  if (p->tty && p->width > 0) printf("\r%*s\r", p->width, "");
  p->width = 0;
}

/* Draws the bar after step `step` (done): on a terminal one line rewritten in place, else a
 * line every twentieth of the run. */
static void progress_draw(progress *p, int64_t step, double loss, double tokens_per_step) {
  double elapsed = now() - p->start;
  int64_t done = step - p->first, total = p->last - p->first;
  double rate = done > 0 ? elapsed / (double)done : 0;
  double eta = rate * (double)(p->last - step);
  if (p->budget - elapsed < eta) eta = p->budget - elapsed;
  char eta_text[32], elapsed_text[32];
  format_time(eta, eta_text, sizeof eta_text);
  format_time(elapsed, elapsed_text, sizeof elapsed_text);
  double tps = rate > 0 ? tokens_per_step / rate : 0;
  if (!p->tty) {
    int64_t every = total / 20 > 0 ? total / 20 : 1;
    if (done % every == 0 || step == p->last)
      printf("step %lld/%lld  loss %.4f  %.0f tok/s  elapsed %s  ETA %s\n", (long long)step,
             (long long)p->last, loss, tps, elapsed_text, eta_text);
    fflush(stdout);
    return;
  }
  enum { BAR = 24 };
  char bar[BAR + 1];
  int fill = total > 0 ? (int)(BAR * done / total) : BAR;
  for (int i = 0; i < BAR; i++) bar[i] = i < fill ? '#' : '.';
  bar[BAR] = '\0';
  int w = printf("\r[%s] step %lld/%lld  loss %.4f  %.1fk tok/s  %s  ETA %s ", bar,
                 (long long)step, (long long)p->last, loss, tps / 1000, elapsed_text, eta_text);
  if (w > 0) p->width = w;
  fflush(stdout);
}

/* ---- Sampling ---- */

/* Continues `prompt` by `n` characters drawn from the model (temperature, top-k), printing
 * them as they come. */
static nv_status sample(charlm_trainer *t, const char *prompt, int n, double temperature,
                        int top_k, uint64_t seed) {
  const charlm_corpus *c = t->corpus;
  int index[256], len = 0, cap = (int)strlen(prompt) + n;
  for (int b = 0; b < 256; b++) index[b] = -1;
  for (int v = 0; v < c->vocab_size; v++) index[c->vocab[v]] = v;
  int32_t *ids = malloc(sizeof *ids * (size_t)(cap > 0 ? cap : 1));
  nv_array **order = malloc(sizeof *order * (size_t)charlm_param_count(&t->config));
  nv_status s = ids && order ? charlm_param_order(&t->config, t->params, order)
                              : NV_ERR_OUT_OF_MEMORY;
  for (const unsigned char *q = (const unsigned char *)prompt; s == NV_OK && *q; q++) {
    if (index[*q] < 0) {
      fprintf(stderr, "charlm: the prompt's character 0x%02x is not in the vocabulary\n", *q);
      s = NV_ERR_INVALID_ARGUMENT;
    } else {
      ids[len++] = index[*q];
    }
  }
  if (s == NV_OK && len == 0) ids[len++] = index['\n'] >= 0 ? index['\n'] : 0;
  printf("%s", prompt);
  /* One key per character, split from the seed's key. */
  nv_array *seed_key = nv_random_key(seed), *keys = nv_random_split(seed_key, n > 0 ? n : 1);
  nv_release(seed_key);
  for (int i = 0; s == NV_OK && i < n; i++) {
    s = nv_scope_begin();
    if (s != NV_OK) break;
    int from = len > t->config.context ? len - t->config.context : 0, shape[2] = {1, len - from};
    nv_array *tokens = nv_array_from_data(ids + from, shape, 2, NV_DTYPE_INT32);
    int start[3] = {0, shape[1] - 1, 0}, stop[3] = {1, shape[1], c->vocab_size};
    int flat = c->vocab_size;
    nv_array *logits = nv_reshape(
        nv_slice(charlm_logits(&t->config, order, tokens), start, stop, NULL, 3), &flat, 1);
    nv_array *next;
    if (temperature == 0) {
      next = nv_argmax(logits, NULL, false);
    } else {
      logits = nv_divide_scalar(logits, temperature);
      if (top_k > 0 && top_k < c->vocab_size) {
        /* Characters below the k-th largest logit get probability 0. */
        nv_array *kth = nv_min(nv_topk(logits, top_k, NULL), NULL, 0, false);
        logits = nv_where(nv_less(logits, kth), nv_array_float(-INFINITY), logits);
      }
      int row0[2] = {i, 0}, row1[2] = {i + 1, 2}, two = 2;
      nv_array *key = nv_reshape(nv_slice(keys, row0, row1, NULL, 2), &two, 1);
      next = nv_random_categorical(logits, 0, NULL, 0, key);
    }
    int64_t id = 0;
    s = nv_array_item_int64(next, &id);
    nv_scope_end();
    if (s == NV_OK) {
      ids[len++] = (int32_t)id;
      putchar(c->vocab[id]);
      fflush(stdout);
    }
  }
  nv_release(keys);
  printf("\n");
  free(ids);
  free(order);
  return s;
}

/* ---- Training ---- */

static FILE *open_log(const char *dir, bool append) {
  char path[4096];
  snprintf(path, sizeof path, "%s/loss.csv", dir);
  FILE *f = fopen(path, append ? "a" : "w");
  if (!f) {
    fprintf(stderr, "charlm: cannot write %s\n", path);
    return NULL;
  }
  if (!append || ftell(f) == 0) fprintf(f, "step,train_loss,val_loss,lr,seconds\n");
  return f;
}

static nv_status report_val(charlm_trainer *t, progress *p, FILE *log, int windows, bool final,
                            double *val) {
  nv_status s = charlm_trainer_eval(t, windows, val);
  if (s != NV_OK) return s;
  progress_clear(p);
  printf("step %lld: val loss %.4f%s\n", (long long)t->step, *val,
         final ? " (the whole validation split)" : "");
  fprintf(log, "%lld,,%.6f,,%.3f\n", (long long)t->step, *val, now() - p->start);
  fflush(log);
  return NV_OK;
}

/* Fits the schedule to the time budget from the speed measured since the third step: when its
 * steps will not fit, it is shortened so that the learning rate has decayed when the budget
 * runs out (stopping in the middle of the schedule would leave it high, and the loss with it);
 * when the speed picks up it grows back, at most to the requested length. The final
 * validation pass is reserved about ten steps' time; changes under 2% are not made. */
static nv_status fit_schedule(charlm_trainer *t, progress *p) {
  int64_t measured = t->step - p->first - 3;
  double elapsed = now() - p->start, per_step = (now() - p->mark) / (double)measured;
  double left = p->budget - elapsed - 10 * per_step;
  int64_t fits = t->step + (left > 0 ? (int64_t)(left / per_step) : 0);
  if (fits > p->requested) fits = p->requested;
  if (fits <= t->step) fits = t->step + 1;
  if (fabs((double)(fits - t->options.steps)) < 0.02 * (double)t->options.steps) return NV_OK;
  nv_status s = charlm_trainer_set_steps(t, fits);
  if (s == NV_OK) {
    progress_clear(p);
    printf("time budget: %.0f ms per step, so the schedule now ends at step %lld\n",
           1e3 * per_step, (long long)fits);
    p->last = fits;
  }
  return s;
}

/* The training loop: steps until the schedule ends or the time budget is spent, with
 * validation reports and checkpoints along the way. */
static nv_status train(charlm_trainer *t, const options *o, FILE *log, const char *ckpt) {
  progress p = {.tty = isatty(STDOUT_FILENO), .first = t->step, .last = t->options.steps,
                .requested = t->options.steps, .start = now(), .budget = o->time_budget};
  double tokens = (double)o->train.batch * t->config.context, val = 0;
  nv_status s = NV_OK;
  while (s == NV_OK && t->step < t->options.steps) {
    if (now() - p.start >= o->time_budget) {
      progress_clear(&p);
      printf("time budget of %.0f s reached at step %lld\n", o->time_budget, (long long)t->step);
      break;
    }
    double loss, norm, lr;
    s = charlm_trainer_step(t, &loss, &norm, &lr);
    if (s != NV_OK) break;
    if (!isfinite(loss)) {
      fprintf(stderr, "\ncharlm: the loss became %f at step %lld\n", loss, (long long)t->step);
      return NV_ERR_BACKEND;
    }
    fprintf(log, "%lld,%.6f,,%.6g,%.3f\n", (long long)t->step, loss, lr, now() - p.start);
    progress_draw(&p, t->step, loss, tokens);
    int64_t done = t->step - p.first;
    if (done == 3) p.mark = now();
    if (done == 20 || (done > 20 && done % 50 == 0)) s = fit_schedule(t, &p);
    if (s == NV_OK && o->eval_every > 0 && t->step % o->eval_every == 0 &&
        t->step < t->options.steps) {
      s = report_val(t, &p, log, o->eval_windows, false, &val);
      if (s == NV_OK) s = charlm_checkpoint_save(t, ckpt);
    }
  }
  progress_clear(&p);
  if (s != NV_OK) return s;
  printf("trained %lld steps in %.1f s\n", (long long)(t->step - p.first), now() - p.start);
  s = report_val(t, &p, log, 0, true, &val);
  if (s == NV_OK) s = charlm_checkpoint_save(t, ckpt);
  if (s == NV_OK) printf("checkpoint: %s\n", ckpt);
  return s;
}

static int run(const options *o) {
  charlm_corpus corpus;
  char ckpt[4096];
  snprintf(ckpt, sizeof ckpt, "%s/charlm.safetensors", o->out);
  charlm_config config = o->model;
  if (o->resume && charlm_checkpoint_config(ckpt, &config) != NV_OK) return 1;
  if (charlm_corpus_load(o->data, config.context, &corpus) != NV_OK) return 1;
  config.vocab = corpus.vocab_size;
  charlm_trainer t;
  nv_status s = charlm_trainer_init(&t, &config, &o->train, &corpus);
  if (s == NV_OK && o->resume) s = charlm_checkpoint_load(&t, ckpt);
  /* A resumed run keeps the checkpoint's schedule unless --steps names another. */
  if (s == NV_OK && o->resume && o->steps_given && o->train.steps != t.options.steps) {
    if (o->train.steps <= t.step) {
      fprintf(stderr, "charlm: --steps %lld: the checkpoint has done %lld steps already\n",
              (long long)o->train.steps, (long long)t.step);
      s = NV_ERR_INVALID_ARGUMENT;
    } else {
      s = charlm_trainer_set_steps(&t, o->train.steps);
    }
  }
  FILE *log = s == NV_OK ? open_log(o->out, o->resume) : NULL;
  if (s == NV_OK && !log) s = NV_ERR_IO;
  if (s == NV_OK) {
    printf("charlm: %s (%zu characters, vocabulary %d), %d CPU threads\n", o->data, corpus.n,
           corpus.vocab_size, nv_get_num_threads());
    printf("model: %d layers, dim %d, %d heads, MLP %d, context %d: %lld parameters\n",
           config.layers, config.dim, config.heads, config.mlp, config.context,
           (long long)nv_params_count(t.params));
    printf("training: batch %d, steps %lld%s, lr %g (warm-up %lld, cosine to %g), AdamW weight "
           "decay %g, clip %g, budget %.0f s\n",
           o->train.batch, (long long)t.options.steps, o->resume ? " (resumed)" : "", o->train.lr,
           (long long)o->train.warmup, o->train.min_lr, o->train.weight_decay, o->train.clip,
           o->time_budget);
    if (o->resume) printf("resumed from %s at step %lld\n", ckpt, (long long)t.step);
    fflush(stdout);
    s = train(&t, o, log, ckpt);
  }
  if (log) fclose(log);
  if (s == NV_OK && o->sample_chars > 0) {
    printf("\n---- sample (temperature %g, top-k %d) ----\n", o->temperature, o->top_k);
    s = sample(&t, o->prompt, o->sample_chars, o->temperature, o->top_k, o->train.seed);
  }
  if (s != NV_OK && nv_last_error()[0]) fprintf(stderr, "charlm: %s\n", nv_last_error());
  charlm_trainer_free(&t);
  charlm_corpus_free(&corpus);
  return s == NV_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  options o;
  defaults(&o);
  int r = parse(argc, argv, &o);
  if (r != 0) return r > 0 ? 0 : 2;
  if (!select_device(o.device)) return 2;
  char rank_out[4096];
  if (o.distributed) {
    int rank = 0, ranks = 1;
    if (nv_dist_init("any", true, &o.train.group) != NV_OK ||
        nv_group_rank(o.train.group, &rank) != NV_OK ||
        nv_group_size(o.train.group, &ranks) != NV_OK) {
      fprintf(stderr, "charlm: --distributed: %s\n", nv_last_error());
      return 2;
    }
    printf("charlm: rank %d of %d\n", rank, ranks);
    if (rank > 0) { /* the ranks' logs, checkpoints and samples apart */
      if (mkdir(o.out, 0777) != 0 && access(o.out, W_OK) != 0) {
        fprintf(stderr, "charlm: cannot create the output folder %s\n", o.out);
        return 1;
      }
      snprintf(rank_out, sizeof rank_out, "%s/rank%d", o.out, rank);
      o.out = rank_out;
    }
  }
  if (mkdir(o.out, 0777) != 0 && access(o.out, W_OK) != 0) {
    fprintf(stderr, "charlm: cannot create the output folder %s\n", o.out);
    return 1;
  }
  return run(&o);
}
