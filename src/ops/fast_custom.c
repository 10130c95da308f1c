/* Custom CUDA kernels (include/nuvec/fast.h): MLX's mx.fast.cuda_kernel and
 * precompiled_cuda_kernel. A call checks its arguments, generates the kernel's CUDA source
 * around the user's body (the signature from the inputs' dtypes, the template arguments),
 * compiles it with NVRTC (src/cuda/nvrtc.c: cached in memory and on disk) and builds one
 * FAST_CUDA_KERNEL node holding the loaded kernel, whose CUDA kernel (src/cuda/fast_custom.c)
 * launches it. On CPU streams a call fails (E57). */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/convert.h"
#include "ops/fast_custom.h"
#include "ops/ops_internal.h"
#ifdef NUVEC_HAVE_CUDA
#include "cuda/nvrtc.h"
#endif

static const char *const OP = "cuda_kernel";

struct nv_cuda_kernel {
  char *name, *source, *header;
  char **in_names, **out_names;
  int nin, nout;
  bool ensure_row_contiguous;
  int shared_memory;
};

#define NV__CK_MAX_SHARED 232448 /* 227 KiB: the most dynamic shared memory of a block */

/* ---- Growing strings ---- */

typedef struct sbuf {
  char *p;
  size_t n, cap;
  bool oom;
} sbuf;

__attribute__((format(printf, 2, 3))) static void put(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (m < 0) {
    b->oom = true;
    return;
  }
  if (b->n + (size_t)m + 1 > b->cap) {
    size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)m;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)m + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)m;
}

/* ---- The kernel object ---- */

static bool identifier(const char *s) {
  if (!s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
  for (const char *c = s; *c; c++)
    if (!(isalnum((unsigned char)*c) || *c == '_')) return false;
  return strlen(s) < 48;
}

static char *dup(const char *s) {
  char *d = malloc(strlen(s) + 1);
  if (d) strcpy(d, s);
  return d;
}

void nv_fast_cuda_kernel_release(nv_cuda_kernel *k) {
  if (!k) return;
  for (int i = 0; i < k->nin && k->in_names; i++) free(k->in_names[i]);
  for (int i = 0; i < k->nout && k->out_names; i++) free(k->out_names[i]);
  free(k->in_names);
  free(k->out_names);
  free(k->name);
  free(k->source);
  free(k->header);
  free(k);
}

/* The names must be identifiers, distinct from each other: NULL when they are, else the
 * offending one (a static message for a NULL name). */
static const char *bad_name(const char *const *in, int nin, const char *const *out, int nout,
                            bool *dupl) {
  *dupl = false;
  for (int i = 0; i < nin + nout; i++) {
    const char *a = i < nin ? in[i] : out[i - nin];
    if (!identifier(a)) return a ? a : "(null)";
    for (int j = 0; j < i; j++)
      if (!strcmp(a, j < nin ? in[j] : out[j - nin])) {
        *dupl = true;
        return a;
      }
  }
  return NULL;
}

nv_cuda_kernel *nv_fast_cuda_kernel(const char *name, const char *const *input_names,
                                    int ninputs, const char *const *output_names, int noutputs,
                                    const char *source, const char *header,
                                    bool ensure_row_contiguous, int shared_memory) {
  bool dupl;
  const char *bad;
  if (!identifier(name)) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT,
                  "cuda_kernel: the name '%s' must be a C identifier of at most 47 characters",
                  name ? name : "(null)");
    return NULL;
  }
  if (ninputs < 0 || ninputs > NV__CK_MAX_IN || noutputs < 1 || noutputs > NV__CK_MAX_OUT ||
      (ninputs && !input_names) || !output_names) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT,
                  "cuda_kernel '%s': %d input names and %d output names (0 to %d inputs and 1 to "
                  "%d outputs)",
                  name, ninputs, noutputs, NV__CK_MAX_IN, NV__CK_MAX_OUT);
    return NULL;
  }
  if ((bad = bad_name(input_names, ninputs, output_names, noutputs, &dupl))) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT,
                  dupl ? "cuda_kernel '%s': the input/output name '%s' is given twice"
                       : "cuda_kernel '%s': the input/output name '%s' is not a C identifier",
                  name, bad);
    return NULL;
  }
  if (!source) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "cuda_kernel '%s': the source is NULL", name);
    return NULL;
  }
  if (shared_memory < 0 || shared_memory > NV__CK_MAX_SHARED) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT,
                  "cuda_kernel '%s': shared_memory %d is outside [0, %d] bytes", name,
                  shared_memory, NV__CK_MAX_SHARED);
    return NULL;
  }
  nv_cuda_kernel *k = calloc(1, sizeof *k);
  bool ok = k != NULL;
  if (ok) {
    k->nin = ninputs;
    k->nout = noutputs;
    k->ensure_row_contiguous = ensure_row_contiguous;
    k->shared_memory = shared_memory;
    k->name = dup(name);
    k->source = dup(source);
    k->header = dup(header ? header : "");
    k->in_names = calloc((size_t)(ninputs ? ninputs : 1), sizeof *k->in_names);
    k->out_names = calloc((size_t)noutputs, sizeof *k->out_names);
    ok = k->name && k->source && k->header && k->in_names && k->out_names;
    for (int i = 0; ok && i < ninputs; i++) ok = (k->in_names[i] = dup(input_names[i])) != NULL;
    for (int i = 0; ok && i < noutputs; i++)
      ok = (k->out_names[i] = dup(output_names[i])) != NULL;
  }
  if (!ok) {
    nv_fast_cuda_kernel_release(k);
    nv__set_error(NV_ERR_OUT_OF_MEMORY, "cuda_kernel: out of memory");
    return NULL;
  }
  return k;
}

