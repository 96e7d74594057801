"""Build script; the package metadata lives in pyproject.toml.

By default nothing is compiled here: augnet builds its tap_mix extension on
first use (torch.utils.cpp_extension, cached). To build it ahead of time:

    AUGNET_BUILD_EXT=1 pip install -e . --no-build-isolation

which compiles csrc/tap_mix.cpp (CPU, OpenMP) into augnet/_C, plus the CUDA
kernel csrc/tap_mix_cuda.cu when a CUDA toolkit is found (AUGNET_BUILD_CUDA=0
skips it). Torch must be importable at build time, hence --no-build-isolation.
The CPU code is tuned for the building machine (-march=native on x86-64); set
AUGNET_CXXFLAGS (e.g. "-O3 -fopenmp") for a build that runs on other CPUs.
"""

import os
import platform

from setuptools import setup


def _prefer_a_complete_cuda_toolkit(cpp_extension):
    # torch finds CUDA_HOME from the nvcc on PATH first; where nvcc is linked
    # into /usr/local/bin that gives /usr/local, which has neither the CUDA
    # headers nor libcudart. A toolkit in /usr/local/cuda is the complete one.
    # cpp_extension read CUDA_HOME when it was first imported (possibly before
    # this script ran): its module-level value is the one its builds use.
    complete_toolkit = os.path.exists("/usr/local/cuda/include/cuda_runtime.h")
    if "CUDA_HOME" not in os.environ and "CUDA_PATH" not in os.environ and complete_toolkit:
        os.environ["CUDA_HOME"] = "/usr/local/cuda"
        cpp_extension.CUDA_HOME = "/usr/local/cuda"


def extensions():
    if os.environ.get("AUGNET_BUILD_EXT", "") != "1":
        return {}
    try:
        from torch.utils import cpp_extension
    except ImportError as err:
        raise RuntimeError(
            "AUGNET_BUILD_EXT=1 needs torch at build time: "
            "run `AUGNET_BUILD_EXT=1 pip install -e . --no-build-isolation`"
        ) from err
    _prefer_a_complete_cuda_toolkit(cpp_extension)
    # As for the build on first use (augnet/ops/_cpp.py): OpenMP, and code tuned
    # for this CPU on x86-64; AUGNET_CXXFLAGS replaces the flags.
    cxx = os.environ.get("AUGNET_CXXFLAGS", "").split() or ["-O3", "-fopenmp"] + (
        ["-march=native"] if platform.machine() in ("x86_64", "AMD64") else []
    )
    sources = ["csrc/tap_mix.cpp"]
    cuda = cpp_extension.CUDA_HOME is not None and os.environ.get("AUGNET_BUILD_CUDA", "1") != "0"
    if cuda:
        import torch

        if not torch.cuda.is_available() and "TORCH_CUDA_ARCH_LIST" not in os.environ:
            # No GPU to ask: build for the common data-centre architectures.
            os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0;8.6;9.0"
        sources.append("csrc/tap_mix_cuda.cu")
        ext = cpp_extension.CUDAExtension(
            "augnet._C", sources, extra_compile_args={"cxx": cxx, "nvcc": ["-O3"]}, extra_link_args=["-fopenmp"]
        )
    else:
        ext = cpp_extension.CppExtension("augnet._C", sources, extra_compile_args=cxx, extra_link_args=["-fopenmp"])
    return {"ext_modules": [ext], "cmdclass": {"build_ext": cpp_extension.BuildExtension}}


setup(**extensions())
