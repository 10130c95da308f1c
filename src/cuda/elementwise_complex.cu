/* complex64 element-wise kernels (generic: the primitive chosen at run time), as the CPU
 * computes them: arithmetic in float with C's rules (products and quotients recover
 * infinities that come out as NaN + iNaN, as libgcc's __mulsc3/__divsc3), functions in double
 * (thrust's C99 complex functions) rounded once to float, lexicographic order. */
#include <thrust/complex.h>

#include "cuda/elementwise_device.cuh"

namespace nvew {
namespace {

typedef thrust::complex<double> cd;

__device__ __forceinline__ cd wide(c64 x) { return cd((double)x.re, (double)x.im); }
__device__ __forceinline__ c64 narrow(cd z) { return c64{(float)z.real(), (float)z.imag()}; }
__device__ __forceinline__ bool cnan(c64 x) { return isnan(x.re) || isnan(x.im); }
__device__ __forceinline__ bool cnz(c64 x) { return x.re != 0 || x.im != 0; }
__device__ __forceinline__ bool ceq(c64 x, c64 y) { return x.re == y.re && x.im == y.im; }
__device__ __forceinline__ bool cless(c64 x, c64 y) {
  return x.re < y.re || (x.re == y.re && x.im < y.im);
}
__device__ __forceinline__ bool cgt(c64 x, c64 y) {
  return x.re > y.re || (x.re == y.re && x.im > y.im);
}
__device__ __forceinline__ bool cge(c64 x, c64 y) {
  return x.re > y.re || (x.re == y.re && x.im >= y.im);
}
__device__ __forceinline__ float box(float v) { return copysignf(isinf(v) ? 1.0f : 0.0f, v); }
__device__ __forceinline__ double boxd(double v) { return copysign(isinf(v) ? 1.0 : 0.0, v); }
__device__ __forceinline__ float zero_nan(float v) { return isnan(v) ? copysignf(0.0f, v) : v; }

/* float complex product: the naive formula unfused, then C's recovery of infinities. */
__device__ __forceinline__ c64 c_mul(c64 x, c64 y) {
  float a = x.re, b = x.im, c = y.re, d = y.im;
  float ac = __fmul_rn(a, c), bd = __fmul_rn(b, d), ad = __fmul_rn(a, d), bc = __fmul_rn(b, c);
  float re = __fsub_rn(ac, bd), im = __fadd_rn(ad, bc);
  if (isnan(re) && isnan(im)) {
    bool recalc = false;
    if (isinf(a) || isinf(b)) {
      a = box(a);
      b = box(b);
      c = zero_nan(c);
      d = zero_nan(d);
      recalc = true;
    }
    if (isinf(c) || isinf(d)) {
      c = box(c);
      d = box(d);
      a = zero_nan(a);
      b = zero_nan(b);
      recalc = true;
    }
    if (!recalc && (isinf(ac) || isinf(bd) || isinf(ad) || isinf(bc))) {
      a = zero_nan(a);
      b = zero_nan(b);
      c = zero_nan(c);
      d = zero_nan(d);
      recalc = true;
    }
    if (recalc) {
      const float inf = __int_as_float(0x7f800000);
      re = inf * __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, d));
      im = inf * __fadd_rn(__fmul_rn(a, d), __fmul_rn(b, c));
    }
  }
  return c64{re, im};
}

/* float complex quotient as libgcc's __divsc3 on hardware with double: the plain formula in
 * double rounded to float, then the recovery of infinities and zeros. */
