/* Array handles and graph nodes: creation, metadata, iterative release, reading back. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/convert.h"
#include "core/internal.h"
#include "core/strided.h"

/* ---- Threads and node locks ---- */

static atomic_int next_thread_id = 1;
static _Thread_local int thread_id;

int nv__thread_id(void) {
  if (!thread_id) thread_id = atomic_fetch_add(&next_thread_id, 1);
  return thread_id;
}

void nv__node_lock(nv__node *n) {
  int spins = 0;
  for (;;) {
    int expected = 0;
    if (atomic_compare_exchange_weak_explicit(&n->lock, &expected, 1, memory_order_acquire,
                                              memory_order_relaxed))
      return;
    if (++spins > 64) sched_yield();
  }
}

void nv__node_unlock(nv__node *n) { atomic_store_explicit(&n->lock, 0, memory_order_release); }

/* ---- Nodes ---- */

static size_t align16(size_t n) { return (n + 15) & ~(size_t)15; }

nv__node *nv__node_new(int prim, nv_array *const *inputs, int ninputs, int noutputs,
                       size_t params_size) {
  size_t head = align16(sizeof(nv__node) + (size_t)noutputs * sizeof(nv__output));
  size_t ins = align16((size_t)ninputs * sizeof(nv__input));
  nv__node *n = nv__malloc(head + ins + params_size);
  if (!n) return NULL;
  memset(n, 0, head + ins + params_size);
  atomic_init(&n->refs, 1);
  atomic_init(&n->state, NV__PENDING);
  atomic_init(&n->lock, 0);
  n->prim = prim;
  n->stream = nv_current_stream();
  n->ninputs = ninputs;
  n->noutputs = noutputs;
  n->inputs = ninputs ? (nv__input *)((char *)n + head) : NULL;
  n->params = params_size ? (char *)n + head + ins : NULL;
  n->params_size = params_size;
  for (int i = 0; i < ninputs; i++) {
    n->inputs[i].node = nv__node_retain(inputs[i]->node);
    n->inputs[i].idx = inputs[i]->idx;
  }
  for (int i = 0; i < noutputs; i++) {
    n->out[i].shape = n->out[i].shape_inl;
    n->out[i].strides = n->out[i].strides_inl;
  }
  return n;
}

void nv__compute_flags(nv__output *o) {
  uint8_t weak = o->flags & NV__FLAG_WEAK;
  int64_t expect = 1;
  bool row = true, col = true;
  for (int i = o->ndim - 1; i >= 0; i--) {
    if (o->shape[i] == 1) continue;
    if (o->strides[i] != expect) row = false;
    expect *= o->shape[i];
  }
  expect = 1;
  for (int i = 0; i < o->ndim; i++) {
    if (o->shape[i] == 1) continue;
    if (o->strides[i] != expect) col = false;
    expect *= o->shape[i];
  }
  if (o->size == 0) row = col = true;
  o->flags = weak | (row ? NV__FLAG_ROW : 0) | (col ? NV__FLAG_COL : 0);
}

bool nv__shape_size(const int *shape, int ndim, int64_t *size) {
  int64_t n = 1;
  bool zero = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return false;
    if (shape[i] == 0) zero = true;
    else if (__builtin_mul_overflow(n, (int64_t)shape[i], &n)) return false;
  }
  *size = zero ? 0 : n;
  return true;
}

/* Whether a shape's elements and bytes are countable: every element count × itemsize is
 * checked where shapes are made, so no size or byte offset computed later can wrap (a wrapped
 * byte count once allocated 0 bytes for an array of 2^62 elements). */
static nv_status check_size(nv_dtype dtype, const int *shape, int ndim) {
  int64_t size;
  char s[NV__SHAPE_BUF];
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "negative dimension %d in shape %s",
                           shape[i], nv__shape_str(shape, ndim, s, sizeof s));
  if (!nv__shape_size(shape, ndim, &size))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "shape %s has more than 2^63 - 1 elements",
                         nv__shape_str(shape, ndim, s, sizeof s));
  size_t item = (unsigned)dtype < NV_DTYPE_COUNT ? nv_dtype_size(dtype) : 1;
  if (item && size > INT64_MAX / (int64_t)item)
    return nv__set_error(NV_ERR_OUT_OF_MEMORY,
                         "shape %s of %s is too large to allocate (%.4g bytes)",
                         nv__shape_str(shape, ndim, s, sizeof s), nv_dtype_name(dtype),
                         (double)size * (double)item);
  return NV_OK;
}

