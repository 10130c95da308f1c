/* The optim family's CPU kernels: adam_update in one pass over p, g, m, v, writing p', m', v'.
 *
 * The element-wise driver (nv__cpu_map) walks p' with the four inputs (any layout: strided and
 * broadcast inputs are read in place); m' and v' are row-contiguous like p', so their element
 * is p''s. Contiguous runs take a loop the compiler vectorizes (the AVX2 and AVX-512 clones);
 * this file compiles without errno for sqrt (src/CMakeLists.txt), which vectorization needs.
 *
 * Both variants of each term are one formula: p0 = p * dec with dec = 1 without decay, and the
 * step s1 * m' / (sqrt(v') * s2 + eps) with s1 = lr and s2 = 1 without bias correction (a
 * product by 1 is exact), so the loop has no branch and gives the composed update's values. */
#include <math.h>

#include "cpu/kernels.h"
#include "ops/optim_params.h"

/* The update's constants in double: each loop converts them to its compute type. */
typedef struct adam_consts {
  double b1, omb1, b2, omb2, eps;
  double s1, s2, dec; /* lr or c1, c2 or 1, decay or 1 */
} adam_consts;

/* What a run needs beyond its operands: where m' and v' start, and the constants. */
typedef struct adam_job {
  const char *out0;
  char *out1, *out2;
  adam_consts k;
} adam_job;

static inline float ld_f16(uint16_t x) { return nv__f16_to_f32(x); }
static inline float ld_bf16(uint16_t x) { return nv__bf16_to_f32(x); }
static inline float ld_f32(float x) { return x; }
static inline double ld_f64(double x) { return x; }
static inline float st_f32(float x) { return x; }
static inline double st_f64(double x) { return x; }

/* The constants in the compute type C, and one element's update: p, g, m, v read (p before any
 * write, so an output may be its own input), p', m', v' written. */
#define ADAM_CONSTS(C)                                                                        \
  const C b1 = (C)k->b1, omb1 = (C)k->omb1, b2 = (C)k->b2, omb2 = (C)k->omb2;                 \
  const C eps = (C)k->eps, s1 = (C)k->s1, s2 = (C)k->s2, dec = (C)k->dec
#define ADAM_ELEM(C, LD, ST, SQRT, P, G, M, V, PO, MO, VO)                                    \
  do {                                                                                        \
    C gi = LD(G), pi = LD(P);                                                                 \
    C mi = LD(M) * b1 + gi * omb1;                                                            \
    C vi = LD(V) * b2 + (gi * gi) * omb2;                                                     \
    MO = ST(mi);                                                                              \
    VO = ST(vi);                                                                              \
    PO = ST(pi * dec - (s1 * mi) / (SQRT(vi) * s2 + eps));                                    \
  } while (0)

/* Three loops: _contig where the outputs are new buffers (no pointer aliases another that is
 * written), _inplace where p', m' and v' took p's, m's and v's buffers (donation: each array
 * read and written through one pointer), and _strided (no restrict) for strided inputs and
 * for outputs of which only some were donated. */
