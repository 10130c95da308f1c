"""Fusion inside shapeless compiled functions (src/transforms/fuse.c's plans, compile.c's
layout classes): a shapeless function's element-wise chains are fused on every call, for the
call's shapes, by kernels generated once per layout class (how each input is read: whole, a
broadcast row or block, one element) that take their sizes as arguments. Compiled equals
uncompiled bit for bit where the operations round exactly, over 1-D and 2-D shapes, broadcast
rows, columns and scalars, empty and one-element arrays, the four float dtypes; transposed
and strided inputs replay unfused; the chains ending in a row reduction are fused too. The
tests run on the default device (NUVEC_DEFAULT_DEVICE=gpu runs them through NVRTC)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import nuvec as nv
from conftest import FLOATS, assert_close
from conftest import rand as np_rand


def rand(rng, shape, dtype):
    """Seeded random values as a nuvec array (NumPy arguments would be constants)."""
    a = nv.array(np_rand(rng, shape, dtype))
    return a if a.dtype == getattr(nv, dtype) else a.astype(getattr(nv, dtype))


def same_bits(got, want):
    """Equal shapes, dtypes and bytes (NaN payloads included)."""
    g, w = np.array(got), np.array(want)
    return got.dtype == want.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()


def axpy(x, y, z):
    return x * y + z


def rounded(x, y):
    """Operations that round exactly (fused equals unfused bit for bit), a comparison and a
    select among them, with weak scalars."""
    a = x * y - 1.5
    b = nv.where(a > x, a, x * 0.5)
    return nv.maximum(b, y) * (y * y + 1.0)


# Shapes of one layout class for axpy's (R, C) x, (C,) y, (R, C) z: rows and columns > 1.
ROW_CLASS = [(64, 33), (5, 7), (300, 129), (2, 2), (17, 1024)]


@pytest.mark.parametrize("dtype", FLOATS)
def test_axpy_fused_for_every_shape_by_one_kernel(rng, dtype):
    c = nv.compile(axpy, shapeless=True)
    for shape in ROW_CLASS:
        x, y, z = rand(rng, shape, dtype), rand(rng, shape[1:], dtype), rand(rng, shape, dtype)
        assert same_bits(c(x, y, z), axpy(x, y, z)), (shape, dtype)
        assert c._stats["fused"] == 1, shape
    st = c._stats
    # One trace for the ranks, one kernel for the class: no compile per shape.
    assert st["traces"] == 1 and st["entries"] == 1
    assert st["fused_layouts"] == 1


@pytest.mark.parametrize("dtype", FLOATS)
def test_one_dimensional_and_whole_arrays(rng, dtype):
    c = nv.compile(rounded, shapeless=True)
    for n in (1000, 3, 4097):
        x, y = rand(rng, (n,), dtype), rand(rng, (n,), dtype)
        assert same_bits(c(x, y), rounded(x, y)), n
        assert c._stats["fused"] == 1
    assert c._stats["fused_layouts"] == 1 and c._stats["traces"] == 1


# y's shape for x of shape (r, k): a broadcast row, a column (a block over the rows), a
# scalar, a (1, k) row of rank 2, the whole shape.
BROADCASTS = {
    "row": lambda r, k: (k,),
    "column": lambda r, k: (r, 1),
    "scalar": lambda r, k: (),
    "row2": lambda r, k: (1, k),
    "whole": lambda r, k: (r, k),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kind", sorted(BROADCASTS))
def test_broadcast_rows_columns_scalars(rng, dtype, kind):
    c = nv.compile(rounded, shapeless=True)
    for r, k in [(6, 40), (33, 7), (128, 130)]:
        x, y = rand(rng, (r, k), dtype), rand(rng, BROADCASTS[kind](r, k), dtype)
        assert same_bits(c(x, y), rounded(x, y)), (kind, r, k)
        assert same_bits(c(y, x), rounded(y, x)), (kind, r, k)
        assert c._stats["fused"] == 1
    # (x, y) and (y, x): one class each, whatever the sizes (the same entry where the ranks
    # agree).
    assert c._stats["fused_layouts"] == (1 if kind == "whole" else 2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_three_dimensional_blocks(rng, dtype):
    # (a, b, 1) and (1, b, 1) against (a, b, c): blocks of the leading and the middle axes,
    # broadcast over the others.
    c = nv.compile(axpy, shapeless=True)
    for a, b, k in [(3, 4, 5), (8, 2, 16), (2, 9, 3)]:
        x = rand(rng, (a, b, k), dtype)
        y, z = rand(rng, (a, b, 1), dtype), rand(rng, (1, b, 1), dtype)
        assert same_bits(c(x, y, z), axpy(x, y, z)), (a, b, k)
        assert c._stats["fused"] == 1
    assert c._stats["fused_layouts"] == 1
    # (a, 1, c) is no block of (a, b, c) (its axes other than 1 are not adjacent): that call
    # replays unfused, with the same values.
    x, y, z = rand(rng, (3, 4, 5), dtype), rand(rng, (3, 1, 5), dtype), rand(rng, (1, 4, 1), dtype)
    assert same_bits(c(x, y, z), axpy(x, y, z))
    assert c._stats["fused"] == 0 and c._stats["traces"] == 1


@pytest.mark.parametrize("dtype", FLOATS)
def test_empty_and_one_element(rng, dtype):
    c = nv.compile(axpy, shapeless=True)
    for shape in [(0, 5), (4, 0), (1, 1), (1, 9), (9, 1), (3, 4)]:
        x, y, z = rand(rng, shape, dtype), rand(rng, shape[1:], dtype), rand(rng, shape, dtype)
        got, want = c(x, y, z), axpy(x, y, z)
        assert same_bits(got, want), shape
    assert c._stats["traces"] == 1


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_transposed_and_strided_inputs_replay_unfused(rng, dtype):
    c = nv.compile(axpy, shapeless=True)
    x, y, z = rand(rng, (12, 20), dtype), rand(rng, (20,), dtype), rand(rng, (12, 20), dtype)
    assert same_bits(c(x, y, z), axpy(x, y, z)) and c._stats["fused"] == 1
    xt = rand(rng, (20, 12), dtype).T  # a transposed view: no layout the kernels read
    assert same_bits(c(xt, y, z), axpy(xt, y, z))
    assert c._stats["fused"] == 0
    xs = rand(rng, (12, 40), dtype)[:, ::2]  # every other column
    assert same_bits(c(xs, y, z), axpy(xs, y, z))
    assert c._stats["fused"] == 0
    # Row-contiguous inputs fuse again, with the kernel made for the first call.
    x2, z2 = rand(rng, (7, 20), dtype), rand(rng, (7, 20), dtype)
    assert same_bits(c(x2, y, z2), axpy(x2, y, z2)) and c._stats["fused"] == 1
    st = c._stats
    assert st["traces"] == 1 and st["fused_layouts"] == 1


def test_chain_after_a_transpose_inside_the_function(rng):
    # The transpose is a view (the rule's permuted strides): the chain reading it stays
    # unfused, the chain after the matmul fuses.
    f = lambda x, w, b: nv.maximum((x.T * 2.0) @ w + b, 0.0)  # noqa: E731
    c = nv.compile(f, shapeless=True)
    for n, k, m in [(8, 5, 3), (16, 9, 33)]:
        x, w, b = rand(rng, (k, n), "float32"), rand(rng, (k, m), "float32"), rand(rng, (m,), "float32")
        assert same_bits(c(x, w, b), f(x, w, b))
        assert c._stats["fused"] == 1
    assert c._stats["traces"] == 1


def gelu(x):
    return 0.5 * x * (1.0 + nv.erf(x / 1.4142135623730951))


def chain(x, y):
    a = nv.exp(-nv.abs(x)) * y + 0.5
    b = nv.tanh(a) * nv.tanh(a) + nv.sigmoid(x) * 2.0
    return nv.where(b > 1.0, b, a).astype(nv.float32) - y


@pytest.mark.parametrize("dtype", FLOATS)
def test_longer_chains_within_tolerance(rng, dtype):
    c, g = nv.compile(chain, shapeless=True), nv.compile(gelu, shapeless=True)
    for r, k in [(6, 40), (31, 3)]:
        x, y = rand(rng, (r, k), dtype), rand(rng, (k,), dtype)
        assert_close(np.array(c(x, y)), np.array(chain(x, y)), "float32")
        assert c._stats["fused"] >= 1
        assert_close(np.array(g(x)), np.array(gelu(x)), dtype)
        assert g._stats["fused"] == 1
    assert g._stats["fused_layouts"] == 1


def test_escaping_intermediate(rng):
    # t is an output and read by the chain: the fused node's second output.
    f = lambda x, y: ((x * y + 1.0) * 2.0, x * y)  # noqa: E731
    c = nv.compile(f, shapeless=True)
    for r, k in [(4, 5), (50, 3)]:
        x, y = rand(rng, (r, k), "float32"), rand(rng, (k,), "float32")
        got, want = c(x, y), f(x, y)
        assert same_bits(got[0], want[0]) and same_bits(got[1], want[1])
        assert c._stats["fused"] == 1
    assert c._stats["fused_layouts"] == 1


REDUCTIONS = [
    lambda x, w: (x * w + 0.5).exp().sum(-1),
    lambda x, w: (x * w - 1).max(axis=-1, keepdims=True),
    lambda x, w: (x * x + w).mean(axis=1),
    lambda x, w: (x * w).sum(),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("i", range(len(REDUCTIONS)))
def test_chains_ending_in_a_row_reduction(rng, dtype, i):
    f = REDUCTIONS[i]
    c = nv.compile(f, shapeless=True)
    for r, k in [(7, 45), (3, 300), (40, 2)]:
        x, w = rand(rng, (r, k), dtype), rand(rng, (k,), dtype)
        got, want = c(x, w), f(x, w)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert_close(np.array(got), np.array(want), dtype)
        assert c._stats["fused"] == 1, (r, k)
    assert c._stats["traces"] == 1
    # The row length is an argument: one kernel on the CPU; the GPU's launch class (a warp or
    # a block per row, vector loads) may take a second for the 300-element rows.
    assert 1 <= c._stats["fused_layouts"] <= 3


def test_reduction_of_empty_rows(rng):
    f = lambda x: (x * 2.0 + 1.0).sum(-1)  # noqa: E731
    c = nv.compile(f, shapeless=True)
    for shape in [(3, 4), (5, 0), (0, 3)]:
        x = rand(rng, shape, "float32")
        got, want = c(x), f(x)
        assert got.shape == want.shape
        assert_close(np.array(got), np.array(want), "float32")


def test_compiled_equals_uncompiled_under_grad(rng):
    # A transform traces the call: the unfused recipe replays (its nodes have rules).
    f = lambda x, y: (x * y + 1.0).sum()  # noqa: E731
    c = nv.compile(f, shapeless=True)
    for r, k in [(3, 4), (6, 2)]:
        x, y = rand(rng, (r, k), "float32"), rand(rng, (k,), "float32")
        g, ge = nv.grad(c)(x, y), nv.grad(f)(x, y)
        assert same_bits(g, ge)
        assert same_bits(c(x, y), f(x, y))


def test_disable_compile_and_mode_no_fusion(rng):
    c = nv.compile(axpy, shapeless=True)
    x, y, z = rand(rng, (5, 6), "float32"), rand(rng, (6,), "float32"), rand(rng, (5, 6), "float32")
    nv.disable_compile()
    try:
        assert same_bits(c(x, y, z), axpy(x, y, z))
    finally:
        nv.enable_compile()
    assert same_bits(c(x, y, z), axpy(x, y, z)) and c._stats["fused"] == 1


def test_one_kernel_file_for_every_shape(tmp_path):
    # A fresh cache directory: every shape of one class compiles one kernel (a .so on the CPU,
    # a .cubin on the GPU), however many shapes are called.
    script = (
        "import nuvec as nv, numpy as np\n"
        "f = lambda x, y: nv.abs(x) * y - nv.floor(x)\n"
        "c = nv.compile(f, shapeless=True)\n"
        "for r, k in [(3, 4), (30, 17), (2, 1000), (111, 5)]:\n"
        "    x = nv.array(np.linspace(-3, 3, r * k, dtype=np.float32).reshape(r, k))\n"
        "    y = nv.array(np.linspace(1, 2, k, dtype=np.float32))\n"
        "    assert np.array(c(x, y)).tobytes() == np.array(f(x, y)).tobytes()\n"
        "    assert c._stats['fused'] == 1\n"
        "print(c._stats['fused_layouts'])\n")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "1"
    kernels = [f for f in (tmp_path / "nuvec").iterdir() if f.suffix in (".so", ".cubin")]
    assert len(kernels) == 1, kernels


def test_thread_safety_of_the_classes(rng):
    import threading

    c = nv.compile(rounded, shapeless=True)
    shapes = [(5, 9), (9, 5), (12, 12), (3, 64)]
    data = [(rand(rng, s, "float32"), rand(rng, s[1:], "float32")) for s in shapes]
    want = [np.array(rounded(x, y)) for x, y in data]
    errors = []

    def work():
        try:
            for _ in range(5):
                for (x, y), w in zip(data, want):
                    if np.array(c(x, y)).tobytes() != w.tobytes():
                        errors.append("differs")
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert c._stats["fused_layouts"] == 1


def gelu_tanh(x):
    return 0.5 * x * (1.0 + nv.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


@pytest.mark.skipif(nv.default_device() != nv.cpu, reason="the CPU's chains")
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_cpu_chains_with_transcendental_functions_fuse_bit_exact(rng, dtype):
    """On the CPU a chain's tanh (exp, sigmoid, sin, ...) is the hand kernels' vectorized fast
    formula in the generated C too (float64: libm's, as the hand kernel): the tanh-form GELU
    fuses into one kernel that equals the uncompiled function bit for bit."""
    c = nv.compile(gelu_tanh, shapeless=True)
    for n in (1000, 4097, 3):
        x = rand(rng, (n,), dtype)
        assert same_bits(c(x), gelu_tanh(x)), n
        assert c._stats["fused"] == 1, c._stats
    assert c._stats["traces"] == 1
