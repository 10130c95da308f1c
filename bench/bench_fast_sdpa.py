"""scaled_dot_product_attention on the CPU beside the NumPy composition (float32 matmuls and a
softmax, the L x L scores in memory), MLX's CPU build (mx.fast.scaled_dot_product_attention) and
PyTorch (F.scaled_dot_product_attention, enable_gqa for the grouped decode), where they install,
each peer in a process of its own (bench/README.md), on the cases of bench_fast_sdpa.c: causal
and unmasked prefill (b1 h8 L1024 d64), a grouped-query decode step over 4096 keys, bfloat16
causal prefill (not NumPy's: it has no bfloat16)."""
import os

import numpy as np

from benchlib import median_time, peer_case_fns, peer_results, report, run_c, serve_peer

CASES = {
    "sdpa_causal_b1h8L1024d64_f32": ((1, 8, 1024, 64), (1, 8, 1024, 64), "float32", "causal"),
    "sdpa_b1h8L1024d64_f32": ((1, 8, 1024, 64), (1, 8, 1024, 64), "float32", None),
    "sdpa_decode_h32kv8L4096d128_f32": ((1, 32, 1, 128), (1, 8, 4096, 128), "float32", None),
    "sdpa_causal_b1h8L1024d64_bf16": ((1, 8, 1024, 64), (1, 8, 1024, 64), "bfloat16", "causal"),
}
PEERS = ["numpy", "mlx", "torch"]


def numpy_sdpa(q, k, v, scale, causal):
    g = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, g, 1), np.repeat(v, g, 1)
    s = (q * scale) @ k.transpose(0, 1, 3, 2)
    if causal:
        lq, lk = s.shape[-2:]
        s = np.where(np.arange(lk)[None] <= (np.arange(lq) + lk - lq)[:, None], s,
                     np.finfo(np.float32).min)
    s = np.exp(s - s.max(-1, keepdims=True))
    return (s / s.sum(-1, keepdims=True)) @ v


def inputs():
    g = np.random.default_rng(0)
    return ({name: tuple(g.random(s, np.float32) - 0.5 for s in (qs, ks, ks))
             for name, (qs, ks, _, _) in CASES.items()},)


def numpy_cases(qkv):
    return {name: (lambda q=qkv[name], m=mode, s=1 / np.sqrt(qs[-1]):
                   numpy_sdpa(*q, s, m == "causal"))
            for name, (qs, _, dt, mode) in CASES.items() if dt == "float32"}


def mlx_cases(mx, qkv):
    out = {}
    for name, (qs, _, dt, mode) in CASES.items():
        mq, mk, mv = (mx.array(x).astype(getattr(mx, dt)) for x in qkv[name])
        mx.eval(mq, mk, mv)
        out[name] = lambda a=(mq, mk, mv), m=mode, s=1 / np.sqrt(qs[-1]): mx.eval(
            mx.fast.scaled_dot_product_attention(*a, scale=s, mask=m))
    return out


def torch_cases(torch, qkv):
    F = torch.nn.functional
    out = {}
    for name, (qs, ks, dt, mode) in CASES.items():
        tq, tk, tv = (torch.from_numpy(x).to(getattr(torch, dt)) for x in qkv[name])
        out[name] = lambda a=(tq, tk, tv), m=mode, s=float(1 / np.sqrt(qs[-1])), gqa=qs[1] != ks[1]: \
            F.scaled_dot_product_attention(*a, is_causal=m == "causal", scale=s, enable_gqa=gqa)
    return out


def peer_times(peer, cases):
    """{case: seconds} of one peer, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, inputs(), numpy_cases, mlx_cases, torch_cases)
    if fns is None:
        return None
    return {k: median_time(f, repeat=5) for k, f in fns.items() if not cases or k in cases}


def main():
    c = run_c("bench_fast_sdpa")
    peers = peer_results(os.path.abspath(__file__), PEERS)
    rows = [(k, c.get(k), {p: t[k] for p, t in peers.items() if k in t}) for k in CASES]
    report("scaled_dot_product_attention (CPU)", rows, PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
