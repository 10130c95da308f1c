/* rows_sweep: candidate softmax row kernels over a few row shapes on one GPU, each checked
 * against a float64 reference and timed. A standalone CUDA program (it compiles the library's
 * row kernels from src/cuda/reduce_rows.cu into itself and does not link nuvec):
 *
 *   rows_sweep [filter]       (filter: only candidates or shapes whose name contains it)
 *
 * Candidates:
 *   lib   the library's plan (reduce.h nv__rows_plan_of) and kernel (nv__rows_fast_kernel),
 *         launched as reduce_host.c rows_fast launches it;
 *   gG.vV[.flags].bMxB  the library's register kernel template (reduce_rows.cu rows_reg) with
 *         other parameters: G threads per row, V 16-byte pieces a thread, launch bounds
 *         (M threads, B blocks a multiprocessor: 65536 / (M * B) registers), flags
 *         rec (exponentials computed again instead of kept), d (sums across threads in
 *         float64), cs (streaming stores), ld (loads with an L2 256-byte prefetch), pf (the
 *         next row's loads before this row's work, a grid of one wave), k256 (blocks of 256
 *         threads for groups of up to a warp).
 *   lse.* the same kernel's logsumexp (one value per row), for lib.
 * Every shape's inputs are uniform in [-4, 4] but rows 0..4: a NaN, a +inf, all -inf, every
 * third element -inf, one element 60; the last row has one -inf. Results are checked against
 * a float64 reference kernel: maxerr is max |y - ref| / max(|ref|, the dtype's smallest
 * normal) (logsumexp: / max(|ref|, 1)), and NaN rows must be NaN, -inf elements exactly 0.
 * Times are medians of 20 runs (3 warm-ups) by CUDA events. Output: one line per pair,
 *   SWEEP <shape> <candidate> <ms> <TB/s> <maxerr> <ok|FAIL...>
 * (TB/s: bytes read and written per time), KINFO lines with each candidate's registers,
 * blocks a multiprocessor, block and grid, and a summary of the fastest per shape. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/reduce_rows.cu"

#define CK(call)                                                                         \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(2);                                                                           \
    }                                                                                    \
  } while (0)

typedef nv__rows_fast_params RP;

/* ---- inputs and the reference ---- */

template <class T>
__device__ __forceinline__ T from_d(double v);
template <>
__device__ __forceinline__ __half from_d<__half>(double v) {
  return __double2half(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_d<__nv_bfloat16>(double v) {
  return __double2bfloat16(v);
}
template <>
__device__ __forceinline__ float from_d<float>(double v) {
  return (float)v;
}
template <>
__device__ __forceinline__ double from_d<double>(double v) {
  return v;
}
template <class T>
__device__ __forceinline__ double to_d(T v) {
  return (double)nvred::to_float(v);
}

__device__ __forceinline__ uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <class T>
__global__ void fill(T *x, int64_t nrows, int64_t n, uint64_t seed) {
  int64_t total = nrows * n;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / n, c = i % n;
    double u = (double)(mix(seed + (uint64_t)i) >> 11) * (1.0 / 9007199254740992.0);
    double v = -4.0 + 8.0 * u;
    if (r == 0 && c == n / 3) v = NAN;
    if (r == 1 && c == n / 2) v = INFINITY;
    if (r == 2) v = -INFINITY;
    if (r == 3 && c % 3 == 0) v = -INFINITY;
    if (r == 4 && c == n - 1) v = 60.0;
    if (r == nrows - 1 && c == n / 2) v = -INFINITY;
    x[i] = from_d<T>(v);
  }
}

struct Err {
  unsigned long long maxerr; /* a non-negative double's bits: their order is the values' */
  unsigned long long bad;    /* semantic mismatches (NaN, exact zeros, non-finite results) */
};

/* A block's maximum (NaN wins) and sum, in float64, every thread getting them. */
__device__ double block_max(double v, double *sm) {
  for (int o = 16; o > 0; o >>= 1) v = nvred::max_nan(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) sm[threadIdx.x >> 5] = v;
  __syncthreads();
  v = sm[0];
  for (int w = 1; w < (int)blockDim.x / 32; w++) v = nvred::max_nan(v, sm[w]);
  __syncthreads();
  return v;
}
__device__ double block_sum(double v, double *sm) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0) sm[threadIdx.x >> 5] = v;
  __syncthreads();
  v = 0;
  for (int w = 0; w < (int)blockDim.x / 32; w++) v += sm[w];
  __syncthreads();
  return v;
}

