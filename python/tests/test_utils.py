"""nuvec.utils against mlx.utils's semantics: tree_map (several trees, is_leaf, namedtuples),
tree_map_with_path, tree_flatten (prefix, destination), tree_unflatten (lists from integer
keys), tree_reduce and tree_merge."""
import collections

import pytest

import nuvec as mx
from nuvec.utils import (tree_flatten, tree_map, tree_map_with_path, tree_merge, tree_reduce,
                         tree_unflatten)

TREE = {"layers": [{"w": 1, "b": 2}, {"w": 3, "b": 4}], "head": (5, [6]), "scale": 7}


def test_tree_map_structure_and_several_trees():
    out = tree_map(lambda x: x * 10, TREE)
    assert out == {"layers": [{"w": 10, "b": 20}, {"w": 30, "b": 40}], "head": (50, [60]),
                   "scale": 70}
    assert isinstance(out["head"], tuple)
    assert tree_map(lambda a, b: a + b, TREE, TREE)["layers"][1]["b"] == 8
    # is_leaf stops the descent
    out = tree_map(lambda x: len(x) if isinstance(x, list) else x, TREE,
                   is_leaf=lambda x: isinstance(x, list))
    assert out["layers"] == 2 and out["head"] == (5, 1)
    P = collections.namedtuple("P", "a b")
    assert tree_map(lambda x: -x, P(1, 2)) == P(-1, -2)


def test_tree_map_with_arrays():
    t = {"a": mx.array([1.0, 2.0]), "b": [mx.array(3.0)]}
    out = tree_map(lambda x: x * 2, t)
    assert out["a"].tolist() == [2.0, 4.0] and out["b"][0].item() == 6.0


def test_tree_map_with_path():
    paths = []
    tree_map_with_path(lambda p, x: paths.append(p), TREE)
    assert paths == ["layers.0.w", "layers.0.b", "layers.1.w", "layers.1.b", "head.0",
                     "head.1.0", "scale"]
    assert tree_map_with_path(lambda p, x: p, 5) is None


def test_tree_flatten_and_unflatten():
    flat = tree_flatten(TREE)
    assert flat[0] == ("layers.0.w", 1) and flat[-1] == ("scale", 7) and len(flat) == 7
    assert tree_flatten([1, [2]], prefix=".m") == [("m.0", 1), ("m.1.0", 2)]
    assert tree_flatten(3) == [("", 3)]
    d = tree_flatten({"a": {"b": 1}}, destination={})
    assert d == {"a.b": 1}
    back = tree_unflatten(flat)
    assert back["layers"] == [{"w": 1, "b": 2}, {"w": 3, "b": 4}]
    assert back["head"] == [5, [6]]  # tuples come back as lists
    assert tree_unflatten([("", 9)]) == 9
    assert tree_unflatten({"x.0": 1, "x.2": 3})["x"] == [1, {}, 3]


def test_tree_reduce():
    assert tree_reduce(lambda acc, x: acc + x, TREE, 0) == 28
    assert tree_reduce(lambda acc, x: max(acc, x), TREE) == 7
    assert tree_reduce(lambda acc, x: acc + x, {}, 0) == 0


def test_tree_merge():
    a = {"w": 1, "sub": {"x": 2}}
    b = {"b": 3, "sub": {"y": 4}}
    assert tree_merge(a, b) == {"w": 1, "sub": {"x": 2, "y": 4}, "b": 3}
    assert tree_merge([1, None], [None, 2]) == [1, 2]
    assert tree_merge(None, {"a": 1}) == {"a": 1}
    assert tree_merge({"a": 1}, {"a": 2}, lambda x, y: x + y) == {"a": 3}
    with pytest.raises(ValueError):
        tree_merge({"a": 1}, {"a": 2})
    with pytest.raises(ValueError):
        tree_merge({"a": 1}, [1])


def test_matches_mlx_where_installed():
    mu = pytest.importorskip("mlx.utils")
    for fn in ("tree_flatten", "tree_unflatten"):
        assert hasattr(mu, fn)
    assert mu.tree_flatten(TREE) == tree_flatten(TREE)
    assert mu.tree_unflatten(tree_flatten(TREE)) == tree_unflatten(tree_flatten(TREE))
    assert mu.tree_flatten([1, [2]], prefix=".m") == tree_flatten([1, [2]], prefix=".m")
    assert mu.tree_map(lambda x: x + 1, TREE) == tree_map(lambda x: x + 1, TREE)
    assert mu.tree_reduce(lambda a, x: a + x, TREE, 0) == tree_reduce(lambda a, x: a + x, TREE, 0)
    assert mu.tree_merge({"w": 1, "sub": {"x": 2}}, {"b": 3, "sub": {"y": 4}}) == \
        tree_merge({"w": 1, "sub": {"x": 2}}, {"b": 3, "sub": {"y": 4}})
    got = []
    mu.tree_map_with_path(lambda p, x: got.append(p), TREE)
    ours = []
    tree_map_with_path(lambda p, x: ours.append(p), TREE)
    assert got == ours
