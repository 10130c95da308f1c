"""nuvec's benchmark suite: MLX's comparative op set, the eval-overhead chain, the MLP gradient
step and charlm's training step, each beside NumPy, MLX's CPU build and PyTorch (where they
install) in the same run. Prints one table of times and ratios (peer time / nuvec time: > 1
means nuvec is faster), and writes bench/out/results.csv and bench/out/results.png.

The op cases and their shapes are bench_suite.c's; the chain is bench_eval's, the MLP step
bench_grad's (bench_grad.py times its peers), the charlm step examples/charlm/step_bench.c's.
NumPy has no automatic differentiation: it has no time for the two gradient steps.
nuvec and each peer run in processes of their own, one after the other (bench/README.md).
Usage: bench_suite.py [case ...] (none: every row).
"""
import csv
import math
import os
import sys

import numpy as np

from benchlib import (BUILD, HERE, median_time, mlx_core, peer_results, run_c, serve_peer,
                      torch_cpu)

PEERS = ["numpy", "mlx", "torch"]
REPEAT = 7

# charlm's default model and batch (examples/charlm/charlm.c): layers, dim, heads, context,
# batch, and the corpus' vocabulary.
CHARLM = dict(layers=2, dim=128, heads=4, context=64, batch=32, vocab=73)


def rand(shape, seed):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


def op_cases(lib, xp):
    """The op cases as closures over inputs made with `xp` (numpy, mlx.core or torch)."""
    x3, y3, row = xp(rand((32, 512, 512), 1)), xp(rand((32, 512, 512), 2)), xp(rand(512, 3))
    sq, wide = xp(rand((1024, 1024), 4)), xp(rand((1024, 4096), 5))
    ma, mb = xp(rand((1024, 1024), 6)), xp(rand((1024, 1024), 7))
    ba, bb = xp(rand((64, 128, 128), 8)), xp(rand((64, 128, 128), 9))
    ta, tb = xp(rand((8192, 128), 10)), xp(rand((128, 512), 11))
    vec, w = xp(rand((1, 4096), 12)), xp(rand((4096, 4096), 13))
    return lib(x3, y3, row, sq, wide, ma, mb, ba, bb, ta, tb, vec, w)


def numpy_ops(x3, y3, row, sq, wide, ma, mb, ba, bb, ta, tb, vec, w):
    def softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def logsumexp(x):
        m = x.max(axis=-1, keepdims=True)
        return (np.log(np.exp(x - m).sum(axis=-1, keepdims=True)) + m)[..., 0]

    return {
        "add": lambda: x3 + y3,
        "add_bcast_row": lambda: x3 + row,
        "add_transposed": lambda: x3 + x3.transpose(0, 2, 1),
        "mul_scalar": lambda: x3 * np.float32(0.5),
        "sum_axis0": lambda: x3.sum(axis=0),
        "sum_axis1": lambda: x3.sum(axis=1),
        "sum_axis2": lambda: x3.sum(axis=2),
        "argmax_axis0": lambda: x3.argmax(axis=0),
        "argmax_axis1": lambda: x3.argmax(axis=1),
        "argmax_axis2": lambda: x3.argmax(axis=2),
        "softmax_last": lambda: softmax(x3),
        "logsumexp_last": lambda: logsumexp(x3),
        "cumsum_axis1": lambda: np.cumsum(x3, axis=1),
        "cumsum_axis2": lambda: np.cumsum(x3, axis=2),
        "sort_last": lambda: np.sort(sq, axis=-1),
        "topk8_last": lambda: np.partition(wide, -8, axis=-1)[:, -8:],
        "concatenate_axis1": lambda: np.concatenate([x3, y3], axis=1),
        "matmul_1024": lambda: ma @ mb,
        "matmul_batched_64x128": lambda: ba @ bb,
        "matmul_8192x128x512": lambda: ta @ tb,
        "gemv_4096": lambda: vec @ w,
        "relu": lambda: np.maximum(x3, np.float32(0)),
        # NumPy has no erf, so no gelu: an element-by-element math.erf would time Python.
        "gelu": None,
        "silu": lambda: x3 / (np.float32(1) + np.exp(-x3)),
        "sigmoid": lambda: np.float32(1) / (np.float32(1) + np.exp(-x3)),
        "exp": lambda: np.exp(x3),
        "tanh": lambda: np.tanh(x3),
    }


