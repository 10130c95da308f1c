/* Bring-up harness of the element-wise CUDA kernels, standalone of the CUDA backend: it
 * implements the backend interface (src/cuda/gpu.h) over the plain CUDA runtime (device copies
 * of host buffers, synchronous launches, guard bytes around every device allocation), builds
 * element-wise nodes with the public ops on the CPU, runs the GPU kernel-table entry and the
 * CPU kernel on the same node and operands, and compares the outputs element by element:
 * exactly for the ops whose formula is the CPU's (bits, NaN payloads aside), within a few ulp
 * for the transcendental ones. `--perf` times the hot kernels over large arrays.
 *
 * Build (from the repository root, after the library objects are built):
 *   gcc -O2 -std=gnu11 -Iinclude -Isrc -I/usr/local/cuda/include tests/gpu/ew_harness.c \
 *     build/src/libnuvec.a -L/usr/local/cuda/lib64 -lcudart -lopenblas -lminizip -lz -lm \
 *     -lpthread -o build/ew_harness
 * It defines the nv__gpu_* functions itself, so it links against a libnuvec.a built without
 * the real backend (src/cuda/backend.c) only. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cuda/gpu.h"

void nv__gpu_register(void);

/* hrx's one helper the kernels' host code uses (libhrx itself is not linked). */
hrx_view hrx_view_make(hrx_buffer *buffer, size_t offset, size_t length) {
  hrx_view v = {buffer, offset, length};
  return v;
}

/* ---- The backend interface over the CUDA runtime ---- */

struct nv__gpu_ctx {
  int dummy;
};

static size_t GUARD = 256; /* EW_GUARD=0 under compute-sanitizer */
#define MAXMAP 512

typedef struct dmap {
  nv__buffer *buf; /* host buffer this device copy mirrors (NULL: scratch) */
  char *base;      /* allocation (guards included) */
  size_t bytes;
  bool output;
} dmap;

static dmap maps[MAXMAP];
static int nmaps;
static int failures, checks;
static bool perf_mode;
static int perf_reps = 20;
static double perf_last_ms;

#define CK(call)                                                                           \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #call, __FILE__, __LINE__,          \
              cudaGetErrorString(e_));                                                     \
      exit(2);                                                                             \
    }                                                                                      \
  } while (0)

static char *dev_alloc(size_t bytes, nv__buffer *buf, bool output) {
  char *base;
  CK(cudaMalloc((void **)&base, bytes + 2 * GUARD));
  CK(cudaMemset(base, 0xA5, bytes + 2 * GUARD));
  if (nmaps == MAXMAP) {
    fprintf(stderr, "too many device allocations\n");
    exit(2);
  }
  maps[nmaps++] = (dmap){buf, base, bytes, output};
  return base + GUARD;
}

/* The device copy of host buffer b (made on first use). */
static char *dev_of(nv__buffer *b) {
  for (int i = 0; i < nmaps; i++)
    if (maps[i].buf == b) return maps[i].base + GUARD;
  char *d = dev_alloc(b->nbytes ? b->nbytes : 1, b, false);
  if (b->nbytes) CK(cudaMemcpy(d, b->ptr, b->nbytes, cudaMemcpyHostToDevice));
  return d;
}

static void span_of(const nv__output *m, int64_t *lo, int64_t *hi) {
  *lo = *hi = 0;
  for (int i = 0; i < m->ndim; i++) {
    int64_t ext = (int64_t)(m->shape[i] - 1) * m->strides[i];
    if (ext < 0) *lo += ext;
    else *hi += ext;
  }
}

nv_status nv__gpu_input(nv__gpu_ctx *ctx, const nv__operand *op, nv__gpu_arg *out) {
  (void)ctx;
  size_t isz = nv_dtype_size(op->meta->dtype);
  char *d = dev_of(op->buf);
  if (op->meta->size == 0) {
    out->view = hrx_view_make((hrx_buffer *)d, 0, 1);
    out->offset = 0;
    return NV_OK;
  }
  int64_t lo, hi;
  span_of(op->meta, &lo, &hi);
  out->view = hrx_view_make((hrx_buffer *)d, (size_t)((op->offset + lo) * (int64_t)isz),
                            (size_t)((hi - lo + 1) * (int64_t)isz));
  out->offset = -lo;
  return NV_OK;
}

nv_status nv__gpu_output(nv__gpu_ctx *ctx, nv__output *o, nv__gpu_arg *out) {
  (void)ctx;
  size_t isz = nv_dtype_size(o->dtype), bytes = (size_t)o->size * isz;
  if (o->buf) { /* donated */
    char *d = dev_of(o->buf);
    for (int i = 0; i < nmaps; i++)
      if (maps[i].buf == o->buf) maps[i].output = true;
    out->view = hrx_view_make((hrx_buffer *)d, (size_t)o->offset * isz, bytes ? bytes : 1);
    out->offset = 0;
    return NV_OK;
  }
  o->buf = nv__buffer_alloc(bytes ? bytes : 1);
  if (!o->buf) return NV_ERR_OUT_OF_MEMORY;
  o->offset = 0;
  char *d = dev_alloc(bytes ? bytes : 1, o->buf, true);
  out->view = hrx_view_make((hrx_buffer *)d, 0, bytes ? bytes : 1);
  out->offset = 0;
  return NV_OK;
}

nv_status nv__gpu_scratch(nv__gpu_ctx *ctx, size_t bytes, hrx_view *out) {
  (void)ctx;
  *out = hrx_view_make((hrx_buffer *)dev_alloc(bytes, NULL, false), 0, bytes);
  return NV_OK;
}

static bool overlap(hrx_view a, hrx_view b) {
  char *pa = (char *)a.buffer + a.offset, *pb = (char *)b.buffer + b.offset;
  return pa < pb + b.length && pb < pa + a.length;
}

nv_status nv__gpu_dispatch(nv__gpu_ctx *ctx, const nv__gpu_launch *l) {
  (void)ctx;
  void *ptrs[8], *args[9];
  for (int i = 0; i < l->nviews; i++) {
    if (l->views[i].length == 0) {
      fprintf(stderr, "dispatch: empty view %d\n", i);
      failures++;
    }
    for (int j = 0; j < l->nviews; j++)
      if (i != j && (l->access[i] & HRX_ACCESS_WRITE) && overlap(l->views[i], l->views[j]) &&
          !l->aliasing) {
        fprintf(stderr, "dispatch: written view %d overlaps view %d without aliasing\n", i, j);
        failures++;
      }
    ptrs[i] = (char *)l->views[i].buffer + l->views[i].offset;
    args[i] = &ptrs[i];
  }
  args[l->nviews] = (void *)l->params;
  if (l->params_size > 4096) {
    fprintf(stderr, "dispatch: params of %zu bytes\n", l->params_size);
    failures++;
  }
  dim3 g = {l->grid[0], l->grid[1], l->grid[2]}, b = {l->block[0], l->block[1], l->block[2]};
  CK(cudaLaunchKernel(l->func, g, b, args, l->shared_bytes, 0));
  CK(cudaDeviceSynchronize());
  if (perf_mode) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0, 0));
    for (int r = 0; r < perf_reps; r++)
      CK(cudaLaunchKernel(l->func, g, b, args, l->shared_bytes, 0));
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    perf_last_ms = ms / perf_reps;
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
  }
  return NV_OK;
}