__device__ __forceinline__ c64 c_div(c64 x, c64 y) {
  float a = x.re, b = x.im, c = y.re, d = y.im;
  double aa = a, bb = b, cc = c, dd = d;
  double den = __dadd_rn(__dmul_rn(cc, cc), __dmul_rn(dd, dd));
  float re = (float)(__dadd_rn(__dmul_rn(aa, cc), __dmul_rn(bb, dd)) / den);
  float im = (float)(__dsub_rn(__dmul_rn(bb, cc), __dmul_rn(aa, dd)) / den);
  if (isnan(re) && isnan(im)) {
    const float inf = __int_as_float(0x7f800000);
    if (c == 0.0f && d == 0.0f && (!isnan(a) || !isnan(b))) {
      re = copysignf(inf, c) * a;
      im = copysignf(inf, c) * b;
    } else if ((isinf(a) || isinf(b)) && isfinite(c) && isfinite(d)) {
      a = box(a);
      b = box(b);
      re = inf * __fadd_rn(__fmul_rn(a, c), __fmul_rn(b, d));
      im = inf * __fsub_rn(__fmul_rn(b, c), __fmul_rn(a, d));
    } else if ((isinf(c) || isinf(d)) && isfinite(a) && isfinite(b)) {
      c = box(c);
      d = box(d);
      re = 0.0f * __fadd_rn(__fmul_rn(a, c), __fmul_rn(b, d));
      im = 0.0f * __fsub_rn(__fmul_rn(b, c), __fmul_rn(a, d));
    }
  }
  return c64{re, im};
}

/* double complex quotient (Smith's method, then C's recovery of infinities and zeros), for
 * the reciprocals the CPU computes in double. */
__device__ __forceinline__ cd d_div(cd x, cd y) {
  double a = x.real(), b = x.imag(), c = y.real(), d = y.imag(), re, im;
  if (fabs(c) < fabs(d)) {
    double r = c / d, den = __dadd_rn(__dmul_rn(c, r), d);
    re = __dadd_rn(__dmul_rn(a, r), b) / den;
    im = __dsub_rn(__dmul_rn(b, r), a) / den;
  } else {
    double r = d / c, den = __dadd_rn(__dmul_rn(d, r), c);
    re = __dadd_rn(__dmul_rn(b, r), a) / den;
    im = __dsub_rn(b, __dmul_rn(a, r)) / den;
  }
  if (isnan(re) && isnan(im)) {
    const double inf = __longlong_as_double(0x7ff0000000000000ll);
    if (c == 0.0 && d == 0.0 && (!isnan(a) || !isnan(b))) {
      re = copysign(inf, c) * a;
      im = copysign(inf, c) * b;
    } else if ((isinf(a) || isinf(b)) && isfinite(c) && isfinite(d)) {
      a = boxd(a);
      b = boxd(b);
      re = inf * __dadd_rn(__dmul_rn(a, c), __dmul_rn(b, d));
      im = inf * __dsub_rn(__dmul_rn(b, c), __dmul_rn(a, d));
    } else if ((isinf(c) || isinf(d)) && isfinite(a) && isfinite(b)) {
      c = boxd(c);
      d = boxd(d);
      re = 0.0 * __dadd_rn(__dmul_rn(a, c), __dmul_rn(b, d));
      im = 0.0 * __dsub_rn(__dmul_rn(b, c), __dmul_rn(a, d));
    }
  }
  return cd(re, im);
}

/* double complex product as C computes it (__muldc3): the naive formula, then the recovery of
 * infinities that come out as NaN + iNaN. */
__device__ __forceinline__ cd d_mul(cd x, cd y) {
  double a = x.real(), b = x.imag(), c = y.real(), d = y.imag();
  double ac = __dmul_rn(a, c), bd = __dmul_rn(b, d), ad = __dmul_rn(a, d), bc = __dmul_rn(b, c);
  double re = __dsub_rn(ac, bd), im = __dadd_rn(ad, bc);
  if (isnan(re) && isnan(im)) {
    bool recalc = false;
    if (isinf(a) || isinf(b)) {
      a = boxd(a);
      b = boxd(b);
      if (isnan(c)) c = copysign(0.0, c);
      if (isnan(d)) d = copysign(0.0, d);
      recalc = true;
    }
    if (isinf(c) || isinf(d)) {
      c = boxd(c);
      d = boxd(d);
      if (isnan(a)) a = copysign(0.0, a);
      if (isnan(b)) b = copysign(0.0, b);
      recalc = true;
    }
    if (!recalc && (isinf(ac) || isinf(bd) || isinf(ad) || isinf(bc))) {
      if (isnan(a)) a = copysign(0.0, a);
      if (isnan(b)) b = copysign(0.0, b);
      if (isnan(c)) c = copysign(0.0, c);
      if (isnan(d)) d = copysign(0.0, d);
      recalc = true;
    }
    if (recalc) {
      const double inf = __longlong_as_double(0x7ff0000000000000ll);
      re = inf * __dsub_rn(__dmul_rn(a, c), __dmul_rn(b, d));
      im = inf * __dadd_rn(__dmul_rn(a, d), __dmul_rn(b, c));
    }
  }
  return cd(re, im);
}

