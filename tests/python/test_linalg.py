"""The matmul family against NumPy: matmul (batched, broadcast, 1-D operands, strided and
transposed views, empty, NaN/inf), addmm, tensordot, inner, outer, vecdot, kron; promotion and
the dtypes of every result; the errors, which name the op and the shapes."""
import ctypes as C
import itertools

import numpy as np
import pytest

from conftest import sample
from nvc import (BF16, CODE, FLOATS, INTS, D, I, NuvecError, Session, assert_close, ints, lib,
                 np_dtype, nv_name, ref64, sig)

P = C.c_void_p
IP = C.POINTER(C.c_int)
sig("nv_matmul", P, P, P)
sig("nv_addmm", P, P, P, P, D, D)
sig("nv_tensordot", P, P, P, I)
sig("nv_tensordot_axes", P, P, P, IP, IP, I)
sig("nv_inner", P, P, P)
sig("nv_outer", P, P, P)
sig("nv_vecdot", P, P, P, I)
sig("nv_kron", P, P, P)
sig("nv_reshape", P, P, IP, I)

NUMERIC = INTS + FLOATS + ["complex64"]
LAYOUTS = ["contiguous", "transposed", "strided", "reversed"]
EPS = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": 2.0**-24, "float64": 2.0**-53,
       "complex64": 2.0**-24}


def rand(rng, shape, dtype, full_range=False):
    """Seeded random values of `dtype` (never all zeros)."""
    dt = np_dtype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype in INTS:
        info = np.iinfo(dt)
        lo, hi = (info.min, info.max) if full_range else (max(info.min, -100), min(info.max, 100))
        return rng.integers(lo, hi, shape, endpoint=True, dtype=dt)
    if dtype == "complex64":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return (rng.standard_normal(shape) * 3).astype(dt)


def int_matmul(a, b, dt):
    """NumPy's integer matmul in dtype `dt` (wrapping), for any operand dtypes."""
    return np.matmul(a.astype(np_dtype(dt)), b.astype(np_dtype(dt)))


def check_product(got, want, bound_scale, dt, k):
    """Compares a product with its float64 reference: exact for integers; for floats within
    (result rounding + k accumulation roundings) of the magnitudes |a| @ |b|."""
    assert nv_name(got.dtype) == dt, f"dtype {got.dtype} != {dt}"
    if dt in INTS or dt == "bool":
        np.testing.assert_array_equal(got, np.asarray(want).astype(np_dtype(dt)))
        return
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    acc = EPS["float64"] if dt == "float64" else EPS["float32"]
    tol = 2 * (EPS[dt] + (k + 2) * acc) * np.asarray(bound_scale) + 1e-300
    g = ref64(got)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
    np.testing.assert_array_equal(g[np.isinf(want)], want[np.isinf(want)])
    with np.errstate(invalid="ignore"):
        err = np.abs(g - want)
    bad = finite & ~(err <= tol)
    assert not bad.any(), f"max error {err[bad].max()} over bound at {np.argwhere(bad)[:3]}"


def ref_product(a, b, dt):
    """a @ b in float64 (complex128) after casting both to the computing dtype `dt`, and the
    magnitudes |a| @ |b| the error bound scales with."""
    ra = ref64(a.astype(np_dtype(dt)))
    rb = ref64(b.astype(np_dtype(dt)))
    with np.errstate(all="ignore"):
        special = not (np.isfinite(ra).all() and np.isfinite(rb).all())
        if special and ra.ndim >= 2 and rb.ndim >= 2 and not np.iscomplexobj(ra):
            # Real NaN and inf follow IEEE arithmetic term by term, not NumPy's BLAS build
            # (kernels differ by CPU in how they treat special values).
            want = (ra[..., :, :, None] * rb[..., None, :, :]).sum(-2)
        else:
            want = ra @ rb
        return want, np.nan_to_num(np.abs(ra)) @ np.nan_to_num(np.abs(rb))


def read(nv, h):
    return nv.read(nv.own(h))


def error_of(nv, h):
    h = nv.own(h)
    st, msg = nv.status(h)
    assert st != 0, "expected an error"
    with pytest.raises(NuvecError):
        nv.read(h)
    return msg


