"""Convolutions on the CPU beside MLX's CPU build and PyTorch (where they install) and NumPy, each
library (nuvec too) in a process of its own (bench/README.md): conv2d of a
ResNet layer (8 × 56 × 56 × 64, 3 × 3 × 64, padding 1), a strided one (stride 2, 128 out
channels), a depthwise 3 × 3 one (groups = channels) and a 1-D one, float32, channels last,
through the Python module (graph building and evaluation included). NumPy has no
convolution: its peer is the direct loop over the kernel's taps, each a tensordot of the
shifted input with the tap's weights (the usual NumPy formulation). PyTorch gets the same
channels-last memory as NCHW views (its channels_last layout). Ratios are peer time /
nuvec time (> 1: nuvec faster)."""
import os

import numpy as np

from benchlib import compare, median_time, mlx_core, nuvec_module, serve_peer, torch_cpu

# (case, x shape, w shape, stride, padding, groups, repeats)
CASES = [
    ("conv2d_8x56x56x64_3x3x64", (8, 56, 56, 64), (64, 3, 3, 64), 1, 1, 1, 5),
    ("conv2d_s2_8x56x56x64_3x3x128", (8, 56, 56, 64), (128, 3, 3, 64), 2, 1, 1, 5),
    ("conv2d_depthwise_8x56x56x64", (8, 56, 56, 64), (64, 3, 3, 1), 1, 1, 64, 5),
    ("conv1d_16x1024x128_k5x128", (16, 1024, 128), (128, 5, 128), 1, 2, 1, 5),
]


def numpy_conv(x, w, stride, pad, groups):
    """The direct loop: per tap, the strided window of the padded input contracted with the
    tap's weights (per group)."""
    nsp = x.ndim - 2
    xp = np.pad(x, [(0, 0)] + [(pad, pad)] * nsp + [(0, 0)])
    ks = w.shape[1:-1]
    out_sp = [(xp.shape[1 + a] - ks[a]) // stride + 1 for a in range(nsp)]
    cout, cin_g = w.shape[0], w.shape[-1]
    out = np.zeros([x.shape[0]] + out_sp + [cout], x.dtype)
    cout_g = cout // groups
    for tap in np.ndindex(*ks):
        sl = tuple(slice(t, t + (o - 1) * stride + 1, stride) for t, o in zip(tap, out_sp))
        win = xp[(slice(None),) + sl]
        wk = w[(slice(None),) + tap]
        if groups == 1:
            out += win @ wk.T
        else:
            win = win.reshape(win.shape[:-1] + (groups, cin_g))
            out += np.einsum("...gc,goc->...go", win, wk.reshape(groups, cout_g, cin_g)).reshape(
                out.shape)
    return out


PEERS = ["numpy", "mlx", "torch"]


def case_fn(peer, lib, x, w, stride, pad, groups):
    """The case's function for one library (lib: its module; None for NumPy)."""
    if peer == "numpy":
        return lambda: numpy_conv(x, w, stride, pad, groups)
    if peer == "torch":
        perm = (0, 2, 1) if x.ndim == 3 else (0, 3, 1, 2)
        tx, tw = lib.from_numpy(x).permute(perm), lib.from_numpy(w).permute(perm)
        f = lib.nn.functional.conv1d if x.ndim == 3 else lib.nn.functional.conv2d
        return lambda: f(tx, tw, stride=stride, padding=pad, groups=groups)
    a, b = lib.array(x), lib.array(w)
    lib.eval(a, b)
    f = lib.conv1d if x.ndim == 3 else lib.conv2d
    return lambda: lib.eval(f(a, b, stride, pad, 1, groups))


def peer_times(peer, cases):
    """{case: seconds} of one library, in its own process (benchlib.serve_peer)."""
    lib = {"numpy": np, "mlx": mlx_core, "torch": torch_cpu, "nuvec": nuvec_module}[peer]
    lib = lib if peer == "numpy" else lib()
    if lib is None:
        return None
    rng = np.random.default_rng(0)
    out = {}
    for name, xs, ws, stride, pad, groups, rep in CASES:
        x = rng.standard_normal(xs).astype(np.float32)
        w = (rng.standard_normal(ws) * 0.1).astype(np.float32)
        if cases and name not in cases:
            continue
        fn = case_fn(peer, lib, x, w, stride, pad, groups)
        out[name] = median_time(fn, repeat=max(1, rep // 2) if peer == "numpy" else rep)
    return out


if __name__ == "__main__":
    if not serve_peer(peer_times):
        compare(os.path.abspath(__file__),
                "convolutions, float32 channels last (ratio = peer time / nuvec time)",
                [c[0] for c in CASES], PEERS)
