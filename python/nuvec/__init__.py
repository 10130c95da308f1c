"""nuvec: arrays for machine learning with the semantics of MLX, in C.

Code written for ``import mlx.core as mx`` runs with ``import nuvec as mx`` wherever nuvec has
the feature. Everything is implemented in the C extension ``nuvec._core``; this file only
re-exports it, and registers its submodule ``random`` so that ``import nuvec.random`` works.
"""
import sys as _sys

from ._core import *  # noqa: F401,F403
from ._core import __version__, random  # noqa: F401

_sys.modules[__name__ + ".random"] = random