nv_status nv__output_set_shape(nv__output *o, nv_dtype dtype, const int *shape, int ndim) {
  if (ndim < 0 || ndim > NV__MAX_DIMS)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "too many dimensions (%d)", ndim);
  nv_status st = check_size(dtype, shape, ndim);
  if (st != NV_OK) return st;
  if (ndim > NV__INLINE_DIMS) {
    int *s = nv__malloc((size_t)ndim * sizeof(int));
    int64_t *st = nv__malloc((size_t)ndim * sizeof(int64_t));
    if (!s || !st) {
      nv__free(s);
      nv__free(st);
      return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (o->shape != o->shape_inl) nv__free(o->shape);
    if (o->strides != o->strides_inl) nv__free(o->strides);
    o->shape = s;
    o->strides = st;
  }
  o->dtype = dtype;
  o->ndim = ndim;
  int64_t size = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    o->shape[i] = shape[i];
    o->strides[i] = size;
    size *= shape[i];
  }
  o->size = size;
  nv__compute_flags(o);
  return NV_OK;
}

void nv__output_set_strides(nv__output *o, const int64_t *strides) {
  for (int i = 0; i < o->ndim; i++) o->strides[i] = strides[i];
  nv__compute_flags(o);
}

nv_status nv__output_alloc(nv__output *o) {
  size_t item = nv_dtype_size(o->dtype);
  if (o->size < 0 || (item && (uint64_t)o->size > (uint64_t)INT64_MAX / item))
    return nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory: %lld elements of %s are too "
                         "large to allocate", (long long)o->size, nv_dtype_name(o->dtype));
  nv__buffer *b = nv__buffer_alloc((size_t)o->size * item);
  if (!b) return NV_ERR_OUT_OF_MEMORY;
  o->buf = b;
  o->offset = 0;
  return NV_OK;
}

static void free_output(nv__output *o) {
  nv__buffer_release(o->buf);
  o->buf = NULL;
  if (o->shape != o->shape_inl) nv__free(o->shape);
  if (o->strides != o->strides_inl) nv__free(o->strides);
}

/* Frees nodes whose count reached zero without recursing: nodes to free are linked through
 * their `params` field once their parameters are no longer needed. */
void nv__node_release(nv__node *n) {
  if (!n || atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1) return;
  nv__node *list = n;
  n->params = NULL;
  while (list) {
    nv__node *cur = list;
    list = (nv__node *)cur->params;
    for (int i = 0; i < cur->ninputs; i++) {
      nv__node *in = cur->inputs[i].node;
      if (in && atomic_fetch_sub_explicit(&in->refs, 1, memory_order_acq_rel) == 1) {
        in->params = list;
        list = in;
      }
    }
    for (int i = 0; i < cur->noutputs; i++) free_output(&cur->out[i]);
    nv__error_release(cur->error);
    if (cur->trace) nv__trace_release(cur->trace);
    nv__free(cur);
  }
}

/* Readers of another thread's node (the evaluation's ordering, the transforms' walk) read its
 * inputs under the lock and retain them, so the count is cleared under the lock and the
 * references are given back after it: a reader sees every input (each still held by `n`, so
 * its retain is safe) or none. The caller holds a reference to `n`. */
void nv__node_detach(nv__node *n) {
  nv__node_lock(n);
  int k = n->ninputs;
  n->ninputs = 0;
  nv__node_unlock(n);
  for (int i = 0; i < k; i++) {
    nv__node *in = n->inputs[i].node;
    n->inputs[i].node = NULL;
    nv__node_release(in);
  }
}

/* ---- Handles ---- */

/* The array returned when not even a failed array can be allocated: immortal. */
static pthread_once_t oom_once = PTHREAD_ONCE_INIT;
static nv_array *oom_array;