def mlx_ops(mx):
    import mlx.nn as nn

    def lib(x3, y3, row, sq, wide, ma, mb, ba, bb, ta, tb, vec, w):
        ops = {
            "add": lambda: x3 + y3,
            "add_bcast_row": lambda: x3 + row,
            "add_transposed": lambda: x3 + x3.transpose(0, 2, 1),
            "mul_scalar": lambda: x3 * 0.5,
            "sum_axis0": lambda: mx.sum(x3, axis=0),
            "sum_axis1": lambda: mx.sum(x3, axis=1),
            "sum_axis2": lambda: mx.sum(x3, axis=2),
            "argmax_axis0": lambda: mx.argmax(x3, axis=0),
            "argmax_axis1": lambda: mx.argmax(x3, axis=1),
            "argmax_axis2": lambda: mx.argmax(x3, axis=2),
            "softmax_last": lambda: mx.softmax(x3, axis=-1),
            "logsumexp_last": lambda: mx.logsumexp(x3, axis=-1),
            "cumsum_axis1": lambda: mx.cumsum(x3, axis=1),
            "cumsum_axis2": lambda: mx.cumsum(x3, axis=2),
            "sort_last": lambda: mx.sort(sq, axis=-1),
            "topk8_last": lambda: mx.topk(wide, 8, axis=-1),
            "concatenate_axis1": lambda: mx.concatenate([x3, y3], axis=1),
            "matmul_1024": lambda: ma @ mb,
            "matmul_batched_64x128": lambda: ba @ bb,
            "matmul_8192x128x512": lambda: ta @ tb,
            "gemv_4096": lambda: vec @ w,
            "relu": lambda: nn.relu(x3),
            "gelu": lambda: nn.gelu(x3),
            "silu": lambda: nn.silu(x3),
            "sigmoid": lambda: mx.sigmoid(x3),
            "exp": lambda: mx.exp(x3),
            "tanh": lambda: mx.tanh(x3),
        }
        return {k: (lambda f=f: mx.eval(f())) for k, f in ops.items()}

    def xp(a):
        r = mx.array(a)
        mx.eval(r)
        return r

    return op_cases(lib, xp)


def torch_ops(torch):
    F = torch.nn.functional

    def lib(x3, y3, row, sq, wide, ma, mb, ba, bb, ta, tb, vec, w):
        return {
            "add": lambda: x3 + y3,
            "add_bcast_row": lambda: x3 + row,
            "add_transposed": lambda: x3 + x3.transpose(1, 2),
            "mul_scalar": lambda: x3 * 0.5,
            "sum_axis0": lambda: x3.sum(0),
            "sum_axis1": lambda: x3.sum(1),
            "sum_axis2": lambda: x3.sum(2),
            "argmax_axis0": lambda: x3.argmax(0),
            "argmax_axis1": lambda: x3.argmax(1),
            "argmax_axis2": lambda: x3.argmax(2),
            "softmax_last": lambda: torch.softmax(x3, -1),
            "logsumexp_last": lambda: torch.logsumexp(x3, -1),
            "cumsum_axis1": lambda: torch.cumsum(x3, 1),
            "cumsum_axis2": lambda: torch.cumsum(x3, 2),
            "sort_last": lambda: torch.sort(sq, -1),
            "topk8_last": lambda: torch.topk(wide, 8, -1),
            "concatenate_axis1": lambda: torch.cat([x3, y3], 1),
            "matmul_1024": lambda: ma @ mb,
            "matmul_batched_64x128": lambda: ba @ bb,
            "matmul_8192x128x512": lambda: ta @ tb,
            "gemv_4096": lambda: vec @ w,
            "relu": lambda: F.relu(x3),
            "gelu": lambda: F.gelu(x3),
            "silu": lambda: F.silu(x3),
            "sigmoid": lambda: torch.sigmoid(x3),
            "exp": lambda: torch.exp(x3),
            "tanh": lambda: torch.tanh(x3),
        }

    return op_cases(lib, torch.from_numpy)


# ---- The eval-overhead chain (bench_eval's case: 1000 × x = x*0.5 + 1 on 1024 float32) ----


def chain_time(peer, lib):
    """The chain's time per op in one peer (`lib`: numpy, mlx.core or torch)."""
    if peer == "numpy":
        def chain():
            x = np.ones(1024, np.float32)
            for _ in range(1000):
                x = x * np.float32(0.5) + np.float32(1)
    elif peer == "mlx":
        def chain():
            x = lib.ones((1024,), lib.float32)
            for _ in range(1000):
                x = x * 0.5 + 1
            lib.eval(x)
    else:
        def chain():
            x = lib.ones(1024)
            for _ in range(1000):
                x = x * 0.5 + 1
    return median_time(chain, repeat=REPEAT) / 2000


