#!/usr/bin/env python3
"""nuvec's Python module beside MLX (mlx.core, CPU) and NumPy in the same run.

Rows: the tiny-op chain (x = x*0.5 + 1, 1000 times on 1024 float32, then one eval), x*y+z on
2^24 float32, softmax over 4096x4096 float32 (when nuvec has softmax), matmul 1024^3 float32.
Each time is the median of several runs after a warm-up; the ratios are the peer's time over
nuvec's (above 1: nuvec is faster). Run: python3 bench/bench_python.py (after make), or through make bench.
"""
import os
import statistics
import sys
import time

import numpy as np

# The module built by `make` (NUVEC_BUILD, as bench/run_all.sh sets it), unless one is installed.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.environ.get("NUVEC_BUILD", os.path.join(_here, "..", "build")), "python"))
import nuvec as nv  # noqa: E402

try:
    import mlx.core as mx
except ImportError:
    mx = None


def timeit(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def chain(m, n=1000):
    def run():
        x = m.ones((1024,), dtype=m.float32)
        for _ in range(n):
            x = x * 0.5 + 1
        m.eval(x)
    return run


def chain_np(n=1000):
    def run():
        x = np.ones((1024,), dtype=np.float32)
        for _ in range(n):
            x = x * np.float32(0.5) + np.float32(1)
    return run


def fma(m, x, y, z):
    return lambda: m.eval(x * y + z)


def softmax_np(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main():
    rng = np.random.default_rng(0)
    rows = []
    rows.append(("tiny-op chain 1000x (1024 f32)", chain(nv), chain(mx) if mx else None, chain_np(), 7))
    big = [rng.standard_normal(1 << 24).astype(np.float32) for _ in range(3)]
    nvb = [nv.array(a) for a in big]
    mxb = [mx.array(a) for a in big] if mx else None
    rows.append(("x*y+z (2^24 f32)", fma(nv, *nvb), fma(mx, *mxb) if mx else None,
                 lambda: big[0] * big[1] + big[2], 7))
    s = rng.standard_normal((4096, 4096)).astype(np.float32)
    if hasattr(nv, "softmax"):
        ns, ms = nv.array(s), (mx.array(s) if mx else None)
        rows.append(("softmax 4096^2 f32", lambda: nv.eval(nv.softmax(ns, axis=-1)),
                     (lambda: mx.eval(mx.softmax(ms, axis=-1))) if mx else None,
                     lambda: softmax_np(s), 5))
    else:
        print("softmax 4096^2: skipped (nuvec has no softmax yet)")
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    na, nb = nv.array(a), nv.array(b)
    ma, mb = (mx.array(a), mx.array(b)) if mx else (None, None)
    rows.append(("matmul 1024^3 f32", lambda: nv.eval(na @ nb),
                 (lambda: mx.eval(ma @ mb)) if mx else None, lambda: a @ b, 7))

    print(f"nuvec {nv.__version__}, MLX {mx.__version__ if mx else 'absent'}, NumPy {np.__version__}")
    print(f"{'case':34s} {'nuvec ms':>10s} {'MLX ms':>10s} {'NumPy ms':>10s} {'MLX/nuvec':>10s} {'NumPy/nuvec':>12s}")
    for name, f_nv, f_mx, f_np, reps in rows:
        t_nv = timeit(f_nv, reps)
        t_mx = timeit(f_mx, reps) if f_mx else float("nan")
        t_np = timeit(f_np, reps)
        print(f"{name:34s} {t_nv * 1e3:10.3f} {t_mx * 1e3:10.3f} {t_np * 1e3:10.3f} "
              f"{t_mx / t_nv:10.2f} {t_np / t_nv:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
