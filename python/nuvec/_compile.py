"""nuvec.compile: MLX's mx.compile over nuvec's C compile (nv_compile).

The C layer traces and replays a function of a flat list of arrays; this file maps a Python
function of pytrees onto it. Arrays anywhere in the positional and keyword arguments are the
inputs; every other leaf (numbers, strings, None, ...) is a constant: a call with different
constants, or a different structure, is a different compiled function (traced on its first
call), as MLX retraces. Captured state (``inputs=`` / ``outputs=``: lists or dicts of arrays,
nested, such as a model's parameters or an optimizer's state) is read before each call and
written after it: while the function is traced its arrays are replaced by the tracers, in
place, and the values it leaves in ``outputs`` become outputs of the compiled graph, which
each call stores back into the tree.
"""
import functools

from . import _core

__all__ = ["compile", "disable_compile", "enable_compile", "export_to_dot"]

disable_compile = _core.disable_compile
enable_compile = _core.enable_compile


def _is_array(x):
    return isinstance(x, _core.array)


def _structure(tree, arrays):
    """A hashable description of `tree` (arrays collected into `arrays`, in order)."""
    if _is_array(tree):
        arrays.append(tree)
        return "A"
    if isinstance(tree, (list, tuple)):
        return (type(tree).__name__, tuple(_structure(x, arrays) for x in tree))
    if isinstance(tree, dict):
        return ("dict", tuple((k, _structure(v, arrays)) for k, v in tree.items()))
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return ("C", type(tree), tree)
    if isinstance(tree, _core.distributed.Group):
        # A group is a constant of the trace, hashed as (id, rank, size): another group retraces
        # (D38).
        return ("G", tree)
    raise ValueError("[compile] Function arguments must be trees of arrays or constants "
                     f"(floats, ints, or strings), but received type {type(tree).__name__}.")


class _Slot:
    """Where an array goes in a template (templates hold no arrays, so they keep none alive)."""

    __slots__ = ()


_SLOT = _Slot()


def _template(tree, leaves):
    """`tree` with its arrays (appended to `leaves`) replaced by _SLOT."""
    if _is_array(tree):
        leaves.append(tree)
        return _SLOT
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(_template(x, leaves) for x in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(_template(x, leaves) for x in tree)
    if isinstance(tree, dict):
        return {k: _template(v, leaves) for k, v in tree.items()}
    return tree


def _rebuild(tree, it):
    """A template with its slots filled, in order, by the next items of `it`."""
    if tree is _SLOT:
        return next(it)
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):
        return type(tree)(*(_rebuild(x, it) for x in tree))
    if isinstance(tree, (list, tuple)):
        return type(tree)(_rebuild(x, it) for x in tree)
    if isinstance(tree, dict):
        return {k: _rebuild(v, it) for k, v in tree.items()}
    return tree


def _state_slots(tree, out):
    """The places (container, key) of the arrays of a state tree, in order. Arrays in tuples
    cannot be replaced: they are refused."""
    if isinstance(tree, list):
        items = enumerate(tree)
    elif isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, tuple):
        for x in tree:
            if _is_array(x):
                raise ValueError("[compile] captured state in a tuple cannot be updated; use a list")
            _state_slots(x, out)
        return out
    else:
        return out
    for k, x in list(items):
        if _is_array(x):
            out.append((tree, k))
        else:
            _state_slots(x, out)
    return out


def _state_leaves(tree):
    return [c[k] for c, k in _state_slots(tree, [])] if tree is not None else []


def _state_set(slots, values):
    for (c, k), v in zip(slots, values):
        c[k] = v


_PLACEHOLDER = []


def _placeholder():
    """A 0-d array standing for a template's array leaves (made once)."""
    if not _PLACEHOLDER:
        _PLACEHOLDER.append(_core.array(0.0))
    return _PLACEHOLDER[0]


class _Entry:
    """One structure of arguments: its C compiled function and its outputs' structure."""

    __slots__ = ("flat", "outs", "sig", "last")

    def __init__(self):
        self.flat = None
        self.outs = {}  # the arrays' signature -> (outputs' structure, number of user outputs)
        self.sig = self.last = None


