"""Reliability of the Python API under hostile arguments (issue 14): self-referencing and very
deep pytrees, objects whose __iter__/__len__/__index__/__float__/__array__ raise or lie, huge
slice steps beside array indices, more primals than the old fixed-size tables, and messages
that name the function and the argument. Each case once crashed the interpreter (SIGSEGV) or
raised SystemError; the ones that crashed run in a child process, so a regression fails the
test instead of killing the test run."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import nuvec as nv


def run_child(code, timeout=120):
    """Runs `code` (with `import nuvec as mx`) in a fresh interpreter; its stdout, or a failed
    test showing how it died."""
    src = "import nuvec as mx\nimport numpy as np\n" + textwrap.dedent(code)
    p = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"the child died with {p.returncode}: {p.stderr[-2000:]}"
    return p.stdout


def expect(exc, match, code):
    """`code` raises `exc` with a message matching `match`, in a child process."""
    out = run_child(f"""
import re
try:
{textwrap.indent(textwrap.dedent(code), '    ')}
except {exc.__name__} as e:
    assert re.search({match!r}, str(e)), str(e)
    print("RAISED")
else:
    print("NO EXCEPTION")
""")
    assert out.strip().endswith("RAISED"), out


# ---- 1. pytrees that contain themselves or are nested too deeply ----


def test_eval_of_a_list_holding_itself_raises_value_error():
    expect(ValueError, r"^eval: the pytree contains itself", "l = []; l.append(l); mx.eval(l)")


def test_async_eval_of_a_dict_holding_itself_raises_value_error():
    expect(ValueError, r"^async_eval: the pytree contains itself",
           "d = {'x': mx.ones(2)}; d['self'] = d; mx.async_eval(d)")


def test_a_list_nested_200000_deep_raises_recursion_error():
    expect(RecursionError, r"^eval: the pytree is nested deeper",
           "l = [mx.ones(1)]\nfor _ in range(200000): l = [l]\nmx.eval(l)")


def test_transforms_reject_cyclic_arguments_and_results():
    expect(ValueError, r"^grad: the pytree contains itself",
           "l = [mx.ones(2)]; l.append(l); mx.grad(lambda p: p[0].sum())(l)")
    expect(ValueError, r"^vmap: in_axes: the pytree contains itself",
           "l = [mx.ones(2)]; l.append(l); mx.vmap(lambda p: p[0])(l)")
    expect(ValueError, r"^vjp: the pytree contains itself",
           "def f(x):\n    l = [x]; l.append(l); return l\nmx.vjp(f, [mx.ones(2)], [mx.ones(2)])")
    expect(RecursionError, r"",
           "s = [0]; s.append(s); t = [mx.ones(2)]; t.append(t); mx.vmap(lambda *a: a[0], in_axes=s)(*t)")


def test_shared_subtrees_are_not_cycles():
    x = nv.ones(3)
    inner = [x, {"y": x}]
    nv.eval([inner, inner, (inner,)], {"a": inner, "b": inner})
    g = nv.grad(lambda p: (p[0][0] * p[1][0]).sum())([inner, inner])
    assert g[0][0].tolist() == [1.0, 1.0, 1.0]
    assert g[0][1]["y"].tolist() == [0.0, 0.0, 0.0]


# ---- 2. sequences whose protocol methods raise or lie ----


def test_list_subclass_whose_iter_raises():
    expect(RuntimeError, r"boom", """
class L(list):
    def __iter__(self): raise RuntimeError("boom")
mx.eval(L([mx.ones(1)]))
""")
    expect(RuntimeError, r"boom", """
class L(list):
    def __iter__(self): raise RuntimeError("boom")
mx.concatenate(L([mx.ones(1)]))
""")
    expect(RuntimeError, r"boom", """
class L(list):
    def __iter__(self): raise RuntimeError("boom")
mx.grad(lambda p: p[0].sum())(L([mx.ones(1)]))
""")


def test_list_subclass_whose_len_lies_is_read_by_its_items():
    out = run_child("""
class L(list):
    def __len__(self): return 10**6
