"""nuvec.export_function / exporter / import_function as MLX's: an imported function equals the
function it was exported from (bit for bit: the same operations) over element-wise ops and
dtypes, views, reductions, products, convolutions, fft, sorting, indexing and scatters,
quantized products, fast ops, nn modules (their parameters stored as constants), random draws
with a key input, and several outputs; the input forms (positional, keyword, a tuple and/or a
dict), several traces per file, shapeless traces, grad / vmap / compile of an imported
function, constants stored once per file, metadata, the errors MLX raises, and bad files."""
import gc
import os

import numpy as np
import pytest

import nuvec as nv
import nuvec.nn as nn
from nuvec.utils import tree_map
from conftest import rand as np_rand


def rand(rng, shape, dtype="float32"):
    a = nv.array(np_rand(rng, shape, dtype))
    return a if a.dtype == getattr(nv, dtype) else a.astype(getattr(nv, dtype))


def same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    x, y = np.array(a.astype(nv.float32) if a.dtype == nv.bfloat16 else a), \
        np.array(b.astype(nv.float32) if b.dtype == nv.bfloat16 else b)
    assert np.array_equal(x, y, equal_nan=x.dtype.kind in "fc"), (x, y)


def roundtrip(tmp_path, fun, *args, **kwargs):
    """Exports fun on (args, kwargs), imports it, and checks it against fun on the same inputs
    and on fresh values of the same signature when `fresh` is given."""
    path = str(tmp_path / "f.nvfn")
    nv.export_function(path, fun, *args, **kwargs)
    g = nv.import_function(path)
    out = g(*args, **kwargs)
    ref = fun(*args, **kwargs)
    ref = list(ref) if isinstance(ref, (list, tuple)) else [ref]
    assert isinstance(out, tuple) and len(out) == len(ref)
    for a, b in zip(out, ref):
        same(a, b)
    return g


UNARY = ["abs", "exp", "log1p", "sin", "cos", "tanh", "sigmoid", "negative", "square", "sqrt",
         "erf", "floor", "rsqrt", "sign"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "arctan2",
          "logaddexp", "greater", "equal", "remainder"]


@pytest.mark.parametrize("op", UNARY)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_unary_ops_and_dtypes(tmp_path, rng, op, dtype):
    x = nv.abs(rand(rng, (3, 5), dtype)) + 0.1
    g = roundtrip(tmp_path, lambda a: getattr(nv, op)(a) * 2, x)
    y = nv.abs(rand(rng, (3, 5), dtype)) + 0.1
    same(g(y)[0], getattr(nv, op)(y) * 2)


FLOAT_ONLY = ("arctan2", "logaddexp", "power")


@pytest.mark.parametrize("op,dtype", [(op, dt) for op in BINARY
                                      for dt in ["float32", "int32", "float16"]
                                      if dt != "int32" or op not in FLOAT_ONLY])
def test_binary_ops_broadcasting(tmp_path, rng, op, dtype):
    x, y = rand(rng, (4, 1, 3), dtype), rand(rng, (2, 3), dtype)
    if dtype == "int32":
        y = nv.where(y == 0, 1, y).astype(nv.int32)
    roundtrip(tmp_path, getattr(nv, op), x, y)


