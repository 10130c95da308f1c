"""File formats against their reference implementations: NumPy's save/load/savez/
savez_compressed, the safetensors package (and hand-built bfloat16 / F8_E4M3 files from the
format's specification), and the gguf package, in both directions; plus every truncation and
random corruption of valid files through the in-memory loaders (an error, never a crash)."""
import ctypes as C
import io
import itertools
import json
import os
import struct
import zipfile

import ml_dtypes
import numpy as np
import pytest

from conftest import sample
from nvc import BF16, CODE, DTYPES, Session, lib, np_dtype, sig

P = C.c_void_p
I = C.c_int
PP = C.POINTER(P)
S = C.c_char_p
Z = C.c_size_t
sig("nv_load", I, S, PP, PP)
sig("nv_load_npy", I, S, PP)
sig("nv_load_npy_from_memory", I, P, Z, PP)
sig("nv_load_npz", I, S, PP)
sig("nv_load_npz_from_memory", I, P, Z, PP)
sig("nv_load_safetensors", I, S, PP, PP)
sig("nv_load_safetensors_from_memory", I, P, Z, PP, PP)
sig("nv_load_gguf", I, S, I, PP, PP)
sig("nv_load_gguf_from_memory", I, P, Z, I, PP, PP)
sig("nv_save", I, S, P)
sig("nv_savez", I, S, P)
sig("nv_savez_compressed", I, S, P)
sig("nv_save_safetensors", I, S, P, P)
sig("nv_save_gguf", I, S, P, P)
sig("nv_map_new", P)
sig("nv_map_free", None, P)
sig("nv_map_set", I, P, S, P)
sig("nv_map_size", Z, P)
sig("nv_map_key", S, P, Z)
sig("nv_map_value", P, P, Z)
sig("nv_io_metadata_new", P)
sig("nv_io_metadata_free", None, P)
sig("nv_io_metadata_size", Z, P)
sig("nv_io_metadata_key", S, P, Z)
sig("nv_io_metadata_has", C.c_bool, P, S, C.POINTER(I))
sig("nv_io_metadata_set_int", I, P, S, I, C.c_int64)
sig("nv_io_metadata_set_uint64", I, P, S, C.c_uint64)
sig("nv_io_metadata_set_float", I, P, S, I, C.c_double)
sig("nv_io_metadata_set_bool", I, P, S, C.c_bool)
sig("nv_io_metadata_set_string", I, P, S, S, Z)
sig("nv_io_metadata_set_array", I, P, S, I, P, Z)
sig("nv_io_metadata_set_string_array", I, P, S, C.POINTER(S), Z)
sig("nv_io_metadata_get_int", I, P, S, C.POINTER(C.c_int64))
sig("nv_io_metadata_get_uint64", I, P, S, C.POINTER(C.c_uint64))
sig("nv_io_metadata_get_float", I, P, S, C.POINTER(C.c_double))
sig("nv_io_metadata_get_string", I, P, S, C.POINTER(C.c_void_p), C.POINTER(Z))
sig("nv_io_metadata_get_array", I, P, S, C.POINTER(I), C.POINTER(Z), C.POINTER(C.c_void_p))
sig("nv_io_metadata_get_array_string_len", I, P, S, Z, C.POINTER(Z))

NV_ERR_IO, NV_ERR_UNSUPPORTED = 6, 7
META_NP = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32,
           6: np.float32, 7: np.uint8, 10: np.uint64, 11: np.int64, 12: np.float64}
NUMPY_DTYPES = [d for d in DTYPES]  # every nuvec dtype is a NumPy dtype (bfloat16: ml_dtypes)


def err():
    return lib.nv_last_error().decode()


def rand(rng, shape, dtype, edges=True):
    """Seeded random values of `dtype` (never all zeros) with the edge values of the type."""
    dt = np_dtype(dtype)
    n = int(np.prod(shape))
    if dtype == "bool":
        x = rng.integers(0, 2, n).astype(bool)
        if n:
            x[0] = True
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, n, endpoint=True, dtype=dt)
        if edges and n >= 2:
            x[:2] = [info.min, info.max]
    elif dt.kind == "c":
        x = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
        if edges and n >= 2:
            x[:2] = [complex(np.nan, -0.0), complex(np.inf, -np.inf)]
    else:
        x = (rng.standard_normal(n) * 100).astype(dt)
        if edges and n >= 4:
            x[:4] = np.array([np.nan, np.inf, -np.inf, -0.0]).astype(dt)
    return x.reshape(shape)