static void make_oom_array(void) {
  nv__node *n = malloc(sizeof(nv__node) + sizeof(nv__output));
  nv_array *a = malloc(sizeof *a);
  if (!n || !a) {
    free(n);
    free(a);
    return;
  }
  memset(n, 0, sizeof(nv__node) + sizeof(nv__output));
  atomic_init(&n->refs, 1L << 60);
  atomic_init(&n->state, NV__FAILED);
  n->noutputs = 1;
  n->out[0].shape = n->out[0].shape_inl;
  n->out[0].strides = n->out[0].strides_inl;
  n->out[0].dtype = NV_DTYPE_FLOAT32;
  n->out[0].size = 1;
  n->out[0].flags = NV__FLAG_ROW | NV__FLAG_COL | NV__FLAG_NOMETA;
  n->error = nv__error_oom();
  atomic_init(&a->refs, 1L << 60);
  a->node = n;
  a->idx = 0;
  atomic_init(&a->scope_level, 0);
  a->scope_thread = 0;
  a->scope_slot = 0;
  oom_array = a;
}

static nv_array *the_oom_array(void) {
  pthread_once(&oom_once, make_oom_array);
  nv__set_error(NV_ERR_OUT_OF_MEMORY, "out of memory");
  return oom_array;
}

nv_array *nv__array_new(nv__node *node, int idx) {
  nv_array *a = nv__malloc(sizeof *a);
  if (!a) {
    nv__node_release(node);
    return the_oom_array();
  }
  atomic_init(&a->refs, 1);
  a->node = node;
  a->idx = idx;
  atomic_init(&a->scope_level, 0);
  a->scope_thread = 0;
  a->scope_slot = 0;
  nv__scope_register(a);
  return a;
}

static nv_array *failed_array(nv__error *err, nv_dtype dtype, const int *shape, int ndim,
                              bool nometa) {
  nv__node *n = nv__node_new(NV__PRIM_CONSTANT, NULL, 0, 1, 0);
  if (!n) return the_oom_array();
  if ((unsigned)dtype >= NV_DTYPE_COUNT) dtype = NV_DTYPE_FLOAT32;
  bool ok_shape = (shape || !ndim) && ndim >= 0 && ndim <= NV__MAX_DIMS;
  for (int i = 0; ok_shape && i < ndim; i++) ok_shape = shape[i] >= 0;
  if (!ok_shape || nv__output_set_shape(&n->out[0], dtype, shape, ndim) != NV_OK) {
    nv__output_set_shape(&n->out[0], dtype, NULL, 0);
    nometa = true;
  }
  if (nometa) n->out[0].flags |= NV__FLAG_NOMETA;
  n->error = nv__error_retain(err);
  atomic_store_explicit(&n->state, NV__FAILED, memory_order_release);
  nv__set_error_obj(err);
  return nv__array_new(n, 0);
}

nv_array *nv__array_failed(nv__error *err, nv_dtype dtype, const int *shape, int ndim) {
  return failed_array(err, dtype, shape, ndim, false);
}

nv_array *nv__array_failed_nometa(nv__error *err) {
  return failed_array(err, NV_DTYPE_FLOAT32, NULL, 0, true);
}

nv_array *nv__array_error(nv_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  nv__error *e = nv__error_newv(status, fmt, ap);
  va_end(ap);
  nv_array *a = failed_array(e, NV_DTYPE_FLOAT32, NULL, 0, true);
  nv__error_release(e);
  return a;
}

nv__error *nv__node_known_error(nv__node *n) {
  if (atomic_load_explicit(&n->state, memory_order_acquire) == NV__FAILED) return n->error;
  return NULL;
}

bool nv__node_inherit_error(nv__node *n) {
  for (int i = 0; i < n->ninputs; i++) {
    nv__error *e = n->inputs[i].node ? nv__node_known_error(n->inputs[i].node) : NULL;
    if (!e) continue;
    n->error = nv__error_retain(e);
    nv__set_error_obj(e);
    nv__node_detach(n);
    atomic_store_explicit(&n->state, NV__FAILED, memory_order_release);
    return true;
  }
  return false;
}

nv_array *nv_retain(nv_array *x) {
  if (x) atomic_fetch_add_explicit(&x->refs, 1, memory_order_relaxed);
  return x;
}

void nv_release(nv_array *x) {
  if (!x) return;
  /* The last reference of a scope-owned array is the scope's (scope.c). */
  if (atomic_load_explicit(&x->scope_level, memory_order_acquire) > 0 &&
      atomic_load_explicit(&x->refs, memory_order_relaxed) == 1 && nv__scope_release(x))
    return;
  if (atomic_fetch_sub_explicit(&x->refs, 1, memory_order_acq_rel) != 1) return;
  nv__node_release(x->node);
  nv__free(x);
}

