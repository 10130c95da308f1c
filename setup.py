"""Builds the nuvec Python package with setuptools: the C extension nuvec._core compiles
libnuvec's sources (src/) together with the module's (python/src), so `pip install .` works
without a prior `make`. It needs what the C library needs: OpenBLAS (cblas.h), zlib and
minizip (tools/setup.sh installs them)."""
import glob
import os
import platform

from setuptools import Extension, setup

ROOT = os.path.dirname(os.path.abspath(__file__))


def rel(*parts):
    return os.path.relpath(os.path.join(ROOT, *parts), ROOT)


def sources():
    files = []
    for part in ("core", "ops", "cpu", "io", "transforms", "nn"):
        files += sorted(glob.glob(os.path.join(rel("src"), part, "*.c")))
    return files + sorted(glob.glob(os.path.join(rel("python", "src"), "*.c")))


def cblas_dir():
    for d in ("/usr/include/x86_64-linux-gnu/openblas-pthread", "/usr/include/openblas",
              "/usr/include/aarch64-linux-gnu/openblas-pthread", "/usr/include"):
        if os.path.exists(os.path.join(d, "cblas.h")):
            return d
    raise RuntimeError("cblas.h not found: run tools/setup.sh (libopenblas-dev)")


flags = ["-std=c11", "-O2", "-fvisibility=hidden", "-Wno-missing-field-initializers"]
if platform.machine() in ("x86_64", "AMD64"):
    flags.append("-march=x86-64-v2")

# setuptools builds in build-py/, beside (not inside) the CMake build folder.
setup(options={"build": {"build_base": "build-py"}}, ext_modules=[Extension(
    "nuvec._core", sources(),
    include_dirs=[rel("include"), rel("src"), cblas_dir()],
    define_macros=[("NUVEC_BUILDING", "1"), ("_GNU_SOURCE", None)],
    extra_compile_args=flags,
    libraries=["openblas", "minizip", "z", "m", "pthread"] +
              (["lapacke"] if os.path.exists("/usr/include/lapacke.h") else []),
)])
