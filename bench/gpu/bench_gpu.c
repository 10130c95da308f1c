/* nuvec's side of the GPU benchmarks (bench/gpu/run.sh runs it beside bench_torch.py on the same
 * machine and prints the ratios). Each case is timed eagerly: build the graph, evaluate, wait
 * for the GPU; the median of the repeats is printed as "BENCH <case> <seconds>". Inputs are
 * random (made on the CPU, moved to the GPU once in the warm-up). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "nuvec.h"

static nv_array *rand_on_gpu(const int *shape, int ndim, nv_dtype dtype) {
  nv_stream_enter(nv_default_stream(nv_cpu()));
  nv_array *r = nv_random_uniform_scalar(-1, 1, shape, ndim, NV_DTYPE_FLOAT32, NULL);
  nv_stream_exit();
  nv_array *g = dtype == NV_DTYPE_FLOAT32 ? nv_add_scalar(r, 0) : nv_astype(r, dtype);
  nv_release(r);
  if (nv_eval1(g) != NV_OK) {
    fprintf(stderr, "input: %s\n", nv_last_error());
    exit(1);
  }
  return g;
}

void nv__gpu_graph_stats(long *prepared, long *updated);
long nv__gpu_stat_allocs(void);
void nv__gpu_profile(char *buf, size_t n);

/* After each case: graphs prepared / reused and device allocations since the last call. */
static void diag(const char *name) {
  static long p0, u0, a0;
  long p, u, a = nv__gpu_stat_allocs();
  nv__gpu_graph_stats(&p, &u);
  char prof[640] = "";
  if (getenv("NUVEC_GPU_PROFILE")) nv__gpu_profile(prof, sizeof prof);
  printf("DIAG %s prepared=%ld reused=%ld device_allocs=%ld %s\n", name, p - p0, u - u0, a - a0,
         prof);
  p0 = p, u0 = u, a0 = a;
}

/* A case: its warm-up runs, then the timed ones, each followed by its diagnostics (so that the
 * timed runs' line shows the steady state: graphs replayed, no allocation). */
/* The filter of main's first argument (NULL: every case): '|'-separated parts. */
static const char *only;

/* Whether `name` (a case, or the prefix of a group of cases) is selected: one of the filter's
 * parts occurs in it, or starts with it (the group that holds the named case). */
static bool wanted(const char *name) {
  if (!only || !*only) return true;
  size_t ln = strlen(name);
  for (const char *p = only;;) {
    const char *e = strchr(p, '|');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n && n >= ln && !strncmp(p, name, ln)) return true;
    for (size_t i = 0; n && i + n <= ln; i++)
      if (!strncmp(name + i, p, n)) return true;
    if (!e) return false;
    p = e + 1;
  }
}

static void sync_gpu(void);

/* NUVEC_BENCH_ONCE=n: every case n warm-ups and one timed run (a profiler's view of a step
 * without a profile of every repeat: tests/gpu/run.sh stages 16 and 17). */
static void bench_case(const char *name, void (*fn)(void *), void *ctx, int warmup, int repeat) {
  char w[96];
  if (!wanted(name)) return;
  /* NUVEC_BENCH_ONCE=n: n warm-ups (a steady state) and one timed run. */
  const char *once = getenv("NUVEC_BENCH_ONCE");
  if (once && atoi(once) >= 1) warmup = atoi(once), repeat = 1;
  for (int i = 0; i < warmup; i++) fn(ctx);
  /* Under the kernel tracer (bench/gpu/kernel_trace.cpp, preloaded): a section a timed run. */
  void (*mark)(const char *) = NULL;
  *(void **)&mark = dlsym(RTLD_DEFAULT, "ktrace_mark");
  if (mark) {
    sync_gpu();
    mark(name);
  }
  snprintf(w, sizeof w, "%s(warm-up)", name);
  diag(w);
  bench_run(name, fn, ctx, 0, repeat);
  if (mark) {
    sync_gpu();
    mark(NULL);
  }
  diag(name);
}

static void sync_gpu(void) { nv_stream_synchronize(nv_default_stream(nv_gpu(0))); }

static void check(nv_status s, const char *what) {
  if (s != NV_OK) {
    fprintf(stderr, "%s: %s\n", what, nv_last_error());
    exit(1);
  }
}

typedef struct args {
  nv_array *a, *b, *c;
  int axis;
  int n;
} args;

enum { LINALG_CHOLESKY, LINALG_INV, LINALG_SVD };

/* One decomposition of x->a, evaluated (svd: all three results). */
static void run_linalg(void *p) {
  args *x = p;
  nv_array *out[3] = {NULL, NULL, NULL};
  int n = 1;
  if (x->n == LINALG_CHOLESKY) out[0] = nv_linalg_cholesky(x->a, false);
  else if (x->n == LINALG_INV) out[0] = nv_linalg_inv(x->a);
  else n = (nv_linalg_svd(x->a, true, out), 3);
  check(nv_eval(out, (size_t)n), "linalg");
  for (int i = 0; i < n; i++) nv_release(out[i]);
}

/* In a scope, so that the product is an intermediate the sum may write over (as x*y+z in MLX
 * or PyTorch, whose product is a temporary). */
static void run_fma(void *p) {
  args *x = p;
  nv_scope_begin();
  nv_array *y = nv_scope_keep(nv_add(nv_multiply(x->a, x->b), x->c));
  nv_scope_end();
  check(nv_eval1(y), "fma");
  nv_release(y);
}

