"""Custom CUDA kernels on the GPU (nv_fast_cuda_kernel / nv_fast_precompiled_cuda_kernel,
src/ops/fast_custom.c, src/cuda/fast_custom.c) against NumPy: an element-wise exp over float32
and float16 (a grid that is not a multiple of the threadgroup: the body checks its bounds), a
kernel walking a non-contiguous input through its shapes/strides with ensure_row_contiguous
off (transposed, strided, reversed, broadcast) and the same inputs copied row-contiguous with it
on, template arguments (int, bool, dtype), init_value with atomics (a histogram; an int32
output), several outputs of different dtypes, a 2-D grid, an empty grid (outputs keep the init
value), dynamic shared memory above 48 KiB, a compile error carrying NVRTC's log, the CUBIN disk
cache reused by a second process, and precompiled kernels from PTX and from a CUBIN compiled by
NVRTC at test time (scalar arguments). Nothing may run through the CPU fallback."""
import ctypes as C
import ctypes.util
import os
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpucommon import On, needs_gpu, rng  # noqa: E402,F401  (rng: a fixture)
from nvc import CODE, Session, lib, sig  # noqa: E402
import test_fast_custom as ck  # noqa: E402  (the C API's ctypes wrappers)

P = C.c_void_p
sig("nv_transpose", P, P, C.POINTER(C.c_int), C.c_int)
sig("nv_astype", P, P, C.c_int)
sig("nv_broadcast_to", P, P, C.POINTER(C.c_int), C.c_int)
sig("nv_fast_precompiled_cuda_kernel", C.c_int, C.c_char_p, C.c_void_p, C.c_size_t,
    C.POINTER(P), C.c_int, C.c_int, C.c_void_p, C.c_int, C.POINTER(ck.Launch), C.c_int,
    C.c_bool, C.POINTER(P))

pytestmark = needs_gpu


class Scalar(C.Structure):
    _fields_ = [("kind", C.c_int), ("value", C.c_double)]


@pytest.fixture
def nv():
    with Session() as s:
        yield s


@pytest.fixture
def kernels():
    made = []
    yield made
    for k in made:
        lib.nv_fast_cuda_kernel_release(k)


def run(nv, k, handles, l, nout=1):
    """The outputs of one call on the GPU as NumPy arrays (no CPU fallback allowed)."""
    ins = (P * max(len(handles), 1))(*handles)
    outs = (P * nout)()
    with On("gpu"):
        st = lib.nv_fast_cuda_kernel_call(k, ins, len(handles), C.byref(l), outs)
        for h in outs:
            nv.own(h)
        assert st == 0, lib.nv_last_error().decode()
        before = lib.nv_gpu_fallback_count()
        got = [nv.read(h) for h in outs]
        assert lib.nv_gpu_fallback_count() == before, "a custom kernel fell back to the CPU"
    return got


EXP = """
auto e = cg::this_grid().thread_rank();
if (e < N) out[e] = (T)expf((float)inp[e]);
"""


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("n", [1, 255, 1000, 70000])
def test_exp_elementwise(nv, kernels, rng, dtype, n):
    kernels.append(ck.kernel("myexp", ("inp",), ("out",), EXP))
    x = rng.standard_normal(n).astype(dtype)
    l = ck.launch([(n,)], [dtype], grid=(n, 1, 1), tg=(256, 1, 1),
                  template=[("T", ck.DTYPE, CODE[dtype]), ("N", ck.INT, n)])
    (got,) = run(nv, kernels[0], [nv.array(x)], l)
    tol = 1e-6 if dtype == "float32" else 1e-3
    np.testing.assert_allclose(got.astype(np.float64), np.exp(x.astype(np.float64)), rtol=tol)


STRIDED = """
int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
int64_t n = 1;
for (int i = 0; i < inp_ndim; i++) n *= inp_shape[i];
if (e < n) out[e] = inp[elem_to_loc(e, inp_shape, inp_strides, inp_ndim)] * 2.0f;
"""


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "reversed",
                                    "broadcast"])
@pytest.mark.parametrize("contiguous", [False, True])
def test_shapes_and_strides(nv, kernels, rng, layout, contiguous):
    kernels.append(ck.kernel("strided", ("inp",), ("out",), STRIDED, contiguous=contiguous))
    x = rng.standard_normal((5, 7)).astype(np.float32)
    if layout == "broadcast":
        x = np.broadcast_to(x[:1], (5, 7)).copy()
        row = nv.array(x[:1])
        shape, nd = (C.c_int * 2)(5, 7), 2
        h = nv.own(lib.nv_broadcast_to(row, shape, nd))
    else:
        h = nv.view(x, layout)
    l = ck.launch([(35,)], ["float32"], grid=(35, 1, 1), tg=(32, 1, 1))
    (got,) = run(nv, kernels[0], [h], l)
    np.testing.assert_array_equal(got, (x * 2).ravel())


