/* nuvec — fused fast ops with MLX's mx.fast names and semantics (MLX 0.32): rms_norm,
 * layer_norm, rope and scaled_dot_product_attention; then the serving kernels (sorted_offsets,
 * softmax and causal_softmax in place, paged_write, conv_slots), each defined at its
 * declaration; last the custom CUDA kernels (cuda_kernel, precompiled_cuda_kernel).
 *
 * Each is one primitive with a CPU and a CUDA kernel (one pass per row of the last axis,
 * float32 accumulation for float16/bfloat16/float32, float64 for float64) and a composed
 * fallback of core ops, MLX's formula, that the transforms use: jvp differentiates the
 * fallback; the vjp is fused (the norms' x gradient is one pass per row, the weight's and
 * bias's are row sums; rope's x gradient is the fused rope with the opposite angles, its freqs
 * gradient the fallback's); vmap batches the fused op where only x is batched and the fallback
 * otherwise. The builders
 * are lazy like the rest (nuvec/ops.h): inputs are borrowed, the result is a new array, and bad
 * arguments give an array that carries NV_ERR_INVALID_ARGUMENT with MLX's message, naming the
 * op (never NULL). Any input layout is accepted (strided inputs are copied row-contiguous
 * first). */
#ifndef NUVEC_FAST_H
#define NUVEC_FAST_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Root-mean-square normalization over the last axis: x * rsqrt(mean(x^2) + eps) * weight.
 * `weight` (may be NULL: no scaling) must be 1-D with the length of x's last axis. The result
 * has x's shape and the promoted dtype of x and weight, which must be a real floating type
 * (float16, bfloat16, float32, float64); x must have at least one dimension. Empty rows give
 * an empty result. */
NV_API nv_array *nv_fast_rms_norm(const nv_array *x, const nv_array *weight, double eps);

/* Layer normalization over the last axis: (x - mean) * rsqrt(var + eps) * weight + bias, the
 * variance biased (divided by the row length). `weight` and `bias` (each may be NULL) must be
 * 1-D with the length of x's last axis. Dtype and shape rules as nv_fast_rms_norm, the dtype
 * promoted over x, weight and bias. */
NV_API nv_array *nv_fast_layer_norm(const nv_array *x, const nv_array *weight,
                                    const nv_array *bias, double eps);

/* Rotary position encoding of x of shape (B, ..., T, D): the first `dims` features of each row
 * rotate in pairs, (i, i + dims/2), or (2i, 2i+1) when `traditional`; features past dims are
 * unchanged. Row t (axis -2) of batch b (axis 0) has position (offset + t) * scale, and pair i
 * turns by position * base^(-2i/dims), or by position / freqs[i] when `freqs` is given.
 * Exactly one of `base` and `freqs` is given: `base` is NAN for none. `offset` is an integer
 * array (not bool) with one element or a vector of B (one per batch). `freqs` is 1-D of
 * dims/2 elements of any real dtype. x must be of a real floating dtype with at least 3
 * dimensions, and dims even, positive and at most D. The result has x's shape and dtype. */
NV_API nv_array *nv_fast_rope(const nv_array *x, int dims, bool traditional, double base,
                              double scale, const nv_array *offset, const nv_array *freqs);

/* Scaled dot-product attention, MLX's mx.fast.scaled_dot_product_attention:
 * softmax(scale · q·kᵀ + mask) · v per batch and head, computed in float32 (float64 in
 * float64) and returned in the promoted dtype of q, k and v. q is [B, Hq, Lq, D], k is
 * [B, Hkv, Lk, D] and v [B, Hkv, Lk, Dv] with Hkv dividing Hq (grouped-query attention: query
 * head h reads key/value head h / (Hq / Hkv)). `mask_mode` is NULL or "" (no mask unless
 * `mask` is given), "causal" (query i sits at position Lk - Lq + i and sees the keys at
 * positions <= its own: with Lq < Lk the queries are the last Lq positions) or "array" (`mask`
 * required). `mask` broadcasts to [B, Hq, Lq, Lk] (rank <= 4): a bool mask keeps the scores
 * where it is true, any other dtype (which must promote to the result dtype) is added to the
 * scores. A masked score counts as float32's lowest value, not -inf, so a row with every key
 * masked averages v (as MLX). `sinks` (NULL or [Hq], promoting to the result dtype) adds one
 * logit per head to each softmax's denominator. Lk = 0 gives zeros. Errors (invalid argument,
 * naming the shapes): ranks other than 4, mismatched batch, head or length dimensions, Hq not a
 * multiple of Hkv, non-float inputs, a bad mask mode or shape, sinks of the wrong shape. */
