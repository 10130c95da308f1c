"""Element-wise donation over every dtype: an output written over an input's buffer (an
evaluated intermediate that only the consumer holds) has the bits of the same op computed into
a buffer of its own, for every unary and binary op, where, and every dtype; on the CPU the
output is shown to be the input's buffer where the dtypes and shapes agree (MLX's rule), and
never where they differ. Runs on the default device (the GPU in tests/gpu/run.sh's stage 1)."""
import ctypes as C
import os

import numpy as np
import pytest

from conftest import sample
from nvc import FLOATS, INTS, lib, np_dtype, sig
from test_elementwise import rand

P = C.c_void_p
I = C.c_int
D = C.c_double
DP = C.POINTER(C.c_double)

UNARY = [
    "negative", "abs", "sign", "square", "sqrt", "rsqrt", "reciprocal", "exp", "expm1", "log",
    "log1p", "sin", "tanh", "sigmoid", "erf", "floor", "ceil", "logical_not", "bitwise_invert",
    "isnan", "degrees",
]
BINARY = [
    "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "power", "maximum",
    "minimum", "arctan2", "logaddexp", "equal", "less", "logical_and", "logical_xor",
    "bitwise_and", "bitwise_xor", "left_shift", "right_shift",
]
for _n in UNARY:
    sig("nv_" + _n, P, P)
for _n in BINARY:
    sig("nv_" + _n, P, P, P)
sig("nv_where", P, P, P, P)
sig("nv_copy", P, P)
sig("nv_round", P, P, I)
sig("nv_nan_to_num", P, P, D, DP, DP)
sig("nv_array_data", P, P)
sig("nv_array_dtype", I, P)

ALL = ["bool"] + INTS + FLOATS + ["complex64"]
ON_CPU = os.environ.get("NUVEC_DEFAULT_DEVICE", "cpu") == "cpu"


def values(rng, n, dtype):
    """n values of dtype (test_elementwise's generator), without zeros for the integer
    divisions and with NaN and infinities among the floats."""
    v = rand(rng, (n,), dtype)
    if dtype in INTS:
        v[v == 0] = 1  # floor_divide / remainder by zero are not what is tested here
    elif dtype != "bool" and dtype != "complex64" and n > 4:
        v[:3] = np.array([np.nan, np.inf, -np.inf]).astype(np_dtype(dtype))
    return v


def shifts(rng, n, dtype):
    """Second operands: shift counts below the width for the shift ops."""
    if dtype in INTS:
        return rng.integers(0, 7, n).astype(np_dtype(dtype))
    return values(rng, n, dtype)


def read(nv, h):
    """The array's values, or None where the op refused its dtype."""
    st, _ = nv.status(h)
    if st != 0:
        return None
    try:
        return nv.read(h)
    except Exception:  # the op's error surfaces at evaluation for some dtypes
        return None


