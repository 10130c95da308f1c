"""Index-family benchmarks beside NumPy and MLX's CPU build (where it installs): take of 2^24
random int32 indices from 2^26 float32, concatenate of two 2^24 float32 arrays, scatter_add of
2^22 updates into 2^20 float32 (NumPy: np.add.at), transpose-copy of 4096×4096 float32."""
import numpy as np

from benchlib import median_time, mlx_core, report, run_c


def main():
    c = run_c("bench_index")
    rng = np.random.default_rng(0)
    a26 = rng.random(1 << 26, dtype=np.float32)
    i24 = rng.integers(0, 1 << 26, 1 << 24).astype(np.int32)
    a24, b24 = rng.random(1 << 24, dtype=np.float32), rng.random(1 << 24, dtype=np.float32)
    a20 = rng.random(1 << 20, dtype=np.float32)
    i22 = rng.integers(0, 1 << 20, 1 << 22).astype(np.int32)
    u22 = rng.random(1 << 22, dtype=np.float32)
    m = rng.random((4096, 4096), dtype=np.float32)

    def np_scatter_add():
        out = a20.copy()
        np.add.at(out, i22, u22)

    cases = {
        "take_2^24_from_2^26_f32": {"numpy": lambda: np.take(a26, i24)},
        "concatenate_2x2^24_f32": {"numpy": lambda: np.concatenate([a24, b24])},
        "scatter_add_2^22_into_2^20_f32": {"numpy": np_scatter_add},
        "transpose_copy_4096^2_f32": {"numpy": lambda: np.ascontiguousarray(m.T)},
    }
    mx = mlx_core()
    if mx:
        xa26, xi24 = mx.array(a26), mx.array(i24)
        xa24, xb24 = mx.array(a24), mx.array(b24)
        xa20, xi22, xu22 = mx.array(a20), mx.array(i22), mx.array(u22).reshape(-1, 1)
        xm = mx.array(m)
        mx.eval(xa26, xi24, xa24, xb24, xa20, xi22, xu22, xm)
        cases["take_2^24_from_2^26_f32"]["mlx"] = lambda: mx.eval(mx.take(xa26, xi24))
        cases["concatenate_2x2^24_f32"]["mlx"] = lambda: mx.eval(mx.concatenate([xa24, xb24]))
        cases["scatter_add_2^22_into_2^20_f32"]["mlx"] = lambda: mx.eval(
            xa20.at[xi22].add(xu22[:, 0]))
        cases["transpose_copy_4096^2_f32"]["mlx"] = lambda: mx.eval(mx.contiguous(xm.T))
    rows = []
    for name, peers in cases.items():
        rows.append((name, c[name], {p: median_time(f, repeat=7) for p, f in peers.items()}))
    report("indexing and shape ops (ratio = peer time / nuvec time; > 1: nuvec faster)", rows,
           ["numpy", "mlx"])


if __name__ == "__main__":
    main()
