"""Upsample (mlx.nn's): nearest, linear and cubic interpolation of the spatial axes of
channels-last inputs (N, *spatial, C), one axis after the other."""
import nuvec as mx

from .base import Module

__all__ = ["Upsample", "upsample_nearest", "upsample_linear", "upsample_cubic"]


def _out_size(n, scale):
    return int(scale * n)


def _source_coords(n, scale, align_corners):
    """The source coordinate (float32) of every output position along an axis of size n."""
    m = _out_size(n, scale)
    i = mx.arange(m, dtype=mx.float32)
    if align_corners:
        return i * ((n - 1) / (m - 1)) if m > 1 else mx.zeros((m,))
    step = 1 / scale
    start = ((m - 1) * step - n + 1) / 2
    return i * step - start


def _gather(x, axis, idx):
    return mx.take(x, idx, axis=axis)


def _weighted(x, axis, terms):
    """sum of w * x[idx] along axis for the (idx, w) terms, w broadcast over later axes. The
    weights stay float32, so integer and half-precision inputs interpolate to float32 (MLX's
    result dtype) instead of rounding the weights to the input's dtype."""
    shape = [1] * x.ndim
    shape[axis] = -1
    out = None
    for idx, w in terms:
        t = _gather(x, axis, idx) * w.reshape(shape)
        out = t if out is None else out + t
    return out


def _nearest_axis(x, axis, scale, align_corners):
    n = x.shape[axis]
    m = _out_size(n, scale)
    i = mx.arange(m, dtype=mx.float32)
    if m > n:
        idx = mx.round((i + 0.5) * (n / m) - 0.5)
    else:
        idx = mx.floor(i * (n / m))
    return _gather(x, axis, mx.clip(idx, 0, n - 1).astype(mx.int32))


def _linear_axis(x, axis, scale, align_corners):
    n = x.shape[axis]
    c = mx.clip(_source_coords(n, scale, align_corners), 0, n - 1)
    lo = mx.floor(c)
    w = c - lo
    hi = mx.ceil(c)
    return _weighted(x, axis, [(lo.astype(mx.int32), 1 - w), (hi.astype(mx.int32), w)])


def _cubic_weights(t, a=-0.75):
    """Keys' cubic convolution weights of the four neighbours at distances 1 + t, t, 1 - t,
    2 - t."""
    def near(d):
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d):
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _cubic_axis(x, axis, scale, align_corners):
    n = x.shape[axis]
    c = _source_coords(n, scale, align_corners)
    base = mx.floor(c)
    ws = _cubic_weights(c - base)
    terms = []
    for k, w in zip((-1, 0, 1, 2), ws):
        idx = mx.clip(base + k, 0, n - 1).astype(mx.int32)
        terms.append((idx, w))
    return _weighted(x, axis, terms)


def _upsample(axis_fn, x, scale_factor, align_corners):
    for d, s in enumerate(scale_factor):
        x = axis_fn(x, d + 1, s, align_corners)
    return x


def upsample_nearest(x, scale_factor):
    """Nearest-neighbour upsampling by the scale factors (one per spatial axis)."""
    return _upsample(_nearest_axis, x, scale_factor, False)


def upsample_linear(x, scale_factor, align_corners=False):
    """(Multi-)linear interpolation by the scale factors (one per spatial axis)."""
    return _upsample(_linear_axis, x, scale_factor, align_corners)


def upsample_cubic(x, scale_factor, align_corners=False):
    """(Multi-)cubic interpolation (Keys, a = -0.75) by the scale factors."""
    return _upsample(_cubic_axis, x, scale_factor, align_corners)


class Upsample(Module):
    """Scales the spatial axes of (N, *spatial, C) inputs by scale_factor (a number for all of
    them, or one per axis) with mode "nearest", "linear" or "cubic"."""

    def __init__(self, scale_factor, mode="nearest", align_corners=False, antialias=False):
        super().__init__()
        if mode not in ("nearest", "linear", "cubic"):
            raise ValueError(f"[Upsample] Got unsupported upsampling algorithm: {mode}")
        if antialias:
            raise ValueError("[Upsample] antialias is not supported")
        if isinstance(scale_factor, (list, tuple)):
            self.scale_factor = tuple(map(float, scale_factor))
        else:
            self.scale_factor = float(scale_factor)
        self.mode = mode
        self.align_corners = align_corners

    def _extra_repr(self):
        return (f"scale_factor={self.scale_factor}, mode={self.mode!r}, "
                f"align_corners={self.align_corners}")

    def __call__(self, x):
        dims = x.ndim - 2
        if dims <= 0:
            raise ValueError("[Upsample] The input should have at least 1 spatial dimension "
                             f"which means it should be at least 3D but {x.ndim}D was given")
        sf = self.scale_factor
        if isinstance(sf, tuple):
            if len(sf) != dims:
                raise ValueError(f"[Upsample] One scale per spatial dimension is required "
                                 f"but scale_factor={sf} and the number of spatial "
                                 f"dimensions were {dims}")
        else:
            sf = (sf,) * dims
        if self.mode == "nearest":
            return upsample_nearest(x, sf)
        if self.mode == "linear":
            return upsample_linear(x, sf, self.align_corners)
        return upsample_cubic(x, sf, self.align_corners)