g = mx.grad(lambda p: (p[0] * 3).sum())(L([mx.ones(2)]))
print(type(g).__name__, g[0].tolist())
out = mx.vmap(lambda a: a[0] * 2, in_axes=(L([0]),))(L([mx.ones((2, 2))]))
print(out.tolist())
""")
    assert out.split("\n")[:2] == ["list [3.0, 3.0]", "[[2.0, 2.0], [2.0, 2.0]]"]


def test_conversion_survives_a_list_changed_by_its_items_array_hook():
    # The last item's __array__ empties the list while it is converted.
    out = run_child("""
x = [mx.ones(2), mx.ones(2)]
class Clears:
    def __array__(self, *a, **k):
        x.clear()
        return np.full(2, 3, np.float32)
x.append(Clears())
print(mx.array(x).tolist())
y = [1.0, 2.0]
class Clears2:
    def __array__(self, *a, **k):
        y.clear()
        return np.ones(2, np.float32)
y.append(Clears2())
try:
    mx.array(y)
except ValueError as e:
    print("ValueError")
""")
    assert out.split("\n")[:2] == ["[[1.0, 1.0], [1.0, 1.0], [3.0, 3.0]]", "ValueError"]


def test_an_array_hook_returning_itself_raises_recursion_error():
    expect(RecursionError, r"", """
class A:
    def __array__(self, *a, **k): return self
mx.array(A())
""")


def test_shapes_from_iterables_are_read_at_most_64_items_deep():
    import itertools

    with pytest.raises(ValueError, match=r"^zeros: shape: more than 64 values"):
        nv.zeros(itertools.count())
    with pytest.raises(ValueError, match=r"^zeros: shape: more than 64 values"):
        nv.zeros(range(2**40))
    assert nv.zeros(iter([2, 3])).shape == (2, 3)


# ---- 4. a slice step of 2**31 beside an array index ----


@pytest.mark.parametrize("step", [2**31, 2**40, -(2**31), -(2**63)])
def test_huge_slice_steps_with_array_indices_match_numpy(step):
    out = run_child(f"""
x = mx.arange(6).reshape(2, 3)
print(x[::{step}, [0]].tolist())
print(x[::{step}, ::{step}].tolist())
y = mx.zeros((2, 3)); y[::{step}, [0]] = 1
print(y.tolist())
print(mx.zeros((2, 3)).at[::{step}, [0]].add(1).tolist())
""")
    ref = np.arange(6).reshape(2, 3)
    y = np.zeros((2, 3))
    y[::step, [0]] = 1
    z = np.zeros((2, 3))
    np.add.at(z, (slice(None, None, step), [0]), 1)
    assert out.split("\n")[:4] == [str(ref[::step, [0]].tolist()), str(ref[::step, ::step].tolist()),
                                   str(y.tolist()), str(z.tolist())]


def test_an_index_beyond_int64_is_an_index_error():
    with pytest.raises(IndexError, match="out of bounds"):
        nv.zeros(3)[2**70]
    with pytest.raises(IndexError, match="out of bounds"):
        nv.zeros((3, 2))[0, -(2**70)]


# ---- 5. more primals than 64 ----


def test_vjp_and_jvp_with_65_primals():
    out = run_child("""
xs = [mx.array(float(i)) for i in range(65)]
outs, vjps = mx.vjp(lambda *a: sum(a[i] * i for i in range(65)), xs, [mx.array(1.0)])
print(len(vjps), vjps[64].item(), vjps[3].item())
outs, jvps = mx.jvp(lambda *a: a[64] * 2, xs, [mx.array(1.0)] * 65)
print(outs[0].item(), jvps[0].item())
""")
    assert out.split("\n")[:2] == ["65 64.0 3.0", "128.0 2.0"]


def test_vjp_with_a_million_primals():
    out = run_child("""