/* One block a row: the reference softmax (or logsumexp) in float64 against y. */
template <class T, bool SOFTMAX>
__global__ void __launch_bounds__(256) check(const T *x, const T *y, int64_t n, double floor_,
                                             Err *err) {
  __shared__ double sm[8];
  const T *xr = x + (int64_t)blockIdx.x * n;
  double m = -INFINITY;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) m = nvred::max_nan(m, to_d(xr[c]));
  m = block_max(m, sm);
  const bool bad = !isfinite(m);
  double s = 0;
  if (!bad)
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) s += exp(to_d(xr[c]) - m);
  s = block_sum(s, sm);
  double e = 0;
  unsigned long long nb = 0;
  if (SOFTMAX) {
    const T *yr = y + (int64_t)blockIdx.x * n;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
      double got = to_d(yr[c]);
      if (bad) {
        nb += got == got;
        continue;
      }
      double ref = exp(to_d(xr[c]) - m) / s;
      if (ref == 0) {
        nb += got != 0;
        continue;
      }
      if (!isfinite(got)) {
        nb++;
        continue;
      }
      e = fmax(e, fabs(got - ref) / fmax(fabs(ref), floor_));
    }
  } else if (threadIdx.x == 0) {
    double got = to_d(y[blockIdx.x]);
    double ref = bad ? m : m + log(s);
    if (ref != ref) nb += got == got;
    else if (isinf(ref)) nb += got != ref;
    else e = fabs(got - ref) / fmax(fabs(ref), 1.0);
  }
  e = block_max(e, sm);
  nb = (unsigned long long)block_sum((double)nb, sm);
  if (threadIdx.x == 0) {
    atomicMax(&err->maxerr, (unsigned long long)__double_as_longlong(e));
    if (nb) atomicAdd(&err->bad, nb);
  }
}

/* ---- candidates ---- */

enum Kind { K_LIB, K_VAR };

struct Cand {
  std::string name;
  Kind kind;
  nv_dtype dtype;
  bool softmax;
  const void *func; /* K_VAR: the kernel */
  int vpl, maxt, minb, fl, short_block;
  int64_t nmin, nmax; /* K_VAR: the row lengths it is run on */
};

struct Launch {
  const void *func;
  int group, block;
  int64_t grid;
};

static int sm_count;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int elt_size(nv_dtype dt) {
  return dt == NV_DTYPE_FLOAT64 ? 8 : dt == NV_DTYPE_FLOAT32 ? 4 : 2;
}

/* The launch of a candidate for rows of n (false: the candidate does not take them). */
static bool plan(const Cand &c, int64_t nrows, int64_t n, Launch *l) {
  const int64_t vw = nv__rows_vw(c.dtype), pieces = cdiv(n, vw);
  const int64_t rows_threads = (int64_t)132 * 2048 * 2; /* reduce_host.c ROWS_THREADS */
  if (c.kind == K_LIB) {
    nv__rows_plan pl = nv__rows_plan_of(c.dtype, n, 1);
    l->func = nv__rows_fast_kernel(c.softmax, c.dtype, &pl);
    l->group = pl.group;
    l->block = pl.block;
    l->grid = cdiv(nrows, pl.block / pl.group);
    if (pl.long_rows && l->grid > rows_threads / pl.block) l->grid = rows_threads / pl.block;
    return l->func != NULL;
  }
  if (n < c.nmin || n > c.nmax) return false;
  int64_t g = 1;
  while (g * c.vpl < pieces) g <<= 1;
  if (g > 512) return false;
  l->func = c.func;
  l->group = (int)g;
  l->block = g > 32 ? (int)g : c.short_block;
  if (l->block > c.maxt) return false;
  l->grid = cdiv(nrows, l->block / l->group);
  if (c.fl & nvred::ROWS_PREFETCH) {
    int per = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, c.func, l->block, 0));
    if (l->grid > (int64_t)per * sm_count) l->grid = (int64_t)per * sm_count;
  }
  return true;
}

static std::string var_name(int vpl, int maxt, int minb, int fl, int sb) {
  char b[96];
  snprintf(b, sizeof b, "v%d%s%s%s%s%s%s.b%dx%d", vpl, fl & nvred::ROWS_RECOMPUTE ? ".rec" : "",
           fl & nvred::ROWS_SUM64 ? ".d" : "", fl & nvred::ROWS_STREAM ? ".cs" : "",
           fl & nvred::ROWS_LDHINT ? ".ld" : "", fl & nvred::ROWS_PREFETCH ? ".pf" : "",
           sb != 128 ? ".k256" : "", maxt, minb);
  return b;
}

