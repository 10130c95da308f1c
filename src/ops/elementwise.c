/* Element-wise builders of the elementwise family: unary math, rounding, classification and
 * the binary ops (floor division, powers, comparisons, logical and bitwise ops). Dtype rules
 * are MLX's; the decided rules are written in include/nuvec/elementwise.h. */
#include <float.h>
#include <math.h>

#include "ops/elementwise_params.h"
#include "ops/ops_internal.h"

/* ---- Helpers ---- */

static const char *pname(int prim) { return nv__prims[prim].name; }

static bool is_inexact(nv_dtype d) { return nv_issubdtype(d, NV_CATEGORY_INEXACT); }
static bool is_complex(nv_dtype d) { return d == NV_DTYPE_COMPLEX64; }
static bool is_exact(nv_dtype d) { return !is_inexact(d); }

/* A new handle on the same output as `x` (ops that are the identity for a dtype return the
 * array itself, as MLX does). */
static nv_array *same(const nv_array *x) {
  return nv__array_new(nv__node_retain(x->node), x->idx);
}

/* A node computing `prim` from `x` converted to `in_dt`, with an `out_dt` output of x's shape
 * and `psize` bytes of parameters. NULL on failure (thread error set). */
static nv__node *unary_node(int prim, const nv_array *x, nv_dtype in_dt, nv_dtype out_dt,
                            size_t psize) {
  const nv__output *o = nv__out(x);
  nv_array *in = nv__cast_unscoped(x, in_dt);
  if (!nv__meta_known(in)) { /* the cast itself failed (a failed x goes on: the node fails) */
    nv_array_status(in);
    nv_release(in);
    return NULL;
  }
  nv__node *n = nv__op_node(prim, &in, 1, out_dt, o->shape, o->ndim, psize);
  nv_release(in);
  return n;
}

static nv_array *complex_error(int prim) {
  return nv__op_error(NV_ERR_INVALID_ARGUMENT, pname(prim), "complex64 is not supported");
}

/* ---- Unary ---- */

/* Math functions: exact dtypes compute in float32; `complex_ok` says whether complex64 is
 * accepted. */
static nv_array *math_unary(int prim, const nv_array *x, bool complex_ok) {
  nv_array *f = nv__op_check(pname(prim), &x, 1);
  if (f) return f;
  nv_dtype dt = nv__out(x)->dtype;
  if (is_complex(dt) && !complex_ok) return complex_error(prim);
  if (is_exact(dt)) dt = NV_DTYPE_FLOAT32;
  return nv__op_finish(pname(prim), unary_node(prim, x, dt, dt, 0));
}

