/* GELU's three forms and the fused derivatives of the activations (act_vjp), each one
 * element-wise pass instead of the three to six ops of the composed forms, on every device
 * (kernels: src/cpu/elementwise_act.c and elementwise_fast.c, src/cuda/elementwise_act.cu). */
#include "ops/elementwise_act.h"

#include "ops/elementwise_params.h"
#include "ops/ops_internal.h"

static const char *act_name(int prim) { return nv__prims[prim].name; }

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
  nv__node *n = nv__op_node(NV__PRIM_ACT_VJP, in, 2, dt, shape, nd, sizeof(nv__act_params));
  nv_release(in[0]);
  nv_release(in[1]);
  if (n) ((nv__act_params *)n->params)->mode = mode;
  return nv__op_finish(op, n);
}

nv_array *nv_gelu(const nv_array *x) { return nv__gelu(NV__ACT_GELU, x); }
nv_array *nv_gelu_approx(const nv_array *x) { return nv__gelu(NV__ACT_GELU_TANH, x); }
nv_array *nv_gelu_fast_approx(const nv_array *x) { return nv__gelu(NV__ACT_GELU_FAST, x); }
