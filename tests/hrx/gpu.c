/* GPU-only hrx tests (CUDA engine): real kernels from CUDA C, PTX and cubin, fills and copies
 * on every lane, a scoped cuBLAS call, captured cuBLAS calls inside native regions (prepare,
 * update in place, failures), fault isolation, and the three lanes at once. Each test skips
 * where no CUDA device is present. */
#include <criterion/criterion.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <string.h>
#include <stdatomic.h>
#include <nvrtc.h>

#define HRX_TEST_ENGINE HRX_ENGINE_CUDA
#include "hrx_test_util.h"

#define OK(expr) cr_assert_eq((expr), HRX_OK, "%s failed: %s", #expr, hrx_last_error())
#define WAIT 20000000000ull
#define RUNTIME(rt, slots)                                                                       \
  hrx_runtime *rt = NULL;                                                                        \
  do {                                                                                           \
    hrx_status s_ = ut_runtime((slots), 0, &rt);                                                 \
    if (s_ == HRX_E_NO_DEVICE) cr_skip_test("no CUDA device: %s", hrx_last_error());             \
    cr_assert_eq(s_, HRX_OK, "runtime: %s", hrx_last_error());                                   \
  } while (0)

static hrx_buffer *buffer(hrx_runtime *rt, hrx_memory m, size_t bytes) {
  hrx_buffer *b = NULL;
  OK(hrx_buffer_create(rt, m, bytes, &b));
  return b;
}

static hrx_status run_once(hrx_prepared *p) {
  hrx_completion *c = NULL;
  hrx_status s = hrx_submit(p, &c);
  if (s != HRX_OK) return s;
  s = hrx_completion_wait(c, WAIT);
  hrx_completion_release(c);
  return s;
}

Test(hrx_gpu, saxpy_chain) {
  RUNTIME(rt, 1);
  enum { N = 4096, STEPS = 200 };
  unsigned seed = ut_seed();
  static float x[N], y[N], ref[N], out[N];
  ut_random(x, N, &seed);
  ut_random(y, N, &seed);
  hrx_buffer *dx = buffer(rt, HRX_MEMORY_DEVICE, sizeof x);
  hrx_buffer *dy = buffer(rt, HRX_MEMORY_DEVICE, sizeof y);
  OK(ut_put(rt, dx, 0, x, sizeof x));
  OK(ut_put(rt, dy, 0, y, sizeof y));
  hrx_kernel *axpy = NULL;
  OK(ut_kernel(rt, "axpy", N, 0.5f, &axpy));
  hrx_graph *g = NULL;
  OK(hrx_graph_create(rt, &g));
  hrx_view v[2] = {hrx_view_whole(dx), hrx_view_whole(dy)};
  for (int s = 0; s < STEPS; s++) {
    hrx_constant a = {.size = 4, .value.f32 = (float)((s % 7) - 3) * 0.01f};
    OK(hrx_graph_dispatch(g, axpy, v, 2, &a, 1, NULL));
  }
  hrx_prepared *p = NULL;
  OK(hrx_graph_prepare(g, &p));
  cr_assert_eq(hrx_prepared_regions(p), 1u, "the chain is one native graph");
  OK(run_once(p));
  OK(ut_get(rt, dy, 0, out, sizeof out));
  for (int i = 0; i < N; i++) {
    double r = y[i];
    for (int s = 0; s < STEPS; s++) r = (double)((s % 7) - 3) * 0.01 * x[i] + r;
    ref[i] = (float)r;
  }
  for (int i = 0; i < N; i++)
    cr_assert(fabsf(out[i] - ref[i]) <= 1e-4f * (1.0f + fabsf(ref[i])), "y[%d] = %g, reference %g", i,
              out[i], ref[i]);
  hrx_prepared_release(p);
  hrx_kernel_release(axpy);
  hrx_buffer_release(dx);
  hrx_buffer_release(dy);
  hrx_runtime_release(rt);
}

