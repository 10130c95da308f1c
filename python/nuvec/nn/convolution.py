"""The convolution layers of mlx.nn: Conv1d/2d/3d and ConvTranspose1d/2d/3d, channels last
(inputs [N, spatial..., C_in]), over nuvec's conv1d/2d/3d and conv_transpose1d/2d/3d. Weights
[C_out, kernel..., C_in / groups] are drawn from U(-s, s) with s = 1 / sqrt(fan_in), fan_in the
input channels a filter sees times the kernel's size; biases start at zero (mlx.nn's rules, and
its draw order, so equal seeds give equal layers)."""
import math

import nuvec as mx

from .base import Module

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
           "ConvTranspose3d"]


def _per_axis(value, n):
    """An int repeated for n spatial axes, or a sequence kept as a tuple (1-D layers keep their
    ints, as mlx.nn)."""
    if n == 1:
        return value
    return (value,) * n if isinstance(value, int) else tuple(value)


class _Conv(Module):
    _ndim = 1
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 output_padding, groups, bias):
        super().__init__()
        if in_channels % groups != 0:
            raise ValueError(f"The number of input channels ({in_channels}) must be divisible "
                             f"by the number of groups ({groups})")
        n = self._ndim
        kernel_size = _per_axis(kernel_size, n)
        ks = (kernel_size,) if n == 1 else kernel_size
        fan_in = in_channels // groups * math.prod(ks)
        scale = math.sqrt(1 / fan_in)
        self.weight = mx.random.uniform(low=-scale, high=scale,
                                        shape=(out_channels, *ks, in_channels // groups))
        if bias:
            self.bias = mx.zeros((out_channels,))
        self.padding = _per_axis(padding, n)
        self.stride = _per_axis(stride, n)
        self.dilation = dilation
        if self._transposed:
            self.output_padding = _per_axis(output_padding, n)
        else:
            self.groups = groups

    def _extra_repr(self):
        n = self._ndim
        ks = self.weight.shape[1] if n == 1 else self.weight.shape[1:1 + n]
        cin = self.weight.shape[-1] * getattr(self, "groups", 1)
        s = (f"{cin}, {self.weight.shape[0]}, kernel_size={ks}, stride={self.stride}, "
             f"padding={self.padding}, dilation={self.dilation}, ")
        if self._transposed:
            s += f"output_padding={self.output_padding}, "
        elif n < 3:
            s += f"groups={self.groups}, "
        return s + f"bias={'bias' in self}"

    def __call__(self, x):
        n = self._ndim
        if self._transposed:
            f = (mx.conv_transpose1d, mx.conv_transpose2d, mx.conv_transpose3d)[n - 1]
            y = f(x, self.weight, self.stride, self.padding, self.dilation, self.output_padding)
        else:
            f = (mx.conv1d, mx.conv2d, mx.conv3d)[n - 1]
            y = f(x, self.weight, self.stride, self.padding, self.dilation, self.groups)
        if "bias" in self:
            y = y + self.bias
        return y


class Conv1d(_Conv):
    """1-D convolution over [N, L, C_in] inputs; weight [C_out, kernel_size, C_in / groups]."""

    _ndim = 1

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, 0,
                         groups, bias)


class Conv2d(_Conv):
    """2-D convolution over [N, H, W, C_in] inputs; weight [C_out, KH, KW, C_in / groups]."""

    _ndim = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, 0,
                         groups, bias)


class Conv3d(_Conv):
    """3-D convolution over [N, D, H, W, C_in] inputs; weight [C_out, KD, KH, KW, C_in]
    (mlx.nn's Conv3d has no groups)."""

    _ndim = 3

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, 0, 1,
                         bias)


class ConvTranspose1d(_Conv):
    """1-D transposed convolution over [N, L, C_in]; weight [C_out, kernel_size, C_in]."""

    _ndim = 1
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 output_padding=0, bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, 1, bias)


class ConvTranspose2d(_Conv):
    """2-D transposed convolution over [N, H, W, C_in]; weight [C_out, KH, KW, C_in]."""

    _ndim = 2
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 output_padding=0, bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, 1, bias)


class ConvTranspose3d(_Conv):
    """3-D transposed convolution over [N, D, H, W, C_in]; weight [C_out, KD, KH, KW, C_in]."""

    _ndim = 3
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 output_padding=0, bias=True):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         output_padding, 1, bias)
