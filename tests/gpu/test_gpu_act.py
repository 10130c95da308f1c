"""The fused activations on the GPU (src/cuda/elementwise_act.cu): gelu's three forms (nv_gelu,
nv_gelu_approx, nv_gelu_fast_approx) and act_vjp (the derivatives of the GELU forms, of tanh and
of sigmoid, built by their vjp rules) against the CPU's kernels and float64 references.

float16/bfloat16/float32 run the CPU's float32 formulas operation for operation, so the GPU must
give the CPU's bits, on every layout the element-wise kernels switch on (contiguous sizes across
the 16-byte vector tails, strided, reversed, transposed, broadcast rows and columns, misaligned,
more folded dims than the kernels take, empty, 0-d, integer inputs); and, on its own, the bounds
the CPU states (tests/python/test_elementwise_act.py: the sigmoid forms within 4.5 ulp of float32
where the result is normal, the erf form within 2 ulp for x >= 0 and |x| 2^-22 below; the
half types within one ulp of their format; the derivatives within |g| 2^-21 plus 4 ulp,
python/tests/test_activations_fused.py) against float64 NumPy, over every float32 exponent and
the edges (NaN, +-inf, +-0, subnormals, huge values). float64 uses CUDA's erf/erfc/exp: within
4e-16 (1 + x^2) relative of the value computed exactly from x (the sigmoid forms from their
argument v rounded as the CPU and NumPy round it), the CPU's float64 bound. Every op is built
with the GPU as the default device, must run there as one fused node (the graph holds a Gelu
or ActVjp node and none of the composed forms' ops) and never falls back to the CPU. Skipped
where no GPU is usable; the seed is printed (NUVEC_TEST_SEED repeats a run)."""
import ctypes as C
import math
import os
import sys
import tempfile

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import SEED, On, gpu_and_cpu, needs_gpu, rng  # noqa: E402,F401  (rng: a fixture)
from nvc import FLOATS, NuvecError, Session, ints, lib, np_dtype, sig  # noqa: E402
from test_elementwise_act import check_bound, ref, sweep  # noqa: E402
from test_elementwise_ulp import EDGE  # noqa: E402

P = C.c_void_p
FORMS = ["gelu", "gelu_approx", "gelu_fast_approx"]
VJPS = FORMS + ["tanh", "sigmoid"]
for _n in VJPS:
    sig("nv_" + _n, P, P)
sig("nv_reshape", P, P, C.POINTER(C.c_int), C.c_int)
sig("nv_export_to_dot", C.c_int, C.c_char_p, C.POINTER(P), C.c_size_t, P, P, C.c_size_t)
CLOSURE_FN = C.CFUNCTYPE(C.c_int, P, P, P)
sig("nv_closure_new", P, CLOSURE_FN, P, P)
sig("nv_closure_release", None, P)
sig("nv_vjp", C.c_int, P, P, P, P, P)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_push", C.c_int, P, P)
sig("nv_vec_get", P, P, C.c_size_t)

pytestmark = needs_gpu

print(f"test_gpu_act seed: NUVEC_TEST_SEED={SEED}", file=sys.stderr)

C2 = 2 * math.sqrt(2 / math.pi)
A = float(np.float32(1.702))
TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-13}


@pytest.fixture
def nv():
    with Session() as s:
        yield s


@pytest.fixture(autouse=True)
def guards():
    """Sentinel guards of freed buffers stay intact (an out-of-bounds write fails the test)."""
    g0 = lib.nv_get_guard_violations()
    yield
    assert lib.nv_get_guard_violations() == g0, "damaged buffer guards: an out-of-bounds write"


def fn(name):
    return getattr(lib, "nv_" + name)


def bits(x):
    """x's bit patterns (NaN payloads included), for exact comparisons."""
    x = np.ascontiguousarray(x)
    return x.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def same_bits(got, want, what):
    """The same values bit for bit (signed zeros included); NaN where the other has NaN (the
    GPU's arithmetic makes its own NaN payloads)."""
    assert got.dtype == want.dtype and got.shape == want.shape, what
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"{what}: NaN positions differ"
    bad = (bits(got) != bits(want)) & ~nan
    assert not bad.any(), f"{what}: {bad.sum()} elements differ, first {got[bad][:4]} vs {want[bad][:4]}"


# ---- Graphs and the vjp ----

