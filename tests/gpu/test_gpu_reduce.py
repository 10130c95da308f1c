"""The reduce family on the GPU against NumPy: every reduction (sum, prod, max, min, all, any,
mean, count_nonzero, var, std, logsumexp, argmax, argmin, softmax) over every dtype, axes of
1-4-D inputs, contiguous / transposed / permuted / step-2 / reversed / broadcast layouts (as
strided views of one buffer), sizes around warp, block and 16-byte boundaries, empty and 0-d
inputs, NaN/inf, integer wrap-around, ties, long reductions that are split, and the edge cases
of softmax/logsumexp rows. Runs with the GPU as the default device (skipped without one); the
references and tolerances are reduce_ref.py's. NUVEC_TEST_FULL=1 runs the whole matrix."""
import ctypes as C
import importlib.util
import os
import sys

import numpy as np
import pytest

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_here, "..", "python"))
sys.path.insert(0, _here)

from nvc import Session, ints, lib, sig  # noqa: E402
import reduce_ref as R  # noqa: E402

# The Python suite's seed and sampling (tests/python/conftest.py), loaded under another name so
# that this directory needs no conftest of its own beside that one.
_spec = importlib.util.spec_from_file_location("nuvec_python_conftest",
                                               os.path.join(_here, "..", "python", "conftest.py"))
_conf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_conf)
sample = _conf.sample

P = C.c_void_p
IP = C.POINTER(C.c_int)
LP = C.POINTER(C.c_int64)


from nvc import Device  # noqa: E402  (one ctypes class for every module)


sig("nv_gpu", Device, C.c_int)
sig("nv_device_is_available", C.c_bool, Device)
sig("nv_default_device", Device)
sig("nv_set_default_device", C.c_int, Device)
sig("nv_as_strided", P, P, IP, C.c_int, LP, C.c_int64)
for name in ["nv_sum", "nv_prod", "nv_max", "nv_min", "nv_all", "nv_any", "nv_mean",
             "nv_count_nonzero", "nv_logsumexp"]:
    sig(name, P, P, IP, C.c_int, C.c_bool)
for name in ["nv_var", "nv_std"]:
    sig(name, P, P, IP, C.c_int, C.c_bool, C.c_int)
for name in ["nv_argmax", "nv_argmin"]:
    sig(name, P, P, IP, C.c_bool)
sig("nv_softmax", P, P, IP, C.c_int, C.c_bool)
try:
    sig("nv_gpu_fallback_count", C.c_uint64)
    FALLBACKS = lib.nv_gpu_fallback_count
except AttributeError:  # the backend's counter is not there yet
    FALLBACKS = None

sig("nv_add", P, P, P)
sig("nv_weak_scalar", P, C.c_double)

pytestmark = pytest.mark.skipif(not lib.nv_device_is_available(lib.nv_gpu(0)),
                                reason="no GPU")


@pytest.fixture
def rng(request):
    """A generator seeded from the run's seed and the test's name (as tests/python's)."""
    seed = (_conf.SEED + abs(hash(request.node.nodeid)) % (2**31)) % (2**31)
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


@pytest.fixture
def nv():
    with Session() as s:
        yield s


@pytest.fixture(autouse=True)
def output_guards():
    before = lib.nv_get_guard_violations()
    yield
    after = lib.nv_get_guard_violations()
    assert after == before, f"{after - before} buffer(s) had damaged guards: an out-of-bounds write"


@pytest.fixture(autouse=True)
def on_gpu():
    """Every op of these tests runs on gpu:0, with no CPU fallback."""
    old = lib.nv_default_device()
    assert lib.nv_set_default_device(lib.nv_gpu(0)) == 0
    before = FALLBACKS() if FALLBACKS else 0
    yield
    after = FALLBACKS() if FALLBACKS else 0
    lib.nv_set_default_device(old)
    assert after == before, f"{after - before} reduction(s) ran on the CPU fallback"


