/* vjp, jvp and vmap rules of the elementwise family's primitives (src/ops/prims_elementwise.h).
 * The derivatives are MLX's (docs/transforms.md, "Decided rules"): for complex inputs a rule
 * multiplies by f'(z) without conjugating, as MLX and JAX do; integer and bool results carry
 * no gradient. Rules compose op builders, so they are themselves differentiable and batchable.
 * stop_gradient's rules belong to the transforms family (rules_core.c). */
#include <math.h>

#include "ops/elementwise_act.h"
#include "ops/elementwise_params.h"
#include "transforms/rule_decls.h"

static bool inexact(nv_dtype d) { return nv_issubdtype(d, NV_CATEGORY_INEXACT); }
static bool real_float(nv_dtype d) { return nv_issubdtype(d, NV_CATEGORY_FLOATING); }

/* ---- Helpers that take over their array arguments ---- */

static nv_array *take(nv_array *(*op)(const nv_array *), nv_array *a) {
  nv_array *r = op(a);
  nv_release(a);
  return r;
}

static nv_array *take2(nv_array *(*op)(const nv_array *, const nv_array *), nv_array *a,
                       nv_array *b) {
  nv_array *r = op(a, b);
  nv_release(a);
  nv_release(b);
  return r;
}

/* a * mul + add with weak scalars (so a keeps its dtype); steps that do nothing are skipped. */
static nv_array *affine(nv_array *a, double mul, double add) {
  if (mul != 1.0) {
    nv_array *m = nv_multiply_scalar(a, mul);
    nv_release(a);
    a = m;
  }
  if (add != 0.0) {
    nv_array *s = nv_add_scalar(a, add);
    nv_release(a);
    a = s;
  }
  return a;
}

static nv_array *own(const nv_array *x) { return nv_retain((nv_array *)x); }

/* `g` reduced to the shape of `x` (taken over). */
static nv_array *reduce_to(nv_array *g, const nv_array *x) {
  nv_array *r = nv__tf_unbroadcast(g, meta(x)->shape, meta(x)->ndim);
  nv_release(g);
  return r;
}

/* `t` broadcast to the shape of `x` (taken over; NULL stays NULL). */
static nv_array *bcast_to(nv_array *t, const nv_array *x) {
  if (!t || nv__tf_same_shape(t, x)) return t;
  nv_array *r = nv_broadcast_to(t, meta(x)->shape, meta(x)->ndim);
  nv_release(t);
  return r;
}

/* Adds two possibly-NULL terms (taken over). */
static nv_array *add_terms(nv_array *a, nv_array *b) {
  if (!a) return b;
  if (!b) return a;
  return take2(nv_add, a, b);
}

/* A 0-d zero of `dt`, for where-based rules. */
static nv_array *zero_of(nv_dtype dt) { return nv_zeros(NULL, 0, dt); }

/* ---- Unary derivatives ---- */