NV_API nv_array *nv_fast_scaled_dot_product_attention(const nv_array *q, const nv_array *k,
                                                      const nv_array *v, float scale,
                                                      const char *mask_mode,
                                                      const nv_array *mask,
                                                      const nv_array *sinks);

/* ---- The serving kernels (src/ops/fast_serving.c). Inputs a kernel updates are "donated" when
 * the evaluation owns them outright (no other array, view or consumer holds them: DESIGN §3):
 * the result then takes the input's buffer and is written in place; otherwise the input is
 * copied first and keeps its values. ---- */

/* Group offsets of sorted group ids (MoE routing, grouped matmuls): offsets[g] for g = 0 ..
 * groups is the first position i of the ids (taken flat, row-major) with ids[i] >= g, or n (the
 * number of ids) when there is none; for ids sorted ascending that is the count of ids < g, so
 * group g's run is [offsets[g], offsets[g + 1]) and ids outside [0, groups) lie before
 * offsets[0] or from offsets[groups] on. Found by binary search: unsorted ids give that
 * search's positions (the same on every device). `sorted_indices` has any integer dtype (not
 * bool) and any shape; `groups` >= 0 and < INT32_MAX. The result is 1-D of groups + 1, int32
 * (int64 from 2^31 ids on). Not differentiable (integer); vmap maps it over each batch's ids. */
NV_API nv_array *nv_fast_sorted_offsets(const nv_array *sorted_indices, int groups);

/* Row softmax over the last axis, written into x's buffer when x is donated (float16,
 * bfloat16, float32 of the result's dtype: the element-wise donation rule). It is
 * nv_softmax(x, {-1}, precise = true): the same primitive, dtypes and rules (integers and bool
 * give float32). */
NV_API nv_array *nv_fast_softmax(const nv_array *x);

/* Causal row softmax: x (at least 1-D, last axis of C columns, a real floating dtype) is read
 * as rows over its last axis, grouped in blocks of `rows` consecutive rows (rows >= 1 must
 * divide the number of rows). Row i of each block (0 <= i < rows) sits at position C - rows + i
 * (the last `rows` positions of C, as a causal attention mask aligns queries with the end of
 * the keys) and sees the columns j <= C - rows + i: its result is the softmax of those columns
 * (computed in float32, float64 for float64) and 0 in the others; a row that sees no column is
 * all 0. Seen values as nv_softmax: a seen NaN or +inf, or seen values all -inf, give NaN over
 * the seen columns. The result has x's shape and dtype, written into x's buffer when x is
 * donated (element-wise rule). Gradients and vmap go through the composed form
 * where(seen, softmax(where(seen, x, -inf)), 0). */
NV_API nv_array *nv_fast_causal_softmax(const nv_array *x, int rows);

/* New keys or values written into a paged KV cache (vLLM's reshape_and_cache): cache_pool is
 * [num_blocks, B, F...] (at least 2-D: blocks of B token slots, each slot a row of F...),
 * values is [T, F...] (the features of T tokens, converted to the pool's dtype) and
 * slot_mapping a 1-D integer array of T slots (converted to int64 unless int32). Slot s >= 0
 * is token slot s % B of block s / B, and token t's row is written there; a negative slot
 * skips its token (padding); a slot >= num_blocks * B fails the evaluation ("paged_write:
 * index s is out of range for an axis of size num_blocks * B"). Two tokens with the same slot
 * leave one of them there (on the CPU the last). The result is the updated pool, of the pool's
 * shape and dtype (any dtype): written into the pool's buffer when the pool is donated (the
 * update-base rule), else into a copy, the pool keeping its values. Gradients and vmap go
 * through the composed form: a scatter of the values' rows into the flattened pool (with one
 * extra row taking the skipped tokens, dropped afterwards). */
NV_API nv_array *nv_fast_paged_write(const nv_array *cache_pool, const nv_array *values,
                                     const nv_array *slot_mapping);

