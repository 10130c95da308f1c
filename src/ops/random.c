/* The random family's builders: keys, the global key sequence, random_bits, and the samplers
 * composed from them as MLX composes them (so that they round as MLX's do). */
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "nuvec/random.h"
#include "ops/ops_internal.h"
#include "ops/random_internal.h"
#include "ops/random_params.h"

/* ---- Keys and the global key sequence ---- */

/* MLX's split of a key into two: the bits of shape (2, 2), i.e. counters (0, 2) and (1, 3). */
static void split_two(const uint32_t k[2], uint32_t first[2], uint32_t second[2]) {
  uint32_t a0 = 0, b0 = 2, a1 = 1, b1 = 3;
  nv__threefry2x32(k[0], k[1], &a0, &b0);
  nv__threefry2x32(k[0], k[1], &a1, &b1);
  first[0] = a0;
  first[1] = a1;
  second[0] = b0;
  second[1] = b1;
}

static pthread_mutex_t seq_lock = PTHREAD_MUTEX_INITIALIZER;
static bool seq_seeded;
static uint32_t seq_key[2];

static void seq_set(uint64_t seed) {
  seq_key[0] = (uint32_t)(seed >> 32);
  seq_key[1] = (uint32_t)seed;
  seq_seeded = true;
}

void nv_random_seed(uint64_t seed) {
  pthread_mutex_lock(&seq_lock);
  seq_set(seed);
  pthread_mutex_unlock(&seq_lock);
}

static nv_array *key_array(const uint32_t k[2]) {
  int two = 2;
  return nv_array_from_data(k, &two, 1, NV_DTYPE_UINT32);
}

nv_array *nv_random_key(uint64_t seed) {
  uint32_t k[2] = {(uint32_t)(seed >> 32), (uint32_t)seed};
  return key_array(k);
}

/* The next key of the sequence, as MLX's KeySequence::next: split the held key, keep the
 * first half, hand out the second. The split is computed here, on the host, so the sequence
 * never grows a lazy graph. Not registered with any scope. */
static nv_array *seq_next(void) {
  uint32_t sub[2];
  pthread_mutex_lock(&seq_lock);
  if (!seq_seeded) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seq_set((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
  }
  uint32_t next[2];
  split_two(seq_key, next, sub);
  seq_key[0] = next[0];
  seq_key[1] = next[1];
  pthread_mutex_unlock(&seq_lock);
  nv__scope_suspend();
  nv_array *r = key_array(sub);
  nv__scope_resume();
  return r;
}

nv_array *nv__random_use_key(const nv_array *key) {
  return key ? nv_retain((nv_array *)key) : seq_next();
}

/* ---- Argument checks ---- */

nv_array *nv__random_check(const char *op, const int *shape, int ndim, const nv_array *key) {
  if (ndim < 0 || ndim > NV__MAX_DIMS)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "invalid number of dimensions %d", ndim);
  if (ndim > 0 && !shape) return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "shape is NULL");
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0) {
      char s[NV__SHAPE_BUF];
      return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "negative dimension in shape %s",
                          nv__shape_str(shape, ndim, s, sizeof s));
    }
  if (!key) return NULL;
  nv_array *f = nv__op_check(op, &key, 1);
  if (f) return f;
  const nv__output *k = nv__out(key);
  if (k->dtype != NV_DTYPE_UINT32 || k->ndim != 1 || k->shape[0] != 2) {
    char s[NV__SHAPE_BUF];
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                        "expected a key of dtype uint32 and shape (2), got %s %s",
                        nv_dtype_name(k->dtype), nv__shape_str(k->shape, k->ndim, s, sizeof s));
  }
  return NULL;
}

bool nv__random_fits(const char *op, const int *shape, int ndim, const nv_array *const *xs,
                     int n, nv_array **err) {
  int b[NV__MAX_DIMS], nb = ndim;
  for (int i = 0; i < ndim; i++) b[i] = shape[i];
  for (int k = 0; k < n; k++) {
    const nv__output *o = nv__out(xs[k]);
    int t[NV__MAX_DIMS], nt;
    bool ok = nv__broadcast_shapes(b, nb, o->shape, o->ndim, t, &nt);
    if (ok && (nt != ndim || memcmp(t, shape, (size_t)ndim * sizeof(int)))) ok = false;
    if (!ok) {
      char s1[NV__SHAPE_BUF], s2[NV__SHAPE_BUF];
      *err = nv__op_error(NV_ERR_INVALID_ARGUMENT, op,
                          "cannot generate random values of shape %s from an argument of "
                          "shape %s (it must broadcast to the shape)",
                          nv__shape_str(shape, ndim, s1, sizeof s1),
                          nv__shape_str(o->shape, o->ndim, s2, sizeof s2));
      return false;
    }
  }
  return true;
}

