/* The CPU kernel table: each op family registers its kernels once, before the first
 * evaluation. A family adds its registration function to the list below. */
#include <pthread.h>

#include "cpu/kernels.h"

nv__kernel_fn nv__cpu_kernels[NV__PRIM_COUNT];

static void register_core(nv__kernel_fn *k) {
  k[NV__PRIM_FULL] = nv__k_full;
  k[NV__PRIM_ARANGE] = nv__k_arange;
  k[NV__PRIM_EYE] = nv__k_eye;
  k[NV__PRIM_ASTYPE] = nv__k_astype;
  k[NV__PRIM_COPY] = nv__k_copy;
  k[NV__PRIM_TO_FP8] = nv__k_to_fp8;
  k[NV__PRIM_FROM_FP8] = nv__k_from_fp8;
  k[NV__PRIM_RESHAPE] = nv__k_view;
  k[NV__PRIM_TRANSPOSE] = nv__k_view;
  k[NV__PRIM_BROADCAST] = nv__k_view;
  k[NV__PRIM_SLICE] = nv__k_view;
  k[NV__PRIM_SQUEEZE] = nv__k_view;
  k[NV__PRIM_EXPAND_DIMS] = nv__k_view;
  k[NV__PRIM_AS_STRIDED] = nv__k_view;
  k[NV__PRIM_SLICE_UPDATE] = nv__k_slice_update;
  k[NV__PRIM_NEGATIVE] = nv__k_unary;
  k[NV__PRIM_ABS] = nv__k_unary;
  k[NV__PRIM_EXP] = nv__k_unary;
  k[NV__PRIM_LOG] = nv__k_unary;
  k[NV__PRIM_SQRT] = nv__k_unary;
  k[NV__PRIM_ADD] = nv__k_binary;
  k[NV__PRIM_SUBTRACT] = nv__k_binary;
  k[NV__PRIM_MULTIPLY] = nv__k_binary;
  k[NV__PRIM_DIVIDE] = nv__k_binary;
  k[NV__PRIM_MAXIMUM] = nv__k_binary;
  k[NV__PRIM_MINIMUM] = nv__k_binary;
  k[NV__PRIM_SUM] = nv__k_sum;
  k[NV__PRIM_TEST_ADD_MULTIPLY] = nv__k_add_multiply;
}

void nv__cpu_register_elementwise(nv__kernel_fn *k);
void nv__cpu_register_elementwise_act(nv__kernel_fn *k);
void nv__cpu_register_linalg(nv__kernel_fn *k);
void nv__cpu_register_linalg_decomp(nv__kernel_fn *k);
void nv__cpu_register_transforms(nv__kernel_fn *k);
void nv__cpu_register_reduce(nv__kernel_fn *k);
void nv__cpu_register_random(nv__kernel_fn *k);
void nv__cpu_register_optim(nv__kernel_fn *k);
void nv__cpu_register_conv(nv__kernel_fn *k);
void nv__cpu_register_distributed(nv__kernel_fn *k);
void nv__cpu_register_fast(nv__kernel_fn *k);
void nv__cpu_register_fast_sdpa(nv__kernel_fn *k);
void nv__cpu_register_fast_serving(nv__kernel_fn *k);
void nv__cpu_register_fast_norm_rope(nv__kernel_fn *k);
void nv__cpu_register_fast_delta(nv__kernel_fn *k);
void nv__cpu_register_fast_paged(nv__kernel_fn *k);
void nv__cpu_register_compiled(nv__kernel_fn *k);

/* Families register here, one line each. */
void nv__cpu_register_index(nv__kernel_fn *k);
void nv__cpu_register_fft(nv__kernel_fn *k);
void nv__cpu_register_quantize(nv__kernel_fn *k);
void nv__cpu_register_fast_custom(nv__kernel_fn *k);
static void (*const families[])(nv__kernel_fn *) = {
    register_core,
    nv__cpu_register_elementwise,
    nv__cpu_register_elementwise_act,
    nv__cpu_register_index,
    nv__cpu_register_linalg,
    nv__cpu_register_linalg_decomp,
    nv__cpu_register_transforms,
    nv__cpu_register_reduce,
    nv__cpu_register_random,
    nv__cpu_register_optim,
    nv__cpu_register_conv,
    nv__cpu_register_fft,
    nv__cpu_register_distributed,
    nv__cpu_register_fast,
    nv__cpu_register_fast_sdpa,
    nv__cpu_register_fast_serving,
    nv__cpu_register_fast_norm_rope,
    nv__cpu_register_fast_delta,
    nv__cpu_register_fast_paged,
    nv__cpu_register_compiled,
    nv__cpu_register_quantize,
    nv__cpu_register_fast_custom,
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void register_all(void) {
  for (size_t i = 0; i < sizeof families / sizeof *families; i++) families[i](nv__cpu_kernels);
}

void nv__cpu_register(void) { pthread_once(&once, register_all); }