/* ---- Source generation ---- */

static const char *cuda_type(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_BOOL: return "bool";
    case NV_DTYPE_UINT8: return "uint8_t";
    case NV_DTYPE_UINT16: return "uint16_t";
    case NV_DTYPE_UINT32: return "uint32_t";
    case NV_DTYPE_UINT64: return "uint64_t";
    case NV_DTYPE_INT8: return "int8_t";
    case NV_DTYPE_INT16: return "int16_t";
    case NV_DTYPE_INT32: return "int32_t";
    case NV_DTYPE_INT64: return "int64_t";
    case NV_DTYPE_FLOAT16: return "__half";
    case NV_DTYPE_BFLOAT16: return "__nv_bfloat16";
    case NV_DTYPE_FLOAT32: return "float";
    case NV_DTYPE_FLOAT64: return "double";
    case NV_DTYPE_COMPLEX64: return "complex64_t";
    default: return NULL;
  }
}

/* What the prelude gives every kernel (see nv_fast_cuda_kernel in include/nuvec/fast.h);
 * cooperative_groups.h follows it only for kernels that name it (it alone takes NVRTC about
 * 4 s, the rest 0.3 s). */
static const char PRELUDE[] =
    "#include <cuda_fp16.h>\n"
    "#include <cuda_bf16.h>\n"
    "#include <cuda/std/cstdint>\n"
    "using cuda::std::int8_t;\n"
    "using cuda::std::int16_t;\n"
    "using cuda::std::int32_t;\n"
    "using cuda::std::int64_t;\n"
    "using cuda::std::uint8_t;\n"
    "using cuda::std::uint16_t;\n"
    "using cuda::std::uint32_t;\n"
    "using cuda::std::uint64_t;\n"
    "struct Shape {\n"
    "  int32_t d[10];\n"
    "  __device__ __forceinline__ int32_t operator[](int i) const { return d[i]; }\n"
    "  __device__ __forceinline__ const int32_t *data() const { return d; }\n"
    "};\n"
    "struct Strides {\n"
    "  int64_t d[10];\n"
    "  __device__ __forceinline__ int64_t operator[](int i) const { return d[i]; }\n"
    "  __device__ __forceinline__ const int64_t *data() const { return d; }\n"
    "};\n"
    "struct __align__(8) complex64_t {\n"
    "  float real, imag;\n"
    "};\n"
    "/* The element offset of row-major flat index elem. */\n"
    "__device__ __forceinline__ int64_t elem_to_loc(int64_t elem, const int32_t *shape,\n"
    "                                               const int64_t *strides, int ndim) {\n"
    "  int64_t loc = 0;\n"
    "  for (int i = ndim - 1; i >= 0 && elem > 0; i--) {\n"
    "    loc += (elem % shape[i]) * strides[i];\n"
    "    elem /= shape[i];\n"
    "  }\n"
    "  return loc;\n"
    "}\n"
    "__device__ __forceinline__ int64_t elem_to_loc(int64_t elem, const Shape &shape,\n"
    "                                               const Strides &strides, int ndim) {\n"
    "  return elem_to_loc(elem, shape.d, strides.d, ndim);\n"
    "}\n";

