"""The reduce family beside NumPy, MLX's CPU build and PyTorch (where they install), same sizes
in the same run, each peer in a process of its own (bench/README.md): sum of 2^26 float32,
softmax over rows of 4096x4096 float32 (NumPy's composed exp(x - max) / sum), sort of 2^24
float32, argmax and cumsum along each axis of 4096x4096."""
import os

import numpy as np

from benchlib import median_time, peer_case_fns, peer_results, report, run_c, serve_peer

REPEAT = {"sum_2^26_f32": 21, "softmax_4096x4096_f32": 11, "sort_2^24_f32": 7,
          "argmax_4096x4096_axis0": 11, "cumsum_4096x4096_axis0": 7,
          "argmax_4096x4096_axis1": 11, "cumsum_4096x4096_axis1": 7}
PEERS = ["numpy", "mlx", "torch"]


def inputs():
    rng = np.random.default_rng(0)
    big = rng.standard_normal(1 << 26, dtype=np.float32)
    mid = rng.standard_normal(1 << 24, dtype=np.float32)
    m = rng.standard_normal((4096, 4096), dtype=np.float32)
    return big, mid, m


def numpy_cases(big, mid, m):
    def softmax():
        e = np.exp(m - m.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    return {
        "sum_2^26_f32": lambda: big.sum(),
        "softmax_4096x4096_f32": softmax,
        "sort_2^24_f32": lambda: np.sort(mid),
        "argmax_4096x4096_axis0": lambda: m.argmax(axis=0),
        "cumsum_4096x4096_axis0": lambda: np.cumsum(m, axis=0),
        "argmax_4096x4096_axis1": lambda: m.argmax(axis=1),
        "cumsum_4096x4096_axis1": lambda: np.cumsum(m, axis=1),
    }


def mlx_cases(mx, big, mid, m):
    xb, xm, xq = mx.array(big), mx.array(mid), mx.array(m)
    mx.eval(xb, xm, xq)
    return {
        "sum_2^26_f32": lambda: mx.eval(mx.sum(xb)),
        "softmax_4096x4096_f32": lambda: mx.eval(mx.softmax(xq, axis=-1)),
        "sort_2^24_f32": lambda: mx.eval(mx.sort(xm)),
        "argmax_4096x4096_axis0": lambda: mx.eval(mx.argmax(xq, axis=0)),
        "cumsum_4096x4096_axis0": lambda: mx.eval(mx.cumsum(xq, axis=0)),
        "argmax_4096x4096_axis1": lambda: mx.eval(mx.argmax(xq, axis=1)),
        "cumsum_4096x4096_axis1": lambda: mx.eval(mx.cumsum(xq, axis=1)),
    }


def torch_cases(torch, big, mid, m):
    tb, tm, tq = (torch.from_numpy(a) for a in (big, mid, m))
    return {
        "sum_2^26_f32": lambda: tb.sum(),
        "softmax_4096x4096_f32": lambda: torch.softmax(tq, -1),
        "sort_2^24_f32": lambda: torch.sort(tm),
        "argmax_4096x4096_axis0": lambda: tq.argmax(0),
        "cumsum_4096x4096_axis0": lambda: torch.cumsum(tq, 0),
        "argmax_4096x4096_axis1": lambda: tq.argmax(1),
        "cumsum_4096x4096_axis1": lambda: torch.cumsum(tq, 1),
    }


def peer_times(peer, cases):
    """{case: seconds} of one peer, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, inputs(), numpy_cases, mlx_cases, torch_cases)
    if fns is None:
        return None
    return {k: median_time(f, repeat=REPEAT[k]) for k, f in fns.items() if not cases or k in cases}


def main():
    c = run_c("bench_reduce")
    peers = peer_results(os.path.abspath(__file__), PEERS)
    rows = [(k, c.get(k), {p: t[k] for p, t in peers.items() if k in t}) for k in REPEAT]
    report("reductions, softmax, sort, scans (float32)", rows, PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