/* g · f'(x) for the unary primitive of node n, with x its input and y its output. */
static nv_array *unary_chain(const nv__node *n, const nv_array *x, const nv_array *y,
                             const nv_array *g) {
  nv_array *d;
  /* tanh and sigmoid of real floats: g f'(x) from y in one fused pass (act_vjp). */
  if ((n->prim == NV__PRIM_TANH || n->prim == NV__PRIM_SIGMOID) && real_float(meta(y)->dtype))
    return nv__act_vjp(n->prim == NV__PRIM_TANH ? NV__ACT_TANH : NV__ACT_SIGMOID, y, g);
  switch (n->prim) {
    case NV__PRIM_DEGREES: return nv_multiply_scalar(g, 180.0 / M_PI);
    case NV__PRIM_RADIANS: return nv_multiply_scalar(g, M_PI / 180.0);
    case NV__PRIM_RECIPROCAL: d = affine(nv_square(y), -1.0, 0.0); break;
    case NV__PRIM_SQUARE: d = nv_multiply_scalar(x, 2.0); break;
    case NV__PRIM_RSQRT: d = affine(nv_divide(y, x), -0.5, 0.0); break;
    case NV__PRIM_EXPM1: d = nv_add_scalar(y, 1.0); break;
    case NV__PRIM_LOG2: d = affine(nv_reciprocal(x), 1.0 / M_LN2, 0.0); break;
    case NV__PRIM_LOG10: d = affine(nv_reciprocal(x), 1.0 / M_LN10, 0.0); break;
    case NV__PRIM_LOG1P: d = take(nv_reciprocal, nv_add_scalar(x, 1.0)); break;
    case NV__PRIM_SIN: d = nv_cos(x); break;
    case NV__PRIM_COS: d = take(nv_negative, nv_sin(x)); break;
    case NV__PRIM_TAN: d = take(nv_reciprocal, take(nv_square, nv_cos(x))); break;
    case NV__PRIM_ARCSIN: d = take(nv_rsqrt, affine(nv_square(x), -1.0, 1.0)); break;
    case NV__PRIM_ARCCOS:
      d = take(nv_negative, take(nv_rsqrt, affine(nv_square(x), -1.0, 1.0)));
      break;
    case NV__PRIM_ARCTAN: d = take(nv_reciprocal, affine(nv_square(x), 1.0, 1.0)); break;
    case NV__PRIM_SINH: d = nv_cosh(x); break;
    case NV__PRIM_COSH: d = nv_sinh(x); break;
    /* 1 - y² from the output (as MLX and PyTorch): two cheap element-wise ops, not cosh. */
    case NV__PRIM_TANH: d = affine(nv_square(y), -1.0, 1.0); break;
    case NV__PRIM_ARCSINH: d = take(nv_rsqrt, affine(nv_square(x), 1.0, 1.0)); break;
    case NV__PRIM_ARCCOSH: d = take(nv_rsqrt, affine(nv_square(x), 1.0, -1.0)); break;
    case NV__PRIM_ARCTANH: d = take(nv_reciprocal, affine(nv_square(x), -1.0, 1.0)); break;
    case NV__PRIM_SIGMOID: d = take2(nv_multiply, own(y), affine(own(y), -1.0, 1.0)); break;
    case NV__PRIM_ERF:
      /* 2/sqrt(pi) · e^(-x²) */
      d = affine(take(nv_exp, affine(nv_square(x), -1.0, 0.0)), 1.1283791670955126, 0.0);
      break;
    case NV__PRIM_ERFINV:
      /* sqrt(pi)/2 · e^(y²) */
      d = affine(take(nv_exp, nv_square(y)), 0.88622692545275801, 0.0);
      break;
    default: return NULL;
  }
  return take2(nv_multiply, own(g), d);
}

VJP(vjp_unary) {
  if (want[0] && inexact(meta(out[0])->dtype))
    grad[0] = unary_chain(n, in[0], out[0], cot[0]);
  return NV_OK;
}

JVP(jvp_unary) {
  if (inexact(meta(out[0])->dtype)) ot[0] = unary_chain(n, in[0], out[0], tan[0]);
  return NV_OK;
}

/* ---- Rules without a gradient ---- */

/* Piecewise-constant ops (sign, floor, ceil, trunc, round, floor_divide) have a zero
 * gradient; tests, comparisons, logical and bitwise ops and counts have none. Both leave the
 * gradient NULL, which the walk reads as zero. */
VJP(vjp_none) { return NV_OK; }
JVP(jvp_none) { return NV_OK; }

/* ---- Complex parts, nan_to_num, view, depends ---- */

VJP(vjp_conjugate) {
  if (want[0]) grad[0] = nv_conjugate(cot[0]);
  return NV_OK;
}

JVP(jvp_conjugate) {
  ot[0] = nv_conjugate(tan[0]);
  return NV_OK;
}

/* real: the cotangent becomes the real part of the input's gradient. */
VJP(vjp_real) {
  if (want[0]) grad[0] = nv_astype(cot[0], meta(in[0])->dtype);
  return NV_OK;
}

JVP(jvp_real) {
  ot[0] = nv_real(tan[0]);
  return NV_OK;
}

/* imag: the transpose of z -> Im z is c -> -i·c (as MLX and JAX). */
VJP(vjp_imag) {
  if (!want[0]) return NV_OK;
  nv_array *minus_i = nv_array_complex(0.0f, -1.0f);
  grad[0] = nv_multiply(cot[0], minus_i);
  nv_release(minus_i);
  return NV_OK;
}

JVP(jvp_imag) {
  ot[0] = nv_imag(tan[0]);
  return NV_OK;
}

/* g where x is finite, else 0: the replaced values are constants. */
static nv_array *finite_only(const nv_array *x, const nv_array *g) {
  nv_array *m = nv_isfinite(x), *z = zero_of(meta(g)->dtype);
  nv_array *r = nv_where(m, g, z);
  nv_release(m);
  nv_release(z);
  return r;
}

