/* The CPU FFT engine (src/cpu/fft_plan.c): mixed-radix Stockham transforms of complex float32
 * data (radices 4, 2, 3, 5 and a direct DFT for other primes up to FFT_MAX_DIRECT), Bluestein's
 * chirp convolution for lengths with a larger prime factor, a four-step split for long rows, and
 * the plans' twiddles, computed in float64 and cached per length.
 *
 * Two layouts: one row of interleaved complex values (nv__cpx), or NV__FFT_LANES rows at once in
 * blocks (nv__cblk: element k of every row, real parts then imaginary parts), whose butterflies
 * are vector operations across the rows at every stage. */
#ifndef NUVEC_CPU_FFT_PLAN_H
#define NUVEC_CPU_FFT_PLAN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct nv__cpx {
  float re, im;
} nv__cpx;

/* Rows transformed together by the block layout: one AVX-512 vector of floats. */
#define NV__FFT_LANES 16

/* Element k of NV__FFT_LANES rows. */
typedef struct nv__cblk {
  float re[NV__FFT_LANES], im[NV__FFT_LANES];
} nv__cblk;

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

/* Blocks of work memory a block transform of plan p needs (beside its n blocks). */
int64_t nv__fft_plan_work_lanes(const nv__fft_plan *p);

/* The forward transform of NV__FFT_LANES rows at once: the n blocks at `a`, using `work`
 * (nv__fft_plan_work_lanes blocks); returns where the result is (`a` or inside `work`). */
nv__cblk *nv__fft_forward_lanes(const nv__fft_plan *p, nv__cblk *a, nv__cblk *work);

/* exp(-2πi k / 2n) for k = 0 .. n, n the length of plan p: the twiddles of the real
 * transforms of length 2n, which run on plan p. */
const nv__cpx *nv__fft_plan_half_twiddles(const nv__fft_plan *p);

#endif
