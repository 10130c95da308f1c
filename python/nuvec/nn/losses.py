"""Loss functions (mlx.nn.losses's names, formulas, defaults and checks); reduction is
"none", "mean" or "sum"."""
import math

import nuvec as mx

__all__ = ["cross_entropy", "binary_cross_entropy", "l1_loss", "mse_loss", "nll_loss",
           "gaussian_nll_loss", "kl_div_loss", "smooth_l1_loss", "triplet_loss",
           "hinge_loss", "huber_loss", "log_cosh_loss", "cosine_similarity_loss",
           "margin_ranking_loss"]


def _reduce(loss, reduction="none"):
    if reduction == "mean":
        return mx.mean(loss)
    if reduction == "sum":
        return mx.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError("Invalid reduction. Must be 'none', 'mean', or 'sum'.")


def _same_shape(a, b, what, name_a="Predictions", name_b="targets"):
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{name_a} shape {a.shape} does not match {name_b} shape "
                         f"{b.shape}.")


def cross_entropy(logits, targets, weights=None, axis=-1, label_smoothing=0.0,
                  reduction="none"):
    """logsumexp(logits) - the target's logit along axis; targets are class indices (one axis
    fewer) or probabilities (logits' shape). label_smoothing mixes in the uniform
    distribution; weights (the loss's shape) multiply the loss."""
    if label_smoothing < 0 or label_smoothing >= 1:
        raise ValueError(f"Label smoothing must in [0, 1), got {label_smoothing}.")
    probs = targets.ndim == logits.ndim
    if probs:
        if tuple(targets.shape) != tuple(logits.shape):
            raise ValueError(f"Targets shape {targets.shape} does not match logits shape "
                             f"{logits.shape}.")
        score = mx.sum(logits * targets, axis=axis)
    else:
        expected = list(logits.shape)
        if not expected:
            raise ValueError("Logits must have at least one dimension.")
        del expected[axis]
        if list(targets.shape) != expected:
            raise ValueError(f"Targets shape {targets.shape} does not match logits shape "
                             f"{logits.shape}.")
        score = mx.take_along_axis(logits, mx.expand_dims(targets, axis), axis).squeeze(axis)
    lse = mx.logsumexp(logits, axis=axis)
    if label_smoothing > 0:
        loss = lse - (1 - label_smoothing) * score \
            - label_smoothing * mx.mean(logits, axis=axis)
    else:
        loss = lse - score
    if weights is not None:
        if tuple(weights.shape) != tuple(loss.shape):
            raise ValueError(f"Weights with shape {weights.shape} is not the same as output "
                             f"loss with shape {loss.shape}.")
        loss = loss * weights
    return _reduce(loss, reduction)


def binary_cross_entropy(inputs, targets, weights=None, with_logits=True, reduction="mean"):
    """-(t log p + (1 - t) log(1 - p)), p = sigmoid(inputs) with_logits, else inputs (the
    logs clipped at -100); weights (inputs' shape) multiply the loss."""
    if tuple(inputs.shape) != tuple(targets.shape):
        raise ValueError(f"Inputs shape {inputs.shape} does not match targets shape "
                         f"{targets.shape}.")
    if with_logits:
        loss = mx.logaddexp(0.0, inputs) - inputs * targets
    else:
        log_p = mx.clip(mx.log(inputs), -100, None)
        log_q = mx.clip(mx.log(1 - inputs), -100, None)
        loss = -(targets * log_p + (1 - targets) * log_q)
    if weights is not None:
        if tuple(weights.shape) != tuple(loss.shape):
            raise ValueError(f"Weights with shape {weights.shape} is not the same as output "
                             f"loss with shape {loss.shape}.")
        loss = loss * weights
    return _reduce(loss, reduction)


def l1_loss(predictions, targets, reduction="mean"):
    """|predictions - targets|."""
    _same_shape(predictions, targets, "l1")
    return _reduce(mx.abs(predictions - targets), reduction)


def mse_loss(predictions, targets, reduction="mean"):
    """(predictions - targets) ** 2."""
    _same_shape(predictions, targets, "mse")
    return _reduce(mx.square(predictions - targets), reduction)