VJP(vjp_nan_to_num) {
  if (want[0]) grad[0] = finite_only(in[0], cot[0]);
  return NV_OK;
}

JVP(jvp_nan_to_num) {
  ot[0] = finite_only(in[0], tan[0]);
  return NV_OK;
}

/* view passes gradients only between real floating types of one size (the bytes keep their
 * meaning as numbers of the same width); other views cut them. */
static bool view_differentiable(const nv__node *n, const nv_array *x) {
  nv_dtype a = meta(x)->dtype, b = n->out[0].dtype;
  return real_float(a) && real_float(b) && nv_dtype_size(a) == nv_dtype_size(b);
}

VJP(vjp_view) {
  if (want[0] && view_differentiable(n, in[0])) grad[0] = nv_view(cot[0], meta(in[0])->dtype);
  return NV_OK;
}

JVP(jvp_view) {
  if (view_differentiable(n, in[0])) ot[0] = nv_view(tan[0], n->out[0].dtype);
  return NV_OK;
}

/* depends: output i is input i; the dependencies get no gradient. */
VJP(vjp_depends) {
  for (int i = 0; i < n->noutputs; i++)
    if (want[i] && cot[i]) grad[i] = nv_retain(cot[i]);
  return NV_OK;
}

JVP(jvp_depends) {
  for (int i = 0; i < n->noutputs; i++) ot[i] = tan[i] ? nv_retain(tan[i]) : NULL;
  return NV_OK;
}

/* ---- Binary derivatives ---- */

/* g · ∂out/∂(input `arg`) for the binary primitive of node n (a, b its inputs, y its output);
 * the result broadcasts to the output's shape. */
static nv_array *binary_chain(const nv__node *n, const nv_array *a, const nv_array *b,
                              const nv_array *y, int arg, const nv_array *g) {
  nv_array *d;
  switch (n->prim) {
    case NV__PRIM_REMAINDER:
    case NV__PRIM_DIVMOD:
      /* a - b·floor(a/b): 1 and -floor(a/b) (divmod: its remainder output). */
      if (arg == 0) return own(g);
      d = take(nv_negative, take(nv_floor, nv_divide(a, b)));
      break;
    case NV__PRIM_POWER:
      if (arg == 0) {
        /* b · a^(b-1) (0 · 0^-1 is NaN at a = b = 0, as MLX). */
        d = take2(nv_multiply, take2(nv_power, own(a), nv_subtract_scalar(b, 1.0)), own(b));
      } else {
        /* log(a) · a^b, and 0 where a^b is 0 (MLX: 0 · log 0 counts as 0). */
        nv_array *z = zero_of(meta(y)->dtype), *l = take2(nv_multiply, nv_log(a), own(y));
        d = nv_where(y, l, z);
        nv_release(z);
        nv_release(l);
      }
      break;
    case NV__PRIM_ARCTAN2: {
      /* atan2(a, b): b / (a² + b²) and -a / (a² + b²). */
      nv_array *r = take2(nv_add, nv_square(a), nv_square(b));
      d = take2(nv_divide, arg == 0 ? own(b) : nv_negative(a), r);
      break;
    }
    case NV__PRIM_LOGADDEXP:
      /* sigmoid(a - b) and sigmoid(b - a): the latter rather than 1 - sigmoid(a - b), which
       * rounds to 0 where the true value is tiny. */
      d = take(nv_sigmoid, arg == 0 ? nv_subtract(a, b) : nv_subtract(b, a));
      break;
    default: return NULL;
  }
  return take2(nv_multiply, own(g), d);
}

VJP(vjp_binary) {
  if (!inexact(meta(out[0])->dtype)) return NV_OK;
  for (int i = 0; i < 2; i++)
    if (want[i]) grad[i] = reduce_to(binary_chain(n, in[0], in[1], out[0], i, cot[0]), in[i]);
  return NV_OK;
}

JVP(jvp_binary) {
  if (!inexact(meta(out[0])->dtype)) return NV_OK;
  nv_array *acc = NULL;
  for (int i = 0; i < 2; i++)
    if (tan[i]) acc = add_terms(acc, binary_chain(n, in[0], in[1], out[0], i, tan[i]));
  ot[0] = bcast_to(acc, out[0]);
  return NV_OK;
}

/* divmod: the quotient is piecewise constant (zero gradient); the remainder differentiates as
 * remainder does. */