/* tanh with C11's value at a zero real part: tanh(+-0 + i y) = +-0 + i NaN for y infinite or
 * NaN (glibc; thrust gives NaN + i NaN there). tan(z) = -i tanh(i z), as thrust computes it. */
__device__ __forceinline__ cd c_tanh(cd z) {
  if (z.real() == 0 && !isfinite(z.imag())) return cd(z.real(), z.imag() - z.imag());
  return thrust::tanh(z);
}
__device__ __forceinline__ cd c_tan(cd z) {
  cd r = c_tanh(cd(-z.imag(), z.real()));
  return cd(r.imag(), -r.real());
}

/* Non-finite arguments where thrust's C99 functions (FreeBSD's) and glibc's, which the CPU
 * runs, choose differently (C99 leaves some signs unspecified); glibc's choices are taken. */
#define NV__EW_DINF __longlong_as_double(0x7ff0000000000000ll)
#define NV__EW_DNAN __longlong_as_double(0x7ff8000000000000ll)

/* log(+-inf + i NaN) = log(NaN +- i inf) = +inf + i NaN. */
__device__ __forceinline__ cd c_log(cd z) {
  double re = z.real(), im = z.imag();
  if ((isinf(re) && isnan(im)) || (isnan(re) && isinf(im))) return cd(NV__EW_DINF, NV__EW_DNAN);
  return thrust::log(z);
}

/* sin(x +- i inf) for x infinite or NaN: NaN + i inf (a positive infinity). */
__device__ __forceinline__ cd c_sin(cd z) {
  double re = z.real(), im = z.imag();
  if (!isfinite(re) && isinf(im)) return cd(re - re, NV__EW_DINF);
  return thrust::sin(z);
}

/* asin with a NaN part: x for a zero real part, NaN + i copysign(inf, im) when the other part
 * is infinite, else NaN + i NaN. */
__device__ __forceinline__ cd c_asin(cd z) {
  double re = z.real(), im = z.imag();
  if (isnan(re) || isnan(im)) {
    if (re == 0) return z;
    if (isinf(re) || isinf(im)) return cd(NV__EW_DNAN, copysign(NV__EW_DINF, im));
    return cd(NV__EW_DNAN, NV__EW_DNAN);
  }
  return thrust::asin(z);
}

/* asinh of non-finite arguments, glibc's table. */
__device__ __forceinline__ cd c_asinh(cd z) {
  double re = z.real(), im = z.imag();
  if (isfinite(re) && isfinite(im)) return thrust::asinh(z);
  if (isinf(im)) {
    if (isnan(re)) return cd(copysign(NV__EW_DINF, re), NV__EW_DNAN);
    return cd(copysign(NV__EW_DINF, re), copysign(isfinite(re) ? 1.5707963267948966 : 0.78539816339744831, im));
  }
  if (!isfinite(re)) {
    bool zero_im = isinf(re) ? isfinite(im) : im == 0;
    return cd(re, zero_im ? copysign(0.0, im) : NV__EW_DNAN);
  }
  return cd(NV__EW_DNAN, NV__EW_DNAN);
}

/* acosh of non-finite arguments, glibc's table. */
__device__ __forceinline__ cd c_acosh(cd z) {
  double re = z.real(), im = z.imag();
  if (isfinite(re) && isfinite(im)) return thrust::acosh(z);
  if (isinf(im)) {
    if (isnan(re)) return cd(NV__EW_DINF, NV__EW_DNAN);
    double a = isinf(re) ? (re < 0 ? 2.3561944901923448 : 0.78539816339744831) : 1.5707963267948966;
    return cd(NV__EW_DINF, copysign(a, im));
  }
  if (isinf(re)) {
    if (isfinite(im)) return cd(NV__EW_DINF, copysign(signbit(re) ? 3.1415926535897931 : 0.0, im));
    return cd(NV__EW_DINF, NV__EW_DNAN);
  }
  return cd(NV__EW_DNAN, re == 0 ? 1.5707963267948966 : NV__EW_DNAN);
}

