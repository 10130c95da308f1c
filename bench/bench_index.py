"""Index-family benchmarks beside NumPy, MLX's CPU build and PyTorch (where they install), each
peer in a process of its own (bench/README.md): take of 2^24 random int32 indices from 2^26
float32, concatenate of two 2^24 float32 arrays, scatter_add of 2^22 updates into 2^20 float32
(NumPy: np.add.at; PyTorch: index_add_ on a copy), transpose-copy of 4096×4096 float32."""
import os

import numpy as np

from benchlib import median_time, peer_case_fns, peer_results, report, run_c, serve_peer

CASES = ["take_2^24_from_2^26_f32", "concatenate_2x2^24_f32", "scatter_add_2^22_into_2^20_f32",
         "transpose_copy_4096^2_f32"]
PEERS = ["numpy", "mlx", "torch"]


def inputs():
    rng = np.random.default_rng(0)
    a26 = rng.random(1 << 26, dtype=np.float32)
    i24 = rng.integers(0, 1 << 26, 1 << 24).astype(np.int32)
    a24, b24 = rng.random(1 << 24, dtype=np.float32), rng.random(1 << 24, dtype=np.float32)
    a20 = rng.random(1 << 20, dtype=np.float32)
    i22 = rng.integers(0, 1 << 20, 1 << 22).astype(np.int32)
    u22 = rng.random(1 << 22, dtype=np.float32)
    m = rng.random((4096, 4096), dtype=np.float32)
    return a26, i24, a24, b24, a20, i22, u22, m


def numpy_cases(a26, i24, a24, b24, a20, i22, u22, m):
    def scatter_add():
        out = a20.copy()
        np.add.at(out, i22, u22)

    return dict(zip(CASES, [lambda: np.take(a26, i24), lambda: np.concatenate([a24, b24]),
                            scatter_add, lambda: np.ascontiguousarray(m.T)]))


def mlx_cases(mx, a26, i24, a24, b24, a20, i22, u22, m):
    xa26, xi24, xa24, xb24, xa20, xi22, xm = (mx.array(v) for v in (a26, i24, a24, b24, a20, i22, m))
    xu22 = mx.array(u22).reshape(-1, 1)
    mx.eval(xa26, xi24, xa24, xb24, xa20, xi22, xu22, xm)
    return dict(zip(CASES, [lambda: mx.eval(mx.take(xa26, xi24)),
                            lambda: mx.eval(mx.concatenate([xa24, xb24])),
                            lambda: mx.eval(xa20.at[xi22].add(xu22[:, 0])),
                            lambda: mx.eval(mx.contiguous(xm.T))]))


def torch_cases(torch, a26, i24, a24, b24, a20, i22, u22, m):
    ta26, ta24, tb24, ta20, tu22, tm = (torch.from_numpy(v) for v in (a26, a24, b24, a20, u22, m))
    ti24, ti22 = torch.from_numpy(i24), torch.from_numpy(i22)
    return dict(zip(CASES, [lambda: torch.index_select(ta26, 0, ti24),
                            lambda: torch.cat([ta24, tb24]),
                            lambda: ta20.clone().index_add_(0, ti22, tu22),
                            lambda: tm.T.contiguous()]))


def peer_times(peer, cases):
    """{case: seconds} of one peer, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, inputs(), numpy_cases, mlx_cases, torch_cases)
    if fns is None:
        return None
    return {k: median_time(f, repeat=7) for k, f in fns.items() if not cases or k in cases}


def main():
    c = run_c("bench_index")
    peers = peer_results(os.path.abspath(__file__), PEERS)
    rows = [(k, c.get(k), {p: t[k] for p, t in peers.items() if k in t}) for k in CASES]
    report("indexing and shape ops (ratio = peer time / nuvec time; > 1: nuvec faster)", rows,
           PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
