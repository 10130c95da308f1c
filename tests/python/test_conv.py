"""The convolutions against a direct float64 convolution in NumPy (conv_ref.py): conv_general
over 1-3 spatial axes with strides, asymmetric and negative padding, kernel and input dilation,
groups (depthwise included), flip; conv1d/2d/3d and conv_transpose1d/2d/3d with
output_padding; every float dtype, strided/transposed/reversed operands, empty batches and
channels, NaN/inf; promotion; the errors, which name the op and the shapes; MLX's own results
where mlx is importable."""
import ctypes as C
import itertools

import numpy as np
import pytest

import conv_ref
from conftest import sample
from nvc import FLOATS, I, B, NuvecError, ints, lib, np_dtype, nv_name, ref64, sig

P = C.c_void_p
IP = C.POINTER(C.c_int)
sig("nv_conv_general", P, P, P, IP, IP, IP, IP, IP, I, B)
sig("nv_conv1d", P, P, P, I, I, I, I)
sig("nv_conv2d", P, P, P, IP, IP, IP, I)
sig("nv_conv3d", P, P, P, IP, IP, IP, I)
sig("nv_conv_transpose1d", P, P, P, I, I, I, I, I)
sig("nv_conv_transpose2d", P, P, P, IP, IP, IP, IP, I)
sig("nv_conv_transpose3d", P, P, P, IP, IP, IP, IP, I)
sig("nv_transpose", P, P, IP, I)
sig("nv_slice", P, P, IP, IP, IP, I)

EPS = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53}
# The smallest subnormal step of each: a result rounded into the subnormal range is off by up to
# half of it whatever its magnitude (a float16 depthwise product of small operands, say).
SUB = {"float16": 2.0**-24, "bfloat16": 2.0**-133, "float32": 2.0**-149, "float64": 2.0**-1074}


def arr_i(v):
    return ints(v)[0]


def conv(nv, x, w, stride, lo, hi, kd, idil, groups, flip):
    return nv.own(lib.nv_conv_general(x, w, arr_i(stride), arr_i(lo), arr_i(hi), arr_i(kd),
                                      arr_i(idil), groups, flip))


def check(got, x, w, want_fn, dt):
    """got against the float64 reference of the operands as rounded to dt, within the rounding
    of the result plus the accumulation's (float32, or float64) over the magnitudes, and a
    subnormal step of dt."""
    xr, wr = ref64(x.astype(np_dtype(dt))), ref64(w.astype(np_dtype(dt)))
    want = want_fn(xr, wr)
    bound = want_fn(np.abs(np.nan_to_num(xr)), np.abs(np.nan_to_num(wr)))
    assert nv_name(got.dtype) == dt
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    kc = w[0].size if w.shape[0] else 1
    acc = EPS["float64"] if dt == "float64" else EPS["float32"]
    tol = 2 * (EPS[dt] + (kc + 2) * acc) * bound + SUB[dt]
    g = ref64(got)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_array_equal(g[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)])
    err = np.abs(g - want)
    bad = fin & ~(err <= tol)
    assert not bad.any(), f"max error {err[bad].max()} at {np.argwhere(bad)[:3]}"


def rand(rng, shape, dt):
    return (rng.standard_normal(shape)).astype(np_dtype(dt))


# (input spatial, kernel spatial, C_in, C_out, groups, stride, lo, hi, kdil, idil, flip)
CASES = [
    ((9,), (3,), 4, 6, 1, (1,), (0,), (0,), (1,), (1,), False),
    ((10,), (3,), 4, 6, 2, (2,), (1,), (2,), (1,), (1,), False),
    ((8,), (2,), 3, 5, 1, (3,), (0,), (1,), (2,), (2,), True),
    ((7,), (3,), 6, 6, 6, (1,), (-1,), (2,), (1,), (3,), False),  # depthwise, negative pad
    ((5,), (1,), 1, 1, 1, (1,), (0,), (0,), (1,), (1,), False),
    ((8,), (3,), 3, 6, 3, (2,), (1,), (1,), (2,), (1,), True),  # depthwise, 2 out per group
    ((6, 7), (3, 2), 4, 6, 2, (1, 2), (1, 0), (2, 1), (1, 2), (1, 1), False),
    ((5, 5), (3, 3), 3, 3, 3, (2, 1), (1, 1), (1, 1), (1, 1), (2, 1), True),
    ((8, 6), (1, 1), 5, 7, 1, (2, 2), (0, 0), (0, 0), (1, 1), (1, 1), False),
    ((4, 4, 5), (2, 3, 2), 2, 4, 2, (1, 2, 1), (1, 0, 1), (0, 1, 2), (1, 1, 2), (1, 2, 1),
     False),
    ((3, 4, 3), (2, 2, 2), 3, 2, 1, (1, 1, 1), (0, 0, 0), (0, 0, 0), (1, 1, 1), (1, 1, 1), True),
]


