/* nuvec's CPython extension: the objects and helpers its files share.
 *
 * The module is written against the CPython C API. Every Python array object owns one
 * reference to an nv_array; op builders are called outside any nuvec scope, so each result is
 * a new reference that the wrapping object takes over. Errors the library reports become
 * Python exceptions carrying the library's message (nvpy_raise_status). */
#ifndef NVPY_H
#define NVPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "nuvec.h"

/* The most dimensions a shape or axis list parsed from Python may have. */
#define NVPY_MAXDIM 64

/* ---- Objects ---- */

typedef struct {
  PyObject_HEAD nv_array *a;
  PyObject *weakrefs;
} nvpy_array;

typedef struct {
  PyObject_HEAD nv_dtype dt;
} nvpy_dtype;

/* An enum value (DtypeCategory.floating, DeviceType.cpu): its type's name, its name, value. */
typedef struct {
  PyObject_HEAD const char *name;
  int value;
} nvpy_enum;

typedef struct {
  PyObject_HEAD nv_device d;
} nvpy_device;

typedef struct {
  PyObject_HEAD nv_stream s;
} nvpy_stream;

extern PyTypeObject nvpy_array_type;
extern PyTypeObject nvpy_dtype_type;
extern PyTypeObject nvpy_category_type;
extern PyTypeObject nvpy_devtype_type;
extern PyTypeObject nvpy_device_type;
extern PyTypeObject nvpy_stream_type;
extern PyTypeObject nvpy_op_type;
extern PyTypeObject nvpy_at_type;
extern PyTypeObject nvpy_at_index_type;
extern PyTypeObject nvpy_function_type;

/* The dtype singletons, by nv_dtype. */
extern PyObject *nvpy_dtypes[NV_DTYPE_COUNT];

#define NVPY_IS_ARRAY(o) PyObject_TypeCheck((o), &nvpy_array_type)
#define NVPY_A(o) (((nvpy_array *)(o))->a)

/* ---- Errors (module.c) ---- */

/* Raises the Python exception for `status` with `msg` (ValueError for invalid arguments,
 * MemoryError, OSError for files, RuntimeError otherwise) and returns NULL. */
PyObject *nvpy_raise_status(nv_status status, const char *msg);
/* Raises for the calling thread's last library error with `status`; returns NULL. */
PyObject *nvpy_raise_last(nv_status status);
/* Names the failing function or argument in the pending exception: a TypeError, ValueError,
 * OverflowError or IndexError (those exact types, the ones argument conversions raise) whose
 * message does not start with `label` is replaced by one of the same type reading
 * "label: message" (its traceback and chain kept); other exceptions pass unchanged. With no
 * exception pending it raises RuntimeError ("label: failed without reporting an error"), so a
 * NULL result always carries an exception. Returns NULL. */
PyObject *nvpy_error_prefix(const char *label);
/* Whether `msg` already names `label`: "label: ...", "label ...", "label(...", "[label] ...";
 * for a submodule's function ("random.uniform") its own name counts too ("uniform: ..."). */
bool nvpy_names(const char *msg, const char *label);

/* ---- Arrays (array.c, convert.c) ---- */

/* Wraps `a` (a new reference, taken over) in a Python array. When the array already carries
 * an error (bad arguments to its op), releases it and raises instead. NULL `a` raises
 * MemoryError. */
PyObject *nvpy_wrap(nv_array *a);
/* Inside a transformed function's body a scope owns the arrays built there: this hands `a`
 * out of every scope, so the caller owns its reference after they end. Returns `a`. */
nv_array *nvpy_unscope(nv_array *a);
/* Wraps without checking for a known error. */
PyObject *nvpy_wrap_unchecked(nv_array *a);

/* A new reference to an array holding `o`: a nuvec array (retained, converted when `dtype` is
 * not -1), a Python scalar, a nested sequence, an object with the buffer protocol, DLPack or
 * __array__. NULL with a Python exception set on failure. */
nv_array *nvpy_to_array(PyObject *o, int dtype);

/* The operand `o` of a binary op whose other operand is `other` (may be NULL): Python bools,
 * ints and floats become weakly typed scalars as MLX's (an int that does not fit an integer
 * `other` raises ValueError), everything else as nvpy_to_array. New reference or NULL. */
nv_array *nvpy_operand(PyObject *o, PyObject *other);

/* Both operands of a binary op, each a new reference; 0 on success, -1 with an exception. */
int nvpy_operands(PyObject *a, PyObject *b, nv_array **xa, nv_array **xb);

/* Evaluates `n` arrays with the GIL released; 0, or -1 with an exception set. */
int nvpy_eval(nv_array *const *xs, size_t n);

