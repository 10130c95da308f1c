"""load/save with file objects and pathlib.Path as MLX takes them: round trips of every format
through io.BytesIO and real open files, interop with mlx.core and NumPy over streams, several
.npy arrays on one stream, minimal objects with only read()/write() (and a write() that takes
part of what it is given), format= and return_metadata= as MLX, and the errors."""
import io
import pathlib

import numpy as np
import pytest

import nuvec as nv
from conftest import DTYPES, assert_close, dt, rand

mx = pytest.importorskip("mlx.core")


def test_npy_bytesio_roundtrip_every_dtype(rng):
    for name in DTYPES:
        x = nv.array(rand(rng, (3, 2), name), dt(name))
        f = io.BytesIO()
        assert nv.save(f, x) is None
        f.seek(0)
        y = nv.load(f, format="npy")
        assert y.dtype == x.dtype and y.shape == x.shape
        assert_close(np.array(y), np.array(x), name)
        assert f.tell() == len(f.getvalue())
        if name != "bfloat16":
            f.seek(0)
            assert_close(np.load(f), np.array(x), name)


def test_archives_through_bytesio(rng):
    a, b = rand(rng, (4,), "int16"), rand(rng, (2, 3), "float32")
    for save in (nv.savez, nv.savez_compressed):
        f = io.BytesIO()
        save(f, nv.array(a), b=nv.array(b))
        f.seek(0)
        d = nv.load(f, format="npz")
        assert set(d) == {"arr_0", "b"}
        assert_close(np.array(d["arr_0"]), a)
        assert_close(np.array(d["b"]), b)
        f.seek(0)
        with np.load(f) as z:
            assert_close(z["b"], b)
    arrays = {"w": nv.array(b), "i": nv.arange(5, dtype=nv.int32)}
    f = io.BytesIO()
    nv.save_safetensors(f, arrays, {"format": "mlx"})
    f.seek(0)
    d, meta = nv.load(f, format="safetensors", return_metadata=True)
    assert meta == {"format": "mlx"} and d["i"].tolist() == [0, 1, 2, 3, 4]
    assert_close(np.array(d["w"]), b)
    f = io.BytesIO()
    nv.save_gguf(f, arrays, {"name": "m", "n": nv.array(3, nv.int32)})
    f.seek(0)
    d, meta = nv.load(f, format="gguf", return_metadata=True)
    assert meta["name"] == "m" and meta["n"].item() == 3
    assert_close(np.array(d["w"]), b)


def test_real_files_and_paths(tmp_path, rng):
    x = nv.array(rand(rng, (5,), "float32"))
    with open(tmp_path / "a.npy", "wb") as fh:
        nv.save(fh, x)
    with open(tmp_path / "a.npy", "rb") as fh:
        assert_close(np.array(nv.load(fh)), np.array(x))  # the format from the file's name
    with open(tmp_path / "z.npz", "wb") as fh:
        nv.savez(fh, q=x)
    with open(tmp_path / "z.npz", "rb") as fh:
        assert_close(np.array(nv.load(fh)["q"]), np.array(x))
    p = tmp_path / "p.npy"
    nv.save(p, x)
    assert_close(np.array(nv.load(p)), np.array(x))
    nv.savez_compressed(tmp_path / "c", x=x)
    assert_close(np.array(nv.load(tmp_path / "c.npz")["x"]), np.array(x))
    nv.save_safetensors(tmp_path / "s.safetensors", {"x": x})
    assert_close(np.array(nv.load(pathlib.Path(tmp_path, "s.safetensors"))["x"]), np.array(x))
    # format= overrides the extension.
    nv.save(tmp_path / "odd.npy", x)
    (tmp_path / "odd.npy").rename(tmp_path / "odd.bin")
    assert_close(np.array(nv.load(tmp_path / "odd.bin", format="npy")), np.array(x))


def test_mlx_interop_over_streams(rng):
    a = rand(rng, (3, 4), "float32")
    f = io.BytesIO()
    nv.save(f, nv.array(a))
    f.seek(0)
    assert_close(np.array(mx.load(f, format="npy")), a)
    f = io.BytesIO()
    mx.save(f, mx.array(a))
    f.seek(0)
    assert_close(np.array(nv.load(f, format="npy")), a)
    f = io.BytesIO()
    mx.savez(f, k=mx.array(a))
    f.seek(0)
    assert_close(np.array(nv.load(f, format="npz")["k"]), a)
    f = io.BytesIO()
    mx.save_safetensors(f, {"k": mx.array(a)}, {"m": "v"})
    f.seek(0)
    d, meta = nv.load(f, format="safetensors", return_metadata=True)
    assert meta == {"m": "v"}
    assert_close(np.array(d["k"]), a)
    f = io.BytesIO()
    nv.save_safetensors(f, {"k": nv.array(a)})
    f.seek(0)
    assert_close(np.array(mx.load(f, format="safetensors")["k"]), a)


