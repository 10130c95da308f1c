"""The serving kernels on the CPU beside NumPy's composition of the same op, MLX's CPU build and
PyTorch (where they install; neither has these ops, so their rows are the same compositions in
their own operators), each library (nuvec too) in a process of its own (bench/README.md):
causal_softmax of 16 x 1024 x 1024 float32 scores (rows = 1024: prefill's causal mask),
paged_write of 256 tokens' float16 keys (8 heads x 128) into a pool of 4096 blocks of 16 slots
(in place: the pool is donated each step, as a serving loop rebinds it; PyTorch writes in
place), and sorted_offsets of 2^20 sorted ids into 256 groups (searchsorted). Ratios are peer
time / nuvec time (> 1: nuvec faster)."""
import os

import numpy as np

from benchlib import compare, median_time, peer_case_fns, serve_peer

CASES = ["causal_softmax_16x1024x1024_f32", "paged_write_256tok_4096x16x8x128_f16",
         "sorted_offsets_2^20_ids_256_groups"]
REPEAT = dict(zip(CASES, [5, 11, 21]))
PEERS = ["numpy", "mlx", "torch"]


def inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 1024, 1024)).astype(np.float32)
    seen = np.tril(np.ones((1024, 1024), bool))
    pool = np.zeros((4096, 16, 8, 128), np.float16)
    vals = rng.standard_normal((256, 8, 128)).astype(np.float16)
    slots = rng.permutation(4096 * 16)[:256].astype(np.int32)
    ids = np.sort(rng.integers(0, 256, 1 << 20)).astype(np.int32)
    return x, seen, pool, vals, slots, ids


def numpy_cases(x, seen, pool, vals, slots, ids):
    flat = pool.reshape(-1, 8, 128)
    groups = np.arange(257)

    def causal():
        v = np.where(seen, x, -np.inf)
        e = np.exp(v - v.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def write():
        flat[slots] = vals

    return dict(zip(CASES, [causal, write, lambda: np.searchsorted(ids, groups)]))


def mlx_cases(mx, x, seen, pool, vals, slots, ids):
    xm, sm = mx.array(x), mx.array(seen)
    mx.eval(xm, sm)
    return {CASES[0]: lambda: mx.eval(mx.softmax(mx.where(sm, xm, -float("inf")), axis=-1))}


def torch_cases(torch, x, seen, pool, vals, slots, ids):
    tx, ts = torch.from_numpy(x), torch.from_numpy(seen)
    flat = torch.from_numpy(pool).view(-1, 8, 128)
    tv, tsl = torch.from_numpy(vals), torch.from_numpy(slots).long()
    tids, groups = torch.from_numpy(ids), torch.arange(257, dtype=torch.int32)
    return dict(zip(CASES, [lambda: torch.softmax(torch.where(ts, tx, -float("inf")), -1),
                            lambda: flat.index_copy_(0, tsl, tv),
                            lambda: torch.searchsorted(tids, groups)]))


def nuvec_cases(nv, x, seen, pool, vals, slots, ids):
    xn = nv.array(x)
    state = {"pool": nv.array(pool)}
    vn, sn, ids_n = nv.array(vals), nv.array(slots), nv.array(ids)
    nv.eval(xn, state["pool"], vn, sn, ids_n)

    def write():
        state["pool"] = nv.fast.paged_write(state["pool"], vn, sn)  # the old pool is donated
        nv.eval(state["pool"])

    return dict(zip(CASES, [lambda: nv.eval(nv.fast.causal_softmax(xn, 1024)), write,
                            lambda: nv.eval(nv.fast.sorted_offsets(ids_n, 256))]))


def peer_times(peer, cases):
    """{case: seconds} of one library, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, inputs(), numpy_cases, mlx_cases, torch_cases, nuvec_cases)
    if fns is None:
        return None
    return {k: median_time(f, repeat=REPEAT[k]) for k, f in fns.items() if not cases or k in cases}


if __name__ == "__main__":
    if not serve_peer(peer_times):
        compare(os.path.abspath(__file__), "fast serving kernels (ratio = peer time / nuvec time)",
                CASES, PEERS)