nv_array *nv_reciprocal(const nv_array *x) { return math_unary(NV__PRIM_RECIPROCAL, x, true); }
nv_array *nv_rsqrt(const nv_array *x) { return math_unary(NV__PRIM_RSQRT, x, true); }
nv_array *nv_expm1(const nv_array *x) { return math_unary(NV__PRIM_EXPM1, x, true); }
nv_array *nv_log2(const nv_array *x) { return math_unary(NV__PRIM_LOG2, x, true); }
nv_array *nv_log10(const nv_array *x) { return math_unary(NV__PRIM_LOG10, x, true); }
nv_array *nv_log1p(const nv_array *x) { return math_unary(NV__PRIM_LOG1P, x, true); }
nv_array *nv_sin(const nv_array *x) { return math_unary(NV__PRIM_SIN, x, true); }
nv_array *nv_cos(const nv_array *x) { return math_unary(NV__PRIM_COS, x, true); }
nv_array *nv_tan(const nv_array *x) { return math_unary(NV__PRIM_TAN, x, true); }
nv_array *nv_arcsin(const nv_array *x) { return math_unary(NV__PRIM_ARCSIN, x, true); }
nv_array *nv_arccos(const nv_array *x) { return math_unary(NV__PRIM_ARCCOS, x, true); }
nv_array *nv_arctan(const nv_array *x) { return math_unary(NV__PRIM_ARCTAN, x, true); }
nv_array *nv_sinh(const nv_array *x) { return math_unary(NV__PRIM_SINH, x, true); }
nv_array *nv_cosh(const nv_array *x) { return math_unary(NV__PRIM_COSH, x, true); }
nv_array *nv_tanh(const nv_array *x) { return math_unary(NV__PRIM_TANH, x, true); }
nv_array *nv_arcsinh(const nv_array *x) { return math_unary(NV__PRIM_ARCSINH, x, true); }
nv_array *nv_arccosh(const nv_array *x) { return math_unary(NV__PRIM_ARCCOSH, x, true); }
nv_array *nv_arctanh(const nv_array *x) { return math_unary(NV__PRIM_ARCTANH, x, true); }
nv_array *nv_degrees(const nv_array *x) { return math_unary(NV__PRIM_DEGREES, x, true); }
nv_array *nv_radians(const nv_array *x) { return math_unary(NV__PRIM_RADIANS, x, true); }
nv_array *nv_sigmoid(const nv_array *x) { return math_unary(NV__PRIM_SIGMOID, x, false); }
nv_array *nv_erf(const nv_array *x) { return math_unary(NV__PRIM_ERF, x, false); }
nv_array *nv_erfinv(const nv_array *x) { return math_unary(NV__PRIM_ERFINV, x, false); }

/* Ops that keep the dtype of x. `exact_identity`: integers and bool are returned unchanged;
 * `bool_identity`: bool is returned unchanged; `complex_ok`: complex64 is accepted. */
static nv_array *same_dtype_unary(int prim, const nv_array *x, bool exact_identity,
                                  bool bool_identity, bool complex_ok) {
  nv_array *f = nv__op_check(pname(prim), &x, 1);
  if (f) return f;
  nv_dtype dt = nv__out(x)->dtype;
  if (is_complex(dt) && !complex_ok) return complex_error(prim);
  if ((exact_identity && is_exact(dt)) || (bool_identity && dt == NV_DTYPE_BOOL)) return same(x);
  return nv__op_finish(pname(prim), unary_node(prim, x, dt, dt, 0));
}

nv_array *nv_positive(const nv_array *x) {
  nv_array *f = nv__op_check("positive", &x, 1);
  return f ? f : same(x);
}
nv_array *nv_sign(const nv_array *x) {
  return same_dtype_unary(NV__PRIM_SIGN, x, false, true, true);
}
nv_array *nv_floor(const nv_array *x) {
  return same_dtype_unary(NV__PRIM_FLOOR, x, true, true, false);
}
nv_array *nv_ceil(const nv_array *x) { return same_dtype_unary(NV__PRIM_CEIL, x, true, true, false); }
nv_array *nv_trunc(const nv_array *x) {
  return same_dtype_unary(NV__PRIM_TRUNC, x, true, true, false);
}
nv_array *nv_square(const nv_array *x) {
  return same_dtype_unary(NV__PRIM_SQUARE, x, false, true, true);
}

nv_array *nv_conjugate(const nv_array *x) {
  nv_array *f = nv__op_check("conjugate", &x, 1);
  if (f) return f;
  if (!is_complex(nv__out(x)->dtype)) return same(x);
  return nv__op_finish("conjugate", unary_node(NV__PRIM_CONJUGATE, x, NV_DTYPE_COMPLEX64,
                                               NV_DTYPE_COMPLEX64, 0));
}

nv_array *nv_bitwise_invert(const nv_array *x) {
  nv_array *f = nv__op_check("bitwise_invert", &x, 1);
  if (f) return f;
  nv_dtype dt = nv__out(x)->dtype;
  if (is_inexact(dt))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "bitwise_invert",
                        "needs an integer or bool array, got %s", nv_dtype_name(dt));
  return nv__op_finish("bitwise_invert", unary_node(NV__PRIM_BITWISE_INVERT, x, dt, dt, 0));
}