def strided(nv, values, layout):
    """A nuvec array with the elements of `values` laid out as `layout` (reduce_ref), as an
    as_strided view of one buffer; returns (array, the values it shows)."""
    base, off, st, used = R.make_layout(np.asarray(values), layout)
    base = np.ascontiguousarray(base)
    if base.size > 2**31 - 1:  # dims are ints: the buffer as rows of 1024 (padded)
        base = np.concatenate([base, np.zeros(-base.size % 1024, base.dtype)]).reshape(-1, 1024)
    b = nv.array(base)
    shape = list(np.shape(values))
    sh, nd = ints(shape)
    sts = (C.c_int64 * max(1, nd))(*st)
    return nv.own(lib.nv_as_strided(b, sh, nd, sts, off)), np.asarray(used)


def apply(nv, op, h, x, axes, ddof=0):
    if op in ("argmax", "argmin"):
        axis = None if axes is None else C.pointer(C.c_int(axes[0]))
        return nv.own(getattr(lib, "nv_" + op)(h, axis, False))
    arr, n = (None, 0) if axes is None else ints(axes)
    if op == "softmax":
        return nv.own(lib.nv_softmax(h, arr, n, False))
    if op in ("var", "std"):
        return nv.own(getattr(lib, "nv_" + op)(h, arr, n, False, ddof))
    return nv.own(getattr(lib, "nv_" + op)(h, arr, n, False))


def check_op(nv, op, x, axes, layout="contiguous", ddof=0):
    h, used = strided(nv, x, layout)
    got = nv.read(apply(nv, op, h, x, axes, ddof))
    # The reference sees the builder's cast (integer means and softmax in float32, bool sums
    # in int32), whose results have the same dtype as the op's on the original values.
    kd = R.kernel_input_dtype(op, R.dt_name(x.dtype))
    used = used.astype(R.np_dtype(kd))
    R.check(op, got, R.reference(op, used, axes, ddof), used, axes,
            f"{op} {R.dt_name(x.dtype)} {x.shape} axes={axes} {layout}")


SHAPES = [
    ((), [None]),
    ((1,), [(0,)]), ((31,), [(0,)]), ((32,), [(0,)]), ((33,), [(0,)]), ((1023,), [(0,)]),
    ((1025,), [(0,)]), ((4096,), [(0,)]), ((4097,), [(0,)]), ((65537,), [(0,)]),
    ((7, 33), [(0,), (1,), None]), ((33, 7), [(0,), (1,)]), ((64, 1024), [(0,), (1,), None]),
    ((3, 4097), [(0,), (1,)]), ((4097, 3), [(0,), (1,)]), ((40, 33), [(0,)]),
    ((4, 5, 6), [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), None]),
    ((3, 40, 37), [(0,), (1,), (0, 2)]),
    ((3, 4, 5, 6), [(1, 3), (0, 2), None, (2, 3), (3,)]),
    ((3, 0), [(1,), (0,)]), ((0, 4), [(0,)]),
]


def matrix():
    for op in R.OPS:
        for dt in R.dtypes_of(op):
            for shape, axess in SHAPES:
                size = int(np.prod(shape))
                for axes in axess:
                    if op in ("argmax", "argmin") and axes is not None and len(axes) != 1:
                        continue
                    if op in ("max", "min", "argmax", "argmin", "logsumexp") and size == 0:
                        continue  # the builders' errors
                    for layout in R.LAYOUTS:
                        if R.layout_ok(layout, shape):
                            yield op, dt, shape, axes, layout


@pytest.mark.parametrize("op,dt,shape,axes,layout", sample(matrix(), 600, salt=31))
def test_reductions_match_numpy(nv, rng, op, dt, shape, axes, layout):
    x = R.rand(rng, shape, dt, edges=op not in ("var", "std") or rng.random() < 0.3,
               ties=op in ("argmax", "argmin") and rng.random() < 0.5, near_one=op == "prod")
    check_op(nv, op, x, axes, layout, ddof=int(rng.integers(0, 3)) if op in ("var", "std") else 0)


@pytest.mark.parametrize("dt", R.FLOATS)
@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_nan_wins_and_signed_zeros(nv, dt, op):
    x = np.array([[1.0, np.nan, 3.0], [-np.inf, np.inf, -0.0], [2.0, 5.0, -1.0]]).astype(R.np_dtype(dt))
    for axes in [None, (0,), (1,)]:
        check_op(nv, op, x, axes)


