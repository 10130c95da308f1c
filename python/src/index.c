/* nuvec's CPython extension: indexing as MLX's (and NumPy's) — ints, slices with any step,
 * None, Ellipsis and integer arrays (gathered; several broadcast together, their axes placed
 * where NumPy places them); item assignment (slice_update, scatter, masked_scatter for a bool
 * mask) that gives the Python object its new array, as MLX; and x.at[idx].add/subtract/
 * multiply/divide/maximum/minimum(v). Python ints are checked against the axis at once
 * (IndexError); array indices are checked when the gather runs. */
#include <string.h>

#include "nvpy.h"

enum { E_SLICE, E_NONE, E_ADV };

/* One entry of a normalized key. ints become E_SLICE of length 1 marked `squeeze` unless the
 * key has array indices, where they become 0-d index arrays as NumPy treats them. */
typedef struct {
  int kind;
  int start, stop, step, len; /* E_SLICE, resolved against the axis */
  bool squeeze;               /* from an int */
  nv_array *idx;              /* E_ADV */
  int axis;                   /* source axis (E_SLICE, E_ADV) */
} entry;

typedef struct {
  entry e[NVPY_MAXDIM * 2];
  int n;
  int nd; /* source dimensions */
  bool has_adv, bool_mask;
} key_t_;

static void key_free(key_t_ *k) {
  for (int i = 0; i < k->n; i++) nv_release(k->e[i].idx);
}

static int index_error(const char *msg) {
  PyErr_SetString(PyExc_ValueError, msg);
  return -1;
}

static bool is_index_array_like(PyObject *o) {
  return NVPY_IS_ARRAY(o) || PyList_Check(o) || PyObject_CheckBuffer(o) ||
         PyObject_HasAttrString(o, "__array__");
}

/* Resolves `key` against an array of shape `shape`. */
static int parse_key(PyObject *key, const int *shape, int nd, key_t_ *k) {
  PyObject *t = PyTuple_Check(key) ? (Py_INCREF(key), key) : PyTuple_Pack(1, key);
  if (!t) return -1;
  Py_ssize_t n = PyTuple_GET_SIZE(t);
  int consuming = 0, ellipses = 0;
  memset(k, 0, sizeof *k);
  k->nd = nd;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = PyTuple_GET_ITEM(t, i);
    if (o == Py_Ellipsis) ellipses++;
    else if (o != Py_None) consuming++;
    if (!PyBool_Check(o) && (NVPY_IS_ARRAY(o) || PyList_Check(o) || (!PyLong_Check(o) && !PySlice_Check(o) && o != Py_None && o != Py_Ellipsis && is_index_array_like(o))))
      k->has_adv = true;
  }
  int rc = -1;
  if (ellipses > 1) {
    index_error("An index can only have a single ellipsis (\"...\")");
    goto out;
  }
  if (consuming > nd || n > NVPY_MAXDIM) {
    PyErr_Format(PyExc_ValueError, "Too many indices for array with %d dimensions.", nd);
    goto out;
  }
  int axis = 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *o = PyTuple_GET_ITEM(t, i);
    entry *e = &k->e[k->n];
    if (o == Py_Ellipsis) {
      for (int j = 0; j < nd - consuming; j++, axis++) {
        e = &k->e[k->n++];
        *e = (entry){E_SLICE, 0, shape[axis], 1, shape[axis], false, NULL, axis};
      }
      continue;
    }
    if (o == Py_None) {
      *e = (entry){.kind = E_NONE, .axis = -1};
      k->n++;
      continue;
    }
    if (PySlice_Check(o)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(o, &start, &stop, &step) < 0) goto out;
      Py_ssize_t len = PySlice_AdjustIndices(shape[axis], &start, &stop, step);
      /* A step longer than the axis takes the start element alone, as a step of the axis'
       * length does: the same slice, with a step that fits nv_slice's int. */
      Py_ssize_t longest = shape[axis] > 0 ? shape[axis] : 1;
      if (step > longest) step = longest;
      else if (step < -longest) step = -longest;
      *e = (entry){E_SLICE, (int)start, (int)stop, (int)step, (int)len, false, NULL, axis++};
      k->n++;
      continue;
    }
    if (PyLong_Check(o) && !PyBool_Check(o)) {
      int overflow;
      long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
      long long dim = shape[axis];
      if (overflow || v < -dim || v >= dim) {
        PyErr_Format(PyExc_IndexError, "index %R is out of bounds for axis %d with size %lld", o,
                     axis, dim);
        goto out;
      }
      if (v < 0) v += dim;
      if (k->has_adv) {
        *e = (entry){.kind = E_ADV, .idx = nv_array_int((int32_t)v), .axis = axis++};
      } else {
        *e = (entry){E_SLICE, (int)v, (int)v + 1, 1, 1, true, NULL, axis++};
      }
      k->n++;
      continue;
    }
    if (!PyBool_Check(o) && is_index_array_like(o)) {
      nv_array *x = nvpy_to_array(o, -1);
      if (!x) goto out;
      nv_dtype dt = nv_array_dtype(x);
      if (dt == NV_DTYPE_BOOL) {
        k->bool_mask = true;
      } else if (!nv_issubdtype(dt, NV_CATEGORY_INTEGER)) {
        nv_release(x);
        index_error("Cannot index mlx array using the given type.");
        goto out;
      }
      *e = (entry){.kind = E_ADV, .idx = x, .axis = axis++};
      k->n++;
      continue;
    }
    index_error("Cannot index mlx array using the given type.");
    goto out;
  }
  /* Axes the key does not name are taken whole. */
  for (; axis < nd; axis++) k->e[k->n++] = (entry){E_SLICE, 0, shape[axis], 1, shape[axis], false, NULL, axis};
  rc = 0;
