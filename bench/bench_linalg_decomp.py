"""The decompositions (nuvec.linalg) beside numpy.linalg and MLX's CPU build (where it installs):
cholesky, inv, solve, qr, svd, eigh, eig and det at 512 and a batch of 256 × 16×16, float32
and float64. Ratios are peer time / nuvec time (> 1: nuvec faster; the issue wants ≥ 1 against
NumPy)."""
import os
import sys

import numpy as np

from benchlib import median_time, mlx_core, report

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.environ.get("NUVEC_BUILD", os.path.join(_here, "..", "build")), "python"))
import nuvec as nv  # noqa: E402


def inputs(batch, n, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(batch + (n, n)).astype(dtype)
    spd = (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)
    return a + n * np.eye(n, dtype=dtype), spd


def cases(a, spd, lib):
    la = lib.linalg
    return {
        "cholesky": (la.cholesky, spd), "inv": (la.inv, a), "qr": (la.qr, a),
        "svd": (la.svd, a), "eigh": (la.eigh, spd), "eig": (la.eig, a), "det": (la.det, a),
        "solve": (lambda x: la.solve(x, x), a),
    }


def main():
    mx = mlx_core()
    rows = []
    for batch, n, dtype in [((), 512, np.float32), ((), 512, np.float64), ((256,), 16, np.float32)]:
        a, spd = inputs(batch, n, dtype)
        tag = f"{'x'.join(map(str, batch)) + 'x' if batch else ''}{n}_{np.dtype(dtype).name}"
        na, ns = nv.array(a), nv.array(spd)
        nv.eval(na, ns)
        npc = cases(a, spd, np)
        for op, (f, x) in cases(na, ns, nv).items():
            peers = {}
            nf, nx = npc[op]
            peers["numpy"] = median_time(lambda: nf(nx), repeat=5)
            if mx is not None and op != "det":
                try:
                    mf, mxx = cases(mx.array(a), mx.array(spd), mx)[op]
                    run = lambda: mx.eval(mf(mxx, stream=mx.cpu))
                    run()
                    peers["mlx"] = median_time(run, repeat=5)
                except Exception:
                    pass
            t = median_time(lambda: nv.eval(f(x)), repeat=5)
            rows.append((f"{op}_{tag}", t, peers))
    report("decompositions (ratio = peer time / nuvec time)", rows, ["numpy", "mlx"])


if __name__ == "__main__":
    main()
