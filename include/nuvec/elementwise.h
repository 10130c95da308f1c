/* nuvec — element-wise ops beyond the core arithmetic of nuvec/ops.h: unary math, comparisons,
 * logical and bitwise ops, floor division and powers, where/clip, closeness tests, triangular
 * and window creation, dtype views and ordering primitives. MLX's names and semantics.
 *
 * Conventions (as nuvec/ops.h): builders are lazy, borrow their inputs and return a new array
 * (owned by the caller or the innermost scope); they never return NULL, and bad arguments give
 * an array that carries an error naming the op. Binary ops broadcast as NumPy and promote with
 * MLX's table; weak scalars (nv_weak_scalar, nv_weak_int) keep the array's dtype as MLX's
 * Python scalars do. Values follow NumPy (computed in float64 where NumPy does); result dtypes
 * follow MLX. Integer arithmetic never traps: where C would be undefined (overflow, division
 * by zero, INT_MIN / -1, shifts out of range) the result is the defined value documented on
 * the op. Ops that return several arrays append them to an nv_vec and return nv_status: on
 * failure (including an input that already carries an error) nothing is appended. */
#ifndef NUVEC_ELEMENTWISE_H
#define NUVEC_ELEMENTWISE_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Unary ---- */

/* +x: the array itself (a new handle on the same data), any dtype. */
NV_API nv_array *nv_positive(const nv_array *x);

/* The sign: -1, 0 or 1 in the dtype of x (bool: itself; unsigned: 0 or 1). As NumPy, the sign
 * of NaN is NaN and of a complex value z is z/|z| (0 for 0). */
NV_API nv_array *nv_sign(const nv_array *x);

/* Logical not of any dtype (nonzero and NaN are true): a bool array. */
NV_API nv_array *nv_logical_not(const nv_array *x);

/* 1/x. Integers and bool compute in float32 (1/0 is inf). */
NV_API nv_array *nv_reciprocal(const nv_array *x);

/* Floor, ceiling and truncation toward zero. Integer and bool arrays are returned unchanged
 * (a new handle); complex64 fails with NV_ERR_INVALID_ARGUMENT, as MLX. */
NV_API nv_array *nv_floor(const nv_array *x);
NV_API nv_array *nv_ceil(const nv_array *x);
NV_API nv_array *nv_trunc(const nv_array *x);

/* Rounds to `decimals` places, halves to even, as NumPy: rint(x * 10^d) / 10^d for d > 0 and
 * rint(x / 10^-d) * 10^-d for d < 0, computed in float64 for every float dtype (then rounded
 * once to the dtype). Integers round exactly to a multiple of 10^-d for d < 0 (halves to even;
 * 0 when 10^-d exceeds the type's range) and are unchanged for d >= 0; bool is unchanged;
 * complex64 rounds both parts. */
NV_API nv_array *nv_round(const nv_array *x, int decimals);

/* x*x in the dtype of x (integers wrap; bool: x). */
NV_API nv_array *nv_square(const nv_array *x);

/* Math functions: 1/sqrt(x), e^x - 1, log2, log10, log(1+x), the trigonometric and hyperbolic
 * functions and their inverses, and degrees/radians conversion. Integers and bool compute in
 * float32, float16/bfloat16 in float32 (rounded once), float64 in float64; complex64 uses the
 * principal branches of C99's complex functions. Outside the domain the result is NaN (or
 * ±inf at poles), never an error. */
NV_API nv_array *nv_rsqrt(const nv_array *x);
NV_API nv_array *nv_expm1(const nv_array *x);
NV_API nv_array *nv_log2(const nv_array *x);
NV_API nv_array *nv_log10(const nv_array *x);
NV_API nv_array *nv_log1p(const nv_array *x);
NV_API nv_array *nv_sin(const nv_array *x);
NV_API nv_array *nv_cos(const nv_array *x);
NV_API nv_array *nv_tan(const nv_array *x);
NV_API nv_array *nv_arcsin(const nv_array *x);
NV_API nv_array *nv_arccos(const nv_array *x);
NV_API nv_array *nv_arctan(const nv_array *x);
NV_API nv_array *nv_sinh(const nv_array *x);
NV_API nv_array *nv_cosh(const nv_array *x);
NV_API nv_array *nv_tanh(const nv_array *x);
NV_API nv_array *nv_arcsinh(const nv_array *x);
NV_API nv_array *nv_arccosh(const nv_array *x);
NV_API nv_array *nv_arctanh(const nv_array *x);
NV_API nv_array *nv_degrees(const nv_array *x);
NV_API nv_array *nv_radians(const nv_array *x);

