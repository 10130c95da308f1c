/* Checks the copy and linalg families' GPU kernels against the CPU kernels (bit for bit where
 * the CPU's rules are exact, within float tolerance for products), and times the hot paths.
 * Runs over mock_gpu.c. Usage: harness [perf|perfonly|quick] (see run.sh) */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "core/convert.h"
#include "core/internal.h"

void mock_init(void);
int mock_finish(void);
void mock_reset(void);
void *mock_stream(void);
nv_status mock_run_node(nv__node *n, int donated);
extern long mock_launches, mock_library_calls;
extern bool mock_no_download;

static int failures, checks;
static bool quick;
static uint64_t rng_state = 88172645463325252ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double unif(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }
static double gauss(void) {
  double u = unif() + 1e-300, v = unif();
  return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

#define NDT 14
static const char *dtn(nv_dtype d) { return nv_dtype_name(d); }

static void store_val(void *p, nv_dtype dt, double v, double im) {
  switch (dt) {
    case NV_DTYPE_BOOL: *(uint8_t *)p = v != 0; break;
    case NV_DTYPE_UINT8: *(uint8_t *)p = (uint8_t)(int64_t)v; break;
    case NV_DTYPE_UINT16: *(uint16_t *)p = (uint16_t)(int64_t)v; break;
    case NV_DTYPE_UINT32: *(uint32_t *)p = (uint32_t)(int64_t)v; break;
    case NV_DTYPE_UINT64: *(uint64_t *)p = (uint64_t)(int64_t)v; break;
    case NV_DTYPE_INT8: *(int8_t *)p = (int8_t)(int64_t)v; break;
    case NV_DTYPE_INT16: *(int16_t *)p = (int16_t)(int64_t)v; break;
    case NV_DTYPE_INT32: *(int32_t *)p = (int32_t)(int64_t)v; break;
    case NV_DTYPE_INT64: *(int64_t *)p = (int64_t)v; break;
    case NV_DTYPE_FLOAT16: *(uint16_t *)p = nv__f64_to_f16(v); break;
    case NV_DTYPE_BFLOAT16: *(uint16_t *)p = nv__f64_to_bf16(v); break;
    case NV_DTYPE_FLOAT32: *(float *)p = (float)v; break;
    case NV_DTYPE_FLOAT64: *(double *)p = v; break;
    default: ((float *)p)[0] = (float)v; ((float *)p)[1] = (float)im; break;
  }
}

static double load_val(const void *p, nv_dtype dt, double *im) {
  *im = 0;
  switch (dt) {
    case NV_DTYPE_BOOL: return *(const uint8_t *)p;
    case NV_DTYPE_UINT8: return *(const uint8_t *)p;
    case NV_DTYPE_UINT16: return *(const uint16_t *)p;
    case NV_DTYPE_UINT32: return *(const uint32_t *)p;
    case NV_DTYPE_UINT64: return (double)*(const uint64_t *)p;
    case NV_DTYPE_INT8: return *(const int8_t *)p;
    case NV_DTYPE_INT16: return *(const int16_t *)p;
    case NV_DTYPE_INT32: return *(const int32_t *)p;
    case NV_DTYPE_INT64: return (double)*(const int64_t *)p;
    case NV_DTYPE_FLOAT16: return nv__f16_to_f32(*(const uint16_t *)p);
    case NV_DTYPE_BFLOAT16: return nv__bf16_to_f32(*(const uint16_t *)p);
    case NV_DTYPE_FLOAT32: return *(const float *)p;
    case NV_DTYPE_FLOAT64: return *(const double *)p;
    default: *im = ((const float *)p)[1]; return ((const float *)p)[0];
  }
}

/* Random values: full-range bits for integers, normal values (with a few edge values when
 * `edges`) for floats. */
static nv_array *mk(nv_dtype dt, const int *shape, int nd, bool edges) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  size_t isz = nv_dtype_size(dt);
  char *buf = malloc((size_t)(n ? n : 1) * isz);
  static const double ev[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-45, 65504, 65520, 3e9,
                              -3e9, 300.0, -1.5, 2.5, 1e20, 0.5, -0.5, 1.5, 4294967296.0,
                              9.3e18, -9.3e18, 1.8e19, 2e-40, 448, 464, -1e-8, 7e-3};
  for (int64_t i = 0; i < n; i++) {
    char *p = buf + i * (int64_t)isz;
    if (nv_issubdtype(dt, NV_CATEGORY_INTEGER) || dt == NV_DTYPE_BOOL) {
      uint64_t r = rnd();
      if (dt == NV_DTYPE_BOOL) r &= 1;
      memcpy(p, &r, isz);
    } else if (edges && (rnd() % 4) == 0) {
      store_val(p, dt, ev[rnd() % (sizeof ev / sizeof *ev)], ev[rnd() % (sizeof ev / sizeof *ev)]);
    } else {
      store_val(p, dt, gauss() * 3, gauss() * 3);
    }
  }
  nv_array *x = nv_array_from_data(buf, shape, nd, dt);
  free(buf);
  return x;
}

/* Small-integer values (exact products in every float dtype). */
static nv_array *mk_small(nv_dtype dt, const int *shape, int nd) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  size_t isz = nv_dtype_size(dt);
  char *buf = malloc((size_t)(n ? n : 1) * isz);
  for (int64_t i = 0; i < n; i++)
    store_val(buf + i * (int64_t)isz, dt, (double)((int)(rnd() % 9) - 4),
              (double)((int)(rnd() % 9) - 4));
  nv_array *x = nv_array_from_data(buf, shape, nd, dt);
  free(buf);
  return x;
}

/* Evaluates x's node on the GPU (its inputs on the CPU). donate: -1, or 0 for in place. */
static nv_status gpu_eval(nv_array *x, int donate) {
  nv__node *n = x->node;
  if (atomic_load(&n->state) != NV__PENDING) return NV_OK;
  nv_array *ins[8];
  for (int i = 0; i < n->ninputs; i++) {
    ins[i] = nv__array_new(nv__node_retain(n->inputs[i].node), n->inputs[i].idx);
    nv_status s = nv_eval1(ins[i]);
    if (s != NV_OK) return s;
  }
  if (donate == 0) {
    nv__output *b = &n->inputs[0].node->out[n->inputs[0].idx];
    n->out[0].buf = nv__buffer_retain(b->buf);
    n->out[0].offset = b->offset;
  }
  nv_status st = mock_run_node(n, donate);
  for (int i = 0; i < n->ninputs; i++) nv_release(ins[i]);
  if (st == NV_OK) {
    atomic_store(&n->state, NV__DONE);
    nv__node_detach(n);
  }
  return st;
}

