/* The launch plans of rms_norm / layer_norm on the GPU (fast_norm.cu's nv__gpu_norm_plan_of)
 * and the kernels compiled for them: every plan the host can make has a kernel, fits the
 * kernel's block, covers its rows and, on a fixed kernel, holds the row in registers. Needs no
 * GPU: the plans and the kernel table are host code. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "cuda/fast_norm_kernels.h"
#include "nuvec.h"

static const nv_dtype FLOATS[] = {NV_DTYPE_FLOAT16, NV_DTYPE_BFLOAT16, NV_DTYPE_FLOAT32,
                                  NV_DTYPE_FLOAT64};

Test(gpu_norm_plan, every_plan_has_a_kernel_and_fits_it) {
  const int64_t lengths[] = {1, 7, 8, 64, 80, 1000, 2048, 4096, 4097, 8192, 8200, 16384, 65536,
                             65544, 1 << 20};
  const int64_t rowss[] = {1, 3, 32768, (int64_t)1 << 40};
  for (size_t t = 0; t < sizeof FLOATS / sizeof FLOATS[0]; t++)
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++)
      for (size_t r = 0; r < sizeof rowss / sizeof rowss[0]; r++)
        for (int aligned = 0; aligned < 2; aligned++) {
          const nv_dtype dt = FLOATS[t];
          const int64_t d = lengths[i], rows = rowss[r], v = 16 / (int64_t)nv_dtype_size(dt);
          nv__gpu_norm_plan p;
          nv__gpu_norm_plan_of((int)dt, d, rows, aligned, &p);
          const char *what = nv_dtype_name(dt);
          cr_assert(nv__gpu_kernel_norm((int)dt, &p) != NULL,
                    "%s d=%lld: no kernel for tpr %d k %d fixed %d", what, (long long)d, p.tpr,
                    p.k, p.fixed);
          cr_expect(p.tpr >= 32 && p.tpr <= 1024 && p.tpr % 32 == 0, "%s d=%lld: tpr %d", what,
                    (long long)d, p.tpr);
          cr_expect(p.rpb >= 1 && p.tpr * p.rpb <= (p.fixed ? NV__GPU_NORM_BLOCK : 1024),
                    "%s d=%lld: block %d x %d", what, (long long)d, p.tpr, p.rpb);
          cr_expect(p.grid >= 1 && p.grid <= NV__GPU_NORM_MAX_GRID, "%s d=%lld: grid %lld", what,
                    (long long)d, (long long)p.grid);
          cr_expect(p.grid == NV__GPU_NORM_MAX_GRID || p.grid * p.rpb >= rows,
                    "%s d=%lld rows=%lld: grid %lld x %d rows", what, (long long)d,
                    (long long)rows, (long long)p.grid, p.rpb);
          if (p.fixed) {
            cr_expect(aligned && d % v == 0, "%s d=%lld aligned=%d: a fixed kernel", what,
                      (long long)d, aligned);
            cr_expect(p.k <= NV__GPU_NORM_FIXED_K && p.tpr <= NV__GPU_NORM_FIXED_TPR &&
                          (int64_t)p.k * p.tpr * v >= d,
                      "%s d=%lld: k %d x tpr %d does not hold the row", what, (long long)d, p.k,
                      p.tpr);
            cr_expect(p.hint == NV__GPU_NORM_HINT, "%s d=%lld: hint %d", what, (long long)d,
                      p.hint);
          } else {
            cr_expect(p.hint == NV__GPU_NORM_HINT_NONE && p.k >= 1 && p.k <= 8,
                      "%s d=%lld: generic k %d hint %d", what, (long long)d, p.k, p.hint);
          }
        }
}

/* Issue 18's rows (bench/gpu/norm_sweep.cu's best on the H200): 8 vectors a lane, a bfloat16
 * row of 2048 one warp (4 rows a block), 4096 two (2 rows), 8192 four (2 rows); a float32 row of
 * 4096 four warps; the same rows misaligned or of a length that is not a whole number of vectors
 * keep the generic kernel (128 threads a row of 512 vectors, k 4). */
Test(gpu_norm_plan, issue_18_rows) {
  nv__gpu_norm_plan p;
  nv__gpu_norm_plan_of(NV_DTYPE_BFLOAT16, 2048, 65536, 1, &p);
  cr_expect(p.fixed && p.tpr == 32 && p.k == 8 && p.rpb == 4 && p.grid == 16384,
            "bf16 2048: fixed %d tpr %d k %d rpb %d grid %lld", p.fixed, p.tpr, p.k, p.rpb,
            (long long)p.grid);
  nv__gpu_norm_plan_of(NV_DTYPE_BFLOAT16, 4096, 32768, 1, &p);
  cr_expect(p.fixed && p.tpr == 64 && p.k == 8 && p.rpb == 2 && p.grid == 16384,
            "bf16 4096: fixed %d tpr %d k %d rpb %d grid %lld", p.fixed, p.tpr, p.k, p.rpb,
            (long long)p.grid);
  nv__gpu_norm_plan_of(NV_DTYPE_BFLOAT16, 8192, 100, 1, &p);
  cr_expect(p.fixed && p.tpr == 128 && p.k == 8 && p.rpb == 2 && p.grid == 50,
            "bf16 8192: fixed %d tpr %d k %d rpb %d grid %lld", p.fixed, p.tpr, p.k, p.rpb,
            (long long)p.grid);
  nv__gpu_norm_plan_of(NV_DTYPE_FLOAT32, 4096, 7, 1, &p);
  cr_expect(p.fixed && p.tpr == 128 && p.k == 8, "f32 4096: fixed %d tpr %d k %d", p.fixed,
            p.tpr, p.k);
  nv__gpu_norm_plan_of(NV_DTYPE_BFLOAT16, 16384, 3, 1, &p);
  cr_expect(p.fixed && p.tpr == 256 && p.k == 8 && p.rpb == 1, "bf16 16384: fixed %d tpr %d k %d rpb %d",
            p.fixed, p.tpr, p.k, p.rpb);
  nv__gpu_norm_plan_of(NV_DTYPE_BFLOAT16, 4096, 32768, 0, &p);
  cr_expect(!p.fixed && p.tpr == 128 && p.k == 4 && p.rpb == 2,
            "bf16 4096 misaligned: fixed %d tpr %d k %d rpb %d", p.fixed, p.tpr, p.k, p.rpb);
  nv__gpu_norm_plan_of(NV_DTYPE_BFLOAT16, 4097, 32768, 1, &p);
  cr_expect(!p.fixed && p.tpr == 1024 && p.rpb == 1, "bf16 4097: fixed %d tpr %d rpb %d",
            p.fixed, p.tpr, p.rpb);
  nv__gpu_norm_plan_of(NV_DTYPE_BFLOAT16, 32768, 3, 1, &p);
  cr_expect(!p.fixed && p.tpr == 1024 && p.k == 4, "bf16 32768: fixed %d tpr %d k %d", p.fixed,
            p.tpr, p.k);
}

Test(gpu_norm_plan, other_dtypes_have_no_kernel) {
  nv__gpu_norm_plan p;
  nv__gpu_norm_plan_of(NV_DTYPE_FLOAT32, 4096, 4, 1, &p);
  cr_expect(nv__gpu_kernel_norm(NV_DTYPE_INT32, &p) == NULL);
  cr_expect(nv__gpu_kernel_norm(NV_DTYPE_COMPLEX64, &p) == NULL);
  p.k = 3;
  cr_expect(nv__gpu_kernel_norm(NV_DTYPE_FLOAT32, &p) == NULL, "k 3 has no kernel");
}
