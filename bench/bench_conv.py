"""Convolutions on the CPU beside MLX's CPU build (where it installs) and NumPy: conv2d of a
ResNet layer (8 × 56 × 56 × 64, 3 × 3 × 64, padding 1), a strided one (stride 2, 128 out
channels), a depthwise 3 × 3 one (groups = channels) and a 1-D one, float32, channels last,
through the Python module (graph building and evaluation included). NumPy has no
convolution: its peer is the direct loop over the kernel's taps, each a tensordot of the
shifted input with the tap's weights (the usual NumPy formulation). Ratios are peer time /
nuvec time (> 1: nuvec faster)."""
import os
import sys

import numpy as np

from benchlib import BUILD, median_time, mlx_core, report

sys.path.insert(0, os.path.join(BUILD, "python"))
import nuvec as nv  # noqa: E402

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


def main():
    mx = mlx_core()
    rng = np.random.default_rng(0)
    rows = []
    for name, xs, ws, stride, pad, groups, rep in CASES:
        x = rng.standard_normal(xs).astype(np.float32)
        w = (rng.standard_normal(ws) * 0.1).astype(np.float32)
        f = nv.conv1d if len(xs) == 3 else nv.conv2d
        a, b = nv.array(x), nv.array(w)
        nv.eval(a, b)
        t = median_time(lambda: nv.eval(f(a, b, stride, pad, 1, groups)), repeat=rep)
        peers = {"numpy": median_time(lambda: numpy_conv(x, w, stride, pad, groups),
                                      repeat=max(1, rep // 2))}
        if mx is not None:
            g = mx.conv1d if len(xs) == 3 else mx.conv2d
            ma, mb = mx.array(x), mx.array(w)
            mx.eval(ma, mb)
            peers["mlx"] = median_time(lambda: mx.eval(g(ma, mb, stride, pad, 1, groups)),
                                       repeat=rep)
        rows.append((name, t, peers))
    report("convolutions, float32 channels last (ratio = peer time / nuvec time)", rows,
           ["numpy", "mlx"])


if __name__ == "__main__":
    main()
