"""Shared fixtures of the nuvec module's tests: a seeded (and printed) random generator,
NumPy conversions for every dtype (bfloat16 through ml_dtypes), closeness checks, and
`sample()` for the CI subset of a matrix (NUVEC_TEST_FULL=1 runs all of it)."""
import os
import random
import zlib

import ml_dtypes
import numpy as np
import pytest

import nuvec as nv

FULL = os.environ.get("NUVEC_TEST_FULL") == "1"
SEED = int(os.environ.get("NUVEC_TEST_SEED", "20240607"))

DTYPES = ["bool_", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
          "float16", "bfloat16", "float32", "float64", "complex64"]
NP = {"bool_": np.bool_, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
      "uint64": np.uint64, "int8": np.int8, "int16": np.int16, "int32": np.int32,
      "int64": np.int64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
      "float32": np.float32, "float64": np.float64, "complex64": np.complex64}
FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]


def sample(items, k, salt=""):
    """A seeded subset of `items` (all of them under NUVEC_TEST_FULL=1)."""
    items = list(items)
    if FULL or len(items) <= k:
        return items
    r = random.Random(SEED ^ zlib.crc32(salt.encode()))
    return r.sample(items, k)


def dt(name):
    return getattr(nv, name)


def rand(rng, shape, name):
    """Seeded random values of a dtype, never all zeros."""
    if name == "bool_":
        x = rng.random(shape) < 0.5
        if x.size:
            x.flat[0] = True
        return x
    if name in INTS:
        info = np.iinfo(NP[name])
        lo, hi = max(info.min, -50), min(info.max, 50)
        x = rng.integers(lo, hi, size=shape, endpoint=True).astype(NP[name])
        if x.size:
            x.flat[0] = 7
        return x
    if name == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)
    return (rng.standard_normal(shape) * 3).astype(NP[name])


def to_np(x):
    return np.array(x)


def tol(name):
    return {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "complex64": 2e-6}.get(name, 1e-12)


def assert_close(got, want, name=None, equal_nan=True):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.dtype.kind in "biu" and want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
        return
    t = tol(name or str(got.dtype))
    np.testing.assert_allclose(got.astype(np.complex128 if got.dtype.kind == "c" else np.float64),
                               want.astype(np.complex128 if want.dtype.kind == "c" else np.float64),
                               rtol=t, atol=t, equal_nan=equal_nan)


@pytest.fixture
def rng(request):
    seed = SEED ^ zlib.crc32(request.node.nodeid.encode())
    print(f"seed {seed}")
    return np.random.default_rng(seed)
