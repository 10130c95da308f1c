"""nuvec: arrays for machine learning with the semantics of MLX, in C.

Code written for ``import mlx.core as mx`` runs with ``import nuvec as mx`` wherever nuvec has
the feature. Everything is implemented in the C extension ``nuvec._core``; this file only
re-exports it, registers its submodules (``random``, ``fast``, ``fft``, ``linalg``, ``distributed``) so that
``import nuvec.random`` and the others work, and
imports the pure-Python packages over it: ``nn`` (mlx.nn), ``optimizers`` (mlx.optimizers) and
``utils`` (mlx.utils).
"""
import sys as _sys

from ._core import *  # noqa: F401,F403
from ._core import __version__, distributed, fast, fft, linalg, random  # noqa: F401
from ._core import _gelu, _gelu_approx, _gelu_fast_approx  # noqa: F401

# The C extension's submodules, importable by name (import nuvec.random, nuvec.fft, ...).
for _name in ("random", "fast", "fft", "linalg", "distributed"):
    _sys.modules[__name__ + "." + _name] = getattr(_sys.modules[__name__], _name)
del _name


class _Backend:
    """``nuvec.cuda`` and ``nuvec.metal``: whether that GPU backend runs here (as mlx.core's)."""

    def __init__(self, name, available):
        self.__name__ = "nuvec." + name
        self._available = available

    def is_available(self):
        return self._available()

    def __repr__(self):
        return f"<module {self.__name__}>"


def _cpu_info():
    import platform

    name = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"architecture": platform.machine(), "device_name": name or platform.processor()}


def _cuda_info(index):
    """The CUDA device's properties through the driver API (libcuda), with mlx.core's keys;
    free_memory from NVML where it loads. {} when the driver cannot tell."""
    import ctypes

    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return {}
    dev, n = ctypes.c_int(), ctypes.c_int()
    if cu.cuInit(0) or cu.cuDeviceGetCount(ctypes.byref(n)) or not 0 <= index < n.value:
        return {}
    if cu.cuDeviceGet(ctypes.byref(dev), index):
        return {}

    def attr(code):
        v = ctypes.c_int()
        return v.value if cu.cuDeviceGetAttribute(ctypes.byref(v), code, dev) == 0 else 0

    name = ctypes.create_string_buffer(256)
    total = ctypes.c_size_t()
    uuid = ctypes.create_string_buffer(16)
    cu.cuDeviceGetName(name, 256, dev)
    cu.cuDeviceTotalMem_v2(ctypes.byref(total), dev)
    major, minor = attr(75), attr(76)  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR
    info = {"device_name": name.value.decode(errors="replace"),
            "architecture": f"sm_{major}{minor}",
            "pci_bus_id": f"{attr(50):04x}:{attr(33):02x}:{attr(34):02x}.0",  # domain, bus, device
            "compute_capability_major": major, "compute_capability_minor": minor,
            "total_memory": total.value}
    if cu.cuDeviceGetUuid(uuid, dev) == 0:
        h = uuid.raw.hex()
        info["uuid"] = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        try:
            nvml = ctypes.CDLL("libnvidia-ml.so.1")
            handle = ctypes.c_void_p()
            mem = (ctypes.c_ulonglong * 3)()  # nvmlMemory_t: total, free, used
            found = nvml.nvmlInit_v2() == 0 and nvml.nvmlDeviceGetHandleByUUID(
                info["uuid"].encode(), ctypes.byref(handle)) == 0
            if found and nvml.nvmlDeviceGetMemoryInfo(handle, mem) == 0:
                info["free_memory"] = mem[1]
        except OSError:
            pass
    return info


def device_info(d=None):
    """Information about a device (the default device when ``d`` is None), as mlx.core's:
    ``architecture`` and ``device_name`` for the CPU; for a CUDA GPU also ``total_memory``,
    ``free_memory``, ``uuid``, ``pci_bus_id`` and ``compute_capability_major``/``_minor``.
    {} for a GPU that is not there."""
    if d is None:
        d = default_device()  # noqa: F405
    elif isinstance(d, DeviceType):  # noqa: F405
        d = Device(d, 0)  # noqa: F405
    elif not isinstance(d, Device):  # noqa: F405
        raise TypeError(f"device_info: expected a Device or DeviceType, got {type(d).__name__}")
    if d.type == cpu:  # noqa: F405
        return _cpu_info()
    return _cuda_info(d.index) if is_available(d) else {}  # noqa: F405


class _Metal(_Backend):
    def device_info(self):
        """Deprecated in mlx.core for ``device_info``; Metal is never here, so {}."""
        import warnings

        warnings.warn("nuvec.metal.device_info is deprecated: use nuvec.device_info",
                      DeprecationWarning, stacklevel=2)
        return {}


cuda = _Backend("cuda", lambda: is_available(Device(gpu, 0)))  # noqa: F405
metal = _Metal("metal", lambda: False)  # Apple's Metal: never on Linux
_sys.modules[__name__ + ".cuda"] = cuda
_sys.modules[__name__ + ".metal"] = metal

# The pure-Python packages over the core, reachable as attributes too (nuvec.nn, ...).
from . import nn, optimizers, utils  # noqa: E402,F401
from ._compile import compile, disable_compile, enable_compile, export_to_dot  # noqa: E402,F401
from ._export import FunctionExporter, export_function, exporter, import_function  # noqa: E402,F401
from ._printoptions import PrintOptions, get_printoptions, printoptions, set_printoptions  # noqa: E402,F401
from ._multivariate_normal import multivariate_normal as _mvn  # noqa: E402
random.multivariate_normal = _mvn  # composed in Python over linalg.svd and random.normal
