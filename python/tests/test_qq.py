"""nvfp4's global scale (quantize / dequantize), qqmm, nn.QQLinear and GGUF's Q4_0/Q4_1/Q8_0
loaded as affine triples: against NumPy references of the formats' definitions and, where
mlx is installed, bit for bit against MLX."""
import numpy as np
import pytest

import nuvec as mx
import nuvec.nn as nn

RANGE = np.float32(448 * 6)
# E2M1 magnitudes by code.
FP4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)


def e4m3_value(code):
    """The float32 value of E4M3FN codes (uint8), from the format's definition."""
    c = code.astype(np.int32)
    e, m = (c >> 3) & 15, c & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(c & 128, -v, v).astype(np.float32)


def elements(wq):
    """The E2M1 values of packed nvfp4 words, (..., K)."""
    b = wq.view(np.uint8)
    codes = np.stack([b & 15, b >> 4], -1).reshape(wq.shape[:-1] + (-1,))
    v = FP4[codes & 7]
    return np.where(codes & 8, -v, v)


def weights(rng, shape, dtype=np.float32):
    scale = np.exp(rng.uniform(-3, 3, shape[:-1] + (1,)))
    return (rng.standard_normal(shape) * scale).astype(dtype)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("g", [0.01, 1.0, 37.5, 3000.0])
def test_global_scale_definition(rng, dtype, g):
    w = weights(rng, (6, 64))
    x = mx.array(w).astype(getattr(mx, dtype))
    wf = np.array(x.astype(mx.float32))
    gs = mx.array(np.float32(g))
    wq, s = mx.quantize(x, mode="nvfp4", global_scale=gs)
    assert wq.dtype == mx.uint32 and wq.shape == (6, 8)
    assert s.dtype == mx.uint8 and s.shape == (6, 4)
    wq, s = np.array(wq), np.array(s)
    # The scale: E4M3 of (amax / 6) * (2688 / g), saturating; its decoded value.
    amax = np.abs(wf.reshape(6, 4, 16)).max(-1)
    target = (amax / np.float32(6)) * (RANGE / np.float32(g))
    dec = e4m3_value(s) * (np.float32(g) / RANGE)
    assert np.all(e4m3_value(s) <= 448)
    # E4M3 rounds to nearest: no other code is closer to the target.
    codes = np.arange(127, dtype=np.uint8)
    vals = e4m3_value(codes)
    best = np.abs(vals[None, None, :] - np.minimum(target, 448)[..., None]).min(-1)
    np.testing.assert_array_equal(np.abs(e4m3_value(s) - np.minimum(target, 448)), best)
    # The elements: E2M1(w / decoded scale), nearest.
    q = wf.reshape(6, 4, 16) / dec[..., None]
    got = elements(wq).reshape(6, 4, 16)
    err = np.abs(np.abs(got) - np.minimum(np.abs(q), 6))
    nearest = np.abs(FP4 - np.minimum(np.abs(q), 6)[..., None]).min(-1)
    assert np.all(err <= nearest + 1e-6)
    # dequantize: element * (scale value * (g / 2688)) in float32, whatever dtype asks for.
    for dt in (None, mx.float16, mx.bfloat16):
        d = mx.dequantize(mx.array(wq), mx.array(s), mode="nvfp4", global_scale=gs, dtype=dt)
        assert d.dtype == mx.float32
        want = (elements(wq).reshape(6, 4, 16) * dec[..., None]).reshape(6, 64)
        np.testing.assert_array_equal(np.array(d), want)


def test_global_scale_errors():
    w = mx.ones((2, 32))
    with pytest.raises(ValueError, match="only supported for 'nvfp4'"):
        mx.quantize(w, mode="mxfp8", global_scale=mx.array(1.0))
    with pytest.raises(ValueError, match="scalar"):
        mx.quantize(w, mode="nvfp4", global_scale=mx.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="float32"):
        mx.quantize(w, mode="nvfp4", global_scale=mx.array(1.0, dtype=mx.float16))
    wq, s = mx.quantize(w, mode="nvfp4")
    with pytest.raises(ValueError, match="only supported for 'nvfp4'"):
        mx.dequantize(wq, s, mode="mxfp4", global_scale=mx.array(1.0))
    with pytest.raises(ValueError, match="group size 16"):
        mx.quantize(w, group_size=32, mode="nvfp4", global_scale=mx.array(1.0))