/* Whether `source` mentions `<name><suffix>` as a whole identifier. */
static bool mentions(const char *source, const char *name, const char *suffix) {
  char id[80];
  snprintf(id, sizeof id, "%s%s", name, suffix);
  size_t n = strlen(id);
  for (const char *p = strstr(source, id); p; p = strstr(p + 1, id)) {
    bool before = p == source || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    bool after = !(isalnum((unsigned char)p[n]) || p[n] == '_');
    if (before && after) return true;
  }
  return false;
}

/* Checks a call's arguments against the kernel (not the stream); NULL when they are good,
 * else the failed array to return. */
static nv_array *check_call(const char *name, int nin_expected, int nout,
                            const nv_array *const *inputs, int ninputs,
                            const nv_cuda_kernel_launch *l, bool generated) {
  if (!l)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "kernel '%s': the launch is NULL", name);
  if (ninputs != nin_expected)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "kernel '%s' takes %d inputs (its input_names) but was given %d", name,
                        nin_expected, ninputs);
  if (ninputs && !inputs)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "kernel '%s': the inputs are NULL", name);
  nv_array *f = nv__op_check(OP, inputs, ninputs);
  if (f) return f;
  if (!l->output_shapes || !l->output_ndims || !l->output_dtypes)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "kernel '%s': output shapes, dimensions and dtypes are required for its "
                        "%d outputs",
                        name, nout);
  for (int i = 0; i < nout; i++) {
    if (l->output_ndims[i] < 0 || l->output_ndims[i] > NV__MAX_DIMS ||
        (l->output_ndims[i] && !l->output_shapes[i]))
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "kernel '%s': output %d has %d dimensions",
                          name, i, l->output_ndims[i]);
    for (int d = 0; d < l->output_ndims[i]; d++)
      if (l->output_shapes[i][d] < 0)
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                            "kernel '%s': output %d has a negative dimension %d", name, i,
                            l->output_shapes[i][d]);
    if ((unsigned)l->output_dtypes[i] >= NV_DTYPE_COUNT)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "kernel '%s': output %d has an unknown dtype %d", name, i,
                          (int)l->output_dtypes[i]);
  }
  int64_t threads = 1;
  for (int d = 0; d < 3; d++) {
    if (l->threadgroup[d] < 1 || l->grid[d] < 0)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "kernel '%s': grid (%d, %d, %d) must be >= 0 and threadgroup (%d, %d, "
                          "%d) >= 1 in each dimension",
                          name, l->grid[0], l->grid[1], l->grid[2], l->threadgroup[0],
                          l->threadgroup[1], l->threadgroup[2]);
    threads *= l->threadgroup[d];
  }
  if (threads > 1024 || l->threadgroup[2] > 64)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                        "kernel '%s': threadgroup (%d, %d, %d) has more than 1024 threads or z "
                        "above 64",
                        name, l->threadgroup[0], l->threadgroup[1], l->threadgroup[2]);
  for (int d = 1; d < 3; d++)
    if ((l->grid[d] + (int64_t)l->threadgroup[d] - 1) / l->threadgroup[d] > 65535)
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                          "kernel '%s': grid (%d, %d, %d) over threadgroup (%d, %d, %d) needs more "
                          "than 65535 blocks in y or z",
                          name, l->grid[0], l->grid[1], l->grid[2], l->threadgroup[0],
                          l->threadgroup[1], l->threadgroup[2]);
  if (generated) {
    if (l->ntemplate < 0 || (l->ntemplate && !l->template_args))
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "kernel '%s': %d template arguments",
                          name, l->ntemplate);
    for (int i = 0; i < l->ntemplate; i++) {
      const nv_template_arg *t = &l->template_args[i];
      if (!identifier(t->name))
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                            "kernel '%s': the template argument name '%s' is not a C identifier",
                            name, t->name ? t->name : "(null)");
      if (t->kind != NV_TEMPLATE_INT && t->kind != NV_TEMPLATE_BOOL &&
          !(t->kind == NV_TEMPLATE_DTYPE && (unsigned)t->value < NV_DTYPE_COUNT))
        return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                            "kernel '%s': template argument '%s' must be an int, a bool or a dtype",
                            name, t->name);
    }
  }
  return NULL;
}