def labels(h):
    """The primitive labels of the graph behind h (unevaluated), sorted."""
    fd, path = tempfile.mkstemp(suffix=".dot")
    os.close(fd)
    try:
        outs = (P * 1)(h)
        assert lib.nv_export_to_dot(path.encode(), outs, 1, None, None, 0) == 0
        text = open(path).read()
    finally:
        os.unlink(path)
    return sorted(line.split('label ="')[1].split('"')[0] for line in text.splitlines() if "label" in line)


def vjp_of(nv, f, x, g):
    """The vjp of f at x along the cotangent g (unevaluated): act_vjp through f's rule."""

    @CLOSURE_FN
    def body(payload, inputs, outputs):
        return lib.nv_vec_push(outputs, f(lib.nv_vec_get(inputs, 0)))

    clo = lib.nv_closure_new(body, None, None)
    prim, cots, outs, vjps = (lib.nv_vec_new() for _ in range(4))
    try:
        lib.nv_vec_push(prim, x)
        lib.nv_vec_push(cots, g)
        assert lib.nv_vjp(clo, prim, cots, outs, vjps) == 0, lib.nv_last_error().decode()
        return nv.own(lib.nv_retain(lib.nv_vec_get(vjps, 0)))
    finally:
        for v in (prim, cots, outs, vjps):
            lib.nv_vec_free(v)
        lib.nv_closure_release(clo)


# ---- References ----

_erf = np.vectorize(math.erf, otypes=[np.float64])


def sig64(v):
    return np.exp(-np.logaddexp(0, -v))


def d64(name, x):
    """f'(x) in float64 (the derivatives' reference of python/tests/test_activations_fused.py)."""
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        if name == "gelu":
            return 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
        if name == "tanh":
            return 1 - np.tanh(x) ** 2
        if name == "sigmoid":
            s = sig64(x)
            return s * (1 - s)
        c, k = (C2, 0.044715) if name == "gelu_approx" else (A, 0.0)
        s = sig64(c * x * (1 + k * x * x))
        return s + x * s * (1 - s) * c * (1 + 3 * k * x * x)


def exact64(name, x):
    """gelu in 113-bit arithmetic from the float64 x (the sigmoid forms from v = 2c x (1 + k x^2)
    or 1.702 x as float64 rounds it, the CPU's and NumPy's argument), rounded to float64."""
    mpmath = pytest.importorskip("mpmath")
    with np.errstate(all="ignore"):
        v = C2 * x * (1 + 0.044715 * x * x) if name == "gelu_approx" else A * x
    out = np.empty_like(x)
    with mpmath.workprec(113):
        for i, (xi, vi) in enumerate(zip(x.tolist(), v.tolist())):
            X = mpmath.mpf(xi)
            if name == "gelu" and abs(xi) > 40:
                y = X if xi > 0 else -mpmath.mpf(0)  # erfc(-x / sqrt 2) is 2 or below 1e-347
            elif name == "gelu":
                y = X * mpmath.erfc(-X / mpmath.sqrt(2)) / 2
            else:
                y = X / (1 + mpmath.exp(-mpmath.mpf(vi)))
            out[i] = float(y)
    return out


# ---- gelu: values ----

@pytest.mark.parametrize("name", FORMS)
def test_float32_sweep_cpu_bits_and_bound(nv, name):
    """Every float32 exponent, the dense range and the edges: the CPU's bits, and the stated
    bound against float64 NumPy."""
    x = sweep()
    got, want = gpu_and_cpu(nv, lambda: nv.own(fn(name)(nv.array(x))), name)
    same_bits(got, want, name)
    check_bound(name, x, got)
    e = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45])
    g, _ = gpu_and_cpu(nv, lambda: nv.own(fn(name)(nv.array(e))), name)
    assert np.array_equal(np.signbit(g[:2]), [False, True]) and (g[:2] == 0).all()
    assert g[2] == np.inf and g[3] == 0 and np.signbit(g[3]) and np.isnan(g[4])


@pytest.mark.parametrize("name", FORMS)
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_half_cpu_bits_and_one_ulp(nv, rng, name, dt):
    with np.errstate(over="ignore"):
        x = np.concatenate([rng.uniform(-10, 10, 4099), EDGE]).astype(np_dtype(dt))
    got, want = gpu_and_cpu(nv, lambda: nv.own(fn(name)(nv.array(x))), name)
    same_bits(got, want, f"{name} {dt}")
    fin = np.isfinite(x)
    g = got[fin].astype(np.float64)
    w = ref(name, x[fin].astype(np.float32)).astype(np_dtype(dt)).astype(np.float64)
    step = np.abs(np.nextafter(w.astype(np_dtype(dt)), np.array(np.inf, np_dtype(dt))).astype(np.float64) - w)
    xa = np.abs(x[fin].astype(np.float64))
    tol = np.maximum(step * 1.0001, 1e-7 if name != "gelu" else 1e-5 * xa)
    assert (np.abs(g - w) <= tol).all(), f"{name} {dt}: {np.abs(g - w).max()}"