xs = [mx.array(1.0)] * 10**6
outs, vjps = mx.vjp(lambda *a: a[-1] * 2, xs, [mx.array(1.0)])
print(len(vjps), vjps[-1].item(), vjps[0].item())
""")
    assert out.split("\n")[0] == "1000000 2.0 0.0"


def test_transforms_of_functions_with_70_arguments():
    xs = [nv.array(float(i)) for i in range(70)]
    f = lambda *a: sum(a[i] * a[i] for i in range(70))  # noqa: E731
    assert nv.grad(f, argnums=[0, 63])(*xs)[1].item() == 126.0
    assert nv.vmap(lambda *a: a[69] + a[0])(*[nv.ones(2)] * 70).tolist() == [2.0, 2.0]
    assert nv.checkpoint(lambda *a: a[69] * 3)(*xs).item() == 207.0
    assert nv.custom_function(lambda *a: a[69] - a[1])(*xs).item() == 68.0


# ---- 16. SystemError, and messages naming the function and the argument ----


def test_format_with_a_non_str_spec_is_a_type_error():
    with pytest.raises(TypeError, match=r"^__format__: format_spec must be a str, got float"):
        nv.ones(3).__format__(1.5)
    assert f"{nv.array(2.5):.2f}" == "2.50"


class RaisesOnFloat:
    def __float__(self):
        raise TypeError("no float")


class RaisesOnIndex:
    def __index__(self):
        raise KeyError("no index")


def test_arange_with_a_raising_float_names_the_argument():
    with pytest.raises(TypeError, match=r"^arange: start: no float"):
        nv.arange(RaisesOnFloat(), [0])
    with pytest.raises(TypeError, match=r"^arange: stop: must be real number, not list"):
        nv.arange(1, [0])


def test_user_exceptions_from_conversion_hooks_pass_through():
    with pytest.raises(KeyError, match="no index"):
        nv.zeros(RaisesOnIndex())
    with pytest.raises(KeyError, match="no index"):
        nv.sum(nv.ones(3), axis=[RaisesOnIndex()])


@pytest.mark.parametrize("call, exc, message", [
    (lambda: nv.zeros((2,), dtype=[1]), TypeError, r"^zeros: dtype: expected a nuvec Dtype, got list"),
    (lambda: nv.zeros(2**70), ValueError, r"^zeros: shape: 1180591620717411303424 is out of the range of int32"),
    (lambda: nv.zeros(2.5), TypeError, r"^zeros: shape: expected an int or a sequence of ints, got float"),
    (lambda: nv.ones(3).astype([1]), TypeError, r"^astype: dtype: expected a nuvec Dtype"),
    (lambda: nv.array([1], dtype="x"), TypeError, r"^array: dtype: expected a nuvec Dtype"),
    (lambda: nv.array(2**70), OverflowError, r"^array: val: "),
    (lambda: nv.add([2**63], 1), OverflowError, r"^add: a: array: an int does not fit"),
    (lambda: nv.isclose(1, 2, rtol=[1]), TypeError, r"^isclose: rtol: must be real number"),
    (lambda: nv.searchsorted(nv.ones(3), 1, side=3), TypeError, r"^searchsorted: side: expected a str"),
    (lambda: nv.pad(nv.ones(3), 1, mode=3), TypeError, r"^pad: mode: expected a str"),
    (lambda: nv.pad(nv.ones(3), [1, 2, 3, 4, 5]), ValueError, r"^pad: pad_width: expected \(before, after\)"),
    (lambda: nv.pad(nv.ones((1,) * 3), [(1, 1)] * 65), ValueError, r"^pad: pad_width: more than 64 values"),
    (lambda: nv.as_strided(nv.ones(4), (2,), ["a"]), TypeError, r"^as_strided: strides: expected an int, got str"),
    (lambda: nv.as_strided(nv.ones(4), (2,), [2**70]), ValueError, r"^as_strided: strides: .* out of the range of int64"),
    (lambda: nv.sum(nv.ones(3), keepdims=nv.ones(3)), ValueError, r"^sum: keepdims: "),
    (lambda: nv.concatenate(5), TypeError, r"^concatenate: arrays: expected a list of arrays, got int"),
    (lambda: nv.tensordot(nv.ones(2), nv.ones(2), axes=[[0], [0], [0]]), ValueError, r"^tensordot: axes: more than 2 values"),
    (lambda: nv.sum(nv.ones(3), stream=nv.float32), TypeError, r"^sum: stream: expected a Device or DeviceType"),
    (lambda: nv.random.uniform(shape=[1.5]), TypeError, r"^random.uniform: shape: expected an int, got float"),
    (lambda: nv.random.normal(dtype=2), TypeError, r"^random.normal: dtype: expected a nuvec Dtype, got int"),
    (lambda: nv.random.seed(BadIndexValue()), ValueError, r"^random.seed: seed: bad"),
    (lambda: nv.grad(lambda x: x.sum(), argnums=2**70), ValueError, r"^\[grad\] argument index"),
    (lambda: nv.grad(3), TypeError, r"^grad: fun: expected a callable, got int"),
    (lambda: nv.vmap(lambda x: x, in_axes=[1.5])(nv.ones(2)), TypeError, r"^vmap: in_axes: expected an int"),
    (lambda: nv.vjp(lambda x: x, nv.ones(2), [nv.ones(2)]), TypeError, r"^vjp: primals: expected a list of arrays"),
    (lambda: nv.set_memory_limit(-1), ValueError, r"^set_memory_limit: limit: -1 is not a byte count"),
    (lambda: nv.set_cache_limit("x"), TypeError, r"^set_cache_limit: limit: expected an int, got str"),
    (lambda: nv.Device(nv.cpu, 2**40), OverflowError, r"^Device"),
    (lambda: nv.new_stream(3), TypeError, r"^new_stream: device: expected a Device or DeviceType"),
    (lambda: nv.finfo([1]), TypeError, r"^finfo: dtype: expected a nuvec Dtype"),
    (lambda: nv.can_cast(nv.ones(1), 3), TypeError, r"^can_cast: to: expected a nuvec Dtype"),
    (lambda: nv.ones(2).reshape(2.5), TypeError, r"^reshape: shape: expected an int or a sequence of ints, got float"),
])
def test_messages_name_the_function_and_the_argument(call, exc, message):
    with pytest.raises(exc, match=message):
        call()


class BadIndexValue:
    def __index__(self):
        raise ValueError("bad")


def test_a_failed_conversion_never_leaves_system_error():
    class E:
        def __float__(self):
            raise TypeError("float")

        def __index__(self):
            raise TypeError("index")

    calls = [lambda: nv.arange(E(), [0]), lambda: nv.arange(E()), lambda: nv.linspace(E(), 1),
             lambda: nv.clip(nv.ones(2), E(), E()), lambda: nv.as_strided(nv.ones(4), (2,), [E()]),
             lambda: nv.full((2,), E()), lambda: nv.eye(E()), lambda: nv.random.uniform(E(), E()),
             lambda: nv.ones(3)[E()], lambda: nv.isclose(nv.ones(1), 1, atol=E())]
    for call in calls:
        with pytest.raises(Exception) as info:
            call()
        assert not isinstance(info.value, SystemError), info.value


def test_unpickle_rejects_a_shape_whose_size_overflows():
    with pytest.raises(ValueError, match="does not match"):
        nv._core._unpickle(b"\0" * 4, (2**31 - 1,) * 3, "float32")


# ---- DLPack tensors with hostile shapes and strides ----


def dlpack_capsule(keep, buf, shape, strides):
    """An unversioned DLPack capsule over `buf` (float32) with the shape and strides given."""
    import ctypes

    class Device(ctypes.Structure):
        _fields_ = [("type", ctypes.c_int32), ("id", ctypes.c_int32)]

    class Dtype(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]

    class Tensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device", Device), ("ndim", ctypes.c_int32),
                    ("dtype", Dtype), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

    class Managed(ctypes.Structure):
        _fields_ = [("t", Tensor), ("ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

    sh = (ctypes.c_int64 * len(shape))(*shape)
    st = (ctypes.c_int64 * len(strides))(*strides)
    m = Managed(Tensor(ctypes.cast(buf, ctypes.c_void_p), Device(1, 0), len(shape), Dtype(2, 32, 1),
                       sh, st, 0), None, None)
    keep.append((sh, st, m))
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(m), b"dltensor", None)


@pytest.mark.parametrize("shape, strides", [((3,), (-(2**62),)), ((2, 2), (2**62, 2**62)),
                                            ((-3,), (1,)), ((2,), (2**40,))])
def test_from_dlpack_rejects_strides_that_reach_too_far(shape, strides):
    import ctypes

    keep, buf = [], (ctypes.c_float * 4)()
    with pytest.raises(ValueError, match="from_dlpack|as_strided|negative dimension"):
        nv.from_dlpack(dlpack_capsule(keep, buf, shape, strides)).sum().item()
    buf[1] = 5.0
    assert nv.from_dlpack(dlpack_capsule(keep, buf, (2,), (1,))).tolist() == [0.0, 5.0]
