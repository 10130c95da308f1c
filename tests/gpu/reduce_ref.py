"""NumPy references for the reduce family on the GPU (float64 references, bfloat16 through
ml_dtypes): inputs with edge values, laid out in every way a kernel meets (contiguous,
transposed, permuted, step-2 slices, reversed, broadcast), the result each op must give with
the CPU kernels' semantics (src/cpu/reduce.c, reduce_rows.c, reduce_softmax.c, sort.c), and the comparison. Used by test_gpu_reduce.py."""
import numpy as np

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - setup.sh installs it
    BF16 = None

DTYPES = [
    "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "float16", "bfloat16", "float32", "float64", "complex64",
]
CODE = {n: i for i, n in enumerate(DTYPES)}
FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]
ALL = ["bool"] + INTS + FLOATS + ["complex64"]
REAL = ["bool"] + INTS + FLOATS

PLAIN = ["sum", "prod", "max", "min", "all", "any", "mean", "count_nonzero"]
ROWS = ["var", "std", "logsumexp", "argmax", "argmin", "softmax"]
OPS = PLAIN + ROWS


def np_dtype(name):
    return BF16 if name == "bfloat16" else np.dtype(name)


def dt_name(dtype):
    dtype = np.dtype(dtype)
    return "bfloat16" if BF16 is not None and dtype == BF16 else dtype.name


def dtypes_of(op):
    """The input dtypes each op takes (the builders reject complex64 for the row ops but
    argmax/argmin)."""
    if op in ("var", "std", "logsumexp", "softmax"):
        return REAL
    return ALL


def out_dtype(op, dt):
    """The result dtype (MLX's rules, as nuvec's builders)."""
    if op in ("sum", "prod"):  # small integers and bool widen to 32 bits
        return {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "uint32",
                "uint16": "uint32"}.get(dt, dt)
    if op in ("max", "min"):
        return dt
    if op in ("all", "any"):
        return "bool"
    if op == "count_nonzero":
        return "int32"
    if op in ("argmax", "argmin"):
        return "uint32"
    return dt if dt in FLOATS + ["complex64"] else "float32"


def kernel_input_dtype(op, dt):
    """The dtype the kernel sees after the builder's cast (bool sums count in int32, integer
    means and softmax compute in float32)."""
    if op in ("sum", "prod") and dt == "bool":
        return "int32"
    if op in ("mean", "softmax") and dt not in FLOATS + ["complex64"]:
        return "float32"
    return dt


def rand(rng, shape, dt, edges=False, ties=False, near_one=False):
    """Seeded random values of `dt`, never all zeros. edges: NaN, +-inf and -0.0 sprinkled in
    (floats), extreme values (integers); ties: few distinct values; near_one: magnitudes in
    [0.97, 1.03] (long products stay in range, where the order of the products does not
    matter)."""
    d = np_dtype(dt)
    if dt == "bool":
        x = rng.integers(0, 2, shape).astype(bool)
    elif dt in INTS:
        info = np.iinfo(d)
        hi = 6 if ties else 100
        x = rng.integers(max(info.min, -hi), min(info.max, hi), shape, endpoint=True).astype(d)
        if edges and x.size:
            flat = x.reshape(-1)
            for v in [info.max, info.min]:
                flat[rng.integers(0, flat.size)] = v
    elif dt == "complex64":
        if near_one:
            x = (np.exp(1j * rng.uniform(0, 2 * np.pi, shape)) * rng.uniform(0.97, 1.03, shape)).astype(d)
        elif ties:
            x = (rng.integers(-2, 3, shape) + 1j * rng.integers(-2, 3, shape)).astype(d)
        else:
            x = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(d)
        if edges and x.size:
            flat = x.reshape(-1)
            if rng.random() < 0.5:
                flat[rng.integers(0, flat.size)] = complex(np.nan, 1.0)
    else:
        if ties:
            x = rng.integers(-3, 4, shape).astype(d)
        elif near_one:
            x = (np.sign(rng.standard_normal(shape)) * rng.uniform(0.97, 1.03, shape)).astype(d)
        else:
            x = (rng.standard_normal(shape) * 3).astype(d)
        if edges and x.size:
            flat = x.reshape(-1)
            for v in [np.nan, np.inf, -np.inf, -0.0]:
                if rng.random() < 0.4:
                    flat[rng.integers(0, flat.size)] = v
    if x.size and not np.any(x):
        x.reshape(-1)[0] = 1
    return x


def row_major(shape):
    st, s = [], 1
    for n in reversed(shape):
        st.append(s)
        s *= n
    return list(reversed(st))


LAYOUTS = ["contiguous", "transposed", "permuted", "strided", "reversed", "broadcast"]