def test_row_contiguous_copy_is_read_flat(nv, kernels, rng):
    body = "int e = threadIdx.x; if (e < 12) out[e] = inp[e];"
    kernels.append(ck.kernel("flat", ("inp",), ("out",), body, contiguous=True))
    x = rng.standard_normal((3, 4)).astype(np.float32)
    (got,) = run(nv, kernels[0], [nv.view(x, "transposed")],
                 ck.launch([(12,)], ["float32"], grid=(12, 1, 1), tg=(12, 1, 1)))
    np.testing.assert_array_equal(got, x.ravel())


def test_template_arguments(nv, kernels):
    body = "if (threadIdx.x == 0) out[0] = (T)(ADD ? a[0] + K : a[0] - K);"
    kernels.append(ck.kernel("tmpl", ("a",), ("out",), body))
    a = nv.array(np.array([10], np.int32))
    for add, want in [(1, 13), (0, 7)]:
        l = ck.launch([(1,)], ["int64"], template=[("T", ck.DTYPE, CODE["int64"]),
                                                    ("K", ck.INT, 3), ("ADD", ck.BOOL, add)])
        (got,) = run(nv, kernels[-1], [a], l)
        assert got.dtype == np.int64 and got.tolist() == [want]


def test_init_value_with_atomics(nv, kernels, rng):
    body = """
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e < N) { atomicAdd(&hist[idx[e]], 1.0f); atomicAdd(&count[0], 1); }
    """
    kernels.append(ck.kernel("hist", ("idx",), ("hist", "count"), body))
    idx = rng.integers(0, 10, 5000).astype(np.int32)
    l = ck.launch([(10,), (1,)], ["float32", "int32"], grid=(5000, 1, 1), tg=(128, 1, 1),
                  template=[("N", ck.INT, 5000)], init=5.0)
    hist, count = run(nv, kernels[0], [nv.array(idx)], l, nout=2)
    np.testing.assert_array_equal(hist, np.bincount(idx, minlength=10) + 5.0)
    assert count.tolist() == [5005]


def test_several_outputs_and_a_2d_grid(nv, kernels, rng):
    body = """
    int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < R && c < Cn) {
      twice[r * Cn + c] = 2.0 * (double)x[r * Cn + c];
      pos[r * Cn + c] = x[r * Cn + c] > 0.0f;
    }
    """
    kernels.append(ck.kernel("two", ("x",), ("twice", "pos"), body))
    x = rng.standard_normal((37, 53)).astype(np.float32)
    l = ck.launch([(37, 53), (37, 53)], ["float64", "bool"], grid=(53, 37, 1), tg=(16, 16, 1),
                  template=[("R", ck.INT, 37), ("Cn", ck.INT, 53)])
    twice, pos = run(nv, kernels[0], [nv.array(x)], l, nout=2)
    np.testing.assert_array_equal(twice, 2.0 * x.astype(np.float64))
    np.testing.assert_array_equal(pos, x > 0)


def test_an_empty_grid_keeps_the_init_value(nv, kernels):
    kernels.append(ck.kernel("never", ("inp",), ("out",), "out[0] = inp[0];"))
    l = ck.launch([(3,)], ["float32"], grid=(0, 1, 1), tg=(32, 1, 1), init=-1.5)
    (got,) = run(nv, kernels[0], [nv.array(np.zeros(0, np.float32))], l)
    assert got.tolist() == [-1.5] * 3


def test_shared_memory_above_48k(nv, kernels, rng):
    body = """
    extern __shared__ float s[];
    int n = 16384;  // 64 KiB of float
    for (int i = threadIdx.x; i < n; i += blockDim.x) s[i] = x[i];
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = s[n - 1 - i];
    """
    kernels.append(ck.kernel("shm", ("x",), ("out",), body, shared=65536))
    x = rng.standard_normal(16384).astype(np.float32)
    (got,) = run(nv, kernels[0], [nv.array(x)],
                 ck.launch([(16384,)], ["float32"], grid=(256, 1, 1), tg=(256, 1, 1)))
    np.testing.assert_array_equal(got, x[::-1])


def test_a_compile_error_fails_the_call_with_nvrtc_log(nv, kernels):
    kernels.append(ck.kernel("broken", ("inp",), ("out",), "out[0] = inp[0] + nope;"))
    ins = (P * 1)(nv.array(np.ones(2, np.float32)))
    outs = (P * 1)()
    with On("gpu"):
        st = lib.nv_fast_cuda_kernel_call(kernels[0], ins, 1,
                                          C.byref(ck.launch([(2,)], ["float32"])), outs)
    nv.own(outs[0])
    assert st == ck.INVALID
    s, msg = nv.status(outs[0])
    assert s == ck.INVALID
    assert msg.startswith("cuda_kernel: kernel 'broken': nvrtcCompileProgram"), msg
    assert 'identifier "nope" is undefined' in msg


