"""scaled_dot_product_attention's prefill through cuDNN's fused flash attention on the GPU
(src/cuda/fast_sdpa_cudnn.c) against nuvec's CPU results: float16/bfloat16, head sizes 64, 80,
96, 128 and 256, causal (Lq == Lk: cuDNN's top-left diagonal; Lq < Lk: the bottom-right one
nuvec's rule needs) and not, grouped-query heads (Hkv dividing Hq, one key/value head), odd
lengths (17 queries, 1000 and 4097 keys), batches and heads, q, k and v described in place
([B, L, H, D] storage read through strides) or copied first (strided, transposed, off 16 bytes),
a positive scale, and a NaN query row. Then the switch: NUVEC_CUDNN_SDPA=0 gives
sdpa_mma's result (close to the CPU's and not cuDNN's bits), =auto and the default (the
variable unset) take cuDNN wherever =1 does (the same bits; NUVEC_LOG_FALLBACK=1 names every
shape cuDNN declined), and the nodes
outside cuDNN's path (float32, mask arrays, sinks, Lq > Lk causal, decode, head size 32,
scales of 0 and below) still
run under NUVEC_CUDNN_SDPA=1, on nuvec's own kernels.

The environment switch is read once per process, so each mode runs in a child process (one per
mode, all its cases in it: `child`), which writes its GPU results and per-case errors to a
file; the references are computed here on the CPU from the same seeded inputs. A case the child
could not run fails with nuvec's message (cuDNN's status and last-error text included) and the
child's cuDNN log lines. Tolerance: sdpa_mma's (tests/gpu/test_gpu_fast_sdpa.py): 6e-3
(float16) and 4e-2 (bfloat16) times max(1, max |v|), since cuDNN too rounds the softmax
weights to the input dtype before the product with v. Skipped where no GPU is usable, and the
cuDNN cases where libcudnn.so.9 cannot be loaded at all."""
import ctypes as C
import json
import os
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
sys.path.insert(0, HERE)
from gpucommon import SEED, On, needs_gpu  # noqa: E402
from nvc import NuvecError, Session, ints, lib, np_dtype, ref64, sig  # noqa: E402

P = C.c_void_p
sig("nv_fast_scaled_dot_product_attention", P, P, P, P, C.c_float, C.c_char_p, P, P)
sig("nv_reshape", P, P, C.POINTER(C.c_int), C.c_int)
sig("nv_gpu_fallback_count", C.c_uint64)

pytestmark = [needs_gpu]

TOL = {"float16": 6e-3, "bfloat16": 4e-2, "float32": 3e-5}


def case(name, shape, dtype, mask="none", layout="contiguous", scale=None, sinks=False,
         nan=False):
    """One attention node: shape (B, Hq, Hkv, Lq, Lk, D, Dv), mask none/causal/add/bool."""
    return dict(name=name, shape=list(shape), dtype=dtype, mask=mask, layout=layout,
                scale=scale, sinks=sinks, nan=nan)


# cuDNN's path: (B, Hq, Hkv, Lq, Lk, D, D)
SHAPES = [
    (1, 2, 2, 128, 128, 64),
    (2, 4, 4, 200, 200, 128),
    (1, 8, 2, 333, 1000, 128),   # GQA, Lq < Lk (bottom-right diagonal)
    (1, 4, 1, 64, 4097, 64),     # one key/value head, long keys
    (1, 2, 1, 4096, 4096, 128),  # the bench row's lengths and head size, fewer heads
    (1, 2, 2, 4097, 4097, 128),  # odd long lengths
    (2, 3, 3, 17, 40, 64),       # the fewest queries the path takes
    (1, 2, 1, 1000, 1000, 64),
]
CUDNN = [case(f"s{i}_{dt}_{m}", s + (s[-1],), dt, m)
         for i, s in enumerate(SHAPES) for dt in ("float16", "bfloat16")
         for m in ("none", "causal")]
CUDNN += [case(f"d{d}_{m}", (1, 2, 1, 150, 187, d, d), "bfloat16" if d != 96 else "float16", m)
          for d in (80, 96, 256) for m in ("none", "causal")]
CUDNN += [case(f"layout_{lay}", (1, 4, 2, 100, 300, 128, 128), "bfloat16", "causal", lay)
          for lay in ("bshd", "strided", "transposed", "offset")]
CUDNN += [case("scale_2.0", (1, 2, 2, 130, 260, 64, 64), "float16", "causal", scale=2.0)]
CUDNN += [case("nan_row", (1, 4, 2, 64, 96, 64, 64), "bfloat16", "none", nan=True)]

