"""Writes the fuzzers' seed corpus (tests/fuzz/corpus/<format>/) with the reference
implementations: small valid files covering each format's features."""
import io
import os
import zipfile

import gguf
import ml_dtypes
import numpy as np
from safetensors.numpy import save

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
rng = np.random.default_rng(0)


def out(fmt, name, data):
    os.makedirs(os.path.join(here, fmt), exist_ok=True)
    with open(os.path.join(here, fmt, name), "wb") as f:
        f.write(data)


def npy(x, version=None):
    b = io.BytesIO()
    np.lib.format.write_array(b, x, version=version)
    return b.getvalue()


out("npy", "f4_c", npy(rng.standard_normal((3, 4)).astype(np.float32)))
out("npy", "i2_be_fortran", npy(np.asfortranarray(np.arange(6, dtype=">i2").reshape(2, 3))))
out("npy", "bool_0d", npy(np.array(True)))
out("npy", "bf16_v2", npy(np.ones(4, ml_dtypes.bfloat16)))
out("npy", "c8_empty_v2", npy(np.zeros((0, 2), np.complex64), version=(2, 0)))
for name, comp in [("stored", zipfile.ZIP_STORED), ("deflated", zipfile.ZIP_DEFLATED)]:
    b = io.BytesIO()
    (np.savez if comp == zipfile.ZIP_STORED else np.savez_compressed)(
        b, a=np.arange(5), b=np.ones((2, 2), np.float16))
    out("npz", name, b.getvalue())
out("safetensors", "meta", save({"w": rng.standard_normal((2, 3)).astype(np.float32),
                                 "b": np.array([1, 2], np.int64)}, metadata={"k": "v"}))
out("safetensors", "mixed", save({"x": np.ones(3, np.bool_), "y": np.ones((1, 2), np.float16),
                                  "z": np.zeros((0,), np.uint8)}))
for name, align in [("quant", None), ("aligned64", 64)]:
    p = os.path.join(here, "tmp.gguf")
    w = gguf.GGUFWriter(p, "t")
    if align:
        w.add_custom_alignment(align)
    w.add_uint32("n", 3)
    w.add_array("toks", ["a", "bc"])
    w.add_array("ids", [1, 2, 3])
    w.add_float32("eps", 1e-5)
    w.add_tensor("f", rng.standard_normal((2, 32)).astype(np.float32))
    x = rng.standard_normal((1, 32)).astype(np.float32)
    for q in (gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q4_1,
              gguf.GGMLQuantizationType.Q8_0):
        w.add_tensor(q.name, gguf.quants.quantize(x, q), raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    out("gguf", name, open(p, "rb").read())
    os.remove(p)