/* The generated source for inputs of these dtypes and dimensions (NULL when out of memory,
 * or with *too_deep set to the input whose Shape/Strides would need more than 10
 * dimensions). */
static char *generate(const nv_cuda_kernel *k, const nv_array *const *inputs,
                      const nv_cuda_kernel_launch *l, int *too_deep) {
  *too_deep = -1;
  sbuf b = {0};
  bool coop = strstr(k->source, "cg::") || strstr(k->header, "cg::") ||
              strstr(k->source, "cooperative_groups") || strstr(k->header, "cooperative_groups");
  put(&b, "/* nuvec custom kernel '%s' */\n%s%s\n%s\n", k->name, PRELUDE,
      coop ? "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n" : "",
      k->header);
  if (k->nin)
    put(&b,
        "struct nv_ck_block {\n  int64_t off[%d];\n  Shape shape[%d];\n  Strides strides[%d];\n"
        "  int32_t ndim[%d];\n};\n",
        k->nin, k->nin, k->nin, k->nin);
  put(&b, "extern \"C\" __global__ void custom_kernel_%s(", k->name);
  for (int i = 0; i < k->nin; i++) put(&b, "%sconst void *nv_in_%d", i ? ", " : "", i);
  for (int i = 0; i < k->nout; i++) put(&b, "%svoid *nv_out_%d", i || k->nin ? ", " : "", i);
  if (k->nin) put(&b, ", const nv_ck_block nv_b");
  put(&b, ") {\n");
  for (int i = 0; i < k->nin; i++) {
    const nv__output *o = nv__out(inputs[i]);
    const char *n = k->in_names[i], *t = cuda_type(o->dtype);
    put(&b, "  const %s *%s = (const %s *)nv_in_%d + nv_b.off[%d];\n", t, n, t, i, i);
    bool sh = mentions(k->source, n, "_shape"), st = mentions(k->source, n, "_strides");
    if ((sh || st) && o->ndim > NV__CK_MAX_NDIM) *too_deep = i;
    if (sh) put(&b, "  const Shape &%s_shape = nv_b.shape[%d];\n", n, i);
    if (st) put(&b, "  const Strides &%s_strides = nv_b.strides[%d];\n", n, i);
    if (mentions(k->source, n, "_ndim")) put(&b, "  const int %s_ndim = nv_b.ndim[%d];\n", n, i);
  }
  for (int i = 0; i < k->nout; i++) {
    const char *t = cuda_type(l->output_dtypes[i]);
    put(&b, "  %s *%s = (%s *)nv_out_%d;\n", t, k->out_names[i], t, i);
  }
  for (int i = 0; i < l->ntemplate; i++) {
    const nv_template_arg *a = &l->template_args[i];
    if (a->kind == NV_TEMPLATE_INT) put(&b, "  constexpr int %s = %d;\n", a->name, a->value);
    else if (a->kind == NV_TEMPLATE_BOOL)
      put(&b, "  constexpr bool %s = %s;\n", a->name, a->value ? "true" : "false");
    else put(&b, "  using %s = %s;\n", a->name, cuda_type((nv_dtype)a->value));
  }
  put(&b, "%s\n}\n", k->source);
  if (b.oom || *too_deep >= 0) {
    free(b.p);
    return NULL;
  }
  return b.p;
}

