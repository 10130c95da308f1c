/* Element-wise builders: unary and binary arithmetic, weak scalars, astype, fp8. */
#include <math.h>

#include "ops/ops_internal.h"

/* ---- Weak scalars ---- */

static nv_array *weak_constant(double f, int64_t i, bool is_int) {
  nv__node *n = nv__node_new(NV__PRIM_CONSTANT, NULL, 0, 1, sizeof(nv__constant_params));
  if (!n) return nv__array_error(NV_ERR_OUT_OF_MEMORY, "weak_scalar: out of memory");
  nv_dtype dt = is_int ? NV_DTYPE_INT32 : NV_DTYPE_FLOAT32;
  nv__output_set_shape(&n->out[0], dt, NULL, 0);
  n->out[0].flags |= NV__FLAG_WEAK;
  nv__constant_params *p = n->params;
  p->f = f;
  p->i = i;
  p->is_int = is_int;
  nv__buffer *b = nv__buffer_alloc(4);
  if (!b) {
    nv__node_release(n);
    return nv__array_error(NV_ERR_OUT_OF_MEMORY, "weak_scalar: out of memory");
  }
  if (is_int) *(int32_t *)b->ptr = (int32_t)i;
  else *(float *)b->ptr = (float)f;
  n->out[0].buf = b;
  atomic_store_explicit(&n->state, NV__DONE, memory_order_release);
  return nv__array_new(n, 0);
}

nv_array *nv_weak_scalar(double value) { return weak_constant(value, 0, false); }
nv_array *nv_weak_int(int64_t value) { return weak_constant((double)value, value, true); }

/* ---- astype ---- */

static nv_array *astype_impl(const nv_array *x, nv_dtype dtype) {
  nv__output *o = nv__out(x);
  if (o->dtype == dtype) return nv_retain((nv_array *)x);
  /* Weak scalars convert eagerly from their exact value. */
  if ((o->flags & NV__FLAG_WEAK) && x->node->params) {
    const nv__constant_params *p = x->node->params;
    if (p->is_int && dtype == NV_DTYPE_INT64) return nv_array_int64(p->i);
    if (p->is_int && dtype == NV_DTYPE_UINT64) return nv_array_uint64((uint64_t)p->i);
    if (p->is_int && nv_issubdtype(dtype, NV_CATEGORY_INTEGER)) {
      /* Integers wrap into narrower integer types, as MLX casts Python ints. */
      int64_t v = p->i;
      unsigned char tmp[8];
      switch (nv_dtype_size(dtype)) {
        case 1: *(uint8_t *)tmp = (uint8_t)v; break;
        case 2: *(uint16_t *)tmp = (uint16_t)v; break;
        case 4: *(uint32_t *)tmp = (uint32_t)v; break;
        default: *(uint64_t *)tmp = (uint64_t)v; break;
      }
      return nv_array_from_data(tmp, NULL, 0, dtype);
    }
    return nv_array_scalar(p->f, dtype);
  }
  nv_array *in[1] = {(nv_array *)x};
  return nv__op_finish("astype", nv__op_node(NV__PRIM_ASTYPE, in, 1, dtype, o->shape, o->ndim, 0));
}

nv_array *nv__cast_unscoped(const nv_array *x, nv_dtype dtype) {
  nv__scope_suspend();
  nv_array *r = astype_impl(x, dtype);
  nv__scope_resume();
  return r;
}

nv_array *nv_astype(const nv_array *x, nv_dtype dtype) {
  nv_array *f = nv__op_check("astype", &x, 1);
  if (f) return f;
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "astype", "invalid dtype %d", (int)dtype);
  if (nv__out(x)->dtype == dtype) {
    /* A new handle on the same data, as MLX returns the array itself. */
    nv_retain((nv_array *)x);
    nv_array *r = nv__array_new(nv__node_retain(x->node), x->idx);
    nv_release((nv_array *)x);
    return r;
  }
  return astype_impl(x, dtype);
}

nv_array *nv_to_fp8(const nv_array *x) {
  nv_array *f = nv__op_check("to_fp8", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  if (!nv_issubdtype(o->dtype, NV_CATEGORY_FLOATING))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "to_fp8", "needs a float array, got %s",
                        nv_dtype_name(o->dtype));
  nv_array *in[1] = {(nv_array *)x};
  return nv__op_finish("to_fp8",
                       nv__op_node(NV__PRIM_TO_FP8, in, 1, NV_DTYPE_UINT8, o->shape, o->ndim, 0));
}

nv_array *nv_from_fp8(const nv_array *x, nv_dtype dtype) {
  nv_array *f = nv__op_check("from_fp8", &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  if (o->dtype != NV_DTYPE_UINT8)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "from_fp8", "needs a uint8 array, got %s",
                        nv_dtype_name(o->dtype));
  if (!nv_issubdtype(dtype, NV_CATEGORY_FLOATING))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "from_fp8", "needs a float dtype, got %s",
                        nv_dtype_name(dtype));
  nv_array *in[1] = {(nv_array *)x};
  return nv__op_finish("from_fp8", nv__op_node(NV__PRIM_FROM_FP8, in, 1, dtype, o->shape,
                                               o->ndim, 0));
}

/* ---- Unary ---- */