nv_array *nv_round(const nv_array *x, int decimals) {
  nv_array *f = nv__op_check("round", &x, 1);
  if (f) return f;
  nv_dtype dt = nv__out(x)->dtype;
  if (dt == NV_DTYPE_BOOL || (is_exact(dt) && decimals >= 0)) return same(x);
  nv__node *n = unary_node(NV__PRIM_ROUND, x, dt, dt, sizeof(nv__round_params));
  if (n) {
    nv__round_params *p = n->params;
    p->decimals = decimals;
    unsigned mag = decimals < 0 ? 0u - (unsigned)decimals : (unsigned)decimals;
    p->scale = pow(10.0, (double)mag);
    p->iscale = 1;
    for (unsigned i = 0; i < mag && p->iscale; i++)
      p->iscale = p->iscale > UINT64_MAX / 10 ? 0 : p->iscale * 10;
  }
  return nv__op_finish("round", n);
}

/* Bool-valued tests of the input (any dtype, read as it is). */
static nv_array *test_unary(int prim, const nv_array *x) {
  nv_array *f = nv__op_check(pname(prim), &x, 1);
  if (f) return f;
  nv_dtype dt = nv__out(x)->dtype;
  return nv__op_finish(pname(prim), unary_node(prim, x, dt, NV_DTYPE_BOOL, 0));
}

nv_array *nv_logical_not(const nv_array *x) { return test_unary(NV__PRIM_LOGICAL_NOT, x); }
nv_array *nv_isnan(const nv_array *x) { return test_unary(NV__PRIM_ISNAN, x); }
nv_array *nv_isinf(const nv_array *x) { return test_unary(NV__PRIM_ISINF, x); }
nv_array *nv_isfinite(const nv_array *x) { return test_unary(NV__PRIM_ISFINITE, x); }
nv_array *nv_isposinf(const nv_array *x) { return test_unary(NV__PRIM_ISPOSINF, x); }
nv_array *nv_isneginf(const nv_array *x) { return test_unary(NV__PRIM_ISNEGINF, x); }

/* A double rounded to `dt` and back, so the kernel writes exactly what astype would give. */
static double round_to(double v, nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_FLOAT16:
    case NV_DTYPE_BFLOAT16: {
      nv_array *s = nv_array_scalar(v, dt);
      double r = v;
      nv_array_item_double(s, &r);
      nv_release(s);
      return r;
    }
    case NV_DTYPE_FLOAT64: return v;
    default: return (double)(float)v;
  }
}

static double dtype_max(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return 65504.0;
    case NV_DTYPE_BFLOAT16: return 3.3895313892515355e38;
    case NV_DTYPE_FLOAT64: return DBL_MAX;
    default: return FLT_MAX;
  }
}

nv_array *nv_nan_to_num(const nv_array *x, double nan, const double *posinf,
                        const double *neginf) {
  nv_array *f = nv__op_check("nan_to_num", &x, 1);
  if (f) return f;
  nv_dtype dt = nv__out(x)->dtype;
  if (is_exact(dt)) return same(x);
  nv_dtype part = is_complex(dt) ? NV_DTYPE_FLOAT32 : dt;
  nv__node *n = unary_node(NV__PRIM_NAN_TO_NUM, x, dt, dt, sizeof(nv__nan_to_num_params));
  if (n) {
    nv__nan_to_num_params *p = n->params;
    nv__scope_suspend();
    p->nan = round_to(nan, part);
    p->posinf = round_to(posinf ? *posinf : dtype_max(part), part);
    p->neginf = round_to(neginf ? *neginf : -dtype_max(part), part);
    nv__scope_resume();
  }
  return nv__op_finish("nan_to_num", n);
}

/* ---- Binary ---- */

