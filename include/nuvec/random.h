/* nuvec — random numbers with MLX's key-based API (mlx.core.random), on threefry-2x32.
 *
 * A key is a uint32 array of shape (2). Every sampler takes an optional `key`: NULL draws the
 * next key from the process-wide key sequence (nv_random_seed), as MLX does when no key is
 * given. Samplers are lazy op builders like the rest (nuvec/ops.h): inputs are borrowed, the
 * result is a new array, and bad arguments give an array that carries an error naming the op
 * (never NULL). A key yields the same bits whatever the thread count, and the same bits as
 * MLX 0.32 for the same key. The samplers are composed of the same operations as MLX's, in the
 * same order, so uniform, randint, bernoulli and permutation give MLX's values exactly; those
 * that go through erfinv, erf, log or log1p (normal, truncated_normal, gumbel, laplace, and
 * categorical at near ties) may differ from MLX's by the few ulps by which those functions
 * differ. Scalar arguments (the *_scalar forms, loc, scale) are weakly typed C scalars
 * (nv_weak_scalar): they take the sample dtype and convert from their exact
 * double value. Dtypes are MLX's: uniform, truncated_normal and gumbel accept float16,
 * bfloat16 and float32 (MLX 0.32 has no float64 uniform: "unsupported type"); normal also
 * float64 and complex64; laplace all real floats; randint integers and bool. Under the
 * transforms, samples carry no gradient, and vmap over a batch of keys draws each key's own
 * stream (the values a loop over the keys gives). */
#ifndef NUVEC_RANDOM_H
#define NUVEC_RANDOM_H

#include "nuvec/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A key for `seed`: the uint32 pair (seed >> 32, seed & 0xffffffff), as MLX's key(seed). */
NV_API nv_array *nv_random_key(uint64_t seed);

/* Reseeds the process-wide key sequence with nv_random_key(seed). Each sampler called with a
 * NULL key takes the next key from it: the sequence's key k is split into (k', sub), k' is
 * kept and `sub` is used, as MLX's KeySequence. Thread-safe (a mutex guards the sequence);
 * before the first call the sequence is seeded from the clock, as MLX's. */
NV_API void nv_random_seed(uint64_t seed);

/* `num` new keys from `key`, as a uint32 array of shape (num, 2): nv_random_bits((num, 2), 4,
 * key), as MLX's split. Fails for num < 0 or a key that is not uint32 of shape (2). */
NV_API nv_array *nv_random_split(const nv_array *key, int num);

/* Random bits of `shape`: uint32 for width 4, uint16 for 2, uint8 for 1 (MLX's RandomBits).
 * The key's threefry stream is laid out as MLX lays it out, so the bits equal MLX's. Fails for
 * another width, a negative dimension, or a key that is not uint32 of shape (2). */
NV_API nv_array *nv_random_bits(const int *shape, int ndim, int width, const nv_array *key);

/* Samples uniform on [low, high) of `shape` and float `dtype`, as MLX: bits / 2^32 in
 * float32, clamped below 1 (the largest value below 1.0 in `dtype`), converted to `dtype`,
 * times (high - low) plus low, all computed in `dtype`. `low` and `high` (converted to dtype)
 * must broadcast to `shape` (fails otherwise, and for a dtype other than float16, bfloat16 or
 * float32). With low > high the samples lie in (high, low]. */
NV_API nv_array *nv_random_uniform(const nv_array *low, const nv_array *high, const int *shape,
                                   int ndim, nv_dtype dtype, const nv_array *key);
NV_API nv_array *nv_random_uniform_scalar(double low, double high, const int *shape, int ndim,
                                          nv_dtype dtype, const nv_array *key);

/* Samples of the normal distribution with mean `loc` and standard deviation `scale`, as MLX:
 * sqrt(2) * erfinv(u) for u uniform on (-1, 1) in float32, converted to `dtype`, then scaled
 * and shifted in `dtype`. complex64 gives a standard complex normal (real and imaginary parts
 * each of variance 1/2) times scale plus loc. The _array form takes `loc` and `scale` as arrays
 * (NULL: 0 and 1) which broadcast with `shape` (the result has the broadcast shape, as MLX).
 * Fails for an integer or bool dtype. */
NV_API nv_array *nv_random_normal(const int *shape, int ndim, nv_dtype dtype, double loc,
                                  double scale, const nv_array *key);
