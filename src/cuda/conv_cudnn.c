/* The convolution primitive through cuDNN (its legacy descriptor API), loaded at run time with
 * dlopen: a machine without cuDNN still runs every convolution, with the direct kernel of
 * conv.cu. NUVEC_CUDNN=0 never uses cuDNN; NUVEC_CUDNN=1 requires it (a convolution cuDNN
 * would take fails with "cuDNN not found" where it is missing); unset, cuDNN is used where it
 * is found.
 *
 * cuDNN takes float16, bfloat16 and float32 nodes (accumulating in float32; float32 without
 * TF32 unless NUVEC_ENABLE_TF32=1 or MLX_ENABLE_TF32=1) whose tensors have fewer than 2^31
 * elements, in one of two mappings:
 *   DNN_FORWARD        no input dilation, symmetric non-negative padding: its forward
 *                      convolution (flip: CUDNN_CONVOLUTION, else CUDNN_CROSS_CORRELATION).
 *   DNN_BACKWARD_DATA  stride 1 and input dilation D with 0 <= lo <= (k - 1)·kdil and
 *                      0 <= hi − lo < D on every axis (transposed convolutions with
 *                      output_padding < stride, the input gradients of strided ones): the node
 *                      is the backward data of the forward convolution with stride D, padding
 *                      (k − 1)·kdil − lo, the same kernel dilation, and the filter whose channel
 *                      axes are the node weight's swapped within each group (a strided copy into
 *                      scratch), in the other mode than the forward mapping would use.
 *   DNN_BACKWARD_FILTER  no flip, no input dilation, and the node is the weight gradient of a
 *                      forward convolution (as rules_conv.c builds it: input [C_in/G, I...,
 *                      G·N], weight dy [C_out, O..., N], output [C_in/G, k..., C_out]) with
 *                      stride kdil, dilation stride and padding lo on both sides, and its kernel
 *                      (O...) outgrows its output (k...): cuDNN's backward filter over copies of
 *                      x and dy in the forward layouts, deterministic algorithms only, its dw
 *                      (scratch) copied into the output's layout after.
 * Everything else (float64, asymmetric padding with stride, ...) runs the direct kernel.
 * Tensors are described channels last (NHWC strides; a 1-D convolution as 2-D with a unit
 * height), filters as NHWC [K, kernel..., C / groups], groups as cuDNN's group count. Inputs
 * that are not row-contiguous or not 16-byte aligned are copied contiguous first.
 *
 * State: one cuDNN handle per device, made on first use and shared with attention's cuDNN path
 * (cudnn_lib.c); the captures of a device take its lock around cudnnSetStream and the call (the
 * handle's stream is per handle). The algorithm
 * comes from cuDNN's _v7 heuristics (no execution, no synchronization), chosen when the node is
 * recorded and cached by shape and parameters; its workspace is node scratch
 * (nv__gpu_scratch), declared as a read-write binding. The capture only enqueues cuDNN's work
 * on hrx's capture stream. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/conv_cudnn.h"
#include "cuda/copy.h"
#include "cuda/cudnn_lib.h"
#include "ops/conv_params.h"

#define DNN_CACHE 64
#define DNN_HEURISTICS 8
/* The largest workspace an algorithm may ask for. */
#define DNN_WORKSPACE_CAP ((size_t)256 << 20)

/* ---- Loading (the library and its handles: cudnn_lib.c) ---- */

#define DNN_FN(name) __typeof__(&name) name
static struct {
  DNN_FN(cudnnCreateTensorDescriptor);
  DNN_FN(cudnnDestroyTensorDescriptor);
  DNN_FN(cudnnSetTensorNdDescriptor);
  DNN_FN(cudnnCreateFilterDescriptor);
  DNN_FN(cudnnDestroyFilterDescriptor);
  DNN_FN(cudnnSetFilterNdDescriptor);
  DNN_FN(cudnnCreateConvolutionDescriptor);
  DNN_FN(cudnnDestroyConvolutionDescriptor);
  DNN_FN(cudnnSetConvolutionNdDescriptor);
  DNN_FN(cudnnSetConvolutionGroupCount);
  DNN_FN(cudnnSetConvolutionMathType);
  DNN_FN(cudnnGetConvolutionForwardAlgorithm_v7);
  DNN_FN(cudnnGetConvolutionForwardWorkspaceSize);
  DNN_FN(cudnnConvolutionForward);
  DNN_FN(cudnnGetConvolutionBackwardDataAlgorithm_v7);
  DNN_FN(cudnnGetConvolutionBackwardDataWorkspaceSize);
  DNN_FN(cudnnConvolutionBackwardData);
  DNN_FN(cudnnGetConvolutionBackwardFilterAlgorithm_v7);
  DNN_FN(cudnnGetConvolutionBackwardFilterWorkspaceSize);
  DNN_FN(cudnnConvolutionBackwardFilter);
} dnn;
#undef DNN_FN

