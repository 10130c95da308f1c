"""RoPE, SinusoidalPositionalEncoding and ALiBi (mlx.nn's)."""
import math

import nuvec as mx

from .base import Module

__all__ = ["RoPE", "SinusoidalPositionalEncoding", "ALiBi"]


def rope(x, dims, traditional, base, scale, offset):
    """Rotary positional encoding of x's first `dims` features (last axis), the positions
    offset + 0, 1, ... along axis -2 (mx.fast.rope's semantics, composed from core ops).
    traditional rotates the pairs (2i, 2i+1), otherwise (i, i + dims/2)."""
    length = x.shape[-2]
    half = dims // 2
    inv = mx.exp(-(mx.arange(0, dims, 2, dtype=mx.float32) / dims) * math.log(base))
    pos = (mx.arange(length, dtype=mx.float32) + offset) * scale
    theta = pos[:, None] * inv[None, :]
    cos = mx.cos(theta).astype(x.dtype)
    sin = mx.sin(theta).astype(x.dtype)
    rot, rest = x[..., :dims], x[..., dims:]
    if traditional:
        pairs = rot.reshape(*rot.shape[:-1], half, 2)
        a, b = pairs[..., 0], pairs[..., 1]
        out = mx.stack([a * cos - b * sin, a * sin + b * cos], axis=-1).reshape(rot.shape)
    else:
        a, b = rot[..., :half], rot[..., half:2 * half]
        out = mx.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
    if dims < x.shape[-1]:
        out = mx.concatenate([out, rest], axis=-1)
    return out


class RoPE(Module):
    """Rotary positional encoding (Su et al.) of the first `dims` features, the sequence on
    axis -2; the frequencies are base ** (-2i / dims), the positions multiplied by scale."""

    def __init__(self, dims, traditional=False, base=10000, scale=1.0):
        super().__init__()
        self.dims = dims
        self.traditional = traditional
        self.base = base
        self.scale = scale

    def _extra_repr(self):
        return f"{self.dims}, traditional={self.traditional}"

    def __call__(self, x, offset=0):
        fast = getattr(mx, "fast", None)
        if fast is not None and hasattr(fast, "rope"):
            return fast.rope(x, self.dims, traditional=self.traditional, base=self.base,
                             scale=self.scale, offset=offset)
        return rope(x, self.dims, self.traditional, self.base, self.scale, offset)


class SinusoidalPositionalEncoding(Module):
    """sin and cos of x * sigma for dims // 2 frequencies sigma spaced geometrically from
    max_freq down to min_freq (times 2 pi with full_turns), multiplied by scale (default
    sqrt(2 / dims)); sin first unless cos_first."""

    def __init__(self, dims, min_freq=0.0001, max_freq=1, scale=None, cos_first=False,
                 full_turns=False):
        super().__init__()
        n = dims // 2
        one_zero = 1 - mx.arange(0, n) / (n - 1) if n > 1 else mx.ones((n,))
        lo, hi = math.log(min_freq), math.log(max_freq)
        self._sigmas = mx.exp(one_zero * (hi - lo) + lo)
        if full_turns:
            self._sigmas = self._sigmas * (2 * math.pi)
        self.scale = scale or (2 / dims) ** 0.5
        self.cos_first = cos_first

    def __call__(self, x):
        y = x[..., None] * self._sigmas
        c, s = mx.cos(y), mx.sin(y)
        y = mx.concatenate([c, s] if self.cos_first else [s, c], axis=-1)
        if self.scale != 1:
            y = y * self.scale
        return y


class ALiBi(Module):
    """Attention with linear biases (Press et al.): adds -|i - j| * slope(head) to attention
    scores of shape (batch, heads, queries, keys)."""

    @staticmethod
    def create_alibi_slope(num_heads):
        x = (2 ** 8) ** (1.0 / num_heads)
        out = mx.power(x, -mx.arange(1, num_heads + 1, dtype=mx.float32))
        return mx.expand_dims(out, axis=(1, 2))

    @staticmethod
    def create_alibi_matrix(q_sequence_length, k_sequence_length, num_heads, offset=0,
                            dtype=mx.float32):
        q = mx.arange(offset, q_sequence_length)
        k = mx.arange(0, k_sequence_length)
        dist = -mx.abs(mx.expand_dims(q[:, None] - k[None, :], axis=(0, 1)))
        return (dist * ALiBi.create_alibi_slope(num_heads)).astype(dtype)

    def __call__(self, attention_scores, offset=0, mask=None):
        s = attention_scores.shape
        bias = ALiBi.create_alibi_matrix(s[-2] + offset, s[-1], s[1], offset,
                                         attention_scores.dtype)
        if mask is not None:
            bias = bias + mask
        return attention_scores + bias
