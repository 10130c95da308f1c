/* The CUDA kernel table: each family registers its kernels once, before the first GPU
 * evaluation. A family adds its registration function to the list below. */
#include <pthread.h>

#include "cuda/gpu.h"

nv__gpu_kernel_fn nv__gpu_kernels[NV__PRIM_COUNT];

void nv__gpu_register_elementwise(nv__gpu_kernel_fn *k);
void nv__gpu_register_reduce(nv__gpu_kernel_fn *k);
void nv__gpu_register_copy(nv__gpu_kernel_fn *k);
void nv__gpu_register_linalg(nv__gpu_kernel_fn *k);
void nv__gpu_register_optim(nv__gpu_kernel_fn *k);
void nv__gpu_register_scatter(nv__gpu_kernel_fn *k);
void nv__gpu_register_sort(nv__gpu_kernel_fn *k);
void nv__gpu_register_random(nv__gpu_kernel_fn *k);
void nv__gpu_register_transforms(nv__gpu_kernel_fn *k);
void nv__gpu_register_linalg_decomp(nv__gpu_kernel_fn *k);
void nv__gpu_register_gather(nv__gpu_kernel_fn *k);
void nv__gpu_register_scan(nv__gpu_kernel_fn *k);
void nv__gpu_register_conv(nv__gpu_kernel_fn *k);
void nv__gpu_register_fft(nv__gpu_kernel_fn *k);
void nv__gpu_register_distributed(nv__gpu_kernel_fn *k);
void nv__gpu_register_fast(nv__gpu_kernel_fn *k);
void nv__gpu_register_fast_sdpa(nv__gpu_kernel_fn *k);
void nv__gpu_register_fast_serving(nv__gpu_kernel_fn *k);
void nv__gpu_register_quantize(nv__gpu_kernel_fn *k);
void nv__gpu_register_compiled(nv__gpu_kernel_fn *k);
void nv__gpu_register_fast_custom(nv__gpu_kernel_fn *k);

/* Families register here, one line each. */
static void (*const families[])(nv__gpu_kernel_fn *) = {
    nv__gpu_register_elementwise,
    nv__gpu_register_reduce,
    nv__gpu_register_copy,
    nv__gpu_register_linalg,
    nv__gpu_register_optim,
    nv__gpu_register_scatter,
    nv__gpu_register_sort,
    nv__gpu_register_random,
    nv__gpu_register_transforms,
    nv__gpu_register_linalg_decomp,
    nv__gpu_register_gather,
    nv__gpu_register_scan,
    nv__gpu_register_conv,
    nv__gpu_register_fft,
    nv__gpu_register_distributed,
    nv__gpu_register_fast,
    nv__gpu_register_fast_sdpa,
    nv__gpu_register_fast_serving,
    nv__gpu_register_quantize,
    nv__gpu_register_compiled,
    nv__gpu_register_fast_custom,
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void register_all(void) {
  for (size_t i = 0; i < sizeof families / sizeof *families; i++)
    families[i](nv__gpu_kernels);
}

void nv__gpu_register(void) { pthread_once(&once, register_all); }
