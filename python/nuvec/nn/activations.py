"""Activation functions and their modules (mlx.nn's names, formulas and defaults)."""

import nuvec as mx

from .base import Module

__all__ = [
    "relu", "relu6", "relu2", "leaky_relu", "elu", "selu", "celu", "gelu", "gelu_approx",
    "gelu_fast_approx", "silu", "mish", "sigmoid", "softplus", "softsign", "hardswish",
    "hard_tanh", "hard_shrink", "softshrink", "softmin", "glu", "log_sigmoid", "log_softmax",
    "softmax", "prelu", "step", "tanh",
    "ReLU", "ReLU6", "ReLU2", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish",
    "Sigmoid", "Softplus", "Softsign", "Hardswish", "HardTanh", "HardShrink", "Softshrink",
    "Softmin", "GLU", "LogSigmoid", "LogSoftmax", "Softmax", "PReLU", "Step", "Tanh",
]


def sigmoid(x):
    """1 / (1 + exp(-x))."""
    return mx.sigmoid(x)


def tanh(x):
    """The hyperbolic tangent."""
    return mx.tanh(x)


def relu(x):
    """max(x, 0)."""
    return mx.maximum(x, 0)


def relu6(x):
    """min(max(x, 0), 6)."""
    return mx.minimum(mx.maximum(x, 0), 6.0)


def relu2(x):
    """relu(x) squared."""
    return mx.square(relu(x))


def leaky_relu(x, negative_slope=0.01):
    """max(negative_slope * x, x)."""
    return mx.maximum(negative_slope * x, x)


def elu(x, alpha=1.0):
    """x where x > 0, alpha * (exp(x) - 1) elsewhere."""
    return mx.where(x > 0, x, alpha * (mx.exp(x) - 1))


def selu(x):
    """The scaled ELU: 1.0507 * elu(x, 1.67326)."""
    return elu(x, 1.67326) * 1.0507


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * (exp(min(x, 0) / alpha) - 1)."""
    return mx.maximum(x, 0.0) + alpha * (mx.exp(mx.minimum(x, 0.0) / alpha) - 1)


def gelu(x):
    """x * Phi(x), Phi the standard normal's distribution function (through erf); one fused
    op and a fused gradient."""
    return mx._gelu(x)


def gelu_approx(x):
    """GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed as
    the equal x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3)) in one fused op."""
    return mx._gelu_approx(x)


def gelu_fast_approx(x):
    """GELU's sigmoid approximation: x * sigmoid(1.702 * x), one fused op."""
    return mx._gelu_fast_approx(x)


def silu(x):
    """x * sigmoid(x)."""
    return x * mx.sigmoid(x)


def softplus(x):
    """log(1 + exp(x))."""
    return mx.logaddexp(x, 0)


def mish(x):
    """x * tanh(softplus(x))."""
    return x * mx.tanh(softplus(x))


def softsign(x):
    """x / (1 + |x|)."""
    return mx.divide(x, 1 + mx.abs(x))


def hardswish(x):
    """x * min(max(x + 3, 0), 6) / 6."""
    return x * mx.minimum(mx.maximum(x + 3, 0), 6) / 6


def hard_tanh(x, min_val=-1.0, max_val=1.0):
    """x clipped to [min_val, max_val]."""
    return mx.minimum(mx.maximum(x, min_val), max_val)


def hard_shrink(x, lambd=0.5):
    """x where |x| > lambd, 0 elsewhere."""
    return mx.where(mx.abs(x) > lambd, x, 0)


def softshrink(x, lambd=0.5):
    """x - sign(x) * lambd where |x| > lambd, 0 elsewhere."""
    return mx.where(mx.abs(x) > lambd, x - mx.sign(x) * lambd, 0)


def softmax(x, axis=-1):
    """exp(x) normalized along axis."""
    return mx.softmax(x, axis=axis)


def softmin(x, axis=-1):
    """softmax(-x)."""
    return mx.softmax(-x, axis=axis)


def log_softmax(x, axis=-1):
    """x - logsumexp(x) along axis."""
    return x - mx.logsumexp(x, axis=axis, keepdims=True)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-x)