/* The dtype of a Python dtype object (or None when `allow_none`: -1). Otherwise -2 with a
 * TypeError naming `what` (the function and argument, "zeros: dtype"). */
int nvpy_dtype_arg(PyObject *o, bool allow_none, const char *what);
PyObject *nvpy_dtype_obj(nv_dtype dt);

/* A shape from an int or a sequence of ints into `shape` (NVPY_MAXDIM ints); the number of
 * dimensions, or -1 with an exception set. `what` names the op for messages. */
int nvpy_shape_arg(PyObject *o, int *shape, const char *what);
/* Axes from None (returns -2: all axes), an int, or a sequence of ints; count or -1. */
int nvpy_axes_arg(PyObject *o, int *axes, const char *what);
/* An optional int: None gives `none_value`. 0, or -1 with an exception. */
int nvpy_int_arg(PyObject *o, int none_value, int *out, const char *what);

/* An int64 (any int or __index__ object); 0, or -1 with an exception naming `what`. */
int nvpy_int64_arg(PyObject *o, int64_t *out, const char *what);
/* The items of a sequence or iterable argument as a new tuple: a snapshot, so that code the
 * conversion of one item runs (its __index__ or __array__) cannot change the others. At most
 * `max` items (-1: any number); an iterable other than a list or tuple is read one item at a
 * time, so an endless one stops there. NULL with a TypeError ("what: expected <expected>, got
 * ...") or ValueError naming `what`, or with the exception iterating raised, named. */
PyObject *nvpy_items(PyObject *o, Py_ssize_t max, const char *what, const char *expected);

/* A list of arrays from a sequence of array-likes; new references in `v` (a new nv_vec). */
nv_vec *nvpy_vec_arg(PyObject *seq, const char *what);
/* A Python tuple of wrapped arrays from `v` (each retained); NULL with an exception. */
PyObject *nvpy_tuple_from_vec(const nv_vec *v);
PyObject *nvpy_list_from_vec(const nv_vec *v);

/* Converts an array to nested Python lists / a Python scalar (evaluates). */
PyObject *nvpy_tolist(nv_array *a);
PyObject *nvpy_item(nv_array *a);
/* The elements in row-major order in a PyMem buffer (float16/bfloat16 widened to float32,
 * `*dt` says the dtype); evaluates with the GIL released. NULL with an exception. */
char *nvpy_host_copy(nv_array *a, nv_dtype *dt);

/* ---- Streams (module.c) ---- */

/* Enters the stream named by a `stream=` argument (None: nothing; a Stream; a Device or
 * DeviceType: its default stream). Returns 1 when it entered one (leave with nv_stream_exit),
 * 0 when not, -1 with an exception naming `what`. */
int nvpy_stream_enter(PyObject *o, const char *what);

/* Pushes the arrays of the pytree `o` (lists, tuples and dict values; other leaves carried
 * over) onto `v`, borrowed (transforms.c). A tree that contains itself is a ValueError and one
 * nested past the recursion limit a RecursionError, both naming `what`. 0, or -1 with an
 * exception. */
int nvpy_tree_flatten(PyObject *o, nv_vec *v, const char *what);

/* ---- Module parts: each adds its functions and types to the module ---- */
int nvpy_init_module_parts(PyObject *m);
int nvpy_init_array(PyObject *m);
int nvpy_init_ops(PyObject *m);
int nvpy_init_index(PyObject *m);
int nvpy_init_transforms(PyObject *m);
int nvpy_init_export(PyObject *m);
int nvpy_init_io(PyObject *m);
int nvpy_init_dlpack(PyObject *m);
int nvpy_init_random(PyObject *m);
int nvpy_init_conv(PyObject *m);
int nvpy_init_fft(PyObject *m);
int nvpy_init_distributed(PyObject *m);
int nvpy_init_fast(PyObject *m);
int nvpy_init_cuda_kernel(PyObject *fast); /* cuda_kernel.c: into nuvec.fast */
int nvpy_init_linalg(PyObject *m);
int nvpy_init_quantize(PyObject *m);
int nvpy_init_dtypeinfo(PyObject *m);

/* Indexing (index.c), used by the array type. */
PyObject *nvpy_getitem(PyObject *self, PyObject *key);
int nvpy_setitem(PyObject *self, PyObject *key, PyObject *value);
PyObject *nvpy_at_new(PyObject *self);

/* Repr (repr.c). */
PyObject *nvpy_repr(PyObject *self);
/* The float print precision (-1: %g) behind nuvec.set_printoptions / get_printoptions. */
PyObject *nvpy_set_print_precision(PyObject *self, PyObject *arg);
PyObject *nvpy_get_print_precision(PyObject *self, PyObject *unused);

#endif /* NVPY_H */