def same_bits(got, want):
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    a, b = np.array(order="C", object=got), np.array(order="C", object=want)
    if want.dtype == bool:
        np.testing.assert_array_equal(a, b)
    else:
        assert a.tobytes() == b.tobytes(), f"values differ:\n{got}\n{want}"


def read_map(nv, m):
    out = {}
    for i in range(lib.nv_map_size(m)):
        out[lib.nv_map_key(m, i).decode()] = nv.read(lib.nv_map_value(m, i))
    return out


def read_meta(md):
    """A metadata container as {key: (type, value)}."""
    out = {}
    for i in range(lib.nv_io_metadata_size(md)):
        k = lib.nv_io_metadata_key(md, i)
        t = I()
        assert lib.nv_io_metadata_has(md, k, C.byref(t))
        t = t.value
        if t == 8:
            p, n = C.c_void_p(), Z()
            assert lib.nv_io_metadata_get_string(md, k, C.byref(p), C.byref(n)) == 0
            v = C.string_at(p, n.value).decode()
        elif t == 9:
            e, n, p = I(), Z(), C.c_void_p()
            assert lib.nv_io_metadata_get_array(md, k, C.byref(e), C.byref(n), C.byref(p)) == 0
            if e.value == 8:
                strs = C.cast(p, C.POINTER(C.c_void_p))
                v = []
                for j in range(n.value):
                    ln = Z()
                    assert lib.nv_io_metadata_get_array_string_len(md, k, j, C.byref(ln)) == 0
                    v.append(C.string_at(strs[j], ln.value).decode())
            else:
                dt = np.dtype(META_NP[e.value])
                v = np.frombuffer(C.string_at(p, n.value * dt.itemsize), dtype=dt).copy()
                if e.value == 7:
                    v = v.astype(bool)
            t = (9, e.value)
        elif t in (6, 12):
            f = C.c_double()
            assert lib.nv_io_metadata_get_float(md, k, C.byref(f)) == 0
            v = f.value
        elif t == 10:
            u = C.c_uint64()
            assert lib.nv_io_metadata_get_uint64(md, k, C.byref(u)) == 0
            v = u.value
        else:
            x = C.c_int64()
            assert lib.nv_io_metadata_get_int(md, k, C.byref(x)) == 0
            v = bool(x.value) if t == 7 else x.value
        out[k.decode()] = (t, v)
    return out


class Maps:
    """nv_map / nv_io_metadata handles freed at the end of a test."""

    def __init__(self):
        self.maps, self.metas = [], []

    def map(self, nv, arrays):
        m = lib.nv_map_new()
        self.maps.append(m)
        for k, v in arrays.items():
            h = v if isinstance(v, int) else nv.array(v)
            assert lib.nv_map_set(m, k.encode(), h) == 0
        return m

    def adopt(self, m=None, md=None):
        if m:
            self.maps.append(m)
        if md:
            self.metas.append(md)

    def meta(self):
        md = lib.nv_io_metadata_new()
        self.metas.append(md)
        return md

    def close(self):
        for m in self.maps:
            lib.nv_map_free(m)
        for md in self.metas:
            lib.nv_io_metadata_free(md)


@pytest.fixture
def maps():
    m = Maps()
    yield m
    m.close()


def load_path(fn, path, *extra):
    m, md = P(), P()
    args = [path.encode(), *extra, C.byref(m)]
    if fn in ("nv_load_safetensors", "nv_load_gguf", "nv_load"):
        args.append(C.byref(md))
    st = getattr(lib, fn)(*args)
    return st, m.value, md.value


def load_mem(fn, data, *extra):
    buf = C.create_string_buffer(data, len(data)) if data else None
    m, md = P(), P()
    args = [C.cast(buf, P) if buf else None, len(data), *extra, C.byref(m)]
    if fn in ("nv_load_safetensors_from_memory", "nv_load_gguf_from_memory"):
        args.append(C.byref(md))
    st = getattr(lib, fn)(*args)
    return st, m.value, md.value


# ---- .npy ----

SHAPES = [(), (0,), (7,), (3, 4), (2, 3, 5), (4, 0, 2)]


