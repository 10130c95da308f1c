"""The CUDA backend's random and transforms families on the GPU, against nuvec's own CPU results:
random_bits bit for bit (keys, every width, odd byte counts whose last word is cut, 1 element,
empty, 2^22 words, batched keys through vmap, key views), random_unit bit for bit (float32,
float16, bfloat16), and every sampler built from them with the same key. Samplers made of
exactly rounded ops (uniform, randint, bernoulli, permutation) must match bit for bit; those
that go through libm-style functions (normal and truncated_normal: erfinv/erf, gumbel and
categorical: log, laplace: log1p), whose GPU versions may differ from the CPU's in the last
ulp, match within a few float32 ulps (one or two in float16/bfloat16), categorical's argmax
allowing a rare flip where two noisy logits tie within that error. custom_function's outputs
share their inputs' data (a transposed output too) and its custom vjp runs on the GPU; a vmap
input read inside the mapped function fails with the CPU kernel's message.

Every op is built with the GPU as the default device (skipped where no GPU is usable); the CPU
references are built with the CPU as the default device. Where the whole op chain has CUDA
kernels, nv_gpu_fallback_count() must not change over the GPU evaluation."""
import ctypes as C
import os
import random
import sys
import traceback

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import needs_gpu, On, SEED  # noqa: E402
from nvc import CODE, Session, ints, lib, sig  # noqa: E402


P = C.c_void_p
I = C.c_int
D = C.c_double
IP = C.POINTER(C.c_int)
U64 = C.c_uint64
sig("nv_last_error", C.c_char_p)
sig("nv_eval1", I, P)
sig("nv_transpose", P, P, IP, I)
sig("nv_slice", P, P, IP, IP, IP, I)
sig("nv_broadcast_to", P, P, IP, I)
sig("nv_multiply", P, P, P)
sig("nv_add", P, P, P)
sig("nv_exp", P, P)
sig("nv_copy", P, P)
sig("nv_reshape", P, P, IP, I)
sig("nv_random_seed", None, U64)
sig("nv_random_key", P, U64)
sig("nv_random_split", P, P, I)
sig("nv_random_bits", P, IP, I, I, P)
sig("nv_random_uniform", P, P, P, IP, I, I, P)
sig("nv_random_uniform_scalar", P, D, D, IP, I, I, P)
sig("nv_random_normal", P, IP, I, I, D, D, P)
sig("nv_random_randint_scalar", P, C.c_int64, C.c_int64, IP, I, I, P)
sig("nv_random_bernoulli", P, P, IP, I, P)
sig("nv_random_bernoulli_scalar", P, D, IP, I, P)
sig("nv_random_truncated_normal_scalar", P, D, D, IP, I, I, P)
sig("nv_random_gumbel", P, IP, I, I, P)
sig("nv_random_laplace", P, IP, I, I, D, D, P)
sig("nv_random_categorical", P, P, I, IP, I, P)
sig("nv_random_categorical_samples", P, P, I, I, P)
sig("nv_random_permutation_n", P, I, P)
sig("nv_random_permutation", P, P, I, P)
CLOSURE_FN = C.CFUNCTYPE(I, P, P, P)
sig("nv_closure_new", P, CLOSURE_FN, P, P)
sig("nv_closure_release", None, P)
sig("nv_closure_apply", I, P, P, P)
sig("nv_vmap", P, P, IP, C.c_size_t, IP, C.c_size_t)
sig("nv_custom_function", P, P, P, P, P)
sig("nv_vjp", I, P, P, P, P, P)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_push", I, P, P)
sig("nv_vec_size", C.c_size_t, P)
sig("nv_vec_get", P, P, C.c_size_t)
sig("nv_retain", P, P)

pytestmark = needs_gpu

UNIT_DTYPES = ["float16", "bfloat16", "float32"]
F32_EPS = 2.0**-23
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": F32_EPS, "float64": F32_EPS,
       "complex64": F32_EPS}


def shp(shape):
    return ints(shape)[0], len(shape)


def seeds(k, salt):
    r = random.Random(SEED * 1000 + salt)
    return [r.getrandbits(64) for _ in range(k)]


