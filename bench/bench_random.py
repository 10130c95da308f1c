"""The random family beside NumPy's Generator (PCG64) and MLX's CPU build: 2^20 samples per
case (categorical: 4096 distributions of 64 classes), from a fixed key / generator."""
import numpy as np

from benchlib import median_time, mlx_core, report, run_c

N = 1 << 20


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
        "truncated_normal_f32_1M": None,
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
        "bits_u32_1M": None,
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


def main():
    c = run_c("bench_random")
    npc = numpy_cases()
    mx = mlx_core()
    mxc = mlx_cases(mx) if mx else {}
    rows = []
    for case, t in c.items():
        peers = {}
        if npc.get(case):
            peers["numpy"] = median_time(npc[case], repeat=15)
        if mxc.get(case):
            peers["mlx"] = median_time(mxc[case], repeat=15)
        rows.append((case, t, peers))
    report("random samplers (2^20 samples)", rows, ["numpy", "mlx"])


if __name__ == "__main__":
    main()