# Outside cuDNN's path: nuvec's kernels run these even under NUVEC_CUDNN_SDPA=1.
OUTSIDE = [
    case("float32", (1, 2, 2, 100, 100, 64, 64), "float32", "causal"),
    case("add_mask", (1, 2, 2, 100, 120, 64, 64), "float16", "add"),
    case("bool_mask", (1, 2, 1, 80, 90, 128, 128), "bfloat16", "bool"),
    case("sinks", (1, 2, 2, 100, 100, 64, 64), "bfloat16", "none", sinks=True),
    case("causal_lq_gt_lk", (1, 2, 2, 100, 40, 64, 64), "bfloat16", "causal"),
    case("decode", (2, 8, 2, 1, 1000, 128, 128), "bfloat16", "causal"),
    case("head32", (1, 2, 2, 100, 100, 32, 32), "float16", "causal"),
    # Scales of 0 and below (cuDNN's flash engine gave NaN and wrong rows for them on the H200).
    case("scale_-0.3", (1, 2, 2, 130, 260, 64, 64), "float16", "causal", scale=-0.3),
    case("scale_0.0", (1, 2, 2, 130, 260, 64, 64), "float16", "causal", scale=0.0),
]

# The switch's cases: sdpa_mma under NUVEC_CUDNN_SDPA=0, cuDNN under =auto and by default.
SWITCH = [c for c in CUDNN if c["name"] in ("s1_bfloat16_causal", "s2_float16_causal",
                                            "s4_bfloat16_causal", "s7_bfloat16_none")]

BY_NAME = {c["name"]: c for c in CUDNN + OUTSIDE}
MODES = {"1": CUDNN + OUTSIDE, "0": SWITCH, "auto": SWITCH, "default": SWITCH}


def inputs(c):
    """The case's q, k, v, mask and sinks (NumPy), the same in every process."""
    B, Hq, Hkv, Lq, Lk, D, Dv = c["shape"]
    rng = np.random.default_rng([SEED, sum(map(ord, c["name"]))])
    dt = np_dtype(c["dtype"])
    q = rng.standard_normal((B, Hq, Lq, D)).astype(dt)
    k = rng.standard_normal((B, Hkv, Lk, D)).astype(dt)
    v = rng.standard_normal((B, Hkv, Lk, Dv)).astype(dt)
    if c["nan"]:
        q[0, 1, 5, 3] = np.nan
    m = None
    if c["mask"] == "add":
        m = rng.standard_normal((B, Hq, Lq, Lk)).astype(dt)
    elif c["mask"] == "bool":
        m = rng.random((B, 1, Lq, Lk)) < 0.8
    s = rng.standard_normal((Hq,)).astype(dt) if c["sinks"] else None
    return q, k, v, m, s


def put(nv, x, layout):
    """x as a nuvec array in `layout`: contiguous, bshd ([B, L, H, D] storage seen as
    [B, H, L, D] through a transpose: read in place), strided / transposed (copied first),
    offset (one element past an aligned start: copied first)."""
    if layout == "bshd":
        base = nv.array(np.ascontiguousarray(x.transpose(0, 2, 1, 3)))
        perm, n = ints([0, 2, 1, 3])
        return nv.own(lib.nv_transpose(base, perm, n))
    if layout == "offset":
        flat = nv.array(np.concatenate([np.zeros(1, x.dtype), x.ravel()]))
        start, n = ints([1])
        stop, _ = ints([x.size + 1])
        sl = nv.own(lib.nv_slice(flat, start, stop, None, n))
        shape, nd = ints(x.shape)
        return nv.own(lib.nv_reshape(sl, shape, nd))
    return nv.view(x, layout)


def attend(nv, c):
    q, k, v, m, s = inputs(c)
    D = c["shape"][5]
    scale = float(1 / np.sqrt(D)) if c["scale"] is None else c["scale"]
    mode = {"none": None, "causal": b"causal"}.get(c["mask"], b"array")
    lay = c["layout"]
    return nv.own(lib.nv_fast_scaled_dot_product_attention(
        put(nv, q, lay), put(nv, k, lay), put(nv, v, lay), scale, mode,
        nv.array(m) if m is not None else None, nv.array(s) if s is not None else None))


def child(out, mode):
    """Runs mode's cases on the GPU (the default device here), writing `out`.npz (results as
    float32, exact for float16/bfloat16) and `out`.json (per-case errors and CPU fallbacks)."""
    res, info = {}, {}
    with Session() as nv:
        for c in MODES[mode]:
            before = lib.nv_gpu_fallback_count()
            try:
                res[c["name"]] = ref64(nv.read(attend(nv, c))).astype(np.float32)
                info[c["name"]] = {"fallbacks": lib.nv_gpu_fallback_count() - before}
            except NuvecError as e:
                info[c["name"]] = {"error": e.message}
            nv.close()
    np.savez(out + ".npz", **res)
    with open(out + ".json", "w") as f:
        json.dump(info, f)


def cudnn_loadable():
    for name in ("libcudnn.so.9", "libcudnn.so"):
        try:
            C.CDLL(name)
            return True
        except OSError:
            pass
    return False


_runs = {}