def run(build, fallback_free=True):
    """build(s) -> handle, built and read on the CPU and then on the GPU: (gpu, cpu) as NumPy.
    Asserts the GPU evaluation ran no CPU fallback when `fallback_free`."""
    with Session() as s:
        with On("cpu"):
            cpu = s.read(build(s))
        with On("gpu"):
            h = build(s)
            before = lib.nv_gpu_fallback_count()
            gpu = s.read(h)
            after = lib.nv_gpu_fallback_count()
    if fallback_free:
        assert after == before, f"{after - before} node(s) fell back to the CPU"
    return gpu, cpu


def exact(gpu, cpu, what=""):
    assert gpu.shape == cpu.shape and gpu.dtype == cpu.dtype, f"{what}: {gpu.shape} {cpu.shape}"
    g = np.ascontiguousarray(gpu).view(np.uint8)
    c = np.ascontiguousarray(cpu).view(np.uint8)
    bad = g != c
    assert not bad.any(), f"{what}: {int(bad.sum())} bytes differ, first at byte {np.argmax(bad)}"


def close(gpu, cpu, dtype, k, what=""):
    """|gpu - cpu| <= k eps (1 + |cpu|) elementwise, eps the dtype's (float32's for float64 and
    complex64, whose samplers compute in float32): a few ulps, absolute near zero where a
    function's last-ulp difference is amplified (gumbel's outer log)."""
    assert gpu.shape == cpu.shape and gpu.dtype == cpu.dtype, f"{what}: {gpu.shape} {cpu.shape}"
    g = gpu.astype(np.complex128 if gpu.dtype.kind == "c" else np.float64)
    c = cpu.astype(g.dtype)
    assert (np.isnan(g) == np.isnan(c)).all(), f"{what}: NaN at different places"
    tol = k * EPS[dtype] * (1 + np.abs(c))
    err = np.abs(g - c)
    bad = ~(err <= tol) & ~np.isnan(c) & ~(np.isinf(g) & (g == c))
    assert not bad.any(), (f"{what}: {int(bad.sum())} beyond {k} eps, worst "
                           f"{float(np.nanmax(err / tol))} x the tolerance")


def key(s, seed):
    return s.own(lib.nv_random_key(seed))


# ---- random_bits ----

BITS_SHAPES = [(), (1,), (0,), (3, 0), (2,), (3,), (5,), (7,), (8,), (13,), (3, 5), (4, 4),
               (17, 3), (1023,), (1025,), (4096,), (65537,), (7, 11, 13)]


@pytest.mark.parametrize("width", [4, 2, 1])
@pytest.mark.parametrize("shape", BITS_SHAPES, ids=str)
def test_bits_equal_cpu(width, shape):
    for sd in seeds(3, hash((width, shape)) % 1000):
        sh, nd = shp(shape)
        g, c = run(lambda s: s.own(lib.nv_random_bits(sh, nd, width, key(s, sd))))
        exact(g, c, f"bits width {width} shape {shape} seed {sd}")


def test_bits_large():
    """2^22 words of each width: every thread's groups, the grid-stride loop, 16-byte stores."""
    for width, n in [(4, 2**22), (2, 2**22 + 6), (1, 2**22 + 3)]:
        sh, nd = shp((n,))
        g, c = run(lambda s: s.own(lib.nv_random_bits(sh, nd, width, key(s, SEED + width))))
        exact(g, c, f"bits width {width} n {n}")


@pytest.mark.parametrize("num", [0, 1, 2, 3, 10, 257])
def test_split_equal_cpu(num):
    g, c = run(lambda s: s.own(lib.nv_random_split(key(s, SEED + 7), num)))
    exact(g, c, f"split {num}")


