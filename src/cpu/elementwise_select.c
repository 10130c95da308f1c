/* where, isclose, allclose and array_equal on the CPU. allclose and array_equal test every
 * element of the broadcast inputs in one pass and keep no intermediate array. */
#include <stdatomic.h>

#include "cpu/elementwise_loops.h"
#include "ops/elementwise_params.h"

/* ---- where ---- */

#define WHERE_FN(NAME, T)                                                          \
  static void NAME(char **p, const int64_t *s, int64_t n, const void *extra) {     \
    (void)extra;                                                                   \
    T *o = (T *)p[0];                                                              \
    const uint8_t *c = (const uint8_t *)p[1];                                      \
    const T *x = (const T *)p[2], *y = (const T *)p[3];                            \
    int64_t sc = s[1], sx = s[2], sy = s[3];                                       \
    if (sc == 1 && sx == 1 && sy == 1) {                                           \
      for (int64_t i = 0; i < n; i++) o[i] = c[i] ? x[i] : y[i];                   \
    } else {                                                                       \
      for (int64_t i = 0; i < n; i++) o[i] = c[i * sc] ? x[i * sx] : y[i * sy];    \
    }                                                                              \
  }
WHERE_FN(where_1, uint8_t)
WHERE_FN(where_2, uint16_t)
WHERE_FN(where_4, uint32_t)
WHERE_FN(where_8, uint64_t)

nv_status nv__k_where(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated < 0 && nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  size_t isz = nv_dtype_size(out->dtype);
  nv__run_fn fn = isz == 1 ? where_1 : isz == 2 ? where_2 : isz == 4 ? where_4 : where_8;
  nv__cpu_map(out, in, 3, fn, NULL);
  return NV_OK;
}

/* ---- isclose ---- */

/* NumPy's isclose in double: equal values (infinities included) are close, NaN only to NaN
 * with equal_nan, other non-finite values to nothing. */
static inline bool close_d(double a, double b, const nv__isclose_params *p) {
  if (a == b) return true;
  if (isnan(a) || isnan(b)) return p->equal_nan && isnan(a) && isnan(b);
  if (isinf(a) || isinf(b)) return false;
  return fabs(a - b) <= p->atol + p->rtol * fabs(b);
}
static inline bool close_c(nv__cf a, nv__cf b, const nv__isclose_params *p) {
  if (a == b) return true;
  bool na = isnan(crealf(a)) || isnan(cimagf(a)), nb = isnan(crealf(b)) || isnan(cimagf(b));
  if (na || nb) return p->equal_nan && na && nb;
  if (!isfinite(crealf(a)) || !isfinite(cimagf(a)) || !isfinite(crealf(b)) ||
      !isfinite(cimagf(b)))
    return false;
  nv__cd d = (nv__cd)a - (nv__cd)b;
  return cabs(d) <= p->atol + p->rtol * cabs((nv__cd)b);
}
/* array_equal: equal values, or both NaN with equal_nan. */
#define SAME_F(a, b, p) ((a) == (b) || ((p)->equal_nan && isnan(a) && isnan(b)))
static inline bool same_c(nv__cf a, nv__cf b, const nv__isclose_params *p) {
  if (a == b) return true;
  bool na = isnan(crealf(a)) || isnan(cimagf(a)), nb = isnan(crealf(b)) || isnan(cimagf(b));
  return p->equal_nan && na && nb;
}

