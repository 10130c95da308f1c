"""nuvec: arrays for machine learning with the semantics of MLX, in C.

Code written for ``import mlx.core as mx`` runs with ``import nuvec as mx`` wherever nuvec has
the feature. Everything is implemented in the C extension ``nuvec._core``; this file only
re-exports it, registers its submodule ``random`` so that ``import nuvec.random`` works, and
imports the pure-Python packages over it: ``nn`` (mlx.nn), ``optimizers`` (mlx.optimizers) and
``utils`` (mlx.utils).
"""
import sys as _sys

from ._core import *  # noqa: F401,F403
from ._core import __version__, random  # noqa: F401

_sys.modules[__name__ + ".random"] = random


class _Backend:
    """``nuvec.cuda`` and ``nuvec.metal``: whether that GPU backend runs here (as mlx.core's)."""

    def __init__(self, name, available):
        self.__name__ = "nuvec." + name
        self._available = available

    def is_available(self):
        return self._available()

    def __repr__(self):
        return f"<module {self.__name__}>"


cuda = _Backend("cuda", lambda: is_available(Device(gpu, 0)))  # noqa: F405
metal = _Backend("metal", lambda: False)  # Apple's Metal: never on Linux
_sys.modules[__name__ + ".cuda"] = cuda
_sys.modules[__name__ + ".metal"] = metal

# The pure-Python packages over the core, reachable as attributes too (nuvec.nn, ...).
from . import nn, optimizers, utils  # noqa: E402,F401