@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_conv_general_matches_numpy(nv, rng, case, n):
    isp, ksp, cin, cout, g, st, lo, hi, kd, idl, flip = case
    x = rand(rng, (n,) + isp + (cin,), "float32")
    w = rand(rng, (cout,) + ksp + (cin // g,), "float32")
    got = nv.read(conv(nv, nv.array(x), nv.array(w), st, lo, hi, kd, idl, g, flip))
    check(got, x, w, lambda a, b: conv_ref.conv_general(a, b, st, lo, hi, kd, idl, g, flip),
          "float32")


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("case", sample(CASES, 5, salt=1), ids=str)
def test_conv_general_every_dtype(nv, rng, case, dt):
    isp, ksp, cin, cout, g, st, lo, hi, kd, idl, flip = case
    x = rand(rng, (2,) + isp + (cin,), dt)
    w = rand(rng, (cout,) + ksp + (cin // g,), dt)
    got = nv.read(conv(nv, nv.array(x), nv.array(w), st, lo, hi, kd, idl, g, flip))
    check(got, x, w, lambda a, b: conv_ref.conv_general(a, b, st, lo, hi, kd, idl, g, flip), dt)


def test_conv_large_tiles_and_taps(nv, rng):
    """Enough rows and taps × channels that the CPU kernel cuts both (several tiles, several
    tap slices accumulated), with groups."""
    x = rand(rng, (2, 40, 40, 64), "float32")
    w = rand(rng, (32, 5, 5, 32), "float32")
    got = nv.read(conv(nv, nv.array(x), nv.array(w), (1, 1), (2, 2), (2, 2), (1, 1), (1, 1), 2,
                       False))
    check(got, x, w, lambda a, b: conv_ref.conv_general(a, b, 1, 2, 2, 1, 1, 2, False),
          "float32")


@pytest.mark.parametrize("lx,lw", list(itertools.product(["contiguous", "transposed", "strided",
                                                          "reversed"], repeat=2)))
def test_conv_layouts(nv, rng, lx, lw):
    x = rand(rng, (2, 7, 6, 4), "float32")
    w = rand(rng, (6, 3, 2, 2), "float32")
    got = nv.read(conv(nv, nv.view(x, lx), nv.view(w, lw), (2, 1), (1, 0), (0, 1), (1, 1),
                       (1, 1), 2, False))
    check(got, x, w, lambda a, b: conv_ref.conv_general(a, b, (2, 1), (1, 0), (0, 1), 1, 1, 2),
          "float32")


def test_conv_half_layouts(nv, rng):
    x = rand(rng, (2, 6, 5), "bfloat16")
    w = rand(rng, (3, 2, 5), "float16")
    got = nv.read(conv(nv, nv.view(x, "strided"), nv.view(w, "transposed"), (1,), (1,), (1,),
                       (1,), (1,), 1, False))
    check(got, x.astype(np.float32), w.astype(np.float32),
          lambda a, b: conv_ref.conv_general(a, b, 1, 1, 1), "float32")


@pytest.mark.parametrize("nsp", [1, 2, 3])
def test_conv_nd_wrappers(nv, rng, nsp):
    isp, ksp = [(9,), (6, 5), (4, 5, 3)][nsp - 1], [(3,), (3, 2), (2, 2, 2)][nsp - 1]
    st, pad, dil = [1 + i % 2 for i in range(nsp)], [1] * nsp, [1 + (i == 0) for i in range(nsp)]
    x = rand(rng, (2,) + isp + (4,), "float32")
    w = rand(rng, (6,) + ksp + (2,), "float32")
    xa, wa = nv.array(x), nv.array(w)
    if nsp == 1:
        h = lib.nv_conv1d(xa, wa, st[0], pad[0], dil[0], 2)
    else:
        f = lib.nv_conv2d if nsp == 2 else lib.nv_conv3d
        h = f(xa, wa, arr_i(st), arr_i(pad), arr_i(dil), 2)
    got = nv.read(nv.own(h))
    check(got, x, w, lambda a, b: conv_ref.conv_general(a, b, st, pad, pad, dil, 1, 2), "float32")


TCASES = [
    ((7,), (3,), 1, 0, 1, 0, 1),
    ((5,), (3,), 2, 1, 1, 1, 2),
    ((4,), (4,), 3, 2, 2, 2, 1),
    ((6,), (2,), 2, 0, 3, 1, 2),
    ((4, 3), (3, 2), (2, 1), (1, 0), (1, 2), (1, 0), 2),
    ((3, 3, 2), (2, 2, 2), (2, 1, 2), (0, 1, 0), (1, 1, 1), (1, 0, 1), 1),
]


@pytest.mark.parametrize("case", TCASES, ids=range(len(TCASES)))
def test_conv_transpose_matches_definition(nv, rng, case):
    isp, ksp, st, pad, dil, op, g = case
    nsp = len(isp)
    x = rand(rng, (2,) + isp + (4,), "float32")
    w = rand(rng, (6,) + ksp + (4 // g,), "float32")
    xa, wa = nv.array(x), nv.array(w)
    per = lambda v: list(v) if isinstance(v, tuple) else [v] * nsp
    if nsp == 1:
        h = lib.nv_conv_transpose1d(xa, wa, st, pad, dil, op, g)
    else:
        f = lib.nv_conv_transpose2d if nsp == 2 else lib.nv_conv_transpose3d
        h = f(xa, wa, arr_i(per(st)), arr_i(per(pad)), arr_i(per(dil)), arr_i(per(op)), g)
    got = nv.read(nv.own(h))
    check(got, x, w,
          lambda a, b: conv_ref.conv_transpose_scatter(a, b, st, pad, dil, op, g), "float32")


@pytest.mark.parametrize("shape_x,shape_w,want", [
    ((0, 8, 4), (6, 3, 4), (0, 6, 6)),   # empty batch
    ((2, 8, 0), (6, 3, 0), (2, 6, 6)),   # no input channels: zeros
    ((2, 8, 4), (0, 3, 4), (2, 6, 0)),   # no output channels
    ((2, 4, 2), (3, 0, 2), (2, 5, 3)),   # an empty kernel: zeros (MLX's shape)
])
def test_conv_empty(nv, rng, shape_x, shape_w, want):
    x = rand(rng, shape_x, "float32")
    w = rand(rng, shape_w, "float32")
    got = nv.read(conv(nv, nv.array(x), nv.array(w), (1,), (0,), (0,), (1,), (1,), 1, False))
    assert got.shape == want
    np.testing.assert_array_equal(got, np.zeros(want, np.float32))


def test_conv_nan_inf(nv, rng):
    x = rand(rng, (1, 8, 2), "float32")
    w = rand(rng, (2, 3, 2), "float32")
    x[0, 2, 0] = np.nan
    x[0, 6, 1] = np.inf
    w[1, 0, 0] = 0.0
    got = nv.read(conv(nv, nv.array(x), nv.array(w), (1,), (1,), (1,), (1,), (1,), 1, False))
    want = conv_ref.conv_general(x, w, 1, 1, 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])


@pytest.mark.parametrize("dx,dw,want", [
    ("float16", "float32", "float32"), ("float16", "bfloat16", "float32"),
    ("bfloat16", "bfloat16", "bfloat16"), ("float32", "float64", "float64"),
    ("float16", "int32", "float16"),
])
def test_conv_promotion(nv, rng, dx, dw, want):
    x = rand(rng, (1, 5, 2), dx)
    w = (rng.integers(-3, 4, (3, 2, 2)) if dw == "int32" else rand(rng, (3, 2, 2), dw)).astype(
        np_dtype(dw))
    got = nv.read(nv.own(lib.nv_conv1d(nv.array(x), nv.array(w), 1, 0, 1, 1)))
    assert nv_name(got.dtype) == want
    check(got, x.astype(np_dtype(want)), w.astype(np_dtype(want)),
          lambda a, b: conv_ref.conv_general(a, b), want)


def error_of(nv, h):
    with pytest.raises(NuvecError) as e:
        nv.read(nv.own(h))
    return e.value.message


def test_conv_errors(nv, rng):
    x = nv.array(rand(rng, (2, 8, 4), "float32"))
    w = nv.array(rand(rng, (6, 3, 4), "float32"))
    one = arr_i([1])
    m = error_of(nv, lib.nv_conv1d(x, nv.array(rand(rng, (6, 3, 3), "float32")), 1, 0, 1, 1))
    assert "conv1d" in m and "(2,8,4)" in m.replace(" ", "") and "(6,3,3)" in m.replace(" ", "")
    m = error_of(nv, lib.nv_conv1d(x, nv.array(rand(rng, (6, 3, 2), "float32")), 1, 0, 1, 3))
    assert "groups" in m and "divisible" in m
    m = error_of(nv, lib.nv_conv1d(x, nv.array(rand(rng, (5, 3, 2), "float32")), 1, 0, 1, 2))
    assert "output channels" in m
    m = error_of(nv, lib.nv_conv1d(x, w, 1, 0, 1, 0))
    assert "groups must be positive" in m
    m = error_of(nv, lib.nv_conv1d(x, w, 0, 0, 1, 1))
    assert "strides must be positive" in m
    m = error_of(nv, lib.nv_conv1d(x, w, 1, 0, 0, 1))
    assert "dilations must be positive" in m
    m = error_of(nv, lib.nv_conv1d(x, nv.array(rand(rng, (6, 9, 4), "float32")), 1, 0, 1, 1))
    assert "shorter than the dilated kernel" in m
    m = error_of(nv, lib.nv_conv2d(x, w, None, None, None, 1))
    assert "conv2d" in m and "4 axes" in m
    m = error_of(nv, lib.nv_conv_general(nv.array(rand(rng, (2, 4), "float32")),
                                         nv.array(rand(rng, (2, 4), "float32")), one, None, None,
                                         None, None, 1, False))
    assert "1 to 3 spatial axes" in m
    m = error_of(nv, lib.nv_conv_general(x, nv.array(rand(rng, (6, 3, 3, 4), "float32")), one,
                                         None, None, None, None, 1, False))
    assert "weight must have 3 axes" in m
    xi = nv.array(rng.integers(0, 3, (2, 8, 4)).astype(np.int32))
    m = error_of(nv, lib.nv_conv1d(xi, w, 1, 0, 1, 1))
    assert "floating point" in m and "int32" in m
    xc = nv.array(np.ones((2, 8, 4), np.complex64))
    m = error_of(nv, lib.nv_conv1d(xc, w, 1, 0, 1, 1))
    assert "complex64" in m
    m = error_of(nv, lib.nv_conv1d(None, w, 1, 0, 1, 1))
    assert "conv1d" in m


mx = None
try:
    import mlx.core as mx  # noqa: F811
except ImportError:  # pragma: no cover
    pass


@pytest.mark.skipif(mx is None, reason="mlx not installed")
@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_conv_general_matches_mlx(nv, rng, case):
    isp, ksp, cin, cout, g, st, lo, hi, kd, idl, flip = case
    if len(isp) == 3 and g > 1:
        pytest.skip("MLX has no grouped 3-D convolution (nuvec has)")
    x = rand(rng, (2,) + isp + (cin,), "float32")
    w = rand(rng, (cout,) + ksp + (cin // g,), "float32")
    got = nv.read(conv(nv, nv.array(x), nv.array(w), st, lo, hi, kd, idl, g, flip))
    want = np.array(mx.conv_general(mx.array(x), mx.array(w), stride=list(st),
                                    padding=(list(lo), list(hi)), kernel_dilation=list(kd),
                                    input_dilation=list(idl), groups=g, flip=flip,
                                    stream=mx.cpu))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