nv_array *nv__array_from_buffer(nv__buffer *buf, int64_t offset, nv_dtype dtype,
                                const int *shape, int ndim, const int64_t *strides) {
  nv__node *n = nv__node_new(NV__PRIM_CONSTANT, NULL, 0, 1, 0);
  if (!n) return the_oom_array();
  if (nv__output_set_shape(&n->out[0], dtype, shape, ndim) != NV_OK) {
    nv__node_release(n);
    return nv__array_error(NV_ERR_INVALID_ARGUMENT, "array: %s", nv_last_error());
  }
  if (strides) nv__output_set_strides(&n->out[0], strides);
  n->out[0].buf = nv__buffer_retain(buf);
  n->out[0].offset = offset;
  atomic_store_explicit(&n->state, NV__DONE, memory_order_release);
  return nv__array_new(n, 0);
}

/* ---- Properties ---- */

int nv_array_ndim(const nv_array *x) { return x ? nv__out(x)->ndim : 0; }
const int *nv_array_shape(const nv_array *x) {
  return x && nv__out(x)->ndim ? nv__out(x)->shape : NULL;
}
int nv_array_dim(const nv_array *x, int axis) {
  if (!x) return 0;
  const nv__output *o = nv__out(x);
  if (axis < 0) axis += o->ndim;
  return axis >= 0 && axis < o->ndim ? o->shape[axis] : 0;
}
const int64_t *nv_array_strides(const nv_array *x) {
  return x && nv__out(x)->ndim ? nv__out(x)->strides : NULL;
}
int64_t nv_array_size(const nv_array *x) { return x ? nv__out(x)->size : 0; }
nv_dtype nv_array_dtype(const nv_array *x) { return x ? nv__out(x)->dtype : NV_DTYPE_COUNT; }
size_t nv_array_itemsize(const nv_array *x) { return x ? nv_dtype_size(nv__out(x)->dtype) : 0; }
size_t nv_array_nbytes(const nv_array *x) {
  return x ? (size_t)nv__out(x)->size * nv_dtype_size(nv__out(x)->dtype) : 0;
}
nv_stream nv_array_stream(const nv_array *x) {
  return x ? x->node->stream : nv_default_stream(nv_cpu());
}
bool nv_array_is_row_contiguous(const nv_array *x) {
  return x && (nv__out(x)->flags & NV__FLAG_ROW);
}
bool nv_array_is_col_contiguous(const nv_array *x) {
  return x && (nv__out(x)->flags & NV__FLAG_COL);
}
bool nv_array_is_evaluated(const nv_array *x) {
  if (!x) return false;
  int s = atomic_load_explicit(&x->node->state, memory_order_acquire);
  return s == NV__DONE || s == NV__FAILED || s == NV__RETAINED;
}

nv_status nv_array_buffer_info(const nv_array *x, const void **id, size_t *nbytes) {
  if (!x || !id || !nbytes)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "array_buffer_info: NULL argument");
  int s = atomic_load_explicit(&x->node->state, memory_order_acquire);
  if (s == NV__FAILED) return nv_array_status(x);
  if (s != NV__DONE && s != NV__RETAINED)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "array_buffer_info: the array is not evaluated");
  const nv__output *o = nv__out(x);
  *id = o->size ? o->buf : NULL;
  *nbytes = o->size && o->buf ? o->buf->nbytes : 0;
  return NV_OK;
}

nv_status nv_array_status(const nv_array *x) {
  if (!x) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "array_status: NULL array");
  nv__error *e = nv__node_known_error(x->node);
  return e ? nv__set_error_obj(e) : NV_OK;
}

const char *nv_array_error(const nv_array *x) {
  if (!x) return "NULL array";
  nv__error *e = nv__node_known_error(x->node);
  return e ? e->msg : "";
}

/* ---- Creation from host data ---- */

static nv_status check_shape(const char *op, const int *shape, int ndim, nv_dtype dtype,
                             int64_t *size) {
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: invalid dtype %d", op, (int)dtype);
  if (ndim < 0 || ndim > NV__MAX_DIMS || (ndim > 0 && !shape))
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: invalid number of dimensions %d", op,
                         ndim);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: negative dimension %d in axis %d", op,
                           shape[i], i);
    if (shape[i] && n > INT64_MAX / 16 / shape[i])
      return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: shape is too large", op);
    n *= shape[i];
  }
  *size = n;
  return NV_OK;
}

