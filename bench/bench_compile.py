#!/usr/bin/env python3
"""nuvec.compile beside mlx.core.compile (CPU), NumPy and PyTorch eager (where they install), each
library in a process of its own (bench/README.md), all on the same data.

Rows, each compiled and not: x*y+z on 2^26 float32 (the issue's target: <= 50 ms compiled), a
tanh-form GELU chain and a SiLU chain on 2^24 float32, a layer-norm-like chain over 4096 rows of
1024 float32 ((x - mean) * rsqrt(var + eps) * w + b), x*y+z on 2^24 bfloat16 (computed in
float32, rounded after each operation), a chain ending in a row reduction ((x*w + b).exp().sum(-1)
over 4096 rows of 1024 float32: one kernel compiled), the tiny-op chain (x = x*0.5 + 1, 1000
times on 1024 float32) and an MLP training step (784-512-10, batch 256, SGD) with the model and
optimizer state captured. PyTorch runs the same chains and step eagerly (torch.compile's
inductor needs minutes of C++ compilation per graph on this machine). Each time is the median of several runs after a warm-up (the trace
and the kernel compilation happen there); ratios are the peer's time over nuvec compiled's.
Run: python3 bench/bench_compile.py (after make), or through make bench.
"""
import functools
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import (median_time, mlx_core, nuvec_module, peer_results, report,  # noqa: E402
                      serve_peer, torch_cpu)

CASES = ["axpy", "gelu", "gelu_shapeless", "silu", "layer_norm", "axpy_bf16", "row_chain",
         "row_chain_shapeless", "tiny", "mlp_step"]
# Rows compiled with shapeless=True (the other columns: the same function as its row).
SHAPELESS = {"gelu_shapeless": "gelu", "row_chain_shapeless": "row_chain"}
COLUMNS = ["nuvec eager", "mlx compiled", "mlx eager", "torch eager", "numpy"]


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

    fs = {"axpy": axpy, "gelu": gelu, "silu": silu, "layer_norm": layer_norm, "tiny": tiny,
          "axpy_bf16": axpy, "row_chain": row_chain}
    fs.update({case: fs[of] for case, of in SHAPELESS.items()})
    return fs


def inputs(m, rng, array=None, bf16=None):
    """The chains' arguments, drawn in one order from rng (array: how the library makes an array
    from NumPy's, m.array by default; bf16: its cast to bfloat16, astype by default)."""
    array = array or m.array
    bf16 = bf16 or (lambda a: a.astype(m.bfloat16))
    big = [array(rng.uniform(-4, 4, 1 << 26).astype(np.float32)) for _ in range(3)]
    mid = array(rng.uniform(-4, 4, 1 << 24).astype(np.float32))
    rows = array(rng.standard_normal((4096, 1024)).astype(np.float32))
    w, b = (array(rng.standard_normal(1024).astype(np.float32)) for _ in range(2))
    small = array(rng.standard_normal(1024).astype(np.float32))
    half = [bf16(array(rng.uniform(-4, 4, 1 << 24).astype(np.float32)))
            for _ in range(3)]
    return {"axpy": big, "gelu": [mid], "silu": [mid], "layer_norm": [rows, w, b], "tiny": [small],
            "axpy_bf16": half, "row_chain": [rows, w, b], "gelu_shapeless": [mid],
            "row_chain_shapeless": [rows, w, b]}


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


def torch_step(torch, rng):
    """PyTorch's eager training step of the same model, loss and optimizer."""
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.from_numpy(rng.standard_normal((256, 784)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 256).astype(np.int64))

    def run():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    return run


def peer_times(peer, cases):
    """{column: {case: seconds}} flattened as "column|case" of one library, in its own process
    (benchlib.serve_peer): nuvec and MLX compiled and eager, PyTorch eager, NumPy's two rows."""
    rng = np.random.default_rng(0)
    out = {}
    if peer == "numpy":
        args = inputs(np, rng, np.asarray, lambda a: a)
        x, r = args["axpy"], args["row_chain"]
        out["numpy|axpy"] = median_time(lambda: x[0] * x[1] + x[2], repeat=5)
        out["numpy|row_chain"] = median_time(lambda: np.exp(r[0] * r[1] + r[2]).sum(-1), repeat=9)
        return out
    if peer == "torch":
        torch = torch_cpu()
        if torch is None:
            return None
        args = inputs(torch, rng, torch.from_numpy, lambda a: a.to(torch.bfloat16))
        for case, f in chains(torch).items():
            out[f"torch eager|{case}"] = median_time(lambda: f(*args[case]),
                                                     repeat=5 if case == "axpy" else 9)
        out["torch eager|mlp_step"] = median_time(torch_step(torch, rng), repeat=9, warmup=2)
        return out
    m = nuvec_module() if peer == "nuvec" else mlx_core()
    if m is None:
        return None
    fs, args = chains(m), inputs(m, rng)
    m.eval(*[a for v in args.values() for a in v])
    for case, f in fs.items():
        c = m.compile(f, shapeless=case in SHAPELESS)
        reps = 5 if case == "axpy" else 9
        out[f"{peer} eager|{case}"] = median_time(lambda: m.eval(f(*args[case])), repeat=reps)
        out[f"{peer} compiled|{case}"] = median_time(lambda: m.eval(c(*args[case])), repeat=reps,
                                                     warmup=2)
    nn = __import__(peer + ".nn", fromlist=["nn"])
    optim = __import__(peer + ".optimizers", fromlist=["optimizers"])
    for compiled in (False, True):
        out[f"{peer} {'compiled' if compiled else 'eager'}|mlp_step"] = median_time(
            mlp_step(m, nn, optim, compiled, rng), repeat=9, warmup=2)
    return out


def main():
    res = peer_results(os.path.abspath(__file__), ["nuvec", "mlx", "torch", "numpy"])
    flat = {k: v for r in res.values() for k, v in r.items()}
    rows = [(case, flat.get(f"nuvec compiled|{case}"),
             {col: flat[f"{col}|{case}"] for col in COLUMNS if f"{col}|{case}" in flat})
            for case in CASES if f"nuvec compiled|{case}" in flat]
    report("compile (CPU, float32 unless named; nuvec column = nuvec compiled; ratio = peer / nuvec compiled)",
           rows, COLUMNS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
