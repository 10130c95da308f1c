"""nuvec.distributed (mlx.core.distributed's names): the size-1 group in this process, against
MLX where it is installed, and 2 and 3 ranks over the ring through tools/nuvec-launch
(dist_worker.py: collectives, their gradients and vmap, send/recv, split, health)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import nuvec as nv

d = nv.distributed
HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH = os.path.join(HERE, "..", "..", "tools", "nuvec-launch")


def test_names_are_mlx_names():
    for name in ["Group", "init", "is_available", "all_sum", "all_max", "all_min", "all_gather",
                 "sum_scatter", "send", "recv", "recv_like"]:
        assert hasattr(d, name), name
    import nuvec.distributed  # noqa: F401  (importable as a module)


def test_size_1_group_is_the_identity():
    g = d.init()
    assert (g.rank(), g.size()) == (0, 1)
    assert repr(g) == "Group(rank 0 of 1)"
    assert d.is_available()
    x = nv.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    for f in (d.all_sum, d.all_max, d.all_min, d.all_gather, d.sum_scatter, d.sum_gradients):
        np.testing.assert_array_equal(np.array(f(x)), np.array(x))
        np.testing.assert_array_equal(np.array(f(x, group=g)), np.array(x))
    assert d.all_gather(nv.array(1.0)).shape == ()
    assert g.split(1) is g
    g.health()
    g.close()  # the size-1 group is unaffected
    np.testing.assert_array_equal(np.array(d.all_sum(x, group=g)), np.array(x))
    assert hash(g) == hash(d.init()) and g == d.init()


def test_average_gradients_on_size_1_is_the_tree():
    tree = {"a": nv.array([1.0, 2.0]), "b": [nv.array(3)]}
    assert nv.nn.average_gradients(tree) is tree


def test_size_1_errors():
    x = nv.array([1.0, 2.0])
    with pytest.raises(ValueError, match="send: rank 0 is not another rank of a group of 1"):
        d.send(x, 0)
    with pytest.raises(ValueError, match="recv: rank 1 is not another rank of a group of 1"):
        d.recv((2,), nv.float32, 1)
    with pytest.raises(ValueError, match="recv: rank 0 is not another rank"):  # recv_like is a recv
        d.recv_like(x, 0)
    with pytest.raises(ValueError, match="unknown backend"):
        d.init(backend="tcp")
    with pytest.raises(TypeError, match="group must be a Group"):
        d.all_sum(x, group=3)
    env = {k: v for k, v in os.environ.items() if "RANK" not in k and "HOSTFILE" not in k}
    code = ("import nuvec as nv\ntry:\n  nv.distributed.init(strict=True)\nexcept Exception as e:"
            "\n  print(type(e).__name__, e)\n")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=30)
    assert "not configured" in p.stdout, p.stdout + p.stderr


def test_errors_name_the_calling_line():
    import inspect
    x = nv.array([1.0, 2.0])
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(ValueError) as e:
        d.send(x, 0)
    assert f"(send called at {__file__}:{line})" in str(e.value), str(e.value)
    with pytest.raises(ValueError, match=r"recv: rank 1 is not another rank of a group of 1 "
                       r"\(recv called at .*test_distributed.py:\d+\)"):
        d.recv((2,), nv.float32, 1)


def test_against_mlx_size_1():
    mx = pytest.importorskip("mlx.core")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for name in ["all_sum", "all_max", "all_min", "all_gather", "sum_scatter"]:
        a = np.array(getattr(d, name)(nv.array(x)))
        b = np.array(getattr(mx.distributed, name)(mx.array(x)))
        np.testing.assert_array_equal(a, b)
    ga = np.array(nv.grad(lambda v: d.all_gather(v).sum())(nv.array(x)))
    gb = np.array(mx.grad(lambda v: mx.distributed.all_gather(v).sum())(mx.array(x)))
    np.testing.assert_array_equal(ga, gb)
    assert d.init().size() == mx.distributed.init().size()


@pytest.mark.parametrize("n", [2, 3])
def test_multi_rank_through_the_launcher(n):
    env = dict(os.environ)
    env["NUVEC_DIST_CONNECT_TIMEOUT"] = "20"
    p = subprocess.run([sys.executable, LAUNCH, "-n", str(n), os.path.join(HERE, "dist_worker.py")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    for r in range(n):
        assert f"[{r}] rank {r}: ok" in p.stdout, p.stdout
