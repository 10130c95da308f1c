"""Optimizers with mlx.optimizers's names, arguments, state layout and update rules.

An optimizer's ``state`` is a tree: ``"step"`` (a uint64 count of the updates done),
``"learning_rate"`` and any other scheduled hyper-parameter (arrays), and beside them one dict
per parameter, at that parameter's place in the parameter tree, holding its own state ("m",
"v", ...). The state is a plain tree of arrays, so it can be saved (``tree_flatten`` and
``save_safetensors``) and assigned back (``tree_unflatten`` of ``load``'s dict).

A subclass implements ``init_single(parameter, state)`` (fills the parameter's state dict) and
``apply_single(gradient, parameter, state)`` (returns the new parameter, updating the dict).
"""
import math

from .. import _core as mx
from ..utils import tree_flatten, tree_map, tree_merge, tree_reduce, tree_unflatten

__all__ = ["Optimizer", "MultiOptimizer", "SGD", "RMSprop", "Adagrad", "AdaDelta", "Adam",
           "AdamW", "Adamax", "Lion", "Adafactor", "Muon", "clip_grad_norm"]


def _is_tree_node(x):
    return isinstance(x, (dict, list, tuple))


def _mirror_state(params, state):
    """`state` extended so that every leaf of `params` has a dict at its place (new places get
    an empty dict, existing dicts are kept); dicts are extended in place, lists rebuilt."""
    if isinstance(params, dict):
        for k, v in params.items():
            state[k] = _mirror_state(v, state[k]) if k in state else tree_map(lambda _: {}, v)
        return state
    if isinstance(params, (list, tuple)):
        old = list(state)
        out = [_mirror_state(p, s) for p, s in zip(params, old)]
        out += [tree_map(lambda _: {}, p) for p in params[len(old):]]
        return type(params)(out)
    return state


class Optimizer:
    """The base of all optimizers: applies a per-parameter rule (``apply_single``) over a tree
    of gradients. ``schedulers`` maps state names to schedules (callables of the step)."""

    def __init__(self, schedulers=None):
        self._initialized = False
        self._state = {"step": mx.array(0, mx.uint64)}
        self._schedulers = dict(schedulers) if schedulers else {}

    def update(self, model, gradients):
        """Apply `gradients` to `model`'s parameters: ``model.update(apply_gradients(...))``.
        `model` is an nn.Module (a tree itself) or any object with ``trainable_parameters()``
        and ``update(tree)``."""
        params = model if _is_tree_node(model) else model.trainable_parameters()
        model.update(self.apply_gradients(gradients, params))

    def init(self, parameters):
        """Create the state of every parameter of the tree that has none yet (optional: the
        first update does it; useful to see or load the state before training)."""
        self._state = _mirror_state(parameters, self._state)
        tree_map(lambda p, s: s or self.init_single(p, s), parameters, self._state)
        self._initialized = True

    def init_single(self, parameter, state):
        """Fill `state` (this parameter's dict) with its initial values."""
        raise NotImplementedError

    def apply_gradients(self, gradients, parameters):
        """The updated parameters, a new tree with the structure of `gradients` (`parameters`
        holds at least those places); advances the step and the schedules first."""
        if not self._initialized:
            self.init(gradients)
        for name, schedule in self._schedulers.items():
            self.state[name] = schedule(self.step)
        self.state["step"] = self.step + 1
        return tree_map(self.apply_single, gradients, parameters, self.state)

    def apply_single(self, gradient, parameter, state):
        """The new value of one parameter, updating `state` (its dict)."""
        raise NotImplementedError

    @property
    def state(self):
        """The optimizer's state tree (see the module's documentation)."""
        return self._state

    @state.setter
    def state(self, state):
        self._initialized = False
        self._state = state

    @property
    def step(self):
        return self.state["step"]

    @property
    def learning_rate(self):
        return self.state["learning_rate"]

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        self.state["learning_rate"] = mx.array(learning_rate)

    def _maybe_schedule(self, name, param):
        """Store the hyper-parameter `name` in the state: a callable is a schedule evaluated at
        the current step (and again at every update), anything else a constant array."""
        if callable(param):
            self._schedulers[name] = param
            value = param(self.step)
        else:
            value = mx.array(param)
        self.state[name] = value

    def _lr(self, gradient):
        return self.learning_rate.astype(gradient.dtype)