#define ADAM_LOOPS(NAME, S, C, LD, ST, SQRT)                                                  \
  NV_KERNEL_CLONES static void NAME##_contig(                                                 \
      S *restrict po, S *restrict mo, S *restrict vo, const S *restrict p,                    \
      const S *restrict g, const S *restrict m, const S *restrict v, int64_t n,               \
      const adam_consts *k) {                                                                 \
    ADAM_CONSTS(C);                                                                           \
    for (int64_t i = 0; i < n; i++)                                                           \
      ADAM_ELEM(C, LD, ST, SQRT, p[i], g[i], m[i], v[i], po[i], mo[i], vo[i]);                \
  }                                                                                           \
  NV_KERNEL_CLONES static void NAME##_inplace(S *restrict p, const S *restrict g,             \
                                              S *restrict m, S *restrict v, int64_t n,        \
                                              const adam_consts *k) {                         \
    ADAM_CONSTS(C);                                                                           \
    for (int64_t i = 0; i < n; i++)                                                           \
      ADAM_ELEM(C, LD, ST, SQRT, p[i], g[i], m[i], v[i], p[i], m[i], v[i]);                   \
  }                                                                                           \
  static void NAME##_strided(S *po, S *mo, S *vo, const S *p, int64_t sp, const S *g,         \
                             int64_t sg, const S *m, int64_t sm, const S *v, int64_t sv,      \
                             int64_t n, const adam_consts *k) {                               \
    ADAM_CONSTS(C);                                                                           \
    for (int64_t i = 0; i < n; i++)                                                           \
      ADAM_ELEM(C, LD, ST, SQRT, p[i * sp], g[i * sg], m[i * sm], v[i * sv], po[i], mo[i],    \
                vo[i]);                                                                       \
  }                                                                                           \
  static void NAME##_run(char **ptr, const int64_t *s, int64_t n, const void *extra) {        \
    const adam_job *j = extra;                                                                \
    int64_t e = (int64_t)(ptr[0] - j->out0) / (int64_t)sizeof(S);                             \
    S *po = (S *)ptr[0], *mo = (S *)j->out1 + e, *vo = (S *)j->out2 + e;                      \
    const S *p = (const S *)ptr[1], *g = (const S *)ptr[2], *m = (const S *)ptr[3];           \
    const S *v = (const S *)ptr[4];                                                           \
    bool unit = s[1] == 1 && s[2] == 1 && s[3] == 1 && s[4] == 1;                             \
    int same = (po == p) + (mo == m) + (vo == v);                                             \
    if (unit && same == 0)                                                                    \
      NAME##_contig(po, mo, vo, p, g, m, v, n, &j->k);                                        \
    else if (unit && same == 3)                                                               \
      NAME##_inplace(po, g, mo, vo, n, &j->k);                                                \
    else                                                                                      \
      NAME##_strided(po, mo, vo, p, s[1], g, s[2], m, s[3], v, s[4], n, &j->k);               \
  }

ADAM_LOOPS(adam_f16, uint16_t, float, ld_f16, nv__f32_to_f16, sqrtf)
ADAM_LOOPS(adam_bf16, uint16_t, float, ld_bf16, nv__f32_to_bf16, sqrtf)
ADAM_LOOPS(adam_f32, float, float, ld_f32, st_f32, sqrtf)
ADAM_LOOPS(adam_f64, double, double, ld_f64, st_f64, sqrt)

/* The value of a one-element operand of a real float dtype. */
static double scalar(const nv__operand *op) {
  const void *x = nv__operand_ptr(op);
  switch (op->meta->dtype) {
    case NV_DTYPE_FLOAT16: return nv__f16_to_f32(*(const uint16_t *)x);
    case NV_DTYPE_BFLOAT16: return nv__bf16_to_f32(*(const uint16_t *)x);
    case NV_DTYPE_FLOAT32: return *(const float *)x;
    default: return *(const double *)x;
  }
}

static nv_status k_adam_update(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  const nv__adam_params *prm = node->params;
  nv_dtype dt = node->out[0].dtype;
  nv__run_fn run = dt == NV_DTYPE_FLOAT16    ? adam_f16_run
                   : dt == NV_DTYPE_BFLOAT16 ? adam_bf16_run
                   : dt == NV_DTYPE_FLOAT32  ? adam_f32_run
                   : dt == NV_DTYPE_FLOAT64  ? adam_f64_run
                                             : NULL;
  if (!run)
    return nv__set_error(NV_ERR_UNSUPPORTED, "adam_update: dtype %s is not supported",
                         nv_dtype_name(dt));
  /* Outputs that took an input's buffer (donate_pairs in src/core/eval.c) are written in place. */
  for (int i = 0; i < 3; i++)
    if (!node->out[i].buf && nv__output_alloc(&node->out[i]) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  adam_job j = {.out0 = nv__output_ptr(&node->out[0]),
                .out1 = nv__output_ptr(&node->out[1]),
                .out2 = nv__output_ptr(&node->out[2]),
                .k = {.b1 = prm->beta1,
                      .omb1 = 1 - prm->beta1,
                      .b2 = prm->beta2,
                      .omb2 = 1 - prm->beta2,
                      .eps = prm->eps,
                      .s2 = 1,
                      .dec = 1}};
  int k = NV__ADAM_SCALARS;
  j.k.s1 = scalar(&in[k++]);
  if (prm->bias_correction) j.k.s2 = scalar(&in[k++]);
  if (prm->decoupled) j.k.dec = scalar(&in[k++]);
  nv__cpu_map(&node->out[0], in, 4, run, &j);
  return NV_OK;
}

void nv__cpu_register_optim(nv__kernel_fn *k) { k[NV__PRIM_ADAM_UPDATE] = k_adam_update; }