/* generate() into *src with its errors set. */
static nv_status generate_checked(const nv_cuda_kernel *k, const nv_array *const *inputs,
                                  const nv_cuda_kernel_launch *l, char **src) {
  int deep;
  *src = generate(k, inputs, l, &deep);
  if (*src) return NV_OK;
  if (deep >= 0)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "cuda_kernel '%s': input '%s' has %d dimensions; its %s_shape/_strides "
                         "hold at most %d",
                         k->name, k->in_names[deep], nv__out(inputs[deep])->ndim,
                         k->in_names[deep], NV__CK_MAX_NDIM);
  return nv__set_error(NV_ERR_OUT_OF_MEMORY, "cuda_kernel: out of memory");
}

/* The checked source of a call without a stream (nv_fast_cuda_kernel_source/_compile). */
static nv_status source_of(const nv_cuda_kernel *k, const nv_array *const *inputs, int ninputs,
                           const nv_cuda_kernel_launch *launch, char **src) {
  *src = NULL;
  if (!k) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "cuda_kernel: the kernel is NULL");
  nv__scope_suspend();
  nv_array *f = check_call(k->name, k->nin, k->nout, inputs, ninputs, launch, true);
  nv__scope_resume();
  if (f) {
    nv_status s = nv_array_status(f); /* sets the thread's error */
    nv_release(f);
    return s;
  }
  return generate_checked(k, inputs, launch, src);
}

long nv_fast_cuda_kernel_source(const nv_cuda_kernel *k, const nv_array *const *inputs,
                                int ninputs, const nv_cuda_kernel_launch *launch, char *buf,
                                size_t size) {
  char *src;
  if (source_of(k, inputs, ninputs, launch, &src) != NV_OK) return -1;
  long n = (long)strlen(src);
  if (buf && size) snprintf(buf, size, "%s", src);
  free(src);
  return n;
}

nv_status nv_fast_cuda_kernel_compile(const nv_cuda_kernel *k, const nv_array *const *inputs,
                                      int ninputs, const nv_cuda_kernel_launch *launch,
                                      void *buf, size_t capacity, size_t *size) {
  char *src;
  nv_status s = source_of(k, inputs, ninputs, launch, &src);
  if (s != NV_OK) return s;
  if (!size) {
    free(src);
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "cuda_kernel: size is NULL");
  }
#ifdef NUVEC_HAVE_CUDA
  char *log = NULL;
  size_t cs = 0;
  char *cubin = nv__nvrtc_compile(src, true, &cs, &log);
  free(src);
  if (!cubin) {
    s = nv__set_error(NV_ERR_INVALID_ARGUMENT, "cuda_kernel '%s': %s", k->name,
                      log ? log : "out of memory");
  } else {
    *size = cs;
    if (buf && cs <= capacity) memcpy(buf, cubin, cs);
  }
  free(log);
  free(cubin);
  return s;
