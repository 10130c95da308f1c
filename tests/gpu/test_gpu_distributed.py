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


sig("nv_dist_is_available", C.c_bool, C.c_char_p)
sig("nv_dist_init", C.c_int, C.c_char_p, C.c_bool, C.POINTER(C.c_int64))


def gpu_count():
    import subprocess
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
    return len([l for l in out.splitlines() if l.startswith("GPU ")])


def test_nccl_size_1_group_on_one_gpu():
    """init("nccl", strict) of a one-rank job is the size-1 group (collectives are the
    identity on the GPU too)."""
    if not lib.nv_dist_is_available(b"nccl"):
        pytest.skip("NCCL not found")
    import json
    import subprocess
    import tempfile
    hf = os.path.join(tempfile.mkdtemp(), "hosts.json")
    with open(hf, "w") as f:
        json.dump([["127.0.0.1:1"]], f)
    code = ("import sys, ctypes as C; sys.path.insert(0, %r); import worker as w\n"
            "g = w.G(9); assert w.lib.nv_dist_init(b'nccl', True, C.byref(g)) == 0, "
            "w.lib.nv_last_error(); assert g.value == 0; print('nccl size 1 ok')\n") % os.path.join(
                os.path.dirname(os.path.abspath(__file__)), "..", "distributed")
    p = subprocess.run([sys.executable, "-c", code], env=test_ring.env(NUVEC_RANK="0", NUVEC_HOSTFILE=hf),
                       capture_output=True, text=True, timeout=60)
    assert "nccl size 1 ok" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("n", [2, 4])
def test_nccl_collectives_on_several_gpus(n):
    """Issue 22's machine: one rank per GPU over NCCL (GPU-stream collectives captured into the
    graph), compared with the same collectives on the CPU stream (the ring)."""
    if not lib.nv_dist_is_available(b"nccl"):
        pytest.skip("NCCL not found")
    if gpu_count() < n:
        pytest.skip(f"needs {n} GPUs")
    procs, _, _ = test_ring.start_ranks(n, "gpu", NUVEC_DIST_BACKEND="nccl",
                                        NUVEC_TEST_GPU_PER_RANK="1")
    try:
        for p in procs:
            out, _ = p.communicate(timeout=300)
            assert p.returncode == 0, out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
