/* The CPU FFT engine (src/cpu/fft_plan.c): mixed-radix Stockham transforms of complex float32
 * data (radices 8 in the block layout, 4, 2, 3, 5 and a direct DFT for other primes up to
 * FFT_MAX_DIRECT), Bluestein's chirp convolution for lengths with a larger prime factor, a
 * four-step split for long rows, and the plans' twiddles, computed in float64 and cached per
 * length.
 *
 * Two layouts: one row of interleaved complex values (nv__cpx), or NV__FFT_LANES rows at once in
 * blocks (nv__cblk: element k of every row, real parts then imaginary parts), whose butterflies
 * are vector operations across the rows at every stage. */
#ifndef NUVEC_CPU_FFT_PLAN_H
#define NUVEC_CPU_FFT_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef struct nv__cpx {
  float re, im;
} nv__cpx;

/* Rows transformed together by the block layout: one AVX-512 vector of floats. */
#define NV__FFT_LANES 16

/* The longest transform the block layout takes (src/cpu/fft.c sends longer rows one at a time);
 * plans have the block layout's stages up to 4 times it (Bluestein's convolutions). */
#define NV__FFT_LANES_MAX 4096

/* Element k of NV__FFT_LANES rows. */
typedef struct nv__cblk {
  float re[NV__FFT_LANES], im[NV__FFT_LANES];
} nv__cblk;

/* Sixteen floats as one vector (GCC/Clang vector extensions): the block transposes' tiles.
 * Compiled in every clone of their callers, one AVX-512 register or two AVX2 or four SSE
 * ones. */
typedef float nv__v16f __attribute__((vector_size(64)));

#if defined(__clang__)
#define NV__V16_LO(a, b) \
  __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)
#define NV__V16_HI(a, b) \
  __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)
#define NV__V16_EVEN(a, b) \
  __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
#define NV__V16_ODD(a, b) \
  __builtin_shufflevector(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31)
#else
typedef int32_t nv__v16i __attribute__((vector_size(64)));
#define NV__V16_LO(a, b) \
  __builtin_shuffle(a, b, (nv__v16i){0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23})
#define NV__V16_HI(a, b) \
  __builtin_shuffle(a, b, (nv__v16i){8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31})
#define NV__V16_EVEN(a, b) \
  __builtin_shuffle(a, b, (nv__v16i){0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30})
#define NV__V16_ODD(a, b) \
  __builtin_shuffle(a, b, (nv__v16i){1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31})
#endif

_Static_assert(NV__FFT_LANES == 16, "the block transposes' tiles are 16 x 16");

/* A 16 x 16 tile t[i] (lane j) transposed in place: four rounds that interleave row i with row
 * i + 8 into rows 2i and 2i + 1 (a perfect shuffle of the rows' bits, four times). The loops
 * are unrolled so the tile stays in registers. */
