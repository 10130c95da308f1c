"""The reduce family beside NumPy and MLX's CPU build (where it installs), same sizes in the
same run: sum of 2^26 float32, softmax over rows of 4096x4096 float32 (NumPy's composed
exp(x - max) / sum), sort of 2^24 float32, argmax and cumsum along each axis of 4096x4096."""
import numpy as np

from benchlib import median_time, mlx_core, report, run_c


def main():
    c = run_c("bench_reduce")
    rng = np.random.default_rng(0)
    big = rng.standard_normal(1 << 26, dtype=np.float32)
    mid = rng.standard_normal(1 << 24, dtype=np.float32)
    m = rng.standard_normal((4096, 4096), dtype=np.float32)

    def np_softmax():
        e = np.exp(m - m.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    cases = [
        ("sum_2^26_f32", lambda: big.sum(), 21),
        ("softmax_4096x4096_f32", np_softmax, 11),
        ("sort_2^24_f32", lambda: np.sort(mid), 7),
        ("argmax_4096x4096_axis0", lambda: m.argmax(axis=0), 11),
        ("cumsum_4096x4096_axis0", lambda: np.cumsum(m, axis=0), 7),
        ("argmax_4096x4096_axis1", lambda: m.argmax(axis=1), 11),
        ("cumsum_4096x4096_axis1", lambda: np.cumsum(m, axis=1), 7),
    ]
    rows = []
    mx = mlx_core()
    if mx:
        xb, xm, xq = mx.array(big), mx.array(mid), mx.array(m)
        mx.eval(xb, xm, xq)
        mlx_fns = {
            "sum_2^26_f32": lambda: mx.eval(mx.sum(xb)),
            "softmax_4096x4096_f32": lambda: mx.eval(mx.softmax(xq, axis=-1)),
            "sort_2^24_f32": lambda: mx.eval(mx.sort(xm)),
            "argmax_4096x4096_axis0": lambda: mx.eval(mx.argmax(xq, axis=0)),
            "cumsum_4096x4096_axis0": lambda: mx.eval(mx.cumsum(xq, axis=0)),
            "argmax_4096x4096_axis1": lambda: mx.eval(mx.argmax(xq, axis=1)),
            "cumsum_4096x4096_axis1": lambda: mx.eval(mx.cumsum(xq, axis=1)),
        }
    for name, fn, rep in cases:
        peers = {"numpy": median_time(fn, repeat=rep)}
        if mx:
            peers["mlx"] = median_time(mlx_fns[name], repeat=rep)
        rows.append((name, c.get(name), peers))
    report("reductions, softmax, sort, scans (float32)", rows, ["numpy", "mlx"])


if __name__ == "__main__":
    main()
