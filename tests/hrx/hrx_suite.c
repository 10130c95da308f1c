/* hrx's scheduling suite. Built twice: on the host engine (runs in CI) and on the CUDA engine
 * (skipped where no GPU is present), with HRX_TEST_ENGINE choosing which. */
#ifdef HRX_MINI_CRITERION
#include "mini_criterion.h" /* plain build for ThreadSanitizer */
#else
#include <criterion/criterion.h>
#endif

#include <stdatomic.h>

#include "hrx_test_util.h"

#define OK(expr) cr_assert_eq((expr), HRX_OK, "%s failed: %s", #expr, hrx_last_error())
#define ERR(expr, status, text)                                                                  \
  do {                                                                                           \
    hrx_status s_ = (expr);                                                                      \
    cr_assert_eq(s_, (status), "%s returned %s, wanted %s (%s)", #expr, hrx_status_name(s_),     \
                 hrx_status_name(status), hrx_last_error());                                     \
    cr_assert(strstr(hrx_last_error(), (text)) != NULL, "%s: message \"%s\" lacks \"%s\"", #expr, \
              hrx_last_error(), (text));                                                         \
  } while (0)
#define RUNTIME(rt, slots, cap)                                                                  \
  hrx_runtime *rt = NULL;                                                                        \
  do {                                                                                           \
    hrx_status s_ = ut_runtime((slots), (cap), &rt);                                             \
    if (s_ == HRX_E_NO_DEVICE) cr_skip_test("no CUDA device: %s", hrx_last_error());             \
    cr_assert_eq(s_, HRX_OK, "runtime: %s", hrx_last_error());                                   \
  } while (0)
#define WAIT 20000000000ull

#if HRX_TEST_ENGINE == HRX_ENGINE_HOST
#define SUITE hrx_host
#else
#define SUITE hrx_cuda
#endif

static hrx_buffer *buffer(hrx_runtime *rt, hrx_memory m, size_t bytes) {
  hrx_buffer *b = NULL;
  OK(hrx_buffer_create(rt, m, bytes, &b));
  return b;
}

static hrx_graph *graph(hrx_runtime *rt) {
  hrx_graph *g = NULL;
  OK(hrx_graph_create(rt, &g));
  return g;
}

static hrx_prepared *prepare(hrx_graph *g) {
  hrx_prepared *p = NULL;
  OK(hrx_graph_prepare(g, &p));
  return p;
}

/* A prepared graph holding one gated host callback over `v` with `access`. */
static hrx_prepared *gated(hrx_runtime *rt, ut_gate *gate, hrx_view v, hrx_access access) {
  hrx_graph *g = graph(rt);
  hrx_binding b = {v, access};
  OK(hrx_graph_host(g, &b, 1, ut_gate_cb, gate, NULL, NULL));
  return prepare(g);
}

/* A prepared graph holding one mark callback over `v`. */
static hrx_prepared *marker(hrx_runtime *rt, int mark, hrx_view v, hrx_access access) {
  hrx_graph *g = graph(rt);
  hrx_binding b = {v, access};
  OK(hrx_graph_host(g, &b, 1, ut_mark_cb, (void *)(intptr_t)mark, NULL, NULL));
  return prepare(g);
}

/* A captured operation's function that enqueues nothing (validation tests only). */
static hrx_status capture_nothing(const hrx_callback_view *v, size_t n, void *stream, void *user) {
  (void)v;
  (void)n;
  (void)stream;
  (void)user;
  return HRX_OK;
}

static atomic_int capture_destroyed;
static void capture_destroy(void *user) {
  (void)user;
  atomic_fetch_add(&capture_destroyed, 1);
}

static hrx_status run_once(hrx_prepared *p) {
  hrx_completion *c = NULL;
  hrx_status s = hrx_submit(p, &c);
  if (s != HRX_OK) return s;
  s = hrx_completion_wait(c, WAIT);
  hrx_completion_release(c);
  return s;
}

/* ---------------------------------------------------------------------------------------- */

Test(SUITE, runtime_options) {
  hrx_runtime_options o;
  hrx_runtime_options_init(&o);
  cr_assert_eq(o.graph_slots, 2u);
  hrx_runtime *rt = NULL;
  o.engine = HRX_ENGINE_NPU;
  ERR(hrx_runtime_create(&o, &rt), HRX_E_UNSUPPORTED, "NPU");
  o.engine = (hrx_engine)7;
  ERR(hrx_runtime_create(&o, &rt), HRX_E_INVALID, "unknown engine");
  o.engine = HRX_TEST_ENGINE;
  o.graph_slots = 0;
  ERR(hrx_runtime_create(&o, &rt), HRX_E_INVALID, "graph_slots");
  o.graph_slots = 1;
  o.capacity = 0;
  ERR(hrx_runtime_create(&o, &rt), HRX_E_INVALID, "capacity");
  cr_assert_null(rt);
  RUNTIME(r2, 1, 1);
  cr_assert_eq(hrx_runtime_engine(r2), HRX_TEST_ENGINE);
  hrx_counters c;
  OK(hrx_runtime_counters(r2, &c));
  cr_assert_eq(c.submissions + c.native_graphs_prepared + c.copy_streams_created + c.copied_bytes, 0u);
  OK(hrx_runtime_health(r2));
  ERR(hrx_runtime_inject_fault(r2, (hrx_fault)9), HRX_E_INVALID, "unknown fault");
  cr_assert_str_eq(hrx_status_name(HRX_E_BUSY), "HRX_E_BUSY");
  hrx_runtime_release(r2);
}

