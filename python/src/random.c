/* nuvec's CPython extension: the submodule nuvec.random, mlx.core.random over
 * include/nuvec/random.h, with MLX's signatures, keyword names and defaults. Every sampler
 * takes `key=None` (None draws the next key of the process-wide sequence nuvec.random.seed
 * reseeds) and `stream=None`. Bounds and parameters that MLX takes as "scalar or array" are
 * converted as MLX's to_array: a Python number becomes an array of the sample dtype, an array
 * is passed as it is; when every such argument is a Python number the C library's weakly
 * typed scalar form is called instead (the same values). The entries are op-table lines
 * (optable.h), so argument parsing and `stream=` are the module functions' own. */
#include <string.h>
#include <time.h>

#include "optable.h"

/* ---- Argument helpers ---- */

static bool is_number(PyObject *o) {
  return o && (PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o));
}

/* nuvec.random.state: MLX's global key state, a list holding one key. A sampler called with
 * key=None splits state[0] into (next, sub), stores next in state[0] and draws with sub, as
 * MLX's KeySequence; seed() replaces state[0]. Being a list of arrays, it can be captured by
 * compile(inputs=[state], outputs=[state]): traced, the split is part of the compiled graph, so
 * each call draws fresh numbers. An evaluated key is split eagerly, so the state never grows a
 * lazy chain between draws. */
static PyObject *rng_state;

static int state_set(nv_array *key) {
  PyObject *k = nvpy_wrap(key);
  if (!k) return -1;
  if (PyList_GET_SIZE(rng_state) == 0) {
    int rc = PyList_Append(rng_state, k);
    Py_DECREF(k);
    return rc;
  }
  return PyList_SetItem(rng_state, 0, k); /* steals k */
}

/* The next key of nuvec.random.state (a new reference), or NULL with an exception. */
static nv_array *state_next(void) {
  PyObject *k = PyList_GET_SIZE(rng_state) ? PyList_GET_ITEM(rng_state, 0) : NULL;
  if (!k || !NVPY_IS_ARRAY(k)) {
    PyErr_Format(PyExc_TypeError, "random: random.state[0] must be a key array, got %s",
                 k ? Py_TYPE(k)->tp_name : "an empty state");
    return NULL;
  }
  Py_INCREF(k); /* held while the list may change */
  nv_array *pair = nv_random_split(NVPY_A(k), 2);
  int two = 2, s0[2] = {0, 0}, e0[2] = {1, 2}, s1[2] = {1, 0}, e1[2] = {2, 2}, st[2] = {1, 1};
  nv_array *r0 = nv_slice(pair, s0, e0, st, 2), *r1 = nv_slice(pair, s1, e1, st, 2);
  nv_array *next = nv_reshape(r0, &two, 1), *sub = nv_reshape(r1, &two, 1);
  nv_release(pair);
  nv_release(r0);
  nv_release(r1);
  nv_status status = nv_array_status(sub);
  if (status == NV_OK && nv_array_is_evaluated(NVPY_A(k))) {
    nv_array *both[2] = {next, sub};
    status = nv_eval(both, 2);
  }
  Py_DECREF(k);
  if (status != NV_OK) {
    nvpy_raise_status(status, nv_array_error(sub));
    nv_release(next);
    nv_release(sub);
    return NULL;
  }
  if (state_set(next) < 0) {
    nv_release(sub);
    return NULL;
  }
  return sub;
}

/* The `key=` argument at i: the next key of nuvec.random.state for None (held by the call).
 * MLX takes arrays only. */
static int key_at(call *c, int i, nv_array **key) {
  *key = NULL;
  if (!given(c, i)) {
    *key = hold(c, state_next());
    return *key ? 0 : -1;
  }
  if (!NVPY_IS_ARRAY(c->argv[i])) {
    PyErr_Format(PyExc_TypeError, "random.%s: key must be an array (from random.key or split), got %s",
                 c->op->name, Py_TYPE(c->argv[i])->tp_name);
    return -1;
  }
  *key = NVPY_A(c->argv[i]);
  return 0;
}