@pytest.mark.parametrize(
    "dt,shape,order,endian",
    sample(itertools.product(NUMPY_DTYPES, SHAPES, "CF", "<>"), 60, salt=11))
def test_numpy_save_nuvec_load(nv, rng, tmp_path, dt, shape, order, endian):
    x = rand(rng, shape, dt)
    if endian == ">" and dt not in ("bool", "uint8", "int8", "bfloat16"):
        x = x.astype(x.dtype.newbyteorder(">"))
    x = np.asarray(x, order=order)
    p = str(tmp_path / "x.npy")
    np.save(p, x)
    h = P()
    assert lib.nv_load_npy(p.encode(), C.byref(h)) == 0, err()
    nv.own(h.value)
    got = nv.read(h.value)
    want = x.astype(x.dtype.newbyteorder("=")) if x.dtype != BF16 else x
    same_bits(got, np.array(order="C", object=want))
    # The same bytes through the in-memory entry point.
    data = open(p, "rb").read()
    buf = C.create_string_buffer(data, len(data))
    assert lib.nv_load_npy_from_memory(buf, len(data), C.byref(h)) == 0, err()
    nv.own(h.value)
    same_bits(nv.read(h.value), np.array(order="C", object=want))


@pytest.mark.parametrize(
    "dt,shape,layout",
    sample(itertools.product(NUMPY_DTYPES, SHAPES, ["contiguous", "transposed", "strided", "reversed"]),
           40, salt=12))
def test_nuvec_save_numpy_load(nv, rng, tmp_path, dt, shape, layout):
    if layout == "reversed" and (not shape or shape[-1] == 0):
        layout = "contiguous"
    x = rand(rng, shape, dt)
    p = str(tmp_path / "y")  # ".npy" is appended, as MLX's save
    assert lib.nv_save(p.encode(), nv.view(x, layout)) == 0, err()
    got = np.load(p + ".npy")
    same_bits(got if dt != "bfloat16" else got.view(BF16), x)
    assert not any(n.startswith("y.npy.nvtmp") for n in os.listdir(tmp_path))
    # The file's header is NumPy's: version 1.0, data aligned to 64 bytes.
    raw = open(p + ".npy", "rb").read()
    hl = struct.unpack("<H", raw[8:10])[0]
    assert raw[6] == 1 and (10 + hl) % 64 == 0 and raw[10 + hl - 1:10 + hl] == b"\n"


def test_npy_bfloat16_descr_is_v2(nv, tmp_path):
    x = np.array([1.5, -2.25, np.inf], dtype=BF16)
    p = str(tmp_path / "b.npy")
    assert lib.nv_save(p.encode(), nv.array(x)) == 0
    assert b"'descr': '<V2'" in open(p, "rb").read(128)
    same_bits(np.load(p).view(BF16), x)


def test_npy_versions_2_and_3(nv, rng, tmp_path):
    x = rand(rng, (3, 5), "float32")
    for version in [(2, 0), (3, 0)]:
        b = io.BytesIO()
        np.lib.format.write_array(b, x, version=version)
        data = b.getvalue()
        h = P()
        buf = C.create_string_buffer(data, len(data))
        assert lib.nv_load_npy_from_memory(buf, len(data), C.byref(h)) == 0, err()
        nv.own(h.value)
        same_bits(nv.read(h.value), x)


def test_npy_long_header_is_version_2(nv, tmp_path):
    shape = (1,) * 64  # 64 dimensions need a longer header, still version 1.0
    x = np.ones(shape, np.float32)
    p = str(tmp_path / "l.npy")
    assert lib.nv_save(p.encode(), nv.array(x)) == 0, err()
    same_bits(np.load(p), x)


def test_npy_unsupported_numpy_dtypes(tmp_path):
    for x in [np.ones(2, np.complex128), np.array(["ab"]), np.ones(2, np.longdouble)]:
        p = str(tmp_path / "u.npy")
        np.save(p, x)
        h = P()
        assert lib.nv_load_npy(p.encode(), C.byref(h)) == NV_ERR_UNSUPPORTED
        assert "u.npy" in err() and "dtype" in err()


# ---- .npz ----