def run_mode(tmp_dir, mode):
    """The child's results for `mode` (NUVEC_CUDNN_SDPA "1", "0" or "auto"; "default": the
    variable unset), run once per session: (results, per-case info, the child's stderr)."""
    if mode not in _runs:
        out = os.path.join(tmp_dir, f"mode_{mode}")
        env = dict(os.environ, NUVEC_DEFAULT_DEVICE="gpu", NUVEC_LOG_FALLBACK="1",
                   NUVEC_TEST_SEED=str(SEED))
        env.pop("NUVEC_CUDNN_SDPA", None)
        if mode != "default":
            env["NUVEC_CUDNN_SDPA"] = mode
        code = (f"import sys; sys.path.insert(0, {HERE!r}); import test_gpu_fast_sdpa_cudnn as t; "
                f"t.child({out!r}, {mode!r})")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=400)
        assert p.returncode == 0, f"the NUVEC_CUDNN_SDPA={mode} child failed:\n{p.stderr[-4000:]}"
        with np.load(out + ".npz") as z:
            res = {k: z[k] for k in z.files}
        with open(out + ".json") as f:
            info = json.load(f)
        _runs[mode] = (res, info, p.stderr)
    return _runs[mode]


@pytest.fixture(scope="module")
def tmp_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("sdpa_cudnn"))


def cudnn_log(stderr):
    return "\n".join(l for l in stderr.splitlines() if "cuDNN" in l or "cudnn" in l)[-3000:]


def got_of(tmp_dir, mode, name):
    res, info, stderr = run_mode(tmp_dir, mode)
    i = info[name]
    if "error" in i and "cuDNN not found" in i["error"] and not cudnn_loadable():
        pytest.skip("libcudnn.so.9 cannot be loaded here")
    assert "error" not in i, (f"NUVEC_CUDNN_SDPA={mode}, case {name}: {i['error']}\n"
                              f"child's cuDNN log:\n{cudnn_log(stderr)}")
    assert i["fallbacks"] == 0, f"case {name} ran on the CPU under NUVEC_CUDNN_SDPA={mode}"
    return res[name]


_wants = {}


def want_of(c):
    """The CPU's result for case c (computed once)."""
    if c["name"] not in _wants:
        with Session() as nv, On("cpu"):
            _wants[c["name"]] = ref64(nv.read(attend(nv, c)))
    return _wants[c["name"]]


def close(got, want, c):
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    vmax = float(np.abs(ref64(inputs(c)[2])).max())
    err = np.abs(got[ok] - want[ok])
    tol = TOL[c["dtype"]] * max(vmax, 1.0)
    assert err.size == 0 or err.max() <= tol, \
        f"{c['name']}: max error {err.max()} > {tol} at {np.unravel_index(err.argmax(), got.shape)}"


@pytest.mark.parametrize("name", [c["name"] for c in CUDNN])
def test_cudnn_against_cpu(tmp_dir, name):
    """NUVEC_CUDNN_SDPA=1: cuDNN runs the node (or the child reports why not)."""
    c = BY_NAME[name]
    got = got_of(tmp_dir, "1", name)
    close(got, want_of(c), c)
    if c["nan"]:
        # The NaN query's row is NaN in every value; the other rows are finite.
        assert np.isnan(got[0, 1, 5]).all() and np.isfinite(np.delete(got[0, 1], 5, 0)).all()


@pytest.mark.parametrize("name", [c["name"] for c in OUTSIDE])
def test_outside_cudnn_still_runs(tmp_dir, name):
    """NUVEC_CUDNN_SDPA=1 leaves the nodes outside cuDNN's path to nuvec's kernels."""
    c = BY_NAME[name]
    close(got_of(tmp_dir, "1", name), want_of(c), c)


@pytest.mark.parametrize("name", [c["name"] for c in SWITCH])
def test_off_gives_mma(tmp_dir, name):
    """NUVEC_CUDNN_SDPA=0: sdpa_mma's result, close to the CPU's; the long causal case's bits
    differ from cuDNN's somewhere (a different kernel ran)."""
    c = BY_NAME[name]
    got = got_of(tmp_dir, "0", name)
    close(got, want_of(c), c)
    if name == "s4_bfloat16_causal":
        dnn = got_of(tmp_dir, "1", name)
        assert not np.array_equal(got, dnn), "NUVEC_CUDNN_SDPA=0 gave cuDNN's exact bits"


@pytest.mark.parametrize("mode", ["auto", "default"])
@pytest.mark.parametrize("name", [c["name"] for c in SWITCH])
def test_auto_takes_cudnn(tmp_dir, name, mode):
    """Under =auto, and with the variable unset, cuDNN runs what it runs under =1 (the same
    plan: the same bits), and declines nothing of the path (NUVEC_LOG_FALLBACK=1 would name
    it)."""
    c = BY_NAME[name]
    dnn = got_of(tmp_dir, "1", name)
    got = got_of(tmp_dir, mode, name)
    _, _, stderr = run_mode(tmp_dir, mode)
    declined = [l for l in stderr.splitlines() if "cuDNN declined" in l]
    assert not declined, f"NUVEC_CUDNN_SDPA={mode} left these to sdpa_mma:\n" + "\n".join(declined)
    assert np.array_equal(got, dnn, equal_nan=True), \
        f"{name}: the default mode's result is not cuDNN's (=1) result"
    close(got, want_of(c), c)