# ---- matmul ----

SHAPE_PAIRS = [
    ((3, 4), (4, 5)), ((5,), (5,)), ((5,), (5, 3)), ((2, 3, 4), (4,)), ((2, 3, 4), (4, 5)),
    ((4,), (2, 4, 3)), ((2, 1, 3, 4), (5, 4, 2)), ((1, 1), (1, 1)), ((2, 2, 3, 4), (2, 1, 4, 5)),
    ((7, 1), (1, 6)), ((3, 17), (17, 9)), ((0, 3), (3, 2)), ((3, 0), (0, 2)), ((2, 3), (3, 0)),
    ((0, 2, 3), (3, 4)), ((4, 3), (2, 0, 3, 5)),
]


def matmul_cases():
    for dt, (sa, sb), la, lb in itertools.product(NUMERIC, SHAPE_PAIRS, LAYOUTS, LAYOUTS):
        yield dt, sa, sb, la, lb


@pytest.mark.parametrize("dt,sa,sb,la,lb", sample(matmul_cases(), 150, salt=51))
def test_matmul_matches_numpy(nv, rng, dt, sa, sb, la, lb):
    a, b = rand(rng, sa, dt), rand(rng, sb, dt)
    got = read(nv, lib.nv_matmul(nv.view(a, la), nv.view(b, lb)))
    k = sa[-1]
    if dt in INTS:
        check_product(got, int_matmul(a, b, dt), None, dt, k)
    else:
        want, scale = ref_product(a, b, dt)
        check_product(got, want, scale, dt, k)


@pytest.mark.parametrize("dt", NUMERIC)
def test_matmul_every_dtype_larger(nv, rng, dt):
    # Several column tiles and row groups of the integer kernel; a full sgemm/dgemm/cgemm.
    a, b = rand(rng, (2, 67, 45), dt), rand(rng, (45, 300), dt)
    got = read(nv, lib.nv_matmul(nv.array(a), nv.array(b)))
    if dt in INTS:
        check_product(got, int_matmul(a, b, dt), None, dt, 45)
    else:
        want, scale = ref_product(a, b, dt)
        check_product(got, want, scale, dt, 45)


@pytest.mark.parametrize("dt", INTS)
def test_matmul_integers_wrap(nv, rng, dt):
    a, b = rand(rng, (5, 33), dt, full_range=True), rand(rng, (33, 7), dt, full_range=True)
    info = np.iinfo(np_dtype(dt))
    a[0, :] = info.max
    b[:, 0] = info.max
    a[1, :] = info.min
    got = read(nv, lib.nv_matmul(nv.array(a), nv.array(b)))
    np.testing.assert_array_equal(got, int_matmul(a, b, dt))


@pytest.mark.parametrize("da,db,want", [
    ("int8", "uint8", "int16"), ("int32", "float16", "float16"), ("bfloat16", "float16", "float32"),
    ("bool", "float32", "float32"), ("bool", "int8", "int8"), ("float64", "complex64", "complex64"),
    ("int64", "float32", "float32"), ("uint32", "int32", "int64"), ("float32", "float64", "float64"),
    ("uint64", "int8", "float32"), ("bfloat16", "int64", "bfloat16"),
])
def test_matmul_promotion(nv, rng, da, db, want):
    a, b = rand(rng, (3, 4), da), rand(rng, (4, 2), db)
    got = read(nv, lib.nv_matmul(nv.array(a), nv.array(b)))
    if want in INTS:
        check_product(got, int_matmul(a, b, want), None, want, 4)
    else:
        ref, scale = ref_product(a, b, want)
        check_product(got, ref, scale, want, 4)


