"""The fast family beside NumPy (its composition of the same formula), MLX's CPU build (mx.fast)
and PyTorch (F.rms_norm, F.layer_norm; rope composed as NumPy's), where they install, each peer
in a process of its own (bench/README.md): rms_norm and layer_norm with weight (and bias) over
the rows of 4096x4096 float32, rope of (1, 32, 2048, 128) float32."""
import os

import numpy as np

from benchlib import median_time, peer_case_fns, peer_results, report, run_c, serve_peer

CASES = ["rms_norm_4096x4096_f32", "layer_norm_4096x4096_f32", "rope_1x32x2048x128_f32"]
PEERS = ["numpy", "mlx", "torch"]


def inputs():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4096, 4096)).astype(np.float32)
    w = rng.uniform(-1, 1, 4096).astype(np.float32)
    b = rng.uniform(-1, 1, 4096).astype(np.float32)
    q = rng.uniform(-1, 1, (1, 32, 2048, 128)).astype(np.float32)
    inv = (10000.0 ** (-np.arange(64) * 2.0 / 128)).astype(np.float32)
    th = (np.arange(2048, dtype=np.float32) + 5)[:, None] * inv
    return x, w, b, q, np.cos(th), np.sin(th)


def numpy_cases(x, w, b, q, cos, sin):
    def rms():
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w

    def layer():
        xc = x - x.mean(-1, keepdims=True)
        return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * w + b

    def rope():
        a, bb = q[..., :64], q[..., 64:]
        return np.concatenate([a * cos - bb * sin, a * sin + bb * cos], -1)

    return dict(zip(CASES, [rms, layer, rope]))


def mlx_cases(mx, x, w, b, q, cos, sin):
    mxx, mw, mb, mq = mx.array(x), mx.array(w), mx.array(b), mx.array(q)
    mx.eval(mxx, mw, mb, mq)
    return dict(zip(CASES, [
        lambda: mx.eval(mx.fast.rms_norm(mxx, mw, 1e-5)),
        lambda: mx.eval(mx.fast.layer_norm(mxx, mw, mb, 1e-5)),
        lambda: mx.eval(mx.fast.rope(mq, 128, traditional=False, base=10000.0, scale=1.0,
                                     offset=5))]))


def torch_cases(torch, x, w, b, q, cos, sin):
    tx, tw, tb, tq, tc, ts = (torch.from_numpy(v) for v in (x, w, b, q, cos, sin))
    F = torch.nn.functional

    def rope():
        a, bb = tq[..., :64], tq[..., 64:]
        return torch.cat([a * tc - bb * ts, a * ts + bb * tc], -1)

    return dict(zip(CASES, [lambda: F.rms_norm(tx, (4096,), tw, 1e-5),
                            lambda: F.layer_norm(tx, (4096,), tw, tb, 1e-5), rope]))


def peer_times(peer, cases):
    """{case: seconds} of one peer, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, inputs(), numpy_cases, mlx_cases, torch_cases)
    if fns is None:
        return None
    return {k: median_time(f, repeat=11) for k, f in fns.items() if not cases or k in cases}


def main():
    c = run_c("bench_fast")
    peers = peer_results(os.path.abspath(__file__), PEERS)
    rows = [(k, c.get(k), {p: t[k] for p, t in peers.items() if k in t}) for k in CASES]
    report("fast: rms_norm, layer_norm, rope (float32)", rows, PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