Test(SUITE, validation_errors) {
  RUNTIME(rt, 0, 0);
  RUNTIME(other, 0, 0);
  hrx_buffer *dev = buffer(rt, HRX_MEMORY_DEVICE, 1024);
  hrx_buffer *hv = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 1024);
  hrx_buffer *ho = buffer(rt, HRX_MEMORY_HOST_ONLY, 1024);
  hrx_buffer *foreign = buffer(other, HRX_MEMORY_DEVICE, 1024);
  hrx_kernel *k = NULL, *kf = NULL;
  OK(ut_kernel(rt, "add", 64, 1.0f, &k));
  OK(ut_kernel(other, "add", 64, 1.0f, &kf));
  hrx_graph *g = graph(rt);
  ERR(hrx_buffer_create(rt, HRX_MEMORY_DEVICE, 0, &dev), HRX_E_INVALID, "size is zero");
  ERR(hrx_graph_fill(g, hrx_view_whole(ho), 1, NULL), HRX_E_INVALID, "not GPU-visible");
  ERR(hrx_graph_fill(g, hrx_view_make(dev, 1000, 100), 1, NULL), HRX_E_INVALID, "out of range");
  ERR(hrx_graph_fill(g, hrx_view_make(dev, 0, 0), 1, NULL), HRX_E_INVALID, "empty");
  ERR(hrx_graph_fill(g, hrx_view_whole(foreign), 1, NULL), HRX_E_INVALID,
      "buffer belongs to another runtime");
  ERR(hrx_graph_copy(g, hrx_view_make(dev, 0, 64), hrx_view_make(hv, 0, 32), NULL), HRX_E_INVALID,
      "copy needs equal, nonoverlapping ranges");
  ERR(hrx_graph_copy(g, hrx_view_make(dev, 0, 64), hrx_view_make(dev, 32, 64), NULL),
      HRX_E_INVALID, "copy needs equal, nonoverlapping ranges");
  ERR(hrx_graph_copy(g, hrx_view_make(dev, 0, 64), hrx_view_make(ho, 0, 64), NULL), HRX_E_INVALID,
      "not GPU-visible");
  ERR(hrx_graph_copy_on(g, hrx_view_make(dev, 0, 64), hrx_view_make(hv, 0, 64), (hrx_lane)5, NULL),
      HRX_E_INVALID, "unknown lane");
  hrx_view v = hrx_view_make(dev, 0, 256);
  ERR(hrx_graph_dispatch(g, kf, &v, 1, NULL, 0, NULL), HRX_E_INVALID,
      "kernel belongs to another runtime");
  ERR(hrx_graph_dispatch(g, k, &v, 0, NULL, 0, NULL), HRX_E_INVALID, "1 bindings, got 0");
  hrx_view small = hrx_view_make(dev, 0, 128);
  ERR(hrx_graph_dispatch(g, k, &small, 1, NULL, 0, NULL), HRX_E_INVALID, "contract needs 256");
  hrx_view mis = hrx_view_make(dev, 2, 256);
  ERR(hrx_graph_dispatch(g, k, &mis, 1, NULL, 0, NULL), HRX_E_INVALID,
      "GPU allocation does not satisfy kernel alignment");
  ERR(hrx_graph_dispatch_aliasing(g, k, &mis, 1, NULL, 0, NULL), HRX_E_INVALID,
      "GPU allocation does not satisfy kernel alignment");
  hrx_view hov = hrx_view_make(ho, 0, 256);
  ERR(hrx_graph_dispatch(g, k, &hov, 1, NULL, 0, NULL), HRX_E_INVALID, "not GPU-visible");
  hrx_constant c8 = {.size = 8};
  ERR(hrx_graph_dispatch(g, k, &v, 1, &c8, 1, NULL), HRX_E_INVALID, "has size 8");
  ERR(hrx_graph_dispatch(g, k, &v, 1, &c8, 2, NULL), HRX_E_INVALID, "1 constants, got 2");
  hrx_binding hb = {hrx_view_whole(dev), HRX_ACCESS_READ};
  ERR(hrx_graph_host(g, &hb, 1, ut_mark_cb, NULL, NULL, NULL), HRX_E_INVALID,
      "not visible to the host");
  hrx_binding sb = {hrx_view_whole(ho), HRX_ACCESS_READ};
  ERR(hrx_graph_scoped(g, &sb, 1, ut_mark_cb, NULL, NULL, NULL), HRX_E_INVALID, "not GPU-visible");
  ERR(hrx_graph_scoped(g, &hb, 1, NULL, NULL, NULL, NULL), HRX_E_INVALID, "callback is NULL");
  hrx_binding bad = {hrx_view_whole(dev), (hrx_access)0};
  ERR(hrx_graph_scoped(g, &bad, 1, ut_mark_cb, NULL, NULL, NULL), HRX_E_INVALID, "unknown access");
  /* Captured operations exist on the CUDA engine only; there they are validated as scoped
   * callbacks are. A refused call leaves the user data with the caller (destroy not called). */
  atomic_store(&capture_destroyed, 0);
  if (HRX_TEST_ENGINE == HRX_ENGINE_HOST) {
    ERR(hrx_graph_captured(g, &hb, 1, capture_nothing, NULL, capture_destroy, NULL),
        HRX_E_UNSUPPORTED, "captured operations need the CUDA engine");
  } else {
    hrx_binding fb = {hrx_view_whole(foreign), HRX_ACCESS_WRITE};
    hrx_binding rb = {hrx_view_make(dev, 512, 1024), HRX_ACCESS_READ};
    ERR(hrx_graph_captured(g, &hb, 1, NULL, NULL, capture_destroy, NULL), HRX_E_INVALID,
        "callback is NULL");
    ERR(hrx_graph_captured(g, &bad, 1, capture_nothing, NULL, capture_destroy, NULL),
        HRX_E_INVALID, "unknown access");
    ERR(hrx_graph_captured(g, &sb, 1, capture_nothing, NULL, capture_destroy, NULL),
        HRX_E_INVALID, "not GPU-visible");
    ERR(hrx_graph_captured(g, &fb, 1, capture_nothing, NULL, capture_destroy, NULL),
        HRX_E_INVALID, "buffer belongs to another runtime");
    ERR(hrx_graph_captured(g, &rb, 1, capture_nothing, NULL, capture_destroy, NULL),
        HRX_E_INVALID, "out of range");
    ERR(hrx_graph_captured(g, NULL, 1, capture_nothing, NULL, capture_destroy, NULL),
        HRX_E_INVALID, "bindings is NULL");
  }
  ERR(hrx_graph_captured(NULL, &hb, 1, capture_nothing, NULL, capture_destroy, NULL),
      HRX_E_INVALID, "graph is NULL");
  cr_assert_eq(atomic_load(&capture_destroyed), 0, "refused user data stays the caller's");
  cr_assert_eq(hrx_graph_size(g), 0u, "failed calls record nothing");
  hrx_prepared *p = NULL;
  ERR(hrx_graph_prepare(g, &p), HRX_E_INVALID, "cannot prepare an empty graph");
  /* Kernel contracts are validated too. */
  hrx_binding_contract bc = {HRX_ACCESS_READ, 3, 16};
  hrx_kernel_contract kc = {&bc, 1, NULL, 0};
  uint32_t one[3] = {1, 1, 1}, zero[3] = {0, 1, 1};
  hrx_kernel *bk = NULL;
  if (HRX_TEST_ENGINE == HRX_ENGINE_HOST) {
    ERR(hrx_kernel_create_host(rt, &kc, one, one, ut_add_host, NULL, &bk), HRX_E_INVALID,
        "not a power of two");
    bc.alignment = 4;
    ERR(hrx_kernel_create_host(rt, &kc, zero, one, ut_add_host, NULL, &bk), HRX_E_INVALID,
        "nonzero");
    ERR(hrx_kernel_create_image(rt, "x", 0, "x", &kc, one, one, &bk), HRX_E_UNSUPPORTED,
        "CUDA-engine");
  } else {
    ERR(hrx_kernel_create_host(rt, &kc, one, one, ut_add_host, NULL, &bk), HRX_E_INVALID,
        "host-engine");
    bc.alignment = 4;
    ERR(hrx_kernel_create_source(rt, "this is not CUDA", "f", NULL, 0, &kc, one, one, &bk),
        HRX_E_COMPILE, "hrx_kernel_create_source");
  }
  /* Writable aliasing is refused by dispatch and allowed by dispatch_aliasing; read-read
   * overlap is fine either way. */
  hrx_kernel *ax = NULL;
  OK(ut_kernel(rt, "axpy", 64, 2.0f, &ax));
  hrx_view al[2] = {hrx_view_make(dev, 0, 256), hrx_view_make(dev, 128, 256)};
  ERR(hrx_graph_dispatch(g, ax, al, 2, NULL, 0, NULL), HRX_E_INVALID, "overlap and one is written");
  size_t idx = 99;
  OK(hrx_graph_dispatch_aliasing(g, ax, al, 2, NULL, 0, &idx));
  cr_assert_eq(idx, 0u, "builder calls return the operation's index");
  OK(hrx_graph_fill(g, hrx_view_make(dev, 512, 16), 3, &idx));
  cr_assert_eq(idx, 1u);
  hrx_graph_release(g);
  /* Objects of another runtime are refused at update and submit time too. */
  hrx_graph *g1 = graph(rt);
  OK(hrx_graph_fill(g1, hrx_view_whole(dev), 1, NULL));
  p = prepare(g1);
  hrx_graph *g2 = graph(other);
  OK(hrx_graph_fill(g2, hrx_view_whole(foreign), 1, NULL));
  ERR(hrx_prepared_update(p, g2, 0, NULL), HRX_E_INVALID, "graph belongs to another runtime");
  hrx_prepared *po = prepare(g2);
  hrx_completion *co = NULL, *c = NULL;
  OK(hrx_submit(po, &co));
  ERR(hrx_submit_after(p, &co, 1, &c), HRX_E_INVALID, "completion belongs to another runtime");
  OK(hrx_completion_wait(co, WAIT));
  hrx_completion_release(co);
  hrx_prepared_release(po);
  hrx_prepared_release(p);
  hrx_kernel_release(ax);
  hrx_kernel_release(k);
  hrx_kernel_release(kf);
  hrx_buffer_release(dev);
  hrx_buffer_release(hv);
  hrx_buffer_release(ho);
  hrx_buffer_release(foreign);
  hrx_runtime_release(other);
  hrx_runtime_release(rt);
}

Test(SUITE, completion_of_a_released_runtime) {
  RUNTIME(rt, 0, 0);
  RUNTIME(gone, 0, 0);
  hrx_buffer *b = buffer(gone, HRX_MEMORY_DEVICE, 64);
  hrx_graph *g = graph(gone);
  OK(hrx_graph_fill(g, hrx_view_whole(b), 7, NULL));
  hrx_prepared *p = prepare(g);
  hrx_completion *done = NULL;
  OK(hrx_submit(p, &done));
  OK(hrx_completion_wait(done, WAIT));
  hrx_prepared_release(p);
  hrx_buffer_release(b);
  hrx_runtime_release(gone);
  /* The producer's runtime is gone but the producer is complete: accepted. */
  hrx_buffer *x = buffer(rt, HRX_MEMORY_DEVICE, 64);
  hrx_graph *g2 = graph(rt);
  OK(hrx_graph_fill(g2, hrx_view_whole(x), 1, NULL));
  hrx_prepared *p2 = prepare(g2);
  hrx_completion *c = NULL;
  OK(hrx_submit_after(p2, &done, 1, &c));
  OK(hrx_completion_wait(c, WAIT));
  OK(hrx_completion_status(done));
  hrx_completion_release(c);
  hrx_completion_release(done);
  hrx_prepared_release(p2);
  hrx_buffer_release(x);
  hrx_runtime_release(rt);
}

/* ---- hazards ---- */

static void expect_deps(hrx_prepared *p, size_t op, const size_t *want, size_t n) {
  size_t got[16], count = 0;
  OK(hrx_prepared_operation_deps(p, op, got, 16, &count));
  cr_assert_eq(count, n, "operation %zu has %zu dependencies, wanted %zu", op, count, n);
  for (size_t i = 0; i < n; i++)
    cr_assert_eq(got[i], want[i], "operation %zu: dependency %zu is %zu, wanted %zu", op, i, got[i],
                 want[i]);
}

