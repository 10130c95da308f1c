"""One rank of python/tests/test_distributed.py's multi-process tests (started by
tools/nuvec-launch): nuvec.distributed's bindings with gradients and vmap, checked against
NumPy on every rank. Exits non-zero on the first failed check."""
import numpy as np

import nuvec as mx

d = mx.distributed
g = d.init(strict=True)
r, n = g.rank(), g.size()
assert repr(g) == f"Group(rank {r} of {n})", repr(g)
assert d.init() == g


def data(seed, shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


xs = [data(k, (2 * n, 3)) for k in range(n)]
x = mx.array(xs[r])
total = sum(xs)
np.testing.assert_allclose(np.array(d.all_sum(x)), total, rtol=1e-5)
np.testing.assert_array_equal(np.array(d.all_gather(x)), np.concatenate(xs))
np.testing.assert_allclose(np.array(d.sum_scatter(x)), total[2 * r:2 * r + 2], rtol=1e-5)
np.testing.assert_array_equal(np.array(d.all_max(x)), np.max(np.stack(xs), 0))
np.testing.assert_array_equal(np.array(d.all_min(x, group=g)), np.min(np.stack(xs), 0))

# Gradients: all_sum's vjp sums the cotangents over the group, all_gather's takes this rank's
# rows, sum_scatter's gathers; every rank uses the cotangent w_r, so the sums are known.
ws = [data(100 + k, (2 * n, 3)) for k in range(n)]
w = mx.array(ws[r])
gs = mx.grad(lambda x: (d.all_sum(x) * w).sum())(x)
np.testing.assert_allclose(np.array(gs), sum(ws), rtol=1e-5)
wg = [data(200 + k, (2 * n * n, 3)) for k in range(n)]
gg = mx.grad(lambda x: (d.all_gather(x) * mx.array(wg[r])).sum())(x)
np.testing.assert_array_equal(np.array(gg), wg[r][2 * n * r:2 * n * (r + 1)])
wsc = [data(300 + k, (2, 3)) for k in range(n)]
gsc = mx.grad(lambda x: (d.sum_scatter(x) * mx.array(wsc[r])).sum())(x)
np.testing.assert_array_equal(np.array(gsc), np.concatenate(wsc))
gm = mx.grad(lambda x: (d.all_max(x) * w).sum())(x)
mask = xs[r] == np.max(np.stack(xs), 0)
np.testing.assert_allclose(np.array(gm), np.where(mask, sum(ws), 0), rtol=1e-5)
gsg = mx.grad(lambda x: (d.sum_gradients(x) * w).sum())(x)
np.testing.assert_allclose(np.array(gsg), sum(ws), rtol=1e-5)

# vmap: the batch axis stays batched; each batch element is its own collective.
bs = [data(400 + k, (4, 2 * n, 3)) for k in range(n)]
b = mx.array(bs[r])
np.testing.assert_allclose(np.array(mx.vmap(d.all_sum)(b)), sum(bs), rtol=1e-5)
vg = mx.vmap(d.all_gather, in_axes=1, out_axes=0)(b)
np.testing.assert_array_equal(np.array(vg), np.concatenate([np.swapaxes(v, 0, 1) for v in bs], 1))
vs = mx.vmap(d.sum_scatter)(b)
np.testing.assert_allclose(np.array(vs), sum(bs)[:, 2 * r:2 * r + 2], rtol=1e-5)
sc = mx.vmap(d.all_gather)(mx.array(np.arange(3, dtype=np.float32) + 10 * r))
np.testing.assert_array_equal(np.array(sc), np.stack([np.arange(3) + 10 * k for k in range(n)], 1))

# send / recv / recv_like around the ring.
nxt, prv = (r + 1) % n, (r - 1) % n
if r % 2 == 0:
    mx.eval(d.send(x, nxt))
    got = d.recv_like(x, prv)
else:
    got = d.recv(x.shape, x.dtype, prv)
    mx.eval(got)
    mx.eval(d.send(x, nxt))
np.testing.assert_array_equal(np.array(got), xs[prv])

# nn.average_gradients: leaves batched by dtype into all_sums of at most all_reduce_size bytes.
tree = {"w": mx.array(xs[r]), "b": [mx.array(np.float32(r)), mx.array(np.arange(3) + r)]}
for size in (0, 64, 1 << 20):
    avg = mx.nn.average_gradients(tree, all_reduce_size=size)
    np.testing.assert_allclose(np.array(avg["w"]), total / n, rtol=1e-5)
    np.testing.assert_allclose(np.array(avg["b"][0]), (n - 1) / 2, rtol=1e-6)
    np.testing.assert_allclose(np.array(avg["b"][1]), np.arange(3) + (n - 1) / 2, rtol=1e-6)

sub = g.split(r % 2)
assert sub.size() == len(range(r % 2, n, 2)), sub

# A Group is a static argument of compile (D38): the same group replays the trace, another
# group is another trace; a group's hash stays what it was once the group is closed.
traces = []


def reduce_over(x, group):
    traces.append(group)
    return d.all_sum(x, group=group) * 2


fn = mx.compile(reduce_over)
for _ in range(2):
    np.testing.assert_allclose(np.array(fn(x, g)), 2 * total, rtol=1e-5)
assert len(traces) == 1, traces
members = list(range(r % 2, n, 2))
np.testing.assert_allclose(np.array(fn(x, sub)), 2 * sum(xs[k] for k in members), rtol=1e-5)
assert len(traces) == 2, traces
h, made = hash(sub), repr(sub)
sub.close()
assert hash(sub) == h and sub == sub, made
g.health()
mx.eval(d.all_sum(x))
print(f"rank {r}: ok", flush=True)