@pytest.mark.parametrize("dt", ["int32", "float32", "float16", "uint8", "int64", "complex64"])
@pytest.mark.parametrize("n", [31, 32, 33, 1025, 65537])
def test_arg_ties_keep_the_first_index(nv, dt, n):
    t = np.zeros(n, R.np_dtype(dt))
    t[n // 3] = t[2 * n // 3] = 5
    t[n // 5] = -5 if dt != "uint8" else 0
    for op in ["argmax", "argmin"]:
        check_op(nv, op, t, None)
        m = np.ascontiguousarray(np.tile(t[:min(n, 4097)], (5, 1)).T)
        check_op(nv, op, m, (0,))
        check_op(nv, op, m, (1,), "transposed")


@pytest.mark.parametrize("dt", R.INTS)
def test_integer_sum_and_prod_wrap(nv, dt):
    info = np.iinfo(R.np_dtype(dt))
    x = np.array([info.max, info.max, 3, info.min] * 100, R.np_dtype(dt))
    for op in ["sum", "prod", "max", "min"]:
        check_op(nv, op, x, None)
        check_op(nv, op, x.reshape(100, 4), (0,))
        check_op(nv, op, x.reshape(100, 4), (1,), "strided")


def test_float32_sums_are_accurate(nv, rng):
    """float32 sums accumulate in float64, as the CPU's: 3M values near 1e4 to 1e-7."""
    x = (rng.random(3 << 20) * 1e3 + 1e4).astype(np.float32)
    w = np.sum(x.astype(np.float64))
    h = nv.array(x)
    got = nv.read(nv.own(lib.nv_sum(h, None, 0, False)))
    assert abs(float(got) - w) / w < 1e-7
    got = nv.read(nv.own(lib.nv_mean(h, None, 0, False)))
    assert abs(float(got) - w / x.size) / (w / x.size) < 1e-7
    big = (rng.random((4096, 24)) * 1e3 + 1e4).astype(np.float32)
    got = nv.read(nv.own(lib.nv_sum(nv.array(big), *ints([0]), False)))
    np.testing.assert_allclose(got, big.astype(np.float64).sum(0), rtol=1e-7)


@pytest.mark.parametrize("shape,axes", [((1 << 22,), None), ((3, 1000000), (1,)),
                                        ((1000000, 3), (0,)), ((8, 3, 5000), (0, 2)),
                                        ((5000, 2, 3), (0, 2)), ((2, 1 << 20), (1,))])
@pytest.mark.parametrize("dt", ["float32", "int32", "bfloat16", "float64"])
def test_long_reductions_split_over_blocks(nv, rng, shape, axes, dt):
    for op in ["sum", "mean", "max", "var", "all", "count_nonzero", "logsumexp", "prod", "argmin"]:
        if (op == "prod" and dt == "int32") or (op == "argmin" and axes is not None and len(axes) > 1):
            continue
        # No infinities in the long products: the CPU's chunk merge turns inf into NaN there
        # (src/cpu/reduce.c acc_merge multiplies as complex: inf * 0 in the imaginary part).
        edges = op not in ("var", "prod")
        check_op(nv, op, R.rand(rng, shape, dt, near_one=op == "prod", edges=edges), axes)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_logsumexp_and_softmax_rows_with_edges(nv, rng, layout):
    x = (rng.standard_normal((9, 3001)) * 30).astype(np.float32)
    x[1, 7] = np.nan
    x[2, 100] = np.inf
    x[3, :] = -np.inf
    x[4, :] = 80.0
    x[5, ::2] = -np.inf
    x[6, :] = rng.uniform(-200, -100, 3001)
    h, used = strided(nv, x, layout)
    got = nv.read(nv.own(lib.nv_logsumexp(h, *ints([1]), False)))
    np.testing.assert_allclose(got, R.reference("logsumexp", used, (1,)), rtol=2e-7, atol=0)
    check_op(nv, "softmax", x, (1,), layout)


@pytest.mark.parametrize("dt", R.FLOATS)
def test_softmax_and_logsumexp_special_rows(nv, dt):
    x = np.array([[np.nan, 1.0, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0],
                  [-np.inf, 0.0, 1.0], [-200.0, 0.0, 80.0]]).astype(R.np_dtype(dt))
    check_op(nv, "softmax", x, (1,))
    check_op(nv, "softmax", np.ascontiguousarray(x.T), (0,))
    check_op(nv, "logsumexp", x, (1,))
    check_op(nv, "logsumexp", np.ascontiguousarray(x.T), (0,))


def test_softmax_every_float32_exponent(nv):
    t = np.linspace(-87, 0, 100001).astype(np.float32)
    row = np.concatenate([t, [0.0]]).astype(np.float32)
    got = nv.read(nv.own(lib.nv_softmax(nv.array(row), None, 0, False)))
    want = np.exp(row.astype(np.float64)) / np.exp(row.astype(np.float64)).sum()
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-44)


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097, 8191,
                               8192, 8193, 16384, 16385, 20000])
