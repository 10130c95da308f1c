"""The eval-overhead chain beside NumPy (and MLX's CPU build where it installs): 1000
iterations of x = x * 0.5 + 1 on 1024 float32, per op."""
import numpy as np

from benchlib import median_time, mlx_core, report, run_c


def numpy_chain():
    x = np.ones(1024, np.float32)
    for _ in range(1000):
        x = x * np.float32(0.5) + np.float32(1)
    return x


def main():
    c = run_c("bench_eval")
    t = c["chain_2000_ops"] / 2000
    peers = {"numpy": median_time(numpy_chain, repeat=21) / 2000}
    mx = mlx_core()
    if mx:
        def mlx_chain():
            x = mx.ones((1024,), mx.float32)
            for _ in range(1000):
                x = x * 0.5 + 1
            mx.eval(x)
        peers["mlx"] = median_time(mlx_chain, repeat=21) / 2000
    report("eval overhead, per op (x = x*0.5 + 1, 1024 f32)", [("chain per op", t, peers)],
           ["numpy", "mlx"])


if __name__ == "__main__":
    main()
