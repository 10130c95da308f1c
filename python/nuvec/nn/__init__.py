"""nuvec.nn: neural-network modules, layers, activations, initializers and losses with
mlx.nn's names and semantics (`import nuvec.nn as nn` runs code written for mlx.nn).
QuantizedLinear, QuantizedEmbedding, QQLinear and quantize() are in nuvec.nn.quantized."""
from . import init, losses  # noqa: F401
from .activations import *  # noqa: F401,F403
from .base import Module  # noqa: F401
from .convolution import *  # noqa: F401,F403
from .layers import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .pooling import *  # noqa: F401,F403
from .quantized import *  # noqa: F401,F403
from .positional_encoding import *  # noqa: F401,F403
from .recurrent import *  # noqa: F401,F403
from .transformer import (MultiHeadAttention, Transformer, TransformerDecoder,  # noqa: F401
                          TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
from .upsample import Upsample  # noqa: F401
from .utils import checkpoint, value_and_grad  # noqa: F401
from .distributed import average_gradients  # noqa: F401
