"""Quantized layers with mlx.nn's names and semantics: QuantizedLinear, QuantizedEmbedding,
QQLinear (input quantized too, through qqmm) and quantize(), over nuvec's quantize /
dequantize / quantized_matmul / qqmm (the weights are packed as MLX packs them, so a model
quantized by MLX loads and runs the same)."""
import math

import nuvec as mx

from ..utils import tree_map_with_path
from .base import Module
from .layers import Embedding, Linear

__all__ = ["QuantizedLinear", "QuantizedEmbedding", "QQLinear", "quantize"]

# Each mode's (group_size, bits) when the caller gives None, as mlx.core.quantize's.
_MODE_DEFAULTS = {"affine": (64, 4), "mxfp4": (32, 4), "mxfp8": (32, 8), "nvfp4": (16, 4)}


def _resolve(group_size, bits, mode):
    if mode not in _MODE_DEFAULTS:
        raise ValueError(f"[quantize] Invalid quantization mode {mode!r}.")
    g, b = _MODE_DEFAULTS[mode]
    return (g if group_size is None else group_size), (b if bits is None else bits)


class _Quantized(Module):
    """What both layers share: the packed weight, its scales (and affine biases), the
    quantization parameters, and the weights frozen (not trainable) from the start."""

    def _set_weight(self, weight, group_size, bits, mode):
        self.group_size, self.bits = _resolve(group_size, bits, mode)
        self.mode = mode
        parts = mx.quantize(weight, self.group_size, self.bits, mode=mode)
        self.weight, self.scales = parts[0], parts[1]
        if mode == "affine":
            self.biases = parts[2]
        elif "biases" in self:
            del self["biases"]

    def _quantized_matmul(self, x):
        return mx.quantized_matmul(x, self["weight"], self["scales"], self.get("biases"),
                                   transpose=True, group_size=self.group_size, bits=self.bits,
                                   mode=self.mode)

    def _unpacked_dims(self):
        return self["weight"].shape[1] * 32 // self.bits


class QuantizedLinear(_Quantized):
    """Linear with a quantized weight: y = x @ dequantize(weight).T + bias, one fused
    quantized_matmul. A new layer draws its weight as Linear does (then quantizes it) and
    starts its bias at zero; from_linear quantizes an existing Linear's weight."""

    def __init__(self, input_dims, output_dims, bias=True, group_size=None, bits=None,
                 mode="affine"):
        super().__init__()
        scale = math.sqrt(1.0 / input_dims)
        self._set_weight(mx.random.uniform(-scale, scale, (output_dims, input_dims)),
                         group_size, bits, mode)
        if bias:
            self.bias = mx.zeros((output_dims,))
        self.freeze()

    def _extra_repr(self):
        return (f"input_dims={self._unpacked_dims()}, output_dims={self['weight'].shape[0]}, "
                f"bias={'bias' in self}, group_size={self.group_size}, bits={self.bits}, "
                f"mode={self.mode}")

    def __call__(self, x):
        y = self._quantized_matmul(x)
        return y + self["bias"] if "bias" in self else y

    @classmethod
    def from_linear(cls, linear_layer, group_size=None, bits=None, mode="affine"):
        q = cls.__new__(cls)
        Module.__init__(q)
        q._set_weight(linear_layer.weight, group_size, bits, mode)
        if "bias" in linear_layer:
            q.bias = linear_layer.bias
        q.freeze()
        return q


class QuantizedEmbedding(_Quantized):
    """Embedding with a quantized table: x's entries pick rows, dequantized on the way out;
    as_linear multiplies by the table (tied output projection) without unpacking it."""

    def __init__(self, num_embeddings, dims, group_size=None, bits=None, mode="affine"):
        super().__init__()
        scale = math.sqrt(1.0 / dims)
        self._set_weight(mx.random.normal(shape=(num_embeddings, dims), scale=scale),
                         group_size, bits, mode)
        self.freeze()

    def _extra_repr(self):
        return (f"{self['weight'].shape[0]}, {self._unpacked_dims()}, "
                f"group_size={self.group_size}, bits={self.bits}, mode={self.mode}")

    def __call__(self, x):
        biases = self["biases"][x] if "biases" in self else None
        return mx.dequantize(self["weight"][x], self["scales"][x], biases,
                             group_size=self.group_size, bits=self.bits, mode=self.mode)

    def as_linear(self, x):
        return self._quantized_matmul(x)

    @classmethod
    def from_embedding(cls, embedding_layer, group_size=None, bits=None, mode="affine"):
        q = cls.__new__(cls)
        Module.__init__(q)
        q._set_weight(embedding_layer.weight, group_size, bits, mode)
        q.freeze()
        return q


