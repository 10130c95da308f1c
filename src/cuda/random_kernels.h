/* The random family's kernels (random.cu) as the host code (random.c) sees them: the by-value
 * parameter block and the host addresses of the __global__ functions. Valid C11 and C++,
 * nothing of nuvec's internals.
 *
 * The stream layout is the CPU kernel's (src/cpu/random.c): for one key and W stream words
 * there are H = W / 2 counter pairs; pair i hashes the counters (i, H + odd + i), odd = W % 2,
 * and its two results become words i and H + odd + i; when W is odd, word H is the first
 * result of hashing (H, 0). Counting the middle word as one more item, a key has H + odd
 * items; a work item of the kernels is a group of 4 consecutive items of one key (the last
 * group of a key may hold fewer), whose first results are 4 consecutive words (16 bytes) and
 * whose second results are the 4 consecutive words H + odd further on.
 *
 * Kernel ABI (nv__gpu_launch): two pointers, each a view's start — the keys (read, row-
 * contiguous uint32, two words per key), the output (written, row-contiguous) — then one
 * nv__gpu_random_params by value. */
#ifndef NUVEC_CUDA_RANDOM_KERNELS_H
#define NUVEC_CUDA_RANDOM_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NV__GPU_RANDOM_THREADS 256
/* Stream items (counter pairs, or the middle word) per work item. */
#define NV__GPU_RANDOM_ITEMS 4

/* What a kernel writes: random_bits' raw bytes, or random_unit's samples in one dtype. */
enum {
  NV__GPU_RANDOM_BITS = 0,
  NV__GPU_RANDOM_UNIT_F32,
  NV__GPU_RANDOM_UNIT_F16,
  NV__GPU_RANDOM_UNIT_BF16,
  NV__GPU_RANDOM_MODES
};

typedef struct nv__gpu_random_params {
  int64_t nkeys;
  int64_t groups;   /* work items per key: ceil((half + odd) / NV__GPU_RANDOM_ITEMS) */
  int64_t items;    /* nkeys * groups */
  int64_t half;     /* counter pairs per key (H) */
  int64_t second;   /* H + odd: the word of pair 0's second result */
  int64_t per_key;  /* H + odd: stream items per key */
  int64_t bytes;    /* random_bits: output bytes per key (the stream, cut to them) */
  int64_t samples;  /* random_unit: samples (stream words) per key */
  int64_t key_off;  /* elements from the keys' view start to key 0's first word */
  int64_t out_off;  /* bytes from the output's view start to its element 0 */
} nv__gpu_random_params;

/* The kernel for a mode (NV__GPU_RANDOM_*), else NULL. */
const void *nv__gpu_kernel_random(int mode);

#ifdef __cplusplus
}
#endif

#endif