#define D(v) ((double)(v))
#define PRM ((const nv__isclose_params *)extra)
#define CLOSE_ROW(OP, E, EH, C)                                               \
  NV__BIN_FN(OP##_b, bool, uint8_t, E)                                        \
  NV__BIN_FN(OP##_u8, bool, uint8_t, E)                                       \
  NV__BIN_FN(OP##_u16, bool, uint16_t, E)                                     \
  NV__BIN_FN(OP##_u32, bool, uint32_t, E)                                     \
  NV__BIN_FN(OP##_u64, bool, uint64_t, E)                                     \
  NV__BIN_FN(OP##_i8, bool, int8_t, E)                                        \
  NV__BIN_FN(OP##_i16, bool, int16_t, E)                                      \
  NV__BIN_FN(OP##_i32, bool, int32_t, E)                                      \
  NV__BIN_FN(OP##_i64, bool, int64_t, E)                                      \
  NV__BIN_HALF_FN(OP##_f16, bool, nv__f16_to_f32, NV__KEEP, EH)               \
  NV__BIN_HALF_FN(OP##_bf16, bool, nv__bf16_to_f32, NV__KEEP, EH)             \
  NV__BIN_FN(OP##_f32, bool, float, EH)                                       \
  NV__BIN_FN(OP##_f64, bool, double, EH)                                      \
  NV__BIN_FN(OP##_c64, bool, nv__cf, C)

CLOSE_ROW(close, close_d(D(x), D(y), PRM), close_d(D(x), D(y), PRM), close_c(x, y, PRM))
CLOSE_ROW(same, x == y, SAME_F(x, y, PRM), same_c(x, y, PRM))

#define ALL(OP)                                                                         \
  {OP##_b,   OP##_u8,  OP##_u16,  OP##_u32, OP##_u64, OP##_i8,  OP##_i16,              \
   OP##_i32, OP##_i64, OP##_f16,  OP##_bf16, OP##_f32, OP##_f64, OP##_c64}
static const nv__run_fn close_table[NV_DTYPE_COUNT] = ALL(close);
static const nv__run_fn same_table[NV_DTYPE_COUNT] = ALL(same);

nv_status nv__k_isclose(nv__node *node, const nv__operand *in, int donated) {
  nv__output *out = &node->out[0];
  if (donated < 0 && nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv__cpu_map(out, in, 2, close_table[in[0].meta->dtype], node->params);
  return NV_OK;
}

/* ---- allclose / array_equal: a test over every element, reduced to one bool ---- */

typedef struct all_job {
  nv__run_fn test;
  const nv__isclose_params *params;
  atomic_bool ok;
} all_job;

typedef struct all_ctx {
  all_job *job;
  int64_t isz; /* bytes per input element */
} all_ctx;

/* Runs the element test in chunks into a small local buffer and clears `ok` at the first
 * failure; runs that start after it return at once. The output pointer is never written. */
static void all_run(char **p, const int64_t *s, int64_t n, const void *extra) {
  const all_ctx *c = extra;
  all_job *j = c->job;
  bool buf[1024];
  int64_t st[3] = {1, s[1], s[2]};
  for (int64_t done = 0; done < n && atomic_load_explicit(&j->ok, memory_order_relaxed);) {
    int64_t m = n - done < 1024 ? n - done : 1024;
    char *q[3] = {(char *)buf, p[1] + done * s[1] * c->isz, p[2] + done * s[2] * c->isz};
    j->test(q, st, m, j->params);
    for (int64_t i = 0; i < m; i++)
      if (!buf[i]) {
        atomic_store_explicit(&j->ok, false, memory_order_relaxed);
        return;
      }
    done += m;
  }
}

nv_status nv__k_all_close(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv_dtype dt = in[0].meta->dtype;
  all_job job = {node->prim == NV__PRIM_ALLCLOSE ? close_table[dt] : same_table[dt],
                 node->params, true};
  /* Walk the broadcast index space with a write-nothing output (zero strides). */
  int shape[NV__MAX_DIMS], nd;
  const nv__output *a = in[0].meta, *b = in[1].meta;
  int off_a, off_b;
  nd = a->ndim > b->ndim ? a->ndim : b->ndim;
  off_a = nd - a->ndim;
  off_b = nd - b->ndim;
  int64_t zero[NV__MAX_DIMS], size = 1;
  for (int i = 0; i < nd; i++) {
    int da = i < off_a ? 1 : a->shape[i - off_a], db = i < off_b ? 1 : b->shape[i - off_b];
    shape[i] = da == 1 ? db : da;
    zero[i] = 0;
    size *= shape[i];
  }
  unsigned char sink = 0;
  nv__buffer sink_buf = {.ptr = &sink, .nbytes = 1};
  nv__output space = {.dtype = NV_DTYPE_BOOL, .ndim = nd, .size = size, .shape = shape,
                      .strides = zero, .buf = &sink_buf, .offset = 0};
  all_ctx ctx = {&job, (int64_t)nv_dtype_size(dt)};
  nv__cpu_map(&space, in, 2, all_run, &ctx);
  *(bool *)nv__output_ptr(out) = atomic_load(&job.ok);
  return NV_OK;
}
