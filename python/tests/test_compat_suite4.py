"""Compatibility, fourth part: behaviours where nuvec differed from MLX 0.32.4 in MLX's own test
suite (tools/mlx_suite.py, the count of session 14b). Each runs on nuvec and, where it is
importable, on MLX itself."""
import numpy as np
import pytest
from test_compat_suite import IDS, LIBS  # nuvec, and mlx.core where it is installed


# ---- cholesky of a singular positive semi-definite matrix ----

def _shifted_gram(mx):
    """The Gram matrix of the rows 1..9 over 81, plus 1/9, computed by the library itself in
    float32: rank 2, so its last pivot is rounding residue, which LAPACK's float32 potrf (MLX's
    CPU path) takes as positive."""
    rows = mx.arange(1, 10, dtype=mx.float32).reshape(3, 3)
    return rows.T @ rows / 81 + 1 / 9


@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_cholesky_singular_psd_is_factored_as_by_potrf(mx):
    gram = _shifted_gram(mx)
    g = np.array(gram)
    for upper in (False, True):
        f = np.array(mx.linalg.cholesky(gram, upper=upper, stream=mx.cpu))
        assert np.all(np.isfinite(f)), upper
        back = f.T @ f if upper else f @ f.T
        np.testing.assert_allclose(back, g, rtol=1e-5, atol=1e-6)
        tri = np.triu(f) if upper else np.tril(f)
        np.testing.assert_array_equal(f, tri)


@pytest.mark.parametrize("mx", LIBS, ids=IDS)
def test_cholesky_batch_mixes_singular_definite_and_indefinite(mx):
    # One batch: the singular Gram matrix (factored), a definite matrix (factored) and an
    # indefinite one, which potrf refuses too: nuvec makes that matrix NaN (MLX returns
    # potrf's partial factor unchecked), and the refusal stays per matrix.
    gram = np.array(_shifted_gram(mx))
    definite = np.array([[4.0, 2.0, 0.6], [2.0, 5.0, 1.0], [0.6, 1.0, 3.0]], np.float32)
    indefinite = np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]], np.float32)
    out = np.array(mx.linalg.cholesky(mx.array(np.stack([gram, definite, indefinite])),
                                      stream=mx.cpu))
    for a, f in zip((gram, definite), out[:2]):
        assert np.all(np.isfinite(f))
        np.testing.assert_allclose(f @ f.T, a, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1], np.linalg.cholesky(definite), rtol=1e-5, atol=1e-6)
    if mx.__name__ == "nuvec":
        assert np.all(np.isnan(out[2]))