/* The shape argument at i: absent or None gives `*nd` = `none_nd` (0: the shape (), -1: no
 * shape, the C library's NULL). 0, or -1 with an exception. */
static int sample_shape_at(call *c, int i, int *shape, int *nd, int none_nd) {
  if (!given(c, i)) {
    *nd = none_nd;
    return 0;
  }
  *nd = shape_at(c, i, shape);
  return *nd < 0 ? -1 : 0;
}

/* A "scalar or array" argument at i as an array: a Python number (or `dflt_v` when absent)
 * becomes an array of `dtype`, as MLX's to_array(v, dtype); anything else converts as an
 * array. The result is held by the call. */
static nv_array *bound_at(call *c, int i, double dflt_v, nv_dtype dtype) {
  double v = dflt_v;
  if (!c->argv[i] || is_number(c->argv[i])) {
    if (double_at(c, i, dflt_v, &v) < 0) return NULL;
    return hold(c, nv_array_scalar(v, dtype));
  }
  return arr(c, i);
}

/* A required non-negative integer seed (MLX's uint64). */
static int seed_arg(PyObject *o, const char *what, uint64_t *out) {
  if (!PyLong_Check(o) && !PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "random.%s: seed must be an int, got %s", what, Py_TYPE(o)->tp_name);
    return -1;
  }
  PyObject *i = PyNumber_Index(o);
  if (!i) {
    char label[NVPY_LABEL];
    snprintf(label, sizeof label, "random.%s: seed", what);
    nvpy_error_prefix(label);
    return -1;
  }
  *out = PyLong_AsUnsignedLongLong(i);
  Py_DECREF(i);
  if (*out == (uint64_t)-1 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "random.%s: seed must be in [0, 2**64)", what);
    return -1;
  }
  return 0;
}

/* ---- Adapters ---- */

static PyObject *sig_key(call *c) {
  uint64_t s;
  if (seed_arg(c->argv[0], "key", &s) < 0) return NULL;
  return nvpy_wrap(nv_random_key(s));
}

static PyObject *sig_seed(call *c) {
  uint64_t s;
  if (seed_arg(c->argv[0], "seed", &s) < 0) return NULL;
  nv_random_seed(s); /* the C library's own sequence (NULL keys in C) too */
  if (state_set(nv_random_key(s)) < 0) return NULL;
  Py_RETURN_NONE;
}

/* split(key, num=2) */
static PyObject *sig_split(call *c) {
  nv_array *key;
  int num;
  if (key_at(c, 0, &key) < 0 || int_at(c, 1, 2, &num) < 0) return NULL;
  if (!key) return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "random.split: key is required");
  return nvpy_wrap(nv_random_split(key, num));
}

/* bits(shape=[], width=4, key=None): the C library's bits (mlx::core::random::bits). */
static PyObject *sig_bits(call *c) {
  int shape[NVPY_MAXDIM], nd, width;
  nv_array *key;
  if (sample_shape_at(c, 0, shape, &nd, 0) < 0 || int_at(c, 1, 4, &width) < 0 || key_at(c, 2, &key) < 0)
    return NULL;
  return nvpy_wrap(nv_random_bits(shape, nd, width, key));
}

/* A pair of bounds at arguments i and i + 1 (defaults d0, d1 when absent): Python numbers (or
 * absent) as doubles, else arrays of `dt`. */
typedef struct bounds {
  bool scalars;
  double lo, hi;
  nv_array *alo, *ahi;
} bounds;

static int bounds_at(call *c, int i, double d0, double d1, nv_dtype dt, bounds *b) {
  b->scalars = (!c->argv[i] || is_number(c->argv[i])) && (!c->argv[i + 1] || is_number(c->argv[i + 1]));
  if (b->scalars)
    return double_at(c, i, d0, &b->lo) < 0 || double_at(c, i + 1, d1, &b->hi) < 0 ? -1 : 0;
  b->alo = bound_at(c, i, d0, dt);
  b->ahi = b->alo ? bound_at(c, i + 1, d1, dt) : NULL;
  return b->ahi ? 0 : -1;
}

