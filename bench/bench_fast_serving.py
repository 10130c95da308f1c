"""The serving kernels on the CPU beside NumPy's composition of the same op and MLX's CPU build
(where it installs; MLX has none of these ops, so its row is the same composition in mlx.core):
causal_softmax of 16 x 1024 x 1024 float32 scores (rows = 1024: prefill's causal mask),
paged_write of 256 tokens' float16 keys (8 heads x 128) into a pool of 4096 blocks of 16 slots
(in place: the pool is donated each step, as a serving loop rebinds it), and sorted_offsets of
2^20 sorted ids into 256 groups. Ratios are peer time / nuvec time (> 1: nuvec faster)."""
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

    x = rng.standard_normal((16, 1024, 1024)).astype(np.float32)
    seen = np.tril(np.ones((1024, 1024), bool))
    xn = nv.array(x)
    nv.eval(xn)

    def np_causal():
        v = np.where(seen, x, -np.inf)
        e = np.exp(v - v.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    peers = {"numpy": median_time(np_causal, repeat=5)}
    if mx is not None:
        xm, sm = mx.array(x), mx.array(seen)
        mx.eval(xm, sm)
        peers["mlx"] = median_time(
            lambda: mx.eval(mx.softmax(mx.where(sm, xm, -float("inf")), axis=-1)), repeat=5)
    t = median_time(lambda: nv.eval(nv.fast.causal_softmax(xn, 1024)), repeat=5)
    rows.append(("causal_softmax_16x1024x1024_f32", t, peers))

    pool = np.zeros((4096, 16, 8, 128), np.float16)
    vals = rng.standard_normal((256, 8, 128)).astype(np.float16)
    slots = rng.permutation(4096 * 16)[:256].astype(np.int32)
    flat = pool.reshape(-1, 8, 128)

    def np_write():
        flat[slots] = vals

    peers = {"numpy": median_time(np_write, repeat=11)}
    state = {"pool": nv.array(pool)}
    vn, sn = nv.array(vals), nv.array(slots)
    nv.eval(state["pool"], vn, sn)

    def nv_write():
        state["pool"] = nv.fast.paged_write(state["pool"], vn, sn)  # the old pool is donated
        nv.eval(state["pool"])

    t = median_time(nv_write, repeat=11)
    rows.append(("paged_write_256tok_4096x16x8x128_f16", t, peers))

    ids = np.sort(rng.integers(0, 256, 1 << 20)).astype(np.int32)
    ids_n, groups = nv.array(ids), np.arange(257)
    nv.eval(ids_n)
    peers = {"numpy": median_time(lambda: np.searchsorted(ids, groups), repeat=21)}
    t = median_time(lambda: nv.eval(nv.fast.sorted_offsets(ids_n, 256)), repeat=21)
    rows.append(("sorted_offsets_2^20_ids_256_groups", t, peers))
    report("fast serving kernels (ratio = peer time / nuvec time)", rows, ["numpy", "mlx"])


if __name__ == "__main__":
    main()