/* The compiled forms of run_fma and run_tiny: x*y+z (and the tiny chain) through nv_compile,
 * which fuses each into one generated CUDA kernel (the warm-up traces and compiles). */
static nv_status fma_body(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  return nv_vec_push(out, nv_add(nv_multiply(nv_vec_get(in, 0), nv_vec_get(in, 1)),
                                 nv_vec_get(in, 2)));
}

static nv_status tiny_body(void *payload, const nv_vec *in, nv_vec *out) {
  const int *n = payload;
  nv_array *y = nv_vec_get(in, 0);
  for (int i = 0; i < *n; i++)
    y = i % 2 ? nv_multiply(y, nv_vec_get(in, 1)) : nv_add(y, nv_vec_get(in, 2));
  return nv_vec_push(out, y);
}

typedef struct compiled_case {
  args *x;
  nv_closure *f;
} compiled_case;

static void run_compiled(void *p) {
  compiled_case *c = p;
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  nv_vec_push(in, c->x->a);
  nv_vec_push(in, c->x->b);
  nv_vec_push(in, c->x->c);
  check(nv_closure_apply(c->f, in, out), "compiled");
  check(nv_eval_vec(out), "compiled");
  nv_vec_free(in);
  nv_vec_free(out);
}

/* Runs `body` compiled over x's three arrays as bench case `name`. */
static void bench_compiled(const char *name, nv_closure_fn body, args *x, int warmup,
                           int repeat) {
  nv_closure *raw = nv_closure_new(body, &x->n, NULL);
  compiled_case c = {x, nv_compile(raw, NULL)};
  if (!c.f) check(NV_ERR_INVALID_ARGUMENT, "nv_compile");
  bench_case(name, run_compiled, &c, warmup, repeat);
  nv_closure_release(c.f);
  nv_closure_release(raw);
}

/* The chain ending in a row reduction: sum(exp(x * w + b), -1), x (R, D), w and b (D,) rows,
 * one generated kernel when compiled (a block per row of D > 256). */
static nv_status row_chain_body(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  int ax = -1;
  nv_array *t = nv_add(nv_multiply(nv_vec_get(in, 0), nv_vec_get(in, 1)), nv_vec_get(in, 2));
  return nv_vec_push(out, nv_sum(nv_exp(t), &ax, 1, false));
}

/* A copy of x->a (the rate the row chain is held to: it reads as many bytes). */
static void run_copy(void *p) {
  args *x = p;
  nv_array *y = nv_copy(x->a);
  check(nv_eval1(y), "copy");
  nv_release(y);
}

static void run_softmax(void *p) {
  args *x = p;
  int ax = -1;
  nv_array *y = nv_softmax(x->a, &ax, 1, false);
  check(nv_eval1(y), "softmax");
  nv_release(y);
}

/* The fast family: rms_norm (a, weight b), layer_norm (a, weight b, bias c), rope of a
 * (b, h, l, d) with base 10000 and offset c. */
enum { FAST_RMS, FAST_LAYER, FAST_ROPE };
static void run_fast(void *p) {
  args *x = p;
  nv_array *y = x->n == FAST_RMS     ? nv_fast_rms_norm(x->a, x->b, 1e-5)
                : x->n == FAST_LAYER ? nv_fast_layer_norm(x->a, x->b, x->c, 1e-5)
                                     : nv_fast_rope(x->a, 128, false, 10000.0, 1.0, x->c, NULL);
  check(nv_eval1(y), "fast");
  nv_release(y);
}

/* norm_rope of a [T, H, 128] with weight b at positions c (base 10000); gated_delta_slots decode
 * over the state pool a, written in place: each run's new pool replaces a (then donated, as a
 * serving loop hands its pool on); q, k, v, g, beta and the slots in d[]. */
static void run_norm_rope(void *p) {
  args *x = p;
  nv_array *y = nv_fast_norm_rope(x->a, x->b, 1e-6, 128, false, 10000.0, 1.0, x->c, NULL, NULL,
                                  NULL);
  check(nv_eval1(y), "norm_rope");
  nv_release(y);
}

typedef struct delta_args {
  nv_array *pool, *in[6]; /* q, k, v, g, beta, slots */
} delta_args;

static void run_gated_delta(void *p) {
  delta_args *x = p;
  nv_array *out[2];
  check(nv_fast_gated_delta_slots(x->in[0], x->in[1], x->in[2], x->in[3], x->in[4], x->pool,
                                  x->in[5], 0.088, out),
        "gated_delta_slots");
  nv_release(x->pool); /* the node holds the only reference: the pool is donated */
  x->pool = out[1];
  check(nv_eval1(out[0]), "gated_delta_slots");
  nv_release(out[0]);
}

static void run_sum(void *p) {
  args *x = p;
  nv_array *y = nv_sum(x->a, &x->axis, 1, false);
  check(nv_eval1(y), "sum");
  nv_release(y);
}

static void run_matmul(void *p) {
  args *x = p;
  nv_array *y = nv_matmul(x->a, x->b);
  check(nv_eval1(y), "matmul");
  nv_release(y);
}

/* conv2d, channels last: a (N, H, W, C_in), b (C_out, 3, 3, C_in), padding 1. */
static void run_conv2d(void *p) {
  args *x = p;
  int pad[2] = {1, 1};
  nv_array *y = nv_conv2d(x->a, x->b, NULL, pad, NULL, 1);
  check(nv_eval1(y), "conv2d");
  nv_release(y);
}

