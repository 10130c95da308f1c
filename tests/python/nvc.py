"""A ctypes view of libnuvec's C API for the conformance tests: NumPy arrays in, NumPy
arrays out, so every op can be checked against NumPy (computed in float64) without the
Python module. Each test owns a `Session`, which releases every array it made.

Op families declare the C signatures they test with `sig(name, restype, *argtypes)`.
"""
import ctypes as C
import os

import numpy as np

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - setup.sh installs it
    BF16 = None

_here = os.path.dirname(os.path.abspath(__file__))
LIB_PATH = os.environ.get(
    "NUVEC_LIB", os.path.join(_here, "..", "..", "build", "src", "libnuvec.so")
)
lib = C.CDLL(LIB_PATH)

P = C.c_void_p
I = C.c_int
D = C.c_double
B = C.c_bool
IP = C.POINTER(C.c_int)
LP = C.POINTER(C.c_int64)

# nuvec dtype codes, in nv_dtype order.
DTYPES = [
    "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "float16", "bfloat16", "float32", "float64", "complex64",
]
CODE = {n: i for i, n in enumerate(DTYPES)}
FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]


def np_dtype(name):
    if name == "bfloat16":
        return BF16
    return np.dtype(name)


def nv_name(dtype):
    dtype = np.dtype(dtype)
    if BF16 is not None and dtype == BF16:
        return "bfloat16"
    return dtype.name


class Device(C.Structure):
    """nv_device, shared by every test module (ctypes compares argument classes)."""
    _fields_ = [("type", C.c_int), ("index", C.c_int)]


class Stream(C.Structure):
    _fields_ = [("index", C.c_int), ("device", Device)]


def sig(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


sig("nv_retain", P, P)
sig("nv_release", None, P)
sig("nv_gpu_fallback_count", C.c_size_t)
sig("nv_last_error", C.c_char_p)
sig("nv_array_status", I, P)
sig("nv_array_error", C.c_char_p, P)
sig("nv_array_ndim", I, P)
sig("nv_array_shape", IP, P)
sig("nv_array_dtype", I, P)
sig("nv_array_nbytes", C.c_size_t, P)
sig("nv_array_from_data", P, C.c_void_p, IP, I, I)
sig("nv_array_read", I, P, C.c_void_p, C.c_size_t)
sig("nv_eval1", I, P)
sig("nv_transpose", P, P, IP, I)
sig("nv_slice", P, P, IP, IP, IP, I)
sig("nv_broadcast_to", P, P, IP, I)
sig("nv_weak_scalar", P, D)
sig("nv_weak_int", P, C.c_int64)
sig("nv_astype", P, P, I)
sig("nv_get_active_memory", C.c_size_t)
sig("nv_get_guard_violations", C.c_size_t)


def ints(values):
    values = list(values)
    return (C.c_int * max(1, len(values)))(*values), len(values)


class NuvecError(Exception):
    """An array carried an error: `.status` and the C message."""

    def __init__(self, status, message):
        super().__init__(f"[{status}] {message}")
        self.status = status
        self.message = message


class Session:
    """Makes nuvec arrays from NumPy arrays and reads them back; releases them all on close."""

    def __init__(self):
        self.arrays = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for a in self.arrays:
            lib.nv_release(a)
        self.arrays = []

    def own(self, handle):
        assert handle, "a builder returned NULL"
        self.arrays.append(handle)
        return handle

    def array(self, x):
        """A nuvec array holding a copy of NumPy array `x` (any layout)."""
        x = np.array(x, order="C", copy=True)
        shape, nd = ints(x.shape)
        return self.own(
            lib.nv_array_from_data(x.ctypes.data_as(C.c_void_p), shape, nd, CODE[nv_name(x.dtype)])
        )

    def view(self, x, layout):
        """A nuvec array with the values of `x` laid out as `layout` says: "contiguous",
        "transposed" (a transpose view of a copy of x.T), "strided" (a step-2 slice of a
        larger array), "reversed" (a negative-step slice), or "broadcast" (a broadcast of
        the first row, when x's rows are equal)."""
        if layout == "contiguous" or x.ndim == 0:
            return self.array(x)
        if layout == "transposed":
            base = self.array(np.ascontiguousarray(x.T))
            return self.own(lib.nv_transpose(base, None, 0))
        if layout == "strided":
            big = np.zeros(tuple(2 * s for s in x.shape), dtype=x.dtype)
            big[tuple(slice(None, None, 2) for _ in x.shape)] = x
            base = self.array(big)
            start, n = ints([0] * x.ndim)
            stop, _ = ints([2 * s for s in x.shape])
            step, _ = ints([2] * x.ndim)
            return self.own(lib.nv_slice(base, start, stop, step, n))
        if layout == "reversed":
            base = self.array(np.ascontiguousarray(x[..., ::-1]))
            start, n = ints([0] * (x.ndim - 1) + [-1])
            stop, _ = ints(list(x.shape[:-1]) + [-(x.shape[-1] + 1)])
            step, _ = ints([1] * (x.ndim - 1) + [-1])
            return self.own(lib.nv_slice(base, start, stop, step, n))
        raise ValueError(layout)

    def read(self, h, check=True):
        """Evaluates `h` and returns it as a NumPy array (raises NuvecError on failure)."""
        st = lib.nv_eval1(h)
        if st != 0:
            raise NuvecError(st, lib.nv_last_error().decode())
        nd = lib.nv_array_ndim(h)
        sp = lib.nv_array_shape(h)
        shape = tuple(sp[i] for i in range(nd))
        out = np.empty(shape, dtype=np_dtype(DTYPES[lib.nv_array_dtype(h)]))
        st = lib.nv_array_read(h, out.ctypes.data_as(C.c_void_p), out.nbytes)
        if st != 0:
            raise NuvecError(st, lib.nv_last_error().decode())
        return out

    def status(self, h):
        st = lib.nv_array_status(h)
        return st, lib.nv_array_error(h).decode()


def ref64(x):
    """x as float64 (complex128 for complex) for reference computations."""
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    return x.astype(np.float64)


def assert_close(got, want, dtype, rtol=None, atol=None, equal_nan=True):
    """Compares `got` (nuvec, dtype `dtype`) with the float64 reference `want` rounded to
    `dtype`, with tolerances by dtype. Integers and bools must match exactly."""
    dtype = nv_name(dtype)
    want_t = np.asarray(want).astype(np_dtype(dtype)) if dtype != "bool" else np.asarray(want)
    assert got.shape == want_t.shape, f"shape {got.shape} != {want_t.shape}"
    assert nv_name(got.dtype) == dtype, f"dtype {got.dtype} != {dtype}"
    if dtype in INTS or dtype == "bool":
        np.testing.assert_array_equal(got, want_t)
        return
    tol = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-13,
           "complex64": 2e-6}[dtype]
    np.testing.assert_allclose(
        ref64(got), ref64(want_t), rtol=rtol if rtol is not None else tol,
        atol=atol if atol is not None else tol, equal_nan=equal_nan,
    )
