"""nn.Module (mlx.nn.Module's API and semantics): a dict whose array members, and the modules,
lists and dicts holding them, are the module's parameters."""
import textwrap

import nuvec as mx

from ..utils import tree_flatten, tree_unflatten

__all__ = ["Module"]


def _default_leaf(module, key, value):
    return not isinstance(value, (Module, dict, list))


def _walk(module, key, value, filter_fn, map_fn, is_leaf_fn):
    """The part of the tree under `value` (a member `key` of `module`) that filter_fn keeps,
    with map_fn applied to its leaves. Inside a module the keys restart from its members;
    inside a list or dict they are the dotted path from the module's member."""
    if is_leaf_fn(module, key, value):
        return map_fn(value)
    if isinstance(value, Module):
        return {k: _walk(value, k, v, filter_fn, map_fn, is_leaf_fn)
                for k, v in value.items() if filter_fn(value, k, v)}
    if isinstance(value, (dict, list)):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        out = {} if isinstance(value, dict) else []
        for k, v in items:
            path = f"{key}.{k}"
            sub = _walk(module, path, v, filter_fn, map_fn, is_leaf_fn) \
                if filter_fn(module, path, v) else {}
            if isinstance(out, dict):
                out[k] = sub
            else:
                out.append(sub)
        return out
    raise RuntimeError("Unexpected leaf found while traversing the module")


