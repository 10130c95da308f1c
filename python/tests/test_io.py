"""Files through the module: load/save of .npy, .npz (compressed or not), safetensors and GGUF
round trips with metadata, interop with NumPy's files, and the errors: streams that declare
more than they hold, non-UTF-8 bytes in headers and names, FIFOs in place of files."""
import io
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

import nuvec as nv
from conftest import DTYPES, assert_close, dt, rand


def test_npy_roundtrip_every_dtype(tmp_path, rng):
    for name in DTYPES:
        x = nv.array(rand(rng, (3, 2), name), dt(name))
        p = tmp_path / f"{name}.npy"
        nv.save(str(p), x)
        y = nv.load(p)
        assert y.dtype == x.dtype and y.shape == x.shape
        assert_close(np.array(y), np.array(x), name)
        if name != "bfloat16":
            assert_close(np.load(p), np.array(x), name)
    nv.save(str(tmp_path / "noext"), nv.ones(2))
    assert nv.load(str(tmp_path / "noext.npy")).tolist() == [1, 1]


def test_npz_and_numpy_interop(tmp_path, rng):
    a, b = rand(rng, (4,), "int16"), rand(rng, (2, 2), "float32")
    nv.savez(str(tmp_path / "a.npz"), nv.array(a), b=nv.array(b))
    nv.savez_compressed(str(tmp_path / "c"), x=nv.array(b))
    d = nv.load(str(tmp_path / "a.npz"))
    assert set(d) == {"arr_0", "b"}
    assert_close(np.array(d["arr_0"]), a)
    with np.load(tmp_path / "c.npz") as z:
        assert_close(z["x"], b)
    np.savez(tmp_path / "np.npz", q=b)
    assert_close(np.array(nv.load(str(tmp_path / "np.npz"))["q"]), b)


def test_safetensors_and_gguf_with_metadata(tmp_path, rng):
    arrays = {"w": nv.array(rand(rng, (3, 4), "float32")), "i": nv.arange(5, dtype=nv.int32)}
    nv.save_safetensors(str(tmp_path / "m.safetensors"), arrays, {"format": "mlx"})
    d, meta = nv.load(str(tmp_path / "m.safetensors"), return_metadata=True)
    assert meta == {"format": "mlx"}
    assert_close(np.array(d["w"]), np.array(arrays["w"]))
    nv.save_gguf(str(tmp_path / "m.gguf"), arrays,
                 {"name": "m", "tags": ["a", "b"], "n": nv.array(3, nv.int32), "v": nv.array([1.5, 2.5])})
    d, meta = nv.load(str(tmp_path / "m.gguf"), return_metadata=True)
    assert meta["name"] == "m" and meta["tags"] == ["a", "b"]
    assert meta["n"].item() == 3 and meta["v"].tolist() == [1.5, 2.5]
    assert d["i"].tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="strings"):
        nv.save_safetensors(str(tmp_path / "x.safetensors"), arrays, {"n": 1})


def test_io_errors(tmp_path):
    (tmp_path / "bad.npy").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(OSError, match="bad.npy"):
        nv.load(str(tmp_path / "bad.npy"))
    with pytest.raises(ValueError, match="format"):
        nv.load(str(tmp_path / "x.unknown"))
    with pytest.raises(OSError):
        nv.save("/nonexistent-dir/x.npy", nv.ones(2))


# ---- Hostile files: sizes beyond the stream, non-UTF-8 bytes, paths that are not files ----

def npy_bytes(header, data=b"", version=1):
    """An .npy file with the given header dict text, padded as NumPy pads it."""
    pre = 10 if version == 1 else 12
    header += b" " * (-(pre + len(header) + 1) % 64) + b"\n"
    size = len(header).to_bytes(2 if version == 1 else 4, "little")
    return b"\x93NUMPY" + bytes([version, 0]) + size + header + data


class Recorder(io.BytesIO):
    """A stream that records the size of every read() asked of it."""

    def __init__(self, data):
        super().__init__(data)
        self.asked = []

    def read(self, n=-1):
        self.asked.append(n)
        return super().read(n)


def test_npy_stream_declaring_4gib_reads_what_is_there(tmp_path):
    data = npy_bytes(b"{'descr': '<f4', 'fortran_order': False, 'shape': (1073741824,), }",
                     b"\0" * 16)
    assert len(data) == 144
    f = Recorder(data)
    with pytest.raises(OSError, match="declares 4294967296 data bytes but the file holds 16"):
        nv.load(f, format="npy")
    assert max(f.asked) <= 1 << 16, f.asked  # never read(4 GiB)
    # The same through a real file: BufferedReader.read(n) allocates n bytes up front.
    (tmp_path / "big.npy").write_bytes(data)
    with open(tmp_path / "big.npy", "rb") as g:
        with pytest.raises(OSError, match="declares 4294967296 data bytes"):
            nv.load(g)
    # A version 2 header length of 4 GiB - 1 over a few bytes: the header read stops at the end.
    f = Recorder(b"\x93NUMPY\x02\x00\xff\xff\xff\xff{'descr'")
    with pytest.raises(OSError, match="header length 4294967295 exceeds"):
        nv.load(f, format="npy")
    assert max(f.asked) <= 1 << 16, f.asked


