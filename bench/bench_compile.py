#!/usr/bin/env python3
"""nuvec.compile beside mlx.core.compile (CPU) and NumPy in the same run.

Rows, each compiled and not: x*y+z on 2^26 float32 (the issue's target: <= 50 ms compiled), a
tanh-form GELU chain and a SiLU chain on 2^24 float32, a layer-norm-like chain over 4096 rows of
1024 float32 ((x - mean) * rsqrt(var + eps) * w + b), x*y+z on 2^24 bfloat16 (computed in
float32, rounded after each operation), a chain ending in a row reduction ((x*w + b).exp().sum(-1)
over 4096 rows of 1024 float32: one kernel compiled), the tiny-op chain (x = x*0.5 + 1, 1000
times on 1024 float32) and an MLP training step (784-512-10, batch 256, SGD) with the model and
optimizer state captured. Each time is the median of several runs after a warm-up (the trace
and the kernel compilation happen there); ratios are the peer's time over nuvec compiled's.
Run: python3 bench/bench_compile.py (after make), or through make bench.
"""
import functools
import os
import sys

import numpy as np

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _here)
sys.path.insert(0, os.path.join(os.environ.get("NUVEC_BUILD", os.path.join(_here, "..", "build")), "python"))
import nuvec as nv  # noqa: E402
from benchlib import median_time, mlx_core, report  # noqa: E402


def chains(m):
    """The element-wise chains, written once for any module with MLX's API."""

    def axpy(x, y, z):
        return x * y + z

    def gelu(x):
        return 0.5 * x * (1 + m.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))

    def silu(x):
        return x * m.sigmoid(x)

    def layer_norm(x, w, b):
        mu = x.mean(axis=-1, keepdims=True)
        d = x - mu
        var = (d * d).mean(axis=-1, keepdims=True)
        return d * m.rsqrt(var + 1e-5) * w + b

    def tiny(x):
        for _ in range(1000):
            x = x * 0.5 + 1
        return x

    def row_chain(x, w, b):
        return m.exp(x * w + b).sum(axis=-1)

    return {"axpy": axpy, "gelu": gelu, "silu": silu, "layer_norm": layer_norm, "tiny": tiny,
            "axpy_bf16": axpy, "row_chain": row_chain}


def inputs(m, rng):
    big = [m.array(rng.uniform(-4, 4, 1 << 26).astype(np.float32)) for _ in range(3)]
    mid = m.array(rng.uniform(-4, 4, 1 << 24).astype(np.float32))
    rows = m.array(rng.standard_normal((4096, 1024)).astype(np.float32))
    w, b = (m.array(rng.standard_normal(1024).astype(np.float32)) for _ in range(2))
    small = m.array(rng.standard_normal(1024).astype(np.float32))
    half = [m.array(rng.uniform(-4, 4, 1 << 24).astype(np.float32)).astype(m.bfloat16)
            for _ in range(3)]
    return {"axpy": big, "gelu": [mid], "silu": [mid], "layer_norm": [rows, w, b], "tiny": [small],
            "axpy_bf16": half, "row_chain": [rows, w, b]}


def mlp_step(m, nn, optim, compiled, rng):
    """A function running one training step, and its arguments."""
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
    opt = optim.SGD(learning_rate=0.01)
    x = m.array(rng.standard_normal((256, 784)).astype(np.float32))
    y = m.array(rng.integers(0, 10, 256).astype(np.int32))

    def loss(mod, x, y):
        return nn.losses.cross_entropy(mod(x), y, reduction="mean")

    def step(x, y):
        l, g = nn.value_and_grad(model, loss)(model, x, y)
        opt.update(model, g)
        return l

    if compiled:
        state = [model.state, opt.state]
        step = functools.partial(m.compile, inputs=state, outputs=state)(step)

    def run():
        m.eval(step(x, y), model.parameters())

    return run


def main():
    rng = np.random.default_rng(0)
    rows = []
    mx = mlx_core()
    mods = [("nuvec", nv)] + ([("mlx", mx)] if mx else [])
    times = {}
    for name, m in mods:
        fs, args = chains(m), inputs(m, rng)
        m.eval(*[a for v in args.values() for a in v])
        for case, f in fs.items():
            c = m.compile(f)
            reps = 5 if case == "axpy" else 9
            times[(case, name, False)] = median_time(lambda: m.eval(f(*args[case])), repeat=reps)
            times[(case, name, True)] = median_time(lambda: m.eval(c(*args[case])), repeat=reps, warmup=2)
        nn = __import__(name + ".nn" if name == "nuvec" else "mlx.nn", fromlist=["nn"])
        optim = __import__(name + ".optimizers" if name == "nuvec" else "mlx.optimizers",
                           fromlist=["optimizers"])
        for compiled in (False, True):
            times[("mlp_step", name, compiled)] = median_time(mlp_step(m, nn, optim, compiled, rng),
                                                              repeat=9, warmup=2)
    npin = inputs(nv, rng)
    npx = [np.asarray(a) for a in npin["axpy"]]
    npr = [np.asarray(a) for a in npin["row_chain"]]
    numpy = {"axpy": median_time(lambda: npx[0] * npx[1] + npx[2], repeat=5),
             "row_chain": median_time(lambda: np.exp(npr[0] * npr[1] + npr[2]).sum(-1), repeat=9)}
    for case in ["axpy", "gelu", "silu", "layer_norm", "axpy_bf16", "row_chain", "tiny", "mlp_step"]:
        peers = {"nuvec eager": times[(case, "nuvec", False)]}
        if mx:
            peers["mlx compiled"] = times[(case, "mlx", True)]
            peers["mlx eager"] = times[(case, "mlx", False)]
        if case in numpy:
            peers["numpy"] = numpy[case]
        rows.append((case, times[(case, "nuvec", True)], peers))
    report("compile (CPU, float32 unless named; nuvec column = nuvec compiled; ratio = peer / nuvec compiled)",
           rows, ["nuvec eager", "mlx compiled", "mlx eager", "numpy"])


if __name__ == "__main__":
    main()
