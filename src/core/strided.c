/* Strided copies and dimension collapsing. */
#include <string.h>

#include "core/internal.h"
#include "core/strided.h"

int nv__collapse(const int *shape, int ndim, const int64_t *const *strides, int nops,
                 int64_t *out_shape, int64_t **out_strides) {
  int n = 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 1) continue;
    if (n > 0) {
      bool fold = true;
      for (int k = 0; k < nops; k++)
        if (out_strides[k][n - 1] != (int64_t)shape[i] * strides[k][i]) fold = false;
      if (fold) {
        out_shape[n - 1] *= shape[i];
        for (int k = 0; k < nops; k++) out_strides[k][n - 1] = strides[k][i];
        continue;
      }
    }
    out_shape[n] = shape[i];
    for (int k = 0; k < nops; k++) out_strides[k][n] = strides[k][i];
    n++;
  }
  if (n == 0) {
    out_shape[0] = 1;
    for (int k = 0; k < nops; k++) out_strides[k][0] = 0;
    n = 1;
  }
  return n;
}

/* Walks the (collapsed) index space, calling the inner copy for each run of the last axis. */
static void copy_impl(char *dst, const int64_t *dst_st, const char *src, const int64_t *src_st,
                      const int64_t *shape, int nd, size_t isz) {
  int64_t idx[NV__MAX_DIMS] = {0};
  int64_t inner = shape[nd - 1];
  int64_t ds = dst_st[nd - 1] * (int64_t)isz, ss = src_st[nd - 1] * (int64_t)isz;
  for (;;) {
    int64_t doff = 0, soff = 0;
    for (int i = 0; i < nd - 1; i++) {
      doff += idx[i] * dst_st[i];
      soff += idx[i] * src_st[i];
    }
    char *d = dst + doff * (int64_t)isz;
    const char *s = src + soff * (int64_t)isz;
    if (ds == (int64_t)isz && ss == (int64_t)isz) memcpy(d, s, (size_t)inner * isz);
    else if (isz == 4)
      for (int64_t j = 0; j < inner; j++) memcpy(d + j * ds, s + j * ss, 4);
    else if (isz == 2)
      for (int64_t j = 0; j < inner; j++) memcpy(d + j * ds, s + j * ss, 2);
    else if (isz == 8)
      for (int64_t j = 0; j < inner; j++) memcpy(d + j * ds, s + j * ss, 8);
    else
      for (int64_t j = 0; j < inner; j++) memcpy(d + j * ds, s + j * ss, isz);
    int i = nd - 2;
    for (; i >= 0; i--) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
    if (i < 0) break;
  }
}

static void row_strides(const int *shape, int ndim, int64_t *st) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i];
  }
}

void nv__copy_strided(void *dst, const void *src, const int *shape, const int64_t *strides,
                      int ndim, size_t itemsize) {
  int64_t size = 1;
  for (int i = 0; i < ndim; i++) size *= shape[i];
  if (size == 0) return;
  int64_t dst_st[NV__MAX_DIMS], cshape[NV__MAX_DIMS], cd[NV__MAX_DIMS], cs[NV__MAX_DIMS];
  row_strides(shape, ndim, dst_st);
  const int64_t *in[2] = {dst_st, strides};
  int64_t *out[2] = {cd, cs};
  int nd = nv__collapse(shape, ndim, in, 2, cshape, out);
  copy_impl(dst, cd, src, cs, cshape, nd, itemsize);
}

void nv__copy_to_strided(void *dst, const int64_t *dst_strides, const void *src,
                         const int *shape, int ndim, size_t itemsize) {
  int64_t size = 1;
  for (int i = 0; i < ndim; i++) size *= shape[i];
  if (size == 0) return;
  int64_t src_st[NV__MAX_DIMS], cshape[NV__MAX_DIMS], cd[NV__MAX_DIMS], cs[NV__MAX_DIMS];
  row_strides(shape, ndim, src_st);
  const int64_t *in[2] = {dst_strides, src_st};
  int64_t *out[2] = {cd, cs};
  int nd = nv__collapse(shape, ndim, in, 2, cshape, out);
  copy_impl(dst, cd, src, cs, cshape, nd, itemsize);
}