class QQLinear(Module):
    """A bias-free Linear whose input is quantized on the fly as well as its weight: y =
    qqmm(x, weight). In training mode the weight is kept unquantized (and trainable: qqmm's
    gradient goes straight through the quantizers); eval() packs it (weight, scales) and
    train() unpacks it again (in bfloat16 for the fp modes, as MLX's dequantize)."""

    def __init__(self, input_dims, output_dims, group_size=None, bits=None, mode="nvfp4"):
        super().__init__()
        self.group_size, self.bits = _resolve(group_size, bits, mode)
        self.mode = mode
        scale = math.sqrt(1.0 / input_dims)
        self.weight = mx.random.uniform(-scale, scale, (output_dims, input_dims))
        self._quantized = False

    def _extra_repr(self):
        out_dims, in_dims = self["weight"].shape
        if self["weight"].dtype == mx.uint32:
            in_dims = in_dims * 32 // self.bits
        return (f"input_dims={in_dims}, output_dims={out_dims}, group_size={self.group_size}, "
                f"bits={self.bits}, mode={self.mode}")

    def quantize(self):
        """Packs the weight (once): weight becomes uint32 and scales appear."""
        if not self._quantized:
            self.weight, self.scales = mx.quantize(self["weight"], self.group_size, self.bits,
                                                   mode=self.mode)
            self._quantized = True

    def dequantize(self):
        """Unpacks the weight (once) and drops the scales."""
        if self._quantized:
            self.weight = mx.dequantize(self["weight"], self["scales"],
                                        group_size=self.group_size, bits=self.bits,
                                        mode=self.mode)
            del self["scales"]
            self._quantized = False

    def _set_training_mode(self, mode):
        super()._set_training_mode(mode)
        if self._training:
            self.dequantize()
        else:
            self.quantize()

    def __call__(self, x):
        return mx.qqmm(x, self["weight"], scales=self.get("scales"), group_size=self.group_size,
                       bits=self.bits, mode=self.mode)

    @classmethod
    def from_linear(cls, linear_layer, group_size=None, bits=None, mode="nvfp4"):
        """A QQLinear over a bias-free Linear's weight, in the Linear's training mode."""
        output_dims, input_dims = linear_layer.weight.shape
        if linear_layer.get("bias") is not None:
            raise NotImplementedError("QQLinear does not support bias yet.")
        q = cls(input_dims, output_dims, group_size, bits, mode=mode)
        q.weight = linear_layer.weight
        q.train(linear_layer.training)
        return q


def _linear_to_quantized(self, group_size=None, bits=None, mode="affine", quantize_input=False):
    if quantize_input:
        if mode not in ("nvfp4", "mxfp8"):
            raise ValueError("Quantized activations are only supported for 'nvfp4' and 'mxfp8' "
                             f"modes, got {mode}.")
        return QQLinear.from_linear(self, group_size, bits, mode)
    return QuantizedLinear.from_linear(self, group_size, bits, mode)


def _embedding_to_quantized(self, group_size=None, bits=None, mode="affine"):
    return QuantizedEmbedding.from_embedding(self, group_size, bits, mode)


Linear.to_quantized = _linear_to_quantized
Embedding.to_quantized = _embedding_to_quantized


def quantize(model, group_size=None, bits=None, *, mode="affine", quantize_input=False,
             class_predicate=None):
    """Replaces, in place, each leaf module of `model` that `class_predicate(path, module)`
    accepts (default: every module with a to_quantized method: Linear, Embedding) by its
    quantized form. The predicate may return a dict of to_quantized's arguments instead of
    True; a module it accepts that cannot be quantized is a ValueError."""
    if class_predicate is None:
        def class_predicate(_, m):
            return hasattr(m, "to_quantized")

    def maybe(path, m):
        chosen = class_predicate(path, m)
        if not chosen:
            return m
        if not hasattr(m, "to_quantized"):
            raise ValueError(f"Unable to quantize model of type {type(m)}")
        if isinstance(chosen, bool):
            kwargs = {"group_size": group_size, "bits": bits, "mode": mode}
            if quantize_input:
                kwargs["quantize_input"] = True
        else:
            kwargs = chosen
        return m.to_quantized(**kwargs)

    leaves = tree_map_with_path(maybe, model.leaf_modules(), is_leaf=Module.is_module)
    model.update_modules(leaves)
