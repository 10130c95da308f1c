"""The CUDA backend's convolution (conv_general and the ops composed from it) on the GPU
against nuvec's CPU results: 1-3 spatial axes, strides, asymmetric and negative padding, kernel
and input dilation, groups (depthwise included), flip, transposed convolutions with
output_padding, every float dtype, strided/transposed/reversed operands, empty batches and
channels, NaN/inf; shapes past one block tile in rows, channels and the contraction (the
direct kernel's tiles and its stride loops), and the ResNet-style bench shape (cuDNN where it
is found). Float results are accumulated in a different order on the GPU (and in tensor cores
under cuDNN for float16/bfloat16), so they compare within a tolerance of the output dtype over
the magnitudes. Every op is built with the GPU as the default device (skipped where no GPU is
usable) and must run there (no CPU fallback). `NUVEC_TEST_FULL=1` runs every case."""
import ctypes as C
import itertools
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import On, gpu_and_cpu, needs_gpu, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import FLOATS, Session, ints, lib, np_dtype, nv_name, ref64, sig  # noqa: E402

P = C.c_void_p
I = C.c_int
IP = C.POINTER(C.c_int)
sig("nv_conv_general", P, P, P, IP, IP, IP, IP, IP, I, C.c_bool)
sig("nv_conv_transpose2d", P, P, P, IP, IP, IP, IP, I)
sig("nv_abs", P, P)

pytestmark = needs_gpu

EPS = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53}
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def arr_i(v):
    return ints(v)[0]


def compare(got, want, bound, dt, kc):
    """Within two roundings of the dtype plus the accumulation's over the magnitudes `bound`
    (the CPU's result on |x|, |w|); NaN and inf where the CPU has them."""
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w, b = ref64(got), ref64(want), np.abs(ref64(bound))
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    inf = np.isinf(w)
    np.testing.assert_array_equal(g[inf], w[inf])
    acc = EPS["float64"] if dt == "float64" else EPS["float32"]
    # Tensor cores may round float32 products of float16/bfloat16 inputs once more.
    tol = (4 * EPS[dt] + 2 * (kc + 2) * acc) * b + 1e-30
    fin = np.isfinite(w)
    err = np.abs(g - w)
    bad = fin & ~(err <= tol)
    assert not bad.any(), f"max error {err[bad].max()} at {np.argwhere(bad)[:3]}"


def run_conv(nv, x, w, st, lo, hi, kd, idl, g, flip, lx="contiguous", lw="contiguous"):
    dt = nv_name(x.dtype)

    def make(a, b):
        return lambda: nv.own(lib.nv_conv_general(nv.view(a, lx), nv.view(b, lw), arr_i(st),
                                                  arr_i(lo), arr_i(hi), arr_i(kd), arr_i(idl),
                                                  g, flip))

    got, want = gpu_and_cpu(nv, make(x, w))
    with On("cpu"):
        bound = nv.read(make(np.abs(np.nan_to_num(x)), np.abs(np.nan_to_num(w)))())
    compare(got, want, bound, dt, w[0].size if w.shape[0] else 1)


def rand(rng, shape, dt):
    return rng.standard_normal(shape).astype(np_dtype(dt))


