"""MLX's function export: export_function, exporter (FunctionExporter) and import_function, over
nuvec's C export (nv_exporter_* / nv_import_function, src/transforms/export.c).

A function is traced once per signature of its inputs (how many positional arrays, the keyword
names, each array's dtype and shape, or only its rank with ``shapeless=True``); the traces of
one exporter go into one file with the arrays the function read that are not inputs. An
imported function runs the trace that matches its call and returns a tuple of arrays.

Inputs, at export and at a call of the imported function, are either arrays given as positional
and keyword arguments, or one tuple or list of arrays and/or one dict of arrays: ``f(x, y=y)``,
``f((x,), {"y": y})``, ``f({"x": x})``.
"""
import os

from . import _core

__all__ = ["FunctionExporter", "export_function", "exporter", "import_function"]


def _inputs(args, kwargs, tag):
    """The positional and keyword arrays of a call in either form MLX accepts (the C layer
    checks that each is an array)."""
    if not args or isinstance(args[0], _core.array):
        return tuple(args), dict(kwargs)
    bad = ValueError(f"{tag} inputs must be arrays given as positional and keyword arguments, or "
                     "one tuple or list of arrays and/or one dict of arrays")
    if kwargs or len(args) > 2:
        raise bad
    first, pos, kw = args[0], (), {}
    if len(args) == 2:
        if not isinstance(args[1], dict):
            raise bad
        kw = dict(args[1])
    if isinstance(first, (list, tuple)):
        pos = tuple(first)
    elif isinstance(first, dict) and len(args) == 1:
        kw = dict(first)
    else:
        raise bad
    return pos, kw


class FunctionExporter:
    """Exports traces of ``fun`` into one file: each call traces it for one more signature of
    inputs; the file is written when the exporter is closed (``close()``, the end of a ``with``
    block, or when it is collected). A closed exporter raises RuntimeError, and so does a second
    trace of a signature already exported."""

    def __init__(self, file, fun, shapeless=False, metadata=None):
        if not callable(fun):
            raise TypeError(f"[export_function] fun: expected a callable, got {type(fun).__name__}")
        self._fun = fun
        self._handle = _core._export_new(os.fspath(file), bool(shapeless), metadata)

    def __call__(self, *args, **kwargs):
        pos, kw = _inputs(args, kwargs, "[export_function]")
        _core._export_call(self._handle, self._fun, pos, kw)

    def close(self):
        """Writes the file and closes the exporter (once; later calls do nothing)."""
        _core._export_close(self._handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def exporter(file, fun, *, shapeless=False, metadata=None):
    """A FunctionExporter writing ``file``: call it once per input signature to export."""
    return FunctionExporter(file, fun, shapeless=shapeless, metadata=metadata)


def export_function(file, fun, *args, shapeless=False, metadata=None, **kwargs):
    """Exports ``fun`` traced on the example inputs (``*args`` and ``**kwargs``, or a tuple of
    arrays and/or a dict of arrays) to ``file``. With ``shapeless=True`` the trace also runs on
    inputs of other shapes of the same ranks where its operations infer their shapes (element-wise
    operations, reductions, reshape). ``metadata`` (a str) is stored in the file."""
    if callable(file) and not isinstance(file, (str, bytes, os.PathLike)):
        raise ValueError("[export_function] exporting to a callback is not supported; give a file "
                         "path")
    e = FunctionExporter(file, fun, shapeless=shapeless, metadata=metadata)
    try:
        e(*args, **kwargs)
    except BaseException:
        _core._export_discard(e._handle)  # a failed export writes no file
        raise
    e.close()


class ImportedFunction:
    """A function read by import_function: called with arrays as the exported function was
    (positional and keyword arrays, or a tuple and/or a dict of them), it returns a tuple of
    arrays. Its graph is made of ordinary operations, so grad, vmap and compile work on it."""

    __slots__ = ("_handle", "__weakref__")

    def __init__(self, handle):
        self._handle = handle

    def __call__(self, *args, **kwargs):
        pos, kw = _inputs(args, kwargs, "[import_function]")
        return _core._import_call(self._handle, pos, kw)


def import_function(file, return_metadata=False):
    """The function exported to ``file`` (with its metadata string when ``return_metadata``).
    A missing, truncated or corrupt file raises RuntimeError."""
    h = _core._import_function(os.fspath(file))
    f = ImportedFunction(h)
    return (f, _core._import_metadata(h)) if return_metadata else f
