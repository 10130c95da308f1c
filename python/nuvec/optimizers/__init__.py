"""nuvec.optimizers: mlx.optimizers's optimizers, learning-rate schedules and clip_grad_norm
over nuvec arrays (``import nuvec.optimizers as optim``)."""
from .optimizers import (SGD, AdaDelta, Adafactor, Adagrad, Adam, Adamax, AdamW, Lion,  # noqa: F401
                         MultiOptimizer, Muon, Optimizer, RMSprop, clip_grad_norm)
from .schedulers import (cosine_decay, exponential_decay, join_schedules,  # noqa: F401
                         linear_schedule, step_decay)