out:
  Py_DECREF(t);
  if (rc < 0) key_free(k);
  return rc;
}

/* The slice of every source axis (whole for advanced ones) as nv_slice wants it. A reversed
 * slice that reaches the first element has stop -1 after AdjustIndices; it is written as
 * -(n+1), which NumPy's clamping turns into "before the first element". */
static void region(const key_t_ *k, const int *shape, int *start, int *stop, int *step) {
  for (int d = 0; d < k->nd; d++) start[d] = 0, stop[d] = shape[d], step[d] = 1;
  for (int i = 0; i < k->n; i++) {
    const entry *e = &k->e[i];
    if (e->kind != E_SLICE) continue;
    start[e->axis] = e->start;
    stop[e->axis] = e->stop < 0 ? -shape[e->axis] - 1 : e->stop;
    step[e->axis] = e->step;
  }
}

static bool is_whole(const key_t_ *k, const int *shape) {
  for (int i = 0; i < k->n; i++) {
    const entry *e = &k->e[i];
    if (e->kind == E_SLICE && (e->start != 0 || e->step != 1 || e->len != shape[e->axis]))
      return false;
  }
  return true;
}

/* Whether the advanced entries are adjacent (then their axes stay in place, as NumPy). */
static bool adv_adjacent(const key_t_ *k, int *first) {
  int lo = -1, hi = -1, count = 0;
  for (int i = 0; i < k->n; i++)
    if (k->e[i].kind == E_ADV) {
      if (lo < 0) lo = i;
      hi = i;
      count++;
    }
  *first = lo;
  return hi - lo + 1 == count;
}

/* Gathers the advanced entries of `src` (already sliced): the result has the broadcast index
 * shape where NumPy puts it and the other axes in order, without the key's None axes. */
static nv_array *gather_adv(const key_t_ *k, nv_array *src, int *ni_out) {
  *ni_out = 0;
  /* A failed slice has no shape to read: its error is the result's. */
  if (nv_array_status(src) != NV_OK) return nv_retain(src);
  nv_array *idx[NVPY_MAXDIM];
  int axes[NVPY_MAXDIM], sizes[NVPY_MAXDIM], nidx = 0, nd = k->nd;
  const int *shape = nv_array_shape(src);
  for (int d = 0; d < nd; d++) sizes[d] = shape[d];
  for (int i = 0; i < k->n; i++)
    if (k->e[i].kind == E_ADV) {
      idx[nidx] = k->e[i].idx;
      axes[nidx++] = k->e[i].axis;
      sizes[k->e[i].axis] = 1;
    }
  nv_array *g = nv_gather(src, (const nv_array *const *)idx, nidx, axes, sizes, nd);
  if (nv_array_status(g) != NV_OK) return g;
  int gnd = nv_array_ndim(g), ni = gnd - nd;
  *ni_out = ni;
  /* Drop the gathered axes' size-1 slice dimensions. */
  int sq[NVPY_MAXDIM];
  for (int j = 0; j < nidx; j++) sq[j] = ni + axes[j];
  nv_array *r = nv_squeeze(g, sq, nidx);
  nv_release(g);
  int first;
  if (!adv_adjacent(k, &first) || ni == 0) return r;
  /* Adjacent: move the index block to where the first advanced axis was. */
  int before = 0;
  for (int i = 0; i < first; i++)
    if (k->e[i].kind == E_SLICE) before++;
  if (before == 0) return r;
  int rnd = nv_array_ndim(r), perm[NVPY_MAXDIM * 2], p = 0;
  for (int j = 0; j < before; j++) perm[p++] = ni + j;
  for (int j = 0; j < ni; j++) perm[p++] = j;
  for (int j = ni + before; j < rnd; j++) perm[p++] = j;
  nv_array *t = nv_transpose(r, perm, rnd);
  nv_release(r);
  return t;
}