def test_matmul_batch_broadcast_views(nv, rng):
    # b broadcast over a batch (zero strides), a batch read with a step, a transposed b.
    a = rand(rng, (6, 5, 4), "float32")
    b = rand(rng, (4, 3), "float32")
    shape, n = ints((2, 6, 4, 3))
    bb = nv.own(lib.nv_broadcast_to(nv.array(b), shape, n))
    got = read(nv, lib.nv_matmul(nv.view(a, "strided"), bb))
    want, scale = ref_product(a, np.broadcast_to(b, (2, 6, 4, 3)), "float32")
    check_product(got, want, scale, "float32", 4)
    # Both operands broadcast: a (1, 3, 4) against b (5, 1, 4, 2).
    a2, b2 = rand(rng, (1, 3, 4), "float64"), rand(rng, (5, 1, 4, 2), "float64")
    got = read(nv, lib.nv_matmul(nv.view(a2, "transposed"), nv.view(b2, "reversed")))
    want, scale = ref_product(a2, b2, "float64")
    check_product(got, want, scale, "float64", 4)


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64", "float16", "int32"])
@pytest.mark.parametrize("batch,m,k,n", [(64, 16, 16, 16), (9, 70, 50, 60), (3, 1, 5, 1),
                                         (40, 1, 8, 6)])
def test_matmul_batched_paths(nv, rng, dt, batch, m, k, n):
    # Batches run in parallel (small products), one by one, or folded into one product when b
    # is shared: each must give every batch its own product.
    a, b = rand(rng, (batch, m, k), dt), rand(rng, (batch, k, n), dt)
    shared = rand(rng, (k, n), dt)
    for bb in (b, shared):
        got = read(nv, lib.nv_matmul(nv.array(a), nv.array(bb)))
        if dt in INTS:
            check_product(got, int_matmul(a, bb, dt), None, dt, k)
        else:
            want, scale = ref_product(a, bb, dt)
            check_product(got, want, scale, dt, k)


def test_matmul_transposed_operands_in_place(nv, rng):
    # a.T @ b, a @ b.T and sub-matrix views with a leading dimension larger than the width.
    base = rand(rng, (10, 12), "float32")
    a = nv.array(base)
    perm, n = ints((1, 0))
    at = nv.own(lib.nv_transpose(a, perm, n))
    got = read(nv, lib.nv_matmul(at, a))
    want, scale = ref_product(base.T, base, "float32")
    check_product(got, want, scale, "float32", 10)
    start, n = ints((1, 2))
    stop, _ = ints((9, 11))
    sub = nv.own(lib.nv_slice(a, start, stop, None, n))  # (8, 9) with row stride 12
    subt = nv.own(lib.nv_transpose(sub, perm, 2))
    got = read(nv, lib.nv_matmul(sub, subt))
    s = base[1:9, 2:11]
    want, scale = ref_product(s, s.T, "float32")
    check_product(got, want, scale, "float32", 9)


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64", "float16", "bfloat16"])
def test_matmul_nan_inf(nv, rng, dt):
    a, b = rand(rng, (4, 5), dt), rand(rng, (5, 3), dt)
    a[0, 1] = np.nan
    a[2, 0] = np.inf
    b[0, 2] = 0  # inf * 0 is NaN in that column
    b[3, 1] = -np.inf
    got = read(nv, lib.nv_matmul(nv.array(a), nv.array(b)))
    want, scale = ref_product(a, b, dt)
    check_product(got, want, scale, dt, 5)
    assert np.isnan(ref64(got)[0]).all()


@pytest.mark.parametrize("dt", ["float32", "int16", "float16", "complex64", "float64"])
def test_matmul_empty(nv, dt):
    z = read(nv, lib.nv_matmul(nv.array(np.ones((3, 0), np_dtype(dt))),
                               nv.array(np.ones((0, 4), np_dtype(dt)))))
    assert z.shape == (3, 4) and nv_name(z.dtype) == dt and not ref64(z).any()
    e = read(nv, lib.nv_matmul(nv.array(np.ones((0, 3), np_dtype(dt))),
                               nv.array(np.ones((3, 4), np_dtype(dt)))))
    assert e.shape == (0, 4)
    e = read(nv, lib.nv_matmul(nv.array(np.ones((2, 0, 3), np_dtype(dt))),
                               nv.array(np.ones((3,), np_dtype(dt)))))
    assert e.shape == (2, 0)