@pytest.mark.parametrize("name", FORMS)
def test_float64_within_bound_of_exact(nv, rng, name):
    x = np.concatenate([rng.uniform(-30, 30, 700), rng.uniform(-1.5, 1.5, 700),
                        [1e-300, -1e-300, 5e-324, -40.0, 40.0, 1e300, -1e300]])
    want = exact64(name, x)
    got, cpu = gpu_and_cpu(nv, lambda: nv.own(fn(name)(nv.array(x))), name)
    assert got.dtype == np.float64
    with np.errstate(over="ignore"):
        rtol = 4e-16 * (1 + np.minimum(x * x, 1e200))
        err = np.abs(got - want) / (rtol * np.abs(want) + 1e-300)
    assert err.max() <= 1, f"{name}: {err.max():.3f} of the bound at x = {x[np.argmax(err)]!r}"
    e = np.float64([0.0, -0.0, np.inf, -np.inf, np.nan])
    g, c = gpu_and_cpu(nv, lambda: nv.own(fn(name)(nv.array(e))), name)
    same_bits(g, c, f"{name} float64 edges")
    assert g[2] == np.inf and g[3] == 0 and np.signbit(g[3]) and np.isnan(g[4])


# ---- gelu: layouts ----

def misaligned(nv, x):
    """x as a view starting one element into a buffer (not 16-byte aligned)."""
    flat = np.concatenate([np.zeros(1, x.dtype), x.reshape(-1)])
    base = nv.array(flat)
    start, n = ints([1])
    stop, _ = ints([flat.size])
    step, _ = ints([1])
    s = nv.own(lib.nv_slice(base, start, stop, step, n))
    shape, nd = ints(x.shape)
    return nv.own(lib.nv_reshape(s, shape, nd))


def laid_out(nv, x, layout):
    """(the nuvec array, the NumPy values it holds) for x in `layout`."""
    if layout in ("rows", "columns"):
        part = x[:1, :] if layout == "rows" else x[:, :1]
        shape, nd = ints(x.shape)
        return nv.own(lib.nv_broadcast_to(nv.array(part), shape, nd)), np.broadcast_to(part, x.shape)
    if layout == "misaligned":
        return misaligned(nv, x), x
    if layout == "nine_dims":
        # Every axis reversed: nine dims that fold to nine (the kernels take eight).
        base = nv.array(np.ascontiguousarray(x.transpose()))
        return nv.own(lib.nv_transpose(base, None, 0)), x
    return nv.view(x, layout), x


# Rows and columns of 24 (a multiple of every dtype's vector width: the rows kernel), the
# others of 21 (the element loops).
CASES = ([("contiguous", (n,)) for n in (1, 3, 17, 1023, 4097)] +
         [(lay, (37, 21)) for lay in ("strided", "reversed", "transposed", "misaligned")] +
         [(lay, (37, 24)) for lay in ("rows", "columns")] +
         [("nine_dims", (2, 2, 2, 2, 2, 2, 2, 2, 3)), ("contiguous", (0, 3)), ("contiguous", ())])


def values(rng, shape, dt):
    x = rng.uniform(-8, 8, shape)
    if x.size > len(EDGE):
        x.reshape(-1)[:len(EDGE)] = EDGE
    with np.errstate(over="ignore"):
        return x.astype(np_dtype(dt))


def close64(got, want, x):
    """Two float64 results each within the bound of the exact value: within twice it."""
    x = np.broadcast_to(x, got.shape).astype(np.float64)
    fin = np.isfinite(want)
    np.testing.assert_array_equal(bits(got[~fin]), bits(want[~fin]))
    with np.errstate(over="ignore"):
        tol = 8e-16 * (1 + np.minimum(x[fin] ** 2, 1e200)) * np.abs(want[fin]) + 1e-300
    assert (np.abs(got[fin] - want[fin]) <= tol).all()


