"""Quantization on the CPU beside MLX's CPU build (where it installs) and NumPy's dense product:
4-bit affine (group 64) quantized_matmul at the decode shape (M = 1) and a short prefill
(M = 32), K = 4096, N = 4096, and quantize of a 4096 x 4096 float32 matrix. Both libraries get
the same weights; the dense float32 product is NumPy's (OpenBLAS) for scale. Ratios are peer
time / nuvec time (> 1: nuvec faster)."""
import os
import sys

import numpy as np

from benchlib import median_time, mlx_core, report

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.environ.get("NUVEC_BUILD", os.path.join(_here, "..", "build")), "python"))
import nuvec as nv  # noqa: E402

K = N = 4096


def main():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((N, K)).astype(np.float32)
    mx = mlx_core()
    rows = []
    wn = nv.array(w)
    q, s, b = nv.quantize(wn, 64, 4)
    nv.eval(q, s, b)
    t = median_time(lambda: nv.eval(*nv.quantize(wn, 64, 4)), repeat=5)
    peers = {}
    if mx is not None:
        wm = mx.array(w)
        peers["mlx"] = median_time(lambda: mx.eval(*mx.quantize(wm, 64, 4)), repeat=5)
    rows.append(("quantize_4bit_4096x4096", t, peers))
    if mx is not None:
        qm, sm, bm = mx.quantize(wm, 64, 4)
        mx.eval(qm, sm, bm)
    for m in (1, 32):
        x = rng.standard_normal((m, K)).astype(np.float32)
        xn = nv.array(x)
        t = median_time(lambda: nv.eval(nv.quantized_matmul(xn, q, s, b, True, 64, 4)),
                        repeat=21)
        peers = {"numpy_dense": median_time(lambda: x @ w.T, repeat=21)}
        if mx is not None:
            xm = mx.array(x)
            peers["mlx"] = median_time(
                lambda: mx.eval(mx.quantized_matmul(xm, qm, sm, bm, True, 64, 4)), repeat=21)
        rows.append((f"qmm_4bit_M{m}_4096x4096", t, peers))
    report("quantization (ratio = peer time / nuvec time)", rows, ["mlx", "numpy_dense"])


if __name__ == "__main__":
    main()