nv_status nv__gpu_fill(nv__gpu_ctx *ctx, hrx_view dst, uint8_t value) {
  (void)ctx;
  CK(cudaMemset((char *)dst.buffer + dst.offset, value, dst.length));
  return NV_OK;
}

nv_status nv__gpu_copy(nv__gpu_ctx *ctx, hrx_view dst, hrx_view src) {
  (void)ctx;
  if (dst.length != src.length) {
    fprintf(stderr, "copy: lengths %zu != %zu\n", dst.length, src.length);
    failures++;
    return NV_ERR_BACKEND;
  }
  CK(cudaMemcpy((char *)dst.buffer + dst.offset, (char *)src.buffer + src.offset, dst.length,
                cudaMemcpyDeviceToDevice));
  return NV_OK;
}

nv_status nv__gpu_copy_contiguous(nv__gpu_ctx *ctx, const nv__operand *src, nv__gpu_arg dst) {
  (void)ctx;
  size_t isz = nv_dtype_size(src->meta->dtype), bytes = (size_t)src->meta->size * isz;
  char *tmp = malloc(bytes ? bytes : 1);
  nv__copy_strided(tmp, nv__operand_ptr(src), src->meta->shape, src->meta->strides,
                   src->meta->ndim, isz);
  if (bytes > dst.view.length) {
    fprintf(stderr, "copy_contiguous: %zu bytes into a %zu-byte view\n", bytes, dst.view.length);
    failures++;
  } else {
    CK(cudaMemcpy((char *)dst.view.buffer + dst.view.offset + dst.offset * (int64_t)isz, tmp,
                  bytes, cudaMemcpyHostToDevice));
  }
  free(tmp);
  return NV_OK;
}

nv_status nv__gpu_input_contiguous(nv__gpu_ctx *ctx, const nv__operand *src, nv__gpu_arg *out) {
  return nv__gpu_input(ctx, src, out);
}
int nv__gpu_device_index(const nv__gpu_ctx *ctx) {
  (void)ctx;
  return 0;
}
nv_status nv__gpu_library(nv__gpu_ctx *ctx, const hrx_binding *b, size_t n, hrx_scoped_fn fn,
                          void *user, hrx_destroy_fn destroy) {
  (void)ctx, (void)b, (void)n, (void)fn;
  if (destroy) destroy(user);
  return NV_ERR_UNSUPPORTED;
}
void *nv__gpu_library_stream(int device) {
  (void)device;
  return NULL;
}

/* Downloads written device copies into their host buffers, checks guards, frees everything. */
static void end_case(const char *what) {
  for (int i = 0; i < nmaps; i++) {
    dmap *m = &maps[i];
    unsigned char g[2 * 4096];
    CK(cudaMemcpy(g, m->base, GUARD, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(g + GUARD, m->base + GUARD + m->bytes, GUARD, cudaMemcpyDeviceToHost));
    for (size_t j = 0; j < 2 * GUARD; j++)
      if (g[j] != 0xA5) {
        fprintf(stderr, "FAIL %s: guard byte %zu of allocation %d overwritten\n", what, j, i);
        failures++;
        break;
      }
    if (m->output && m->buf && m->buf->nbytes)
      CK(cudaMemcpy(m->buf->ptr, m->base + GUARD, m->buf->nbytes, cudaMemcpyDeviceToHost));
    CK(cudaFree(m->base));
  }
  nmaps = 0;
}

/* ---- Comparison ---- */

static int64_t ord32(uint32_t u) { return (u & 0x80000000u) ? -(int64_t)(u & 0x7fffffffu) : (int64_t)u; }
static int64_t ord64(uint64_t u) {
  return (u >> 63) ? -(int64_t)(u & 0x7fffffffffffffffull) : (int64_t)u;
}
static int64_t ord16(uint16_t u) { return (u & 0x8000u) ? -(int64_t)(u & 0x7fffu) : (int64_t)u; }

static bool nan16(uint16_t u, bool bf) {
  return bf ? (u & 0x7fff) > 0x7f80 : (u & 0x7fff) > 0x7c00;
}

/* ulp distance of two values of a float dtype (element bytes), -1 when exactly one is NaN. */
static int64_t ulps(nv_dtype dt, const char *a, const char *b) {
  switch (dt) {
    case NV_DTYPE_FLOAT16:
    case NV_DTYPE_BFLOAT16: {
      uint16_t x, y;
      memcpy(&x, a, 2);
      memcpy(&y, b, 2);
      bool bf = dt == NV_DTYPE_BFLOAT16, nx = nan16(x, bf), ny = nan16(y, bf);
      if (nx || ny) return nx == ny ? 0 : -1;
      return llabs(ord16(x) - ord16(y));
    }
    case NV_DTYPE_FLOAT32: {
      uint32_t x, y;
      memcpy(&x, a, 4);
      memcpy(&y, b, 4);
      float fx, fy;
      memcpy(&fx, a, 4);
      memcpy(&fy, b, 4);
      if (isnan(fx) || isnan(fy)) return isnan(fx) == isnan(fy) ? 0 : -1;
      return llabs(ord32(x) - ord32(y));
    }
    default: {
      uint64_t x, y;
      memcpy(&x, a, 8);
      memcpy(&y, b, 8);
      double fx, fy;
      memcpy(&fx, a, 8);
      memcpy(&fy, b, 8);
      if (isnan(fx) || isnan(fy)) return isnan(fx) == isnan(fy) ? 0 : -1;
      return llabs(ord64(x) - ord64(y));
    }
  }
}

static bool is_float(nv_dtype dt) {
  return dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16 || dt == NV_DTYPE_FLOAT32 ||
         dt == NV_DTYPE_FLOAT64;
}

/* Compares output metadata-shaped data at (ga, go) with (ca, co); tol: ulps allowed. */
static double as_double(nv_dtype dt, const char *p) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return nv__f16_to_f32(*(const uint16_t *)p);
    case NV_DTYPE_BFLOAT16: return nv__bf16_to_f32(*(const uint16_t *)p);
    case NV_DTYPE_FLOAT32: return *(const float *)p;
    default: return *(const double *)p;
  }
}