@pytest.mark.parametrize("name", FORMS)
@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("layout,shape", CASES)
def test_layouts_give_the_cpu_result(nv, rng, name, dt, layout, shape):
    x = values(rng, shape, dt)
    held = {}

    def make():
        a, held["x"] = laid_out(nv, x, layout)
        return nv.own(fn(name)(a))

    got, want = gpu_and_cpu(nv, make, f"{name} {dt} {layout}")
    assert got.shape == shape and got.dtype == np_dtype(dt)
    if dt == "float64":
        close64(got, want, held["x"])
    else:
        same_bits(got, want, f"{name} {dt} {layout} {shape}")
    if dt == "float32" and got.size > len(EDGE):  # (the bound's check wants both signs)
        check_bound(name, np.ascontiguousarray(held["x"]).ravel(), got.ravel())


@pytest.mark.parametrize("name", FORMS)
def test_integer_inputs_compute_in_float32(nv, name):
    i = np.arange(-3, 4, dtype=np.int32)
    got, want = gpu_and_cpu(nv, lambda: nv.own(fn(name)(nv.array(i))), name)
    assert got.dtype == np.float32
    same_bits(got, want, name)


@pytest.mark.parametrize("name", FORMS)
def test_one_fused_node(nv, name):
    """On a GPU stream the builder makes one GELU node, not the composed forms, and it runs on
    the GPU."""
    x = np.linspace(-4, 4, 1001, dtype=np.float32)
    with On("gpu"):
        h = nv.own(fn(name)(nv.array(x)))
        assert labels(h) == ["Gelu"]
        before = lib.nv_gpu_fallback_count()
        nv.read(h)
        assert lib.nv_gpu_fallback_count() == before


@pytest.mark.parametrize("name", FORMS)
def test_complex_fails_with_the_op_name(nv, name):
    with On("gpu"):
        h = nv.own(fn(name)(nv.array(np.array([1 + 2j], np.complex64))))
        with pytest.raises(NuvecError, match=name + ": complex64 is not supported"):
            nv.read(h)


# ---- act_vjp ----
# The GELU forms' act_vjp reads x and gives the CPU's bits; tanh's and sigmoid's read their
# output y, which the GPU's tanh and sigmoid kernels compute with CUDA's tanhf and expf (not the
# CPU's formulas), so those compare within the derivative's bound instead.

def vjp_close(name, got, want, g, dt, what):
    if name in FORMS and dt != "float64":
        same_bits(got, want, what)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    gs = np.abs(np.broadcast_to(g, got.shape)[fin].astype(np.float64)) if np.ndim(g) else abs(float(g))
    tol = (2.0 ** -20 if dt == "float32" else TOL[dt]) * (1 + gs)
    diff = np.abs(got[fin].astype(np.float64) - want[fin].astype(np.float64))
    assert (diff <= tol).all(), f"{what}: {diff.max()}"


@pytest.mark.parametrize("name", VJPS)
@pytest.mark.parametrize("dt", FLOATS)
def test_vjp_cpu_result_and_bound(nv, rng, name, dt):
    """g f'(x) through the vjp rule (one ACT_VJP node) against the CPU's and, in float32,
    against float64 NumPy within |g| 2^-21 plus 4 ulp (the half types within their format's
    precision; float64 within the CPU's 1e-12)."""
    with np.errstate(over="ignore"):
        x = np.concatenate([rng.uniform(-12, 12, 6000), np.linspace(-3, 3, 1001), EDGE,
                            [80.0, -80.0]]).astype(np_dtype(dt))
    g = rng.uniform(-2, 2, x.shape).astype(np_dtype(dt))
    got, want = gpu_and_cpu(nv, lambda: vjp_of(nv, fn(name), nv.array(x), nv.array(g)), name)
    vjp_close(name, got, want, g, dt, f"{name} vjp {dt}")
    fin = np.isfinite(x) & (np.abs(x.astype(np.float64)) < 1e30)
    ref = g[fin].astype(np.float64) * d64(name, x[fin])
    gg = got[fin].astype(np.float64)
    if dt == "float32":
        tol = np.abs(g[fin]) * 2.0 ** -21 + 4 * 2.0 ** -24 * np.abs(ref)
    elif dt == "float64":
        tol = 1e-12 * np.abs(ref) + 1e-15
    else:
        tol = (4e-3 if dt == "float16" else 3e-2) * (1 + np.abs(ref))
    bad = np.abs(gg - ref) > tol
    assert not bad.any(), f"{name} {dt}: x = {x[fin][bad][:4]} got {gg[bad][:4]} want {ref[bad][:4]}"
    if name in FORMS:
        # ±inf give f' = 1 or 0 (not inf · 0; float64's clamp at -64 leaves f'(-64), below
        # 1e-45); NaN stays NaN.
        e = np.array([np.inf, -np.inf, np.nan], np_dtype(dt))
        one = np.ones(3, np_dtype(dt))
        d, _ = gpu_and_cpu(nv, lambda: vjp_of(nv, fn(name), nv.array(e), nv.array(one)), name)
        assert d[0] == 1 and abs(float(d[1])) < 1e-40 and np.isnan(d[2])


