"""Indexing as MLX and NumPy: ints, slices with any step, None, Ellipsis, integer arrays
(adjacent or not, with slices), item assignment and x.at[...] updates, against NumPy."""
import numpy as np
import pytest

import nuvec as nv
from conftest import assert_close, rand, sample

class _Key:
    def __getitem__(self, k):
        return k


K = _Key()  # K[1:3, None] gives the key as Python builds it

KEYS = [
    "0", "-1", "1:3", "::-1", "::-2", "-2:0:-1", "5:1:-2", "1, 2", "-1, ::2", "..., 1", "None",
    "None, ..., None", "1, None, 2", "[0, 2]", "[[0, 1], [2, 2]]", "[0, 2], 1:3", ":, [1, 3]",
    "[0, 2], :, None", "None, [0, 2], [1, 3]", "[0, 2], ..., [1, 0]", "0, [1, 2]",
    "[2, 0], 1, [0, 3]", "1:, [0, 2], 2", "np.array([-1, 0])", "..., [3, 0]", "(), ",
    "[0, 1], :, [2, 3]", ":, :, ::-1", "::2, None, [1, 0]",
]


@pytest.mark.parametrize("key", KEYS)
def test_getitem_matches_numpy(key, rng):
    a = rand(rng, (4, 5, 6), "int32")
    x = nv.array(a)
    k = eval(f"K[{key}]") if key != "(), " else ()
    nk = k
    kk = tuple(nv.array(e) if isinstance(e, (list, np.ndarray)) else e for e in (k if isinstance(k, tuple) else (k,)))
    got = x[kk if isinstance(k, tuple) else kk[0]]
    assert_close(np.array(got), a[nk])


def test_getitem_views_and_dtypes(rng):
    for name in sample(["float16", "bfloat16", "float64", "complex64", "bool_", "uint64"], 3, "gi"):
        a = rand(rng, (5, 4), name)
        x = nv.array(a, getattr(nv, name))
        assert_close(np.array(x[::-1, 1:]), a[::-1, 1:], name)
        assert_close(np.array(x[nv.array([4, 0])]), a[[4, 0]], name)
    t = nv.array(rand(rng, (3, 4), "float32")).T
    assert_close(np.array(t[1:, ::-1]), np.array(t)[1:, ::-1])


def test_getitem_errors():
    x = nv.arange(12).reshape(3, 4)
    with pytest.raises(ValueError, match="boolean"):
        x[x > 5]
    with pytest.raises(ValueError, match="Cannot index"):
        x[1.0]
    with pytest.raises(ValueError, match="Cannot index"):
        x["a"]
    with pytest.raises(ValueError, match="Too many indices"):
        x[0, 0, 0]
    with pytest.raises(IndexError):
        x[5]
    with pytest.raises(ValueError):
        x[..., ...]
    with pytest.raises(ValueError, match="out of range"):
        nv.eval(x[nv.array([7])])


SET_KEYS = ["0", "1:, 2", "::-1, 1", "None, 1", "..., ::2", "[0, 2]", "[0, 2], 1:3", ":, [1, 3]",
            "[2, 0], :, None", "1:, [0, 2]", "[[0], [2]], [1, 3]", "0, [1, 2]", "[0, 0], [1, 1]"]


@pytest.mark.parametrize("key", SET_KEYS)
def test_setitem_matches_numpy(key, rng):
    a = rand(rng, (3, 4), "float32")
    k = eval(f"K[{key}]")
    want = a.copy()
    shape = want[k].shape
    v = rand(rng, shape, "float32")
    want[k] = v
    x = nv.array(a)
    alias = x
    kk = tuple(nv.array(e) if isinstance(e, list) else e for e in (k if isinstance(k, tuple) else (k,)))
    x[kk if isinstance(k, tuple) else kk[0]] = nv.array(v)
    assert alias is x
    if key != "[0, 0], [1, 1]":  # duplicates: the last write wins in NumPy and nuvec alike
        assert_close(np.array(x), want)
    y = nv.array(a)
    y[kk if isinstance(k, tuple) else kk[0]] = 2  # a scalar, weakly typed, broadcast
    want2 = a.copy()
    want2[k] = 2
    assert_close(np.array(y), want2)


def test_setitem_mask_and_dtype_cast():
    y = nv.arange(12).reshape(3, 4)
    y[y > 5] = 0
    assert y.tolist() == [[0, 1, 2, 3], [4, 5, 0, 0], [0, 0, 0, 0]]
    y = nv.arange(12).reshape(3, 4)
    y[y > 5] = nv.array([100, 101, 102, 103, 104, 105])
    assert y.tolist() == [[0, 1, 2, 3], [4, 5, 100, 101], [102, 103, 104, 105]]
    z = nv.zeros((2,), nv.int8)
    z[0] = 3.7
    assert z.dtype == nv.int8 and z.tolist() == [3, 0]
    with pytest.raises(ValueError):
        z[0] = nv.array([1, 2, 3])


@pytest.mark.parametrize("method,ufunc", [("add", np.add), ("subtract", np.subtract),
                                          ("multiply", np.multiply), ("maximum", np.maximum),
                                          ("minimum", np.minimum)])
def test_at_updates_accumulate_duplicates(method, ufunc, rng):
    a = rand(rng, (4, 3), "float32")
    x = nv.array(a)
    for key in ([0, 0, 2], (slice(1, None), 0), ([1, 1], [2, 2]), 1):
        k = key if not isinstance(key, list) else np.array(key)
        want = a.copy()
        v = rand(rng, np.shape(a[k]) if not isinstance(key, list) else (len(key), 3), "float32")
        ufunc.at(want, k, v)
        kk = tuple(nv.array(e) if isinstance(e, list) else e for e in key) if isinstance(key, tuple) else (nv.array(key) if isinstance(key, list) else key)
        got = getattr(x.at[kk], method)(nv.array(v))
        assert_close(np.array(got), want)
    assert_close(np.array(x), a)  # .at returns a new array


def test_at_divide_and_scalars():
    x = nv.array([[2.0, 4.0], [6.0, 8.0]])
    assert x.at[0].divide(2).tolist() == [[1, 2], [6, 8]]
    assert x.at[nv.array([1, 1])].add(1).tolist() == [[2, 4], [8, 10]]
    assert nv.arange(4).at[1:3].multiply(3).tolist() == [0, 3, 6, 3]