Test(SUITE, hazards_partial_overlaps) {
  RUNTIME(rt, 0, 0);
  hrx_buffer *a = buffer(rt, HRX_MEMORY_DEVICE, 4096);
  hrx_buffer *b = buffer(rt, HRX_MEMORY_DEVICE, 4096);
  hrx_kernel *ax = NULL;
  OK(ut_kernel(rt, "axpy", 64, 1.0f, &ax)); /* reads 256 bytes, writes 256 bytes */
  hrx_graph *g = graph(rt);
  OK(hrx_graph_fill(g, hrx_view_make(a, 0, 512), 1, NULL));           /* 0: W a[0,512) */
  OK(hrx_graph_fill(g, hrx_view_make(a, 256, 512), 2, NULL));         /* 1: W a[256,768): WAW 0 */
  hrx_view v2[2] = {hrx_view_make(a, 0, 256), hrx_view_make(b, 0, 256)};
  OK(hrx_graph_dispatch(g, ax, v2, 2, NULL, 0, NULL));                 /* 2: R a[0,256): RAW 0 */
  hrx_view v3[2] = {hrx_view_make(a, 0, 256), hrx_view_make(b, 256, 256)};
  OK(hrx_graph_dispatch(g, ax, v3, 2, NULL, 0, NULL));                 /* 3: R a[0,256): RAW 0, no 2 */
  OK(hrx_graph_fill(g, hrx_view_make(a, 128, 64), 3, NULL));          /* 4: W: WAW 0, WAR 2, 3 */
  OK(hrx_graph_fill(g, hrx_view_make(a, 1024, 64), 4, NULL));         /* 5: disjoint: none */
  OK(hrx_graph_fill(g, hrx_view_make(b, 200, 100), 5, NULL));         /* 6: W b[200,300): WAW 2, 3 */
  hrx_prepared *p = prepare(g);
  cr_assert_eq(hrx_prepared_regions(p), 1u, "one compute region");
  expect_deps(p, 0, NULL, 0);
  expect_deps(p, 1, (size_t[]){0}, 1);
  expect_deps(p, 2, (size_t[]){0}, 1);
  expect_deps(p, 3, (size_t[]){0}, 1);
  expect_deps(p, 4, (size_t[]){0, 2, 3}, 3);
  expect_deps(p, 5, NULL, 0);
  expect_deps(p, 6, (size_t[]){2, 3}, 2);
  hrx_prepared_release(p);
  hrx_kernel_release(ax);
  hrx_buffer_release(a);
  hrx_buffer_release(b);
  hrx_runtime_release(rt);
}

Test(SUITE, hazard_frontier_keeps_a_chain_linear) {
  RUNTIME(rt, 0, 0);
  hrx_buffer *a = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_kernel *k = NULL;
  OK(ut_kernel(rt, "add", 64, 1.0f, &k));
  hrx_graph *g = graph(rt);
  hrx_view v = hrx_view_whole(a);
  for (int i = 0; i < 100; i++) OK(hrx_graph_dispatch(g, k, &v, 1, NULL, 0, NULL));
  hrx_prepared *p = prepare(g);
  for (size_t i = 1; i < 100; i++) expect_deps(p, i, (size_t[]){i - 1}, 1);
  cr_assert_eq(run_once(p), HRX_OK, "%s", hrx_last_error());
  float out[64];
  OK(ut_get(rt, a, 0, out, sizeof out));
  for (int i = 0; i < 64; i++) cr_assert_float_eq(out[i], 100.0f, 0, "element %d is %g", i, out[i]);
  hrx_prepared_release(p);
  hrx_kernel_release(k);
  hrx_buffer_release(a);
  hrx_runtime_release(rt);
}

/* ---- regions ---- */

static hrx_status noop_scoped(const hrx_callback_view *v, size_t n, void *user) {
  (void)v;
  (void)n;
  (void)user;
  return HRX_OK;
}

Test(SUITE, region_grouping_and_counters) {
  RUNTIME(rt, 0, 0);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 1024);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 1024);
  hrx_kernel *k = NULL;
  OK(ut_kernel(rt, "add", 64, 1.0f, &k));
  hrx_counters c0, c1;
  OK(hrx_runtime_counters(rt, &c0));
  hrx_graph *g = graph(rt);
  hrx_view dv = hrx_view_make(d, 0, 256);
  OK(hrx_graph_fill(g, hrx_view_make(d, 512, 256), 0, NULL));                                 /* R0 compute */
  OK(hrx_graph_copy(g, hrx_view_make(d, 0, 256), hrx_view_make(h, 0, 256), NULL));            /* R1 upload */
  OK(hrx_graph_copy(g, hrx_view_make(d, 256, 256), hrx_view_make(h, 256, 256), NULL));        /* R1 */
  OK(hrx_graph_dispatch(g, k, &dv, 1, NULL, 0, NULL));                                        /* R2 compute */
  hrx_binding sb = {dv, HRX_ACCESS_READ_WRITE};
  OK(hrx_graph_scoped(g, &sb, 1, noop_scoped, NULL, NULL, NULL));                             /* R3 */
  OK(hrx_graph_scoped(g, &sb, 1, noop_scoped, NULL, NULL, NULL));                             /* R4 */
  OK(hrx_graph_dispatch(g, k, &dv, 1, NULL, 0, NULL));                                        /* R5 compute */
  OK(hrx_graph_copy(g, hrx_view_make(d, 768, 256), hrx_view_make(d, 512, 256), NULL));        /* R5 (d2d) */
  OK(hrx_graph_copy(g, hrx_view_make(h, 512, 256), hrx_view_make(d, 0, 256), NULL));          /* R6 download */
  OK(hrx_graph_copy_on(g, hrx_view_make(h, 768, 256), hrx_view_make(d, 768, 256),
                       HRX_LANE_COMPUTE, NULL));                                              /* R7 compute */
  hrx_prepared *p = prepare(g);
  cr_assert_eq(hrx_prepared_regions(p), 8u);
  hrx_lane lanes[8] = {HRX_LANE_COMPUTE, HRX_LANE_UPLOAD,   HRX_LANE_COMPUTE, HRX_LANE_COMPUTE,
                       HRX_LANE_COMPUTE, HRX_LANE_COMPUTE,  HRX_LANE_DOWNLOAD, HRX_LANE_COMPUTE};
  size_t ops[8] = {1, 2, 1, 1, 1, 2, 1, 1};
  for (size_t r = 0; r < 8; r++) {
    hrx_lane lane;
    size_t n;
    OK(hrx_prepared_region_info(p, r, &lane, &n));
    cr_assert_eq(lane, lanes[r], "region %zu lane", r);
    cr_assert_eq(n, ops[r], "region %zu has %zu operations", r, n);
  }
  size_t deps[8], nd;
  OK(hrx_prepared_region_deps(p, 2, deps, 8, &nd));
  cr_assert(nd == 1 && deps[0] == 1, "the kernel waits for the upload only");
  OK(hrx_prepared_region_deps(p, 1, deps, 8, &nd));
  cr_assert_eq(nd, 0u, "the upload is independent of the fill");
  OK(hrx_prepared_region_deps(p, 5, deps, 8, &nd));
  int after0 = 0, after4 = 0, after23 = 0;
  for (size_t i = 0; i < nd && i < 8; i++) {
    after0 |= deps[i] == 0;
    after4 |= deps[i] == 4;
    after23 |= deps[i] == 2 || deps[i] == 3;
  }
  cr_assert(after0 && after4, "region 5 after the fill (WAR) and the last scoped op (WAW)");
  cr_assert(!after23, "superseded writers leave the frontier");
  cr_assert_eq(hrx_prepared_parallel(p), 1);
  ERR(hrx_prepared_region_info(p, 8, NULL, NULL), HRX_E_INVALID, "region 8 of 8");
  OK(hrx_runtime_counters(rt, &c1));
  /* Native regions: R0, R2, R5 (fill, kernel, kernel + copy). The rest are copy-only or
   * callbacks: R1 (upload), R6 (download), R7 (compute) create one copy stream per lane. */
  cr_assert_eq(c1.native_graphs_prepared - c0.native_graphs_prepared, 3u);
  cr_assert_eq(c1.copy_streams_created - c0.copy_streams_created, 3u);
  /* A second graph reuses the cached copy streams. */
  hrx_graph *g2 = graph(rt);
  OK(hrx_graph_copy(g2, hrx_view_make(d, 0, 16), hrx_view_make(h, 0, 16), NULL));
  hrx_prepared *p2 = prepare(g2);
  hrx_counters c2;
  OK(hrx_runtime_counters(rt, &c2));
  cr_assert_eq(c2.copy_streams_created, c1.copy_streams_created);
  cr_assert_eq(c2.native_graphs_prepared, c1.native_graphs_prepared);
  /* Run it and check bytes per lane and in total. */
  OK(run_once(p));
  hrx_counters c3;
  OK(hrx_runtime_counters(rt, &c3));
  cr_assert_eq(c3.lane_copy_bytes[HRX_LANE_UPLOAD] - c2.lane_copy_bytes[HRX_LANE_UPLOAD], 512u);
  cr_assert_eq(c3.lane_copy_bytes[HRX_LANE_DOWNLOAD] - c2.lane_copy_bytes[HRX_LANE_DOWNLOAD], 256u);
  cr_assert_eq(c3.lane_copy_bytes[HRX_LANE_COMPUTE] - c2.lane_copy_bytes[HRX_LANE_COMPUTE], 512u);
  cr_assert_eq(c3.copied_bytes - c2.copied_bytes, 1280u);
  cr_assert_eq(c3.submissions - c2.submissions, 1u);
  hrx_prepared_release(p2);
  hrx_prepared_release(p);
  hrx_kernel_release(k);
  hrx_buffer_release(d);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
}