__device__ __forceinline__ c64 c_sign(c64 x) {
  double m = hypot((double)x.re, (double)x.im);
  if (m == 0) return c64{x.re * 0.0f, x.im * 0.0f};
  return c64{(float)((double)x.re / m), (float)((double)x.im / m)};
}

/* e^a cos b - 1 = expm1(a) cos b - 2 sin^2(b/2): no cancellation for small |x|. */
__device__ __forceinline__ c64 c_expm1(c64 x) {
  double a = x.re, b = x.im, h = sin(b / 2);
  double re = __dsub_rn(__dmul_rn(expm1(a), cos(b)), __dmul_rn(__dmul_rn(2.0, h), h));
  return c64{(float)re, (float)(exp(a) * sin(b))};
}

__device__ __noinline__ c64 u_complex(int op, c64 x, nv__ew_extra e) {
  switch (op) {
    case NV__PRIM_NEGATIVE: return c64{-x.re, -x.im};
    case NV__PRIM_EXP: return narrow(thrust::exp(wide(x)));
    case NV__PRIM_LOG: return narrow(c_log(wide(x)));
    case NV__PRIM_SQRT: return narrow(thrust::sqrt(wide(x)));
    case NV__PRIM_SIGN: return c_sign(x);
    case NV__PRIM_RECIPROCAL: return narrow(d_div(cd(1.0, 0.0), wide(x)));
    case NV__PRIM_ROUND:
      return c64{(float)round_c((double)x.re, e), (float)round_c((double)x.im, e)};
    case NV__PRIM_SQUARE: return c_mul(x, x);
    case NV__PRIM_RSQRT: return narrow(d_div(cd(1.0, 0.0), thrust::sqrt(wide(x))));
    case NV__PRIM_EXPM1: return c_expm1(x);
    case NV__PRIM_LOG2: {
      cd l = c_log(wide(x));
      return c64{(float)(l.real() / 0.69314718055994530942),
                 (float)(l.imag() / 0.69314718055994530942)};
    }
    case NV__PRIM_LOG10: {
      cd l = c_log(wide(x));
      return c64{(float)(l.real() / 2.30258509299404568402),
                 (float)(l.imag() / 2.30258509299404568402)};
    }
    case NV__PRIM_LOG1P: return narrow(c_log(cd(1.0 + (double)x.re, (double)x.im)));
    case NV__PRIM_SIN: return narrow(c_sin(wide(x)));
    case NV__PRIM_COS: return narrow(thrust::cos(wide(x)));
    case NV__PRIM_TAN: return narrow(c_tan(wide(x)));
    case NV__PRIM_ARCSIN: return narrow(c_asin(wide(x)));
    case NV__PRIM_ARCCOS: return narrow(thrust::acos(wide(x)));
    case NV__PRIM_ARCTAN: return narrow(thrust::atan(wide(x)));
    case NV__PRIM_SINH: return narrow(thrust::sinh(wide(x)));
    case NV__PRIM_COSH: return narrow(thrust::cosh(wide(x)));
    case NV__PRIM_TANH: return narrow(c_tanh(wide(x)));
    case NV__PRIM_ARCSINH: return narrow(c_asinh(wide(x)));
    case NV__PRIM_ARCCOSH: return narrow(c_acosh(wide(x)));
    case NV__PRIM_ARCTANH: return narrow(thrust::atanh(wide(x)));
    case NV__PRIM_DEGREES:
      return c64{(float)((double)x.re * (180.0 / NV__EW_PI)),
                 (float)((double)x.im * (180.0 / NV__EW_PI))};
    case NV__PRIM_RADIANS:
      return c64{(float)((double)x.re * (NV__EW_PI / 180.0)),
                 (float)((double)x.im * (NV__EW_PI / 180.0))};
    case NV__PRIM_NAN_TO_NUM:
      return c64{(float)nan_to_num_c((double)x.re, e), (float)nan_to_num_c((double)x.im, e)};
    case NV__PRIM_CONJUGATE: return c64{x.re, -x.im};
    default: return x;
  }
}

