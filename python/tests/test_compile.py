"""nuvec.compile as mlx.core.compile: compiled equals uncompiled over element-wise ops and
dtypes, broadcasting and strided inputs, pytrees and keyword arguments, constants (retraced
when they change), captured state (inputs= / outputs=), shapeless, a changing output
structure, grad/vmap of compile and compile of grad, disable/enable_compile, exceptions, and
MLX's own results where mlx.core imports."""
import functools

import numpy as np
import pytest

import nuvec as nv
from conftest import assert_close
from conftest import rand as np_rand


def rand(rng, shape, dtype):
    """Seeded random values as a nuvec array (NumPy arguments would be constants)."""
    a = nv.array(np_rand(rng, shape, dtype))
    return a if a.dtype == getattr(nv, dtype) else a.astype(getattr(nv, dtype))

HALVES = ["float16", "bfloat16"]
UNARY = ["abs", "exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "sigmoid", "negative", "square",
         "sqrt", "erf"]


def chain(x, y):
    """A chain of element-wise ops, casts and broadcasts, with repeated subexpressions."""
    a = nv.exp(-nv.abs(x)) * y + 0.5
    b = nv.tanh(a) * nv.tanh(a) + nv.sigmoid(x) * 2.0
    return nv.where(b > 1.0, b, a).astype(nv.float32) - y


def gelu(x):
    return 0.5 * x * (1 + nv.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_unary_chains_equal_uncompiled(rng, op, dtype):
    def f(x):
        return getattr(nv, op)(nv.abs(x) + 0.25) * 2 + 1

    x = rand(rng, (3, 5), dtype)
    c = nv.compile(f)
    for _ in range(2):
        r, e = np.array(c(x)), np.array(f(x))
        # Fused float32 (float16, bfloat16) functions are the hand kernels' fast formulas,
        # float64 ones libm's as theirs: the same arithmetic, bit for bit.
        assert np.array_equal(r, e, equal_nan=True), (op, dtype)


EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-40, 1e-20, -1e-20, 0.5, -0.6, 1.0, -1.0,
         3.92, -9.02, 20.0, 88.72, 88.73, -87.4, -103.9, -105.0, 1e30, -3e38, 2.0**20, -(2.0**20),
         1048575.9, 5e6, -123456789.0, 3.4e38]


