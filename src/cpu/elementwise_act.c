/* The kernels of gelu and act_vjp (src/ops/elementwise_act.c): float16/bfloat16/float32 through
 * the vectorized formulas of elementwise_fast.c, float64 here with libm in double. */
#include "cpu/elementwise_loops.h"
#include "ops/elementwise_params.h"

/* σ(v) without overflow for either sign. */
static double sigmoid64(double v) {
  double e = exp(-fabs(v));
  return v >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

static double gelu64(int mode, double x) {
  if (x == -INFINITY) return -0.0;
  switch (mode) {
    case NV__ACT_GELU: return x == 0 ? x : 0.5 * x * erfc(-x * M_SQRT1_2);
    case NV__ACT_GELU_TANH: return x * sigmoid64(2 * 0.7978845608028654 * x * (1 + 0.044715 * x * x));
    default: return x * sigmoid64((double)1.702f * x);
  }
}

/* g f'(a) (a = x for the GELU forms, the output y for tanh and sigmoid). */
static double dact64(int mode, double a, double g) {
  if (a != a) return a;
  double xt = a > -64 ? (a < 64 ? a : 64) : -64;
  switch (mode) {
    case NV__ACT_GELU:
      return g * (0.5 * erfc(-a * M_SQRT1_2) + xt * 0.3989422804014327 * exp(-0.5 * xt * xt));
    case NV__ACT_GELU_TANH: {
      double c = 2 * 0.7978845608028654, k = 0.044715;
      double s = sigmoid64(c * xt * (1 + k * xt * xt));
      return g * (s + xt * s * (1 - s) * c * (1 + 3 * k * xt * xt));
    }
    case NV__ACT_GELU_FAST: {
      double s = sigmoid64((double)1.702f * xt);
      return g * (s + xt * s * (1 - s) * (double)1.702f);
    }
    case NV__ACT_TANH: return g * ((1 - a) * (1 + a));
    default: return g * (a * (1 - a));
  }
}

static void gelu_f64(char **p, const int64_t *s, int64_t n, const void *extra) {
  int mode = ((const nv__act_params *)extra)->mode;
  double *o = (double *)p[0];
  const double *a = (const double *)p[1];
  for (int64_t i = 0; i < n; i++) o[i] = gelu64(mode, a[i * s[1]]);
}

static void dact_f64(char **p, const int64_t *s, int64_t n, const void *extra) {
  int mode = ((const nv__act_params *)extra)->mode;
  double *o = (double *)p[0];
  const double *a = (const double *)p[1], *g = (const double *)p[2];
  for (int64_t i = 0; i < n; i++) o[i] = dact64(mode, a[i * s[1]], g[i * s[2]]);
}

static nv_status k_act(nv__node *node, const nv__operand *in, int donated) {
  const nv__act_params *pr = node->params;
  bool vjp = node->prim == NV__PRIM_ACT_VJP;
  nv__output *out = &node->out[0];
  nv__run_fn fn = nv__ew_fast_act(pr->mode, vjp, out->dtype);
  if (!fn && out->dtype == NV_DTYPE_FLOAT64) fn = vjp ? dact_f64 : gelu_f64;
  if (!fn)
    return nv__set_error(NV_ERR_UNSUPPORTED, "%s: dtype %s is not supported",
                         nv__prims[node->prim].name, nv_dtype_name(out->dtype));
  if (donated < 0 && nv__output_alloc(out) != NV_OK) return NV_ERR_OUT_OF_MEMORY;
  nv__cpu_map(out, in, vjp ? 2 : 1, fn, pr);
  return NV_OK;
}

void nv__cpu_register_elementwise_act(nv__kernel_fn *k) {
  k[NV__PRIM_GELU] = k_act;
  k[NV__PRIM_ACT_VJP] = k_act;
}
