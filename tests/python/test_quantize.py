"""Quantization (include/nuvec/quantize.h) against a NumPy reference of each mode's definition,
and bit for bit against MLX where mlx is importable: quantize's packed words and scales,
dequantize over every code, quantized_matmul against the dequantized product."""
import ctypes as C

import numpy as np
import pytest

from nvc import BF16, CODE, FLOATS, B, I, NuvecError, P, lib, np_dtype, sig

sig("nv_quantize", I, P, I, I, C.c_char_p, P)
sig("nv_dequantize", P, P, P, P, I, I, C.c_char_p, I)
sig("nv_quantized_matmul", P, P, P, P, P, B, I, I, C.c_char_p)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_size", C.c_size_t, P)
sig("nv_vec_get", P, P, C.c_size_t)

HALF = ["float16", "bfloat16", "float32"]
AFFINE = [(g, b) for b in (1, 2, 3, 4, 5, 6, 8) for g in (32, 64, 128)]
FP = {"mxfp4": (32, 4, 6.0), "mxfp8": (32, 8, 448.0), "nvfp4": (16, 4, 6.0)}
NONE_DTYPE = len(CODE)  # NV_DTYPE_COUNT: dequantize's default dtype


def mlx():
    try:
        import mlx.core as mx
    except ImportError:
        return None
    return mx


def to_mx(mx, x):
    if BF16 is not None and x.dtype == BF16:
        return mx.array(x.astype(np.float32)).astype(mx.bfloat16)
    return mx.array(x)


def from_mx(mx, a):
    if a.dtype == mx.bfloat16:
        return np.array(a.astype(mx.float32)).astype(BF16)
    return np.array(a)


def quantize(nv, w, gs, bits, mode):
    v = lib.nv_vec_new()
    try:
        st = lib.nv_quantize(nv.array(w), gs, bits, mode.encode(), v)
        if st != 0:
            raise NuvecError(st, lib.nv_last_error().decode())
        return [nv.read(lib.nv_vec_get(v, i)) for i in range(lib.nv_vec_size(v))]
    finally:
        lib.nv_vec_free(v)


def dequantize(nv, q, s, b, gs, bits, mode, dtype=None):
    code = NONE_DTYPE if dtype is None else CODE[dtype]
    h = lib.nv_dequantize(nv.array(q), nv.array(s), nv.array(b) if b is not None else None,
                          gs, bits, mode.encode(), code)
    return nv.read(nv.own(h))


def qmm(nv, x, q, s, b, transpose, gs, bits, mode, xh=None):
    h = lib.nv_quantized_matmul(xh if xh is not None else nv.array(x), nv.array(q), nv.array(s),
                                nv.array(b) if b is not None else None, transpose, gs, bits,
                                mode.encode())
    return nv.read(nv.own(h))


# ---- NumPy reference of the formats ----

def f32(x):
    return np.asarray(x, dtype=np.float32)