@pytest.mark.parametrize("op", ["exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "sigmoid",
                                "erf"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_transcendental_edges_equal_uncompiled(op, dtype):
    """The fused functions at their edge values (NaN, infinities, zeros, subnormals, overflow,
    sin/cos past 2^20 where the fast formula hands over to libm, in blocks of the vector loop
    and its tail) equal the hand kernels bit for bit; an input the call releases may be
    donated, and a sin/cos chain that takes the second pass must not overwrite it."""
    vals = np.array(EDGES * 3, dtype=np.float64)
    fn = getattr(nv, op)

    def f(x):
        return fn(x * 1.0 + 0.0) * 2.0

    c = nv.compile(f)
    for n in (len(vals), 16, 7):
        want = np.array(f(nv.array(vals[:n]).astype(getattr(nv, dtype))))
        for _ in range(2):  # the trace, then a replay
            got = np.array(c(nv.array(vals[:n]).astype(getattr(nv, dtype))))
            assert np.array_equal(got, want, equal_nan=True), (op, dtype, n, got, want)
    assert c._stats["fused"] == 1


def test_large_sin_arguments_in_a_chain_with_escapes():
    """A sin chain whose intermediate escapes and whose arguments pass 2^20 in one element: the
    second, exact pass rewrites every output."""
    x = np.linspace(-50, 50, 1000).astype(np.float32)
    x[517] = 3e7

    def f(a):
        t = a * 3.0
        return nv.sin(t) + nv.cos(t * 0.5), t

    c = nv.compile(f)
    for _ in range(2):
        got, want = c(nv.array(x)), f(nv.array(x))
        for g, w in zip(got, want):
            assert np.array_equal(np.array(g), np.array(w))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shapeless", [False, True])
def test_large_sin_arguments_with_a_donated_input(dtype, shapeless):
    """A sin/cos chain donated its input (output 0 written into the input's buffer) whose
    arguments pass 2^20 in some chunks of the range: each such chunk is put back before its
    exact pass, so the result equals the uncompiled one and the buffer is still donated."""
    x = np.linspace(-50, 50, 5000).astype(np.float32)
    x[[3, 1500, 1501, 4999]] = [3e7, -1e9, 2.5e6, 7e8]

    def f(a):
        return nv.cos(nv.sin(a * 1.0) * 1e7) + 1.0

    c = nv.compile(f, shapeless=shapeless)
    want = np.array(f(nv.array(x).astype(getattr(nv, dtype))).astype(nv.float32))
    for _ in range(2):  # the trace, then a replay
        a = nv.array(x).astype(getattr(nv, dtype))
        nv.eval(a)
        ptr = np.asarray(a.view(nv.uint16) if dtype == "bfloat16" else a,
                         copy=False).__array_interface__["data"][0]
        out = c(a)
        del a
        nv.eval(out)
        got = out.astype(nv.float32)
        assert np.array_equal(np.array(got), want), dtype
        raw = out.view(nv.uint16) if dtype == "bfloat16" else out
        assert np.asarray(raw, copy=False).__array_interface__["data"][0] == ptr


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int64", "bool_"])
def test_integer_and_bool_graphs(rng, dtype):
    def f(x, y):
        return (x + y) * y - (x > y).astype(x.dtype) if dtype != "bool_" else nv.logical_xor(x, y) | x

    x, y = rand(rng, (4, 6), dtype), rand(rng, (6,), dtype)
    c = nv.compile(f)
    assert np.array_equal(np.array(c(x, y)), np.array(f(x, y)))
    assert np.array_equal(np.array(c(y, x)), np.array(f(y, x)))


def test_broadcasting_strided_and_scalars(rng):
    x = rand(rng, (6, 4), "float32")
    y = rand(rng, (4,), "float32")
    y6 = rand(rng, (8,), "float32")[::-1][1:7]
    c = nv.compile(chain)
    for a, b in [(x, y), (x.T[::2], y6), (x[::-1, ::2], nv.array(0.5)), (x[1], y)]:
        assert_close(np.array(c(a, b)), np.array(chain(a, b)), "float32")
    assert_close(np.array(c(x, y)), np.array(chain(x, y)), "float32")


def test_inf_nan_constants():
    def f(x):
        return nv.maximum(x, -np.inf) + nv.where(nv.isnan(x), np.inf, 0.0) * 0 + x * np.nan

    x = nv.array([1.0, np.nan, -np.inf, np.inf])
    assert np.array_equal(np.array(nv.compile(f)(x)), np.array(f(x)), equal_nan=True)


def test_cache_and_retrace_counts(rng):
    f = nv.compile(lambda x, y: x * y + 1)
    x, y = rand(rng, (3, 4), "float32"), rand(rng, (3, 4), "float32")
    for _ in range(3):
        f(x, y)
    assert f._stats["traces"] == 1
    f(rand(rng, (2, 2), "float32"), rand(rng, (2, 2), "float32"))
    f(x.astype(nv.float16), y)
    assert f._stats["traces"] == 3


def test_shapeless(rng):
    f = nv.compile(gelu, shapeless=True)
    for shape in [(3, 4), (7, 2), (1, 9)]:
        x = rand(rng, shape, "float32")
        assert_close(np.array(f(x)), np.array(gelu(x)), "float32")
    assert f._stats["traces"] == 1
    g = nv.compile(lambda x: x.reshape(-1) * 2, shapeless=True)
    assert g(nv.ones((2, 3))).shape == (6,)
    assert g(nv.ones((4, 3))).shape == (12,)


def test_pytrees_kwargs_and_constants(rng):
    calls = []

    def f(d, scale=1.0, *, bias):
        calls.append(1)
        return {"y": d["x"] * scale + bias, "n": [d["x"].sum(), d["z"]]}

    c = nv.compile(f)
    d = {"x": rand(rng, (5,), "float32"), "z": rand(rng, (2,), "float32")}
    b = nv.array(0.25)
    for scale in [1.0, 3.0, 3.0, 1.0]:
        r, e = c(d, scale, bias=b), f(d, scale, bias=b)
        assert set(r) == {"y", "n"} and isinstance(r["n"], list)
        assert_close(np.array(r["y"]), np.array(e["y"]), "float32")
        assert_close(np.array(r["n"][0]), np.array(e["n"][0]), "float32")
        assert np.array_equal(np.array(r["n"][1]), np.array(d["z"]))
    assert len(calls) == 2 + 4  # one trace per constant, then four uncompiled calls


def test_changing_output_structure():
    c = nv.compile(lambda x, n: tuple(x * i for i in range(n)))
    assert len(c(nv.ones(2), 2)) == 2
    assert len(c(nv.ones(2), 3)) == 3
    assert [v.tolist() for v in c(nv.ones(2), 2)] == [[0, 0], [1, 1]]


def test_captured_state():
    state = {"count": nv.array(0.0), "hist": [nv.array([0.0, 0.0])]}

    @functools.partial(nv.compile, inputs=state, outputs=state)
    def step(x):
        state["count"] = state["count"] + 1
        state["hist"][0] = state["hist"][0] * 0.5 + x
        return state["count"] * 10

    for i in range(1, 4):
        assert step(nv.array([1.0, 2.0])).item() == 10 * i
    assert state["count"].item() == 3
    assert_close(np.array(state["hist"][0]), np.array([1.75, 3.5]), "float32")
    assert step._stats["traces"] == 1


def test_model_and_optimizer_state(rng):
    nn, optim = nv.nn, nv.optimizers
    model = nn.Linear(4, 2)
    opt = optim.SGD(learning_rate=0.1)
    x, y = rand(rng, (8, 4), "float32"), rand(rng, (8, 2), "float32")

    def loss(m, x, y):
        return ((m(x) - y) ** 2).mean()

    ref = nn.Linear(4, 2)
    ref.update(model.parameters())
    ref_opt = optim.SGD(learning_rate=0.1)
    state = [model.state, opt.state]

    @functools.partial(nv.compile, inputs=state, outputs=state)
    def step(x, y):
        l, g = nn.value_and_grad(model, loss)(model, x, y)
        opt.update(model, g)
        return l

    for _ in range(3):
        l = step(x, y)
        lr, gr = nn.value_and_grad(ref, loss)(ref, x, y)
        ref_opt.update(ref, gr)
        assert_close(np.array(l), np.array(lr), "float32")
    assert_close(np.array(model.weight), np.array(ref.weight), "float32")


def test_grad_vmap_of_compile_and_compile_of_grad(rng):
    f = lambda x: (nv.sin(x) * x).sum()  # noqa: E731
    x = rand(rng, (3, 4), "float32")
    e = np.array(nv.grad(f)(x))
    assert_close(np.array(nv.grad(nv.compile(f))(x)), e, "float32")
    assert_close(np.array(nv.compile(nv.grad(f))(x)), e, "float32")
    v = nv.vmap(nv.compile(f))(x)
    assert_close(np.array(v), np.array(nv.vmap(f)(x)), "float32")


def test_stop_gradient_inside():
    f = nv.compile(lambda x: (nv.stop_gradient(x) * x).sum())
    x = nv.array([1.0, -2.0])
    assert nv.grad(f)(x).tolist() == [1.0, -2.0]
    assert f(x).item() == 5.0


def test_disable_and_enable():
    calls = []

    def f(x):
        calls.append(1)
        return x + 1

    c = nv.compile(f)
    try:
        nv.disable_compile()
        c(nv.ones(2))
        c(nv.ones(2))
        assert len(calls) == 2
    finally:
        nv.enable_compile()
    c(nv.ones(2))
    c(nv.ones(2))
    assert len(calls) == 3


def test_exception_and_eval_inside():
    def bad(x):
        raise KeyError("inside")

    c = nv.compile(bad)
    with pytest.raises(KeyError):
        c(nv.ones(2))
    with pytest.raises(KeyError):  # a failed trace is traced again
        c(nv.ones(2))
    with pytest.raises(Exception, match="compile"):
        nv.compile(lambda x: x + x.item())(nv.ones(()))


def test_method_decorator():
    class M:
        k = 3.0

        @nv.compile
        def f(self, x):
            return x * self.k

    assert M().f(nv.array([1.0, 2.0])).tolist() == [3.0, 6.0]


def test_against_mlx(rng):
    mx = pytest.importorskip("mlx.core")
    xs = rand(rng, (5, 6), "float32")
    ys = rand(rng, (6,), "float32")
    r = nv.compile(chain)(xs, ys)

    def mchain(x, y):
        a = mx.exp(-mx.abs(x)) * y + 0.5
        b = mx.tanh(a) * mx.tanh(a) + mx.sigmoid(x) * 2.0
        return mx.where(b > 1.0, b, a).astype(mx.float32) - y

    m = mx.compile(mchain)(mx.array(np.array(xs)), mx.array(np.array(ys)))
    assert_close(np.array(r), np.array(m), "float32")
    mg = mx.compile(lambda x: (x * x).sum(), shapeless=True)
    ng = nv.compile(lambda x: (x * x).sum(), shapeless=True)
    for shape in [(2,), (3,)]:
        assert np.array(ng(nv.ones(shape))).item() == np.array(mg(mx.ones(shape))).item()


# ---- Fusion into generated kernels (C on the CPU, CUDA through NVRTC on the GPU) ----


# The fusion tests run on the default device (the GPU fuses the same chains); the disk cache
# test checks the CPU's shared objects and its compiler, so it runs on the CPU whatever the
# default device (tests/gpu/test_gpu_compile.py has the GPU's).
CPU_FUSION = ("test_disk_cache_shared_by_processes",)


@pytest.fixture(autouse=True)
def _cpu_for_fusion(request, monkeypatch):
    if not request.node.name.startswith(CPU_FUSION):
        yield
        return
    prev = nv.default_device()
    nv.set_default_device(nv.cpu)
    monkeypatch.setenv("NUVEC_DEFAULT_DEVICE", "cpu")  # the subprocesses' too
    try:
        yield
    finally:
        nv.set_default_device(prev)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_axpy_is_one_kernel_and_exact(rng, dtype):
    f = lambda x, y, z: x * y + z  # noqa: E731
    x, y = rand(rng, (64, 33), dtype), rand(rng, (33,), dtype)
    c = nv.compile(f)
    for z in (rand(rng, (64, 33), dtype), nv.array(0.5, getattr(nv, dtype))):
        r = c(x, y, z)
        assert np.array_equal(np.array(r), np.array(f(x, y, z)))
    assert c._stats["fused"] == 1


def test_fused_chain_within_tolerance(rng):
    x, y = rand(rng, (6, 40), "float32"), rand(rng, (40,), "float32")
    c = nv.compile(chain)
    r = c(x, y)
    assert c._stats["fused"] == 1
    assert_close(np.array(r), np.array(chain(x, y)), "float32")
    g = nv.compile(gelu)
    assert_close(np.array(g(x)), np.array(gelu(x)), "float32")
    assert g._stats["fused"] == 1


def test_fused_comparisons_where_and_casts(rng):
    def f(x, y):
        m = (x > y) | (x < -1.0)
        return nv.where(m, x.astype(nv.float64) * 2, y.astype(nv.float64) - 1).astype(nv.float32), m

    x, y = rand(rng, (5, 7), "float32"), rand(rng, (5, 7), "float32")
    c = nv.compile(f)
    (r, m), (e, em) = c(x, y), f(x, y)
    assert np.array_equal(np.array(r), np.array(e)) and np.array_equal(np.array(m), np.array(em))


def test_fused_bool_arithmetic_stays_logical():
    a = nv.array(np.array([True, True, False, False]))
    b = nv.array(np.array([True, False, True, False]))
    f = lambda a, b: ((a + b) * a + b, nv.maximum(a, b) > nv.minimum(a, b))  # noqa: E731
    c = nv.compile(f)
    for g, w in zip(c(a, b), f(a, b)):
        assert np.array_equal(np.array(g).view(np.uint8), np.array(w).view(np.uint8))


def test_unfusable_layouts_and_modes(rng):
    f = lambda x, y: nv.exp(x) * y + 1  # noqa: E731
    x, y = rand(rng, (8, 6), "float32"), rand(rng, (6, 8), "float32")
    c = nv.compile(f)
    r = c(x.T, y)  # a transposed input is not read by the generated kernels
    assert c._stats["fused"] == 0
    assert_close(np.array(r), np.array(f(x.T, y)), "float32")
    try:
        nv._core._compile_mode(2)  # no_fuse
        d = nv.compile(f)
        assert_close(np.array(d(y, y)), np.array(f(y, y)), "float32")
        assert d._stats["fused"] == 0
    finally:
        nv.enable_compile()


def test_grad_of_a_fused_function(rng):
    f = lambda x: (nv.sin(x) * x + 1).sum()  # noqa: E731
    x = rand(rng, (4, 9), "float32")
    c = nv.compile(f)
    assert_close(np.array(c(x)), np.array(f(x)), "float32")
    assert c._stats["fused"] == 1
    assert_close(np.array(nv.grad(c)(x)), np.array(nv.grad(f)(x)), "float32")


def test_disk_cache_shared_by_processes(tmp_path):
    import os
    import subprocess
    import sys

    script = (
        "import nuvec as nv, numpy as np\n"
        "c = nv.compile(lambda x, y: nv.maximum(x * 3.25, y) - 0.125)\n"
        "x = nv.array(np.arange(12, dtype=np.float32).reshape(3, 4)); y = nv.ones((3, 4))\n"
        "r = np.array(c(x, y))\n"
        "assert np.array_equal(r, np.maximum(np.arange(12).reshape(3, 4) * 3.25, 1) - 0.125)\n"
        "print(c._stats['fused'])\n")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    run = lambda e: subprocess.run([sys.executable, "-c", script], env=e, capture_output=True,  # noqa: E731
                                   text=True, timeout=120)
    p = run(env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "1"
    files = sorted((tmp_path / "nuvec").iterdir())
    assert [f.suffix for f in files] == [".so"]
    mtime = files[0].stat().st_mtime_ns
    p = run(env)
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
    assert sorted((tmp_path / "nuvec").iterdir()) == files and files[0].stat().st_mtime_ns == mtime
    # Without a compiler: one warning, unfused, the same values.
    p = run(dict(env, NUVEC_CC="/nonexistent/cc"))
    assert p.returncode == 0 and p.stdout.strip() == "0", p.stderr
    assert p.stderr.count("no working C compiler") == 1


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_fused_chain_ending_in_a_row_reduction(rng, dtype):
    x, w = rand(rng, (7, 45), dtype), rand(rng, (45,), dtype)
    funs = [lambda x: (x * w + 0.5).exp().sum(-1),
            lambda x: (x * w - 1).max(axis=-1, keepdims=True),
            lambda x: (x * x + w).mean(axis=1),
            lambda x: (x * w).sum()]
    for f in funs:
        c = nv.compile(f)
        r, e = c(x), f(x)
        assert r.shape == e.shape and r.dtype == e.dtype
        assert_close(np.array(r), np.array(e), dtype)
        assert c._stats["fused"] == 1
    # NaN propagates through max; a reduction over the first axis is not fused.
    xn = nv.array(np.array([[1, np.nan, 2], [3, 4, 5]], dtype=np.float32))
    c = nv.compile(lambda x: (x * 2).max(-1))
    r = np.array(c(xn))
    assert np.isnan(r[0]) and r[1] == 10 and c._stats["fused"] == 1
    c = nv.compile(lambda x: nv.exp(x).sum(axis=0))
    assert_close(np.array(c(x)), np.array(nv.exp(x).sum(axis=0)), dtype)
    assert c._stats["fused"] == 0


def test_compile_inside_grad_capturing_a_tracer(rng):
    x = rand(rng, (6,), "float32")

    def outer(p):
        inner = nv.compile(lambda v: (nv.exp(v) * p + p * p).sum())  # p: the outer tracer
        return inner(x)

    p = nv.array(1.5)
    g = nv.grad(outer)(p)
    assert_close(np.array(g), np.array(np.exp(np.array(x)).sum() + 2 * 1.5 * 6), "float32")


def test_disable_compile_environment():
    import os
    import subprocess
    import sys

    script = ("import nuvec as nv\ncalls = []\nc = nv.compile(lambda x: calls.append(1) or x + 1)\n"
              "c(nv.ones(2)); c(nv.ones(2))\nprint(len(calls))\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, NUVEC_DISABLE_COMPILE="1"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "2"


def test_export_to_dot(tmp_path):
    import io

    x, y = nv.array(1.0), nv.array(2.0)
    z = nv.exp(x + y) * y
    path = tmp_path / "g.dot"
    nv.export_to_dot(str(path), z, x=x, y=y)
    text = path.read_text()
    assert text.startswith("digraph {") and text.rstrip().endswith("}")
    assert '{ rank=source; "x"; }' in text and '{ rank=source; "y"; }' in text
    labels = [line.split('label ="')[1].split('"')[0] for line in text.splitlines() if "label" in line]
    assert labels == ["Add", "Exp", "Multiply"]
    assert text.count("->") == 8 and text.count("rank=sink") == 1
    s = io.StringIO()
    nv.export_to_dot(s, [z, z + 1])
    assert s.getvalue().count("shape=rectangle") == 4
    mx = pytest.importorskip("mlx.core")
    a, b = mx.array(1.0), mx.array(2.0)
    mpath = tmp_path / "m.dot"
    mx.export_to_dot(str(mpath), mx.exp(a + b) * b, x=a, y=b)
    mtext = mpath.read_text()
    assert mtext.count("->") == text.count("->") and mtext.count("rank=") == text.count("rank=")


@pytest.mark.parametrize("shape,bshape", [((1000, 77), (77,)), ((50, 40, 33), (40, 33)),
                                          ((300, 301), (1, 301)), ((1000, 77), (1000, 1)),
                                          ((50, 40, 33), (40, 1)), ((50, 40, 33), (50, 1, 1))])
def test_fused_broadcast_rows_across_pool_chunks(rng, shape, bshape):
    f = lambda x, a, b: (x * a + b) * x - a  # noqa: E731
    x = rand(rng, shape, "float32")
    a, b = rand(rng, bshape, "float32"), rand(rng, shape[-1:], "float32")
    c = nv.compile(f)
    assert np.array_equal(np.array(c(x, a, b)), np.array(f(x, a, b)))
    assert c._stats["fused"] == 1


def test_fused_layer_norm(rng):
    def ln(x, w, b):
        mu = x.mean(axis=-1, keepdims=True)
        d = x - mu
        var = (d * d).mean(axis=-1, keepdims=True)
        return d * nv.rsqrt(var + 1e-5) * w + b

    x, w, b = rand(rng, (64, 96), "float32"), rand(rng, (96,), "float32"), rand(rng, (96,), "float32")
    c = nv.compile(ln)
    assert_close(np.array(c(x, w, b)), np.array(ln(x, w, b)), "float32")
    assert c._stats["fused"] >= 2  # (x - mu, its square's mean) and the normalized output


def test_random_with_a_captured_key():
    def make(state):
        def step():
            k = nv.random.split(state[0])
            state[0] = k[0]
            return nv.random.uniform(shape=(4,), key=k[1])

        return step

    s1, s2 = [nv.random.key(7)], [nv.random.key(7)]
    c = functools.partial(nv.compile, inputs=s1, outputs=s1)(make(s1))
    e = make(s2)
    draws = [np.array(c()) for _ in range(3)]
    for d in draws:
        assert np.array_equal(d, np.array(e()))
    assert not np.array_equal(draws[0], draws[1])  # the key advanced as uncompiled code's
    assert c._stats["traces"] == 1


def test_multi_output_primitives_and_siblings(rng):
    def f(x, y):
        q, r = nv.divmod(x, y)
        return q * 2 + r, r

    x, y = rand(rng, (4, 5), "float32"), nv.abs(rand(rng, (5,), "float32")) + 0.5
    c = nv.compile(f)
    for a, b in zip(c(x, y), f(x, y)):
        assert np.array_equal(np.array(a), np.array(b))


# ---- float16/bfloat16 chains (computed in float32, rounded after every operation) ----


def _bits(a):
    """An array's bits as unsigned integers, for bit-for-bit comparisons (NaN included)."""
    a = np.array(a.astype(nv.float32) if a.dtype in (nv.float16, nv.bfloat16) else a)
    return a.view(np.uint32) if a.dtype == np.float32 else a


def _half_inputs(rng, dtype, shape=(65, 41)):
    x = rng.standard_normal(shape).astype(np.float32) * 4
    x.flat[:4] = [np.nan, np.inf, -np.inf, 70000.0]  # 70000 overflows float16
    cast = lambda a: nv.array(a).astype(getattr(nv, dtype))  # noqa: E731
    return (cast(x), cast(rng.standard_normal(shape[-1:]).astype(np.float32)),
            cast(rng.standard_normal(shape).astype(np.float32)))


HALF_CHAINS = {
    "axpy": lambda x, y, z: x * y + z,
    "arith": lambda x, y, z: nv.maximum(x * y, z) / (nv.abs(z) + 1.0) - nv.square(x) * 0.5,
    "casts": lambda x, y, z: nv.where(x > y, (x.astype(nv.float64) / 3.0).astype(x.dtype),
                                      z.astype(nv.float32).astype(x.dtype)) * 2.0,
    "mixed": lambda x, y, z: (x.astype(nv.float16) + z.astype(nv.bfloat16)) * y,  # to float32
    "sqrt_rsqrt": lambda x, y, z: nv.sqrt(nv.abs(x)) * nv.rsqrt(nv.abs(z) + 0.5) + y,
}


@pytest.mark.parametrize("name", sorted(HALF_CHAINS))
@pytest.mark.parametrize("dtype", HALVES)
def test_half_chains_fuse_bit_exact(rng, name, dtype):
    """Rounding after each operation, as the unfused kernels (and MLX's compile) do, makes the
    fused chain equal the unfused one bit for bit; a whole array, a broadcast row and a scalar
    as inputs, NaN, infinities and float16 overflow among the values."""
    f = HALF_CHAINS[name]
    c = nv.compile(f)
    x, y, z = _half_inputs(rng, dtype)
    for args in ((x, y, z), (x, nv.array(0.75, getattr(nv, dtype)), z)):
        for _ in range(2):  # trace, replay
            r, e = c(*args), f(*args)
            assert r.dtype == e.dtype
            assert np.array_equal(_bits(r), _bits(e)), name
        assert c._stats["fused"] == 1  # one kernel for each signature (the row, the scalar)


@pytest.mark.parametrize("dtype", HALVES)
def test_half_chain_transcendentals_within_an_ulp(rng, dtype):
    """exp, tanh and sigmoid: the fused C kernel calls libm where the hand kernels use fast
    float32 formulas (a few float32 ulp apart), so after rounding a result may differ by one
    ulp of the half format; everything else in the chain is the same arithmetic."""
    f = lambda x, y, z: nv.exp(-nv.abs(x)) * y + nv.tanh(z) - nv.sigmoid(x)  # noqa: E731
    c = nv.compile(f)
    x, y, z = _half_inputs(rng, dtype)
    r, e = np.array(c(x, y, z).astype(nv.float32)), np.array(f(x, y, z).astype(nv.float32))
    assert c._stats["fused"] == 1
    ulp = 2.0 ** (-10 if dtype == "float16" else -7)
    assert (np.isnan(e) == np.isnan(r)).all()
    fin = ~np.isnan(e)
    # Three rounded terms (exp(-|x|) * y up to |y|, tanh and sigmoid up to 1), each a rounding
    # or two off, and the sums' roundings: a few ulp of the terms' magnitude.
    scale = np.maximum(np.abs(e), np.abs(np.array(y.astype(nv.float32))) + 2.0)
    assert ((r == e) | (np.abs(r - e) <= 4 * ulp * scale))[fin].all()


@pytest.mark.parametrize("dtype", HALVES)
def test_half_multi_output_and_strided(rng, dtype):
    """An intermediate used outside the chain is stored in its dtype as a second output; a
    transposed input keeps its chain unfused (same values)."""
    def f(x, y, z):
        t = x * y
        return nv.maximum(t + z, -0.25), t

    x, y, z = _half_inputs(rng, dtype, (40, 40))
    c = nv.compile(f)
    for xs, fused in ((x, 1), (x.T, 0)):
        got, want = c(xs, y, z), f(xs, y, z)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and np.array_equal(_bits(g), _bits(w))
        assert c._stats["fused"] == fused  # the last trace's kernels


@pytest.mark.parametrize("dtype", ["float32"] + HALVES)
def test_compiled_step_writes_into_its_intermediates(rng, dtype):
    """A compiled step whose fused chain reads a matmul's result (an intermediate only the
    chain reads, donated to it: tests/c/test_compile_donation.c counts the donations) gives the
    uncompiled values, and leaves its inputs alone."""
    def step(x, w, b):
        h = x @ w
        return nv.maximum(h * 0.5 + b, 0.0)

    x = rand(rng, (32, 24), dtype)
    w, b = rand(rng, (24, 48), dtype), rand(rng, (48,), dtype)
    x0 = _bits(x).copy()
    c = nv.compile(step)
    for _ in range(3):
        assert np.array_equal(_bits(c(x, w, b)), _bits(step(x, w, b)))
    assert np.array_equal(_bits(x), x0)
    assert c._stats["fused"] == 1


@pytest.mark.parametrize("dtype", HALVES)
def test_half_fusion_against_mlx(rng, dtype):
    """MLX's compile rounds half chains per operation too: its compiled x*y+z and nuvec's agree
    bit for bit."""
    mx = pytest.importorskip("mlx.core")
    x, y, z = _half_inputs(rng, dtype)
    r = nv.compile(HALF_CHAINS["axpy"])(x, y, z)
    m32 = [mx.array(np.array(a.astype(nv.float32))).astype(getattr(mx, dtype)) for a in (x, y, z)]
    m = mx.compile(lambda a, b, c: a * b + c)(*m32)
    mb = np.array(m.astype(mx.float32)).view(np.uint32)
    nb = _bits(r)
    nan = np.isnan(np.array(m.astype(mx.float32)))
    assert np.array_equal(nb[~nan], mb[~nan])
    assert np.isnan(np.array(r.astype(nv.float32))[nan]).all()


def test_compiled_bfloat16_mlp_gradients_equal_uncompiled(rng):
    """value_and_grad of a bfloat16 MLP with erf-GELU (the GPU bench's step, small), compiled:
    its forward and backward element-wise chains fuse, and the loss and every gradient equal the
    uncompiled ones bit for bit."""
    ws = [rand(rng, (32, 32), "float32") * 0.125 for _ in range(3)]
    bs = [rand(rng, (32,), "float32") * 0.01 for _ in range(3)]
    x, y = rand(rng, (16, 32), "float32"), rand(rng, (16, 32), "float32")

    def loss(*a):
        h = a[6].astype(nv.bfloat16)
        for i in range(3):
            h = h @ a[2 * i].astype(nv.bfloat16) + a[2 * i + 1].astype(nv.bfloat16)
            h = (h * 0.5) * (nv.erf(h * 0.70710678118654752) + 1)
        d = h.astype(nv.float32) - a[7]
        return (d * d).mean()

    vg = nv.value_and_grad(loss, argnums=list(range(6)))
    c = nv.compile(vg)
    args = [v for p in zip(ws, bs) for v in p] + [x, y]
    want = vg(*args)
    for _ in range(2):
        got = c(*args)
        assert np.array_equal(np.array(got[0]), np.array(want[0]))
        for g, w in zip(got[1], want[1]):
            assert np.array_equal(np.array(g), np.array(w))
    assert c._stats["fused"] >= 6  # GELU forward and backward per layer, at least


@pytest.mark.parametrize("shapeless", [False, True])
def test_setitem_on_an_argument_replays_over_lengths(shapeless):
    """x[i] = v and x += v inside a compiled function: the updated array belongs to the
    argument object, not to the trace's scope (a later trace used to free it twice)."""

    def f(x):
        x[1] = nv.array([7.0])
        x += 1
        return x

    c = nv.compile(f, shapeless=shapeless)
    for n in (5, 3, 5, 6, 3, 8):
        e = np.arange(n, dtype=np.float32)
        e[1] = 7.0
        r = c(nv.arange(n).astype(nv.float32))
        assert np.array_equal(np.array(r), e + 1)
    assert c._stats["calls"] == 6


def test_compile_refuses_arguments_that_are_no_tree_of_arrays_or_constants():
    class Thing:
        value = 1

    c = nv.compile(lambda x, y: x + y.value)
    with pytest.raises(ValueError, match="received type Thing"):
        c(nv.array(0.0), Thing())
    with pytest.raises(ValueError, match="received type Thing"):
        c(nv.array(0.0), y=Thing())
    # Constants of the accepted kinds, nested, still select traces.
    g = nv.compile(lambda x, t: x * t[0] + t[1]["b"] if t[2] is None else x)
    assert g(nv.array(2.0), (3, {"b": 1.5}, None)).item() == 7.5


def test_compiled_method_binds_its_instance():
    class Scale:
        def __init__(self, k):
            self.k = k

        @nv.compile
        def apply(self, x):
            return x * self.k

    a, b = Scale(2.0), Scale(3.0)
    assert a.apply(nv.array(1.5)).item() == 3.0
    assert b.apply(nv.array(1.5)).item() == 4.5


def test_output_structure_follows_the_dtype_across_replays():
    """One argument structure, two dtypes whose traces return different structures: each
    replay keeps its own (and the captured state updates of each)."""
    state = [nv.array(1.0)]

    def f(y):
        x = state[0]
        if y.dtype == nv.float32:
            state[0] = 2 * y
            return [x, y, x + y]
        state[0] = state[0] * 2
        return x + y

    c = nv.compile(f, inputs=state, outputs=state)
    for _ in range(4):
        r = c(nv.array(1.0))
        assert isinstance(r, list) and len(r) == 3 and r[2].item() == r[0].item() + 1.0
        assert state[0].item() == 2.0
        r = c(nv.array(1, nv.int32))
        assert isinstance(r, nv.array) and r.item() == 3.0
        assert state[0].item() == 4.0
    assert c._stats["traces"] == 2