/* Kinds of binary ops, by the dtypes they accept and the result dtype. */
enum {
  B_ARITH,   /* promoted dtype; complex64 rejected (floor_divide, remainder) */
  B_POWER,   /* promoted dtype, any */
  B_FLOAT,   /* promoted, exact → float32; complex64 rejected (arctan2; logaddexp composes it) */
  B_COMPARE, /* promoted inputs, bool result */
  B_LOGICAL, /* promoted inputs, bool result */
  B_BITWISE, /* integer or bool, promoted */
  B_SHIFT,   /* integer; bool computes in uint8 */
};

static int binary_kind(int prim) {
  switch (prim) {
    case NV__PRIM_FLOOR_DIVIDE:
    case NV__PRIM_REMAINDER:
    case NV__PRIM_DIVMOD: return B_ARITH;
    case NV__PRIM_POWER: return B_POWER;
    case NV__PRIM_ARCTAN2:
    case NV__PRIM_LOGADDEXP: return B_FLOAT;
    case NV__PRIM_LOGICAL_AND:
    case NV__PRIM_LOGICAL_OR:
    case NV__PRIM_LOGICAL_XOR: return B_LOGICAL;
    case NV__PRIM_BITWISE_AND:
    case NV__PRIM_BITWISE_OR:
    case NV__PRIM_BITWISE_XOR: return B_BITWISE;
    case NV__PRIM_LEFT_SHIFT:
    case NV__PRIM_RIGHT_SHIFT: return B_SHIFT;
    default: return B_COMPARE;
  }
}

/* Checks a binary op's inputs and computes the broadcast shape and the input and output dtypes.
 * Returns a failed array, or NULL when the op can be built. */
static nv_array *binary_prepare(int prim, const nv_array *a, const nv_array *b, int *shape,
                                int *nd, nv_dtype *in_dt, nv_dtype *out_dt) {
  const char *op = pname(prim);
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check(op, xs, 2);
  if (f) return f;
  const nv__output *oa = nv__out(a), *ob = nv__out(b);
  if (!nv__broadcast_shapes(oa->shape, oa->ndim, ob->shape, ob->ndim, shape, nd)) {
    char sa[NV__SHAPE_BUF], sb[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "shapes %s and %s cannot be broadcast",
                        nv__shape_str(oa->shape, oa->ndim, sa, sizeof sa),
                        nv__shape_str(ob->shape, ob->ndim, sb, sizeof sb));
  }
  nv_dtype dt = nv__result_type(a, b);
  *in_dt = *out_dt = dt;
  switch (binary_kind(prim)) {
    case B_ARITH:
      if (is_complex(dt)) return complex_error(prim);
      break;
    case B_FLOAT:
      if (is_complex(dt)) return complex_error(prim);
      if (is_exact(dt)) *in_dt = *out_dt = NV_DTYPE_FLOAT32;
      break;
    case B_COMPARE:
    case B_LOGICAL: *out_dt = NV_DTYPE_BOOL; break;
    case B_BITWISE:
    case B_SHIFT:
      if (is_inexact(oa->dtype) || is_inexact(ob->dtype) || is_inexact(dt))
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                            "only integer and bool arrays are supported, got %s and %s",
                            nv_dtype_name(oa->dtype), nv_dtype_name(ob->dtype));
      if (binary_kind(prim) == B_SHIFT && dt == NV_DTYPE_BOOL) *in_dt = *out_dt = NV_DTYPE_UINT8;
      break;
    default: break;
  }
  return NULL;
}