def test_matmul_errors(nv):
    f = nv.array(np.ones((3, 4), np.float32))
    g = nv.array(np.ones((5, 2), np.float32))
    msg = error_of(nv, lib.nv_matmul(f, g))
    assert "matmul" in msg and "(3,4)" in msg and "(5,2)" in msg
    msg = error_of(nv, lib.nv_matmul(nv.array(np.float32(1)), g))
    assert "matmul" in msg and "dimension" in msg
    msg = error_of(nv, lib.nv_matmul(nv.array(np.ones((2, 3, 4))), nv.array(np.ones((3, 4, 5)))))
    assert "matmul" in msg and "broadcast" in msg and "(2,3,4)" in msg
    msg = error_of(nv, lib.nv_matmul(nv.array(np.ones((2, 2), bool)), nv.array(np.ones((2, 2), bool))))
    assert "matmul" in msg and "bool" in msg
    msg = error_of(nv, lib.nv_matmul(None, f))
    assert "matmul" in msg and "NULL" in msg
    # An error is sticky: a product of a failed array carries the same message.
    bad = nv.own(lib.nv_matmul(f, g))
    assert error_of(nv, lib.nv_matmul(bad, f)) == nv.status(bad)[1]


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("sa,sb", [((1, 7), (7, 5)), ((6, 7), (7, 1)), ((3, 1, 7), (3, 7, 4)),
                                   ((5,), (5, 3)), ((2, 3, 4), (4,)), ((1, 9), (9, 1)),
                                   ((4, 6, 1, 8), (8, 33))])
def test_matrix_vector_products_every_layout(nv, rng, dt, sa, sb):
    """One-row and one-column products (BLAS gemv) with each operand in every layout, and as
    addmm with both scalars."""
    a, b = rand(rng, sa, dt), rand(rng, sb, dt)
    want, scale = ref_product(a, b, dt)
    for la, lb in itertools.product(LAYOUTS, LAYOUTS):
        got = read(nv, lib.nv_matmul(nv.view(a, la), nv.view(b, lb)))
        check_product(got, want, scale, dt, sa[-1])
    if len(sa) == 2 and len(sb) == 2:
        c = rand(rng, (sa[0], sb[1]), dt)
        got = read(nv, lib.nv_addmm(nv.view(c, "strided"), nv.view(a, "transposed"),
                                    nv.view(b, "reversed"), 1.5, -0.5))
        ref = 1.5 * want - 0.5 * ref64(c)
        check_product(got, ref, 1.5 * scale + 0.5 * np.abs(ref64(c)) + np.abs(ref), dt, sa[-1])


# ---- addmm ----

ADDMM_CASES = [
    # (c shape, a shape, b shape)
    ((4, 3), (4, 5), (5, 3)), ((3,), (4, 5), (5, 3)), ((4, 1), (4, 5), (5, 3)), ((), (4, 5), (5, 3)),
    ((2, 4, 3), (2, 4, 5), (5, 3)), ((1, 3), (2, 4, 5), (2, 5, 3)), ((3,), (5,), (5, 3)),
    ((4,), (4, 5), (5,)), ((), (5,), (5,)), ((4, 3), (4, 0), (0, 3)),
]


def addmm_cases():
    for dt, shapes, (alpha, beta) in itertools.product(
            ["float32", "float64", "complex64", "float16", "bfloat16"], ADDMM_CASES,
            [(1.0, 1.0), (2.0, -0.5), (0.0, 1.5), (1.5, 0.0)]):
        yield dt, shapes, alpha, beta


@pytest.mark.parametrize("dt,shapes,alpha,beta", sample(addmm_cases(), 60, salt=52))
def test_addmm_matches_numpy(nv, rng, dt, shapes, alpha, beta):
    sc, sa, sb = shapes
    c, a, b = rand(rng, sc, dt), rand(rng, sa, dt), rand(rng, sb, dt)
    got = read(nv, lib.nv_addmm(nv.view(c, "contiguous"), nv.view(a, "transposed"),
                                nv.view(b, "strided"), alpha, beta))
    prod, scale = ref_product(a, b, dt)
    want = alpha * prod + beta * ref64(c)
    bound = abs(alpha) * scale + abs(beta) * np.abs(ref64(c)) + np.abs(want)
    check_product(got, want, bound, dt, sa[-1])


