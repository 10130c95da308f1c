"""Shared helpers of the index family's tests (test_index.py, test_shape.py): C signatures,
random inputs with edge values, bit-exact comparison of copies, nv_vec access."""
import ctypes as C

import numpy as np

from nvc import FLOATS, INTS, NuvecError, lib, np_dtype, sig

P = C.c_void_p
I = C.c_int
IP = C.POINTER(C.c_int)
PP = C.POINTER(P)

ALL = ["bool"] + INTS + FLOATS + ["complex64"]
INDEX_DTYPES = ["int32", "int64", "uint32", "int8", "uint8", "int16", "uint16", "uint64"]
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]

sig("nv_array_data", P, P)
sig("nv_array_strides", C.POINTER(C.c_int64), P)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_size", C.c_size_t, P)
sig("nv_vec_get", P, P, C.c_size_t)
sig("nv_array_scalar", P, C.c_double, I)
sig("nv_array_is_row_contiguous", C.c_bool, P)


def rand(rng, shape, dtype, edges=True):
    """Seeded random values of `dtype` (never all zeros); floats get NaN/±inf/-0.0 mixed in."""
    dt = np_dtype(dtype)
    if dtype == "bool":
        x = rng.integers(0, 2, shape).astype(bool)
    elif dtype in INTS:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, shape, endpoint=True, dtype=np.int64 if info.min < 0 else np.uint64).astype(dt)
    elif dtype == "complex64":
        x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    else:
        x = (rng.standard_normal(shape) * 3).astype(dt)
    if edges and dtype in FLOATS + ["complex64"] and x.size:
        flat = x.reshape(-1)
        k = rng.integers(0, flat.size, 3)
        flat[k[0]] = np.nan
        flat[k[1]] = np.inf
        flat[k[2]] = -0.0
    return x


def bits(x):
    """The raw bits of an array, so copies compare exactly (NaN payloads and -0.0 included)."""
    x = np.ascontiguousarray(x)
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.itemsize in (1, 2, 4, 8) else x


def assert_same(got, want):
    """Exact equality of a copy: shape, dtype and bits."""
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    np.testing.assert_array_equal(bits(got), bits(want))


def read_vec(nv, vec):
    """The arrays of an nv_vec as NumPy arrays."""
    return [nv.read(lib.nv_vec_get(vec, i)) for i in range(lib.nv_vec_size(vec))]


def arrays(*hs):
    """A C array of array handles."""
    return (P * max(1, len(hs)))(*hs)


def expect_error(nv, h, *words):
    """`h` fails (when built or evaluated) with a message containing each of `words`."""
    try:
        nv.read(h)
    except NuvecError as e:
        for w in words:
            assert w in e.message, e.message
        return e.message
    raise AssertionError("no error")


def data_ptr(h):
    return lib.nv_array_data(h)