static bool abs_tol; /* logaddexp: errors relative to the inputs' scale (cancellation near 0) */

static int64_t compare(const char *what, const nv__output *m, const char *g, const char *c,
                       int64_t tol) {
  size_t isz = nv_dtype_size(m->dtype);
  int64_t idx[NV__MAX_DIMS] = {0}, worst = 0;
  int bad = 0;
  for (int64_t e = 0; e < m->size; e++) {
    int64_t off = 0;
    for (int d = 0; d < m->ndim; d++) off += idx[d] * m->strides[d];
    const char *pg = g + off * (int64_t)isz, *pc = c + off * (int64_t)isz;
    int64_t u = 0;
    if (is_float(m->dtype)) {
      u = ulps(m->dtype, pg, pc);
      if (u > tol && abs_tol) {
        double eps = m->dtype == NV_DTYPE_FLOAT64 ? 0x1p-52 : m->dtype == NV_DTYPE_FLOAT32 ? 0x1p-23 : 0x1p-7;
        double x = as_double(m->dtype, pg), y = as_double(m->dtype, pc);
        if (fabs(x - y) <= 4 * eps * fmax(1.0, fabs(y))) u = 0;
      }
    } else if (m->dtype == NV_DTYPE_COMPLEX64) {
      int64_t u0 = ulps(NV_DTYPE_FLOAT32, pg, pc), u1 = ulps(NV_DTYPE_FLOAT32, pg + 4, pc + 4);
      if (u0 < 0 || u1 < 0) u = -1;
      else {
        u = u0 > u1 ? u0 : u1;
        if (u > tol && tol > 0) {
          /* Components far below the value's magnitude compare by the magnitude. */
          float gr, gi, cr, ci;
          memcpy(&gr, pg, 4), memcpy(&gi, pg + 4, 4), memcpy(&cr, pc, 4), memcpy(&ci, pc + 4, 4);
          double mag = fmax(fabs(cr), fabs(ci));
          if (fabs(gr - cr) <= mag * 1e-6 * tol && fabs(gi - ci) <= mag * 1e-6 * tol) u = 0;
        }
      }
    } else {
      u = memcmp(pg, pc, isz) ? -1 : 0;
    }
    if (u < 0 || u > tol) {
      if (bad < 4) {
        fprintf(stderr, "FAIL %s: element %lld differs (ulps %lld):", what, (long long)e,
                (long long)u);
        for (size_t k = 0; k < isz; k++) fprintf(stderr, " %02x", (unsigned char)pg[k]);
        fprintf(stderr, " (gpu) vs");
        for (size_t k = 0; k < isz; k++) fprintf(stderr, " %02x", (unsigned char)pc[k]);
        if (m->dtype == NV_DTYPE_FLOAT32) {
          float x, y;
          memcpy(&x, pg, 4), memcpy(&y, pc, 4);
          fprintf(stderr, " [%.9g vs %.9g]", x, y);
        } else if (m->dtype == NV_DTYPE_FLOAT64) {
          double x, y;
          memcpy(&x, pg, 8), memcpy(&y, pc, 8);
          fprintf(stderr, " [%.17g vs %.17g]", x, y);
        }
        fprintf(stderr, " (cpu)\n");
      }
      bad++;
    } else if (u > worst) {
      worst = u;
    }
    for (int d = m->ndim - 1; d >= 0; d--) {
      if (++idx[d] < m->shape[d]) break;
      idx[d] = 0;
    }
  }
  if (bad) {
    fprintf(stderr, "FAIL %s: %d of %lld elements differ\n", what, bad, (long long)m->size);
    failures++;
  }
  return worst;
}

/* Inexact primitives (libm functions) and their tolerance in ulps of the output dtype. */
static int64_t tolerance(int prim, nv_dtype in_dt, nv_dtype out_dt) {
  switch (prim) {
    case NV__PRIM_EXP: case NV__PRIM_LOG: case NV__PRIM_EXPM1: case NV__PRIM_LOG2:
    case NV__PRIM_LOG10: case NV__PRIM_LOG1P: case NV__PRIM_SIN: case NV__PRIM_COS:
    case NV__PRIM_TAN: case NV__PRIM_ARCSIN: case NV__PRIM_ARCCOS: case NV__PRIM_ARCTAN:
    case NV__PRIM_SINH: case NV__PRIM_COSH: case NV__PRIM_TANH: case NV__PRIM_ARCSINH:
    case NV__PRIM_ARCCOSH: case NV__PRIM_ARCTANH: case NV__PRIM_SIGMOID: case NV__PRIM_ERF:
    case NV__PRIM_ERFINV: case NV__PRIM_ARCTAN2: case NV__PRIM_LOGADDEXP:
    case NV__PRIM_HANNING: case NV__PRIM_HAMMING: case NV__PRIM_BARTLETT: case NV__PRIM_BLACKMAN:
      break;
    case NV__PRIM_POWER:
      if (is_float(out_dt) || out_dt == NV_DTYPE_COMPLEX64) break;
      return 0;
    case NV__PRIM_SQRT: case NV__PRIM_RECIPROCAL: case NV__PRIM_RSQRT: case NV__PRIM_SIGN:
      if (in_dt == NV_DTYPE_COMPLEX64) break;
      return 0;
    default: return 0;
  }
  if (out_dt == NV_DTYPE_FLOAT16 || out_dt == NV_DTYPE_BFLOAT16) return 1;
  if (out_dt == NV_DTYPE_COMPLEX64) return 8;
  return 8;
}

