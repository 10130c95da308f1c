"""Custom CUDA kernels through the C API, on a machine without a GPU: the kernel object's
argument checks, the call's checks (counts, shapes, dtypes, grid, threadgroup, template
arguments), the CPU stream's error (E57), the generated source (types of every dtype, shapes,
strides and ndims only where the body uses them, template arguments) and its NVRTC compile
(a CUBIN for every dtype; a compile error carrying NVRTC's log). NVRTC needs no GPU."""
import ctypes as C

import pytest

from nvc import CODE, DTYPES, Device, Stream, lib, sig

P = C.c_void_p


class TemplateArg(C.Structure):
    _fields_ = [("name", C.c_char_p), ("kind", C.c_int), ("value", C.c_int)]


class Launch(C.Structure):
    _fields_ = [
        ("output_shapes", C.POINTER(C.POINTER(C.c_int))),
        ("output_ndims", C.POINTER(C.c_int)),
        ("output_dtypes", C.POINTER(C.c_int)),
        ("grid", C.c_int * 3),
        ("threadgroup", C.c_int * 3),
        ("template_args", C.POINTER(TemplateArg)),
        ("ntemplate", C.c_int),
        ("has_init", C.c_bool),
        ("init_value", C.c_double),
        ("verbose", C.c_bool),
    ]


sig("nv_fast_cuda_kernel", P, C.c_char_p, C.POINTER(C.c_char_p), C.c_int,
    C.POINTER(C.c_char_p), C.c_int, C.c_char_p, C.c_char_p, C.c_bool, C.c_int)
sig("nv_fast_cuda_kernel_release", None, P)
sig("nv_fast_cuda_kernel_call", C.c_int, P, C.POINTER(P), C.c_int, C.POINTER(Launch),
    C.POINTER(P))
sig("nv_fast_cuda_kernel_source", C.c_long, P, C.POINTER(P), C.c_int, C.POINTER(Launch),
    C.c_char_p, C.c_size_t)
sig("nv_fast_cuda_kernel_compile", C.c_int, P, C.POINTER(P), C.c_int, C.POINTER(Launch),
    C.c_void_p, C.c_size_t, C.POINTER(C.c_size_t))
sig("nv_cpu", Device)
sig("nv_default_stream", Stream, Device)
sig("nv_stream_enter", C.c_int, Stream)
sig("nv_stream_exit", None)
sig("nv_last_error", C.c_char_p)

INT, BOOL, DTYPE = 0, 1, 2
INVALID = 1  # NV_ERR_INVALID_ARGUMENT


def strs(names):
    return (C.c_char_p * max(len(names), 1))(*[n.encode() for n in names])


def kernel(name="k", inputs=("inp",), outputs=("out",), source="out[0] = inp[0];", header="",
           contiguous=True, shared=0):
    return lib.nv_fast_cuda_kernel(name.encode(), strs(inputs), len(inputs), strs(outputs),
                                   len(outputs), source.encode(), header.encode(), contiguous,
                                   shared)


@pytest.fixture
def kernels():
    made = []
    yield made
    for k in made:
        lib.nv_fast_cuda_kernel_release(k)


def launch(shapes, dtypes, grid=(1, 1, 1), tg=(1, 1, 1), template=(), init=None):
    """A Launch and the ctypes objects it points into (kept alive with it)."""
    rows = [(C.c_int * max(len(s), 1))(*s) for s in shapes]
    sp = (C.POINTER(C.c_int) * len(shapes))(*[C.cast(r, C.POINTER(C.c_int)) for r in rows])
    nd = (C.c_int * len(shapes))(*[len(s) for s in shapes])
    dt = (C.c_int * len(dtypes))(*[CODE[d] if isinstance(d, str) else d for d in dtypes])
    ta = (TemplateArg * max(len(template), 1))(
        *[TemplateArg(n.encode() if n is not None else None, kd, v) for n, kd, v in template])
    l = Launch(sp, nd, dt, (C.c_int * 3)(*grid), (C.c_int * 3)(*tg), ta, len(template),
               init is not None, init or 0.0, False)
    l._keep = (rows, sp, nd, dt, ta)
    return l


def inputs(nv, arrays):
    hs = [nv.array(a) for a in arrays]
    return (P * max(len(hs), 1))(*hs), len(hs)


def source(k, ins, n, l):
    size = lib.nv_fast_cuda_kernel_source(k, ins, n, C.byref(l), None, 0)
    assert size > 0, lib.nv_last_error().decode()
    buf = C.create_string_buffer(size + 1)
    assert lib.nv_fast_cuda_kernel_source(k, ins, n, C.byref(l), buf, size + 1) == size
    return buf.value.decode()