def same_bits(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if got.size:
        assert got.tobytes() == want.tobytes(), f"{what}: {got} != {want}"


def donated_result(nv, build, x, donate_at):
    """build(operands) with operand `donate_at` an evaluated intermediate (a copy of x[k]) whose
    only holder is the consumer. Returns (values or None, whether the output took its buffer;
    None off the CPU)."""
    held = [nv.array(v) for v in x]
    ops = list(held)
    t = lib.nv_copy(held[donate_at])
    assert lib.nv_eval1(t) == 0
    ptr = lib.nv_array_data(t) if ON_CPU else None
    ops[donate_at] = t
    y = build(ops)
    lib.nv_release(t)
    if not y:
        return None, None
    nv.own(y)
    got = read(nv, y)
    took = None
    if ON_CPU and got is not None and got.size:
        took = lib.nv_array_data(y) == ptr
    return got, took


# Ops that are one element-wise primitive for every dtype they accept: with the output's dtype
# equal to the intermediate's, the output must take its buffer.
DIRECT = {"negative", "square", "exp", "sin", "tanh", "sqrt", "add", "subtract", "multiply",
          "maximum", "minimum", "bitwise_and", "bitwise_xor", "left_shift", "right_shift",
          "logical_and", "logical_xor", "equal", "less", "where"}


def check(nv, op, build, x, donate_at):
    want_h = build([nv.array(v) for v in x])
    if not want_h:
        return
    nv.own(want_h)
    want = read(nv, want_h)
    got, took = donated_result(nv, build, x, donate_at)
    if want is None:
        assert got is None, "the op failed for held inputs only"
        return
    assert got is not None, "the op failed with a donated input only"
    same_bits(got, want, "donated output")
    if took is None:
        return
    src = np.asarray(x[donate_at]).dtype
    # (A composite op may free an intermediate whose memory the output then gets: equal
    # addresses prove a donation only where one primitive reads the intermediate while it writes.)
    if op in DIRECT and got.dtype == src:
        assert took, f"{op}: the {got.dtype} output did not take its intermediate input's buffer"
    if op in ("equal", "less") and got.dtype != src:
        assert not took, f"{op}: the {got.dtype} output took a {src} input's buffer"


CASES = [(op, dt, n) for op in UNARY + ["round", "nan_to_num"] for dt in ALL for n in (5, 1031)]


@pytest.mark.parametrize("op,dt,n", sample(CASES, 400, salt=41))
def test_unary_donated_every_dtype(nv, rng, op, dt, n):
    x = values(rng, n, dt)
    if op == "round":
        build = lambda o: lib.nv_round(o[0], 1)  # noqa: E731
    elif op == "nan_to_num":
        build = lambda o: lib.nv_nan_to_num(o[0], 0.0, None, None)  # noqa: E731
    else:
        f = getattr(lib, "nv_" + op)
        build = lambda o: f(o[0])  # noqa: E731
    check(nv, op, build, [x], 0)


BCASES = [(op, dt, n, k) for op in BINARY for dt in ALL for n in (5, 1031) for k in (0, 1)]


@pytest.mark.parametrize("op,dt,n,k", sample(BCASES, 500, salt=42))
def test_binary_donated_every_dtype(nv, rng, op, dt, n, k):
    a = values(rng, n, dt)
    b = shifts(rng, n, dt) if op.endswith("shift") else values(rng, n, dt)
    f = getattr(lib, "nv_" + op)
    check(nv, op, lambda o: f(o[0], o[1]), [a, b], k)


@pytest.mark.parametrize("dt,k", sample([(dt, k) for dt in ALL for k in (1, 2)], 30, salt=43))
def test_where_donated_every_dtype(nv, rng, dt, k):
    n = 1031
    cond = rng.integers(0, 2, n).astype(bool)
    a, b = values(rng, n, dt), values(rng, n, dt)
    check(nv, "where", lambda o: lib.nv_where(o[0], o[1], o[2]), [cond, a, b], k)


def test_condition_is_never_donated(nv, rng):
    """where's condition (bool) never takes the output, even when the output is bool."""
    n = 64
    cond, a, b = (rng.integers(0, 2, n).astype(bool) for _ in range(3))
    got, took = donated_result(nv, lambda o: lib.nv_where(o[0], o[1], o[2]), [cond, a, b], 0)
    np.testing.assert_array_equal(got, np.where(cond, a, b))
    if took is not None:
        assert not took


def test_step_counter_keeps_its_buffer(nv):
    """An optimizer-style uint64 step counter, incremented and evaluated each step with the old
    one dropped, keeps one buffer (so a repeated step binds the same buffers)."""
    step = lib.nv_copy(nv.array(np.array(0, dtype=np.uint64)))
    one = nv.array(np.array(1, dtype=np.uint64))
    assert lib.nv_eval1(step) == 0
    ptrs = set()
    for _ in range(5):
        nxt = lib.nv_add(step, one)
        lib.nv_release(step)
        assert lib.nv_eval1(nxt) == 0
        if ON_CPU:
            ptrs.add(lib.nv_array_data(nxt))
        step = nxt
    got = nv.read(step)
    lib.nv_release(step)
    assert got.dtype == np.uint64 and int(got) == 5
    if ON_CPU:
        assert len(ptrs) == 1, f"the counter moved among {len(ptrs)} buffers"