def test_bits_from_key_views():
    """Keys that are views: a column of a row-major (2, 6) array (stride 6) and a reversed row
    (stride -1). The kernel reads them through a contiguous copy, as the CPU through strides."""
    def build(s, which):
        ks = s.own(lib.nv_random_split(key(s, SEED + 11), 6))  # (6, 2)
        if which == "column":
            kc = s.own(lib.nv_copy(s.own(lib.nv_transpose(ks, None, 0))))  # (2, 6)
            start, stop, step = ints([0, 4])[0], ints([2, 5])[0], ints([1, 1])[0]
        else:
            start, stop, step = ints([3, -1])[0], ints([4, -3])[0], ints([1, -1])[0]
            kc = ks
        part = s.own(lib.nv_slice(kc, start, stop, step, 2))
        k = s.own(lib.nv_reshape(part, *shp((2,))))
        return s.own(lib.nv_random_bits(*shp((37,)), 4, k))
    for which in ["column", "reversed"]:
        g, c = run(lambda s: build(s, which))
        exact(g, c, which)


# ---- Batched keys (vmap over keys): one stream per key in its part of the output ----

class Closure:
    """A nuvec closure calling a Python function body(inputs list): a list of handles to
    return, or a failed nv_status to pass on (the thread's error message set)."""

    def __init__(self, body):
        def fn(payload, inputs, outputs):
            try:
                xs = [lib.nv_vec_get(inputs, i) for i in range(lib.nv_vec_size(inputs))]
                rs = body(xs)
                if isinstance(rs, int):
                    return rs
                for r in rs:
                    if lib.nv_vec_push(outputs, r) != 0:
                        return 1
                return 0
            except Exception:  # noqa: BLE001  (a C caller cannot take a Python exception)
                traceback.print_exc()  # shown with the failing test's captured output
                return 1
        self.fn = CLOSURE_FN(fn)  # kept alive as long as the closure object
        self.h = lib.nv_closure_new(self.fn, None, None)
        assert self.h

    def release(self):
        lib.nv_closure_release(self.h)


def apply(s, closure, inputs):
    vin, vout = lib.nv_vec_new(), lib.nv_vec_new()
    try:
        for x in inputs:
            assert lib.nv_vec_push(vin, x) == 0
        st = lib.nv_closure_apply(closure, vin, vout)
        if st != 0:
            return st, lib.nv_last_error().decode()
        return 0, [s.own(lib.nv_retain(lib.nv_vec_get(vout, i)))
                   for i in range(lib.nv_vec_size(vout))]
    finally:
        lib.nv_vec_free(vin)
        lib.nv_vec_free(vout)


DRAWS = {
    "bits4": lambda k: lib.nv_random_bits(*shp((3, 5)), 4, k),
    "bits2": lambda k: lib.nv_random_bits(*shp((3, 5)), 2, k),
    "bits1_odd": lambda k: lib.nv_random_bits(*shp((7,)), 1, k),
    "bits2_odd": lambda k: lib.nv_random_bits(*shp((5,)), 2, k),
    "bits4_long": lambda k: lib.nv_random_bits(*shp((1001,)), 4, k),
    "split": lambda k: lib.nv_random_split(k, 3),
    "unit_f32": lambda k: lib.nv_random_uniform_scalar(0, 1, *shp((3, 5)), CODE["float32"], k),
    "unit_f16": lambda k: lib.nv_random_uniform_scalar(0, 1, *shp((9,)), CODE["float16"], k),
    "uniform_bf16": lambda k: lib.nv_random_uniform_scalar(-2, 3, *shp((3, 5)),
                                                           CODE["bfloat16"], k),
}


@pytest.mark.parametrize("nkeys", [1, 3, 5])
@pytest.mark.parametrize("draw", sorted(DRAWS))
def test_batched_keys_equal_cpu(draw, nkeys):
    """vmap over a batch of keys: the batched random_bits / random_unit node (keys of shape
    (K, 2)), on the GPU as on the CPU, and each key's part equal to that key drawing alone."""
    body = DRAWS[draw]

    def build(s):
        ks = s.own(lib.nv_random_split(key(s, SEED + 3), nkeys))
        f = Closure(lambda xs: [body(xs[0])])
        v = lib.nv_vmap(f.h, None, 0, None, 0)
        try:
            st, out = apply(s, v, [ks])
            assert st == 0, out
            return out[0]
        finally:
            lib.nv_closure_release(v)
            f.release()
    g, c = run(build)
    exact(g, c, f"{draw} x {nkeys} keys")
    # Each key's part is what the key draws alone (on the GPU too).
    with Session() as s, On("gpu"):
        ks = s.read(s.own(lib.nv_random_split(key(s, SEED + 3), nkeys)))
        for i in range(nkeys):
            k = s.array(ks[i])
            exact(g[i], s.read(s.own(body(k))), f"{draw} key {i}")