class _Compiled:
    def __init__(self, fun, inputs, outputs, shapeless):
        if not callable(fun):
            raise TypeError(f"[compile] fun: expected a callable, got {type(fun).__name__}")
        self._fun = fun
        self._inputs = inputs
        self._outputs = outputs
        self._shapeless = bool(shapeless)
        self._cache = {}
        functools.update_wrapper(self, fun)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        # A method: the instance is bound by identity, not traced as an argument.
        return functools.partial(self._call, (obj,))

    def __call__(self, *args, **kwargs):
        return self._call((), *args, **kwargs)

    def _call(self, bound, *args, **kwargs):
        if _core._compile_mode() == 0:
            return self._fun(*bound, *args, **kwargs)
        arrays = []
        key = (_structure(args, arrays), _structure(kwargs, arrays), tuple(map(id, bound)))
        n_args = len(arrays)
        state_in = _state_leaves(self._inputs)
        key = key + (len(state_in),)
        entry = self._cache.get(key)
        flat = arrays + state_in
        if entry is None:
            entry = self._cache[key] = self._make(bound, args, kwargs, flat, n_args,
                                                  len(state_in))
        # The C function traces again for arrays of another dtype or shape (rank when
        # shapeless), and such a trace may return another structure: one per signature.
        sig = tuple((a.dtype, a.ndim if self._shapeless else a.shape) for a in flat)
        entry.sig = sig
        try:
            res = entry.flat(flat)
        except BaseException:
            # A trace that failed is not kept: the next call traces again.
            if not entry.outs:
                del self._cache[key]
            raise
        out_tree, n_user = entry.outs.get(sig) or entry.outs[entry.last]
        user, state = res[:n_user], res[n_user:]
        if self._outputs is not None:
            _state_set(_state_slots(self._outputs, []), state)
        return _rebuild(out_tree, iter(user))

    def _make(self, bound, args, kwargs, flat, n_args, n_state):
        entry = _Entry()
        fun, inputs, outputs = self._fun, self._inputs, self._outputs
        args, kwargs = _template(args, []), _template(kwargs, [])

        def body(flat):
            tracers = list(flat)
            it = iter(tracers[:n_args])
            a = _rebuild(args, it)
            k = _rebuild(kwargs, it)
            # The state's arrays are replaced by the tracers while fun runs, and put back after
            # (places fun added stay: they are outputs, written after the call).
            slots = _state_slots(inputs, []) if inputs is not None else []
            saved = [c[k] for c, k in slots]
            _state_set(slots, tracers[n_args : n_args + n_state])
            try:
                out = fun(*bound, *a, **k)
                leaves = []
                tree = _template(out, leaves)
                state = _state_leaves(outputs)
            finally:
                _state_set(slots, saved)
            entry.outs[entry.sig] = (tree, len(leaves))
            entry.last = entry.sig
            return leaves + state

        # The C function keeps its template for every later trace; its leaves only mark where
        # the arrays go, so they are one placeholder, not this call's arrays: holding those
        # would keep the first call's inputs alive and stop their buffers' donation.
        entry.flat = _core._compile_flat(body, [_placeholder()] * len(flat), self._shapeless)
        return entry

    @property
    def _stats(self):
        """The C counters summed over the compiled structures (for tests)."""
        total = {}
        for e in self._cache.values():
            for k, v in _core._compile_stats(e.flat).items():
                total[k] = total.get(k, 0) + v
        return total


def compile(fun=None, inputs=None, outputs=None, shapeless=False):
    """A function computing what ``fun`` computes, traced once per structure and signature of
    its arguments and replayed afterwards (MLX's mx.compile). Usable as a decorator, also as
    ``functools.partial(compile, inputs=..., outputs=...)``."""
    if fun is None:
        return functools.partial(compile, inputs=inputs, outputs=outputs, shapeless=shapeless)
    return _Compiled(fun, inputs, outputs, shapeless)


def export_to_dot(file, *args, **kwargs):
    """Writes the unevaluated graph behind the arrays (pytrees) of ``args`` to ``file`` (a path
    or a writable text file) in Graphviz DOT format, as MLX's export_to_dot; ``kwargs`` name
    arrays of the graph (name=array)."""
    outs = []
    _structure(args, outs)
    names = list(kwargs)
    named = [kwargs[k] for k in names]
    for k, v in zip(names, named):
        if not _is_array(v):
            raise TypeError(f"[export_to_dot] {k}: expected an array, got {type(v).__name__}")
    # Named arrays are part of the graph too (MLX walks them as it walks the positional ones).
    outs += [v for v in named if not any(v is o for o in outs)]
    if isinstance(file, (str, bytes)) or hasattr(file, "__fspath__"):
        import os

        _core._export_to_dot(os.fsdecode(file), outs, names, named)
        return
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(suffix=".dot")
    os.close(fd)
    try:
        _core._export_to_dot(tmp, outs, names, named)
        with open(tmp) as f:
            file.write(f.read())
    finally:
        os.unlink(tmp)
