"""The fast family beside NumPy (its composition of the same formula) and MLX's CPU build
(mx.fast, where it installs), same sizes in the same run: rms_norm and layer_norm with weight
(and bias) over the rows of 4096x4096 float32, rope of (1, 32, 2048, 128) float32."""
import numpy as np

from benchlib import median_time, mlx_core, report, run_c


def main():
    c = run_c("bench_fast")
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (4096, 4096)).astype(np.float32)
    w = rng.uniform(-1, 1, 4096).astype(np.float32)
    b = rng.uniform(-1, 1, 4096).astype(np.float32)
    q = rng.uniform(-1, 1, (1, 32, 2048, 128)).astype(np.float32)
    inv = (10000.0 ** (-np.arange(64) * 2.0 / 128)).astype(np.float32)
    th = (np.arange(2048, dtype=np.float32) + 5)[:, None] * inv
    cos, sin = np.cos(th), np.sin(th)

    def np_rms():
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w

    def np_layer():
        xc = x - x.mean(-1, keepdims=True)
        return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + 1e-5) * w + b

    def np_rope():
        a, bb = q[..., :64], q[..., 64:]
        return np.concatenate([a * cos - bb * sin, a * sin + bb * cos], -1)

    cases = [("rms_norm_4096x4096_f32", np_rms), ("layer_norm_4096x4096_f32", np_layer),
             ("rope_1x32x2048x128_f32", np_rope)]
    mx = mlx_core()
    if mx:
        mxx, mw, mb, mq = mx.array(x), mx.array(w), mx.array(b), mx.array(q)
        mx.eval(mxx, mw, mb, mq)
        mlx_fns = {
            "rms_norm_4096x4096_f32": lambda: mx.eval(mx.fast.rms_norm(mxx, mw, 1e-5)),
            "layer_norm_4096x4096_f32": lambda: mx.eval(mx.fast.layer_norm(mxx, mw, mb, 1e-5)),
            "rope_1x32x2048x128_f32": lambda: mx.eval(mx.fast.rope(
                mq, 128, traditional=False, base=10000.0, scale=1.0, offset=5)),
        }
    rows = []
    for name, fn in cases:
        peers = {"numpy": median_time(fn, repeat=11)}
        if mx:
            peers["mlx"] = median_time(mlx_fns[name], repeat=11)
        rows.append((name, c.get(name), peers))
    report("fast: rms_norm, layer_norm, rope (float32)", rows, ["numpy", "mlx"])


if __name__ == "__main__":
    main()