def test_batched_keys_transposed_axis():
    """Keys mapped along axis 1 of a (2, K) transposed view: the rule moves the batch first."""
    def build(s):
        ks = s.own(lib.nv_random_split(key(s, SEED + 5), 4))
        kt = s.own(lib.nv_transpose(ks, None, 0))
        f = Closure(lambda xs: [lib.nv_random_bits(*shp((6,)), 2, xs[0])])
        axes = ints([1])[0]
        v = lib.nv_vmap(f.h, axes, 1, None, 0)
        try:
            st, out = apply(s, v, [kt])
            assert st == 0, out
            return out[0]
        finally:
            lib.nv_closure_release(v)
            f.release()
    g, c = run(build)
    exact(g, c, "keys on axis 1")


# ---- random_unit and the samplers ----

UNIT_SHAPES = [(), (1,), (0,), (3,), (7,), (4, 9), (1000,), (2**20 + 3,)]


@pytest.mark.parametrize("dtype", UNIT_DTYPES)
@pytest.mark.parametrize("shape", UNIT_SHAPES, ids=str)
def test_unit_equal_cpu(dtype, shape):
    sh, nd = shp(shape)
    g, c = run(lambda s: s.own(lib.nv_random_uniform_scalar(0, 1, sh, nd, CODE[dtype],
                                                            key(s, SEED + 1))))
    exact(g, c, f"unit {dtype} {shape}")
    if g.size:
        assert (g.astype(np.float64) >= 0).all() and (g.astype(np.float64) < 1).all()


@pytest.mark.parametrize("dtype", UNIT_DTYPES)
def test_uniform_equal_cpu(dtype):
    sh, nd = shp((513, 3))
    for lo, hi in [(-2.0, 3.0), (5.0, 5.5), (-1e4, 1e4)]:
        g, c = run(lambda s: s.own(lib.nv_random_uniform_scalar(lo, hi, sh, nd, CODE[dtype],
                                                                key(s, SEED + 2))))
        exact(g, c, f"uniform {dtype} [{lo}, {hi})")


def test_uniform_array_bounds_equal_cpu():
    """Broadcast array bounds, one of them a transposed view."""
    rng = np.random.default_rng(SEED)
    lo = rng.standard_normal((4, 1)).astype(np.float32)
    hi = (lo.T + 1 + rng.random((6, 4))).astype(np.float32).T.copy()  # (4, 6)

    def build(s):
        l = s.array(lo)
        h = s.own(lib.nv_transpose(s.array(np.ascontiguousarray(hi.T)), None, 0))
        return s.own(lib.nv_random_uniform(l, h, *shp((4, 6)), CODE["float32"], key(s, SEED)))
    g, c = run(build)
    exact(g, c, "uniform with array bounds")


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "int16", "bool"])
def test_randint_equal_cpu(dtype):
    lo, hi = (0, 2) if dtype == "bool" else (-7, 100) if dtype != "uint8" else (3, 250)
    sh, nd = shp((1001,))
    g, c = run(lambda s: s.own(lib.nv_random_randint_scalar(lo, hi, sh, nd, CODE[dtype],
                                                            key(s, SEED + 4))))
    exact(g, c, f"randint {dtype}")


def test_bernoulli_equal_cpu():
    sh, nd = shp((3, 333))
    for p in [0.0, 0.3, 0.5, 1.0]:
        g, c = run(lambda s: s.own(lib.nv_random_bernoulli_scalar(p, sh, nd, key(s, SEED + 6))))
        exact(g, c, f"bernoulli {p}")
    probs = np.random.default_rng(SEED).random((5, 1)).astype(np.float32)
    g, c = run(lambda s: s.own(lib.nv_random_bernoulli(s.array(probs), *shp((5, 40)),
                                                       key(s, SEED + 8))))
    exact(g, c, "bernoulli with array p")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64"])