Test(SUITE, pure_chain_is_not_parallel) {
  RUNTIME(rt, 0, 0);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 256);
  hrx_graph *g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(d), hrx_view_whole(h), NULL));
  OK(hrx_graph_fill(g, hrx_view_make(d, 0, 16), 9, NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(h), hrx_view_whole(d), NULL));
  hrx_prepared *p = prepare(g);
  cr_assert_eq(hrx_prepared_regions(p), 3u);
  cr_assert_eq(hrx_prepared_parallel(p), 0);
  OK(run_once(p));
  unsigned char out[256];
  OK(ut_get(rt, h, 0, out, sizeof out));
  for (int i = 0; i < 256; i++) cr_assert_eq(out[i], i < 16 ? 9 : 0, "byte %d", i);
  hrx_prepared_release(p);
  hrx_buffer_release(d);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
}

/* ---- values through every kind of operation ---- */

Test(SUITE, values_upload_kernels_download) {
  RUNTIME(rt, 0, 0);
  enum { N = 1000 };
  unsigned seed = ut_seed();
  float x[N], y[N], out[N];
  ut_random(x, N, &seed);
  ut_random(y, N, &seed);
  hrx_buffer *hx = buffer(rt, HRX_MEMORY_HOST_VISIBLE, sizeof x);
  hrx_buffer *hy = buffer(rt, HRX_MEMORY_HOST_VISIBLE, sizeof y);
  hrx_buffer *dx = buffer(rt, HRX_MEMORY_DEVICE, sizeof x);
  hrx_buffer *dy = buffer(rt, HRX_MEMORY_DEVICE, sizeof y);
  hrx_buffer *hout = buffer(rt, HRX_MEMORY_HOST_VISIBLE, sizeof out);
  OK(ut_put(rt, hx, 0, x, sizeof x));
  OK(ut_put(rt, hy, 0, y, sizeof y));
  hrx_kernel *axpy = NULL, *add = NULL;
  OK(ut_kernel(rt, "axpy", N, 3.0f, &axpy));
  OK(ut_kernel(rt, "add", N, 0.5f, &add));
  hrx_graph *g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(dx), hrx_view_whole(hx), NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(dy), hrx_view_whole(hy), NULL));
  hrx_view v[2] = {hrx_view_whole(dx), hrx_view_whole(dy)};
  OK(hrx_graph_dispatch(g, axpy, v, 2, NULL, 0, NULL));
  hrx_constant two = {.size = 4, .value.f32 = 2.0f};
  OK(hrx_graph_dispatch(g, add, &v[1], 1, &two, 1, NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(hout), hrx_view_whole(dy), NULL));
  hrx_prepared *p = prepare(g);
  OK(run_once(p));
  OK(ut_get(rt, hout, 0, out, sizeof out));
  for (int i = 0; i < N; i++)
    cr_assert_float_eq(out[i], 3.0f * x[i] + y[i] + 2.0f, 1e-5, "element %d: %g", i, out[i]);
  cr_assert_eq(hrx_buffer_last_writer(dy), HRX_WRITER_GPU);
  cr_assert_eq(hrx_buffer_last_writer(hout), HRX_WRITER_GPU);
  cr_assert_eq(hrx_buffer_last_writer(dx), HRX_WRITER_GPU);
  cr_assert_eq(hrx_buffer_last_writer(hx), HRX_WRITER_HOST, "written through a mapping");
  /* A host callback is recorded as a host write. */
  hrx_prepared *m = marker(rt, 1, hrx_view_whole(hout), HRX_ACCESS_WRITE);
  OK(run_once(m));
  cr_assert_eq(hrx_buffer_last_writer(hout), HRX_WRITER_HOST);
  hrx_prepared_release(m);
  hrx_prepared_release(p);
  hrx_kernel_release(axpy);
  hrx_kernel_release(add);
  hrx_buffer_release(hx);
  hrx_buffer_release(hy);
  hrx_buffer_release(dx);
  hrx_buffer_release(dy);
  hrx_buffer_release(hout);
  hrx_runtime_release(rt);
}

/* ---- slots, capacity, host mappings, check order ---- */

Test(SUITE, slots_busy_and_release_after_handles_dropped) {
  RUNTIME(rt, 1, 0);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  hrx_prepared *p = gated(rt, &gate, hrx_view_whole(h), HRX_ACCESS_READ);
  hrx_completion *c1 = NULL, *c2 = NULL;
  OK(hrx_submit(p, &c1));
  cr_assert(ut_gate_entered(&gate, 1));
  ERR(hrx_submit(p, &c2), HRX_E_BUSY, "prepared run slots are occupied");
  int done = 1;
  OK(hrx_completion_poll(c1, &done));
  cr_assert_eq(done, 0, "poll never runs work");
  ERR(hrx_completion_status(c1), HRX_E_NOT_READY, "not finished");
  ERR(hrx_completion_wait(c1, 1000000), HRX_E_TIMEOUT, "not finished");
  ut_gate_open(&gate);
  OK(hrx_completion_wait(c1, WAIT));
  OK(hrx_completion_poll(c1, &done));
  cr_assert_eq(done, 1);
  /* Finished, but a handle of that run is still held: the slot stays taken. */
  ERR(hrx_submit(p, &c2), HRX_E_BUSY, "drop completed observers or reserve more slots");
  hrx_completion *extra = hrx_completion_retain(c1);
  hrx_completion_release(c1);
  ERR(hrx_submit(p, &c2), HRX_E_BUSY, "prepared run slots are occupied");
  hrx_completion_release(extra);
  OK(hrx_submit(p, &c2));
  OK(hrx_completion_wait(c2, WAIT));
  hrx_completion_release(c2);
  hrx_prepared_release(p);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

Test(SUITE, two_slots_run_back_to_back) {
  RUNTIME(rt, 2, 0);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  hrx_prepared *p = gated(rt, &gate, hrx_view_whole(h), HRX_ACCESS_WRITE);
  hrx_completion *c[3] = {NULL, NULL, NULL};
  OK(hrx_submit(p, &c[0]));
  OK(hrx_submit(p, &c[1]));
  ERR(hrx_submit(p, &c[2]), HRX_E_BUSY, "prepared run slots are occupied");
  cr_assert(ut_gate_entered(&gate, 1));
  ut_gate_open(&gate);
  OK(hrx_completion_wait(c[0], WAIT));
  OK(hrx_completion_wait(c[1], WAIT));
  cr_assert_eq(gate.entered, 2, "both slots ran");
  hrx_completion_release(c[0]);
  hrx_completion_release(c[1]);
  hrx_prepared_release(p);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

Test(SUITE, capacity_is_runtime_wide) {
  RUNTIME(rt, 2, 1);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  hrx_prepared *p = gated(rt, &gate, hrx_view_whole(h), HRX_ACCESS_READ);
  hrx_graph *g = graph(rt);
  OK(hrx_graph_fill(g, hrx_view_whole(d), 1, NULL));
  hrx_prepared *q = prepare(g);
  hrx_completion *c = NULL, *c2 = NULL;
  OK(hrx_submit(p, &c));
  ERR(hrx_submit(q, &c2), HRX_E_BUSY, "runtime submission capacity exhausted");
  hrx_counters k;
  OK(hrx_runtime_counters(rt, &k));
  cr_assert_eq(k.submissions, 1u, "refused submissions are not counted");
  ut_gate_open(&gate);
  OK(hrx_completion_wait(c, WAIT));
  OK(run_once(q));
  hrx_completion_release(c);
  hrx_prepared_release(p);
  hrx_prepared_release(q);
  hrx_buffer_release(h);
  hrx_buffer_release(d);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

Test(SUITE, live_host_mappings_are_busy) {
  RUNTIME(rt, 0, 0);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 256);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_graph *g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(h), hrx_view_whole(d), NULL)); /* writes h */
  hrx_prepared *writer = prepare(g);
  g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(d), hrx_view_whole(h), NULL)); /* reads h */
  hrx_prepared *reader = prepare(g);
  void *ptr = NULL;
  OK(hrx_buffer_map(h, HRX_ACCESS_READ, &ptr));
  cr_assert_not_null(ptr);
  hrx_completion *c = NULL;
  ERR(hrx_submit(writer, &c), HRX_E_BUSY, "live host mapping");
  OK(run_once(reader)); /* reading a buffer mapped for reading is fine */
  OK(hrx_buffer_unmap(h, HRX_ACCESS_READ));
  ERR(hrx_buffer_unmap(h, HRX_ACCESS_READ), HRX_E_INVALID, "no live read mapping");
  OK(hrx_buffer_map(h, HRX_ACCESS_WRITE, &ptr));
  ERR(hrx_submit(reader, &c), HRX_E_BUSY, "live host mapping for writing");
  ERR(hrx_submit(writer, &c), HRX_E_BUSY, "live host mapping");
  OK(hrx_buffer_unmap(h, HRX_ACCESS_WRITE));
  OK(run_once(writer));
  ERR(hrx_buffer_map(d, HRX_ACCESS_READ, &ptr), HRX_E_INVALID, "cannot be mapped");
  /* Mapping is refused while unfinished work conflicts with it. */
  ut_gate gate;
  ut_gate_init(&gate);
  hrx_prepared *gw = gated(rt, &gate, hrx_view_whole(h), HRX_ACCESS_WRITE);
  OK(hrx_submit(gw, &c));
  ERR(hrx_buffer_map(h, HRX_ACCESS_READ, &ptr), HRX_E_BUSY, "write the buffer");
  ERR(hrx_buffer_map(h, HRX_ACCESS_WRITE, &ptr), HRX_E_BUSY, "use the buffer");
  ut_gate_open(&gate);
  OK(hrx_completion_wait(c, WAIT));
  OK(hrx_buffer_map(h, HRX_ACCESS_READ, &ptr));
  OK(hrx_buffer_unmap(h, HRX_ACCESS_READ));
  hrx_completion_release(c);
  hrx_prepared_release(gw);
  hrx_prepared_release(writer);
  hrx_prepared_release(reader);
  hrx_buffer_release(h);
  hrx_buffer_release(d);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

