"""A gradient step of a 4-layer MLP (batch 256, width 1024, float32, tanh between the layers,
mean squared error): value_and_grad with respect to the 8 parameters and p - lr * g, evaluated,
beside MLX's CPU build and PyTorch (CPU) where they import, in the same run (each peer in a
process of its own, bench/README.md). The forward pass
alone is timed too, for scale. Ratios are peer time / nuvec time (> 1: nuvec faster)."""
import os

import numpy as np

from benchlib import median_time, mlx_core, peer_results, report, run_c, serve_peer, torch_cpu

BATCH, WIDTH, LAYERS, LR = 256, 1024, 4, 0.01
REPEAT = 11


def data():
    """Parameters and a batch with bench_grad.c's shapes and scales."""
    rng = np.random.default_rng(0)
    params = []
    for _ in range(LAYERS):
        params.append(((rng.random((WIDTH, WIDTH)) - 0.5) * (2.0 / 32.0)).astype(np.float32))
        params.append(((rng.random(WIDTH) - 0.5) * 0.1).astype(np.float32))
    x = ((rng.random((BATCH, WIDTH)) - 0.5) * 2.0).astype(np.float32)
    y = (rng.random((BATCH, WIDTH)) - 0.5).astype(np.float32)
    return params, x, y


def mlx_times(mx, params, x, y):
    ps = [mx.array(p) for p in params]
    mx_x, mx_y = mx.array(x), mx.array(y)
    mx.eval(ps, mx_x, mx_y)

    def loss(*args):
        *p, xb, yb = args
        h = xb
        for l in range(LAYERS):
            h = h @ p[2 * l] + p[2 * l + 1]
            if l < LAYERS - 1:
                h = mx.tanh(h)
        d = h - yb
        return mx.sum(d * d) / (BATCH * WIDTH)

    vg = mx.value_and_grad(loss, argnums=list(range(2 * LAYERS)))
    lr = mx.array(LR, dtype=mx.float32)

    def step():
        value, grads = vg(*ps, mx_x, mx_y)
        mx.eval(value, [p - g * lr for p, g in zip(ps, grads)])

    def forward():
        mx.eval(loss(*ps, mx_x, mx_y))

    return median_time(forward, repeat=REPEAT, warmup=2), median_time(step, repeat=REPEAT, warmup=2)


def torch_times(torch, params, x, y):
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    tx, ty = torch.tensor(x), torch.tensor(y)

    def loss():
        h = tx
        for l in range(LAYERS):
            h = h @ ps[2 * l] + ps[2 * l + 1]
            if l < LAYERS - 1:
                h = torch.tanh(h)
        d = h - ty
        return torch.sum(d * d) / (BATCH * WIDTH)

    def step():
        value = loss()
        grads = torch.autograd.grad(value, ps)
        with torch.no_grad():
            [p - LR * g for p, g in zip(ps, grads)]

    def forward():
        with torch.no_grad():
            loss()

    return median_time(forward, repeat=REPEAT, warmup=2), median_time(step, repeat=REPEAT, warmup=2)


ROWS = ("forward_mlp4_b256_w1024_f32", "grad_step_mlp4_b256_w1024_f32")


def peer_times(peer, cases):
    """{row: seconds} of one peer, in its own process (benchlib.serve_peer)."""
    lib = mlx_core() if peer == "mlx" else torch_cpu()
    if lib is None:
        return None
    params, x, y = data()
    fwd, step = (mlx_times if peer == "mlx" else torch_times)(lib, params, x, y)
    return dict(zip(ROWS, (fwd, step)))


def main():
    c = run_c("bench_grad")
    peers = peer_results(os.path.abspath(__file__), ["mlx", "torch"])
    rows = [(ROWS[0], c.get("forward_mlp4"), {p: t[ROWS[0]] for p, t in peers.items() if ROWS[0] in t}),
            (ROWS[1], c.get("grad_step_mlp4"), {p: t[ROWS[1]] for p, t in peers.items() if ROWS[1] in t})]
    report("gradient step of a 4-layer MLP (ratio = peer time / nuvec time)", rows, ["mlx", "torch"])


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