Test(hrx_gpu, fills_and_copies_on_all_lanes) {
  RUNTIME(rt, 1);
  enum { B = 1 << 20 };
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, B);
  hrx_buffer *h2 = buffer(rt, HRX_MEMORY_HOST_VISIBLE, B);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, B);
  hrx_buffer *d2 = buffer(rt, HRX_MEMORY_DEVICE, B);
  unsigned seed = ut_seed();
  static unsigned char src[B], out[B];
  for (int i = 0; i < B; i++) {
    seed = seed * 1664525u + 1013904223u;
    src[i] = (unsigned char)(seed >> 24);
  }
  OK(ut_put(rt, h, 0, src, B));
  hrx_graph *g = NULL;
  OK(hrx_graph_create(rt, &g));
  OK(hrx_graph_copy(g, hrx_view_whole(d), hrx_view_whole(h), NULL));                    /* upload */
  OK(hrx_graph_fill(g, hrx_view_make(d, 1000, 3000), 0xab, NULL));                      /* memset */
  OK(hrx_graph_copy(g, hrx_view_make(d2, 0, B / 2), hrx_view_make(d, B / 2, B / 2), NULL)); /* d2d */
  OK(hrx_graph_copy(g, hrx_view_make(d2, B / 2, B / 2), hrx_view_make(d, 0, B / 2), NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(h2), hrx_view_whole(d2), NULL));                  /* download */
  OK(hrx_graph_fill(g, hrx_view_make(h2, 5, 11), 0x5c, NULL)); /* fill kernel on mapped memory */
  OK(hrx_graph_copy_on(g, hrx_view_make(h2, B - 64, 64), hrx_view_make(h, 0, 64), HRX_LANE_UPLOAD,
                       NULL)); /* host to host on an explicit lane */
  hrx_prepared *p = NULL;
  OK(hrx_graph_prepare(g, &p));
  OK(run_once(p));
  OK(ut_get(rt, h2, 0, out, B));
  for (int i = 0; i < B; i++) {
    int j = i < B / 2 ? i + B / 2 : i - B / 2; /* d2 = halves of d swapped */
    unsigned char want = (j >= 1000 && j < 4000) ? 0xab : src[j];
    if (i >= 5 && i < 16) want = 0x5c;
    if (i >= B - 64) want = src[i - (B - 64)];
    cr_assert_eq(out[i], want, "byte %d is 0x%02x, wanted 0x%02x", i, out[i], want);
  }
  hrx_counters k;
  OK(hrx_runtime_counters(rt, &k));
  cr_assert_geq(k.lane_copy_bytes[HRX_LANE_UPLOAD], (uint64_t)B + 64);
  cr_assert_geq(k.lane_copy_bytes[HRX_LANE_DOWNLOAD], (uint64_t)B);
  cr_assert_eq(k.lane_copy_bytes[HRX_LANE_COMPUTE], (uint64_t)B);
  hrx_prepared_release(p);
  hrx_buffer_release(h);
  hrx_buffer_release(h2);
  hrx_buffer_release(d);
  hrx_buffer_release(d2);
  hrx_runtime_release(rt);
}

Test(hrx_gpu, kernels_from_ptx_and_errors) {
  RUNTIME(rt, 1);
  const char *src = "extern \"C\" __global__ void twice(float *x) { x[threadIdx.x] *= 2.0f; }\n";
  nvrtcProgram prog;
  cr_assert_eq(nvrtcCreateProgram(&prog, src, "t.cu", 0, NULL, NULL), NVRTC_SUCCESS);
  const char *opts[1] = {"--gpu-architecture=compute_90"};
  cr_assert_eq(nvrtcCompileProgram(prog, 1, opts), NVRTC_SUCCESS);
  size_t n = 0;
  cr_assert_eq(nvrtcGetPTXSize(prog, &n), NVRTC_SUCCESS);
  char *ptx = malloc(n);
  cr_assert_eq(nvrtcGetPTX(prog, ptx), NVRTC_SUCCESS);
  nvrtcDestroyProgram(&prog);
  hrx_binding_contract b = {HRX_ACCESS_READ_WRITE, 4, 128};
  hrx_kernel_contract c = {&b, 1, NULL, 0};
  uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
  hrx_kernel *k = NULL;
  OK(hrx_kernel_create_image(rt, ptx, 0, "twice", &c, grid, block, &k));
  hrx_kernel *bad = NULL;
  hrx_status s = hrx_kernel_create_image(rt, ptx, 0, "missing", &c, grid, block, &bad);
  cr_assert_eq(s, HRX_E_INVALID, "%s", hrx_last_error());
  cr_assert(strstr(hrx_last_error(), "\"missing\" not found"), "%s", hrx_last_error());
  s = hrx_kernel_create_image(rt, "garbage that is not PTX", 0, "twice", &c, grid, block, &bad);
  cr_assert_neq(s, HRX_OK);
  cr_assert(strstr(hrx_last_error(), "hrx_kernel_create_image"), "%s", hrx_last_error());
  free(ptx);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 128);
  float in[32], out[32];
  unsigned seed = ut_seed();
  ut_random(in, 32, &seed);
  OK(ut_put(rt, d, 0, in, sizeof in));
  hrx_graph *g = NULL;
  OK(hrx_graph_create(rt, &g));
  hrx_view v = hrx_view_whole(d);
  OK(hrx_graph_dispatch(g, k, &v, 1, NULL, 0, NULL));
  hrx_prepared *p = NULL;
  OK(hrx_graph_prepare(g, &p));
  OK(run_once(p));
  OK(ut_get(rt, d, 0, out, sizeof out));
  for (int i = 0; i < 32; i++) cr_assert_float_eq(out[i], 2.0f * in[i], 0, "element %d", i);
  OK(hrx_runtime_health(rt));
  hrx_prepared_release(p);
  hrx_kernel_release(k);
  hrx_buffer_release(d);
  hrx_runtime_release(rt);
}

/* A scoped callback that owns a cuBLAS handle and stream (its captured resources). */
typedef struct gemm_state {
  cublasHandle_t handle;
  cudaStream_t stream;
  int n;
  atomic_int destroyed;
} gemm_state;

static hrx_status gemm_cb(const hrx_callback_view *v, size_t count, void *user) {
  gemm_state *st = user;
  if (count != 3) return HRX_E_INVALID;
  const float one = 1.0f, zero = 0.0f;
  if (cublasSgemm(st->handle, CUBLAS_OP_N, CUBLAS_OP_N, st->n, st->n, st->n, &one,
                  (const float *)v[0].address, st->n, (const float *)v[1].address, st->n, &zero,
                  (float *)v[2].address, st->n) != CUBLAS_STATUS_SUCCESS)
    return HRX_E_CUDA;
  /* The contract: synchronize every stream that touched the views before returning. */
  return cudaStreamSynchronize(st->stream) == cudaSuccess ? HRX_OK : HRX_E_CUDA;
}