@pytest.mark.parametrize("dt", R.FLOATS)
def test_row_lengths_around_the_register_limits(nv, rng, n, dt):
    x = R.rand(rng, (3, n), dt)
    for layout in ["contiguous", "reversed"]:
        check_op(nv, "softmax", x, (1,), layout)
        check_op(nv, "logsumexp", x, (1,), layout)


def edge_rows(rng, rows, n, dt):
    """rows x n values of dtype dt for the row kernels: normal values but row 1 (a NaN), 2 (a
    +inf), 3 (all -inf), 4 (every third -inf), 5 (all 80), 6 (in [-200, -100]) and 7 (a
    -inf at the end, 60 at the start: one element far above the others)."""
    x = rng.standard_normal((rows, n)) * 3
    x[1, n // 3] = np.nan
    x[2, n // 2] = np.inf
    x[3, :] = -np.inf
    x[4, ::3] = -np.inf
    x[5, :] = 80.0
    x[6, :] = rng.uniform(-200, -100, n)
    x[7, -1] = -np.inf
    x[7, 0] = 60.0
    return x.astype(R.np_dtype(dt))


def view(nv, base, shape, strides, offset):
    """A nuvec view of 1-D NumPy array `base` (element strides and offset)."""
    b = nv.array(np.ascontiguousarray(base))
    sh, nd = ints(list(shape))
    sts = (C.c_int64 * nd)(*strides)
    return nv.own(lib.nv_as_strided(b, sh, nd, sts, offset))


def check_rows(nv, h, used, axis, tag):
    for op in ["softmax", "logsumexp"]:
        got = nv.read(apply(nv, op, h, used, (axis,)))
        R.check(op, got, R.reference(op, used, (axis,)), used, (axis,), f"{op} {tag}")


ROW_LENGTHS = [1, 7, 32, 100, 128, 1000, 4096, 4097, 8192, 8193, 16384, 16385, 20000, 32768,
               32769, 70000]


@pytest.mark.parametrize("n", ROW_LENGTHS)
@pytest.mark.parametrize("dt", R.FLOATS)
def test_softmax_and_logsumexp_rows(nv, rng, dt, n):
    """The row kernels over rows of every length class (groups of a thread to a block, the base
    and wide register kernels, the long-row kernel, the engine), with NaN, +-inf and all -inf
    rows: contiguous; kept axes out of order (rows contiguous, walked through the kept strides);
    rows with gaps between them at an aligned offset; and at an offset of one element (the
    element-at-a-time path)."""
    x = edge_rows(rng, 8, n, dt)
    check_rows(nv, nv.array(x), x, 1, f"{dt} n={n} contiguous")
    v = x.reshape(2, 4, n)
    h, used = strided(nv, v, "permuted")
    check_rows(nv, h, used, 2, f"{dt} n={n} permuted outer axes")
    for pad, off in [(8, 8), (3, 1)]:
        base = np.zeros(off + 8 * (n + pad), x.dtype)
        base[off:].reshape(8, n + pad)[:, :n] = x
        check_rows(nv, view(nv, base, (8, n), (n + pad, 1), off), x, 1,
                   f"{dt} n={n} row stride {n + pad} offset {off}")


@pytest.mark.parametrize("dt,n", [("bfloat16", 20000), ("bfloat16", 32769), ("bfloat16", 32776),
                                  ("float16", 32776), ("float32", 12000), ("float32", 16385),
                                  ("float64", 4097)])
def test_many_long_rows(nv, rng, dt, n):
    """Enough rows past the register limits for the row kernels to take them (the half types'
    wide register kernel up to 32768 aligned elements, the long-row kernel past it or for
    unaligned rows), with NaN/inf rows, contiguous and at an offset of one element."""
    x = edge_rows(rng, 270, n, dt)
    check_rows(nv, nv.array(x), x, 1, f"{dt} {x.shape}")
    base = np.zeros(1 + x.size, x.dtype)
    base[1:] = x.reshape(-1)
    check_rows(nv, view(nv, base, x.shape, (n, 1), 1), x, 1, f"{dt} {x.shape} offset 1")


@pytest.mark.parametrize("dt", R.FLOATS)
@pytest.mark.parametrize("shape,axes", [((64, 4096), (1,)), ((300, 7), (1,)), ((70, 50), (0,)),
                                        ((3, 20000), (1,)), ((300, 9000), (1,))])
def test_softmax_in_place(nv, rng, dt, shape, axes):
    """softmax of a temporary writes into its buffer (donation): rows read before written."""
    x = R.rand(rng, shape, dt)
    t = lib.nv_add(nv.array(x), nv.own(lib.nv_weak_scalar(0.0)))  # a temporary nothing else holds
    r = nv.own(lib.nv_softmax(t, *ints(axes), False))
    lib.nv_release(t)
    got = nv.read(r)
    R.check("softmax", got, R.reference("softmax", x, axes), x, axes, "softmax in place")


def test_var_ddof_and_empty_reductions(nv, rng):
    x = R.rand(rng, (4, 2), "float32")
    for ddof in [0, 1, 2, 3]:
        check_op(nv, "var", x, (1,), ddof=ddof)
        check_op(nv, "std", x, (0,), ddof=ddof)
    for op in ["sum", "prod", "all", "any", "mean", "count_nonzero", "var", "std"]:
        for dt in ["float32", "int8", "bool", "complex64"]:
            if op in ("var", "std") and dt == "complex64":
                continue
            check_op(nv, op, np.zeros((0, 3), R.np_dtype(dt)), (0,))
            check_op(nv, op, np.zeros((3, 0), R.np_dtype(dt)), (1,))


@pytest.mark.skipif(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") < 48 << 30,
                    reason="needs 48 GiB of host memory")
def test_over_two_billion_elements(nv, rng):
    """64-bit offsets in the row, column and split kernels."""
    n = (1 << 31) + 77
    x = rng.integers(0, 256, n, dtype=np.uint8)
    for shape, axes, op in [((7, n // 7), None, "sum"), ((n // 33, 33), (1,), "sum"),
                            ((33, n // 33), (0,), "max"), ((n // 7, 7), (0,), "argmax")]:
        v = x[: int(np.prod(shape))].reshape(shape)
        check_op(nv, op, v, axes)


def test_kernels_are_deterministic(nv, rng):
    """Same input, same bits: no float atomics, a split fixed by the shapes."""
    x = rng.standard_normal((3, 1 << 20)).astype(np.float32)
    h = nv.array(x)
    for op in ["nv_sum", "nv_mean", "nv_logsumexp"]:
        a = nv.read(nv.own(getattr(lib, op)(h, *ints([1]), False)))
        b = nv.read(nv.own(getattr(lib, op)(h, *ints([1]), False)))
        assert a.tobytes() == b.tobytes(), op


# The fast argmax/argmin kernels (reduce_arg.cu): a (shape, axis) for each path they take.
ARG_PATHS = [
    ((5, 1024), 1),     # row: a warp a row, 16-byte loads
    ((3, 4099), 1),     # row: rows off 16-byte alignment (head, body and tail)
    ((2, 7), 1),        # row: a thread a row
    ((1, 300001), 1),   # row: one long row split over blocks (combined a thread an output)
    ((64, 1024), 0),    # col: 16 bytes of consecutive outputs a thread, one piece
    ((3, 512, 64), 1),  # col: the rows split over threadIdx.y
    ((20000, 16), 0),   # col: and over blockIdx.y (combined a warp an output)
    ((1000, 7), 0),     # col: one output a thread
]


def arg_values(rng, shape, dt, axis, case):
    """Values for the arg kernels. rand: R.rand with edges; ties: few distinct values, the
    integers' extremes repeated; nan_first / nan_last (floats): a NaN at the first / last index
    of every output (and, for nan_first, more NaNs after it); zeros (floats): only -0.0 and
    0.0, so that every output's first element is its extreme."""
    d = R.np_dtype(dt)
    if case == "rand":
        return R.rand(rng, shape, dt, edges=True)
    if case == "ties":
        x = R.rand(rng, shape, dt, ties=True)
        if dt in R.INTS and x.size:
            info = np.iinfo(d)
            flat = x.reshape(-1)
            for v in [info.max, info.min]:
                flat[rng.integers(0, flat.size, max(1, flat.size // 50))] = v
        return x
    x = np.moveaxis(R.rand(rng, shape, dt).astype(np.float64), axis, 0)
    n = x.shape[0]
    if case == "zeros":
        x = np.where(rng.random(x.shape) < 0.5, -0.0, 0.0)
    elif case == "nan_first":
        x[0] = np.nan
        x[rng.integers(0, n, 3)] = np.nan
    else:
        x[n - 1] = np.nan
    return np.ascontiguousarray(np.moveaxis(x, 0, axis)).astype(d)


@pytest.mark.parametrize("shape,axis", ARG_PATHS)
@pytest.mark.parametrize("dt", ["bool"] + R.INTS + R.FLOATS)
def test_arg_kernels_every_path(nv, rng, dt, shape, axis):
    """The first extreme (the first NaN) on every path of the fast kernels, contiguous and with
    the axis' stride changed (transposed: row and col swap) or broadcast."""
    cases = ["rand", "ties"] + (["nan_first", "nan_last", "zeros"] if dt in R.FLOATS else [])
    for case in cases:
        x = arg_values(rng, shape, dt, axis, case)
        for layout in ["contiguous", "transposed", "broadcast"]:
            if layout != "contiguous" and (case != "rand" or not R.layout_ok(layout, shape)):
                continue
            for op in ["argmax", "argmin"]:
                check_op(nv, op, x, (axis,), layout)


@pytest.mark.parametrize("dt", ["float32", "float16", "float64", "uint8", "int64"])
def test_arg_kernels_misaligned_and_long(nv, rng, dt):
    """Views starting off 16-byte alignment (element loads where a 16-byte one would
    straddle), and a row of 2^21 split into enough pieces that a warp combines them."""
    d = R.np_dtype(dt)
    for shape, axis in [((6, 1024), 1), ((64, 1024), 0), ((3, 64, 32), 1), ((33, 12), 0)]:
        n = int(np.prod(shape))
        for off in [1, 3]:
            base = R.rand(rng, (n + off,), dt, edges=True)
            base[off + n - 1] = base[off]  # a tie of the first and last elements
            used = base[off:].reshape(shape)
            h = view(nv, base, shape, R.row_major(list(shape)), off)
            for op in ["argmax", "argmin"]:
                got = nv.read(apply(nv, op, h, used, (axis,)))
                R.check(op, got, R.reference(op, used, (axis,)), used, (axis,),
                        f"{op} {dt} {shape} axis {axis} offset {off}")
    x = R.rand(rng, (1 << 21,), dt, ties=True)
    for pos in [0, (1 << 21) - 1, 12345]:
        y = x.copy()
        if dt in R.FLOATS:
            y[pos] = np.nan
        else:
            y[pos] = np.iinfo(d).max
            y[(pos + 777) % y.size] = np.iinfo(d).max  # a later tie
        for op in ["argmax"] + (["argmin"] if dt in R.FLOATS else []):
            check_op(nv, op, y, None)
    check_op(nv, "argmin", x.astype(d), (0,))