VJP(vjp_divmod) {
  if (!cot[1] || !inexact(meta(out[1])->dtype)) return NV_OK;
  for (int i = 0; i < 2; i++)
    if (want[i]) grad[i] = reduce_to(binary_chain(n, in[0], in[1], out[1], i, cot[1]), in[i]);
  return NV_OK;
}

JVP(jvp_divmod) {
  if (!inexact(meta(out[1])->dtype)) return NV_OK;
  nv_array *acc = NULL;
  for (int i = 0; i < 2; i++)
    if (tan[i]) acc = add_terms(acc, binary_chain(n, in[0], in[1], out[1], i, tan[i]));
  ot[1] = bcast_to(acc, out[1]);
  return NV_OK;
}

/* ---- where ---- */

/* where(cond, g, 0) for the x branch, where(cond, 0, g) for the y branch. */
static nv_array *select_branch(const nv_array *cond, const nv_array *g, int branch) {
  nv_array *z = zero_of(meta(g)->dtype);
  nv_array *r = branch == 1 ? nv_where(cond, g, z) : nv_where(cond, z, g);
  nv_release(z);
  return r;
}

VJP(vjp_where) {
  if (!inexact(meta(out[0])->dtype)) return NV_OK;
  for (int i = 1; i < 3; i++)
    if (want[i]) grad[i] = reduce_to(select_branch(in[0], cot[0], i), in[i]);
  return NV_OK;
}

JVP(jvp_where) {
  if (!inexact(meta(out[0])->dtype) || (!tan[1] && !tan[2])) return NV_OK;
  nv_dtype dt = meta(out[0])->dtype;
  nv_array *tx = tan[1] ? own(tan[1]) : zero_of(dt), *ty = tan[2] ? own(tan[2]) : zero_of(dt);
  nv_array *r = nv_where(in[0], tx, ty);
  nv_release(tx);
  nv_release(ty);
  ot[0] = bcast_to(r, out[0]);
  return NV_OK;
}

/* ---- vmap ---- */

/* The unary op of node n applied to x (with the node's parameters). */
static nv_array *unary_op(const nv__node *n, const nv_array *x) {
  switch (n->prim) {
    case NV__PRIM_SIGN: return nv_sign(x);
    case NV__PRIM_LOGICAL_NOT: return nv_logical_not(x);
    case NV__PRIM_RECIPROCAL: return nv_reciprocal(x);
    case NV__PRIM_FLOOR: return nv_floor(x);
    case NV__PRIM_CEIL: return nv_ceil(x);
    case NV__PRIM_TRUNC: return nv_trunc(x);
    case NV__PRIM_ROUND: return nv_round(x, ((const nv__round_params *)n->params)->decimals);
    case NV__PRIM_SQUARE: return nv_square(x);
    case NV__PRIM_RSQRT: return nv_rsqrt(x);
    case NV__PRIM_EXPM1: return nv_expm1(x);
    case NV__PRIM_LOG2: return nv_log2(x);
    case NV__PRIM_LOG10: return nv_log10(x);
    case NV__PRIM_LOG1P: return nv_log1p(x);
    case NV__PRIM_SIN: return nv_sin(x);
    case NV__PRIM_COS: return nv_cos(x);
    case NV__PRIM_TAN: return nv_tan(x);
    case NV__PRIM_ARCSIN: return nv_arcsin(x);
    case NV__PRIM_ARCCOS: return nv_arccos(x);
    case NV__PRIM_ARCTAN: return nv_arctan(x);
    case NV__PRIM_SINH: return nv_sinh(x);
    case NV__PRIM_COSH: return nv_cosh(x);
    case NV__PRIM_TANH: return nv_tanh(x);
    case NV__PRIM_ARCSINH: return nv_arcsinh(x);
    case NV__PRIM_ARCCOSH: return nv_arccosh(x);
    case NV__PRIM_ARCTANH: return nv_arctanh(x);
    case NV__PRIM_DEGREES: return nv_degrees(x);
    case NV__PRIM_RADIANS: return nv_radians(x);
    case NV__PRIM_SIGMOID: return nv_sigmoid(x);
    case NV__PRIM_ERF: return nv_erf(x);
    case NV__PRIM_ERFINV: return nv_erfinv(x);
    case NV__PRIM_ISNAN: return nv_isnan(x);
    case NV__PRIM_ISINF: return nv_isinf(x);
    case NV__PRIM_ISFINITE: return nv_isfinite(x);
    case NV__PRIM_ISPOSINF: return nv_isposinf(x);
    case NV__PRIM_ISNEGINF: return nv_isneginf(x);
    case NV__PRIM_NAN_TO_NUM: {
      /* The stored replacements are already rounded to the dtype: rounding again keeps them. */
      const nv__nan_to_num_params *p = n->params;
      return nv_nan_to_num(x, p->nan, &p->posinf, &p->neginf);
    }
    case NV__PRIM_CONJUGATE: return nv_conjugate(x);
    case NV__PRIM_BITWISE_INVERT: return nv_bitwise_invert(x);
    case NV__PRIM_REAL: return nv_real(x);
    default: return nv_imag(x);
  }
}