@pytest.mark.parametrize("compressed", [False, True])
def test_numpy_savez_nuvec_load(nv, rng, tmp_path, compressed, maps):
    arrays = {f"a{i}_{dt}": rand(rng, sample(SHAPES, 1, salt=i)[0], dt)
              for i, dt in enumerate(NUMPY_DTYPES)}
    arrays["nested/name"] = rand(rng, (2, 2), "int32")
    arrays["fortran"] = np.asfortranarray(rand(rng, (3, 4), "float64"))
    p = str(tmp_path / "z.npz")
    (np.savez_compressed if compressed else np.savez)(p, **arrays)
    with zipfile.ZipFile(p) as zf:  # NumPy writes ZIP64 extra fields; the test reads them
        assert all(i.compress_type == (zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED)
                   for i in zf.infolist())
    for how in ("path", "memory"):
        if how == "path":
            st, m, _ = load_path("nv_load_npz", p)
        else:
            st, m, _ = load_mem("nv_load_npz_from_memory", open(p, "rb").read())
        assert st == 0, err()
        maps.adopt(m)
        got = read_map(nv, m)
        assert list(got) == list(arrays)
        for k, v in arrays.items():
            same_bits(got[k], np.array(order="C", object=v))


@pytest.mark.parametrize("compressed", [False, True])
def test_nuvec_savez_numpy_load(nv, rng, tmp_path, compressed, maps):
    arrays = {dt: rand(rng, (3, 2), dt) for dt in NUMPY_DTYPES}
    arrays["empty"] = np.zeros((0, 3), np.float32)
    arrays["scalar"] = np.array(7, np.int16)
    m = maps.map(nv, arrays)
    p = str(tmp_path / "out")
    fn = lib.nv_savez_compressed if compressed else lib.nv_savez
    assert fn(p.encode(), m) == 0, err()
    with zipfile.ZipFile(p + ".npz") as zf:
        assert zf.testzip() is None
        assert [i.filename for i in zf.infolist()] == [k + ".npy" for k in arrays]
        method = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
        assert all(i.compress_type == method for i in zf.infolist())
    with np.load(p + ".npz") as f:
        assert sorted(f.files) == sorted(arrays)
        for k, v in arrays.items():
            got = f[k]
            same_bits(got.view(BF16) if k == "bfloat16" else got, v)
    # and back through nv_load
    st, m2, md = load_path("nv_load", p + ".npz")
    assert st == 0, err()
    maps.adopt(m2, md)
    back = read_map(nv, m2)
    for k, v in arrays.items():
        same_bits(back[k], v)


def test_savez_compressed_compresses(nv, tmp_path, maps):
    m = maps.map(nv, {"z": np.zeros((256, 256), np.float32) + 1})
    p = str(tmp_path / "c.npz")
    assert lib.nv_savez_compressed(p.encode(), m) == 0, err()
    assert os.path.getsize(p) < 256 * 256 * 4 / 20


# ---- safetensors ----

ST_DTYPES = ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
             "float16", "float32", "float64", "complex64"]


def test_safetensors_package_to_nuvec(nv, rng, tmp_path, maps):
    from safetensors.numpy import save, save_file
    arrays = {f"t.{dt}": rand(rng, (2, 3) if i % 3 else (5,), dt) for i, dt in enumerate(ST_DTYPES)}
    arrays["empty"] = np.zeros((0, 4), np.float32)
    arrays["scalar"] = np.array(3.5, np.float64)
    meta = {"format": "np", "note": "héllo \"quoted\"\n"}
    p = str(tmp_path / "m.safetensors")
    save_file(arrays, p, metadata=meta)
    for how in ("path", "memory"):
        if how == "path":
            st, m, md = load_path("nv_load_safetensors", p)
        else:
            st, m, md = load_mem("nv_load_safetensors_from_memory", save(arrays, metadata=meta))
        assert st == 0, err()
        maps.adopt(m, md)
        got = read_map(nv, m)
        assert sorted(got) == sorted(arrays)
        for k, v in arrays.items():
            same_bits(got[k], v)
        assert read_meta(md) == {k: (8, v) for k, v in meta.items()}


