"""mlx.core's print options: the float precision array reprs use, set globally
(set_printoptions), read back (get_printoptions) or set for a ``with`` block (printoptions)."""
from ._core import _get_print_precision, _set_print_precision

__all__ = ["PrintOptions", "get_printoptions", "printoptions", "set_printoptions"]


class PrintOptions:
    """The options arrays print with: ``precision`` is the number of decimals of floats (fixed
    notation), -1 for the default (six significant digits)."""

    def __init__(self, precision=-1):
        self.precision = precision

    def __repr__(self):
        return f"PrintOptions(precision={self.precision})"


def set_printoptions(precision=-1):
    """Sets the number of decimals floats print with; -1 restores the default."""
    _set_print_precision(precision)


def get_printoptions():
    """The print options now in effect, as a PrintOptions."""
    return PrintOptions(_get_print_precision())


class printoptions:
    """A context manager that sets the print precision for its block and restores the previous
    one on exit: ``with printoptions(precision=3): print(x)``."""

    def __init__(self, precision=-1):
        if not isinstance(precision, int):
            raise TypeError(f"printoptions: precision must be an int, not {type(precision).__name__}")
        self._precision = precision
        self._saved = None

    def __enter__(self):
        self._saved = _get_print_precision()
        _set_print_precision(self._precision)
        return self

    def __exit__(self, *exc):
        _set_print_precision(self._saved)
        return False
