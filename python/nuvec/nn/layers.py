"""Identity, Linear, Bilinear, Embedding, Sequential and the dropouts (mlx.nn's)."""
import math

import nuvec as mx

from .base import Module

__all__ = ["Identity", "Linear", "Bilinear", "Embedding", "Sequential", "Dropout", "Dropout2d",
           "Dropout3d"]


class Identity(Module):
    """Returns its input; takes and ignores any arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def __call__(self, x):
        return x


class Linear(Module):
    """y = x @ weight.T + bias; weight (output_dims, input_dims) and bias (output_dims,) drawn
    from U(-1/sqrt(input_dims), 1/sqrt(input_dims))."""

    def __init__(self, input_dims, output_dims, bias=True):
        super().__init__()
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(-scale, scale, (output_dims, input_dims))
        if bias:
            self.bias = mx.random.uniform(-scale, scale, (output_dims,))

    def _extra_repr(self):
        return (f"input_dims={self.weight.shape[1]}, output_dims={self.weight.shape[0]}, "
                f"bias={'bias' in self}")

    def __call__(self, x):
        if "bias" in self:
            return mx.addmm(self["bias"], x, self["weight"].T)
        return x @ self["weight"].T


class Bilinear(Module):
    """y[o] = x1 @ weight[o] @ x2 (+ bias[o]); weight (output_dims, input2_dims, input1_dims)
    and bias drawn from U(-1/sqrt(input1_dims), 1/sqrt(input1_dims))."""

    def __init__(self, input1_dims, input2_dims, output_dims, bias=True):
        super().__init__()
        scale = math.sqrt(1.0 / input1_dims)
        self.weight = mx.random.uniform(-scale, scale, (output_dims, input2_dims, input1_dims))
        if bias:
            self.bias = mx.random.uniform(-scale, scale, (output_dims,))

    def _extra_repr(self):
        out, in2, in1 = self.weight.shape
        return (f"input1_dims={in1}, input2_dims={in2}, output_dims={out}, "
                f"bias={'bias' in self}")

    def __call__(self, x1, x2):
        out, in2, in1 = self.weight.shape
        lead = x1.shape[:-1]
        a = x1.reshape(-1, in1)
        b = x2.reshape(-1, 1, in2)
        y = (a @ self.weight.reshape(out * in2, in1).T).reshape(-1, out, in2)
        y = (b @ y.swapaxes(-2, -1)).squeeze(1)
        if "bias" in self:
            y = y + self.bias
        return y.reshape(*lead, out)


class Embedding(Module):
    """A lookup table: weight (num_embeddings, dims) drawn from N(0, 1/dims); x's integer
    entries pick its rows."""

    def __init__(self, num_embeddings, dims):
        super().__init__()
        scale = math.sqrt(1.0 / dims)
        self.weight = mx.random.normal(shape=(num_embeddings, dims), scale=scale)

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, {self.weight.shape[1]}"

    def __call__(self, x):
        return self.weight[x]

    def as_linear(self, x):
        """x @ weight.T: the embedding used as the output projection (tied weights)."""
        return x @ self.weight.T


class Sequential(Module):
    """Calls its modules (or callables) one after the other."""

    def __init__(self, *modules):
        super().__init__()
        self.layers = list(modules)

    def __call__(self, x):
        for m in self.layers:
            x = m(x)
        return x


class Dropout(Module):
    """Zeroes entries with probability p in training mode and scales the rest by 1/(1-p)."""

    _broadcast_axes = ()
    _ndims = None

    def __init__(self, p=0.5):
        super().__init__()
        if p < 0 or p >= 1:
            raise ValueError(f"The dropout probability {p} is not in [0, 1)")
        self._p_1 = 1 - p

    def _extra_repr(self):
        return f"p={1 - self._p_1}"

    def __call__(self, x):
        if self._ndims is not None and x.ndim not in self._ndims:
            raise ValueError(f"Received input with {x.ndim} dimensions. Expected "
                             f"{' or '.join(str(n) for n in self._ndims)} dimensions.")
        if self._p_1 == 1 or not self.training:
            return x
        shape = list(x.shape)
        for a in self._broadcast_axes:
            shape[a] = 1
        mask = mx.random.bernoulli(self._p_1, shape)
        return (mask * x) * (1 / self._p_1)


class Dropout2d(Dropout):
    """Dropout of whole channels of (N, H, W, C) or (H, W, C) inputs (channels last)."""

    _broadcast_axes = (-2, -3)
    _ndims = (3, 4)


class Dropout3d(Dropout):
    """Dropout of whole channels of (N, D, H, W, C) or (D, H, W, C) inputs (channels last)."""

    _broadcast_axes = (-2, -3, -4)
    _ndims = (4, 5)
