/* CPU kernels of the transforms family: stop_gradient (a view), custom functions (outputs share
 * their inputs' data) and the adjoint of as_strided (a scatter-sum). vmap's stand-in inputs
 * and compile's stand-in inputs have no values: evaluating one is an error. */
#include <complex.h>

#include "cpu/kernels.h"

/* ---- as_strided's adjoint ---- */

/* Walks the elements of `cot` in row-major order, calling add(i_out, i_cot) with the flat
 * target index in the output and the element offset in cot's buffer. */
#define SCATTER_WALK(BODY)                                                      \
  do {                                                                          \
    int nd = cm->ndim;                                                          \
    int64_t idx[NV__MAX_DIMS] = {0};                                            \
    for (int64_t e = 0; e < cm->size; e++) {                                    \
      int64_t t = p[0], c = 0;                                                  \
      for (int d = 0; d < nd; d++) {                                            \
        t += idx[d] * p[1 + d];                                                 \
        c += idx[d] * cm->strides[d];                                           \
      }                                                                         \
      BODY;                                                                     \
      for (int d = nd - 1; d >= 0 && ++idx[d] == cm->shape[d]; d--) idx[d] = 0; \
    }                                                                           \
  } while (0)

static double load_real(nv_dtype dt, const char *base, int64_t i) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return nv__f16_to_f32(((const uint16_t *)base)[i]);
    case NV_DTYPE_BFLOAT16: return nv__bf16_to_f32(((const uint16_t *)base)[i]);
    case NV_DTYPE_FLOAT32: return ((const float *)base)[i];
    default: return ((const double *)base)[i];
  }
}

static uint64_t load_int(nv_dtype dt, const char *base, int64_t i) {
  switch (nv_dtype_size(dt)) {
    case 1: return dt == NV_DTYPE_INT8 ? (uint64_t)(int64_t)((const int8_t *)base)[i] : ((const uint8_t *)base)[i];
    case 2: return dt == NV_DTYPE_INT16 ? (uint64_t)(int64_t)((const int16_t *)base)[i] : ((const uint16_t *)base)[i];
    case 4: return dt == NV_DTYPE_INT32 ? (uint64_t)(int64_t)((const int32_t *)base)[i] : ((const uint32_t *)base)[i];
    default: return ((const uint64_t *)base)[i];
  }
}

static void store(nv_dtype dt, char *base, int64_t i, double re, double im, uint64_t u) {
  switch (dt) {
    case NV_DTYPE_BOOL: ((uint8_t *)base)[i] = u != 0; break;
    case NV_DTYPE_UINT8: case NV_DTYPE_INT8: ((uint8_t *)base)[i] = (uint8_t)u; break;
    case NV_DTYPE_UINT16: case NV_DTYPE_INT16: ((uint16_t *)base)[i] = (uint16_t)u; break;
    case NV_DTYPE_UINT32: case NV_DTYPE_INT32: ((uint32_t *)base)[i] = (uint32_t)u; break;
    case NV_DTYPE_UINT64: case NV_DTYPE_INT64: ((uint64_t *)base)[i] = u; break;
    case NV_DTYPE_FLOAT16: ((uint16_t *)base)[i] = nv__f64_to_f16(re); break;
    case NV_DTYPE_BFLOAT16: ((uint16_t *)base)[i] = nv__f64_to_bf16(re); break;
    case NV_DTYPE_FLOAT32: ((float *)base)[i] = (float)re; break;
    case NV_DTYPE_FLOAT64: ((double *)base)[i] = re; break;
    default: ((float *)base)[2 * i] = (float)re; ((float *)base)[2 * i + 1] = (float)im; break;
  }
}

/* Sums in double (two per complex element) or in wrapping 64-bit integers, then stores once,
 * so overlapping windows add up without rounding at every step. */
static nv_status k_as_strided_vjp(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  nv__output *out = &node->out[0];
  const nv__output *cm = in[0].meta;
  const int64_t *p = node->params;
  nv_dtype dt = out->dtype;
  bool real = nv_issubdtype(dt, NV_CATEGORY_FLOATING), cplx = dt == NV_DTYPE_COMPLEX64;
  size_t width = cplx ? 2 : 1;
  void *acc = nv__calloc((size_t)(out->size ? out->size : 1) * width, 8);
  if (!acc) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "as_strided_vjp: out of memory");
  if (nv__output_alloc(out) != NV_OK) {
    nv__free(acc);
    return NV_ERR_OUT_OF_MEMORY;
  }
  const char *src = nv__operand_ptr(&in[0]);
  double *d = acc;
  uint64_t *u = acc;
  if (cplx) {
    const float *c2 = (const float *)src;
    SCATTER_WALK({
      d[2 * t] += c2[2 * c];
      d[2 * t + 1] += c2[2 * c + 1];
    });
  } else if (real) {
    SCATTER_WALK(d[t] += load_real(dt, src, c));
  } else if (dt == NV_DTYPE_BOOL) {
    SCATTER_WALK(u[t] |= ((const uint8_t *)src)[c]);
  } else {
    SCATTER_WALK(u[t] += load_int(dt, src, c));
  }
  char *o = nv__output_ptr(out);
  for (int64_t i = 0; i < out->size; i++)
    store(dt, o, i, cplx ? d[2 * i] : real ? d[i] : 0, cplx ? d[2 * i + 1] : 0, u[i]);
  nv__free(acc);
  return NV_OK;
}

/* ---- Custom functions, vmap inputs ---- */

static nv_status k_custom(nv__node *node, const nv__operand *in, int donated) {
  (void)donated;
  for (int i = 0; i < node->noutputs; i++) {
    node->out[i].buf = nv__buffer_retain(in[i].buf);
    node->out[i].offset = in[i].offset;
  }
  return NV_OK;
}

static nv_status k_vmap_input(nv__node *node, const nv__operand *in, int donated) {
  (void)node;
  (void)in;
  (void)donated;
  return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                       "vmap: the values of a mapped input cannot be read inside the function "
                       "being mapped");
}

static nv_status k_compile_input(nv__node *node, const nv__operand *in, int donated) {
  (void)node;
  (void)in;
  (void)donated;
  return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                       "compile: the values of an input cannot be read while the function is "
                       "traced (evaluating inside a compiled function)");
}

void nv__cpu_register_transforms(nv__kernel_fn *k) {
  k[NV__PRIM_COMPILE_INPUT] = k_compile_input;
  k[NV__PRIM_VMAP_INPUT] = k_vmap_input;
  k[NV__PRIM_CUSTOM] = k_custom;
  k[NV__PRIM_AS_STRIDED_VJP] = k_as_strided_vjp;
}