def test_npy_stream_reads_in_bounded_chunks(rng):
    x = rand(rng, (5_000_000,), "float32")  # 20 MB: several chunk sizes
    f = Recorder(b"")
    np.save(f, x)
    np.save(f, np.arange(3))
    f.seek(0)
    f.asked.clear()
    assert_close(np.array(nv.load(f, format="npy")), x)
    assert nv.load(f, format="npy").tolist() == [0, 1, 2]  # the stream stops after each array
    assert max(f.asked) <= 1 << 26


def test_npy_stream_read_returning_too_much():
    class Greedy(io.BytesIO):
        def read(self, n=-1):
            return super().read(-1 if n > 10 else n)  # ignores large sizes

    data = npy_bytes(b"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", b"\1\0\0\0" * 2)
    with pytest.raises(OSError, match=r"read\(\d+\) returned \d+ bytes"):
        nv.load(Greedy(data + b"next"), format="npy")


def test_non_utf8_header_gives_the_loaders_message(tmp_path):
    data = npy_bytes(b"{'descr': '\xff\xfe', 'fortran_order': False, 'shape': (1,), }", b"\0" * 4)
    with pytest.raises(OSError, match=r"unknown dtype descr '\\xff\\xfe'"):
        nv.load(io.BytesIO(data), format="npy")
    (tmp_path / "bad.npy").write_bytes(data)
    with pytest.raises(OSError, match=r"bad.npy: unknown dtype descr '\\xff\\xfe'"):
        nv.load(tmp_path / "bad.npy")


def gguf_bytes(names, kv_key=b"general.name"):
    """A GGUF v3 file with one float32 element per tensor name and one uint32 key/value."""
    s = lambda b: len(b).to_bytes(8, "little") + b
    out = b"GGUF" + (3).to_bytes(4, "little") + len(names).to_bytes(8, "little")
    out += (1).to_bytes(8, "little") + s(kv_key) + (4).to_bytes(4, "little") + (7).to_bytes(4, "little")
    for i, n in enumerate(names):
        out += s(n) + (1).to_bytes(4, "little") + (1).to_bytes(8, "little")
        out += (0).to_bytes(4, "little") + (32 * i).to_bytes(8, "little")
    out += b"\0" * (-len(out) % 32)
    for i in range(len(names)):
        out += np.float32(i + 0.5).tobytes() + b"\0" * 28
    return out


def test_non_utf8_names_load_with_escapes():
    d, meta = nv.load(io.BytesIO(gguf_bytes([b"w\xff", b"ok"], b"k\xfe")), format="gguf",
                      return_metadata=True)
    assert sorted(d) == ["ok", "w\\xff"] and d["w\\xff"].tolist() == [0.5]
    assert list(meta) == ["k\\xfe"] and meta["k\\xfe"].item() == 7
    with pytest.raises(OSError, match="two names in the file read as the same str"):
        nv.load(io.BytesIO(gguf_bytes([b"\xff", b"\\xff"])), format="gguf")


# A child process, so that a load or save that blocks fails by the timeout instead of hanging
# pytest: each path is loaded, then saved to by the saver of its extension.
FIFO_CHILD = r"""
import sys
import nuvec as nv
x = {"a": nv.ones(2)}
save = {"npy": lambda p: nv.save(p, x["a"]), "npz": lambda p: nv.savez(p, **x),
        "safetensors": lambda p: nv.save_safetensors(p, x), "gguf": lambda p: nv.save_gguf(p, x)}
for p in sys.argv[1:]:
    for call in (nv.load, save[p.rsplit(".", 1)[1]]):
        try:
            call(p)
            print("no error")
        except OSError as e:
            print(e)
"""


def test_fifo_paths_fail_without_blocking(tmp_path):
    paths = [str(tmp_path / f"f{ext}") for ext in (".npy", ".npz", ".safetensors", ".gguf")]
    for p in paths:
        os.mkfifo(p)
    r = subprocess.run([sys.executable, "-c", FIFO_CHILD, *paths], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 8, r.stdout
    for i, line in enumerate(lines):
        assert line.endswith(f"{paths[i // 2]}: not a regular file (a FIFO)"), line
    for p in paths:
        assert stat.S_ISFIFO(os.stat(p).st_mode)
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in paths)