static hrx_status failing_host_kernel(const hrx_host_launch *l, void *user) {
  (void)l;
  (void)user;
  return HRX_E_CALLBACK;
}

Test(SUITE, submit_check_order) {
  RUNTIME(rt, 1, 1);
  RUNTIME(other, 0, 0);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  hrx_buffer *h2 = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  /* p occupies its only slot and the runtime's only capacity. */
  hrx_prepared *p = gated(rt, &gate, hrx_view_whole(h), HRX_ACCESS_WRITE);
  hrx_completion *c = NULL, *x = NULL;
  OK(hrx_submit(p, &c));
  /* A dependency of another runtime is reported before capacity. */
  hrx_buffer *ob = buffer(other, HRX_MEMORY_DEVICE, 64);
  hrx_graph *og = graph(other);
  OK(hrx_graph_fill(og, hrx_view_whole(ob), 1, NULL));
  hrx_prepared *op = prepare(og);
  hrx_completion *oc = NULL;
  OK(hrx_submit(op, &oc));
  hrx_graph *g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(h2), hrx_view_whole(d), NULL));
  hrx_prepared *q = prepare(g);
  ERR(hrx_submit_after(q, &oc, 1, &x), HRX_E_INVALID, "completion belongs to another runtime");
  /* Capacity is reported before live host mappings ... */
  void *ptr;
  OK(hrx_buffer_map(h2, HRX_ACCESS_READ, &ptr));
  ERR(hrx_submit(q, &x), HRX_E_BUSY, "capacity exhausted");
  /* ... and before a full slot; usable is first of all (the slot of p is full too). */
  ERR(hrx_submit(p, &x), HRX_E_BUSY, "capacity exhausted");
  ut_gate_open(&gate);
  OK(hrx_completion_wait(c, WAIT));
  /* Capacity is free now; the mapping is reported before the (held) slot. */
  ERR(hrx_submit(q, &x), HRX_E_BUSY, "live host mapping");
  OK(hrx_buffer_unmap(h2, HRX_ACCESS_READ));
  ERR(hrx_submit(p, &x), HRX_E_BUSY, "prepared run slots are occupied");
  /* A quarantined graph reports device lost before anything else. */
  hrx_graph *fg = graph(rt);
  if (HRX_TEST_ENGINE == HRX_ENGINE_HOST) {
    hrx_binding_contract bc = {HRX_ACCESS_WRITE, 4, 64};
    hrx_kernel_contract kc = {&bc, 1, NULL, 0};
    uint32_t one[3] = {1, 1, 1};
    hrx_kernel *fk = NULL;
    OK(hrx_kernel_create_host(rt, &kc, one, one, failing_host_kernel, NULL, &fk));
    hrx_view dv = hrx_view_whole(d);
    OK(hrx_graph_dispatch(fg, fk, &dv, 1, NULL, 0, NULL));
    hrx_kernel_release(fk);
  } else {
    OK(hrx_graph_fill(fg, hrx_view_whole(d), 1, NULL));
    OK(hrx_runtime_inject_fault(rt, HRX_FAULT_NEXT_REGION));
  }
  hrx_prepared *fp = prepare(fg);
  hrx_completion *fc = NULL;
  OK(hrx_submit(fp, &fc));
  ERR(hrx_completion_wait(fc, WAIT), HRX_E_DEVICE_LOST, "");
  cr_assert_eq(hrx_prepared_quarantined(fp), 1);
  /* fp's slot is held by fc and d is poisoned; "usable" wins, and the quarantine is named. */
  ERR(hrx_submit_after(fp, &oc, 1, &x), HRX_E_DEVICE_LOST, "graph quarantined after native failure");
  hrx_completion_release(fc);
  OK(hrx_completion_wait(oc, WAIT));
  hrx_completion_release(oc);
  hrx_completion_release(c);
  hrx_prepared_release(fp);
  hrx_prepared_release(op);
  hrx_prepared_release(p);
  hrx_prepared_release(q);
  hrx_buffer_release(ob);
  hrx_buffer_release(h);
  hrx_buffer_release(h2);
  hrx_buffer_release(d);
  hrx_runtime_release(other);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

/* ---- ordering across submissions ---- */

Test(SUITE, conflicting_submissions_are_ordered) {
  RUNTIME(rt, 2, 0);
  ut_log_reset();
  hrx_buffer *x = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  hrx_buffer *y = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  hrx_prepared *a = gated(rt, &gate, hrx_view_make(x, 0, 32), HRX_ACCESS_WRITE);
  hrx_prepared *b = marker(rt, 2, hrx_view_make(x, 16, 32), HRX_ACCESS_READ); /* overlaps a */
  /* An independent GPU region on the compute lane runs while a is held. */
  hrx_graph *g = graph(rt);
  OK(hrx_graph_fill(g, hrx_view_whole(d), 5, NULL));
  hrx_prepared *ind = prepare(g);
  /* A download into x writes x, so it runs after a (write) and b (read). */
  hrx_graph *g2 = graph(rt);
  OK(hrx_graph_copy(g2, hrx_view_make(x, 0, 64), hrx_view_whole(d), NULL));
  hrx_prepared *late = prepare(g2);
  hrx_completion *ca, *cb, *ci, *cl;
  OK(hrx_submit(a, &ca));
  cr_assert(ut_gate_entered(&gate, 1));
  OK(hrx_submit(b, &cb));
  OK(hrx_submit(ind, &ci));
  OK(hrx_submit(late, &cl));
  OK(hrx_completion_wait(ci, WAIT)); /* independent of a: finishes while a is held */
  int done;
  OK(hrx_completion_poll(cb, &done));
  cr_assert_eq(done, 0, "b must wait for a (overlapping write)");
  OK(hrx_completion_poll(cl, &done));
  cr_assert_eq(done, 0, "the download into x must wait for a and b");
  ut_gate_open(&gate);
  OK(hrx_completion_wait(cb, WAIT));
  OK(hrx_completion_wait(cl, WAIT));
  OK(hrx_completion_wait(ca, WAIT));
  cr_assert_geq(ut_log_pos(2), 0, "b ran");
  unsigned char out[64];
  OK(ut_get(rt, x, 0, out, 64));
  for (int i = 0; i < 64; i++) cr_assert_eq(out[i], 5, "download landed after a and b");
  hrx_completion_release(ca);
  hrx_completion_release(cb);
  hrx_completion_release(ci);
  hrx_completion_release(cl);
  hrx_prepared_release(a);
  hrx_prepared_release(b);
  hrx_prepared_release(ind);
  hrx_prepared_release(late);
  hrx_buffer_release(x);
  hrx_buffer_release(y);
  hrx_buffer_release(d);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

Test(SUITE, same_graph_other_slot_is_ordered) {
  RUNTIME(rt, 2, 0);
  enum { N = 256 };
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, N * 4);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, N * 4);
  hrx_kernel *add = NULL;
  OK(ut_kernel(rt, "add", N, 1.0f, &add));
  hrx_graph *g = graph(rt);
  hrx_view v = hrx_view_whole(d);
  for (int i = 0; i < 8; i++) OK(hrx_graph_dispatch(g, add, &v, 1, NULL, 0, NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(h), v, NULL));
  hrx_prepared *p = prepare(g);
  for (int round = 0; round < 20; round++) {
    hrx_completion *c1, *c2;
    OK(hrx_submit(p, &c1));
    OK(hrx_submit(p, &c2));
    OK(hrx_completion_wait(c2, WAIT));
    OK(hrx_completion_wait(c1, WAIT));
    hrx_completion_release(c1);
    hrx_completion_release(c2);
  }
  float out[N];
  OK(ut_get(rt, h, 0, out, sizeof out));
  for (int i = 0; i < N; i++) cr_assert_float_eq(out[i], 320.0f, 0, "element %d: %g", i, out[i]);
  hrx_prepared_release(p);
  hrx_kernel_release(add);
  hrx_buffer_release(d);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
}

