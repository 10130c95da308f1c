/* scaled_dot_product_attention's prefill through cuDNN's fused flash attention (cuDNN 9's
 * runtime-fusion engines), described to cuDNN's backend API as an operation graph. cuDNN is
 * loaded at run time (cudnn_lib.c); nuvec never links it.
 *
 * Which nodes: those sdpa_mma would run (float16/bfloat16, D = Dv in {64, 80, 96, 128, 256},
 * more than 16 queries) without a mask array or sinks, causal only with Lq <= Lk, every tensor
 * under 2^31 elements. nuvec's causal rule is bottom-right aligned (query i sees the keys at
 * positions <= i + Lk - Lq); cuDNN's graph states the same rule, so every row sees at least
 * one key. The graph carries the softmax's statistics (virtual): without them cuDNN 9 read it
 * as the older short-sequence pattern (no engine, or illegal addresses, on the H200 in session
 * 9). On the H200 (cuDNN 9.19, session 10) every case of tests/gpu/test_gpu_fast_sdpa_cudnn.py
 * with a positive scale matched the CPU, and the bench row (B 8, H 32, L 4096, D 128, causal,
 * bf16) took 1.93 ms against torch's 1.83 (sdpa_mma: 3.72). By default (NUVEC_CUDNN_SDPA unset
 * or auto) cuDNN runs these nodes where libcudnn.so.9 loads and its graph finalizes, sdpa_mma
 * elsewhere; =0 never uses cuDNN; =1 requires it for these nodes (an error naming why where
 * cuDNN is missing or cannot run one). NUVEC_LOG_FALLBACK=1
 * names on stderr each shape cuDNN declined, with cuDNN's reason (once per shape; once in all
 * where cuDNN is missing), and for each plan built the graph, heuristics mode, configuration
 * and engine cuDNN chose.
 *
 * The graph cuDNN's flash attention engines recognize (the one cuDNN's frontend builds for an
 * inference SDPA; tensors [b, h, s, d] with their strides; every intermediate virtual):
 *   S  = matmul(Q [B, Hq, Lq, D], Kᵀ [B, Hkv, D, Lk])       float32 [B, Hq, Lq, Lk]
 *   S1 = S · scale                                           scale: float32, by value
 *   causal: r = gen_index(S1, axis 2), c = gen_index(S1, axis 3) (int32, computed in float);
 *           Lq < Lk: r = (r + Lk) - Lq (two int32 ops with by-value int32 scalars, cuDNN's
 *           bottom-right diagonal); m = r >= c (boolean); S1 = select(S1, lowest float, m)
 *   softmax: M = max over axis 3, E = exp(S1 - M), Z = sum of E over axis 3, the statistics
 *           M + log Z (float32 [B, Hq, Lq, 1]: the branch that marks the flash pattern; virtual
 *           for inference), P = E / Z in the input dtype
 *   O  = matmul(P, V [B, Hkv, Lk, D])                        the output [B, Hq, Lq, D]
 * Should no engine take it, the same graph with the statistics written to scratch (the
 * training form) comes next, and for a node without a causal mask on cuDNN 9.13.1 or later
 * cuDNN's single SDPA operation (Q, K as stored, V, O, the scale by value) last.
 * Grouped heads (Hkv dividing Hq) are cuDNN's own: K and V keep their Hkv heads. q, k and v
 * are described in place when their strides allow (last stride 1, the others positive,
 * non-overlapping, multiples of 16 bytes, the first element 16-byte aligned: row-contiguous
 * arrays and transposed views such as [B, L, H, D] storage), else copied row-contiguous into
 * scratch first. The output is the node's row-contiguous [B, Hq, Lq, D].
 *
 * Plans: the graph, cuDNN's heuristics (mode A, then mode B) and the first engine
 * configuration whose execution plan finalizes (its workspace at most 256 MiB) are built once
 * per key (device, dtype, causal, shape, strides) under the device's handle lock and cached
 * (64 keys, oldest replaced; a captured node holds its plan until hrx drops it). A key cuDNN
 * declined is cached with cuDNN's reason. The scale, the masked value and the diagonal's
 * offsets are by-value scalars of the variant pack, so one plan serves every scale. The node
 * records one captured operation (bindings q, k, v read, the output written, node scratch
 * read-write: cuDNN's workspace, then the statistics where the graph writes them) whose capture builds the variant pack and calls cudnnBackendExecute
 * on hrx's capture stream under the handle's lock. Every cuDNN status is checked; a failure
 * carries cudnnGetErrorString's and cudnnGetLastErrorString's text. */
#include "cuda/fast_sdpa_cudnn.h"

#include <cuda_runtime.h>
#include <float.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.h"
#include "cuda/cudnn_lib.h"
#include "ops/fast_sdpa.h"

#define OP "scaled_dot_product_attention"
#define PLAN_CACHE 64
#define MAX_CONFIGS 16
#define MAX_DESCS 96
#define WORKSPACE_CAP ((int64_t)256 << 20)
#define WHY_SIZE 1400

/* ---- Loading ---- */

static struct {
  NV__DNN_FN(cudnnBackendCreateDescriptor);
  NV__DNN_FN(cudnnBackendDestroyDescriptor);
  NV__DNN_FN(cudnnBackendSetAttribute);
  NV__DNN_FN(cudnnBackendGetAttribute);
  NV__DNN_FN(cudnnBackendFinalize);
  NV__DNN_FN(cudnnBackendExecute);
} be;

enum { MODE_OFF = 0, MODE_AUTO = 1, MODE_REQUIRED = 2 };
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int mode;
static bool ready, log_declines;
static size_t version;
static char why_not[400]; /* why this path cannot run at all */