static void *read_all(nv_array *x, size_t *nb) {
  *nb = (size_t)nv_array_nbytes(x);
  void *p = malloc(*nb ? *nb : 1);
  if (nv_array_read(x, p, *nb) != NV_OK) {
    fprintf(stderr, "read failed: %s\n", nv_last_error());
    exit(4);
  }
  return p;
}

static bool is_nan_bits(const void *p, nv_dtype dt) {
  double im, v = load_val(p, dt, &im);
  return isnan(v) || isnan(im);
}

/* g (GPU) against c (CPU), bit for bit; NaNs with other payloads are counted apart. */
static void cmp_exact(nv_array *g, nv_array *c, const char *what) {
  checks++;
  nv_status sg = gpu_eval(g, -1);
  if (sg != NV_OK) {
    printf("FAIL %s: GPU error %s\n", what, nv_last_error());
    failures++;
    return;
  }
  size_t ng, nc;
  char *pg = read_all(g, &ng), *pc = read_all(c, &nc);
  nv_dtype dt = nv_array_dtype(c);
  size_t isz = nv_dtype_size(dt);
  if (ng != nc || nv_array_dtype(g) != dt) {
    printf("FAIL %s: sizes %zu vs %zu\n", what, ng, nc);
    failures++;
  } else {
    int64_t bad = 0, nanbad = 0, first = -1;
    for (size_t i = 0; i < ng / (isz ? isz : 1); i++)
      if (memcmp(pg + i * isz, pc + i * isz, isz)) {
        if (is_nan_bits(pg + i * isz, dt) && is_nan_bits(pc + i * isz, dt)) nanbad++;
        else {
          if (first < 0) first = (int64_t)i;
          bad++;
        }
      }
    if (bad) {
      double im1, im2;
      double vg = load_val(pg + first * isz, dt, &im1), vc = load_val(pc + first * isz, dt, &im2);
      uint64_t bg = 0, bc = 0;
      memcpy(&bg, pg + first * isz, isz);
      memcpy(&bc, pc + first * isz, isz);
      printf("FAIL %s: %lld of %zu differ; first [%lld] gpu %.17g (%#llx) cpu %.17g (%#llx)\n", what,
             (long long)bad, ng / isz, (long long)first, vg, (unsigned long long)bg, vc,
             (unsigned long long)bc);
      failures++;
    } else if (nanbad) {
      printf("note %s: %lld NaNs with other payloads\n", what, (long long)nanbad);
    }
  }
  free(pg);
  free(pc);
}

/* g against c within tol * (scale + |c|) elementwise, NaN where c is NaN. */
static void cmp_close(nv_array *g, nv_array *c, double tol, const char *what) {
  checks++;
  nv_status sg = gpu_eval(g, -1);
  if (sg != NV_OK) {
    printf("FAIL %s: GPU error %s\n", what, nv_last_error());
    failures++;
    return;
  }
  size_t ng, nc;
  char *pg = read_all(g, &ng), *pc = read_all(c, &nc);
  nv_dtype dt = nv_array_dtype(c);
  size_t isz = nv_dtype_size(dt);
  int64_t n = (int64_t)(nc / isz), bad = 0, first = -1;
  double maxabs = 0;
  for (int64_t i = 0; i < n; i++) {
    double ig, ic, vc = load_val(pc + i * isz, dt, &ic);
    if (isfinite(vc)) maxabs = fmax(maxabs, fabs(vc));
    (void)ig;
  }
  for (int64_t i = 0; i < n; i++) {
    double ig, ic;
    double vg = load_val(pg + i * isz, dt, &ig), vc = load_val(pc + i * isz, dt, &ic);
    bool ok;
    if (isnan(vc) || isnan(ic)) ok = isnan(vg) || isnan(ig);
    else if (isinf(vc)) ok = vg == vc;
    else ok = fabs(vg - vc) <= tol * (maxabs + 1) && fabs(ig - ic) <= tol * (maxabs + 1);
    if (!ok) {
      if (first < 0) first = i;
      bad++;
    }
  }
  if (ng != nc || nv_array_dtype(g) != dt || bad) {
    double ig, ic;
    printf("FAIL %s: %lld of %lld differ", what, (long long)bad, (long long)n);
    if (first >= 0)
      printf("; first [%lld] gpu %.9g cpu %.9g", (long long)first,
             load_val(pg + first * isz, dt, &ig), load_val(pc + first * isz, dt, &ic));
    printf("\n");
    failures++;
  }
  free(pg);
  free(pc);
}

/* ---- Layouts ---- */

enum { L_CONTIG, L_TRANS, L_STEP, L_REV, L_BCAST_ROW, L_BCAST_COL, L_SLICE, L_COUNT };
static const char *lname[] = {"contig", "trans", "step2", "reversed", "bcast-row", "bcast-col",
                              "slice"};

/* A 2-D (r x c) array of dtype dt in layout `l` (values random). */
static nv_array *view2(nv_dtype dt, int r, int c, int l, bool edges) {
  switch (l) {
    case L_TRANS: {
      int s[2] = {c, r};
      nv_array *b = mk(dt, s, 2, edges);
      nv_array *t = nv_transpose(b, NULL, 0);
      nv_release(b);
      return t;
    }
    case L_STEP: {
      int s[2] = {2 * r, 3 * c};
      nv_array *b = mk(dt, s, 2, edges);
      int st[2] = {0, 1}, sp[2] = {2 * r, 3 * c}, step[2] = {2, 3};
      nv_array *v = nv_slice(b, st, sp, step, 2);
      nv_release(b);
      return v;
    }
    case L_REV: {
      int s[2] = {r, c};
      nv_array *b = mk(dt, s, 2, edges);
      int st[2] = {-1, -1}, sp[2] = {-(r + 1), -(c + 1)}, step[2] = {-1, -1};
      nv_array *v = nv_slice(b, st, sp, step, 2);
      nv_release(b);
      return v;
    }
    case L_BCAST_ROW: {
      int s[1] = {c}, to[2] = {r, c};
      nv_array *b = mk(dt, s, 1, edges);
      nv_array *v = nv_broadcast_to(b, to, 2);
      nv_release(b);
      return v;
    }
    case L_BCAST_COL: {
      int s[2] = {r, 1}, to[2] = {r, c};
      nv_array *b = mk(dt, s, 2, edges);
      nv_array *v = nv_broadcast_to(b, to, 2);
      nv_release(b);
      return v;
    }
    case L_SLICE: {
      int s[2] = {r + 3, c + 5};
      nv_array *b = mk(dt, s, 2, edges);
      int st[2] = {1, 3}, sp[2] = {r + 1, c + 3};
      nv_array *v = nv_slice(b, st, sp, NULL, 2);
      nv_release(b);
      return v;
    }
    default: {
      int s[2] = {r, c};
      return mk(dt, s, 2, edges);
    }
  }
}

