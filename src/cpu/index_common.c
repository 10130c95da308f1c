/* The index family's shared CPU helpers: the strided walker, copies, bounds reports and the
 * element combiners (integers wrap through unsigned arithmetic; float16/bfloat16 combine in
 * float32 and round once; maximum/minimum propagate NaN; complex orders real part first). */
#include <complex.h>
#include <stdio.h>

#include "cpu/index_common.h"
#include "cpu/pool.h"

void nv__ix_row_strides(const int *shape, int nd, int64_t *st) {
  int64_t acc = 1;
  for (int i = nd - 1; i >= 0; i--) {
    st[i] = acc;
    acc *= shape[i];
  }
}

void nv__ix_walk_init(nv__ix_walk *w, const int *shape, int nd, int nops,
                      const int64_t *const *strides, char *const *base, const int64_t *isz,
                      nv__ix_run run, void *extra) {
  int64_t *dst[NV__IX_MAXOPS];
  for (int k = 0; k < nops; k++) {
    dst[k] = w->st[k];
    w->base[k] = base[k];
    w->isz[k] = isz[k];
  }
  w->nops = nops;
  w->run = run;
  w->extra = extra;
  w->size = 1;
  for (int i = 0; i < nd; i++) w->size *= shape[i];
  w->nd = nv__collapse(shape, nd, strides, nops, w->shape, dst);
}

/* Runs positions [begin, end) of the walk in row-major order, one call per run of the last
 * collapsed axis. */
static void walk_range(void *ctx, int64_t begin, int64_t end) {
  nv__ix_walk *w = ctx;
  int nd = w->nd;
  int64_t idx[NV__MAX_DIMS], rem = begin;
  for (int i = nd - 1; i >= 0; i--) {
    idx[i] = rem % w->shape[i];
    rem /= w->shape[i];
  }
  int64_t inner = w->shape[nd - 1], s[NV__IX_MAXOPS];
  for (int k = 0; k < w->nops; k++) s[k] = w->st[k][nd - 1];
  for (int64_t pos = begin; pos < end;) {
    int64_t n = inner - idx[nd - 1];
    if (n > end - pos) n = end - pos;
    char *p[NV__IX_MAXOPS];
    for (int k = 0; k < w->nops; k++) {
      int64_t off = 0;
      for (int i = 0; i < nd; i++) off += idx[i] * w->st[k][i];
      p[k] = w->base[k] + off * w->isz[k];
    }
    w->run(p, s, n, w->extra);
    pos += n;
    idx[nd - 1] += n;
    for (int i = nd - 1; i > 0 && idx[i] >= w->shape[i]; i--) {
      idx[i] = 0;
      idx[i - 1]++;
    }
  }
}

void nv__ix_walk_run(nv__ix_walk *w, bool parallel) {
  if (w->size == 0) return;
  if (parallel && w->size >= NV__PAR_GRAIN) nv__parallel_for(w->size, NV__PAR_GRAIN / 2, walk_range, w);
  else walk_range(w, 0, w->size);
}

static void copy_run(char **p, const int64_t *s, int64_t n, void *extra) {
  size_t isz = *(const size_t *)extra;
  if (s[0] == 1 && s[1] == 1) {
    memcpy(p[0], p[1], (size_t)n * isz);
    return;
  }
  switch (isz) {
    case 1:
      for (int64_t i = 0; i < n; i++) p[0][i * s[0]] = p[1][i * s[1]];
      break;
    case 2:
      for (int64_t i = 0; i < n; i++)
        ((uint16_t *)p[0])[i * s[0]] = ((const uint16_t *)p[1])[i * s[1]];
      break;
    case 4:
      for (int64_t i = 0; i < n; i++)
        ((uint32_t *)p[0])[i * s[0]] = ((const uint32_t *)p[1])[i * s[1]];
      break;
    default:
      for (int64_t i = 0; i < n; i++)
        ((uint64_t *)p[0])[i * s[0]] = ((const uint64_t *)p[1])[i * s[1]];
      break;
  }
}

typedef struct flat_copy {
  char *dst;
  const char *src;
} flat_copy;

static void flat_range(void *ctx, int64_t b, int64_t e) {
  const flat_copy *c = ctx;
  memcpy(c->dst + b, c->src + b, (size_t)(e - b));
}

void nv__ix_copy(char *dst, const int64_t *dst_st, const char *src, const int64_t *src_st,
                 const int *shape, int nd, size_t isz) {
  nv__ix_walk w;
  const int64_t *st[2] = {dst_st, src_st};
  char *base[2] = {dst, (char *)src};
  int64_t is[2] = {(int64_t)isz, (int64_t)isz};
  nv__ix_walk_init(&w, shape, nd, 2, st, base, is, copy_run, &isz);
  if (w.size == 0) return;
  if (w.nd == 1 && w.st[0][0] == 1 && w.st[1][0] == 1) {
    /* One contiguous block: split it by bytes (large copies are bandwidth-bound, and two
     * threads move more than one). */
    flat_copy c = {dst, src};
    int64_t bytes = w.size * (int64_t)isz;
    nv__parallel_for(bytes, (int64_t)1 << 20, flat_range, &c);
    return;
  }
  nv__ix_walk_run(&w, true);
}

nv_status nv__ix_copy_base(nv__output *out, const nv__operand *base) {
  if (nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  int64_t st[NV__MAX_DIMS];
  nv__ix_row_strides(out->shape, out->ndim, st);
  nv__ix_copy(nv__output_ptr(out), st, nv__operand_ptr(base), base->meta->strides, out->shape,
              out->ndim, nv_dtype_size(out->dtype));
  return NV_OK;
}

nv_status nv__ix_bad_status(nv__ix_bad *b, const char *op) {
  if (!atomic_load(&b->set)) return NV_OK;
  return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                       "%s: index %lld is out of range for an axis of size %lld", op,
                       (long long)b->value, (long long)b->size);
}

