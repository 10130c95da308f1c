/* Builders of the fft family: the 1-D and n-D transforms, the sample frequencies and the shifts.
 * One primitive (NV__PRIM_FFT) transforms the last axis of its input; a transform along another
 * axis moves that axis last (a view), crops or zero-pads it to the transform's input length,
 * runs the primitive and moves the axis back. An n-D transform is a chain of 1-D ones (rfftn:
 * the real transform on the last listed axis first; irfftn: the real one last); the norm's
 * factor is split into the 1-D transforms' own factors, whose product it is. */
#include <math.h>
#include <string.h>

#include "nuvec.h"
#include "ops/fft_params.h"
#include "ops/ops_internal.h"

/* How an n-D transform maps: which 1-D kinds it chains. */
typedef enum fft_mode { MODE_FFT, MODE_IFFT, MODE_RFFT, MODE_IRFFT } fft_mode;

/* A new handle on `x` itself (transforms over no axes return their input, as MLX). */
static nv_array *same(const nv_array *x) { return nv__array_new(nv__node_retain(x->node), x->idx); }

/* The factor of a 1-D transform of length n under `norm` in the given direction. */
static double norm_scale(nv_fft_norm norm, bool inverse, int64_t n) {
  switch (norm) {
    case NV_FFT_NORM_ORTHO: return 1.0 / sqrt((double)n);
    case NV_FFT_NORM_FORWARD: return inverse ? 1.0 : 1.0 / (double)n;
    default: return inverse ? 1.0 / (double)n : 1.0;
  }
}

/* The primitive over the last axis of `x` (already of the kind's input dtype and length). */
nv_array *nv__fft_last(const nv_array *x, int kind, int64_t n, double scale) {
  nv_array *f = nv__op_check("fft", &x, 1);
  if (f) return f;
  const nv__output *o = nv__out(x);
  int shape[NV__MAX_DIMS];
  memcpy(shape, o->shape, (size_t)o->ndim * sizeof(int));
  shape[o->ndim - 1] = (int)(kind == NV__FFT_R2C ? n / 2 + 1 : n);
  nv_dtype dt = kind == NV__FFT_C2R ? NV_DTYPE_FLOAT32 : NV_DTYPE_COMPLEX64;
  nv__node *node = nv__op_node(NV__PRIM_FFT, (nv_array *const *)&x, 1, dt, shape, o->ndim,
                               sizeof(nv__fft_params));
  if (node) {
    nv__fft_params *p = node->params;
    p->kind = kind;
    p->n = n;
    p->scale = scale;
  }
  return nv__op_finish("fft", node);
}

/* One 1-D transform of `x` along `axis` (normalized) with length n (the C2R output's length):
 * the axis moved last, cropped or zero-padded to the input length, transformed, moved back. */
static nv_array *axis_step(const nv_array *x, int axis, int n, int kind, nv_fft_norm norm) {
  int nd = nv__out(x)->ndim, last = nd - 1;
  int len = kind == NV__FFT_C2R ? n / 2 + 1 : n;
  nv_array *v = axis == last ? nv_retain((nv_array *)x) : nv_moveaxis(x, axis, last);
  int have = nv__out(v)->shape[last];
  if (have != len) {
    int lo[NV__MAX_DIMS] = {0}, hi[NV__MAX_DIMS], zero[NV__MAX_DIMS] = {0};
    for (int i = 0; i < nd; i++) hi[i] = nv__out(v)->shape[i];
    nv_array *w;
    if (have > len) {
      hi[last] = len;
      w = nv_slice(v, lo, hi, NULL, nd);
    } else {
      memset(hi, 0, sizeof hi);
      hi[last] = len - have;
      w = nv_pad(v, zero, hi, nd, NV_PAD_CONSTANT, NULL);
    }
    nv_release(v);
    v = w;
  }
  bool inverse = kind == NV__FFT_C2C_INVERSE || kind == NV__FFT_C2R;
  nv_array *y = nv__fft_last(v, kind, n, norm_scale(norm, inverse, n));
  nv_release(v);
  if (axis == last) return y;
  nv_array *r = nv_moveaxis(y, last, axis);
  nv_release(y);
  return r;
}