def layout_ok(layout, shape):
    if layout == "broadcast":
        return len(shape) >= 1 and shape[0] > 1
    if layout == "permuted":
        return len(shape) >= 3
    if layout in ("transposed", "reversed", "strided"):
        return len(shape) >= 1
    return True


def make_layout(values, layout):
    """(base, offset, strides): a 1-D base array and element strides/offset whose strided view
    has the elements of `values`. broadcast makes every index of axis 0 show row 0 (the values
    are replaced by that broadcast; use the returned `values`)."""
    x = np.asarray(values)
    shape = list(x.shape)
    nd = x.ndim
    if layout == "contiguous" or nd == 0:
        return x.reshape(-1).copy(), 0, row_major(shape), x
    if layout == "transposed":
        base = np.ascontiguousarray(x.transpose())
        return base.reshape(-1), 0, list(reversed(row_major(shape[::-1]))), x
    if layout == "permuted":
        perm = [1, 0] + list(range(2, nd))[::-1]  # a middle permutation of a 3-D+ base
        base = np.ascontiguousarray(x.transpose(perm))
        bst = row_major([shape[p] for p in perm])
        st = [0] * nd
        for i, p in enumerate(perm):
            st[p] = bst[i]
        return base.reshape(-1), 0, st, x
    if layout == "strided":
        big = np.zeros([2 * s for s in shape], dtype=x.dtype)
        big[tuple(slice(None, None, 2) for _ in shape)] = x
        return big.reshape(-1), 0, [2 * s for s in row_major([2 * s for s in shape])], x
    if layout == "reversed":
        base = np.ascontiguousarray(x[..., ::-1])
        st = row_major(shape)
        off = (shape[-1] - 1) * st[-1] if shape[-1] else 0
        st[-1] = -st[-1]
        return base.reshape(-1), off, st, x
    if layout == "broadcast":
        row = np.ascontiguousarray(x[:1])
        st = row_major(shape)
        st[0] = 0
        return row.reshape(-1), 0, st, np.broadcast_to(row, x.shape)
    raise ValueError(layout)


def _acc_int(x):
    dt = dt_name(x.dtype)
    return np.uint64 if dt == "bool" or dt.startswith("uint") else np.int64


def reference(op, x, axes, ddof=0):
    """The expected result of `op` over `axes` (a tuple of non-negative axes; None: all) of
    x, in float64/complex128 for inexact results (rounded by check), exact otherwise."""
    dt = dt_name(x.dtype)
    ax = None if axes is None else tuple(axes)
    od = out_dtype(op, dt)
    with np.errstate(all="ignore"):
        if op in ("sum", "prod"):
            f = np.sum if op == "sum" else np.prod
            if dt == "bool" or dt in INTS:
                return np.asarray(f(x, axis=ax, dtype=_acc_int(x))).astype(np_dtype(od))
            return np.asarray(f(x.astype(np.complex128 if dt == "complex64" else np.float64), axis=ax))
        if op in ("max", "min"):
            f = np.max if op == "max" else np.min
            if dt in FLOATS:
                return np.asarray(f(x.astype(np.float64), axis=ax))
            return np.asarray(f(x, axis=ax))
        if op in ("all", "any"):
            return np.asarray((np.all if op == "all" else np.any)(x, axis=ax))
        if op == "count_nonzero":
            return np.asarray(np.count_nonzero(x, axis=ax)).astype(np.int32)
        if op == "mean":
            return np.asarray(np.mean(x.astype(np.complex128 if dt == "complex64" else np.float64), axis=ax))
        xf = x.astype(np.float64) if dt != "complex64" else x
        if op in ("var", "std"):
            return np.asarray((np.var if op == "var" else np.std)(xf, axis=ax, ddof=ddof))
        if op == "logsumexp":
            m = np.max(xf, axis=ax, keepdims=True)
            ms = np.where(np.isfinite(m), m, 0)
            r = np.log(np.sum(np.exp(xf - ms), axis=ax, keepdims=True)) + ms
            return r.reshape(np.max(xf, axis=ax).shape)
        if op in ("argmax", "argmin"):
            f = np.argmax if op == "argmax" else np.argmin
            if dt == "bool" or dt in INTS:
                xf = x  # exact as they are (and no float64 copy of large inputs)
            if ax is not None and len(ax) != x.ndim:
                assert len(ax) == 1
                return np.asarray(f(xf, axis=ax[0])).astype(np.uint32)
            return np.asarray(f(xf)).astype(np.uint32)
        if op == "softmax":
            if xf.size == 0:
                return xf
            e = np.exp(xf - np.max(xf, axis=ax, keepdims=True))
            return e / np.sum(e, axis=ax, keepdims=True)
    raise ValueError(op)


