"""A direct float64 convolution in NumPy with conv_general's semantics (channels last: input
[N, spatial..., C_in], weight [C_out, kernel..., C_in / groups]), the reference of the
convolution tests (tests/python/test_conv.py, python/tests/test_conv.py, tests/gpu)."""
import itertools

import numpy as np


def conv_general(x, w, stride=1, lo=0, hi=0, kdil=1, idil=1, groups=1, flip=False):
    """The convolution in float64: x dilated by idil, padded by lo/hi (negative crops), the
    kernel (flipped when flip) dilated by kdil and strided by stride, per group."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    nsp = x.ndim - 2
    per = lambda v: list(v) if hasattr(v, "__len__") else [v] * nsp
    stride, lo, hi, kdil, idil = map(list, map(per, (stride, lo, hi, kdil, idil)))
    n, cin = x.shape[0], x.shape[-1]
    cout, cin_g = w.shape[0], w.shape[-1]
    assert cin_g * groups == cin
    # Negative paddings remove input elements before the dilation (MLX's rule).
    for a in range(nsp):
        if lo[a] < 0:
            x = np.take(x, range(-lo[a], x.shape[a + 1]), axis=a + 1)
            lo[a] = 0
        if hi[a] < 0:
            x = np.take(x, range(0, max(0, x.shape[a + 1] + hi[a])), axis=a + 1)
            hi[a] = 0
    # Input dilation.
    ishape = [0 if s == 0 else (s - 1) * d + 1 for s, d in zip(x.shape[1:-1], idil)]
    xd = np.zeros([n] + ishape + [cin])
    xd[(slice(None),) + tuple(slice(None, None, d) for d in idil)] = x
    # Padding.
    for a in range(nsp):
        ax = a + 1
        if lo[a] > 0:
            pw = [(0, 0)] * xd.ndim
            pw[ax] = (lo[a], 0)
            xd = np.pad(xd, pw)
        if hi[a] > 0:
            pw = [(0, 0)] * xd.ndim
            pw[ax] = (0, hi[a])
            xd = np.pad(xd, pw)
    if flip:
        w = w[(slice(None),) + (slice(None, None, -1),) * nsp]
    ks = w.shape[1:-1]
    keff = [(k - 1) * d + 1 for k, d in zip(ks, kdil)]
    osz = [(p - e) // s + 1 for p, e, s in zip(xd.shape[1:-1], keff, stride)]
    assert all(o >= 0 for o in osz)
    out = np.zeros([n] + osz + [cout])
    cout_g = cout // groups if groups else 0
    wg = w.reshape((groups, cout_g) + tuple(ks) + (cin_g,))
    for tap in itertools.product(*[range(k) for k in ks]):
        sl = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) if o > 0 else slice(0, 0)
                   for t, d, o, s in zip(tap, kdil, osz, stride))
        xs = xd[(slice(None),) + sl]
        xs = xs.reshape(xs.shape[:-1] + (groups, cin_g))
        wk = wg[(slice(None), slice(None)) + tap]  # [G, C_out/G, C_in/G]
        out += np.einsum("...gc,goc->...go", xs, wk).reshape(out.shape)
    return out


def conv_transpose(x, w, stride=1, padding=0, dilation=1, output_padding=0, groups=1):
    """MLX's transposed convolution through conv_general's arguments."""
    nsp = x.ndim - 2
    per = lambda v: list(v) if hasattr(v, "__len__") else [v] * nsp
    stride, padding, dilation, output_padding = map(per, (stride, padding, dilation,
                                                          output_padding))
    ks = w.shape[1:-1]
    lo = [d * (k - 1) - p for d, k, p in zip(dilation, ks, padding)]
    hi = [l + o for l, o in zip(lo, output_padding)]
    return conv_general(x, w, 1, lo, hi, dilation, stride, groups, True)


def conv_transpose_scatter(x, w, stride=1, padding=0, dilation=1, output_padding=0, groups=1):
    """The transposed convolution by its definition (each input element scatters the kernel
    into the output), independent of conv_general: PyTorch's conv_transpose with MLX's weight
    layout [C_out, kernel..., C_in / groups]."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    nsp = x.ndim - 2
    per = lambda v: list(v) if hasattr(v, "__len__") else [v] * nsp
    stride, padding, dilation, output_padding = map(per, (stride, padding, dilation,
                                                          output_padding))
    n, cin = x.shape[0], x.shape[-1]
    cout, cin_g = w.shape[0], w.shape[-1]
    cout_g = cout // groups
    ks = w.shape[1:-1]
    full = [(i - 1) * s + d * (k - 1) + 1 + op
            for i, s, d, k, op in zip(x.shape[1:-1], stride, dilation, ks, output_padding)]
    out = np.zeros([n] + full + [cout])
    for pos in itertools.product(*[range(i) for i in x.shape[1:-1]]):
        for tap in itertools.product(*[range(k) for k in ks]):
            o = tuple(p * s + t * d for p, s, t, d in zip(pos, stride, tap, dilation))
            xv = x[(slice(None),) + pos]  # [N, C_in]
            for g in range(groups):
                xg = xv[:, g * cin_g:(g + 1) * cin_g]
                wk = w[(slice(g * cout_g, (g + 1) * cout_g),) + tap]  # [C_out/G, C_in/G]
                out[(slice(None),) + o + (slice(g * cout_g, (g + 1) * cout_g),)] += xg @ wk.T
    sl = tuple(slice(p, f - p) for p, f in zip(padding, full))
    return out[(slice(None),) + sl]
