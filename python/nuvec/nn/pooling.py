"""Max and average pooling over 1, 2 or 3 spatial axes (mlx.nn's), channels last: inputs
(N, *spatial, C). The windows are taken by strided slices, so the pooling differentiates."""
import operator

import nuvec as mx

from .base import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d"]


def _tuple(value, n, name):
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) != n or not all(isinstance(v, int) for v in value):
        raise ValueError(f"[{name}] expected an int or a tuple of {n} ints, got {value}")
    return value


class _Pool(Module):
    _dims = 1
    _pad_value = 0.0

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self._dims
        name = type(self).__name__
        self._kernel_size = _tuple(kernel_size, n, name)
        self._stride = _tuple(stride, n, name) if stride is not None else self._kernel_size
        self._padding = _tuple(padding or 0, n, name)
        if any(k <= 0 for k in self._kernel_size) or any(s <= 0 for s in self._stride):
            raise ValueError(f"[{name}] kernel_size and stride must be positive")
        # Any padding is allowed, as in MLX (a window may then see padding only: -inf for
        # max, 0 for average).
        if any(p < 0 for p in self._padding):
            raise ValueError(f"[{name}] 'padding' must be non-negative but got {self._padding}.")

    def _extra_repr(self):
        return (f"kernel_size={self._kernel_size}, stride={self._stride}, "
                f"padding={self._padding}")

    def __call__(self, x):
        n = self._dims
        if x.ndim != n + 2:
            raise ValueError(f"[{type(self).__name__}] expected an input with {n + 2} "
                             f"dimensions (N, *spatial, C), got {x.ndim}")
        if any(self._padding):
            x = mx.pad(x, [(0, 0)] + [(p, p) for p in self._padding] + [(0, 0)],
                       constant_values=self._pad_value)
        sizes = x.shape[1:-1]
        outs = [(s - k) // st + 1 for s, k, st in zip(sizes, self._kernel_size, self._stride)]
        if any(o <= 0 for o in outs):
            raise ValueError(f"[{type(self).__name__}] the kernel {self._kernel_size} is "
                             f"larger than the padded input {tuple(sizes)}")
        acc = None
        offsets = [()]
        for k in self._kernel_size:
            offsets = [o + (j,) for o in offsets for j in range(k)]
        for off in offsets:
            idx = (slice(None),) + tuple(
                slice(j, j + (o - 1) * st + 1, st)
                for j, o, st in zip(off, outs, self._stride)) + (slice(None),)
            w = x[idx]
            acc = w if acc is None else self._combine(acc, w)
        return self._finish(acc, len(offsets))


class _MaxPool(_Pool):
    _pad_value = -float("inf")
    _combine = staticmethod(mx.maximum)

    @staticmethod
    def _finish(acc, count):
        return acc


class _AvgPool(_Pool):
    _combine = staticmethod(operator.add)

    @staticmethod
    def _finish(acc, count):
        return acc / count


class MaxPool1d(_MaxPool):
    """Maximum over windows of axis 1 of (N, L, C) inputs."""
    _dims = 1


class MaxPool2d(_MaxPool):
    """Maximum over windows of axes 1, 2 of (N, H, W, C) inputs."""
    _dims = 2


class MaxPool3d(_MaxPool):
    """Maximum over windows of axes 1-3 of (N, D, H, W, C) inputs."""
    _dims = 3


class AvgPool1d(_AvgPool):
    """Mean over windows of axis 1 of (N, L, C) inputs (padding counts as zeros)."""
    _dims = 1


class AvgPool2d(_AvgPool):
    """Mean over windows of axes 1, 2 of (N, H, W, C) inputs (padding counts as zeros)."""
    _dims = 2


class AvgPool3d(_AvgPool):
    """Mean over windows of axes 1-3 of (N, D, H, W, C) inputs (padding counts as zeros)."""
    _dims = 3
