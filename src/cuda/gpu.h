/* The CUDA backend's internal interface (DESIGN §13): what a kernel family calls to record its
 * work into the evaluation's open hrx graph. Host code is C11; this header is also included by
 * the families' .cu files (CUDA's C++ dialect stays inside them, behind C declarations).
 *
 * A CUDA kernel-table entry has the CPU kernel's contract with a recording context in front:
 * it validates what it must, asks for each output's device memory (nv__gpu_output, unless the
 * evaluation donated an input's buffer: then out[0].buf is set and nv__gpu_output returns that
 * buffer's device view), asks for each input's device view (nv__gpu_input: uploads a host
 * buffer once, waits for another thread's unsubmitted writer), and records dispatches of nvcc
 * `__global__` functions (nv__gpu_dispatch) or library calls as captured operations
 * (nv__gpu_captured, part of the native graph). Nothing runs until the evaluation commits. Kernels must never read device
 * memory from the host. */
#ifndef NUVEC_CUDA_GPU_H
#define NUVEC_CUDA_GPU_H

#include "core/internal.h"
#include "cuda/checks.h"
#include "hrx.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One evaluation's open recording on one GPU. */
typedef struct nv__gpu_ctx nv__gpu_ctx;

/* What a CUDA kernel returns, having recorded and allocated nothing, for a node it has no GPU
 * path for (pad's edge, reflect and symmetric modes): the node then runs on the CPU through the
 * fallback, counted and logged as a primitive without a kernel is. */
#define NV__GPU_DECLINED ((nv_status)0x4e56)

/* A CUDA kernel: records the outputs of `node` from its operands (see the file comment). */
typedef nv_status (*nv__gpu_kernel_fn)(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                                       int donated);

/* The kernel table, filled once by the families' registration functions (src/cuda/register.c
 * lists them): void nv__gpu_register_<family>(nv__gpu_kernel_fn *k). A NULL entry runs the
 * CPU kernel on downloaded inputs (counted by nv_gpu_fallback_count). */
extern nv__gpu_kernel_fn nv__gpu_kernels[NV__PRIM_COUNT];

/* A device argument: the hrx view of every byte the layout reaches (from its lowest to its
 * highest element address; strides may be negative or zero), and where element 0 is. A kernel
 * receives the view's start as its pointer parameter and adds `offset` elements. An empty
 * array (size 0) has a 1-byte placeholder view. */
typedef struct nv__gpu_arg {
  hrx_view view;
  int64_t offset; /* elements from the view's start to element 0 */
} nv__gpu_arg;

/* The device view of operand `op` (any layout); uploads a host-resident buffer once (its
 * device copy is then cached with the buffer). */
nv_status nv__gpu_input(nv__gpu_ctx *ctx, const nv__operand *op, nv__gpu_arg *out);

/* The device view of output `o`: allocates a row-contiguous device buffer (offset 0) unless
 * o->buf is already set (a donated buffer, or a second call). */
nv_status nv__gpu_output(nv__gpu_ctx *ctx, nv__output *o, nv__gpu_arg *out);

/* `bytes` (>= 1) of device scratch memory for this node's kernels only: valid until the
 * evaluation's submission that uses it completes. Contents undefined. */
nv_status nv__gpu_scratch(nv__gpu_ctx *ctx, size_t bytes, hrx_view *out);

/* One kernel launch. Parameters of `func` are: one pointer per view (the view's start), then,
 * each constant, then, when params_size > 0, one by-value struct of params_size bytes (at
 * most 4096). Accesses
 * declare how each view is used (hrx orders work by them); `aliasing` allows a written view to
 * overlap another (element-wise in place). Views need 16-byte alignment only if `align16`. */
typedef struct nv__gpu_launch {
  const void *func; /* the __global__ function's host address */
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes; /* dynamic shared memory */
  const hrx_view *views;
  const hrx_access *access;
  int nviews;
  const void *params;
  size_t params_size;
  bool aliasing;
  /* Scalars passed by value after the views and before `params` (at most
   * NV__GPU_MAX_CONSTANTS): precompiled custom kernels take their scalar arguments so. */
  const hrx_constant *constants;
  int nconstants;
} nv__gpu_launch;

#define NV__GPU_MAX_CONSTANTS 32

/* Records one launch. Fails (NV_ERR_BACKEND with hrx's message, or out of memory). */
nv_status nv__gpu_dispatch(nv__gpu_ctx *ctx, const nv__gpu_launch *launch);

/* One launch of `blocks` x `threads` (1-D) over `nviews` views; a NULL func (no kernel for the
 * node's dtype or element size) fails naming `op`. */