#else
  free(src);
  (void)buf;
  (void)capacity;
  return nv__set_error(NV_ERR_UNSUPPORTED,
                       "cuda_kernel '%s': this build of nuvec has no CUDA (NVRTC)", k->name);
#endif
}

/* ---- The node ---- */

/* `v` as the bits of one element of `dt` (as nv_astype converts). */
static uint64_t element_bits(double v, nv_dtype dt) {
  union {
    uint64_t u;
    double d;
    float f[2];
    uint16_t h;
  } x = {0};
  switch (dt) {
    case NV_DTYPE_BOOL: x.u = v != 0; break;
    case NV_DTYPE_UINT8: x.u = (uint8_t)(int64_t)v; break;
    case NV_DTYPE_UINT16: x.u = (uint16_t)(int64_t)v; break;
    case NV_DTYPE_UINT32: x.u = (uint32_t)(int64_t)v; break;
    case NV_DTYPE_UINT64: x.u = v >= 0 ? (uint64_t)v : (uint64_t)(int64_t)v; break;
    case NV_DTYPE_INT8: x.u = (uint8_t)(int8_t)(int64_t)v; break;
    case NV_DTYPE_INT16: x.u = (uint16_t)(int16_t)(int64_t)v; break;
    case NV_DTYPE_INT32: x.u = (uint32_t)(int32_t)(int64_t)v; break;
    case NV_DTYPE_INT64: x.u = (uint64_t)(int64_t)v; break;
    case NV_DTYPE_FLOAT16: x.h = nv__f64_to_f16(v); break;
    case NV_DTYPE_BFLOAT16: x.h = nv__f64_to_bf16(v); break;
    case NV_DTYPE_FLOAT32: x.f[0] = (float)v; break;
    case NV_DTYPE_FLOAT64: x.d = v; break;
    case NV_DTYPE_COMPLEX64: x.f[0] = (float)v; break; /* imaginary part 0 */
    default: break;
  }
  return x.u;
}

/* A failed array carrying the thread's error of status `s`. */
static nv_array *error_array(nv_status s) {
  char msg[2048];
  snprintf(msg, sizeof msg, "%s", nv_last_error());
  return nv__array_error(s, "%s", msg);
}

/* Fails every output slot with the error of `f` (consumed). */
static nv_status fail_all(nv_array *f, int nout, nv_array **outputs) {
  nv_status s = nv_array_status(f);
  nv__error *e = nv__node_known_error(f->node);
  for (int i = 1; i < nout; i++) outputs[i] = nv__array_failed_nometa(e);
  outputs[0] = f;
  return s;
}

/* The E57 error on a CPU stream; NULL on a GPU stream. */
static nv_array *gpu_only(const char *name) {
  if (nv_current_stream().device.type == NV_DEVICE_GPU) return NULL;
  return nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                      "custom kernels run on the GPU only (kernel '%s' was called on a CPU "
                      "stream)",
                      name);
}

/* Builds the node over the inputs (copied row-contiguous where `contiguous`, or where a
 * precompiled kernel gets a negative stride) with params `p` and the launch's outputs. */
