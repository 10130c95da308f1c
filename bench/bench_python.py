#!/usr/bin/env python3
"""nuvec's Python module beside MLX (mlx.core, CPU), NumPy and PyTorch (where they install), each
library in a process of its own (bench/README.md).

Rows: the tiny-op chain (x = x*0.5 + 1, 1000 times on 1024 float32, then one eval), x*y+z on
2^24 float32, softmax over 4096x4096 float32, matmul 1024^3 float32. Each time is the median of
several runs after a warm-up; the ratios are the peer's time over nuvec's (above 1: nuvec is
faster). Run: python3 bench/bench_python.py (after make), or through make bench.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import compare, median_time, peer_case_fns, serve_peer  # noqa: E402

CASES = ["tiny-op chain 1000x (1024 f32)", "x*y+z (2^24 f32)", "softmax 4096^2 f32",
         "matmul 1024^3 f32"]
REPEAT = dict(zip(CASES, [7, 7, 5, 7]))
PEERS = ["mlx", "numpy", "torch"]


def inputs():
    rng = np.random.default_rng(0)
    big = [rng.standard_normal(1 << 24).astype(np.float32) for _ in range(3)]
    s = rng.standard_normal((4096, 4096)).astype(np.float32)
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    return big, s, a, b


def lazy_cases(m, big, s, a, b):
    """nuvec's and MLX's rows (the same API)."""
    def chain():
        x = m.ones((1024,), dtype=m.float32)
        for _ in range(1000):
            x = x * 0.5 + 1
        m.eval(x)

    x, y, z = (m.array(v) for v in big)
    ms, ma, mb = m.array(s), m.array(a), m.array(b)
    m.eval(x, y, z, ms, ma, mb)
    return dict(zip(CASES, [chain, lambda: m.eval(x * y + z),
                            lambda: m.eval(m.softmax(ms, axis=-1)), lambda: m.eval(ma @ mb)]))


def numpy_cases(big, s, a, b):
    def chain():
        x = np.ones((1024,), dtype=np.float32)
        for _ in range(1000):
            x = x * np.float32(0.5) + np.float32(1)

    def softmax():
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    return dict(zip(CASES, [chain, lambda: big[0] * big[1] + big[2], softmax, lambda: a @ b]))


def torch_cases(torch, big, s, a, b):
    def chain():
        x = torch.ones(1024)
        for _ in range(1000):
            x = x * 0.5 + 1

    x, y, z = (torch.from_numpy(v) for v in big)
    ts, ta, tb = torch.from_numpy(s), torch.from_numpy(a), torch.from_numpy(b)
    return dict(zip(CASES, [chain, lambda: x * y + z, lambda: torch.softmax(ts, -1),
                            lambda: ta @ tb]))


def peer_times(peer, cases):
    """{case: seconds} of one library, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, inputs(), numpy_cases, lazy_cases, torch_cases, lazy_cases)
    if fns is None:
        return None
    return {k: median_time(f, repeat=REPEAT[k]) for k, f in fns.items() if not cases or k in cases}


if __name__ == "__main__":
    if not serve_peer(peer_times):
        compare(os.path.abspath(__file__), "Python module (ratio = peer time / nuvec time)", CASES,
                PEERS)