/* Runs the GPU entry and the CPU kernel on node(r) with the same evaluated operands. */
static void check(const char *label, nv_array *r, int donate) {
  checks++;
  nv__node *n = r->node;
  if (atomic_load(&n->state) != NV__PENDING) {
    nv_release(r);
    return; /* the builder returned an input or an error: nothing to run */
  }
  int prim = n->prim;
  char what[256];
  if (!nv__gpu_kernels[prim]) { /* another family's primitive (a cast, a fill, a view) */
    nv_release(r);
    return;
  }
  nv_array *ins[4] = {0};
  nv__operand op[4];
  for (int k = 0; k < n->ninputs; k++) {
    ins[k] = nv__array_new(nv__node_retain(n->inputs[k].node), n->inputs[k].idx);
    if (nv_eval1(ins[k]) != NV_OK) {
      fprintf(stderr, "FAIL %s: input eval: %s\n", label, nv_last_error());
      failures++;
      goto out;
    }
    op[k] = (nv__operand){nv__out(ins[k]), nv__out(ins[k])->buf, nv__out(ins[k])->offset};
  }
  snprintf(what, sizeof what, "%s [%s %s->%s]", label, nv__prims[prim].name,
           n->ninputs ? nv_dtype_name(op[0].meta->dtype) : "-", nv_dtype_name(n->out[0].dtype));
  /* CPU first: a donated input is overwritten by the GPU run. */
  nv__buffer *cb[4] = {0};
  int64_t co[4] = {0};
  nv_status sc = nv__cpu_kernels[prim](n, op, -1);
  for (int i = 0; i < n->noutputs; i++) {
    cb[i] = n->out[i].buf;
    co[i] = n->out[i].offset;
    n->out[i].buf = NULL;
    n->out[i].offset = 0;
  }
  nv__gpu_ctx ctx;
  if (donate >= 0) n->out[0].buf = nv__buffer_retain(op[donate].buf);
  nv_status sg = nv__gpu_kernels[prim] ? nv__gpu_kernels[prim](&ctx, n, op, donate) : NV_ERR_UNSUPPORTED;
  const char *gerr = sg != NV_OK ? nv_last_error() : "";
  end_case(what);
  if ((sc == NV_OK) != (sg == NV_OK)) {
    fprintf(stderr, "FAIL %s: cpu status %d, gpu status %d (%s)\n", what, sc, sg, gerr);
    failures++;
  } else if (sc == NV_OK) {
    int64_t tol = tolerance(prim, n->ninputs ? op[0].meta->dtype : n->out[0].dtype, n->out[0].dtype);
    abs_tol = prim == NV__PRIM_LOGADDEXP;
    for (int i = 0; i < n->noutputs && !(perf_mode && donate >= 0); i++) {
      const nv__output *m = &n->out[i];
      if (m->size == 0) continue;
      const char *g = (const char *)m->buf->ptr + m->offset * (int64_t)nv_dtype_size(m->dtype);
      const char *c = (const char *)cb[i]->ptr + co[i] * (int64_t)nv_dtype_size(m->dtype);
      int64_t w = compare(what, m, g, c, tol);
      if (w > 0 && getenv("EW_VERBOSE")) fprintf(stderr, "  %s: max %lld ulp\n", what, (long long)w);
    }
  }
  for (int i = 0; i < n->noutputs; i++) {
    nv__buffer_release(n->out[i].buf);
    n->out[i].buf = NULL;
    nv__buffer_release(cb[i]);
  }
out:
  for (int k = 0; k < 4; k++) nv_release(ins[k]);
  nv_release(r);
}

/* ---- Inputs ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double urand(double lo, double hi) { return lo + (hi - lo) * (double)(rnd() >> 11) * 0x1p-53; }

enum { V_ANY, V_SHIFT, V_EXPO, V_UNIT };

/* n values of dtype dt: random, with edge values first (NaN, infinities, signed zeros,
 * extremes) unless `plain`. */
static void *values(nv_dtype dt, int64_t n, int kind, bool plain) {
  size_t isz = nv_dtype_size(dt);
  char *p = calloc((size_t)(n ? n : 1), isz);
  static const double fe[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-30,
                              -1e30, 65504.0, 7e-46, 88.7, -104.0, 3.0};
  for (int64_t i = 0; i < n; i++) {
    double d;
    bool edge = !plain && i < (int64_t)(sizeof fe / sizeof *fe);
    if (kind == V_UNIT) d = urand(-1.0, 1.0);
    else if (kind == V_EXPO) d = (double)(int64_t)(rnd() % 13) - 2;
    else if (kind == V_SHIFT) d = (double)(int64_t)(rnd() % 80) - 8;
    else d = urand(-6.0, 6.0);
    char *e = p + i * (int64_t)isz;
    switch (dt) {
      case NV_DTYPE_BOOL: *(uint8_t *)e = rnd() & 1; break;
      case NV_DTYPE_FLOAT16: *(uint16_t *)e = nv__f64_to_f16(edge ? fe[i] : d); break;
      case NV_DTYPE_BFLOAT16: *(uint16_t *)e = nv__f64_to_bf16(edge ? fe[i] : d); break;
      case NV_DTYPE_FLOAT32: *(float *)e = (float)(edge ? fe[i] : d); break;
      case NV_DTYPE_FLOAT64: *(double *)e = edge ? fe[i] : d; break;
      case NV_DTYPE_COMPLEX64: {
        float re = (float)(edge ? fe[i] : d), im = (float)(edge ? fe[(i + 5) % 16] : urand(-6, 6));
        memcpy(e, &re, 4);
        memcpy(e + 4, &im, 4);
        break;
      }
      default: {
        uint64_t v = rnd();
        if (kind == V_SHIFT || kind == V_EXPO) v = (uint64_t)(int64_t)d;
        else if (!plain && i < 8) {
          static const int64_t ie[] = {0, 1, -1, 2, -2, INT64_MIN, INT64_MAX, 7};
          v = (uint64_t)ie[i];
          if (i == 5 || i == 6) { /* the type's extremes */
            int bits = (int)isz * 8;
            bool sgn = dt >= NV_DTYPE_INT8;
            if (bits == 64) v = i == 5 ? (sgn ? (uint64_t)INT64_MIN : 0) : (sgn ? (uint64_t)INT64_MAX : UINT64_MAX);
            else if (sgn) v = i == 5 ? (uint64_t)(-(1ll << (bits - 1))) : (uint64_t)((1ll << (bits - 1)) - 1);
            else v = i == 5 ? 0 : (1ull << bits) - 1;
          }
        } else if (rnd() % 2)
          v = (uint64_t)(int64_t)(urand(-100, 100));
        memcpy(e, &v, isz);
      }
    }
  }
  return p;
}

static nv_array *make(nv_dtype dt, const int *shape, int nd, int kind, bool plain) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= shape[i];
  void *p = values(dt, n, kind, plain);
  nv_array *a = nv_array_from_data(p, shape, nd, dt);
  free(p);
  return a;
}

/* Layouts of a (rows, cols) or 1-D input with the same values pattern. */
enum { L_CONTIG, L_TRANSPOSED, L_STRIDED, L_REVERSED, L_MISALIGNED, L_COUNT };
static const char *lname[] = {"contig", "transposed", "strided", "reversed", "misaligned"};

