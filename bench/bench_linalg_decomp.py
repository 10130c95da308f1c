"""The decompositions (nuvec.linalg) beside numpy.linalg, MLX's CPU build and torch.linalg (where
they install), each library (nuvec too) in a process of its own (bench/README.md): cholesky,
inv, solve, qr, svd, eigh, eig and det at 512 and a batch of 256 × 16×16, float32 and float64.
Ratios are peer time / nuvec time (> 1: nuvec faster; the issue wants ≥ 1 against NumPy)."""
import os

import numpy as np

from benchlib import compare, median_time, mlx_core, nuvec_module, serve_peer, torch_cpu

SIZES = [((), 512, np.float32), ((), 512, np.float64), ((256,), 16, np.float32)]
OPS = ["cholesky", "inv", "qr", "svd", "eigh", "eig", "det", "solve"]
PEERS = ["numpy", "mlx", "torch"]


def inputs(batch, n, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(batch + (n, n)).astype(dtype)
    spd = (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)
    return a + n * np.eye(n, dtype=dtype), spd


def tag(batch, n, dtype):
    return f"{'x'.join(map(str, batch)) + 'x' if batch else ''}{n}_{np.dtype(dtype).name}"


def cases(a, spd, lib):
    la = lib.linalg
    return {
        "cholesky": (la.cholesky, spd), "inv": (la.inv, a), "qr": (la.qr, a),
        "svd": (la.svd, a), "eigh": (la.eigh, spd), "eig": (la.eig, a), "det": (la.det, a),
        "solve": (lambda x: la.solve(x, x), a),
    }


def same_dtype(lib, x):
    """x as an MLX-style array of x's own dtype (mlx.core.array and nuvec.array make float32 of
    a float64 NumPy array unless told: the float64 rows would otherwise time float32)."""
    return lib.array(x, dtype=lib.float64 if x.dtype == np.float64 else lib.float32)


def runner(peer, lib, a, spd, op):
    """The case's function for one library, or None where the library lacks it (MLX: det, and
    what its CPU build refuses)."""
    if peer == "numpy":
        f, x = cases(a, spd, np)[op]
        return lambda: f(x)
    if peer == "torch":
        f, x = cases(lib.from_numpy(a), lib.from_numpy(spd), lib)[op]
        return lambda: f(x)
    if peer == "mlx":
        if op == "det":
            return None
        try:
            f, x = cases(same_dtype(lib, a), same_dtype(lib, spd), lib)[op]
            run = lambda: lib.eval(f(x, stream=lib.cpu))  # noqa: E731
            run()
            return run
        except Exception:
            return None
    na, ns = same_dtype(lib, a), same_dtype(lib, spd)
    lib.eval(na, ns)
    f, x = cases(na, ns, lib)[op]
    return lambda: lib.eval(f(x))


def peer_times(peer, selected):
    """{case: seconds} of one library, in its own process (benchlib.serve_peer)."""
    lib = {"numpy": lambda: np, "mlx": mlx_core, "torch": torch_cpu, "nuvec": nuvec_module}[peer]()
    if lib is None:
        return None
    out = {}
    for size in SIZES:
        a, spd = inputs(*size)
        for op in OPS:
            name = f"{op}_{tag(*size)}"
            if selected and name not in selected:
                continue
            fn = runner(peer, lib, a, spd, op)
            if fn is not None:
                out[name] = median_time(fn, repeat=5)
    return out


if __name__ == "__main__":
    if not serve_peer(peer_times):
        compare(os.path.abspath(__file__), "decompositions (ratio = peer time / nuvec time)",
                [f"{op}_{tag(*s)}" for s in SIZES for op in OPS], PEERS)
