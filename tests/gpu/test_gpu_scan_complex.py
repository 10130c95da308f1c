"""logcumsumexp of complex64 on the GPU against nuvec's CPU results. It is composed (complex
logaddexp steps over slices and concatenations, src/ops/reduce_scan_complex.c), so the GPU runs
those ops' kernels; the results agree within float32 rounding (the complex exp/log of the two
devices' math libraries differ in the last bits). Every op is built with the GPU as the default
device (skipped where no GPU is usable) and must run there (no CPU fallback); the references are
built with the CPU as the default device."""
import ctypes as C
import itertools
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import gpu_and_cpu, needs_gpu, rng, sample  # noqa: E402,F401  (rng: a fixture)
from nvc import IP, P, Session, lib, sig  # noqa: E402

sig("nv_logcumsumexp", P, P, IP, C.c_bool, C.c_bool)

pytestmark = needs_gpu


@pytest.fixture
def nv():
    with Session() as s:
        yield s


CASES = list(itertools.product(
    [((4, 5), 0), ((3, 4, 5), -2), ((2, 3), None), ((), None), ((0, 3), 0), ((3, 300), 1),
     ((5000,), 0), ((64, 129), 0)],
    ["contiguous", "transposed", "strided", "reversed"], [False, True], [True, False]))


@pytest.mark.parametrize("case,layout,rev,inc", sample(CASES, 40))
def test_logcumsumexp_complex(nv, rng, case, layout, rev, inc):
    shape, axis = case
    z = (rng.standard_normal(shape) * 4 + 1j * rng.standard_normal(shape) * 4).astype(np.complex64)
    if z.size:
        z.reshape(-1)[rng.integers(0, z.size, max(1, z.size // 50))] = -np.inf + 0j
    ax = None if axis is None else C.pointer(C.c_int(axis))

    def make():
        return nv.own(lib.nv_logcumsumexp(nv.view(z, layout), ax, rev, inc))
    got, want = gpu_and_cpu(nv, make, "logcumsumexp (complex64)")
    assert got.shape == want.shape and got.dtype == want.dtype == np.complex64
    fin = np.isfinite(want.real)
    np.testing.assert_array_equal(np.isfinite(got.real), fin)
    np.testing.assert_array_equal(got.real[~fin], want.real[~fin])
    scale = 1 + np.abs(want.real[fin])
    assert np.all(np.abs(got.real[fin] - want.real[fin]) <= 1e-4 * scale)
    assert np.all(np.abs(np.exp(1j * got.imag[fin]) - np.exp(1j * want.imag[fin])) <= 1e-4 * scale)
