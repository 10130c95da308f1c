"""Trees of arrays (mlx.utils's names and semantics): nested lists, tuples and dicts whose
leaves are arrays or any other values. Paths name a leaf by its keys and indices joined by "."
("layers.0.weight"). `is_leaf(node)` stops the descent at nodes it accepts."""

__all__ = ["tree_map", "tree_map_with_path", "tree_flatten", "tree_unflatten", "tree_reduce",
           "tree_merge"]


def _is_node(tree, is_leaf):
    return isinstance(tree, (list, tuple, dict)) and not (is_leaf is not None and is_leaf(tree))


def _children(tree):
    """(key, child) pairs of a list, tuple or dict, in order."""
    return tree.items() if isinstance(tree, dict) else enumerate(tree)


def _rebuild(tree, values):
    """A node of tree's type holding `values` (a list, in _children's order)."""
    if isinstance(tree, dict):
        return dict(zip(tree.keys(), values))
    if isinstance(tree, tuple) and hasattr(tree, "_fields"):  # a namedtuple
        return type(tree)(*values)
    return type(tree)(values)


def tree_map(fn, tree, *rest, is_leaf=None):
    """fn applied to every leaf of `tree` (with the corresponding nodes of `rest`, trees of at
    least tree's structure, as further arguments); the result has tree's structure."""
    if not _is_node(tree, is_leaf):
        return fn(tree, *rest)
    return _rebuild(tree, [tree_map(fn, child, *[r[k] for r in rest], is_leaf=is_leaf)
                           for k, child in _children(tree)])


def tree_map_with_path(fn, tree, *rest, is_leaf=None, path=None):
    """tree_map where fn also receives each leaf's path first: fn(path, leaf, *rest)."""
    if not _is_node(tree, is_leaf):
        return fn(path, tree, *rest)
    out = []
    for k, child in _children(tree):
        sub = str(k) if path is None else f"{path}.{k}"
        out.append(tree_map_with_path(fn, child, *[r[k] for r in rest], is_leaf=is_leaf,
                                      path=sub))
    return _rebuild(tree, out)


def tree_flatten(tree, prefix="", is_leaf=None, destination=None):
    """The leaves as (path, leaf) pairs in order (a list), or written into `destination` (a dict
    or list, also returned). `prefix` goes before every path (a leaf at the top gets prefix
    without its first character, so "" for the default)."""
    out = [] if destination is None else destination

    def walk(node, path):
        if _is_node(node, is_leaf):
            for k, child in _children(node):
                walk(child, f"{path}.{k}")
        elif isinstance(out, dict):
            out[path[1:]] = node
        else:
            out.append((path[1:], node))

    walk(tree, prefix)
    return out


def tree_unflatten(tree):
    """The nested tree of (path, leaf) pairs (a list, or a dict of path -> leaf), the inverse
    of tree_flatten: a level whose keys are all integers becomes a list (of length the largest
    index + 1; missing entries are empty dicts), any other level a dict. A single pair with an
    empty path is that leaf."""
    items = list(tree.items()) if isinstance(tree, dict) else list(tree)
    if len(items) == 1 and items[0][0] == "":
        return items[0][1]
    groups = {}
    for path, value in items:
        head, _, tail = path.partition(".")
        groups.setdefault(head, []).append((tail, value))
    if groups and all(k.isdigit() for k in groups):
        out = [{} for _ in range(max(int(k) for k in groups) + 1)]
        for k, sub in groups.items():
            out[int(k)] = tree_unflatten(sub)
        return out
    return {k: tree_unflatten(sub) for k, sub in groups.items()}


def tree_reduce(fn, tree, initializer=None, is_leaf=None):
    """fn(accumulator, leaf) folded over the leaves in order, starting from `initializer` (or
    from the first leaf when it is None)."""
    acc, started = initializer, initializer is not None
    for _, leaf in tree_flatten(tree, is_leaf=is_leaf):
        if started:
            acc = fn(acc, leaf)
        else:
            acc, started = leaf, True
    return acc


def tree_merge(tree_a, tree_b, merge_fn=None):
    """The two trees combined: where one side is empty (None, or an empty list, tuple or dict)
    the other is taken; nodes of the same container type merge child by child (dicts by key,
    lists and tuples by position, up to the longer); two leaves go to merge_fn(a, b), and
    without it two non-empty leaves are an error."""
    def empty(t):
        return t is None or (isinstance(t, (list, tuple, dict)) and len(t) == 0)

    if empty(tree_a):
        return tree_b
    if empty(tree_b):
        return tree_a
    a_node, b_node = isinstance(tree_a, (list, tuple, dict)), isinstance(tree_b, (list, tuple, dict))
    if a_node and b_node:
        if type(tree_a) is not type(tree_b):
            raise ValueError(f"tree_merge: cannot merge a {type(tree_a).__name__} with a "
                             f"{type(tree_b).__name__}")
        if isinstance(tree_a, dict):
            keys = list(tree_a) + [k for k in tree_b if k not in tree_a]
            return {k: tree_merge(tree_a.get(k), tree_b.get(k), merge_fn) for k in keys}
        n = max(len(tree_a), len(tree_b))
        vals = [tree_merge(tree_a[i] if i < len(tree_a) else None,
                           tree_b[i] if i < len(tree_b) else None, merge_fn) for i in range(n)]
        return type(tree_a)(vals)
    if a_node or b_node:
        raise ValueError("tree_merge: cannot merge a tree node with a leaf")
    if merge_fn is None:
        raise ValueError("tree_merge: both trees have a leaf here and no merge_fn was given")
    return merge_fn(tree_a, tree_b)
