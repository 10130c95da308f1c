"""The eval-overhead chain beside NumPy, MLX's CPU build and PyTorch (where they install), each
peer in a process of its own (bench/README.md): 1000 iterations of x = x * 0.5 + 1 on 1024
float32, per op."""
import os

import numpy as np

from benchlib import median_time, peer_case_fns, peer_results, report, run_c, serve_peer

PEERS = ["numpy", "mlx", "torch"]


def numpy_cases():
    def chain():
        x = np.ones(1024, np.float32)
        for _ in range(1000):
            x = x * np.float32(0.5) + np.float32(1)
        return x

    return {"chain": chain}


def mlx_cases(mx):
    def chain():
        x = mx.ones((1024,), mx.float32)
        for _ in range(1000):
            x = x * 0.5 + 1
        mx.eval(x)

    return {"chain": chain}


def torch_cases(torch):
    def chain():
        x = torch.ones(1024)
        for _ in range(1000):
            x = x * 0.5 + 1
        return x

    return {"chain": chain}


def peer_times(peer, cases):
    """{case: seconds per op} of one peer, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, (), numpy_cases, mlx_cases, torch_cases)
    if fns is None:
        return None
    return {"chain": median_time(fns["chain"], repeat=21) / 2000}


def main():
    c = run_c("bench_eval")
    peers = peer_results(os.path.abspath(__file__), PEERS)
    report("eval overhead, per op (x = x*0.5 + 1, 1024 f32)",
           [("chain per op", c["chain_2000_ops"] / 2000,
             {p: t["chain"] for p, t in peers.items() if "chain" in t})], PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
