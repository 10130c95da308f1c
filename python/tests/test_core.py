"""The array type: construction, dtypes, properties, conversions, repr, NumPy interop without
copies (checked by address), DLPack, pickling, devices, streams and memory functions."""
import copy
import os
import pickle

import ml_dtypes
import numpy as np
import pytest

import nuvec as nv
from conftest import DTYPES, NP, assert_close, dt, rand


@pytest.mark.parametrize("val,dtype", [
    (1, "int32"), (2**40, "int64"), (1.5, "float32"), (True, "bool_"), (1 + 2j, "complex64"),
    ([1, 2, 3], "int32"), ([1, 2.5], "float32"), ([True, 2], "int32"), ([[True], [False]], "bool_"),
    ([1j, 2], "complex64"), ([], "float32"), ([[], []], "float32"), ([1, 2**40], "int64"),
    ((1, 2), "int32"), (np.arange(3.0), "float32"), (np.arange(3), "int64"),
    (np.array([1, 2], np.uint16), "uint16"), (np.float32(1.5), "float32"),
    (np.array([1 + 2j]), "complex64"), (memoryview(b"ab"), "uint8")])
def test_array_infers_dtype_and_shape_as_mlx(val, dtype):
    x = nv.array(val)
    assert x.dtype == dt(dtype)
    want = np.array(val)
    assert x.shape == want.shape
    assert_close(np.array(x.astype(nv.float64) if dtype not in ("complex64",) else x),
                 want.astype(np.complex64 if dtype == "complex64" else np.float64))


def test_array_with_dtype_converts_once(rng):
    for name in DTYPES:
        x = nv.array([1.25, -2.5, 3.0], dt(name))
        assert x.dtype == dt(name)
        assert_close(np.array(x), np.array([1.25, -2.5, 3.0]).astype(NP[name]), name)


def test_array_from_numpy_every_dtype_and_layout(rng):
    for name in DTYPES:
        a = rand(rng, (3, 4), name)
        for view in (a, a.T, a[::-1, ::2], a[:0]):
            x = nv.array(view, dt(name))
            assert x.dtype == dt(name) and x.shape == view.shape
            assert_close(np.array(x), view, name)


def test_array_of_arrays_stacks_and_nonuniform_fails():
    x = nv.array([nv.array([1, 2]), nv.array([3, 4])])
    assert x.tolist() == [[1, 2], [3, 4]]
    with pytest.raises(ValueError, match="non-uniform"):
        nv.array([[1, 2], [3]])
    with pytest.raises(ValueError, match="Invalid type str"):
        nv.array("s")
    with pytest.raises(ValueError, match="NoneType"):
        nv.array([1, None])
    with pytest.raises(TypeError):
        nv.array([1], dtype="float32")


def test_dtypes_attributes_equality_hash_repr():
    assert repr(nv.float32) == "nuvec.float32" and repr(nv.bool_) == "nuvec.bool"
    sizes = {"bool_": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "int8": 1, "int16": 2,
             "int32": 4, "int64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
             "complex64": 8}
    for name, size in sizes.items():
        assert dt(name).size == size
    assert nv.float32 == nv.float32 and nv.float32 != nv.float16
    assert nv.float32 != "float32"
    assert len({nv.float32, nv.float32, nv.int8}) == 2
    assert nv.issubdtype(nv.float32, nv.floating) and nv.issubdtype(nv.floating, nv.inexact)
    assert not nv.issubdtype(nv.int8, nv.float32) and nv.issubdtype(nv.float32, nv.float32)
    assert nv.issubdtype(nv.uint8, nv.unsignedinteger) and not nv.issubdtype(nv.uint8, nv.signedinteger)
    assert nv.issubdtype(nv.complex64, nv.complexfloating) and nv.issubdtype(nv.int64, nv.number)
    assert nv.issubdtype(nv.bool_, nv.generic) and not nv.issubdtype(nv.bool_, nv.number)
    assert repr(nv.floating) == "DtypeCategory.floating"
    with pytest.raises(TypeError):
        nv.issubdtype(nv.float32, "float32")


def test_properties(rng):
    x = nv.array(rand(rng, (2, 3, 4), "float16"))
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.size == 24
    assert x.itemsize == 2 and x.nbytes == 48 and x.dtype == nv.float16
    assert x.T.shape == (4, 3, 2) and len(x) == 2
    assert_close(np.array(x.T), np.array(x).T, "float16")
    s = nv.array(3.5)
    assert s.shape == () and s.ndim == 0 and s.size == 1
    with pytest.raises(TypeError, match="0-dimensional"):
        len(s)
    with pytest.raises(TypeError, match="0-dimensional"):
        iter(s)