/* Attention: q = a, k = b, v = c; n != 0: causal. */
/* paged_attention of q over the pools with their block tables (paged_args). */
typedef struct paged_args {
  nv_array *q, *k, *v, *tables, *lens;
} paged_args;

static void run_paged(void *p) {
  paged_args *x = p;
  nv_array *y =
      nv_fast_paged_attention(x->q, x->k, x->v, x->tables, x->lens, 0.08838834764831845f);
  check(nv_eval1(y), "paged_attention");
  nv_release(y);
}

/* The keys [B, H, L, D] of a contiguous cache as a pool of blocks of `bs` tokens,
 * [B L / bs, bs, H, D], block n of batch b at pool block n B + b (blocks of the batches
 * interleaved, as an allocator hands them out), evaluated. */
static nv_array *as_pool(const nv_array *k, int bs) {
  const int *s = nv_array_shape(k);
  int B = s[0], H = s[1], L = s[2], D = s[3];
  int split[5] = {B, H, L / bs, bs, D}, perm[5] = {2, 0, 3, 1, 4}, pool[4] = {L / bs * B, bs, H, D};
  nv_array *r = nv_reshape(k, split, 5), *t = nv_transpose(r, perm, 5);
  nv_array *c = nv_contiguous(t), *p = nv_reshape(c, pool, 4);
  nv_release(r), nv_release(t), nv_release(c);
  check(nv_eval1(p), "paged pool");
  return p;
}

static void run_sdpa(void *p) {
  args *x = p;
  nv_array *y = nv_fast_scaled_dot_product_attention(x->a, x->b, x->c, 0.08838834764831845f,
                                                     x->n ? "causal" : NULL, NULL, NULL);
  check(nv_eval1(y), "scaled_dot_product_attention");
  nv_release(y);
}

/* quantized_matmul of x (a) with 4-bit affine weights (b packed, c scales, n: the biases held
 * in qb), group 64, transposed as a model's linear layer. */
static nv_array *qb;
static void run_qmm(void *p) {
  args *x = p;
  nv_array *y = nv_quantized_matmul(x->a, x->b, x->c, qb, true, 64, 4, "affine");
  check(nv_eval1(y), "quantized_matmul");
  nv_release(y);
}

/* gather_qmm of x (a) with 4-bit affine experts (b packed, c scales; gq_bias the biases),
 * group 64, transposed, at the pairs' expert indices gq_rhs; n: sorted_indices. */
static nv_array *gq_bias, *gq_rhs;
static void run_gather_qmm(void *p) {
  args *x = p;
  nv_array *y = nv_gather_qmm(x->a, x->b, x->c, gq_bias, NULL, gq_rhs, true, 64, 4, "affine",
                              x->n != 0);
  check(nv_eval1(y), "gather_qmm");
  nv_release(y);
}

/* 1000 dependent tiny ops: y = y * s + t on a 16-element array, evaluated at the end. */
static void run_tiny(void *p) {
  args *x = p;
  nv_array *y = nv_retain(x->a);
  for (int i = 0; i < x->n; i++) {
    nv_array *z = i % 2 ? nv_multiply(y, x->b) : nv_add(y, x->c);
    nv_release(y);
    y = z;
  }
  check(nv_eval1(y), "tiny");
  nv_release(y);
}

/* rfft of every row (issue 20's rfft 64 x 65536 float32 row). */
static void run_rfft(void *p) {
  args *x = p;
  nv_array *y = nv_fft_rfft(x->a, NULL, -1, NV_FFT_NORM_BACKWARD);
  check(nv_eval1(y), "rfft");
  nv_release(y);
}

/* The same chain built and dropped without evaluating: the graph-building share. */
static void run_tiny_build(void *p) {
  args *x = p;
  nv_array *y = nv_retain(x->a);
  for (int i = 0; i < x->n; i++) {
    nv_array *z = i % 2 ? nv_multiply(y, x->b) : nv_add(y, x->c);
    nv_release(y);
    y = z;
  }
  nv_release(y);
}

/* The per-op rows of BASELINES.md's "PyTorch per-op" table (issue 16): x->n picks the op. */
enum { OP_ARGMAX, OP_CUMSUM, OP_LOGSUMEXP, OP_ADD_ROW, OP_ADD_T, OP_CONCAT, OP_SORT, OP_TOPK8,
       OP_TAKE };

static void run_op(void *p) {
  args *x = p;
  nv_array *y = NULL;
  int ax = x->axis, perm[3] = {0, 2, 1};
  switch (x->n) {
    case OP_ARGMAX: y = nv_argmax(x->a, &ax, false); break;
    case OP_CUMSUM: y = nv_cumsum(x->a, &ax, false, true); break;
    case OP_LOGSUMEXP: y = nv_logsumexp(x->a, &ax, 1, false); break;
    case OP_ADD_ROW: y = nv_add(x->a, x->b); break;
    case OP_ADD_T: {
      nv_array *t = nv_transpose(x->a, perm, 3);
      y = nv_add(x->a, t);
      nv_release(t);
      break;
    }
    case OP_CONCAT: {
      const nv_array *xs[2] = {x->a, x->a};
      y = nv_concatenate(xs, 2, 1);
      break;
    }
    case OP_SORT: y = nv_sort(x->a, &ax); break;
    case OP_TOPK8: y = nv_topk(x->a, 8, &ax); break;
    case OP_TAKE: y = nv_take_flat(x->a, x->b); break;
  }
  check(nv_eval1(y), "op");
  nv_release(y);
}