/* uniform(low=0, high=1, shape=[], dtype=float32, key=None) */
static PyObject *sig_uniform(call *c) {
  int shape[NVPY_MAXDIM], nd;
  int dt = dtype_at(c, 3, NV_DTYPE_FLOAT32);
  nv_array *key;
  if (dt < 0 || sample_shape_at(c, 2, shape, &nd, 0) < 0 || key_at(c, 4, &key) < 0) return NULL;
  bounds b;
  if (bounds_at(c, 0, 0.0, 1.0, (nv_dtype)dt, &b) < 0) return NULL;
  if (b.scalars) return nvpy_wrap(nv_random_uniform_scalar(b.lo, b.hi, shape, nd, (nv_dtype)dt, key));
  return nvpy_wrap(nv_random_uniform(b.alo, b.ahi, shape, nd, (nv_dtype)dt, key));
}

/* normal(shape=[], dtype=float32, loc=None, scale=None, key=None) */
static PyObject *sig_normal(call *c) {
  int shape[NVPY_MAXDIM], nd;
  int dt = dtype_at(c, 1, NV_DTYPE_FLOAT32);
  nv_array *key;
  if (dt < 0 || sample_shape_at(c, 0, shape, &nd, 0) < 0 || key_at(c, 4, &key) < 0) return NULL;
  bool scalars = (!given(c, 2) || is_number(c->argv[2])) && (!given(c, 3) || is_number(c->argv[3]));
  if (scalars) {
    double loc, scale;
    if (double_at(c, 2, 0.0, &loc) < 0 || double_at(c, 3, 1.0, &scale) < 0) return NULL;
    return nvpy_wrap(nv_random_normal(shape, nd, (nv_dtype)dt, loc, scale, key));
  }
  nv_array *loc = NULL, *scale = NULL;
  if (given(c, 2) && !(loc = bound_at(c, 2, 0.0, (nv_dtype)dt))) return NULL;
  if (given(c, 3) && !(scale = bound_at(c, 3, 1.0, (nv_dtype)dt))) return NULL;
  return nvpy_wrap(nv_random_normal_array(shape, nd, (nv_dtype)dt, loc, scale, key));
}

/* randint(low, high, shape=[], dtype=int32, key=None) */
static PyObject *sig_randint(call *c) {
  int shape[NVPY_MAXDIM], nd;
  int dt = dtype_at(c, 3, NV_DTYPE_INT32);
  nv_array *key;
  if (dt < 0 || sample_shape_at(c, 2, shape, &nd, 0) < 0 || key_at(c, 4, &key) < 0) return NULL;
  PyObject *o_lo = c->argv[0], *o_hi = c->argv[1];
  if (PyLong_Check(o_lo) && PyLong_Check(o_hi)) {
    int overflow_lo, overflow_hi;
    long long lo = PyLong_AsLongLongAndOverflow(o_lo, &overflow_lo);
    long long hi = PyLong_AsLongLongAndOverflow(o_hi, &overflow_hi);
    if (PyErr_Occurred()) return NULL;
    if (overflow_lo || overflow_hi)
      return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "random.randint: bounds must fit in int64");
    return nvpy_wrap(nv_random_randint_scalar(lo, hi, shape, nd, (nv_dtype)dt, key));
  }
  /* Other Python numbers convert as MLX's to_array without a dtype (floats to float32). */
  nv_array *lo = arr(c, 0), *hi = lo ? arr(c, 1) : NULL;
  if (!hi) return NULL;
  return nvpy_wrap(nv_random_randint(lo, hi, shape, nd, (nv_dtype)dt, key));
}

/* bernoulli(p=0.5, shape=None, key=None): p converts as MLX's to_array(p), so an int or bool
 * p fails as in MLX (p must be a float). */
