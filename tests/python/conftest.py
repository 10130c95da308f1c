"""pytest set-up for nuvec's Python-side tests: a printed seed for every random input, and the
sampling switch (`NUVEC_TEST_FULL=1` runs the whole dtype x shape x layout matrix)."""
import os
import random
import zlib

import numpy as np
import pytest

SEED = int(os.environ.get("NUVEC_TEST_SEED", random.SystemRandom().randrange(2**31)))
FULL = os.environ.get("NUVEC_TEST_FULL") == "1"
# pytest-xdist's workers inherit the environment: one seed for all of them, so that each collects
# the same sampled matrix as the controller.
os.environ["NUVEC_TEST_SEED"] = str(SEED)


def pytest_report_header(config):
    return f"nuvec test seed: NUVEC_TEST_SEED={SEED} ({'full matrix' if FULL else 'sampled'})"


@pytest.fixture
def rng(request):
    """A generator seeded from the run's seed and the test's name (printed on failure)."""
    h = zlib.crc32(request.node.nodeid.encode())  # str's hash() differs from process to process
    seed = (SEED + h) % (2**31)
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


@pytest.fixture
def nv():
    from nvc import Session

    with Session() as s:
        yield s


@pytest.fixture(autouse=True)
def output_guards():
    """Every buffer a test frees has its sentinel guards checked (NUVEC_DEBUG_GUARDS=1, set by
    the CTest run): a kernel that wrote out of bounds fails the test that freed the buffer."""
    from nvc import lib

    before = lib.nv_get_guard_violations()
    yield
    after = lib.nv_get_guard_violations()
    assert after == before, f"{after - before} buffer(s) had damaged guards: an out-of-bounds write"


@pytest.fixture(autouse=True)
def no_gpu_fallbacks():
    """Run with the default device gpu (NUVEC_DEFAULT_DEVICE=gpu, tests/gpu/run.sh's stage 1),
    a test whose GPU nodes ran a CPU kernel fails (issue 16: the counter stays 0 over the whole
    suite; NUVEC_LOG_FALLBACK=1 names the primitive on stderr). Without a GPU the counter never
    moves."""
    from nvc import lib

    before = lib.nv_gpu_fallback_count()
    yield
    n = lib.nv_gpu_fallback_count() - before
    assert n == 0, f"{n} GPU node(s) ran their CPU kernel (nv_gpu_fallback_count)"


SAMPLE_SCALE = float(os.environ.get("NUVEC_TEST_SAMPLE_SCALE", "1"))


def sample(cases, k, salt=0):
    """All cases under NUVEC_TEST_FULL=1, else a seeded sample of k of them (k scaled by
    NUVEC_TEST_SAMPLE_SCALE, for slow runs such as compute-sanitizer's)."""
    cases = list(cases)
    k = max(1, int(k * SAMPLE_SCALE))
    if FULL or len(cases) <= k:
        return cases
    r = random.Random(SEED + salt)
    return r.sample(cases, k)
