"""The distributed family on the GPU: collectives whose inputs and outputs live on a GPU
stream (staged through pinned host memory around the ring's host transfer: src/cuda/
distributed.c) between 2 and 3 local ranks sharing GPU 0, each compared with the same
collective on the CPU stream, every dtype, empty/scalar/odd/multi-MiB sizes and a transposed
input, plus send/recv; no collective may go through the CPU fallback. A size-1 group on the
GPU is the identity. Skipped where no GPU is usable; the ranks are tests/distributed/worker.py
processes on random free loopback ports."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "distributed"))
from gpucommon import On, needs_gpu  # noqa: E402
from nvc import Session, lib, sig  # noqa: E402
import test_ring  # noqa: E402

import ctypes as C  # noqa: E402

pytestmark = needs_gpu
sig("nv_dist_all_sum", C.c_void_p, C.c_void_p, C.c_int64)
sig("nv_gpu_fallback_count", C.c_uint64)


def test_size_1_group_on_the_gpu_is_the_identity():
    with On("gpu"), Session() as s:
        before = lib.nv_gpu_fallback_count()
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        got = s.read(s.own(lib.nv_dist_all_sum(s.array(x), 0)))
        np.testing.assert_array_equal(got, x)
        assert lib.nv_gpu_fallback_count() == before


@pytest.mark.parametrize("n", [2, 3])
def test_gpu_collectives_match_the_cpu(n):
    procs, _, _ = test_ring.start_ranks(n, "gpu")
    try:
        for p in procs:
            out, _ = p.communicate(timeout=300)
            assert p.returncode == 0, out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
