"""The reduce family's kernel-table entries on a GPU through the mock recording interface
(libredmock.so, built by build.sh), against NumPy: every op x dtype x layout over shapes
around warp/block/vector boundaries, empty and 0-d inputs, NaN/inf, integer wrap-around, ties,
splits of long reductions, inputs over 2^31 elements; then timings of the target cases beside
PyTorch. Usage: python3 check_reduce.py [--lib path] [--quick] [--no-bench] [--no-big]."""
import argparse
import ctypes as C
import itertools
import os
import sys
import time

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, ".."))
import reduce_ref as R  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--lib", default=os.path.join(here, "..", "..", "..", ".carry", "redmock", "libredmock.so"))
ap.add_argument("--quick", action="store_true")
ap.add_argument("--no-bench", action="store_true")
ap.add_argument("--no-big", action="store_true")
ap.add_argument("--seed", type=int, default=1234)
ap.add_argument("--only", default="")
ap.add_argument("--bench-only", action="store_true")
ap.add_argument("--variants", default="", help="comma-separated libs to time the row kernels with")
args = ap.parse_args()

lib = C.CDLL(args.lib)
IP, LP = C.POINTER(C.c_int), C.POINTER(C.c_int64)
lib.mock_prim.restype = C.c_int
lib.mock_prim.argtypes = [C.c_char_p]
lib.mock_error.restype = C.c_char_p
lib.mock_run.restype = C.c_int
lib.mock_run.argtypes = [C.c_int, C.c_int, C.c_int, IP, LP, C.c_int64, C.c_void_p, C.c_size_t, IP,
                         C.c_int, C.c_int, C.c_int, C.c_int, IP, C.c_void_p, C.c_int, C.c_int,
                         C.POINTER(C.c_float)]


def ints(v, t=C.c_int):
    v = list(v)
    return (t * max(1, len(v)))(*v)


def run(op, values, layout, axes, ddof=0, donate=False, iters=0):
    """Runs op on `values` laid out as `layout`; returns (result, values used, launches, ms)."""
    dt = R.dt_name(values.dtype)
    kd = R.kernel_input_dtype(op, dt)
    kv = values.astype(R.np_dtype(kd)) if kd != dt else values
    # The reference sees what the kernel saw: the builder's cast (bool sums in int32, integer
    # means and softmax in float32) gives the same results as the op on the original dtype.
    base, off, st, used = R.make_layout(kv, layout)
    nd = kv.ndim
    ax = list(range(nd)) if axes is None else sorted(axes)
    if op in ("argmax", "argmin") and axes is None:
        ax = list(range(nd))
    od = R.out_dtype(op, dt)
    oshape = list(kv.shape) if op == "softmax" else [kv.shape[i] for i in range(nd) if i not in ax]
    out = np.empty(oshape, dtype=R.np_dtype(od))
    base = np.ascontiguousarray(base)
    ms = C.c_float(0)
    n = lib.mock_run(lib.mock_prim(op.encode()), R.CODE[kd], nd, ints(kv.shape), ints(st, C.c_int64), off,
                     base.ctypes.data, base.nbytes, ints(ax), len(ax), ddof, R.CODE[od], len(oshape),
                     ints(oshape), out.ctypes.data, int(donate), iters, C.byref(ms))
    if n < 0:
        raise RuntimeError(lib.mock_error().decode())
    return out, used, n, ms.value


SHAPES = [
    ((), [None]),
    ((1,), [(0,)]), ((31,), [(0,)]), ((32,), [(0,)]), ((33,), [(0,)]), ((1023,), [(0,)]),
    ((1025,), [(0,)]), ((4096,), [(0,)]), ((4097,), [(0,)]), ((65537,), [(0,)]),
    ((7, 33), [(0,), (1,), None]), ((33, 7), [(0,), (1,)]), ((64, 1024), [(0,), (1,), None]),
    ((1024, 64), [(0,), (1,)]), ((3, 4097), [(0,), (1,)]), ((4097, 3), [(0,), (1,)]),
    ((2, 65537), [(1,), (0,)]), ((40, 33), [(0,)]), ((1, 9), [(0,)]),
    ((4, 5, 6), [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), None]),
    ((3, 40, 37), [(0,), (1,), (0, 2)]), ((2, 300, 600), [(1,)]),
    ((3, 4, 5, 6), [(1, 3), (0, 2), None, (2, 3), (3,)]),
    ((3, 0), [(1,), (0,)]), ((0, 4), [(0,)]),
]
if args.quick:
    SHAPES = SHAPES[:12] + SHAPES[19:21]