/* ---- Copy-family tests ---- */

static void test_copies(void) {
  int sizes[][2] = {{1, 1}, {7, 5}, {300, 257}, {64, 1000}, {1000, 3}};
  for (int dt = 0; dt < NDT; dt++)
    for (int si = 0; si < 5; si++)
      for (int l = 0; l < L_COUNT; l++) {
        nv_array *v = view2((nv_dtype)dt, sizes[si][0], sizes[si][1], l, true);
        nv_array *g = nv_copy(v), *c = nv_copy(v);
        char what[128];
        snprintf(what, sizeof what, "copy %s %dx%d %s", dtn(dt), sizes[si][0], sizes[si][1],
                 lname[l]);
        cmp_exact(g, c, what);
        nv_release(g);
        nv_release(c);
        nv_release(v);
        mock_reset();
      }
  /* Permutations of 3-D and 4-D arrays (tile path with batch dims), and many dims. */
  for (int dt = 0; dt < NDT; dt += 3) {
    int s3[3] = {5, 64, 33};
    nv_array *x = mk((nv_dtype)dt, s3, 3, false);
    int perms[][3] = {{2, 0, 1}, {1, 2, 0}, {0, 2, 1}, {2, 1, 0}};
    for (int pi = 0; pi < 4; pi++) {
      nv_array *t = nv_transpose(x, perms[pi], 3);
      nv_array *g = nv_copy(t), *c = nv_copy(t);
      char what[128];
      snprintf(what, sizeof what, "copy %s (5,64,33) perm %d%d%d", dtn(dt), perms[pi][0],
               perms[pi][1], perms[pi][2]);
      cmp_exact(g, c, what);
      nv_release(g);
      nv_release(c);
      nv_release(t);
    }
    nv_release(x);
    /* 10 dims that cannot fold: a reversed transpose of 2x3x2x3... */
    int s10[10] = {2, 3, 2, 3, 2, 3, 2, 3, 2, 3};
    x = mk((nv_dtype)dt, s10, 10, false);
    int p10[10] = {9, 7, 5, 3, 1, 8, 6, 4, 2, 0};
    nv_array *t = nv_transpose(x, p10, 10);
    nv_array *g = nv_copy(t), *c = nv_copy(t);
    char what[128];
    snprintf(what, sizeof what, "copy %s 10-D transposed (big path)", dtn(dt));
    cmp_exact(g, c, what);
    nv_array *ga = nv_astype(t, NV_DTYPE_FLOAT32), *ca = nv_astype(t, NV_DTYPE_FLOAT32);
    snprintf(what, sizeof what, "astype %s->float32 10-D transposed (two passes)", dtn(dt));
    if (dt != NV_DTYPE_FLOAT32) cmp_exact(ga, ca, what);
    nv_release(ga);
    nv_release(ca);
    nv_release(g);
    nv_release(c);
    nv_release(t);
    nv_release(x);
    mock_reset();
  }
  /* A reshape that must copy (RESHAPE with copy). */
  {
    int s[2] = {12, 10};
    nv_array *x = mk(NV_DTYPE_FLOAT32, s, 2, false);
    nv_array *t = nv_transpose(x, NULL, 0);
    int ns[3] = {5, 4, 6};
    nv_array *g = nv_reshape(t, ns, 3), *c = nv_reshape(t, ns, 3);
    cmp_exact(g, c, "reshape copy of a transpose");
    nv_release(g);
    nv_release(c);
    nv_release(t);
    nv_release(x);
    mock_reset();
  }
}

