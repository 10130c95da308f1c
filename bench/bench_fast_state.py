"""norm_rope and gated_delta_slots on the CPU beside NumPy's composition of the same op and MLX's
CPU build (where it installs; MLX has neither op, so its rows are the compositions the models
write in mlx.core: mx.fast.rms_norm then mx.fast.rope, and the delta rule's step in mlx ops):
norm_rope of 4096 tokens x 32 heads x 128 float32 (a prefill's q), and one decode step of
gated_delta_slots for 16 sequences x 16 heads of 128 x 128 float32 states (the pool donated each
step, as a serving loop rebinds it). Ratios are peer time / nuvec time (> 1: nuvec faster)."""
import os
import sys

import numpy as np

from benchlib import median_time, mlx_core, report

_here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.environ.get("NUVEC_BUILD", os.path.join(_here, "..", "build")),
                                "python"))
import nuvec as nv  # noqa: E402
import nuvec.fast  # noqa: E402,F401


def main():
    rng = np.random.default_rng(0)
    mx = mlx_core()
    rows = []

    t_, h_, d = 4096, 32, 128
    x = rng.standard_normal((t_, h_, d)).astype(np.float32)
    w = rng.standard_normal(d).astype(np.float32)
    pos = np.arange(t_, dtype=np.int32)
    th = pos[:, None, None] * 10000.0 ** (-np.arange(64) / 64)
    cos, sin = np.cos(th).astype(np.float32), np.sin(th).astype(np.float32)

    def np_norm_rope():
        n = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w
        a, b = n[..., :64], n[..., 64:]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], -1)

    peers = {"numpy": median_time(np_norm_rope, repeat=5)}
    if mx is not None:
        xm, wm = mx.array(x.reshape(t_, h_, 1, d)), mx.array(w)
        mx.eval(xm, wm)
        # MLX's rope takes one offset a batch: every token its own batch of one position
        offs = mx.array(pos)
        peers["mlx"] = median_time(lambda: mx.eval(mx.fast.rope(
            mx.fast.rms_norm(xm, wm, 1e-6), d, traditional=False, base=10000.0, scale=1.0,
            offset=offs)), repeat=5)
    xn, wn, pn = nv.array(x), nv.array(w), nv.array(pos)
    nv.eval(xn, wn, pn)
    t = median_time(lambda: nv.eval(nv.fast.norm_rope(xn, wn, 1e-6, d, pn, base=10000.0)),
                    repeat=5)
    rows.append(("norm_rope_4096x32x128_f32", t, peers))

    n, h, k = 16, 16, 128
    q = rng.standard_normal((n, 1, h, k)).astype(np.float32)
    kk = (rng.standard_normal((n, 1, h, k)) * 0.1).astype(np.float32)
    v = rng.standard_normal((n, 1, h, k)).astype(np.float32)
    g = -rng.uniform(0, 0.1, (n, 1, h)).astype(np.float32)
    beta = rng.uniform(0, 1, (n, 1, h)).astype(np.float32)
    pool = rng.standard_normal((n, h, k, k)).astype(np.float32)
    st = pool.copy()

    def np_delta():
        st[...] *= np.exp(g[:, 0])[..., None, None]
        u = (v[:, 0] - np.einsum("nhkv,nhk->nhv", st, kk[:, 0])) * beta[:, 0][..., None]
        st[...] += kk[:, 0][..., :, None] * u[..., None, :]
        return np.einsum("nhkv,nhk->nhv", st, q[:, 0])

    peers = {"numpy": median_time(np_delta, repeat=11)}
    if mx is not None:
        qm, km, vm, gm, bm = (mx.array(a[:, 0]) for a in (q, kk, v, g, beta))
        ms = {"s": mx.array(pool)}
        mx.eval(qm, km, vm, gm, bm, ms["s"])

        def mx_delta():
            s = ms["s"] * mx.exp(gm)[..., None, None]
            u = (vm - (s * km[..., :, None]).sum(-2)) * bm[..., None]
            ms["s"] = s + km[..., :, None] * u[..., None, :]
            mx.eval(ms["s"], (ms["s"] * qm[..., :, None]).sum(-2))

        peers["mlx"] = median_time(mx_delta, repeat=11)
    args = [nv.array(a) for a in (q, kk, v, g, beta)]
    state = {"pool": nv.array(pool)}
    sl = nv.array(np.arange(n, dtype=np.int32))
    nv.eval(*args, state["pool"], sl)

    def nv_delta():
        o, state["pool"] = nv.fast.gated_delta_slots(*args, state["pool"], sl)  # donated
        nv.eval(o, state["pool"])

    t = median_time(nv_delta, repeat=11)
    rows.append(("gated_delta_decode_16x16x128x128_f32", t, peers))
    report("norm_rope and gated_delta_slots (ratio = peer time / nuvec time)", rows,
           ["numpy", "mlx"])


if __name__ == "__main__":
    main()
