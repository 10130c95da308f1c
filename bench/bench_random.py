"""The random family beside NumPy's Generator (PCG64), MLX's CPU build and PyTorch's CPU
generator (where they install), each peer in a process of its own (bench/README.md): 2^20
samples per case (categorical: 4096 distributions of 64 classes), from a fixed key / seed. A
peer without the sampler (PyTorch: gumbel, laplace) has no row."""
import os

import numpy as np

from benchlib import median_time, peer_case_fns, peer_results, report, run_c, serve_peer

N = 1 << 20
PEERS = ["numpy", "mlx", "torch"]


def numpy_cases():
    g = np.random.default_rng(0)
    z = np.zeros((4096, 64), np.float32)
    return {
        "bits_u32_1M": lambda: g.integers(0, 2**32, N, dtype=np.uint32),
        "uniform_f32_1M": lambda: g.random(N, np.float32),
        "uniform_ab_f32_1M": lambda: g.random(N, np.float32) * np.float32(5) - np.float32(2),
        "normal_f32_1M": lambda: g.standard_normal(N, np.float32),
        "randint_i32_1M": lambda: g.integers(0, 1000, N, dtype=np.int32),
        "bernoulli_1M": lambda: g.random(N, np.float32) < np.float32(0.3),
        "gumbel_f32_1M": lambda: g.gumbel(size=N).astype(np.float32),
        "laplace_f32_1M": lambda: g.laplace(size=N).astype(np.float32),
        "permutation_1M": lambda: g.permutation(N),
        "categorical_4096x64": lambda: np.argmax(z + g.gumbel(size=z.shape).astype(np.float32),
                                                 axis=-1),
    }


def mlx_cases(mx):
    k = mx.random.key(0)
    z = mx.zeros((4096, 64))

    def ev(f):
        return lambda: mx.eval(f())

    return {
        "uniform_f32_1M": ev(lambda: mx.random.uniform(shape=(N,), key=k)),
        "uniform_ab_f32_1M": ev(lambda: mx.random.uniform(-2, 3, (N,), key=k)),
        "normal_f32_1M": ev(lambda: mx.random.normal((N,), key=k)),
        "randint_i32_1M": ev(lambda: mx.random.randint(0, 1000, (N,), key=k)),
        "bernoulli_1M": ev(lambda: mx.random.bernoulli(0.3, (N,), key=k)),
        "gumbel_f32_1M": ev(lambda: mx.random.gumbel((N,), key=k)),
        "laplace_f32_1M": ev(lambda: mx.random.laplace((N,), key=k)),
        "truncated_normal_f32_1M": ev(lambda: mx.random.truncated_normal(-1, 2, (N,), key=k)),
        "permutation_1M": ev(lambda: mx.random.permutation(N, key=k)),
        "categorical_4096x64": ev(lambda: mx.random.categorical(z, key=k)),
    }


def torch_cases(torch):
    g = torch.Generator().manual_seed(0)
    p = torch.full((4096, 64), 1 / 64)
    return {
        "bits_u32_1M": lambda: torch.randint(0, 2**32, (N,), generator=g, dtype=torch.int64),
        "uniform_f32_1M": lambda: torch.rand(N, generator=g),
        "uniform_ab_f32_1M": lambda: torch.empty(N).uniform_(-2, 3, generator=g),
        "normal_f32_1M": lambda: torch.randn(N, generator=g),
        "randint_i32_1M": lambda: torch.randint(0, 1000, (N,), generator=g, dtype=torch.int32),
        "bernoulli_1M": lambda: torch.empty(N).bernoulli_(0.3, generator=g),
        "truncated_normal_f32_1M": lambda: torch.nn.init.trunc_normal_(torch.empty(N), a=-1, b=2,
                                                                       generator=g),
        "permutation_1M": lambda: torch.randperm(N, generator=g),
        "categorical_4096x64": lambda: torch.multinomial(p, 1, generator=g),
    }


def peer_times(peer, cases):
    """{case: seconds} of one peer, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, (), numpy_cases, mlx_cases, torch_cases)
    if fns is None:
        return None
    return {k: median_time(f, repeat=15) for k, f in fns.items() if not cases or k in cases}


def main():
    c = run_c("bench_random")
    peers = peer_results(os.path.abspath(__file__), PEERS)
    rows = [(k, t, {p: r[k] for p, r in peers.items() if k in r}) for k, t in c.items()]
    report("random samplers (2^20 samples)", rows, PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