struct UComplex {
  int op;
  nv__ew_extra e;
  __device__ __forceinline__ explicit UComplex(const nv__ew_params &p) : op(p.op), e(p.extra) {}
  __device__ __forceinline__ c64 operator()(c64 x) const { return u_complex(op, x, e); }
};

/* abs: hypotf as glibc computes it (in double, rounded once; inf beats NaN). */
struct AbsC {
  __device__ __forceinline__ explicit AbsC(const nv__ew_params &) {}
  __device__ __forceinline__ float operator()(c64 x) const {
    if (!isfinite(x.re) || !isfinite(x.im)) {
      if (isinf(x.re) || isinf(x.im)) return __int_as_float(0x7f800000);
      return x.re + x.im;
    }
    double a = x.re, b = x.im;
    return (float)sqrt(a * a + b * b);
  }
};

struct UTestC {
  int op;
  __device__ __forceinline__ explicit UTestC(const nv__ew_params &p) : op(p.op) {}
  __device__ __forceinline__ bool operator()(c64 x) const {
    const float inf = __int_as_float(0x7f800000);
    switch (op) {
      case NV__PRIM_LOGICAL_NOT: return !cnz(x);
      case NV__PRIM_ISNAN: return cnan(x);
      case NV__PRIM_ISINF: return isinf(x.re) || isinf(x.im);
      case NV__PRIM_ISFINITE: return isfinite(x.re) && isfinite(x.im);
      case NV__PRIM_ISPOSINF: return x.re == inf && x.im == 0;
      case NV__PRIM_ISNEGINF: return x.re == -inf && x.im == 0;
      default: return false;
    }
  }
};

__device__ __noinline__ c64 b_complex(int op, c64 x, c64 y) {
  switch (op) {
    case NV__PRIM_ADD: return c64{x.re + y.re, x.im + y.im};
    case NV__PRIM_SUBTRACT: return c64{x.re - y.re, x.im - y.im};
    case NV__PRIM_MULTIPLY: return c_mul(x, y);
    case NV__PRIM_DIVIDE: return c_div(x, y);
    case NV__PRIM_MAXIMUM: return cnan(x) || !cless(x, y) ? x : y;
    case NV__PRIM_MINIMUM: return cnan(x) || cless(x, y) ? x : y;
    case NV__PRIM_POWER: /* cpow: exp(y * log(x)) */
      return narrow(thrust::exp(d_mul(wide(y), c_log(wide(x)))));
    default: return x;
  }
}

struct BComplex {
  int op;
  __device__ __forceinline__ explicit BComplex(const nv__ew_params &p) : op(p.op) {}
  __device__ __forceinline__ c64 operator()(c64 x, c64 y) const { return b_complex(op, x, y); }
};

__device__ __forceinline__ bool close_c(c64 a, c64 b, const nv__ew_extra &e) {
  if (ceq(a, b)) return true;
  bool na = cnan(a), nb = cnan(b);
  if (na || nb) return e.close.equal_nan && na && nb;
  if (!isfinite(a.re) || !isfinite(a.im) || !isfinite(b.re) || !isfinite(b.im)) return false;
  double dr = (double)a.re - (double)b.re, di = (double)a.im - (double)b.im;
  return hypot(dr, di) <=
         __dadd_rn(e.close.atol, __dmul_rn(e.close.rtol, hypot((double)b.re, (double)b.im)));
}