def test_several_npy_arrays_on_one_stream():
    f = io.BytesIO()
    np.save(f, np.arange(3))
    np.save(f, np.ones((2, 2), np.float32))
    nv.save(f, nv.array([True, False]))
    f.seek(0)
    assert nv.load(f, format="npy").tolist() == [0, 1, 2]
    assert nv.load(f, format="npy").tolist() == [[1, 1], [1, 1]]
    assert nv.load(f, format="npy").tolist() == [True, False]
    assert f.read() == b""
    f = io.BytesIO()
    nv.save(f, nv.arange(4))
    nv.save(f, nv.zeros((0, 3)))
    f.seek(0)
    assert np.load(f).tolist() == [0, 1, 2, 3] and np.load(f).shape == (0, 3)


class Writer:
    """Only write(), taking at most 7 bytes a call, as a raw stream may."""

    def __init__(self):
        self.data = bytearray()

    def write(self, b):
        b = bytes(b)[:7]
        self.data += b
        return len(b)


class Reader:
    """Only read(), returning at most 5 bytes a call."""

    def __init__(self, data):
        self.f = io.BytesIO(bytes(data))

    def read(self, n=-1):
        return self.f.read(5 if n is None or n < 0 or n > 5 else n)


class NoneWriter(list):
    def write(self, b):
        self.append(bytes(b))


def test_minimal_file_objects():
    w = Writer()
    nv.save(w, nv.arange(10))
    assert nv.load(Reader(w.data), format="npy").tolist() == list(range(10))
    w = NoneWriter()
    nv.savez(w, a=nv.ones(3))
    assert nv.load(io.BytesIO(b"".join(w)), format="npz")["a"].tolist() == [1, 1, 1]


def test_errors(tmp_path, monkeypatch):
    f = io.BytesIO()
    nv.save(f, nv.ones(2))
    f.seek(0)
    with pytest.raises(ValueError, match="Could not infer file format"):
        nv.load(f)
    with pytest.raises(ValueError, match="Could not infer file format"):
        nv.load(tmp_path / "noext")
    with pytest.raises(ValueError, match="Unknown file format xyz"):
        nv.load(f, format="xyz")
    with pytest.raises(ValueError, match="metadata not supported for format npy"):
        nv.load(f, format="npy", return_metadata=True)
    with pytest.raises(ValueError, match="metadata not supported for format npz"):
        nv.load(tmp_path / "a.npz", return_metadata=True)
    with pytest.raises(ValueError, match="file-like object opened in binary mode"):
        nv.load(3)
    with pytest.raises(ValueError, match="file-like object"):
        nv.save(3, nv.ones(2))
    with pytest.raises(ValueError, match="file-like object"):
        nv.savez(object(), a=nv.ones(2))
    (tmp_path / "t.npy").write_bytes(b"")
    with open(tmp_path / "t.npy", "r") as text:
        with pytest.raises(TypeError, match="binary mode"):
            nv.load(text)
    with pytest.raises(OSError, match="not a .npy file"):
        nv.load(io.BytesIO(b"\x93NUMPY"), format="npy")
    with pytest.raises(OSError):
        nv.load(io.BytesIO(b"garbage"), format="safetensors")
    g = io.BytesIO()
    nv.save(g, nv.arange(100))
    with pytest.raises(OSError):
        nv.load(io.BytesIO(g.getvalue()[:-8]), format="npy")  # truncated data
    # A failed save leaves nothing in the temporary directory and nothing written.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    out = io.BytesIO()
    bad = nv.take(nv.ones(3), nv.array([5]))  # fails when evaluated
    with pytest.raises(ValueError):
        nv.save(out, bad)
    with pytest.raises(ValueError):
        nv.savez(out, a=nv.ones(2), b=bad)
    with pytest.raises(RuntimeError, match="complex64"):
        nv.save_gguf(out, {"c": nv.array([1 + 2j])})
    assert out.getvalue() == b"" and list(tmp.iterdir()) == []
    nv.save(out, nv.ones(2))
    assert list(tmp.iterdir()) == [] and len(out.getvalue()) > 0
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    with pytest.raises(OSError):
        nv.save(io.BytesIO(), nv.ones(2))