static nv_status build_node(nv__ck_params *p, const nv_array *const *inputs, int nin,
                            bool contiguous, const nv_cuda_kernel_launch *l, nv_array **outputs) {
  int nout = p->nout;
  /* Blocks of min(threadgroup, grid) threads covering the grid's threads (x fits CUDA's
   * 2^31 - 1 as the grid is an int; check_call bounded y and z). */
  uint32_t blocks[3];
  bool empty = false;
  for (int d = 0; d < 3; d++) {
    uint32_t g = (uint32_t)l->grid[d], t = (uint32_t)l->threadgroup[d];
    p->block[d] = g < t ? g : t;
    blocks[d] = (uint32_t)(((uint64_t)g + t - 1) / t);
    empty |= g == 0;
  }
  for (int d = 0; d < 3; d++) p->grid[d] = empty ? 0 : blocks[d];
  for (int i = 0; p->has_init && i < nout; i++)
    p->init_bits[i] = element_bits(l->init_value, l->output_dtypes[i]);
  nv__scope_suspend();
  nv_array *in[NV__CK_MAX_IN] = {0};
  int bad = -1;
  for (int i = 0; i < nin; i++) {
    const nv__output *o = nv__out(inputs[i]);
    bool negative = false;
    for (int d = 0; d < o->ndim; d++) negative |= o->strides[d] < 0;
    in[i] = (contiguous && !(o->flags & NV__FLAG_ROW)) || (p->precompiled && negative)
                ? nv_contiguous(inputs[i])
                : nv_retain((nv_array *)inputs[i]);
    if (bad < 0 && !nv__meta_known(in[i])) bad = i;
  }
  nv__node *n = NULL;
  nv_status s = NV_OK;
  if (bad >= 0) {
    s = nv_array_status(in[bad]);
  } else if (!(n = nv__node_new(NV__PRIM_FAST_CUDA_KERNEL, in, nin, nout, sizeof *p))) {
    s = nv__set_error(NV_ERR_OUT_OF_MEMORY, "cuda_kernel: out of memory");
  } else {
    *(nv__ck_params *)n->params = *p;
    for (int i = 0; s == NV_OK && i < nout; i++)
      if ((s = nv__output_set_shape(&n->out[i], l->output_dtypes[i], l->output_shapes[i],
                                    l->output_ndims[i])) != NV_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", nv_last_error());
        s = nv__set_error(s, "cuda_kernel '%s': output %d: %s", p->name, i, why);
      }
    for (int i = 0; s == NV_OK && i < nin; i++) nv__node_inherit_tracer(n, in[i]->node);
    if (s == NV_OK) nv__node_inherit_error(n);
  }
  for (int i = 0; i < nin; i++) nv_release(in[i]);
  nv__scope_resume();
  if (s != NV_OK) {
    if (n) nv__node_release(n);
    return fail_all(error_array(s), nout, outputs);
  }
  for (int i = 1; i < nout; i++) nv__node_retain(n);
  for (int i = 0; i < nout; i++) outputs[i] = nv__array_new(n, i);
  return nv_array_status(outputs[0]);
}

nv_status nv_fast_cuda_kernel_call(const nv_cuda_kernel *k, const nv_array *const *inputs,
                                   int ninputs, const nv_cuda_kernel_launch *launch,
                                   nv_array **outputs) {
  if (!k || !outputs)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "cuda_kernel: the kernel or outputs are NULL");
  nv_array *f = check_call(k->name, k->nin, k->nout, inputs, ninputs, launch, true);
  if (!f) f = gpu_only(k->name);
  if (f) return fail_all(f, k->nout, outputs);
  char *src;
  nv_status gs = generate_checked(k, inputs, launch, &src);
  if (gs != NV_OK) return fail_all(error_array(gs), k->nout, outputs);
  if (launch->verbose) fprintf(stderr, "%s\n", src);
  nv__ck_params p = {0};
  snprintf(p.name, sizeof p.name, "%s", k->name);
  p.nin = k->nin;
  p.nout = k->nout;
  p.shared_bytes = (uint32_t)k->shared_memory;
  p.has_init = launch->has_init;
#ifdef NUVEC_HAVE_CUDA
  char entry[80], *why = NULL;
  snprintf(entry, sizeof entry, "custom_kernel_%s", k->name);
  p.kernel = nv__nvrtc_kernel(src, entry, true, &why);
  free(src);
  if (!p.kernel) {
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "kernel '%s': %s", k->name,
                     why ? why : "out of memory");
    free(why);
    return fail_all(f, k->nout, outputs);
  }
#else
  free(src);
  return fail_all(nv__op_error(NV_ERR_UNSUPPORTED, OP,
                               "kernel '%s': this build of nuvec has no CUDA backend", k->name),
                  k->nout, outputs);