def nll_loss(inputs, targets, axis=-1, reduction="none"):
    """-inputs[target] along axis (inputs are log-probabilities); targets have the inputs'
    shape without that axis, which may be any one of them."""
    loss = -mx.take_along_axis(inputs, mx.expand_dims(targets, axis), axis).squeeze(axis)
    return _reduce(loss, reduction)


def gaussian_nll_loss(inputs, targets, vars, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(var) + (targets - inputs) ** 2 / var), var clipped below at eps; full adds
    0.5 * log(2 pi)."""
    if tuple(inputs.shape) != tuple(targets.shape):
        raise ValueError(f"Inputs shape {inputs.shape} does not match targets shape "
                         f"{targets.shape}.")
    if tuple(inputs.shape) != tuple(vars.shape):
        raise ValueError(f"Inputs shape {inputs.shape} does not match vars shape "
                         f"{vars.shape}.")
    v = mx.maximum(vars, eps)
    loss = 0.5 * (mx.log(v) + mx.square(targets - inputs) / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def kl_div_loss(inputs, targets, axis=-1, reduction="none"):
    """sum(exp(targets) * (targets - inputs)) along axis (both are log-probabilities)."""
    return _reduce(mx.sum(mx.exp(targets) * (targets - inputs), axis=axis), reduction)


def smooth_l1_loss(predictions, targets, beta=1.0, reduction="mean"):
    """0.5 * d ** 2 / beta where d = |predictions - targets| < beta, d - 0.5 * beta
    elsewhere."""
    _same_shape(predictions, targets, "smooth_l1")
    d = mx.abs(predictions - targets)
    loss = mx.where(d < beta, 0.5 * mx.square(d) / beta, d - 0.5 * beta)
    return _reduce(loss, reduction)


def triplet_loss(anchors, positives, negatives, axis=-1, p=2, margin=1.0, eps=1e-6,
                 reduction="none"):
    """max(||a - p|| - ||a - n|| + margin, 0) with the p-norms along axis, each
    (sum of |.| ** p + eps) ** (1 / p), as MLX."""
    def dist(d):
        return mx.power(mx.sum(mx.power(mx.abs(d), p), axis=axis) + eps, 1.0 / p)

    dp = dist(anchors - positives)
    dn = dist(anchors - negatives)
    return _reduce(mx.maximum(dp - dn + margin, 0), reduction)


def hinge_loss(inputs, targets, reduction="none"):
    """max(1 - inputs * targets, 0)."""
    return _reduce(mx.maximum(1 - inputs * targets, 0), reduction)


def huber_loss(inputs, targets, delta=1.0, reduction="none"):
    """0.5 * e ** 2 for |e| <= delta, delta * (|e| - 0.5 * delta) beyond."""
    e = mx.abs(inputs - targets)
    quad = mx.minimum(e, delta)
    return _reduce(0.5 * mx.square(quad) + delta * (e - quad), reduction)


def log_cosh_loss(inputs, targets, reduction="none"):
    """log(cosh(inputs - targets)), computed stably."""
    e = inputs - targets
    return _reduce(mx.logaddexp(e, -e) - math.log(2), reduction)


def cosine_similarity_loss(x1, x2, axis=1, eps=1e-8, reduction="none"):
    """x1 . x2 / max(||x1|| ||x2||, eps) along axis."""
    n1 = mx.sqrt(mx.sum(mx.square(x1), axis=axis))
    n2 = mx.sqrt(mx.sum(mx.square(x2), axis=axis))
    loss = mx.sum(x1 * x2, axis=axis) / mx.maximum(n1 * n2, eps)
    return _reduce(loss, reduction)


def margin_ranking_loss(inputs1, inputs2, targets, margin=0.0, reduction="none"):
    """max(0, -targets * (inputs1 - inputs2) + margin)."""
    if not (tuple(inputs1.shape) == tuple(inputs2.shape) == tuple(targets.shape)):
        raise ValueError(f"The shapes of the arguments do not match. The provided shapes are "
                         f"inputs1.shape={inputs1.shape}, inputs2.shape={inputs2.shape}, and "
                         f"targets.shape={targets.shape}.")
    return _reduce(mx.maximum(0, -targets * (inputs1 - inputs2) + margin), reduction)