__attribute__((always_inline)) static inline void nv__fft_transpose16(nv__v16f *t) {
#pragma GCC unroll 4
  for (int r = 0; r < 4; r++) {
    nv__v16f u[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
      u[2 * i] = NV__V16_LO(t[i], t[i + 8]);
      u[2 * i + 1] = NV__V16_HI(t[i], t[i + 8]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) t[i] = u[i];
  }
}

/* 16 rows of 16 complex values (row b at rows[b], interleaved) into blocks blk[k] (k < 16),
 * imaginary parts times ci: the real parts' tile, then the imaginary parts'. */
__attribute__((always_inline)) static inline void nv__fft_tile_in(nv__cblk *blk,
                                                                  const nv__cpx *const *rows,
                                                                  float ci) {
#pragma GCC unroll 2
  for (int part = 0; part < 2; part++) {
    nv__v16f t[16];
#pragma GCC unroll 16
    for (int b = 0; b < 16; b++) {
      nv__v16f v0, v1;
      memcpy(&v0, rows[b], sizeof v0);
      memcpy(&v1, rows[b] + 8, sizeof v1);
      t[b] = part ? ci * NV__V16_ODD(v0, v1) : NV__V16_EVEN(v0, v1);
    }
    nv__fft_transpose16(t);
#pragma GCC unroll 16
    for (int k = 0; k < 16; k++) memcpy(part ? blk[k].im : blk[k].re, &t[k], sizeof t[k]);
  }
}

/* The blocks blk[k] (k < 16) times (sr, si) into 16 rows of 16 complex values at rows[b]. */
__attribute__((always_inline)) static inline void nv__fft_tile_out(nv__cpx *const *rows,
                                                                   const nv__cblk *blk, float sr,
                                                                   float si) {
  nv__v16f re[16], im[16];
#pragma GCC unroll 16
  for (int k = 0; k < 16; k++) {
    memcpy(&re[k], blk[k].re, sizeof re[k]);
    re[k] *= sr;
  }
  nv__fft_transpose16(re);
#pragma GCC unroll 16
  for (int k = 0; k < 16; k++) {
    memcpy(&im[k], blk[k].im, sizeof im[k]);
    im[k] *= si;
  }
  nv__fft_transpose16(im);
#pragma GCC unroll 16
  for (int b = 0; b < 16; b++) {
    nv__v16f v0 = NV__V16_LO(re[b], im[b]), v1 = NV__V16_HI(re[b], im[b]);
    memcpy(rows[b], &v0, sizeof v0);
    memcpy(rows[b] + 8, &v1, sizeof v1);
  }
}

typedef struct nv__fft_plan nv__fft_plan;

/* The plan of length n (>= 1): a cached one (*owned false, never freed), or when the cache is
 * full a new one the caller frees with nv__fft_plan_free (*owned true). NULL when out of
 * memory. Thread-safe. */
nv__fft_plan *nv__fft_plan_get(int64_t n, bool *owned);
void nv__fft_plan_free(nv__fft_plan *p);

/* Complex elements of work memory a row transform of plan p needs (beside its row). */
int64_t nv__fft_plan_work(const nv__fft_plan *p);

/* The forward transform (exp(-2πi jk/n), unnormalized) of the n values at `a`, using `work`
 * (nv__fft_plan_work elements); returns where the result is (`a` or inside `work`). */
nv__cpx *nv__fft_forward(const nv__fft_plan *p, nv__cpx *a, nv__cpx *work);

/* nv__fft_forward of the n values at x, left unchanged: `a` is n elements of scratch (a
 * four-step transform reads x in place of a copy). */
nv__cpx *nv__fft_forward_from(const nv__fft_plan *p, const nv__cpx *x, nv__cpx *a,
                              nv__cpx *work);

/* For a plan that splits in four steps: the transform of the n values at x (left unchanged;
 * imaginary parts times ci first) stored at dst times (sr, si), with `a` n elements of scratch;
 * false (nothing done) for other plans. The conjugations and scale of a complex row come with
 * the four steps' own passes instead of passes of their own. */
bool nv__fft_forward_to(const nv__fft_plan *p, const nv__cpx *x, float ci, nv__cpx *dst, float sr,
                        float si, nv__cpx *a, nv__cpx *work);

/* Blocks of work memory a block transform of plan p needs (beside its n blocks). */
int64_t nv__fft_plan_work_lanes(const nv__fft_plan *p);

/* The forward transform of NV__FFT_LANES rows at once: the n blocks at `a`, using `work`
 * (nv__fft_plan_work_lanes blocks); returns where the result is (`a` or inside `work`). */
nv__cblk *nv__fft_forward_lanes(const nv__fft_plan *p, nv__cblk *a, nv__cblk *work);

/* exp(-2πi k / 2n) for k = 0 .. n, n the length of plan p: the twiddles of the real
 * transforms of length 2n, which run on plan p. */
const nv__cpx *nv__fft_plan_half_twiddles(const nv__fft_plan *p);

#endif