/* A node for `prim` over a and b converted to `in_dt`, with `nout` outputs of `out_dt`. */
static nv__node *binary_node(int prim, const nv_array *a, const nv_array *b, const int *shape,
                             int nd, nv_dtype in_dt, nv_dtype out_dt, int nout) {
  nv_array *in[2] = {nv__cast_unscoped(a, in_dt), nv__cast_unscoped(b, in_dt)};
  nv__node *n = NULL;
  /* A cast that failed itself stops the op; failed inputs go on, and the node takes their
   * error (with its own metadata). */
  if (!nv__meta_known(in[0]) || !nv__meta_known(in[1])) {
    nv_array_status(nv__meta_known(in[0]) ? in[1] : in[0]);
  } else {
    n = nv__node_new(prim, in, 2, nout, 0);
    if (!n) nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
    if (n) nv__node_inherit_error(n);
    for (int i = 0; n && i < nout; i++) {
      if (nv__output_set_shape(&n->out[i], out_dt, shape, nd) != NV_OK) {
        nv__node_release(n);
        n = NULL;
      }
    }
    for (int i = 0; n && i < 2; i++) nv__node_inherit_tracer(n, in[i]->node);
  }
  nv_release(in[0]);
  nv_release(in[1]);
  return n;
}

static nv_array *binary(int prim, const nv_array *a, const nv_array *b) {
  int shape[NV__MAX_DIMS], nd;
  nv_dtype in_dt = NV_DTYPE_FLOAT32, out_dt = NV_DTYPE_FLOAT32; /* set when f is NULL */
  nv_array *f = binary_prepare(prim, a, b, shape, &nd, &in_dt, &out_dt);
  if (f) return f;
  return nv__op_finish(pname(prim), binary_node(prim, a, b, shape, nd, in_dt, out_dt, 1));
}

nv_array *nv_floor_divide(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_FLOOR_DIVIDE, a, b);
}
nv_array *nv_remainder(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_REMAINDER, a, b);
}
nv_array *nv_power(const nv_array *a, const nv_array *b) { return binary(NV__PRIM_POWER, a, b); }
nv_array *nv_arctan2(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_ARCTAN2, a, b);
}
/* logaddexp of complex64 operands, as MLX's: m + log1p(exp(o - m)) with m the operand of the
 * larger real part and o the other (|exp(o - m)| <= 1, so nothing overflows); the imaginary
 * part is then that of log(exp(a) + exp(b)) up to a multiple of 2*pi. Composed from existing
 * ops, so no kernel takes complex operands. */
static nv_array *complex_logaddexp(const nv_array *a, const nv_array *b) {
  nv__scope_suspend();
  nv_array *ac = nv__cast_unscoped(a, NV_DTYPE_COMPLEX64), *bc = nv__cast_unscoped(b, NV_DTYPE_COMPLEX64);
  nv_array *ra = nv_real(ac), *rb = nv_real(bc);
  nv_array *ge = nv_greater_equal(ra, rb);
  nv_array *m = nv_where(ge, ac, bc), *o = nv_where(ge, bc, ac);
  nv_array *d = nv_subtract(o, m);
  nv_array *e = nv_exp(d);
  nv_array *l = nv_log1p(e);
  nv_array *sum = nv_add(m, l);
  /* Both real parts -inf: o - m is NaN, but the result is m (-inf), as for real operands. */
  nv_array *rm = nv_real(m);
  nv_array *ninf = nv_isneginf(rm);
  nv_array *rel[] = {ac, bc, ra, rb, ge, o, d, e, l, rm};
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) nv_release(rel[i]);
  nv__scope_resume();
  nv_array *r = nv_where(ninf, m, sum);
  nv_release(ninf);
  nv_release(m);
  nv_release(sum);
  return r;
}