/* The binary op of node n applied to a and b. */
static nv_array *binary_op(const nv__node *n, const nv_array *a, const nv_array *b) {
  switch (n->prim) {
    case NV__PRIM_FLOOR_DIVIDE: return nv_floor_divide(a, b);
    case NV__PRIM_REMAINDER: return nv_remainder(a, b);
    case NV__PRIM_POWER: return nv_power(a, b);
    case NV__PRIM_ARCTAN2: return nv_arctan2(a, b);
    case NV__PRIM_LOGADDEXP: return nv_logaddexp(a, b);
    case NV__PRIM_EQUAL: return nv_equal(a, b);
    case NV__PRIM_NOT_EQUAL: return nv_not_equal(a, b);
    case NV__PRIM_GREATER: return nv_greater(a, b);
    case NV__PRIM_GREATER_EQUAL: return nv_greater_equal(a, b);
    case NV__PRIM_LESS: return nv_less(a, b);
    case NV__PRIM_LESS_EQUAL: return nv_less_equal(a, b);
    case NV__PRIM_LOGICAL_AND: return nv_logical_and(a, b);
    case NV__PRIM_LOGICAL_OR: return nv_logical_or(a, b);
    case NV__PRIM_LOGICAL_XOR: return nv_logical_xor(a, b);
    case NV__PRIM_BITWISE_AND: return nv_bitwise_and(a, b);
    case NV__PRIM_BITWISE_OR: return nv_bitwise_or(a, b);
    case NV__PRIM_BITWISE_XOR: return nv_bitwise_xor(a, b);
    case NV__PRIM_LEFT_SHIFT: return nv_left_shift(a, b);
    case NV__PRIM_RIGHT_SHIFT: return nv_right_shift(a, b);
    default: {
      const nv__isclose_params *p = n->params;
      return nv_isclose(a, b, p->rtol, p->atol, p->equal_nan);
    }
  }
}

/* Element-wise unary ops keep the batch axis where it is. */
VMAP(vmap_unary) {
  out[0] = unary_op(n, in[0]);
  oax[0] = axes[0];
  return NV_OK;
}

/* Broadcasting ops: every batched operand gets its batch in front and the output's rank. */
VMAP(vmap_binary) {
  int r = n->out[0].ndim;
  nv_array *a = nv__tf_front(in[0], axes[0], r), *b = nv__tf_front(in[1], axes[1], r);
  out[0] = binary_op(n, a, b);
  oax[0] = 0;
  nv_release(a);
  nv_release(b);
  return NV_OK;
}

VMAP(vmap_divmod) {
  int r = n->out[0].ndim;
  nv_array *a = nv__tf_front(in[0], axes[0], r), *b = nv__tf_front(in[1], axes[1], r);
  nv_vec *v = nv_vec_new();
  nv_status s = v ? nv_divmod(a, b, v) : nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  for (int i = 0; s == NV_OK && i < 2; i++) {
    out[i] = nv_retain(nv_vec_get(v, (size_t)i));
    oax[i] = 0;
  }
  nv_vec_free(v);
  nv_release(a);
  nv_release(b);
  return s;
}

VMAP(vmap_where) {
  int r = n->out[0].ndim;
  nv_array *x[3];
  for (int i = 0; i < 3; i++) x[i] = nv__tf_front(in[i], axes[i], r);
  out[0] = nv_where(x[0], x[1], x[2]);
  oax[0] = 0;
  for (int i = 0; i < 3; i++) nv_release(x[i]);
  return NV_OK;
}

