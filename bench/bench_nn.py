"""src/nn beside MLX's CPU build (mlx.optimizers) and NumPy re-implementations of the same
formulas, in one run: an AdamW and an SGD-with-momentum step (update, then evaluate the new
parameters and the state) and clip_grad_norm, on four 512x512 weights with biases (1M
parameters) and on 100 small parameters (per-call overhead)."""
import numpy as np

from benchlib import median_time, mlx_core, report, run_c

SETS = {"4x512x512": (4, 512, 512), "100x64": (100, 1, 64)}


def arrays(n, rows, cols):
    g = np.random.default_rng(0)
    p, gr = {}, {}
    for i in range(n):
        p[f"layers.{i}.weight"] = (g.random((rows, cols), np.float32) - 0.5) * 0.1
        gr[f"layers.{i}.weight"] = (g.random((rows, cols), np.float32) - 0.5) * 0.01
        p[f"layers.{i}.bias"] = (g.random((1, cols), np.float32) - 0.5) * 0.1
        gr[f"layers.{i}.bias"] = (g.random((1, cols), np.float32) - 0.5) * 0.01
    return p, gr


def numpy_cases(p, gr):
    st = {"m": {k: np.zeros_like(v) for k, v in p.items()},
          "v": {k: np.zeros_like(v) for k, v in p.items()},
          "mom": {k: np.zeros_like(v) for k, v in p.items()}}
    f = np.float32

    def adamw():
        lr = f(1e-3)
        for k, g in gr.items():
            w = p[k] * (f(1) - lr * f(0.01))
            m = f(0.9) * st["m"][k] + f(0.1) * g
            v = f(0.999) * st["v"][k] + f(0.001) * g * g
            st["m"][k], st["v"][k] = m, v
            p[k] = w - lr * m / (np.sqrt(v) + f(1e-8))

    def sgd():
        for k, g in gr.items():
            v = f(0.9) * st["mom"][k] + g
            st["mom"][k] = v
            p[k] = p[k] - f(1e-2) * v

    def clip():
        norm = np.sqrt(sum(np.sum(g * g) for g in gr.values()))
        s = min(0.5 / (norm + 1e-6), 1.0)
        return {k: (g * f(s)) for k, g in gr.items()}

    return adamw, sgd, clip


def mlx_cases(mx, p, gr):
    import mlx.optimizers as optim

    mp = {k: mx.array(v) for k, v in p.items()}
    mg = {k: mx.array(v) for k, v in gr.items()}
    mx.eval(mp, mg)
    state = {"p": mp}

    def stepper(opt):
        def f():
            state["p"] = opt.apply_gradients(mg, state["p"])
            mx.eval(state["p"], opt.state)
        return f

    def clip():
        c, n = optim.clip_grad_norm(mg, 0.5)
        mx.eval(c, n)

    return (stepper(optim.AdamW(1e-3)), stepper(optim.SGD(1e-2, momentum=0.9)), clip)


def main():
    c = run_c("bench_nn")
    mx = mlx_core()
    rows = []
    for suffix, dims in SETS.items():
        p, gr = arrays(*dims)
        npc = numpy_cases(dict(p), gr)
        mxc = mlx_cases(mx, p, gr) if mx else (None, None, None)
        for i, name in enumerate(["adamw_step", "sgd_momentum_step", "clip_grad_norm"]):
            case = f"{name}_{suffix}"
            if case not in c:
                continue
            peers = {"numpy": median_time(npc[i], repeat=15, warmup=3)}
            if mxc[i]:
                peers["mlx"] = median_time(mxc[i], repeat=15, warmup=3)
            rows.append((case, c[case], peers))
    report("nn: optimizer steps and clip_grad_norm (float32)", rows, ["numpy", "mlx"])


if __name__ == "__main__":
    main()