nv_status nv__gpu_dispatch_1d(nv__gpu_ctx *ctx, const char *op, const void *func, uint32_t blocks,
                              uint32_t threads, const hrx_view *views, const hrx_access *access,
                              int nviews, const void *params, size_t params_size);

/* Blocks of `threads` for `items` work items: at least 1, at most `cap` (for kernels that walk
 * their work with grid-stride loops). */
uint32_t nv__gpu_blocks(int64_t items, uint32_t threads, int64_t cap);

/* Records a library call (cuBLASLt, ...) as an hrx captured operation over the declared
 * bindings: hrx calls `fn` when it prepares (or updates) the evaluation's graph, with the
 * bindings' GPU addresses and a stream under capture, and `fn` only enqueues the library's
 * work there (no synchronization, no allocation); the work becomes part of the evaluation's
 * native CUDA graph, ordered by the declared accesses like a kernel. Shared library state the
 * work writes (a workspace) must be declared as a binding too. `user` passes to hrx (destroy
 * frees it), also on failure of this call. `key` (key_size bytes, copied) stands for the work
 * apart from the views: a replay whose key and views are the same keeps the work captured
 * before (no capture, nothing to update). */
nv_status nv__gpu_captured(nv__gpu_ctx *ctx, const hrx_binding *bindings, size_t count,
                           hrx_capture_fn fn, void *user, hrx_destroy_fn destroy,
                           const void *key, size_t key_size);

/* Records a byte fill of `dst` and a device-to-device copy (equal lengths, no overlap). */
nv_status nv__gpu_fill(nv__gpu_ctx *ctx, hrx_view dst, uint8_t value);
nv_status nv__gpu_copy(nv__gpu_ctx *ctx, hrx_view dst, hrx_view src);

/* The CUDA device index of the recording. */
int nv__gpu_device_index(const nv__gpu_ctx *ctx);

/* The hrx runtime of the recording's device (borrowed; it lives as long as the process), for
 * state a family keeps per device in hrx buffers (a library's workspace). */
hrx_runtime *nv__gpu_runtime(const nv__gpu_ctx *ctx);

/* Device-side index checks (take, gather, scatter, ...: an out-of-range index fails the node
 * as on the CPU, never an out-of-bounds access). A kernel that reads index values asks for one
 * record per node with nv__gpu_index_check and passes its device address in its parameters; a
 * thread that meets an out-of-range index skips that element (a gather writes 0, a scatter
 * writes nothing) and raises the record with nv__gpu_raise_bad (cuda/checks.h, which .cu files
 * include; the first raise wins). When the submission that ran the node finishes, a raised
 * record fails it: every array it wrote, and every later submission that read one of them,
 * fails with the CPU kernel's message ("<op>: index v is out of range for an axis of size s").
 * The record lives in mapped host memory: it is not an hrx view and orders nothing.
 * nv__gpu_index_check gives a zeroed record for `op` (a static string: the primitive's name)
 * in the node being recorded; *out is its device address. */
nv_status nv__gpu_index_check(nv__gpu_ctx *ctx, const char *op, nv__gpu_bad **out);

/* A kernel whose output i is input i itself (the same buffer and element offset; layouts set
 * by the builder): stop_gradient, depends, custom_function. Records nothing. */
nv_status nv__gpu_share_inputs(nv__gpu_ctx *ctx, nv__node *node, const nv__operand *in,
                               int donated);

/* Shared launch helpers for the families' .cu files. */
#define NV__GPU_MAX_DIMS 8

/* A strided layout folded for a kernel: up to NV__GPU_MAX_DIMS dims (row-major order, last
 * fastest) with per-operand element strides. Families that need more dims after folding copy
 * the operand contiguous first (nv__gpu_contiguous). */
typedef struct nv__gpu_layout {
  int ndim;
  int64_t shape[NV__GPU_MAX_DIMS];
} nv__gpu_layout;

/* Makes a row-contiguous device copy of any operand (a strided copy kernel; 64-bit indexing),
 * written into `dst` (an output or temporary of the same dtype and size). Family helper used
 * by kernels that need contiguous inputs; implemented with the copy kernels (copy.cu). */
nv_status nv__gpu_copy_contiguous(nv__gpu_ctx *ctx, const nv__operand *src, nv__gpu_arg dst);

/* A row-contiguous device view of operand `src`: its own view when it is row-contiguous,
 * else a copy in scratch memory (nv__gpu_copy_contiguous into nv__gpu_scratch). */
nv_status nv__gpu_input_contiguous(nv__gpu_ctx *ctx, const nv__operand *src, nv__gpu_arg *out);

#ifdef __cplusplus
}
#endif

#endif