def test_global_scale_matches_mlx(rng):
    m = pytest.importorskip("mlx.core")
    for trial in range(12):
        w = weights(rng, (16, 128))
        g = np.float32(np.abs(rng.standard_normal()) * 10.0 ** rng.integers(-2, 4))
        a = m.quantize(m.array(w), mode="nvfp4", global_scale=m.array(g))
        b = mx.quantize(mx.array(w), mode="nvfp4", global_scale=mx.array(g))
        for u, v in zip(a, b):
            np.testing.assert_array_equal(np.array(u), np.array(v))
        da = m.dequantize(*a, mode="nvfp4", global_scale=m.array(g))
        db = mx.dequantize(*b, mode="nvfp4", global_scale=mx.array(g))
        np.testing.assert_array_equal(np.array(da), np.array(db))


def qdq(x, mode):
    """x quantized and dequantized again, through nuvec's quantize (tested on its own)."""
    shape = x.shape
    parts = mx.quantize(x.reshape(-1, shape[-1]), mode=mode)
    return mx.dequantize(*parts, mode=mode, dtype=x.dtype).reshape(shape)


@pytest.mark.parametrize("mode", ["nvfp4", "mxfp8", "mxfp4"])
@pytest.mark.parametrize("xshape", [(1, 64), (64,), (3, 5, 64), (2, 1, 64)])
def test_qqmm_definition(rng, mode, xshape):
    w = mx.array(weights(rng, (24, 64)))
    x = mx.array(rng.standard_normal(xshape).astype(np.float32))
    parts = mx.quantize(w, mode=mode)
    wd = np.array(mx.dequantize(*parts, mode=mode, dtype=mx.float32))
    want = np.array(qdq(x, mode)) @ wd.T
    for y in (mx.qqmm(x, *parts, mode=mode), mx.qqmm(x, w, mode=mode)):
        assert y.shape == xshape[:-1] + (24,) and y.dtype == mx.float32
        np.testing.assert_allclose(np.array(y), want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_qqmm_half_dtypes(rng, dtype):
    dt = getattr(mx, dtype)
    w = mx.array(weights(rng, (8, 32))).astype(dt)
    x = mx.array(rng.standard_normal((4, 32)).astype(np.float32)).astype(dt)
    y = mx.qqmm(x, w)
    assert y.dtype == dt
    wd = np.array(mx.dequantize(*mx.quantize(w, mode="nvfp4"), mode="nvfp4", dtype=mx.float32))
    want = np.array(qdq(x, "nvfp4").astype(mx.float32)) @ wd.T
    np.testing.assert_allclose(np.array(y.astype(mx.float32)), want, rtol=2e-2, atol=2e-2)


def test_qqmm_global_scales(rng):
    w = rng.standard_normal((16, 64)).astype(np.float32)
    x = rng.standard_normal((3, 64)).astype(np.float32)
    gx = mx.array(np.float32(np.abs(x).max()))
    gw = mx.array(np.float32(np.abs(w).max()))
    xh = mx.dequantize(*mx.quantize(mx.array(x), mode="nvfp4", global_scale=gx), mode="nvfp4",
                       global_scale=gx)
    wh = mx.dequantize(*mx.quantize(mx.array(w), mode="nvfp4", global_scale=gw), mode="nvfp4",
                       global_scale=gw)
    want = np.array(xh) @ np.array(wh).T
    y = mx.qqmm(mx.array(x), mx.array(w), global_scale_x=gx, global_scale_w=gw)
    np.testing.assert_allclose(np.array(y), want, rtol=1e-5, atol=1e-4)
    # Near the exact product, as fp4 goes (a product missing the factor g_w / 2688, as MLX's
    # CPU qqmm computes it, is hundreds of times too large).
    assert np.abs(np.array(y) - x @ w.T).max() < 0.3 * np.abs(x @ w.T).max()


def test_qqmm_vjp_straight_through(rng):
    w = mx.array(weights(rng, (8, 32)))
    x = mx.array(rng.standard_normal((2, 3, 32)).astype(np.float32))
    ct = rng.standard_normal((2, 3, 8)).astype(np.float32)
    f = lambda x, w: (mx.qqmm(x, w) * mx.array(ct)).sum()  # noqa: E731
    gx, gw = mx.grad(f, argnums=(0, 1))(x, w)
    wd = np.array(mx.dequantize(*mx.quantize(w, mode="nvfp4"), mode="nvfp4", dtype=mx.float32))
    np.testing.assert_allclose(np.array(gx), ct @ wd, rtol=1e-5, atol=1e-5)
    xh = np.array(qdq(x, "nvfp4")).reshape(-1, 32)
    np.testing.assert_allclose(np.array(gw), ct.reshape(-1, 8).T @ xh, rtol=1e-5, atol=1e-5)
    # A packed w: the gradient of x only.
    wq, s = mx.quantize(w, mode="nvfp4")
    g = mx.grad(lambda x: (mx.qqmm(x, wq, s) * mx.array(ct)).sum())(x)
    np.testing.assert_allclose(np.array(g), ct @ wd, rtol=1e-5, atol=1e-5)


def test_qqmm_errors():
    x, w = mx.ones((2, 32)), mx.ones((4, 32))
    wq, s = mx.quantize(w, mode="nvfp4")
    with pytest.raises(ValueError, match="not supported"):
        mx.qqmm(x, w, mode="affine")
    with pytest.raises(ValueError, match="both"):
        mx.qqmm(x, w, global_scale_x=mx.array(1.0))
    with pytest.raises(ValueError, match="float64|int32"):
        mx.qqmm(x.astype(mx.int32), w)
    with pytest.raises(ValueError, match="last dimension"):
        mx.qqmm(mx.ones((2, 48)), w)
    with pytest.raises(ValueError, match="scales must be provided"):
        mx.qqmm(x, wq)
    with pytest.raises(ValueError, match="group size"):
        mx.qqmm(x, wq, s, group_size=32)
    with pytest.raises(ValueError, match="does not match"):
        mx.qqmm(mx.ones((2, 64)), wq, s)


def test_qqmm_matches_mlx(rng):
    m = pytest.importorskip("mlx.core")
    # MLX's CPU backend runs only a packed w with one row of x.
    for mode in ("nvfp4", "mxfp8", "mxfp4"):
        w = weights(rng, (32, 128))
        x = rng.standard_normal((1, 128)).astype(np.float32)
        a = m.qqmm(m.array(x), *m.quantize(m.array(w), mode=mode), mode=mode)
        b = mx.qqmm(mx.array(x), *mx.quantize(mx.array(w), mode=mode), mode=mode)
        np.testing.assert_allclose(np.array(b), np.array(a), rtol=1e-5, atol=1e-5)


def test_qqlinear_modes(rng):
    layer = nn.QQLinear(64, 8)
    assert layer.training and layer.weight.dtype == mx.float32
    assert set(layer.trainable_parameters()) == {"weight"}
    x = mx.array(rng.standard_normal((2, 64)).astype(np.float32))
    y_train = layer(x)
    layer.eval()
    assert layer["weight"].dtype == mx.uint32 and layer["scales"].dtype == mx.uint8
    np.testing.assert_allclose(np.array(layer(x)), np.array(y_train), rtol=1e-5, atol=1e-5)
    layer.train()
    assert "scales" not in layer and layer.weight.dtype == mx.bfloat16
    assert ("QQLinear(input_dims=64, output_dims=8, group_size=16, bits=4, mode=nvfp4)"
            in repr(layer))
    loss, g = nn.value_and_grad(layer, lambda x: layer(x).sum())(x)
    assert g["weight"].shape == (8, 64)


def test_qqlinear_from_linear_and_quantize(rng):
    lin = nn.Linear(32, 16, bias=False)
    q = nn.QQLinear.from_linear(lin, mode="mxfp8")
    assert q.mode == "mxfp8" and q.group_size == 32 and q.bits == 8 and q.training
    with pytest.raises(NotImplementedError):
        nn.QQLinear.from_linear(nn.Linear(32, 16))
    model = nn.Sequential(nn.Linear(32, 16, bias=False), nn.Linear(16, 16, bias=False))
    nn.quantize(model, quantize_input=True, mode="nvfp4")
    assert all(isinstance(m, nn.QQLinear) for m in model.layers)
    with pytest.raises(ValueError, match="nvfp4"):
        nn.quantize(nn.Sequential(nn.Linear(32, 16, bias=False)), quantize_input=True)


def test_qqlinear_matches_mlx(rng):
    m = pytest.importorskip("mlx.core")
    mnn = pytest.importorskip("mlx.nn")
    w = weights(rng, (8, 64))
    x = rng.standard_normal((1, 64)).astype(np.float32)
    a = mnn.Linear(64, 8, bias=False)
    a.weight = m.array(w)
    qa = mnn.QQLinear.from_linear(a)
    qa.eval()
    b = nn.Linear(64, 8, bias=False)
    b.weight = mx.array(w)
    qb = nn.QQLinear.from_linear(b)
    qb.eval()
    np.testing.assert_array_equal(np.array(qa.weight), np.array(qb.weight))
    np.testing.assert_allclose(np.array(qb(mx.array(x))), np.array(qa(m.array(x))), rtol=1e-5,
                               atol=1e-5)


def write_gguf(path, rng):
    gguf = pytest.importorskip("gguf")
    Q = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(path, "llama")
    ref = {}
    for name, t, shape in [("blk.0.q.weight", Q.Q8_0, (3, 96)),
                           ("blk.1.q.weight", Q.Q4_0, (2, 3, 64)),
                           ("x.y", Q.Q4_1, (5, 32)), ("z.weight.w", Q.Q4_1, (1, 128))]:
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        q = gguf.quants.quantize(x, t)
        ref[name] = gguf.quants.dequantize(q, t)
        w.add_tensor(name, q, raw_dtype=t)
    w.add_tensor("plain", rng.standard_normal((2, 3)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ref


def test_gguf_affine_lossless(rng, tmp_path):
    p = str(tmp_path / "q.gguf")
    ref = write_gguf(p, rng)
    d = mx.load(p)
    assert sorted(d) == sorted(["blk.0.q.weight", "blk.0.q.scales", "blk.0.q.biases",
                                "blk.1.q.weight", "blk.1.q.scales", "blk.1.q.biases", "x.y",
                                "x.y.scales", "x.y.biases", "z.weight.w", "z.w.scales",
                                "z.w.biases", "plain"])
    for name, want in ref.items():
        base = name.replace(".weight", "", 1)
        bits = 8 if name.startswith("blk.0") else 4
        w, s, b = d[name], d[base + ".scales"], d[base + ".biases"]
        assert w.dtype == mx.uint32 and s.dtype == mx.float16 and b.dtype == mx.float16
        assert w.shape == want.shape[:-1] + (want.shape[-1] * bits // 32,)
        # In float32 the affine form gives ggml's values exactly.
        got = mx.dequantize(w, s.astype(mx.float32), b.astype(mx.float32), group_size=32,
                            bits=bits, dtype=mx.float32)
        np.testing.assert_array_equal(np.array(got), want)
        x = rng.standard_normal((2, want.shape[-1])).astype(np.float32)
        y = mx.quantized_matmul(mx.array(x), w, s, b, group_size=32, bits=bits)
        np.testing.assert_allclose(np.array(y), x @ np.swapaxes(want, -1, -2), rtol=1e-5,
                                   atol=1e-4)


def test_gguf_affine_matches_mlx(rng, tmp_path):
    m = pytest.importorskip("mlx.core")
    p = str(tmp_path / "q.gguf")
    write_gguf(p, rng)
    a, b = m.load(p), mx.load(p)
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_array_equal(np.array(a[k]).view(np.uint8), np.array(b[k]).view(np.uint8))


def test_qqmm_jvp_and_vmap(rng):
    w = mx.array(weights(rng, (8, 32)))
    x = mx.array(rng.standard_normal((5, 3, 32)).astype(np.float32))
    tx = rng.standard_normal((5, 3, 32)).astype(np.float32)
    tw = rng.standard_normal((8, 32)).astype(np.float32)
    _, (t,) = mx.jvp(lambda a, b: mx.qqmm(a, b), [x, w], [mx.array(tx), mx.array(tw)])
    wd = np.array(mx.dequantize(*mx.quantize(w, mode="nvfp4"), mode="nvfp4", dtype=mx.float32))
    want = tx @ wd.T + np.array(qdq(x, "nvfp4")) @ tw.T
    np.testing.assert_allclose(np.array(t), want, rtol=1e-5, atol=1e-4)
    y = mx.vmap(lambda a: mx.qqmm(a, w))(x)
    np.testing.assert_array_equal(np.array(y), np.array(mx.qqmm(x, w)))