/* One step of a causal depthwise conv1d per sequence with a rolling state per slot (the
 * short convolution of Mamba / GatedDeltaNet decoding): x is [N, C] (one new input per
 * sequence, a real floating dtype), weight [C, K] (K >= 1 taps a channel, oldest first), bias
 * NULL or [C], conv_state_pool [S, C, K - 1] of x's dtype (each slot the last K - 1 inputs of a
 * sequence, oldest first) and slot_ids a 1-D integer array of N slots (converted to int64
 * unless int32). For sequence n with slot s = slot_ids[n] >= 0 and channel c, the window is
 * w = (pool[s, c, 0], ..., pool[s, c, K - 2], x[n, c]) and
 *   y[n, c] = sum_k weight[c, k] w[k] + bias[c], then y * sigmoid(y) when `silu`,
 * computed in float32 (float64 for float64) and rounded to x's dtype, and the slot's state
 * becomes (w[1], ..., w[K - 1]). A negative slot (padding) gives y[n] = 0 and leaves the pool
 * alone; a slot >= S fails the evaluation ("conv_slots: index s is out of range for an axis of
 * size S"); two sequences on one slot leave an unspecified state. weight and bias are converted
 * to x's dtype. out[0] is y, out[1] the updated pool (written into the pool's buffer when the
 * pool is donated, else into a copy, the pool keeping its values). Returns NV_OK, or an
 * argument error with both outputs failed arrays carrying it. Gradients and vmap go through
 * the composed form (a take of the slots' states, the window's weighted sum, a scatter of the
 * shifted windows). */
NV_API nv_status nv_fast_conv_slots(const nv_array *x, const nv_array *weight,
                                    const nv_array *bias, const nv_array *conv_state_pool,
                                    const nv_array *slot_ids, bool silu, nv_array **out);

/* ---- Custom CUDA kernels (src/ops/fast_custom.c), MLX's mx.fast.cuda_kernel and
 * precompiled_cuda_kernel. They run on GPU streams only: on a CPU stream a call fails with
 * NV_ERR_INVALID_ARGUMENT "cuda_kernel: custom kernels run on the GPU only" naming the kernel
 * (E57). Custom kernels have no vjp, jvp or vmap rule (an error naming cuda_kernel). ---- */

/* A kernel made once from a body and called many times. `source` is the body of a CUDA
 * function whose signature nuvec generates: for input i, `const T *<input_names[i]>` (T the
 * input's CUDA type: bool, uint8_t .. uint64_t, int8_t .. int64_t, __half, __nv_bfloat16,
 * float, double, complex64_t {float real, imag}) pointing at its element 0, with
 * `<name>_shape` (Shape: int32 [i], up to 10 dimensions), `<name>_strides` (Strides: int64
 * elements) and `<name>_ndim` (int); for output i, `T *<output_names[i]>`, row-contiguous;
 * the template arguments of the call as `constexpr int`, `constexpr bool` or `using` type
 * declarations at the top of the body. `header` is placed before the function (helpers,
 * includes); cuda_fp16.h, cuda_bf16.h and cuda/std/cstdint are included, cooperative_groups.h
 * (namespace `cg`) too when the body or header names `cg::` or cooperative_groups, and
 * `elem_to_loc(elem, shape, strides, ndim)` gives a flat index's element offset. With
 * `ensure_row_contiguous` the inputs are copied row-contiguous first (their strides then are
 * the row-major ones). `shared_memory` bytes of dynamic shared memory (0 to 232448) are
 * requested per launch. Names must be C identifiers, all distinct; `name` names the kernel
 * (`custom_kernel_<name>`). Returns NULL on bad arguments (nv_last_error says which). */
typedef struct nv_cuda_kernel nv_cuda_kernel;
NV_API nv_cuda_kernel *nv_fast_cuda_kernel(const char *name, const char *const *input_names,
                                           int ninputs, const char *const *output_names,
                                           int noutputs, const char *source, const char *header,
                                           bool ensure_row_contiguous, int shared_memory);
NV_API void nv_fast_cuda_kernel_release(nv_cuda_kernel *k);

/* A template argument: `value` is the int, the bool (0/1) or the nv_dtype. */
typedef enum nv_template_kind {
  NV_TEMPLATE_INT = 0,
  NV_TEMPLATE_BOOL = 1,
  NV_TEMPLATE_DTYPE = 2,
} nv_template_kind;
typedef struct nv_template_arg {
  const char *name;
  nv_template_kind kind;
  int value;
} nv_template_arg;

