/* The exact integer matrix product. Operands are packed row-major into an unsigned
 * accumulator type and every sum of products is carried modulo 2^bits, which wraps exactly as
 * NumPy's integer matmul does (two's complement arithmetic modulo 2^n is the same for signed
 * and unsigned values, and is free of C's signed-overflow undefined behaviour). Results of 32
 * bits or fewer accumulate in uint32 (the low 32 bits of the 64-bit sums: the same result,
 * twice the vector width); 64-bit results in uint64. The loops run four rows of the output at
 * a time over tiles of columns that stay in L1, so each row of b loaded serves four rows, and
 * the innermost loop over contiguous columns vectorizes. */
#include "cpu/linalg_kernels.h"
#include "cpu/pool.h"

/* GCC's -O2 vectorizes only loops whose trip counts it knows; the column loop needs the full
 * cost model (clang vectorizes it at -O2 already). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic")
#endif

#define ROWS 4   /* output rows computed together */
#define TILE 256 /* output columns per tile */

typedef struct int_job {
  int M, N, K;
  nv__linalg_batch bt;
  const char *a, *b; /* packed accumulator-typed operands */
  nv__output *out;
  int64_t groups; /* row groups per batch */
} int_job;

/* Narrows a tile of accumulators into the output dtype (the low bits: a wrap). */
static void store_tile(nv_dtype dt, char *dst, const void *acc, bool wide, int n) {
  const uint32_t *a32 = acc;
  const uint64_t *a64 = acc;
#define NARROW(T)                                                          \
  for (int j = 0; j < n; j++) ((T *)dst)[j] = (T)(wide ? a64[j] : a32[j]); \
  break;
  switch (dt) {
    case NV_DTYPE_UINT8: NARROW(uint8_t)
    case NV_DTYPE_INT8: NARROW(int8_t)
    case NV_DTYPE_UINT16: NARROW(uint16_t)
    case NV_DTYPE_INT16: NARROW(int16_t)
    case NV_DTYPE_UINT32: NARROW(uint32_t)
    case NV_DTYPE_INT32: NARROW(int32_t)
    case NV_DTYPE_UINT64: NARROW(uint64_t)
    default: NARROW(int64_t)
  }
#undef NARROW
}

/* One row group of one batch: rows [r0, r0 + nr) of the output, tile by tile. */
#define GROUP_FN(NAME, T)                                                                      \
  static void NAME(const int_job *j, int64_t batch, int r0, int nr) {                          \
    int64_t offa, offb;                                                                        \
    nv__linalg_batch_offsets(&j->bt, batch, &offa, &offb);                                     \
    const T *A = (const T *)j->a + offa + (int64_t)r0 * j->K;                                  \
    const T *B = (const T *)j->b + offb;                                                       \
    size_t osz = nv_dtype_size(j->out->dtype);                                                 \
    char *C =                                                                                  \
        (char *)nv__output_ptr(j->out) + ((batch * j->M + r0) * (int64_t)j->N) * (int64_t)osz; \
    T acc[ROWS][TILE];                                                                         \
    for (int j0 = 0; j0 < j->N; j0 += TILE) {                                                  \
      int nj = j->N - j0 < TILE ? j->N - j0 : TILE;                                            \
      memset(acc, 0, sizeof acc);                                                              \
      for (int k = 0; k < j->K; k++) {                                                         \
        const T *brow = B + (int64_t)k * j->N + j0;                                            \
        for (int r = 0; r < nr; r++) {                                                         \
          T av = A[(int64_t)r * j->K + k];                                                     \
          T *restrict ar = acc[r];                                                             \
          for (int c = 0; c < nj; c++) ar[c] += av * brow[c];                                  \
        }                                                                                      \
      }                                                                                        \
      for (int r = 0; r < nr; r++)                                                             \
        store_tile(j->out->dtype, C + ((int64_t)r * j->N + j0) * (int64_t)osz, acc[r],         \
                   sizeof(T) == 8, nj);                                                        \
    }                                                                                          \
  }

GROUP_FN(group32, uint32_t)
GROUP_FN(group64, uint64_t)

static void int_range(void *ctx, int64_t lo, int64_t hi) {
  const int_job *j = ctx;
  bool wide = nv_dtype_size(j->out->dtype) == 8;
  for (int64_t t = lo; t < hi; t++) {
    int64_t batch = t / j->groups;
    int r0 = (int)(t % j->groups) * ROWS;
    int nr = j->M - r0 < ROWS ? j->M - r0 : ROWS;
    if (wide)
      group64(j, batch, r0, nr);
    else
      group32(j, batch, r0, nr);
  }
}

nv_status nv__linalg_int_matmul(nv__output *out, nv__linalg_view *a, nv__linalg_view *b) {
  nv_dtype acc = nv_dtype_size(out->dtype) == 8 ? NV_DTYPE_UINT64 : NV_DTYPE_UINT32;
  void *pa = nv__linalg_pack_new(a, acc, "matmul");
  void *pb = pa ? nv__linalg_pack_new(b, acc, "matmul") : NULL;
  if (!pb) {
    nv__free(pa);
    return NV_ERR_OUT_OF_MEMORY;
  }
  int_job j = {.out = out, .a = a->p, .b = b->p};
  j.M = out->shape[out->ndim - 2];
  j.N = out->shape[out->ndim - 1];
  j.K = a->shape[a->ndim - 1];
  nv__linalg_batch_init(&j.bt, out, 2, a, b, 2);
  j.groups = (j.M + ROWS - 1) / ROWS;
  int64_t tasks = j.bt.n * j.groups;
  /* About 2^16 multiply-adds per task at the least, so small products stay on one thread. */
  int64_t per = (int64_t)ROWS * j.N * (j.K > 0 ? j.K : 1);
  int64_t grain = per >= 65536 ? 1 : 65536 / per;
  nv__parallel_for(tasks, grain, int_range, &j);
  nv__free(pa);
  nv__free(pb);
  return NV_OK;
}