/* The MLP training step of BASELINES.md: 4 x (4096 -> 4096, GELU), batch 4096, float32
 * parameters with bfloat16 products (as torch's bf16 autocast), mean squared error, AdamW. */
enum { MLP_LAYERS = 4, MLP_WIDTH = 4096, MLP_BATCH = 4096 };

static nv_status mlp_loss(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  nv_array *h = nv_astype(nv_vec_get(in, 2 * MLP_LAYERS), NV_DTYPE_BFLOAT16);
  for (int l = 0; l < MLP_LAYERS; l++) {
    nv_array *w = nv_astype(nv_vec_get(in, 2 * (size_t)l), NV_DTYPE_BFLOAT16);
    nv_array *b = nv_astype(nv_vec_get(in, 2 * (size_t)l + 1), NV_DTYPE_BFLOAT16);
    h = nv_add(nv_matmul(h, w), b);
    /* GELU (erf form): 0.5 h (1 + erf(h / sqrt 2)) */
    h = nv_multiply(nv_multiply_scalar(h, 0.5),
                    nv_add_scalar(nv_erf(nv_multiply_scalar(h, 0.70710678118654752)), 1));
  }
  nv_array *d = nv_subtract(nv_astype(h, NV_DTYPE_FLOAT32), nv_vec_get(in, 2 * MLP_LAYERS + 1));
  return nv_vec_push(out, nv_mean(nv_multiply(d, d), NULL, 0, false));
}

typedef struct mlp {
  nv_closure *vg;
  nv_optimizer *opt;
  nv_map *params;
  nv_array *x, *y;
} mlp;

static void run_mlp(void *p) {
  mlp *m = p;
  nv_scope_begin();
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  for (size_t i = 0; i < nv_map_size(m->params); i++) nv_vec_push(in, nv_map_value(m->params, i));
  nv_vec_push(in, m->x);
  nv_vec_push(in, m->y);
  check(nv_closure_apply(m->vg, in, out), "value_and_grad");
  nv_map *grads = nv_map_new(), *np = NULL;
  for (size_t i = 0; i < nv_map_size(m->params); i++)
    nv_map_set(grads, nv_map_key(m->params, i), nv_vec_get(out, 1 + i));
  check(nv_optimizer_update(m->opt, m->params, grads, &np), "adamw");
  const nv_map *maps[2] = {np, nv_optimizer_state(m->opt)};
  nv_vec *all = nv_vec_new();
  nv_vec_push(all, nv_vec_get(out, 0));
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < nv_map_size(maps[k]); i++) nv_vec_push(all, nv_map_value(maps[k], i));
  /* The old parameters dropped before the step runs, as MLX's model.update(...) then
   * mx.eval(...) does: the AdamW updates then write the parameters and their state in place
   * (PyTorch's optimizer updates in place too). NUVEC_BENCH_MLP_KEEP=1 keeps them through the
   * evaluation instead (new buffers every step), for the comparison. */
  static int keep = -1;
  if (keep < 0) keep = getenv("NUVEC_BENCH_MLP_KEEP") && atoi(getenv("NUVEC_BENCH_MLP_KEEP"));
  nv_map *old = m->params;
  if (keep) check(nv_eval_vec(all), "mlp step");
  nv_map_free(old);
  m->params = np;
  nv_map_free(grads);
  nv_vec_free(in);
  nv_vec_free(out);
  if (!keep) check(nv_eval_vec(all), "mlp step");
  nv_vec_free(all);
  nv_scope_end();
}