static const char *mode_name(fft_mode m) {
  static const char *const names[] = {"fftn", "ifftn", "rfftn", "irfftn"};
  return names[m];
}

/* The checked axes and sizes of an n-D transform: NULL when valid, else the failed array. */
static nv_array *resolve(fft_mode mode, const nv__output *o, const int *s, const int *axes,
                         int *naxes, int *ax, int *sz) {
  const char *op = mode_name(mode);
  char sh[NV__SHAPE_BUF];
  if (!axes && !s) *naxes = o->ndim;
  if (*naxes < 0 || *naxes > o->ndim)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "%d axes for an array of shape %s", *naxes,
                        nv__shape_str(o->shape, o->ndim, sh, sizeof sh));
  for (int i = 0; i < *naxes; i++) {
    int a = axes ? axes[i] : o->ndim - *naxes + i;
    if (!nv__norm_axis(&a, o->ndim))
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "axis %d is out of range for shape %s",
                          axes[i], nv__shape_str(o->shape, o->ndim, sh, sizeof sh));
    for (int j = 0; j < i; j++)
      if (ax[j] == a)
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "axis %d is repeated in the axes", a);
    ax[i] = a;
    if (s) {
      sz[i] = s[i];
    } else if (mode == MODE_IRFFT && i == *naxes - 1) {
      sz[i] = 2 * (o->shape[a] - 1);
    } else {
      sz[i] = o->shape[a];
    }
    if (sz[i] < 1)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "invalid transform size %d for axis %d of shape %s", sz[i], a,
                          nv__shape_str(o->shape, o->ndim, sh, sizeof sh));
  }
  return NULL;
}

static nv_array *transform(fft_mode mode, const nv_array *a, const int *s, const int *axes,
                           int naxes, nv_fft_norm norm) {
  const char *op = mode_name(mode);
  nv_array *f = nv__op_check(op, &a, 1);
  if (f) return f;
  if (norm != NV_FFT_NORM_BACKWARD && norm != NV_FFT_NORM_ORTHO && norm != NV_FFT_NORM_FORWARD)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "invalid norm %d", (int)norm);
  const nv__output *o = nv__out(a);
  int ax[NV__MAX_DIMS], sz[NV__MAX_DIMS];
  if ((f = resolve(mode, o, s, axes, &naxes, ax, sz))) return f;
  /* A 0-d array has no axis to transform (MLX's error, where it would otherwise be returned
   * unchanged as a transform over no axes). */
  if (o->ndim == 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "requires an array with at least one dimension, got shape ()");
  if (naxes == 0) return same(a);
  nv__scope_suspend();
  nv_array *x;
  if (mode == MODE_RFFT) {
    nv_array *re = o->dtype == NV_DTYPE_COMPLEX64 ? nv_real(a) : nv_retain((nv_array *)a);
    x = nv__cast_unscoped(re, NV_DTYPE_FLOAT32);
    nv_release(re);
  } else {
    x = nv__cast_unscoped(a, NV_DTYPE_COMPLEX64);
  }
  int last = naxes - 1;
  for (int k = 0; k < naxes; k++) {
    /* rfftn: the real transform first, on the last axis; irfftn: the real one last. */
    int i = mode == MODE_RFFT ? last - k : k;
    int kind = mode == MODE_FFT    ? NV__FFT_C2C_FORWARD
               : mode == MODE_IFFT ? NV__FFT_C2C_INVERSE
               : mode == MODE_RFFT ? (i == last ? NV__FFT_R2C : NV__FFT_C2C_FORWARD)
                                   : (i == last ? NV__FFT_C2R : NV__FFT_C2C_INVERSE);
    nv_array *y = axis_step(x, ax[i], sz[i], kind, norm);
    nv_release(x);
    x = y;
  }
  nv__scope_resume();
  nv__scope_register(x);
  return x;
}