def arg_axes_ok(op, axes, nd):
    if op not in ("argmax", "argmin"):
        return True
    return axes is None or len(axes) == 1


def cases(rng):
    for op in R.OPS:
        if args.only and op not in args.only.split(","):
            continue
        for dt in R.dtypes_of(op):
            for shape, axess in SHAPES:
                size = int(np.prod(shape))
                for axes in axess:
                    if not arg_axes_ok(op, axes, len(shape)):
                        continue
                    if op in ("max", "min", "argmax", "argmin", "logsumexp") and size == 0:
                        continue  # the builders' errors
                    lays = [l for l in R.LAYOUTS if R.layout_ok(l, shape)]
                    # Every layout for the small shapes, two of them for the larger ones.
                    if size > 5000 and len(lays) > 2:
                        lays = ["contiguous"] + [lays[1 + int(rng.integers(0, len(lays) - 1))]]
                    for layout in lays:
                        yield op, dt, shape, axes, layout


def values_for(rng, op, dt, shape):
    edges = op not in ("var", "std") or rng.random() < 0.3
    ties = op in ("argmax", "argmin") and rng.random() < 0.5
    near_one = op == "prod"
    return R.rand(rng, shape, dt, edges=edges, ties=ties, near_one=near_one)


def main_checks():
    rng = np.random.default_rng(args.seed)
    fails, n, worst = [], 0, {}
    t0 = time.time()
    for op, dt, shape, axes, layout in cases(rng):
        x = values_for(rng, op, dt, shape)
        ddof = int(rng.integers(0, 3)) if op in ("var", "std") else 0
        tag = f"{op} {dt} {shape} axes={axes} {layout}" + (f" ddof={ddof}" if ddof else "")
        n += 1
        try:
            got, used, _, _ = run(op, x, layout, axes, ddof)
            want = R.reference(op, np.asarray(used), axes, ddof)
            r = R.check(op, got, want, np.asarray(used), axes, tag)
            k = (op, dt)
            worst[k] = max(worst.get(k, 0.0), r)
        except Exception as e:  # noqa: BLE001
            fails.append(f"{tag}: {e}")
    print(f"matrix: {n} cases, {len(fails)} failed ({time.time() - t0:.1f} s)")
    return fails, worst


