"""paged_attention (nv_fast_paged_attention) through the C API against a NumPy float64
reference of its definition: every float dtype, head sizes 64/80/96/128/256 and odd ones,
block sizes 16/32 and odd ones, context lengths 1..4097 (one spanning every block of its table,
others a few keys), decode (one token a sequence) and chunked prefill (chunks longer than their
context: rows that see no key give 0), grouped-query heads, Dv != D, padding sequences of
length 0, strided and transposed inputs, integer tables of other dtypes, NaN and -inf, the
table entries past a context never read; and the errors, at the call (shapes) and at the
evaluation (a block id or a context length out of range)."""
import ctypes as C

import numpy as np
import pytest

from conftest import sample
from nvc import FLOATS, NuvecError, lib, np_dtype, nv_name, ref64, sig

P = C.c_void_p
sig("nv_fast_paged_attention", P, P, P, P, P, P, C.c_float)

# Output tolerances relative to max|v|: the output rounding plus float32 accumulation (these
# files also run with the GPU as the default device, which sums in another order).
TOL = {"float16": 4e-3, "bfloat16": 2e-2, "float32": 2e-5, "float64": 1e-12}


def ref_paged(q, kp, vp, tables, lens, scale):
    """The definition in float64: query i of sequence s (token s c + i) attends to the keys
    j <= L - c + i of its context, key j in slot j % BS of block tables[s, j // BS]; a query
    that sees no key gives 0."""
    q, kp, vp = ref64(q), ref64(kp), ref64(vp)
    T, Hq, D = q.shape
    NB, BS, Hkv, Dv = vp.shape
    S = tables.shape[0]
    c, G = (T // S if S else 0), Hq // Hkv
    kf, vf = kp.reshape(NB * BS, Hkv, D), vp.reshape(NB * BS, Hkv, Dv)
    out = np.zeros((T, Hq, Dv))
    for s in range(S):
        L = int(lens[s])
        j = np.arange(L)
        slots = tables[s, j // BS].astype(np.int64) * BS + j % BS
        K, V = kf[slots], vf[slots]
        for i in range(c):
            n = L - c + i + 1
            if n <= 0:
                continue
            for h in range(Hq):
                with np.errstate(invalid="ignore", over="ignore"):
                    sc = scale * (K[:n, h // G] @ q[s * c + i, h])
                    e = np.exp(sc - sc.max())
                    out[s * c + i, h] = (e @ V[:n, h // G]) / e.sum()
    return out


def rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np_dtype(dtype))


def make_tables(rng, lens, BS, M, NB):
    """Block tables [S, M] of distinct random blocks for the keys of each context, the entries
    past a context garbage (out of range: never read)."""
    S = len(lens)
    tables = np.full((S, M), NB + 1000, np.int32)
    perm = rng.permutation(NB).astype(np.int32)
    at = 0
    for s, L in enumerate(lens):
        nb = -(-L // BS)
        tables[s, :nb] = perm[at:at + nb]
        at += nb
    return tables


def case(rng, dtype, S, c, Hq, Hkv, D, Dv, BS, lens, extra_blocks=3):
    M = max([-(-L // BS) for L in lens] + [1]) + 1
    NB = sum(-(-L // BS) for L in lens) + extra_blocks
    q = rand(rng, (S * c, Hq, D), dtype)
    kp, vp = rand(rng, (NB, BS, Hkv, D), dtype), rand(rng, (NB, BS, Hkv, Dv), dtype)
    tables = make_tables(rng, lens, BS, M, NB)
    return q, kp, vp, tables, np.array(lens, np.int32)


def run(nv, q, kp, vp, tables, lens, scale, layout="contiguous"):
    h = [nv.view(x, layout) for x in (q, kp, vp)]
    return nv.read(nv.own(lib.nv_fast_paged_attention(*h, nv.array(tables), nv.array(lens),
                                                      scale)))


def check(got, want, dtype, vmax):
    assert nv_name(got.dtype) == dtype
    assert got.shape == want.shape, f"{got.shape} != {want.shape}"
    g = ref64(got)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(want))
    ok = ~np.isnan(want)
    err = np.abs(g[ok] - want[ok])
    tol = TOL[dtype] * max(vmax, 1.0)
    assert err.size == 0 or err.max() <= tol, f"max error {err.max()} > {tol}"


# (S, c, Hq, Hkv, D, Dv, BS, context lengths)
SHAPES = [
    (1, 1, 1, 1, 8, 8, 16, [1]),
    (3, 1, 8, 2, 64, 64, 16, [37, 1, 300]),         # decode, GQA 4
    (2, 1, 8, 8, 128, 128, 32, [129, 64]),          # decode, MHA
    (2, 1, 6, 1, 80, 80, 7, [50, 13]),              # MQA (G = 6), odd block size
    (2, 1, 4, 2, 96, 96, 5, [31, 0]),               # a padding sequence (L = 0)
    (1, 1, 2, 2, 256, 256, 16, [70]),
    (2, 4, 4, 2, 64, 64, 16, [9, 2]),               # chunked prefill, a chunk longer than L
    (1, 17, 2, 1, 128, 128, 32, [100]),             # a chunk across blocks
    (2, 3, 3, 3, 24, 40, 3, [11, 5]),               # odd head sizes, Dv != D
    (1, 1, 1, 1, 64, 64, 16, [4097]),               # a long context
    (1, 2, 2, 1, 64, 64, 33, [4097]),               # ... chunked, odd block size
]
CASES = [(s, dt) for s in SHAPES for dt in FLOATS]


@pytest.mark.parametrize("shape,dtype", sample(CASES, 44, salt=18))
def test_against_reference(nv, rng, shape, dtype):
    S, c, Hq, Hkv, D, Dv, BS, lens = shape
    q, kp, vp, tables, cl = case(rng, dtype, S, c, Hq, Hkv, D, Dv, BS, lens)
    scale = 1.0 / np.sqrt(D)
    got = run(nv, q, kp, vp, tables, cl, scale)
    check(got, ref_paged(q, kp, vp, tables, cl, np.float32(scale)), dtype,
          np.abs(ref64(vp)).max(initial=0))


@pytest.mark.parametrize("layout", ["transposed", "strided", "reversed"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_layouts(nv, rng, layout, dtype):
    q, kp, vp, tables, cl = case(rng, dtype, 2, 2, 4, 2, 16, 16, 4, [9, 6])
    got = run(nv, q, kp, vp, tables, cl, 0.25, layout)
    check(got, ref_paged(q, kp, vp, tables, cl, 0.25), dtype, 4.0)


@pytest.mark.parametrize("tdt", ["int64", "int16", "uint8"])
def test_table_dtypes(nv, rng, tdt):
    q, kp, vp, tables, cl = case(rng, "float32", 2, 1, 2, 1, 16, 16, 4, [9, 6])
    tables = np.minimum(tables, 200)  # the garbage entries fit uint8
    got = run(nv, q, kp, vp, tables.astype(tdt), cl.astype(tdt), 0.5)
    check(got, ref_paged(q, kp, vp, tables, cl, 0.5), "float32", 4.0)


def test_chunk_rows_without_keys(nv, rng):
    """A chunk of 5 at the end of a context of 2: its first 3 queries see no key (0), the 4th
    sees key 0 only (its v row), the 5th keys 0 and 1."""
    q, kp, vp, tables, cl = case(rng, "float32", 1, 5, 1, 1, 8, 8, 4, [2])
    got = run(nv, q, kp, vp, tables, cl, 0.5)
    np.testing.assert_array_equal(got[:3], 0)
    np.testing.assert_allclose(got[3, 0], vp[tables[0, 0], 0, 0], rtol=1e-6)
    check(got, ref_paged(q, kp, vp, tables, cl, 0.5), "float32", 4.0)


def test_shared_blocks_round_trip(nv, rng):
    """Sequences may share blocks (a common prefix); the result is SDPA's over each
    sequence's keys gathered in order."""
    q, kp, vp, _, _ = case(rng, "float32", 2, 1, 4, 2, 16, 16, 8, [20])
    tables = np.array([[2, 0, 1], [2, 0, 3]], np.int32)
    cl = np.array([24, 19], np.int32)
    got = run(nv, q, kp, vp, tables, cl, 0.3)
    check(got, ref_paged(q, kp, vp, tables, cl, 0.3), "float32", 4.0)


def test_nan_and_inf(nv, rng):
    q, kp, vp, tables, cl = case(rng, "float32", 2, 1, 2, 2, 8, 8, 4, [6, 6])
    kp[tables[0, 0], 1, 0, 3] = np.nan  # sequence 0, key 1, head 0: NaN
    kp[tables[1, 1], 0, 1, :] = -np.inf  # sequence 1, key 4, head 1: a -inf score or NaN
    q[1, 1, :] = 1.0
    got = run(nv, q, kp, vp, tables, cl, 0.5)
    want = ref_paged(q, kp, vp, tables, cl, 0.5)
    assert np.isnan(got[0, 0]).all() and not np.isnan(got[0, 1]).any()
    check(got, want, "float32", 4.0)


def test_empty(nv, rng):
    q, kp, vp, tables, cl = case(rng, "float32", 2, 1, 2, 1, 8, 8, 4, [3, 1])
    assert run(nv, q[:0], kp, vp, tables[:0], cl[:0], 0.5).shape == (0, 2, 8)
    assert run(nv, q, kp, vp[..., :0], tables, cl, 0.5).shape == (2, 2, 0)
    # no blocks at all: every context must be empty, and gives 0
    got = run(nv, q, kp[:0], vp[:0], tables, np.zeros(2, np.int32), 0.5)
    np.testing.assert_array_equal(got, 0)


@pytest.mark.parametrize("dq,dk,dv,want", [
    ("float16", "float32", "float32", "float32"),
    ("bfloat16", "bfloat16", "bfloat16", "bfloat16"),
    ("float32", "float64", "float32", "float64"),
])
def test_result_dtype(nv, rng, dq, dk, dv, want):
    q, kp, vp, tables, cl = case(rng, "float32", 1, 1, 2, 1, 8, 8, 4, [7])
    q, kp, vp = q.astype(np_dtype(dq)), kp.astype(np_dtype(dk)), vp.astype(np_dtype(dv))
    got = run(nv, q, kp, vp, tables, cl, 0.3)
    check(got, ref_paged(q, kp, vp, tables, cl, np.float32(0.3)), want, 4.0)


def expect_error(nv, words, *args):
    with pytest.raises(NuvecError) as e:
        run(nv, *args)
    msg = e.value.message
    assert "paged_attention" in msg
    for w in words:
        assert w in msg, msg


def test_argument_errors(nv, rng):
    q, kp, vp, tables, cl = case(rng, "float32", 2, 1, 4, 2, 8, 8, 4, [5, 3])
    expect_error(nv, ["q must be [T, Hq, D]", "(2,4,8,1)"], q[..., None], kp, vp, tables, cl, 1.0)
    expect_error(nv, ["k_pool must be", "rank 4"], q, kp[0], vp, tables, cl, 1.0)
    expect_error(nv, ["block_tables must be [S, M]"], q, kp, vp, tables[0], cl, 1.0)
    expect_error(nv, ["floating", "int32"], q.astype(np.int32), kp, vp, tables, cl, 1.0)
    expect_error(nv, ["integer", "float32"], q, kp, vp, tables.astype(np.float32), cl, 1.0)
    expect_error(nv, ["matching [NB, BS, Hkv]"], q, kp, vp[:, :3], tables, cl, 1.0)
    expect_error(nv, ["head size D", "(2,4,8)"], q, kp[..., :4], vp, tables, cl, 1.0)
    expect_error(nv, ["multiple of the key/value heads", "(3, q (2,3,8))"], q[:, :3], kp, vp, tables, cl,
                 1.0)
    expect_error(nv, ["one row per sequence"], q, kp, vp, tables, cl[:1], 1.0)
    expect_error(nv, ["3 query tokens", "multiple of the 2 sequences"],
                 np.concatenate([q, q[:1]]), kp, vp, tables, cl, 1.0)


def test_evaluation_errors(nv, rng):
    q, kp, vp, tables, cl = case(rng, "float32", 2, 1, 2, 1, 8, 8, 4, [5, 3])
    NB, M = kp.shape[0], tables.shape[1]
    bad = tables.copy()
    bad[1, 0] = NB + 2  # a block the context reads
    expect_error(nv, [f"index {NB + 2} is out of range for an axis of size {NB}"], q, kp, vp,
                 bad, cl, 1.0)
    bad[1, 0] = -1
    expect_error(nv, [f"index -1 is out of range for an axis of size {NB}"], q, kp, vp, bad, cl,
                 1.0)
    long = np.array([5, M * 4 + 1], np.int32)
    expect_error(nv, [f"index {M * 4 + 1} is out of range for an axis of size {M * 4 + 1}"], q,
                 kp, vp, tables, long, 1.0)
    expect_error(nv, [f"index -2 is out of range for an axis of size {M * 4 + 1}"], q, kp, vp,
                 tables, np.array([5, -2], np.int32), 1.0)