def rnd(x, dtype):
    """float32 values rounded to `dtype` and back to float32 (overflowing to inf)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return f32(np.asarray(x, np.float32).astype(np_dtype(dtype)))


def pack(codes, bits):
    """Codes (..., K) as the little-endian bit stream in uint32 words."""
    codes = np.asarray(codes, np.uint64)
    b = ((codes[..., None] >> np.arange(bits, dtype=np.uint64)) & 1).astype(np.uint8)
    b = b.reshape(codes.shape[:-1] + (-1,))
    return np.packbits(b, axis=-1, bitorder="little").view(np.uint32)


def unpack(q, bits):
    b = np.unpackbits(q.view(np.uint8), axis=-1, bitorder="little")
    b = b.reshape(q.shape[:-1] + (-1, bits)).astype(np.uint32)
    return (b << np.arange(bits, dtype=np.uint32)).sum(-1).astype(np.uint32)


def ref_affine(w, gs, bits):
    """(codes, float32 scales, float32 biases) of affine quantization in float32."""
    g = f32(w).reshape(w.shape[:-1] + (-1, gs))
    wmax, wmin = g.max(-1), g.min(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if bits == 1:
            s = np.maximum(wmax - wmin, np.float32(1e-7))
            b = wmin
        else:
            nb = np.float32(2**bits - 1)
            neg = np.abs(wmin) > np.abs(wmax)
            s = np.maximum((wmax - wmin) / nb, np.float32(1e-7))
            s = np.where(neg, s, -s)
            edge = np.where(neg, wmin, wmax)
            q0 = np.rint(edge / s)
            s = f32(np.where(q0 != 0, edge / q0, s))
            b = f32(np.where(q0 != 0, edge, 0))
        q = np.clip(np.rint((g - b[..., None]) / s[..., None]), 0, 2**bits - 1)
    return q.astype(np.uint32).reshape(w.shape), f32(s), f32(b)


FP4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
FP8 = np.array([(m / 8) * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
                for e in range(16) for m in range(8)][:127])


def enc_fp4(q):
    a = np.minimum(np.abs(q.astype(np.float64)), 6)
    c = np.searchsorted((FP4[1:] + FP4[:-1]) / 2, a, side="left")  # ties toward zero
    return (c | np.where((c != 0) & np.signbit(q), 8, 0)).astype(np.uint32)


def enc_fp8(q):
    a = np.minimum(np.abs(q.astype(np.float64)), 448)
    i = np.clip(np.searchsorted(FP8, a), 1, len(FP8) - 1)
    lo, hi = FP8[i - 1], FP8[i]
    c = np.where(a - lo < hi - a, i - 1, np.where(a - lo > hi - a, i, np.where((i - 1) % 2 == 0, i - 1, i)))
    return (c | np.where(np.signbit(q), 128, 0)).astype(np.uint32)


def fp8_value(c):
    c = np.asarray(c, np.int64)
    v = np.where((c & 127) == 127, np.nan, FP8[np.minimum(c & 127, 126)])
    return np.where(c & 128, -v, v)


def ref_fp(w, mode):
    """(codes, uint8 scales) of an fp mode."""
    gs, bits, maxval = FP[mode]
    g = f32(w).reshape(w.shape[:-1] + (-1, gs))
    amax = np.abs(g).max(-1)
    if mode == "nvfp4":
        sc = enc_fp8(f32(amax / np.float32(6)))
        sv = f32(fp8_value(sc))
    else:
        s = f32(amax / np.float32(maxval))
        m, ex = np.frexp(s.astype(np.float64))
        e = np.where(m == 0.5, ex - 1, ex)
        sc = np.where(s == 0, 127, (e + 127) % 256)
        sv = f32(np.where(s == 0, 1, np.ldexp(1.0, e)))
    with np.errstate(divide="ignore", invalid="ignore"):
        q = f32(np.where(sv[..., None] == 0, 0, g / sv[..., None]))
    codes = enc_fp8(q) if mode == "mxfp8" else enc_fp4(q)
    return codes.reshape(w.shape), sc.astype(np.uint8)


def draw(rng, shape, dtype):
    """Weights of varied magnitude per row (some rows tiny, some large), with exact zeros."""
    x = rng.standard_normal(shape) * np.exp(rng.uniform(-6, 6, shape[:-1] + (1,)))
    x[..., ::17] = 0
    return x.astype(np.float32).astype(np_dtype(dtype))


# ---- quantize ----

@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("gs,bits", AFFINE)
def test_quantize_affine_matches_reference(nv, rng, dtype, gs, bits):
    w = draw(rng, (6, 2 * gs), dtype)
    q, s, b = quantize(nv, w, gs, bits, "affine")
    codes, rs, rb = ref_affine(w, gs, bits)
    assert q.dtype == np.uint32 and q.shape == (6, 2 * gs * bits // 32)
    assert s.dtype == np_dtype(dtype) and s.shape == (6, 2)
    np.testing.assert_array_equal(q, pack(codes, bits))
    np.testing.assert_array_equal(f32(s), rnd(rs, dtype))
    np.testing.assert_array_equal(f32(b), rnd(rb, dtype))


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("mode", sorted(FP))
def test_quantize_fp_matches_reference(nv, rng, dtype, mode):
    gs = FP[mode][0]
    w = draw(rng, (8, 4 * gs), dtype)
    q, s = quantize(nv, w, 0, 0, mode)
    codes, sc = ref_fp(w, mode)
    assert s.dtype == np.uint8 and s.shape == (8, 4)
    np.testing.assert_array_equal(s, sc)
    np.testing.assert_array_equal(q, pack(codes, FP[mode][1]))


def edge_rows(gs):
    rows = [np.full(gs, 1.5), np.zeros(gs), np.full(gs, -3.0), np.full(gs, 1e-9),
            np.linspace(-1, 1, gs), np.linspace(0, 5, gs), np.linspace(-7, 0, gs),
            np.r_[[1e-30], np.zeros(gs - 1)], np.r_[[3e38, -1e38], np.ones(gs - 2)],
            np.r_[[1e-38, 2e-39], np.zeros(gs - 2)], np.r_[[-0.0], np.zeros(gs - 1)]]
    # E2M1 and E4M3 midpoints at scale 1 (pinned by a 6 or 448 in the group).
    mids = np.r_[(FP4[1:] + FP4[:-1]) / 2]
    rows.append(np.r_[[6.0], mids, -mids, np.zeros(gs - 1 - 2 * len(mids))][:gs])
    return np.array(rows, np.float32)


@pytest.mark.parametrize("mode", ["affine"] + sorted(FP))
def test_quantize_edge_values(nv, mode):
    gs = FP[mode][0] if mode in FP else 32
    w = edge_rows(gs)
    if mode == "affine":
        with np.errstate(over="ignore"):
            w = w[np.isfinite(w.max(1) - w.min(1))]  # a group whose range overflows: no bits
        for bits in (1, 3, 4, 8):
            q, s, b = quantize(nv, w, gs, bits, mode)
            codes, rs, rb = ref_affine(w, gs, bits)
            np.testing.assert_array_equal(q, pack(codes, bits))
            np.testing.assert_array_equal(s, rs)
            np.testing.assert_array_equal(b, rb)
    else:
        q, s = quantize(nv, w, 0, 0, mode)
        codes, sc = ref_fp(w, mode)
        np.testing.assert_array_equal(s, sc)
        np.testing.assert_array_equal(q, pack(codes, FP[mode][1]))


def test_quantize_batched_float64_and_strided(nv, rng):
    w = rng.standard_normal((2, 3, 64))
    q, s, b = quantize(nv, w, 32, 4, "affine")
    codes, rs, rb = ref_affine(w.astype(np.float32), 32, 4)
    assert q.shape == (2, 3, 8) and s.dtype == np.float64
    np.testing.assert_array_equal(q, pack(codes, 4))
    np.testing.assert_array_equal(s, rs.astype(np.float64))
    # A transposed view quantizes its logical rows.
    wt = rng.standard_normal((64, 5)).astype(np.float32)
    from nvc import lib as L
    h = nv.own(L.nv_transpose(nv.array(wt), None, 0))
    v = lib.nv_vec_new()
    assert lib.nv_quantize(h, 64, 8, b"affine", v) == 0
    got = nv.read(lib.nv_vec_get(v, 0))
    lib.nv_vec_free(v)
    np.testing.assert_array_equal(got, pack(ref_affine(wt.T.copy(), 64, 8)[0], 8))


@pytest.mark.parametrize("args,msg", [
    ((64, 16, 4, "affine"), "group size 16 is not supported"),
    ((64, 64, 7, "affine"), "number of bits 7 is not supported"),
    ((64, 64, 4, "foo"), "invalid quantization mode 'foo'"),
    ((64, 64, 4, "mxfp4"), "mxfp4 quantization requires group size 32 but got 64"),
    ((64, 16, 8, "nvfp4"), "nvfp4 quantization requires bits to be 4 but got 8"),
    ((48, 64, 4, "affine"), "must be divisible by the group size 64"),
])
def test_quantize_errors(nv, args, msg):
    K, gs, bits, mode = args
    v = lib.nv_vec_new()
    st = lib.nv_quantize(nv.array(np.ones((2, K), np.float32)), gs, bits, mode.encode(), v)
    err = lib.nv_last_error().decode()
    assert st != 0 and lib.nv_vec_size(v) == 0
    lib.nv_vec_free(v)
    assert err.startswith("quantize:") and msg in err, err


def test_quantize_rejects_1d_and_ints(nv):
    for x, msg in [(np.ones(64, np.float32), "at least 2 dimensions"),
                   (np.ones((2, 64), np.int32), "only real floating types")]:
        v = lib.nv_vec_new()
        assert lib.nv_quantize(nv.array(x), 64, 4, b"affine", v) != 0
        lib.nv_vec_free(v)
        assert msg in lib.nv_last_error().decode()


# ---- dequantize ----

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5, 6, 8])
def test_dequantize_affine(nv, rng, dtype, bits):
    gs = 64
    codes = rng.integers(0, 2**bits, (5, 2 * gs)).astype(np.uint32)
    s = (rng.standard_normal((5, 2)) * 0.1).astype(np_dtype(dtype))
    b = rng.standard_normal((5, 2)).astype(np_dtype(dtype))
    got = dequantize(nv, pack(codes, bits), s, b, gs, bits, "affine")
    assert got.dtype == np_dtype(dtype)
    c = codes.reshape(5, 2, gs).astype(np.float64)
    if dtype == "float64":
        want = (s[..., None] * c + b[..., None]).reshape(5, -1)
        np.testing.assert_array_equal(got, want)
    else:
        want = rnd(rnd(f32(s)[..., None] * f32(c), dtype) + f32(b)[..., None], dtype)
        np.testing.assert_array_equal(f32(got), want.reshape(5, -1))
    # An explicit dtype converts the scales' dtype's result.
    got32 = dequantize(nv, pack(codes, bits), s, b, gs, bits, "affine", "float32")
    np.testing.assert_array_equal(got32, f32(got))


@pytest.mark.parametrize("dtype", [None] + FLOATS)
@pytest.mark.parametrize("mode", sorted(FP))
def test_dequantize_fp_every_code(nv, rng, dtype, mode):
    gs, bits, _ = FP[mode]
    ncodes = 2**bits
    scales = np.arange(256, dtype=np.uint8)
    rng.shuffle(scales)
    codes = np.tile(np.arange(ncodes, dtype=np.uint32), 256 * gs // ncodes)[: 256 * gs]
    codes = rng.permutation(codes).reshape(256, gs)
    got = dequantize(nv, pack(codes, bits), scales.reshape(256, 1), None, gs, bits, mode, dtype)
    out = dtype or "bfloat16"
    assert got.dtype == np_dtype(out)
    ev = fp8_value(codes) if mode == "mxfp8" else np.where(codes & 8, -1, 1) * FP4[codes & 7]
    if mode == "nvfp4":
        sv = fp8_value(scales)
    else:
        sv = np.where(scales == 255, np.nan, np.ldexp(1.0, scales.astype(np.int64) - 127))
    with np.errstate(over="ignore", invalid="ignore"):
        if out == "float64":
            want = sv[:, None] * ev
        else:
            st = rnd(f32(sv), out)[:, None]
            want = rnd(st * f32(ev), out)
    np.testing.assert_array_equal(got.astype(np.float64), np.asarray(want, np.float64))


def test_dequantize_errors(nv):
    q = np.zeros((4, 8), np.uint32)
    s = np.ones((4, 1), np.float32)
    with pytest.raises(NuvecError, match="dequantize: scales and biases should have the same"):
        dequantize(nv, q, s, np.ones((4, 2), np.float32), 64, 4, "affine")
    with pytest.raises(NuvecError, match="dequantize: the shapes of the quantized matrix"):
        dequantize(nv, q, np.ones((4, 2), np.float32), np.ones((4, 2), np.float32), 64, 4,
                   "affine")
    with pytest.raises(NuvecError, match="requires biases"):
        dequantize(nv, q, s, None, 64, 4, "affine")


def test_round_trip_error_is_bounded(nv, rng):
    """Inside a group's grid [b, b + n*s] an element comes back within half a step; outside it
    (the grid is shifted to make the larger-magnitude extreme exact) it clamps to the end."""
    w = rng.standard_normal((16, 256)).astype(np.float32)
    for bits in (2, 3, 4, 5, 6, 8):
        q, s, b = quantize(nv, w, 64, bits, "affine")
        d = dequantize(nv, q, s, b, 64, bits, "affine")
        sr, br = np.repeat(s, 64, axis=1), np.repeat(b, 64, axis=1)
        ends = np.stack([br, br + (2**bits - 1) * sr])
        lo, hi = ends.min(0), ends.max(0)
        inside = (w >= lo) & (w <= hi)
        tol = 1e-5 * np.abs(w).max()
        assert np.all(np.abs(d - w)[inside] <= 0.5 * np.abs(sr)[inside] + tol), bits
        near = np.where(np.abs(w - lo) < np.abs(w - hi), lo, hi)
        np.testing.assert_allclose(d[~inside], near[~inside], rtol=0, atol=tol)


# ---- quantized_matmul ----

def deq_ref(q, s, b, gs, bits, mode):
    """The float64 dequantized matrix."""
    codes = unpack(q, bits).astype(np.int64)
    shp = codes.shape[:-1] + (-1, gs)
    c = codes.reshape(shp)
    if mode == "affine":
        v = c * s.astype(np.float64)[..., None] + b.astype(np.float64)[..., None]
    else:
        ev = fp8_value(c) if mode == "mxfp8" else np.where(c & 8, -1, 1) * FP4[c & 7]
        sv = fp8_value(s) if mode == "nvfp4" else np.ldexp(1.0, s.astype(np.int64) - 127)
        v = ev * sv[..., None]
    return v.reshape(codes.shape)


CASES = [
    # (x shape, N, K, transpose, w batch)
    ((1, 128), 40, 128, True, ()),
    ((3, 256), 17, 256, True, ()),
    ((2, 5, 64), 33, 64, True, ()),
    ((7, 128), 24, 128, False, ()),
    ((1, 64), 70, 64, False, ()),
    ((128,), 9, 128, True, ()),
    ((2, 3, 128), 8, 128, True, (2,)),
    ((4, 1, 64), 16, 64, False, (4,)),
    ((20, 256), 65, 256, True, ()),
]


@pytest.mark.parametrize("xshape,N,K,transpose,wb", CASES)
@pytest.mark.parametrize("mode,bits", [("affine", 4), ("affine", 3), ("affine", 8),
                                       ("affine", 2), ("mxfp4", 4), ("mxfp8", 8),
                                       ("nvfp4", 4)])
def test_quantized_matmul(nv, rng, xshape, N, K, transpose, wb, mode, bits):
    gs = FP[mode][0] if mode in FP else 64 if K % 64 == 0 else 32
    wshape = wb + ((N, K) if transpose else (K, N))
    if not transpose and wshape[-1] % gs:
        pytest.skip("N is not a multiple of the group size")
    w = rng.standard_normal(wshape).astype(np.float32)
    out = quantize(nv, w, gs, bits, mode)
    q, s = out[0], out[1]
    b = out[2] if mode == "affine" else None
    wd = deq_ref(q, s, b, gs, bits, mode)
    x = rng.standard_normal(xshape).astype(np.float32)
    got = qmm(nv, x, q, s, b, transpose, gs, bits, mode)
    want = np.matmul(x.astype(np.float64), np.swapaxes(wd, -1, -2) if transpose else wd)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(K))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_quantized_matmul_half(nv, rng, dtype):
    w = rng.standard_normal((48, 128)).astype(np_dtype(dtype))
    q, s, b = quantize(nv, w, 64, 4, "affine")
    x = rng.standard_normal((5, 128)).astype(np_dtype(dtype))
    got = qmm(nv, x, q, s, b, True, 64, 4, "affine")
    assert got.dtype == np_dtype(dtype)
    want = x.astype(np.float64) @ deq_ref(q, s, b, 64, 4, "affine").T
    tol = 2e-2 if dtype == "bfloat16" else 4e-3
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * 4)
    # float16 x with float32 scales promotes to float32 (as MLX).
    q, s, b = quantize(nv, w.astype(np.float32), 64, 4, "affine")
    assert qmm(nv, x, q, s, b, True, 64, 4, "affine").dtype == np.float32


def test_quantized_matmul_strided_x_and_empty(nv, rng):
    from nvc import lib as L
    w = rng.standard_normal((16, 64)).astype(np.float32)
    q, s, b = quantize(nv, w, 64, 4, "affine")
    xt = rng.standard_normal((64, 3)).astype(np.float32)
    xh = nv.own(L.nv_transpose(nv.array(xt), None, 0))
    got = qmm(nv, None, q, s, b, True, 64, 4, "affine", xh=xh)
    want = xt.T.astype(np.float64) @ deq_ref(q, s, b, 64, 4, "affine").T
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    got = qmm(nv, np.zeros((0, 64), np.float32), q, s, b, True, 64, 4, "affine")
    assert got.shape == (0, 16)


def test_quantized_matmul_errors(nv):
    q = np.zeros((32, 16), np.uint32)
    s = np.ones((32, 2), np.float32)
    with pytest.raises(NuvecError, match="quantized_matmul: the last dimension of x"):
        qmm(nv, np.ones((3, 64), np.float32), q, s, s, True, 64, 4, "affine")
    with pytest.raises(NuvecError, match="scales and biases should have the same shape"):
        qmm(nv, np.ones((3, 128), np.float32), q, s, s[:, :1], True, 64, 4, "affine")


# ---- Against MLX itself ----

@pytest.mark.parametrize("dtype", HALF)
def test_bit_identical_to_mlx(nv, rng, dtype):
    mx = mlx()
    if mx is None:
        pytest.skip("mlx is not installed")
    for gs, bits in AFFINE:
        w = draw(rng, (4, 256), dtype)
        ours = quantize(nv, w, gs, bits, "affine")
        theirs = [from_mx(mx, a) for a in mx.quantize(to_mx(mx, w), gs, bits)]
        for o, t in zip(ours, theirs):
            np.testing.assert_array_equal(o.view(np.uint8), t.view(np.uint8), err_msg=f"{gs} {bits}")
        d = dequantize(nv, *ours, gs, bits, "affine")
        dm = from_mx(mx, mx.dequantize(*[to_mx(mx, a) for a in ours], gs, bits))
        np.testing.assert_array_equal(d.view(np.uint8), dm.view(np.uint8))
    for mode in FP:
        w = draw(rng, (4, 256), dtype)
        ours = quantize(nv, w, 0, 0, mode)
        theirs = [np.array(a) for a in mx.quantize(to_mx(mx, w), mode=mode)]
        np.testing.assert_array_equal(ours[0], theirs[0], err_msg=mode)
        np.testing.assert_array_equal(ours[1], theirs[1], err_msg=mode)
        for out in (None, "float32", "float16"):
            d = dequantize(nv, ours[0], ours[1], None, 0, 0, mode, out)
            kw = {} if out is None else {"dtype": getattr(mx, out)}
            dm = from_mx(mx, mx.dequantize(mx.array(ours[0]), mx.array(ours[1]), mode=mode, **kw))
            np.testing.assert_array_equal(d.view(np.uint8), dm.view(np.uint8), err_msg=mode)
        # Small groups: amax / maxval below float16's normal range, where MLX's quotient in the
        # weights' dtype rounds to a subnormal step (the scale's exponent moves at powers of two).
        small = (rng.standard_normal((64, 32)) * np.exp(rng.uniform(-12, -2, (64, 1))))
        small = small.astype(np.float32).astype(np_dtype(dtype))
        ours = quantize(nv, small, 0, 0, mode)
        theirs = [np.array(a) for a in mx.quantize(to_mx(mx, small), mode=mode)]
        np.testing.assert_array_equal(ours[1], theirs[1], err_msg=f"{mode} small groups' scales")
        np.testing.assert_array_equal(ours[0], theirs[0], err_msg=f"{mode} small groups' codes")