/* a == b element-wise, NaN equal to NaN when `equal_nan` (array_equal's test). */
static nv_array *same_values(const nv_array *a, const nv_array *b, bool equal_nan) {
  nv_array *e = nv_equal(a, b);
  if (!equal_nan) return e;
  nv_array *both = take2(nv_logical_and, nv_isnan(a), nv_isnan(b));
  return take2(nv_logical_or, e, both);
}

/* allclose / array_equal: the element test over the batched operands, then "all" over every
 * axis but the batch (as a count of failures equal to zero). */
VMAP(vmap_all_test) {
  const nv__isclose_params *p = n->params;
  int r = 0;
  for (int i = 0; i < 2; i++) {
    int rank = meta(in[i])->ndim - (axes[i] >= 0);
    if (rank > r) r = rank;
  }
  nv_array *a = nv__tf_front(in[0], axes[0], r), *b = nv__tf_front(in[1], axes[1], r);
  nv_array *t = n->prim == NV__PRIM_ALLCLOSE ? nv_isclose(a, b, p->rtol, p->atol, p->equal_nan)
                                             : same_values(a, b, p->equal_nan);
  nv_release(a);
  nv_release(b);
  if (r > 0) {
    int ax[NV__MAX_DIMS];
    for (int i = 0; i < r; i++) ax[i] = i + 1;
    nv_array *fails = take(nv_logical_not, t);
    nv_array *count = nv_sum(fails, ax, r, false);
    nv_release(fails);
    t = nv_equal_scalar(count, 0.0);
    nv_release(count);
  }
  out[0] = t;
  oax[0] = 0;
  return NV_OK;
}

/* view: the same item size keeps the layout of the axes; another size changes the last axis,
 * so the batch moves to the front first. */
VMAP(vmap_view) {
  nv_dtype dt = n->out[0].dtype;
  if (nv_dtype_size(dt) == nv_dtype_size(meta(in[0])->dtype)) {
    out[0] = nv_view(in[0], dt);
    oax[0] = axes[0];
    return NV_OK;
  }
  nv_array *x = nv__tf_moveaxis(in[0], axes[0], 0);
  out[0] = nv_view(x, dt);
  oax[0] = 0;
  nv_release(x);
  return NV_OK;
}

/* depends: rebuilt over the batched arrays, each output keeping its input's batch axis. */
VMAP(vmap_depends) {
  int ni = n->noutputs, nall = n->ninputs;
  nv_vec *xs = nv_vec_new(), *deps = nv_vec_new(), *res = nv_vec_new();
  nv_status s =
      xs && deps && res ? NV_OK : nv__set_error(NV_ERR_OUT_OF_MEMORY, "vmap: out of memory");
  for (int i = 0; s == NV_OK && i < nall; i++) s = nv_vec_push(i < ni ? xs : deps, in[i]);
  if (s == NV_OK) s = nv_depends(xs, deps, res);
  for (int i = 0; s == NV_OK && i < ni; i++) {
    out[i] = nv_retain(nv_vec_get(res, (size_t)i));
    oax[i] = axes[i];
  }
  nv_vec_free(xs);
  nv_vec_free(deps);
  nv_vec_free(res);
  return s;
}

/* number_of_elements counts the same axes of every batch element: the axes shift past the
 * batch axis (which an inverted count must leave out too), and the count is not batched. */
VMAP(vmap_count) {
  const nv__count_params *p = n->params;
  int ax[NV__MAX_DIMS + 1], k = 0, b = axes[0];
  for (int i = 0; i < p->naxes; i++) ax[k++] = p->axes[i] + (p->axes[i] >= b);
  if (p->inverted) ax[k++] = b;
  out[0] = nv_number_of_elements(in[0], ax, k, p->inverted, n->out[0].dtype);
  oax[0] = -1;
  return NV_OK;
}

/* Creation primitives (tri, the windows) have no inputs, so nothing batched ever reaches them;
 * their rule gives the node's own output, unbatched. */
VMAP(vmap_constant) {
  for (int i = 0; i < n->noutputs; i++) {
    out[i] = nv__tf_handle((nv__node *)n, i);
    oax[i] = -1;
  }
  return NV_OK;
}

/* ---- gelu and act_vjp ---- */

static int act_mode(const nv__node *n) { return ((const nv__act_params *)n->params)->mode; }

VJP(vjp_gelu) {
  if (want[0]) grad[0] = nv__act_vjp(act_mode(n), in[0], cot[0]);
  return NV_OK;
}

JVP(jvp_gelu) {
  ot[0] = nv__act_vjp(act_mode(n), in[0], tan[0]);
  return NV_OK;
}