nv_array *nv_fft_fftn(const nv_array *a, const int *s, const int *axes, int naxes,
                      nv_fft_norm norm) {
  return transform(MODE_FFT, a, s, axes, naxes, norm);
}
nv_array *nv_fft_ifftn(const nv_array *a, const int *s, const int *axes, int naxes,
                       nv_fft_norm norm) {
  return transform(MODE_IFFT, a, s, axes, naxes, norm);
}
nv_array *nv_fft_rfftn(const nv_array *a, const int *s, const int *axes, int naxes,
                       nv_fft_norm norm) {
  return transform(MODE_RFFT, a, s, axes, naxes, norm);
}
nv_array *nv_fft_irfftn(const nv_array *a, const int *s, const int *axes, int naxes,
                        nv_fft_norm norm) {
  return transform(MODE_IRFFT, a, s, axes, naxes, norm);
}

nv_array *nv_fft_fft(const nv_array *a, const int *n, int axis, nv_fft_norm norm) {
  return transform(MODE_FFT, a, n, &axis, 1, norm);
}
nv_array *nv_fft_ifft(const nv_array *a, const int *n, int axis, nv_fft_norm norm) {
  return transform(MODE_IFFT, a, n, &axis, 1, norm);
}
nv_array *nv_fft_rfft(const nv_array *a, const int *n, int axis, nv_fft_norm norm) {
  return transform(MODE_RFFT, a, n, &axis, 1, norm);
}
nv_array *nv_fft_irfft(const nv_array *a, const int *n, int axis, nv_fft_norm norm) {
  return transform(MODE_IRFFT, a, n, &axis, 1, norm);
}

/* ---- Frequencies and shifts ---- */

static nv_array *freqs(const char *op, int n, double d, bool half) {
  if (n < 1) return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "n must be positive, got %d", n);
  int len = half ? n / 2 + 1 : n;
  float *v = nv__malloc((size_t)len * sizeof *v);
  if (!v) return nv__op_error(NV_ERR_OUT_OF_MEMORY, op, "out of memory for %d values", len);
  double step = 1.0 / ((double)n * d);
  for (int i = 0; i < len; i++) {
    int k = half || i < (n + 1) / 2 ? i : i - n;
    v[i] = (float)(k * step);
  }
  nv_array *r = nv_array_from_data(v, &len, 1, NV_DTYPE_FLOAT32);
  nv__free(v);
  return r;
}

nv_array *nv_fft_fftfreq(int n, double d) { return freqs("fftfreq", n, d, false); }
nv_array *nv_fft_rfftfreq(int n, double d) { return freqs("rfftfreq", n, d, true); }

static nv_array *shift(const char *op, const nv_array *a, const int *axes, int naxes, int sign) {
  nv_array *f = nv__op_check(op, &a, 1);
  if (f) return f;
  const nv__output *o = nv__out(a);
  int ax[NV__MAX_DIMS], sh[NV__MAX_DIMS];
  if (!axes) naxes = o->ndim;
  if (naxes < 0 || naxes > NV__MAX_DIMS)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "%d axes is not a valid count", naxes);
  for (int i = 0; i < naxes; i++) {
    int x = axes ? axes[i] : i;
    if (!nv__norm_axis(&x, o->ndim)) {
      char s[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "axis %d is out of range for shape %s",
                          axes[i], nv__shape_str(o->shape, o->ndim, s, sizeof s));
    }
    ax[i] = x;
    sh[i] = sign * (o->shape[x] / 2);
  }
  if (naxes == 0) return same(a);
  return nv_roll(a, sh, naxes, ax, naxes);
}

nv_array *nv_fft_fftshift(const nv_array *a, const int *axes, int naxes) {
  return shift("fftshift", a, axes, naxes, 1);
}
nv_array *nv_fft_ifftshift(const nv_array *a, const int *axes, int naxes) {
  return shift("ifftshift", a, axes, naxes, -1);
}
