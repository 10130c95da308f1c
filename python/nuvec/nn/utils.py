"""nn.value_and_grad and nn.checkpoint (mlx.nn's): transforms of functions of a model."""
from functools import wraps

import nuvec as mx

__all__ = ["value_and_grad", "checkpoint"]


def value_and_grad(model, fn):
    """A function returning (fn(*args, **kwargs), gradients) where the gradients are taken
    with respect to model.trainable_parameters() (a tree of the same structure). While fn
    runs, the model holds the traced parameters, so fn may simply call the model."""
    def inner(params, *args, **kwargs):
        model.update(params)
        return fn(*args, **kwargs)

    vg = mx.value_and_grad(inner)

    @wraps(fn)
    def wrapped(*args, **kwargs):
        return vg(model.trainable_parameters(), *args, **kwargs)

    return wrapped


def checkpoint(module, fn=None):
    """fn (default: the module's __call__) wrapped so that its intermediate values are
    recomputed in the backward pass instead of being kept (mx.checkpoint), with the
    module's trainable parameters as inputs."""
    if fn is None:
        fn = module.__call__

    def inner(params, *args, **kwargs):
        module.update(params)
        return fn(*args, **kwargs)

    ck = mx.checkpoint(inner)

    @wraps(fn)
    def wrapped(*args, **kwargs):
        return ck(module.trainable_parameters(), *args, **kwargs)

    return wrapped
