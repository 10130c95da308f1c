"""What the GPU test files share: the seed (NUVEC_TEST_SEED, else random and recorded by the
rng fixture), the full-matrix switch (NUVEC_TEST_FULL=1), the seeded case sampler, whose sample
sizes NUVEC_TEST_SAMPLE_SCALE scales (tests/gpu/run.sh makes them small under
compute-sanitizer), the device functions' signatures, `needs_gpu` (the files' pytestmark: skip
where no CUDA device is usable), the `rng` fixture, `On` (a block with a default device) and
`gpu_and_cpu` (one build evaluated on both devices, no CPU fallback allowed on the GPU).
Import after tests/python is on sys.path (nvc)."""
import ctypes as C
import os
import random

import numpy as np
import pytest

from nvc import Device, lib, sig

sig("nv_gpu", Device, C.c_int)
sig("nv_cpu", Device)
sig("nv_device_is_available", C.c_bool, Device)
sig("nv_default_device", Device)
sig("nv_set_default_device", C.c_int, Device)
sig("nv_gpu_fallback_count", C.c_uint64)

GPU_OK = bool(lib.nv_device_is_available(lib.nv_gpu(0)))
needs_gpu = pytest.mark.skipif(not GPU_OK, reason="no usable CUDA device")

SEED = int(os.environ.get("NUVEC_TEST_SEED", random.SystemRandom().randrange(2**31)))
FULL = os.environ.get("NUVEC_TEST_FULL") == "1"
SAMPLE_SCALE = float(os.environ.get("NUVEC_TEST_SAMPLE_SCALE", "1"))


def sample(cases, k, salt=0):
    """All cases under NUVEC_TEST_FULL=1, else a seeded sample of k (scaled) of them."""
    cases = list(cases)
    k = max(1, int(k * SAMPLE_SCALE))
    if FULL or len(cases) <= k:
        return cases
    return random.Random(SEED + salt).sample(cases, k)


@pytest.fixture
def rng(request):
    """A generator seeded from SEED and the test's id (the seed is in the test's report)."""
    seed = (SEED + abs(hash(request.node.nodeid))) % (2**31)
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


class On:
    """Builds ops on a device: `with On("gpu"):` makes it the default device for the block."""

    def __init__(self, where):
        self.dev = lib.nv_gpu(0) if where == "gpu" else lib.nv_cpu()

    def __enter__(self):
        self.prev = lib.nv_default_device()
        assert lib.nv_set_default_device(self.dev) == 0
        return self

    def __exit__(self, *exc):
        lib.nv_set_default_device(self.prev)


def gpu_and_cpu(nv, make, what="the op"):
    """`make()` built and evaluated on the GPU (asserting no CPU fallback) and on the CPU:
    (GPU values, CPU values)."""
    with On("cpu"):
        want = nv.read(make())
    with On("gpu"):
        h = make()
        before = lib.nv_gpu_fallback_count()
        got = nv.read(h)
        assert lib.nv_gpu_fallback_count() == before, f"{what} fell back to the CPU"
    return got, want
