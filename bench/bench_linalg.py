"""Matrix products beside OpenBLAS called directly from C (same binary, same data), NumPy and
MLX's CPU build and PyTorch (where they install; each peer in a process of its own,
bench/README.md): matmul 2048³ and 512³ float32, 64 × (128×128×128)
batched, aᵀ @ b at 1024³ float32, and 1024³ float64. Ratios are peer time / nuvec time
(> 1: nuvec faster); the target against OpenBLAS is ≥ 0.95."""
import os

import numpy as np

from benchlib import median_time, mlx_core, peer_results, report, run_c, serve_peer, torch_cpu

# (case, batch, m, k, n, transposed a, dtype, repeats)
CASES = [
    ("matmul_2048_f32", 1, 2048, 2048, 2048, False, np.float32, 7),
    ("matmul_512_f32", 1, 512, 512, 512, False, np.float32, 21),
    ("bmm_64x128_f32", 64, 128, 128, 128, False, np.float32, 21),
    ("matmul_T_1024_f32", 1, 1024, 1024, 1024, True, np.float32, 11),
    ("matmul_1024_f64", 1, 1024, 1024, 1024, False, np.float64, 11),
]


def operands(batch, m, k, n, trans, dtype):
    rng = np.random.default_rng(0)
    ashape = (k, m) if trans else (m, k)
    if batch > 1:
        ashape, bshape = (batch,) + ashape, (batch, k, n)
    else:
        bshape = (k, n)
    a = (rng.random(ashape) - 0.5).astype(dtype)
    b = (rng.random(bshape) - 0.5).astype(dtype)
    return a, b


PEERS = ["numpy", "mlx", "torch"]


def peer_times(peer, cases):
    """{case: seconds} of one peer, in its own process (benchlib.serve_peer)."""
    lib = None
    if peer == "mlx":
        lib = mlx_core()
    elif peer == "torch":
        lib = torch_cpu()
    if peer != "numpy" and lib is None:
        return None
    out = {}
    for name, batch, m, k, n, trans, dtype, rep in CASES:
        if cases and name not in cases:
            continue
        a, b = operands(batch, m, k, n, trans, dtype)
        if peer == "numpy":
            fn = (lambda: a.T @ b) if trans else (lambda: a @ b)
        elif peer == "torch":
            ta, tb = lib.from_numpy(a), lib.from_numpy(b)
            fn = (lambda: ta.T @ tb) if trans else (lambda: ta @ tb)
        else:
            try:  # MLX's CPU build computes float64 matmul too; skip it where it does not
                # (its own dtype: mlx.core.array makes float32 of float64 NumPy arrays unless told)
                mdt = lib.float64 if dtype == np.float64 else lib.float32
                ma, mb = lib.array(a, dtype=mdt), lib.array(b, dtype=mdt)
                lib.eval(ma @ mb)
            except Exception:
                continue
            fn = (lambda: lib.eval(ma.T @ mb)) if trans else (lambda: lib.eval(ma @ mb))
        out[name] = median_time(fn, repeat=rep)
    return out


def main():
    c = run_c("bench_linalg")
    peers = peer_results(os.path.abspath(__file__), PEERS)
    rows = []
    for name, *_ in CASES:
        others = {"openblas": c.get("blas_" + name)}
        others.update({p: t[name] for p, t in peers.items() if name in t})
        rows.append((name, c["nuvec_" + name], others))
    report("matrix products (ratio = peer time / nuvec time)", rows, ["openblas"] + PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