def test_item_tolist_bool_int_float_index():
    assert nv.array([1.5]).item() == 1.5 and isinstance(nv.array([1.5]).item(), float)
    assert nv.array([[1, 2]]).tolist() == [[1, 2]]
    assert nv.array([1.5], nv.bfloat16).tolist() == [1.5]
    assert nv.array([1 + 2j]).tolist() == [1 + 2j]
    assert nv.array(True).item() is True and nv.array(2**63 + 5, nv.uint64).item() == 2**63 + 5
    assert bool(nv.array([3])) and not bool(nv.array(0.0))
    with pytest.raises(ValueError, match="Only length-1"):
        bool(nv.array([1, 2]))
    assert int(nv.array(3.7)) == 3 and float(nv.array([2])) == 2.0
    assert [1, 2, 3][nv.array(1)] == 2
    with pytest.raises(TypeError):
        [1, 2][nv.array(1.0)]
    assert f"{nv.array(2.5):.2f}" == "2.50"
    assert [a.tolist() for a in nv.array([[1, 2], [3, 4]])] == [[1, 2], [3, 4]]
    assert 2 in nv.array([1, 2]) and 5 not in nv.array([1, 2])


@pytest.mark.parametrize("expr", [
    "array([1,2,3])", "array([[1.5,2,3],[4,5,6]])", "array(3.0)", "array(True)",
    "array([True,False])", "arange(2000)", "arange(12.).reshape(3,4)", "array([1e10, 1.0])",
    "array([1e-10, 1.0])", "array([float('nan'), float('inf'), -float('inf')])",
    "array([1+2j, 3-4j])", "zeros((2,0,3))", "zeros((0,3))", "zeros((3,0))",
    "array([1,2],float16)", "array([1,2],bfloat16)", "array([1,2],uint8)",
    "arange(200).reshape(100,2)", "arange(2000).reshape(2,1000)", "arange(24).reshape(2,3,4)",
    "arange(70).reshape(7,10)", "array([-0.0, 1e300], float64)", "array(2**40)",
    "array([1e-5, 123456.0, 1234567.0])", "arange(98).reshape(7,7,2)", "array([2**62], uint64)",
    "array([1.5+0j, -2.25-1e-3j])"])
def test_repr_matches_mlx(expr):
    mx = pytest.importorskip("mlx.core")
    want = repr(eval(expr, vars(mx)))
    assert repr(eval(expr, vars(nv))) == want


def test_buffer_protocol_and_array_share_memory():
    x = nv.arange(12, dtype=nv.float32).reshape(3, 4)
    a, b = np.asarray(x), np.asarray(x)
    assert a.ctypes.data == b.ctypes.data  # no copy: both read the array's buffer
    m = memoryview(x)
    assert m.format == "f" and m.shape == (3, 4) and not m.readonly  # MLX's: writable
    assert np.frombuffer(m, dtype=np.float32).ctypes.data == a.ctypes.data
    t = np.asarray(x.T)  # strided export: the same memory, transposed strides
    assert t.ctypes.data == a.ctypes.data and t.strides == (4, 16)
    assert_close(t, np.arange(12, dtype=np.float32).reshape(3, 4).T)
    bf = np.array(nv.array([1.5, 2.0], nv.bfloat16))
    assert bf.dtype == ml_dtypes.bfloat16 and bf.tolist() == [1.5, 2.0]
    assert np.array(nv.array([1, 2]), dtype=np.float64).dtype == np.float64


def test_buffers_writable_where_the_memory_is_the_arrays():
    """As MLX's: an array's own host memory is exported writable (a NumPy view of it writes the
    array); caller memory (a zero-copy import) stays read-only."""
    import ctypes
    x = nv.array([1, 2, 3, 4, 5, 6], nv.int32)
    c = (ctypes.c_int32 * 6).from_buffer(x)
    c[0] = 7
    v = np.array(x, copy=False)
    assert v.flags.writeable and not v.flags.owndata
    v[5] = -1
    assert x.tolist() == [7, 2, 3, 4, 5, -1]
    a = np.arange(4, dtype=np.float32)
    y = nv.from_dlpack(a)
    assert memoryview(y).readonly
    with pytest.raises((TypeError, BufferError)):
        (ctypes.c_char * 16).from_buffer(y)
    assert not np.array(y, copy=False).flags.writeable


def test_dlpack_zero_copy_both_ways(rng):
    a = rand(rng, (4, 5), "float32")
    x = nv.from_dlpack(a)
    assert np.asarray(x).ctypes.data == a.ctypes.data
    assert_close(np.array(x), a)
    s = nv.from_dlpack(a[::2, ::-1])  # strided: a view of a's memory
    assert_close(np.array(s), a[::2, ::-1])
    with nv.stream(nv.cpu):  # NumPy reads host memory: the array is made on the CPU
        y = nv.arange(6, dtype=nv.int16).reshape(2, 3)
    assert y.__dlpack_device__() == (1, 0)
    b = np.from_dlpack(y)
    assert b.ctypes.data == np.asarray(y).ctypes.data
    assert b.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert nv.array(a).dtype == nv.float32


