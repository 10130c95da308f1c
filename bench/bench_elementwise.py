"""Element-wise throughput beside NumPy, MLX's CPU build and PyTorch (CPU) where they install:
x*y+z on 2^26 float32, and sigmoid, tanh, exp, log, log1p, expm1, erf, relu and GELU on 2^24
float32 (log and log1p on |x|). The gelu_*_2^24 rows are nuvec's composed forms, the *_fused rows
its fused ops (nv_gelu, nv_gelu_approx, nv_gelu_fast_approx); torch's rows are F.gelu (erf and
tanh) and x * sigmoid(1.702 x). NumPy has no erf: those rows compare with MLX and torch only.
PyTorch runs in a child process (its OpenMP pool spins after each op, on the cores nuvec is
timed on), with OMP_WAIT_POLICY=PASSIVE."""
import json
import os
import subprocess
import sys
import numpy as np

from benchlib import median_time, mlx_core, report, run_c

C_GELU = np.float32(0.7978845608028654)


def np_gelu(x):
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(C_GELU * (x + np.float32(0.044715) * x**3)))


def main():
    c = run_c("bench_elementwise")
    rng = np.random.default_rng(0)
    x, y, z = (rng.uniform(-4, 4, 1 << 26).astype(np.float32) for _ in range(3))
    a = rng.uniform(-4, 4, 1 << 24).astype(np.float32)
    b = np.abs(a)
    peers = {
        "xy_plus_z_2^26": {"numpy": median_time(lambda: x * y + z, repeat=9)},
        "sigmoid_2^24": {"numpy": median_time(lambda: 1 / (1 + np.exp(-a)), repeat=11)},
        "tanh_2^24": {"numpy": median_time(lambda: np.tanh(a), repeat=11)},
        "exp_2^24": {"numpy": median_time(lambda: np.exp(a), repeat=11)},
        "gelu_tanh_2^24": {"numpy": median_time(lambda: np_gelu(a), repeat=11)},
        "log_2^24": {"numpy": median_time(lambda: np.log(b), repeat=11)},
        "log1p_2^24": {"numpy": median_time(lambda: np.log1p(b), repeat=11)},
        "expm1_2^24": {"numpy": median_time(lambda: np.expm1(a), repeat=11)},
        "erf_2^24": {},
        "gelu_erf_2^24": {},
        "relu_2^24": {"numpy": median_time(lambda: np.maximum(a, 0), repeat=11)},
    }
    mx = mlx_core()
    if mx:
        mxyz = [mx.array(v) for v in (x, y, z)]
        ma, mb = mx.array(a), mx.array(b)
        mx.eval(*mxyz, ma, mb)

        def mlx_gelu(v):
            return 0.5 * v * (1 + mx.tanh(0.7978845608028654 * (v + 0.044715 * v**3)))

        cases = {
            "xy_plus_z_2^26": lambda: mx.eval(mxyz[0] * mxyz[1] + mxyz[2]),
            "sigmoid_2^24": lambda: mx.eval(mx.sigmoid(ma)),
            "tanh_2^24": lambda: mx.eval(mx.tanh(ma)),
            "exp_2^24": lambda: mx.eval(mx.exp(ma)),
            "gelu_tanh_2^24": lambda: mx.eval(mlx_gelu(ma)),
            "log_2^24": lambda: mx.eval(mx.log(mb)),
            "log1p_2^24": lambda: mx.eval(mx.log1p(mb)),
            "expm1_2^24": lambda: mx.eval(mx.expm1(ma)),
            "erf_2^24": lambda: mx.eval(mx.erf(ma)),
            "gelu_erf_2^24": lambda: mx.eval(0.5 * ma * (1 + mx.erf(ma * 0.7071067811865476))),
        }
        for k, f in cases.items():
            peers[k]["mlx"] = median_time(f, repeat=9)
    for k, v in torch_times().items():
        peers.setdefault(k, {})["torch"] = v
    rows = [(k, c[k], peers.get(k, {})) for k in c if k in peers or k.endswith("fused_2^24")]
    report("element-wise (float32; ratio = peer time / nuvec time)", rows, ["numpy", "mlx", "torch"])


TORCH = r"""
import json, statistics, time
import numpy as np
import torch
import torch.nn.functional as F
def t(f, r=11):
    f()
    ts = []
    for _ in range(r):
        s = time.perf_counter(); f(); ts.append(time.perf_counter() - s)
    return statistics.median(ts)
rng = np.random.default_rng(0)
x, y, z = (torch.from_numpy(rng.uniform(-4, 4, 1 << 26).astype(np.float32)) for _ in range(3))
a = torch.from_numpy(rng.uniform(-4, 4, 1 << 24).astype(np.float32))
b = a.abs()
out = {"xy_plus_z_2^26": t(lambda: x * y + z, 9), "sigmoid_2^24": t(lambda: torch.sigmoid(a)),
       "tanh_2^24": t(lambda: torch.tanh(a)), "exp_2^24": t(lambda: torch.exp(a)),
       "log_2^24": t(lambda: torch.log(b)), "log1p_2^24": t(lambda: torch.log1p(b)),
       "expm1_2^24": t(lambda: torch.expm1(a)), "erf_2^24": t(lambda: torch.erf(a)),
       "relu_2^24": t(lambda: torch.relu(a)),
       "gelu_erf_2^24": t(lambda: F.gelu(a)), "gelu_tanh_2^24": t(lambda: F.gelu(a, approximate="tanh"))}
out["gelu_fused_2^24"] = out["gelu_erf_2^24"]
out["gelu_approx_fused_2^24"] = out["gelu_tanh_2^24"]
out["gelu_fast_fused_2^24"] = t(lambda: a * torch.sigmoid(1.702 * a))
print(json.dumps(out))
"""


def torch_times():
    """PyTorch's times in a child process ({} where torch does not import)."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    r = subprocess.run([sys.executable, "-c", TORCH], capture_output=True, text=True, env=env)
    return json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 and r.stdout.strip() else {}


if __name__ == "__main__":
    main()