VJP_LAYOUTS = ["broadcast_x", "transposed_x", "transposed_g", "strided_both", "scalar", "empty"]


@pytest.mark.parametrize("name", VJPS)
@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("layout", VJP_LAYOUTS)
def test_vjp_layouts_give_the_cpu_result(nv, rng, name, dt, layout):
    """act_vjp's two inputs in the layouts the kernels switch on: x a row broadcast over the
    cotangent (stride 0: the rows kernel; the rule then sums over the broadcast axis), x
    transposed against a contiguous cotangent or the other way round (the tiled kernel), both
    strided, 0-d and empty."""
    shapes = {"broadcast_x": ((1, 37), (9, 37)), "transposed_x": ((40, 33), (40, 33)),
              "transposed_g": ((40, 33), (40, 33)), "strided_both": ((13, 17), (13, 17)),
              "scalar": ((), ()), "empty": ((0, 5), (0, 5))}[layout]
    x = values(rng, shapes[0], dt)
    g = rng.uniform(-2, 2, shapes[1]).astype(np_dtype(dt))

    def make():
        if layout == "broadcast_x":
            shape, nd = ints(g.shape)
            f = fn(name)
            xa, ga = nv.array(x), nv.array(g)
            # Inside the closure the trace's scope owns what the body builds.
            return vjp_of(nv, lambda a: f(lib.nv_broadcast_to(a, shape, nd)), xa, ga)
        xa = nv.view(x, "transposed" if layout == "transposed_x" else
                     "strided" if layout == "strided_both" else "contiguous")
        ga = nv.view(g, "transposed" if layout == "transposed_g" else
                     "strided" if layout == "strided_both" else "contiguous")
        return vjp_of(nv, fn(name), xa, ga)

    got, want = gpu_and_cpu(nv, make, f"{name} vjp {dt} {layout}")
    assert got.shape == x.shape and got.dtype == np_dtype(dt)
    what = f"{name} vjp {dt} {layout}"
    if layout == "broadcast_x":
        # The rule's sum over the 9 broadcast rows may add in another order on the GPU.
        fin = np.isfinite(want)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        tol = (2.0 ** -19 if dt == "float32" else TOL[dt]) * 9 * (1 + np.abs(want[fin].astype(np.float64)))
        assert (np.abs(got[fin].astype(np.float64) - want[fin].astype(np.float64)) <= tol).all(), what
    else:
        vjp_close(name, got, want, g, dt, what)


@pytest.mark.parametrize("name", VJPS)
def test_vjp_is_one_fused_node(nv, rng, name):
    """The vjp of a GELU form is one ACT_VJP node (tanh's and sigmoid's read their forward
    node's output; the cotangent may come through a BroadcastTo view); none of the composed
    derivative's ops; it runs on the GPU."""
    x = rng.uniform(-4, 4, 999).astype(np.float32)
    g = rng.uniform(-1, 1, 999).astype(np.float32)
    with On("gpu"):
        h = vjp_of(nv, fn(name), nv.array(x), nv.array(g))
        lab = labels(h)
        assert lab.count("ActVjp") == 1, lab
        rest = set(lab) - {"ActVjp", "BroadcastTo"}
        assert rest <= ({"Tanh"} if name == "tanh" else {"Sigmoid"} if name == "sigmoid" else set()), lab
        before = lib.nv_gpu_fallback_count()
        nv.read(h)
        assert lib.nv_gpu_fallback_count() == before


@pytest.mark.parametrize("name", VJPS)
def test_second_derivative_matches_the_cpu(nv, rng, name):
    """The vjp of the vjp (act_vjp's own rule composes f'' of element-wise ops) on the GPU."""
    x = rng.uniform(-6, 6, 500)
    g = rng.uniform(-1, 1, 500)
    f = fn(name)
    gv = {}

    def make():
        gv["g"] = nv.array(g)
        return vjp_of(nv, lambda a: vjp_of(nv, f, a, gv["g"]), nv.array(x), nv.array(np.ones(500)))

    got, want = gpu_and_cpu(nv, make, f"{name} second derivative")
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