static nv_array *laid(nv_dtype dt, const int *shape, int nd, int layout, int kind) {
  if (nd == 0 || layout == L_CONTIG) return make(dt, shape, nd, kind, false);
  if (layout == L_TRANSPOSED && nd == 2) {
    int s[2] = {shape[1], shape[0]};
    nv_array *b = make(dt, s, 2, kind, false), *t = nv_transpose(b, NULL, 0);
    nv_release(b);
    return t;
  }
  if (layout == L_STRIDED) {
    int s[NV__MAX_DIMS], start[NV__MAX_DIMS], stop[NV__MAX_DIMS], step[NV__MAX_DIMS];
    for (int i = 0; i < nd; i++) s[i] = 2 * shape[i], start[i] = 1, stop[i] = 2 * shape[i], step[i] = 2;
    nv_array *b = make(dt, s, nd, kind, false), *t = nv_slice(b, start, stop, step, nd);
    nv_release(b);
    return t;
  }
  if (layout == L_REVERSED) {
    int start[NV__MAX_DIMS], stop[NV__MAX_DIMS], step[NV__MAX_DIMS];
    for (int i = 0; i < nd; i++) start[i] = 0, stop[i] = shape[i], step[i] = 1;
    start[nd - 1] = -1, stop[nd - 1] = -(shape[nd - 1] + 1), step[nd - 1] = -1;
    nv_array *b = make(dt, shape, nd, kind, false), *t = nv_slice(b, start, stop, step, nd);
    nv_release(b);
    return t;
  }
  /* misaligned: a slice starting one element in */
  int s[NV__MAX_DIMS], start[NV__MAX_DIMS], stop[NV__MAX_DIMS];
  for (int i = 0; i < nd; i++) s[i] = shape[i], start[i] = 0, stop[i] = shape[i];
  s[0] += 1, start[0] = 1, stop[0] = s[0];
  nv_array *b = make(dt, s, nd, kind, false), *t = nv_slice(b, start, stop, NULL, nd);
  nv_release(b);
  return t;
}

/* ---- Cases ---- */

typedef nv_array *(*un_fn)(const nv_array *);
typedef nv_array *(*bin_fn)(const nv_array *, const nv_array *);

static nv_array *round2(const nv_array *x) { return nv_round(x, 2); }
static nv_array *roundm1(const nv_array *x) { return nv_round(x, -1); }
static nv_array *round0(const nv_array *x) { return nv_round(x, 0); }
static nv_array *n2n(const nv_array *x) { return nv_nan_to_num(x, 0.0, NULL, NULL); }
static nv_array *n2n7(const nv_array *x) {
  double p = 7, q = -9;
  return nv_nan_to_num(x, 5.0, &p, &q);
}
static nv_array *isclose_(const nv_array *a, const nv_array *b) { return nv_isclose(a, b, 1e-5, 1e-8, false); }
static nv_array *isclose_n(const nv_array *a, const nv_array *b) { return nv_isclose(a, b, 0.5, 0.1, true); }
static nv_array *allclose_(const nv_array *a, const nv_array *b) { return nv_allclose(a, b, 1e-5, 1e-8, false); }
static nv_array *allclose_w(const nv_array *a, const nv_array *b) { return nv_allclose(a, b, 100, 100, true); }
static nv_array *aeq(const nv_array *a, const nv_array *b) { return nv_array_equal(a, b, false); }
static nv_array *aeq_n(const nv_array *a, const nv_array *b) { return nv_array_equal(a, b, true); }
static nv_array *aeq_self(const nv_array *a, const nv_array *b) {
  (void)b;
  return nv_array_equal(a, a, true);
}

static const struct {
  const char *name;
  un_fn f;
  int kind;
} unary[] = {
    {"negative", nv_negative, V_ANY},   {"abs", nv_abs, V_ANY},         {"exp", nv_exp, V_ANY},
    {"log", nv_log, V_ANY},             {"sqrt", nv_sqrt, V_ANY},       {"sign", nv_sign, V_ANY},
    {"logical_not", nv_logical_not, V_ANY}, {"reciprocal", nv_reciprocal, V_ANY},
    {"floor", nv_floor, V_ANY},         {"ceil", nv_ceil, V_ANY},       {"trunc", nv_trunc, V_ANY},
    {"round0", round0, V_ANY},          {"round2", round2, V_ANY},      {"round-1", roundm1, V_ANY},
    {"square", nv_square, V_ANY},       {"rsqrt", nv_rsqrt, V_ANY},     {"expm1", nv_expm1, V_ANY},
    {"log2", nv_log2, V_ANY},           {"log10", nv_log10, V_ANY},     {"log1p", nv_log1p, V_ANY},
    {"sin", nv_sin, V_ANY},             {"cos", nv_cos, V_ANY},         {"tan", nv_tan, V_ANY},
    {"arcsin", nv_arcsin, V_UNIT},      {"arccos", nv_arccos, V_UNIT},  {"arctan", nv_arctan, V_ANY},
    {"sinh", nv_sinh, V_ANY},           {"cosh", nv_cosh, V_ANY},       {"tanh", nv_tanh, V_ANY},
    {"arcsinh", nv_arcsinh, V_ANY},     {"arccosh", nv_arccosh, V_ANY}, {"arctanh", nv_arctanh, V_UNIT},
    {"degrees", nv_degrees, V_ANY},     {"radians", nv_radians, V_ANY}, {"sigmoid", nv_sigmoid, V_ANY},
    {"erf", nv_erf, V_ANY},             {"erfinv", nv_erfinv, V_UNIT},  {"isnan", nv_isnan, V_ANY},
    {"isinf", nv_isinf, V_ANY},         {"isfinite", nv_isfinite, V_ANY}, {"isposinf", nv_isposinf, V_ANY},
    {"isneginf", nv_isneginf, V_ANY},   {"nan_to_num", n2n, V_ANY},     {"nan_to_num7", n2n7, V_ANY},
    {"conjugate", nv_conjugate, V_ANY}, {"bitwise_invert", nv_bitwise_invert, V_ANY},
    {"stop_gradient", nv_stop_gradient, V_ANY}, {"real", nv_real, V_ANY}, {"imag", nv_imag, V_ANY},
};

static const struct {
  const char *name;
  bin_fn f;
  int kind_b;
} binary[] = {
    {"add", nv_add, V_ANY},         {"subtract", nv_subtract, V_ANY}, {"multiply", nv_multiply, V_ANY},
    {"divide", nv_divide, V_ANY},   {"maximum", nv_maximum, V_ANY},   {"minimum", nv_minimum, V_ANY},
    {"floor_divide", nv_floor_divide, V_ANY}, {"remainder", nv_remainder, V_ANY},
    {"power", nv_power, V_EXPO},    {"power_any", nv_power, V_ANY},   {"arctan2", nv_arctan2, V_ANY},
    {"logaddexp", nv_logaddexp, V_ANY}, {"equal", nv_equal, V_ANY},   {"not_equal", nv_not_equal, V_ANY},
    {"greater", nv_greater, V_ANY}, {"greater_equal", nv_greater_equal, V_ANY}, {"less", nv_less, V_ANY},
    {"less_equal", nv_less_equal, V_ANY}, {"logical_and", nv_logical_and, V_ANY},
    {"logical_or", nv_logical_or, V_ANY}, {"logical_xor", nv_logical_xor, V_ANY},
    {"bitwise_and", nv_bitwise_and, V_ANY}, {"bitwise_or", nv_bitwise_or, V_ANY},
    {"bitwise_xor", nv_bitwise_xor, V_ANY}, {"left_shift", nv_left_shift, V_SHIFT},
    {"right_shift", nv_right_shift, V_SHIFT}, {"isclose", isclose_, V_ANY}, {"isclose_n", isclose_n, V_ANY},
    {"allclose", allclose_, V_ANY}, {"allclose_w", allclose_w, V_ANY}, {"array_equal", aeq, V_ANY},
    {"array_equal_n", aeq_n, V_ANY}, {"array_equal_self", aeq_self, V_ANY},
};

