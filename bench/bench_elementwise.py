"""Element-wise throughput beside NumPy, MLX's CPU build and PyTorch (where they install): x*y+z
on 2^26 float32, and sigmoid, tanh, exp, log, log1p, expm1, erf, relu and GELU on 2^24 float32
(log and log1p on |x|). The gelu_*_2^24 rows are nuvec's composed forms, the *_fused rows its
fused ops (nv_gelu, nv_gelu_approx, nv_gelu_fast_approx) beside the peers' same formulas
(PyTorch's F.gelu, erf and tanh, and x * sigmoid(1.702 x)). NumPy has no erf: those rows
compare with MLX and PyTorch only. Each peer runs in a process of its own (bench/README.md)."""
import os

import numpy as np

from benchlib import median_time, peer_case_fns, peer_results, report, run_c, serve_peer

C_GELU = 0.7978845608028654
CASES = ["xy_plus_z_2^26", "sigmoid_2^24", "tanh_2^24", "exp_2^24", "gelu_tanh_2^24", "log_2^24",
         "log1p_2^24", "expm1_2^24", "erf_2^24", "gelu_erf_2^24", "relu_2^24", "gelu_fused_2^24",
         "gelu_approx_fused_2^24", "gelu_fast_fused_2^24"]
PEERS = ["numpy", "mlx", "torch"]


def inputs():
    rng = np.random.default_rng(0)
    x, y, z = (rng.uniform(-4, 4, 1 << 26).astype(np.float32) for _ in range(3))
    a = rng.uniform(-4, 4, 1 << 24).astype(np.float32)
    return x, y, z, a, np.abs(a)


def numpy_cases(x, y, z, a, b):
    c = np.float32(C_GELU)

    def gelu(v):
        return np.float32(0.5) * v * (np.float32(1) + np.tanh(c * (v + np.float32(0.044715) * v**3)))

    return {
        "xy_plus_z_2^26": lambda: x * y + z,
        "sigmoid_2^24": lambda: 1 / (1 + np.exp(-a)),
        "tanh_2^24": lambda: np.tanh(a),
        "exp_2^24": lambda: np.exp(a),
        "gelu_tanh_2^24": lambda: gelu(a),
        "log_2^24": lambda: np.log(b),
        "log1p_2^24": lambda: np.log1p(b),
        "expm1_2^24": lambda: np.expm1(a),
        "relu_2^24": lambda: np.maximum(a, np.float32(0)),
        "gelu_approx_fused_2^24": lambda: gelu(a),
        "gelu_fast_fused_2^24": lambda: a / (1 + np.exp(np.float32(-1.702) * a)),
    }


def mlx_cases(mx, x, y, z, a, b):
    mx_x, mx_y, mx_z, ma, mb = (mx.array(v) for v in (x, y, z, a, b))
    mx.eval(mx_x, mx_y, mx_z, ma, mb)

    def gelu(v):
        return 0.5 * v * (1 + mx.tanh(C_GELU * (v + 0.044715 * v**3)))

    return {
        "xy_plus_z_2^26": lambda: mx.eval(mx_x * mx_y + mx_z),
        "sigmoid_2^24": lambda: mx.eval(mx.sigmoid(ma)),
        "tanh_2^24": lambda: mx.eval(mx.tanh(ma)),
        "exp_2^24": lambda: mx.eval(mx.exp(ma)),
        "gelu_tanh_2^24": lambda: mx.eval(gelu(ma)),
        "log_2^24": lambda: mx.eval(mx.log(mb)),
        "log1p_2^24": lambda: mx.eval(mx.log1p(mb)),
        "expm1_2^24": lambda: mx.eval(mx.expm1(ma)),
        "erf_2^24": lambda: mx.eval(mx.erf(ma)),
        "gelu_erf_2^24": lambda: mx.eval(0.5 * ma * (1 + mx.erf(ma * 0.7071067811865476))),
        "relu_2^24": lambda: mx.eval(mx.maximum(ma, 0)),
        "gelu_fused_2^24": lambda: mx.eval(0.5 * ma * (1 + mx.erf(ma * 0.7071067811865476))),
        "gelu_approx_fused_2^24": lambda: mx.eval(gelu(ma)),
        "gelu_fast_fused_2^24": lambda: mx.eval(ma * mx.sigmoid(1.702 * ma)),
    }


def torch_cases(torch, x, y, z, a, b):
    tx, ty, tz, ta, tb = (torch.from_numpy(v) for v in (x, y, z, a, b))
    F = torch.nn.functional
    return {
        "xy_plus_z_2^26": lambda: tx * ty + tz,
        "sigmoid_2^24": lambda: torch.sigmoid(ta),
        "tanh_2^24": lambda: torch.tanh(ta),
        "exp_2^24": lambda: torch.exp(ta),
        "gelu_tanh_2^24": lambda: F.gelu(ta, approximate="tanh"),
        "log_2^24": lambda: torch.log(tb),
        "log1p_2^24": lambda: torch.log1p(tb),
        "expm1_2^24": lambda: torch.expm1(ta),
        "erf_2^24": lambda: torch.erf(ta),
        "gelu_erf_2^24": lambda: F.gelu(ta),
        "relu_2^24": lambda: torch.relu(ta),
        "gelu_fused_2^24": lambda: F.gelu(ta),
        "gelu_approx_fused_2^24": lambda: F.gelu(ta, approximate="tanh"),
        "gelu_fast_fused_2^24": lambda: ta * torch.sigmoid(1.702 * ta),
    }


def peer_times(peer, cases):
    """{case: seconds} of one peer, in its own process (benchlib.serve_peer)."""
    fns = peer_case_fns(peer, inputs(), numpy_cases, mlx_cases, torch_cases)
    if fns is None:
        return None
    return {k: median_time(f, repeat=9 if k.endswith("2^26") else 11)
            for k, f in fns.items() if not cases or k in cases}


def main():
    c = run_c("bench_elementwise")
    peers = peer_results(os.path.abspath(__file__), PEERS)
    rows = [(k, c.get(k), {p: t[k] for p, t in peers.items() if k in t}) for k in CASES]
    report("element-wise (float32; ratio = peer time / nuvec time)", rows, PEERS)


if __name__ == "__main__":
    if not serve_peer(peer_times):
        main()
