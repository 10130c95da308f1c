"""src/nn beside MLX's CPU build (mlx.optimizers), PyTorch (torch.optim, clip_grad_norm_) and
NumPy re-implementations of the same formulas, each peer in a process of its own
(bench/README.md): an AdamW and an SGD-with-momentum step (update, then evaluate the new
parameters and the state) and clip_grad_norm, on four 512x512 weights with biases (1M
parameters) and on 100 small parameters (per-call overhead)."""
import os

import numpy as np

from benchlib import median_time, peer_case_fns, peer_results, report, run_c, serve_peer

SETS = {"4x512x512": (4, 512, 512), "100x64": (100, 1, 64)}
NAMES = ["adamw_step", "sgd_momentum_step", "clip_grad_norm"]
PEERS = ["numpy", "mlx", "torch"]


def arrays(n, rows, cols):
    g = np.random.default_rng(0)
    p, gr = {}, {}
    for i in range(n):
        p[f"layers.{i}.weight"] = (g.random((rows, cols), np.float32) - 0.5) * 0.1
        gr[f"layers.{i}.weight"] = (g.random((rows, cols), np.float32) - 0.5) * 0.01
        p[f"layers.{i}.bias"] = (g.random((1, cols), np.float32) - 0.5) * 0.1
        gr[f"layers.{i}.bias"] = (g.random((1, cols), np.float32) - 0.5) * 0.01
    return p, gr


def numpy_cases(p, gr):
    st = {"m": {k: np.zeros_like(v) for k, v in p.items()},
          "v": {k: np.zeros_like(v) for k, v in p.items()},
          "mom": {k: np.zeros_like(v) for k, v in p.items()}}
    f = np.float32

    def adamw():
        lr = f(1e-3)
        for k, g in gr.items():
            w = p[k] * (f(1) - lr * f(0.01))
            m = f(0.9) * st["m"][k] + f(0.1) * g
            v = f(0.999) * st["v"][k] + f(0.001) * g * g
            st["m"][k], st["v"][k] = m, v
            p[k] = w - lr * m / (np.sqrt(v) + f(1e-8))

    def sgd():
        for k, g in gr.items():
            v = f(0.9) * st["mom"][k] + g
            st["mom"][k] = v
            p[k] = p[k] - f(1e-2) * v

    def clip():
        norm = np.sqrt(sum(np.sum(g * g) for g in gr.values()))
        s = min(0.5 / (norm + 1e-6), 1.0)
        return {k: (g * f(s)) for k, g in gr.items()}

    return adamw, sgd, clip


def mlx_cases(mx, p, gr):
    import mlx.optimizers as optim

    mp = {k: mx.array(v) for k, v in p.items()}
    mg = {k: mx.array(v) for k, v in gr.items()}
    mx.eval(mp, mg)
    state = {"p": mp}

    def stepper(opt):
        def f():
            state["p"] = opt.apply_gradients(mg, state["p"])
            mx.eval(state["p"], opt.state)
        return f

    def clip():
        c, n = optim.clip_grad_norm(mg, 0.5)
        mx.eval(c, n)

    return (stepper(optim.AdamW(1e-3)), stepper(optim.SGD(1e-2, momentum=0.9)), clip)


def torch_cases(torch, p, gr):
    params = {k: torch.nn.Parameter(torch.from_numpy(v.copy())) for k, v in p.items()}
    for k, v in params.items():
        v.grad = torch.from_numpy(gr[k].copy())
    ps = list(params.values())
    adamw = torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.01)
    sgd = torch.optim.SGD(ps, lr=1e-2, momentum=0.9)
    return (adamw.step, sgd.step, lambda: torch.nn.utils.clip_grad_norm_(ps, 0.5))


def peer_times(peer, cases):
    """{case: seconds} of one peer, in its own process (benchlib.serve_peer)."""
    out = {}
    for suffix, dims in SETS.items():
        p, gr = arrays(*dims)
        fns = peer_case_fns(peer, (dict(p), gr), numpy_cases, mlx_cases, torch_cases)
        if fns is None:
            return None
        for name, fn in zip(NAMES, fns):
            case = f"{name}_{suffix}"
            if not cases or case in cases:
                out[case] = median_time(fn, repeat=15, warmup=3)
    return out


def main():
    c = run_c("bench_nn")
    peers = peer_results(os.path.abspath(__file__), PEERS)
    rows = [(f"{n}_{s}", c[f"{n}_{s}"], {p: t[f"{n}_{s}"] for p, t in peers.items() if f"{n}_{s}" in t})
            for s in SETS for n in NAMES if f"{n}_{s}" in c]
    report("nn: optimizer steps and clip_grad_norm (float32)", rows, PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
