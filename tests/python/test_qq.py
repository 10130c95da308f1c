"""The C API of nvfp4's global scale (nv_quantize_scaled, nv_dequantize_scaled), nv_qqmm and
nv_load_gguf's NV_GGUF_AFFINE mode, through ctypes: against NumPy references of the formats'
definitions, the errors named by the op, and gradients straight through the quantizers."""
import ctypes as C

import numpy as np
import pytest

from nvc import CODE, I, NuvecError, P, Session, lib, np_dtype, sig

sig("nv_quantize", I, P, I, I, C.c_char_p, P)
sig("nv_quantize_scaled", I, P, I, I, C.c_char_p, P, P)
sig("nv_dequantize", P, P, P, P, I, I, C.c_char_p, I)
sig("nv_dequantize_scaled", P, P, P, P, I, I, C.c_char_p, P, I)
sig("nv_qqmm", P, P, P, P, I, I, C.c_char_p, P, P)
sig("nv_vec_new", P)
sig("nv_vec_free", None, P)
sig("nv_vec_size", C.c_size_t, P)
sig("nv_vec_get", P, P, C.c_size_t)
sig("nv_map_get", P, P, C.c_char_p)
sig("nv_map_size", C.c_size_t, P)
sig("nv_map_free", None, P)
sig("nv_io_metadata_free", None, P)
sig("nv_load_gguf", I, C.c_char_p, I, C.POINTER(P), C.POINTER(P))

NONE_DTYPE = len(CODE)
RANGE = np.float32(2688.0)
FP4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)


@pytest.fixture
def nv():
    with Session() as s:
        yield s


def e4m3(code):
    c = code.astype(np.int32)
    e, m = (c >> 3) & 15, c & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7)).astype(np.float32)
    return np.where(c & 128, -v, v)


def e2m1(words):
    b = words.view(np.uint8)
    c = np.stack([b & 15, b >> 4], -1).reshape(words.shape[:-1] + (-1,))
    return np.where(c & 8, -FP4[c & 7], FP4[c & 7])


def quantize(nv, w, g, mode=b"nvfp4", gs=0):
    v = lib.nv_vec_new()
    try:
        st = lib.nv_quantize_scaled(w, gs, 0, mode, g, v)
        if st != 0:
            raise NuvecError(st, lib.nv_last_error().decode())
        return [nv.read(lib.nv_vec_get(v, i)) for i in range(lib.nv_vec_size(v))]
    finally:
        lib.nv_vec_free(v)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("g", [0.05, 1.0, 40.0, 5000.0])
def test_scaled_round_trip_definition(nv, dtype, g):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((2, 3, 48)) * np.exp(rng.uniform(-2, 2, (2, 3, 1)))
    w = w.astype(np_dtype(dtype))
    w.reshape(-1)[::17] = 0.0
    ga = nv.array(np.float32(g))
    words, scales = quantize(nv, nv.array(w), ga)
    assert words.shape == (2, 3, 6) and words.dtype == np.uint32
    assert scales.shape == (2, 3, 3) and scales.dtype == np.uint8
    wf = w.astype(np.float32).reshape(2, 3, 3, 16)
    dec = e4m3(scales) * (np.float32(g) / RANGE)
    # The stored scale is the nearest E4M3 (saturating at 448) of (amax / 6) * (2688 / g).
    target = np.minimum((np.abs(wf).max(-1) / np.float32(6)) * (RANGE / np.float32(g)), 448)
    allv = e4m3(np.arange(127, dtype=np.uint8))
    assert np.all(np.abs(e4m3(scales) - target) <= np.abs(allv - target[..., None]).min(-1))
    # Each element is a nearest E2M1 of w / decoded scale.
    q = np.where(dec[..., None] == 0, 0, wf / np.where(dec == 0, 1, dec)[..., None])
    got = e2m1(words).reshape(q.shape)
    dist = np.abs(np.abs(got) - np.minimum(np.abs(q), 6))
    assert np.all(dist <= np.abs(FP4 - np.minimum(np.abs(q), 6)[..., None]).min(-1) + 1e-6)
    assert np.all((got == 0) | (np.sign(got) == np.sign(q)))
    d = nv.read(nv.own(lib.nv_dequantize_scaled(nv.array(words), nv.array(scales), None, 0, 0,
                                                b"nvfp4", ga, NONE_DTYPE)))
    assert d.dtype == np.float32
    np.testing.assert_array_equal(d, (got * dec[..., None]).reshape(w.shape))
    # float64 asked for: kept.
    d64 = nv.read(nv.own(lib.nv_dequantize_scaled(nv.array(words), nv.array(scales), None, 0, 0,
                                                  b"nvfp4", ga, CODE["float64"])))
    assert d64.dtype == np.float64


def test_scaled_null_is_plain(nv):
    w = nv.array(np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32))
    a = quantize(nv, w, None)
    v = lib.nv_vec_new()
    assert lib.nv_quantize(w, 0, 0, b"nvfp4", v) == 0
    b = [nv.read(lib.nv_vec_get(v, i)) for i in range(2)]
    lib.nv_vec_free(v)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_scaled_errors(nv):
    w = nv.array(np.ones((2, 32), np.float32))
    with pytest.raises(NuvecError, match="quantize: the global scale is only supported"):
        quantize(nv, w, nv.array(np.float32(1)), b"mxfp4")
    with pytest.raises(NuvecError, match="quantize: the global scale must be a scalar"):
        quantize(nv, w, nv.array(np.ones(3, np.float32)))
    with pytest.raises(NuvecError, match="quantize: the global scale must have dtype float32"):
        quantize(nv, w, nv.array(np.float64(1)))
    with pytest.raises(NuvecError, match="divisible"):
        quantize(nv, nv.array(np.ones((2, 24), np.float32)), nv.array(np.float32(1)))
    h = nv.own(lib.nv_dequantize_scaled(nv.array(np.zeros((2, 4), np.uint32)),
                                        nv.array(np.zeros((2, 2), np.uint8)), None, 0, 0,
                                        b"nvfp4", nv.array(np.float16(1)), NONE_DTYPE))
    st, msg = nv.status(h)
    assert st != 0 and msg.startswith("dequantize: the global scale must have dtype float32")