VMAP(vmap_gelu) {
  out[0] = nv__gelu(act_mode(n), in[0]);
  oax[0] = axes[0];
  return NV_OK;
}

/* Temporaries of the second derivatives (nv__temps), released together once the result is
 * retained. */
#define T(expr) nv__temp(t, (expr))

/* d/da of f'(a) for act_vjp's modes (a = y for tanh and sigmoid, whose chain to x continues
 * through y's own rule): -2y; 1 - 2y; φ(x)(2 - x²) for the erf form; for x σ(v), with s = σ(v)
 * and s' = s (1 - s): s' (2 v' + x (1 - 2s) v'² + x v''). */
static nv_array *act_second(nv__temps *t, int mode, const nv_array *a) {
  nv_array *one = T(nv_array_float(1.0f));
  switch (mode) {
    case NV__ACT_TANH: return T(nv_multiply_scalar(a, -2.0));
    case NV__ACT_SIGMOID: return T(nv_subtract(one, T(nv_multiply_scalar(a, 2.0))));
    case NV__ACT_GELU: {
      nv_array *x2 = T(nv_square(a));
      nv_array *pdf = T(nv_multiply_scalar(T(nv_exp(T(nv_multiply_scalar(x2, -0.5)))),
                                           0.3989422804014327));
      return T(nv_multiply(pdf, T(nv_subtract(T(nv_array_float(2.0f)), x2))));
    }
    default: {
      bool tanh_form = mode == NV__ACT_GELU_TANH;
      double c = tanh_form ? 2 * 0.7978845608028654 : 1.702, k = tanh_form ? 0.044715 : 0.0;
      nv_array *x2 = T(nv_square(a));
      nv_array *v = T(nv_multiply_scalar(T(nv_multiply(a, T(nv_add_scalar(T(nv_multiply_scalar(x2, k)), 1.0)))), c));
      nv_array *dv = T(nv_multiply_scalar(T(nv_add_scalar(T(nv_multiply_scalar(x2, 3 * k)), 1.0)), c));
      nv_array *s = T(nv_sigmoid(v));
      nv_array *sp = T(nv_multiply(s, T(nv_subtract(one, s))));
      nv_array *m = T(nv_subtract(one, T(nv_multiply_scalar(s, 2.0))));
      nv_array *sum = T(nv_add(T(nv_multiply_scalar(dv, 2.0)),
                               T(nv_multiply(T(nv_multiply(a, m)), T(nv_square(dv))))));
      if (tanh_form) sum = T(nv_add(sum, T(nv_multiply_scalar(x2, 6 * c * k))));
      return T(nv_multiply(sp, sum));
    }
  }
}

/* h f''(a) g: the part of act_vjp's derivative through a, for a cotangent or tangent h. */
static nv_array *act_through_a(int mode, const nv_array *a, const nv_array *g,
                               const nv_array *h) {
  nv__temps t0 = {.n = 0}, *t = &t0;
  nv_array *r = nv_multiply(T(nv_multiply(h, g)), act_second(t, mode, a));
  nv__temps_release(t);
  return r;
}
#undef T

VJP(vjp_act_vjp) {
  int mode = act_mode(n);
  if (want[0]) grad[0] = reduce_to(act_through_a(mode, in[0], in[1], cot[0]), in[0]);
  if (want[1]) grad[1] = reduce_to(nv__act_vjp(mode, in[0], cot[0]), in[1]);
  return NV_OK;
}

JVP(jvp_act_vjp) {
  int mode = act_mode(n);
  nv_array *acc = NULL;
  if (tan[0]) acc = act_through_a(mode, in[0], in[1], tan[0]);
  if (tan[1]) acc = add_terms(acc, nv__act_vjp(mode, in[0], tan[1]));
  ot[0] = bcast_to(acc, out[0]);
  return NV_OK;
}

VMAP(vmap_act_vjp) {
  int r = n->out[0].ndim;
  nv_array *a = nv__tf_front(in[0], axes[0], r), *g = nv__tf_front(in[1], axes[1], r);
  out[0] = nv__act_vjp(act_mode(n), a, g);
  oax[0] = 0;
  nv_release(a);
  nv_release(g);
  return NV_OK;
}

/* ---- Registration ---- */

static void set(nv__prim_rule *r, int prim, nv__vjp_rule vjp, nv__jvp_rule jvp,
                nv__vmap_rule vmap) {
  r[prim] = (nv__prim_rule){vjp, jvp, vmap};
}

