"""MultiHeadAttention and the Transformer layers (mlx.nn's)."""
import math

import nuvec as mx

from .activations import relu
from .base import Module
from .layers import Dropout, Linear
from .normalization import LayerNorm

__all__ = ["MultiHeadAttention", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer",
           "scaled_dot_product_attention"]


def scaled_dot_product_attention(q, k, v, scale, mask=None):
    """softmax(q @ k.T * scale + mask) @ v over (..., heads, length, dims) inputs; a boolean
    mask keeps the True entries, mask="causal" the lower triangle (aligned at the end)."""
    fast = getattr(mx, "fast", None)
    if fast is not None and hasattr(fast, "scaled_dot_product_attention"):
        return fast.scaled_dot_product_attention(q, k, v, scale=scale, mask=mask)
    scores = (q * scale) @ k.swapaxes(-1, -2)
    if isinstance(mask, str):
        if mask != "causal":
            raise ValueError(f"Unsupported mask {mask!r}: expected 'causal' or an array")
        L, S = scores.shape[-2], scores.shape[-1]
        mask = mx.arange(L)[:, None] + (S - L) >= mx.arange(S)[None, :]
    if mask is not None:
        if mask.dtype == mx.bool_:
            scores = mx.where(mask, scores, mx.finfo(scores.dtype).min)
        else:
            scores = scores + mask
    return mx.softmax(scores, axis=-1) @ v


class MultiHeadAttention(Module):
    """Multi-head attention (Vaswani et al.): queries, keys and values projected to
    `dims`/`value_dims` features split into num_heads heads, attended, concatenated and
    projected to value_output_dims."""

    def __init__(self, dims, num_heads, query_input_dims=None, key_input_dims=None,
                 value_input_dims=None, value_dims=None, value_output_dims=None, bias=False):
        super().__init__()
        if dims % num_heads != 0:
            raise ValueError("The input feature dimensions should be divisible by the "
                             f"number of heads ({dims} % {num_heads}) != 0")
        query_input_dims = query_input_dims or dims
        key_input_dims = key_input_dims or dims
        value_input_dims = value_input_dims or key_input_dims
        value_dims = value_dims or dims
        value_output_dims = value_output_dims or dims
        self.num_heads = num_heads
        self.query_proj = Linear(query_input_dims, dims, bias=bias)
        self.key_proj = Linear(key_input_dims, dims, bias=bias)
        self.value_proj = Linear(value_input_dims, value_dims, bias=bias)
        self.out_proj = Linear(value_dims, value_output_dims, bias=bias)

    def __call__(self, queries, keys, values, mask=None):
        queries = self.query_proj(queries)
        keys = self.key_proj(keys)
        values = self.value_proj(values)
        h = self.num_heads
        B, L, _ = queries.shape
        S = keys.shape[1]
        queries = queries.reshape(B, L, h, -1).transpose(0, 2, 1, 3)
        keys = keys.reshape(B, S, h, -1).transpose(0, 2, 1, 3)
        values = values.reshape(B, S, h, -1).transpose(0, 2, 1, 3)
        scale = math.sqrt(1 / queries.shape[-1])
        out = scaled_dot_product_attention(queries, keys, values, scale, mask)
        return self.out_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))

    @staticmethod
    def create_additive_causal_mask(N, dtype=mx.float32):
        """An (N, N) mask: 0 on and below the diagonal, the dtype's lowest value above."""
        i = mx.arange(N)
        return (i[:, None] < i[None]).astype(dtype) * mx.finfo(dtype).min


