/* hrx GPU benchmark (CUDA engine):
 *  1. replaying a prepared 1000-node chain of tiny kernels, per node, against launching the
 *     same kernels one by one on a stream and against a raw captured CUDA graph;
 *  2. hrx_prepared_update in place (cudaGraphExecUpdate) against re-instantiation;
 *  3. upload, compute and download lanes submitted together against one after another.
 * Every figure is the median of several timed repetitions after a warm-up; results are
 * checked. Usage: hrx_bench [nodes]. Exit 77 where no CUDA device is present. */
#include <hrx.h>

#include <cuda_runtime_api.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(expr)                                                                                 \
  do {                                                                                           \
    hrx_status s_ = (expr);                                                                      \
    if (s_ != HRX_OK) {                                                                          \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, hrx_last_error());           \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)
#define CU(expr)                                                                                 \
  do {                                                                                           \
    cudaError_t e_ = (expr);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_));     \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static const char kSource[] =
    "extern \"C\" __global__ void tiny(float *x, float c) { x[threadIdx.x] += c; }\n"
    "extern \"C\" __global__ void spin(float *x, int iters) {\n"
    "  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  float v = x[i];\n"
    "  for (int k = 0; k < iters; k++) v = v * 0.999f + 0.001f;\n"
    "  x[i] = v;\n"
    "}\n";

static void wait_ok(hrx_completion *c) {
  CK(hrx_completion_wait(c, HRX_WAIT_FOREVER));
  hrx_completion_release(c);
}

static void run(hrx_prepared *p) {
  hrx_completion *c = NULL;
  CK(hrx_submit(p, &c));
  wait_ok(c);
}

static hrx_graph *chain_graph(hrx_runtime *rt, hrx_kernel *k, hrx_buffer *b, int nodes, float c) {
  hrx_graph *g = NULL;
  CK(hrx_graph_create(rt, &g));
  hrx_view v = hrx_view_whole(b);
  hrx_constant cc = {.size = 4, .value.f32 = c};
  for (int i = 0; i < nodes; i++) CK(hrx_graph_dispatch(g, k, &v, 1, &cc, 1, NULL));
  return g;
}