template <class T, int VPL, int MAXT, int MINB, int FL>
static Cand var(nv_dtype dt, int64_t nmin, int64_t nmax, int sb = 128) {
  Cand c;
  c.kind = K_VAR;
  c.dtype = dt;
  c.softmax = true;
  c.func = (const void *)nvred::rows_reg<T, true, VPL, MAXT, MINB, FL | nvred::ROWS_VEC_ONLY>;
  c.vpl = VPL;
  c.maxt = MAXT;
  c.minb = MINB;
  c.fl = FL;
  c.short_block = sb;
  c.nmin = nmin;
  c.nmax = nmax;
  c.name = var_name(VPL, MAXT, MINB, FL, sb);
  return c;
}

static Cand fixed(Kind k, nv_dtype dt, bool softmax) {
  Cand c;
  c.kind = k;
  c.dtype = dt;
  c.softmax = softmax;
  c.func = NULL;
  c.vpl = c.maxt = c.minb = c.fl = 0;
  c.short_block = 128;
  c.nmin = 1;
  c.nmax = INT64_MAX;
  c.name = std::string(softmax ? "" : "lse.") + "lib";
  return c;
}

using nvred::ROWS_LDHINT;
using nvred::ROWS_PREFETCH;
using nvred::ROWS_RECOMPUTE;
using nvred::ROWS_STREAM;
using nvred::ROWS_SUM64;
typedef __nv_bfloat16 bf16;

static std::vector<Cand> candidates() {
  const nv_dtype B = NV_DTYPE_BFLOAT16, H = NV_DTYPE_FLOAT16, F = NV_DTYPE_FLOAT32,
                 D = NV_DTYPE_FLOAT64;
  std::vector<Cand> v;
  for (nv_dtype dt : {B, H, F, D}) {
    v.push_back(fixed(K_LIB, dt, true));
    v.push_back(fixed(K_LIB, dt, false));
  }
  /* bfloat16: rows of 512, 4096, 32768. */
  v.push_back(var<bf16, 4, 512, 2, 0>(B, 1, 16384));             /* lib's, aligned path only */
  v.push_back(var<bf16, 4, 512, 2, 0>(B, 1, 1024, 256));         /* 256-thread blocks */
  v.push_back(var<bf16, 4, 512, 2, ROWS_RECOMPUTE>(B, 1, 16384));
  v.push_back(var<bf16, 4, 512, 2, ROWS_SUM64>(B, 1, 16384));
  v.push_back(var<bf16, 4, 512, 2, ROWS_STREAM>(B, 1, 16384));
  v.push_back(var<bf16, 4, 512, 2, ROWS_LDHINT>(B, 1, 16384));
  v.push_back(var<bf16, 4, 128, 6, ROWS_PREFETCH>(B, 1, 4096));  /* 85 registers */
  v.push_back(var<bf16, 4, 128, 8, ROWS_PREFETCH | ROWS_RECOMPUTE>(B, 1, 4096));
  v.push_back(var<bf16, 2, 512, 2, 0>(B, 1, 8192));
  v.push_back(var<bf16, 1, 512, 2, 0>(B, 1, 4096));
  v.push_back(var<bf16, 8, 64, 10, 0>(B, 1, 4096));              /* 2 warps a row for 4096 */
  v.push_back(var<bf16, 8, 64, 16, ROWS_RECOMPUTE>(B, 1, 4096));
  v.push_back(var<bf16, 8, 512, 2, ROWS_RECOMPUTE>(B, 1, 32768)); /* lib's wide */
  v.push_back(var<bf16, 8, 512, 1, 0>(B, 8192, 32768));
  v.push_back(var<bf16, 8, 128, 6, 0>(B, 1, 1024));
  v.push_back(var<bf16, 16, 128, 5, ROWS_RECOMPUTE>(B, 1, 4096)); /* a warp a row for 4096 */
  v.push_back(var<bf16, 16, 128, 4, ROWS_RECOMPUTE>(B, 1, 4096));
  v.push_back(var<bf16, 16, 256, 2, ROWS_RECOMPUTE>(B, 8192, 65536));
  /* float16: rows of 8192. */
  v.push_back(var<__half, 4, 512, 2, 0>(H, 1, 16384));
  v.push_back(var<__half, 2, 512, 2, 0>(H, 1, 8192));
  v.push_back(var<__half, 8, 128, 5, 0>(H, 4096, 16384));
  v.push_back(var<__half, 8, 512, 2, ROWS_RECOMPUTE>(H, 1, 32768));
  v.push_back(var<__half, 16, 128, 5, ROWS_RECOMPUTE>(H, 4096, 16384));
  /* float32: rows of 512 and 4096. */
  v.push_back(var<float, 4, 512, 2, ROWS_SUM64>(F, 1, 8192));
  v.push_back(var<float, 4, 512, 2, 0>(F, 1, 8192));
  v.push_back(var<float, 2, 512, 2, ROWS_SUM64>(F, 1, 4096));
  v.push_back(var<float, 8, 128, 6, ROWS_SUM64>(F, 1, 16384));
  v.push_back(var<float, 8, 512, 2, ROWS_SUM64 | ROWS_RECOMPUTE>(F, 1, 16384));
  v.push_back(var<float, 1, 512, 2, ROWS_SUM64>(F, 1, 2048));
  /* float64: rows of 1024. */
  v.push_back(var<double, 4, 512, 2, 0>(D, 1, 4096));
  v.push_back(var<double, 2, 512, 2, 0>(D, 1, 2048));
  return v;
}

