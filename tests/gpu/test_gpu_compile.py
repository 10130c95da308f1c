"""nv_compile on the GPU against the CPU: an element-wise chain (with casts, where, broadcasting
and repeated subexpressions), a chain ending in a row sum, and the gradient of a compiled
function, each compiled and called twice (the second call replays the cached trace) with the
GPU as the default device, over the float dtypes and contiguous / transposed / strided /
reversed inputs, equal to the same functions run on the CPU; nothing may run through the CPU
fallback, and each function is traced once per signature.

Fusion on the GPU (generated CUDA kernels through NVRTC, src/cuda/compiled.c): for known chains
the fused kernel count equals the CPU's, and the compiled results equal the uncompiled GPU run
(bit for bit for arithmetic, casts, comparisons and where; within float tolerance for
transcendental chains and the row reductions, which accumulate in double) over every float dtype
(float16/bfloat16 computed in float32 and rounded after each operation, 8 elements a step
through 16-byte loads) and contiguous / offset (a misaligned start: the scalar path) /
transposed / strided / broadcast inputs, multi-output chains, chains ending in a row sum, max
or mean (a warp per short row, a block per long one); float16/bfloat16 chains equal the CPU's
fused ones bit for bit, also when the chain writes into a donated intermediate (a matmul's
result); the CUBIN cache on disk reused by a second process; NVRTC failing (an invalid
architecture) leaves the chains unfused with one warning."""
import ctypes as C
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import needs_gpu, On, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import CODE, FLOATS, Session, assert_close, lib, nv_name, ref64, sig  # noqa: E402

P = C.c_void_p
I = C.c_int
IP = C.POINTER(C.c_int)
BODY = C.CFUNCTYPE(I, P, P, P)


class Stats(C.Structure):
    _fields_ = [(n, C.c_size_t) for n in ("calls", "traces", "entries", "traced_nodes", "nodes", "fused",
                                           "fused_layouts")]


class Options(C.Structure):
    _fields_ = [("shapeless", C.c_bool), ("inputs", P), ("outputs", P)]


sig("nv_closure_new", P, BODY, P, P)
sig("nv_closure_release", None, P)
sig("nv_closure_apply", I, P, P, P)
sig("nv_compile", P, P, P)
sig("nv_compile_get_stats", I, P, C.POINTER(Stats))
sig("nv_grad", P, P, IP, C.c_size_t)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_push", I, P, P)
sig("nv_vec_get", P, P, C.c_size_t)
sig("nv_vec_size", C.c_size_t, P)
for _n in ("nv_multiply", "nv_add", "nv_subtract", "nv_greater", "nv_maximum", "nv_less",
           "nv_matmul"):
    sig(_n, P, P, P)
for _n in ("nv_exp", "nv_tanh", "nv_abs", "nv_negative", "nv_sigmoid", "nv_sin"):
    sig(_n, P, P)
sig("nv_where", P, P, P, P)
sig("nv_weak_scalar", P, C.c_double)
sig("nv_astype", P, P, I)
sig("nv_sum", P, P, IP, I, C.c_bool)
sig("nv_max", P, P, IP, I, C.c_bool)
sig("nv_mean", P, P, IP, I, C.c_bool)

pytestmark = needs_gpu


def chain(x, y):
    a = lib.nv_add(lib.nv_multiply(lib.nv_exp(lib.nv_negative(lib.nv_abs(x))), y), lib.nv_weak_scalar(0.5))
    t = lib.nv_tanh(a)
    b = lib.nv_add(lib.nv_multiply(t, lib.nv_tanh(a)), lib.nv_multiply(lib.nv_sigmoid(x), lib.nv_weak_scalar(2.0)))
    return [lib.nv_subtract(lib.nv_where(lib.nv_greater(b, lib.nv_weak_scalar(1.0)), b, a), y)]


def row_sum(x, y):
    ax = (C.c_int * 1)(-1)
    return [lib.nv_sum(lib.nv_exp(lib.nv_add(lib.nv_multiply(x, y), lib.nv_weak_scalar(0.25))), ax, 1, False)]


def loss(x, y):
    return [lib.nv_sum(lib.nv_multiply(lib.nv_sin(x), y), None, 0, False)]


FUNS = {"chain": chain, "row_sum": row_sum, "loss": loss}
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]


