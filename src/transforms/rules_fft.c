/* Transform rules of the fft family (src/ops/prims_fft.h). The primitive is linear, so its jvp
 * applies it to the tangent. Its vjp is the transpose, since nuvec's cotangents of complex
 * values are dL/dRe - i dL/dIm (the elementwise family's rules): the DFT matrix is symmetric,
 * so a complex transform's vjp is the same transform with the same factor; R2C's is the real
 * part of the forward transform of the cotangent zero-padded to n bins; C2R's is the conjugate
 * of the R2C of the cotangent with the bins that stand for two (all but bin 0 and, for even n,
 * bin n/2) doubled. Real inputs' gradients match finite differences (and MLX's). vmap moves a batch axis that is last to
 * the front, since the primitive transforms the last axis. */
#include "nuvec.h"
#include "ops/fft_params.h"
#include "transforms/rule_decls.h"

VJP(vjp_fft) {
  if (!want[0]) return NV_OK;
  const nv__fft_params *p = n->params;
  /* The adjoint's input dtype: the cotangent of a complex result is complex64, of C2R's real
   * result float32. */
  nv_array *c = nv_astype(cot[0], p->kind == NV__FFT_C2R ? NV_DTYPE_FLOAT32 : NV_DTYPE_COMPLEX64);
  switch (p->kind) {
    case NV__FFT_C2C_FORWARD:
    case NV__FFT_C2C_INVERSE: grad[0] = nv__fft_last(c, p->kind, p->n, p->scale); break;
    case NV__FFT_R2C: {
      int nd = meta(c)->ndim, lo[NV__MAX_DIMS] = {0}, hi[NV__MAX_DIMS] = {0};
      hi[nd - 1] = (int)(p->n - meta(c)->shape[nd - 1]);
      nv_array *z = nv_pad(c, lo, hi, nd, NV_PAD_CONSTANT, NULL);
      nv_array *g = nv__fft_last(z, NV__FFT_C2C_FORWARD, p->n, p->scale);
      grad[0] = nv_real(g);
      nv_release(g);
      nv_release(z);
      break;
    }
    default: {
      int m = (int)(p->n / 2 + 1);
      float *w = nv__malloc((size_t)m * sizeof *w);
      if (!w) {
        nv_release(c);
        return nv__set_error(NV_ERR_OUT_OF_MEMORY, "vjp: fft: out of memory");
      }
      for (int k = 0; k < m; k++) w[k] = k == 0 || (p->n % 2 == 0 && k == m - 1) ? 1.0f : 2.0f;
      nv_array *mask = nv_array_from_data(w, &m, 1, NV_DTYPE_FLOAT32);
      nv__free(w);
      nv_array *r = nv__fft_last(c, NV__FFT_R2C, p->n, p->scale);
      nv_array *rc = nv_conjugate(r);
      grad[0] = nv_multiply(rc, mask);
      nv_release(rc);
      nv_release(r);
      nv_release(mask);
      break;
    }
  }
  nv_release(c);
  return NV_OK;
}

JVP(jvp_fft) {
  const nv__fft_params *p = n->params;
  nv_array *t = nv_astype(tan[0], meta(in[0])->dtype);
  ot[0] = nv__fft_last(t, p->kind, p->n, p->scale);
  nv_release(t);
  return NV_OK;
}

VMAP(vmap_fft) {
  const nv__fft_params *p = n->params;
  int nd = meta(in[0])->ndim, ax = axes[0];
  nv_array *x = ax == nd - 1 ? nv__tf_moveaxis(in[0], ax, 0) : nv_retain(in[0]);
  if (ax == nd - 1) ax = 0;
  out[0] = nv__fft_last(x, p->kind, p->n, p->scale);
  oax[0] = ax;
  nv_release(x);
  return NV_OK;
}

void nv__rules_register_fft(nv__prim_rule *r) {
  r[NV__PRIM_FFT] = (nv__prim_rule){vjp_fft, jvp_fft, vmap_fft};
}
