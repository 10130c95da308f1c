"""What the GPU test files share: the seed (NUVEC_TEST_SEED, else random and printed by the
failing test's rng fixture), the full-matrix switch (NUVEC_TEST_FULL=1) and the seeded case
sampler, whose sample sizes NUVEC_TEST_SAMPLE_SCALE scales (tests/gpu/run.sh makes them small
under compute-sanitizer)."""
import os
import random

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