/* Positions of the key's None axes in the result. */
static int none_positions(const key_t_ *k, int ni, int *pos) {
  int first, count = 0;
  bool adjacent = !k->has_adv || adv_adjacent(k, &first);
  int p = adjacent ? 0 : ni;
  bool seen_adv = false;
  for (int i = 0; i < k->n; i++) {
    const entry *e = &k->e[i];
    if (e->kind == E_NONE) pos[count++] = p++;
    else if (e->kind == E_SLICE && !e->squeeze) p++;
    else if (e->kind == E_ADV && adjacent && !seen_adv) {
      p += ni;
      seen_adv = true;
    }
  }
  return count;
}

/* x[key] without the None axes: the sliced source, gathered if the key has arrays. */
static nv_array *index_core(const key_t_ *k, nv_array *x, int *ni) {
  const int *shape = nv_array_shape(x);
  int start[NVPY_MAXDIM], stop[NVPY_MAXDIM], step[NVPY_MAXDIM];
  region(k, shape, start, stop, step);
  nv_array *s = is_whole(k, shape) ? nv_retain(x) : nv_slice(x, start, stop, step, k->nd);
  *ni = 0;
  if (!k->has_adv) {
    int out[NVPY_MAXDIM], n = 0;
    for (int i = 0; i < k->n; i++)
      if (k->e[i].kind == E_SLICE && !k->e[i].squeeze) out[n++] = k->e[i].len;
    if (n == k->nd) return s;
    nv_array *r = nv_reshape(s, out, n);
    nv_release(s);
    return r;
  }
  nv_array *g = gather_adv(k, s, ni);
  nv_release(s);
  return g;
}

PyObject *nvpy_getitem(PyObject *self, PyObject *key) {
  nv_array *x = NVPY_A(self);
  key_t_ k;
  if (parse_key(key, nv_array_shape(x), nv_array_ndim(x), &k) < 0) return NULL;
  if (k.bool_mask) {
    key_free(&k);
    return nvpy_raise_status(NV_ERR_INVALID_ARGUMENT, "boolean indices are not yet supported");
  }
  int ni;
  nv_array *r = index_core(&k, x, &ni);
  int pos[NVPY_MAXDIM * 2];
  int nn = none_positions(&k, ni, pos);
  if (nn > 0 && nv_array_status(r) == NV_OK) {
    nv_array *e = nv_expand_dims(r, pos, nn);
    nv_release(r);
    r = e;
  }
  key_free(&k);
  return nvpy_wrap(r);
}

/* ---- Updates ---- */

enum { UPD_SET, UPD_ADD, UPD_PROD, UPD_MAX, UPD_MIN };

typedef nv_array *(*scatter_fn)(const nv_array *, const nv_array *const *, int, const nv_array *,
                                const int *);
typedef nv_array *(*slice_upd_fn)(const nv_array *, const nv_array *, const int *, const int *,
                                  const int *, int);

/* The array x[key] `mode`= v, following MLX's rules: v is cast to x's dtype and broadcast to
 * the shape x[key] has. */