static void load(void) {
  const char *e = getenv("NUVEC_CUDNN_SDPA");
  mode = !e || !*e || !strcmp(e, "auto") ? MODE_AUTO : !strcmp(e, "1") ? MODE_REQUIRED : MODE_OFF;
  log_declines = nv__env_long("NUVEC_LOG_FALLBACK", 0) != 0;
  if (mode == MODE_OFF) return;
  const char *why = NULL;
  if (!nv__dnn_load(&why) ||
      !nv__dnn_sym("cudnnBackendCreateDescriptor", &be.cudnnBackendCreateDescriptor, &why) ||
      !nv__dnn_sym("cudnnBackendDestroyDescriptor", &be.cudnnBackendDestroyDescriptor, &why) ||
      !nv__dnn_sym("cudnnBackendSetAttribute", &be.cudnnBackendSetAttribute, &why) ||
      !nv__dnn_sym("cudnnBackendGetAttribute", &be.cudnnBackendGetAttribute, &why) ||
      !nv__dnn_sym("cudnnBackendFinalize", &be.cudnnBackendFinalize, &why) ||
      !nv__dnn_sym("cudnnBackendExecute", &be.cudnnBackendExecute, &why)) {
    snprintf(why_not, sizeof why_not, "cuDNN not found (%s)", why ? why : "?");
    return;
  }
  version = nv__dnn.cudnnGetVersion();
  /* The backend attributes used here are cuDNN 9's; its fused attention of 9.10.0 and 9.10.1
   * has known wrong results (cuDNN's frontend refuses them). */
  if (version < 90000)
    snprintf(why_not, sizeof why_not, "cuDNN %zu is older than 9.0", version);
  else if (version == 91000 || version == 91001)
    snprintf(why_not, sizeof why_not, "cuDNN %zu's fused attention has known bugs", version);
  else
    ready = true;
}

/* ---- Plans ---- */

/* What a plan depends on (zero-filled, compared with memcmp). Strides are in elements, of q,
 * k and v as cuDNN reads them ([b, h, s, d]). */
typedef struct plan_key {
  int32_t device, dtype, causal, pad;
  int64_t B, Hq, Hkv, Lq, Lk, D;
  int64_t st[3][4];
} plan_key;

/* The graphs tried, in this order (see the file comment): the composite graph with its
 * softmax statistics virtual, the same with the statistics written to scratch, and (cuDNN
 * 9.13.1 on, no causal mask) cuDNN's single SDPA operation. */
enum { FORM_VIRTUAL_STATS, FORM_SCRATCH_STATS, FORM_UNIFIED, FORMS };
static const char *const form_name[FORMS] = {"composite graph", "composite graph with statistics",
                                             "SDPA operation"};

typedef struct plan {
  atomic_int refs;
  plan_key key;
  bool ok;
  char why[WHY_SIZE]; /* !ok: cuDNN's reason */
  nv__dnn_device *dev;
  cudnnBackendDescriptor_t descs[MAX_DESCS]; /* every descriptor, destroyed with the plan */
  int ndescs;
  cudnnBackendDescriptor_t exec; /* the execution plan (one of descs) */
  int form;                      /* the graph the plan runs (FORM_*) */
  int64_t ws;                    /* cuDNN's workspace (bytes) */
  int64_t stats_at;              /* FORM_SCRATCH_STATS: the statistics' offset in the scratch */
  int64_t scratch;               /* the node's scratch: the workspace, then the statistics */
  char chose[160];               /* ok: which heuristics mode, configuration and engine */
} plan;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static plan *cache[PLAN_CACHE];
static int cache_next;

static void plan_release(plan *p) {
  if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
  for (int i = p->ndescs - 1; i >= 0; i--) be.cudnnBackendDestroyDescriptor(p->descs[i]);
  free(p);
}

/* uids of the graph's tensors: the variant pack's first, then the virtual ones. */
enum { U_Q = 1, U_K, U_V, U_O, U_SCALE, U_LOWEST, U_SKV, U_SQ, U_STATS, U_VIRTUAL = 100 };

/* A graph under construction: its descriptors (owned by the plan) and the first failure. */
typedef struct build {
  plan *p;
  bool failed;
  int64_t next_uid;
} build;

static void fail(build *b, const char *call, cudnnStatus_t s) {
  if (b->failed) return;
  b->failed = true;
  nv__dnn_describe(call, s, b->p->why, sizeof b->p->why);
}

static cudnnBackendDescriptor_t make(build *b, cudnnBackendDescriptorType_t type) {
  if (b->failed) return NULL;
  if (b->p->ndescs == MAX_DESCS) {
    b->failed = true;
    snprintf(b->p->why, sizeof b->p->why, "more than %d cuDNN descriptors", MAX_DESCS);
    return NULL;
  }
  cudnnBackendDescriptor_t d = NULL;
  cudnnStatus_t s = be.cudnnBackendCreateDescriptor(type, &d);
  if (s != CUDNN_STATUS_SUCCESS) {
    fail(b, "cudnnBackendCreateDescriptor", s);
    return NULL;
  }
  b->p->descs[b->p->ndescs++] = d;
  return d;
}

static void set(build *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                cudnnBackendAttributeType_t type, int64_t n, const void *value, const char *what) {
  if (b->failed) return;
  cudnnStatus_t s = be.cudnnBackendSetAttribute(d, name, type, n, value);
  if (s != CUDNN_STATUS_SUCCESS) {
    char call[160];
    snprintf(call, sizeof call, "cudnnBackendSetAttribute(%s)", what);
    fail(b, call, s);
  }
}