@pytest.mark.parametrize("dc,dab,want", [
    ("int32", "int32", "float32"), ("float16", "int32", "float16"), ("float64", "float32", "float64"),
    ("int8", "float16", "float16"), ("bool", "bfloat16", "bfloat16"), ("complex64", "float32", "complex64"),
    ("bool", "int16", "float32"),
])
def test_addmm_dtypes(nv, rng, dc, dab, want):
    c, a, b = rand(rng, (3, 2), dc), rand(rng, (3, 4), dab), rand(rng, (4, 2), dab)
    got = read(nv, lib.nv_addmm(nv.array(c), nv.array(a), nv.array(b), 0.5, 2.0))
    prod, scale = ref_product(a, b, want)
    ref = 0.5 * prod + 2.0 * ref64(c.astype(np_dtype(want)))
    check_product(got, ref, 0.5 * scale + 2 * np.abs(ref64(c)) + np.abs(ref), want, 4)


def test_addmm_blas_zero_rules(nv, rng):
    # beta = 0 does not read c; alpha = 0 does not compute a @ b (BLAS and MLX semantics).
    a, b = rand(rng, (2, 3), "float32"), rand(rng, (3, 2), "float32")
    c = np.full((2, 2), np.nan, np.float32)
    got = read(nv, lib.nv_addmm(nv.array(c), nv.array(a), nv.array(b), 1.0, 0.0))
    check_product(got, ref64(a) @ ref64(b), np.abs(ref64(a)) @ np.abs(ref64(b)), "float32", 3)
    a[0, 0] = np.nan
    c = rand(rng, (2, 2), "float32")
    got = read(nv, lib.nv_addmm(nv.array(c), nv.array(a), nv.array(b), 0.0, 2.0))
    np.testing.assert_array_equal(got, 2 * c)


@pytest.mark.parametrize("dt", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("shape", [(2, 9, 7, 5), (1, 64, 96, 48), (3, 33, 130, 17)])
def test_matmul_output_not_read(nv, rng, dt, shape):
    # The kernel no longer zeroes a gemm's output before BLAS (whose beta = 0 pass writes it):
    # outputs land in blocks freed just before, filled with NaN here, and must not see them.
    b_, m, n, k = shape
    for _ in range(3):
        with Session() as tmp:
            junk = np.full((b_, m, n), np.nan, np_dtype(dt))
            tmp.read(tmp.own(lib.nv_matmul(tmp.array(junk), tmp.array(np.eye(n, dtype=np_dtype(dt))))))
        a, b = rand(rng, (b_, m, k), dt), rand(rng, (k, n), dt)
        for la, lb in (("contiguous", "contiguous"), ("transposed", "transposed")):
            got = read(nv, lib.nv_matmul(nv.view(a, la), nv.view(b, lb)))
            want, scale = ref_product(a, b, dt)
            assert np.isfinite(got).all()
            check_product(got, want, scale, dt, k)


def test_addmm_errors(nv):
    a = nv.array(np.ones((4, 5), np.float32))
    b = nv.array(np.ones((5, 3), np.float32))
    msg = error_of(nv, lib.nv_addmm(nv.array(np.ones((2, 4, 3), np.float32)), a, b, 1.0, 1.0))
    assert "addmm" in msg and "(2,4,3)" in msg and "(4,3)" in msg
    msg = error_of(nv, lib.nv_addmm(nv.array(np.ones((5,), np.float32)), a, b, 1.0, 1.0))
    assert "addmm" in msg and "(5,)" in msg
    msg = error_of(nv, lib.nv_addmm(nv.array(np.ones(3, np.float32)), b, b, 1.0, 1.0))
    assert "addmm" in msg and "(5,3)" in msg
    msg = error_of(nv, lib.nv_addmm(nv.array(np.ones(3, np.float32)), nv.array(np.float32(2)), b, 1.0, 1.0))
    assert "addmm" in msg and "dimension" in msg
    ab, bb = nv.array(np.ones((2, 2), bool)), nv.array(np.ones((2, 3), bool))
    msg = error_of(nv, lib.nv_addmm(nv.array(np.ones(3, bool)), ab, bb, 1.0, 1.0))
    assert "addmm" in msg and "bool" in msg
    # bool a and b with a float c compute in the float dtype (MLX).
    got = read(nv, lib.nv_addmm(nv.array(np.ones(3, np.float32)), ab, bb, 2.0, 1.0))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.full((2, 3), 5, np.float32))
    assert "addmm" in error_of(nv, lib.nv_addmm(None, a, b, 1.0, 1.0))