def test_nuvec_to_safetensors_package(nv, rng, tmp_path, maps):
    from safetensors import safe_open
    from safetensors.numpy import load_file
    arrays = {f"w{i}": rand(rng, (3, 4), dt) for i, dt in enumerate(ST_DTYPES)}
    handles = {k: nv.view(v, "transposed") for k, v in arrays.items()}  # written row-major
    m = maps.map(nv, handles)
    md = maps.meta()
    assert lib.nv_io_metadata_set_string(md, b"author", "nüvec".encode(), Z(-1).value) == 0
    p = str(tmp_path / "o")
    assert lib.nv_save_safetensors(p.encode(), m, md) == 0, err()
    got = load_file(p + ".safetensors")
    for k, v in arrays.items():
        same_bits(got[k], v)
    with safe_open(p + ".safetensors", "np") as f:
        assert f.metadata() == {"author": "nüvec"}
    # Every tensor is aligned to its element size (zero-copy loads).
    raw = open(p + ".safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    assert (8 + n) % 8 == 0
    hdr = json.loads(raw[8:8 + n])
    for k, v in hdr.items():
        if k != "__metadata__":
            assert v["data_offsets"][0] % np.dtype(arrays[k].dtype).itemsize == 0


def st_file(tensors, meta=None, pad=True):
    """A safetensors file built from the format's specification: {name: (dtype, shape, bytes)}."""
    hdr, data = {}, b""
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, (dt, shape, raw) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    if pad:
        h += b" " * (-(8 + len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


def test_safetensors_bfloat16_from_spec(nv, rng, maps):
    vals = np.concatenate([rng.standard_normal(20) * 10, [np.nan, np.inf, -np.inf, -0.0, 1e-40]])
    bits = vals.astype(np.float32).view(np.uint32)
    # bfloat16 by round-to-nearest-even on the float32 bits, written little-endian by hand.
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    rounded[np.isnan(vals)] = 0x7FC0
    data = st_file({"x": ("BF16", (5, 5), rounded.astype("<u2").tobytes())})
    st, m, md = load_mem("nv_load_safetensors_from_memory", data)
    assert st == 0, err()
    maps.adopt(m, md)
    got = read_map(nv, m)["x"]
    assert got.dtype == BF16 and got.shape == (5, 5)
    want = vals.astype(ml_dtypes.bfloat16).reshape(5, 5)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    assert np.signbit(got.reshape(-1)[23])


def test_safetensors_f8_e4m3_loads_as_uint8_bits(nv, rng, maps):
    vals = rng.standard_normal(16).astype(ml_dtypes.float8_e4m3fn)
    data = st_file({"q": ("F8_E4M3", (4, 4), vals.tobytes())})
    st, m, md = load_mem("nv_load_safetensors_from_memory", data)
    assert st == 0, err()
    maps.adopt(m, md)
    got = read_map(nv, m)["q"]
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got.reshape(-1), vals.view(np.uint8))


def test_safetensors_bfloat16_nuvec_written(nv, rng, tmp_path, maps):
    x = rand(rng, (4, 6), "bfloat16")
    m = maps.map(nv, {"b": x})
    p = str(tmp_path / "b.safetensors")
    assert lib.nv_save_safetensors(p.encode(), m, None) == 0, err()
    raw = open(p, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    assert hdr["b"] == {"dtype": "BF16", "shape": [4, 6], "data_offsets": [0, 48]}
    same_bits(np.frombuffer(raw[8 + n:], "<u2").view(BF16).reshape(4, 6), x)


# ---- GGUF ----

def test_gguf_package_to_nuvec(nv, rng, tmp_path, maps):
    gguf = pytest.importorskip("gguf")
    Q = gguf.GGMLQuantizationType
    p = str(tmp_path / "g.gguf")
    w = gguf.GGUFWriter(p, "llama")
    w.add_uint32("u32", 7)
    w.add_int8("i8", -3)
    w.add_float32("f32", 0.25)
    w.add_float64("f64", -1e300)
    w.add_bool("flag", True)
    w.add_uint64("u64", 2**63 + 5)
    w.add_int64("i64", -(2**62))
    w.add_string("s", "héllo")
    w.add_array("ints", [1, -2, 3])
    w.add_array("strs", ["a", "", "ccc"])
    w.add_array("floats", [0.5, 1.5])
    tensors = {
        "f32": rand(rng, (3, 64), "float32"),
        "f16": rand(rng, (2, 4, 8), "float16"),
        "f64": rand(rng, (5,), "float64"),
        "i8": rand(rng, (4, 4), "int8"),
        "i32": rand(rng, (6,), "int32"),
    }
    for k, v in tensors.items():
        w.add_tensor(k, v)
    base = rng.standard_normal((4, 128)).astype(np.float32)
    bf = gguf.quants.quantize(base, Q.BF16)
    w.add_tensor("bf16", bf, raw_dtype=Q.BF16)
    quant = {}
    for qt in (Q.Q4_0, Q.Q4_1, Q.Q8_0):
        q = gguf.quants.quantize(base, qt)
        quant[qt.name] = (q, gguf.quants.dequantize(q, qt))
        w.add_tensor(qt.name, q, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for mode in (0, 1):
        st, m, md = load_path("nv_load_gguf", p, mode)
        assert st == 0, err()
        maps.adopt(m, md)
        got = read_map(nv, m)
        for k, v in tensors.items():
            same_bits(got[k], v)
        same_bits(got["bf16"], bf.view(np.uint16).view(BF16).reshape(4, 128))
        for name, (q, deq) in quant.items():
            if mode == 0:
                same_bits(got[name], q)
            else:
                assert got[name].dtype == np.float32 and got[name].shape == (4, 128)
                np.testing.assert_array_equal(got[name], deq)
        meta = read_meta(md)
        assert meta["u32"] == (4, 7) and meta["i8"] == (1, -3) and meta["f32"] == (6, 0.25)
        assert meta["f64"] == (12, -1e300) and meta["flag"] == (7, True)
        assert meta["u64"] == (10, 2**63 + 5) and meta["i64"] == (11, -(2**62))
        assert meta["s"] == (8, "héllo") and meta["general.architecture"] == (8, "llama")
        assert meta["strs"] == ((9, 8), ["a", "", "ccc"])
        assert meta["ints"][0][0] == 9 and list(meta["ints"][1]) == [1, -2, 3]
        assert list(meta["floats"][1]) == [0.5, 1.5]


def test_nuvec_to_gguf_package(nv, rng, tmp_path, maps):
    gguf = pytest.importorskip("gguf")
    arrays = {dt: rand(rng, (3, 5), dt) for dt in
              ["float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64"]}
    arrays["vec"] = rand(rng, (7,), "float32")
    m = maps.map(nv, {k: nv.view(v, "transposed") if v.ndim == 2 else v for k, v in arrays.items()})
    md = maps.meta()
    assert lib.nv_io_metadata_set_string(md, b"general.architecture", b"test", Z(-1).value) == 0
    assert lib.nv_io_metadata_set_int(md, b"n", 4, 123456) == 0
    assert lib.nv_io_metadata_set_int(md, b"neg", 11, -5) == 0
    assert lib.nv_io_metadata_set_float(md, b"eps", 6, 1e-5) == 0
    assert lib.nv_io_metadata_set_bool(md, b"ok", True) == 0
    arr = (C.c_int32 * 3)(1, 2, 3)
    assert lib.nv_io_metadata_set_array(md, b"arr", 5, arr, 3) == 0
    strs = (S * 2)(b"x", b"yz")
    assert lib.nv_io_metadata_set_string_array(md, b"toks", strs, 2) == 0
    p = str(tmp_path / "n")
    assert lib.nv_save_gguf(p.encode(), m, md) == 0, err()
    r = gguf.GGUFReader(p + ".gguf")
    f = r.fields
    assert f["n"].contents() == 123456 and f["neg"].contents() == -5
    assert abs(f["eps"].contents() - 1e-5) < 1e-12 and f["ok"].contents() is True
    assert f["arr"].contents() == [1, 2, 3] and f["toks"].contents() == ["x", "yz"]
    assert f["general.architecture"].contents() == "test"
    t = {x.name: x for x in r.tensors}
    for k, v in arrays.items():
        data = np.asarray(t[k].data)
        if k == "bfloat16":
            data = data.view(np.uint16).view(BF16).reshape(v.shape)
        same_bits(data, v)
        assert t[k].data_offset % 32 == 0
    # and back
    st, m2, md2 = load_path("nv_load", p + ".gguf")
    assert st == 0, err()
    maps.adopt(m2, md2)
    back = read_map(nv, m2)
    for k, v in arrays.items():
        same_bits(back[k], v)
    assert read_meta(md2)["toks"] == ((9, 8), ["x", "yz"])


def test_gguf_custom_alignment(nv, rng, tmp_path, maps):
    gguf = pytest.importorskip("gguf")
    p = str(tmp_path / "a.gguf")
    w = gguf.GGUFWriter(p, "x")
    w.add_custom_alignment(64)
    x = rand(rng, (3, 3), "float32")
    y = rand(rng, (5,), "float16")
    w.add_tensor("x", x)
    w.add_tensor("y", y)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    st, m, md = load_path("nv_load_gguf", p, 0)
    assert st == 0, err()
    maps.adopt(m, md)
    got = read_map(nv, m)
    same_bits(got["x"], x)
    same_bits(got["y"], y)
    assert read_meta(md)["general.alignment"] == (4, 64)


# ---- Corruption: every truncation, random byte changes ----

def corpus(nv, rng, tmp_path, maps):
    from safetensors.numpy import save
    gguf = pytest.importorskip("gguf")
    b = io.BytesIO()
    np.save(b, rand(rng, (3, 4), "float32"))
    npy = b.getvalue()
    b = io.BytesIO()
    np.savez_compressed(b, a=np.arange(6), b=np.ones((2, 2), np.float16))
    npz = b.getvalue()
    st = save({"a": rand(rng, (2, 3), "float32"), "b": rand(rng, (4,), "int16")}, metadata={"k": "v"})
    p = str(tmp_path / "c.gguf")
    w = gguf.GGUFWriter(p, "t")
    w.add_array("toks", ["a", "bb"])
    w.add_tensor("x", rand(rng, (2, 32), "float32"))
    w.add_tensor("q", gguf.quants.quantize(rng.standard_normal((1, 32)).astype(np.float32),
                                           gguf.GGMLQuantizationType.Q4_0),
                 raw_dtype=gguf.GGMLQuantizationType.Q4_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return {"npy": npy, "npz": npz, "safetensors": st, "gguf": open(p, "rb").read()}


def gguf_end(data, tmp_path):
    """Where the last tensor's data ends: GGUF files may end with alignment padding, which a
    reader does not need."""
    gguf = pytest.importorskip("gguf")
    p = tmp_path / "end.gguf"
    p.write_bytes(data)
    r = gguf.GGUFReader(str(p))
    return max(t.data_offset + t.n_bytes for t in r.tensors)


def try_load(fmt, data, maps):
    fn = {"npy": "nv_load_npy_from_memory", "npz": "nv_load_npz_from_memory",
          "safetensors": "nv_load_safetensors_from_memory", "gguf": "nv_load_gguf_from_memory"}[fmt]
    extra = (1,) if fmt == "gguf" else ()
    st, m, md = load_mem(fn, data, *extra)
    if fmt == "npy" and st == 0:
        lib.nv_release(m)
        m = None
    maps.adopt(m, md)
    return st


def test_every_truncation_fails_cleanly(nv, rng, tmp_path, maps):
    for fmt, data in corpus(nv, rng, tmp_path, maps).items():
        assert try_load(fmt, data, maps) == 0, (fmt, err())
        need = gguf_end(data, tmp_path) if fmt == "gguf" else len(data)
        for n in range(len(data)):
            st = try_load(fmt, data[:n], maps)
            if n >= need:
                assert st == 0, (fmt, n, err())
                continue
            assert st == NV_ERR_IO, (fmt, n, st, err())
            assert "<memory>" in err(), err()


def test_random_corruption_never_crashes(nv, rng, tmp_path, maps):
    for fmt, data in corpus(nv, rng, tmp_path, maps).items():
        for _ in range(300):
            b = bytearray(data)
            for _ in range(rng.integers(1, 4)):
                b[rng.integers(len(b))] = rng.integers(256)
            st = try_load(fmt, bytes(b), maps)
            assert st in (0, NV_ERR_IO, NV_ERR_UNSUPPORTED), (fmt, st, err())


# ---- Paths that are not regular files ----

# Runs in a child process, so that a loader or saver that blocks (opening a FIFO for reading
# waits for a writer) fails the test by its timeout instead of hanging the suite. It prints one
# "status message" line per call of argv[2:] ("fn:path").
NOT_REGULAR_CHILD = r"""
import ctypes as C, sys
lib = C.CDLL(sys.argv[1])
lib.nv_last_error.restype = C.c_char_p
P = C.c_void_p
for f in ("nv_array_from_data", "nv_map_new"):
    getattr(lib, f).restype = P
lib.nv_array_from_data.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.c_int]
lib.nv_map_set.argtypes = [P, C.c_char_p, P]
vals, shape = (C.c_float * 3)(1, 2, 3), (C.c_int * 1)(3)
x = lib.nv_array_from_data(C.cast(vals, P), shape, 1, 11)
m = lib.nv_map_new()
lib.nv_map_set(m, b"a", x)
for call in sys.argv[2:]:
    fn, path = call.split(":", 1)
    out, md = P(), P()
    f, p = getattr(lib, fn), path.encode()
    if fn == "nv_save":
        st = f(p, P(x))
    elif fn.startswith("nv_save"):
        st = f(p, P(m), None) if fn in ("nv_save_safetensors", "nv_save_gguf") else f(p, P(m))
    elif fn == "nv_load_gguf":
        st = f(p, 0, C.byref(out), C.byref(md))
    elif fn in ("nv_load", "nv_load_safetensors"):
        st = f(p, C.byref(out), C.byref(md))
    else:
        st = f(p, C.byref(out))
    print(st, lib.nv_last_error().decode(errors="replace"), flush=True)
"""


def run_not_regular(calls):
    import subprocess
    import sys
    from nvc import LIB_PATH
    r = subprocess.run([sys.executable, "-c", NOT_REGULAR_CHILD, LIB_PATH, *calls],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(calls), (r.stdout, r.stderr)
    return [(int(line.split(" ", 1)[0]), line.split(" ", 1)[1]) for line in lines]


LOADERS = ["nv_load_npy", "nv_load_npz", "nv_load_safetensors", "nv_load_gguf", "nv_load"]
EXTS = {"nv_load_npy": ".npy", "nv_load_npz": ".npz", "nv_load_safetensors": ".safetensors",
        "nv_load_gguf": ".gguf"}


def test_loaders_refuse_a_fifo_without_blocking(tmp_path):
    calls = []
    for fn in LOADERS:
        for ext in ([EXTS[fn]] if fn in EXTS else EXTS.values()):
            p = tmp_path / f"{fn}{ext}"
            os.mkfifo(p)
            calls.append(f"{fn}:{p}")
    for call, (st, msg) in zip(calls, run_not_regular(calls)):
        assert st == NV_ERR_IO, (call, st, msg)
        assert "not a regular file (a FIFO)" in msg and call.split(":", 1)[1] in msg, msg


def test_loaders_refuse_devices_and_directories(tmp_path):
    (tmp_path / "d.npy").mkdir()
    calls = [f"nv_load_npy:{tmp_path / 'd.npy'}", "nv_load_safetensors:/dev/null",
             "nv_load_gguf:/dev/zero"]
    got = run_not_regular(calls)
    assert got[0][0] == NV_ERR_IO and "not a regular file (a directory)" in got[0][1], got
    for st, msg in got[1:]:
        assert st == NV_ERR_IO and "not a regular file (a character device)" in msg, got


def test_savers_leave_a_fifo_or_directory_alone(tmp_path):
    savers = {"nv_save": ".npy", "nv_savez": ".npz", "nv_savez_compressed": ".npz",
              "nv_save_safetensors": ".safetensors", "nv_save_gguf": ".gguf"}
    calls = []
    for fn, ext in savers.items():
        fifo, d = tmp_path / f"{fn}{ext}", tmp_path / f"{fn}_dir{ext}"
        os.mkfifo(fifo)
        d.mkdir()
        calls += [f"{fn}:{fifo}", f"{fn}:{d}"]
    for call, (st, msg) in zip(calls, run_not_regular(calls)):
        assert st == NV_ERR_IO, (call, st, msg)
        kind = "a directory" if "_dir" in call else "a FIFO"
        assert f"not a regular file ({kind})" in msg, (call, msg)
    import stat
    for fn, ext in savers.items():
        assert stat.S_ISFIFO(os.stat(tmp_path / f"{fn}{ext}").st_mode)
        assert os.path.isdir(tmp_path / f"{fn}_dir{ext}")
    assert not [n for n in os.listdir(tmp_path) if "nvtmp" in n]
