"""The GPU kernels compiled for real GPUs ahead of time, on a machine without one: errors, registers, spills.

Triton's interpreter runs the kernels' logic on the CPU but generates no code;
a kernel that passes under it can still fail to compile for a GPU, or spill
registers to local memory there. This compiles, for sm_80 (A100) and sm_90
(H100, H200), exactly the specialisations the launcher makes: the kernel's
arguments are built by :func:`augnet.ops._triton.forward_launch` /
:func:`~augnet.ops._triton.backward_launch` for a given case, and specialised as
a launch does (integers equal to 1 become constants, integers and pointers
divisible by 16 are marked so), then ``triton.compile`` runs the whole pipeline
to a cubin with the ``ptxas`` bundled in the triton wheel, and the bundled
``cuobjdump`` reads its resources. The CUDA kernels of csrc/ are compiled with
``nvcc --resource-usage`` (:func:`cuda_resources`), where nvcc exists.

The cases (:func:`triton_cases`): forward, backward, and backward with the
gradient of ``x``; every padding; with and without a colour map; float32 and
float64; 1, 3, 8, 16, 32 and 64 channels (BLOCK_C 1 to 64, so every BLOCK_P
the launcher picks for large images); a layer's training call, B = 64 images of
32 x 32, C = 4 copies, K = 6 taps. The full set adds, for 3 channels, the
evaluation call (K = 1, one copy: those arguments become constants), 224 x 224
images, and an ``x`` whose address is not a multiple of 16 bytes.

``python -m augnet.bench.gpu_compile`` (or ``benchmarks/gpu_compile.py``) writes
``benchmarks/results/triton_resources.json`` and ``cuda_resources.json``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from augnet._checks import is_int, number

__all__ = ["ARCHS", "TritonCase", "compile_all", "compile_triton", "cuda_resources", "quick_cases", "triton_cases"]

#: Compute capabilities compiled for: A100 (sm_80), H100 and H200 (sm_90).
ARCHS = (80, 90)
KERNELS = ("forward", "backward", "backward+dx")
PADDINGS = ("zeros", "border", "reflection")
CHANNELS = (1, 3, 8, 16, 32, 64)
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_CSRC = Path(__file__).resolve().parents[2] / "csrc"


@dataclass(frozen=True)
class TritonCase:
    """One launch of a Triton kernel, as the launcher would make it."""

    kernel: str  # "forward", "backward" (no gradient of x) or "backward+dx"
    padding: str
    color: bool
    dtype: str  # "float32" or "float64"
    channels: int
    b: int = 64
    size: int = 32  # square images
    copies: int = 4
    k: int = 6
    aligned: bool = True  # x's address a multiple of 16 bytes

    def __post_init__(self):
        # A kernel other than "forward" was compiled as the backward, silently; an unknown dtype or padding was a
        # KeyError from inside the launcher, no channels or images a record of a launch that cannot be.
        for name, known in (("kernel", KERNELS), ("padding", PADDINGS), ("dtype", tuple(_DTYPES))):
            if not isinstance(getattr(self, name), str) or getattr(self, name) not in known:
                raise ValueError(f"{name} must be one of {', '.join(known)}, got {getattr(self, name)!r}")
        for name in ("color", "aligned"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be a bool, got {type(getattr(self, name)).__name__}: "
                                f"{getattr(self, name)!r}")  # fmt: skip
        for name in ("channels", "b", "size", "copies", "k"):
            value = getattr(self, name)
            if not is_int(value):
                raise TypeError(f"{name} must be an int, got {type(value).__name__}: {value!r}")
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
            object.__setattr__(self, name, int(value))  # a NumPy integer: the int it holds (the record is JSON)

    @property
    def name(self) -> str:
        name = f"{self.kernel} {self.padding} {'color' if self.color else 'no-color'} {self.dtype} Ch={self.channels}"
        if (self.b, self.size, self.copies, self.k) != (64, 32, 4, 6):
            name += f" B={self.b} {self.size}x{self.size} C={self.copies} K={self.k}"
        return name if self.aligned else name + " unaligned"


def triton_cases(full: bool = True) -> list[TritonCase]:
    """The compile matrix (see the module's docstring); ``full=False`` gives :func:`quick_cases`."""
    if not full:
        return quick_cases()
    cases = [
        TritonCase(kernel, padding, color, dtype, ch)
        for kernel in KERNELS
        for padding in PADDINGS
        for color in (False, True)
        for dtype in _DTYPES
        for ch in CHANNELS
    ]
    for kernel in KERNELS:
        for dtype in _DTYPES:
            cases += [
                TritonCase(kernel, "zeros", True, dtype, 3, copies=1, k=1),  # evaluation: N = B, one tap
                TritonCase(kernel, "zeros", True, dtype, 3, b=256, size=224),
                TritonCase(kernel, "zeros", True, dtype, 3, aligned=False),
            ]
    return cases


def quick_cases() -> list[TritonCase]:
    """A few cases that touch every kernel, dtype, padding, colour or not, 1 to 64 channels, and K = 1."""
    return [
        TritonCase("forward", "zeros", True, "float32", 3),
        TritonCase("forward", "reflection", False, "float64", 1, copies=1, k=1),
        TritonCase("backward", "border", True, "float64", 64),
        TritonCase("backward+dx", "reflection", False, "float32", 64),
        TritonCase("backward+dx", "zeros", True, "float32", 8, b=256, size=224),
    ]


def _arguments(case: TritonCase):
    """``(kernel, positional arguments, constexpr keywords)`` of the case's launch, with stand-in tensors."""
    from augnet.ops import _triton

    dtype = _DTYPES[case.dtype]
    n, ch, hw = case.b * case.copies, case.channels, case.size

    def t(*shape, dt=dtype, aligned=True):  # the shape without the memory; the address is what matters
        base = torch.empty(2 if not aligned else 1, dtype=dt)
        return (base[1:] if not aligned else base).expand(*shape)

    x = t(case.b, ch, hw, hw, aligned=case.aligned)
    src, affine, weight = t(n, case.k, dt=torch.long), t(n, case.k, 2, 3), t(n, case.k)
    color = t(n, case.k, ch, ch + 1) if case.color else None
    flag = t(1, dt=torch.int32)
    if case.kernel == "forward":
        out = t(n, ch, hw, hw)
        _, args, consts = _triton.forward_launch(x, src, affine, color, weight, out, flag, case.padding)
        return _triton._fwd_kernel, args, consts
    need_x = case.kernel == "backward+dx"
    grads = (t(case.b, ch, hw, hw) if need_x else None, t(1), t(1) if case.color else None, t(1))
    grad_out = t(n, ch, hw, hw)
    _, args, consts = _triton.backward_launch(grad_out, x, src, affine, color, weight, grads, case.padding, need_x)
    return _triton._bwd_kernel, args, consts


def compile_hint() -> str | None:
    """``None`` when the installed triton can compile the kernels ahead of time, else why not (the launcher's
    specialisation that :func:`compile_triton` repeats is not in older triton, such as 3.0, torch 2.4's pin)."""
    try:
        from triton._C.libtriton import native_specialize_impl  # noqa: F401
    except ImportError as err:
        version = getattr(sys.modules.get("triton"), "__version__", "not installed")
        return f"ahead-of-time compiles need a newer triton than {version} ({err})"
    return None


def _specialise(kernel, args, consts, arch: int):
    """``(signature, constexprs, attrs)`` as Triton's launcher builds them for these arguments."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend

    backend = CUDABackend(GPUTarget("cuda", arch, 32))
    consts = {k: v for k, v in consts.items() if k not in _OPTIONS}
    names = kernel.arg_names
    values = list(args) + [consts[name] for name in names[len(args) :]]
    signature, constexprs, attrs = {}, {}, {}
    for i, (name, value) in enumerate(zip(names, values, strict=True)):
        if name in consts:
            signature[name] = "constexpr"
            constexprs[(i,)] = value
            continue
        ty, attr = native_specialize_impl(CUDABackend, value, False, True, True)
        signature[name] = ty
        if ty == "constexpr":
            constexprs[(i,)] = attr
        elif isinstance(attr, str):
            attrs[(i,)] = backend.parse_attr(attr)
    return signature, constexprs, attrs


#: Launch keywords that are compile options, not kernel arguments.
_OPTIONS = ("num_warps", "num_stages", "maxnreg", "enable_fp_fusion")


def _tool(name: str) -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def compile_triton(case: TritonCase, arch: int) -> dict:
    """Compile one case for ``sm_{arch}``; its resources (``error`` set when it did not compile).

    Returns a record with the case's fields, ``arch``, ``BLOCK_C``, ``BLOCK_P``,
    ``num_warps``, ``registers`` (per thread), ``shared`` (bytes of shared memory
    per program: what the launch asks for, Triton's scratch for reductions and
    layout changes, plus what the cubin declares, which on sm_90 includes the
    1 KiB the hardware reserves per block), ``stack`` and ``local`` (bytes of
    stack frame and of local memory per thread: a register spill shows there)
    and ``spills`` (``stack + local > 0``).

    Raises:
        TypeError, ValueError: ``case`` is not a :class:`TritonCase`, or ``arch`` not a positive int (a compute
            capability, e.g. 90), before anything is compiled.
    """
    if not isinstance(case, TritonCase):
        raise TypeError(f"case must be a TritonCase, got {type(case).__name__}: {case!r}")
    arch = number("arch", arch)  # a 0-d tensor or array: the int it holds
    _check_arch(arch)
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel, args, consts = _arguments(case)
    record = {**asdict(case), "arch": f"sm_{arch}", "BLOCK_C": consts["BLOCK_C"], "BLOCK_P": consts["BLOCK_P"]}
    signature, constexprs, attrs = _specialise(kernel, args, consts, arch)
    options = {k: consts[k] for k in _OPTIONS if k in consts}
    try:
        source = ASTSource(kernel, signature, constexprs, attrs)
        compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
    except Exception as err:  # a compile error is what this is looking for: report it, do not stop
        return {**record, "error": f"{type(err).__name__}: {str(err)[-2000:]}"}
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        usage = subprocess.run([_tool("cuobjdump"), "-res-usage", str(cubin)], capture_output=True, text=True)
    found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", usage.stdout)
    if found is None:
        return {**record, "error": f"cuobjdump gave no resource usage: {usage.stdout[-500:]}{usage.stderr[-500:]}"}
    reg, stack, shared, local = map(int, found.groups())
    return {
        **record,
        "num_warps": compiled.metadata.num_warps,
        "fp_fusion": compiled.metadata.enable_fp_fusion,
        "registers": reg,
        "shared": compiled.metadata.shared + shared,
        "shared_dynamic": compiled.metadata.shared,
        "stack": stack,
        "local": local,
        "spills": stack + local > 0,
        "error": None,
    }


def _check_arch(arch, name: str = "arch") -> None:
    """The TypeError or ValueError of an ``arch`` that is no compute capability (an int such as 80 or 90)."""
    if not is_int(arch):
        raise TypeError(f"{name} must be an int compute capability such as 90, got {type(arch).__name__}: {arch!r}")
    if arch < 1:
        raise ValueError(f"{name} must be a positive compute capability such as 90, got {arch}")


def _check_archs(archs, empty: bool = False) -> tuple[int, ...]:
    """``archs`` as a tuple of ints (any iterable of them: a generator is read once, here), or the TypeError or
    ValueError of archs that are no compute capabilities; none is an error unless ``empty``."""
    if isinstance(archs, (str, bytes)) or not isinstance(archs, Iterable):
        raise TypeError(f"archs must be a tuple or list of ints such as (80, 90), got {type(archs).__name__}: "
                        f"{archs!r}")  # fmt: skip
    read = [number("archs", a) for a in archs]
    if not read and not empty:
        raise ValueError("archs must name at least one compute capability, e.g. (80, 90), got none")
    for arch in read:
        _check_arch(arch, f"archs {read}: each")
    return tuple(int(a) for a in read)


def _cpp_extension():
    from augnet.ops._cpp import quiet_cpp_extension_log

    with quiet_cpp_extension_log():  # its warning about CUDA_HOME concerns its own guess, not ours
        from torch.utils import cpp_extension
    return cpp_extension


def _cuda_include_paths() -> list[str]:
    cpp_extension = _cpp_extension()

    try:
        paths = cpp_extension.include_paths(device_type="cuda")
    except TypeError:  # torch < 2.6
        paths = cpp_extension.include_paths(cuda=True)
    return [p for p in paths if Path(p).is_dir()]


def cuda_resources(archs: tuple[int, ...] = ARCHS) -> list[dict]:
    """Compile csrc/tap_mix_cuda.cu with ``nvcc --resource-usage`` for ``archs``; one record per kernel and arch.

    Each record: ``kernel`` (forward, backward, backward_finish), ``dtype``,
    ``arch``, ``registers``, ``shared``, ``stack``, ``spill_stores``,
    ``spill_loads`` and ``spills``. Raises ``RuntimeError`` when no complete CUDA
    toolkit is found, or with nvcc's message when the source does not compile; ``TypeError`` / ``ValueError``
    for ``archs`` that are not a non-empty tuple or list of ints (none given, nvcc would compile its own default).
    """
    archs = _check_archs(archs)
    from augnet.ops._cpp import find_cuda_toolkit

    cpp_extension = _cpp_extension()

    root = find_cuda_toolkit()
    if root is None:
        raise RuntimeError("no CUDA toolkit (nvcc and include/cuda_runtime.h) found; set CUDA_HOME")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            str(Path(root) / "bin" / "nvcc"),
            "-c",
            str(_CSRC / "tap_mix_cuda.cu"),
            "-o",
            str(Path(tmp) / "tap_mix_cuda.o"),
            "-std=c++20",  # as cpp_extension builds it (this torch's headers need C++20)
            *(f"-I{p}" for p in _cuda_include_paths()),
            f"-I{Path(root) / 'include'}",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            "-DTORCH_EXTENSION_NAME=augnet_tap_mix_cuda",
            *cpp_extension.COMMON_NVCC_FLAGS,
            "-O3",
            *(f"-gencode=arch=compute_{a},code=sm_{a}" for a in archs),
            "--resource-usage",
            "-Xcompiler",
            "-fPIC",
        ]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"nvcc failed:\n{' '.join(cmd)}\n{result.stderr[-20000:]}")
    return parse_ptxas(result.stdout + result.stderr)


def parse_ptxas(log: str) -> list[dict]:
    """Records of ptxas's ``-v`` / ``--resource-usage`` report (one per entry function and arch)."""
    records, current = [], None
    for line in log.splitlines():
        entry = re.search(r"Compiling entry function '(\w+)' for '(sm_\d+)'", line)
        if entry:
            mangled, arch = entry.groups()
            kind = re.search(r"tap_mix_(forward|backward_finish|backward)_kernelI([fd])E", mangled)
            current = {
                "kernel": kind.group(1) if kind else mangled,
                "dtype": {"f": "float32", "d": "float64"}.get(kind.group(2), "?") if kind else "?",
                "arch": arch,
            }
            records.append(current)
            continue
        if current is None:
            continue
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if frame:
            current["stack"], current["spill_stores"], current["spill_loads"] = map(int, frame.groups())
        used = re.search(r"Used (\d+) registers", line)
        if used:
            current["registers"] = int(used.group(1))
            smem = re.search(r"(\d+) bytes smem", line)
            current["shared"] = int(smem.group(1)) if smem else 0
    for r in records:
        r["spills"] = r.get("stack", 0) + r.get("spill_stores", 0) + r.get("spill_loads", 0) > 0
    return records


def versions() -> dict:
    """The compilers the records come from."""
    import triton

    from augnet.ops._cpp import find_cuda_toolkit

    out = {"torch": torch.__version__, "triton": triton.__version__}
    ptxas = subprocess.run([_tool("ptxas"), "--version"], capture_output=True, text=True).stdout.strip()
    out["ptxas (triton)"] = ptxas.splitlines()[-1] if ptxas else None
    root = find_cuda_toolkit()
    if root is not None:
        nvcc = subprocess.run([str(Path(root) / "bin" / "nvcc"), "--version"], capture_output=True, text=True)
        out["nvcc"] = nvcc.stdout.strip().splitlines()[-1] if nvcc.returncode == 0 else None
    return out


def compile_all(cases: list[TritonCase], archs: tuple[int, ...] = ARCHS, workers: int | None = None) -> list[dict]:
    """:func:`compile_triton` of every case for every arch, in that order, over ``workers`` processes.

    Each compile runs Triton's pipeline and ptxas on one core, and the cases are independent: ``None``
    uses every core (:func:`os.cpu_count`), ``1`` compiles in this process (an int >= 1: a 0-d integer tensor or
    array too; a TypeError or ValueError naming ``workers`` otherwise). ``cases`` and ``archs`` may be any iterables
    (read once); what is not a :class:`TritonCase`, or an arch that is no positive int: a TypeError or ValueError
    before anything is compiled.
    """
    if workers is not None:  # a 0-d integer tensor or array: the int it holds
        read = number("workers", workers)
        if not is_int(read):
            raise TypeError(f"workers must be an int or None, got {type(workers).__name__}: {workers!r}")
        if read < 1:
            raise ValueError(f"workers must be >= 1, got {read}")
        workers = int(read)
    archs = _check_archs(archs, empty=True)  # none compiles nothing, as no cases does
    if isinstance(cases, (str, bytes)) or not isinstance(cases, Iterable):
        raise TypeError(f"cases must be a list of TritonCase, got {type(cases).__name__}: {cases!r}")
    cases = list(cases)  # a generator: read once, not once per arch
    odd = [c for c in cases if not isinstance(c, TritonCase)]
    if odd:
        raise TypeError(f"cases must be TritonCase, got {type(odd[0]).__name__}: {odd[0]!r}")
    jobs = [(case, arch) for case in cases for arch in archs]
    workers = min(len(jobs), os.cpu_count() or 1) if workers is None else workers
    if workers == 1 or len(jobs) < 2:
        return [compile_triton(case, arch) for case, arch in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawned: a forked child of a process that has run torch's thread pools can hang
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(compile_triton, *zip(*jobs, strict=True)))


def main(out_dir: str = "benchmarks/results", full: bool = True) -> int:
    """Compile everything, write the two JSON files, print a summary; exit status 1 on any error or spill."""
    why = compile_hint()
    if why is not None:
        print(f"triton: not compiled ({why})")
        return 1
    records = compile_all(triton_cases(full))
    bad = 0
    for r in records:
        if r["error"] or r["spills"]:
            bad += 1
            print(f"FAIL {r['kernel']} {r['padding']} {r['dtype']} Ch={r['channels']} {r['arch']}: "
                  f"{r['error'] or 'spills'}", flush=True)  # fmt: skip
    os.makedirs(out_dir, exist_ok=True)
    meta = versions()
    with open(Path(out_dir) / "triton_resources.json", "w") as f:
        json.dump({"versions": meta, "records": records}, f, indent=1)
    print(f"triton: {len(records)} compiled, {bad} failed or spilled")
    try:
        cuda = cuda_resources()
    except RuntimeError as err:
        print(f"cuda: not compiled ({err})")
    else:
        bad += sum(r["spills"] for r in cuda)
        with open(Path(out_dir) / "cuda_resources.json", "w") as f:
            json.dump({"versions": meta, "records": cuda}, f, indent=1)
        print(f"cuda: {len(cuda)} kernels, {sum(r['spills'] for r in cuda)} spill")
    return 1 if bad else 0


def _command(
    argv: list[str] | None = None, out_dir: str = "benchmarks/results", prog: str = "python -m augnet.bench.gpu_compile"
) -> int:
    """``python -m augnet.bench.gpu_compile [--quick]``: :func:`main` with its arguments read by argparse, so that
    ``--help`` says what it does and a misspelt option is refused (exit status 2), not taken for a full run."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few cases (quick_cases) instead of the full set")
    args = parser.parse_args(argv)
    return main(out_dir=out_dir, full=not args.quick)


if __name__ == "__main__":
    sys.exit(_command())