struct BPredC {
  int op;
  nv__ew_extra e;
  __device__ __forceinline__ explicit BPredC(const nv__ew_params &p) : op(p.op), e(p.extra) {}
  __device__ __forceinline__ bool operator()(c64 x, c64 y) const {
    switch (op) {
      case NV__PRIM_EQUAL: return ceq(x, y);
      case NV__PRIM_NOT_EQUAL: return !ceq(x, y);
      case NV__PRIM_GREATER: return cgt(x, y);
      case NV__PRIM_GREATER_EQUAL: return cge(x, y);
      case NV__PRIM_LESS: return cgt(y, x);
      case NV__PRIM_LESS_EQUAL: return cge(y, x);
      case NV__PRIM_LOGICAL_AND: return cnz(x) && cnz(y);
      case NV__PRIM_LOGICAL_OR: return cnz(x) || cnz(y);
      case NV__PRIM_LOGICAL_XOR: return cnz(x) != cnz(y);
      case NV__PRIM_ISCLOSE:
      case NV__PRIM_ALLCLOSE: return close_c(x, y, e);
      case NV__PRIM_ARRAY_EQUAL: return ceq(x, y) || (e.close.equal_nan && cnan(x) && cnan(y));
      default: return false;
    }
  }
};

}  // namespace
}  // namespace nvew

using namespace nvew;

void nv__ew_fill_complex(nv__ew_table t) {
  const int C = NV_DTYPE_COMPLEX64;
  static const int unary[] = {
      NV__PRIM_NEGATIVE, NV__PRIM_EXP,     NV__PRIM_LOG,     NV__PRIM_SQRT,     NV__PRIM_SIGN,
      NV__PRIM_RECIPROCAL, NV__PRIM_ROUND, NV__PRIM_SQUARE,  NV__PRIM_RSQRT,    NV__PRIM_EXPM1,
      NV__PRIM_LOG2,     NV__PRIM_LOG10,   NV__PRIM_LOG1P,   NV__PRIM_SIN,      NV__PRIM_COS,
      NV__PRIM_TAN,      NV__PRIM_ARCSIN,  NV__PRIM_ARCCOS,  NV__PRIM_ARCTAN,   NV__PRIM_SINH,
      NV__PRIM_COSH,     NV__PRIM_TANH,    NV__PRIM_ARCSINH, NV__PRIM_ARCCOSH,  NV__PRIM_ARCTANH,
      NV__PRIM_DEGREES,  NV__PRIM_RADIANS, NV__PRIM_NAN_TO_NUM, NV__PRIM_CONJUGATE};
  static const int tests[] = {NV__PRIM_LOGICAL_NOT, NV__PRIM_ISNAN,    NV__PRIM_ISINF,
                              NV__PRIM_ISFINITE,    NV__PRIM_ISPOSINF, NV__PRIM_ISNEGINF};
  static const int binary[] = {NV__PRIM_ADD,     NV__PRIM_SUBTRACT, NV__PRIM_MULTIPLY, NV__PRIM_DIVIDE,
                               NV__PRIM_MAXIMUM, NV__PRIM_MINIMUM,  NV__PRIM_POWER};
  static const int preds[] = {NV__PRIM_EQUAL,        NV__PRIM_NOT_EQUAL,   NV__PRIM_GREATER,
                              NV__PRIM_GREATER_EQUAL, NV__PRIM_LESS,       NV__PRIM_LESS_EQUAL,
                              NV__PRIM_LOGICAL_AND,  NV__PRIM_LOGICAL_OR,  NV__PRIM_LOGICAL_XOR,
                              NV__PRIM_ISCLOSE};
  nv__ew_entry u = entry1<false, UComplex, c64, c64>();
  for (int p : unary) t[p][C] = u;
  t[NV__PRIM_ABS][C] = entry1<false, AbsC, float, c64>();
  nv__ew_entry ut = entry1<false, UTestC, uint8_t, c64>();
  for (int p : tests) t[p][C] = ut;
  nv__ew_entry b = entry2<false, BComplex, c64, c64, c64>();
  for (int p : binary) t[p][C] = b;
  nv__ew_entry bp = entry2<false, BPredC, uint8_t, c64, c64>();
  for (int p : preds) t[p][C] = bp;
  nv__ew_entry all = {nullptr, (const void *)k_allclose<BPredC, c64>, 0};
  t[NV__PRIM_ALLCLOSE][C] = all;
  t[NV__PRIM_ARRAY_EQUAL][C] = all;
}