static void gemm_destroy(void *user) {
  gemm_state *st = user;
  cublasDestroy(st->handle);
  cudaStreamDestroy(st->stream);
  atomic_fetch_add(&st->destroyed, 1);
}

Test(hrx_gpu, scoped_cublas) {
  RUNTIME(rt, 1);
  enum { N = 64 };
  static gemm_state st;
  st.n = N;
  atomic_store(&st.destroyed, 0);
  cr_assert_eq(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking), cudaSuccess);
  cr_assert_eq(cublasCreate(&st.handle), CUBLAS_STATUS_SUCCESS);
  cr_assert_eq(cublasSetStream(st.handle, st.stream), CUBLAS_STATUS_SUCCESS);
  cr_assert_eq(cublasSetMathMode(st.handle, CUBLAS_PEDANTIC_MATH), CUBLAS_STATUS_SUCCESS);
  static float a[N * N], b[N * N], c[N * N];
  unsigned seed = ut_seed();
  ut_random(a, N * N, &seed);
  ut_random(b, N * N, &seed);
  hrx_buffer *ha = buffer(rt, HRX_MEMORY_HOST_VISIBLE, sizeof a);
  hrx_buffer *hb = buffer(rt, HRX_MEMORY_HOST_VISIBLE, sizeof b);
  hrx_buffer *hc = buffer(rt, HRX_MEMORY_HOST_VISIBLE, sizeof c);
  hrx_buffer *da = buffer(rt, HRX_MEMORY_DEVICE, sizeof a);
  hrx_buffer *db = buffer(rt, HRX_MEMORY_DEVICE, sizeof b);
  hrx_buffer *dc = buffer(rt, HRX_MEMORY_DEVICE, sizeof c);
  OK(ut_put(rt, ha, 0, a, sizeof a));
  OK(ut_put(rt, hb, 0, b, sizeof b));
  hrx_graph *g = NULL;
  OK(hrx_graph_create(rt, &g));
  OK(hrx_graph_copy(g, hrx_view_whole(da), hrx_view_whole(ha), NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(db), hrx_view_whole(hb), NULL));
  hrx_binding bind[3] = {{hrx_view_whole(da), HRX_ACCESS_READ},
                         {hrx_view_whole(db), HRX_ACCESS_READ},
                         {hrx_view_whole(dc), HRX_ACCESS_WRITE}};
  OK(hrx_graph_scoped(g, bind, 3, gemm_cb, &st, gemm_destroy, NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(hc), hrx_view_whole(dc), NULL));
  hrx_prepared *p = NULL;
  OK(hrx_graph_prepare(g, &p));
  cr_assert_eq(hrx_prepared_regions(p), 3u, "upload, scoped, download");
  OK(run_once(p));
  OK(run_once(p));
  OK(ut_get(rt, hc, 0, c, sizeof c));
  for (int j = 0; j < N; j++)
    for (int i = 0; i < N; i++) {
      double r = 0;
      for (int l = 0; l < N; l++) r += (double)a[l * N + i] * b[j * N + l];
      cr_assert(fabs(c[j * N + i] - r) < 1e-4 * (1 + fabs(r)), "c(%d,%d) = %g, reference %g", i,
                j, c[j * N + i], r);
    }
  cr_assert_eq(hrx_buffer_last_writer(dc), HRX_WRITER_GPU);
  hrx_prepared_release(p);
  cr_assert_eq(atomic_load(&st.destroyed), 1, "resources released with the graph");
  hrx_buffer_release(ha);
  hrx_buffer_release(hb);
  hrx_buffer_release(hc);
  hrx_buffer_release(da);
  hrx_buffer_release(db);
  hrx_buffer_release(dc);
  hrx_runtime_release(rt);
}