class Fn:
    """A C closure over one of FUNS (kept alive with its callback), optionally compiled."""

    def __init__(self, name, compiled, grad=False):
        f = FUNS[name]

        def body(payload, inputs, outputs):
            outs = f(lib.nv_vec_get(inputs, 0), lib.nv_vec_get(inputs, 1))
            for o in outs:
                if lib.nv_vec_push(outputs, o) != 0:
                    return 1
            return 0

        self.cb = BODY(body)
        self.raw = lib.nv_closure_new(self.cb, None, None)
        self.fn = lib.nv_compile(self.raw, None) if compiled else self.raw
        self.compiled = self.fn if compiled else None
        if grad:
            g = lib.nv_grad(self.fn, None, 0)
            self.outer = g
        else:
            self.outer = self.fn

    def __call__(self, s, x, y):
        vin, vout = lib.nv_vec_new(), lib.nv_vec_new()
        lib.nv_vec_push(vin, x)
        lib.nv_vec_push(vin, y)
        st = lib.nv_closure_apply(self.outer, vin, vout)
        assert st == 0, lib.nv_last_error().decode()
        r = s.read(lib.nv_vec_get(vout, 0))
        lib.nv_vec_free(vin)
        lib.nv_vec_free(vout)
        return r

    def traces(self):
        st = Stats()
        assert lib.nv_compile_get_stats(self.compiled, C.byref(st)) == 0
        return st.traces

    def close(self):
        if self.outer != self.fn:
            lib.nv_closure_release(self.outer)
        if self.fn != self.raw:
            lib.nv_closure_release(self.fn)
        lib.nv_closure_release(self.raw)


CASES = [(f, d, l) for f in FUNS for d in FLOATS for l in LAYOUTS]


@pytest.mark.parametrize("fun,dtype,layout", sample(CASES, 24, 17))
def test_compiled_on_gpu_equals_cpu(rng, fun, dtype, layout):
    x = rng.standard_normal((6, 33)).astype(np.float32)
    y = rng.standard_normal((33,)).astype(np.float32)
    want, got = {}, {}
    for where in ("cpu", "gpu"):
        with Session() as s, On(where):
            xs = s.view(x.astype(np.float64), layout)
            xs = s.own(lib.nv_astype(xs, CODE[dtype]))
            ys = s.own(lib.nv_astype(s.array(y), lib.nv_array_dtype(xs)))
            fn = Fn(fun, compiled=where == "gpu", grad=fun == "loss")
            before = lib.nv_gpu_fallback_count()
            r1 = fn(s, xs, ys)
            r2 = fn(s, xs, ys)
            if where == "gpu":
                assert lib.nv_gpu_fallback_count() == before
                assert fn.traces() == 1
                got[where] = (r1, r2)
            else:
                want[where] = r1
            fn.close()
    w = want["cpu"]
    for r in got["gpu"]:
        assert_close(r, ref64(w), nv_name(r.dtype), rtol=5e-2 if dtype in ("float16", "bfloat16") else 1e-4,
                     atol=5e-2 if dtype in ("float16", "bfloat16") else 1e-5)


# ---- Fusion into generated CUDA kernels ----

W = lib.nv_weak_scalar


def _axis(a):
    return (C.c_int * 1)(a)


def f_axpy(x, y, z):
    return [lib.nv_add(lib.nv_multiply(x, y), z)]


def f_multi(x, y, z):
    t = lib.nv_multiply(x, y)  # escapes: an output besides the root
    return [lib.nv_maximum(lib.nv_add(t, z), W(-0.25)), t]


def f_where_cast(x, y, z):
    m = lib.nv_greater(x, y)
    a = lib.nv_multiply(lib.nv_astype(x, CODE["float64"]), W(3.0))
    b = lib.nv_subtract(lib.nv_astype(z, CODE["float64"]), W(1.0))
    return [lib.nv_astype(lib.nv_where(m, a, b), lib.nv_array_dtype(x)), lib.nv_less(z, y)]


def f_chain(x, y, z):
    a = lib.nv_add(lib.nv_multiply(lib.nv_exp(lib.nv_negative(lib.nv_abs(x))), y), z)
    return [lib.nv_subtract(lib.nv_multiply(lib.nv_tanh(a), lib.nv_sigmoid(x)), lib.nv_sin(a))]