/* Hands a result built with scopes suspended to the caller's innermost scope. */
nv_array *nv__random_scoped(nv_array *r) {
  nv__scope_register(r);
  return r;
}

/* ---- random_bits ---- */

/* bits of a checked shape and width from a checked key (NULL: the sequence); unscoped. */
nv_array *nv__random_bits_unscoped(const int *shape, int ndim, int width, const nv_array *key) {
  nv_dtype dt = width == 4 ? NV_DTYPE_UINT32 : width == 2 ? NV_DTYPE_UINT16 : NV_DTYPE_UINT8;
  nv_array *k = nv__random_use_key(key);
  nv__scope_suspend();
  nv__node *n = nv__op_node(NV__PRIM_RANDOM_BITS, &k, 1, dt, shape, ndim,
                            sizeof(nv__random_bits_params));
  if (n) ((nv__random_bits_params *)n->params)->width = width;
  nv_array *r = nv__op_finish("bits", n);
  nv__scope_resume();
  nv_release(k);
  return r;
}

nv_array *nv_random_bits(const int *shape, int ndim, int width, const nv_array *key) {
  nv_array *f = nv__random_check("bits", shape, ndim, key);
  if (f) return f;
  if (width != 1 && width != 2 && width != 4)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "bits", "width must be 1, 2 or 4, got %d",
                        width);
  return nv__random_scoped(nv__random_bits_unscoped(shape, ndim, width, key));
}

nv_array *nv_random_split(const nv_array *key, int num) {
  if (num < 0)
    return nv__op_error(NV_ERR_INVALID_ARGUMENT, "split", "num must be >= 0, got %d", num);
  int shape[2] = {num, 2};
  nv_array *f = nv__random_check("split", shape, 2, key);
  if (f) return f;
  return nv__random_scoped(nv__random_bits_unscoped(shape, 2, 4, key));
}

/* ---- uniform ---- */

bool nv__random_uniform_dtype(nv_dtype dt) {
  return dt == NV_DTYPE_FLOAT16 || dt == NV_DTYPE_BFLOAT16 || dt == NV_DTYPE_FLOAT32;
}

nv_array *nv__random_dtype_error(const char *op, nv_dtype dt, const char *what) {
  return nv__op_error(NV_ERR_INVALID_ARGUMENT, op, "dtype %s is not supported (%s)",
                      nv_dtype_name(dt), what);
}

/* Samples on [0, 1) of `dtype` (checked), unscoped: MLX's bits / 2^32 in float32, clamped
 * below one, converted — fused into one random_unit node that rounds as those ops do. (MLX
 * then computes 1 * u + 0, which gives u again, exactly.) */
nv_array *nv__random_unit(const int *shape, int ndim, nv_dtype dtype, const nv_array *key) {
  nv_array *k = nv__random_use_key(key);
  nv__scope_suspend();
  nv__node *n = nv__op_node(NV__PRIM_RANDOM_UNIT, &k, 1, dtype, shape, ndim, 0);
  nv_array *r = nv__op_finish("uniform", n);
  nv__scope_resume();
  nv_release(k);
  return r;
}

/* uniform with checked arguments; unscoped, scopes suspended by the caller. */
nv_array *nv__random_uniform(const nv_array *low, const nv_array *high, const int *shape,
                             int ndim, nv_dtype dtype, const nv_array *key) {
  nv_array *lo = nv_astype(low, dtype), *hi = nv_astype(high, dtype);
  nv_array *range = nv_subtract(hi, lo);
  nv_array *u = nv__random_unit(shape, ndim, dtype, key);
  nv_array *m = nv_multiply(range, u);
  nv_array *r = nv_add(m, lo);
  nv_release(lo);
  nv_release(hi);
  nv_release(range);
  nv_release(u);
  nv_release(m);
  return r;
}