CASES = {
    "views": (lambda x: (x.T[1:, ::2] + x[::-1, 1:3].sum(), x.reshape(2, -1)[:, 3], x[None, 2]),
              [(4, 6)]),
    "reductions": (lambda x: (x.sum(0), x.max(1, keepdims=True), nv.mean(x), nv.var(x, 1),
                              nv.argmax(x, 0), nv.logsumexp(x, 1), nv.prod(x[:2], 1)), [(4, 6)]),
    "matmul": (lambda a, b: (a @ b, nv.addmm(a @ b, a, b, alpha=0.5), nv.outer(a[0], b[0])),
               [(3, 4), (4, 4)]),
    "softmax_cumsum": (lambda x: (nv.softmax(x, -1), nv.cumsum(x, 1), nv.cummax(x, 0)), [(3, 5)]),
    "sort_topk": (lambda x: (nv.sort(x, -1), nv.argsort(x, 0), nv.topk(x, 2, -1),
                             nv.partition(x, 1, -1)), [(3, 6)]),
    "concat_split": (lambda x, y: (nv.concatenate([x, y], 0), nv.stack([x, y], 1),
                                   *nv.split(x, 2, 1), nv.pad(y, ((1, 0), (0, 2)))),
                     [(2, 4), (2, 4)]),
    "where_clip": (lambda x, y: (nv.where(x > y, x, y * 2), nv.clip(x, -0.5, 0.5),
                                 nv.isnan(x / y)), [(3, 4), (3, 4)]),
    "take_scatter": (lambda x: (nv.take(x, nv.array([2, 0, 1]), 1),
                                nv.take_along_axis(x, nv.argsort(x, 1), 1),
                                x.at[nv.array([0, 2])].add(1.0),
                                x.at[1, 2:].multiply(3.0)), [(3, 4)]),
    "conv": (lambda x, w: (nv.conv2d(x, w, stride=1, padding=1),
                           nv.conv1d(x[0], w[:, :, 0], stride=2)), [(2, 6, 6, 3), (4, 3, 3, 3)]),
    "fft": (lambda x: (nv.fft.rfft(x, axis=-1), nv.abs(nv.fft.fft2(x.astype(nv.complex64))),
                       nv.fft.irfft(nv.fft.rfft(x))), [(4, 8)]),
    "linalg": (lambda a: (nv.linalg.inv(a @ a.T + 4 * nv.eye(4)), nv.linalg.norm(a),
                          nv.linalg.cholesky(a @ a.T + 4 * nv.eye(4))), [(4, 4)]),
    "fast": (lambda x, w: (nv.fast.rms_norm(x, w, 1e-5), nv.fast.layer_norm(x, w, None, 1e-5),
                           nv.fast.rope(x[None], 8, traditional=False, base=10000.0, scale=1.0,
                                        offset=2)), [(2, 5, 8), (8,)]),
    "sdpa": (lambda q, k, v: nv.fast.scaled_dot_product_attention(q, k, v, scale=0.3,
                                                                   mask="causal"),
             [(1, 2, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8)]),
    "index_updates": (lambda x: (nv.put_along_axis(x, nv.array([[1], [0], [2]]), nv.array(5.0), 1),
                                 nv.slice_update(x, nv.ones((2, 2)), nv.array([1, 1]), (0, 1)),
                                 x.at[nv.array([0, 0, 2])].maximum(0.25),
                                 nv.searchsorted(nv.sort(x[0]), x[1])), [(3, 4)]),
    "shape_ops": (lambda x: (nv.tril(x), nv.triu(x, 1), nv.diag(x), nv.trace(x), nv.roll(x, 2, 1),
                             nv.repeat(x, 2, 0), nv.tile(x, (1, 2)), nv.swapaxes(x[None], 0, 2),
                             nv.flatten(x), nv.unflatten(x, 1, (2, 2)),
                             nv.kron(x[:2, :2], x[:2, :2]),
                             nv.as_strided(x, (2, 2), (1, 4), 1), nv.median(x, 1)), [(4, 4)]),
    "bits_and_ints": (lambda a, b: (nv.bitwise_and(a, b), nv.left_shift(a, 2),
                                    nv.floor_divide(a, b),
                                    *nv.divmod(a, b), a.view(nv.uint32), nv.cumprod(a, 0),
                                    nv.argmin(a, 1), nv.all(a > 0), nv.any(b < 0)),
                      [((3, 4), "int32"), ((3, 4), "int32")]),
    "complex_views": (lambda x: (nv.real(x * 1j + x), nv.imag(nv.conjugate(x * 1j)),
                                 nv.abs(nv.fft.ifft(x.astype(nv.complex64)))), [(2, 8)]),
    "fp8_and_rounding": (lambda x: (nv.from_fp8(nv.to_fp8(x * 4), nv.float32), nv.round(x * 10, 1),
                                    nv.nan_to_num(x / 0.0), nv.erfinv(x * 0.5), nv.expm1(x),
                                    nv.logcumsumexp(x, 1), nv.std(x, 0)), [(3, 5)]),
    "decompositions": (lambda a: (*nv.linalg.qr(a), nv.linalg.eigvalsh(a + a.T),
                                  nv.linalg.svd(a, compute_uv=False), nv.linalg.det(a),
                                  nv.linalg.solve(a + 4 * nv.eye(4), a[0])), [(4, 4)]),
    "hadamard_convolve": (lambda x: (nv.hadamard_transform(x), nv.convolve(x[0], x[1, :3]),
                                     nv.conv_transpose2d(x[None, :, :, None],
                                                         nv.ones((2, 2, 2, 1)))),
                          [(4, 8)]),
    "einsum_activations": (lambda a, b: (nv.einsum("ij,jk->ik", a, b), nn.gelu(a), nn.silu(b)),
                           [(3, 4), (4, 2)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_operations_round_trip(tmp_path, rng, case):
    fun, shapes = CASES[case]

    def draw(s):
        if isinstance(s[0], tuple):
            a = rand(rng, s[0], s[1])
            return nv.where(a == 0, 1, a).astype(a.dtype)  # no division by zero
        return rand(rng, s)

    args = [draw(s) for s in shapes]
    g = roundtrip(tmp_path, fun, *args)
    # Fresh values of the same signature.
    args2 = [draw(s) for s in shapes]
    for a, b in zip(g(*args2), fun(*args2) if isinstance(fun(*args2), tuple) else [fun(*args2)]):
        same(a, b)


def test_quantized_matmul_and_an_nn_model(tmp_path, rng):
    w = rand(rng, (64, 64))
    wq, s, b = nv.quantize(w, group_size=32, bits=4)
    x = rand(rng, (3, 64))
    roundtrip(tmp_path, lambda a: nv.quantized_matmul(a, wq, s, b, transpose=True, group_size=32,
                                                      bits=4), x)
    # Evaluated outputs of one node (quantize's three) as constants.
    nv.eval(wq, s, b)
    roundtrip(tmp_path, lambda a: nv.quantized_matmul(a, wq, s, b, transpose=True, group_size=32,
                                                      bits=4) + b.sum(), x)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    nv.eval(model.parameters())
    x = rand(rng, (5, 8))
    g = roundtrip(tmp_path, model, x)
    # The parameters are constants of the file: later changes do not reach it.
    expected = model(x)
    model.update(tree_map(lambda p: p * 0, model.parameters()))
    same(g(x)[0], expected)


def test_random_with_a_key_input_and_the_global_key(tmp_path, rng):
    k = nv.random.key(7)

    def draws(key):
        a, b = nv.random.split(key)
        return (nv.random.normal((4, 3), key=key), nv.random.bits((5,), key=a),
                nv.random.randint(0, 9, (6,), key=b), nv.random.permutation(6, key=a),
                nv.random.categorical(nv.zeros((2, 5)), key=b))

    g = roundtrip(tmp_path, draws, k)
    for a, b in zip(g(nv.random.key(9)), draws(nv.random.key(9))):
        same(a, b)
    nv.random.seed(5)
    path = str(tmp_path / "r.nvfn")
    nv.export_function(path, lambda: nv.random.uniform(shape=(3,)))
    nv.random.seed(5)
    same(nv.import_function(path)()[0], nv.random.uniform(shape=(3,)))


def test_input_forms_and_keywords(tmp_path, rng):
    path = str(tmp_path / "k.nvfn")
    x, a, b = rand(rng, (3,)), rand(rng, (3,)), rand(rng, (3,))

    def fun(x, a=None, b=None):
        return x + 2 * a - 3 * b

    nv.export_function(path, fun, x, b=b, a=a)
    g = nv.import_function(path)
    expected = fun(x, a=a, b=b)
    same(g(x, a=a, b=b)[0], expected)
    same(g((x,), {"b": b, "a": a})[0], expected)
    with pytest.raises(ValueError):
        g(x, a, b)
    with pytest.raises(ValueError):
        g(x, a=a, c=b)
    with pytest.raises(ValueError):
        g(x, a=a, b=1.0)
    nv.export_function(path, fun, {"x": x, "a": a, "b": b})
    same(nv.import_function(path)(x=x, a=a, b=b)[0], expected)
    nv.export_function(path, fun, [x], {"a": a, "b": b})
    same(nv.import_function(path)([x], {"a": a, "b": b})[0], expected)
    for bad in [("hi",), (x, "hi"), ([[x]],), ((x,), {"a": a}, {"b": b}), (x, [a])]:
        with pytest.raises(ValueError):
            nv.export_function(path, fun, *bad)


def test_outputs_must_be_arrays(tmp_path):
    path = str(tmp_path / "o.nvfn")
    for fun in [lambda: (nv.zeros((2,)), 1), lambda: (nv.zeros((2,)), [nv.zeros((2,))]),
                lambda: None]:
        with pytest.raises(ValueError):
            nv.export_function(path, fun)
    nv.export_function(path, lambda: [nv.zeros((2,)), nv.ones((3,), nv.int8)])
    a, b = nv.import_function(path)()
    assert a.tolist() == [0, 0] and b.dtype == nv.int8 and b.tolist() == [1, 1, 1]


def test_outputs_that_are_inputs_or_constants(tmp_path, rng):
    x = rand(rng, (2, 3))
    c = nv.arange(3)
    g = roundtrip(tmp_path, lambda a: (a, a + 1, c, nv.array(3)), x)
    y = rand(rng, (2, 3))
    out = g(y)
    same(out[0], y)
    assert out[2].tolist() == [0, 1, 2] and out[3].item() == 3


def test_exporter_several_traces(tmp_path, rng):
    path = str(tmp_path / "e.nvfn")

    def fun(x, y=None):
        return x * 2 if y is None else x * y

    with nv.exporter(path, fun) as ex:
        ex(rand(rng, (3,)))
        ex(rand(rng, (2, 2), "float16"))
        ex(rand(rng, (3,)), y=rand(rng, (3,)))
        with pytest.raises(RuntimeError):
            ex(rand(rng, (3,)))  # the same signature again
    with pytest.raises(RuntimeError):
        ex(rand(rng, (4,)))
    g = nv.import_function(path)
    x, y = rand(rng, (3,)), rand(rng, (3,))
    same(g(x)[0], x * 2)
    same(g(x, y=y)[0], x * y)
    h = rand(rng, (2, 2), "float16")
    same(g(h)[0], h * 2)
    with pytest.raises(ValueError, match="no exported trace"):
        g(rand(rng, (4,)))
    with pytest.raises(ValueError):
        g(x.astype(nv.float64))


def test_one_constant_per_file(tmp_path):
    path = str(tmp_path / "c.nvfn")
    constant = nv.ones((64, 512))
    nv.eval(constant)

    def fun(*args):
        return constant * 2 + sum(args)

    with nv.exporter(path, fun) as ex:
        for i in range(6):
            ex(*[nv.array(1.0)] * i)
    assert os.path.getsize(path) < constant.nbytes + 8192
    g = nv.import_function(path)
    same(g()[0], constant * 2)
    same(g(nv.array(1.0), nv.array(2.0))[0], constant * 2 + 3.0)


def test_shapeless(tmp_path, rng):
    path = str(tmp_path / "s.nvfn")
    nv.export_function(path, lambda x, y: nv.exp(x) * y + 1, rand(rng, (3,)), rand(rng, (3,)),
                       shapeless=True)
    g = nv.import_function(path)
    x, y = rand(rng, (7,)), rand(rng, (7,))
    same(g(x, y)[0], nv.exp(x) * y + 1)
    same(g(x, y[:1])[0], nv.exp(x) * y[:1] + 1)  # broadcasting on the new shapes
    with pytest.raises(ValueError):
        g(rand(rng, (2, 3)), rand(rng, (2, 3)))  # another rank
    with pytest.raises(ValueError):
        g(x.astype(nv.float16), y)  # another dtype
    nv.export_function(path, lambda x: x.reshape(-1, 2).sum(0) * 3, rand(rng, (4,)), shapeless=True)
    g = nv.import_function(path)
    x = rand(rng, (10,))
    same(g(x)[0], x.reshape(-1, 2).sum(0) * 3)
    nv.export_function(path, lambda x: x[1:] + 1, rand(rng, (4,)), shapeless=True)
    g = nv.import_function(path)
    x = rand(rng, (4,))
    same(g(x)[0], x[1:] + 1)
    with pytest.raises(ValueError, match="slice"):
        g(rand(rng, (6,)))


SHAPELESS = {
    "matmul": lambda x: x @ x.T,
    "transpose": lambda x: nv.swapaxes(x, 0, 1) * 2 + 1,
    "sort_scan": lambda x: (nv.sort(x, 1), nv.argsort(x, 0), nv.cumsum(x, 1), nv.cummax(x, 0),
                            nv.logcumsumexp(x, 1)),
    "row_reductions": lambda x: (nv.var(x, 1), nv.std(x, 0, keepdims=True), nv.argmax(x, 1),
                                 nv.logsumexp(x, -1), nv.median(x, 0)),
    "attention_like": lambda x: nv.softmax((x @ x.T) * 0.5, -1) @ x,
}


@pytest.mark.parametrize("case", sorted(SHAPELESS))
def test_shapeless_rules_of_more_operations(tmp_path, rng, case):
    fun = SHAPELESS[case]
    path = str(tmp_path / "r.nvfn")
    nv.export_function(path, fun, rand(rng, (2, 3)), shapeless=True)
    g = nv.import_function(path)
    for shape in [(2, 3), (5, 4), (1, 7)]:
        x = rand(rng, shape)
        ref = fun(x)
        for a, b in zip(g(x), ref if isinstance(ref, tuple) else (ref,)):
            same(a, b)
    # compile's shapeless entries use the same rules: one trace for every shape.
    c = nv.compile(fun, shapeless=True)
    for shape in [(2, 3), (5, 4), (1, 7)]:
        x = rand(rng, shape)
        ref = fun(x)
        out = c(x)
        out = out if isinstance(out, tuple) else (out,)
        for a, b in zip(out, ref if isinstance(ref, tuple) else (ref,)):
            np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-6)
    assert c._stats["traces"] == 1


def test_shapeless_matmul_of_mismatched_shapes_fails(tmp_path, rng):
    path = str(tmp_path / "mm.nvfn")
    nv.export_function(path, lambda a, b: a @ b, rand(rng, (2, 3)), rand(rng, (3, 4)),
                       shapeless=True)
    g = nv.import_function(path)
    a, b = rand(rng, (5, 2)), rand(rng, (2, 6))
    same(g(a, b)[0], a @ b)
    with pytest.raises(ValueError, match="matmul"):
        g(rand(rng, (5, 2)), rand(rng, (3, 6)))


def test_grad_vmap_compile_of_an_imported_function(tmp_path, rng):
    path = str(tmp_path / "g.nvfn")

    def loss(w, x):
        return nv.mean(nv.tanh(x @ w) ** 2)

    w, x = rand(rng, (4, 3)), rand(rng, (5, 4))
    nv.export_function(path, loss, w, x)
    g = nv.import_function(path)
    gw = nv.grad(lambda w, x: g(w, x)[0])(w, x)
    same(gw, nv.grad(loss)(w, x))
    xs = rand(rng, (2, 5, 4))
    same(nv.vmap(lambda x: g(w, x)[0])(xs), nv.vmap(lambda x: loss(w, x))(xs))
    c = nv.compile(lambda w, x: g(w, x)[0])
    np.testing.assert_allclose(np.array(c(w, x)), np.array(loss(w, x)), rtol=1e-6)


def test_metadata(tmp_path):
    path = str(tmp_path / "m.nvfn")
    nv.export_function(path, lambda x: x + 1, nv.array(1.0), metadata='{"dims": [1, 2]} é')
    g, meta = nv.import_function(path, return_metadata=True)
    assert meta == '{"dims": [1, 2]} é' and g(nv.array(2.0))[0].item() == 3.0
    nv.export_function(path, lambda x: x + 1, nv.array(1.0))
    assert nv.import_function(path, return_metadata=True)[1] == ""
    with nv.exporter(path, lambda x: x * 3, metadata="ex") as ex:
        ex(nv.array(1.0))
    assert nv.import_function(path, return_metadata=True)[1] == "ex"


def test_unexportable_primitives_are_named(tmp_path):
    path = str(tmp_path / "u.nvfn")

    @nv.custom_function
    def f(x):
        return nv.sin(x)

    @f.vjp
    def f_vjp(primals, cotangent, output):
        return cotangent * 100

    with pytest.raises(ValueError, match="custom_function"):
        nv.export_function(path, lambda x: f(x) + 1, nv.array([1.0, 2.0]))
    assert not os.path.exists(path)  # a failed export writes no file


def test_exporter_in_a_reference_cycle_is_collected_and_writes_its_file(tmp_path):
    path = str(tmp_path / "leak.nvfn")

    def outer():
        d = {}

        def f(x):
            return d["x"] + x

        d["f"] = nv.exporter(path, f)
        d["x"] = nv.array([0.0] * 10)
        d["f"](nv.array(1.0))

    outer()
    gc.collect()
    g = nv.import_function(path)
    assert g(nv.array(2.0))[0].tolist() == [2.0] * 10


def test_bad_files(tmp_path):
    path = str(tmp_path / "b.nvfn")
    with pytest.raises(RuntimeError, match="cannot open"):
        nv.import_function(str(tmp_path / "missing.nvfn"))
    nv.export_function(path, lambda x: nv.sort(x) * 2, nv.array([3.0, 1.0, 2.0]))
    data = open(path, "rb").read()
    for cut in [0, 7, 31, 32, 40, len(data) // 2, len(data) - 1]:
        open(path, "wb").write(data[:cut])
        with pytest.raises(RuntimeError, match="import_function"):
            nv.import_function(path)
    for at in [3, 9, 20, 28, 40, len(data) - 3]:
        b = bytearray(data)
        b[at] ^= 0xFF
        open(path, "wb").write(bytes(b))
        with pytest.raises(RuntimeError, match="import_function"):
            nv.import_function(path)
    open(path, "wb").write(data)
    assert nv.import_function(path)(nv.array([3.0, 1.0, 2.0]))[0].tolist() == [2.0, 4.0, 6.0]


def _arrays(r):
    if isinstance(r, nv.array):
        return [r]
    if isinstance(r, (list, tuple)) and r and all(isinstance(a, nv.array) for a in r):
        return list(r)
    return None


# Functions that must not be called with arbitrary arrays (state, files, transforms), and the
# one that reads its input's values while traced (nothing traced can: MLX's rule too).
_NOT_OPS = ("set_", "reset_", "clear_", "get_", "export", "import", "load", "save", "_")
_NOT_OPS_NAMES = {"eval", "async_eval", "synchronize", "compile", "disable_compile",
                  "enable_compile", "grad", "value_and_grad", "vjp", "jvp", "vmap",
                  "custom_function", "checkpoint", "stream", "new_stream", "default_stream",
                  "default_device", "exporter", "array", "printoptions", "device_count",
                  "is_available"}
_READS_VALUES = {"from_dlpack"}


def test_every_public_function_of_arrays_round_trips(tmp_path, rng):
    """Every public function of nuvec, nuvec.linalg, nuvec.fft and nuvec.fast that accepts one
    or two (4, 4) float32 arrays, exported on them: the imported function gives the same
    arrays, bit for bit."""
    x, y = rand(rng, (4, 4)), rand(rng, (4, 4))
    path = str(tmp_path / "all.nvfn")
    done, failed = [], []
    for prefix, mod in [("", nv), ("linalg.", nv.linalg), ("fft.", nv.fft), ("fast.", nv.fast)]:
        for name in sorted(dir(mod)):
            fn = getattr(mod, name)
            if (name.startswith(_NOT_OPS) or name in _NOT_OPS_NAMES or not callable(fn)
                    or isinstance(fn, type)):
                continue
            for args in [(x,), (x, y)]:
                try:
                    ref = _arrays(fn(*args))
                except Exception:
                    continue
                if ref is None:
                    continue
                try:
                    nv.export_function(path, lambda *a: fn(*a), *args)
                    out = nv.import_function(path)(*args)
                except Exception as e:
                    failed.append((prefix + name, str(e)))
                    break
                assert len(out) == len(ref), prefix + name
                for a, b in zip(out, ref):
                    same(a, b)
                done.append(prefix + name)
                break
    assert {n for n, _ in failed} <= _READS_VALUES, failed
    assert len(done) > 150, done


def test_every_public_function_of_arrays_shapeless(tmp_path, rng):
    """The same functions exported shapeless on (4, 4) and called on (6, 6) and (3, 5): each
    either replays by its operations' shape rules, equal to the function on those inputs, or
    raises ValueError naming the operation without one; never a wrong shape or value."""
    x, y = rand(rng, (4, 4)), rand(rng, (4, 4))
    path = str(tmp_path / "sl.nvfn")
    replayed = 0
    for mod in [nv, nv.linalg, nv.fft, nv.fast]:
        for name in sorted(dir(mod)):
            fn = getattr(mod, name)
            if (name.startswith(_NOT_OPS) or name in _NOT_OPS_NAMES or name in _READS_VALUES
                    or not callable(fn) or isinstance(fn, type)):
                continue
            for args in [(x,), (x, y)]:
                try:
                    ref = _arrays(fn(*args))
                except Exception:
                    continue
                if ref is None:
                    continue
                nv.export_function(path, lambda *a: fn(*a), *args, shapeless=True)
                g = nv.import_function(path)
                for shape in [(6, 6), (3, 5)]:
                    new = tuple(rand(rng, shape) for _ in args)
                    try:
                        want = _arrays(fn(*new))
                    except ValueError:
                        with pytest.raises(ValueError):  # the function fails there too
                            g(*new)
                        continue
                    try:
                        out = g(*new)
                    except ValueError as e:
                        assert "cannot" in str(e), (name, e)
                        continue
                    assert want is not None and len(out) == len(want), name
                    for a, b in zip(out, want):
                        assert a.shape == b.shape and a.dtype == b.dtype, (name, a.shape, b.shape)
                        np.testing.assert_allclose(np.array(a), np.array(b), rtol=1e-5, atol=1e-5,
                                                   err_msg=name)
                    replayed += 1
                break
    assert replayed > 150, replayed