def test_normal_close_to_cpu(dtype):
    """erfinv (its float32 log on the GPU) may differ in the last ulp: a few ulps."""
    sh, nd = shp((2001,))
    for loc, scale in [(0.0, 1.0), (1.5, 0.25)]:
        g, c = run(lambda s: s.own(lib.nv_random_normal(sh, nd, CODE[dtype], loc, scale,
                                                        key(s, SEED + 9))))
        close(g, c, dtype, 2 if dtype in ("float16", "bfloat16") else 16,
              f"normal {dtype} {loc} {scale}")


@pytest.mark.parametrize("dtype", UNIT_DTYPES)
def test_truncated_normal_close_to_cpu(dtype):
    """erf of the bounds and erfinv of the draws: a few ulps (32 float32 eps: the errors of
    the bounds' erf and of erfinv add up), and always inside the bounds."""
    sh, nd = shp((1500,))
    for lo, hi in [(-2.0, 2.0), (0.5, 3.0)]:
        g, c = run(lambda s: s.own(lib.nv_random_truncated_normal_scalar(
            lo, hi, sh, nd, CODE[dtype], key(s, SEED + 10))))
        close(g, c, dtype, 2 if dtype != "float32" else 32, f"truncated_normal {dtype}")
        gf = g.astype(np.float64)
        assert (gf >= lo).all() and (gf <= hi).all()


@pytest.mark.parametrize("dtype", UNIT_DTYPES)
def test_gumbel_close_to_cpu(dtype):
    """-log(-log(u)): a last-ulp difference of the inner log becomes an absolute error near
    zero, hence the tolerance k eps (1 + |x|)."""
    sh, nd = shp((4097,))
    g, c = run(lambda s: s.own(lib.nv_random_gumbel(sh, nd, CODE[dtype], key(s, SEED + 12))))
    close(g, c, dtype, 2 if dtype != "float32" else 8, f"gumbel {dtype}")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_laplace_close_to_cpu(dtype):
    """sign(u) log1p(-|u|): log1p may differ in the last ulp."""
    sh, nd = shp((3000,))
    for loc, scale in [(0.0, 1.0), (-1.0, 3.0)]:
        g, c = run(lambda s: s.own(lib.nv_random_laplace(sh, nd, CODE[dtype], loc, scale,
                                                         key(s, SEED + 13))))
        close(g, c, dtype, 2 if dtype in ("float16", "bfloat16") else 8, f"laplace {dtype}")


def test_categorical_equal_cpu():
    """argmax of logits plus Gumbel noise (float32 logs): the indices match but for a rare tie
    within the logs' last-ulp difference (at most 1 in 1000 samples)."""
    rng = np.random.default_rng(SEED)
    logits = rng.standard_normal((6, 10)).astype(np.float32)
    cases = [
        lambda s: lib.nv_random_categorical(s.array(logits), -1, None, 0, key(s, SEED + 14)),
        lambda s: lib.nv_random_categorical(s.array(logits), 0, *shp((3, 10)),
                                            key(s, SEED + 15)),
        lambda s: lib.nv_random_categorical_samples(s.array(logits), 1, 500, key(s, SEED + 16)),
    ]
    for i, build in enumerate(cases):
        g, c = run(lambda s: s.own(build(s)))
        assert g.shape == c.shape and g.dtype == c.dtype
        assert (g != c).sum() <= max(1, g.size // 1000), f"categorical case {i}"


@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000])
def test_permutation_equal_cpu(n):
    """argsort of random bits (and take for an array): the sort family's kernels, which may
    still fall back to the CPU, so only the values are checked here."""
    g, c = run(lambda s: s.own(lib.nv_random_permutation_n(n, key(s, SEED + 17))),
               fallback_free=False)
    exact(g, c, f"permutation {n}")
    assert sorted(g.tolist()) == list(range(n))
    x = np.arange(3 * max(n, 1), dtype=np.float32).reshape(3, max(n, 1))
    g, c = run(lambda s: s.own(lib.nv_random_permutation(s.array(x), 1, key(s, SEED + 18))),
               fallback_free=False)
    exact(g, c, f"permutation of an array, n {n}")