def f_row_sum(x, y, z):
    return [lib.nv_sum(lib.nv_exp(lib.nv_add(lib.nv_multiply(x, y), W(0.25))), _axis(-1), 1, False)]


def f_row_max(x, y, z):
    return [lib.nv_max(lib.nv_subtract(lib.nv_multiply(x, y), z), _axis(-1), 1, True)]


def f_row_mean(x, y, z):
    t = lib.nv_add(lib.nv_multiply(x, x), y)  # escapes too
    return [lib.nv_mean(t, _axis(1), 1, False), t]


def f_all_sum(x, y, z):
    return [lib.nv_sum(lib.nv_multiply(x, y), None, 0, False)]


# name: (function, exact, fused kernels for float32/float64 row-contiguous inputs; None: it
# depends on the dtype and the broadcast, only the CPU's count is compared)
FUSED = {"axpy": (f_axpy, True, 1), "multi": (f_multi, True, 1),
         "where_cast": (f_where_cast, True, None), "chain": (f_chain, False, 1),
         "row_sum": (f_row_sum, False, 1), "row_max": (f_row_max, False, 1),
         "row_mean": (f_row_mean, False, 1), "all_sum": (f_all_sum, False, 1)}
# How y and z are shaped against x (R, D): a row (D,) and a whole array; a column (R, 1) and a
# scalar.
BROADCASTS = ["row", "column"]
FLAYOUTS = ["contiguous", "offset", "transposed", "strided"]


class Body:
    """A C closure over a function of three arrays, uncompiled or compiled."""

    def __init__(self, f, compiled, shapeless=False):
        def body(payload, inputs, outputs):
            for o in f(*(lib.nv_vec_get(inputs, i) for i in range(3))):
                if lib.nv_vec_push(outputs, o) != 0:
                    return 1
            return 0

        self.cb = BODY(body)
        self.raw = lib.nv_closure_new(self.cb, None, None)
        self.opts = Options(shapeless, None, None)
        self.fn = lib.nv_compile(self.raw, C.byref(self.opts)) if compiled else self.raw

    def __call__(self, s, *args):
        vin, vout = lib.nv_vec_new(), lib.nv_vec_new()
        for a in args:
            lib.nv_vec_push(vin, a)
        st = lib.nv_closure_apply(self.fn, vin, vout)
        assert st == 0, lib.nv_last_error().decode()
        r = [s.read(lib.nv_vec_get(vout, i)) for i in range(lib.nv_vec_size(vout))]
        lib.nv_vec_free(vin)
        lib.nv_vec_free(vout)
        return r

    def stats(self):
        st = Stats()
        assert lib.nv_compile_get_stats(self.fn, C.byref(st)) == 0
        return st

    def fused(self):
        return self.stats().fused

    def close(self):
        if self.fn != self.raw:
            lib.nv_closure_release(self.fn)
        lib.nv_closure_release(self.raw)


def _inputs(s, rng, dtype, layout, bcast, shape):
    """x of `shape` laid out as `layout` says in `dtype` (the layout made after the cast, which
    would make a contiguous copy), y and z as `bcast` says."""
    r, d = shape
    x = rng.standard_normal(shape)
    x[0, :3] = [np.nan, np.inf, -np.inf]
    cast = lambda a: s.own(lib.nv_astype(s.array(a), CODE[dtype]))  # noqa: E731
    ints = lambda v: (C.c_int * len(v))(*v)  # noqa: E731
    if layout == "contiguous":
        xs = cast(x)
    elif layout == "offset":  # from the second row: element 0 is not 16-byte aligned
        base = cast(np.concatenate([np.zeros((1, d)), x]))
        xs = s.own(lib.nv_slice(base, ints([1, 0]), ints([r + 1, d]), ints([1, 1]), 2))
    elif layout == "transposed":
        xs = s.own(lib.nv_transpose(cast(np.ascontiguousarray(x.T)), None, 0))
    else:  # strided: every second element of a larger array
        big = np.zeros((2 * r, 2 * d))
        big[::2, ::2] = x
        xs = s.own(lib.nv_slice(cast(big), ints([0, 0]), ints([2 * r, 2 * d]), ints([2, 2]), 2))
    if bcast == "row":
        y, z = rng.standard_normal((d,)), rng.standard_normal(shape)
    else:
        y, z = rng.standard_normal((r, 1)), np.array(0.5)
    return xs, cast(y), cast(z)


