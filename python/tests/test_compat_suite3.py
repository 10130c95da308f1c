"""Compatibility, third part: behaviours where nuvec differed from MLX 0.32.4 in MLX's own test
suite (tools/mlx_suite.py): the peak memory after reset_peak_memory, thread-local streams,
str() of a dtype, operands an operator refuses, and writable buffers of an array's own memory.
Each runs on nuvec and, where it is importable, on MLX itself."""
import threading

import numpy as np
import pytest
from test_compat_suite import IDS, LIBS  # nuvec, and mlx.core where it is installed


# ---- reset_peak_memory ----

@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_reset_peak_memory_counts_from_zero(mx):
    keep = mx.ones((4096,))
    mx.eval(keep)
    mx.synchronize()
    assert mx.get_peak_memory() >= 4 * 4096
    mx.reset_peak_memory()
    assert mx.get_peak_memory() == 0
    y = mx.ones((8192,))
    mx.eval(y)
    mx.synchronize()
    # The first allocation after the reset sets the peak to the active memory then (keep
    # included), not to the new bytes alone.
    assert mx.get_peak_memory() >= mx.get_active_memory() >= 4 * (4096 + 8192)


# ---- new_thread_local_stream ----

@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_thread_local_stream_is_one_stream_per_thread(mx):
    tls = mx.new_thread_local_stream(mx.cpu)
    other = mx.new_thread_local_stream(mx.cpu)
    assert type(tls).__name__ == "ThreadLocalStream" and tls.device == mx.cpu
    assert repr(tls).startswith("ThreadLocalStream(Device(cpu, 0), ")
    assert tls != other and tls == tls
    seen, errors = {}, []

    def work(name):
        try:
            with mx.stream(tls):
                first = mx.default_stream(mx.cpu)
                x = mx.arange(10) * 2
                mx.eval(x)
            with mx.stream(tls):
                again = mx.default_stream(mx.cpu)
            seen[name] = (first, again, x.tolist())
        except Exception as e:  # reported on the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    work("main")
    assert not errors, errors
    for first, again, values in seen.values():
        assert first == again  # a thread keeps its stream
        assert values == list(range(0, 20, 2))
    streams = [v[0] for v in seen.values()]
    assert len({repr(s) for s in streams}) == 3  # each thread its own
    assert mx.arange(3, stream=tls).tolist() == [0, 1, 2]
    mx.synchronize(tls)


# ---- str(dtype) ----

@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_dtype_str_is_mlx_core_spelling(mx):
    for name, spelled in [("bool_", "bool"), ("uint8", "uint8"), ("int64", "int64"),
                          ("float16", "float16"), ("bfloat16", "bfloat16"),
                          ("float32", "float32"), ("complex64", "complex64")]:
        assert str(getattr(mx, name)) == "mlx.core." + spelled


# ---- operands no operator takes ----

@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_refused_operands(mx):
    x = mx.array([1.0, 2.5, 3.25])
    assert (x == [1.0, 2.5, 3.25]) is False and (x != (1.0, 2.5, 3.25)) is True
    assert (x == "hello") is False and ([1] in [x]) is False
    for f in (lambda: x < "hello", lambda: x >= [1, 2, 3], lambda: x * "a", lambda: x // [1],
              lambda: x ** (1, 2, 3), lambda: x | "a", lambda: x % [1, 2, 3]):
        with pytest.raises(ValueError):
            f()
    y = mx.array([1.0, 2.0])
    with pytest.raises(ValueError):
        y /= [1.0, 2.0]
    with pytest.raises(ValueError):
        y *= "a"
    # NumPy arrays and scalars stay operands.
    assert (x + np.array([1.0, 1.0, 1.0])).tolist() == [2.0, 3.5, 4.25]
    assert (x * np.float32(2)).tolist() == [2.0, 5.0, 6.5]
    with pytest.raises(TypeError):
        x + None


# ---- writable buffers ----

@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_zero_copy_views_are_writable(mx):
    a = mx.ones((2, 2))
    b = mx.broadcast_to(a, (5, 2, 2))
    a_np = np.array(a, copy=False)
    b_np = np.array(b, copy=False)
    assert not a_np.flags.owndata and a_np.flags.writeable
    assert b_np.strides == (0, 8, 4)
    m = memoryview(mx.arange(6).reshape(2, 3).T)
    assert not m.readonly and m.strides == (4, 12) and m.format == "i"
    a_np[0, 1] = 5.0
    assert a.tolist() == [[1.0, 5.0], [1.0, 1.0]]
    assert np.array(a).flags.owndata  # np.array copies by default


# ---- compile: donation on the first call, fused kernels' names ----

