"""Reference counting: 10^5 calls through every path (ops, operators, indexing, conversions,
transforms) leak nothing — nuvec's active memory and Python's reference counts come back."""
import gc
import sys

import numpy as np

import nuvec as nv


def steady(fn, n):
    """Runs fn n times; returns the growth of nuvec's active memory and of the refcounts of
    fn's inputs."""
    fn()
    gc.collect()
    nv.clear_cache()
    base = nv.get_active_memory()
    for _ in range(n):
        fn()
    gc.collect()
    nv.clear_cache()
    return nv.get_active_memory() - base


def test_1e5_op_calls_leak_nothing():
    x = nv.ones((8,))
    y = nv.arange(8.0)
    npx = np.ones(4, np.float32)
    before = (sys.getrefcount(x), sys.getrefcount(y), sys.getrefcount(npx))

    def calls():
        z = x * 0.5 + y
        z = nv.maximum(z, 1.0)[1:5]
        z = z.sum(axis=0)
        nv.eval(z)
        w = nv.array(npx)
        w[1] = 2.0
        _ = w.tolist()
        _ = repr(w)
        _ = np.asarray(x)

    assert steady(calls, 20000) == 0
    assert steady(lambda: nv.eval([x + i for i in range(5)]), 20000) == 0
    assert (sys.getrefcount(x), sys.getrefcount(y), sys.getrefcount(npx)) == before


def test_transforms_and_errors_leak_nothing():
    x = nv.array([1.0, 2.0, 3.0])
    g = nv.grad(lambda a: (a * a).sum())
    before = sys.getrefcount(x)

    def calls():
        nv.eval(g(x))
        try:
            x + nv.ones((2,))
        except ValueError:
            pass
        nv.eval(nv.vmap(lambda a: a * 2)(x))

    assert steady(calls, 10000) == 0
    assert sys.getrefcount(x) == before
    assert sys.getrefcount(g) == 2


def test_argnames_random_and_file_objects_leak_nothing():
    import io

    x = nv.array([1.0, 2.0, 3.0])
    w = {"a": nv.array([0.5]), "b": [nv.array([2.0, 1.0, 0.0])]}
    g = nv.value_and_grad(lambda x, *, w: (x * w["a"] + w["b"][0]).sum(), argnums=0, argnames="w")
    key = nv.random.key(1)
    before = (sys.getrefcount(x), sys.getrefcount(w), sys.getrefcount(key))

    def calls():
        nv.eval(g(x, w=w))
        try:
            g(x)
        except ValueError:
            pass
        nv.eval(nv.random.normal((4,), loc=x[:1], key=key), nv.random.uniform(x, 5, (3,), key=key))
        try:
            nv.random.uniform(x, 5, (2,), key=key)
        except ValueError:
            pass
        f = io.BytesIO()
        nv.save(f, x)
        f.seek(0)
        nv.eval(nv.load(f, format="npy"))
        try:
            nv.load(f, format="npz")
        except OSError:
            pass

    assert steady(calls, 2000) == 0
    assert (sys.getrefcount(x), sys.getrefcount(w), sys.getrefcount(key)) == before