enum { DNN_OFF = 0, DNN_AUTO = 1, DNN_REQUIRED = 2 };
static pthread_once_t dnn_once = PTHREAD_ONCE_INIT;
static int dnn_mode;
static bool dnn_loaded, dnn_tf32;
static const char *dnn_why = ""; /* why cuDNN is not loaded */

static void dnn_load(void) {
  const char *e = getenv("NUVEC_CUDNN");
  dnn_mode = e && !strcmp(e, "0") ? DNN_OFF : e && !strcmp(e, "1") ? DNN_REQUIRED : DNN_AUTO;
  dnn_tf32 = nv__env_long("NUVEC_ENABLE_TF32", 0) == 1 || nv__env_long("MLX_ENABLE_TF32", 0) == 1;
  if (dnn_mode == DNN_OFF || !nv__dnn_load(&dnn_why)) return;
#define LOAD(name) \
  if (!nv__dnn_sym(#name, &dnn.name, &dnn_why)) return;
  LOAD(cudnnCreateTensorDescriptor)
  LOAD(cudnnDestroyTensorDescriptor)
  LOAD(cudnnSetTensorNdDescriptor)
  LOAD(cudnnCreateFilterDescriptor)
  LOAD(cudnnDestroyFilterDescriptor)
  LOAD(cudnnSetFilterNdDescriptor)
  LOAD(cudnnCreateConvolutionDescriptor)
  LOAD(cudnnDestroyConvolutionDescriptor)
  LOAD(cudnnSetConvolutionNdDescriptor)
  LOAD(cudnnSetConvolutionGroupCount)
  LOAD(cudnnSetConvolutionMathType)
  LOAD(cudnnGetConvolutionForwardAlgorithm_v7)
  LOAD(cudnnGetConvolutionForwardWorkspaceSize)
  LOAD(cudnnConvolutionForward)
  LOAD(cudnnGetConvolutionBackwardDataAlgorithm_v7)
  LOAD(cudnnGetConvolutionBackwardDataWorkspaceSize)
  LOAD(cudnnConvolutionBackwardData)
  LOAD(cudnnGetConvolutionBackwardFilterAlgorithm_v7)
  LOAD(cudnnGetConvolutionBackwardFilterWorkspaceSize)
  LOAD(cudnnConvolutionBackwardFilter)
#undef LOAD
  /* The legacy API as used here is cuDNN 8's and 9's (group counts, NHWC filters, _v7):
   * nv__dnn_load takes 8.0 or newer. */
  dnn_loaded = true;
}

static nv_status dnn_error(const char *call, cudnnStatus_t s) {
  return nv__dnn_error("conv_general", call, s);
}

typedef nv__dnn_device dnn_device;

static pthread_mutex_t dnn_lock = PTHREAD_MUTEX_INITIALIZER; /* the algorithm cache */

/* ---- Plans ---- */

/* The two ways a node maps onto cuDNN (see nv__gpu_conv_cudnn). */
enum { DNN_FORWARD = 0, DNN_BACKWARD_DATA = 1, DNN_BACKWARD_FILTER = 2 };

/* What the algorithm choice depends on (zero-filled, compared with memcmp). x, w and y are
 * cuDNN's forward-convolution tensors: for DNN_FORWARD the node's input, weight and output;
 * for DNN_BACKWARD_DATA y is the node's input (dy) and x its output (dx); for
 * DNN_BACKWARD_FILTER x and y (dy) are the node's input and weight rearranged and w (dw) its
 * output rearranged. */
typedef struct dnn_key {
  int32_t device, kind, dtype, nb, groups, mode, math;
  int32_t xdim[5], wdim[5], ydim[5], pad[3], stride[3], dil[3];
} dnn_key;

typedef struct dnn_choice {
  dnn_key key;
  int algo; /* a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t, by key.kind */
  cudnnMathType_t math;
  size_t ws;
} dnn_choice;

static dnn_choice dnn_cache[DNN_CACHE];
static int dnn_cached, dnn_next;

typedef struct dnn_plan {
  dnn_device *dev;
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  dnn_choice choice;
  int64_t off[2]; /* element offsets of x and w in their views */
  size_t esize;
} dnn_plan;

static void plan_free(void *user) {
  dnn_plan *p = user;
  if (!p) return;
  if (p->xd) dnn.cudnnDestroyTensorDescriptor(p->xd);
  if (p->yd) dnn.cudnnDestroyTensorDescriptor(p->yd);
  if (p->wd) dnn.cudnnDestroyFilterDescriptor(p->wd);
  if (p->cd) dnn.cudnnDestroyConvolutionDescriptor(p->cd);
  nv__free(p);
}

/* NHWC strides of dims [N, C, spatial...] (nb of them). */
static void nhwc_strides(const int *dim, int nb, int *st) {
  int s = dim[1];
  st[1] = 1;
  for (int i = nb - 1; i >= 2; i--) {
    st[i] = s;
    s *= dim[i];
  }
  st[0] = s;
}

/* The descriptors of `p` from `k`. */
static nv_status plan_descriptors(dnn_plan *p, const dnn_key *k) {
  cudnnDataType_t type = (cudnnDataType_t)k->dtype;
  int xs[5], ys[5];
  nhwc_strides(k->xdim, k->nb, xs);
  nhwc_strides(k->ydim, k->nb, ys);
  cudnnStatus_t s;
  const char *call = "cudnnCreateTensorDescriptor";
  if ((s = dnn.cudnnCreateTensorDescriptor(&p->xd)) != CUDNN_STATUS_SUCCESS ||
      (s = dnn.cudnnCreateTensorDescriptor(&p->yd)) != CUDNN_STATUS_SUCCESS)
    return dnn_error(call, s);
  call = "cudnnCreateFilterDescriptor";
  if ((s = dnn.cudnnCreateFilterDescriptor(&p->wd)) != CUDNN_STATUS_SUCCESS) return dnn_error(call, s);
  call = "cudnnCreateConvolutionDescriptor";
  if ((s = dnn.cudnnCreateConvolutionDescriptor(&p->cd)) != CUDNN_STATUS_SUCCESS)
    return dnn_error(call, s);
  call = "cudnnSetTensorNdDescriptor";
  if ((s = dnn.cudnnSetTensorNdDescriptor(p->xd, type, k->nb, k->xdim, xs)) != CUDNN_STATUS_SUCCESS ||
      (s = dnn.cudnnSetTensorNdDescriptor(p->yd, type, k->nb, k->ydim, ys)) != CUDNN_STATUS_SUCCESS)
    return dnn_error(call, s);
  call = "cudnnSetFilterNdDescriptor";
  if ((s = dnn.cudnnSetFilterNdDescriptor(p->wd, type, CUDNN_TENSOR_NHWC, k->nb, k->wdim)) !=
      CUDNN_STATUS_SUCCESS)
    return dnn_error(call, s);
  call = "cudnnSetConvolutionNdDescriptor";
  if ((s = dnn.cudnnSetConvolutionNdDescriptor(p->cd, k->nb - 2, k->pad, k->stride, k->dil,
                                               (cudnnConvolutionMode_t)k->mode,
                                               CUDNN_DATA_FLOAT)) != CUDNN_STATUS_SUCCESS)
    return dnn_error(call, s);
  call = "cudnnSetConvolutionGroupCount";
  if ((s = dnn.cudnnSetConvolutionGroupCount(p->cd, k->groups)) != CUDNN_STATUS_SUCCESS)
    return dnn_error(call, s);
  call = "cudnnSetConvolutionMathType";
  if ((s = dnn.cudnnSetConvolutionMathType(p->cd, (cudnnMathType_t)k->math)) != CUDNN_STATUS_SUCCESS)
    return dnn_error(call, s);
  return NV_OK;
}

/* The algorithm for p's descriptors (the cache, else cuDNN's heuristics): NV_OK, or
 * NV__GPU_DECLINED when cuDNN offers none that fits. */
static nv_status plan_algo(dnn_plan *p, const dnn_key *k) {
  pthread_mutex_lock(&dnn_lock);
  for (int i = 0; i < dnn_cached; i++)
    if (!memcmp(&dnn_cache[i].key, k, sizeof *k)) {
      p->choice = dnn_cache[i];
      pthread_mutex_unlock(&dnn_lock);
      return dnn.cudnnSetConvolutionMathType(p->cd, p->choice.math) == CUDNN_STATUS_SUCCESS
                 ? NV_OK
                 : NV__GPU_DECLINED;
    }
  pthread_mutex_unlock(&dnn_lock);
  /* The heuristics' candidates, best first: (algorithm, status, math type). */
  int algo[DNN_HEURISTICS], n = 0;
  cudnnStatus_t status[DNN_HEURISTICS];
  cudnnMathType_t maths[DNN_HEURISTICS];
  cudnnStatus_t s;
  /* The handle is not thread-safe: its queries take the device's lock as captures do. */
  pthread_mutex_lock(&p->dev->lock);
  nv_status st = NV__GPU_DECLINED;
  if (k->kind == DNN_FORWARD) {
    cudnnConvolutionFwdAlgoPerf_t perf[DNN_HEURISTICS];
    s = dnn.cudnnGetConvolutionForwardAlgorithm_v7(p->dev->handle, p->xd, p->wd, p->cd, p->yd,
                                                   DNN_HEURISTICS, &n, perf);
    for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < n && i < DNN_HEURISTICS; i++)
      algo[i] = perf[i].algo, status[i] = perf[i].status, maths[i] = perf[i].mathType;
  } else if (k->kind == DNN_BACKWARD_FILTER) {
    /* Only deterministic algorithms (some accumulate with atomics). */
    cudnnConvolutionBwdFilterAlgoPerf_t perf[DNN_HEURISTICS];
    s = dnn.cudnnGetConvolutionBackwardFilterAlgorithm_v7(p->dev->handle, p->xd, p->yd, p->cd,
                                                          p->wd, DNN_HEURISTICS, &n, perf);
    for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < n && i < DNN_HEURISTICS; i++) {
      algo[i] = perf[i].algo;
      status[i] = perf[i].determinism == CUDNN_DETERMINISTIC ? perf[i].status
                                                              : CUDNN_STATUS_NOT_SUPPORTED;
      maths[i] = perf[i].mathType;
    }
  } else {
    cudnnConvolutionBwdDataAlgoPerf_t perf[DNN_HEURISTICS];
    s = dnn.cudnnGetConvolutionBackwardDataAlgorithm_v7(p->dev->handle, p->wd, p->yd, p->cd,
                                                        p->xd, DNN_HEURISTICS, &n, perf);
    for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < n && i < DNN_HEURISTICS; i++)
      algo[i] = perf[i].algo, status[i] = perf[i].status, maths[i] = perf[i].mathType;
  }
  bool strict = k->dtype == CUDNN_DATA_FLOAT && !dnn_tf32;
  if (n > DNN_HEURISTICS) n = DNN_HEURISTICS;
  for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < n && st != NV_OK; i++) {
    if (status[i] != CUDNN_STATUS_SUCCESS) continue;
    /* Full float32 takes only algorithms without tensor-op math (which would be TF32). */
    if (strict && (maths[i] == CUDNN_TENSOR_OP_MATH ||
                   maths[i] == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    cudnnMathType_t math = strict ? CUDNN_FMA_MATH : maths[i];
    if (dnn.cudnnSetConvolutionMathType(p->cd, math) != CUDNN_STATUS_SUCCESS) continue;
    size_t ws = 0;
    cudnnStatus_t w;
    if (k->kind == DNN_FORWARD)
      w = dnn.cudnnGetConvolutionForwardWorkspaceSize(p->dev->handle, p->xd, p->wd, p->cd, p->yd,
                                                      (cudnnConvolutionFwdAlgo_t)algo[i], &ws);
    else if (k->kind == DNN_BACKWARD_FILTER)
      w = dnn.cudnnGetConvolutionBackwardFilterWorkspaceSize(
          p->dev->handle, p->xd, p->yd, p->cd, p->wd, (cudnnConvolutionBwdFilterAlgo_t)algo[i],
          &ws);
    else
      w = dnn.cudnnGetConvolutionBackwardDataWorkspaceSize(
          p->dev->handle, p->wd, p->yd, p->cd, p->xd, (cudnnConvolutionBwdDataAlgo_t)algo[i], &ws);
    if (w != CUDNN_STATUS_SUCCESS || ws > DNN_WORKSPACE_CAP) continue;
    p->choice = (dnn_choice){.key = *k, .algo = algo[i], .math = math, .ws = ws};
    st = NV_OK;
  }
  pthread_mutex_unlock(&p->dev->lock);
  if (st != NV_OK) return st;
  pthread_mutex_lock(&dnn_lock);
  dnn_cache[dnn_next] = p->choice;
  dnn_next = (dnn_next + 1) % DNN_CACHE;
  if (dnn_cached < DNN_CACHE) dnn_cached++;
  pthread_mutex_unlock(&dnn_lock);
  return NV_OK;
}

/* The capture: cuDNN's convolution on hrx's capture stream (its kernels become the graph's
 * nodes). Bindings: the node's input and weight (read; for DNN_BACKWARD_DATA the weight is the
 * forward filter, copied into scratch; for DNN_BACKWARD_FILTER both are rearranged copies),
 * its output (written; for DNN_BACKWARD_FILTER a scratch filter copied to the output after),
 * the workspace (read-write). */
static hrx_status dnn_run(const hrx_callback_view *views, size_t count, void *stream, void *user) {
  dnn_plan *p = user;
  if (count != 4 || views[3].length < p->choice.ws) return HRX_E_INVALID;
  const char *in = (const char *)views[0].address + (size_t)p->off[0] * p->esize;
  const char *w = (const char *)views[1].address + (size_t)p->off[1] * p->esize;
  void *ws = p->choice.ws ? views[3].address : NULL;
  float one = 1.0f, zero = 0.0f;
  int kind = p->choice.key.kind;
  pthread_mutex_lock(&p->dev->lock);
  cudnnStatus_t s = nv__dnn.cudnnSetStream(p->dev->handle, (cudaStream_t)stream);
  if (s == CUDNN_STATUS_SUCCESS && kind == DNN_FORWARD)
    s = dnn.cudnnConvolutionForward(p->dev->handle, &one, p->xd, in, p->wd, w, p->cd,
                                    (cudnnConvolutionFwdAlgo_t)p->choice.algo, ws, p->choice.ws,
                                    &zero, p->yd, views[2].address);
  else if (s == CUDNN_STATUS_SUCCESS && kind == DNN_BACKWARD_DATA)
    s = dnn.cudnnConvolutionBackwardData(p->dev->handle, &one, p->wd, w, p->yd, in, p->cd,
                                         (cudnnConvolutionBwdDataAlgo_t)p->choice.algo, ws,
                                         p->choice.ws, &zero, p->xd, views[2].address);
  else if (s == CUDNN_STATUS_SUCCESS)
    s = dnn.cudnnConvolutionBackwardFilter(p->dev->handle, &one, p->xd, in, p->yd, w, p->cd,
                                           (cudnnConvolutionBwdFilterAlgo_t)p->choice.algo, ws,
                                           p->choice.ws, &zero, p->wd, views[2].address);
  pthread_mutex_unlock(&p->dev->lock);
  if (s != CUDNN_STATUS_SUCCESS) {
    static const char *calls[3] = {"cudnnConvolutionForward", "cudnnConvolutionBackwardData",
                                   "cudnnConvolutionBackwardFilter"};
    fprintf(stderr, "nuvec: conv_general on the GPU: %s failed: %s\n", calls[kind],
            nv__dnn.cudnnGetErrorString(s));
    return HRX_E_CUDA;
  }
  return HRX_OK;
}

/* ---- The node ---- */

/* The cuDNN mapping of the node (see the file comment): DNN_FORWARD, DNN_BACKWARD_DATA,
 * DNN_BACKWARD_FILTER, or -1 (none). */
static int dnn_kind(const nv__node *node, const nv__operand *in) {
  const nv__conv_params *cp = node->params;
  const nv__output *out = &node->out[0], *ox = in[0].meta, *ow = in[1].meta;
  nv_dtype dt = out->dtype;
  if (dt != NV_DTYPE_FLOAT16 && dt != NV_DTYPE_BFLOAT16 && dt != NV_DTYPE_FLOAT32) return -1;
  if (ox->size >= INT32_MAX || ow->size >= INT32_MAX || out->size >= INT32_MAX) return -1;
  int nsp = cp->nsp;
  bool fwd = true, bwd = true, flt = !cp->flip;
  int64_t wvol = 1, ovol = 1;
  for (int a = 0; a < nsp; a++) {
    int I = ox->shape[a + 1], k = ow->shape[a + 1], O = out->shape[a + 1];
    long long keff = (long long)(k - 1) * cp->kdil[a];
    fwd &= cp->idil[a] == 1 && cp->lo[a] == cp->hi[a] && cp->lo[a] >= 0;
    bwd &= cp->stride[a] == 1 && cp->lo[a] <= keff && cp->hi[a] >= cp->lo[a] &&
           cp->hi[a] - cp->lo[a] < cp->idil[a];
    /* As a weight gradient: the forward convolution of x (the node's input) with a kernel of
     * O taps, stride kdil, dilation stride and padding lo on both sides has dy's length k. */
    long long span = (long long)I + 2LL * cp->lo[a] - (long long)(O - 1) * cp->stride[a] - 1;
    flt &= cp->idil[a] == 1 && cp->lo[a] >= 0 && span >= 0 && span / cp->kdil[a] + 1 == k;
    wvol *= k;
    ovol *= O;
  }
  /* The weight-gradient mapping where the kernel outgrows the output (a gradient's shape). */
  if (flt && wvol > ovol) return DNN_BACKWARD_FILTER;
  return fwd ? DNN_FORWARD : bwd ? DNN_BACKWARD_DATA : -1;
}

/* The key of the node's mapping `kind`, but for the device. */
static void dnn_key_of(const nv__node *node, const nv__operand *in, int kind, dnn_key *k) {
  const nv__conv_params *cp = node->params;
  const nv__output *out = &node->out[0], *ox = in[0].meta, *ow = in[1].meta;
  nv_dtype dt = out->dtype;
  int nsp = cp->nsp, lead = nsp == 1; /* a 1-D convolution is 2-D with a unit height */
  int G = cp->groups, cout = out->shape[nsp + 1];
  memset(k, 0, sizeof *k);
  k->kind = kind;
  k->dtype = dt == NV_DTYPE_FLOAT16    ? CUDNN_DATA_HALF
             : dt == NV_DTYPE_BFLOAT16 ? CUDNN_DATA_BFLOAT16
                                       : CUDNN_DATA_FLOAT;
  k->nb = nsp + 2 + lead;
  k->groups = G;
  /* The backward data of a cross-correlation is the node's flipped convolution, and the
   * reverse; the weight gradient is of a cross-correlation (flip is false there). */
  k->mode = kind == DNN_FORWARD         ? (cp->flip ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION)
            : kind == DNN_BACKWARD_DATA ? (cp->flip ? CUDNN_CROSS_CORRELATION : CUDNN_CONVOLUTION)
                                        : CUDNN_CROSS_CORRELATION;
  k->math = dt == NV_DTYPE_FLOAT32 && !dnn_tf32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  /* [N, C] of cuDNN's x, y and w, and the nodes' arrays whose spatial axes they have. */
  const nv__output *sx, *sy, *sw;
  if (kind == DNN_FORWARD) {
    k->xdim[0] = ox->shape[0], k->xdim[1] = ox->shape[nsp + 1];
    k->ydim[0] = out->shape[0], k->ydim[1] = cout;
    k->wdim[0] = cout, k->wdim[1] = ow->shape[nsp + 1];
    sx = ox, sy = out, sw = ow;
  } else if (kind == DNN_BACKWARD_DATA) {
    /* x = dx (the output), y = dy (the input), w = the weight's channels swapped per group. */
    k->xdim[0] = out->shape[0], k->xdim[1] = cout;
    k->ydim[0] = ox->shape[0], k->ydim[1] = ox->shape[nsp + 1];
    k->wdim[0] = ox->shape[nsp + 1], k->wdim[1] = cout / G;
    sx = out, sy = ox, sw = ow;
  } else {
    /* Input [C_in/G, I..., G·N], weight [C_out, O..., N], output [C_in/G, k..., C_out]:
     * x = [N, G·C_in/G, I...], dy = [N, C_out, O...], dw = [C_out, C_in/G, k...]. */
    int n = ow->shape[nsp + 1], cin_g = ox->shape[0];
    k->xdim[0] = n, k->xdim[1] = G * cin_g;
    k->ydim[0] = n, k->ydim[1] = ow->shape[0];
    k->wdim[0] = ow->shape[0], k->wdim[1] = cin_g;
    sx = ox, sy = ow, sw = out;
  }
  if (lead) {
    k->xdim[2] = k->wdim[2] = k->ydim[2] = 1;
    k->pad[0] = 0;
    k->stride[0] = k->dil[0] = 1;
  }
  for (int a = 0; a < nsp; a++) {
    int ks = ow->shape[a + 1];
    k->xdim[2 + lead + a] = sx->shape[a + 1];
    k->ydim[2 + lead + a] = sy->shape[a + 1];
    k->wdim[2 + lead + a] = sw->shape[a + 1];
    k->pad[lead + a] = kind == DNN_BACKWARD_DATA ? (ks - 1) * cp->kdil[a] - cp->lo[a] : cp->lo[a];
    k->stride[lead + a] = kind == DNN_FORWARD         ? cp->stride[a]
                          : kind == DNN_BACKWARD_DATA ? cp->idil[a]
                                                      : cp->kdil[a];
    k->dil[lead + a] = kind == DNN_BACKWARD_FILTER ? cp->stride[a] : cp->kdil[a];
  }
}

/* A strided view of operand `op`'s buffer (`shape`, `st`: element strides from its element 0)
 * copied row-contiguous into new scratch. */
static nv_status copy_view(nv__gpu_ctx *ctx, const nv__operand *op, const int *shape,
                           const int64_t *st, int nd, nv__gpu_arg *out) {
  nv__gpu_arg src;
  nv_status s = nv__gpu_input(ctx, op, &src);
  int64_t ds[NV__CONV_MAX_SPATIAL + 3], n = 1;
  for (int i = nd - 1; i >= 0; i--) {
    ds[i] = n;
    n *= shape[i];
  }
  nv__gpu_arg d = {.offset = 0};
  size_t isz = nv_dtype_size(op->meta->dtype);
  if (s == NV_OK) s = nv__gpu_scratch(ctx, (size_t)n * isz, &d.view);
  if (s == NV_OK)
    s = nv__gpu_copy_strided(ctx, (int)isz, shape, nd, src, st, d, ds, HRX_ACCESS_WRITE);
  if (s == NV_OK) *out = d;
  return s;
}

/* The weight-gradient mapping's x and dy in cuDNN's layouts: input [C_in/G, I..., G·N] read as
 * [N, I..., G, C_in/G], weight [C_out, O..., N] read as [N, O..., C_out], each copied. */
static nv_status filter_operands(nv__gpu_ctx *ctx, const nv__node *node, const nv__operand *in,
                                 nv__gpu_arg *x, nv__gpu_arg *dy) {
  const nv__conv_params *cp = node->params;
  const nv__output *ox = in[0].meta, *ow = in[1].meta;
  int nsp = cp->nsp, G = cp->groups, n = ow->shape[nsp + 1];
  int shape[NV__CONV_MAX_SPATIAL + 3];
  int64_t st[NV__CONV_MAX_SPATIAL + 3];
  shape[0] = n;
  st[0] = ox->strides[nsp + 1];
  for (int a = 0; a < nsp; a++) {
    shape[1 + a] = ox->shape[1 + a];
    st[1 + a] = ox->strides[1 + a];
  }
  shape[nsp + 1] = G;
  st[nsp + 1] = (int64_t)n * ox->strides[nsp + 1];
  shape[nsp + 2] = ox->shape[0];
  st[nsp + 2] = ox->strides[0];
  nv_status s = copy_view(ctx, &in[0], shape, st, nsp + 3, x);
  if (s != NV_OK) return s;
  shape[0] = n;
  st[0] = ow->strides[nsp + 1];
  for (int a = 0; a < nsp; a++) {
    shape[1 + a] = ow->shape[1 + a];
    st[1 + a] = ow->strides[1 + a];
  }
  shape[nsp + 1] = ow->shape[0];
  st[nsp + 1] = ow->strides[0];
  return copy_view(ctx, &in[1], shape, st, nsp + 2, dy);
}

/* The weight-gradient mapping's dw ([C_out, k..., C_in/G], contiguous in `dw`) copied into the
 * node's output [C_in/G, k..., C_out]. */
static nv_status filter_result(nv__gpu_ctx *ctx, const nv__node *node, hrx_view dw,
                               nv__gpu_arg out) {
  const nv__output *o = &node->out[0];
  int nd = o->ndim, cin_g = o->shape[0];
  int64_t st[NV__CONV_MAX_SPATIAL + 2], ds[NV__CONV_MAX_SPATIAL + 2], inner = cin_g;
  for (int a = nd - 2; a >= 1; a--) {
    st[a] = inner;
    inner *= o->shape[a];
  }
  st[0] = 1;
  st[nd - 1] = inner; /* kvol · C_in/G */
  int64_t n = 1;
  for (int i = nd - 1; i >= 0; i--) {
    ds[i] = n;
    n *= o->shape[i];
  }
  nv__gpu_arg src = {.view = dw, .offset = 0};
  return nv__gpu_copy_strided(ctx, (int)nv_dtype_size(o->dtype), o->shape, nd, src, st, out, ds,
                              HRX_ACCESS_WRITE);
}

/* The forward filter of a DNN_BACKWARD_DATA node, contiguous in scratch: weight
 * [C_out, kernel..., C_in / G] read as [G, C_in / G, kernel..., C_out / G] (a strided view of
 * the same buffer) and copied. */
static nv_status swapped_filter(nv__gpu_ctx *ctx, const nv__node *node, const nv__operand *w,
                                nv__gpu_arg *out) {
  const nv__conv_params *cp = node->params;
  const nv__output *ow = w->meta;
  int nsp = cp->nsp, G = cp->groups, cout_g = ow->shape[0] / G, nd = nsp + 3;
  int shape[NV__CONV_MAX_SPATIAL + 3];
  int64_t st[NV__CONV_MAX_SPATIAL + 3];
  shape[0] = G;
  st[0] = (int64_t)cout_g * ow->strides[0];
  shape[1] = ow->shape[nsp + 1];
  st[1] = ow->strides[nsp + 1];
  for (int a = 0; a < nsp; a++) {
    shape[2 + a] = ow->shape[1 + a];
    st[2 + a] = ow->strides[1 + a];
  }
  shape[nd - 1] = cout_g;
  st[nd - 1] = ow->strides[0];
  nv__output view = {.dtype = ow->dtype, .ndim = nd, .size = ow->size, .shape = shape,
                     .strides = st};
  nv__operand op = {.meta = &view, .buf = w->buf, .offset = w->offset};
  nv__gpu_arg d = {.offset = 0};
  nv_status s = nv__gpu_scratch(ctx, (size_t)ow->size * nv_dtype_size(ow->dtype), &d.view);
  if (s == NV_OK) s = nv__gpu_copy_contiguous(ctx, &op, d);
  if (s == NV_OK) *out = d;
  return s;
}

/* A row-contiguous, 16-byte aligned view of input `op` (copied into scratch when it is not
 * row-contiguous); NV__GPU_DECLINED for a row-contiguous input that is not aligned (nothing
 * recorded for it: the direct kernel reads it in place). */
static nv_status aligned_input(nv__gpu_ctx *ctx, const nv__operand *op, nv__gpu_arg *a) {
  nv_status st = nv__gpu_input_contiguous(ctx, op, a);
  if (st != NV_OK) return st;
  size_t at = a->view.offset + (size_t)a->offset * nv_dtype_size(op->meta->dtype);
  return at % 16 ? NV__GPU_DECLINED : NV_OK;
}

nv_status nv__gpu_conv_cudnn(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                             nv__gpu_arg out) {
  pthread_once(&dnn_once, dnn_load);
  int kind = dnn_mode == DNN_OFF ? -1 : dnn_kind(node, in);
  if (kind < 0) return NV__GPU_DECLINED;
  if (!dnn_loaded) {
    if (dnn_mode == DNN_REQUIRED)
      return nv__set_error(NV_ERR_UNSUPPORTED,
                           "conv_general: cuDNN not found (%s); NUVEC_CUDNN=1 requires it (unset "
                           "it to use nuvec's own convolution kernel)",
                           dnn_why);
    return NV__GPU_DECLINED;
  }
  dnn_device *dev = NULL;
  nv_status st = nv__dnn_device_get(ctx, "conv_general", &dev);
  if (st != NV_OK) return st;
  dnn_key k;
  dnn_key_of(node, in, kind, &k);
  k.device = nv__gpu_device_index(ctx);
  dnn_plan *p = nv__calloc(1, sizeof *p);
  if (!p) return nv__set_error(NV_ERR_OUT_OF_MEMORY, "conv_general: out of memory");
  p->dev = dev;
  p->esize = nv_dtype_size(node->out[0].dtype);
  if ((st = plan_descriptors(p, &k)) == NV_OK) st = plan_algo(p, &k);
  /* Operands last: copies into scratch are recorded only for a node cuDNN runs. */
  nv__gpu_arg x, w;
  hrx_view y = out.view;
  if (st == NV_OK && kind == DNN_BACKWARD_FILTER) {
    st = filter_operands(ctx, node, in, &x, &w);
    if (st == NV_OK)
      st = nv__gpu_scratch(ctx, (size_t)node->out[0].size * p->esize, &y);
  } else if (st == NV_OK) {
    st = aligned_input(ctx, &in[0], &x);
    if (st == NV_OK)
      st = kind == DNN_FORWARD ? aligned_input(ctx, &in[1], &w)
                               : swapped_filter(ctx, node, &in[1], &w);
  }
  hrx_view ws;
  if (st == NV_OK) st = nv__gpu_scratch(ctx, p->choice.ws ? p->choice.ws : 1, &ws);
  if (st != NV_OK) {
    plan_free(p);
    return st;
  }
  p->off[0] = x.offset;
  p->off[1] = w.offset;
  hrx_binding bind[4] = {
      {x.view, HRX_ACCESS_READ},
      {w.view, HRX_ACCESS_READ},
      {y, HRX_ACCESS_WRITE},
      {ws, HRX_ACCESS_READ_WRITE},
  };
  /* The capture key: what the capture enqueues apart from the addresses, field by field (no
   * padding bytes). */
  unsigned char key[sizeof k + 2 * sizeof(int32_t) + sizeof(uint64_t) + sizeof p->off];
  int32_t algo = (int32_t)p->choice.algo, math = (int32_t)p->choice.math;
  uint64_t wsize = p->choice.ws;
  size_t n = 0;
  memcpy(key + n, &k, sizeof k), n += sizeof k;
  memcpy(key + n, &algo, sizeof algo), n += sizeof algo;
  memcpy(key + n, &math, sizeof math), n += sizeof math;
  memcpy(key + n, &wsize, sizeof wsize), n += sizeof wsize;
  memcpy(key + n, p->off, sizeof p->off), n += sizeof p->off;
  st = nv__gpu_captured(ctx, bind, 4, dnn_run, p, plan_free, key, n);
  if (st == NV_OK && kind == DNN_BACKWARD_FILTER) st = filter_result(ctx, node, y, out);
  return st;
}