nv_array *nv_array_from_data(const void *data, const int *shape, int ndim, nv_dtype dtype) {
  int64_t size;
  if (check_shape("array", shape, ndim, dtype, &size) != NV_OK)
    return nv__array_error(NV_ERR_INVALID_ARGUMENT, "%s", nv_last_error());
  size_t nbytes = (size_t)size * nv_dtype_size(dtype);
  if (!data && nbytes)
    return nv__array_error(NV_ERR_INVALID_ARGUMENT, "array: NULL data for %lld elements",
                           (long long)size);
  nv__buffer *b = nv__buffer_alloc(nbytes);
  if (!b) return nv__array_error(NV_ERR_OUT_OF_MEMORY, "array: %s", nv_last_error());
  if (nbytes) memcpy(b->ptr, data, nbytes);
  nv_array *a = nv__array_from_buffer(b, 0, dtype, shape, ndim, NULL);
  nv__buffer_release(b);
  return a;
}

nv_array *nv_array_from_data_nocopy(void *data, const int *shape, int ndim, nv_dtype dtype,
                                    void (*destroy)(void *), void *ctx) {
  int64_t size;
  if (check_shape("array", shape, ndim, dtype, &size) != NV_OK ||
      (!data && size))
    return nv__array_error(NV_ERR_INVALID_ARGUMENT, "%s",
                           data || !size ? nv_last_error() : "array: NULL data");
  nv__buffer *b = nv__buffer_wrap(data, (size_t)size * nv_dtype_size(dtype), NV__BUF_NOCOPY,
                                  destroy, ctx);
  if (!b) return nv__array_error(NV_ERR_OUT_OF_MEMORY, "array: %s", nv_last_error());
  nv_array *a = nv__array_from_buffer(b, 0, dtype, shape, ndim, NULL);
  nv__buffer_release(b);
  return a;
}

/* Writes `v` converted to `dtype` at `dst`. */
static void store_double(void *dst, nv_dtype dtype, double v) {
  switch (dtype) {
    case NV_DTYPE_BOOL: *(uint8_t *)dst = v != 0; break;
    case NV_DTYPE_UINT8: *(uint8_t *)dst = nv__f2u8(v); break;
    case NV_DTYPE_UINT16: *(uint16_t *)dst = nv__f2u16(v); break;
    case NV_DTYPE_UINT32: *(uint32_t *)dst = nv__f2u32(v); break;
    case NV_DTYPE_UINT64: *(uint64_t *)dst = nv__f2u64(v); break;
    case NV_DTYPE_INT8: *(int8_t *)dst = nv__f2i8(v); break;
    case NV_DTYPE_INT16: *(int16_t *)dst = nv__f2i16(v); break;
    case NV_DTYPE_INT32: *(int32_t *)dst = nv__f2i32(v); break;
    case NV_DTYPE_INT64: *(int64_t *)dst = nv__f2i64(v); break;
    case NV_DTYPE_FLOAT16: *(uint16_t *)dst = nv__f64_to_f16(v); break;
    case NV_DTYPE_BFLOAT16: *(uint16_t *)dst = nv__f64_to_bf16(v); break;
    case NV_DTYPE_FLOAT32: *(float *)dst = (float)v; break;
    case NV_DTYPE_FLOAT64: *(double *)dst = v; break;
    case NV_DTYPE_COMPLEX64: ((float *)dst)[0] = (float)v; ((float *)dst)[1] = 0; break;
    default: break;
  }
}

nv_array *nv_array_scalar(double value, nv_dtype dtype) {
  if ((unsigned)dtype >= NV_DTYPE_COUNT)
    return nv__array_error(NV_ERR_INVALID_ARGUMENT, "array: invalid dtype %d", (int)dtype);
  unsigned char tmp[16];
  store_double(tmp, dtype, value);
  return nv_array_from_data(tmp, NULL, 0, dtype);
}