static const int sizes1[] = {1, 3, 17, 1023, 4097, (1 << 20) + 3};

static void run_unary(int ui, nv_dtype dt, bool big) {
  char label[128];
  for (int si = 0; si < (big ? 6 : 5); si++) {
    int s = sizes1[si];
    for (int L = 0; L < L_COUNT; L++) {
      if (L == L_TRANSPOSED) continue;
      if (s == (1 << 20) + 3 && L != L_CONTIG && L != L_MISALIGNED) continue;
      snprintf(label, sizeof label, "%s n=%d %s", unary[ui].name, s, lname[L]);
      nv_array *x = laid(dt, &s, 1, L, unary[ui].kind);
      check(label, unary[ui].f(x), -1);
      if (L == L_CONTIG && (dt == NV_DTYPE_FLOAT32 || dt == NV_DTYPE_BFLOAT16 || dt == NV_DTYPE_FLOAT16)) {
        snprintf(label, sizeof label, "%s n=%d donated", unary[ui].name, s);
        nv_array *r = unary[ui].f(x);
        nv__node *n = r->node;
        bool ok = atomic_load(&n->state) == NV__PENDING && n->ninputs == 1 &&
                  n->inputs[0].node == x->node && nv__prims[n->prim].donate[0] == 0 &&
                  n->out[0].dtype == dt;
        if (ok) check(label, r, 0);
        else nv_release(r);
      }
      nv_release(x);
    }
  }
  /* 2-D layouts and a 0-d scalar and an empty array. */
  int sh[2] = {5, 7};
  for (int L = 0; L < L_COUNT; L++) {
    snprintf(label, sizeof label, "%s 5x7 %s", unary[ui].name, lname[L]);
    nv_array *x = laid(dt, sh, 2, L, unary[ui].kind);
    check(label, unary[ui].f(x), -1);
    nv_release(x);
  }
  nv_array *x = make(dt, NULL, 0, unary[ui].kind, false);
  snprintf(label, sizeof label, "%s scalar", unary[ui].name);
  check(label, unary[ui].f(x), -1);
  nv_release(x);
  int z[2] = {0, 3};
  x = make(dt, z, 2, unary[ui].kind, false);
  snprintf(label, sizeof label, "%s empty", unary[ui].name);
  check(label, unary[ui].f(x), -1);
  nv_release(x);
}

static void run_binary(int bi, nv_dtype dt, bool big) {
  char label[160];
  int kb = binary[bi].kind_b;
  for (int si = 0; si < (big ? 6 : 5); si++) {
    int s = sizes1[si];
    for (int L = 0; L < L_COUNT; L++) {
      if (L == L_TRANSPOSED) continue;
      if (s == (1 << 20) + 3 && L != L_CONTIG) continue;
      snprintf(label, sizeof label, "%s n=%d %s", binary[bi].name, s, lname[L]);
      nv_array *a = laid(dt, &s, 1, L, V_ANY), *b = laid(dt, &s, 1, (L + 1) % L_COUNT == L_TRANSPOSED ? L_CONTIG : L, kb);
      check(label, binary[bi].f(a, b), -1);
      /* a scalar on either side */
      nv_array *c = make(dt, NULL, 0, kb, true);
      snprintf(label, sizeof label, "%s n=%d %s, scalar", binary[bi].name, s, lname[L]);
      check(label, binary[bi].f(a, c), -1);
      snprintf(label, sizeof label, "%s scalar, n=%d %s", binary[bi].name, s, lname[L]);
      check(label, binary[bi].f(c, b), -1);
      if (L == L_CONTIG && (dt == NV_DTYPE_FLOAT32 || dt == NV_DTYPE_BFLOAT16)) {
        for (int d = 0; d < 2; d++) {
          snprintf(label, sizeof label, "%s n=%d donated %d", binary[bi].name, s, d);
          nv_array *r = binary[bi].f(a, b);
          nv__node *n = r->node;
          bool ok = atomic_load(&n->state) == NV__PENDING && n->ninputs == 2 &&
                    nv__prims[n->prim].elementwise && n->out[0].dtype == dt &&
                    n->inputs[d].node == (d ? b : a)->node;
          if (ok) check(label, r, d);
          else nv_release(r);
        }
      }
      nv_release(a);
      nv_release(b);
      nv_release(c);
    }
  }
  /* broadcasts: (5,1) x (1,7), (6,7) x (7,), transposed x strided */
  int s51[2] = {5, 1}, s17[2] = {1, 7}, s67[2] = {6, 7}, s7 = 7;
  nv_array *a = make(dt, s51, 2, V_ANY, false), *b = make(dt, s17, 2, kb, false);
  snprintf(label, sizeof label, "%s (5,1)x(1,7)", binary[bi].name);
  check(label, binary[bi].f(a, b), -1);
  nv_release(a), nv_release(b);
  a = make(dt, s67, 2, V_ANY, false), b = make(dt, &s7, 1, kb, false);
  snprintf(label, sizeof label, "%s (6,7)x(7,)", binary[bi].name);
  check(label, binary[bi].f(a, b), -1);
  check(label, binary[bi].f(b, a), -1);
  nv_release(a), nv_release(b);
  a = laid(dt, s67, 2, L_TRANSPOSED, V_ANY), b = laid(dt, s67, 2, L_STRIDED, kb);
  snprintf(label, sizeof label, "%s transposed x strided", binary[bi].name);
  check(label, binary[bi].f(a, b), -1);
  nv_release(a), nv_release(b);
  /* rows: (9,64) + (64,), (64,1) x (1,64), column slices of wider rows (aligned or not) */
  int s964[2] = {9, 64}, s64 = 64, s641[2] = {64, 1}, s164[2] = {1, 64};
  a = make(dt, s964, 2, V_ANY, false), b = make(dt, &s64, 1, kb, false);
  snprintf(label, sizeof label, "%s rows (9,64)x(64,)", binary[bi].name);
  check(label, binary[bi].f(a, b), -1);
  check(label, binary[bi].f(b, a), -1);
  nv_release(a), nv_release(b);
  a = make(dt, s641, 2, V_ANY, false), b = make(dt, s164, 2, kb, false);
  snprintf(label, sizeof label, "%s rows (64,1)x(1,64)", binary[bi].name);
  check(label, binary[bi].f(a, b), -1);
  nv_release(a), nv_release(b);
  for (int c0 = 0; c0 < 5; c0 += 1) {
    int sbase[2] = {16, 68}, st0[2] = {0, c0}, sp0[2] = {16, c0 + 64}, s1664[2] = {16, 64};
    nv_array *base = make(dt, sbase, 2, V_ANY, false);
    a = nv_slice(base, st0, sp0, NULL, 2);
    b = make(dt, s1664, 2, kb, false);
    snprintf(label, sizeof label, "%s rows column slice at %d", binary[bi].name, c0);
    check(label, binary[bi].f(a, b), -1);
    nv_release(base), nv_release(a), nv_release(b);
  }
  /* 10 alternating broadcast dims: more folded dims than the kernels take */
  int sa[10], sb[10];
  for (int i = 0; i < 10; i++) sa[i] = i % 2 ? 1 : 2, sb[i] = i % 2 ? 2 : 1;
  a = make(dt, sa, 10, V_ANY, false), b = make(dt, sb, 10, kb, false);
  snprintf(label, sizeof label, "%s 10-d alternating broadcast", binary[bi].name);
  check(label, binary[bi].f(a, b), -1);
  nv_release(a), nv_release(b);
  int z[2] = {0, 3};
  a = make(dt, z, 2, V_ANY, false), b = make(dt, &z[1], 1, kb, false);
  snprintf(label, sizeof label, "%s empty", binary[bi].name);
  check(label, binary[bi].f(a, b), -1);
  nv_release(a), nv_release(b);
}