def test_global_sequence_equal_cpu():
    """A NULL key draws from the global sequence: reseeded, both devices draw the same."""
    sh, nd = shp((257,))

    def build(s):
        lib.nv_random_seed(SEED)
        return s.own(lib.nv_random_bits(sh, nd, 4, None))
    g, c = run(build)
    exact(g, c, "global sequence")


# ---- custom_function and vmap_input ----

def test_custom_function_on_gpu():
    """f(x) = (2x, x^T) with a custom vjp (3 cot0 + cot1^T): the outputs share f's outputs'
    data (the transposed one keeps its layout) and the vjp rule runs on the GPU."""
    x = np.random.default_rng(SEED).standard_normal((3, 4)).astype(np.float32)
    cot0 = np.random.default_rng(SEED + 1).standard_normal((3, 4)).astype(np.float32)
    cot1 = np.random.default_rng(SEED + 2).standard_normal((4, 3)).astype(np.float32)

    def fbody(xs):
        two = lib.nv_add(xs[0], xs[0])
        return [two, lib.nv_transpose(xs[0], None, 0)]

    def vjpbody(xs):
        # (primal, cot0, cot1, out0, out1)
        three = lib.nv_add(lib.nv_add(xs[1], xs[1]), xs[1])
        return [lib.nv_add(three, lib.nv_transpose(xs[2], None, 0))]

    with Session() as s, On("gpu"):
        f, r = Closure(fbody), Closure(vjpbody)
        cf = lib.nv_custom_function(f.h, r.h, None, None)
        assert cf
        try:
            xa = s.array(x)
            before = lib.nv_gpu_fallback_count()
            st, out = apply(s, cf, [xa])
            assert st == 0, out
            y0, y1 = s.read(out[0]), s.read(out[1])
            np.testing.assert_array_equal(y0, 2 * x)
            np.testing.assert_array_equal(y1, x.T)
            prim, cots = lib.nv_vec_new(), lib.nv_vec_new()
            outs, vjps = lib.nv_vec_new(), lib.nv_vec_new()
            try:
                lib.nv_vec_push(prim, xa)
                lib.nv_vec_push(cots, s.array(cot0))
                lib.nv_vec_push(cots, s.array(cot1))
                assert lib.nv_vjp(cf, prim, cots, outs, vjps) == 0, lib.nv_last_error()
                o0 = s.read(s.own(lib.nv_retain(lib.nv_vec_get(outs, 0))))
                gx = s.read(s.own(lib.nv_retain(lib.nv_vec_get(vjps, 0))))
            finally:
                for v in (prim, cots, outs, vjps):
                    lib.nv_vec_free(v)
            np.testing.assert_array_equal(o0, 2 * x)
            np.testing.assert_allclose(gx, 3 * cot0 + cot1.T, rtol=1e-6)
            assert lib.nv_gpu_fallback_count() == before
        finally:
            lib.nv_closure_release(cf)
            f.release()
            r.release()


def test_vmap_input_read_fails_with_the_cpu_message():
    """Evaluating a mapped input inside vmap fails on the GPU as on the CPU (no fallback)."""
    def body(xs):
        st = lib.nv_eval1(lib.nv_exp(xs[0]))
        return st if st != 0 else [xs[0]]

    msgs = {}
    for where in ["cpu", "gpu"]:
        with Session() as s, On(where):
            x = s.array(np.ones((2, 3), np.float32))
            f = Closure(body)
            v = lib.nv_vmap(f.h, None, 0, None, 0)
            try:
                before = lib.nv_gpu_fallback_count()
                st, msg = apply(s, v, [x])
                assert st != 0
                msgs[where] = msg
                if where == "gpu":
                    assert lib.nv_gpu_fallback_count() == before
            finally:
                lib.nv_closure_release(v)
                f.release()
    want = "the values of a mapped input cannot be read inside the function being mapped"
    assert want in msgs["cpu"] and want in msgs["gpu"], msgs