/* An update in place rewrites memset, memcpy and kernel nodes in the executable itself. */
Test(hrx_gpu, update_in_place_sets_every_node_kind) {
  RUNTIME(rt, 1);
  enum { B = 4096 };
  hrx_buffer *d[4], *h[2];
  for (int i = 0; i < 4; i++) d[i] = buffer(rt, HRX_MEMORY_DEVICE, B);
  for (int i = 0; i < 2; i++) h[i] = buffer(rt, HRX_MEMORY_HOST_VISIBLE, B);
  hrx_prepared *p = NULL;
  hrx_counters k0, k1;
  for (int round = 0; round < 2; round++) {
    hrx_buffer *src = d[2 * round], *dst = d[2 * round + 1], *host = h[round];
    uint8_t v = round ? 0x5a : 0x11, w = round ? 0xc3 : 0x22;
    hrx_graph *g = NULL;
    OK(hrx_graph_create(rt, &g));
    OK(hrx_graph_fill(g, hrx_view_whole(src), v, NULL));                      /* memset node */
    OK(hrx_graph_copy(g, hrx_view_whole(dst), hrx_view_whole(src), NULL));    /* memcpy node */
    OK(hrx_graph_fill(g, hrx_view_make(host, 16, B - 32), w, NULL));          /* fill kernel */
    if (round == 0) {
      OK(hrx_graph_prepare(g, &p));
      cr_assert_eq(hrx_prepared_regions(p), 1u);
      OK(hrx_runtime_counters(rt, &k0));
    } else {
      hrx_update_mode mode = HRX_UPDATE_REINSTANTIATED;
      OK(hrx_prepared_update(p, g, 0, &mode));
      cr_assert_eq(mode, HRX_UPDATE_IN_PLACE);
      OK(hrx_runtime_counters(rt, &k1));
      cr_assert_eq(k1.native_graphs_updated - k0.native_graphs_updated, 1u);
      cr_assert_eq(k1.native_graphs_prepared, k0.native_graphs_prepared, "not re-instantiated");
    }
    OK(run_once(p));
    static unsigned char out[B];
    OK(ut_get(rt, dst, 0, out, B));
    for (int i = 0; i < B; i++) cr_assert_eq(out[i], v, "round %d: copied byte %d", round, i);
    OK(ut_get(rt, host, 0, out, B));
    for (int i = 0; i < B; i++) {
      unsigned char want = i >= 16 && i < B - 16 ? w : 0;
      cr_assert_eq(out[i], want, "round %d: filled byte %d is 0x%02x", round, i, out[i]);
    }
  }
  /* The first round's buffers were not written by the second run. */
  static unsigned char first[B];
  OK(ut_get(rt, d[1], 0, first, B));
  cr_assert_eq(first[B - 1], 0x11);
  hrx_prepared_release(p);
  for (int i = 0; i < 4; i++) hrx_buffer_release(d[i]);
  for (int i = 0; i < 2; i++) hrx_buffer_release(h[i]);
  hrx_runtime_release(rt);
}

/* ---- captured operations ---- */

/* A captured cuBLAS product C = A B (column-major n x n, bindings A, B, C and cuBLAS's
 * workspace), with counters of its captures and of its destroy calls. */
typedef struct capture_gemm {
  cublasHandle_t handle;
  int n;
  int fail; /* 1: return HRX_E_CALLBACK; 2: synchronize the stream, which capture forbids */
  atomic_int calls;
  atomic_int destroyed;
} capture_gemm;

enum { GEMM_N = 64, GEMM_WORKSPACE = 4 << 20 };