def scale_of(op, x, axes):
    """The magnitude rounding errors of float accumulations scale with: the sum of |x| over
    each output's elements (sum), its mean (mean), the mean of x^2 (var) or its root (std);
    None for the other ops."""
    if op not in ("sum", "mean", "var", "std") or dt_name(x.dtype) == "bool":
        return None
    if op in ("sum", "mean") and dt_name(x.dtype) not in FLOATS + ["complex64"]:
        return None
    ax = None if axes is None else tuple(axes)
    with np.errstate(all="ignore"):
        a = np.abs(x.astype(np.complex128 if x.dtype.kind == "c" else np.float64))
        a = np.where(np.isfinite(a), a, 0)
        if op in ("var", "std"):
            a = a * a
        s = np.sum(a, axis=ax)
        if op != "sum":
            n = x.size if ax is None else int(np.prod([x.shape[i] for i in ax]))
            s = s / max(n, 1)
        if op == "std":
            s = np.sqrt(s)
    return np.asarray(s)


TOL = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-6, "float64": 1e-12, "complex64": 2e-6}
# Relative error of accumulations against the magnitude (scale_of): float32 sums add the lanes
# of one 16-byte load in float32 before float64.
ACC = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 2e-7, "float64": 1e-15, "complex64": 2e-7}


def tolerance(op, od, in_dt):
    """(rtol, atol) for results of dtype od."""
    rtol = TOL[od]
    atol = 0.0
    if op == "prod" and od == "float32":
        rtol = 1e-5
    if op == "prod" and od == "float64":
        rtol = 1e-10  # long products: n rounding errors in any order
    if op == "logsumexp":
        atol = TOL[od]  # results near 0 after cancellation
    if op == "softmax":
        atol = {"float16": 1e-3, "bfloat16": 8e-3, "float32": 1e-7, "float64": 1e-15}[od]
        if od == "float32":
            rtol = 2e-6
    if op in ("var", "std") and od == "float32" and in_dt != "float32":
        rtol = 1e-5
    if od in ("float16", "bfloat16"):
        rtol = 2 * TOL[od]
        atol = TOL[od]
    return rtol, atol


def check(op, got, want, x, axes, tag=""):
    """Asserts that `got` (the GPU's result) is `want` (reference()) rounded to the result
    dtype, within tolerances for inexact results; returns the worst error relative to the
    allowance (<= 1 passes)."""
    dt = dt_name(x.dtype)
    od = out_dtype(op, dt)
    assert dt_name(got.dtype) == od, f"{tag}: dtype {got.dtype} != {od}"
    want = np.asarray(want)
    assert got.shape == want.shape, f"{tag}: shape {got.shape} != {want.shape}"
    if od in INTS or od in ("bool", "uint32"):
        wt = want.astype(np_dtype(od)) if od != "bool" else want.astype(bool)
        bad = got != wt
        if np.any(bad):
            i = np.argwhere(bad)[0]
            raise AssertionError(f"{tag}: {np.sum(bad)} of {got.size} differ; first at {tuple(i)}: "
                                 f"got {got[tuple(i)]} want {wt[tuple(i)]}")
        return 0.0
    with np.errstate(all="ignore"):
        wt = want.astype(np_dtype(od))
        c = np.complex128 if od == "complex64" else np.float64
        g, w = got.astype(c), wt.astype(c)
        rtol, atol = tolerance(op, od, dt)
        allow = atol + rtol * np.abs(w)
        if op == "prod" and od in ("float32", "float64"):
            # A product that underflows into subnormals keeps only absolute precision there (any
            # order of multiplication rounds differently): below the smallest normal number,
            # results agree to within that number.
            allow = np.maximum(allow, np.finfo(np_dtype(od)).tiny)
        s = scale_of(op, x, axes)
        if s is not None:
            allow = allow + ACC[od] * s
        err = np.abs(g - w)
        # A complex value is NaN when either part is (NumPy's and the CPU's NaN results differ
        # in the other part).
        gn, wn = np.isnan(g), np.isnan(w)
        same = gn == wn
        parts = [(g, w)] if od != "complex64" else [(g.real, w.real), (g.imag, w.imag)]
        for gp, wp in parts:
            same &= wn | (gp == wp) | ~np.isinf(wp)
        finite = np.isfinite(w) & np.isfinite(g)
        ok = same & (~finite | (err <= allow))
        ratio = np.where(finite, err / np.maximum(allow, 1e-300), 0)
    if not np.all(ok):
        i = tuple(np.argwhere(~ok)[0])
        raise AssertionError(f"{tag}: {np.sum(~ok)} of {got.size} wrong; first at {i}: got {g[i]!r} "
                             f"want {w[i]!r} (allowed {allow[i] if np.ndim(allow) else allow:.3g})")
    return float(np.max(ratio)) if ratio.size else 0.0