NV_API nv_array *nv_random_normal_array(const int *shape, int ndim, nv_dtype dtype,
                                        const nv_array *loc, const nv_array *scale,
                                        const nv_array *key);

/* Integers uniform on [low, high) of `shape` and integer or bool `dtype`, as MLX 0.32: the
 * floor of a float32 uniform sample on [low, high), raised to at least low and converted to
 * `dtype` (truncating). Because the draw is float32, bounds past 2^24 in magnitude give only the values
 * float32 represents (MLX 0.32's rule); an empty range (high <= low) gives low. Fails for a
 * float or complex dtype, or bounds that do not broadcast to `shape`. */
NV_API nv_array *nv_random_randint(const nv_array *low, const nv_array *high, const int *shape,
                                   int ndim, nv_dtype dtype, const nv_array *key);
NV_API nv_array *nv_random_randint_scalar(int64_t low, int64_t high, const int *shape, int ndim,
                                          nv_dtype dtype, const nv_array *key);

/* Booleans that are true with probability `p`, of `shape` (NULL: p's shape), as MLX:
 * bits < p * (the float32 just above 2^32 - 1), compared in float32 — p <= 0 gives false and
 * p >= 1 true. `p` must be a float array (the _scalar form: a weak float) broadcasting to
 * `shape`; fails otherwise. */
NV_API nv_array *nv_random_bernoulli(const nv_array *p, const int *shape, int ndim,
                                     const nv_array *key);
NV_API nv_array *nv_random_bernoulli_scalar(double p, const int *shape, int ndim,
                                            const nv_array *key);

/* Samples of the standard normal truncated to [lower, upper], of `shape` (NULL: the broadcast
 * shape of the bounds) and float `dtype` (float16, bfloat16, float32), as MLX: sqrt(2) *
 * erfinv(u) with u uniform on [erf(lower/sqrt 2), erf(upper/sqrt 2)), clipped into the bounds.
 * Fails for another dtype or bounds that do not broadcast to `shape`. */
NV_API nv_array *nv_random_truncated_normal(const nv_array *lower, const nv_array *upper,
                                            const int *shape, int ndim, nv_dtype dtype,
                                            const nv_array *key);
NV_API nv_array *nv_random_truncated_normal_scalar(double lower, double upper, const int *shape,
                                                   int ndim, nv_dtype dtype,
                                                   const nv_array *key);

/* Samples of the standard Gumbel distribution, -log(-log(u)) for u uniform on [0, 1) in
 * `dtype` (float16, bfloat16, float32), as MLX. u = 0 gives -inf. */
NV_API nv_array *nv_random_gumbel(const int *shape, int ndim, nv_dtype dtype,
                                  const nv_array *key);

/* Samples of the Laplace distribution with location `loc` and scale `scale`, as MLX: for u
 * uniform on (-1, 1) in float32, sign(u) * log1p(-|u|) converted to real float `dtype`, then
 * scaled and shifted in `dtype`. Fails for an integer, bool or complex dtype. */
NV_API nv_array *nv_random_laplace(const int *shape, int ndim, nv_dtype dtype, double loc,
                                   double scale, const nv_array *key);

/* Indices (uint32) sampled from the categorical distribution whose unnormalized log
 * probabilities lie along `axis` of `logits`, as MLX: the argmax over that axis of logits plus
 * Gumbel noise. `shape` (NULL: logits' shape without `axis`) must be a shape the reduced shape
 * broadcasts to. The _samples form draws `num_samples` samples per distribution (shape: the
 * reduced shape plus num_samples). Fails for a bad axis or incompatible shape. */
NV_API nv_array *nv_random_categorical(const nv_array *logits, int axis, const int *shape,
                                       int ndim, const nv_array *key);
NV_API nv_array *nv_random_categorical_samples(const nv_array *logits, int axis,
                                               int num_samples, const nv_array *key);

/* A random permutation of 0..n-1 (uint32), as MLX: the stable argsort of n random uint32.
 * Fails for n < 0. */
NV_API nv_array *nv_random_permutation_n(int n, const nv_array *key);

/* `x` with its slices along `axis` in a random order: take(x, permutation(x.shape[axis]),
 * axis), as MLX. Fails for a 0-d `x` or a bad axis. */
NV_API nv_array *nv_random_permutation(const nv_array *x, int axis, const nv_array *key);

#ifdef __cplusplus
}
#endif
#endif /* NUVEC_RANDOM_H */
