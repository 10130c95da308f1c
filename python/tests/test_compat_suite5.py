"""Compatibility, fifth part: behaviours where nuvec differed from MLX 0.32.4 in MLX's own
nn and optimizers tests (tools/mlx_suite.py, session 15: test_nn.py 58 of the 58 tests MLX
passes, test_optimizers.py 24 of 24, test_fft.py 10 of 10, test_einsum.py 10 of 10). Each runs
on nuvec and, where it is importable, on MLX itself."""
import pytest
from test_compat_suite import IDS, LIBS  # nuvec, and mlx.core where it is installed


def _nn(mx):
    if mx.__name__ == "nuvec":
        import nuvec.nn as nn
    else:
        import mlx.nn as nn
    return nn


@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_module_member_replaced_by_plain_value_and_back(mx):
    nn = _nn(mx)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.val = None
            self.val = mx.array(1.0)

    m = Model()
    assert "val" in m.parameters()
    m.val = None
    assert m.val is None
    assert "val" not in m.parameters()
    m.val = mx.array([3])
    assert m.val.item() == 3
    assert m.parameters()["val"].item() == 3


@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_grad_hands_a_module_argument_as_a_module(mx):
    # The function reads the module's submodules by attribute; the gradient is a plain tree.
    nn = _nn(mx)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.m1 = nn.Linear(3, 2)

    model = Model()
    x = mx.array([1.0, 2.0, 3.0])

    def loss_fn(m):
        assert isinstance(m, Model)
        return m.m1(x).sum()

    g = mx.grad(loss_fn)(model)
    assert g["m1"]["weight"].tolist() == [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]
    assert g["m1"]["bias"].tolist() == [1.0, 1.0]
    assert isinstance(model.m1, nn.Linear)