static nv_array *uniform_checked(const char *op, const nv_array *low, const nv_array *high,
                                 const int *shape, int ndim, nv_dtype dtype,
                                 const nv_array *key) {
  nv_array *f = nv__random_check(op, shape, ndim, key);
  if (f) return f;
  const nv_array *b[2] = {low, high};
  if ((f = nv__op_check(op, b, 2))) return f;
  if (!nv__random_uniform_dtype(dtype))
    return nv__random_dtype_error(op, dtype, "uniform samples float16, bfloat16 or float32");
  if (!nv__random_fits(op, shape, ndim, b, 2, &f)) return f;
  return NULL;
}

nv_array *nv_random_uniform(const nv_array *low, const nv_array *high, const int *shape,
                            int ndim, nv_dtype dtype, const nv_array *key) {
  nv_array *f = uniform_checked("uniform", low, high, shape, ndim, dtype, key);
  if (f) return f;
  nv__scope_suspend();
  nv_array *r = nv__random_uniform(low, high, shape, ndim, dtype, key);
  nv__scope_resume();
  return nv__random_scoped(r);
}

nv_array *nv_random_uniform_scalar(double low, double high, const int *shape, int ndim,
                                   nv_dtype dtype, const nv_array *key) {
  nv__scope_suspend();
  nv_array *lo = nv_weak_scalar(low), *hi = nv_weak_scalar(high);
  nv__scope_resume();
  nv_array *f = uniform_checked("uniform", lo, hi, shape, ndim, dtype, key);
  nv_array *r = f;
  if (!f) {
    nv__scope_suspend();
    /* [0, 1) is the unit draw itself (1 * u + 0 == u exactly). */
    r = low == 0.0 && high == 1.0
            ? nv__random_unit(shape, ndim, dtype, key)
            : nv__random_uniform(lo, hi, shape, ndim, dtype, key);
    nv__scope_resume();
    r = nv__random_scoped(r);
  }
  nv_release(lo);
  nv_release(hi);
  return r;
}

/* ---- randint ---- */

static nv_array *randint_impl(const nv_array *low, const nv_array *high, const int *shape,
                              int ndim, nv_dtype dtype, const nv_array *key) {
  if (nv_issubdtype(dtype, NV_CATEGORY_INEXACT) || (unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__random_dtype_error("randint", dtype, "randint samples integers and bool");
  nv_array *f = nv__random_check("randint", shape, ndim, key);
  if (f) return f;
  const nv_array *b[2] = {low, high};
  if ((f = nv__op_check("randint", b, 2))) return f;
  if (!nv__random_fits("randint", shape, ndim, b, 2, &f)) return f;
  nv__scope_suspend();
  /* MLX 0.32: floor of a float32 uniform draw, raised to at least low, then converted. */
  nv_array *u = nv__random_uniform(low, high, shape, ndim, NV_DTYPE_FLOAT32, key);
  nv_array *fl = nv_floor(u);
  nv_array *m = nv_maximum(fl, low);
  nv_array *r = nv_astype(m, dtype);
  nv_release(u);
  nv_release(fl);
  nv_release(m);
  nv__scope_resume();
  return nv__random_scoped(r);
}

nv_array *nv_random_randint(const nv_array *low, const nv_array *high, const int *shape,
                            int ndim, nv_dtype dtype, const nv_array *key) {
  return randint_impl(low, high, shape, ndim, dtype, key);
}

nv_array *nv_random_randint_scalar(int64_t low, int64_t high, const int *shape, int ndim,
                                   nv_dtype dtype, const nv_array *key) {
  nv__scope_suspend();
  nv_array *lo = nv_weak_int(low), *hi = nv_weak_int(high);
  nv__scope_resume();
  nv_array *r = randint_impl(lo, hi, shape, ndim, dtype, key);
  nv_release(lo);
  nv_release(hi);
  return r;
}

/* ---- gumbel ---- */

nv_array *nv_random_gumbel(const int *shape, int ndim, nv_dtype dtype, const nv_array *key) {
  nv_array *f = nv__random_check("gumbel", shape, ndim, key);
  if (f) return f;
  if (!nv__random_uniform_dtype(dtype))
    return nv__random_dtype_error("gumbel", dtype, "gumbel samples float16, bfloat16 or float32");
  nv__scope_suspend();
  nv_array *u = nv__random_unit(shape, ndim, dtype, key);
  nv_array *a = nv_log(u);
  nv_array *b = nv_negative(a);
  nv_array *c = nv_log(b);
  nv_array *r = nv_negative(c);
  nv_release(u);
  nv_release(a);
  nv_release(b);
  nv_release(c);
  nv__scope_resume();
  return nv__random_scoped(r);
}