void nv__rules_register_elementwise(nv__prim_rule *r) {
  static const int differentiable[] = {
      NV__PRIM_RECIPROCAL, NV__PRIM_SQUARE,  NV__PRIM_RSQRT,   NV__PRIM_EXPM1,
      NV__PRIM_LOG2,       NV__PRIM_LOG10,   NV__PRIM_LOG1P,   NV__PRIM_SIN,
      NV__PRIM_COS,        NV__PRIM_TAN,     NV__PRIM_ARCSIN,  NV__PRIM_ARCCOS,
      NV__PRIM_ARCTAN,     NV__PRIM_SINH,    NV__PRIM_COSH,    NV__PRIM_TANH,
      NV__PRIM_ARCSINH,    NV__PRIM_ARCCOSH, NV__PRIM_ARCTANH, NV__PRIM_DEGREES,
      NV__PRIM_RADIANS,    NV__PRIM_SIGMOID, NV__PRIM_ERF,     NV__PRIM_ERFINV};
  static const int constant[] = {
      NV__PRIM_SIGN,     NV__PRIM_LOGICAL_NOT, NV__PRIM_FLOOR,    NV__PRIM_CEIL,
      NV__PRIM_TRUNC,    NV__PRIM_ROUND,       NV__PRIM_ISNAN,    NV__PRIM_ISINF,
      NV__PRIM_ISFINITE, NV__PRIM_ISPOSINF,    NV__PRIM_ISNEGINF, NV__PRIM_BITWISE_INVERT};
  for (size_t i = 0; i < sizeof differentiable / sizeof *differentiable; i++)
    set(r, differentiable[i], vjp_unary, jvp_unary, vmap_unary);
  for (size_t i = 0; i < sizeof constant / sizeof *constant; i++)
    set(r, constant[i], vjp_none, jvp_none, vmap_unary);
  set(r, NV__PRIM_NAN_TO_NUM, vjp_nan_to_num, jvp_nan_to_num, vmap_unary);
  set(r, NV__PRIM_CONJUGATE, vjp_conjugate, jvp_conjugate, vmap_unary);
  set(r, NV__PRIM_REAL, vjp_real, jvp_real, vmap_unary);
  set(r, NV__PRIM_IMAG, vjp_imag, jvp_imag, vmap_unary);
  /* Binary: the differentiable ones, then those without a gradient (floor_divide's is zero). */
  for (int p = NV__PRIM_REMAINDER; p <= NV__PRIM_LOGADDEXP; p++)
    set(r, p, vjp_binary, jvp_binary, vmap_binary);
  set(r, NV__PRIM_FLOOR_DIVIDE, vjp_none, jvp_none, vmap_binary);
  for (int p = NV__PRIM_EQUAL; p <= NV__PRIM_ISCLOSE; p++)
    set(r, p, vjp_none, jvp_none, vmap_binary);
  set(r, NV__PRIM_WHERE, vjp_where, jvp_where, vmap_where);
  set(r, NV__PRIM_DIVMOD, vjp_divmod, jvp_divmod, vmap_divmod);
  set(r, NV__PRIM_ALLCLOSE, vjp_none, jvp_none, vmap_all_test);
  set(r, NV__PRIM_ARRAY_EQUAL, vjp_none, jvp_none, vmap_all_test);
  set(r, NV__PRIM_VIEW_DTYPE, vjp_view, jvp_view, vmap_view);
  set(r, NV__PRIM_DEPENDS, vjp_depends, jvp_depends, vmap_depends);
  set(r, NV__PRIM_NUMBER_OF_ELEMENTS, vjp_none, jvp_none, vmap_count);
  set(r, NV__PRIM_TRI, vjp_none, jvp_none, vmap_constant);
  set(r, NV__PRIM_HANNING, vjp_none, jvp_none, vmap_constant);
  set(r, NV__PRIM_HAMMING, vjp_none, jvp_none, vmap_constant);
  set(r, NV__PRIM_BARTLETT, vjp_none, jvp_none, vmap_constant);
  set(r, NV__PRIM_BLACKMAN, vjp_none, jvp_none, vmap_constant);
  set(r, NV__PRIM_GELU, vjp_gelu, jvp_gelu, vmap_gelu);
  set(r, NV__PRIM_ACT_VJP, vjp_act_vjp, jvp_act_vjp, vmap_act_vjp);
}
