"""Learning-rate schedules (mlx.optimizers's names and semantics): functions of the step (an
array, the optimizer's step count) returning the value at that step as an array. An optimizer
given one as its learning rate evaluates it at every update."""
import math

from .. import _core as mx

__all__ = ["exponential_decay", "step_decay", "cosine_decay", "linear_schedule",
           "join_schedules"]


def exponential_decay(init, decay_rate):
    """The schedule ``init * decay_rate ** step``."""
    def schedule(step):
        return init * decay_rate ** step

    return schedule


def step_decay(init, decay_rate, step_size):
    """The schedule ``init * decay_rate ** (step // step_size)``: decays every step_size
    steps."""
    def schedule(step):
        return init * decay_rate ** (step // step_size)

    return schedule


def cosine_decay(init, decay_steps, end=0.0):
    """Half a cosine from ``init`` at step 0 to ``end`` at ``decay_steps``, constant after:
    ``end + (init - end) * (1 + cos(pi * min(step, decay_steps) / decay_steps)) / 2``."""
    def schedule(step):
        s = mx.minimum(step, decay_steps)
        return end + 0.5 * (1.0 + mx.cos((math.pi / decay_steps) * s)) * (init - end)

    return schedule


def linear_schedule(init, end, steps):
    """A straight line from ``init`` at step 0 to ``end`` at ``steps``, constant after."""
    if steps < 1:
        raise ValueError(f"linear_schedule: steps must be greater than 0, but got {steps}.")

    def schedule(step):
        return mx.minimum(step, steps) * ((end - init) / steps) + init

    return schedule


def join_schedules(schedules, boundaries):
    """One schedule made of several: ``schedules[i + 1]`` takes over at ``boundaries[i]`` and
    sees the steps counted from that boundary. ``len(boundaries)`` must be
    ``len(schedules) - 1``."""
    schedules, boundaries = list(schedules), list(boundaries)
    if len(schedules) == 0:
        raise ValueError("join_schedules: must provide at least 1 schedule.")
    if len(schedules) != len(boundaries) + 1:
        raise ValueError(f"join_schedules: received {len(boundaries)} boundaries but "
                         f"expected {len(schedules) - 1}.")

    def schedule(step):
        out = schedules[0](step)
        for boundary, later in zip(boundaries, schedules[1:]):
            out = mx.where(step < boundary, out, later(step - boundary))
        return out

    return schedule