# ---- tensordot and inner ----

def td_axes(nv, a, b, axa, axb):
    pa, n = ints(axa)
    pb, _ = ints(axb)
    return lib.nv_tensordot_axes(a, b, pa, pb, n)


TD_CASES = [
    ((2, 3, 4), (3, 4, 5), 2), ((2, 3, 4), (4, 5), 1), ((2, 3), (4,), 0), ((3,), (3,), 1),
    ((), (), 0), ((2, 3), (2, 3), 2), ((0, 3), (3, 2), 1), ((2, 0), (0, 3), 1),
]


@pytest.mark.parametrize("dt", ["float32", "float64", "int32", "float16", "complex64", "uint8"])
@pytest.mark.parametrize("sa,sb,axes", TD_CASES)
def test_tensordot_int_axes(nv, rng, dt, sa, sb, axes):
    a, b = rand(rng, sa, dt), rand(rng, sb, dt)
    got = read(nv, lib.nv_tensordot(nv.view(a, "transposed"), nv.array(b), axes))
    if dt in INTS:
        check_product(got, np.tensordot(a, b, axes), None, dt, 1)
    else:
        want = np.tensordot(ref64(a), ref64(b), axes)
        scale = np.tensordot(np.abs(ref64(a)), np.abs(ref64(b)), axes)
        check_product(got, want, scale, dt, int(np.prod(sa[len(sa) - axes:])))


@pytest.mark.parametrize("sa,sb,axa,axb", [
    ((2, 3, 4), (4, 3, 5), [1, 2], [1, 0]), ((2, 3, 4), (4, 3, 5), [-2, -1], [1, 0]),
    ((2, 3, 4), (4, 2), [0], [1]), ((5, 2, 3), (3, 5), [2, 0], [0, 1]), ((3, 4), (4, 3), [], []),
])
@pytest.mark.parametrize("dt", ["float32", "int64", "bfloat16"])
def test_tensordot_axis_lists(nv, rng, sa, sb, axa, axb, dt):
    a, b = rand(rng, sa, dt), rand(rng, sb, dt)
    got = read(nv, td_axes(nv, nv.array(a), nv.view(b, "reversed"), axa, axb))
    if dt in INTS:
        check_product(got, np.tensordot(a, b, (axa, axb)), None, dt, 1)
    else:
        want = np.tensordot(ref64(a), ref64(b), (axa, axb))
        scale = np.tensordot(np.abs(ref64(a)), np.abs(ref64(b)), (axa, axb))
        k = int(np.prod([sa[i] for i in axa])) if axa else 1
        check_product(got, want, scale, dt, k)


def test_tensordot_errors(nv):
    a = nv.array(np.ones((2, 3, 4), np.float32))
    b = nv.array(np.ones((4, 3, 5), np.float32))
    for axes in (-1, 4):
        msg = error_of(nv, lib.nv_tensordot(a, b, axes))
        assert "tensordot" in msg and "(2,3,4)" in msg and "(4,3,5)" in msg
    msg = error_of(nv, lib.nv_tensordot(a, b, 2))
    assert "tensordot" in msg and "differ" in msg
    msg = error_of(nv, td_axes(nv, a, b, [1, 1], [1, 0]))
    assert "tensordot" in msg and "repeated" in msg
    msg = error_of(nv, td_axes(nv, a, b, [3], [0]))
    assert "tensordot" in msg and "range" in msg
    msg = error_of(nv, td_axes(nv, a, b, [1], [0]))
    assert "tensordot" in msg and "differ" in msg
    bb = nv.array(np.ones((3, 3), bool))
    assert "bool" in error_of(nv, lib.nv_tensordot(bb, bb, 1))


@pytest.mark.parametrize("sa,sb", [((5,), (5,)), ((2, 3), (4, 3)), ((2, 1, 4), (3, 4)),
                                   ((), (3,)), ((2, 3), ()), ((0,), (0,)), ((2, 0), (3, 0))])
