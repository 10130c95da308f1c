/* Transforms, releases and scopes across threads (a plain executable, so it also runs under
 * ThreadSanitizer, and under AddressSanitizer with its leak checker):
 * - outputs of a finished transform are not tracers: a later transform does not keep their
 *   graph, and they can be donated like any array;
 * - a tracer of a transform still running, evaluated on another thread, keeps its graph for
 *   the transform's backward pass;
 * - an array a scope owns may be released from another thread: the owner's nv_scope_end does
 *   not release it again, and another thread's nv_scope_keep leaves it where it is;
 * - a thread that opened scopes frees its scope stack when it exits (and ends scopes it left
 *   open);
 * - the stress: 16 threads over shared parameters, each running grad and value_and_grad,
 *   evaluating shared graphs built from the other threads' gradients, releasing arrays made
 *   by other threads (scope-owned ones too), with values checked and every buffer given back.
 * NUVEC_TEST_THREAD_ITERS bounds the stress (rounds = ITERS / 5, at least 2). */
#include <pthread.h>

#include "testutil.h"

#define ITERS_DEFAULT 1000

long nv__test_live_scope_stacks(void);

/* ---- Functions ---- */

/* sum(exp(x)): its gradient exp(x) is a fresh multiply output (donatable once evaluated). */
static nv_status sum_exp(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  return nv_vec_push(out, nv_sum(nv_exp(nv_vec_get(in, 0)), NULL, 0, false));
}

/* loss(p, x) = sum((p * x + s)^2) with s the payload (a shared array, borrowed). */
static nv_status loss_fn(void *payload, const nv_vec *in, nv_vec *out) {
  nv_array *s = payload, *p = nv_vec_get(in, 0), *x = nv_vec_get(in, 1);
  return nv_vec_push(out, nv_sum(nv_square(nv_add(nv_multiply(p, x), s)), NULL, 0, false));
}

/* Applies `f` to (a) or (a, b); the outputs in a new list. */
static nv_vec *apply(nv_closure *f, nv_array *a, nv_array *b) {
  nv_vec *in = nv_vec_new(), *out = nv_vec_new();
  CHECK(in && out, "out of memory");
  nv_vec_push(in, a);
  if (b) nv_vec_push(in, b);
  nv_status s = nv_closure_apply(f, in, out);
  CHECK(s == NV_OK, "apply: %s", nv_last_error());
  nv_vec_free(in);
  return out;
}

static nv_array *grad_of(nv_closure_fn fn, void *payload, nv_array *a, nv_array *b) {
  nv_closure *f = nv_closure_new(fn, payload, NULL);
  nv_closure *g = nv_grad(f, NULL, 0);
  nv_vec *out = apply(g, a, b);
  nv_array *r = nv_retain(nv_vec_get(out, 0));
  nv_vec_free(out);
  nv_closure_release(g);
  nv_closure_release(f);
  return r;
}

/* ---- Outputs of a finished transform are not tracers ---- */

static nv_array *stale;  /* a gradient from an earlier grad, unevaluated */
static int stale_state;  /* its node state right after evaluating it inside another grad */

static nv_status eval_stale(void *payload, const nv_vec *in, nv_vec *out) {
  (void)payload;
  CHECK(nv_eval1(stale) == NV_OK, "%s", nv_last_error());
  stale_state = nv__test_state(stale);
  return nv_vec_push(out, nv_sum(nv_vec_get(in, 0), NULL, 0, false));
}

static void finished_transform_outputs_are_not_tracers(void) {
  float v[4] = {0.5f, -1, 2, 0.25f}, got[4];
  nv_array *x = f32v(v, 4);
  /* A later transform evaluating an earlier gradient computes it as any array: Done and
   * detached, not kept (Retained) for a trace it does not belong to. */
  stale = grad_of(sum_exp, NULL, x, NULL);
  nv_array *g2 = grad_of(eval_stale, NULL, x, NULL);
  CHECK(stale_state == NV__DONE, "state %d inside the later grad (Retained = %d)", stale_state,
        NV__RETAINED);
  CHECK(nv_array_read(stale, got, sizeof got) == NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 4; i++) CHECK(fabsf(got[i] - expf(v[i])) < 1e-5f, "grad %d", i);
  nv_release(g2);
  nv_release(stale);
  /* A gradient's buffer may be donated to the op consuming it once no one else holds it. */
  nv_array *g = grad_of(sum_exp, NULL, x, NULL);
  nv_array *y = nv_multiply_scalar(g, 2);
  nv_release(g);
  long before = nv__test_donations();
  CHECK(nv_array_read(y, got, sizeof got) == NV_OK, "%s", nv_last_error());
  CHECK(nv__test_donations() > before, "the gradient's buffer was not donated");
  for (int i = 0; i < 4; i++) CHECK(fabsf(got[i] - 2 * expf(v[i])) < 1e-5f, "2 grad %d", i);
  nv_release(y);
  nv_release(x);
}