class Module(dict):
    """The base of every layer. Members set as attributes that are arrays, dicts, lists or
    tuples (and so modules) are stored as the dict's items; any other attribute stays an
    ordinary attribute. Members whose name starts with "_" are not parameters."""

    def __init__(self):
        self._no_grad = set()
        self._training = True

    @property
    def training(self):
        """Whether the module is in training mode (Dropout and BatchNorm read it)."""
        return self._training

    @property
    def state(self):
        """The module's state: the module itself (a dict of its members)."""
        return self

    def _extra_repr(self):
        return ""

    def __repr__(self):
        children = tree_flatten(self.children(), is_leaf=self.is_module)
        text = f"{type(self).__name__}({self._extra_repr()}"
        for k, v in children:
            text += "\n" + textwrap.indent(f"({k}): {v!r}", prefix="  ")
        if children:
            text += "\n"
        return text + ")"

    def __getattr__(self, key):
        value = self.get(key, None)
        if value is not None:
            return value
        return super().__getattribute__(key)

    def __setattr__(self, key, value):
        if isinstance(value, (mx.array, dict, list, tuple)):
            if key not in self and key in self.__dict__:
                del self.__dict__[key]
            self[key] = value
        else:
            # A plain value replaces a member of that name: it is no parameter any more.
            if key in self:
                del self[key]
            super().__setattr__(key, value)

    def __delattr__(self, key):
        if key in self:
            del self[key]
        else:
            super().__delattr__(key)

    # Filters (as mlx.nn.Module's static methods).
    @staticmethod
    def is_module(value):
        return isinstance(value, Module)

    @staticmethod
    def valid_child_filter(module, key, value):
        return isinstance(value, (dict, list))

    @staticmethod
    def valid_parameter_filter(module, key, value):
        return isinstance(value, (dict, list, mx.array)) and not key.startswith("_")

    @staticmethod
    def trainable_parameter_filter(module, key, value):
        return Module.valid_parameter_filter(module, key, value) and key not in module._no_grad

    def filter_and_map(self, filter_fn, map_fn=None, is_leaf_fn=None):
        """The members kept by filter_fn(module, key, value), recursively through modules,
        dicts and lists, with map_fn (default: identity) applied to the leaves that
        is_leaf_fn(module, key, value) accepts (default: anything but a module, dict or
        list)."""
        map_fn = map_fn or (lambda x: x)
        is_leaf_fn = is_leaf_fn or _default_leaf
        return {k: _walk(self, k, v, filter_fn, map_fn, is_leaf_fn)
                for k, v in self.items() if filter_fn(self, k, v)}

    def parameters(self):
        """Every parameter (array member, recursively) as a tree of dicts and lists."""
        return self.filter_and_map(self.valid_parameter_filter)

    def trainable_parameters(self):
        """The parameters that are not frozen."""
        return self.filter_and_map(self.trainable_parameter_filter)

    def children(self):
        """The direct submodules (also inside lists and dicts)."""
        return self.filter_and_map(self.valid_child_filter,
                                   is_leaf_fn=lambda m, k, v: isinstance(v, Module))

    def leaf_modules(self):
        """The submodules that have no submodules themselves."""
        def is_leaf(m, k, v):
            return isinstance(v, Module) and len(tree_flatten(v.children())) == 0
        return self.filter_and_map(self.valid_child_filter, is_leaf_fn=is_leaf)

    def update(self, parameters, strict=True):
        """Replaces the parameters with those of `parameters` (a tree as parameters()
        returns, or part of one). With strict, an unknown key or a non-array value for an
        array raises ValueError. Returns the module."""
        def put(dst, params):
            if isinstance(params, dict):
                for k in params:
                    if k in dst:
                        cur, new = dst[k], params[k]
                        if isinstance(cur, mx.array):
                            if strict and not isinstance(new, mx.array):
                                raise ValueError(f"Received invalid type: {type(new).__name__}.")
                            dst[k] = new
                        else:
                            put(cur, new)
                    elif strict:
                        raise ValueError(f'Module does not have parameter named "{k}".')
            elif isinstance(params, list):
                for i, new in enumerate(params):
                    cur = dst[i]
                    if isinstance(cur, mx.array):
                        if strict and not isinstance(new, mx.array):
                            raise ValueError(f"Received invalid type: {type(new).__name__}.")
                        dst[i] = new
                    else:
                        put(cur, new)
            elif strict:
                raise ValueError(f"Received invalid type: {type(params).__name__}.")

        put(self, parameters)
        return self

    def update_modules(self, modules, strict=True):
        """Replaces submodules with those of `modules` (a tree as children() returns, or part
        of one). Returns the module."""
        def put(dst, mods):
            if isinstance(mods, dict):
                for k in mods:
                    if k in dst:
                        cur, new = dst[k], mods[k]
                        if isinstance(cur, Module) and isinstance(new, Module):
                            dst[k] = new
                        elif isinstance(cur, (dict, list)):
                            put(cur, new)
                        elif strict and new != {}:
                            raise ValueError(f"Received invalid type: {type(new).__name__}.")
                    elif strict:
                        raise ValueError(f'Module does not have sub-module named "{k}".')
            elif isinstance(mods, list):
                for i, new in enumerate(mods):
                    cur = dst[i]
                    if isinstance(cur, Module) and isinstance(new, Module):
                        dst[i] = new
                    elif isinstance(cur, (dict, list)):
                        put(cur, new)
                    elif strict and new != {}:
                        raise ValueError(f"Received invalid type: {type(new).__name__}.")
            elif strict:
                raise ValueError(f"Received invalid type: {type(mods).__name__}.")

        put(self, modules)
        return self

    def apply(self, map_fn, filter_fn=None):
        """Replaces every parameter kept by filter_fn (default: all) with map_fn(parameter)."""
        filter_fn = filter_fn or self.valid_parameter_filter
        return self.update(self.filter_and_map(filter_fn, map_fn))

    def apply_to_modules(self, apply_fn):
        """Calls apply_fn(path, module) for this module ("") and every submodule."""
        stack = [("", self)]
        while stack:
            prefix, mod = stack.pop()
            apply_fn(prefix, mod)
            prefix = "." + prefix if prefix else ""
            stack.extend(tree_flatten(mod.children(), prefix=prefix, is_leaf=self.is_module))
        return self

    def named_modules(self):
        """(path, module) for this module ("", first) and every submodule, in the order
        apply_to_modules visits them."""
        found = []
        self.apply_to_modules(lambda k, m: found.append((k, m)))
        return found

    def modules(self):
        """This module and every submodule, in named_modules' order."""
        return [m for _, m in self.named_modules()]

    def _check_keys(self, keys, strict):
        if isinstance(keys, str):
            keys = [keys]
        if strict:
            for k in keys:
                if k not in self:
                    raise KeyError(f"Module doesn't contain member {k}.")
        return keys

    def freeze(self, *, recurse=True, keys=None, strict=False):
        """Freezes parameters: they leave trainable_parameters(). keys (a name or a list)
        restricts it to those members; recurse applies it to the submodules too."""
        if keys is not None:
            keys = self._check_keys(keys, strict)

        def freeze_one(_, m):
            local = keys
            if local is None:
                local = [k for k, _ in tree_flatten(m.filter_and_map(
                    lambda mm, k, v: not isinstance(v, Module)
                    and mm.valid_parameter_filter(mm, k, v)))]
            m._no_grad.update(local)

        if recurse:
            self.apply_to_modules(freeze_one)
        else:
            freeze_one("", self)
        return self

    def unfreeze(self, *, recurse=True, keys=None, strict=False):
        """Unfreezes parameters (all, or the members named in keys)."""
        if keys is not None:
            keys = self._check_keys(keys, strict)

        def unfreeze_one(_, m):
            if keys is None:
                m._no_grad.clear()
            else:
                m._no_grad.difference_update(keys)

        if recurse:
            self.apply_to_modules(unfreeze_one)
        else:
            unfreeze_one("", self)
        return self

    def _set_training_mode(self, mode):
        self._training = mode

    def train(self, mode=True):
        """Sets training mode (mode=True) or evaluation mode in every submodule."""
        self.apply_to_modules(lambda _, m: m._set_training_mode(mode))
        return self

    def eval(self):
        """train(False)."""
        return self.train(False)

    def set_dtype(self, dtype, predicate=lambda d: mx.issubdtype(d, mx.floating)):
        """Casts every parameter whose dtype predicate accepts (default: floating) to dtype."""
        predicate = predicate or (lambda d: True)
        return self.apply(lambda x: x.astype(dtype) if predicate(x.dtype) else x)

    def load_weights(self, file_or_weights, strict=True):
        """Loads parameters from a .safetensors or .npz file, or a list of (path, array).
        With strict, extra, missing, non-array or wrongly shaped weights raise ValueError."""
        weights = file_or_weights
        if not isinstance(weights, (list, tuple)):
            weights = list(mx.load(weights).items())
        if strict:
            new = dict(weights)
            cur = dict(tree_flatten(self.parameters()))
            extras = new.keys() - cur.keys()
            if extras:
                raise ValueError(f"Received {len(extras)} parameters not in model: \n"
                                 f"{', '.join(sorted(extras))}.")
            missing = cur.keys() - new.keys()
            if missing:
                raise ValueError(f"Missing {len(missing)} parameters: \n"
                                 f"{', '.join(sorted(missing))}.")
            for k, v in cur.items():
                v_new = new[k]
                if not isinstance(v_new, mx.array):
                    raise ValueError(f"Expected mx.array but received {type(v_new)} "
                                     f"for parameter {k}")
                if tuple(v_new.shape) != tuple(v.shape):
                    raise ValueError(f"Expected shape {v.shape} but received shape "
                                     f"{v_new.shape} for parameter {k}")
        if len(weights) != 0:
            self.update(tree_unflatten(list(weights)), strict=False)
        return self

    def save_weights(self, file):
        """Saves the parameters, flattened to dotted paths, as .npz or .safetensors."""
        params = dict(tree_flatten(self.parameters()))
        name = str(file)
        if name.endswith(".npz"):
            mx.savez(file, **params)
        elif name.endswith(".safetensors"):
            mx.save_safetensors(file, params)
        else:
            raise ValueError(f"Unsupported file extension for {file}. Use '.npz' or "
                             "'.safetensors'.")