def test_pickle_and_copy_roundtrip(rng):
    for name in DTYPES:
        x = nv.array(rand(rng, (2, 3), name), dt(name))
        for y in (pickle.loads(pickle.dumps(x)), copy.copy(x), copy.deepcopy(x)):
            assert y.dtype == x.dtype and y.shape == x.shape
            assert_close(np.array(y), np.array(x), name)


def test_set_default_stream_as_mlx():
    mx = pytest.importorskip("mlx.core")  # absent on the GPU machine
    for lib in (nv, mx):
        old = lib.default_stream(lib.cpu)
        s = lib.new_stream(lib.cpu)
        lib.set_default_stream(s)
        try:
            assert lib.default_stream(lib.cpu) == s
            if lib is mx or not _gpu_default():
                assert lib.default_device() == lib.Device(lib.cpu)
            assert (lib.ones((2,)) * 3).tolist() == [3.0, 3.0]
        finally:
            lib.set_default_stream(old)
        assert lib.default_stream(lib.cpu) == old
        with pytest.raises(TypeError):
            lib.set_default_stream(lib.cpu)
    if not nv.is_available(nv.gpu):
        # As MLX without a GPU backend: no stream of the GPU is handed out, and one built
        # directly cannot become the default.
        with pytest.raises(ValueError, match="new_stream"):
            nv.new_stream(nv.gpu)
        with pytest.raises(ValueError, match="default_stream"):
            nv.default_stream(nv.gpu)
        with pytest.raises(ValueError, match="new_stream"):
            mx.new_stream(mx.gpu)
        with pytest.raises(ValueError, match="default_stream"):
            mx.default_stream(mx.gpu)
        with pytest.raises(ValueError, match="set_default_stream"):
            nv.set_default_stream(nv.Stream(nv.gpu))


def _gpu_default():
    return nv.is_available(nv.gpu) and os.environ.get("NUVEC_DEFAULT_DEVICE", "gpu") != "cpu"


def test_devices_streams_and_memory():
    if _gpu_default():
        pytest.skip("the CPU-default rules; the GPU run covers its own default")
    assert repr(nv.cpu) == "DeviceType.cpu" and repr(nv.default_device()) == "Device(cpu, 0)"
    s = nv.default_stream(nv.cpu)
    assert repr(s) == "Stream(Device(cpu, 0), 0)" and s.device == nv.Device(nv.cpu)
    n = nv.new_stream(nv.cpu)
    assert n != s
    with nv.stream(n):
        y = nv.ones((2,)) + 1
    assert y.tolist() == [2.0, 2.0]
    assert nv.add(nv.ones(2), 1, stream=n).tolist() == [2.0, 2.0]
    assert nv.add(nv.ones(2), 1, stream=nv.cpu).tolist() == [2.0, 2.0]
    nv.set_default_device(nv.cpu)
    if not nv.is_available(nv.gpu):
        with pytest.raises(ValueError):
            nv.set_default_device(nv.gpu)
    x = nv.ones((1024,))
    nv.eval(x)
    assert nv.get_active_memory() >= 4096 and nv.get_peak_memory() >= nv.get_active_memory()
    nv.reset_peak_memory()
    assert nv.get_peak_memory() == 0  # MLX: 0 until the next allocation
    y = nv.ones((2048,))
    nv.eval(y)
    assert nv.get_peak_memory() >= nv.get_active_memory() >= 4096 + 8192
    old = nv.set_cache_limit(0)
    assert nv.get_cache_memory() == 0
    nv.set_cache_limit(old)
    nv.clear_cache()
    old = nv.set_memory_limit(1 << 40)
    assert nv.set_memory_limit(old) == 1 << 40


def test_errors_are_python_exceptions_with_the_message():
    with pytest.raises(ValueError, match=r"broadcast"):
        nv.array([1, 2]) + nv.array([1, 2, 3])
    with pytest.raises(ValueError, match="reshape"):
        nv.reshape(nv.arange(6), (4,))
    with pytest.raises(ValueError, match="sum"):
        nv.sum(nv.arange(6), axis=3)
    with pytest.raises(ValueError, match="overflow"):
        nv.array([1], nv.int8) + 300
    with pytest.raises(ValueError, match="Cannot perform addition"):
        nv.array([1]) + "a"  # MLX's ValueError for an operand no operator takes
    with pytest.raises(TypeError, match="unexpected keyword"):
        nv.add(1, 2, c=3)
    with pytest.raises(TypeError, match="missing required"):
        nv.add(1)
    with pytest.raises(OSError):
        nv.load("/nonexistent/file.npy")
    with pytest.raises(MemoryError):
        old = nv.set_memory_limit(1 << 20)
        try:
            nv.eval(nv.zeros((1 << 24,)) + 1)
        finally:
            nv.set_memory_limit(old)
    assert (nv.array([1]) == None) is False  # noqa: E711