/* ---- A running transform's tracer evaluated on another thread ---- */

static nv_array *escaped; /* an intermediate of a function being traced */

static void *eval_escaped(void *arg) {
  const float *v = arg;
  float got[4];
  nv_array *z = nv_multiply_scalar(escaped, 2);
  CHECK(nv_array_read(z, got, sizeof got) == NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 4; i++) CHECK(fabsf(got[i] - 2 * expf(v[i])) < 1e-5f, "z[%d]", i);
  nv_release(z);
  return NULL;
}

static nv_status exp_evaluated_elsewhere(void *payload, const nv_vec *in, nv_vec *out) {
  escaped = nv_exp(nv_vec_get(in, 0));
  pthread_t th;
  pthread_create(&th, NULL, eval_escaped, payload);
  pthread_join(th, NULL);
  return nv_vec_push(out, nv_sum(escaped, NULL, 0, false));
}

/* Another thread evaluating a tracer of a transform still running keeps its inputs (the
 * transform walks them afterwards) and does not donate them. */
static void tracer_evaluated_on_another_thread(void) {
  float v[4] = {0.5f, -1, 2, 0.25f}, got[4];
  nv_array *x = f32v(v, 4);
  nv_array *g = grad_of(exp_evaluated_elsewhere, v, x, NULL);
  CHECK(nv_array_read(g, got, sizeof got) == NV_OK, "%s", nv_last_error());
  for (int i = 0; i < 4; i++)
    CHECK(fabsf(got[i] - expf(v[i])) < 1e-5f, "grad[%d] = %g, want %g", i, got[i], expf(v[i]));
  nv_release(g);
  nv_release(x);
}

/* ---- Releasing scope-owned arrays from another thread ---- */

typedef struct foreign {
  nv_array *release, *keep, *kept;
  bool in_scope;
} foreign;

static void *foreign_thread(void *arg) {
  foreign *f = arg;
  if (f->in_scope) CHECK(nv_scope_begin() == NV_OK, "%s", nv_last_error());
  /* A scope of this thread at the same depth holds an array of its own. */
  nv_array *mine = f->in_scope ? nv_array_float(3) : NULL;
  f->kept = nv_scope_keep(f->keep);
  nv_release(f->release);
  if (f->in_scope) {
    float got;
    CHECK(nv_array_item_float(mine, &got) == NV_OK && got == 3, "own array");
    nv_scope_end();
  }
  return NULL;
}

static void scoped_array_released_from_another_thread(void) {
  for (int in_scope = 0; in_scope <= 1; in_scope++) {
    float v[3] = {1, 2, 3}, got[3];
    nv_array *a = f32v(v, 3);
    long base = nv__test_live_buffers();
    CHECK(nv_scope_begin() == NV_OK, "%s", nv_last_error());
    nv_array *x = nv_add_scalar(a, 1), *y = nv_multiply_scalar(a, 2);
    CHECK(nv_eval1(x) == NV_OK && nv_eval1(y) == NV_OK, "%s", nv_last_error());
    CHECK(nv__test_live_buffers() == base + 2, "x and y hold buffers");
    foreign f = {x, y, NULL, in_scope};
    pthread_t th;
    pthread_create(&th, NULL, foreign_thread, &f);
    pthread_join(th, NULL);
    /* The release gave x's data back at once; keep on another thread changed nothing. */
    CHECK(nv__test_live_buffers() == base + 1, "in_scope %d: %ld buffers over the base",
          in_scope, nv__test_live_buffers() - base);
    CHECK(f.kept == y, "keep returns its argument");
    CHECK(nv_array_read(y, got, sizeof got) == NV_OK, "%s", nv_last_error());
    for (int i = 0; i < 3; i++) CHECK(got[i] == 2 * v[i], "y[%d]", i);
    /* The owner's scope ends without releasing x again, and releases y (still its own). */
    (void)nv_add(y, y); /* the scope owns it too */
    nv_scope_end();
    CHECK(nv__test_live_buffers() == base, "in_scope %d: %ld buffers over the base after the "
          "scope", in_scope, nv__test_live_buffers() - base);
    nv_release(a);
  }
}

/* ---- Scope stacks are freed at thread exit ---- */