static PyObject *sig_bernoulli(call *c) {
  int shape[NVPY_MAXDIM], nd;
  nv_array *key;
  if (sample_shape_at(c, 1, shape, &nd, -1) < 0 || key_at(c, 2, &key) < 0) return NULL;
  const int *sp = nd < 0 ? NULL : shape;
  if (!c->argv[0]) return nvpy_wrap(nv_random_bernoulli_scalar(0.5, sp, nd < 0 ? 0 : nd, key));
  nv_array *p = arr(c, 0);
  if (!p) return NULL;
  return nvpy_wrap(nv_random_bernoulli(p, sp, nd < 0 ? 0 : nd, key));
}

/* truncated_normal(lower, upper, shape=None, dtype=float32, key=None) */
static PyObject *sig_truncated_normal(call *c) {
  int shape[NVPY_MAXDIM], nd;
  int dt = dtype_at(c, 3, NV_DTYPE_FLOAT32);
  nv_array *key;
  if (dt < 0 || sample_shape_at(c, 2, shape, &nd, -1) < 0 || key_at(c, 4, &key) < 0) return NULL;
  const int *sp = nd < 0 ? NULL : shape;
  if (nd < 0) nd = 0;
  bounds b;
  if (bounds_at(c, 0, 0.0, 0.0, (nv_dtype)dt, &b) < 0) return NULL;
  if (b.scalars)
    return nvpy_wrap(nv_random_truncated_normal_scalar(b.lo, b.hi, sp, nd, (nv_dtype)dt, key));
  return nvpy_wrap(nv_random_truncated_normal(b.alo, b.ahi, sp, nd, (nv_dtype)dt, key));
}

/* gumbel(shape=[], dtype=float32, key=None) */
static PyObject *sig_gumbel(call *c) {
  int shape[NVPY_MAXDIM], nd;
  int dt = dtype_at(c, 1, NV_DTYPE_FLOAT32);
  nv_array *key;
  if (dt < 0 || sample_shape_at(c, 0, shape, &nd, 0) < 0 || key_at(c, 2, &key) < 0) return NULL;
  return nvpy_wrap(nv_random_gumbel(shape, nd, (nv_dtype)dt, key));
}

/* laplace(shape=[], dtype=float32, loc=0.0, scale=1.0, key=None): loc and scale are floats
 * only, as MLX's. */
static PyObject *sig_laplace(call *c) {
  int shape[NVPY_MAXDIM], nd;
  int dt = dtype_at(c, 1, NV_DTYPE_FLOAT32);
  double loc, scale;
  nv_array *key;
  if (dt < 0 || sample_shape_at(c, 0, shape, &nd, 0) < 0 || key_at(c, 4, &key) < 0) return NULL;
  for (int i = 2; i <= 3; i++)
    if (given(c, i) && !is_number(c->argv[i])) {
      PyErr_Format(PyExc_TypeError, "random.laplace: %s must be a float, got %s", c->op->kw[i],
                   Py_TYPE(c->argv[i])->tp_name);
      return NULL;
    }
  if (double_at(c, 2, 0.0, &loc) < 0 || double_at(c, 3, 1.0, &scale) < 0) return NULL;
  return nvpy_wrap(nv_random_laplace(shape, nd, (nv_dtype)dt, loc, scale, key));
}

/* categorical(logits, axis=-1, shape=None, num_samples=None, key=None) */
static PyObject *sig_categorical(call *c) {
  int shape[NVPY_MAXDIM], nd, axis, num;
  nv_array *logits = arr(c, 0), *key;
  if (!logits || int_at(c, 1, -1, &axis) < 0 || sample_shape_at(c, 2, shape, &nd, -1) < 0 ||
      int_at(c, 3, -1, &num) < 0 || key_at(c, 4, &key) < 0)
    return NULL;
  if (nd >= 0 && given(c, 3))
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT,
                             "[categorical] At most one of shape or num_samples can be specified.");
  if (given(c, 3)) return nvpy_wrap(nv_random_categorical_samples(logits, axis, num, key));
  return nvpy_wrap(nv_random_categorical(logits, axis, nd < 0 ? NULL : shape, nd < 0 ? 0 : nd, key));
}

