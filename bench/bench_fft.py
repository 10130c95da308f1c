"""The fft family beside numpy.fft and MLX's CPU build (float32 data; NumPy's pocketfft keeps
float32 in single precision, as nuvec does)."""
import numpy as np

from benchlib import median_time, mlx_core, report, run_c

CASES = {"fft_c64_256x1024": (256, 1024, 0), "fft_c64_256x1000": (256, 1000, 0),
         "fft_c64_256x1009": (256, 1009, 0), "rfft_f32_64x65536": (64, 65536, 1),
         "rfft_f32_4096x256": (4096, 256, 1), "fft2_c64_512x512": (512, 512, 2)}


def data(rows, n, kind):
    x = np.random.default_rng(0).standard_normal((rows, n)).astype(np.float32)
    return x if kind == 1 else x.astype(np.complex64)


def numpy_case(rows, n, kind):
    x = data(rows, n, kind)
    f = np.fft.rfft if kind == 1 else np.fft.fft2 if kind == 2 else np.fft.fft
    return lambda: f(x)


def mlx_case(mx, rows, n, kind):
    x = mx.array(data(rows, n, kind))
    f = mx.fft.rfft if kind == 1 else mx.fft.fft2 if kind == 2 else mx.fft.fft
    return lambda: mx.eval(f(x, stream=mx.cpu))


def main():
    c = run_c("bench_fft")
    mx = mlx_core()
    rows = []
    for case, t in c.items():
        peers = {"numpy": median_time(numpy_case(*CASES[case]), repeat=15)}
        if mx:
            peers["mlx"] = median_time(mlx_case(mx, *CASES[case]), repeat=15)
        rows.append((case, t, peers))
    report("fft (float32 data)", rows, ["numpy", "mlx"])


if __name__ == "__main__":
    main()