/* ---- failure and cancellation ---- */

Test(SUITE, failed_producer_cancels_dependents_without_overlap) {
  RUNTIME(rt, 0, 0);
  ut_log_reset();
  hrx_buffer *x = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  hrx_buffer *y = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  hrx_buffer *z = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  gate.fail = 1;
  hrx_prepared *prod = gated(rt, &gate, hrx_view_whole(x), HRX_ACCESS_WRITE);
  hrx_prepared *dep = marker(rt, 10, hrx_view_whole(y), HRX_ACCESS_WRITE);
  hrx_prepared *dep2 = marker(rt, 11, hrx_view_whole(z), HRX_ACCESS_WRITE);
  hrx_prepared *free_run = marker(rt, 12, hrx_view_whole(z), HRX_ACCESS_READ);
  hrx_completion *cp, *cd, *cd2, *cf;
  OK(hrx_submit(prod, &cp));
  OK(hrx_submit_after(dep, &cp, 1, &cd));
  OK(hrx_submit_after(dep2, &cd, 1, &cd2));
  ut_gate_open(&gate);
  ERR(hrx_completion_wait(cp, WAIT), HRX_E_CALLBACK, "host callback failed");
  ERR(hrx_completion_wait(cd, WAIT), HRX_E_CANCELLED, "producer failed");
  ERR(hrx_completion_wait(cd2, WAIT), HRX_E_CANCELLED, "producer cancelled");
  cr_assert_eq(ut_log_pos(10), -1, "a dependent of a failed producer never runs");
  cr_assert_eq(ut_log_pos(11), -1);
  /* Submitting after an already-failed completion is accepted and cancelled. */
  OK(hrx_submit_after(free_run, &cp, 1, &cf));
  ERR(hrx_completion_wait(cf, WAIT), HRX_E_CANCELLED, "producer failed");
  hrx_completion_release(cf);
  /* Host callback failures do not quarantine. */
  cr_assert_eq(hrx_prepared_quarantined(prod), 0);
  OK(hrx_submit(free_run, &cf));
  OK(hrx_completion_wait(cf, WAIT));
  cr_assert_geq(ut_log_pos(12), 0);
  hrx_completion_release(cf);
  hrx_completion_release(cp);
  hrx_completion_release(cd);
  hrx_completion_release(cd2);
  hrx_prepared_release(prod);
  hrx_prepared_release(dep);
  hrx_prepared_release(dep2);
  hrx_prepared_release(free_run);
  hrx_buffer_release(x);
  hrx_buffer_release(y);
  hrx_buffer_release(z);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

Test(SUITE, cancellation_skips_and_propagates) {
  RUNTIME(rt, 0, 0);
  ut_log_reset();
  hrx_buffer *x = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  hrx_buffer *y = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  /* Region 0: gated; region 1: a mark that the cancel must skip. */
  hrx_graph *g = graph(rt);
  hrx_binding b = {hrx_view_whole(x), HRX_ACCESS_WRITE};
  OK(hrx_graph_host(g, &b, 1, ut_gate_cb, &gate, NULL, NULL));
  OK(hrx_graph_host(g, &b, 1, ut_mark_cb, (void *)(intptr_t)20, NULL, NULL));
  hrx_prepared *p = prepare(g);
  hrx_prepared *dep = marker(rt, 21, hrx_view_whole(y), HRX_ACCESS_READ);
  hrx_completion *c, *cd;
  OK(hrx_submit(p, &c));
  OK(hrx_submit_after(dep, &c, 1, &cd));
  cr_assert(ut_gate_entered(&gate, 1));
  OK(hrx_completion_cancel(c));
  int done;
  OK(hrx_completion_poll(c, &done));
  cr_assert_eq(done, 0, "the running region finishes first");
  ut_gate_open(&gate);
  ERR(hrx_completion_wait(c, WAIT), HRX_E_CANCELLED, "cancelled by hrx_completion_cancel");
  ERR(hrx_completion_wait(cd, WAIT), HRX_E_CANCELLED, "producer cancelled");
  cr_assert_eq(ut_log_pos(20), -1, "the cancelled run's later region was skipped");
  cr_assert_eq(ut_log_pos(21), -1, "the dependent never ran");
  OK(hrx_completion_cancel(c)); /* cancelling a finished run changes nothing */
  ERR(hrx_completion_status(c), HRX_E_CANCELLED, "");
  hrx_completion_release(c);
  hrx_completion_release(cd);
  hrx_prepared_release(p);
  hrx_prepared_release(dep);
  hrx_buffer_release(x);
  hrx_buffer_release(y);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

Test(SUITE, failure_inside_a_run_skips_its_later_regions) {
  RUNTIME(rt, 0, 0);
  ut_log_reset();
  hrx_buffer *x = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  gate.fail = 1;
  ut_gate_open(&gate);
  hrx_graph *g = graph(rt);
  hrx_binding b = {hrx_view_whole(x), HRX_ACCESS_WRITE};
  OK(hrx_graph_host(g, &b, 1, ut_gate_cb, &gate, NULL, NULL));
  OK(hrx_graph_host(g, &b, 1, ut_mark_cb, (void *)(intptr_t)30, NULL, NULL));
  hrx_prepared *p = prepare(g);
  ERR(run_once(p), HRX_E_CALLBACK, "host callback failed");
  cr_assert_eq(ut_log_pos(30), -1);
  hrx_counters k;
  OK(hrx_runtime_counters(rt, &k));
  cr_assert_eq(k.regions_failed, 1u);
  hrx_prepared_release(p);
  hrx_buffer_release(x);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

/* ---- quarantine and poison ---- */

Test(SUITE, injected_native_failure_quarantines_and_poisons) {
  RUNTIME(rt, 0, 0);
  hrx_buffer *x = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_buffer *y = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_buffer *z = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 256);
  hrx_graph *g = graph(rt);
  OK(hrx_graph_fill(g, hrx_view_whole(x), 1, NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(z), hrx_view_whole(y), NULL)); /* reads y, writes z */
  hrx_prepared *bad = prepare(g);
  g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(h), hrx_view_whole(x), NULL)); /* reads x */
  hrx_prepared *uses_x = prepare(g);
  g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(h), hrx_view_whole(y), NULL)); /* reads y only */
  hrx_prepared *uses_y = prepare(g);
  OK(hrx_runtime_inject_fault(rt, HRX_FAULT_NEXT_REGION));
  ERR(run_once(bad), HRX_E_DEVICE_LOST, "injected region failure");
  cr_assert_eq(hrx_prepared_quarantined(bad), 1);
  hrx_completion *c = NULL;
  ERR(hrx_submit(bad, &c), HRX_E_DEVICE_LOST, "graph quarantined after native failure");
  ERR(hrx_buffer_check(x), HRX_E_DEVICE_LOST, "buffer poisoned by a failed native region");
  ERR(hrx_buffer_check(z), HRX_E_DEVICE_LOST, "poisoned");
  OK(hrx_buffer_check(y)); /* read, not written */
  ERR(hrx_submit(uses_x, &c), HRX_E_DEVICE_LOST, "injected region failure");
  OK(run_once(uses_y)); /* nothing else is touched */
  OK(hrx_runtime_health(rt));
  hrx_prepared_release(bad);
  hrx_prepared_release(uses_x);
  hrx_prepared_release(uses_y);
  hrx_buffer_release(x);
  hrx_buffer_release(y);
  hrx_buffer_release(z);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
}

Test(SUITE, poison_fails_a_region_at_run_time) {
  RUNTIME(rt, 0, 0);
  hrx_buffer *x = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  /* The writer is held on the host queue until the reader was accepted, then fails natively
   * (an injected fault consumed by the fill region that follows the gate). */
  hrx_graph *g = graph(rt);
  hrx_binding b = {hrx_view_whole(x), HRX_ACCESS_READ_WRITE};
  OK(hrx_graph_host(g, &b, 1, ut_gate_cb, &gate, NULL, NULL));
  OK(hrx_graph_fill(g, hrx_view_whole(x), 1, NULL)); /* after the gate (write after write) */
  hrx_prepared *w = prepare(g);
  cr_assert_eq(hrx_prepared_parallel(w), 0);
  g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(d), hrx_view_whole(x), NULL));
  hrx_prepared *r = prepare(g);
  hrx_completion *cw, *cr;
  OK(hrx_submit(w, &cw));
  cr_assert(ut_gate_entered(&gate, 1));
  OK(hrx_submit(r, &cr)); /* x is not poisoned yet: accepted, ordered after w */
  OK(hrx_runtime_inject_fault(rt, HRX_FAULT_NEXT_REGION));
  ut_gate_open(&gate);
  ERR(hrx_completion_wait(cw, WAIT), HRX_E_DEVICE_LOST, "injected region failure");
  ERR(hrx_completion_wait(cr, WAIT), HRX_E_DEVICE_LOST, "buffer poisoned by a failed native region");
  hrx_completion_release(cw);
  hrx_completion_release(cr);
  hrx_prepared_release(w);
  hrx_prepared_release(r);
  hrx_buffer_release(x);
  hrx_buffer_release(d);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