/* One call's launch: the outputs' shapes (output_ndims[i] dimensions each) and dtypes, the
 * grid in threads per dimension (MLX's and Metal's convention: ceil(grid / threadgroup)
 * blocks of min(threadgroup, grid) threads each, so a kernel checks its bounds when grid is
 * not a multiple), the threadgroup (>= 1 each, at most 1024 threads, z <= 64), the
 * template arguments, and when `has_init` the value every output element starts from
 * (converted to its dtype); otherwise outputs start undefined. A grid dimension of 0
 * launches nothing. `verbose` prints the generated source to stderr. */
typedef struct nv_cuda_kernel_launch {
  const int *const *output_shapes;
  const int *output_ndims;
  const nv_dtype *output_dtypes;
  int grid[3];
  int threadgroup[3];
  const nv_template_arg *template_args;
  int ntemplate;
  bool has_init;
  double init_value;
  bool verbose;
} nv_cuda_kernel_launch;

/* Calls `k` on `ninputs` inputs (its input count) on the current stream: writes its
 * noutputs outputs into `outputs`, each a new array. The kernel is generated for the inputs'
 * dtypes and the template arguments, compiled by NVRTC for sm_90 on first use and cached (in
 * memory, and on disk as <hash>.cubin in the compile cache). Returns NV_OK, or the error
 * every output then carries: bad arguments (counts, shapes, dtypes, grid, threadgroup), a CPU
 * stream (E57), an NVRTC error carrying NVRTC's log. */
NV_API nv_status nv_fast_cuda_kernel_call(const nv_cuda_kernel *k, const nv_array *const *inputs,
                                          int ninputs, const nv_cuda_kernel_launch *launch,
                                          nv_array **outputs);

/* The CUDA source a call with these inputs (only their dtypes and dimensions count) and
 * launch compiles, written into buf as snprintf does (buf may be NULL with size 0). Returns
 * its length, or -1 on bad arguments (nv_last_error). Needs no GPU. */
NV_API long nv_fast_cuda_kernel_source(const nv_cuda_kernel *k, const nv_array *const *inputs,
                                       int ninputs, const nv_cuda_kernel_launch *launch,
                                       char *buf, size_t size);

/* Compiles that source with NVRTC into a CUBIN (sm_90), written into buf when it fits; *size
 * gets the CUBIN's size either way. Needs no GPU (precompiled_cuda_kernel loads the result).
 * Fails with NV_ERR_INVALID_ARGUMENT carrying NVRTC's log, NV_ERR_UNSUPPORTED without CUDA. */
NV_API nv_status nv_fast_cuda_kernel_compile(const nv_cuda_kernel *k,
                                             const nv_array *const *inputs, int ninputs,
                                             const nv_cuda_kernel_launch *launch, void *buf,
                                             size_t capacity, size_t *size);

/* A scalar argument of a precompiled kernel. */
typedef enum nv_scalar_kind {
  NV_SCALAR_BOOL = 0,
  NV_SCALAR_INT = 1,   /* int32 */
  NV_SCALAR_FLOAT = 2, /* float32 */
} nv_scalar_kind;
typedef struct nv_kernel_scalar {
  nv_scalar_kind kind;
  double value;
} nv_kernel_scalar;

/* MLX's precompiled_cuda_kernel: runs the extern "C" kernel `name` of a CUBIN or PTX image
 * (`size` bytes), whose parameters are a pointer to element 0 of each input, a pointer to
 * each (row-contiguous) output, then each scalar by value (bool, int, float), up to 32.
 * Inputs keep their layout unless `ensure_row_contiguous` (one with a negative stride is
 * always copied row-contiguous). The launch is as nv_fast_cuda_kernel_call's (template
 * arguments and verbose unused); `noutputs` outputs. The image is loaded once per process. */
NV_API nv_status nv_fast_precompiled_cuda_kernel(const char *name, const void *image, size_t size,
                                                 const nv_array *const *inputs, int ninputs,
                                                 int noutputs, const nv_kernel_scalar *scalars,
                                                 int nscalars,
                                                 const nv_cuda_kernel_launch *launch,
                                                 int shared_memory, bool ensure_row_contiguous,
                                                 nv_array **outputs);

#ifdef __cplusplus
}
#endif

#endif /* NUVEC_FAST_H */