/* The logistic function 1/(1+e^-x), computed without overflow for large |x|; the error
 * function; and its inverse (erfinv(±1) = ±inf, NaN outside [-1, 1]; float32 and the half
 * types within 4 ulp of the float32-rounded inverse, by a polynomial approximation; float64
 * refined to full precision). Real dtypes only (integers and bool compute in float32);
 * complex64 fails with NV_ERR_INVALID_ARGUMENT. */
NV_API nv_array *nv_sigmoid(const nv_array *x);
NV_API nv_array *nv_erf(const nv_array *x);
NV_API nv_array *nv_erfinv(const nv_array *x);

/* GELU as one element-wise op (MLX's nn.gelu, gelu_approx and gelu_fast_approx): x Φ(x)
 * through erf; x σ(2 √(2/π) (x + 0.044715 x³)), which is the tanh form 0.5 x (1 + tanh(...))
 * without its cancellation; and x σ(1.702 x). Real dtypes (integers and bool compute in
 * float32); complex64 fails with NV_ERR_INVALID_ARGUMENT. gelu(-inf) = -0, NaN stays NaN.
 * float32 within 4.5 ulp (the erf form: 2 ulp for x >= 0, |x| 2^-22 absolute below, as the
 * composed form); their gradients are one fused pass each. A new reference. */
NV_API nv_array *nv_gelu(const nv_array *x);
NV_API nv_array *nv_gelu_approx(const nv_array *x);
NV_API nv_array *nv_gelu_fast_approx(const nv_array *x);

/* Bool arrays testing each element: NaN; ±inf; finite; +inf; -inf. Integers and bool are
 * finite. For complex64, isnan/isinf/isfinite look at either part (as NumPy) and
 * isposinf/isneginf compare with ±inf + 0i (as MLX). */
NV_API nv_array *nv_isnan(const nv_array *x);
NV_API nv_array *nv_isinf(const nv_array *x);
NV_API nv_array *nv_isfinite(const nv_array *x);
NV_API nv_array *nv_isposinf(const nv_array *x);
NV_API nv_array *nv_isneginf(const nv_array *x);

/* x with NaN replaced by `nan`, +inf by *posinf and -inf by *neginf, each converted to the
 * dtype of x; a NULL posinf/neginf means the dtype's largest/lowest finite value (MLX's
 * defaults: nan_to_num(x) replaces NaN by 0). complex64 treats both parts alike (as NumPy);
 * integer and bool arrays are returned unchanged. */
NV_API nv_array *nv_nan_to_num(const nv_array *x, double nan, const double *posinf,
                               const double *neginf);

/* The complex conjugate (other dtypes: the array itself). */
NV_API nv_array *nv_conjugate(const nv_array *x);

/* The real and imaginary parts. Of complex64: float32 views of its data (no copy). Of a real
 * dtype: real is the array itself, imag zeros of the same dtype (as MLX). */
NV_API nv_array *nv_real(const nv_array *x);
NV_API nv_array *nv_imag(const nv_array *x);

/* ~x of an integer array; logical not of a bool array. Floats fail with
 * NV_ERR_INVALID_ARGUMENT. */
NV_API nv_array *nv_bitwise_invert(const nv_array *x);

/* ---- Binary ---- */