def compile_(k, ins, n, l):
    """(status, cubin bytes or the error message); skips in a build without CUDA."""
    size = C.c_size_t(0)
    st = lib.nv_fast_cuda_kernel_compile(k, ins, n, C.byref(l), None, 0, C.byref(size))
    if st != 0:
        msg = lib.nv_last_error().decode()
        if "this build of nuvec has no CUDA (NVRTC)" in msg:
            pytest.skip("a build without CUDA has no NVRTC")
        return st, msg
    buf = C.create_string_buffer(size.value)
    assert lib.nv_fast_cuda_kernel_compile(k, ins, n, C.byref(l), buf, size.value,
                                           C.byref(size)) == 0
    return 0, buf.raw


# ---- the kernel object ----

@pytest.mark.parametrize("name,ins,outs,msg", [
    ("1bad", ("a",), ("b",), "the name '1bad' must be a C identifier"),
    ("my-kernel", ("a",), ("b",), "must be a C identifier"),
    ("k", ("a", "a"), ("b",), "the input/output name 'a' is given twice"),
    ("k", ("a",), ("a",), "the input/output name 'a' is given twice"),
    ("k", ("a b",), ("c",), "'a b' is not a C identifier"),
    ("k", ("a",), (), "1 input names and 0 output names"),
])
def test_kernel_arguments_are_checked(name, ins, outs, msg):
    assert not kernel(name, ins, outs)
    assert msg in lib.nv_last_error().decode()


def test_shared_memory_is_bounded():
    assert not kernel(shared=-1)
    assert "shared_memory -1 is outside [0, 232448]" in lib.nv_last_error().decode()
    assert not kernel(shared=232449)
    k = kernel(shared=232448)
    assert k
    lib.nv_fast_cuda_kernel_release(k)


# ---- the call ----

def call(nv, k, arrays, l, nout=1):
    ins, n = inputs(nv, arrays)
    outs = (P * nout)()
    st = lib.nv_fast_cuda_kernel_call(k, ins, n, C.byref(l), outs)
    for h in outs:
        nv.own(h)
    return st, [nv.status(h) for h in outs]


def on_cpu(f):
    assert lib.nv_stream_enter(lib.nv_default_stream(lib.nv_cpu())) == 0
    try:
        return f()
    finally:
        lib.nv_stream_exit()


def test_a_cpu_stream_fails_naming_the_kernel(nv, kernels):
    import numpy as np

    kernels.append(kernel("myexp", ("inp",), ("out", "out2")))
    l = launch([(4,), (2, 2)], ["float32", "int32"], grid=(4, 1, 1), tg=(4, 1, 1))
    st, stats = on_cpu(lambda: call(nv, kernels[0], [np.ones(4, np.float32)], l, nout=2))
    assert st == INVALID
    for s, msg in stats:
        assert s == INVALID
        assert msg == ("cuda_kernel: custom kernels run on the GPU only (kernel 'myexp' was "
                       "called on a CPU stream)")


@pytest.mark.parametrize("case,msg", [
    ("count", "kernel 'k' takes 1 inputs (its input_names) but was given 2"),
    ("grid", "grid (-1, 1, 1) must be >= 0 and threadgroup (1, 1, 1) >= 1"),
    ("tg0", "threadgroup (0, 1, 1) >= 1"),
    ("tg", "threadgroup (64, 32, 1) has more than 1024 threads"),
    ("tgz", "threadgroup (1, 1, 65) has more than 1024 threads or z above 64"),
    ("blocks", "needs more than 65535 blocks in y or z"),
    ("dtype", "output 0 has an unknown dtype 99"),
    ("shape", "output 0 has a negative dimension -2"),
    ("tname", "the template argument name '2T' is not a C identifier"),
    ("tkind", "template argument 'T' must be an int, a bool or a dtype"),
])
def test_call_arguments_are_checked(nv, kernels, case, msg):
    import numpy as np

    kernels.append(kernel())
    grid, tg, dtypes, shapes, tmpl = (1, 1, 1), (1, 1, 1), ["float32"], [(4,)], ()
    arrays = [np.ones(4, np.float32)]
    if case == "count":
        arrays = arrays * 2
    elif case == "grid":
        grid = (-1, 1, 1)
    elif case == "tg0":
        tg = (0, 1, 1)
    elif case == "tg":
        tg = (64, 32, 1)
    elif case == "tgz":
        tg = (1, 1, 65)
    elif case == "blocks":
        grid = (1, 65536 * 2, 1)
    elif case == "dtype":
        dtypes = [99]
    elif case == "shape":
        shapes = [(3, -2)]
    elif case == "tname":
        tmpl = [("2T", INT, 1)]
    elif case == "tkind":
        tmpl = [("T", DTYPE, 99)]
    l = launch(shapes, dtypes, grid, tg, tmpl)
    st, stats = call(nv, kernels[0], arrays, l)
    assert st == INVALID
    assert stats[0][0] == INVALID and msg in stats[0][1], stats[0][1]


# ---- the generated source and its NVRTC compile ----

CUDA_TYPES = {"bool": "bool", "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t",
              "uint64": "uint64_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
              "int64": "int64_t", "float16": "__half", "bfloat16": "__nv_bfloat16",
              "float32": "float", "float64": "double", "complex64": "complex64_t"}