def special_checks():
    """Hand-written cases: edges of the semantics."""
    rng = np.random.default_rng(args.seed + 1)
    fails = []

    def expect(tag, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            fails.append(f"{tag}: {e}")

    def same(op, x, axes=None, layout="contiguous", ddof=0, donate=False):
        got, used, _, _ = run(op, x, layout, axes, ddof, donate)
        R.check(op, got, R.reference(op, np.asarray(used), axes, ddof), np.asarray(used), axes,
                f"{op} {x.dtype} {x.shape} {axes} {layout}")
        return got

    # max/min: NaN wins, signed zeros.
    for dt in R.FLOATS:
        x = np.array([[1.0, np.nan, 3.0], [-np.inf, np.inf, -0.0], [2.0, 5.0, -1.0]]).astype(R.np_dtype(dt))
        for op in ["max", "min", "argmax", "argmin"]:
            for axes in [None, (0,), (1,)]:
                expect(f"nan {op} {dt} {axes}", lambda: same(op, x, axes))
    # argmax ties and NaN firsts.
    x = np.array([1.0, -0.0, 0.0, np.nan, 5.0, np.nan], np.float32)
    expect("argmax nan", lambda: same("argmax", x))
    expect("argmin nan", lambda: same("argmin", x))
    z = np.array([0.0, -0.0, 1.0], np.float64)
    expect("argmin zero", lambda: same("argmin", z))
    for n in [31, 32, 33, 1025, 65537, 1 << 20]:
        for dt in ["int32", "float32", "float16", "uint8", "int64", "complex64"]:
            t = np.zeros(n, R.np_dtype(dt))
            t[n // 3] = 5
            t[2 * n // 3] = 5
            t[n // 5] = -5 if dt != "uint8" else 0
            expect(f"argmax ties {dt} {n}", lambda: same("argmax", t))
            expect(f"argmin ties {dt} {n}", lambda: same("argmin", t))
            m = np.tile(t[:min(n, 4097)], (5, 1))
            expect(f"argmax cols {dt} {n}", lambda: same("argmax", np.ascontiguousarray(m.T), (0,)))
    # Integer wrap.
    for dt in R.INTS:
        info = np.iinfo(R.np_dtype(dt))
        x = np.array([info.max, info.max, 3, info.min] * 100, R.np_dtype(dt))
        for op in ["sum", "prod", "max", "min"]:
            expect(f"wrap {op} {dt}", lambda: same(op, x))
            expect(f"wrap cols {op} {dt}", lambda: same(op, x.reshape(100, 4), (0,)))
    # Large float32 sums are accurate (the CPU's test).
    x = (rng.random(3 << 20) * 1e3 + 1e4).astype(np.float32)
    w = np.sum(x.astype(np.float64))

    def accurate():
        got, _, _, _ = run("sum", x, "contiguous", None)
        assert abs(float(got) - w) / w < 1e-7, (float(got), w)
        got, _, _, _ = run("mean", x, "contiguous", None)
        assert abs(float(got) - w / x.size) / (w / x.size) < 1e-7
        big = (rng.random((4096, 24)) * 1e3 + 1e4).astype(np.float32)
        got, _, _, _ = run("sum", big, "contiguous", (0,))
        np.testing.assert_allclose(got, big.astype(np.float64).sum(0), rtol=1e-7)
    expect("accurate sums", accurate)
    # logsumexp and softmax rows with NaN, +-inf, only -inf, wide ranges (CPU tests).
    for layout in ["contiguous", "transposed", "strided"]:
        x = (rng.standard_normal((9, 3001)) * 30).astype(np.float32)
        x[1, 7] = np.nan
        x[2, 100] = np.inf
        x[3, :] = -np.inf
        x[4, :] = 80.0
        x[5, ::2] = -np.inf
        x[6, :] = rng.uniform(-200, -100, 3001)

        def lse_long(x=x, layout=layout):
            got, _, _, _ = run("logsumexp", x, layout, (1,))
            np.testing.assert_allclose(got, R.reference("logsumexp", x, (1,)), rtol=2e-7, atol=0)
        expect(f"lse long rows {layout}", lse_long)
        expect(f"softmax long rows {layout}", lambda x=x, layout=layout: same("softmax", x, (1,), layout))
    x = np.array([[0.0, np.inf], [-np.inf, -np.inf], [1000.0, 1000.0], [np.nan, 1.0]], np.float32)
    expect("lse infinities", lambda: same("logsumexp", x, (1,)))
    x = np.array([[np.nan, 1.0, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0],
                  [-np.inf, 0.0, 1.0], [-200.0, 0.0, 80.0]], np.float32)
    for dt in R.FLOATS:
        expect(f"softmax edges {dt}", lambda dt=dt: same("softmax", x.astype(R.np_dtype(dt)), (1,)))
        expect(f"softmax edges cols {dt}", lambda dt=dt: same("softmax", np.ascontiguousarray(x.T).astype(R.np_dtype(dt)), (0,)))
        expect(f"lse edges {dt}", lambda dt=dt: same("logsumexp", x.astype(R.np_dtype(dt)), (1,)))

    def exponents():
        t = np.linspace(-87, 0, 100001).astype(np.float32)
        row = np.concatenate([t, [0.0]]).astype(np.float32)
        got, _, _, _ = run("softmax", row, "contiguous", None)
        want = np.exp(row.astype(np.float64)) / np.exp(row.astype(np.float64)).sum()
        np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-44)
    expect("softmax exponents", exponents)
    # softmax in place (the donated input buffer), both paths.
    for shape, axes in [((64, 4096), (1,)), ((300, 7), (1,)), ((70, 50), (0,)), ((3, 20000), (1,))]:
        for dt in R.FLOATS:
            x = R.rand(rng, shape, dt)
            expect(f"softmax donated {dt} {shape} {axes}", lambda x=x, axes=axes: same("softmax", x, axes, donate=True))
    # Row lengths around the register path's limits and every group size.
    for n in [1, 2, 7, 8, 9, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097, 8191, 8192, 8193, 20000]:
        for dt in R.FLOATS:
            x = R.rand(rng, (3, n), dt)
            expect(f"softmax n={n} {dt}", lambda x=x: same("softmax", x, (1,)))
            expect(f"lse n={n} {dt}", lambda x=x: same("logsumexp", x, (1,)))
            expect(f"softmax n={n} {dt} misaligned", lambda x=x: same("softmax", x, (1,), "reversed"))
    # Many rows (a long-row softmax on the row kernel: more than 264 rows).
    x = R.rand(rng, (300, 9000), "float32")
    expect("softmax 300x9000", lambda: same("softmax", x, (1,)))
    expect("lse 300x9000", lambda: same("logsumexp", x, (1,)))
    # Splits: few long reductions.
    for shape, axes in [((1 << 22,), None), ((3, 1000000), (1,)), ((1000000, 3), (0,)),
                        ((8, 3, 5000), (0, 2)), ((5000, 2, 3), (0, 2)), ((2, 1 << 20), (1,))]:
        for op in ["sum", "mean", "max", "argmin", "var", "all", "count_nonzero", "logsumexp", "prod"]:
            for dt in ["float32", "int32", "bfloat16", "float64"]:
                if op == "prod" and dt == "int32":
                    continue
                if op == "argmin" and axes is not None and len(axes) > 1:
                    continue
                x = R.rand(rng, shape, dt, near_one=op == "prod", edges=op != "var")
                expect(f"split {op} {dt} {shape} {axes}", lambda op=op, x=x, axes=axes: same(op, x, axes))
    # var: ddof past the count, and empty rows.
    x = R.rand(rng, (4, 2), "float32")
    for ddof in [0, 1, 2, 3]:
        expect(f"var ddof {ddof}", lambda ddof=ddof: same("var", x, (1,), ddof=ddof))
    for op in ["sum", "prod", "all", "any", "mean", "count_nonzero", "var", "std"]:
        expect(f"empty {op}", lambda op=op: same(op, np.zeros((0, 3), np.float32), (0,)))
    return fails


def big_checks():
    """Inputs over 2^31 elements: 64-bit offsets in every kernel."""
    fails = []
    rng = np.random.default_rng(args.seed + 2)
    n = (1 << 31) + 77
    x = rng.integers(0, 256, n, dtype=np.uint8)
    for tag, shape, axes, op in [("full", (7, n // 7), None, "sum"), ("rows", (n // 33, 33), (1,), "sum"),
                                 ("cols", (33, n // 33), (0,), "max"),
                                 ("count", (3, n // 3), None, "count_nonzero"),
                                 ("argmax", (n // 7, 7), (0,), "argmax")]:
        v = x[: int(np.prod(shape))].reshape(shape)
        try:
            got, _, _, _ = run(op, v, "contiguous", axes)
            R.check(op, got, R.reference(op, v, axes), v, axes, f"big {tag}")
        except Exception as e:  # noqa: BLE001
            fails.append(f"big {tag}: {e}")
    return fails


def bench():
    try:
        import torch
        have_torch = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        have_torch = False

    def torch_ms(fn, iters=20):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b) / iters

    rng = np.random.default_rng(7)
    rows = []
    x = rng.standard_normal((64, 1024, 1024), dtype=np.float32)
    tx = torch.from_numpy(x).cuda() if have_torch else None
    for axes in [(0,), (1,), (2,), None]:
        for op in ["sum", "max"]:
            _, _, launches, ms = run(op, x, "contiguous", axes, iters=20)
            tms = None
            if have_torch:
                f = torch.sum if op == "sum" else torch.amax
                tms = torch_ms(lambda: f(tx, dim=axes) if axes else f(tx))
            rows.append((f"{op} f32 64x1024x1024 axes={axes}", ms, x.nbytes / ms / 1e6, tms, launches))
    for axes in [(2,), (0,)]:
        _, _, launches, ms = run("argmax", x, "contiguous", axes, iters=10)
        tms = torch_ms(lambda: torch.argmax(tx, dim=axes[0])) if have_torch else None
        rows.append((f"argmax f32 64x1024x1024 axis={axes[0]}", ms, x.nbytes / ms / 1e6, tms, launches))
    del tx
    for dt in ["bfloat16", "float32", "float16"]:
        s = rng.standard_normal((32768, 4096), dtype=np.float32).astype(R.np_dtype(dt))
        ts = torch.from_numpy(s.astype(np.float32)).cuda().to(getattr(torch, dt)) if have_torch else None
        _, _, launches, ms = run("softmax", s, "contiguous", (1,), iters=20)
        tms = torch_ms(lambda: torch.softmax(ts, dim=-1)) if have_torch else None
        rows.append((f"softmax {dt} 32768x4096", ms, 2 * s.nbytes / ms / 1e6, tms, launches))
        _, _, launches, ms = run("logsumexp", s, "contiguous", (1,), iters=20)
        tms = torch_ms(lambda: torch.logsumexp(ts, dim=-1)) if have_torch else None
        rows.append((f"logsumexp {dt} 32768x4096", ms, s.nbytes / ms / 1e6, tms, launches))
        if dt == "bfloat16":
            _, _, launches, ms = run("softmax", s, "contiguous", (0,), iters=5)
            tms = torch_ms(lambda: torch.softmax(ts, dim=0)) if have_torch else None
            rows.append((f"softmax {dt} 32768x4096 axis 0", ms, 2 * s.nbytes / ms / 1e6, tms, launches))
        del ts
    for shape, axes in [((4096, 4096), (1,)), ((4096, 4096), (0,)), ((1 << 26,), None), ((256, 256, 256), (0, 2))]:
        v = rng.standard_normal(shape, dtype=np.float32)
        _, _, launches, ms = run("sum", v, "contiguous", axes, iters=20)
        rows.append((f"sum f32 {shape} axes={axes}", ms, v.nbytes / ms / 1e6, None, launches))
        _, _, launches, ms = run("var", v, "contiguous", axes, iters=10)
        rows.append((f"var f32 {shape} axes={axes}", ms, 2 * v.nbytes / ms / 1e6, None, launches))
    b = rng.integers(0, 2, (1 << 28,), dtype=np.uint8).astype(bool)
    _, _, launches, ms = run("any", b, "contiguous", None, iters=20)
    rows.append(("any bool 2^28", ms, b.nbytes / ms / 1e6, None, launches))
    print(f"\n{'case':44} {'ms':>8} {'GB/s':>8} {'torch ms':>9} {'ratio':>6} launches")
    for name, ms, gbs, tms, launches in rows:
        t = f"{tms:9.4f} {tms / ms:6.2f}" if tms else f"{'':9} {'':6}"
        print(f"{name:44} {ms:8.4f} {gbs:8.0f} {t} {launches}")


def variants():
    """softmax/logsumexp timed with other builds of the library (tuning knobs)."""
    global lib
    rng = np.random.default_rng(9)
    main = lib
    for path in [p for p in args.variants.split(",") if p]:
        lib = C.CDLL(path)
        lib.mock_prim.restype = C.c_int
        lib.mock_prim.argtypes = main.mock_prim.argtypes
        lib.mock_error.restype = C.c_char_p
        lib.mock_run.restype = C.c_int
        lib.mock_run.argtypes = main.mock_run.argtypes
        for dt in ["bfloat16", "float32"]:
            for n in [4096, 1024, 16384]:
                s = rng.standard_normal((32768 * 4096 // n, n), dtype=np.float32).astype(R.np_dtype(dt))
                _, _, _, ms1 = run("softmax", s, "contiguous", (1,), iters=20)
                _, _, _, ms2 = run("logsumexp", s, "contiguous", (1,), iters=20)
                print(f"{os.path.basename(path):24} {dt:9} n={n:6} softmax {ms1:.4f} ms  lse {ms2:.4f} ms")
    lib = main


if args.bench_only:
    variants()
    if not args.no_bench:
        bench()
    sys.exit(0)
fails, worst = main_checks()
fails += special_checks()
if not args.no_big:
    fails += big_checks()
print("worst error / allowance per (op, dtype) (<= 1 passes):")
line = []
for (op, dt), r in sorted(worst.items()):
    line.append(f"{op}:{dt}={r:.2f}")
for i in range(0, len(line), 6):
    print("  " + "  ".join(line[i:i + 6]))
print(f"FAILURES: {len(fails)}")
groups = {}
for f in fails:
    groups.setdefault(" ".join(f.split()[:2]), []).append(f)
for k, fs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
    print(f"  [{len(fs)}] {k}")
    for f in fs[:3]:
        print("      " + f[:400])
if not args.no_bench:
    bench()