/* Compiles the benchmark's kernels for the stream-launch baseline. */
static cudaKernel_t load_raw(const char *name, cudaLibrary_t *lib) {
  int major = 0, minor = 0;
  CU(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  CU(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  char arch[32];
  snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
  const char *opts[1] = {arch};
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, kSource, "bench.cu", 0, NULL, NULL) != NVRTC_SUCCESS ||
      nvrtcCompileProgram(prog, 1, opts) != NVRTC_SUCCESS) {
    fprintf(stderr, "nvrtc failed\n");
    exit(1);
  }
  size_t n = 0;
  nvrtcGetCUBINSize(prog, &n);
  char *cubin = malloc(n);
  nvrtcGetCUBIN(prog, cubin);
  nvrtcDestroyProgram(&prog);
  CU(cudaLibraryLoadData(lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
  free(cubin);
  cudaKernel_t k;
  CU(cudaLibraryGetKernel(&k, *lib, name));
  return k;
}

int main(int argc, char **argv) {
  int nodes = argc > 1 ? atoi(argv[1]) : 1000;
  if (nodes < 1) nodes = 1000;
  hrx_runtime_options o;
  hrx_runtime_options_init(&o);
  o.engine = HRX_ENGINE_CUDA;
  o.graph_slots = 2;
  hrx_runtime *rt = NULL;
  hrx_status st = hrx_runtime_create(&o, &rt);
  if (st == HRX_E_NO_DEVICE || st == HRX_E_UNSUPPORTED) {
    printf("hrx_bench: skipped (%s)\n", hrx_last_error());
    return 77;
  }
  CK(st);
  struct cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, 0));
  printf("hrx_bench on %s (sm_%d%d), %d-node chains\n", prop.name, prop.major, prop.minor, nodes);

  /* ---- 1. chain replay ---- */
  hrx_binding_contract bc = {HRX_ACCESS_READ_WRITE, 4, 256 * sizeof(float)};
  hrx_constant c1 = {.size = 4, .value.f32 = 1.0f};
  hrx_kernel_contract kc = {&bc, 1, &c1, 1};
  uint32_t grid[3] = {1, 1, 1}, block[3] = {256, 1, 1};
  hrx_kernel *tiny = NULL;
  CK(hrx_kernel_create_source(rt, kSource, "tiny", NULL, 0, &kc, grid, block, &tiny));
  hrx_buffer *a = NULL, *b = NULL, *h = NULL;
  CK(hrx_buffer_create(rt, HRX_MEMORY_DEVICE, 256 * sizeof(float), &a));
  CK(hrx_buffer_create(rt, HRX_MEMORY_DEVICE, 256 * sizeof(float), &b));
  CK(hrx_buffer_create(rt, HRX_MEMORY_HOST_VISIBLE, 256 * sizeof(float), &h));
  hrx_graph *g = chain_graph(rt, tiny, a, nodes, 1.0f);
  double t0 = now_us();
  hrx_prepared *chain = NULL;
  CK(hrx_graph_prepare(g, &chain));
  double prep_us = now_us() - t0;
  enum { WARM = 5, REPS = 30 };
  double samples[REPS];
  for (int i = 0; i < WARM; i++) run(chain);
  for (int i = 0; i < REPS; i++) {
    t0 = now_us();
    run(chain);
    samples[i] = now_us() - t0;
  }
  double replay_us = median(samples, REPS);
  /* Back to back: two runs in flight (two slots), so the host's submit and wait overlap the
   * device's work; ordered on the GPU by events as the runs conflict. */
  enum { PIPE = 20 };
  for (int r = 0; r < 5; r++) {
    t0 = now_us();
    hrx_completion *prev = NULL;
    for (int i = 0; i < PIPE; i++) {
      hrx_completion *c = NULL;
      CK(hrx_submit(chain, &c));
      if (prev) wait_ok(prev);
      prev = c;
    }
    wait_ok(prev);
    samples[r] = (now_us() - t0) / PIPE;
  }
  double pipe_us = median(samples, 5);
  /* Check: every replay added `nodes` to each element. */
  hrx_graph *rg = NULL;
  CK(hrx_graph_create(rt, &rg));
  CK(hrx_graph_copy(rg, hrx_view_whole(h), hrx_view_whole(a), NULL));
  hrx_prepared *readback = NULL;
  CK(hrx_graph_prepare(rg, &readback));
  run(readback);
  float *hp = NULL;
  CK(hrx_buffer_map(h, HRX_ACCESS_READ, (void **)&hp));
  float want = (float)nodes * (WARM + REPS + 5 * PIPE);
  int chain_ok = hp[0] == want && hp[255] == want;
  CK(hrx_buffer_unmap(h, HRX_ACCESS_READ));

  /* Stream launches of the same kernel, and a raw captured graph, as baselines. */
  cudaLibrary_t lib;
  cudaKernel_t raw = load_raw("tiny", &lib);
  cudaStream_t s;
  CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *dx = NULL;
  CU(cudaMalloc((void **)&dx, 256 * sizeof(float)));
  float cval = 1.0f;
  void *args[2] = {&dx, &cval};
  dim3 g1 = {1, 1, 1}, b1 = {256, 1, 1};
  for (int w = 0; w < WARM; w++) {
    for (int i = 0; i < nodes; i++) CU(cudaLaunchKernel((const void *)raw, g1, b1, args, 0, s));
    CU(cudaStreamSynchronize(s));
  }
  for (int r = 0; r < REPS; r++) {
    t0 = now_us();
    for (int i = 0; i < nodes; i++) CU(cudaLaunchKernel((const void *)raw, g1, b1, args, 0, s));
    CU(cudaStreamSynchronize(s));
    samples[r] = now_us() - t0;
  }
  double stream_us = median(samples, REPS);
  cudaGraph_t cg;
  cudaGraphExec_t ce;
  CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < nodes; i++) CU(cudaLaunchKernel((const void *)raw, g1, b1, args, 0, s));
  CU(cudaStreamEndCapture(s, &cg));
  CU(cudaGraphInstantiate(&ce, cg, 0));
  for (int w = 0; w < WARM; w++) {
    CU(cudaGraphLaunch(ce, s));
    CU(cudaStreamSynchronize(s));
  }
  for (int r = 0; r < REPS; r++) {
    t0 = now_us();
    CU(cudaGraphLaunch(ce, s));
    CU(cudaStreamSynchronize(s));
    samples[r] = now_us() - t0;
  }
  double rawgraph_us = median(samples, REPS);
  for (int r = 0; r < 5; r++) {
    t0 = now_us();
    for (int i = 0; i < PIPE; i++) CU(cudaGraphLaunch(ce, s));
    CU(cudaStreamSynchronize(s));
    samples[r] = (now_us() - t0) / PIPE;
  }
  double rawpipe_us = median(samples, 5);

  /* ---- 2. update in place vs re-instantiation ---- */
  enum { UREPS = 10 };
  double upd[UREPS], inst[UREPS], rec[UREPS];
  int update_ok = 1;
  for (int r = 0; r < UREPS; r++) {
    t0 = now_us();
    hrx_graph *ng = chain_graph(rt, tiny, r % 2 ? a : b, nodes, (float)(r + 2));
    rec[r] = now_us() - t0;
    hrx_update_mode mode;
    t0 = now_us();
    CK(hrx_prepared_update(chain, ng, 0, &mode));
    upd[r] = now_us() - t0;
    update_ok &= mode == HRX_UPDATE_IN_PLACE;
    run(chain);
    ng = chain_graph(rt, tiny, r % 2 ? a : b, nodes, (float)(r + 2));
    t0 = now_us();
    CK(hrx_prepared_update(chain, ng, HRX_UPDATE_FORCE_REINSTANTIATE, &mode));
    inst[r] = now_us() - t0;
    update_ok &= mode == HRX_UPDATE_REINSTANTIATED;
    run(chain);
  }
  double upd_us = median(upd, UREPS), inst_us = median(inst, UREPS), rec_us = median(rec, UREPS);

  /* ---- 3. three lanes together vs one after another ---- */
  size_t bytes = (size_t)256 << 20, n = bytes / 4;
  hrx_buffer *hu, *du, *dd, *hd, *dc;
  CK(hrx_buffer_create(rt, HRX_MEMORY_HOST_VISIBLE, bytes, &hu));
  CK(hrx_buffer_create(rt, HRX_MEMORY_DEVICE, bytes, &du));
  CK(hrx_buffer_create(rt, HRX_MEMORY_DEVICE, bytes, &dd));
  CK(hrx_buffer_create(rt, HRX_MEMORY_HOST_VISIBLE, bytes, &hd));
  CK(hrx_buffer_create(rt, HRX_MEMORY_DEVICE, bytes, &dc));
  hrx_binding_contract sb = {HRX_ACCESS_READ_WRITE, 16, bytes};
  hrx_constant iters = {.size = 4, .value.i32 = 600};
  hrx_kernel_contract sk = {&sb, 1, &iters, 1};
  uint32_t sg[3] = {(uint32_t)(n / 256), 1, 1};
  hrx_kernel *spin = NULL;
  CK(hrx_kernel_create_source(rt, kSource, "spin", NULL, 0, &sk, sg, block, &spin));
  hrx_prepared *up, *comp, *down;
  CK(hrx_graph_create(rt, &g));
  CK(hrx_graph_copy(g, hrx_view_whole(du), hrx_view_whole(hu), NULL));
  CK(hrx_graph_prepare(g, &up));
  CK(hrx_graph_create(rt, &g));
  hrx_view vc = hrx_view_whole(dc);
  CK(hrx_graph_dispatch(g, spin, &vc, 1, NULL, 0, NULL));
  CK(hrx_graph_prepare(g, &comp));
  CK(hrx_graph_create(rt, &g));
  CK(hrx_graph_copy(g, hrx_view_whole(hd), hrx_view_whole(dd), NULL));
  CK(hrx_graph_prepare(g, &down));
  hrx_prepared *lanes[3] = {up, comp, down};
  double lane_us[3];
  for (int l = 0; l < 3; l++) {
    run(lanes[l]);
    for (int r = 0; r < 5; r++) {
      t0 = now_us();
      run(lanes[l]);
      samples[r] = now_us() - t0;
    }
    lane_us[l] = median(samples, 5);
  }
  double seq[5], par[5];
  for (int r = 0; r < 5; r++) {
    t0 = now_us();
    for (int l = 0; l < 3; l++) run(lanes[l]);
    seq[r] = now_us() - t0;
    t0 = now_us();
    hrx_completion *cs[3];
    for (int l = 0; l < 3; l++) CK(hrx_submit(lanes[l], &cs[l]));
    for (int l = 0; l < 3; l++) wait_ok(cs[l]);
    par[r] = now_us() - t0;
  }
  double seq_us = median(seq, 5), par_us = median(par, 5);
  hrx_counters k;
  CK(hrx_runtime_counters(rt, &k));

  /* ---- 4. round trip of a one-operation graph (submit to observed completion) ---- */
  double rt_us[2], rt_sub_us[2];
  for (int e = 0; e < 2; e++) {
    hrx_runtime *r2 = rt;
    if (e == 1) {
      hrx_runtime_options ho;
      hrx_runtime_options_init(&ho);
      CK(hrx_runtime_create(&ho, &r2));
    }
    hrx_buffer *fb = NULL;
    CK(hrx_buffer_create(r2, HRX_MEMORY_DEVICE, 256, &fb));
    hrx_graph *fg = NULL;
    CK(hrx_graph_create(r2, &fg));
    CK(hrx_graph_fill(fg, hrx_view_whole(fb), 7, NULL));
    hrx_prepared *fp = NULL;
    CK(hrx_graph_prepare(fg, &fp));
    for (int i = 0; i < 100; i++) run(fp);
    double sub = 0;
    for (int r = 0; r < 5; r++) {
      t0 = now_us();
      for (int i = 0; i < 200; i++) {
        double s0 = now_us();
        hrx_completion *c = NULL;
        CK(hrx_submit(fp, &c));
        sub += now_us() - s0;
        wait_ok(c);
      }
      samples[r] = (now_us() - t0) / 200;
    }
    rt_us[e] = median(samples, 5);
    rt_sub_us[e] = sub / 1000;
    hrx_prepared_release(fp);
    hrx_buffer_release(fb);
    if (e == 1) hrx_runtime_release(r2);
  }

  /* The same round trip in raw CUDA: one tiny kernel launched and the stream synchronized, and
   * a captured one-memset graph launched and synchronized (hrx's floor). */
  double raw_rt[2];
  cudaGraph_t mg;
  cudaGraphExec_t me;
  CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  CU(cudaMemsetAsync(dx, 7, 256, s));
  CU(cudaStreamEndCapture(s, &mg));
  CU(cudaGraphInstantiate(&me, mg, 0));
  for (int e = 0; e < 2; e++) {
    for (int r = 0; r < 6; r++) {
      t0 = now_us();
      for (int i = 0; i < 200; i++) {
        if (e == 0) CU(cudaLaunchKernel((const void *)raw, g1, b1, args, 0, s));
        else CU(cudaGraphLaunch(me, s));
        CU(cudaStreamSynchronize(s));
      }
      samples[r] = (now_us() - t0) / 200;
    }
    raw_rt[e] = median(samples + 1, 5);
  }
  CU(cudaGraphExecDestroy(me));
  CU(cudaGraphDestroy(mg));

  printf("\n%-58s %12s\n", "measure", "value");
  printf("%-58s %12.1f\n", "prepare (record excluded), us", prep_us);
  printf("%-58s %12.3f\n", "hrx replay of the chain, us/node (submit+wait)", replay_us / nodes);
  printf("%-58s %12.3f\n", "raw captured CUDA graph replay, us/node", rawgraph_us / nodes);
  printf("%-58s %12.3f\n", "hrx replay, two runs in flight, us/node", pipe_us / nodes);
  printf("%-58s %12.3f\n", "raw CUDA graph, 20 launches then one sync, us/node", rawpipe_us / nodes);
  printf("%-58s %12.3f\n", "stream launches (cudaLaunchKernel), us/node", stream_us / nodes);
  printf("%-58s %12s\n", "chain result check", chain_ok ? "ok" : "WRONG");
  printf("%-58s %12.1f\n", "builder recording of the chain, us", rec_us);
  printf("%-58s %12.1f\n", "update in place (cudaGraphExecUpdate), us", upd_us);
  printf("%-58s %12.1f\n", "re-instantiation, us", inst_us);
  printf("%-58s %12.3f\n", "update in place, us/node", upd_us / nodes);
  printf("%-58s %12.3f\n", "re-instantiation, us/node", inst_us / nodes);
  printf("%-58s %12s\n", "update modes as asked", update_ok ? "ok" : "WRONG");
  printf("%-58s %12.1f\n", "upload 256 MiB alone, us", lane_us[0]);
  printf("%-58s %12.1f\n", "compute alone, us", lane_us[1]);
  printf("%-58s %12.1f\n", "download 256 MiB alone, us", lane_us[2]);
  printf("%-58s %12.1f\n", "three lanes one after another, us", seq_us);
  printf("%-58s %12.1f\n", "three lanes submitted together, us", par_us);
  printf("%-58s %12.2f\n", "speedup (sequential / together)", seq_us / par_us);
  printf("%-58s %12.1f\n", "copy throughput together, GB/s", 2.0 * bytes / par_us * 1e-3);
  printf("%-58s %12.1f\n", "one-fill graph round trip, CUDA engine, us", rt_us[0]);
  printf("%-58s %12.1f\n", "  of which hrx_submit, us", rt_sub_us[0]);
  printf("%-58s %12.1f\n", "one-fill graph round trip, host engine, us", rt_us[1]);
  printf("%-58s %12.1f\n", "raw kernel launch + stream sync round trip, us", raw_rt[0]);
  printf("%-58s %12.1f\n", "raw one-memset graph launch + stream sync, us", raw_rt[1]);
  printf("%-58s %12llu\n", "native graphs prepared", (unsigned long long)k.native_graphs_prepared);
  printf("%-58s %12llu\n", "native graphs updated in place", (unsigned long long)k.native_graphs_updated);

  CU(cudaGraphExecDestroy(ce));
  CU(cudaGraphDestroy(cg));
  CU(cudaFree(dx));
  CU(cudaStreamDestroy(s));
  CU(cudaLibraryUnload(lib));
  for (int l = 0; l < 3; l++) hrx_prepared_release(lanes[l]);
  hrx_prepared_release(chain);
  hrx_prepared_release(readback);
  hrx_kernel_release(tiny);
  hrx_kernel_release(spin);
  hrx_buffer_release(a);
  hrx_buffer_release(b);
  hrx_buffer_release(h);
  hrx_buffer_release(hu);
  hrx_buffer_release(du);
  hrx_buffer_release(dd);
  hrx_buffer_release(hd);
  hrx_buffer_release(dc);
  hrx_runtime_release(rt);
  return chain_ok && update_ok ? 0 : 1;
}