static void test_astype(void) {
  for (int from = 0; from < NDT; from++)
    for (int to = 0; to < NDT; to++)
      for (int l = 0; l < 3; l++) {
        int lay = l == 0 ? L_CONTIG : l == 1 ? L_TRANS : L_STEP;
        nv_array *v = view2((nv_dtype)from, l == 0 ? 61 : 33, 37, lay, true);
        nv_array *g = nv_astype(v, (nv_dtype)to), *c = nv_astype(v, (nv_dtype)to);
        char what[128];
        snprintf(what, sizeof what, "astype %s->%s %s", dtn(from), dtn(to), lname[lay]);
        if (from != to) cmp_exact(g, c, what);
        nv_release(g);
        nv_release(c);
        nv_release(v);
        mock_reset();
      }
  if (quick) return;
  /* Every float16, bfloat16 bit pattern, and integer edges, to every dtype. */
  static uint16_t all16[65536];
  for (int i = 0; i < 65536; i++) all16[i] = (uint16_t)i;
  int s[1] = {65536};
  nv_dtype h16[2] = {NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16};
  for (int h = 0; h < 2; h++) {
    nv_array *x = nv_array_from_data(all16, s, 1, h16[h]);
    for (int to = 0; to < NDT; to++) {
      if (to == (int)h16[h]) continue;
      nv_array *g = nv_astype(x, (nv_dtype)to), *c = nv_astype(x, (nv_dtype)to);
      char what[128];
      snprintf(what, sizeof what, "astype all %s bits->%s", dtn(h16[h]), dtn(to));
      cmp_exact(g, c, what);
      nv_release(g);
      nv_release(c);
    }
    nv_array *g = nv_to_fp8(x), *c = nv_to_fp8(x);
    char what[128];
    snprintf(what, sizeof what, "to_fp8 all %s bits", dtn(h16[h]));
    cmp_exact(g, c, what);
    nv_release(g);
    nv_release(c);
    nv_release(x);
    mock_reset();
  }
  /* float32 / float64 bit patterns sampled densely near the rounding edges. */
  {
    int n = 1 << 20;
    uint32_t *b32 = malloc(sizeof(uint32_t) * (size_t)n);
    uint64_t *b64 = malloc(sizeof(uint64_t) * (size_t)n);
    for (int i = 0; i < n; i++) {
      b32[i] = (uint32_t)rnd();
      if (i % 3 == 0) b32[i] = (b32[i] & 0x80001fffu) | ((uint32_t)(rnd() % 64 + 96) << 23) | 0x1000;
      b64[i] = rnd();
      if (i % 3 == 0) b64[i] = (b64[i] & 0x800003ffffffffffull) | ((uint64_t)(rnd() % 120 + 960) << 52);
      if (i % 7 == 0) b64[i] = (uint64_t)(rnd() % 2000000) << 29;
    }
    int s1[1] = {n};
    nv_array *x32 = nv_array_from_data(b32, s1, 1, NV_DTYPE_FLOAT32);
    nv_array *x64 = nv_array_from_data(b64, s1, 1, NV_DTYPE_FLOAT64);
    for (int to = 0; to < NDT; to++) {
      char what[128];
      nv_array *g, *c;
      if (to != NV_DTYPE_FLOAT32) {
        g = nv_astype(x32, (nv_dtype)to);
        c = nv_astype(x32, (nv_dtype)to);
        snprintf(what, sizeof what, "astype random float32 bits->%s", dtn(to));
        cmp_exact(g, c, what);
        nv_release(g);
        nv_release(c);
      }
      if (to != NV_DTYPE_FLOAT64) {
        g = nv_astype(x64, (nv_dtype)to);
        c = nv_astype(x64, (nv_dtype)to);
        snprintf(what, sizeof what, "astype random float64 bits->%s", dtn(to));
        cmp_exact(g, c, what);
        nv_release(g);
        nv_release(c);
      }
    }
    nv_array *g = nv_to_fp8(x32), *c = nv_to_fp8(x32);
    cmp_exact(g, c, "to_fp8 random float32 bits");
    nv_release(g);
    nv_release(c);
    g = nv_to_fp8(x64);
    c = nv_to_fp8(x64);
    cmp_exact(g, c, "to_fp8 random float64 bits");
    nv_release(g);
    nv_release(c);
    nv_release(x32);
    nv_release(x64);
    free(b32);
    free(b64);
    mock_reset();
  }
  /* Integers near the float rounding edges (sticky bits above 2^53). */
  {
    int n = 4096;
    int64_t *v = malloc(sizeof(int64_t) * (size_t)n);
    for (int i = 0; i < n; i++) {
      int sh = (int)(rnd() % 64);
      v[i] = (int64_t)(rnd() >> sh);
      if (i % 2) v[i] = -v[i];
      if (i % 5 == 0) v[i] = (int64_t)((1ull << (rnd() % 63)) + (rnd() % 3) - 1);
    }
    int s1[1] = {n};
    nv_array *xi = nv_array_from_data(v, s1, 1, NV_DTYPE_INT64);
    nv_array *xu = nv_array_from_data(v, s1, 1, NV_DTYPE_UINT64);
    for (int to = 0; to < NDT; to++) {
      char what[128];
      nv_array *g = nv_astype(xi, (nv_dtype)to), *c = nv_astype(xi, (nv_dtype)to);
      snprintf(what, sizeof what, "astype int64 edges->%s", dtn(to));
      if (to != NV_DTYPE_INT64) cmp_exact(g, c, what);
      nv_release(g);
      nv_release(c);
      g = nv_astype(xu, (nv_dtype)to);
      c = nv_astype(xu, (nv_dtype)to);
      snprintf(what, sizeof what, "astype uint64 edges->%s", dtn(to));
      if (to != NV_DTYPE_UINT64) cmp_exact(g, c, what);
      nv_release(g);
      nv_release(c);
    }
    nv_release(xi);
    nv_release(xu);
    free(v);
    mock_reset();
  }
  /* fp8: every code to each float dtype, from a strided view too. */
  {
    uint8_t codes[256];
    for (int i = 0; i < 256; i++) codes[i] = (uint8_t)i;
    int s1[1] = {256};
    nv_array *x = nv_array_from_data(codes, s1, 1, NV_DTYPE_UINT8);
    int st[1] = {-1}, sp[1] = {-257}, step[1] = {-1};
    nv_array *r = nv_slice(x, st, sp, step, 1);
    nv_dtype fl[4] = {NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16, NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT64};
    for (int i = 0; i < 4; i++) {
      char what[128];
      nv_array *g = nv_from_fp8(x, fl[i]), *c = nv_from_fp8(x, fl[i]);
      snprintf(what, sizeof what, "from_fp8 all codes->%s", dtn(fl[i]));
      cmp_exact(g, c, what);
      nv_release(g);
      nv_release(c);
      g = nv_from_fp8(r, fl[i]);
      c = nv_from_fp8(r, fl[i]);
      snprintf(what, sizeof what, "from_fp8 reversed->%s", dtn(fl[i]));
      cmp_exact(g, c, what);
      nv_release(g);
      nv_release(c);
      nv_array *v = view2(fl[i], 40, 33, L_TRANS, true);
      g = nv_to_fp8(v);
      c = nv_to_fp8(v);
      snprintf(what, sizeof what, "to_fp8 %s transposed", dtn(fl[i]));
      cmp_exact(g, c, what);
      nv_release(g);
      nv_release(c);
      nv_release(v);
    }
    nv_release(r);
    nv_release(x);
    mock_reset();
  }
}

static void test_creation(void) {
  for (int dt = 0; dt < NDT; dt++) {
    char what[128];
    int s[2] = {1000, 37};
    /* full of a scalar (cast from double as astype), of a row and of a column. */
    double vals[] = {1.5, -3.25, 1e20, NAN, 65520, -0.0};
    for (int k = 0; k < 6; k++) {
      nv_array *g = nv_full(s, 2, vals[k], (nv_dtype)dt), *c = nv_full(s, 2, vals[k], (nv_dtype)dt);
      snprintf(what, sizeof what, "full %s %g", dtn(dt), vals[k]);
      cmp_exact(g, c, what);
      nv_release(g);
      nv_release(c);
    }
    int rs[1] = {37}, cs[2] = {1000, 1};
    nv_array *row = mk((nv_dtype)dt, rs, 1, true), *col = mk((nv_dtype)dt, cs, 2, true);
    nv_array *g = nv_full_array(s, 2, row, (nv_dtype)dt), *c = nv_full_array(s, 2, row, (nv_dtype)dt);
    snprintf(what, sizeof what, "full %s from a row", dtn(dt));
    cmp_exact(g, c, what);
    nv_release(g);
    nv_release(c);
    g = nv_full_array(s, 2, col, (nv_dtype)dt);
    c = nv_full_array(s, 2, col, (nv_dtype)dt);
    snprintf(what, sizeof what, "full %s from a column", dtn(dt));
    cmp_exact(g, c, what);
    nv_release(g);
    nv_release(c);
    nv_release(row);
    nv_release(col);
    /* odd sizes: head/tail of the vector fill. */
    for (int n = 1; n < 40; n += 7) {
      int s1[1] = {n};
      g = nv_full(s1, 1, 2.0, (nv_dtype)dt);
      c = nv_full(s1, 1, 2.0, (nv_dtype)dt);
      snprintf(what, sizeof what, "full %s n=%d", dtn(dt), n);
      cmp_exact(g, c, what);
      nv_release(g);
      nv_release(c);
    }
    /* arange */
    if (dt != NV_DTYPE_BOOL) {
      double ar[][3] = {{0, 1000, 1}, {-3.5, 7.25, 0.37}, {10, -10, -0.1}, {0, 1e6, 3.3},
                        {1e15, 1e15 + 3000, 1.7}, {0.1, 100, 0.1}};
      for (int k = 0; k < 6; k++) {
        g = nv_arange(ar[k][0], ar[k][1], ar[k][2], (nv_dtype)dt);
        c = nv_arange(ar[k][0], ar[k][1], ar[k][2], (nv_dtype)dt);
        snprintf(what, sizeof what, "arange %s (%g, %g, %g)", dtn(dt), ar[k][0], ar[k][1], ar[k][2]);
        cmp_exact(g, c, what);
        nv_release(g);
        nv_release(c);
      }
      g = nv_linspace(-1, 1, 101, (nv_dtype)dt);
      nv_release(g);
    }
    /* eye */
    int ek[][3] = {{7, 5, 0}, {7, 5, 2}, {7, 5, -3}, {5, 7, 6}, {5, 7, -6}, {64, 64, 1}, {1, 1, 0}};
    for (int k = 0; k < 7; k++) {
      g = nv_eye(ek[k][0], ek[k][1], ek[k][2], (nv_dtype)dt);
      c = nv_eye(ek[k][0], ek[k][1], ek[k][2], (nv_dtype)dt);
      snprintf(what, sizeof what, "eye %s %d %d %d", dtn(dt), ek[k][0], ek[k][1], ek[k][2]);
      cmp_exact(g, c, what);
      nv_release(g);
      nv_release(c);
    }
    mock_reset();
  }
}