def child():
    """One exp kernel run (for the disk-cache test's processes): prints the result's sum."""
    k = ck.kernel("cached", ("inp",), ("out",), EXP)
    with Session() as nv:
        l = ck.launch([(8,)], ["float32"], grid=(8, 1, 1), tg=(8, 1, 1),
                      template=[("T", ck.DTYPE, CODE["float32"]), ("N", ck.INT, 8)])
        (got,) = run(nv, k, [nv.array(np.zeros(8, np.float32))], l)
    lib.nv_fast_cuda_kernel_release(k)
    print(int(got.sum()))


def test_the_disk_cache_is_reused_by_a_second_process(tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import sys; sys.path.insert(0, {here!r}); import test_gpu_cuda_kernel as t; t.child()"

    def go():
        env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0 and p.stdout.strip() == "8", p.stderr
    go()
    files = sorted((tmp_path / "nuvec").iterdir())
    assert [f.suffix for f in files] == [".cubin"]
    mtime = files[0].stat().st_mtime_ns
    go()
    assert sorted((tmp_path / "nuvec").iterdir()) == files
    assert files[0].stat().st_mtime_ns == mtime


SCALE_SRC = b"""
extern "C" __global__ void scale(const float *x, float *y, int n, float s, bool neg) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = neg ? -x[i] * s : x[i] * s;
}
"""


def nvrtc_image(kind):
    """SCALE_SRC compiled by NVRTC into PTX or a CUBIN (sm_90)."""
    path = ctypes.util.find_library("nvrtc")
    for cand in [path, "/usr/local/cuda/lib64/libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]:
        try:
            nvrtc = C.CDLL(cand)
            break
        except (OSError, TypeError):
            continue
    else:
        pytest.skip("no libnvrtc to compile the test's image")
    prog = C.c_void_p()
    assert nvrtc.nvrtcCreateProgram(C.byref(prog), SCALE_SRC, b"scale.cu", 0, None, None) == 0
    opt = b"--gpu-architecture=sm_90" if kind == "cubin" else b"--gpu-architecture=compute_90"
    opts = (C.c_char_p * 1)(opt)
    assert nvrtc.nvrtcCompileProgram(prog, 1, opts) == 0
    size = C.c_size_t()
    get_size, get = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if kind == "cubin"
                     else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
    assert get_size(prog, C.byref(size)) == 0
    buf = C.create_string_buffer(size.value)
    assert get(prog, buf) == 0
    nvrtc.nvrtcDestroyProgram(C.byref(prog))
    return buf.raw if kind == "cubin" else buf.value


@pytest.mark.parametrize("kind", ["ptx", "cubin"])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "reversed"])
def test_precompiled(nv, rng, kind, layout):
    image = nvrtc_image(kind)
    x = rng.standard_normal(300).astype(np.float32)
    h = nv.view(x, layout)
    scalars = (Scalar * 3)(Scalar(1, 300), Scalar(2, 0.5), Scalar(0, 1))
    l = ck.launch([(300,)], ["float32"], grid=(300, 1, 1), tg=(128, 1, 1))
    ins = (P * 1)(h)
    outs = (P * 1)()
    with On("gpu"):
        st = lib.nv_fast_precompiled_cuda_kernel(b"scale", image, len(image), ins, 1, 1, scalars,
                                                 3, C.byref(l), 0, layout == "strided", outs)
        nv.own(outs[0])
        assert st == 0, lib.nv_last_error().decode()
        before = lib.nv_gpu_fallback_count()
        got = nv.read(outs[0])
        assert lib.nv_gpu_fallback_count() == before
    np.testing.assert_array_equal(got, -x * np.float32(0.5))


def test_precompiled_errors(nv):
    image = nvrtc_image("ptx")
    ins = (P * 1)(nv.array(np.ones(4, np.float32)))
    outs = (P * 1)()
    l = ck.launch([(4,)], ["float32"])
    with On("gpu"):
        st = lib.nv_fast_precompiled_cuda_kernel(b"missing", image, len(image), ins, 1, 1, None,
                                                 0, C.byref(l), 0, False, outs)
    nv.own(outs[0])
    assert st == ck.INVALID
    assert "the image has no kernel named 'missing'" in nv.status(outs[0])[1]
    with On("gpu"):
        st = lib.nv_fast_precompiled_cuda_kernel(b"scale", b"garbage", 7, ins, 1, 1, None, 0,
                                                 C.byref(l), 0, False, outs)
    nv.own(outs[0])
    assert st == ck.INVALID
    assert "loading the kernel image" in nv.status(outs[0])[1]