FCASES = [(n, d, l, b) for n in FUSED for d in FLOATS for l in FLAYOUTS for b in BROADCASTS]


@pytest.mark.parametrize("name,dtype,layout,bcast", sample(FCASES, 40, 23))
def test_fused_on_gpu_equals_unfused(rng, name, dtype, layout, bcast):
    f, exact, want_fused = FUSED[name]
    # Rows of 45 (a warp per row in the reductions, element by element), 300 (a block per row,
    # 4-wide vector steps for whole rows) or 4100 (several vector steps a thread, the last
    # partial); 4k+1 elements leave a tail after the element-wise chains' vector loop.
    shape = [(65, 45), (7, 300), (5, 4100)][rng.integers(3)]
    data = rng.integers(2**31)
    counts = {}
    for where in ("cpu", "gpu"):
        with Session() as s, On(where):
            args = _inputs(s, np.random.default_rng(data), dtype, layout, bcast, shape)
            plain, comp = Body(f, False), Body(f, True)
            before = lib.nv_gpu_fallback_count()
            want = plain(s, *args)
            got1, got2 = comp(s, *args), comp(s, *args)  # the second call replays
            counts[where] = comp.fused()
            if where == "gpu":
                assert lib.nv_gpu_fallback_count() == before
                for got in (got1, got2):
                    assert len(got) == len(want)
                    for g, w in zip(got, want):
                        if exact or g.dtype == np.bool_:
                            assert g.dtype == w.dtype and g.shape == w.shape
                            assert np.array_equal(g.view(np.uint8), w.view(np.uint8)), name
                        else:
                            assert_close(g, ref64(w), nv_name(w.dtype),
                                         rtol=2e-5 if dtype == "float32" else None,
                                         atol=2e-5 if dtype == "float32" else None)
            plain.close()
            comp.close()
    # The same chains fuse on both devices: all of them where every input is row-contiguous
    # (else parts, or none); float16/bfloat16 chains end before a reduction (which runs on the
    # hand kernel), so a lone product before a whole-array sum stays unfused.
    assert counts["gpu"] == counts["cpu"]
    whole = layout in ("contiguous", "offset")
    if dtype in ("float16", "bfloat16") and name == "all_sum":
        want_fused = 0
    if want_fused is not None and whole:
        assert counts["gpu"] == want_fused


SHAPELESS = ["axpy", "multi", "chain", "row_sum", "row_max", "row_mean"]


@pytest.mark.parametrize("name,dtype", sample([(n, d) for n in SHAPELESS for d in FLOATS], 16, 29))
def test_shapeless_fused_on_gpu_equals_unfused(rng, name, dtype):
    """A shapeless compiled function called with rows of other lengths and counts: each call's
    chains fused for its layout class (generated once per class, sizes passed at run time),
    equal to the unfused GPU run; a transposed input replays unfused, the next contiguous call
    fuses again."""
    f, exact, _ = FUSED[name]
    with Session() as s, On("gpu"):
        plain, comp = Body(f, False), Body(f, True, shapeless=True)
        before = lib.nv_gpu_fallback_count()
        for shape, layout in [((65, 45), "contiguous"), ((7, 300), "contiguous"),
                              ((5, 4100), "contiguous"), ((9, 33), "transposed"),
                              ((3, 4), "contiguous"), ((130, 45), "offset")]:
            args = _inputs(s, rng, dtype, layout, "row", shape)
            want, got = plain(s, *args), comp(s, *args)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape, (name, shape)
                if exact or g.dtype == np.bool_:
                    assert np.array_equal(g.view(np.uint8), w.view(np.uint8)), (name, shape)
                else:
                    assert_close(g, ref64(w), nv_name(w.dtype),
                                 rtol=2e-5 if dtype == "float32" else None,
                                 atol=2e-5 if dtype == "float32" else None)
            st = comp.stats()
            if layout == "contiguous" and dtype in ("float32", "float64"):
                assert st.fused >= 1, (name, shape)  # this call ran fused kernels
        st = comp.stats()
        assert st.traces == 1
        if dtype in ("float32", "float64"):
            assert 1 <= st.fused_layouts <= 4, st.fused_layouts  # classes, not shapes
        assert lib.nv_gpu_fallback_count() == before
        plain.close()
        comp.close()


