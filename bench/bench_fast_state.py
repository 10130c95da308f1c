"""norm_rope and gated_delta_slots on the CPU beside NumPy's composition of the same op, MLX's
CPU build and PyTorch (where they install; neither has these ops, so their rows are the
compositions the models write: mx.fast.rms_norm then mx.fast.rope, F.rms_norm then the rotation
in PyTorch, and the delta rule's step in their operators), each library (nuvec too) in a process
of its own (bench/README.md): norm_rope of 4096 tokens x 32 heads x 128 float32 (a prefill's q),
and one decode step of gated_delta_slots for 16 sequences x 16 heads of 128 x 128 float32 states
(the pool donated each step, as a serving loop rebinds it; NumPy and PyTorch update in place).
Ratios are peer time / nuvec time (> 1: nuvec faster)."""
import os

import numpy as np

from benchlib import compare, median_time, peer_case_fns, serve_peer

CASES = ["norm_rope_4096x32x128_f32", "gated_delta_decode_16x16x128x128_f32"]
REPEAT = dict(zip(CASES, [5, 11]))
PEERS = ["numpy", "mlx", "torch"]
T, H, D = 4096, 32, 128
N, HS, K = 16, 16, 128


def inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((T, H, D)).astype(np.float32)
    w = rng.standard_normal(D).astype(np.float32)
    pos = np.arange(T, dtype=np.int32)
    th = pos[:, None, None] * 10000.0 ** (-np.arange(64) / 64)
    cos, sin = np.cos(th).astype(np.float32), np.sin(th).astype(np.float32)
    q = rng.standard_normal((N, 1, HS, K)).astype(np.float32)
    kk = (rng.standard_normal((N, 1, HS, K)) * 0.1).astype(np.float32)
    v = rng.standard_normal((N, 1, HS, K)).astype(np.float32)
    g = -rng.uniform(0, 0.1, (N, 1, HS)).astype(np.float32)
    beta = rng.uniform(0, 1, (N, 1, HS)).astype(np.float32)
    pool = rng.standard_normal((N, HS, K, K)).astype(np.float32)
    return x, w, pos, cos, sin, q, kk, v, g, beta, pool


def numpy_cases(x, w, pos, cos, sin, q, kk, v, g, beta, pool):
    st = pool.copy()

    def norm_rope():
        n = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
        a, b = n[..., :64], n[..., 64:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], -1)

    def delta():
        st[...] *= np.exp(g[:, 0])[..., None, None]
        u = (v[:, 0] - np.einsum("nhkv,nhk->nhv", st, kk[:, 0])) * beta[:, 0][..., None]
        st[...] += kk[:, 0][..., :, None] * u[..., None, :]
        return np.einsum("nhkv,nhk->nhv", st, q[:, 0])

    return dict(zip(CASES, [norm_rope, delta]))


def mlx_cases(mx, x, w, pos, cos, sin, q, kk, v, g, beta, pool):
    xm, wm = mx.array(x.reshape(T, H, 1, D)), mx.array(w)
    offs = mx.array(pos)  # MLX's rope takes one offset a batch: each token a batch of one
    qm, km, vm, gm, bm = (mx.array(a[:, 0]) for a in (q, kk, v, g, beta))
    ms = {"s": mx.array(pool)}
    mx.eval(xm, wm, offs, qm, km, vm, gm, bm, ms["s"])

    def delta():
        s = ms["s"] * mx.exp(gm)[..., None, None]
        u = (vm - (s * km[..., :, None]).sum(-2)) * bm[..., None]
        ms["s"] = s + km[..., :, None] * u[..., None, :]
        mx.eval(ms["s"], (ms["s"] * qm[..., :, None]).sum(-2))

    return dict(zip(CASES, [lambda: mx.eval(mx.fast.rope(
        mx.fast.rms_norm(xm, wm, 1e-6), D, traditional=False, base=10000.0, scale=1.0,
        offset=offs)), delta]))


def torch_cases(torch, x, w, pos, cos, sin, q, kk, v, g, beta, pool):
    tx, tw, tc, ts = (torch.from_numpy(a) for a in (x, w, cos, sin))
    tq, tk, tv, tg, tb = (torch.from_numpy(a[:, 0].copy()) for a in (q, kk, v, g, beta))
    st = torch.from_numpy(pool.copy())

    def norm_rope():
        n = torch.nn.functional.rms_norm(tx, (D,), tw, 1e-6)
        a, b = n[..., :64], n[..., 64:]
        return torch.cat([a * tc - b * ts, a * ts + b * tc], -1)

    def delta():
        st.mul_(torch.exp(tg)[..., None, None])
        u = (tv - torch.einsum("nhkv,nhk->nhv", st, tk)) * tb[..., None]
        st.add_(tk[..., :, None] * u[..., None, :])
        return torch.einsum("nhkv,nhk->nhv", st, tq)

    return dict(zip(CASES, [norm_rope, delta]))


def nuvec_cases(nv, x, w, pos, cos, sin, q, kk, v, g, beta, pool):
    xn, wn, pn = nv.array(x), nv.array(w), nv.array(pos)
    args = [nv.array(a) for a in (q, kk, v, g, beta)]
    state = {"pool": nv.array(pool)}
    sl = nv.array(np.arange(N, dtype=np.int32))
    nv.eval(xn, wn, pn, *args, state["pool"], sl)

    def delta():
        o, state["pool"] = nv.fast.gated_delta_slots(*args, state["pool"], sl)  # donated
        nv.eval(o, state["pool"])

    return dict(zip(CASES, [lambda: nv.eval(nv.fast.norm_rope(xn, wn, 1e-6, D, pn, base=10000.0)),
                            delta]))


def peer_times(peer, cases):
    """{case: seconds} of one library, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, inputs(), numpy_cases, mlx_cases, torch_cases, nuvec_cases)
    if fns is None:
        return None
    return {k: median_time(f, repeat=REPEAT[k]) for k, f in fns.items() if not cases or k in cases}


if __name__ == "__main__":
    if not serve_peer(peer_times):
        compare(os.path.abspath(__file__),
                "norm_rope and gated_delta_slots (ratio = peer time / nuvec time)", CASES, PEERS)