static void *scope_user(void *arg) {
  bool leave_open = arg != NULL;
  CHECK(nv_scope_begin() == NV_OK, "%s", nv_last_error());
  float v = 2, got;
  nv_array *x = nv_multiply_scalar(nv_array_float(v), 3);
  CHECK(nv_array_item_float(x, &got) == NV_OK && got == 6, "value");
  if (!leave_open) nv_scope_end();
  return NULL;
}

static void thread_exit_frees_its_scopes(void) {
  long stacks = nv__test_live_scope_stacks(), base = nv__test_live_buffers();
  pthread_t th[8];
  for (int i = 0; i < 8; i++)
    pthread_create(&th[i], NULL, scope_user, i % 4 == 3 ? (void *)1 : NULL);
  for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
  CHECK(nv__test_live_scope_stacks() == stacks, "%ld scope stacks left by exited threads",
        nv__test_live_scope_stacks() - stacks);
  CHECK(nv__test_live_buffers() == base, "%ld buffers left in scopes still open at exit",
        nv__test_live_buffers() - base);
}

/* ---- The stress ---- */

#define THREADS 16
#define N 8
#define LR 0.01

static pthread_barrier_t bar;
static int rounds;
static nv_array *P, *S;            /* the round's parameters and shift: lazy shared graphs */
static double p_host[N], s_host;   /* their expected values */
static float x_host[THREADS][N];
static nv_array *X[THREADS];
static nv_array *pub_g[THREADS];   /* each thread's gradient of the round (unevaluated) */
static nv_array *pub_h[THREADS];   /* a graph over it, for the next round's shift */
static nv_array *pub_prev[THREADS]; /* last round's pub_h, evaluated by other threads */
static nv_array *pub_scoped[THREADS]; /* owned by the publishing thread's scope */
static atomic_int failures;

static bool close_to(double got, double want, double tol) {
  return fabs(got - want) <= tol * (1 + fabs(want));
}

static void expect_vec(const char *what, int t, int r, nv_array *a, const double *want) {
  float got[N];
  if (nv_array_read(a, got, sizeof got) != NV_OK) {
    fprintf(stderr, "thread %d round %d: %s: %s\n", t, r, what, nv_last_error());
    atomic_fetch_add(&failures, 1);
    return;
  }
  for (int i = 0; i < N; i++)
    if (!close_to(got[i], want[i], 1e-3)) {
      fprintf(stderr, "thread %d round %d: %s[%d] = %g, want %g\n", t, r, what, i, got[i],
              want[i]);
      atomic_fetch_add(&failures, 1);
      return;
    }
}

static void *stress_worker(void *arg) {
  int t = (int)(intptr_t)arg;
  nv_closure *f = NULL, *g = NULL, *vg = NULL;
  for (int r = 0; r < rounds; r++) {
    pthread_barrier_wait(&bar); /* the round's P and S are published */
    double want_gp[N], want_gx[N], want_v = 0;
    for (int i = 0; i < N; i++) {
      double u = p_host[i] * x_host[t][i] + s_host;
      want_gp[i] = 2 * u * x_host[t][i];
      want_gx[i] = 2 * u * p_host[i];
      want_v += u * u;
    }
    /* A scope of this thread owns an array another thread releases. */
    CHECK(nv_scope_begin() == NV_OK, "%s", nv_last_error());
    pub_scoped[t] = nv_multiply_scalar(P, t + 1);
    /* grad and value_and_grad over the shared parameters; the loss reads the shared shift,
     * a graph over the other threads' gradients of the last round. */
    f = nv_closure_new(loss_fn, S, NULL);
    g = nv_grad(f, NULL, 0);
    vg = nv_value_and_grad(f, (int[]){0, 1}, 2);
    nv_vec *go = apply(g, P, X[t]), *vo = apply(vg, P, X[t]);
    pub_g[t] = nv_retain(nv_vec_get(go, 0));
    pub_h[t] = nv_add_scalar(nv_multiply_scalar(pub_g[t], 2), 1); /* scoped */
    nv_scope_keep(pub_h[t]);
    /* Last round's graphs of another thread, evaluated while others trace over them. */
    nv_array *prev = pub_prev[(t + 3) % THREADS];
    if (prev && nv_eval1(prev) != NV_OK) {
      fprintf(stderr, "thread %d round %d: prev: %s\n", t, r, nv_last_error());
      atomic_fetch_add(&failures, 1);
    }
    expect_vec("grad", t, r, nv_vec_get(go, 0), want_gp);
    expect_vec("value_and_grad dp", t, r, nv_vec_get(vo, 1), want_gp);
    expect_vec("value_and_grad dx", t, r, nv_vec_get(vo, 2), want_gx);
    float v;
    if (nv_array_item_float(nv_vec_get(vo, 0), &v) != NV_OK || !close_to(v, want_v, 1e-3)) {
      fprintf(stderr, "thread %d round %d: value %g, want %g (%s)\n", t, r, v, want_v,
              nv_last_error());
      atomic_fetch_add(&failures, 1);
    }
    nv_vec_free(go);
    nv_vec_free(vo);
    nv_closure_release(vg);
    nv_closure_release(g);
    nv_closure_release(f);
    pthread_barrier_wait(&bar); /* every pub_scoped is published */
    /* Another thread's scope-owned array, read and released here. */
    int o = (t + 1) % THREADS;
    double want_k[N];
    for (int i = 0; i < N; i++) want_k[i] = p_host[i] * (o + 1);
    expect_vec("scoped", t, r, pub_scoped[o], want_k);
    nv_release(pub_scoped[o]);
    pthread_barrier_wait(&bar); /* the scoped arrays are released */
    nv_scope_end();
    pthread_barrier_wait(&bar); /* the round is over */
  }
  return NULL;
}

