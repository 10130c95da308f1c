"""nuvec.random.multivariate_normal, composed over nuvec's core as MLX defines it: standard
normal draws of shape ``shape + (n,)`` (random.normal with the same key, so the draws are
MLX's) times the symmetric square root of cov, U diag(sqrt(S)) Vt from its SVD, plus the
mean. The square root does not depend on the SVD's sign conventions, so samples agree with
MLX's to float32 rounding."""
from . import _core

_ERR = "[multivariate_normal] "


def multivariate_normal(mean, cov, shape=(), dtype=_core.float32, key=None, stream=None):
    """Jointly normal samples of mean (..., n) and positive semi-definite covariance cov
    (..., n, n); the result has shape ``broadcast(shape, mean.shape[:-1], cov.shape[:-2]) +
    (n,)``. Only float32 is supported, as in MLX."""
    mean = mean if isinstance(mean, _core.array) else _core.array(mean)
    cov = cov if isinstance(cov, _core.array) else _core.array(cov)
    if dtype != _core.float32:
        raise ValueError(_ERR + "dtype must be float32.")
    if mean.ndim < 1:
        raise ValueError(_ERR + "mean must have at least one dimension.")
    if cov.ndim < 2:
        raise ValueError(_ERR + "cov must have at least two dimensions.")
    n = mean.shape[-1]
    if cov.shape[-1] != n:
        raise ValueError(_ERR + f"mean and cov must have compatible shapes (mean {mean.shape}, "
                         f"cov {cov.shape}).")
    if cov.shape[-2] != cov.shape[-1]:
        raise ValueError(_ERR + f"last two dimensions of cov must be equal (cov {cov.shape}).")
    shape = tuple(shape)
    batch = _core.broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    if shape:
        batch = _core.broadcast_shapes(shape, batch)
    mean = mean.astype(_core.float32)
    cov = cov.astype(_core.float32)
    # The SVD runs on the CPU (as MLX's); the rest on the caller's stream.
    u, s, vt = _core.linalg.svd(cov, stream=_core.cpu)
    std = _core.matmul(u * _core.expand_dims(_core.sqrt(s), -2), vt, stream=stream)
    z = _core.random.normal(tuple(batch) + (n,), dtype=_core.float32, key=key, stream=stream)
    return _core.add(mean, _core.squeeze(_core.matmul(_core.expand_dims(z, -2), std, stream=stream),
                                         -2, stream=stream), stream=stream)