@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_compile_first_call_donates_its_input(mx):
    f = mx.compile(lambda x: mx.sin(x) + 1)
    for _ in range(2):  # the first call (which traces) too
        x = mx.arange(16, dtype=mx.float32)
        mx.eval(x)
        want = np.sin(np.arange(16, dtype=np.float32)) + 1
        ptr = np.asarray(x, copy=False).__array_interface__["data"][0]
        out = f(x)
        del x
        mx.eval(out)
        assert np.asarray(out, copy=False).__array_interface__["data"][0] == ptr
        assert np.allclose(np.array(out), want, atol=1e-6)


@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_export_to_dot_names_fused_kernels(mx, rng):
    import io

    def fun(x, y, z):
        yy = mx.broadcast_to(y, z.shape)
        return x + yy * z, yy.sum()

    a, c = (mx.array(rng.standard_normal((10, 10)).astype(np.float32)) for _ in range(2))
    b = mx.array(np.float32(rng.standard_normal()))
    d = mx.compile(fun)(a, b, c)
    s = io.StringIO()
    mx.export_to_dot(s, a=a, b=b, c=c, d1=d[0], d2=d[1])  # named arrays only: still walked
    assert "CompiledBroadcastMultiplyAdd" in s.getvalue()
    an, bn, cn = np.array(a), np.array(b), np.array(c)
    assert np.allclose(np.array(d[0]), an + bn * cn, atol=1e-6)
    assert np.allclose(d[1].item(), bn * 100, rtol=1e-5)


# ---- shapeless compile over reductions ----

@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_shapeless_compile_replays_reductions(mx, rng):
    z = [1]

    def fun(x, y):
        return x + y.sum(0, keepdims=True) + z[0]

    cfun = mx.compile(fun, shapeless=True)
    assert cfun(mx.ones((2, 2), mx.int32), mx.ones((2, 2), mx.int32)).tolist() == [[4, 4]] * 2
    z[0] = 2  # not traced again for another shape of the same rank: z stays 1
    assert cfun(mx.ones((3, 3), mx.int32), mx.ones((3, 3), mx.int32)).tolist() == [[5] * 3] * 3

    g = mx.compile(lambda x: x * x.sum(-1, keepdims=True), shapeless=True)
    for shape in [(3, 2), (1, 2), (2, 2)]:
        xn = rng.standard_normal(shape).astype(np.float32)
        got = np.array(g(mx.array(xn)))
        assert got.shape == shape and np.allclose(got, xn * xn.sum(-1, keepdims=True), atol=1e-5)


def test_shapeless_mean_counts_each_call_and_max_of_an_empty_axis_is_an_error(rng):
    """nuvec only: MLX 0.32.4's shapeless reductions keep traced sizes (its mean, a sum to
    another length) and crash the process on some shapes, so it is no reference here."""
    import nuvec

    g = nuvec.compile(lambda x: x * x.max(-1, keepdims=True) - x.sum(0), shapeless=True)
    for shape in [(3, 2), (1, 2), (4, 5)]:
        xn = rng.standard_normal(shape).astype(np.float32)
        want = xn * xn.max(-1, keepdims=True) - xn.sum(0)
        assert np.allclose(np.array(g(nuvec.array(xn))), want, atol=1e-5)
    h = nuvec.compile(lambda x: x.sum(1), shapeless=True)
    assert h(nuvec.ones((2, 3))).tolist() == [3.0, 3.0]
    assert h(nuvec.ones((4, 1))).tolist() == [1.0] * 4

    m = nuvec.compile(lambda x: x - x.mean(0), shapeless=True)
    for shape in [(3, 2), (1, 2), (4, 5)]:
        xn = rng.standard_normal(shape).astype(np.float32)
        assert np.allclose(np.array(m(nuvec.array(xn))), xn - xn.mean(0), atol=1e-5)

    f = nuvec.compile(lambda x: x.max(1) + 1, shapeless=True)
    assert f(nuvec.ones((2, 3))).tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match="empty axis"):
        nuvec.eval(f(nuvec.ones((2, 0))))


# ---- shapeless compile over reshape ----

@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_shapeless_reshape_infers_its_minus_one_again(mx):
    f = mx.compile(lambda x: x.reshape(x.shape[0] * x.shape[1], -1), shapeless=True)
    assert f(mx.zeros((2, 3, 4))).shape == (6, 4)
    out = f(mx.arange(48).reshape(2, 3, 8))  # the traced 6 kept, the -1 inferred: 8
    assert out.shape == (6, 8) and out.tolist() == np.arange(48).reshape(6, 8).tolist()
    with pytest.raises(ValueError):
        f(mx.zeros((5, 5, 5)))  # 125 elements are no multiple of 6
    t = mx.arange(48).reshape(8, 3, 2).transpose(2, 1, 0)  # not row-contiguous: copied
    assert f(t).tolist() == np.arange(48).reshape(8, 3, 2).transpose(2, 1, 0).reshape(6, 8).tolist()