Test(SUITE, copy_stream_quarantine_is_per_lane_and_runtime_wide) {
  RUNTIME(rt, 0, 0);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_buffer *d2 = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 256);
  hrx_buffer *h2 = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 256);
  hrx_graph *g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(d), hrx_view_whole(h), NULL));
  hrx_prepared *up1 = prepare(g);
  g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(d2), hrx_view_whole(h2), NULL));
  hrx_prepared *up2 = prepare(g);
  g = graph(rt);
  OK(hrx_graph_copy(g, hrx_view_whole(h2), hrx_view_whole(d2), NULL));
  hrx_prepared *down = prepare(g);
  OK(hrx_runtime_inject_fault(rt, HRX_FAULT_NEXT_REGION));
  ERR(run_once(up1), HRX_E_DEVICE_LOST, "injected region failure");
  cr_assert_eq(hrx_prepared_quarantined(up1), 0, "a copy failure quarantines the stream, not the graph");
  /* Another graph's copies on the same lane now fail; the download lane still works. */
  ERR(run_once(up2), HRX_E_DEVICE_LOST, "copy stream is quarantined");
  OK(run_once(down));
  ERR(run_once(up1), HRX_E_DEVICE_LOST, "copy stream is quarantined");
  hrx_counters k;
  OK(hrx_runtime_counters(rt, &k));
  cr_assert_eq(k.copy_streams_created, 2u, "a quarantined stream is never recreated");
  cr_assert_eq(k.lane_copy_bytes[HRX_LANE_UPLOAD], 0u, "failed copies count no bytes");
  cr_assert_eq(k.lane_copy_bytes[HRX_LANE_DOWNLOAD], 256u);
  hrx_prepared_release(up1);
  hrx_prepared_release(up2);
  hrx_prepared_release(down);
  hrx_buffer_release(d);
  hrx_buffer_release(d2);
  hrx_buffer_release(h);
  hrx_buffer_release(h2);
  hrx_runtime_release(rt);
}

typedef struct scoped_state {
  atomic_int calls;
  atomic_int inside;
  atomic_int overlap;
  atomic_int destroyed;
  pthread_t caller;
  atomic_int on_caller_thread;
  int fail;
} scoped_state;

static hrx_status scoped_fn(const hrx_callback_view *v, size_t n, void *user) {
  scoped_state *s = user;
  if (n != 1 || v[0].length != 256 || !v[0].address) return HRX_E_INVALID;
  if (atomic_fetch_add(&s->inside, 1) != 0) atomic_store(&s->overlap, 1);
  if (pthread_equal(pthread_self(), s->caller)) atomic_store(&s->on_caller_thread, 1);
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  atomic_fetch_add(&s->calls, 1);
  atomic_fetch_sub(&s->inside, 1);
  return s->fail ? HRX_E_CALLBACK : HRX_OK;
}

static void scoped_destroy(void *user) { atomic_fetch_add(&((scoped_state *)user)->destroyed, 1); }

Test(SUITE, scoped_callbacks_serialized_on_a_worker) {
  RUNTIME(rt, 4, 0);
  scoped_state st;
  memset(&st, 0, sizeof st);
  st.caller = pthread_self();
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_graph *g = graph(rt);
  /* Read-only: the four runs do not conflict, so only the callback's lock serializes them. */
  hrx_binding b = {hrx_view_whole(d), HRX_ACCESS_READ};
  OK(hrx_graph_scoped(g, &b, 1, scoped_fn, &st, scoped_destroy, NULL));
  hrx_prepared *p = prepare(g);
  hrx_completion *c[4];
  for (int i = 0; i < 4; i++) OK(hrx_submit(p, &c[i]));
  for (int i = 0; i < 4; i++) {
    OK(hrx_completion_wait(c[i], WAIT));
    hrx_completion_release(c[i]);
  }
  cr_assert_eq(atomic_load(&st.calls), 4);
  cr_assert_eq(atomic_load(&st.overlap), 0, "runs of one scoped callback are serialized");
  cr_assert_eq(atomic_load(&st.on_caller_thread), 0, "callbacks run on a worker");
  hrx_prepared_release(p);
  cr_assert_eq(atomic_load(&st.destroyed), 1, "user data released with its last graph");
  hrx_buffer_release(d);
  hrx_runtime_release(rt);
}

Test(SUITE, failed_scoped_callback_is_quarantined_with_its_resources) {
  RUNTIME(rt, 0, 0);
  scoped_state st;
  memset(&st, 0, sizeof st);
  st.fail = 1;
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_buffer *r = buffer(rt, HRX_MEMORY_DEVICE, 256);
  hrx_graph *g = graph(rt);
  hrx_binding b = {hrx_view_whole(d), HRX_ACCESS_WRITE};
  OK(hrx_graph_scoped(g, &b, 1, scoped_fn, &st, scoped_destroy, NULL));
  hrx_prepared *p = prepare(g);
  ERR(run_once(p), HRX_E_DEVICE_LOST, "scoped callback failed");
  cr_assert_eq(hrx_prepared_quarantined(p), 1);
  ERR(hrx_buffer_check(d), HRX_E_DEVICE_LOST, "poisoned");
  hrx_counters k;
  OK(hrx_runtime_counters(rt, &k));
  cr_assert_eq(k.quarantined_callbacks, 1u);
  hrx_prepared_release(p);
  hrx_buffer_release(d);
  cr_assert_eq(atomic_load(&st.destroyed), 0, "quarantined resources stay alive");
  /* The runtime lives on for other work. */
  hrx_graph *g2 = graph(rt);
  OK(hrx_graph_fill(g2, hrx_view_whole(r), 4, NULL));
  hrx_prepared *p2 = prepare(g2);
  OK(run_once(p2));
  hrx_prepared_release(p2);
  hrx_buffer_release(r);
  hrx_runtime_release(rt);
  cr_assert_eq(atomic_load(&st.destroyed), 1, "released when the runtime is torn down");
}

Test(SUITE, runtime_fault_fails_everything_cleanly) {
  RUNTIME(rt, 0, 0);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 64);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  hrx_prepared *held = gated(rt, &gate, hrx_view_whole(h), HRX_ACCESS_READ);
  hrx_graph *g = graph(rt);
  OK(hrx_graph_fill(g, hrx_view_whole(d), 1, NULL));
  hrx_prepared *p = prepare(g);
  hrx_graph *g2 = graph(rt);
  OK(hrx_graph_copy(g2, hrx_view_whole(d), hrx_view_whole(h), NULL)); /* reads h: no conflict */
  hrx_prepared *after = prepare(g2);
  hrx_completion *ch, *ca;
  OK(hrx_submit(held, &ch));
  cr_assert(ut_gate_entered(&gate, 1));
  OK(hrx_submit(after, &ca));
  OK(hrx_completion_wait(ca, WAIT));
  hrx_completion_release(ca);
  OK(hrx_runtime_inject_fault(rt, HRX_FAULT_RUNTIME));
  ERR(run_once(p), HRX_E_DEVICE_LOST, "runtime failed: injected runtime fault");
  ut_gate_open(&gate);
  ERR(hrx_completion_wait(ch, WAIT), HRX_E_DEVICE_LOST, "runtime failed");
  ERR(hrx_runtime_health(rt), HRX_E_DEVICE_LOST, "injected runtime fault");
  hrx_buffer *nb = NULL;
  ERR(hrx_buffer_create(rt, HRX_MEMORY_DEVICE, 64, &nb), HRX_E_DEVICE_LOST, "runtime failed");
  hrx_graph *ng = NULL;
  ERR(hrx_graph_create(rt, &ng), HRX_E_DEVICE_LOST, "runtime failed");
  hrx_completion *c = NULL;
  ERR(hrx_submit(after, &c), HRX_E_DEVICE_LOST, "runtime failed");
  void *ptr;
  ERR(hrx_buffer_map(h, HRX_ACCESS_READ, &ptr), HRX_E_DEVICE_LOST, "runtime failed");
  ERR(hrx_runtime_drain(rt), HRX_E_DEVICE_LOST, "runtime failed");
  hrx_completion_release(ch);
  hrx_prepared_release(held);
  hrx_prepared_release(p);
  hrx_prepared_release(after);
  hrx_buffer_release(d);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}

/* ---- update in place ---- */