static void run_where(nv_dtype dt) {
  char label[128];
  for (int si = 0; si < 6; si++) {
    int s = sizes1[si];
    for (int L = 0; L < L_COUNT; L++) {
      if (L == L_TRANSPOSED) continue;
      nv_array *c = laid(NV_DTYPE_BOOL, &s, 1, L, V_ANY), *x = laid(dt, &s, 1, L, V_ANY),
               *y = laid(dt, &s, 1, L_CONTIG, V_ANY), *sc = make(dt, NULL, 0, V_ANY, true);
      snprintf(label, sizeof label, "where n=%d %s", s, lname[L]);
      check(label, nv_where(c, x, y), -1);
      snprintf(label, sizeof label, "where n=%d %s scalar y", s, lname[L]);
      check(label, nv_where(c, x, sc), -1);
      if (L == L_CONTIG) {
        for (int d = 1; d <= 2; d++) {
          nv_array *r = nv_where(c, x, y);
          snprintf(label, sizeof label, "where n=%d donated %d", s, d);
          nv__node *n = r->node;
          bool ok = atomic_load(&n->state) == NV__PENDING && n->inputs[d].node == (d == 1 ? x : y)->node;
          if (ok) check(label, r, d);
          else nv_release(r);
        }
      }
      nv_release(c), nv_release(x), nv_release(y), nv_release(sc);
    }
  }
  int s51[2] = {5, 1}, s17[2] = {1, 7}, s7 = 7;
  nv_array *c = make(NV_DTYPE_BOOL, s51, 2, V_ANY, false), *x = make(dt, s17, 2, V_ANY, false),
           *y = make(dt, &s7, 1, V_ANY, false);
  check("where broadcast", nv_where(c, x, y), -1);
  nv_release(c), nv_release(x), nv_release(y);
  int s964[2] = {9, 64}, s64 = 64, s91[2] = {9, 1};
  c = make(NV_DTYPE_BOOL, s964, 2, V_ANY, false), x = make(dt, &s64, 1, V_ANY, false),
  y = make(dt, s91, 2, V_ANY, false);
  check("where rows", nv_where(c, x, y), -1);
  nv_release(c), nv_release(x), nv_release(y);
}

static void run_misc(void) {
  char label[128];
  for (int dt = 0; dt < NV_DTYPE_COUNT; dt++) {
    static const int tri[][3] = {{3, 4, 1}, {3, -1, 0}, {0, -1, 0}, {2, 2, -5}, {4, 2, -1}, {5, 5, 10}, {300, 1000, 3}};
    for (size_t i = 0; i < sizeof tri / sizeof *tri; i++) {
      snprintf(label, sizeof label, "tri %d %d %d %s", tri[i][0], tri[i][1], tri[i][2], nv_dtype_name(dt));
      check(label, nv_tri(tri[i][0], tri[i][1], tri[i][2], dt), -1);
    }
    int sh[3] = {2, 3, 4}, ax[2] = {0, 2};
    nv_array *x = make(NV_DTYPE_FLOAT32, sh, 3, V_ANY, false);
    snprintf(label, sizeof label, "number_of_elements %s", nv_dtype_name(dt));
    check(label, nv_number_of_elements(x, ax, 2, false, dt), -1);
    check(label, nv_number_of_elements(x, ax, 1, true, dt), -1);
    nv_release(x);
    /* view of every dtype from float32 / uint8 layouts */
    int s34[2] = {3, 4};
    x = make(NV_DTYPE_FLOAT32, s34, 2, V_ANY, true);
    snprintf(label, sizeof label, "view float32->%s", nv_dtype_name(dt));
    check(label, nv_view(x, dt), -1);
    nv_array *t = nv_transpose(x, NULL, 0);
    check(label, nv_view(t, dt), -1);
    nv_release(t), nv_release(x);
  }
  int m[] = {0, 1, 2, 5, 12, 101, 4097};
  for (size_t i = 0; i < sizeof m / sizeof *m; i++) {
    snprintf(label, sizeof label, "windows m=%d", m[i]);
    check(label, nv_hanning(m[i]), -1);
    check(label, nv_hamming(m[i]), -1);
    check(label, nv_bartlett(m[i]), -1);
    check(label, nv_blackman(m[i]), -1);
  }
  /* view at an odd byte offset (a copy of the spanned bytes) */
  int s10 = 10, st1 = 1, sp9 = 9;
  nv_array *b = make(NV_DTYPE_UINT8, &s10, 1, V_ANY, true), *sl = nv_slice(b, &st1, &sp9, NULL, 1);
  check("view odd offset", nv_view(sl, NV_DTYPE_INT16), -1);
  int s48[2] = {8, 8}, st2[2] = {0, 1}, sp2[2] = {8, 5}, step2[2] = {2, 1};
  nv_array *b2 = make(NV_DTYPE_UINT8, s48, 2, V_ANY, true), *sl2 = nv_slice(b2, st2, sp2, step2, 2);
  check("view odd offset strided", nv_view(sl2, NV_DTYPE_INT32), -1);
  nv_release(b), nv_release(sl), nv_release(b2), nv_release(sl2);
  /* divmod and test_add_multiply: two outputs */
  for (int dt = 0; dt < NV_DTYPE_COUNT; dt++) {
    int s = 1023;
    nv_array *a = make(dt, &s, 1, V_ANY, false), *c = make(dt, &s, 1, V_ANY, false);
    nv_vec *v = nv_vec_new();
    if (nv_divmod(a, c, v) == NV_OK) {
      snprintf(label, sizeof label, "divmod %s", nv_dtype_name(dt));
      check(label, nv_retain(nv_vec_get(v, 0)), -1);
    }
    nv_vec_free(v);
    nv_array *s1 = NULL, *p1 = NULL;
    if (nv__test_add_multiply(a, c, &s1, &p1) == NV_OK) {
      snprintf(label, sizeof label, "test_add_multiply %s", nv_dtype_name(dt));
      check(label, s1, -1);
      nv_release(p1);
    }
    nv_release(a), nv_release(c);
  }
}

