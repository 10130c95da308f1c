/* Initialisers, as mlx.nn.init: fans from the shape, scales from the fans and the gain, samples
 * from the random family (so a key, or the global sequence, gives MLX's values). */
#include <math.h>

#include "nn/nn_internal.h"
#include "ops/ops_internal.h"

nv_status nv_init_fans(const int *shape, int ndim, int64_t *fan_in, int64_t *fan_out) {
  if (!fan_in || !fan_out || (ndim > 0 && !shape))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "init_fans: NULL argument");
  if (ndim < 2)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "init_fans: Glorot / He initialization requires at least 2 dimensional "
                         "input but input with %d dimensions",
                         ndim);
  int64_t in = shape[ndim - 1], out = shape[0], field = 1;
  for (int i = 1; i < ndim - 1; i++) field *= shape[i];
  *fan_in = in * field;
  *fan_out = out * field;
  return NV_OK;
}

/* Checks what the samplers would check, so that the error names the initialiser. */
static nv_array *check_shape(const char *op, const int *shape, int ndim) {
  if (ndim < 0 || ndim > NV__MAX_DIMS || (ndim > 0 && !shape))
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "bad shape (ndim %d)", ndim);
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "negative dimension %d in axis %d", shape[i], i);
  return NULL;
}

/* Normal samplers take real floats (and complex64 for plain normal); uniform ones the floats
 * MLX's uniform takes. */
static nv_array *check_dtype(const char *op, nv_dtype dtype, bool uniform, bool complex_ok) {
  bool ok = dtype == NV_DTYPE_FLOAT16 || dtype == NV_DTYPE_BFLOAT16 || dtype == NV_DTYPE_FLOAT32 ||
            (!uniform && dtype == NV_DTYPE_FLOAT64) || (complex_ok && dtype == NV_DTYPE_COMPLEX64);
  if (ok) return NULL;
  return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "unsupported dtype %s (%s)", nv_dtype_name(dtype),
                         uniform ? "float16, bfloat16 or float32"
                                 : "float16, bfloat16, float32 or float64");
}

/* The fan the scale divides by: fan_in + fan_out for Glorot (mode < 0), else the mode's. */
static nv_array *fan_of(const char *op, const int *shape, int ndim, int mode, double *fan) {
  int64_t in, out;
  if (nv_init_fans(shape, ndim, &in, &out) != NV_OK)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "requires at least 2 dimensions, got %d", ndim);
  if (mode > NV_INIT_FAN_OUT) return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "invalid fan mode %d", mode);
  int64_t f = mode < 0 ? in + out : mode == NV_INIT_FAN_IN ? in : out;
  if (f <= 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "the fan is 0 for a shape with a zero dimension (fan_in %lld, "
                           "fan_out %lld)", (long long)in, (long long)out);
  *fan = (double)f;
  return NULL;
}

nv_array *nv_init_constant(const int *shape, int ndim, double value, nv_dtype dtype) {
  nv_array *e = check_shape("init_constant", shape, ndim);
  if (e) return e;
  return nv_full(shape, ndim, value, dtype);
}

nv_array *nv_init_normal(const int *shape, int ndim, double mean, double std, nv_dtype dtype,
                         const nv_array *key) {
  nv_array *e = check_shape("init_normal", shape, ndim);
  if (!e) e = check_dtype("init_normal", dtype, false, true);
  return e ? e : nv_random_normal(shape, ndim, dtype, mean, std, key);
}

nv_array *nv_init_uniform(const int *shape, int ndim, double low, double high, nv_dtype dtype,
                          const nv_array *key) {
  nv_array *e = check_shape("init_uniform", shape, ndim);
  if (!e) e = check_dtype("init_uniform", dtype, true, false);
  return e ? e : nv_random_uniform_scalar(low, high, shape, ndim, dtype, key);
}

nv_array *nv_init_identity(const int *shape, int ndim, nv_dtype dtype) {
  nv_array *e = check_shape("init_identity", shape, ndim);
  if (e) return e;
  if (ndim != 2 || shape[0] != shape[1]) {
    char s[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "init_identity", "the shape must be a square matrix but got %s",
                           nv__shape_str(shape, ndim, s, sizeof s));
  }
  if (shape[0] == 0) return nv_zeros(shape, 2, dtype); /* MLX's eye(0) fails; a 0x0 is fine */
  return nv_eye(shape[0], shape[0], 0, dtype);
}

/* Glorot and He share this: the scale from the fan, then a normal or uniform sample. */
static nv_array *scaled(const char *op, const int *shape, int ndim, int mode, double gain,
                        double num, bool uniform, nv_dtype dtype, const nv_array *key) {
  double fan = 0;
  nv_array *e = check_shape(op, shape, ndim);
  if (!e) e = check_dtype(op, dtype, uniform, false);
  if (!e) e = fan_of(op, shape, ndim, mode, &fan);
  if (e) return e;
  if (uniform) {
    double limit = gain * sqrt(num / fan);
    return nv_random_uniform_scalar(-limit, limit, shape, ndim, dtype, key);
  }
  /* MLX writes He's std as gain / sqrt(fan) and Glorot's as gain * sqrt(2 / fan). */
  double std = mode < 0 ? gain * sqrt(num / fan) : gain / sqrt(fan);
  return nv_random_normal(shape, ndim, dtype, 0.0, std, key);
}

nv_array *nv_init_glorot_normal(const int *shape, int ndim, double gain, nv_dtype dtype,
                                const nv_array *key) {
  return scaled("init_glorot_normal", shape, ndim, -1, gain, 2.0, false, dtype, key);
}

nv_array *nv_init_glorot_uniform(const int *shape, int ndim, double gain, nv_dtype dtype,
                                 const nv_array *key) {
  return scaled("init_glorot_uniform", shape, ndim, -1, gain, 6.0, true, dtype, key);
}

nv_array *nv_init_he_normal(const int *shape, int ndim, nv_init_fan_mode mode, double gain,
                            nv_dtype dtype, const nv_array *key) {
  if ((int)mode < 0) return nv__op_error(NV_ERR_INVALID_ARGUMENT, "init_he_normal", "invalid fan mode %d", (int)mode);
  return scaled("init_he_normal", shape, ndim, (int)mode, gain, 1.0, false, dtype, key);
}

nv_array *nv_init_he_uniform(const int *shape, int ndim, nv_init_fan_mode mode, double gain,
                             nv_dtype dtype, const nv_array *key) {
  if ((int)mode < 0) return nv__op_error(NV_ERR_INVALID_ARGUMENT, "init_he_uniform", "invalid fan mode %d", (int)mode);
  return scaled("init_he_uniform", shape, ndim, (int)mode, gain, 3.0, true, dtype, key);
}