struct Shape {
  const char *name;
  nv_dtype dtype;
  int64_t nrows, n;
};

template <class T>
static void fill_t(void *x, int64_t nrows, int64_t n) {
  fill<T><<<132 * 8, 256>>>((T *)x, nrows, n, 0x5eed1234ull + (uint64_t)n);
}

template <class T>
static void check_t(bool softmax, const void *x, const void *y, int64_t nrows, int64_t n,
                    double floor_, Err *err) {
  if (softmax) check<T, true><<<(unsigned)nrows, 256>>>((const T *)x, (const T *)y, n, floor_, err);
  else check<T, false><<<(unsigned)nrows, 256>>>((const T *)x, (const T *)y, n, floor_, err);
}

static void run_check(nv_dtype dt, bool softmax, const void *x, const void *y, int64_t nrows,
                      int64_t n, Err *err) {
  const double f32_min = 1.1754943508222875e-38; /* the smallest normal: bfloat16's too */
  switch (dt) {
    case NV_DTYPE_FLOAT16: check_t<__half>(softmax, x, y, nrows, n, 6.103515625e-05, err); break;
    case NV_DTYPE_BFLOAT16: check_t<bf16>(softmax, x, y, nrows, n, f32_min, err); break;
    case NV_DTYPE_FLOAT32: check_t<float>(softmax, x, y, nrows, n, f32_min, err); break;
    default: check_t<double>(softmax, x, y, nrows, n, 2.2250738585072014e-308, err);
  }
  CK(cudaGetLastError());
}

/* What each dtype's results may differ from the reference by (maxerr). */
static double tolerance(nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_FLOAT16: return 2e-3;
    case NV_DTYPE_BFLOAT16: return 1e-2;
    case NV_DTYPE_FLOAT32: return 5e-6;
    default: return 1e-12;
  }
}