class MultiOptimizer(Optimizer):
    """Several optimizers, each for the parameters its filter accepts: ``filters[i](path,
    gradient)`` (a path as "layers.0.weight") selects optimizer i, the first match wins, and
    the last optimizer (which has no filter) takes the rest."""

    def __init__(self, optimizers, filters=[]):  # noqa: B006 (MLX's signature; never mutated)
        super().__init__()
        self._state = {}
        optimizers, filters = list(optimizers), list(filters)
        if len(filters) != len(optimizers) - 1:
            raise ValueError(f"MultiOptimizer: given {len(filters)} filters but "
                             f"{len(optimizers) - 1} needed.")
        self.optimizers = optimizers
        self.filters = filters + [lambda *args, **kwargs: True]

    def _split_dictionary(self, gradients):
        """`gradients` split into one tree per optimizer."""
        if len(self.optimizers) == 1:
            return [gradients]
        parts = [[] for _ in self.optimizers]
        for path, g in tree_flatten(gradients):
            for i, accepts in enumerate(self.filters):
                if accepts(path, g):
                    parts[i].append((path, g))
                    break
        return [tree_unflatten(p) for p in parts]

    def init(self, parameters):
        for opt, part in zip(self.optimizers, self._split_dictionary(parameters)):
            opt.init(part)

    def apply_gradients(self, gradients, parameters):
        tree = {}
        for opt, part in zip(self.optimizers, self._split_dictionary(gradients)):
            tree = tree_merge(tree, opt.apply_gradients(part, parameters))
        return tree

    @property
    def state(self):
        return {"states": [opt.state for opt in self.optimizers]}

    @state.setter
    def state(self, state):
        if (not isinstance(state, dict) or "states" not in state
                or len(state["states"]) != len(self.optimizers)):
            raise ValueError("MultiOptimizer: invalid state provided (expected "
                             f"{{'states': [{len(self.optimizers)} states]}})")
        for opt, s in zip(self.optimizers, state["states"]):
            opt.state = s

    @property
    def learning_rate(self):
        return self.optimizers[0].learning_rate

    @learning_rate.setter
    def learning_rate(self, learning_rate):
        for opt in self.optimizers:
            opt.learning_rate = learning_rate


class SGD(Optimizer):
    r"""Stochastic gradient descent: with weight decay :math:`\omega`, momentum :math:`\mu` and
    dampening :math:`\tau`, :math:`g \leftarrow g + \omega w`, :math:`v \leftarrow \mu v +
    (1 - \tau) g`, :math:`w \leftarrow w - \lambda v` (Nesterov: :math:`w \leftarrow w -
    \lambda (g + \mu v)`); without momentum :math:`w \leftarrow w - \lambda g`."""

    def __init__(self, learning_rate, momentum=0.0, weight_decay=0.0, dampening=0.0,
                 nesterov=False):
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening.")
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.dampening = dampening
        self.nesterov = nesterov

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        lr = self._lr(gradient)
        if self.momentum <= 0:
            return parameter - lr * gradient
        damped = (1 - self.dampening) * gradient if self.dampening > 0 else gradient
        v = self.momentum * state["v"] + damped
        state["v"] = v
        update = gradient + self.momentum * v if self.nesterov else v
        return parameter - lr * update