class TransformerEncoderLayer(Module):
    """Self-attention and an MLP (mlp_dims, default 4 * dims), each with a residual and a
    LayerNorm, before (norm_first) or after."""

    def __init__(self, dims, num_heads, mlp_dims=None, dropout=0.0, activation=relu,
                 norm_first=True):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, y):
        return self.linear2(self.dropout2(self.activation(self.linear1(y))))

    def __call__(self, x, mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.attention(y, y, y, mask))
            return x + self._mlp(self.ln2(x))
        x = self.ln1(x + self.dropout1(self.attention(x, x, x, mask)))
        return self.ln2(x + self._mlp(x))


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention over the memory and an MLP, each with a residual and a
    LayerNorm, before (norm_first) or after."""

    def __init__(self, dims, num_heads, mlp_dims=None, dropout=0.0, activation=relu,
                 norm_first=True):
        super().__init__()
        mlp_dims = mlp_dims or dims * 4
        self.self_attention = MultiHeadAttention(dims, num_heads)
        self.cross_attention = MultiHeadAttention(dims, num_heads)
        self.ln1 = LayerNorm(dims)
        self.ln2 = LayerNorm(dims)
        self.ln3 = LayerNorm(dims)
        self.linear1 = Linear(dims, mlp_dims)
        self.linear2 = Linear(mlp_dims, dims)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = activation
        self.norm_first = norm_first

    def _mlp(self, y):
        return self.linear2(self.dropout3(self.activation(self.linear1(y))))

    def __call__(self, x, memory, x_mask, memory_mask):
        if self.norm_first:
            y = self.ln1(x)
            x = x + self.dropout1(self.self_attention(y, y, y, x_mask))
            y = self.ln2(x)
            x = x + self.dropout2(self.cross_attention(y, memory, memory, memory_mask))
            return x + self._mlp(self.ln3(x))
        x = self.ln1(x + self.dropout1(self.self_attention(x, x, x, x_mask)))
        x = self.ln2(x + self.dropout2(self.cross_attention(x, memory, memory, memory_mask)))
        return self.ln3(x + self._mlp(x))


def _maybe_checkpoint(layer, enabled):
    if not enabled:
        return layer
    from .utils import checkpoint
    return checkpoint(layer)


class TransformerEncoder(Module):
    """num_layers TransformerEncoderLayers and a final LayerNorm."""

    def __init__(self, num_layers, dims, num_heads, mlp_dims=None, dropout=0.0,
                 activation=relu, norm_first=True, checkpoint=False):
        super().__init__()
        self.layers = [TransformerEncoderLayer(dims, num_heads, mlp_dims, dropout, activation,
                                               norm_first) for _ in range(num_layers)]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def __call__(self, x, mask):
        for layer in self.layers:
            x = _maybe_checkpoint(layer, self.checkpoint)(x, mask)
        return self.ln(x)


class TransformerDecoder(Module):
    """num_layers TransformerDecoderLayers and a final LayerNorm."""

    def __init__(self, num_layers, dims, num_heads, mlp_dims=None, dropout=0.0,
                 activation=relu, norm_first=True, checkpoint=False):
        super().__init__()
        self.layers = [TransformerDecoderLayer(dims, num_heads, mlp_dims, dropout, activation,
                                               norm_first) for _ in range(num_layers)]
        self.ln = LayerNorm(dims)
        self.checkpoint = checkpoint

    def __call__(self, x, memory, x_mask, memory_mask):
        for layer in self.layers:
            x = _maybe_checkpoint(layer, self.checkpoint)(x, memory, x_mask, memory_mask)
        return self.ln(x)


class Transformer(Module):
    """An encoder over src and a decoder over tgt attending to the encoder's output."""

    def __init__(self, dims=512, num_heads=8, num_encoder_layers=6, num_decoder_layers=6,
                 mlp_dims=None, dropout=0.0, activation=relu, custom_encoder=None,
                 custom_decoder=None, norm_first=True, checkpoint=False):
        super().__init__()
        self.encoder = custom_encoder or TransformerEncoder(
            num_encoder_layers, dims, num_heads, mlp_dims, dropout, activation, norm_first,
            checkpoint)
        self.decoder = custom_decoder or TransformerDecoder(
            num_decoder_layers, dims, num_heads, mlp_dims, dropout, activation, norm_first,
            checkpoint)

    def __call__(self, src, tgt, src_mask, tgt_mask, memory_mask):
        memory = self.encoder(src, src_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask)