struct Result {
  std::string shape, cand;
  double ms;
  bool ok;
};

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : "";
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  sm_count = prop.multiProcessorCount;
  printf("device: %s, %d multiprocessors\n", prop.name, sm_count);
  const Shape shapes[] = {
      {"bf16_32768x4096", NV_DTYPE_BFLOAT16, 32768, 4096},
      {"bf16_4096x32768", NV_DTYPE_BFLOAT16, 4096, 32768},
      {"bf16_262144x512", NV_DTYPE_BFLOAT16, 262144, 512},
      {"f32_32768x4096", NV_DTYPE_FLOAT32, 32768, 4096},
      {"f16_16384x8192", NV_DTYPE_FLOAT16, 16384, 8192},
      {"f32_262144x512", NV_DTYPE_FLOAT32, 262144, 512},
      {"f64_32768x1024", NV_DTYPE_FLOAT64, 32768, 1024},
  };
  std::vector<Cand> cands = candidates();
  std::vector<Result> results;
  Err *err;
  CK(cudaMalloc(&err, sizeof(Err)));
  cudaEvent_t ev[2];
  CK(cudaEventCreate(&ev[0]));
  CK(cudaEventCreate(&ev[1]));
  bool all_ok = true;
  for (const Shape &s : shapes) {
    bool shape_hit = strstr(s.name, filter) != NULL;
    const int64_t es = elt_size(s.dtype), bytes = s.nrows * s.n * es;
    void *x = NULL, *y = NULL;
    for (const Cand &c : cands) {
      if (c.dtype != s.dtype) continue;
      if (!shape_hit && strstr(c.name.c_str(), filter) == NULL) continue;
      Launch l;
      if (!plan(c, s.nrows, s.n, &l)) continue;
      if (!x) {
        CK(cudaMalloc(&x, bytes));
        CK(cudaMalloc(&y, bytes));
        switch (s.dtype) {
          case NV_DTYPE_FLOAT16: fill_t<__half>(x, s.nrows, s.n); break;
          case NV_DTYPE_BFLOAT16: fill_t<bf16>(x, s.nrows, s.n); break;
          case NV_DTYPE_FLOAT32: fill_t<float>(x, s.nrows, s.n); break;
          default: fill_t<double>(x, s.nrows, s.n);
        }
        CK(cudaGetLastError());
      }
      RP p;
      memset(&p, 0, sizeof p);
      p.nk = 1;
      p.kshape[0] = s.nrows;
      p.kst[0] = s.n;
      p.group = l.group;
      p.dtype = s.dtype;
      p.vec = s.n % nv__rows_vw(s.dtype) == 0;
      p.nrows = s.nrows;
      p.n = s.n;
      const void *in = x;
      void *out = y, *unused = NULL;
      void *args[] = {(void *)&in, (void *)&out, (void *)&unused, (void *)&p};
      cudaFuncAttributes fa;
      CK(cudaFuncGetAttributes(&fa, l.func));
      int per = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, l.func, l.block, 0));
      printf("KINFO %s %s regs=%d local=%zu blocks/SM=%d block=%d group=%d grid=%lld\n", s.name,
             c.name.c_str(), fa.numRegs, (size_t)fa.localSizeBytes, per, l.block, l.group,
             (long long)l.grid);
      CK(cudaMemset(y, 0xff, bytes));
      CK(cudaMemset(err, 0, sizeof(Err)));
      CK(cudaLaunchKernel(l.func, dim3((unsigned)l.grid), dim3((unsigned)l.block), args, 0, 0));
      CK(cudaGetLastError());
      run_check(s.dtype, c.softmax, x, y, s.nrows, s.n, err);
      Err h;
      CK(cudaMemcpy(&h, err, sizeof h, cudaMemcpyDeviceToHost));
      double maxerr;
      memcpy(&maxerr, &h.maxerr, sizeof maxerr);
      double tol = c.softmax ? tolerance(s.dtype) : (s.dtype == NV_DTYPE_FLOAT64 ? 1e-13 : 1e-2);
      bool ok = h.bad == 0 && maxerr <= tol;
      std::vector<float> t;
      for (int i = 0; i < 23; i++) {
        CK(cudaEventRecord(ev[0]));
        CK(cudaLaunchKernel(l.func, dim3((unsigned)l.grid), dim3((unsigned)l.block), args, 0, 0));
        CK(cudaEventRecord(ev[1]));
        CK(cudaEventSynchronize(ev[1]));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
        if (i >= 3) t.push_back(ms);
      }
      CK(cudaGetLastError());
      std::sort(t.begin(), t.end());
      double ms = (t[9] + t[10]) / 2;
      double moved = (double)bytes + (c.softmax ? (double)bytes : (double)(s.nrows * es));
      char verdict[64];
      if (ok) snprintf(verdict, sizeof verdict, "ok");
      else snprintf(verdict, sizeof verdict, "FAIL(bad=%llu)", h.bad);
      printf("SWEEP %s %s %.4f %.3f %.3g %s\n", s.name, c.name.c_str(), ms, moved / ms / 1e9,
             maxerr, verdict);
      fflush(stdout);
      all_ok &= ok;
      results.push_back({s.name, c.name, ms, ok});
    }
    if (x) {
      CK(cudaFree(x));
      CK(cudaFree(y));
    }
  }
  printf("=== summary: the fastest correct softmax candidate per shape (lib beside it)\n");
  for (const Shape &s : shapes) {
    const Result *best = NULL, *lib = NULL;
    for (const Result &r : results) {
      if (r.shape != s.name) continue;
      if (r.cand == "lib") lib = &r;
      if (r.ok && r.cand.compare(0, 4, "lse.") != 0 && (!best || r.ms < best->ms)) best = &r;
    }
    if (!best) continue;
    printf("BEST %s %s %.4f ms", s.name, best->cand.c_str(), best->ms);
    if (lib) printf(" | lib %.4f ms", lib->ms);
    printf("\n");
  }
  printf("%s\n", all_ok ? "all candidates correct" : "SOME CANDIDATES FAILED");
  return all_ok ? 0 : 1;
}