/* permutation(x, axis=0, key=None): x an int (a permutation of range(x)) or an array. */
static PyObject *sig_permutation(call *c) {
  int axis, n;
  nv_array *key;
  if (int_at(c, 1, 0, &axis) < 0 || key_at(c, 2, &key) < 0) return NULL;
  PyObject *x = c->argv[0];
  if (!NVPY_IS_ARRAY(x) && (PyLong_Check(x) || PyIndex_Check(x))) {
    if (int_at(c, 0, 0, &n) < 0) return NULL;
    return nvpy_wrap(nv_random_permutation_n(n, key));
  }
  nv_array *a = arr(c, 0);
  return a ? nvpy_wrap(nv_random_permutation(a, axis, key)) : NULL;
}

/* ---- The table and the submodule ---- */

#define DOC(s) "mlx.core.random." s

static const nvpy_op random_ops[] = {
    {"key", sig_key, NULL, KW("seed"), 1, {0}, 0, DOC("key: the PRNG key of a seed.")},
    {"seed", sig_seed, NULL, KW("seed"), 1, {0}, 0, DOC("seed: reseeds the global key sequence.")},
    {"split", sig_split, NULL, KW("key", "num"), 1, {0}, 0, DOC("split: num new keys from a key.")},
    {"bits", sig_bits, NULL, KW("shape", "width", "key"), 0, {0}, 0,
     "Random bits of width 4, 2 or 1 bytes (uint32/16/8): mlx::core::random::bits, which "
     "mlx.core.random does not export."},
    {"uniform", sig_uniform, NULL, KW("low", "high", "shape", "dtype", "key"), 0, {0}, 0,
     DOC("uniform: samples uniform on [low, high).")},
    {"normal", sig_normal, NULL, KW("shape", "dtype", "loc", "scale", "key"), 0, {0}, 0,
     DOC("normal: normally distributed samples.")},
    {"randint", sig_randint, NULL, KW("low", "high", "shape", "dtype", "key"), 2, {0}, 0,
     DOC("randint: integers uniform on [low, high).")},
    {"bernoulli", sig_bernoulli, NULL, KW("p", "shape", "key"), 0, {0}, 0,
     DOC("bernoulli: booleans true with probability p.")},
    {"truncated_normal", sig_truncated_normal, NULL, KW("lower", "upper", "shape", "dtype", "key"),
     2, {0}, 0, DOC("truncated_normal: the standard normal truncated to [lower, upper].")},
    {"gumbel", sig_gumbel, NULL, KW("shape", "dtype", "key"), 0, {0}, 0,
     DOC("gumbel: samples of the standard Gumbel distribution.")},
    {"laplace", sig_laplace, NULL, KW("shape", "dtype", "loc", "scale", "key"), 0, {0}, 0,
     DOC("laplace: samples of the Laplace distribution.")},
    {"categorical", sig_categorical, NULL, KW("logits", "axis", "shape", "num_samples", "key"), 1,
     {0}, 0, DOC("categorical: samples of categorical distributions given by logits.")},
    {"permutation", sig_permutation, NULL, KW("x", "axis", "key"), 1, {0}, 0,
     DOC("permutation: a random permutation of range(x), or of x's slices along axis.")},
};

static struct PyModuleDef random_def = {
    PyModuleDef_HEAD_INIT, "nuvec.random",
    "Random numbers with MLX's key-based API (mlx.core.random), on threefry-2x32.", -1,
    NULL, NULL, NULL, NULL, NULL};

int nvpy_init_random(PyObject *m) {
  PyObject *r = PyModule_Create(&random_def);
  if (!r) return -1;
  if (nvpy_add_ops(r, random_ops, sizeof random_ops / sizeof random_ops[0], "random.") < 0) {
    Py_DECREF(r);
    return -1;
  }
  /* The state starts from the clock, as MLX's (and the C sequence's) does. */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  rng_state = PyList_New(0);
  if (!rng_state || state_set(nv_random_key((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec)) < 0 ||
      PyModule_AddObjectRef(r, "state", rng_state) < 0) {
    Py_DECREF(r);
    return -1;
  }
  if (PyModule_AddObject(m, "random", r) < 0) {
    Py_DECREF(r);
    return -1;
  }
  return 0;
}