static void test_slice_update(void) {
  nv_dtype dts[] = {NV_DTYPE_FLOAT32, NV_DTYPE_UINT8, NV_DTYPE_FLOAT16, NV_DTYPE_COMPLEX64,
                    NV_DTYPE_INT64};
  for (int di = 0; di < 5; di++) {
    nv_dtype dt = dts[di];
    int bs[2] = {20, 30};
    struct {
      int st[2], sp[2], step[2], us[2], un;
    } cases[] = {
        {{2, 3}, {7, 20}, {1, 1}, {5, 17}, 2}, {{0, 0}, {20, 30}, {2, 3}, {10, 10}, 2},
        {{-1, -1}, {-21, -31}, {-1, -2}, {20, 15}, 2}, {{5, 4}, {6, 29}, {1, 1}, {1, 1}, 2},
        {{3, 0}, {9, 30}, {2, 1}, {30, 0}, 1}, {{3, 3}, {3, 9}, {1, 1}, {0, 6}, 2},
    };
    for (int k = 0; k < 6; k++) {
      for (int donate = -1; donate <= 0; donate++) {
        nv_array *base = mk(dt, bs, 2, false), *upd = mk(dt, cases[k].us, cases[k].un, false);
        /* The CPU reference reads its own copy of the base (the GPU writes base in place). */
        nv_array *bc = nv_copy(base);
        nv_eval1(bc);
        nv_array *g = nv_slice_update(base, upd, cases[k].st, cases[k].sp, cases[k].step, 2);
        nv_array *c = nv_slice_update(bc, upd, cases[k].st, cases[k].sp, cases[k].step, 2);
        char what[128];
        snprintf(what, sizeof what, "slice_update %s case %d %s", dtn(dt), k,
                 donate == 0 ? "in place" : "copy");
        if (nv_array_status(g) != NV_OK) {
          printf("skip %s: %s\n", what, nv_last_error());
        } else {
          checks++;
          nv_status s = gpu_eval(g, donate);
          if (s != NV_OK) {
            printf("FAIL %s: %s\n", what, nv_last_error());
            failures++;
          } else {
            checks--;
            cmp_exact(g, c, what);
          }
        }
        nv_release(g);
        nv_release(c);
        nv_release(bc);
        nv_release(base);
        nv_release(upd);
        mock_reset();
      }
    }
  }
}


static void test_wide_paths(void) {
  /* The tile path with a negative unit stride: a transpose of a reversed array. */
  {
    int s[2] = {300, 257};
    nv_array *x = mk(NV_DTYPE_FLOAT32, s, 2, false);
    int st[2] = {-1, -1}, sp[2] = {-301, -258}, step[2] = {-1, -1};
    nv_array *r = nv_slice(x, st, sp, step, 2);
    nv_array *t = nv_transpose(r, NULL, 0);
    nv_array *g = nv_copy(t), *c = nv_copy(t);
    cmp_exact(g, c, "copy transpose of reversed (tile, negative strides)");
    nv_release(g);
    nv_release(c);
    g = nv_astype(t, NV_DTYPE_FLOAT16);
    c = nv_astype(t, NV_DTYPE_FLOAT16);
    cmp_exact(g, c, "astype transpose of reversed");
    nv_release(g);
    nv_release(c);
    nv_release(t);
    nv_release(r);
    nv_release(x);
    mock_reset();
  }
  if (quick) return;
  /* Offsets past 2^31: the 64-bit copy and conversion kernels. */
  {
    int s[2] = {2, 1200000000};
    nv_array *x = nv_zeros(s, 2, NV_DTYPE_UINT8);
    nv_array *y = nv_add(x, nv_arange(0, 1200000000, 1, NV_DTYPE_UINT8));
    nv_eval1(y);
    int st[2] = {0, 1}, sp[2] = {2, 1200000000}, step[2] = {1, 2};
    nv_array *v = nv_slice(y, st, sp, step, 2);
    nv_array *g = nv_copy(v), *c = nv_copy(v);
    cmp_exact(g, c, "copy uint8 [:, 1::2] of 2x1.2e9 (64-bit offsets)");
    nv_release(g);
    nv_release(c);
    g = nv_astype(v, NV_DTYPE_INT8);
    c = nv_astype(v, NV_DTYPE_INT8);
    cmp_exact(g, c, "astype uint8->int8 [:, 1::2] of 2x1.2e9 (64-bit offsets)");
    nv_release(g);
    nv_release(c);
    nv_release(v);
    nv_release(y);
    nv_release(x);
    mock_reset();
  }
}

/* ---- Linalg tests ---- */

static double tol_of(nv_dtype dt, int K) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return 2e-3;
    case NV_DTYPE_BFLOAT16: return 1.6e-2;
    case NV_DTYPE_FLOAT64: return 1e-13 * (K + 1);
    default: return 2e-6 * (K + 1);
  }
}