/* ---- Combiners ---- */

typedef float _Complex cf;

#define CMB(NAME, T, EXPR)                                                              \
  static void NAME(char *dp, int64_t ds, const char *sp, int64_t ss, int64_t n) {       \
    T *d = (T *)dp;                                                                     \
    const T *s = (const T *)sp;                                                         \
    for (int64_t i = 0; i < n; i++) {                                                   \
      T x = d[i * ds], y = s[i * ss];                                                   \
      d[i * ds] = (EXPR);                                                               \
    }                                                                                   \
  }

#define CMB_HALF(NAME, LOAD, STORE, EXPR)                                               \
  static void NAME(char *dp, int64_t ds, const char *sp, int64_t ss, int64_t n) {       \
    uint16_t *d = (uint16_t *)dp;                                                       \
    const uint16_t *s = (const uint16_t *)sp;                                           \
    for (int64_t i = 0; i < n; i++) {                                                   \
      float x = LOAD(d[i * ds]), y = LOAD(s[i * ss]);                                   \
      d[i * ds] = STORE(EXPR);                                                          \
    }                                                                                   \
  }

#define FMAXN(x, y) ((x) > (y) || (x) != (x) ? (x) : (y))
#define FMINN(x, y) ((x) < (y) || (x) != (x) ? (x) : (y))
#define CLESS(x, y) (crealf(x) < crealf(y) || (crealf(x) == crealf(y) && cimagf(x) < cimagf(y)))
#define CNAN(x) (crealf(x) != crealf(x) || cimagf(x) != cimagf(x))

/* Integers: wrapping add/multiply in the unsigned type of the same width. */
#define CMB_INT(SUF, T, U)                         \
  CMB(add_##SUF, T, (T)((U)x + (U)y))              \
  CMB(mul_##SUF, T, (T)((U)x * (U)y))              \
  CMB(max_##SUF, T, x > y ? x : y)                 \
  CMB(min_##SUF, T, x < y ? x : y)

/* Unsigned types narrower than int promote to int; multiply them through unsigned int. */
CMB_INT(u8, uint8_t, unsigned)
CMB_INT(u16, uint16_t, unsigned)
CMB_INT(u32, uint32_t, uint32_t)
CMB_INT(u64, uint64_t, uint64_t)
CMB_INT(i8, int8_t, unsigned)
CMB_INT(i16, int16_t, unsigned)
CMB_INT(i32, int32_t, uint32_t)
CMB_INT(i64, int64_t, uint64_t)
CMB(or_b, uint8_t, (uint8_t)(x | y))
CMB(and_b, uint8_t, (uint8_t)(x & y))
CMB(add_f32, float, x + y)
CMB(mul_f32, float, x *y)
CMB(max_f32, float, FMAXN(x, y))
CMB(min_f32, float, FMINN(x, y))
CMB(add_f64, double, x + y)
CMB(mul_f64, double, x *y)
CMB(max_f64, double, FMAXN(x, y))
CMB(min_f64, double, FMINN(x, y))
CMB(add_c64, cf, x + y)
CMB(mul_c64, cf, x *y)
CMB(max_c64, cf, CNAN(x) || !CLESS(x, y) ? x : y)
CMB(min_c64, cf, CNAN(x) || CLESS(x, y) ? x : y)
CMB_HALF(add_f16, nv__f16_to_f32, nv__f32_to_f16, x + y)
CMB_HALF(mul_f16, nv__f16_to_f32, nv__f32_to_f16, x *y)
CMB_HALF(max_f16, nv__f16_to_f32, nv__f32_to_f16, FMAXN(x, y))
CMB_HALF(min_f16, nv__f16_to_f32, nv__f32_to_f16, FMINN(x, y))
CMB_HALF(add_bf16, nv__bf16_to_f32, nv__f32_to_bf16, x + y)
CMB_HALF(mul_bf16, nv__bf16_to_f32, nv__f32_to_bf16, x *y)
CMB_HALF(max_bf16, nv__bf16_to_f32, nv__f32_to_bf16, FMAXN(x, y))
CMB_HALF(min_bf16, nv__bf16_to_f32, nv__f32_to_bf16, FMINN(x, y))

#define ASSIGN(NAME, T) CMB(NAME, T, ((void)x, y))
ASSIGN(set_1, uint8_t)
ASSIGN(set_2, uint16_t)
ASSIGN(set_4, uint32_t)
ASSIGN(set_8, uint64_t)

#define ROW(OP)                                                                          \
  {OP##_u8, OP##_u16, OP##_u32, OP##_u64, OP##_i8, OP##_i16, OP##_i32, OP##_i64, OP##_f16, \
   OP##_bf16, OP##_f32, OP##_f64, OP##_c64}

/* Per mode (add, prod, max, min) and dtype after bool (nv_dtype order). */
static const nv__ix_combine_fn table[4][NV_DTYPE_COUNT - 1] = {ROW(add), ROW(mul), ROW(max),
                                                               ROW(min)};

nv__ix_combine_fn nv__ix_combiner(int mode, nv_dtype dt) {
  if (mode == NV__IX_ASSIGN) {
    switch (nv_dtype_size(dt)) {
      case 1: return set_1;
      case 2: return set_2;
      case 4: return set_4;
      default: return set_8;
    }
  }
  if (dt == NV_DTYPE_BOOL) return mode == NV__IX_ADD || mode == NV__IX_MAX ? or_b : and_b;
  return table[mode - 1][dt - 1];
}