nv_array *nv_logaddexp(const nv_array *a, const nv_array *b) {
  const nv_array *xs[2] = {a, b};
  nv_array *f = nv__op_check("logaddexp", xs, 2);
  if (f) return f;
  if (nv__result_type(a, b) == NV_DTYPE_COMPLEX64) {
    const nv__output *oa = nv__out(a), *ob = nv__out(b);
    int shape[NV__MAX_DIMS], nd;
    /* Shapes that do not broadcast fail in binary() with logaddexp's message. */
    if (nv__broadcast_shapes(oa->shape, oa->ndim, ob->shape, ob->ndim, shape, &nd))
      return complex_logaddexp(a, b);
  }
  return binary(NV__PRIM_LOGADDEXP, a, b);
}
nv_array *nv_equal(const nv_array *a, const nv_array *b) { return binary(NV__PRIM_EQUAL, a, b); }
nv_array *nv_not_equal(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_NOT_EQUAL, a, b);
}
nv_array *nv_greater(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_GREATER, a, b);
}
nv_array *nv_greater_equal(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_GREATER_EQUAL, a, b);
}
nv_array *nv_less(const nv_array *a, const nv_array *b) { return binary(NV__PRIM_LESS, a, b); }
nv_array *nv_less_equal(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_LESS_EQUAL, a, b);
}
nv_array *nv_logical_and(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_LOGICAL_AND, a, b);
}
nv_array *nv_logical_or(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_LOGICAL_OR, a, b);
}
nv_array *nv_logical_xor(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_LOGICAL_XOR, a, b);
}
nv_array *nv_bitwise_and(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_BITWISE_AND, a, b);
}
nv_array *nv_bitwise_or(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_BITWISE_OR, a, b);
}
nv_array *nv_bitwise_xor(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_BITWISE_XOR, a, b);
}
nv_array *nv_left_shift(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_LEFT_SHIFT, a, b);
}
nv_array *nv_right_shift(const nv_array *a, const nv_array *b) {
  return binary(NV__PRIM_RIGHT_SHIFT, a, b);
}

nv_status nv_divmod(const nv_array *a, const nv_array *b, nv_vec *out) {
  if (!out) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "divmod: the output list is NULL");
  int shape[NV__MAX_DIMS], nd;
  nv_dtype in_dt = NV_DTYPE_FLOAT32, out_dt = NV_DTYPE_FLOAT32; /* set when f is NULL */
  nv_array *f = binary_prepare(NV__PRIM_DIVMOD, a, b, shape, &nd, &in_dt, &out_dt);
  if (f) {
    nv_status s = nv_array_status(f);
    nv_release(f);
    return s;
  }
  /* An op returning a status fails with its inputs' error, appending nothing. */
  nv_status sa = nv_array_status(a);
  if (sa != NV_OK) return sa;
  nv_status sb = nv_array_status(b);
  if (sb != NV_OK) return sb;
  nv__node *n = binary_node(NV__PRIM_DIVMOD, a, b, shape, nd, in_dt, out_dt, 2);
  if (!n) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "divmod: %s", nv_last_error());
  nv__scope_suspend();
  nv__node_retain(n);
  nv_array *res[2] = {nv__array_new(n, 0), nv__array_new(n, 1)};
  nv__scope_resume();
  nv_status s = nv__vec_push_all(out, res, 2);
  nv_release(res[0]);
  nv_release(res[1]);
  return s;
}

static nv_array *with_scalar(nv_array *(*op)(const nv_array *, const nv_array *),
                             const nv_array *a, double v) {
  nv__scope_suspend();
  nv_array *s = nv_weak_scalar(v);
  nv__scope_resume();
  nv_array *r = op(a, s);
  nv_release(s);
  return r;
}

nv_array *nv_power_scalar(const nv_array *a, double b) { return with_scalar(nv_power, a, b); }
nv_array *nv_floor_divide_scalar(const nv_array *a, double b) {
  return with_scalar(nv_floor_divide, a, b);
}
nv_array *nv_remainder_scalar(const nv_array *a, double b) {
  return with_scalar(nv_remainder, a, b);
}
nv_array *nv_equal_scalar(const nv_array *a, double b) { return with_scalar(nv_equal, a, b); }
nv_array *nv_greater_scalar(const nv_array *a, double b) { return with_scalar(nv_greater, a, b); }
nv_array *nv_less_scalar(const nv_array *a, double b) { return with_scalar(nv_less, a, b); }