static void attach(build *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                 cudnnBackendDescriptor_t value, const char *what) {
  set(b, d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, what);
}

static void finalize(build *b, cudnnBackendDescriptor_t d, const char *what) {
  if (b->failed) return;
  cudnnStatus_t s = be.cudnnBackendFinalize(d);
  if (s != CUDNN_STATUS_SUCCESS) {
    char call[160];
    snprintf(call, sizeof call, "cudnnBackendFinalize(%s)", what);
    fail(b, call, s);
  }
}

/* A finalized tensor of 4 dimensions; uid 0 takes the next virtual uid. */
static cudnnBackendDescriptor_t tensor(build *b, int64_t uid, cudnnDataType_t type,
                                       const int64_t dim[4], const int64_t st[4], bool virt,
                                       bool by_value) {
  cudnnBackendDescriptor_t t = make(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  if (!uid) uid = b->next_uid++;
  int64_t align = 16;
  set(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
  set(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor data type");
  set(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim, "tensor dimensions");
  set(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, st, "tensor strides");
  set(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
  if (virt) set(b, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "tensor virtual");
  if (by_value)
    set(b, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "tensor by value");
  finalize(b, t, "tensor");
  return t;
}

/* A virtual row-contiguous tensor of dims `dim`. */
static cudnnBackendDescriptor_t inner(build *b, cudnnDataType_t type, const int64_t dim[4]) {
  int64_t st[4] = {dim[1] * dim[2] * dim[3], dim[2] * dim[3], dim[3], 1};
  return tensor(b, 0, type, dim, st, true, false);
}

/* A by-value scalar (dims and strides all 1). */
static cudnnBackendDescriptor_t scalar(build *b, int64_t uid, cudnnDataType_t type) {
  static const int64_t one[4] = {1, 1, 1, 1};
  return tensor(b, uid, type, one, one, false, true);
}

/* A pointwise operation y = mode(x[, b[, t]]) in precision `prec` (axis >= 0: GEN_INDEX's). */
static cudnnBackendDescriptor_t pointwise(build *b, cudnnPointwiseMode_t mode_,
                                          cudnnDataType_t prec, int64_t axis,
                                          cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t bt,
                                          cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y) {
  cudnnBackendDescriptor_t pw = make(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  set(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode_, "pointwise mode");
  set(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec,
      "pointwise precision");
  if (axis >= 0)
    set(b, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis");
  finalize(b, pw, "pointwise descriptor");
  cudnnBackendDescriptor_t op = make(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  attach(b, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw, "pointwise op descriptor");
  attach(b, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x, "pointwise x");
  if (bt) attach(b, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, bt, "pointwise b");
  if (t) attach(b, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t, "pointwise t");
  attach(b, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y, "pointwise y");
  finalize(b, op, "pointwise operation");
  return op;
}

static cudnnBackendDescriptor_t matmul(build *b, cudnnBackendDescriptor_t a,
                                       cudnnBackendDescriptor_t bm, cudnnBackendDescriptor_t c) {
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t md = make(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  set(b, md, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "matmul compute type");
  finalize(b, md, "matmul descriptor");
  cudnnBackendDescriptor_t op = make(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  attach(b, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a, "matmul a");
  attach(b, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, bm, "matmul b");
  attach(b, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c, "matmul c");
  attach(b, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, md, "matmul descriptor");
  finalize(b, op, "matmul operation");
  return op;
}

static cudnnBackendDescriptor_t reduction(build *b, cudnnReduceTensorOp_t how,
                                          cudnnBackendDescriptor_t x,
                                          cudnnBackendDescriptor_t y) {
  cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t rd = make(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  set(b, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &how,
      "reduction operator");
  set(b, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32,
      "reduction compute type");
  finalize(b, rd, "reduction descriptor");
  cudnnBackendDescriptor_t op = make(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  attach(b, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x, "reduction x");
  attach(b, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y, "reduction y");
  attach(b, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, rd, "reduction descriptor");
  finalize(b, op, "reduction operation");
  return op;
}

/* The operation graph of key `k` in form `form` (see the file comment), finalized on
 * `handle`. */
static cudnnBackendDescriptor_t graph(build *b, const plan_key *k, int form,
                                      cudnnHandle_t handle) {
  const cudnnDataType_t io = k->dtype == NV_DTYPE_FLOAT16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32, b8 = CUDNN_DATA_BOOLEAN;
  const int64_t *qs = k->st[0], *ks = k->st[1], *vs = k->st[2];
  const int64_t qd[4] = {k->B, k->Hq, k->Lq, k->D}, ktd[4] = {k->B, k->Hkv, k->D, k->Lk};
  const int64_t kts[4] = {ks[0], ks[1], ks[3], ks[2]}, vd[4] = {k->B, k->Hkv, k->Lk, k->D};
  const int64_t os[4] = {k->Hq * k->Lq * k->D, k->Lq * k->D, k->D, 1};
  const int64_t sd[4] = {k->B, k->Hq, k->Lq, k->Lk}, rd[4] = {k->B, k->Hq, k->Lq, 1};
  cudnnBackendDescriptor_t ops[20];
  int n = 0;

  cudnnBackendDescriptor_t q = tensor(b, U_Q, io, qd, qs, false, false);
  cudnnBackendDescriptor_t v = tensor(b, U_V, io, vd, vs, false, false);
  cudnnBackendDescriptor_t o = tensor(b, U_O, io, qd, os, false, false);
  if (form == FORM_UNIFIED) {
#if CUDNN_VERSION >= 91300
    /* One SDPA operation: K as stored ([b, h, s, d], not transposed), the scale by value. */
    cudnnBackendDescriptor_t kk = tensor(b, U_K, io, vd, ks, false, false);
    cudnnBackendDescriptor_t sc = scalar(b, U_SCALE, f32);
    cudnnBackendDescriptor_t op = make(b, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR);
    attach(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, q, "SDPA q");
    attach(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, kk, "SDPA k");
    attach(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, v, "SDPA v");
    attach(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, o, "SDPA output");
    attach(b, op, CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, sc, "SDPA scale");
    finalize(b, op, "SDPA operation");
    ops[n++] = op;
#else
    if (!b->failed) {
      b->failed = true;
      snprintf(b->p->why, sizeof b->p->why, "nuvec was built with cuDNN %d's headers (before 9.13)",
               CUDNN_VERSION);
    }
#endif
  } else {
    cudnnBackendDescriptor_t kt = tensor(b, U_K, io, ktd, kts, false, false);
    cudnnBackendDescriptor_t s = inner(b, f32, sd);
    ops[n++] = matmul(b, q, kt, s);
    cudnnBackendDescriptor_t s1 = inner(b, f32, sd);
    ops[n++] = pointwise(b, CUDNN_POINTWISE_MUL, f32, -1, s, scalar(b, U_SCALE, f32), NULL, s1);
    if (k->causal) {
      /* The index tensors are int32 computed in float (cuDNN's frontend states them so); the
       * comparison is computed in boolean, the bottom-right shift in int32. */
      cudnnBackendDescriptor_t r = inner(b, i32, sd), c = inner(b, i32, sd);
      ops[n++] = pointwise(b, CUDNN_POINTWISE_GEN_INDEX, f32, 2, s1, NULL, NULL, r);
      ops[n++] = pointwise(b, CUDNN_POINTWISE_GEN_INDEX, f32, 3, s1, NULL, NULL, c);
      if (k->Lq != k->Lk) {
        cudnnBackendDescriptor_t r1 = inner(b, i32, sd), r2 = inner(b, i32, sd);
        ops[n++] = pointwise(b, CUDNN_POINTWISE_ADD, i32, -1, r, scalar(b, U_SKV, i32), NULL, r1);
        ops[n++] = pointwise(b, CUDNN_POINTWISE_SUB, i32, -1, r1, scalar(b, U_SQ, i32), NULL, r2);
        r = r2;
      }
      cudnnBackendDescriptor_t m = inner(b, b8, sd), s2 = inner(b, f32, sd);
      ops[n++] = pointwise(b, CUDNN_POINTWISE_CMP_GE, b8, -1, r, c, NULL, m);
      ops[n++] = pointwise(b, CUDNN_POINTWISE_BINARY_SELECT, f32, -1, s1,
                           scalar(b, U_LOWEST, f32), m, s2);
      s1 = s2;
    }
    /* The flash softmax: M = max, E = exp(S - M), Z = sum E, the statistics M + log Z (cuDNN
     * recognizes the flash attention by this branch: without it the graph reads as the older
     * short-sequence pattern, whose matcher fails), P = E / Z in the input dtype (the second
     * matmul's A must be the i/o type). */
    const int64_t rs[4] = {k->Hq * k->Lq, k->Lq, 1, 1};
    cudnnBackendDescriptor_t mx = inner(b, f32, rd), e0 = inner(b, f32, sd), e = inner(b, f32, sd);
    cudnnBackendDescriptor_t z = inner(b, f32, rd), lz = inner(b, f32, rd), p = inner(b, io, sd);
    cudnnBackendDescriptor_t st = form == FORM_SCRATCH_STATS
                                      ? tensor(b, U_STATS, f32, rd, rs, false, false)
                                      : inner(b, f32, rd);
    ops[n++] = reduction(b, CUDNN_REDUCE_TENSOR_MAX, s1, mx);
    ops[n++] = pointwise(b, CUDNN_POINTWISE_SUB, f32, -1, s1, mx, NULL, e0);
    ops[n++] = pointwise(b, CUDNN_POINTWISE_EXP, f32, -1, e0, NULL, NULL, e);
    ops[n++] = reduction(b, CUDNN_REDUCE_TENSOR_ADD, e, z);
    ops[n++] = pointwise(b, CUDNN_POINTWISE_LOG, f32, -1, z, NULL, NULL, lz);
    ops[n++] = pointwise(b, CUDNN_POINTWISE_ADD, f32, -1, mx, lz, NULL, st);
    ops[n++] = pointwise(b, CUDNN_POINTWISE_DIV, f32, -1, e, z, NULL, p);
    ops[n++] = matmul(b, p, v, o);
  }

  cudnnBackendDescriptor_t g = make(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  /* The graph's handle is deprecated in cuDNN 9 (the heuristics and the plan take the device);
   * nuvec always has one; a NULL handle (a check of the descriptors on a machine without a
   * device) sets none. */
  if (handle)
    set(b, g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "graph handle");
  set(b, g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, ops, "graph ops");
  finalize(b, g, "operation graph");
  return g;
}

/* cuDNN's global index of the engine of configuration `cfg`, -1 where it gives none (for
 * the log only). */
static int64_t engine_index(cudnnBackendDescriptor_t cfg) {
  cudnnBackendDescriptor_t eng = NULL;
  int64_t idx = -1, n = 0;
  if (be.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) !=
      CUDNN_STATUS_SUCCESS)
    return -1;
  if (be.cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                  1, &n, &eng) != CUDNN_STATUS_SUCCESS ||
      be.cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                  &idx) != CUDNN_STATUS_SUCCESS)
    idx = -1;
  be.cudnnBackendDestroyDescriptor(eng);
  return idx;
}

/* The first execution plan of heuristics mode `hm`'s configurations for graph `g` that
 * finalizes with a workspace within the cap; NULL (the reason in p->why) if none. Failed
 * attempts' descriptors are destroyed at once. */
static cudnnBackendDescriptor_t choose(build *b, cudnnBackendDescriptor_t g, cudnnHandle_t handle,
                                       cudnnBackendHeurMode_t hm) {
  plan *p = b->p;
  cudnnBackendDescriptor_t heur = make(b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  attach(b, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g, "heuristics graph");
  set(b, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm, "heuristics mode");
  finalize(b, heur, "engine heuristics");
  if (b->failed) return NULL;
  int64_t count = 0;
  cudnnStatus_t s = be.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, NULL);
  if (s != CUDNN_STATUS_SUCCESS) {
    fail(b, "cudnnBackendGetAttribute(heuristics result count)", s);
    return NULL;
  }
  if (count > MAX_CONFIGS) count = MAX_CONFIGS;
  if (count <= 0) {
    snprintf(p->why, sizeof p->why, "cuDNN's heuristics (mode %s) offer no engine for the graph",
             hm == CUDNN_HEUR_MODE_A ? "A" : "B");
    return NULL;
  }
  cudnnBackendDescriptor_t cfg[MAX_CONFIGS];
  int64_t made = 0, got = 0;
  for (; made < count; made++)
    if ((s = be.cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg[made])) !=
        CUDNN_STATUS_SUCCESS)
      break;
  if (made == count) {
    s = be.cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, cfg);
    if (s != CUDNN_STATUS_SUCCESS) fail(b, "cudnnBackendGetAttribute(heuristics results)", s);
  } else {
    fail(b, "cudnnBackendCreateDescriptor(engine config)", s);
  }
  if (!b->failed && got <= 0) {
    /* Every configuration failed cuDNN's support checks (its log, CUDNN_LOGLEVEL_DBG=2, names
     * each check); its last error text says which, where it gives one. */
    char last[256] = "";
    if (nv__dnn.cudnnGetLastErrorString) nv__dnn.cudnnGetLastErrorString(last, sizeof last);
    snprintf(p->why, sizeof p->why, "none of the %lld engine configurations cuDNN's heuristics "
             "(mode %s) offered supports the graph%s%.300s%s", (long long)count,
             hm == CUDNN_HEUR_MODE_A ? "A" : "B", last[0] ? " (" : "", last, last[0] ? ")" : "");
  }
  cudnnBackendDescriptor_t chosen = NULL;
  int64_t last_ws = -1;
  for (int64_t i = 0; i < got && !b->failed && !chosen; i++) {
    cudnnBackendDescriptor_t ex = NULL;
    if ((s = be.cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &ex)) !=
        CUDNN_STATUS_SUCCESS) {
      fail(b, "cudnnBackendCreateDescriptor(execution plan)", s);
      break;
    }
    const char *call = "cudnnBackendSetAttribute(plan handle)";
    s = be.cudnnBackendSetAttribute(ex, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                    &handle);
    if (s == CUDNN_STATUS_SUCCESS) {
      call = "cudnnBackendSetAttribute(plan engine config)";
      s = be.cudnnBackendSetAttribute(ex, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]);
    }
    if (s == CUDNN_STATUS_SUCCESS) {
      call = "cudnnBackendFinalize(execution plan)";
      s = be.cudnnBackendFinalize(ex);
    }
    int64_t ws = 0, nws = 0;
    if (s == CUDNN_STATUS_SUCCESS) {
      call = "cudnnBackendGetAttribute(plan workspace size)";
      s = be.cudnnBackendGetAttribute(ex, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                      CUDNN_TYPE_INT64, 1, &nws, &ws);
    }
    if (s == CUDNN_STATUS_SUCCESS && ws >= 0 && ws <= WORKSPACE_CAP &&
        p->ndescs + 2 <= MAX_DESCS) {
      chosen = ex;
      p->ws = ws;
      snprintf(p->chose, sizeof p->chose,
               "heuristics mode %s, configuration %lld of %lld, engine %lld, workspace %lld bytes",
               hm == CUDNN_HEUR_MODE_A ? "A" : "B", (long long)i + 1, (long long)got,
               (long long)engine_index(cfg[i]), (long long)ws);
      /* The plan keeps its configuration: both go to the plan's descriptors. */
      p->descs[p->ndescs++] = cfg[i];
      p->descs[p->ndescs++] = ex;
      cfg[i] = NULL;
    } else {
      if (s != CUDNN_STATUS_SUCCESS)
        nv__dnn_describe(call, s, p->why, sizeof p->why);
      else
        last_ws = ws;
      be.cudnnBackendDestroyDescriptor(ex);
    }
  }
  if (!chosen && !b->failed && last_ws >= 0 && p->why[0] == 0)
    snprintf(p->why, sizeof p->why, "the engines' workspace (%lld bytes) exceeds %lld",
             (long long)last_ws, (long long)WORKSPACE_CAP);
  for (int64_t i = 0; i < made; i++)
    if (cfg[i]) be.cudnnBackendDestroyDescriptor(cfg[i]);
  return chosen;
}

/* Builds the plan of key `k` on device `dev` (a new reference; p->ok says whether cuDNN took
 * it, p->why why not). NULL only when out of memory. */
static plan *plan_build(const plan_key *k, nv__dnn_device *dev) {
  plan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  atomic_init(&p->refs, 1);
  p->key = *k;
  p->dev = dev;
  build b = {.p = p, .failed = false, .next_uid = U_VIRTUAL};
  char whys[WHY_SIZE] = "";
  /* Engines compile for the current device: the key's, for the build. */
  int prev = -1;
  cudaError_t ce = cudaGetDevice(&prev);
  if (ce == cudaSuccess && prev != k->device) ce = cudaSetDevice(k->device);
  if (ce != cudaSuccess) {
    snprintf(p->why, sizeof p->why, "cudaSetDevice failed: %s", cudaGetErrorString(ce));
    cudaGetLastError();
    return p;
  }
  pthread_mutex_lock(&dev->lock);
  /* Each graph in turn (FORM_*), heuristics mode A then mode B for each; the descriptors of a
   * graph that got no plan are destroyed before the next. */
  size_t at = 0;
  for (int f = 0; f < FORMS && !p->exec; f++) {
    if (f == FORM_UNIFIED && (k->causal || version < 91301)) continue;
    const int mark = p->ndescs;
    char first[WHY_SIZE] = "";
    b.failed = false;
    p->why[0] = 0;
    cudnnBackendDescriptor_t g = graph(&b, k, f, dev->handle);
    const bool built = !b.failed;
    if (built) {
      p->exec = choose(&b, g, dev->handle, CUDNN_HEUR_MODE_A);
      if (!p->exec) {
        /* Whatever failed in mode A's heuristics or plans, mode B gets its turn. */
        snprintf(first, sizeof first, "%s", p->why);
        p->why[0] = 0;
        b.failed = false;
        p->exec = choose(&b, g, dev->handle, CUDNN_HEUR_MODE_B);
      }
    }
    if (p->exec) {
      p->form = f;
      break;
    }
    char tried[WHY_SIZE];
    if (built)
      snprintf(tried, sizeof tried, "%s: heuristics mode A: %.200s; mode B: %.200s", form_name[f],
               first, p->why);
    else
      snprintf(tried, sizeof tried, "%s: %.400s", form_name[f], p->why);
    if (at < sizeof whys)
      at += (size_t)snprintf(whys + at, sizeof whys - at, "%s%s", at ? " | " : "", tried);
    while (p->ndescs > mark) be.cudnnBackendDestroyDescriptor(p->descs[--p->ndescs]);
  }
  if (!p->exec) snprintf(p->why, sizeof p->why, "%s", whys);
  pthread_mutex_unlock(&dev->lock);
  if (prev >= 0 && prev != k->device && cudaSetDevice(prev) != cudaSuccess) cudaGetLastError();
  p->ok = p->exec != NULL;
  if (p->ok) {
    /* The scratch: cuDNN's workspace, then (FORM_SCRATCH_STATS) the float32 statistics. */
    p->stats_at = (p->ws + 255) / 256 * 256;
    p->scratch = p->form == FORM_SCRATCH_STATS ? p->stats_at + k->B * k->Hq * k->Lq * 4 : p->ws;
  }
  return p;
}

/* The cached plan of key `k` (a new reference), built when missing; NULL when out of memory. */
static plan *plan_get(const plan_key *k, nv__dnn_device *dev, bool *built) {
  *built = false;
  pthread_mutex_lock(&cache_lock);
  for (int i = 0; i < PLAN_CACHE; i++)
    if (cache[i] && !memcmp(&cache[i]->key, k, sizeof *k)) {
      plan *p = cache[i];
      atomic_fetch_add(&p->refs, 1);
      pthread_mutex_unlock(&cache_lock);
      return p;
    }
  pthread_mutex_unlock(&cache_lock);
  plan *p = plan_build(k, dev);
  if (!p) return NULL;
  *built = true;
  atomic_fetch_add(&p->refs, 1); /* the cache's */
  pthread_mutex_lock(&cache_lock);
  plan *old = cache[cache_next];
  cache[cache_next] = p;
  cache_next = (cache_next + 1) % PLAN_CACHE;
  pthread_mutex_unlock(&cache_lock);
  plan_release(old);
  return p;
}

/* ---- The capture ---- */

typedef struct run_data {
  plan *p;
  int64_t off[4]; /* element offsets of q, k, v and the output in their views */
  size_t esize;
  float scale, lowest;
  int32_t skv, sq;
  nv__gpu_note *note;
} run_data;

static void run_free(void *user) {
  run_data *r = user;
  if (!r) return;
  plan_release(r->p);
  nv__gpu_note_release(r->note);
  free(r);
}

/* cuDNN's fused attention on hrx's capture stream. Bindings: q, k, v (read), the output
 * (written), the workspace (read-write). */
static hrx_status run(const hrx_callback_view *views, size_t count, void *stream, void *user) {
  run_data *r = user;
  plan *p = r->p;
  if (count != 5 || views[4].length < (size_t)p->scratch) return HRX_E_INVALID;
  /* Device addresses for q, k, v, the output and the statistics; host addresses for the
   * by-value scalars (cuDNN copies them when the work is enqueued). */
  int64_t uids[9] = {U_Q, U_K, U_V, U_O, U_SCALE};
  void *ptrs[9];
  for (int i = 0; i < 4; i++)
    ptrs[i] = (char *)views[i].address + (size_t)r->off[i] * r->esize;
  ptrs[4] = &r->scale;
  int n = 5;
  if (p->form == FORM_SCRATCH_STATS)
    uids[n] = U_STATS, ptrs[n++] = (char *)views[4].address + p->stats_at;
  if (p->key.causal && p->form != FORM_UNIFIED) {
    uids[n] = U_LOWEST, ptrs[n++] = &r->lowest;
    if (p->key.Lq != p->key.Lk) {
      uids[n] = U_SKV, ptrs[n++] = &r->skv;
      uids[n] = U_SQ, ptrs[n++] = &r->sq;
    }
  }
  void *ws = views[4].address;
  cudnnBackendDescriptor_t pack = NULL;
  const char *call = "cudnnBackendCreateDescriptor(variant pack)";
  cudnnStatus_t s = be.cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
  if (s == CUDNN_STATUS_SUCCESS) {
    call = "cudnnBackendSetAttribute(variant pack)";
    s = be.cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n,
                                    uids);
    if (s == CUDNN_STATUS_SUCCESS)
      s = be.cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                      CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (s == CUDNN_STATUS_SUCCESS)
      s = be.cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                      CUDNN_TYPE_VOID_PTR, 1, &ws);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    call = "cudnnBackendFinalize(variant pack)";
    s = be.cudnnBackendFinalize(pack);
  }
  char why[WHY_SIZE] = "";
  if (s == CUDNN_STATUS_SUCCESS) {
    pthread_mutex_lock(&p->dev->lock);
    call = "cudnnSetStream";
    s = nv__dnn.cudnnSetStream(p->dev->handle, (cudaStream_t)stream);
    if (s == CUDNN_STATUS_SUCCESS) {
      call = "cudnnBackendExecute";
      s = be.cudnnBackendExecute(p->dev->handle, p->exec, pack);
    }
    if (s != CUDNN_STATUS_SUCCESS) nv__dnn_describe(call, s, why, sizeof why);
    pthread_mutex_unlock(&p->dev->lock);
  } else {
    nv__dnn_describe(call, s, why, sizeof why);
  }
  if (pack) be.cudnnBackendDestroyDescriptor(pack);
  if (s == CUDNN_STATUS_SUCCESS) return HRX_OK;
  nv__gpu_note_fail(r->note, NV_ERR_BACKEND, OP " through cuDNN on the GPU: %s", why);
  return HRX_E_CUDA;
}

/* ---- The node ---- */

/* Strides (elements) cuDNN can read operand `op` with in place, [b, h, s, d]: false when its
 * layout is not one (a last stride other than 1, zero or negative strides, overlapping rows,
 * strides or a start off 16-byte boundaries). Unit dimensions get packed strides. */
static bool in_place(const nv__operand *op, size_t es, int64_t st[4]) {
  const nv__output *m = op->meta;
  if (m->ndim != 4 || ((size_t)op->offset * es) % 16) return false;
  int64_t packed = 1;
  for (int i = 3; i >= 0; i--) {
    st[i] = m->shape[i] == 1 ? packed : m->strides[i];
    packed *= m->shape[i];
    if (st[i] <= 0 || (i < 3 && ((size_t)st[i] * es) % 16)) return false;
  }
  if (st[3] != 1) return false;
  /* No two elements at one address: walking the dimensions by increasing stride, each stride
   * covers the extent of the smaller ones. */
  int order[4] = {0, 1, 2, 3};
  for (int i = 1; i < 4; i++)
    for (int j = i; j > 0 && st[order[j]] < st[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1], order[j - 1] = t;
    }
  int64_t reach = 1;
  for (int i = 0; i < 4; i++) {
    int d = order[i];
    if (m->shape[d] == 1) continue;
    if (st[d] < reach) return false;
    reach = st[d] * m->shape[d];
  }
  return true;
}

static void packed_strides(const int *shape, int64_t st[4]) {
  st[3] = 1;
  for (int i = 2; i >= 0; i--) st[i] = st[i + 1] * shape[i + 1];
}

/* Whether the node is in this path's domain (see the file comment). */
static bool in_domain(const nv__node *node, const nv__operand *in) {
  const nv__sdpa_params *prm = node->params;
  const nv__output *q = in[0].meta, *k = in[1].meta, *v = in[2].meta;
  nv_dtype dt = node->out[0].dtype;
  if (dt != NV_DTYPE_FLOAT16 && dt != NV_DTYPE_BFLOAT16) return false;
  if (prm->mask != NV__SDPA_MASK_NONE || prm->sinks) return false;
  /* A scale of 0, a negative or a NaN one: on the H200 (cuDNN 9.19) the flash engine gave NaN
   * for -0.3 and wrong rows for 0 (its softmax assumes a positive scale); nuvec's kernel runs
   * them. */
  if (!(prm->scale > 0)) return false;
  if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4) return false;
  int D = q->shape[3], Lq = q->shape[2], Lk = k->shape[2];
  if (v->shape[3] != D || (D != 64 && D != 80 && D != 96 && D != 128 && D != 256)) return false;
  if (Lq <= 16 || Lk <= 0 || (prm->causal && Lq > Lk)) return false;
  if (q->size >= INT32_MAX || k->size >= INT32_MAX || v->size >= INT32_MAX ||
      node->out[0].size >= INT32_MAX)
    return false;
  return true;
}

/* The node's shapes for messages. */
static void shapes_of(const plan_key *k, char *buf, size_t cap) {
  snprintf(buf, cap, "q [%lld, %lld, %lld, %lld], k and v [%lld, %lld, %lld, %lld] %s%s",
           (long long)k->B, (long long)k->Hq, (long long)k->Lq, (long long)k->D,
           (long long)k->B, (long long)k->Hkv, (long long)k->Lk, (long long)k->D,
           nv_dtype_name((nv_dtype)k->dtype), k->causal ? ", causal" : "");
}

/* NV__GPU_DECLINED in the automatic mode; the error NUVEC_CUDNN_SDPA=1 makes of `why`. */
static nv_status decline(const plan_key *k, const char *why) {
  if (mode != MODE_REQUIRED) return NV__GPU_DECLINED;
  char sh[200];
  shapes_of(k, sh, sizeof sh);
  return nv__set_error(NV_ERR_UNSUPPORTED,
                       OP ": cuDNN's fused attention cannot run %s: %s; NUVEC_CUDNN_SDPA=1 "
                       "requires it (unset it to use nuvec's own kernel there)",
                       sh, why);
}

nv_status nv__gpu_sdpa_cudnn(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                             nv__gpu_arg out) {
  pthread_once(&load_once, load);
  if (mode == MODE_OFF || !in_domain(node, in)) return NV__GPU_DECLINED;
  const nv__sdpa_params *prm = node->params;
  const nv__output *mq = in[0].meta, *mk = in[1].meta;
  nv_dtype dt = node->out[0].dtype;
  size_t es = nv_dtype_size(dt);
  plan_key k;
  memset(&k, 0, sizeof k);
  k.device = nv__gpu_device_index(ctx);
  k.dtype = (int32_t)dt;
  k.causal = prm->causal;
  k.B = mq->shape[0], k.Hq = mq->shape[1], k.Lq = mq->shape[2], k.D = mq->shape[3];
  k.Hkv = mk->shape[1], k.Lk = mk->shape[2];
  bool place[3];
  for (int i = 0; i < 3; i++) {
    place[i] = in_place(&in[i], es, k.st[i]);
    if (!place[i]) packed_strides(in[i].meta->shape, k.st[i]);
  }
  if (!ready) {
    static atomic_bool told;
    if (log_declines && mode != MODE_REQUIRED && !atomic_exchange(&told, true))
      fprintf(stderr, "nuvec: " OP ": cuDNN declined every node: %s; sdpa_mma runs them\n",
              why_not);
    return decline(&k, why_not);
  }
  if (k.causal && k.Lq != k.Lk && version < 90600 && (k.Lq % 64 || k.Lk % 64))
    return decline(&k, "cuDNN before 9.6 takes a bottom-right causal mask only for lengths "
                       "that are multiples of 64");
  if ((out.view.offset + (size_t)out.offset * es) % 16)
    return decline(&k, "the output does not start on a 16-byte boundary");
  nv__dnn_device *dev = NULL;
  nv_status st = nv__dnn_device_get(ctx, OP, &dev);
  if (st != NV_OK) return mode == MODE_REQUIRED ? st : NV__GPU_DECLINED;
  bool built = false;
  plan *p = plan_get(&k, dev, &built);
  if (!p) return nv__set_error(NV_ERR_OUT_OF_MEMORY, OP ": out of memory");
  if (p->ok && built && log_declines) {
    char sh[200];
    shapes_of(&k, sh, sizeof sh);
    fprintf(stderr, "nuvec: " OP ": cuDNN runs %s: %s, %s\n", sh, form_name[p->form], p->chose);
  }
  if (!p->ok) {
    if (built && log_declines && mode != MODE_REQUIRED) {
      char sh[200];
      shapes_of(&k, sh, sizeof sh);
      fprintf(stderr, "nuvec: " OP ": cuDNN declined %s: %s; sdpa_mma runs it\n", sh, p->why);
    }
    st = decline(&k, p->why);
    plan_release(p);
    return st;
  }
  /* Operands: in place where the plan reads them so, else row-contiguous copies (scratch,
   * aligned). */
  nv__gpu_arg a[3];
  for (int i = 0; i < 3 && st == NV_OK; i++) {
    if (place[i]) {
      st = nv__gpu_input(ctx, &in[i], &a[i]);
    } else {
      a[i].offset = 0;
      st = nv__gpu_scratch(ctx, (size_t)in[i].meta->size * es, &a[i].view);
      if (st == NV_OK) st = nv__gpu_copy_contiguous(ctx, &in[i], a[i]);
    }
    if (st == NV_OK && (a[i].view.offset + (size_t)a[i].offset * es) % 16) {
      /* A buffer whose device start is off 16 bytes (not expected of hrx's allocations). */
      plan_release(p);
      return decline(&k, "an input does not start on a 16-byte boundary");
    }
  }
  hrx_view ws;
  if (st == NV_OK) st = nv__gpu_scratch(ctx, p->scratch > 0 ? (size_t)p->scratch : 1, &ws);
  run_data *r = st == NV_OK ? calloc(1, sizeof *r) : NULL;
  if (st == NV_OK && !r) st = nv__set_error(NV_ERR_OUT_OF_MEMORY, OP ": out of memory");
  if (st != NV_OK) {
    plan_release(p);
    return st;
  }
  r->p = p;
  for (int i = 0; i < 3; i++) r->off[i] = a[i].offset;
  r->off[3] = out.offset;
  r->esize = es;
  r->scale = prm->scale;
  r->lowest = -FLT_MAX;
  r->skv = (int32_t)k.Lk;
  r->sq = (int32_t)k.Lq;
  r->note = nv__gpu_note_take(ctx);
  hrx_binding bind[5] = {
      {a[0].view, HRX_ACCESS_READ},   {a[1].view, HRX_ACCESS_READ},
      {a[2].view, HRX_ACCESS_READ},   {out.view, HRX_ACCESS_WRITE},
      {ws, HRX_ACCESS_READ_WRITE},
  };
  /* The capture key: what the capture enqueues apart from the addresses. */
  unsigned char key[sizeof k + sizeof r->off + sizeof(float) + sizeof(int64_t)];
  size_t n = 0;
  memcpy(key + n, &k, sizeof k), n += sizeof k;
  memcpy(key + n, r->off, sizeof r->off), n += sizeof r->off;
  memcpy(key + n, &r->scale, sizeof r->scale), n += sizeof r->scale;
  memcpy(key + n, &p->scratch, sizeof p->scratch), n += sizeof p->scratch;
  return nv__gpu_captured(ctx, bind, 5, run, r, run_free, key, n);
}
