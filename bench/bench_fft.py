"""The fft family beside numpy.fft, MLX's CPU build and torch.fft (where they install; float32
data: NumPy's pocketfft keeps float32 in single precision, as nuvec and PyTorch do), each peer
in a process of its own (bench/README.md)."""
import os

import numpy as np

from benchlib import median_time, peer_case_fns, peer_results, report, run_c, serve_peer

CASES = {"fft_c64_256x1024": (256, 1024, 0), "fft_c64_256x1000": (256, 1000, 0),
         "fft_c64_256x1009": (256, 1009, 0), "rfft_f32_64x65536": (64, 65536, 1),
         "rfft_f32_4096x256": (4096, 256, 1), "fft2_c64_512x512": (512, 512, 2)}
PEERS = ["numpy", "mlx", "torch"]


def data(rows, n, kind):
    x = np.random.default_rng(0).standard_normal((rows, n)).astype(np.float32)
    return x if kind == 1 else x.astype(np.complex64)


def inputs():
    return ({case: data(*shape) for case, shape in CASES.items()},)


def numpy_cases(xs):
    def f(kind):
        return np.fft.rfft if kind == 1 else np.fft.fft2 if kind == 2 else np.fft.fft

    return {case: (lambda x=xs[case], g=f(CASES[case][2]): g(x)) for case in CASES}


def mlx_cases(mx, xs):
    out = {}
    for case, (_, _, kind) in CASES.items():
        x = mx.array(xs[case])
        g = mx.fft.rfft if kind == 1 else mx.fft.fft2 if kind == 2 else mx.fft.fft
        out[case] = lambda x=x, g=g: mx.eval(g(x, stream=mx.cpu))
    return out


def torch_cases(torch, xs):
    out = {}
    for case, (_, _, kind) in CASES.items():
        x = torch.from_numpy(xs[case])
        g = torch.fft.rfft if kind == 1 else torch.fft.fft2 if kind == 2 else torch.fft.fft
        out[case] = lambda x=x, g=g: g(x)
    return out


def peer_times(peer, cases):
    """{case: seconds} of one peer, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, inputs(), numpy_cases, mlx_cases, torch_cases)
    if fns is None:
        return None
    return {k: median_time(f, repeat=15) for k, f in fns.items() if not cases or k in cases}


def main():
    c = run_c("bench_fft")
    peers = peer_results(os.path.abspath(__file__), PEERS)
    rows = [(k, t, {p: r[k] for p, r in peers.items() if k in r}) for k, t in c.items()]
    report("fft (float32 data)", rows, PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