Test(SUITE, update_in_place_and_reinstantiate) {
  RUNTIME(rt, 1, 0);
  enum { N = 512 };
  hrx_buffer *a = buffer(rt, HRX_MEMORY_DEVICE, N * 4);
  hrx_buffer *b = buffer(rt, HRX_MEMORY_DEVICE, N * 4);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, N * 4);
  hrx_kernel *add = NULL;
  OK(ut_kernel(rt, "add", N, 1.0f, &add));
  hrx_constant c1 = {.size = 4, .value.f32 = 1.5f}, c2 = {.size = 4, .value.f32 = -4.0f};
  hrx_view va = hrx_view_whole(a), vb = hrx_view_whole(b);
  hrx_graph *g = graph(rt);
  OK(hrx_graph_fill(g, va, 0, NULL));
  OK(hrx_graph_dispatch(g, add, &va, 1, &c1, 1, NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(h), va, NULL));
  hrx_prepared *p = prepare(g);
  OK(run_once(p));
  float out[N];
  OK(ut_get(rt, h, 0, out, sizeof out));
  cr_assert_float_eq(out[7], 1.5f, 0);
  hrx_counters k0, k1;
  OK(hrx_runtime_counters(rt, &k0));
  /* Same topology, new views and constant: updated in place. */
  g = graph(rt);
  OK(hrx_graph_fill(g, vb, 0, NULL));
  OK(hrx_graph_dispatch(g, add, &vb, 1, &c2, 1, NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(h), vb, NULL));
  hrx_update_mode mode = HRX_UPDATE_REINSTANTIATED;
  OK(hrx_prepared_update(p, g, 0, &mode));
  cr_assert_eq(mode, HRX_UPDATE_IN_PLACE);
  OK(hrx_runtime_counters(rt, &k1));
  cr_assert_eq(k1.native_graphs_updated - k0.native_graphs_updated, 1u);
  cr_assert_eq(k1.native_graphs_prepared, k0.native_graphs_prepared);
  OK(run_once(p));
  OK(ut_get(rt, h, 0, out, sizeof out));
  for (int i = 0; i < N; i++) cr_assert_float_eq(out[i], -4.0f, 0, "element %d: %g", i, out[i]);
  /* A held completion makes the update Busy. */
  hrx_completion *c = NULL;
  OK(hrx_submit(p, &c));
  OK(hrx_completion_wait(c, WAIT));
  /* ... unless the builder holds exactly the prepared operations: nothing changes. */
  g = graph(rt);
  OK(hrx_graph_fill(g, vb, 0, NULL));
  OK(hrx_graph_dispatch(g, add, &vb, 1, &c2, 1, NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(h), vb, NULL));
  OK(hrx_runtime_counters(rt, &k0));
  OK(hrx_prepared_update(p, g, 0, &mode));
  cr_assert_eq(mode, HRX_UPDATE_UNCHANGED);
  OK(hrx_runtime_counters(rt, &k1));
  cr_assert_eq(k1.native_graphs_updated, k0.native_graphs_updated);
  cr_assert_eq(k1.native_graphs_prepared, k0.native_graphs_prepared);
  /* A changed constant while the completion is held is Busy. */
  g = graph(rt);
  OK(hrx_graph_fill(g, vb, 0, NULL));
  OK(hrx_graph_dispatch(g, add, &vb, 1, &c1, 1, NULL));
  OK(hrx_graph_copy(g, hrx_view_whole(h), vb, NULL));
  ERR(hrx_prepared_update(p, g, 0, &mode), HRX_E_BUSY, "completion is held");
  hrx_graph_release(g);
  g = graph(rt);
  OK(hrx_graph_fill(g, vb, 0, NULL));
  ERR(hrx_prepared_update(p, g, 0, &mode), HRX_E_BUSY, "completion is held");
  hrx_completion_release(c);
  /* A different topology (one operation fewer) is re-instantiated. */
  OK(hrx_prepared_update(p, g, 0, &mode));
  cr_assert_eq(mode, HRX_UPDATE_REINSTANTIATED);
  cr_assert_eq(hrx_prepared_regions(p), 1u);
  /* Forced re-instantiation of the same topology. */
  g = graph(rt);
  OK(hrx_graph_fill(g, va, 3, NULL));
  OK(hrx_prepared_update(p, g, HRX_UPDATE_FORCE_REINSTANTIATE, &mode));
  cr_assert_eq(mode, HRX_UPDATE_REINSTANTIATED);
  OK(run_once(p));
  unsigned char bytes[16];
  OK(ut_get(rt, a, 0, bytes, sizeof bytes));
  for (int i = 0; i < 16; i++) cr_assert_eq(bytes[i], 3);
  g = graph(rt);
  ERR(hrx_prepared_update(p, g, 0, &mode), HRX_E_INVALID, "empty graph");
  ERR(hrx_prepared_update(p, g, 8, &mode), HRX_E_INVALID, "unknown flags");
  hrx_graph_release(g);
  hrx_prepared_release(p);
  hrx_kernel_release(add);
  hrx_buffer_release(a);
  hrx_buffer_release(b);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
}

Test(SUITE, drain_and_release_with_work_in_flight) {
  RUNTIME(rt, 2, 0);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 4096);
  hrx_graph *g = graph(rt);
  for (int i = 0; i < 16; i++) OK(hrx_graph_fill(g, hrx_view_make(d, (size_t)i * 256, 256), (uint8_t)i, NULL));
  hrx_prepared *p = prepare(g);
  hrx_completion *c1, *c2;
  OK(hrx_submit(p, &c1));
  OK(hrx_submit(p, &c2));
  /* The caller drops everything but the completions: the runs keep what they use alive. */
  hrx_prepared_release(p);
  hrx_buffer_release(d);
  OK(hrx_runtime_drain(rt));
  OK(hrx_completion_wait(c1, WAIT));
  OK(hrx_completion_wait(c2, WAIT));
  hrx_runtime_release(rt);
  /* Completions outlive their runtime. */
  OK(hrx_completion_status(c1));
  hrx_completion_release(c1);
  hrx_completion_release(c2);
}

Test(SUITE, everything_released_while_a_run_is_in_flight) {
  RUNTIME(rt, 0, 0);
  ut_gate gate;
  ut_gate_init(&gate);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  hrx_prepared *p = gated(rt, &gate, hrx_view_whole(h), HRX_ACCESS_WRITE);
  hrx_completion *c = NULL;
  OK(hrx_submit(p, &c));
  cr_assert(ut_gate_entered(&gate, 1));
  /* The run holds the last references now; the runtime is torn down on its own thread
   * once the run finishes, and the completion outlives it. */
  hrx_prepared_release(p);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
  int done = 1;
  OK(hrx_completion_poll(c, &done));
  cr_assert_eq(done, 0);
  OK(hrx_completion_cancel(c)); /* cancelling a run whose only holder is itself */
  ut_gate_open(&gate);
  ERR(hrx_completion_wait(c, WAIT), HRX_E_CANCELLED, "cancelled");
  hrx_completion_release(c);
  /* Give the detached teardown time to finish before the process (and LeakSanitizer) ends. */
  struct timespec ts = {0, 300000000};
  nanosleep(&ts, NULL);
  ut_gate_destroy(&gate);
}

typedef struct waiter {
  hrx_completion *c;
  hrx_runtime *rt;
  hrx_status wait_status, drain_status;
  char message[256];
} waiter;

static hrx_status waiting_cb(const hrx_callback_view *v, size_t n, void *user) {
  (void)v;
  (void)n;
  waiter *w = user;
  w->wait_status = hrx_completion_wait(w->c, HRX_WAIT_FOREVER);
  snprintf(w->message, sizeof w->message, "%s", hrx_last_error());
  w->drain_status = hrx_runtime_drain(w->rt);
  return HRX_OK;
}

Test(SUITE, waiting_inside_a_callback_is_refused_not_deadlocked) {
  RUNTIME(rt, 0, 0);
  hrx_buffer *d = buffer(rt, HRX_MEMORY_DEVICE, 64);
  hrx_buffer *h = buffer(rt, HRX_MEMORY_HOST_VISIBLE, 64);
  ut_gate gate;
  ut_gate_init(&gate);
  hrx_graph *g = graph(rt);
  hrx_binding b = {hrx_view_whole(d), HRX_ACCESS_WRITE};
  OK(hrx_graph_scoped(g, &b, 1, ut_gate_cb, &gate, NULL, NULL)); /* held on the scoped worker */
  hrx_prepared *held = prepare(g);
  hrx_completion *ch = NULL, *cw = NULL;
  OK(hrx_submit(held, &ch));
  cr_assert(ut_gate_entered(&gate, 1));
  waiter w = {ch, rt, HRX_OK, HRX_OK, ""};
  g = graph(rt);
  hrx_binding hb = {hrx_view_whole(h), HRX_ACCESS_READ};
  OK(hrx_graph_host(g, &hb, 1, waiting_cb, &w, NULL, NULL));
  hrx_prepared *wp = prepare(g);
  OK(hrx_submit(wp, &cw));
  OK(hrx_completion_wait(cw, WAIT));
  cr_assert_eq(w.wait_status, HRX_E_INVALID, "%s", hrx_status_name(w.wait_status));
  cr_assert(strstr(w.message, "called from a callback of the same runtime"), "%s", w.message);
  cr_assert_eq(w.drain_status, HRX_E_INVALID);
  ut_gate_open(&gate);
  OK(hrx_completion_wait(ch, WAIT));
  hrx_completion_release(ch);
  hrx_completion_release(cw);
  hrx_prepared_release(held);
  hrx_prepared_release(wp);
  hrx_buffer_release(d);
  hrx_buffer_release(h);
  hrx_runtime_release(rt);
  ut_gate_destroy(&gate);
}