/* Floor division, remainder and both at once, flooring as Python and NumPy (the remainder has
 * the sign of the divisor). Integers: a // 0 is 0 and a % 0 is a (MLX's choice, never a
 * trap); INT_MIN // -1 wraps to INT_MIN and INT_MIN % -1 is 0. Floats follow NumPy's divmod
 * (x // 0 is ±inf or NaN, x % 0 is NaN, x % ±inf is x or ±inf by sign). bool works as
 * the integers 0/1 and stays bool; complex64 fails with NV_ERR_INVALID_ARGUMENT. nv_divmod
 * appends the quotient then the remainder to `out`. */
NV_API nv_array *nv_floor_divide(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_remainder(const nv_array *a, const nv_array *b);
NV_API nv_status nv_divmod(const nv_array *a, const nv_array *b, nv_vec *out);

/* a raised to b. Integers compute exactly with wrapping, a negative exponent gives 0 (MLX's
 * rule; NumPy raises); bool: a or not b. Floats as C's pow (float16/bfloat16 in float32),
 * complex64 as cpowf. */
NV_API nv_array *nv_power(const nv_array *a, const nv_array *b);

/* atan2(a, b) and log(e^a + e^b) (without overflow; -inf with -inf is -inf). Integers and bool
 * compute in float32. complex64: arctan2 fails with NV_ERR_INVALID_ARGUMENT; logaddexp gives
 * complex64, as MLX's (m + log1p(exp(o - m)), m the operand of larger real part). */
NV_API nv_array *nv_arctan2(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_logaddexp(const nv_array *a, const nv_array *b);

/* Comparisons in the promoted dtype, giving bool. NaN compares unequal to everything (not_equal
 * is true); complex64 orders lexicographically (real part, then imaginary), as NumPy 2. */
NV_API nv_array *nv_equal(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_not_equal(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_greater(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_greater_equal(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_less(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_less_equal(const nv_array *a, const nv_array *b);

/* Logical and/or/xor of any dtypes (nonzero and NaN are true), giving bool. */
NV_API nv_array *nv_logical_and(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_logical_or(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_logical_xor(const nv_array *a, const nv_array *b);

/* Bitwise and/or/xor and shifts of integer or bool arrays in the promoted dtype (shifts of
 * two bools compute in uint8, as MLX). Float or complex inputs fail with
 * NV_ERR_INVALID_ARGUMENT naming the op. Shifts are defined for every amount, as NumPy: a left
 * shift by a negative amount or by the width or more gives 0; a right shift by such an amount
 * gives -1 for negative signed values and 0 otherwise; right shifts of signed values are
 * arithmetic. */
NV_API nv_array *nv_bitwise_and(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_bitwise_or(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_bitwise_xor(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_left_shift(const nv_array *a, const nv_array *b);
NV_API nv_array *nv_right_shift(const nv_array *a, const nv_array *b);

/* The same binary ops with a weakly typed C scalar on the right (see nv_weak_scalar). */
NV_API nv_array *nv_power_scalar(const nv_array *a, double b);
NV_API nv_array *nv_floor_divide_scalar(const nv_array *a, double b);
NV_API nv_array *nv_remainder_scalar(const nv_array *a, double b);
NV_API nv_array *nv_equal_scalar(const nv_array *a, double b);
NV_API nv_array *nv_greater_scalar(const nv_array *a, double b);
NV_API nv_array *nv_less_scalar(const nv_array *a, double b);

/* ---- Selection and closeness ---- */

/* x where cond is true, else y (cond of any dtype, nonzero true), the three broadcast
 * together; x and y promote as a binary op. */
NV_API nv_array *nv_where(const nv_array *cond, const nv_array *x, const nv_array *y);

/* a limited to [a_min, a_max], as MLX: minimum(maximum(a, a_min), a_max) with its promotion
 * and broadcasting (so a_min > a_max gives a_max, and NaN stays NaN). Either bound may be NULL
 * (absent), not both: that fails with NV_ERR_INVALID_ARGUMENT. */
NV_API nv_array *nv_clip(const nv_array *a, const nv_array *a_min, const nv_array *a_max);
/* nv_clip with weakly typed C scalar bounds, both present. */
NV_API nv_array *nv_clip_scalar(const nv_array *a, double a_min, double a_max);

/* |a - b| <= atol + rtol * |b| element-wise (bool), computed in float64 from the promoted
 * values, as NumPy: infinities are close only to themselves, NaN is close to NaN only when
 * `equal_nan`. MLX's defaults are rtol 1e-5, atol 1e-8, equal_nan false. */
NV_API nv_array *nv_isclose(const nv_array *a, const nv_array *b, double rtol, double atol,
                            bool equal_nan);

/* A 0-d bool: whether isclose holds everywhere (the shapes must broadcast, else
 * NV_ERR_INVALID_ARGUMENT as MLX). Computed in one pass without an intermediate array. */
NV_API nv_array *nv_allclose(const nv_array *a, const nv_array *b, double rtol, double atol,
                             bool equal_nan);

/* A 0-d bool: whether a and b have the same shape and equal values (compared in the promoted
 * dtype; NaN equals NaN when `equal_nan`). Different shapes give false, not an error. */
NV_API nv_array *nv_array_equal(const nv_array *a, const nv_array *b, bool equal_nan);

/* ---- Creation ---- */

/* An n×m array of `dtype` with ones at and below the k-th diagonal (column - row <= k) and
 * zeros elsewhere; m < 0 means m = n. n = 0 gives an empty array; n < 0 fails. */
NV_API nv_array *nv_tri(int n, int m, int k, nv_dtype dtype);

/* x (at least 2-D) with the elements above the k-th diagonal of its last two axes set to zero
 * (tril) or below it (triu), in the dtype of x. Fewer than 2 dimensions fail. */
NV_API nv_array *nv_tril(const nv_array *x, int k);
NV_API nv_array *nv_triu(const nv_array *x, int k);

/* Coordinate arrays from the 1-D views (each input is flattened) of `arrays`, appended to `out`
 * in order, each keeping its input's dtype. indexing "xy" (NULL: the default, Cartesian: the
 * first two axes swap) or "ij" (matrix). When `sparse`, each output has size 1 on all axes but
 * its own; otherwise they are broadcast views of the full grid (no copy). */
NV_API nv_status nv_meshgrid(const nv_vec *arrays, bool sparse, const char *indexing,
                             nv_vec *out);

/* Window functions of length m as NumPy defines them, in float32 (values computed in float64
 * and rounded once): Hann, Hamming, Bartlett (triangular) and Blackman. m < 1 gives an empty
 * array, m = 1 gives [1]. */
NV_API nv_array *nv_hanning(int m);
NV_API nv_array *nv_hamming(int m);
NV_API nv_array *nv_bartlett(int m);
NV_API nv_array *nv_blackman(int m);

/* ---- Type and ordering ---- */

/* The bytes of x read as `dtype`, as MLX's view. With the same item size the shape stays; a
 * smaller item size multiplies the last axis, a larger one divides it (its size in bytes must
 * be a multiple of the new item size, and a 0-d array can only change to a type of the same
 * size). The result shares the buffer of x when its layout allows (same item size, a
 * contiguous last axis when narrowing, or a row-contiguous x) and the element offset stays
 * whole in the new dtype; otherwise it reads a contiguous copy of the bytes. */
NV_API nv_array *nv_view(const nv_array *x, nv_dtype dtype);

/* x itself as a new array through which gradients do not flow (a view; no copy). */
NV_API nv_array *nv_stop_gradient(const nv_array *x);

/* Appends to `out` one array per array of `inputs`, with the same values (views, no copy),
 * computed only after every array of `dependencies` has been evaluated: evaluating them
 * evaluates the dependencies too, and a failed dependency fails them. */
NV_API nv_status nv_depends(const nv_vec *inputs, const nv_vec *dependencies, nv_vec *out);

/* A 0-d array of `dtype` holding the product of the sizes of x's `axes` (`naxes` of them,
 * negative counted from the end), or, when `inverted`, of its other axes, as MLX's
 * number_of_elements (no axes: 1, or the size of x when inverted). An axis out of range or
 * repeated fails with NV_ERR_INVALID_ARGUMENT. */
NV_API nv_array *nv_number_of_elements(const nv_array *x, const int *axes, int naxes,
                                       bool inverted, nv_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_ELEMENTWISE_H */
