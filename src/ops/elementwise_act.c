/* GELU's three forms and the fused derivatives of the activations (act_vjp), each one
 * element-wise pass on the CPU instead of the three to six ops of the composed forms. On a GPU
 * stream (no CUDA kernels yet) both are built from the composed forms. */
#include "ops/elementwise_act.h"

#include "ops/elementwise_params.h"
#include "ops/ops_internal.h"

static const char *act_name(int prim) { return nv__prims[prim].name; }

static bool on_gpu(void) { return nv_current_stream().device.type == NV_DEVICE_GPU; }

/* The composed forms are built with scopes suspended: every temporary goes through T (in
 * nv__temps), released once the result is retained. */
#define T(expr) nv__temp(t, (expr))
static nv_array *finish_composed(nv__temps *t, nv_array *r) {
  nv_retain(r);
  nv__temps_release(t);
  return r;
}

/* The composed forms, as the Python activations and MLX write them. */
static nv_array *gelu_composed(nv__temps *t, int mode, const nv_array *x) {
  if (mode == NV__ACT_GELU) {
    nv_array *e = T(nv_erf(T(nv_multiply_scalar(x, 0.7071067811865476))));
    return T(nv_multiply(T(nv_multiply_scalar(x, 0.5)), T(nv_add_scalar(e, 1.0))));
  }
  nv_array *v;
  if (mode == NV__ACT_GELU_TANH) {
    nv_array *p = T(nv_add_scalar(T(nv_multiply_scalar(T(nv_square(x)), 0.044715)), 1.0));
    v = T(nv_multiply_scalar(T(nv_multiply(x, p)), 2 * 0.7978845608028654));
  } else {
    v = T(nv_multiply_scalar(x, 1.702));
  }
  return T(nv_multiply(x, T(nv_sigmoid(v))));
}

static nv_array *act_vjp_composed(nv__temps *t, int mode, const nv_array *a, const nv_array *g) {
  nv_array *d, *one = T(nv_array_float(1.0f));
  if (mode == NV__ACT_TANH) {
    d = T(nv_multiply(T(nv_subtract(one, a)), T(nv_add_scalar(a, 1.0))));
  } else if (mode == NV__ACT_SIGMOID) {
    d = T(nv_multiply(a, T(nv_subtract(one, a))));
  } else if (mode == NV__ACT_GELU) {
    nv_array *e = T(nv_erf(T(nv_multiply_scalar(a, 0.7071067811865476))));
    nv_array *cdf = T(nv_add_scalar(T(nv_multiply_scalar(e, 0.5)), 0.5));
    nv_array *q = T(nv_exp(T(nv_multiply_scalar(T(nv_square(a)), -0.5))));
    nv_array *pdf = T(nv_multiply_scalar(q, 0.3989422804014327));
    d = T(nv_add(cdf, T(nv_multiply(a, pdf))));
  } else {
    bool tanh_form = mode == NV__ACT_GELU_TANH;
    double c = tanh_form ? 2 * 0.7978845608028654 : 1.702, k = tanh_form ? 0.044715 : 0.0;
    nv_array *x2 = T(nv_square(a));
    nv_array *p = T(nv_add_scalar(T(nv_multiply_scalar(x2, k)), 1.0));
    nv_array *v = T(nv_multiply_scalar(T(nv_multiply(a, p)), c));
    nv_array *dv = T(nv_multiply_scalar(T(nv_add_scalar(T(nv_multiply_scalar(x2, 3 * k)), 1.0)), c));
    nv_array *s = T(nv_sigmoid(v));
    nv_array *sp = T(nv_multiply(s, T(nv_subtract(one, s))));
    d = T(nv_add(s, T(nv_multiply(T(nv_multiply(a, sp)), dv))));
  }
  return T(nv_multiply(g, d));
}
#undef T

nv_array *nv__gelu(int mode, const nv_array *x) {
  const char *op = mode == NV__ACT_GELU ? "gelu" : mode == NV__ACT_GELU_TANH ? "gelu_approx"
                                                                              : "gelu_fast_approx";
  nv_array *f = nv__op_check(op, &x, 1);
  if (f) return f;
  nv_dtype dt = nv__out(x)->dtype;
  if (dt == NV_DTYPE_COMPLEX64)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "complex64 is not supported");
  if (!nv_issubdtype(dt, NV_CATEGORY_FLOATING)) dt = NV_DTYPE_FLOAT32;
  nv_array *in = nv__cast_unscoped(x, dt);
  if (on_gpu()) {
    nv__temps t = {.n = 0};
    nv__scope_suspend();
    nv_array *r = finish_composed(&t, gelu_composed(&t, mode, in));
    nv__scope_resume();
    nv_release(in);
    nv__scope_register(r);
    return r;
  }
  const nv__output *o = nv__out(in);
  nv__node *n = nv__op_node(NV__PRIM_GELU, &in, 1, dt, o->shape, o->ndim, sizeof(nv__act_params));
  nv_release(in);
  if (n) ((nv__act_params *)n->params)->mode = mode;
  return nv__op_finish(op, n);
}

nv_array *nv__act_vjp(int mode, const nv_array *a, const nv_array *g) {
  const char *op = act_name(NV__PRIM_ACT_VJP);
  const nv_array *xs[2] = {a, g};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *og = nv__out(g);
  nv_dtype dt = oa->dtype;
  if (!nv_issubdtype(dt, NV_CATEGORY_FLOATING))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "a real floating input is needed, got %s",
                        nv_dtype_name(dt));
  int shape[NV__MAX_DIMS], nd;
  if (!nv__broadcast_shapes(oa->shape, oa->ndim, og->shape, og->ndim, shape, &nd))
  {
    char sa[96], sg[96];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "shapes %s and %s do not broadcast",
                        nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa),
                        nv__shape_str(og->shape, og->ndim, sg, sizeof sg));
  }
  nv_array *in[2] = {nv__cast_unscoped(a, dt), nv__cast_unscoped(g, dt)};
  if (on_gpu()) {
    nv__temps t = {.n = 0};
    nv__scope_suspend();
    nv_array *r = finish_composed(&t, act_vjp_composed(&t, mode, in[0], in[1]));
    nv__scope_resume();
    nv_release(in[0]);
    nv_release(in[1]);
    nv__scope_register(r);
    return r;
  }
  nv__node *n = nv__op_node(NV__PRIM_ACT_VJP, in, 2, dt, shape, nd, sizeof(nv__act_params));
  nv_release(in[0]);
  nv_release(in[1]);
  if (n) ((nv__act_params *)n->params)->mode = mode;
  return nv__op_finish(op, n);
}

nv_array *nv_gelu(const nv_array *x) { return nv__gelu(NV__ACT_GELU, x); }
nv_array *nv_gelu_approx(const nv_array *x) { return nv__gelu(NV__ACT_GELU_TANH, x); }
nv_array *nv_gelu_fast_approx(const nv_array *x) { return nv__gelu(NV__ACT_GELU_FAST, x); }