CASES = [
    ((9,), (3,), 4, 6, 1, (1,), (0,), (0,), (1,), (1,), False),
    ((10,), (3,), 4, 6, 2, (2,), (1,), (2,), (1,), (1,), False),
    ((8,), (2,), 3, 5, 1, (3,), (0,), (1,), (2,), (2,), True),
    ((7,), (3,), 6, 6, 6, (1,), (-1,), (2,), (1,), (3,), False),
    ((6, 7), (3, 2), 4, 6, 2, (1, 2), (1, 0), (2, 1), (1, 2), (1, 1), False),
    ((5, 5), (3, 3), 3, 3, 3, (2, 1), (1, 1), (1, 1), (1, 1), (2, 1), True),
    ((8, 6), (1, 1), 5, 7, 1, (2, 2), (0, 0), (0, 0), (1, 1), (1, 1), False),
    ((12, 12), (3, 3), 8, 16, 1, (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), False),  # cuDNN's
    ((12, 12), (3, 3), 8, 16, 1, (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), True),   # mode flip
    ((11, 9), (3, 3), 8, 8, 8, (2, 2), (1, 1), (1, 1), (2, 2), (1, 1), False),    # depthwise
    ((4, 4, 5), (2, 3, 2), 2, 4, 2, (1, 2, 1), (1, 0, 1), (0, 1, 2), (1, 1, 2), (1, 2, 1),
     False),
    # Stride 1, input dilation, 0 <= hi - lo < dilation: cuDNN's backward data, both modes.
    ((6, 5), (3, 2), 4, 6, 2, (1, 1), (1, 0), (2, 1), (1, 2), (2, 3), False),
    ((6, 5), (3, 2), 4, 6, 2, (1, 1), (1, 0), (2, 1), (1, 2), (2, 3), True),
    ((9,), (4,), 3, 5, 1, (1,), (3,), (3,), (1,), (2,), True),
    ((3, 4, 3), (2, 2, 2), 4, 2, 1, (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1), True),
]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_conv_cases(nv, rng, case, dt):
    isp, ksp, cin, cout, g, st, lo, hi, kd, idl, flip = case
    for n in (1, 3):
        x = rand(rng, (n,) + isp + (cin,), dt)
        w = rand(rng, (cout,) + ksp + (cin // g,), dt)
        run_conv(nv, x, w, st, lo, hi, kd, idl, g, flip)


@pytest.mark.parametrize("lx,lw", sample(itertools.product(LAYOUTS, repeat=2), 8))
def test_conv_layouts(nv, rng, lx, lw):
    for dt in ["float32", "bfloat16"]:
        x = rand(rng, (2, 9, 8, 4), dt)
        w = rand(rng, (6, 3, 3, 4), dt)
        run_conv(nv, x, w, (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), 1, False, lx, lw)
        run_conv(nv, x, w[:, :, :, :2], (2, 1), (1, 0), (0, 1), (1, 1), (1, 1), 2, False, lx, lw)


def test_conv_large_rows(nv, rng):
    """Past one tile in rows (64), channels (64) and the contraction (16): partial tiles at
    every edge, several channel tiles per group, groups in grid.y."""
    for dt in ["float32", "float16", "float64"]:
        x = rand(rng, (3, 23, 19, 48), dt)
        w = rand(rng, (130, 3, 3, 24), dt)
        run_conv(nv, x, w, (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), 2, False)
        w1 = rand(rng, (70, 5, 5, 48), dt)
        run_conv(nv, x, w1, (2, 2), (2, 1), (1, 2), (1, 1), (1, 1), 1, True)


def test_conv_split_contraction(nv, rng):
    """Few output tiles and a long contraction (a weight gradient's shape): the direct kernel
    splits the contraction (grid.z) and sums the slices; cuDNN or the split path either way,
    and input dilation forces the direct kernel."""
    for dt in ["float32", "float64", "bfloat16"]:
        x = rand(rng, (6, 34, 33, 8), dt)
        w = rand(rng, (5, 30, 31, 8), dt)
        run_conv(nv, x, w, (1, 1), (0, 0), (0, 0), (1, 1), (1, 1), 1, False)
        run_conv(nv, x, w, (2, 1), (1, 0), (2, 1), (1, 1), (2, 2), 1, True)


def test_conv_bench_shape(nv, rng):
    """The bench row's shape: 32 × 56 × 56 × 64, 3 × 3, 64 channels, padding 1."""
    for dt in ["bfloat16", "float32"]:
        x = rand(rng, (32, 56, 56, 64), dt)
        w = (rand(rng, (64, 3, 3, 64), dt).astype(np.float32) * 0.1).astype(np_dtype(dt))
        run_conv(nv, x, w, (1, 1), (1, 1), (1, 1), (1, 1), (1, 1), 1, False)


def test_conv_transpose(nv, rng):
    for dt in ["float32", "bfloat16"]:
        x = rand(rng, (2, 5, 4, 4), dt)
        w = rand(rng, (6, 3, 2, 2), dt)

        def make(a, b):
            return lambda: nv.own(lib.nv_conv_transpose2d(
                nv.array(a), nv.array(b), arr_i([2, 3]), arr_i([1, 0]), arr_i([1, 2]),
                arr_i([1, 2]), 2))

        got, want = gpu_and_cpu(nv, make(x, w))
        with On("cpu"):
            bound = nv.read(make(np.abs(x), np.abs(w))())
        compare(got, want, bound, dt, w[0].size)


def test_conv_empty_and_special(nv, rng):
    for xs, ws in [((0, 8, 4), (6, 3, 4)), ((2, 8, 0), (6, 3, 0)), ((2, 8, 4), (0, 3, 4)),
                   ((2, 4, 2), (3, 0, 2))]:
        x, w = rand(rng, xs, "float32"), rand(rng, ws, "float32")
        run_conv(nv, x, w, (1,), (0,), (0,), (1,), (1,), 1, False)
    x = rand(rng, (1, 9, 2), "float32")
    w = rand(rng, (2, 3, 2), "float32")
    x[0, 2, 0], x[0, 6, 1] = np.nan, np.inf
    run_conv(nv, x, w, (1,), (1,), (1,), (1,), (1,), 1, False)