static void test_matmul(void) {
  nv_dtype fdt[] = {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT64, NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16,
                    NV_DTYPE_COMPLEX64, NV_DTYPE_INT8, NV_DTYPE_INT32, NV_DTYPE_INT64,
                    NV_DTYPE_UINT8, NV_DTYPE_UINT64, NV_DTYPE_INT16};
  int mkn[][3] = {{1, 1, 1}, {7, 7, 7}, {129, 65, 33}, {1000, 129, 7}, {1, 1000, 1}, {3, 0, 4},
                  {16, 16, 16}, {1, 64, 300}, {300, 64, 1}};
  int lays[] = {L_CONTIG, L_TRANS, L_STEP, L_REV, L_SLICE};
  for (size_t di = 0; di < sizeof fdt / sizeof *fdt; di++)
    for (int si = 0; si < 9; si++)
      for (int la = 0; la < 5; la++)
        for (int lb = 0; lb < 5; lb++) {
          if ((la + lb) % 2 && si > 2) continue;
          if (quick && (si > 3 || la > 2 || lb > 2)) continue;
          nv_dtype dt = fdt[di];
          int M = mkn[si][0], K = mkn[si][1], N = mkn[si][2];
          bool is_int = nv_issubdtype(dt, NV_CATEGORY_INTEGER);
          nv_array *a = view2(dt, M, K, lays[la], false), *b = view2(dt, K, N, lays[lb], false);
          if (is_int) {
            /* full-range ints: wrap-around */
          }
          nv_array *g = nv_matmul(a, b), *c = nv_matmul(a, b);
          char what[160];
          snprintf(what, sizeof what, "matmul %s %dx%dx%d %s@%s", dtn(dt), M, K, N, lname[lays[la]],
                   lname[lays[lb]]);
          if (is_int) cmp_exact(g, c, what);
          else cmp_close(g, c, tol_of(dt, K), what);
          nv_release(g);
          nv_release(c);
          nv_release(a);
          nv_release(b);
          mock_reset();
        }
  /* Batched: strided batch, broadcast batch, shared b (folded), transposed batches. */
  nv_dtype bdt[] = {NV_DTYPE_FLOAT32, NV_DTYPE_BFLOAT16, NV_DTYPE_FLOAT64, NV_DTYPE_COMPLEX64,
                    NV_DTYPE_INT32, NV_DTYPE_FLOAT16};
  for (int di = 0; di < 6; di++) {
    nv_dtype dt = bdt[di];
    struct {
      int na, a[4], nb, b[4];
    } bc[] = {
        {3, {4, 33, 17}, 3, {4, 17, 9}},  {3, {4, 33, 17}, 2, {17, 9}},
        {4, {2, 1, 5, 6}, 4, {1, 3, 6, 7}}, {3, {40, 1, 8}, 2, {8, 6}},
        {2, {5, 8}, 3, {3, 8, 2}},        {4, {2, 3, 1, 9}, 3, {3, 9, 4}},
    };
    for (int k = 0; k < 6; k++) {
      nv_array *a = mk_small(dt, bc[k].a, bc[k].na), *b = mk_small(dt, bc[k].b, bc[k].nb);
      for (int t = 0; t < 2; t++) {
        nv_array *aa = a, *bb = b;
        if (t == 1) {
          /* transposed batch matrices (swap the last two axes twice: a copy-free view) */
          int na = bc[k].na, perm[4];
          for (int i = 0; i < na; i++) perm[i] = i;
          perm[na - 1] = na - 2;
          perm[na - 2] = na - 1;
          nv_array *x = nv_transpose(a, perm, na);
          nv_array *xc = nv_copy(x);
          aa = nv_transpose(xc, perm, na);
          nv_release(x);
          nv_release(xc);
        }
        nv_array *g = nv_matmul(aa, bb), *c = nv_matmul(aa, bb);
        char what[160];
        snprintf(what, sizeof what, "matmul batched %s case %d%s", dtn(dt), k, t ? " a col-major" : "");
        cmp_exact(g, c, what); /* small integers: exact in every dtype */
        nv_release(g);
        nv_release(c);
        if (aa != a) nv_release(aa);
      }
      nv_release(a);
      nv_release(b);
      mock_reset();
    }
  }
  /* Broadcast b via broadcast_to with zero strides, a read with a step. */
  {
    int sa[3] = {6, 10, 8}, sb[2] = {8, 3}, to[4] = {2, 6, 8, 3};
    nv_array *a0 = mk(NV_DTYPE_FLOAT32, sa, 3, false), *b0 = mk(NV_DTYPE_FLOAT32, sb, 2, false);
    int st[3] = {0, 0, 0}, sp[3] = {6, 10, 8}, step[3] = {1, 2, 1};
    nv_array *a = nv_slice(a0, st, sp, step, 3);
    nv_array *b = nv_broadcast_to(b0, to, 4);
    nv_array *g = nv_matmul(a, b), *c = nv_matmul(a, b);
    cmp_close(g, c, tol_of(NV_DTYPE_FLOAT32, 8), "matmul broadcast_to b, stepped a");
    nv_release(g);
    nv_release(c);
    nv_release(a);
    nv_release(b);
    nv_release(a0);
    nv_release(b0);
    mock_reset();
  }
  /* Integer wrap-around with full-range values. */
  nv_dtype idt[] = {NV_DTYPE_INT8, NV_DTYPE_UINT8, NV_DTYPE_INT16, NV_DTYPE_UINT16, NV_DTYPE_INT32,
                    NV_DTYPE_UINT32, NV_DTYPE_INT64, NV_DTYPE_UINT64};
  for (int di = 0; di < 8; di++) {
    int sa[3] = {2, 70, 90}, sb[2] = {90, 65};
    nv_array *a = mk(idt[di], sa, 3, false), *b = mk(idt[di], sb, 2, false);
    nv_array *g = nv_matmul(a, b), *c = nv_matmul(a, b);
    char what[128];
    snprintf(what, sizeof what, "matmul %s full-range wrap", dtn(idt[di]));
    cmp_exact(g, c, what);
    nv_release(g);
    nv_release(c);
    nv_release(a);
    nv_release(b);
    mock_reset();
  }
}

