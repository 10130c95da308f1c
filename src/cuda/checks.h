/* The device-side check record (gpu.h's nv__gpu_index_check), shared by the host code and the
 * families' .cu files: valid C11 and C++, nothing of nuvec's internals (gpu.h, which includes
 * core/internal.h, is C only). */
#ifndef NUVEC_CUDA_CHECKS_H
#define NUVEC_CUDA_CHECKS_H

/* What a raised record reports (the CPU kernels' messages):
 *   NV__GPU_BAD_INDEX      "<op>: index <value> is out of range for an axis of size <size>"
 *   NV__GPU_BAD_MASK_ROWS  "<op>: the mask selects more than the <size> rows of src" */
enum { NV__GPU_BAD_INDEX = 0, NV__GPU_BAD_MASK_ROWS = 1 };

typedef struct nv__gpu_bad {
  unsigned int raised;
  int kind;
  long long value; /* the index as given (before negative indices wrap) */
  long long size;  /* the size of the axis it indexes */
  long long pad_;
} nv__gpu_bad;

#ifdef __CUDACC__
/* Raises the record (the first raise wins; later ones change nothing). */
static __device__ __forceinline__ void nv__gpu_raise_bad_kind(nv__gpu_bad *b, int kind,
                                                              long long value, long long size) {
  if (atomicCAS(&b->raised, 0u, 1u) == 0u) {
    b->kind = kind;
    b->value = value;
    b->size = size;
    __threadfence_system();
  }
}

static __device__ __forceinline__ void nv__gpu_raise_bad(nv__gpu_bad *b, long long value,
                                                         long long size) {
  nv__gpu_raise_bad_kind(b, NV__GPU_BAD_INDEX, value, size);
}
#endif

#endif