# ---- charlm's training step in the peers, written as their users write it ----


def mlx_charlm_step(mx):
    import mlx.nn as nn
    import mlx.optimizers as optim

    c = CHARLM

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = c["dim"]
            self.attn_norm, self.mlp_norm = nn.RMSNorm(d, eps=1e-5), nn.RMSNorm(d, eps=1e-5)
            self.wqkv, self.wo = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.fc, self.proj = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

        def __call__(self, x):
            b, t, d = x.shape
            h = c["heads"]
            q, k, v = mx.split(self.wqkv(self.attn_norm(x)), 3, axis=-1)
            q, k, v = (a.reshape(b, t, h, d // h).transpose(0, 2, 1, 3) for a in (q, k, v))
            y = mx.fast.scaled_dot_product_attention(q, k, v, scale=(d // h) ** -0.5,
                                                     mask="causal")
            x = x + self.wo(y.transpose(0, 2, 1, 3).reshape(b, t, d))
            return x + self.proj(nn.gelu_fast_approx(self.fc(self.mlp_norm(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(c["vocab"], c["dim"])
            self.wpe = mx.random.normal((c["context"], c["dim"])) * 0.02
            self.layers = [Block() for _ in range(c["layers"])]
            self.norm = nn.RMSNorm(c["dim"], eps=1e-5)

        def __call__(self, tokens):
            x = self.wte(tokens) + self.wpe[: tokens.shape[1]]
            for layer in self.layers:
                x = layer(x)
            return self.wte.as_linear(self.norm(x))

    model = Model()
    opt = optim.AdamW(learning_rate=3e-3, weight_decay=0.01)

    def loss_fn(m, tokens, targets):
        return nn.losses.cross_entropy(m(tokens), targets, reduction="mean")

    value_and_grad = nn.value_and_grad(model, loss_fn)
    rng = np.random.default_rng(0)

    def step():
        data = rng.integers(0, c["vocab"], (c["batch"], c["context"] + 1))
        tokens, targets = mx.array(data[:, :-1]), mx.array(data[:, 1:])
        loss, grads = value_and_grad(model, tokens, targets)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        opt.update(model, grads)
        mx.eval(loss, model.parameters(), opt.state)

    return median_time(step, repeat=10, warmup=3)


def torch_charlm_step(torch):
    nn, F = torch.nn, torch.nn.functional
    c = CHARLM

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = c["dim"]
            self.attn_norm, self.mlp_norm = nn.RMSNorm(d, eps=1e-5), nn.RMSNorm(d, eps=1e-5)
            self.wqkv, self.wo = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.fc, self.proj = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            b, t, d = x.shape
            h = c["heads"]
            q, k, v = self.wqkv(self.attn_norm(x)).split(d, dim=-1)
            q, k, v = (a.view(b, t, h, d // h).transpose(1, 2) for a in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.wo(y.transpose(1, 2).reshape(b, t, d))
            return x + self.proj(F.gelu(self.fc(self.mlp_norm(x)), approximate="tanh"))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(c["vocab"], c["dim"])
            self.wpe = nn.Parameter(torch.randn(c["context"], c["dim"]) * 0.02)
            self.layers = nn.ModuleList(Block() for _ in range(c["layers"]))
            self.norm = nn.RMSNorm(c["dim"], eps=1e-5)

        def forward(self, tokens):
            x = self.wte(tokens) + self.wpe[: tokens.shape[1]]
            for layer in self.layers:
                x = layer(x)
            return self.norm(x) @ self.wte.weight.T

    model = Model()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    rng = np.random.default_rng(0)

    def step():
        data = torch.from_numpy(rng.integers(0, c["vocab"], (c["batch"], c["context"] + 1)))
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, c["vocab"]), data[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return median_time(step, repeat=10, warmup=3)


def charlm_nuvec():
    c = CHARLM
    binary = os.path.join(BUILD, "examples", "charlm_step_bench")
    args = [str(c[k]) for k in ("layers", "dim", "heads", "context", "batch")]
    return run_c(binary, *args).get("charlm_step")


# ---- The report ----


def fmt(t):
    if t is None:
        return "-"
    return f"{t * 1e6:.1f}us" if t < 1e-3 else f"{t * 1e3:.2f}ms" if t < 1 else f"{t:.3f}s"


def print_table(rows, peers):
    print("\n== nuvec benchmark suite (ratio = peer time / nuvec time; > 1: nuvec faster) ==")
    head = f"{'case':<34}{'nuvec':>11}" + "".join(f"{p:>11}{'ratio':>8}" for p in peers)
    print(head)
    for case, t, others in rows:
        line = f"{case:<34}{fmt(t):>11}"
        for p in peers:
            o = others.get(p)
            ratio = f"{o / t:8.2f}" if o and t else f"{'-':>8}"
            line += f"{fmt(o):>11}{ratio}"
        print(line)
    for p in peers:
        ratios = [o[p] / t for _, t, o in rows if t and o.get(p)]
        if ratios:
            geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            print(f"geometric mean of ratios vs {p}: {geo:.2f} over {len(ratios)} cases")


def write_csv(rows, peers, path):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["case", "nuvec_s"] + [f"{p}_s" for p in peers] + [f"{p}_ratio" for p in peers])
        for case, t, others in rows:
            times = [others.get(p) for p in peers]
            ratios = [o / t if o and t else None for o in times]
            w.writerow([case, t] + ["" if v is None else f"{v:.9g}" for v in times]
                       + ["" if v is None else f"{v:.4f}" for v in ratios])


def write_chart(rows, peers, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart")
        return
    shown = [p for p in peers if any(o.get(p) for _, t, o in rows)]
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 1.5), dpi=110)
    height = 0.8 / max(len(shown), 1)
    for k, p in enumerate(shown):
        ys = [i + k * height for i in range(len(rows))]
        vals = [o[p] / t if t and o.get(p) else 0 for _, t, o in rows]
        ax.barh(ys, vals, height=height, label=p, log=True)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(rows))])
    ax.set_yticklabels([r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("peer time / nuvec time (log scale; > 1: nuvec faster)")
    ax.set_title("nuvec beside its peers (CPU)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)


EXTRA = ("eval_chain_per_op", "mlp4_grad_step_b256_w1024", "charlm_train_step")


def peer_times(peer, cases):
    """{case: seconds} of one peer, in its own process (benchlib.serve_peer); `cases` limits
    the op cases and the three rows after them (none: all)."""
    want = lambda c: not cases or c in cases  # noqa: E731
    if peer == "numpy":
        lib, ops = np, op_cases(numpy_ops, lambda a: a)
    elif peer == "mlx":
        lib = mlx_core()
        ops = mlx_ops(lib) if lib else None
    else:
        lib = torch_cpu()
        ops = torch_ops(lib) if lib else None
    if ops is None:
        return None
    times = {c: median_time(fn, repeat=REPEAT) for c, fn in ops.items() if fn and want(c)}
    if want("eval_chain_per_op"):
        times["eval_chain_per_op"] = chain_time(peer, lib)
    if peer != "numpy" and want("mlp4_grad_step_b256_w1024"):
        import bench_grad

        params, x, y = bench_grad.data()
        step = bench_grad.mlx_times if peer == "mlx" else bench_grad.torch_times
        times["mlp4_grad_step_b256_w1024"] = step(lib, params, x, y)[1]
    if peer != "numpy" and want("charlm_train_step"):
        times["charlm_train_step"] = (mlx_charlm_step if peer == "mlx" else torch_charlm_step)(lib)
    return times


def main(cases):
    """Runs nuvec's binaries, then each peer in a process of its own (benchlib's fairness
    rule), and reports. `cases` (command-line names) limits the rows; none: all."""
    ops = [c for c in cases if c not in EXTRA]
    op_times = run_c("bench_suite", *ops) if ops or not cases else {}
    nuvec = dict(op_times)
    want = lambda c: not cases or c in cases  # noqa: E731
    if want("eval_chain_per_op"):
        chain = run_c("bench_eval").get("chain_2000_ops")
        nuvec["eval_chain_per_op"] = chain / 2000 if chain else None
    if want("mlp4_grad_step_b256_w1024"):
        nuvec["mlp4_grad_step_b256_w1024"] = run_c("bench_grad").get("grad_step_mlp4")
    if want("charlm_train_step"):
        nuvec["charlm_train_step"] = charlm_nuvec()
    peers = peer_results(os.path.abspath(__file__), PEERS, cases)
    rows = [(c, t, {p: peers[p][c] for p in PEERS if c in peers[p]}) for c, t in nuvec.items()]

    print_table(rows, PEERS)
    out = os.path.join(HERE, "out")
    os.makedirs(out, exist_ok=True)
    write_csv(rows, PEERS, os.path.join(out, "results.csv"))
    write_chart(rows, PEERS, os.path.join(out, "results.png"))
    print(f"wrote {os.path.join(out, 'results.csv')} and results.png")


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main(sys.argv[1:])