def glu(x, axis=-1):
    """a * sigmoid(b) for the two halves a, b of x along axis."""
    a, b = mx.split(x, 2, axis=axis)
    return a * mx.sigmoid(b)


def prelu(x, alpha):
    """max(x, 0) + alpha * min(x, 0)."""
    return mx.maximum(0, x) + alpha * mx.minimum(0, x)


def step(x, threshold=0.0):
    """1 where x > threshold, 0 elsewhere."""
    return mx.where(x > threshold, 1, 0)


def _module(fn, name, doc):
    """An activation module without parameters or options that calls fn."""
    cls = type(name, (Module,), {"__call__": lambda self, x: fn(x), "__doc__": doc})
    cls.__module__ = __name__
    return cls


ReLU = _module(relu, "ReLU", "relu as a module.")
ReLU6 = _module(relu6, "ReLU6", "relu6 as a module.")
ReLU2 = _module(relu2, "ReLU2", "relu2 as a module.")
SELU = _module(selu, "SELU", "selu as a module.")
SiLU = _module(silu, "SiLU", "silu as a module.")
Mish = _module(mish, "Mish", "mish as a module.")
Sigmoid = _module(sigmoid, "Sigmoid", "sigmoid as a module.")
Softplus = _module(softplus, "Softplus", "softplus as a module.")
Softsign = _module(softsign, "Softsign", "softsign as a module.")
Hardswish = _module(hardswish, "Hardswish", "hardswish as a module.")
HardTanh = _module(hard_tanh, "HardTanh", "hard_tanh as a module.")
Softmin = _module(softmin, "Softmin", "softmin as a module.")
Softmax = _module(softmax, "Softmax", "softmax as a module.")
LogSoftmax = _module(log_softmax, "LogSoftmax", "log_softmax as a module.")
LogSigmoid = _module(log_sigmoid, "LogSigmoid", "log_sigmoid as a module.")
Tanh = _module(tanh, "Tanh", "tanh as a module.")


class LeakyReLU(Module):
    """leaky_relu as a module."""

    def __init__(self, negative_slope=0.01):
        super().__init__()
        self._negative_slope = negative_slope

    def __call__(self, x):
        return leaky_relu(x, self._negative_slope)


class ELU(Module):
    """elu as a module."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return elu(x, self._alpha)


class CELU(Module):
    """celu as a module."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self._alpha = alpha

    def __call__(self, x):
        return celu(x, self._alpha)


class HardShrink(Module):
    """hard_shrink as a module."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self._lambd = lambd

    def __call__(self, x):
        return hard_shrink(x, self._lambd)


class Softshrink(Module):
    """softshrink as a module."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self._lambd = lambd

    def __call__(self, x):
        return softshrink(x, self._lambd)


class GLU(Module):
    """glu as a module."""

    def __init__(self, axis=-1):
        super().__init__()
        self.axis = axis

    def __call__(self, x):
        return glu(x, self.axis)


class Step(Module):
    """step as a module."""

    def __init__(self, threshold=0.0):
        super().__init__()
        self.threshold = threshold

    def __call__(self, x):
        return step(x, self.threshold)


class PReLU(Module):
    """prelu with a learned slope: `weight`, num_parameters values starting at init."""

    def __init__(self, num_parameters=1, init=0.25):
        super().__init__()
        self.weight = mx.full([num_parameters], init)

    def __call__(self, x):
        return prelu(x, self.weight)


class GELU(Module):
    """gelu as a module; approx "none" (erf), "precise" or "tanh" (gelu_approx), "fast"
    (gelu_fast_approx)."""

    def __init__(self, approx="none"):
        super().__init__()
        if approx == "none":
            self._act = gelu
        elif approx in ("precise", "tanh"):
            self._act = gelu_approx
        elif approx == "fast":
            self._act = gelu_fast_approx
        else:
            raise ValueError("The approximation should be in ['none', 'precise', 'tanh', "
                             f"'fast'] but '{approx}' was given")

    def __call__(self, x):
        return self._act(x)
