/* vecdot: sum(conj(a) * b) over the last axis of both inputs, the other axes broadcast to the
 * output. The inputs already have the output's dtype. Floats sum accurately: float16,
 * bfloat16 and float32 accumulate in float64 (exact products, ~2^-53 relative error per
 * addition) and round once; float64 sums pairwise; complex64 accumulates in double complex.
 * Integers accumulate modulo 2^64 in uint64 and wrap into the output dtype. */
#include "cpu/linalg_kernels.h"
#include "cpu/pool.h"

typedef struct vec_job {
  nv__linalg_batch bt;
  const char *a, *b;
  int64_t sa, sb, K;
  nv__output *out;
} vec_job;

/* Pairwise float64 dot product: blocks of 128 with four partial sums, halves added. */
static double dot_f64(const double *a, int64_t sa, const double *b, int64_t sb, int64_t n) {
  if (n > 128) {
    int64_t h = (n / 2 + 7) & ~(int64_t)7;
    return dot_f64(a, sa, b, sb, h) + dot_f64(a + h * sa, sa, b + h * sb, sb, n - h);
  }
  double s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; k++) s[k] += a[(i + k) * sa] * b[(i + k) * sb];
  for (; i < n; i++) s[0] += a[i * sa] * b[i * sb];
  return (s[0] + s[1]) + (s[2] + s[3]);
}

#define DOT_WIDE(T, LOAD)                                          \
  do {                                                             \
    const T *x = (const T *)a, *y = (const T *)b;                  \
    for (int64_t k = 0; k < n; k++) acc += (double)LOAD(x[k * sa]) * (double)LOAD(y[k * sb]); \
  } while (0)
#define ID(v) (v)

#define DOT_INT(T)                                                                   \
  do {                                                                               \
    const T *x = (const T *)a, *y = (const T *)b;                                    \
    uint64_t s = 0;                                                                  \
    for (int64_t k = 0; k < n; k++) s += (uint64_t)x[k * sa] * (uint64_t)y[k * sb]; \
    *(T *)o = (T)s;                                                                  \
  } while (0)

/* One output element. */
static void dot_one(nv_dtype dt, const char *a, int64_t sa, const char *b, int64_t sb, int64_t n,
                    char *o) {
  double acc = 0;
  switch (dt) {
    case NV_DTYPE_FLOAT32:
      DOT_WIDE(float, ID);
      *(float *)o = (float)acc;
      break;
    case NV_DTYPE_FLOAT16:
      DOT_WIDE(uint16_t, nv__f16_to_f32);
      *(uint16_t *)o = nv__f64_to_f16(acc);
      break;
    case NV_DTYPE_BFLOAT16:
      DOT_WIDE(uint16_t, nv__bf16_to_f32);
      *(uint16_t *)o = nv__f64_to_bf16(acc);
      break;
    case NV_DTYPE_FLOAT64:
      *(double *)o = dot_f64((const double *)a, sa, (const double *)b, sb, n);
      break;
    case NV_DTYPE_COMPLEX64: {
      const float *x = (const float *)a, *y = (const float *)b;
      double re = 0, im = 0;
      for (int64_t k = 0; k < n; k++) {
        double xr = x[2 * k * sa], xi = x[2 * k * sa + 1];
        double yr = y[2 * k * sb], yi = y[2 * k * sb + 1];
        re += xr * yr + xi * yi; /* conj(x) * y */
        im += xr * yi - xi * yr;
      }
      ((float *)o)[0] = (float)re;
      ((float *)o)[1] = (float)im;
      break;
    }
    case NV_DTYPE_INT32: DOT_INT(int32_t); break;
    case NV_DTYPE_UINT32: DOT_INT(uint32_t); break;
    case NV_DTYPE_INT64: DOT_INT(int64_t); break;
    default: DOT_INT(uint64_t); break;
  }
}

static void vec_range(void *ctx, int64_t lo, int64_t hi) {
  const vec_job *j = ctx;
  nv_dtype dt = j->out->dtype;
  size_t isz = nv_dtype_size(dt);
  char *o = (char *)nv__output_ptr(j->out);
  for (int64_t i = lo; i < hi; i++) {
    int64_t oa, ob;
    nv__linalg_batch_offsets(&j->bt, i, &oa, &ob);
    dot_one(dt, j->a + oa * (int64_t)isz, j->sa, j->b + ob * (int64_t)isz, j->sb, j->K,
            o + i * (int64_t)isz);
  }
}

nv_status nv__k_vecdot(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  nv_status st = nv__output_alloc(out);
  if (st != NV_OK || out->size == 0) return st;
  nv__linalg_view a, b;
  nv__linalg_view_of(&a, &in[0]);
  nv__linalg_view_of(&b, &in[1]);
  vec_job j = {.a = a.p, .b = b.p, .out = out};
  j.K = a.shape[a.ndim - 1];
  j.sa = a.st[a.ndim - 1];
  j.sb = b.st[b.ndim - 1];
  nv__linalg_batch_init(&j.bt, out, 0, &a, &b, 1);
  int64_t grain = j.K >= NV__PAR_GRAIN ? 1 : NV__PAR_GRAIN / (j.K > 0 ? j.K : 1);
  nv__parallel_for(out->size, grain, vec_range, &j);
  return NV_OK;
}