static void test_addmm(void) {
  nv_dtype dts[] = {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT64, NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16,
                    NV_DTYPE_COMPLEX64};
  double ab[][2] = {{1, 1}, {2, -0.5}, {0, 1.5}, {1.5, 0}, {0, 0}};
  for (int di = 0; di < 5; di++)
    for (int k = 0; k < 5; k++)
      for (int cs = 0; cs < 4; cs++) {
        nv_dtype dt = dts[di];
        int sc[3][2] = {{17, 9}, {9, 0}, {17, 1}}, nc = cs == 0 ? 2 : cs == 1 ? 1 : cs == 2 ? 2 : 0;
        int sa[2] = {17, 33}, sb[2] = {33, 9};
        nv_array *c0 = cs < 3 ? mk(dt, sc[cs], nc, false) : mk(dt, NULL, 0, false);
        nv_array *a = view2(dt, 17, 33, L_TRANS, false), *b = view2(dt, 33, 9, L_STEP, false);
        (void)sa;
        (void)sb;
        nv_array *g = nv_addmm(c0, a, b, ab[k][0], ab[k][1]), *c = nv_addmm(c0, a, b, ab[k][0], ab[k][1]);
        char what[160];
        snprintf(what, sizeof what, "addmm %s alpha %g beta %g c-shape %d", dtn(dt), ab[k][0], ab[k][1], cs);
        cmp_close(g, c, tol_of(dt, 33) * 2, what);
        nv_release(g);
        nv_release(c);
        nv_release(c0);
        nv_release(a);
        nv_release(b);
        mock_reset();
      }
  /* BLAS zero rules: beta = 0 ignores a NaN c; alpha = 0 ignores a NaN a. */
  {
    int s[2] = {4, 4};
    float nanv[16], one[16];
    for (int i = 0; i < 16; i++) {
      nanv[i] = NAN;
      one[i] = 1;
    }
    nv_array *cn = nv_array_from_data(nanv, s, 2, NV_DTYPE_FLOAT32);
    nv_array *o = nv_array_from_data(one, s, 2, NV_DTYPE_FLOAT32);
    nv_array *g = nv_addmm(cn, o, o, 1, 0), *c = nv_addmm(cn, o, o, 1, 0);
    cmp_exact(g, c, "addmm beta 0 with NaN c");
    nv_release(g);
    nv_release(c);
    g = nv_addmm(o, cn, o, 0, 2);
    c = nv_addmm(o, cn, o, 0, 2);
    cmp_exact(g, c, "addmm alpha 0 with NaN a");
    nv_release(g);
    nv_release(c);
    int s0[2] = {4, 0}, s1[2] = {0, 4};
    nv_array *e0 = mk(NV_DTYPE_FLOAT32, s0, 2, false), *e1 = mk(NV_DTYPE_FLOAT32, s1, 2, false);
    g = nv_addmm(o, e0, e1, 1, 3);
    c = nv_addmm(o, e0, e1, 1, 3);
    cmp_exact(g, c, "addmm K 0");
    nv_release(g);
    nv_release(c);
    g = nv_matmul(e0, e1);
    c = nv_matmul(e0, e1);
    cmp_exact(g, c, "matmul K 0");
    nv_release(g);
    nv_release(c);
    nv_release(e0);
    nv_release(e1);
    nv_release(cn);
    nv_release(o);
    mock_reset();
  }
}

static void test_vecdot(void) {
  nv_dtype dts[] = {NV_DTYPE_FLOAT32, NV_DTYPE_FLOAT64, NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16,
                    NV_DTYPE_COMPLEX64, NV_DTYPE_INT32, NV_DTYPE_INT64, NV_DTYPE_UINT32};
  int ks[] = {1, 5, 31, 33, 1000};
  for (int di = 0; di < 8; di++)
    for (int ki = 0; ki < 5; ki++)
      for (int ax = 0; ax < 2; ax++) {
        nv_dtype dt = dts[di];
        int K = ks[ki];
        int sa[2] = {ax ? K : 37, ax ? 37 : K};
        nv_array *a = mk(dt, sa, 2, false), *b = mk(dt, sa, 2, false);
        nv_array *g = nv_vecdot(a, b, ax ? 0 : 1), *c = nv_vecdot(a, b, ax ? 0 : 1);
        char what[128];
        snprintf(what, sizeof what, "vecdot %s K %d axis %d", dtn(dt), K, ax ? 0 : 1);
        if (nv_issubdtype(dt, NV_CATEGORY_INTEGER)) cmp_exact(g, c, what);
        else cmp_close(g, c, dt == NV_DTYPE_FLOAT64 ? 1e-14 * K : tol_of(dt, 0), what);
        nv_release(g);
        nv_release(c);
        nv_release(a);
        nv_release(b);
        mock_reset();
      }
}

/* ---- Perf ---- */

