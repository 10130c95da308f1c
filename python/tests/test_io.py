"""Files through the module: load/save of .npy, .npz (compressed or not), safetensors and GGUF
round trips with metadata, interop with NumPy's files, and the errors."""
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
