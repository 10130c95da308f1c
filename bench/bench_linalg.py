"""Matrix products beside OpenBLAS called directly from C (same binary, same data), NumPy and
MLX's CPU build (where it installs): matmul 2048³ and 512³ float32, 64 × (128×128×128)
batched, aᵀ @ b at 1024³ float32, and 1024³ float64. Ratios are peer time / nuvec time
(> 1: nuvec faster); the target against OpenBLAS is ≥ 0.95."""
import numpy as np

from benchlib import median_time, mlx_core, report, run_c

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


def main():
    c = run_c("bench_linalg")
    mx = mlx_core()
    rows = []
    for name, batch, m, k, n, trans, dtype, rep in CASES:
        a, b = operands(batch, m, k, n, trans, dtype)
        peers = {"openblas": c.get("blas_" + name)}
        if trans:
            peers["numpy"] = median_time(lambda: a.T @ b, repeat=rep)
        else:
            peers["numpy"] = median_time(lambda: a @ b, repeat=rep)
        if mx is not None and dtype == np.float32:
            ma, mb = mx.array(a), mx.array(b)
            mx.eval(ma, mb)
            if trans:
                peers["mlx"] = median_time(lambda: mx.eval(ma.T @ mb), repeat=rep)
            else:
                peers["mlx"] = median_time(lambda: mx.eval(ma @ mb), repeat=rep)
        elif mx is not None:
            # MLX's CPU build computes float64 matmul too.
            try:
                ma, mb = mx.array(a), mx.array(b)
                mx.eval(ma @ mb)
                peers["mlx"] = median_time(lambda: mx.eval(ma @ mb), repeat=rep)
            except Exception:
                pass
        rows.append((name, c["nuvec_" + name], peers))
    report("matrix products (ratio = peer time / nuvec time)", rows, ["openblas", "numpy", "mlx"])


if __name__ == "__main__":
    main()
