"""Quantization on the CPU beside MLX's CPU build (where it installs) and NumPy's dense product,
each library (nuvec too) in a process of its own (bench/README.md): 4-bit affine (group 64)
quantized_matmul at the decode shape (M = 1) and a short prefill (M = 32), K = 4096, N = 4096,
and quantize of a 4096 x 4096 float32 matrix. Both libraries get the same weights; the dense
float32 product is NumPy's (OpenBLAS) for scale. PyTorch has no CPU operator for this affine
4-bit format, so it is not a peer here. Ratios are peer time / nuvec time (> 1: nuvec
faster)."""
import os

import numpy as np

from benchlib import compare, median_time, mlx_core, nuvec_module, serve_peer

K = N = 4096
CASES = ["quantize_4bit_4096x4096", "qmm_4bit_M1_4096x4096", "qmm_4bit_M32_4096x4096"]
PEERS = ["mlx", "numpy_dense"]


def peer_times(peer, cases):
    """{case: seconds} of one library, in its own process (benchlib.serve_peer)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((N, K)).astype(np.float32)
    xs = {m: rng.standard_normal((m, K)).astype(np.float32) for m in (1, 32)}
    out = {}
    if peer == "numpy_dense":
        for m, x in xs.items():
            out[f"qmm_4bit_M{m}_4096x4096"] = median_time(lambda: x @ w.T, repeat=21)
        return out
    lib = mlx_core() if peer == "mlx" else nuvec_module()
    if lib is None:
        return None
    wl = lib.array(w)
    q, s, b = lib.quantize(wl, 64, 4)
    lib.eval(q, s, b)
    out["quantize_4bit_4096x4096"] = median_time(lambda: lib.eval(*lib.quantize(wl, 64, 4)),
                                                 repeat=5)
    for m, x in xs.items():
        xl = lib.array(x)
        out[f"qmm_4bit_M{m}_4096x4096"] = median_time(
            lambda: lib.eval(lib.quantized_matmul(xl, q, s, b, True, 64, 4)), repeat=21)
    return {k: v for k, v in out.items() if not cases or k in cases}


if __name__ == "__main__":
    if not serve_peer(peer_times):
        compare(os.path.abspath(__file__), "quantization (ratio = peer time / nuvec time)", CASES,
                PEERS)