@pytest.mark.parametrize("dt", ["float32", "int16", "complex64", "float64"])
def test_inner(nv, rng, sa, sb, dt):
    a, b = rand(rng, sa, dt), rand(rng, sb, dt)
    got = read(nv, lib.nv_inner(nv.array(a), nv.view(b, "strided")))
    if dt in INTS:
        with np.errstate(over="ignore"):
            check_product(got, np.inner(a, b), None, dt, 1)
    else:
        want = np.inner(ref64(a), ref64(b))
        check_product(got, want, np.inner(np.abs(ref64(a)), np.abs(ref64(b))), dt, max(1, sa[-1] if sa else 1))


def test_inner_errors_and_bool_scalar(nv):
    msg = error_of(nv, lib.nv_inner(nv.array(np.ones((2, 3))), nv.array(np.ones((4, 2)))))
    assert "inner" in msg and "(2,3)" in msg and "(4,2)" in msg
    assert "bool" in error_of(nv, lib.nv_inner(nv.array(np.ones(3, bool)), nv.array(np.ones(3, bool))))
    # With a 0-d operand inner is the element-wise product, bool included (MLX).
    got = read(nv, lib.nv_inner(nv.array(np.array(True)), nv.array(np.array([True, False]))))
    np.testing.assert_array_equal(got, [True, False])


# ---- outer and kron ----

@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 2), (3,)), ((), (3,)), ((0,), (3,)), ((2,), ())])
@pytest.mark.parametrize("dt", ["bool", "int8", "uint32", "float16", "float32", "complex64"])
def test_outer(nv, rng, sa, sb, dt):
    a, b = rand(rng, sa, dt, full_range=True), rand(rng, sb, dt, full_range=True)
    got = read(nv, lib.nv_outer(nv.view(a, "reversed"), nv.array(b)))
    with np.errstate(over="ignore"):
        want = np.outer(a, b) if dt in INTS + ["bool"] else np.outer(ref64(a), ref64(b))
    assert got.shape == want.shape
    assert_close(got, want, dt)


def test_outer_promotes(nv):
    got = read(nv, lib.nv_outer(nv.array(np.ones((2, 2), np.int8)), nv.array(np.ones(3, np.uint8))))
    assert got.dtype == np.int16 and got.shape == (4, 3)


@pytest.mark.parametrize("sa,sb", [((2, 3), (4,)), ((2, 2), (3, 3)), ((), (4,)), ((2, 1, 3), (2, 2)),
                                   ((3,), (2, 2)), ((), ())])
@pytest.mark.parametrize("dt", ["bool", "int32", "uint8", "bfloat16", "float64", "complex64"])
def test_kron(nv, rng, sa, sb, dt):
    a, b = rand(rng, sa, dt, full_range=True), rand(rng, sb, dt, full_range=True)
    got = read(nv, lib.nv_kron(nv.view(a, "transposed"), nv.array(b)))
    with np.errstate(over="ignore"):
        want = np.kron(a, b) if dt in INTS + ["bool"] else np.kron(ref64(a), ref64(b))
    assert got.shape == np.shape(want)
    assert_close(got, want, dt)


def test_kron_errors(nv):
    msg = error_of(nv, lib.nv_kron(nv.array(np.ones((2, 0))), nv.array(np.ones(3))))
    assert "kron" in msg and "empty" in msg and "(2,0)" in msg


# ---- vecdot ----

SUM_DTYPE = {"bool": "int32", "int8": "int32", "int16": "int32", "uint8": "uint32",
             "uint16": "uint32"}


def vecdot_ref(a, b, axis):
    a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
    return (np.conj(a)[..., None, :] @ b[..., :, None])[..., 0, 0]


def vecdot_cases():
    shapes = [((3, 4), (3, 4), -1), ((3, 4), (4,), -1), ((2, 1, 5), (3, 5), -1), ((3, 4), (3, 4), 0),
              ((4, 3), (2, 1, 3), -1), ((5,), (5,), 0), ((0, 3), (3,), -1), ((3, 0), (3, 0), -1),
              ((6, 2), (1, 6, 2), -2)]
    for dt, s, lay in itertools.product(["bool"] + NUMERIC, shapes, LAYOUTS):
        yield dt, s, lay