#endif
  return build_node(&p, inputs, ninputs, k->ensure_row_contiguous, launch, outputs);
}

nv_status nv_fast_precompiled_cuda_kernel(const char *name, const void *image, size_t size,
                                          const nv_array *const *inputs, int ninputs,
                                          int noutputs, const nv_kernel_scalar *scalars,
                                          int nscalars, const nv_cuda_kernel_launch *launch,
                                          int shared_memory, bool ensure_row_contiguous,
                                          nv_array **outputs) {
  if (!outputs || noutputs < 1 || noutputs > NV__CK_MAX_OUT)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "precompiled_cuda_kernel: %d outputs (1 to %d, with an output list)",
                         noutputs, NV__CK_MAX_OUT);
  const char *nm = name ? name : "(null)";
  nv_array *f = NULL;
  if (!name || !*name || strlen(name) >= 64)
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                     "precompiled kernel: the name must have 1 to 63 characters");
  else if (!image || !size)
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "precompiled kernel '%s': the image is empty",
                     nm);
  else if (ninputs < 0 || ninputs > NV__CK_MAX_IN || ninputs + noutputs > 64)
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                     "precompiled kernel '%s': %d inputs (at most %d)", nm, ninputs,
                     NV__CK_MAX_IN);
  else if (nscalars < 0 || nscalars > NV__CK_MAX_SCALARS || (nscalars && !scalars))
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                     "precompiled kernel '%s': %d scalars (at most %d)", nm, nscalars,
                     NV__CK_MAX_SCALARS);
  else if (shared_memory < 0 || shared_memory > NV__CK_MAX_SHARED)
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                     "precompiled kernel '%s': shared_memory %d is outside [0, %d] bytes", nm,
                     shared_memory, NV__CK_MAX_SHARED);
  if (!f) f = check_call(nm, ninputs, noutputs, inputs, ninputs, launch, false);
  if (!f) f = gpu_only(nm);
  if (f) return fail_all(f, noutputs, outputs);
  nv__ck_params p = {0};
  snprintf(p.name, sizeof p.name, "%s", name);
  p.nin = ninputs;
  p.nout = noutputs;
  p.precompiled = true;
  p.shared_bytes = (uint32_t)shared_memory;
  p.has_init = launch->has_init;
  p.nscalars = nscalars;
  for (int i = 0; i < nscalars; i++) {
    union {
      uint32_t u;
      int32_t i;
      float f;
      bool b;
    } v = {0};
    if (scalars[i].kind == NV_SCALAR_BOOL) v.b = scalars[i].value != 0;
    else if (scalars[i].kind == NV_SCALAR_INT) v.i = (int32_t)scalars[i].value;
    else if (scalars[i].kind == NV_SCALAR_FLOAT) v.f = (float)scalars[i].value;
    else
      return fail_all(nv__op_error(NV_ERR_INVALID_ARGUMENT, OP,
                                   "precompiled kernel '%s': scalar %d has an unknown kind %d",
                                   nm, i, (int)scalars[i].kind),
                      noutputs, outputs);
    p.scalar_size[i] = 4;
    p.scalar_bits[i] = v.u;
  }
#ifdef NUVEC_HAVE_CUDA
  char *why = NULL;
  p.kernel = nv__gpu_image_kernel(image, size, name, &why);
  if (!p.kernel) {
    f = nv__op_error(NV_ERR_INVALID_ARGUMENT, OP, "precompiled kernel '%s': %s", nm,
                     why ? why : "out of memory");
    free(why);
    return fail_all(f, noutputs, outputs);
  }
#else
  return fail_all(nv__op_error(NV_ERR_UNSUPPORTED, OP,
                               "precompiled kernel '%s': this build of nuvec has no CUDA backend",
                               nm),
                  noutputs, outputs);
#endif
  return build_node(&p, inputs, ninputs, ensure_row_contiguous, launch, outputs);
}
