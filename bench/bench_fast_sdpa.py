"""scaled_dot_product_attention on the CPU beside the NumPy composition (float32 matmuls and a
softmax, the L x L scores in memory) and MLX's CPU build (mx.fast.scaled_dot_product_attention),
on the cases of bench_fast_sdpa.c: causal and unmasked prefill (b1 h8 L1024 d64), a grouped-query
decode step over 4096 keys, bfloat16 causal prefill (MLX only: NumPy has no bfloat16)."""
import numpy as np

from benchlib import median_time, mlx_core, report, run_c

CASES = {
    "sdpa_causal_b1h8L1024d64_f32": ((1, 8, 1024, 64), (1, 8, 1024, 64), "float32", "causal"),
    "sdpa_b1h8L1024d64_f32": ((1, 8, 1024, 64), (1, 8, 1024, 64), "float32", None),
    "sdpa_decode_h32kv8L4096d128_f32": ((1, 32, 1, 128), (1, 8, 4096, 128), "float32", None),
    "sdpa_causal_b1h8L1024d64_bf16": ((1, 8, 1024, 64), (1, 8, 1024, 64), "bfloat16", "causal"),
}


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


def main():
    c = run_c("bench_fast_sdpa")
    mx = mlx_core()
    g = np.random.default_rng(0)
    rows = []
    for name, (qs, ks, dt, mode) in CASES.items():
        q, k, v = (g.random(s, np.float32) - 0.5 for s in (qs, ks, ks))
        scale = 1 / np.sqrt(qs[-1])
        t_np = None
        if dt == "float32":
            t_np = median_time(lambda: numpy_sdpa(q, k, v, scale, mode == "causal"), repeat=5)
        t_mx = None
        if mx:
            mq, mk, mv = (mx.array(x).astype(getattr(mx, dt)) for x in (q, k, v))
            mx.eval(mq, mk, mv)
            f = lambda: mx.eval(mx.fast.scaled_dot_product_attention(mq, mk, mv, scale=scale,
                                                                      mask=mode))
            t_mx = median_time(f, repeat=5)
        rows.append((name, c.get(name), {"numpy": t_np, "mlx": t_mx}))
    report("scaled_dot_product_attention (CPU)", rows, ["numpy", "mlx"])


if __name__ == "__main__":
    main()