class RMSprop(Optimizer):
    r"""RMSprop: :math:`v \leftarrow \alpha v + (1 - \alpha) g^2`, :math:`w \leftarrow w -
    \lambda g / (\sqrt{v} + \epsilon)`."""

    def __init__(self, learning_rate, alpha=0.99, eps=1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.alpha = alpha
        self.eps = eps
        if alpha < 0.0:
            raise ValueError(f"RMSprop: alpha must be >= 0, {alpha} was provided instead")
        if eps < 0.0:
            raise ValueError(f"RMSprop: epsilon must be >= 0, {eps} was provided instead")

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        v = self.alpha * state["v"] + (1 - self.alpha) * mx.square(gradient)
        state["v"] = v
        return parameter - self._lr(gradient) * gradient / (mx.sqrt(v) + self.eps)


class Adagrad(Optimizer):
    r"""Adagrad: :math:`v \leftarrow v + g^2`, :math:`w \leftarrow w - \lambda g / (\sqrt{v} +
    \epsilon)`."""

    def __init__(self, learning_rate, eps=1e-8):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        if eps < 0.0:
            raise ValueError(f"Adagrad: epsilon must be >= 0, {eps} was provided instead")

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        v = state["v"] + mx.square(gradient)
        state["v"] = v
        return parameter - self._lr(gradient) * gradient / (mx.sqrt(v) + self.eps)


class AdaDelta(Optimizer):
    r"""AdaDelta with a learning rate: :math:`v \leftarrow \rho v + (1 - \rho) g^2`,
    :math:`\Delta = g \sqrt{u + \epsilon} / \sqrt{v + \epsilon}`, :math:`u \leftarrow \rho u +
    (1 - \rho) \Delta^2`, :math:`w \leftarrow w - \lambda \Delta`."""

    def __init__(self, learning_rate, rho=0.9, eps=1e-6):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.rho = rho
        self.eps = eps
        if rho < 0.0:
            raise ValueError(f"AdaDelta: rho must be >= 0, {rho} was provided instead")
        if eps < 0.0:
            raise ValueError(f"AdaDelta: epsilon must be >= 0, {eps} was provided instead")

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)
        state["u"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        rho, eps = self.rho, self.eps
        v = rho * state["v"] + (1 - rho) * mx.square(gradient)
        delta = mx.sqrt(state["u"] + eps) / mx.sqrt(v + eps) * gradient
        u = rho * state["u"] + (1 - rho) * mx.square(delta)
        state["v"], state["u"] = v, u
        return parameter - self._lr(gradient) * delta


class Adam(Optimizer):
    r"""Adam: :math:`m \leftarrow \beta_1 m + (1 - \beta_1) g`, :math:`v \leftarrow \beta_2 v
    + (1 - \beta_2) g^2`, :math:`w \leftarrow w - \lambda m / (\sqrt{v} + \epsilon)`; with
    ``bias_correction``, :math:`m` and :math:`v` are divided by :math:`1 - \beta_1^t` and
    :math:`1 - \beta_2^t` (t: the step, counted from 1) in the last formula."""

    def __init__(self, learning_rate, betas=[0.9, 0.999], eps=1e-8,  # noqa: B006 (MLX's)
                 bias_correction=False):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.eps = eps
        self.bias_correction = bias_correction

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        b1, b2 = self.betas
        lr = self._lr(gradient)
        m = b1 * state["m"] + (1 - b1) * gradient
        v = b2 * state["v"] + (1 - b2) * mx.square(gradient)
        state["m"], state["v"] = m, v
        if not self.bias_correction:
            return parameter - lr * m / (mx.sqrt(v) + self.eps)
        t = self.step
        step_size = (lr / (1 - b1 ** t)).astype(gradient.dtype)
        v_scale = mx.rsqrt(1 - b2 ** t).astype(gradient.dtype)
        return parameter - step_size * m / (mx.sqrt(v) * v_scale + self.eps)


class AdamW(Adam):
    r"""Adam with decoupled weight decay :math:`\lambda_w`: the parameter is first scaled by
    :math:`1 - \lambda \lambda_w`, then Adam's update is applied."""

    def __init__(self, learning_rate, betas=[0.9, 0.999], eps=1e-8,  # noqa: B006 (MLX's)
                 weight_decay=0.01, bias_correction=False):
        super().__init__(learning_rate=learning_rate, betas=betas, eps=eps,
                         bias_correction=bias_correction)
        self.weight_decay = weight_decay

    def apply_single(self, gradient, parameter, state):
        decayed = parameter * (1 - self._lr(gradient) * self.weight_decay)
        return super().apply_single(gradient, decayed, state)


class Adamax(Adam):
    r"""Adamax: :math:`m \leftarrow \beta_1 m + (1 - \beta_1) g`, :math:`v \leftarrow
    \max(\beta_2 v, |g|)`, :math:`w \leftarrow w - \lambda m / (v + \epsilon)`."""

    def __init__(self, learning_rate, betas=[0.9, 0.999], eps=1e-8):  # noqa: B006 (MLX's)
        super().__init__(learning_rate, betas, eps)
        if not 0.0 <= eps:
            raise ValueError(f"Adamax: epsilon must be >= 0, {eps} was provided instead")

    def apply_single(self, gradient, parameter, state):
        b1, b2 = self.betas
        m = b1 * state["m"] + (1 - b1) * gradient
        v = mx.maximum(b2 * state["v"], mx.abs(gradient))
        state["m"], state["v"] = m, v
        return parameter - self._lr(gradient) * m / (v + self.eps)


class Lion(Optimizer):
    r"""Lion: :math:`c = \beta_1 m + (1 - \beta_1) g`, :math:`m \leftarrow \beta_2 m + (1 -
    \beta_2) g`, :math:`w \leftarrow w (1 - \eta \lambda) - \eta\, \mathrm{sign}(c)`."""

    def __init__(self, learning_rate, betas=[0.9, 0.99], weight_decay=0.0):  # noqa: B006
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.betas = betas
        self.weight_decay = weight_decay

    def init_single(self, parameter, state):
        state["m"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        b1, b2 = self.betas
        lr = self._lr(gradient)
        c = b1 * state["m"] + (1 - b1) * gradient
        state["m"] = b2 * state["m"] + (1 - b2) * gradient
        if self.weight_decay > 0:
            parameter = (1 - lr * self.weight_decay) * parameter
        return parameter - lr * mx.sign(c)


def _rms(x):
    return mx.sqrt(mx.mean(mx.square(x)))


class Adafactor(Optimizer):
    r"""Adafactor (Shazeer and Stern, 2018): the second moment of a matrix (the last two axes
    of a parameter of two or more) is kept factored as row and column means; the update is
    clipped to an RMS of ``clip_threshold``, scaled by the relative step size
    (:math:`\min(10^{-2}, 1/\sqrt{t})`, or with ``warmup_init`` :math:`\min(10^{-6} t,
    1/\sqrt{t})`, unless ``relative_step`` is off and ``learning_rate`` is used) times
    :math:`\max(\epsilon_2, \mathrm{RMS}(w))` when ``scale_parameter``; the running average
    decays with :math:`\beta_2 = 1 - t^{\text{decay\_rate}}`."""

    def __init__(self, learning_rate=None, eps=(1e-30, 1e-3), clip_threshold=1.0,
                 decay_rate=-0.8, beta_1=None, weight_decay=0.0, scale_parameter=True,
                 relative_step=True, warmup_init=False):
        super().__init__()
        if learning_rate is not None:
            self._maybe_schedule("learning_rate", learning_rate)
        self.eps = eps
        self.clip_threshold = clip_threshold
        self.decay_rate = decay_rate
        self.beta_1 = beta_1
        self.weight_decay = weight_decay
        self.scale_parameter = scale_parameter
        self.relative_step = relative_step
        self.warmup_init = warmup_init

    def init_single(self, parameter, state):
        if parameter.ndim >= 2:
            shape = parameter.shape
            state["exp_avg_sq_row"] = mx.zeros(shape[:-1], dtype=parameter.dtype)
            state["exp_avg_sq_col"] = mx.zeros(shape[:-2] + shape[-1:], dtype=parameter.dtype)
        else:
            state["exp_avg_sq"] = mx.zeros_like(parameter)
        if self.beta_1 is not None:
            state["exp_avg"] = mx.zeros_like(parameter)

    def _step_size(self, step, parameter_rms):
        if self.relative_step:
            floor = 1e-6 * step if self.warmup_init else 1e-2
            size = mx.minimum(floor, mx.rsqrt(step))
        else:
            size = self.learning_rate
        size = size.astype(parameter_rms.dtype)
        if self.scale_parameter:
            return mx.maximum(self.eps[1], parameter_rms) * size
        return size

    def apply_single(self, gradient, parameter, state):
        step = self.step
        parameter_rms = _rms(parameter)
        lr = self._step_size(step, parameter_rms)
        beta_2 = 1.0 - (step ** self.decay_rate).astype(parameter_rms.dtype)
        sq = mx.square(gradient) + self.eps[0]
        if gradient.ndim >= 2:
            row = beta_2 * state["exp_avg_sq_row"] + (1 - beta_2) * mx.mean(sq, axis=-1)
            col = beta_2 * state["exp_avg_sq_col"] + (1 - beta_2) * mx.mean(sq, axis=-2)
            state["exp_avg_sq_row"], state["exp_avg_sq_col"] = row, col
            # The factored estimate of 1/sqrt(v): rows normalized by their mean, times columns.
            r = mx.rsqrt(row / mx.mean(row, axis=-1, keepdims=True))
            c = mx.rsqrt(col)
            update = mx.expand_dims(r, -1) * mx.expand_dims(c, -2) * gradient
        else:
            v = beta_2 * state["exp_avg_sq"] + (1 - beta_2) * sq
            state["exp_avg_sq"] = v
            update = mx.rsqrt(v) * gradient
        update = update / mx.maximum(1.0, _rms(update) / self.clip_threshold)
        update = lr * update
        if self.beta_1 is not None:
            update = self.beta_1 * state["exp_avg"] + (1 - self.beta_1) * update
            state["exp_avg"] = update
        if self.weight_decay != 0:
            parameter = parameter + parameter * (-self.weight_decay * lr)
        return parameter - update


def _orthogonalize(x, steps):
    """The Newton-Schulz iteration (quintic, Muon's coefficients) toward the nearest
    semi-orthogonal matrix of a 2-D `x`, in bfloat16 as Muon's reference does."""
    a, b, c = 3.4445, -4.7750, 2.0315
    x = x.astype(mx.bfloat16)
    tall = x.shape[-2] > x.shape[-1]
    if tall:
        x = x.T
    x = x / (mx.sqrt(mx.sum(mx.square(x), keepdims=True)) + 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        poly = b * gram + c * (gram @ gram)
        x = a * x + poly @ x
    return x.T if tall else x


class Muon(Optimizer):
    r"""Muon (momentum orthogonalized by Newton-Schulz): SGD momentum (:math:`v \leftarrow \mu
    v + (1 - \mu) g`, Nesterov: :math:`(1 - \mu) g + \mu v`) whose update of a parameter of two
    or more axes (flattened to 2-D after the first) is orthogonalized by ``ns_steps``
    Newton-Schulz iterations and scaled by :math:`\sqrt{\max(1, rows / cols)}`; weight decay is
    added to the gradient."""

    def __init__(self, learning_rate, momentum=0.95, weight_decay=0.01, nesterov=True,
                 ns_steps=5):
        super().__init__()
        self._maybe_schedule("learning_rate", learning_rate)
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.nesterov = nesterov
        self.ns_steps = ns_steps

    def init_single(self, parameter, state):
        state["v"] = mx.zeros_like(parameter)

    def apply_single(self, gradient, parameter, state):
        mu = self.momentum
        if self.weight_decay != 0:
            gradient = gradient + self.weight_decay * parameter
        v = mu * state["v"] + (1 - mu) * gradient
        state["v"] = v
        update = gradient * (1 - mu) + v * mu if self.nesterov else v
        lr = self._lr(gradient)
        if update.ndim >= 2:
            shape = update.shape
            flat = mx.reshape(update, (shape[0], -1)) if update.ndim > 2 else update
            update = mx.reshape(_orthogonalize(flat, self.ns_steps), shape)
            lr = lr * math.sqrt(max(1, shape[-2] / shape[-1]))
        return parameter - lr * update.astype(gradient.dtype)


def clip_grad_norm(grads, max_norm):
    """(`grads` scaled so that their global L2 norm is at most `max_norm`, that norm before
    scaling). The norm is in the gradients' dtype."""
    total = mx.sqrt(tree_reduce(lambda acc, g: acc + mx.sum(mx.square(g)), grads, 0.0))
    scale = mx.minimum(max_norm / (total + 1e-6), 1.0)
    return tree_map(lambda g: g * scale, grads), total