/* Builds the next round's parameters and shift (lazy) from the threads' gradients. */
static void next_round(int r) {
  nv_array *sum = nv_retain(pub_g[0]);
  nv_array *hsum = nv_retain(pub_h[0]);
  for (int t = 1; t < THREADS; t++) {
    nv_array *a = nv_add(sum, pub_g[t]), *b = nv_add(hsum, pub_h[t]);
    nv_release(sum);
    nv_release(hsum);
    sum = a;
    hsum = b;
  }
  nv_array *step = nv_multiply_scalar(sum, LR / THREADS);
  nv_array *p = nv_subtract(P, step);
  nv_array *zero = nv_multiply_scalar(hsum, 0);
  nv_array *s = nv_add_scalar(zero, 0.1 * (r + 1));
  double sum_host[N] = {0};
  for (int t = 0; t < THREADS; t++)
    for (int i = 0; i < N; i++) {
      double u = p_host[i] * x_host[t][i] + s_host;
      sum_host[i] += 2 * u * x_host[t][i];
    }
  for (int i = 0; i < N; i++) p_host[i] -= LR / THREADS * sum_host[i];
  s_host = 0.1 * (r + 1);
  nv_release(sum);
  nv_release(hsum);
  nv_release(step);
  nv_release(zero);
  nv_release(P);
  nv_release(S);
  P = p;
  S = s;
  for (int t = 0; t < THREADS; t++) {
    nv_release(pub_prev[t]);
    pub_prev[t] = pub_h[t]; /* made by thread t, released here later */
    nv_release(pub_g[t]);
    pub_g[t] = pub_h[t] = NULL;
  }
}

static void grad_stress(int iters) {
  long base = nv__test_live_buffers();
  rounds = iters / 5 > 2 ? iters / 5 : 2;
  unsigned seed = test_seed();
  float p0[N];
  for (int i = 0; i < N; i++) p0[i] = test_randf(&seed), p_host[i] = p0[i];
  for (int t = 0; t < THREADS; t++) {
    for (int i = 0; i < N; i++) x_host[t][i] = test_randf(&seed);
    X[t] = f32v(x_host[t], N);
  }
  P = f32v(p0, N);
  s_host = 0.25;
  S = nv_array_float(0.25f);
  pthread_barrier_init(&bar, NULL, THREADS + 1);
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++)
    pthread_create(&th[t], NULL, stress_worker, (void *)(intptr_t)t);
  for (int r = 0; r < rounds; r++) {
    for (int k = 0; k < 4; k++) pthread_barrier_wait(&bar);
    next_round(r);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&bar);
  CHECK(atomic_load(&failures) == 0, "%d wrong values", atomic_load(&failures));
  /* The final parameters, evaluated once every thread is gone. */
  expect_vec("final parameters", -1, rounds, P, p_host);
  CHECK(atomic_load(&failures) == 0, "wrong final parameters");
  for (int t = 0; t < THREADS; t++) {
    nv_release(pub_prev[t]);
    nv_release(X[t]);
  }
  nv_release(P);
  nv_release(S);
  CHECK(nv__test_live_buffers() == base, "%ld buffers leaked", nv__test_live_buffers() - base);
  CHECK(nv__test_live_completions() == 0, "completions leaked");
  printf("threads_transforms: %d rounds x %d threads\n", rounds, THREADS);
}

int main(void) {
  int iters = (int)nv__env_long("NUVEC_TEST_THREAD_ITERS", ITERS_DEFAULT);
  finished_transform_outputs_are_not_tracers();
  tracer_evaluated_on_another_thread();
  scoped_array_released_from_another_thread();
  thread_exit_frees_its_scopes();
  grad_stress(iters);
  return 0;
}