static nv_array *update(nv_array *x, PyObject *key, nv_array *v, int mode) {
  static const scatter_fn scatters[] = {nv_scatter, nv_scatter_add, nv_scatter_prod,
                                        nv_scatter_max, nv_scatter_min};
  static const slice_upd_fn slices[] = {nv_slice_update, nv_slice_update_add,
                                        nv_slice_update_prod, nv_slice_update_max,
                                        nv_slice_update_min};
  key_t_ k;
  int nd = nv_array_ndim(x);
  const int *shape = nv_array_shape(x);
  if (parse_key(key, shape, nd, &k) < 0) return NULL;
  nv_array *vc = nv_astype(v, nv_array_dtype(x)), *r = NULL;
  if (k.bool_mask) {
    /* Only x[mask] = v, the mask alone, is MLX's masked assignment. */
    bool ok = mode == UPD_SET && k.e[0].kind == E_ADV &&
              nv_array_dtype(k.e[0].idx) == NV_DTYPE_BOOL;
    for (int i = 1; i < k.n; i++)
      ok = ok && k.e[i].kind == E_SLICE && k.e[i].start == 0 && k.e[i].step == 1 &&
           k.e[i].len == shape[k.e[i].axis];
    if (!ok) {
      key_free(&k);
      nv_release(vc);
      nvpy_raise_status(NV_ERR_INVALID_ARGUMENT,
                        "boolean indices are only supported as x[mask] = v");
      return NULL;
    }
    r = nv_masked_scatter(x, k.e[0].idx, vc);
    key_free(&k);
    nv_release(vc);
    return r;
  }
  /* The shape x[key] has, with the Nones: v broadcasts to it, then loses the Nones. */
  int ni;
  nv_array *probe = index_core(&k, x, &ni);
  if (nv_array_status(probe) != NV_OK) {
    key_free(&k);
    nv_release(vc);
    return probe;
  }
  int pos[NVPY_MAXDIM * 2], nn = none_positions(&k, ni, pos);
  int pnd = nv_array_ndim(probe), full[NVPY_MAXDIM * 2];
  const int *psh = nv_array_shape(probe);
  for (int i = 0, j = 0, q = 0; i < pnd + nn; i++) full[i] = (q < nn && pos[q] == i) ? (q++, 1) : psh[j++];
  /* As MLX, v may have more dimensions than x[key] when the extra leading ones have length 1
   * (a[...] = array([5]) on a 0-d a): they are dropped before broadcasting. */
  int vnd = nv_array_status(vc) == NV_OK ? nv_array_ndim(vc) : 0, drop = 0;
  while (vnd - drop > pnd + nn && nv_array_shape(vc)[drop] == 1) drop++;
  if (drop > 0) {
    nv_array *vs = nv_reshape(vc, nv_array_shape(vc) + drop, vnd - drop);
    nv_release(vc);
    vc = vs;
  }
  nv_array *vb = nv_broadcast_to(vc, full, pnd + nn);
  nv_release(vc);
  nv_array *vu = nv_reshape(vb, psh, pnd);
  nv_release(vb);
  int start[NVPY_MAXDIM], stop[NVPY_MAXDIM], step[NVPY_MAXDIM];
  region(&k, shape, start, stop, step);
  if (!k.has_adv) {
    /* The region keeps the int axes with size 1. */
    int reg[NVPY_MAXDIM];
    for (int i = 0; i < k.n; i++)
      if (k.e[i].kind == E_SLICE) reg[k.e[i].axis] = k.e[i].len;
    nv_array *vr = nv_reshape(vu, reg, nd);
    r = slices[mode](x, vr, start, stop, step, nd);
    nv_release(vr);
  } else {
    /* Scatter into the sliced region, then write the region back. Updates have the index
     * shape followed by the region's shape with 1 on the indexed axes. */
    nv_array *reg = nv_slice(x, start, stop, step, nd);
    int first, before = 0;
    bool adjacent = adv_adjacent(&k, &first);
    for (int i = 0; adjacent && i < first; i++)
      if (k.e[i].kind == E_SLICE) before++;
    nv_array *vt = nv_retain(vu);
    if (adjacent && before > 0 && ni > 0) {
      int perm[NVPY_MAXDIM * 2], p = 0, vnd = nv_array_ndim(vu);
      for (int j = 0; j < ni; j++) perm[p++] = before + j;
      for (int j = 0; j < before; j++) perm[p++] = j;
      for (int j = before + ni; j < vnd; j++) perm[p++] = j;
      nv_release(vt);
      vt = nv_transpose(vu, perm, vnd);
    }
    nv_array *idx[NVPY_MAXDIM];
    int axes[NVPY_MAXDIM], nidx = 0, ex[NVPY_MAXDIM];
    for (int i = 0; i < k.n; i++)
      if (k.e[i].kind == E_ADV) {
        idx[nidx] = k.e[i].idx;
        axes[nidx] = k.e[i].axis;
        ex[nidx] = ni + k.e[i].axis;
        nidx++;
      }
    nv_array *upd = nv_expand_dims(vt, ex, nidx);
    nv_release(vt);
    nv_array *sc = scatters[mode](reg, (const nv_array *const *)idx, nidx, upd, axes);
    nv_release(upd);
    nv_release(reg);
    if (is_whole(&k, shape)) r = sc;
    else {
      r = nv_slice_update(x, sc, start, stop, step, nd);
      nv_release(sc);
    }
  }
  nv_release(vu);
  nv_release(probe);
  key_free(&k);
  return r;
}