def test_the_source_declares_what_the_body_uses(nv, kernels):
    import numpy as np

    body = ("auto e = cg::this_grid().thread_rank();\n"
            "if (e < a_shape[0]) out[e] = (T)(a[e * a_strides[0]] * N) + (F ? b[0] : 0);\n")
    kernels.append(kernel("shapes", ("a", "b"), ("out",), body))
    ins, n = inputs(nv, [np.ones((3, 2), np.float32), np.ones(2, np.int64)])
    l = launch([(3,)], ["float32"], template=[("T", DTYPE, CODE["float32"]), ("N", INT, 7),
                                             ("F", BOOL, 1)])
    src = source(kernels[0], ins, n, l)
    assert 'extern "C" __global__ void custom_kernel_shapes(' in src
    assert "const float *a = (const float *)nv_in_0 + nv_b.off[0];" in src
    assert "const int64_t *b = (const int64_t *)nv_in_1 + nv_b.off[1];" in src
    assert "const Shape &a_shape = nv_b.shape[0];" in src
    assert "const Strides &a_strides = nv_b.strides[0];" in src
    assert "a_ndim" not in src and "b_shape" not in src
    assert "float *out = (float *)nv_out_0;" in src
    assert "using T = float;" in src and "constexpr int N = 7;" in src
    assert "constexpr bool F = true;" in src
    assert "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;" in src
    st, cubin = compile_(kernels[0], ins, n, l)
    assert st == 0, cubin
    assert cubin[:4] == b"\x7fELF"


def test_every_dtype_compiles(nv, kernels):
    import numpy as np

    names = [f"x_{d}" for d in DTYPES]
    outs = [f"y_{d}" for d in DTYPES]
    body = "".join(f"y_{d}[0] = x_{d}[x_{d}_ndim - 1];\n" for d in DTYPES)
    kernels.append(kernel("alltypes", names, outs, body))
    arrays = []
    for d in DTYPES:
        if d == "bfloat16":
            arrays.append(np.zeros(2, np.float32))  # a stand-in: only dtypes matter here
        else:
            arrays.append(np.zeros(2, np.dtype(d if d != "complex64" else np.complex64)))
    hs = [nv.array(a) for a in arrays]
    bf = DTYPES.index("bfloat16")
    sig("nv_astype", P, P, C.c_int)
    hs[bf] = nv.own(lib.nv_astype(hs[bf], CODE["bfloat16"]))
    ins = (P * len(hs))(*hs)
    l = launch([(2,)] * len(DTYPES), list(DTYPES))
    src = source(kernels[0], ins, len(hs), l)
    assert "cooperative_groups" not in src  # only for bodies that name it
    for d in DTYPES:
        t = CUDA_TYPES[d]
        assert f"const {t} *x_{d} = (const {t} *)" in src
        assert f"{t} *y_{d} = ({t} *)" in src
    st, cubin = compile_(kernels[0], ins, len(hs), l)
    assert st == 0, cubin
    assert cubin[:4] == b"\x7fELF"


def test_a_compile_error_carries_nvrtc_log(nv, kernels):
    import numpy as np

    kernels.append(kernel("broken", ("inp",), ("out",), "out[0] = inp[0] + undefined_name;"))
    ins, n = inputs(nv, [np.ones(4, np.float32)])
    st, msg = compile_(kernels[0], ins, n, launch([(4,)], ["float32"]))
    assert st == INVALID
    assert msg.startswith("cuda_kernel 'broken': nvrtcCompileProgram"), msg
    assert 'identifier "undefined_name" is undefined' in msg


def test_too_many_dimensions_for_a_shape(nv, kernels):
    import numpy as np

    kernels.append(kernel("deep", ("inp",), ("out",), "out[0] = inp_shape[0];"))
    ins, n = inputs(nv, [np.ones((1,) * 11, np.float32)])
    l = launch([(1,)], ["int32"])
    assert lib.nv_fast_cuda_kernel_source(kernels[0], ins, n, C.byref(l), None, 0) == -1
    assert "input 'inp' has 11 dimensions; its inp_shape/_strides hold at most 10" in \
        lib.nv_last_error().decode()
    kernels.append(kernel("deep2", ("inp",), ("out",), "out[0] = inp[0];"))
    assert lib.nv_fast_cuda_kernel_source(kernels[1], ins, n, C.byref(l), None, 0) > 0


def test_the_header_comes_before_the_kernel(nv, kernels):
    import numpy as np

    header = "__device__ float twice(float v) { return 2.0f * v; }\n"
    kernels.append(kernel("withheader", ("inp",), ("out",), "out[0] = twice(inp[0]);", header))
    ins, n = inputs(nv, [np.ones(2, np.float32)])
    l = launch([(1,)], ["float32"])
    src = source(kernels[0], ins, n, l)
    assert src.index(header) < src.index("__global__ void custom_kernel_withheader(")
    st, cubin = compile_(kernels[0], ins, n, l)
    assert st == 0, cubin