nv_array *nv_array_bool(bool v) {
  uint8_t b = v;
  return nv_array_from_data(&b, NULL, 0, NV_DTYPE_BOOL);
}
nv_array *nv_array_int(int32_t v) { return nv_array_from_data(&v, NULL, 0, NV_DTYPE_INT32); }
nv_array *nv_array_float(float v) { return nv_array_from_data(&v, NULL, 0, NV_DTYPE_FLOAT32); }
nv_array *nv_array_int64(int64_t v) { return nv_array_from_data(&v, NULL, 0, NV_DTYPE_INT64); }
nv_array *nv_array_uint64(uint64_t v) {
  return nv_array_from_data(&v, NULL, 0, NV_DTYPE_UINT64);
}
nv_array *nv_array_complex(float re, float im) {
  float v[2] = {re, im};
  return nv_array_from_data(v, NULL, 0, NV_DTYPE_COMPLEX64);
}

/* ---- Reading back ---- */

nv_status nv_array_read(nv_array *x, void *dst, size_t nbytes) {
  if (!x) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "array_read: NULL array");
  nv_status s = nv_eval1(x);
  if (s != NV_OK) return s;
  const nv__output *o = nv__out(x);
  size_t need = (size_t)o->size * nv_dtype_size(o->dtype);
  if (nbytes != need) {
    char sb[NV__SHAPE_BUF];
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "array_read: the buffer holds %zu bytes but the %s array of shape %s "
                         "needs %zu",
                         nbytes, nv_dtype_name(o->dtype), nv__shape_str(o->shape, o->ndim, sb, sizeof sb),
                         need);
  }
  if (!need) return NV_OK;
  if (!dst) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "array_read: NULL destination");
  if ((s = nv__buffer_host(o->buf)) != NV_OK) return s;
  nv__copy_strided(dst, nv__output_ptr(o), o->shape, o->strides, o->ndim,
                   nv_dtype_size(o->dtype));
  return NV_OK;
}

static nv_status item_ptr(nv_array *x, const char *what, const void **p, nv_dtype *dt) {
  if (!x) return nv__set_error(NV_ERR_INVALID_ARGUMENT, "%s: NULL array", what);
  nv_status s = nv_eval1(x);
  if (s != NV_OK) return s;
  const nv__output *o = nv__out(x);
  if (o->size != 1) {
    char sb[NV__SHAPE_BUF];
    return nv__set_error(NV_ERR_INVALID_ARGUMENT,
                         "%s: item needs exactly one element, the array has shape %s", what,
                         nv__shape_str(o->shape, o->ndim, sb, sizeof sb));
  }
  if ((s = nv__buffer_host(o->buf)) != NV_OK) return s;
  *p = nv__output_ptr(o);
  *dt = o->dtype;
  return NV_OK;
}

/* An element as a double (integers above 2^53 round). */
static double load_double(const void *p, nv_dtype dt) {
  switch (dt) {
    case NV_DTYPE_BOOL: return *(const uint8_t *)p != 0;
    case NV_DTYPE_UINT8: return *(const uint8_t *)p;
    case NV_DTYPE_UINT16: return *(const uint16_t *)p;
    case NV_DTYPE_UINT32: return *(const uint32_t *)p;
    case NV_DTYPE_UINT64: return (double)*(const uint64_t *)p;
    case NV_DTYPE_INT8: return *(const int8_t *)p;
    case NV_DTYPE_INT16: return *(const int16_t *)p;
    case NV_DTYPE_INT32: return *(const int32_t *)p;
    case NV_DTYPE_INT64: return (double)*(const int64_t *)p;
    case NV_DTYPE_FLOAT16: return nv__f16_to_f32(*(const uint16_t *)p);
    case NV_DTYPE_BFLOAT16: return nv__bf16_to_f32(*(const uint16_t *)p);
    case NV_DTYPE_FLOAT32: return *(const float *)p;
    case NV_DTYPE_FLOAT64: return *(const double *)p;
    case NV_DTYPE_COMPLEX64: return ((const float *)p)[0];
    default: return 0;
  }
}

nv_status nv_array_item_double(nv_array *x, double *out) {
  const void *p = NULL;
  nv_dtype dt = NV_DTYPE_FLOAT32;
  nv_status s = item_ptr(x, "item", &p, &dt);
  if (s == NV_OK) *out = load_double(p, dt);
  return s;
}

nv_status nv_array_item_float(nv_array *x, float *out) {
  double d;
  nv_status s = nv_array_item_double(x, &d);
  if (s == NV_OK) *out = (float)d;
  return s;
}

