"""Parameter initializers (mlx.nn.init's): each returns a function filling an array's shape."""
import math

import nuvec as mx

__all__ = ["constant", "normal", "uniform", "identity", "glorot_normal", "glorot_uniform",
           "he_normal", "he_uniform", "sparse", "orthogonal"]


def constant(value, dtype=mx.float32):
    """a -> an array of a's shape filled with value."""
    return lambda a: mx.full(a.shape, value, dtype=dtype)


def normal(mean=0.0, std=1.0, dtype=mx.float32):
    """a -> samples of N(mean, std**2) of a's shape."""
    return lambda a: mx.random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)


def uniform(low=0.0, high=1.0, dtype=mx.float32):
    """a -> samples of U(low, high) of a's shape."""
    return lambda a: mx.random.uniform(low, high, a.shape, dtype=dtype)


def identity(dtype=mx.float32):
    """a (square, 2-D) -> the identity matrix of its size."""
    def init(a):
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise ValueError(f"The input array must be a square matrix but got shape {a.shape}.")
        return mx.eye(a.shape[0], dtype=dtype)
    return init


def _fans(x):
    if x.ndim < 2:
        raise ValueError("Glorot / He initialization requires at least 2 dimensional input "
                         f"but input with {x.ndim} dimensions.")
    fan_in, fan_out = x.shape[-1], x.shape[0]
    if x.ndim > 2:
        field = math.prod(x.shape[1:-1])
        fan_in, fan_out = fan_in * field, fan_out * field
    return fan_in, fan_out


def glorot_normal(dtype=mx.float32):
    """(a, gain=1.0) -> N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    def init(a, gain=1.0):
        fan_in, fan_out = _fans(a)
        std = gain * math.sqrt(2.0 / (fan_in + fan_out))
        return mx.random.normal(shape=a.shape, scale=std, dtype=dtype)
    return init


def glorot_uniform(dtype=mx.float32):
    """(a, gain=1.0) -> U(-l, l) with l = gain * sqrt(6 / (fan_in + fan_out))."""
    def init(a, gain=1.0):
        fan_in, fan_out = _fans(a)
        limit = gain * math.sqrt(6.0 / (fan_in + fan_out))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)
    return init


def _fan(a, mode):
    fan_in, fan_out = _fans(a)
    if mode == "fan_in":
        return fan_in
    if mode == "fan_out":
        return fan_out
    raise ValueError(f"Invalid mode: {mode}. Valid modes are: fan_in, fan_out")


def he_normal(dtype=mx.float32):
    """(a, mode="fan_in", gain=1.0) -> N(0, std**2) with std = gain / sqrt(fan)."""
    def init(a, mode="fan_in", gain=1.0):
        std = gain / math.sqrt(_fan(a, mode))
        return mx.random.normal(shape=a.shape, scale=std, dtype=dtype)
    return init


def he_uniform(dtype=mx.float32):
    """(a, mode="fan_in", gain=1.0) -> U(-l, l) with l = gain * sqrt(3 / fan)."""
    def init(a, mode="fan_in", gain=1.0):
        limit = gain * math.sqrt(3.0 / _fan(a, mode))
        return mx.random.uniform(-limit, limit, a.shape, dtype=dtype)
    return init


def sparse(sparsity, mean=0.0, std=1.0, dtype=mx.float32):
    """a (2-D) -> N(mean, std**2) samples with ceil(sparsity * columns) random zeros in every
    row."""
    def init(a):
        if a.ndim != 2:
            raise ValueError("Only tensors with 2 dimensions are supported")
        rows, cols = a.shape
        zeros = int(math.ceil(sparsity * cols))
        order = mx.argsort(mx.random.uniform(shape=a.shape), axis=1)
        out = mx.random.normal(shape=a.shape, scale=std, loc=mean, dtype=dtype)
        if zeros > 0:
            out[mx.arange(rows).reshape(rows, 1), order[:, :zeros]] = 0
        return out
    return init


def _orthonormal(n):
    """Q of the QR factorization of an (n, n) standard normal matrix, R's diagonal positive
    (Gram-Schmidt, twice for accuracy), as float32."""
    a = mx.random.normal(shape=(n, n))
    cols = []
    for j in range(n):
        v = a[:, j]
        for _ in range(2):
            if cols:
                q = mx.stack(cols, axis=1)
                v = v - q @ (q.T @ v)
        v = v / mx.sqrt(mx.sum(v * v))
        mx.eval(v)
        cols.append(v)
    return mx.stack(cols, axis=1)


def orthogonal(gain=1.0, dtype=mx.float32):
    """a (2-D) -> gain * an orthogonal matrix (rows or columns orthonormal, whichever are
    fewer), the Q factor of a Gaussian matrix."""
    def init(a):
        if a.ndim != 2:
            raise ValueError(f"Orthogonal initialization requires a 2D array but got a "
                             f"{a.ndim}D array.")
        rows, cols = a.shape
        q = _orthonormal(max(rows, cols))
        q = q[:rows, :] if rows < cols else q[:, :cols]
        return (gain * q).astype(dtype)
    return init
