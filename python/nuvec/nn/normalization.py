"""LayerNorm, RMSNorm, GroupNorm, BatchNorm, InstanceNorm (mlx.nn's): features last."""
import nuvec as mx

from .base import Module

__all__ = ["LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm", "InstanceNorm"]


def _normalize(x, axes, eps):
    mean = mx.mean(x, axis=axes, keepdims=True)
    var = mx.var(x, axis=axes, keepdims=True)
    return (x - mean) * mx.rsqrt(var + eps)


class LayerNorm(Module):
    """Normalizes the last axis to mean 0, variance 1, then weight * x + bias (affine: weight
    ones, bias zeros; bias=False leaves the bias out)."""

    def __init__(self, dims, eps=1e-5, affine=True, bias=True):
        super().__init__()
        if affine:
            self.weight = mx.ones((dims,))
            if bias:
                self.bias = mx.zeros((dims,))
        self.eps = eps
        self.dims = dims

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        # mx.fast.layer_norm, as mlx.nn's: one fused pass per row.
        weight = self["weight"] if "weight" in self else None
        bias = self["bias"] if "bias" in self else None
        return mx.fast.layer_norm(x, weight, bias, self.eps)


class RMSNorm(Module):
    """x / sqrt(mean(x**2) + eps) * weight along the last axis (weight starts at ones)."""

    def __init__(self, dims, eps=1e-5):
        super().__init__()
        self.weight = mx.ones((dims,))
        self.eps = eps

    def _extra_repr(self):
        return f"{self.weight.shape[0]}, eps={self.eps}"

    def __call__(self, x):
        return mx.fast.rms_norm(x, self["weight"], self.eps)


class GroupNorm(Module):
    """Normalizes groups of the last axis over every axis but the first (the batch). Channel
    c is in group c % num_groups; pytorch_compatible=True groups consecutive channels."""

    def __init__(self, num_groups, dims, eps=1e-5, affine=True, pytorch_compatible=False):
        super().__init__()
        if affine:
            self.bias = mx.zeros((dims,))
            self.weight = mx.ones((dims,))
        self.num_groups = num_groups
        self.dims = dims
        self.eps = eps
        self.pytorch_compatible = pytorch_compatible

    def _extra_repr(self):
        return (f"{self.num_groups}, {self.dims}, eps={self.eps}, affine={'weight' in self}, "
                f"pytorch_compatible={self.pytorch_compatible}")

    def __call__(self, x):
        batch, *rest, dims = x.shape
        g = self.num_groups
        if self.pytorch_compatible:
            size = dims // g
            y = x.reshape(batch, -1, g, size).transpose(0, 2, 1, 3).reshape(batch, g, -1)
            y = _normalize(y, -1, self.eps)
            y = y.reshape(batch, g, -1, size).transpose(0, 2, 1, 3).reshape(batch, *rest, dims)
        else:
            y = _normalize(x.reshape(batch, -1, g), 1, self.eps).reshape(batch, *rest, dims)
        if "weight" in self:
            y = self["weight"] * y + self["bias"]
        return y


class BatchNorm(Module):
    """Normalizes over every axis but the last (features) with the batch's statistics in
    training mode, updating running_mean/running_var (frozen members; the variance unbiased)
    with momentum; in evaluation mode with the running statistics."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = mx.ones((num_features,))
            self.bias = mx.zeros((num_features,))
        if track_running_stats:
            self.running_mean = mx.zeros((num_features,))
            self.running_var = mx.ones((num_features,))
            self.freeze(keys=["running_mean", "running_var"], recurse=False)

    def unfreeze(self, *args, **kwargs):
        """Unfreezes as Module.unfreeze, but the running statistics stay frozen."""
        super().unfreeze(*args, **kwargs)
        self.freeze(keys=["running_mean", "running_var"], recurse=False)
        return self

    def _extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={'weight' in self}, track_running_stats={self.track_running_stats}")

    def __call__(self, x):
        if x.ndim < 2 or x.ndim > 4:
            raise ValueError("Expected input tensor to have 2, 3 or 4 dimensions, but got "
                             f"{x.ndim}")
        if self.training or not self.track_running_stats:
            axes = tuple(range(x.ndim - 1))
            mean = mx.mean(x, axis=axes)
            var = mx.var(x, axis=axes)
            if self.training and self.track_running_stats:
                mu = self.momentum
                n = x.size / x.shape[-1]
                unbiased = var * (n / max(n - 1, 1))
                self.running_mean = (1 - mu) * self.running_mean + mu * mean
                self.running_var = (1 - mu) * self.running_var + mu * unbiased
        else:
            mean, var = self.running_mean, self.running_var
        y = (x - mean) * mx.rsqrt(var + self.eps)
        if "weight" in self:
            y = self["weight"] * y + self["bias"]
        return y


class InstanceNorm(Module):
    """Normalizes every sample and feature over the axes between the first and the last."""

    def __init__(self, dims, eps=1e-5, affine=False):
        super().__init__()
        if affine:
            self.weight = mx.ones((dims,))
            self.bias = mx.zeros((dims,))
        self.dims = dims
        self.eps = eps

    def _extra_repr(self):
        return f"{self.dims}, eps={self.eps}, affine={'weight' in self}"

    def __call__(self, x):
        y = _normalize(x, tuple(range(1, x.ndim - 1)), self.eps)
        if "weight" in self:
            y = self["weight"] * y + self["bias"]
        return y
