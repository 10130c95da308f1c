"""paged_attention on the CPU beside NumPy's composition of the same op (the keys gathered
through the block table, then softmax(q kᵀ) v), and MLX's CPU SDPA and PyTorch's
F.scaled_dot_product_attention over the same keys laid out contiguously (neither has paged
attention; their rows need no gather), each library (nuvec too) in a process of its own
(bench/README.md): a decode step of 8 sequences x 32 heads x 1024 keys of 128 float32 features
in blocks of 16, and a chunk of 64 prefill tokens of one sequence over 2048 keys. Ratios are
peer time / nuvec time (> 1: nuvec faster)."""
import os

import numpy as np

from benchlib import compare, median_time, mlx_core, nuvec_module, serve_peer, torch_cpu

SHAPES = [("paged_decode_s8h32L1024d128_f32", (8, 1, 32, 1024, 128, 16)),
          ("paged_chunk64_h32L2048d128_f32", (1, 64, 32, 2048, 128, 16))]
PEERS = ["numpy", "mlx", "torch"]


def case(rng, S, c, H, L, D, BS):
    M = L // BS
    perm = rng.permutation(S * M).astype(np.int32)
    tables = perm.reshape(S, M)
    kp = rng.standard_normal((S * M, BS, H, D)).astype(np.float32)
    vp = rng.standard_normal((S * M, BS, H, D)).astype(np.float32)
    q = rng.standard_normal((S * c, H, D)).astype(np.float32)
    return q, kp, vp, tables, np.full(S, L, np.int32)


def runner(peer, lib, shape, q, kp, vp, tables, lens):
    S, c, H, L, D, BS = shape
    scale = D ** -0.5
    j = np.arange(L)
    slots = tables[:, j // BS] * BS + j % BS  # [S, L]
    if peer == "numpy":
        keep = j[None, :] <= (L - c + np.arange(c))[:, None]  # [c, L]

        def np_paged():
            k = kp.reshape(-1, H, D)[slots].transpose(0, 2, 1, 3)  # [S, H, L, D]
            v = vp.reshape(-1, H, D)[slots].transpose(0, 2, 1, 3)
            qq = q.reshape(S, c, H, D).transpose(0, 2, 1, 3)
            s = np.where(keep, scale * (qq @ k.transpose(0, 1, 3, 2)), -np.inf)
            e = np.exp(s - s.max(-1, keepdims=True))
            return (e / e.sum(-1, keepdims=True)) @ v

        return np_paged
    if peer == "nuvec":
        args = [lib.array(x) for x in (q, kp, vp, tables, lens)]
        lib.eval(*args)
        return lambda: lib.eval(lib.fast.paged_attention(*args, scale))
    qc = np.ascontiguousarray(q.reshape(S, c, H, D).transpose(0, 2, 1, 3))
    kc = np.ascontiguousarray(kp.reshape(-1, H, D)[slots].transpose(0, 2, 1, 3))
    vc = np.ascontiguousarray(vp.reshape(-1, H, D)[slots].transpose(0, 2, 1, 3))
    if peer == "torch":
        tq, tk, tv = (lib.from_numpy(x) for x in (qc, kc, vc))
        mask = None
        if c > 1:  # the chunk's queries are the last c positions: bottom-right causal
            mask = lib.from_numpy(j[None, :] <= (L - c + np.arange(c))[:, None])
        return lambda: lib.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=mask,
                                                                      scale=scale)
    qm, km, vm = lib.array(qc), lib.array(kc), lib.array(vc)
    lib.eval(qm, km, vm)
    mask = "causal" if c > 1 else None
    return lambda: lib.eval(lib.fast.scaled_dot_product_attention(qm, km, vm, scale=scale,
                                                                  mask=mask))


def peer_times(peer, cases):
    """{case: seconds} of one library, in its own process (benchlib.serve_peer)."""
    lib = {"numpy": lambda: np, "mlx": mlx_core, "torch": torch_cpu, "nuvec": nuvec_module}[peer]()
    if lib is None:
        return None
    rng = np.random.default_rng(0)
    out = {}
    for name, shape in SHAPES:
        data = case(rng, *shape)
        if not cases or name in cases:
            out[name] = median_time(runner(peer, lib, shape, *data), repeat=5)
    return out


if __name__ == "__main__":
    if not serve_peer(peer_times):
        compare(os.path.abspath(__file__), "paged attention (ratio = peer time / nuvec time)",
                [s[0] for s in SHAPES], PEERS)
