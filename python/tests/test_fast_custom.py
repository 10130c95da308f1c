"""nuvec.fast.cuda_kernel and precompiled_cuda_kernel through the Python module: MLX 0.32's
keyword names and order (checked against mlx.core.fast's signatures where MLX is importable),
the CPU stream's error (E57, naming the kernel), argument errors as ValueError/TypeError; on a
machine with a GPU, a kernel's result and its missing vjp/vmap rules."""
import re

import numpy as np
import pytest

import nuvec as nv
import nuvec.fast

EXP = """
auto e = cg::this_grid().thread_rank();
if (e < N) out[e] = (T)expf((float)inp[e]);
"""


def gpu_ok():
    try:
        return nv.is_available(nv.gpu)
    except AttributeError:
        return False


def exp_kernel():
    return nv.fast.cuda_kernel(name="myexp", input_names=["inp"], output_names=["out"],
                               source=EXP)


def call(k, a, **kw):
    return k(inputs=[a], template=[("T", nv.float32), ("N", a.size)], grid=(a.size, 1, 1),
             threadgroup=(256, 1, 1), output_shapes=[a.shape], output_dtypes=[a.dtype], **kw)


def mlx_keywords(f):
    """The keyword names of an MLX nanobind function, from its signature line."""
    head = f.__doc__.split(")")[0]
    return re.findall(r"(\w+):", head)


def test_signatures_follow_mlx():
    mx = pytest.importorskip("mlx.core")
    assert mlx_keywords(mx.fast.cuda_kernel) == [
        "name", "input_names", "output_names", "source", "header", "ensure_row_contiguous",
        "shared_memory"]
    assert mlx_keywords(mx.fast.precompiled_cuda_kernel) == [
        "name", "compiled_source", "inputs", "output_shapes", "output_dtypes", "scalars", "grid",
        "threadgroup", "shared_memory", "init_value", "ensure_row_contiguous", "stream"]
    # Ours take the same keywords (positional order included for cuda_kernel).
    k = nv.fast.cuda_kernel("k", ["a"], ["b"], "b[0] = a[0];", "", True, 0)
    assert isinstance(k, nv.fast.CudaKernel)


def test_cpu_stream_fails_naming_the_kernel():
    k = exp_kernel()
    a = nv.ones((4,))
    with pytest.raises(ValueError, match=r"cuda_kernel: custom kernels run on the GPU only "
                                         r"\(kernel 'myexp' was called on a CPU stream\)"):
        call(k, a, stream=nv.cpu)
    with pytest.raises(ValueError, match="run on the GPU only"):
        nv.fast.precompiled_cuda_kernel(
            name="k", compiled_source=b"x", inputs=[a], output_shapes=[(4,)],
            output_dtypes=[nv.float32], scalars=[1, 2.0, True], grid=(4, 1, 1),
            threadgroup=(4, 1, 1), stream=nv.cpu)


@pytest.mark.parametrize("kw,err,msg", [
    (dict(grid=(4, 1)), ValueError, "cuda_kernel: grid: expected 3 ints"),
    (dict(threadgroup=(2048, 1, 1)), ValueError, "has more than 1024 threads"),
    (dict(grid=(-4, 1, 1)), ValueError, r"grid \(-4, 1, 1\) must be >= 0"),
    (dict(output_shapes=[(4,), (4,)], output_dtypes=[nv.float32] * 2), ValueError,
     "2 output_shapes for a kernel of 1 outputs"),
    (dict(output_dtypes=[nv.float32, nv.int32]), ValueError,
     "1 output_shapes but 2 output_dtypes"),
    (dict(template=[("T", 1.5)]), TypeError, "template argument 'T' must be an int, a bool"),
    (dict(template=[("2T", 1)]), ValueError, "the template argument name '2T'"),
    (dict(inputs=[nv.ones(4), nv.ones(4)]), ValueError,
     r"kernel 'myexp' takes 1 inputs \(its input_names\) but was given 2"),
])
def test_call_arguments(kw, err, msg):
    k = exp_kernel()
    a = nv.ones((4,))
    args = dict(inputs=[a], grid=(4, 1, 1), threadgroup=(4, 1, 1), output_shapes=[(4,)],
                output_dtypes=[nv.float32], stream=nv.cpu)
    args.update(kw)
    with pytest.raises(err, match=msg):
        k(**args)


@pytest.mark.parametrize("args,msg", [
    (("1k", ["a"], ["b"], ""), "the name '1k' must be a C identifier"),
    (("k", ["a", "a"], ["b"], ""), "the input/output name 'a' is given twice"),
    (("k", ["a"], [], ""), "1 input names and 0 output names"),
])
def test_kernel_arguments(args, msg):
    with pytest.raises(ValueError, match=msg):
        nv.fast.cuda_kernel(*args)
    with pytest.raises(ValueError, match="shared_memory 300000 is outside"):
        nv.fast.cuda_kernel("k", ["a"], ["b"], "", shared_memory=300000)
    with pytest.raises(TypeError):
        nv.fast.cuda_kernel("k", [1], ["b"], "")


def test_precompiled_arguments():
    with pytest.raises(TypeError, match="are required"):
        nv.fast.precompiled_cuda_kernel(name="k", compiled_source=b"x")
    with pytest.raises(TypeError, match="scalar 0 must be a bool, an int or a float"):
        nv.fast.precompiled_cuda_kernel(
            name="k", compiled_source=b"x", inputs=[], output_shapes=[(1,)],
            output_dtypes=[nv.float32], scalars=["s"], grid=(1, 1, 1), threadgroup=(1, 1, 1))


needs_gpu = pytest.mark.skipif(not gpu_ok(), reason="no usable CUDA device")


@needs_gpu
def test_exp_on_the_gpu():
    x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    (y,) = call(exp_kernel(), nv.array(x), stream=nv.gpu)
    np.testing.assert_allclose(np.array(y), np.exp(x), rtol=1e-6)


@needs_gpu
def test_no_vjp_and_no_vmap():
    k = exp_kernel()

    def f(a):
        return call(k, a, stream=nv.gpu)[0].sum()

    with pytest.raises(Exception, match="cuda_kernel has no vjp rule"):
        nv.grad(f)(nv.ones((8,)))
    with pytest.raises(Exception, match="cuda_kernel has no vmap rule"):
        nv.vmap(lambda a: call(k, a, stream=nv.gpu)[0])(nv.ones((2, 8)))
