"""nv_compile on the GPU against the CPU: an element-wise chain (with casts, where, broadcasting
and repeated subexpressions), a chain ending in a row sum, and the gradient of a compiled
function, each compiled and called twice (the second call replays the cached trace) with the
GPU as the default device, over the float dtypes and contiguous / transposed / strided /
reversed inputs, equal to the same functions run on the CPU; nothing may run through the CPU
fallback, and each function is traced once per signature."""
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
    _fields_ = [(n, C.c_size_t) for n in ("calls", "traces", "entries", "traced_nodes", "nodes", "fused")]


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
for _n in ("nv_multiply", "nv_add", "nv_subtract", "nv_greater"):
    sig(_n, P, P, P)
for _n in ("nv_exp", "nv_tanh", "nv_abs", "nv_negative", "nv_sigmoid", "nv_sin"):
    sig(_n, P, P)
sig("nv_where", P, P, P, P)
sig("nv_weak_scalar", P, C.c_double)
sig("nv_astype", P, P, I)
sig("nv_sum", P, P, IP, I, C.c_bool)

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