nv_status nv_array_item_int64(nv_array *x, int64_t *out) {
  const void *p = NULL;
  nv_dtype dt = NV_DTYPE_FLOAT32;
  nv_status s = item_ptr(x, "item", &p, &dt);
  if (s != NV_OK) return s;
  if (dt == NV_DTYPE_INT64) *out = *(const int64_t *)p;
  else if (dt == NV_DTYPE_UINT64) *out = (int64_t) * (const uint64_t *)p;
  else if (nv_issubdtype(dt, NV_CATEGORY_INTEGER) || dt == NV_DTYPE_BOOL)
    *out = (int64_t)load_double(p, dt);
  else *out = nv__f2i64(load_double(p, dt));
  return NV_OK;
}

nv_status nv_array_item_uint64(nv_array *x, uint64_t *out) {
  const void *p = NULL;
  nv_dtype dt = NV_DTYPE_FLOAT32;
  nv_status s = item_ptr(x, "item", &p, &dt);
  if (s != NV_OK) return s;
  if (dt == NV_DTYPE_UINT64) *out = *(const uint64_t *)p;
  else if (dt == NV_DTYPE_INT64) *out = (uint64_t) * (const int64_t *)p;
  else if (nv_issubdtype(dt, NV_CATEGORY_INTEGER) || dt == NV_DTYPE_BOOL)
    *out = (uint64_t)(int64_t)load_double(p, dt);
  else *out = nv__f2u64(load_double(p, dt));
  return NV_OK;
}

nv_status nv_array_item_bool(nv_array *x, bool *out) {
  const void *p = NULL;
  nv_dtype dt = NV_DTYPE_FLOAT32;
  nv_status s = item_ptr(x, "item", &p, &dt);
  if (s != NV_OK) return s;
  if (dt == NV_DTYPE_COMPLEX64)
    *out = ((const float *)p)[0] != 0 || ((const float *)p)[1] != 0;
  else if (dt == NV_DTYPE_INT64 || dt == NV_DTYPE_UINT64) *out = *(const uint64_t *)p != 0;
  else *out = load_double(p, dt) != 0 || isnan(load_double(p, dt));
  return NV_OK;
}

nv_status nv_array_item_complex(nv_array *x, nv_complex64 *out) {
  const void *p = NULL;
  nv_dtype dt = NV_DTYPE_FLOAT32;
  nv_status s = item_ptr(x, "item", &p, &dt);
  if (s != NV_OK) return s;
  if (dt == NV_DTYPE_COMPLEX64) memcpy(out, p, sizeof *out);
  else {
    out->re = (float)load_double(p, dt);
    out->im = 0;
  }
  return NV_OK;
}

const void *nv_array_data(nv_array *x) {
  if (!x) {
    nv__set_error(NV_ERR_INVALID_ARGUMENT, "array_data: NULL array");
    return NULL;
  }
  if (nv_eval1(x) != NV_OK) return NULL;
  const nv__output *o = nv__out(x);
  if (!o->size) return NULL;
  if (nv__buffer_host(o->buf) != NV_OK) return NULL;
  return nv__output_ptr(o);
}

/* ---- Test hooks ---- */
int nv__test_state(const nv_array *x) { return atomic_load(&x->node->state); }
long nv__test_node_refs(const nv_array *x) { return atomic_load(&x->node->refs); }

nv_status nv_array_device_data(nv_array *x, nv_device *device, const void **data) {
  if (!x || !device || !data)
    return nv__set_error(NV_ERR_INVALID_ARGUMENT, "array_device_data: NULL argument");
  nv_status s = nv_eval1(x);
  if (s != NV_OK) return s;
  const nv__output *o = nv__out(x);
  nv__buffer *b = o->buf;
  if (b && atomic_load_explicit(&b->dev, memory_order_acquire)) {
    int dev = 0;
    uint64_t addr = 0;
    s = atomic_load(&nv__gpu_hooks_ptr)->device_ptr(b, &dev, &addr);
    if (s == NV_OK) {
      *device = nv_gpu(dev);
      *data = (const void *)(uintptr_t)(addr + (uint64_t)o->offset * nv_dtype_size(o->dtype));
      return NV_OK;
    }
    if (s != NV_ERR_UNSUPPORTED) return s;
  }
  if ((s = nv__buffer_host(b)) != NV_OK) return s;
  *device = nv_cpu();
  *data = o->size ? nv__output_ptr(o) : NULL;
  return NV_OK;
}
