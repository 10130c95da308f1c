"""paged_attention on the CPU beside NumPy's composition of the same op (the keys gathered
through the block table, then softmax(q kᵀ) v) and MLX's CPU SDPA over the same keys laid out
contiguously (MLX has no paged attention; its row needs no gather): a decode step of 8
sequences x 32 heads x 1024 keys of 128 float32 features in blocks of 16, and a chunk of 64
prefill tokens of one sequence over 2048 keys. Ratios are peer time / nuvec time (> 1: nuvec
faster)."""
import os
import sys

import numpy as np

from benchlib import median_time, mlx_core, report

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.environ.get("NUVEC_BUILD", os.path.join(_here, "..", "build")),
                                "python"))
import nuvec as nv  # noqa: E402
import nuvec.fast  # noqa: E402,F401


def case(rng, S, c, H, L, D, BS):
    M = L // BS
    perm = rng.permutation(S * M).astype(np.int32)
    tables = perm.reshape(S, M)
    kp = rng.standard_normal((S * M, BS, H, D)).astype(np.float32)
    vp = rng.standard_normal((S * M, BS, H, D)).astype(np.float32)
    q = rng.standard_normal((S * c, H, D)).astype(np.float32)
    return q, kp, vp, tables, np.full(S, L, np.int32)


def main():
    rng = np.random.default_rng(0)
    mx = mlx_core()
    rows = []
    shapes = [("paged_decode_s8h32L1024d128_f32", (8, 1, 32, 1024, 128, 16)),
              ("paged_chunk64_h32L2048d128_f32", (1, 64, 32, 2048, 128, 16))]
    for name, (S, c, H, L, D, BS) in shapes:
        q, kp, vp, tables, lens = case(rng, S, c, H, L, D, BS)
        scale = D ** -0.5
        j = np.arange(L)
        slots = tables[:, j // BS] * BS + j % BS  # [S, L]
        keep = j[None, :] <= (L - c + np.arange(c))[:, None]  # [c, L]

        def np_paged():
            k = kp.reshape(-1, H, D)[slots].transpose(0, 2, 1, 3)  # [S, H, L, D]
            v = vp.reshape(-1, H, D)[slots].transpose(0, 2, 1, 3)
            qq = q.reshape(S, c, H, D).transpose(0, 2, 1, 3)
            s = np.where(keep, scale * (qq @ k.transpose(0, 1, 3, 2)), -np.inf)
            e = np.exp(s - s.max(-1, keepdims=True))
            return (e / e.sum(-1, keepdims=True)) @ v

        peers = {"numpy": median_time(np_paged, repeat=5)}
        if mx is not None:
            kc = kp.reshape(-1, H, D)[slots].transpose(0, 2, 1, 3)
            vc = vp.reshape(-1, H, D)[slots].transpose(0, 2, 1, 3)
            qm = mx.array(q.reshape(S, c, H, D).transpose(0, 2, 1, 3))
            km, vm = mx.array(kc), mx.array(vc)
            mx.eval(qm, km, vm)
            mask = "causal" if c > 1 else None
            peers["mlx"] = median_time(lambda: mx.eval(mx.fast.scaled_dot_product_attention(
                qm, km, vm, scale=scale, mask=mask)), repeat=5)
        args = [nv.array(x) for x in (q, kp, vp, tables, lens)]
        nv.eval(*args)
        t = median_time(lambda: nv.eval(nv.fast.paged_attention(*args, scale)), repeat=5)
        rows.append((name, t, peers))
    report("paged attention (ratio = peer time / nuvec time)", rows, ["numpy", "mlx"])


if __name__ == "__main__":
    main()