@pytest.mark.parametrize("mode", [b"nvfp4", b"mxfp8", b"mxfp4"])
def test_qqmm_is_quantized_matmul_of_qdq(nv, mode):
    rng = np.random.default_rng(5)
    w = rng.standard_normal((12, 64)).astype(np.float32)
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    wa, xa = nv.array(w), nv.array(x)
    v = lib.nv_vec_new()
    assert lib.nv_quantize(wa, 0, 0, mode, v) == 0
    wq, ws = lib.nv_vec_get(v, 0), lib.nv_vec_get(v, 1)
    vx = lib.nv_vec_new()
    # x's rows quantized and dequantized (x is 3-D: quantize takes its last axis).
    assert lib.nv_quantize(xa, 0, 0, mode, vx) == 0
    xh = nv.read(nv.own(lib.nv_dequantize(lib.nv_vec_get(vx, 0), lib.nv_vec_get(vx, 1), None, 0,
                                          0, mode, CODE["float32"])))
    wd = nv.read(nv.own(lib.nv_dequantize(wq, ws, None, 0, 0, mode, CODE["float32"])))
    want = xh @ wd.T
    for h in (lib.nv_qqmm(xa, wq, ws, 0, 0, mode, None, None),
              lib.nv_qqmm(xa, wa, None, 0, 0, mode, None, None)):
        got = nv.read(nv.own(h))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    lib.nv_vec_free(v)
    lib.nv_vec_free(vx)


def test_qqmm_errors(nv):
    x, w = nv.array(np.ones((2, 32), np.float32)), nv.array(np.ones((4, 32), np.float32))
    g = nv.array(np.float32(1))
    cases = [
        (lib.nv_qqmm(x, w, None, 0, 0, b"affine", None, None), "qqmm: mode 'affine'"),
        (lib.nv_qqmm(x, w, None, 0, 0, None, g, None), "qqmm: for nvfp4 mode, either both"),
        (lib.nv_qqmm(x, w, None, 0, 0, b"mxfp8", g, g), "qqmm: the global scale is only"),
        (lib.nv_qqmm(nv.array(np.ones((2, 32))), w, None, 0, 0, None, None, None),
         "qqmm: only real floating types except float64"),
        (lib.nv_qqmm(nv.array(np.ones((2, 16), np.float32)), w, None, 0, 0, None, None, None),
         "qqmm: the last dimension of x"),
        (lib.nv_qqmm(x, nv.array(np.zeros((4, 4), np.uint32)), None, 0, 0, None, None, None),
         "qqmm: scales must be provided"),
    ]
    for h, msg in cases:
        st, m = nv.status(nv.own(h))
        assert st != 0 and m.startswith(msg), m


def test_gguf_affine_mode(nv, tmp_path):
    gguf = pytest.importorskip("gguf")
    Q = gguf.GGMLQuantizationType
    rng = np.random.default_rng(11)
    p = str(tmp_path / "a.gguf")
    wr = gguf.GGUFWriter(p, "llama")
    ref = {}
    for name, t in [("a.weight", Q.Q4_0), ("b.weight", Q.Q4_1), ("c.weight", Q.Q8_0)]:
        x = (rng.standard_normal((3, 64)) * 2).astype(np.float32)
        q = gguf.quants.quantize(x, t)
        ref[name] = gguf.quants.dequantize(q, t)
        wr.add_tensor(name, q, raw_dtype=t)
    wr.add_tensor("k", np.zeros((1, 144), np.uint8), raw_dtype=Q.Q4_K)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    m, md = P(), P()
    assert lib.nv_load_gguf(p.encode(), 2, C.byref(m), C.byref(md)) == 0, lib.nv_last_error()
    try:
        assert lib.nv_map_size(m) == 10
        for name, want in ref.items():
            base = name[: -len(".weight")]
            bits = 8 if name == "c.weight" else 4
            w = lib.nv_map_get(m, name.encode())
            s = lib.nv_map_get(m, (base + ".scales").encode())
            b = lib.nv_map_get(m, (base + ".biases").encode())
            assert nv.read(s).dtype == np.float16 and nv.read(w).shape == (3, 64 * bits // 32)
            # With float32 scales and biases the affine form gives ggml's values exactly.
            sf = nv.array(nv.read(s).astype(np.float32))
            bf = nv.array(nv.read(b).astype(np.float32))
            got = nv.read(nv.own(lib.nv_dequantize(w, sf, bf, 32, bits, b"affine",
                                                   CODE["float32"])))
            np.testing.assert_array_equal(got, want)
        # Other block types stay raw.
        k = nv.read(lib.nv_map_get(m, b"k"))
        assert k.dtype == np.uint8 and k.shape == (1, 144)
    finally:
        lib.nv_map_free(m)
        lib.nv_io_metadata_free(md)
