"""nn.average_gradients (mlx.nn's): the mean of a gradient tree over a distributed group."""
import nuvec as mx
from nuvec.utils import tree_flatten, tree_unflatten

__all__ = ["average_gradients"]


def average_gradients(gradients, group=None, all_reduce_size=32 * 1024**2,
                      communication_stream=None):
    """The tree `gradients` (the same structure on every rank) averaged over `group` (None: the
    default group). Leaves of one dtype are concatenated (flattened) into buffers of at most
    `all_reduce_size` bytes, one all_sum each, then split back: fewer, larger messages (0 or less
    sends every leaf alone). On a size-1 group the tree is returned as it is.
    `communication_stream` is the stream the all_sums run on (None: the default one)."""
    group = group or mx.distributed.init()
    n = group.size()
    if n == 1:
        return gradients
    flat = tree_flatten(gradients)
    if not flat:
        return gradients
    out = [None] * len(flat)

    def reduce(batch):
        arrays = [flat[i][1] for i in batch]
        if len(arrays) == 1:
            s = mx.distributed.all_sum(arrays[0], group=group, stream=communication_stream)
            out[batch[0]] = s / n
            return
        shapes = [a.shape for a in arrays]
        sizes = [a.size for a in arrays]
        big = mx.concatenate([a.reshape(-1) for a in arrays])
        big = mx.distributed.all_sum(big, group=group, stream=communication_stream) / n
        at = 0
        for i, shape, size in zip(batch, shapes, sizes):
            out[i] = big[at:at + size].reshape(shape)
            at += size

    by_dtype = {}
    for i, (_, g) in enumerate(flat):
        by_dtype.setdefault(g.dtype, []).append(i)
    for indices in by_dtype.values():
        batch, nbytes = [], 0
        for i in indices:
            g = flat[i][1]
            if batch and (all_reduce_size <= 0 or nbytes + g.nbytes > all_reduce_size):
                reduce(batch)
                batch, nbytes = [], 0
            batch.append(i)
            nbytes += g.nbytes
        if batch:
            reduce(batch)
    return tree_unflatten([(k, v) for (k, _), v in zip(flat, out)])