@pytest.mark.parametrize("dt,shapes,layout", sample(vecdot_cases(), 90, salt=53))
def test_vecdot_matches_numpy(nv, rng, dt, shapes, layout):
    sa, sb, axis = shapes
    a, b = rand(rng, sa, dt, full_range=True), rand(rng, sb, dt, full_range=True)
    got = read(nv, lib.nv_vecdot(nv.view(a, layout), nv.array(b), axis))
    out = SUM_DTYPE.get(dt, dt)
    if out in INTS:
        want = vecdot_ref(a.astype(np.int64), b.astype(np.int64), axis).astype(np_dtype(out))
        check_product(got, want, None, out, 1)
    else:
        ra, rb = ref64(a), ref64(b)
        want = vecdot_ref(ra, rb, axis)
        scale = vecdot_ref(np.abs(ra), np.abs(rb), axis)
        # Accumulated in float64: only the final rounding counts.
        check_product(got, want, scale, out, 0 if dt != "float64" else sa[axis])


def test_vecdot_conjugates_first_operand(nv):
    a = np.array([1 + 2j, 3 - 1j], np.complex64)
    b = np.array([2 + 1j, 1 + 1j], np.complex64)
    got = read(nv, lib.nv_vecdot(nv.array(a), nv.array(b), -1))
    assert got.dtype == np.complex64
    assert got == np.vecdot(a, b) == 6 + 1j


def test_vecdot_accurate_long_sums(nv, rng):
    for dt in ("float32", "float16", "float64"):
        a, b = rand(rng, (3, 100000), dt), rand(rng, (100000,), dt)
        a[0, :2] = [1e4, -1e4] if dt != "float16" else [100, -100]
        got = ref64(read(nv, lib.nv_vecdot(nv.array(a), nv.array(b), -1)))
        want = ref64(a) @ ref64(b)
        scale = np.abs(ref64(a)) @ np.abs(ref64(b))
        tol = 2 * EPS[dt] * np.abs(want) + (1e-11 if dt == "float64" else 1e-12) * scale
        assert (np.abs(got - want) <= tol).all(), (dt, got, want)


def test_vecdot_nan_inf_and_errors(nv):
    a = np.array([[1, np.nan], [np.inf, 0], [np.inf, 1]], np.float32)
    b = np.array([1, 1], np.float32)
    got = read(nv, lib.nv_vecdot(nv.array(a), nv.array(b), -1))
    np.testing.assert_array_equal(np.isnan(got), [True, False, False])
    assert got[1] == np.inf and got[2] == np.inf
    f = nv.array(np.ones((2, 3)))
    for other, axis, words in [(np.ones((2, 4)), -1, ["differ", "(2,4)"]),
                               (np.ones((2, 3)), 2, ["range"]), (np.ones((4, 1, 3)), 1, ["(4,1,3)"]),
                               (np.float64(1), -1, ["dimension"])]:
        msg = error_of(nv, lib.nv_vecdot(f, nv.array(other), axis))
        assert "vecdot" in msg and all(w in msg for w in words), msg


def test_scoped_composed_ops_do_not_leak(nv, rng):
    # Composed builders hand their temporaries back: active memory returns to its level.
    a = nv.array(rand(rng, (3, 4), "float32"))
    b = nv.array(rand(rng, (4, 3), "float32"))
    c = nv.array(rand(rng, (3,), "float32"))
    makers = (lambda: lib.nv_tensordot(a, b, 1), lambda: lib.nv_inner(a, a),
              lambda: lib.nv_kron(a, b), lambda: lib.nv_outer(a, b),
              lambda: lib.nv_addmm(c, a, b, 1.0, 1.0), lambda: lib.nv_vecdot(a, a, 0))
    # One round first: on a GPU the inputs' device copies stay cached with them (counted).
    for rounds in range(2):
        if rounds == 1:
            before = lib.nv_get_active_memory()
        for make in makers:
            h = make()
            assert lib.nv_eval1(h) == 0
            lib.nv_release(h)
    assert lib.nv_get_active_memory() == before
