"""nuvec: arrays for machine learning with the semantics of MLX, in C.

Code written for ``import mlx.core as mx`` runs with ``import nuvec as mx`` wherever nuvec has
the feature. Everything is implemented in the C extension ``nuvec._core``; this file only
re-exports it.
"""
from ._core import *  # noqa: F401,F403
from ._core import __version__  # noqa: F401