/* Every pair of complex special values through every complex64 op. */
static void run_complex_specials(void) {
  static const float sv[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -2.0f,
                             3e38f, 1e-40f, 100.0f};
  const int k = (int)(sizeof sv / sizeof *sv), n = k * k;
  float *z = malloc(sizeof(float) * 2 * (size_t)n);
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++) z[2 * (i * k + j)] = sv[i], z[2 * (i * k + j) + 1] = sv[j];
  int s1 = n, sa[2] = {n, 1}, sb[2] = {1, n};
  nv_array *x = nv_array_from_data(z, &s1, 1, NV_DTYPE_COMPLEX64);
  nv_array *a = nv_array_from_data(z, sa, 2, NV_DTYPE_COMPLEX64);
  nv_array *b = nv_array_from_data(z, sb, 2, NV_DTYPE_COMPLEX64);
  char label[128];
  for (size_t ui = 0; ui < sizeof unary / sizeof *unary; ui++) {
    snprintf(label, sizeof label, "%s complex specials", unary[ui].name);
    check(label, unary[ui].f(x), -1);
  }
  for (size_t bi = 0; bi < sizeof binary / sizeof *binary; bi++) {
    snprintf(label, sizeof label, "%s complex special pairs", binary[bi].name);
    check(label, binary[bi].f(a, b), -1);
  }
  nv_release(x), nv_release(a), nv_release(b);
  free(z);
}

/* ---- Performance ---- */

static void perf_case(const char *label, nv_array *r, double bytes_per_elem, int donate) {
  perf_mode = true;
  nv__node *n = r->node;
  int64_t size = n->out[0].size;
  check(label, r, donate);
  perf_mode = false;
  double gbs = bytes_per_elem * (double)size / (perf_last_ms * 1e-3) / 1e9;
  printf("perf %-40s %9.3f ms  %7.1f GB/s\n", label, perf_last_ms, gbs);
}

static void run_perf(void) {
  int n28 = 1 << 28;
  nv_array *x = make(NV_DTYPE_FLOAT32, &n28, 1, V_ANY, true), *y = make(NV_DTYPE_FLOAT32, &n28, 1, V_ANY, true);
  perf_case("multiply f32 2^28", nv_multiply(x, y), 12, -1);
  perf_case("add f32 2^28 (donated)", nv_add(x, y), 12, 0);
  perf_case("exp f32 2^28", nv_exp(x), 8, -1);
  perf_case("greater f32 2^28", nv_greater(x, y), 9, -1);
  perf_case("sin f32 2^28 (generic)", nv_sin(x), 8, -1);
  perf_case("arctan2 f32 2^28 (generic)", nv_arctan2(x, y), 12, -1);
  nv_release(x), nv_release(y);
  x = make(NV_DTYPE_BFLOAT16, &n28, 1, V_ANY, true), y = make(NV_DTYPE_BFLOAT16, &n28, 1, V_ANY, true);
  perf_case("add bf16 2^28", nv_add(x, y), 6, -1);
  nv_release(x), nv_release(y);
  int s2[2] = {16384, 8192}, s1 = 8192;
  x = make(NV_DTYPE_FLOAT32, s2, 2, V_ANY, true), y = make(NV_DTYPE_FLOAT32, &s1, 1, V_ANY, true);
  perf_case("add f32 16384x8192 + (8192,) bias", nv_add(x, y), 8, -1);
  nv_array *t = nv_transpose(x, NULL, 0);
  int sq[2] = {8192, 16384};
  nv_array *z = make(NV_DTYPE_FLOAT32, sq, 2, V_ANY, true);
  perf_case("add f32 transposed 8192x16384", nv_add(t, z), 12, -1);
  nv_release(x), nv_release(y), nv_release(t), nv_release(z);
  x = make(NV_DTYPE_BOOL, &n28, 1, V_ANY, true), y = make(NV_DTYPE_FLOAT32, &n28, 1, V_ANY, true);
  nv_array *w = make(NV_DTYPE_FLOAT32, &n28, 1, V_ANY, true);
  perf_case("where f32 2^28", nv_where(x, y, w), 13, -1);
  nv_release(x), nv_release(y), nv_release(w);
}

static bool selected(const char *only, const char *name) {
  if (!only) return true;
  size_t n = strlen(name);
  for (const char *p = only; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n && !strncmp(p, name, n)) return true;
    if (!e) break;
    p = e + 1;
  }
  return false;
}

int main(int argc, char **argv) {
  nv__cpu_register();
  nv__gpu_register();
  bool perf = argc > 1 && !strcmp(argv[1], "--perf");
  bool big = getenv("EW_BIG") != NULL;
  const char *only = getenv("EW_ONLY"); /* comma-separated case names */
  if (getenv("EW_GUARD")) GUARD = (size_t)atoi(getenv("EW_GUARD"));
  if (GUARD > 4096) GUARD = 4096;
  if (perf) {
    run_perf();
    printf("%d checks, %d failures\n", checks, failures);
    return failures != 0;
  }
  for (size_t ui = 0; ui < sizeof unary / sizeof *unary; ui++)
    if (selected(only, unary[ui].name))
      for (int dt = 0; dt < NV_DTYPE_COUNT; dt++) run_unary((int)ui, dt, big);
  for (size_t bi = 0; bi < sizeof binary / sizeof *binary; bi++)
    if (selected(only, binary[bi].name))
      for (int dt = 0; dt < NV_DTYPE_COUNT; dt++) run_binary((int)bi, dt, big);
  if (selected(only, "where"))
    for (int dt = 0; dt < NV_DTYPE_COUNT; dt++) run_where(dt);
  if (selected(only, "misc")) run_misc();
  if (selected(only, "complex")) run_complex_specials();
  printf("%d checks, %d failures\n", checks, failures);
  return failures != 0;
}
