"""RNN, GRU and LSTM (mlx.nn's): inputs (..., length, features), every step's hidden state
returned stacked on axis -2; the weights drawn from U(-1/sqrt(hidden), 1/sqrt(hidden))."""
import math

import nuvec as mx

from .base import Module

__all__ = ["RNN", "GRU", "LSTM"]


def _uniform(scale, shape):
    return mx.random.uniform(-scale, scale, shape)


class RNN(Module):
    """h_t = nonlinearity(x_t @ Wxh.T + bias + h_{t-1} @ Whh.T), nonlinearity tanh by
    default."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity=None):
        super().__init__()
        self.nonlinearity = nonlinearity or mx.tanh
        if not callable(self.nonlinearity):
            raise ValueError(f"Nonlinearity must be callable. Current value: {nonlinearity}.")
        s = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wxh = _uniform(s, (hidden_size, input_size))
        self.Whh = _uniform(s, (hidden_size, hidden_size))
        self.bias = _uniform(s, (hidden_size,)) if bias else None

    def _extra_repr(self):
        return (f"input_dims={self.Wxh.shape[1]}, hidden_size={self.hidden_size}, "
                f"nonlinearity={self.nonlinearity}, bias={self.bias is not None}")

    def __call__(self, x, hidden=None):
        x = mx.addmm(self.bias, x, self.Wxh.T) if self.bias is not None else x @ self.Wxh.T
        out = []
        for t in range(x.shape[-2]):
            xt = x[..., t, :]
            hidden = xt if hidden is None else mx.addmm(xt, hidden, self.Whh.T)
            hidden = self.nonlinearity(hidden)
            out.append(hidden)
        return mx.stack(out, axis=-2)


class GRU(Module):
    """The gated recurrent unit: gates r, z and candidate n from Wx (3H, input), Wh (3H, H),
    b (3H,) and bhn (H,), the hidden-state bias of n inside r's product."""

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        s = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wx = _uniform(s, (3 * hidden_size, input_size))
        self.Wh = _uniform(s, (3 * hidden_size, hidden_size))
        self.b = _uniform(s, (3 * hidden_size,)) if bias else None
        self.bhn = _uniform(s, (hidden_size,)) if bias else None

    def _extra_repr(self):
        return (f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
                f"bias={self.b is not None}")

    def __call__(self, x, hidden=None):
        H = self.hidden_size
        x = mx.addmm(self.b, x, self.Wx.T) if self.b is not None else x @ self.Wx.T
        x_rz, x_n = x[..., :-H], x[..., -H:]
        out = []
        for t in range(x.shape[-2]):
            rz = x_rz[..., t, :]
            n = x_n[..., t, :]
            hp_n = None
            if hidden is not None:
                hp = hidden @ self.Wh.T
                hp_n = hp[..., -H:]
                rz = rz + hp[..., :-H]
            if self.bhn is not None:
                hp_n = self.bhn if hp_n is None else hp_n + self.bhn
            r, z = mx.split(mx.sigmoid(rz), 2, axis=-1)
            if hp_n is not None:
                n = n + r * hp_n
            n = mx.tanh(n)
            hidden = (1 - z) * n if hidden is None else (1 - z) * n + z * hidden
            out.append(hidden)
        return mx.stack(out, axis=-2)


class LSTM(Module):
    """The long short-term memory: gates i, f, g, o from Wx (4H, input), Wh (4H, H) and bias
    (4H,); returns the hidden and the cell states of every step."""

    def __init__(self, input_size, hidden_size, bias=True):
        super().__init__()
        s = 1.0 / math.sqrt(hidden_size)
        self.hidden_size = hidden_size
        self.Wx = _uniform(s, (4 * hidden_size, input_size))
        self.Wh = _uniform(s, (4 * hidden_size, hidden_size))
        self.bias = _uniform(s, (4 * hidden_size,)) if bias else None

    def _extra_repr(self):
        return (f"input_dims={self.Wx.shape[1]}, hidden_size={self.hidden_size}, "
                f"bias={self.bias is not None}")

    def __call__(self, x, hidden=None, cell=None):
        x = mx.addmm(self.bias, x, self.Wx.T) if self.bias is not None else x @ self.Wx.T
        hs, cs = [], []
        for t in range(x.shape[-2]):
            g4 = x[..., t, :]
            if hidden is not None:
                g4 = mx.addmm(g4, hidden, self.Wh.T)
            i, f, g, o = mx.split(g4, 4, axis=-1)
            i, f, g, o = mx.sigmoid(i), mx.sigmoid(f), mx.tanh(g), mx.sigmoid(o)
            cell = i * g if cell is None else f * cell + i * g
            hidden = o * mx.tanh(cell)
            hs.append(hidden)
            cs.append(cell)
        return mx.stack(hs, axis=-2), mx.stack(cs, axis=-2)