static nv_array *unary(int prim, const nv_array *x) {
  const char *op = nv__prims[prim].name;
  nv_array *f = nv__op_check(op, &x, 1);
  if (f) return f;
  nv__output *o = nv__out(x);
  nv_dtype dt = o->dtype;
  bool math = prim == NV__PRIM_EXP || prim == NV__PRIM_LOG || prim == NV__PRIM_SQRT;
  if (prim == NV__PRIM_NEGATIVE && dt == NV_DTYPE_BOOL)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "not supported for bool arrays (use logical_not)");
  if (math && !nv_issubdtype(dt, NV_CATEGORY_INEXACT)) dt = NV_DTYPE_FLOAT32;
  if (prim == NV__PRIM_ABS && dt == NV_DTYPE_COMPLEX64) dt = NV_DTYPE_FLOAT32;
  nv_array *in = prim == NV__PRIM_ABS ? nv_retain((nv_array *)x) : nv__cast_unscoped(x, dt);
  nv__node *n = nv__op_node(prim, &in, 1, dt, o->shape, o->ndim, 0);
  nv_release(in);
  return nv__op_finish(op, n);
}

nv_array *nv_negative(const nv_array *x) { return unary(NV__PRIM_NEGATIVE, x); }
nv_array *nv_abs(const nv_array *x) { return unary(NV__PRIM_ABS, x); }
nv_array *nv_exp(const nv_array *x) { return unary(NV__PRIM_EXP, x); }
nv_array *nv_log(const nv_array *x) { return unary(NV__PRIM_LOG, x); }
nv_array *nv_sqrt(const nv_array *x) { return unary(NV__PRIM_SQRT, x); }

/* ---- Binary ---- */

static nv_array *binary(int prim, const nv_array *a, const nv_array *b) {
  const char *op = nv__prims[prim].name;
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  nv__output *oa = nv__out(a), *ob = nv__out(b);
  int shape[NV__MAX_DIMS], nd;
  if (!nv__broadcast_shapes(oa->shape, oa->ndim, ob->shape, ob->ndim, shape, &nd)) {
    char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "shapes %s and %s cannot be broadcast",
                        nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa),
                        nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb));
  }
  nv_dtype dt = nv__result_type(a, b);
  if (prim == NV__PRIM_DIVIDE && !nv_issubdtype(dt, NV_CATEGORY_INEXACT)) dt = NV_DTYPE_FLOAT32;
  /* bool - bool is MLX's: computed in bool, a - b is nonzero exactly when a != b. */
  if (prim == NV__PRIM_SUBTRACT && dt == NV_DTYPE_BOOL) return nv_logical_xor(a, b);
  nv_array *in[2] = {nv__cast_unscoped(a, dt), nv__cast_unscoped(b, dt)};
  nv__node *n = nv__op_node(prim, in, 2, dt, shape, nd, 0);
  nv_release(in[0]);
  nv_release(in[1]);
  return nv__op_finish(op, n);
}

nv_array *nv_add(const nv_array *a, const nv_array *b) { return binary(NV__PRIM_ADD, a, b); }
nv_array *nv_subtract(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_SUBTRACT, a, b);
}
nv_array *nv_multiply(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_MULTIPLY, a, b);
}
nv_array *nv_divide(const nv_array *a, const nv_array *b) { return binary(NV__PRIM_DIVIDE, a, b); }
nv_array *nv_maximum(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_MAXIMUM, a, b);
}
nv_array *nv_minimum(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_MINIMUM, a, b);
}

static nv_array *with_scalar(int prim, const nv_array *a, double v) {
  nv__scope_suspend();
  nv_array *s = nv_weak_scalar(v);
  nv__scope_resume();
  nv_array *r = binary(prim, a, s);
  nv_release(s);
  return r;
}

nv_array *nv_add_scalar(const nv_array *a, double b) { return with_scalar(NV__PRIM_ADD, a, b); }
nv_array *nv_subtract_scalar(const nv_array *a, double b) {
  return with_scalar(NV__PRIM_SUBTRACT, a, b);
}
nv_array *nv_multiply_scalar(const nv_array *a, double b) {
  return with_scalar(NV__PRIM_MULTIPLY, a, b);
}
nv_array *nv_divide_scalar(const nv_array *a, double b) {
  return with_scalar(NV__PRIM_DIVIDE, a, b);
}
nv_array *nv_maximum_scalar(const nv_array *a, double b) {
  return with_scalar(NV__PRIM_MAXIMUM, a, b);
}
nv_array *nv_minimum_scalar(const nv_array *a, double b) {
  return with_scalar(NV__PRIM_MINIMUM, a, b);
}

/* ---- The two-output test primitive ---- */

nv_status nv__test_add_multiply(const nv_array *a, const nv_array *b, nv_array **sum,
                                nv_array **product) {
  nv__output *oa = nv__out(a), *ob = nv__out(b);
  if (oa->dtype != ob->dtype || oa->ndim != ob->ndim ||
      memcmp(oa->shape, ob->shape, (size_t)oa->ndim * sizeof(int)))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "test_add_multiply: inputs differ");
  nv_array *in[2] = {(nv_array *)a, (nv_array *)b};
  nv__node *n = nv__node_new(NV__PRIM_TEST_ADD_MULTIPLY, in, 2, 2, 0);
  if (!n) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  nv__output_set_shape(&n->out[0], oa->dtype, oa->shape, oa->ndim);
  nv__output_set_shape(&n->out[1], oa->dtype, oa->shape, oa->ndim);
  nv__node_inherit_tracer(n, a->node); /* as nv__op_node marks its nodes */
  nv__node_inherit_tracer(n, b->node);
  nv__node_retain(n);
  *sum = nv__array_new(n, 0);
  *product = nv__array_new(n, 1);
  return NV_OK;
}