def f_step(x, w, b):
    """maximum(x @ w * 0.5 + b, 0) and x @ w * 2: a fused chain reading a matmul's result, which
    only the chain reads (the evaluation donates it: output 0 is written into its buffer)."""
    h = lib.nv_matmul(x, w)
    y = lib.nv_maximum(lib.nv_add(lib.nv_multiply(h, W(0.5)), b), W(0.0))
    return [y]


HALF_CASES = [(n, d, s) for n in ("axpy", "multi", "where_cast", "step") for d in ("float16", "bfloat16")
              for s in ((65, 45), (7, 300), (3, 8), (1, 5))]


@pytest.mark.parametrize("name,dtype,shape", HALF_CASES)
def test_half_chains_on_gpu_equal_cpu_bit_for_bit(rng, name, dtype, shape):
    """float16/bfloat16 chains compute the same float32 operations, rounded after each, on both
    devices: the GPU's fused results equal the GPU's unfused ones bit for bit and the CPU's
    fused ones value for value (vector path with a tail of 4k+1 / 300 / 24 / 5 elements), with
    one fused kernel."""
    data = rng.integers(2**31)
    got = {}
    for where in ("cpu", "gpu"):
        with Session() as s, On(where):
            r = np.random.default_rng(data)
            cast = lambda a: s.own(lib.nv_astype(s.array(a), CODE[dtype]))  # noqa: E731
            if name == "step":
                f = f_step
                k = 24
                args = (cast(r.standard_normal((shape[0], k))), cast(r.standard_normal((k, shape[1]))),
                        cast(r.standard_normal(shape[1:])))
            else:
                f = FUSED[name][0]
                x = r.standard_normal(shape) * 4
                x.flat[:3] = [np.nan, np.inf, 70000.0]
                args = (cast(x), cast(r.standard_normal(shape[1:])), cast(r.standard_normal(shape)))
            plain, comp = Body(f, False), Body(f, True)
            before = lib.nv_gpu_fallback_count()
            want = plain(s, *args)
            outs = [comp(s, *args), comp(s, *args)]
            if where == "gpu":
                assert lib.nv_gpu_fallback_count() == before
                for o in outs:
                    for g, w in zip(o, want):
                        assert g.dtype == w.dtype and np.array_equal(g.view(np.uint8), w.view(np.uint8))
            assert comp.fused() == 1
            got[where] = outs[0]
            plain.close()
            comp.close()
    if name == "step":
        return  # cuBLASLt's products are not the CPU's bit for bit
    # NaN bits differ across devices (the GPU's arithmetic makes the canonical NaN, x86 keeps
    # the operand's payload): values equal, NaN where NaN.
    for g, c in zip(got["gpu"], got["cpu"]):
        assert g.dtype == c.dtype
        assert np.array_equal(g.astype(np.float64), c.astype(np.float64), equal_nan=True), name


def child():
    """Run by test_gpu_disk_cache_and_nvrtc_failure in a fresh process: x*y+z compiled on the
    GPU, checked against NumPy; prints the fused kernel count."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with Session() as s, On("gpu"):
        args = [s.array(x), s.array(x[0] * 0.5), s.array(np.ones((3, 4), np.float32))]
        comp = Body(f_axpy, True)
        r = comp(s, *args)[0]
        assert np.array_equal(r, x * (x[0] * 0.5) + 1)
        print(comp.fused())
        comp.close()


def test_gpu_disk_cache_and_nvrtc_failure(tmp_path):
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import sys; sys.path.insert(0, {here!r}); import test_gpu_compile as t; t.child()"

    def run(cache, **extra):
        env = dict(os.environ, XDG_CACHE_HOME=str(cache), NUVEC_DEFAULT_DEVICE="gpu", **extra)
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=120)

    p = run(tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
    files = sorted((tmp_path / "nuvec").iterdir())
    assert [f.suffix for f in files] == [".cubin"]
    mtime = files[0].stat().st_mtime_ns
    p = run(tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
    assert sorted((tmp_path / "nuvec").iterdir()) == files and files[0].stat().st_mtime_ns == mtime
    # NVRTC failing (an architecture it rejects): one warning, unfused, the same values.
    p = run(tmp_path / "bad", NUVEC_NVRTC_ARCH="sm_bogus")
    assert p.returncode == 0 and p.stdout.strip() == "0", p.stderr
    assert p.stderr.count("NVRTC could not build a fused GPU kernel") == 1, p.stderr