int nvpy_setitem(PyObject *self, PyObject *key, PyObject *value) {
  if (!value) {
    PyErr_SetString(PyExc_TypeError, "nuvec arrays do not support item deletion");
    return -1;
  }
  nv_array *v = nvpy_operand(value, self);
  if (!v) return -1;
  nv_array *r = update(NVPY_A(self), key, v, UPD_SET);
  nv_release(v);
  if (!r) return -1;
  nv_status st = nv_array_status(r);
  if (st != NV_OK) {
    nvpy_raise_status(st, nv_array_error(r));
    nv_release(r);
    return -1;
  }
  nv_array *old = NVPY_A(self);
  /* Held by the object, as nvpy_wrap's arrays: a scope (a transform's trace) must not release
   * it when it ends. */
  NVPY_A(self) = nvpy_unscope(r);
  nv_release(old);
  return 0;
}

/* ---- x.at[idx] ---- */

typedef struct {
  PyObject_HEAD PyObject *array;
  PyObject *key; /* NULL for x.at itself */
} at_object;

static void at_dealloc(PyObject *self) {
  at_object *o = (at_object *)self;
  Py_XDECREF(o->array);
  Py_XDECREF(o->key);
  PyObject_Free(self);
}

PyObject *nvpy_at_new(PyObject *self) {
  at_object *o = PyObject_New(at_object, &nvpy_at_type);
  if (!o) return NULL;
  Py_INCREF(self);
  o->array = self;
  o->key = NULL;
  return (PyObject *)o;
}

static PyObject *at_getitem(PyObject *self, PyObject *key) {
  at_object *o = PyObject_New(at_object, &nvpy_at_index_type);
  if (!o) return NULL;
  o->array = ((at_object *)self)->array;
  Py_INCREF(o->array);
  o->key = key;
  Py_INCREF(key);
  return (PyObject *)o;
}

static PyObject *at_apply(PyObject *self, PyObject *value, int mode, int pre) {
  at_object *o = (at_object *)self;
  nv_array *v = nvpy_operand(value, o->array);
  if (!v) return NULL;
  if (pre == 1) { /* subtract: add the negation */
    nv_array *n = nv_negative(v);
    nv_release(v);
    v = n;
  } else if (pre == 2) { /* divide: multiply by the reciprocal, as MLX */
    nv_array *n = nv_reciprocal(v);
    nv_release(v);
    v = n;
  }
  nv_array *r = update(NVPY_A(o->array), o->key, v, mode);
  nv_release(v);
  return r ? nvpy_wrap(r) : NULL;
}

static PyObject *at_add(PyObject *s, PyObject *v) { return at_apply(s, v, UPD_ADD, 0); }
static PyObject *at_subtract(PyObject *s, PyObject *v) { return at_apply(s, v, UPD_ADD, 1); }
static PyObject *at_multiply(PyObject *s, PyObject *v) { return at_apply(s, v, UPD_PROD, 0); }
static PyObject *at_divide(PyObject *s, PyObject *v) { return at_apply(s, v, UPD_PROD, 2); }
static PyObject *at_maximum(PyObject *s, PyObject *v) { return at_apply(s, v, UPD_MAX, 0); }
static PyObject *at_minimum(PyObject *s, PyObject *v) { return at_apply(s, v, UPD_MIN, 0); }

static PyMethodDef at_index_methods[] = {
    {"add", at_add, METH_O, "x with v added at the index (duplicates accumulate)."},
    {"subtract", at_subtract, METH_O, "x with v subtracted at the index."},
    {"multiply", at_multiply, METH_O, "x multiplied by v at the index."},
    {"divide", at_divide, METH_O, "x divided by v at the index."},
    {"maximum", at_maximum, METH_O, "The maximum of x and v at the index."},
    {"minimum", at_minimum, METH_O, "The minimum of x and v at the index."},
    {NULL, NULL, 0, NULL}};

static PyMappingMethods at_as_mapping = {NULL, at_getitem, NULL};

PyTypeObject nvpy_at_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.ArrayAt",
    .tp_basicsize = sizeof(at_object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = at_dealloc,
    .tp_as_mapping = &at_as_mapping,
};

PyTypeObject nvpy_at_index_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "nuvec.ArrayAtIndex",
    .tp_basicsize = sizeof(at_object),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = at_dealloc,
    .tp_methods = at_index_methods,
};

int nvpy_init_index(PyObject *m) {
  (void)m;
  return PyType_Ready(&nvpy_at_type) < 0 || PyType_Ready(&nvpy_at_index_type) < 0 ? -1 : 0;
}
