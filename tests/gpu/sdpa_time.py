"""Times the causal prefill attention of the bench row (B 8, H 32, L 4096, D 128, bfloat16) in
this process's NUVEC_CUDNN_SDPA mode, and torch's scaled_dot_product_attention on the same
shape (median of 10 synchronized calls after 3 warm-ups): prints `SDPA_TIME <who> <ms>`.
  usage: NUVEC_CUDNN_SDPA=1 python3 tests/gpu/sdpa_time.py [torch]"""
import ctypes as C
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
from nvc import Session, lib, sig  # noqa: E402

P = C.c_void_p
sig("nv_fast_scaled_dot_product_attention", P, P, P, P, C.c_float, C.c_char_p, P, P)
sig("nv_eval1", C.c_int, P)
sig("nv_release", None, P)
sig("nv_copy", P, P)
SHAPE = (8, 32, 4096, 128)


def med(fn):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(10):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


if len(sys.argv) > 1 and sys.argv[1] == "torch":
    import torch
    q, k, v = (torch.randn(*SHAPE, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    f = lambda: (torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),  # noqa: E731
                 torch.cuda.synchronize())
    print(f"SDPA_TIME torch {med(f):.4f}")
else:
    os.environ.setdefault("NUVEC_DEFAULT_DEVICE", "gpu")
    rng = np.random.default_rng(0)
    with Session() as nv:
        import ml_dtypes
        host = [nv.array(rng.standard_normal(SHAPE).astype(ml_dtypes.bfloat16)) for _ in range(3)]
        q, k, v = (nv.own(lib.nv_copy(h)) for h in host)  # made on the GPU once
        for a in (q, k, v):
            assert lib.nv_eval1(a) == 0

        def f():
            y = lib.nv_fast_scaled_dot_product_attention(q, k, v, 1 / np.sqrt(128), b"causal", None, None)
            assert lib.nv_eval1(y) == 0
            lib.nv_release(y)
        print(f"SDPA_TIME nuvec_cudnn={os.environ.get('NUVEC_CUDNN_SDPA', '0')} {med(f):.4f}")