static double time_node(nv_array *x, int iters, double *first_ms) {
  nv__node *n = x->node;
  nv_array *ins[8];
  for (int i = 0; i < n->ninputs; i++) {
    ins[i] = nv__array_new(nv__node_retain(n->inputs[i].node), n->inputs[i].idx);
    nv_eval1(ins[i]);
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  mock_run_node(n, -1); /* uploads */
  mock_no_download = true;
  cudaEventRecord(e0, (cudaStream_t)mock_stream());
  mock_run_node(n, -1); /* warm-up: plans */
  cudaEventRecord(e1, (cudaStream_t)mock_stream());
  cudaEventSynchronize(e1);
  float ms;
  cudaEventElapsedTime(&ms, e0, e1);
  *first_ms = ms;
  float best = 1e30f;
  for (int r = 0; r < iters; r++) {
    cudaEventRecord(e0, (cudaStream_t)mock_stream());
    mock_run_node(n, -1);
    cudaEventRecord(e1, (cudaStream_t)mock_stream());
    cudaEventSynchronize(e1);
    cudaEventElapsedTime(&ms, e0, e1);
    if (ms < best) best = ms;
  }
  mock_no_download = false;
  for (int i = 0; i < n->ninputs; i++) nv_release(ins[i]);
  return best;
}

static void perf(void) {
  double first;
  {
    int s[1] = {1 << 28};
    nv_array *x = nv_zeros(s, 1, NV_DTYPE_FLOAT32);
    nv_eval1(x);
    nv_array *g = nv_copy(x);
    double ms = time_node(g, 10, &first);
    printf("perf copy f32 2^28 contiguous: %.3f ms, %.0f GB/s (r+w)\n", ms, 2.0 * 4 * (1 << 28) / ms / 1e6);
    nv_release(g);
    g = nv_astype(x, NV_DTYPE_BFLOAT16);
    ms = time_node(g, 10, &first);
    printf("perf astype f32->bf16 2^28: %.3f ms, %.0f GB/s\n", ms, 6.0 * (1 << 28) / ms / 1e6);
    nv_release(g);
    g = nv_astype(x, NV_DTYPE_INT64);
    ms = time_node(g, 10, &first);
    printf("perf astype f32->i64 2^28 (general kernel): %.3f ms, %.0f GB/s\n", ms, 12.0 * (1 << 28) / ms / 1e6);
    nv_release(g);
    int fs[1] = {1 << 28};
    g = nv_full(fs, 1, 3.0, NV_DTYPE_FLOAT32);
    ms = time_node(g, 10, &first);
    printf("perf full f32 2^28: %.3f ms, %.0f GB/s (w)\n", ms, 4.0 * (1 << 28) / ms / 1e6);
    nv_release(g);
    int bs[2] = {1 << 14, 1 << 14};
    nv_array *y = nv_reshape(x, bs, 2);
    nv_array *t = nv_transpose(y, NULL, 0);
    g = nv_copy(t);
    ms = time_node(g, 10, &first);
    printf("perf transpose copy f32 16384^2: %.3f ms, %.0f GB/s (r+w)\n", ms, 2.0 * 4 * (1 << 28) / ms / 1e6);
    nv_release(g);
    int st[2] = {0, 0}, sp[2] = {1 << 14, 1 << 14}, step[2] = {1, 2};
    nv_array *sl = nv_slice(y, st, sp, step, 2);
    g = nv_copy(sl);
    ms = time_node(g, 10, &first);
    printf("perf slice [:, ::2] copy f32: %.3f ms, %.0f GB/s (r+w of the half)\n", ms, 2.0 * 2 * (1 << 28) / ms / 1e6);
    nv_release(g);
    int st2[2] = {0, 1}, sp2[2] = {1 << 14, (1 << 14) - 1};
    nv_array *sl2 = nv_slice(y, st2, sp2, NULL, 2);
    g = nv_copy(sl2);
    ms = time_node(g, 10, &first);
    printf("perf slice [:, 1:-1] copy f32 (rows, misaligned): %.3f ms, %.0f GB/s\n", ms, 2.0 * 4 * (1 << 28) / ms / 1e6);
    nv_release(g);
    int rs[1] = {1 << 14};
    nv_array *row = nv_zeros(rs, 1, NV_DTYPE_FLOAT32);
    g = nv_full_array(bs, 2, row, NV_DTYPE_FLOAT32);
    ms = time_node(g, 10, &first);
    printf("perf broadcast row -> 16384^2 f32: %.3f ms, %.0f GB/s (w)\n", ms, 4.0 * (1 << 28) / ms / 1e6);
    nv_release(g);
    nv_release(row);
    nv_release(sl2);
    nv_release(sl);
    nv_release(t);
    nv_release(y);
    nv_release(x);
    mock_reset();
  }
  struct {
    nv_dtype dt;
    int n;
  } mm[] = {{NV_DTYPE_BFLOAT16, 8192}, {NV_DTYPE_FLOAT32, 4096}, {NV_DTYPE_FLOAT16, 8192},
            {NV_DTYPE_FLOAT64, 4096}, {NV_DTYPE_COMPLEX64, 2048}, {NV_DTYPE_FLOAT32, 8192},
            {NV_DTYPE_INT32, 2048}};
  for (int i = 0; i < 7; i++) {
    int s[2] = {mm[i].n, mm[i].n};
    nv_array *a = nv_ones(s, 2, mm[i].dt), *b = nv_ones(s, 2, mm[i].dt);
    nv_eval1(a);
    nv_eval1(b);
    nv_array *g = nv_matmul(a, b);
    double ms = time_node(g, 5, &first);
    double fl = 2.0 * mm[i].n * (double)mm[i].n * mm[i].n * (mm[i].dt == NV_DTYPE_COMPLEX64 ? 4 : 1);
    printf("perf matmul %s %d^3: %.3f ms, %.1f TFLOP/s (first call %.1f ms)\n", dtn(mm[i].dt),
           mm[i].n, ms, fl / ms / 1e9, first);
    nv_release(g);
    nv_release(a);
    nv_release(b);
    mock_reset();
  }
  /* Transposed operands and a batch. */
  {
    int s[2] = {8192, 8192};
    nv_array *a = nv_ones(s, 2, NV_DTYPE_BFLOAT16);
    nv_eval1(a);
    nv_array *t = nv_transpose(a, NULL, 0);
    nv_array *g = nv_matmul(t, a);
    double ms = time_node(g, 5, &first);
    printf("perf matmul bf16 8192^3 a.T@a: %.3f ms, %.1f TFLOP/s\n", ms, 2.0 * 8192.0 * 8192 * 8192 / ms / 1e9);
    nv_release(g);
    g = nv_matmul(a, t);
    ms = time_node(g, 5, &first);
    printf("perf matmul bf16 8192^3 a@a.T: %.3f ms, %.1f TFLOP/s\n", ms, 2.0 * 8192.0 * 8192 * 8192 / ms / 1e9);
    nv_release(g);
    nv_release(t);
    nv_release(a);
    int sb[3] = {64, 512, 512};
    nv_array *x = nv_ones(sb, 3, NV_DTYPE_BFLOAT16);
    nv_eval1(x);
    g = nv_matmul(x, x);
    ms = time_node(g, 5, &first);
    printf("perf matmul bf16 batched 64x512^3: %.3f ms, %.1f TFLOP/s\n", ms, 64 * 2.0 * 512 * 512 * 512 / ms / 1e9);
    nv_release(g);
    nv_release(x);
    mock_reset();
  }
}

int main(int argc, char **argv) {
  mock_init();
  bool do_perf = argc > 1 && !strcmp(argv[1], "perf");
  bool only_perf = argc > 1 && !strcmp(argv[1], "perfonly");
  quick = argc > 1 && !strcmp(argv[1], "quick");
  if (!only_perf) {
    test_copies();
    printf("copies: %d checks, %d failures\n", checks, failures);
    test_astype();
    printf("+astype: %d checks, %d failures\n", checks, failures);
    test_creation();
    printf("+creation: %d checks, %d failures\n", checks, failures);
    test_slice_update();
    printf("+slice_update: %d checks, %d failures\n", checks, failures);
    test_wide_paths();
    printf("+wide: %d checks, %d failures\n", checks, failures);
    test_matmul();
    printf("+matmul: %d checks, %d failures\n", checks, failures);
    test_addmm();
    printf("+addmm: %d checks, %d failures\n", checks, failures);
    test_vecdot();
    printf("+vecdot: %d checks, %d failures\n", checks, failures);
    printf("launches %ld, library calls %ld\n", mock_launches, mock_library_calls);
  }
  if (do_perf || only_perf) perf();
  printf("RESULT %d checks, %d failures\n", checks, failures);
  return failures != 0;
}