static hrx_status capture_gemm_fn(const hrx_callback_view *v, size_t count, void *stream,
                                  void *user) {
  capture_gemm *st = user;
  atomic_fetch_add(&st->calls, 1);
  if (count != 4) return HRX_E_INVALID;
  if (st->fail == 1) return HRX_E_CALLBACK;
  if (st->fail == 2) {
    cudaStreamSynchronize((cudaStream_t)stream); /* fails and invalidates the capture */
    return HRX_OK;
  }
  /* cublasSetStream resets the workspace to cuBLAS's default pool; the declared one keeps
   * allocations out of the capture and is ordered by hrx like any written buffer. */
  const float one = 1.0f, zero = 0.0f;
  if (cublasSetStream(st->handle, (cudaStream_t)stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetWorkspace(st->handle, v[3].address, v[3].length) != CUBLAS_STATUS_SUCCESS ||
      cublasSgemm(st->handle, CUBLAS_OP_N, CUBLAS_OP_N, st->n, st->n, st->n, &one,
                  (const float *)v[0].address, st->n, (const float *)v[1].address, st->n, &zero,
                  (float *)v[2].address, st->n) != CUBLAS_STATUS_SUCCESS)
    return HRX_E_CUDA;
  return HRX_OK;
}

static void capture_gemm_destroy(void *user) {
  capture_gemm *st = user;
  atomic_fetch_add(&st->destroyed, 1);
}

static void capture_gemm_init(capture_gemm *st) {
  memset(st, 0, sizeof *st);
  st->n = GEMM_N;
  cr_assert_eq(cublasCreate(&st->handle), CUBLAS_STATUS_SUCCESS);
  cr_assert_eq(cublasSetMathMode(st->handle, CUBLAS_PEDANTIC_MATH), CUBLAS_STATUS_SUCCESS);
}

/* One product's operands and their host values. */
typedef struct gemm_io {
  hrx_buffer *a, *b, *c;
  float ha[GEMM_N * GEMM_N], hb[GEMM_N * GEMM_N];
} gemm_io;

static void gemm_io_init(hrx_runtime *rt, gemm_io *io) {
  size_t bytes = sizeof io->ha;
  io->a = buffer(rt, HRX_MEMORY_DEVICE, bytes);
  io->b = buffer(rt, HRX_MEMORY_DEVICE, bytes);
  io->c = buffer(rt, HRX_MEMORY_DEVICE, bytes);
  unsigned seed = ut_seed();
  ut_random(io->ha, GEMM_N * GEMM_N, &seed);
  ut_random(io->hb, GEMM_N * GEMM_N, &seed);
  OK(ut_put(rt, io->a, 0, io->ha, bytes));
  OK(ut_put(rt, io->b, 0, io->hb, bytes));
}

static void gemm_io_release(gemm_io *io) {
  hrx_buffer_release(io->a);
  hrx_buffer_release(io->b);
  hrx_buffer_release(io->c);
}

/* A kernel, the captured product, a kernel: A += 1; C = A B; C += 1, all on the compute lane. */
static hrx_graph *gemm_graph(hrx_runtime *rt, hrx_kernel *add, capture_gemm *st, gemm_io *io,
                             hrx_buffer *ws) {
  hrx_graph *g = NULL;
  OK(hrx_graph_create(rt, &g));
  hrx_view va = hrx_view_whole(io->a), vc = hrx_view_whole(io->c);
  OK(hrx_graph_dispatch(g, add, &va, 1, NULL, 0, NULL));
  hrx_binding bind[4] = {{va, HRX_ACCESS_READ},
                         {hrx_view_whole(io->b), HRX_ACCESS_READ},
                         {vc, HRX_ACCESS_WRITE},
                         {hrx_view_whole(ws), HRX_ACCESS_READ_WRITE}};
  size_t index = 0;
  OK(hrx_graph_captured(g, bind, 4, capture_gemm_fn, st, capture_gemm_destroy, &index));
  cr_assert_eq(index, 1u);
  OK(hrx_graph_dispatch(g, add, &vc, 1, NULL, 0, NULL));
  return g;
}

/* Checks C = (A + 1) B + 1 against a double reference (A, B as uploaded). */
static void gemm_check(hrx_runtime *rt, const gemm_io *io) {
  enum { N = GEMM_N };
  static float c[N * N];
  OK(ut_get(rt, io->c, 0, c, sizeof c));
  for (int j = 0; j < N; j++)
    for (int i = 0; i < N; i++) {
      double r = 1;
      for (int l = 0; l < N; l++) r += ((double)io->ha[l * N + i] + 1) * io->hb[j * N + l];
      cr_assert(fabs(c[j * N + i] - r) < 1e-4 * (1 + fabs(r)), "c(%d,%d) = %g, reference %g", i,
                j, c[j * N + i], r);
    }
}

Test(hrx_gpu, captured_cublas_in_one_region_and_updated_in_place) {
  RUNTIME(rt, 1);
  static capture_gemm st;
  capture_gemm_init(&st);
  hrx_kernel *add = NULL;
  OK(ut_kernel(rt, "add", GEMM_N * GEMM_N, 1.0f, &add));
  hrx_buffer *ws = buffer(rt, HRX_MEMORY_DEVICE, GEMM_WORKSPACE);
  static gemm_io io1, io2;
  gemm_io_init(rt, &io1);
  gemm_io_init(rt, &io2);
  hrx_counters k0, k1, k2, k3;
  OK(hrx_runtime_counters(rt, &k0));
  hrx_prepared *p = NULL;
  OK(hrx_graph_prepare(gemm_graph(rt, add, &st, &io1, ws), &p));
  cr_assert_eq(hrx_prepared_regions(p), 1u, "kernel, captured product, kernel: one native graph");
  size_t deps[4], nd = 0;
  OK(hrx_prepared_operation_deps(p, 1, deps, 4, &nd));
  cr_assert(nd == 1 && deps[0] == 0, "the product waits for the kernel that writes A");
  OK(hrx_prepared_operation_deps(p, 2, deps, 4, &nd));
  cr_assert(nd == 1 && deps[0] == 1, "the last kernel waits for the product that writes C");
  cr_assert_eq(atomic_load(&st.calls), 1, "captured once, when prepared");
  OK(hrx_runtime_counters(rt, &k1));
  cr_assert_eq(k1.native_graphs_prepared - k0.native_graphs_prepared, 1u);
  OK(run_once(p));
  gemm_check(rt, &io1);
  cr_assert_eq(atomic_load(&st.calls), 1, "a run does not call the capture function");

  /* New buffers, same structure: updated in place, the product captured again. */
  hrx_update_mode mode = HRX_UPDATE_REINSTANTIATED;
  OK(hrx_prepared_update(p, gemm_graph(rt, add, &st, &io2, ws), 0, &mode));
  cr_assert_eq(mode, HRX_UPDATE_IN_PLACE);
  cr_assert_eq(atomic_load(&st.calls), 2);
  cr_assert_eq(atomic_load(&st.destroyed), 1, "the replaced operation's user data is released");
  OK(hrx_runtime_counters(rt, &k2));
  cr_assert_eq(k2.native_graphs_updated - k1.native_graphs_updated, 1u, "counted as updated");
  cr_assert_eq(k2.native_graphs_prepared, k1.native_graphs_prepared, "not re-instantiated");
  OK(run_once(p));
  gemm_check(rt, &io2);
  gemm_check(rt, &io1); /* the first operands' product was not touched */

  /* The same views and user data again: nothing changed, nothing is captured. The first
   * kernel's constant changes so the region is rewritten without the product. */
  hrx_graph *g = NULL;
  OK(hrx_graph_create(rt, &g));
  hrx_view va = hrx_view_whole(io2.a), vc = hrx_view_whole(io2.c);
  hrx_constant zero = {.size = 4, .value.f32 = 0.0f};
  OK(hrx_graph_dispatch(g, add, &va, 1, &zero, 1, NULL));
  hrx_binding bind[4] = {{va, HRX_ACCESS_READ},
                         {hrx_view_whole(io2.b), HRX_ACCESS_READ},
                         {vc, HRX_ACCESS_WRITE},
                         {hrx_view_whole(ws), HRX_ACCESS_READ_WRITE}};
  OK(hrx_graph_captured(g, bind, 4, capture_gemm_fn, &st, capture_gemm_destroy, NULL));
  OK(hrx_graph_dispatch(g, add, &vc, 1, NULL, 0, NULL));
  OK(hrx_prepared_update(p, g, 0, &mode));
  cr_assert_eq(mode, HRX_UPDATE_IN_PLACE);
  cr_assert_eq(atomic_load(&st.calls), 2, "an unchanged captured operation is not captured again");
  OK(hrx_runtime_counters(rt, &k3));
  cr_assert_eq(k3.native_graphs_updated - k2.native_graphs_updated, 1u);
  cr_assert_eq(k3.native_graphs_prepared, k2.native_graphs_prepared);
  OK(run_once(p)); /* A is already A + 1 from the run before, and this run adds 0 */
  gemm_check(rt, &io2);
  cr_assert_eq(hrx_buffer_last_writer(io2.c), HRX_WRITER_GPU);
  hrx_prepared_release(p);
  cr_assert_eq(atomic_load(&st.destroyed), 3, "every operation's user data released once");
  gemm_io_release(&io1);
  gemm_io_release(&io2);
  hrx_buffer_release(ws);
  hrx_kernel_release(add);
  cublasDestroy(st.handle);
  hrx_runtime_release(rt);
}

/* kernel, keyed captured product, kernel over io's buffers. */
static hrx_graph *keyed_graph(hrx_runtime *rt, hrx_kernel *add, capture_gemm *st, gemm_io *io,
                              hrx_buffer *ws, const char *key) {
  hrx_graph *g = NULL;
  OK(hrx_graph_create(rt, &g));
  hrx_view va = hrx_view_whole(io->a), vc = hrx_view_whole(io->c);
  OK(hrx_graph_dispatch(g, add, &va, 1, NULL, 0, NULL));
  hrx_binding bind[4] = {{va, HRX_ACCESS_READ},
                         {hrx_view_whole(io->b), HRX_ACCESS_READ},
                         {vc, HRX_ACCESS_WRITE},
                         {hrx_view_whole(ws), HRX_ACCESS_READ_WRITE}};
  OK(hrx_graph_captured_keyed(g, bind, 4, capture_gemm_fn, st, capture_gemm_destroy, key,
                              strlen(key), NULL));
  OK(hrx_graph_dispatch(g, add, &vc, 1, NULL, 0, NULL));
  return g;
}

Test(hrx_gpu, captured_keyed_same_work_is_not_captured_again) {
  RUNTIME(rt, 1);
  static capture_gemm st1, st2;
  capture_gemm_init(&st1);
  capture_gemm_init(&st2);
  hrx_kernel *add = NULL;
  OK(ut_kernel(rt, "add", GEMM_N * GEMM_N, 1.0f, &add));
  hrx_buffer *ws = buffer(rt, HRX_MEMORY_DEVICE, GEMM_WORKSPACE);
  static gemm_io io;
  gemm_io_init(rt, &io);
  hrx_prepared *p = NULL;
  OK(hrx_graph_prepare(keyed_graph(rt, add, &st1, &io, ws, "gemm 64"), &p));
  cr_assert_eq(atomic_load(&st1.calls), 1);
  OK(run_once(p));
  gemm_check(rt, &io);
  /* Other user data, the same key and views: the same work, kept as it is. */
  hrx_update_mode mode = HRX_UPDATE_REINSTANTIATED;
  hrx_counters k0, k1;
  OK(hrx_runtime_counters(rt, &k0));
  OK(hrx_prepared_update(p, keyed_graph(rt, add, &st2, &io, ws, "gemm 64"), 0, &mode));
  cr_assert_eq(mode, HRX_UPDATE_UNCHANGED);
  cr_assert_eq(atomic_load(&st2.calls), 0, "the same key is not captured again");
  cr_assert_eq(atomic_load(&st2.destroyed), 1, "the builder's user data is dropped with it");
  OK(hrx_runtime_counters(rt, &k1));
  cr_assert_eq(k1.native_graphs_updated, k0.native_graphs_updated);
  /* Another key: captured again, updated in place. */
  OK(hrx_prepared_update(p, keyed_graph(rt, add, &st2, &io, ws, "gemm 64 again"), 0, &mode));
  cr_assert_eq(mode, HRX_UPDATE_IN_PLACE);
  cr_assert_eq(atomic_load(&st2.calls), 1);
  OK(run_once(p));
  hrx_prepared_release(p);
  cr_assert_eq(atomic_load(&st1.destroyed), 1);
  cr_assert_eq(atomic_load(&st2.destroyed), 2);
  gemm_io_release(&io);
  hrx_buffer_release(ws);
  hrx_kernel_release(add);
  cublasDestroy(st1.handle);
  cublasDestroy(st2.handle);
  hrx_runtime_release(rt);
}

Test(hrx_gpu, captured_failures_fail_prepare_and_update) {
  RUNTIME(rt, 1);
  static capture_gemm st;
  capture_gemm_init(&st);
  hrx_kernel *add = NULL;
  OK(ut_kernel(rt, "add", GEMM_N * GEMM_N, 1.0f, &add));
  hrx_buffer *ws = buffer(rt, HRX_MEMORY_DEVICE, GEMM_WORKSPACE);
  static gemm_io io1, io2;
  gemm_io_init(rt, &io1);
  gemm_io_init(rt, &io2);
  hrx_prepared *p = NULL;
  /* The function's failure is the prepare's, naming the operation; the builder is kept. */
  st.fail = 1;
  hrx_graph *g = gemm_graph(rt, add, &st, &io1, ws);
  hrx_status s = hrx_graph_prepare(g, &p);
  cr_assert_eq(s, HRX_E_CALLBACK, "%s", hrx_last_error());
  cr_assert(strstr(hrx_last_error(), "captured operation 1"), "%s", hrx_last_error());
  cr_assert_null(p);
  cr_assert_eq(hrx_graph_size(g), 3u, "the builder is untouched");
  /* Breaking the capture itself (a synchronization) is a CUDA error of the prepare. */
  st.fail = 2;
  s = hrx_graph_prepare(g, &p);
  cr_assert_eq(s, HRX_E_CUDA, "%s", hrx_last_error());
  cr_assert(strstr(hrx_last_error(), "captured operation 1"), "%s", hrx_last_error());
  cr_assert_eq(atomic_load(&st.destroyed), 0, "the builder still owns its operation");
  /* Neither failure left the capture stream capturing: the same builder now prepares. */
  st.fail = 0;
  OK(hrx_graph_prepare(g, &p));
  cr_assert_eq(hrx_prepared_regions(p), 1u);
  OK(run_once(p));
  gemm_check(rt, &io1);
  /* A failed update leaves the prepared graph as it was, and it still runs correctly. */
  st.fail = 1;
  g = gemm_graph(rt, add, &st, &io2, ws);
  s = hrx_prepared_update(p, g, 0, NULL);
  cr_assert_eq(s, HRX_E_CALLBACK, "%s", hrx_last_error());
  cr_assert(strstr(hrx_last_error(), "captured operation 1"), "%s", hrx_last_error());
  cr_assert_eq(hrx_prepared_quarantined(p), 0);
  hrx_graph_release(g);
  st.fail = 0;
  OK(run_once(p)); /* A += 1 again on the first operands: C = (A + 2) B + 1 */
  for (int i = 0; i < GEMM_N * GEMM_N; i++) io1.ha[i] += 1.0f;
  gemm_check(rt, &io1);
  /* A native region holding a captured operation fails as any native region: quarantined,
   * and what it writes (C, the workspace, A) is poisoned. */
  OK(hrx_runtime_inject_fault(rt, HRX_FAULT_NEXT_REGION));
  cr_assert_eq(run_once(p), HRX_E_DEVICE_LOST, "%s", hrx_last_error());
  cr_assert_eq(hrx_prepared_quarantined(p), 1);
  cr_assert_eq(hrx_buffer_check(io1.c), HRX_E_DEVICE_LOST);
  cr_assert_eq(hrx_buffer_check(ws), HRX_E_DEVICE_LOST);
  OK(hrx_buffer_check(io1.b));
  OK(hrx_runtime_health(rt));
  hrx_prepared_release(p);
  gemm_io_release(&io1);
  gemm_io_release(&io2);
  hrx_buffer_release(ws);
  hrx_kernel_release(add);
  cublasDestroy(st.handle);
  hrx_runtime_release(rt);
}

Test(hrx_gpu, injected_failure_quarantines_only_its_graph) {
  RUNTIME(rt, 1);
  enum { N = 1024 };
  hrx_kernel *add = NULL;
  OK(ut_kernel(rt, "add", N, 1.0f, &add));
  hrx_buffer *d[3];
  hrx_prepared *p[3];
  for (int i = 0; i < 3; i++) {
    d[i] = buffer(rt, HRX_MEMORY_DEVICE, N * 4);
    hrx_graph *g = NULL;
    OK(hrx_graph_create(rt, &g));
    hrx_view v = hrx_view_whole(d[i]);
    for (int j = 0; j < 10; j++) OK(hrx_graph_dispatch(g, add, &v, 1, NULL, 0, NULL));
    OK(hrx_graph_prepare(g, &p[i]));
  }
  OK(hrx_runtime_inject_fault(rt, HRX_FAULT_NEXT_REGION));
  hrx_completion *c[3];
  for (int i = 0; i < 3; i++) OK(hrx_submit(p[i], &c[i]));
  hrx_status s0 = hrx_completion_wait(c[0], WAIT);
  cr_assert_eq(s0, HRX_E_DEVICE_LOST, "%s", hrx_last_error());
  for (int i = 1; i < 3; i++) OK(hrx_completion_wait(c[i], WAIT));
  cr_assert_eq(hrx_prepared_quarantined(p[0]), 1);
  cr_assert_eq(hrx_prepared_quarantined(p[1]) + hrx_prepared_quarantined(p[2]), 0);
  /* Later independent graphs keep running; their values are right. */
  for (int i = 1; i < 3; i++) {
    hrx_completion_release(c[i]);
    OK(run_once(p[i]));
    float out[N];
    OK(ut_get(rt, d[i], 0, out, sizeof out));
    for (int j = 0; j < N; j++) cr_assert_float_eq(out[j], 20.0f, 0, "graph %d element %d", i, j);
  }
  hrx_completion_release(c[0]);
  OK(hrx_runtime_health(rt));
  for (int i = 0; i < 3; i++) {
    hrx_prepared_release(p[i]);
    hrx_buffer_release(d[i]);
  }
  hrx_kernel_release(add);
  hrx_runtime_release(rt);
}

Test(hrx_gpu, three_lanes_at_once) {
  RUNTIME(rt, 2);
  enum { B = 8 << 20, N = B / 4 };
  hrx_buffer *hu = buffer(rt, HRX_MEMORY_HOST_VISIBLE, B);
  hrx_buffer *du = buffer(rt, HRX_MEMORY_DEVICE, B);
  hrx_buffer *dd = buffer(rt, HRX_MEMORY_DEVICE, B);
  hrx_buffer *hd = buffer(rt, HRX_MEMORY_HOST_VISIBLE, B);
  hrx_buffer *dc = buffer(rt, HRX_MEMORY_DEVICE, B);
  hrx_kernel *add = NULL;
  OK(ut_kernel(rt, "add", N, 1.0f, &add));
  hrx_graph *g = NULL;
  hrx_prepared *up, *down, *comp;
  OK(hrx_graph_create(rt, &g));
  OK(hrx_graph_fill(g, hrx_view_whole(dd), 0x3f, NULL));
  hrx_prepared *init = NULL;
  OK(hrx_graph_prepare(g, &init));
  OK(run_once(init));
  OK(hrx_graph_create(rt, &g));
  OK(hrx_graph_copy(g, hrx_view_whole(du), hrx_view_whole(hu), NULL));
  OK(hrx_graph_prepare(g, &up));
  OK(hrx_graph_create(rt, &g));
  OK(hrx_graph_copy(g, hrx_view_whole(hd), hrx_view_whole(dd), NULL));
  OK(hrx_graph_prepare(g, &down));
  OK(hrx_graph_create(rt, &g));
  hrx_view v = hrx_view_whole(dc);
  for (int i = 0; i < 4; i++) OK(hrx_graph_dispatch(g, add, &v, 1, NULL, 0, NULL));
  OK(hrx_graph_prepare(g, &comp));
  hrx_completion *c[3];
  OK(hrx_submit(up, &c[0]));
  OK(hrx_submit(comp, &c[1]));
  OK(hrx_submit(down, &c[2]));
  for (int i = 0; i < 3; i++) {
    OK(hrx_completion_wait(c[i], WAIT));
    hrx_completion_release(c[i]);
  }
  unsigned char probe[4];
  OK(ut_get(rt, hd, B - 4, probe, 4));
  for (int i = 0; i < 4; i++) cr_assert_eq(probe[i], 0x3f);
  float f[4];
  OK(ut_get(rt, dc, 0, f, sizeof f));
  for (int i = 0; i < 4; i++) cr_assert_float_eq(f[i], 4.0f, 0);
  hrx_prepared_release(init);
  hrx_prepared_release(up);
  hrx_prepared_release(down);
  hrx_prepared_release(comp);
  hrx_kernel_release(add);
  hrx_buffer_release(hu);
  hrx_buffer_release(du);
  hrx_buffer_release(dd);
  hrx_buffer_release(hd);
  hrx_buffer_release(dc);
  hrx_runtime_release(rt);
}

Test(hrx_gpu, regions_are_ordered_on_the_gpu_with_events) {
  RUNTIME(rt, 1);
  enum { B = 64 << 20, N = B / 4 };
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, B);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, B);
  hrx_buffer *out = buffer(rt, HRX_MEMORY_HOST_VISIBLE, B);
  void *p = NULL;
  OK(hrx_buffer_map(h, HRX_ACCESS_WRITE, &p));
  for (size_t i = 0; i < N; i++) ((float *)p)[i] = (float)(i % 1000);
  OK(hrx_buffer_unmap(h, HRX_ACCESS_WRITE));
  hrx_kernel *add = NULL;
  OK(ut_kernel(rt, "add", N, 1.0f, &add));
  hrx_graph *g = NULL;
  OK(hrx_graph_create(rt, &g));
  OK(hrx_graph_copy(g, hrx_view_whole(d), hrx_view_whole(h), NULL));   /* upload */
  hrx_view v = hrx_view_whole(d);
  for (int i = 0; i < 20; i++) OK(hrx_graph_dispatch(g, add, &v, 1, NULL, 0, NULL)); /* compute */
  OK(hrx_graph_copy(g, hrx_view_whole(out), v, NULL));                 /* download */
  hrx_prepared *pg = NULL;
  OK(hrx_graph_prepare(g, &pg));
  cr_assert_eq(hrx_prepared_regions(pg), 3u);
  hrx_counters k0, k1;
  OK(hrx_runtime_counters(rt, &k0));
  OK(run_once(pg));
  OK(hrx_runtime_counters(rt, &k1));
  /* The compute region was issued while the 64 MiB upload ran, and the download while the
   * kernels ran: both dependencies were kept on the GPU. */
  cr_assert_eq(k1.gpu_event_waits - k0.gpu_event_waits, 2u, "event waits: %llu",
               (unsigned long long)(k1.gpu_event_waits - k0.gpu_event_waits));
  OK(hrx_buffer_map(out, HRX_ACCESS_READ, &p));
  for (size_t i = 0; i < N; i += 4099)
    cr_assert_float_eq(((float *)p)[i], (float)(i % 1000) + 20.0f, 0, "element %zu", i);
  OK(hrx_buffer_unmap(out, HRX_ACCESS_READ));
  hrx_prepared_release(pg);
  hrx_kernel_release(add);
  hrx_buffer_release(h);
  hrx_buffer_release(d);
  hrx_buffer_release(out);
  hrx_runtime_release(rt);
}