int main(int argc, char **argv) {
  only = argc > 1 ? argv[1] : NULL;
  if (!nv_device_is_available(nv_gpu(0))) {
    fprintf(stderr, "no GPU\n");
    return 77;
  }
  nv_set_default_device(nv_gpu(0));
/* A group runs when its name contains the filter or the filter names one of its cases (starts
 * with the group's name); bench_case skips the cases whose names do not contain the filter. */
#define WANT(name) wanted(name)
  if (WANT("fma_2^28_f32")) {
    int shape[1] = {1 << 28};
    args x = {rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32), rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32),
              rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32), 0, 0};
    diag("inputs");
    bench_case("fma_2^28_f32", run_fma, &x, 3, 20);
    bench_compiled("fma_2^28_f32_compiled", fma_body, &x, 3, 20);
    nv_release(x.a), nv_release(x.b), nv_release(x.c);
  }
  if (WANT("softmax_bf16_32768x4096")) {
    int shape[2] = {32768, 4096};
    args x = {rand_on_gpu(shape, 2, NV_DTYPE_BFLOAT16), NULL, NULL, 0, 0};
    diag("inputs");
    bench_case("softmax_bf16_32768x4096", run_softmax, &x, 3, 20);
    nv_release(x.a);
  }
  if (WANT("fast_")) {
    int shape[2] = {32768, 4096}, ws[1] = {4096}, rs[4] = {8, 32, 4096, 128};
    args x = {rand_on_gpu(shape, 2, NV_DTYPE_BFLOAT16), rand_on_gpu(ws, 1, NV_DTYPE_BFLOAT16),
              rand_on_gpu(ws, 1, NV_DTYPE_BFLOAT16), 0, FAST_RMS};
    diag("inputs");
    bench_case("fast_rms_norm_bf16_32768x4096", run_fast, &x, 3, 20);
    x.n = FAST_LAYER;
    bench_case("fast_layer_norm_bf16_32768x4096", run_fast, &x, 3, 20);
    nv_release(x.a), nv_release(x.b), nv_release(x.c);
    x.a = rand_on_gpu(rs, 4, NV_DTYPE_BFLOAT16);
    x.b = NULL;
    x.c = nv_array_scalar(7, NV_DTYPE_INT32);
    x.n = FAST_ROPE;
    bench_case("fast_rope_bf16_8x32x4096x128", run_fast, &x, 3, 20);
    nv_release(x.a), nv_release(x.c);
  }
  if (WANT("fast_state_")) {
    int xs[3] = {32768, 32, 128}, ws[1] = {128};
    args x = {rand_on_gpu(xs, 3, NV_DTYPE_BFLOAT16), rand_on_gpu(ws, 1, NV_DTYPE_BFLOAT16),
              NULL, 0, 0};
    x.c = nv_arange(0, 32768, 1, NV_DTYPE_INT32);
    diag("inputs");
    bench_case("fast_state_norm_rope_bf16_32768x32x128", run_norm_rope, &x, 3, 20);
    nv_release(x.a), nv_release(x.b), nv_release(x.c);
    int qs[4] = {64, 1, 32, 128}, gs[3] = {64, 1, 32}, pools[4] = {64, 32, 128, 128};
    delta_args d = {.pool = rand_on_gpu(pools, 4, NV_DTYPE_FLOAT32)};
    for (int i = 0; i < 3; i++) d.in[i] = rand_on_gpu(qs, 4, NV_DTYPE_BFLOAT16);
    nv_array *k = d.in[1];
    d.in[1] = nv_multiply_scalar(k, 0.1); /* |k|^2 beta < 2: the delta rule stays stable */
    nv_release(k);
    nv_array *g = rand_on_gpu(gs, 3, NV_DTYPE_FLOAT32);
    d.in[3] = nv_multiply_scalar(g, 0.01); /* small log-decays: the states stay bounded */
    nv_release(g);
    d.in[4] = rand_on_gpu(gs, 3, NV_DTYPE_FLOAT32);
    d.in[5] = nv_arange(0, 64, 1, NV_DTYPE_INT32);
    diag("inputs");
    bench_case("fast_state_gated_delta_decode_b64h32d128_f32", run_gated_delta, &d, 3, 20);
    nv_release(d.pool);
    for (int i = 0; i < 6; i++) nv_release(d.in[i]);
  }
  if (WANT("sum_axis")) {
    int shape[3] = {64, 1024, 1024};
    args x = {rand_on_gpu(shape, 3, NV_DTYPE_FLOAT32), NULL, NULL, 0, 0};
    const char *names[3] = {"sum_axis0_64x1024x1024_f32", "sum_axis1_64x1024x1024_f32",
                            "sum_axis2_64x1024x1024_f32"};
    for (int a = 0; a < 3; a++) {
      x.axis = a;
      bench_case(names[a], run_sum, &x, 3, 20);
    }
    nv_release(x.a);
  }
  if (WANT("matmul_bf16_8192")) {
    int shape[2] = {8192, 8192};
    args x = {rand_on_gpu(shape, 2, NV_DTYPE_BFLOAT16), rand_on_gpu(shape, 2, NV_DTYPE_BFLOAT16),
              NULL, 0, 0};
    diag("inputs");
    bench_case("matmul_bf16_8192", run_matmul, &x, 3, 10);
    nv_release(x.a), nv_release(x.b);
  }
  if (WANT("matmul_f32_4096")) {
    int shape[2] = {4096, 4096};
    args x = {rand_on_gpu(shape, 2, NV_DTYPE_FLOAT32), rand_on_gpu(shape, 2, NV_DTYPE_FLOAT32),
              NULL, 0, 0};
    bench_case("matmul_f32_4096", run_matmul, &x, 3, 10);
    nv_release(x.a), nv_release(x.b);
  }
  if (WANT("conv2d_bf16_32x56x56x64")) {
    int xs[4] = {32, 56, 56, 64}, ws[4] = {64, 3, 3, 64};
    args x = {rand_on_gpu(xs, 4, NV_DTYPE_BFLOAT16), rand_on_gpu(ws, 4, NV_DTYPE_BFLOAT16), NULL,
              0, 0};
    diag("inputs");
    bench_case("conv2d_bf16_32x56x56x64", run_conv2d, &x, 5, 20);
    nv_release(x.a), nv_release(x.b);
  }
  if (WANT("sdpa_") || WANT("paged_decode_b8h32L4096d128_bf16")) {
    /* bf16, b8 h32 d128: causal prefill over 4096 tokens, and one decode step over a 4096-key
     * cache (the rows). */
    int qs[4] = {8, 32, 4096, 128}, q1[4] = {8, 32, 1, 128};
    args x = {rand_on_gpu(qs, 4, NV_DTYPE_BFLOAT16), rand_on_gpu(qs, 4, NV_DTYPE_BFLOAT16),
              rand_on_gpu(qs, 4, NV_DTYPE_BFLOAT16), 0, 1};
    diag("inputs");
    if (WANT("sdpa_causal_prefill_b8h32L4096d128_bf16"))
      bench_case("sdpa_causal_prefill_b8h32L4096d128_bf16", run_sdpa, &x, 3, 10);
    nv_release(x.a);
    x.a = rand_on_gpu(q1, 4, NV_DTYPE_BFLOAT16);
    x.n = 0;
    if (WANT("sdpa_decode_b8h32L4096d128_bf16"))
      bench_case("sdpa_decode_b8h32L4096d128_bf16", run_sdpa, &x, 5, 30);
    if (WANT("paged_decode_b8h32L4096d128_bf16")) {
      /* the same q, k and v, the keys in a paged cache of 16-token blocks (the bar:
       * within 10% of the SDPA decode above) */
      int q3[3] = {8, 32, 128}, ts[2] = {8, 256}, ls[1] = {8};
      int32_t tables[8 * 256], lens[8];
      for (int b = 0; b < 8; b++) {
        lens[b] = 4096;
        for (int n = 0; n < 256; n++) tables[b * 256 + n] = n * 8 + b;
      }
      paged_args pa = {nv_reshape(x.a, q3, 3), as_pool(x.b, 16), as_pool(x.c, 16),
                       nv_array_from_data(tables, ts, 2, NV_DTYPE_INT32),
                       nv_array_from_data(lens, ls, 1, NV_DTYPE_INT32)};
      diag("inputs");
      bench_case("paged_decode_b8h32L4096d128_bf16", run_paged, &pa, 5, 30);
      nv_release(pa.q), nv_release(pa.k), nv_release(pa.v), nv_release(pa.tables),
          nv_release(pa.lens);
    }
    nv_release(x.a), nv_release(x.b), nv_release(x.c);
  }
  {
    /* Decode (M = 1) and prefill (M = 4096) against torch's bf16 matmul with the dense weights. */
    const int ns[2] = {4096, 14336}, ms[3] = {1, 1, 4096};
    const char *names[3] = {"qmm_decode_4bit_4096x4096", "qmm_decode_4bit_14336x4096",
                            "qmm_prefill_4bit_4096x4096"};
    for (int c = 0; c < 3; c++) {
      if (!WANT(names[c])) continue;
      int ws[2] = {ns[c == 1], 4096}, xs[2] = {ms[c], 4096};
      nv_array *w = rand_on_gpu(ws, 2, NV_DTYPE_BFLOAT16);
      nv_vec *v = nv_vec_new();
      check(nv_quantize(w, 64, 4, "affine", v), "quantize");
      check(nv_eval(nv_vec_data(v), nv_vec_size(v)), "quantize");
      args x = {rand_on_gpu(xs, 2, NV_DTYPE_BFLOAT16), nv_vec_get(v, 0), nv_vec_get(v, 1), 0, 0};
      qb = nv_vec_get(v, 2);
      diag("inputs");
      bench_case(names[c], run_qmm, &x, 5, c == 2 ? 10 : 50);
      nv_release(x.a), nv_release(w);
      nv_vec_free(v);
    }
  }
  if (WANT("gather_qmm_moe_8of64") || WANT("qmm_dense_moe_8of64")) {
    /* An 8-of-64 MoE layer (N = 14336, K = 4096 per expert, 4-bit affine, group 64): one token
     * (8 pairs: experts 0, 8, .., 56) and 32 tokens routed 4 to each expert (256 pairs sorted
     * by expert, x's rows in that order), each beside the dense quantized_matmul of the same
     * active weights: the 8 (64) experts' matrices as one of 8 (64) x 14336 rows, with 1 (4)
     * rows of x. The 64 experts are one quantized random matrix tiled (the timing does not
     * depend on the values). */
    enum { E = 64, N = 14336, K = 4096 };
    int ws[2] = {N, K};
    nv_array *w = rand_on_gpu(ws, 2, NV_DTYPE_BFLOAT16);
    nv_vec *v = nv_vec_new();
    check(nv_quantize(w, 64, 4, "affine", v), "quantize");
    nv_array *ex[3];
    for (int i = 0; i < 3; i++) {
      int reps[3] = {E, 1, 1};
      /* Made contiguous: tile's result is a view of one matrix, and gather_qmm would copy the
       * whole stack of 64 at each call (820 us on the H200) where a loaded model's is one. */
      nv_array *t = nv_tile(nv_vec_get(v, (size_t)i), reps, 3);
      ex[i] = nv_contiguous(t);
      nv_release(t);
    }
    check(nv_eval(ex, 3), "tile");
    nv_vec_free(v);
    nv_release(w);
    const char *gnames[2] = {"gather_qmm_moe_8of64_t1", "gather_qmm_moe_8of64_t32"};
    const char *dnames[2] = {"qmm_dense_moe_8of64_t1", "qmm_dense_moe_8of64_t32"};
    for (int c = 0; c < 2; c++) {
      int pairs = c ? 256 : 8, active = c ? E : 8, rows = c ? 4 : 1;
      uint32_t idx[256];
      for (int l = 0; l < pairs; l++) idx[l] = (uint32_t)(c ? l / 4 : l * 8);
      int ishape[2] = {c ? pairs : 1, c ? 1 : pairs}; /* t1: (1, 8); t32: (256, 1) */
      nv_array *ih = nv_array_from_data(idx, ishape, 2, NV_DTYPE_UINT32);
      gq_rhs = nv_copy(ih); /* moved to the GPU (uint32 kept: adding a scalar made it float32) */
      check(nv_eval1(gq_rhs), "indices");
      nv_release(ih);
      int xs[4] = {c ? pairs : 1, 1, 1, K}; /* x (T, 1, 1, K) as MLX's MoE layers call it */
      args x = {rand_on_gpu(xs, 4, NV_DTYPE_BFLOAT16), ex[0], ex[1], 0, c};
      gq_bias = ex[2];
      diag("inputs");
      if (WANT(gnames[c])) bench_case(gnames[c], run_gather_qmm, &x, 5, 30);
      nv_release(x.a), nv_release(gq_rhs);
      if (WANT(dnames[c])) {
        /* The first `active` experts as one matrix (contiguous: a prefix of the stack). */
        nv_array *d[3];
        for (int i = 0; i < 3; i++) {
          const int *sh = nv_array_shape(ex[i]);
          int start[3] = {0, 0, 0}, stop[3] = {active, sh[1], sh[2]}, step[3] = {1, 1, 1};
          nv_array *sl = nv_slice(ex[i], start, stop, step, 3);
          int flat[2] = {active * sh[1], sh[2]};
          d[i] = nv_reshape(sl, flat, 2);
          nv_release(sl);
        }
        check(nv_eval(d, 3), "dense weights");
        int x2[2] = {rows, K};
        args y = {rand_on_gpu(x2, 2, NV_DTYPE_BFLOAT16), d[0], d[1], 0, 0};
        qb = d[2];
        diag("inputs");
        bench_case(dnames[c], run_qmm, &y, 5, 30);
        nv_release(y.a);
        for (int i = 0; i < 3; i++) nv_release(d[i]);
      }
    }
    for (int i = 0; i < 3; i++) nv_release(ex[i]);
  }
  if (WANT("tiny_1000") || WANT("eval_roundtrip")) {
    int shape[1] = {16};
    args x = {rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32), rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32),
              rand_on_gpu(shape, 1, NV_DTYPE_FLOAT32), 0, 1000};
    diag("inputs");
    bench_case("tiny_1000_ops", run_tiny, &x, 5, 30);
    /* One tiny operation per evaluation: the whole per-evaluation cost (record, replay check,
     * launch, completion observed), beside torch's launch + synchronize of the same op. */
    x.n = 1;
    bench_case("eval_roundtrip_1op", run_tiny, &x, 20, 64);
    x.n = 1000;
    bench_case("tiny_1000_ops_build_only", run_tiny_build, &x, 5, 30);
    bench_compiled("tiny_1000_ops_compiled", tiny_body, &x, 5, 30);
    nv_release(x.a), nv_release(x.b), nv_release(x.c);
  }
  if (WANT("ops_")) {
    int shape[3] = {64, 1024, 1024};
    args x = {rand_on_gpu(shape, 3, NV_DTYPE_FLOAT32), NULL, NULL, 0, 0};
    char name[64];
    for (int a = 0; a < 3; a++) {
      x.axis = a, x.n = OP_ARGMAX;
      snprintf(name, sizeof name, "ops_argmax_axis%d", a);
      bench_case(name, run_op, &x, 3, 20);
    }
    for (int a = 2; a >= 1; a--) {
      x.axis = a, x.n = OP_CUMSUM;
      snprintf(name, sizeof name, "ops_cumsum_axis%d", a);
      bench_case(name, run_op, &x, 3, 20);
    }
    x.axis = 2, x.n = OP_LOGSUMEXP;
    bench_case("ops_logsumexp_axis2", run_op, &x, 3, 20);
    int zero[3] = {0, 0, 0}, one[3] = {1, 1, 1024}, step[3] = {1, 1, 1};
    nv_array *row3 = nv_slice(x.a, zero, one, step, 3), *row = nv_reshape(row3, one + 2, 1);
    x.b = row, x.n = OP_ADD_ROW;
    bench_case("ops_add_broadcast_row", run_op, &x, 3, 20);
    nv_release(row3), nv_release(row);
    x.n = OP_ADD_T;
    bench_case("ops_add_transposed", run_op, &x, 3, 20);
    x.n = OP_CONCAT;
    bench_case("ops_concatenate_axis1", run_op, &x, 3, 20);
    nv_release(x.a);
    int vs[1] = {1 << 26}, ms[2] = {16384, 4096}, is[1] = {1 << 24};
    x.a = rand_on_gpu(vs, 1, NV_DTYPE_FLOAT32);
    x.axis = 0, x.n = OP_SORT;
    bench_case("ops_sort_2^26", run_op, &x, 2, 10);
    nv_array *u = rand_on_gpu(is, 1, NV_DTYPE_FLOAT32); /* in [-1, 1): indices in [0, 2^26) */
    nv_array *su = nv_multiply_scalar(nv_add_scalar(u, 1), (double)(1 << 25));
    x.b = nv_astype(su, NV_DTYPE_INT32);
    check(nv_eval1(x.b), "indices");
    x.n = OP_TAKE;
    bench_case("ops_take_2^24_of_2^26", run_op, &x, 3, 20);
    nv_release(u), nv_release(su), nv_release(x.b), nv_release(x.a);
    x.a = rand_on_gpu(ms, 2, NV_DTYPE_FLOAT32);
    x.axis = 1, x.n = OP_SORT;
    bench_case("ops_sort_rows_16384x4096", run_op, &x, 2, 10);
    x.n = OP_TOPK8;
    bench_case("ops_topk8_rows_16384x4096", run_op, &x, 3, 20);
    nv_release(x.a);
  }
  if (WANT("fft_rfft_64x65536_f32")) {
    int shape[2] = {64, 65536};
    args x = {rand_on_gpu(shape, 2, NV_DTYPE_FLOAT32), NULL, NULL, 0, 0};
    bench_case("fft_rfft_64x65536_f32", run_rfft, &x, 5, 50);
    nv_release(x.a);
  }
  if (WANT("linalg_")) {
    /* The decompositions: cholesky and inv of a 4096 float64 matrix (symmetric positive
     * definite: a aᵀ + n I), the full SVD of a 2048 float32 one. */
    int s4[2] = {4096, 4096}, s2[2] = {2048, 2048};
    nv_array *a = rand_on_gpu(s4, 2, NV_DTYPE_FLOAT64);
    nv_array *at = nv_swapaxes(a, 0, 1), *aat = nv_matmul(a, at);
    nv_array *id = nv_eye(4096, 4096, 0, NV_DTYPE_FLOAT64), *nid = nv_multiply_scalar(id, 4096);
    args x = {nv_add(aat, nid), NULL, NULL, 0, LINALG_CHOLESKY};
    check(nv_eval1(x.a), "spd input");
    bench_case("linalg_cholesky_f64_4096", run_linalg, &x, 2, 10);
    x.n = LINALG_INV;
    bench_case("linalg_inv_f64_4096", run_linalg, &x, 2, 10);
    nv_release(x.a), nv_release(a), nv_release(at), nv_release(aat), nv_release(id), nv_release(nid);
    x.a = rand_on_gpu(s2, 2, NV_DTYPE_FLOAT32);
    x.n = LINALG_SVD;
    bench_case("linalg_svd_f32_2048", run_linalg, &x, 1, 3);
    nv_release(x.a);
  }
  if (WANT("mlp_train")) {
    mlp m = {0};
    m.params = nv_map_new();
    char key[16];
    for (int l = 0; l < MLP_LAYERS; l++) {
      int ws[2] = {MLP_WIDTH, MLP_WIDTH}, bs[1] = {MLP_WIDTH};
      nv_array *w = rand_on_gpu(ws, 2, NV_DTYPE_FLOAT32), *b = rand_on_gpu(bs, 1, NV_DTYPE_FLOAT32);
      nv_array *ws_ = nv_multiply_scalar(w, 1.0 / 64), *bs_ = nv_multiply_scalar(b, 0.01);
      snprintf(key, sizeof key, "w%d", l);
      nv_map_set(m.params, key, ws_);
      snprintf(key, sizeof key, "b%d", l);
      nv_map_set(m.params, key, bs_);
      nv_release(w), nv_release(b), nv_release(ws_), nv_release(bs_);
    }
    int xs[2] = {MLP_BATCH, MLP_WIDTH};
    m.x = rand_on_gpu(xs, 2, NV_DTYPE_FLOAT32);
    m.y = rand_on_gpu(xs, 2, NV_DTYPE_FLOAT32);
    nv_closure *f = nv_closure_new(mlp_loss, NULL, NULL);
    int argn[2 * MLP_LAYERS];
    for (int i = 0; i < 2 * MLP_LAYERS; i++) argn[i] = i;
    m.vg = nv_value_and_grad(f, argn, 2 * MLP_LAYERS);
    nv_adam_options ao = nv_adamw_defaults(1e-4);
    check(nv_optimizer_adamw(&ao, &m.opt), "adamw");
    diag("inputs");
    bench_case("mlp_train_4x4096_bf16", run_mlp, &m, 3, 10);
    /* The same step with the loss and its gradients compiled (the GELU chains and their
     * backward fused; the bar: <= 0.9 x torch's eager step). */
    nv_closure *eager = m.vg;
    m.vg = nv_compile(eager, NULL);
    if (!m.vg) check(NV_ERR_INVALID_ARGUMENT, "nv_compile");
    bench_case("mlp_train_4x4096_bf16_compiled", run_mlp, &m, 3, 10);
    nv_closure_release(m.vg);
    m.vg = eager;
    nv_optimizer_free(m.opt);
    nv_map_free(m.params);
    nv_release(m.x), nv_release(m.y);
  }
  /* The compiled rows added last: a failing case exits, and the others have run. */
  if (WANT("fma_2^28_bf16")) {
    /* float16/bfloat16 fusion: computed in float32, rounded after each operation, 8 elements
     * a step through 16-byte loads */
    int shape[1] = {1 << 28};
    args x = {rand_on_gpu(shape, 1, NV_DTYPE_BFLOAT16), rand_on_gpu(shape, 1, NV_DTYPE_BFLOAT16),
              rand_on_gpu(shape, 1, NV_DTYPE_BFLOAT16), 0, 0};
    diag("inputs");
    bench_case("fma_2^28_bf16", run_fma, &x, 3, 20);
    bench_compiled("fma_2^28_bf16_compiled", fma_body, &x, 3, 20);
    nv_release(x.a), nv_release(x.b), nv_release(x.c);
  }
  if (WANT("row_chain_16384x4096_f32")) {
    /* The bar: the compiled chain at >= 80% of the copy's rate (bytes moved per second:
     * the chain reads 256 MiB, the copy reads and writes them), so its time <= 0.625 x the
     * copy's. */
    int shape[2] = {16384, 4096}, row[1] = {4096};
    args x = {rand_on_gpu(shape, 2, NV_DTYPE_FLOAT32), rand_on_gpu(row, 1, NV_DTYPE_FLOAT32),
              rand_on_gpu(row, 1, NV_DTYPE_FLOAT32), 0, 0};
    diag("inputs");
    bench_case("row_chain_16384x4096_f32_copy", run_copy, &x, 3, 20);
    bench_compiled("row_chain_16384x4096_f32_compiled", row_chain_body, &x, 3, 20);
    nv_release(x.a), nv_release(x.b), nv_release(x.c);
  }
  sync_gpu();
  printf("fallbacks %zu\n", nv_gpu_fallback_count());
  return 0;
}
