"""Loads the compiled ``augnet::tap_mix`` op (csrc/), or says why it cannot.

Two ways in, tried in order on first use (never at ``import augnet``):

1. an extension built ahead of time by ``AUGNET_BUILD_EXT=1 pip install -e .``
   (``augnet/_C`` with this Python's extension suffix, such as
   ``_C.cpython-311-x86_64-linux-gnu.so``: CPU kernel, plus the CUDA kernel
   where a CUDA toolkit was found);
2. a build on first use with :func:`torch.utils.cpp_extension.load` from the
   csrc/ sources of a source checkout, cached by torch in its extensions folder
   (``TORCH_EXTENSIONS_DIR``), so only the first use compiles (about a minute).

Set ``AUGNET_NO_BUILD=1`` to forbid the build on first use (the op is then only
used when built ahead of time). Once loaded, the op has a fake (meta) kernel
and a registered autograd formula, so ``torch.compile`` traces through it and
``torch.library.opcheck`` passes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import logging
import os
import platform
import shutil
import sys
import threading
import time
from pathlib import Path

import torch

from augnet.ops.bad_input import flag
from augnet.ops.reference import tap_mix_reference

__all__ = [
    "build_and_load",
    "clear_stale_lock",
    "cpp_hint",
    "cuda_hint",
    "cuda_toolkit",
    "find_cuda_toolkit",
    "load",
    "tap_mix_compiled",
]

_PACKAGE = Path(__file__).resolve().parent.parent
_CSRC = _PACKAGE.parent / "csrc"
_lock = threading.Lock()
# OpenMP must be on: ATen's parallel_for compiles its `omp parallel` region
# into the extension. -march=native (x86-64) roughly halves the kernels' time;
# the build is cached per CPU (see _cpu_tag). AUGNET_CXXFLAGS replaces these.
CXX_FLAGS = ["-O3", "-fopenmp"] + (["-march=native"] if platform.machine() in ("x86_64", "AMD64") else [])
LD_FLAGS = ["-fopenmp"]


def _cpu_tag() -> str:
    """A short hash of this CPU's model and features: -march=native builds are not portable."""
    try:
        with open("/proc/cpuinfo") as f:
            info = "".join(line for line in f if line.startswith(("model name", "flags")))
    except OSError:
        info = platform.processor()
    return hashlib.sha1((platform.machine() + info).encode()).hexdigest()[:8]


def _torch_install() -> str:
    """The torch installation a build compiles against: its folder and version."""
    return f"{Path(torch.__file__).resolve().parent} {torch.__version__}"


#: The sources :func:`build_and_load` compiles (the .cu for the CUDA build only), and the suffixes of the headers
#: they may include from csrc/.
SOURCES = ("tap_mix.cpp", "tap_mix_cuda.cu")
HEADER_SUFFIXES = (".h", ".hpp", ".cuh")


def _build_sources() -> list[Path]:
    """The files of csrc/ a build reads: :data:`SOURCES` and the headers beside them, by name. Not an editor's
    swap or backup file (``.tap_mix.cpp.swp``, ``tap_mix.cpp~``, ``#tap_mix.cpp#``), nor ``.DS_Store``."""
    return sorted(
        path
        for path in _CSRC.glob("*")
        if path.is_file()
        and not path.name.startswith((".", "#"))
        and (path.name in SOURCES or path.suffix in HEADER_SUFFIXES)
    )


def _source_tag(cxx_flags: list[str]) -> str:
    """A short hash of csrc/'s build sources (:func:`_build_sources`: the folder, names and contents), the flags and
    the torch installation: each checkout, and each virtual environment, gets a build of its own.

    torch rebuilds an extension whose sources changed under the same name, and
    its build file names the sources and torch's headers by path, so two
    checkouts (or versions), or two environments using one checkout, sharing
    one build cache would rebuild over each other at every switch, even with
    identical sources, and a process could load the other one's build. Other
    files in csrc/ (an editor's swap file while a source is open) change nothing.

    The ``ninja`` on ``PATH`` (the one torch runs) is part of it too: two ninja versions (a virtual environment's
    and the system's, as an activated and a plain interpreter find them) hash the build commands differently, so
    each read the other's build as stale and rebuilt it, 40-100 s at every switch.
    """
    ninja = shutil.which("ninja")
    ninja = str(Path(ninja).resolve()) if ninja else ""
    digest = hashlib.sha1(" ".join(cxx_flags).encode() + str(_CSRC.resolve()).encode() + _torch_install().encode()
                          + ninja.encode())  # fmt: skip
    for path in _build_sources():
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:8]


_state: dict[str, object] = {"tried": False, "error": None}

FIX = (
    "build it ahead of time with `AUGNET_BUILD_EXT=1 pip install -e .` (needs a C++ compiler), "
    "or from a source checkout let augnet compile it on first use (needs `pip install ninja` and a C++ compiler)"
)


#: Guards the process-wide settings the blocks below change for their duration (a logger's level, CUDA_HOME).
_settings_lock = threading.Lock()
#: Per setting, how many blocks are inside (in any thread), the value to restore when the last one leaves, and how.
_held: dict[str, list] = {}


@contextlib.contextmanager
def _setting_held(key: str, save, apply, restore):
    """Run ``apply()`` for the block, and ``restore(saved)`` when the last block holding ``key`` (in any thread)
    leaves, ``saved`` being what ``save()`` read when the first one came in.

    Each block saving and restoring on its own broke under threads: with two overlapping blocks, the one that
    came in second saved the first one's value and, leaving last, restored it for good (torch's extension
    logger stayed at ERROR, ``CUDA_HOME`` set, after every block had ended).
    """
    with _settings_lock:
        held = _held.setdefault(key, [0, None, restore])
        if held[0] == 0:
            held[1:] = [save(), restore]
        held[0] += 1
        apply()
    try:
        yield
    finally:
        with _settings_lock:
            held[0] -= 1
            if held[0] == 0:
                held[2](held[1])


@contextlib.contextmanager
def quiet_cpp_extension_log():
    """Silence the CUDA_HOME warning ``torch.utils.cpp_extension`` logs on import on machines
    without a GPU (it does not concern a CPU build, nor ``torch.utils.benchmark``, which imports it).

    The logger's level is restored when the last such block (in any thread) ends."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    with _setting_held("log", lambda: logger.level, lambda: logger.setLevel(logging.ERROR), logger.setLevel):
        yield


#: Where a CUDA toolkit is looked for last (see :func:`find_cuda_toolkit`).
DEFAULT_CUDA_ROOT = "/usr/local/cuda"


def find_cuda_toolkit() -> str | None:
    """The root of a complete CUDA toolkit (``bin/nvcc`` and ``include/cuda_runtime.h``), or None.

    Looked up in ``CUDA_HOME``, ``CUDA_PATH``, the parents of the ``nvcc`` on
    ``PATH`` (as a link and resolved), then :data:`DEFAULT_CUDA_ROOT`
    (``/usr/local/cuda``): torch takes the ``nvcc`` on ``PATH`` first, which
    may be a wrapper in ``/usr/local/bin`` whose parent has no CUDA headers or
    libraries.
    """
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    on_path = shutil.which("nvcc")
    if on_path:
        roots += [str(Path(on_path).parent.parent), str(Path(on_path).resolve().parent.parent)]
    roots.append(DEFAULT_CUDA_ROOT)
    for root in filter(None, roots):
        if (Path(root) / "bin" / "nvcc").is_file() and (Path(root) / "include" / "cuda_runtime.h").is_file():
            return root
    return None


@contextlib.contextmanager
def cuda_toolkit():
    """Build with :func:`find_cuda_toolkit`'s toolkit; yields its root (or None).

    ``torch.utils.cpp_extension`` reads ``CUDA_HOME`` once, when it is first
    imported (``torch.utils.benchmark`` imports it, for one), into its
    module-level ``CUDA_HOME``, which its builds use; setting the environment
    variable later changes nothing. Both are set for the block and restored after (when the last such block,
    in any thread, ends).
    """
    with quiet_cpp_extension_log():
        from torch.utils import cpp_extension

    root = find_cuda_toolkit()

    def save():
        return cpp_extension.CUDA_HOME, os.environ.get("CUDA_HOME")

    def apply():
        if root is not None:
            cpp_extension.CUDA_HOME = root
            os.environ["CUDA_HOME"] = root

    def restore(saved):
        cpp_extension.CUDA_HOME = saved[0]
        if saved[1] is None:
            os.environ.pop("CUDA_HOME", None)
        else:
            os.environ["CUDA_HOME"] = saved[1]

    with _setting_held("cuda_home", save, apply, restore):
        yield root


def _prebuilt() -> list[Path]:
    """The extension built ahead of time for this Python: ``augnet/_C`` with one of its extension suffixes
    (``_C.cpython-311-x86_64-linux-gnu.so``, ``_C.so``...), in the interpreter's order of preference. A build for
    another Python version beside it (one checkout installed in two environments) is another installation's."""
    named = (_PACKAGE / f"_C{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES)
    return [path for path in named if path.is_file()]


def _load_prebuilt() -> bool:
    for path in _prebuilt():
        torch.ops.load_library(str(path))
        return True
    return False


def _cxx_flags() -> list[str]:
    return os.environ.get("AUGNET_CXXFLAGS", "").split() or CXX_FLAGS


def extension_name() -> str:
    """The cached build's name: this CPU (``-march=native``), the csrc/ sources and the flags."""
    return f"augnet_tap_mix_{_cpu_tag()}_{_source_tag(_cxx_flags())}"


def _builds_cuda() -> bool:
    """Whether :func:`load` builds the CUDA kernels too (a visible GPU and the .cu source): a build of its own."""
    return torch.cuda.is_available() and (_CSRC / SOURCES[1]).exists()


def cached_build(name: str | None = None) -> Path:
    """Where torch's extension cache keeps the build ``name`` (default: this checkout's CPU build,
    :func:`extension_name`), whether it exists or not.

    Raises whatever ``torch.utils.cpp_extension`` raises when it cannot say (a private helper of torch's).
    """
    with quiet_cpp_extension_log():
        from torch.utils.cpp_extension import _get_build_directory

    name = extension_name() if name is None else name
    return Path(_get_build_directory(name, verbose=False)) / f"{name}.so"


def _build_now() -> None:
    cxx = _cxx_flags()
    name = extension_name()
    start = time.perf_counter()
    built = False
    if _builds_cuda():
        try:
            build_and_load(name + "_cuda", cuda=True, cxx_flags=cxx)
            built = True
        except Exception as err:  # keep the CPU kernel even when the CUDA build fails
            _state["cuda_error"] = f"{type(err).__name__}: {err}"
    if not built:
        build_and_load(name, cuda=False, cxx_flags=cxx)
    seconds = time.perf_counter() - start
    if seconds > 3:  # it compiled rather than loaded from the cache
        print(f"augnet: built the tap_mix extension in {seconds:.0f} s (cached for later runs)", file=sys.stderr)


def build_and_load(name: str, cuda: bool, cxx_flags: list[str], build_directory: str | None = None) -> None:
    """Compile csrc/ (with the CUDA kernels when ``cuda``) as extension ``name`` and load it into this process.

    The CUDA build takes its toolkit from :func:`cuda_toolkit`, and its
    architectures from ``TORCH_CUDA_ARCH_LIST`` (torch's rule: the visible
    GPUs' otherwise). It needs no GPU: a machine without one can build and load
    the CUDA kernels (``tests/test_cuda_build.py`` does). A process can load
    only one extension that defines the ``augnet`` op library.
    """
    with quiet_cpp_extension_log():
        from torch.utils import cpp_extension

    cpp = _CSRC / SOURCES[0]
    if not cpp.exists():
        raise RuntimeError(f"the csrc/ sources are not next to this installation ({_CSRC})")
    folder = build_directory if build_directory is not None else cpp_extension._get_build_directory(name, False)
    clear_stale_lock(Path(folder), cpp_extension)
    sources = [str(cpp)]
    options = dict(extra_cflags=cxx_flags, extra_ldflags=LD_FLAGS, is_python_module=False, verbose=False)
    if build_directory is not None:
        options["build_directory"] = build_directory
    if not cuda:
        cpp_extension.load(name=name, sources=sources, **options)
        return
    with cuda_toolkit() as root:
        if root is None:
            raise RuntimeError("no CUDA toolkit (nvcc and include/cuda_runtime.h) found; set CUDA_HOME")
        cpp_extension.load(name=name, sources=[*sources, str(_CSRC / SOURCES[1])], extra_cuda_cflags=["-O3"], **options)


#: A build's lock file older than this is left by a build that was killed (a build takes a minute or two).
STALE_LOCK_S = 15 * 60


def clear_stale_lock(folder: Path, cpp_extension) -> bool:
    """Remove a build folder's lock file left by a killed build, where torch would wait on it forever.

    torch up to 2.11 at least guards a build with a lock *file* whose mere
    existence blocks (``FileBaton``): a build stopped by Ctrl-C or a crash
    leaves it, and every later build of that extension waits for ever, with no
    message. Newer torch holds an advisory lock the system drops with its
    holder. Where the file kind is in use and the lock is older than
    :data:`STALE_LOCK_S`, it is removed with a warning; returns whether it was.
    """
    lock = folder / "lock"
    if not hasattr(cpp_extension, "FileBaton") or not lock.is_file():
        return False
    age = time.time() - lock.stat().st_mtime
    if age < STALE_LOCK_S:
        return False
    with contextlib.suppress(FileNotFoundError):
        lock.unlink()
    print(f"augnet: removed {lock}, left {age / 60:.0f} minutes ago by a build that did not finish", file=sys.stderr)
    return True


def load() -> bool:
    """Load the compiled op once; return whether ``torch.ops.augnet.tap_mix`` exists."""
    if _state["tried"]:
        return _state["error"] is None
    with _lock:
        if not _state["tried"]:
            try:
                if not _load_prebuilt():
                    if os.environ.get("AUGNET_NO_BUILD", "") == "1":
                        raise RuntimeError("no prebuilt extension and AUGNET_NO_BUILD=1 forbids building it")
                    _build_now()
                _register_python_side()
            except Exception as err:  # any failure means: not available, with the reason kept
                _state["error"] = f"{type(err).__name__}: {err}".strip()
            _state["tried"] = True
    return _state["error"] is None


def _after_fork_in_child() -> None:
    """A child of ``fork`` (a ``DataLoader`` worker, a ``multiprocessing`` pool) has only the thread that forked:
    the locks another thread of the parent held (loading or building the extension, a minute) would stay held in
    it for ever, and its first ``tap_mix`` wait for them with no message. It gets free locks (a loading left
    unfinished is tried again there: torch's build lock, a file lock, makes it wait for the parent's build)."""
    global _lock, _settings_lock
    _lock, _settings_lock = threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _has_kernel(key: str, op: str = "augnet::tap_mix") -> bool:
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op, key)
    except RuntimeError:  # the op is not defined (an extension built before it existed)
        return False


def cpp_hint() -> str | None:
    """``None`` when the CPU kernel is usable, else why not and how to fix it."""
    if not load():
        return f"the compiled extension is not available ({_state['error']}); {FIX}"
    return None if _has_kernel("CPU") else f"the extension has no CPU kernel; {FIX}"


def cuda_hint() -> str | None:
    """``None`` when the CUDA kernel is usable, else why not."""
    if not torch.cuda.is_available():
        return "no CUDA device"
    if not load():
        return f"the compiled extension is not available ({_state['error']}); {FIX}"
    if not _has_kernel("CUDA"):
        if "cuda_error" in _state:
            return f"building the CUDA kernel failed ({_state['cuda_error']})"
        return "the extension was built without its CUDA kernel (build it where a CUDA toolkit is installed)"
    return None


def tap_mix_compiled(x, src, affine, color, weight, padding):
    """``augnet::tap_mix`` on contiguous inputs (differentiable); loads the op if needed."""
    if not load():
        raise RuntimeError(f"tap_mix: {cpp_hint()}")
    if x.is_cuda and not torch.compiler.is_compiling():
        _register_bad_input_flag(x.device)
    return torch.ops.augnet.tap_mix(
        x.contiguous(),
        src.contiguous(),
        affine.contiguous(),
        None if color is None else color.contiguous(),
        weight.contiguous(),
        padding,
    )


_flag_devices: set[torch.device] = set()


def _register_bad_input_flag(device: torch.device) -> None:
    """Give the CUDA kernels of ``device`` the address of its bad-input flag (once per device; no sync)."""
    if device in _flag_devices or not _has_kernel("CUDA", "augnet::_set_bad_input_flag"):
        return
    torch.ops.augnet._set_bad_input_flag(flag(device))
    _flag_devices.add(device)


# ------------------------------------------------------------------ registration


def _register_python_side() -> None:
    """Fake kernels and autograd for the loaded op (once per process)."""
    if _state.get("registered"):
        return

    @torch.library.register_fake("augnet::tap_mix")
    def _(x, src, affine, color, weight, padding):
        torch._check(x.dim() == 4, lambda: "tap_mix: x must be a (B, Ch, H, W) tensor")
        torch._check(src.dim() == 2, lambda: "tap_mix: src must be an (N, K) tensor")
        return x.new_empty((src.shape[0], x.shape[1], x.shape[2], x.shape[3]))

    @torch.library.register_fake("augnet::tap_mix_backward")
    def _(grad_out, x, src, affine, color, weight, padding, output_mask):
        grad_color = x.new_empty((0,)) if color is None else torch.empty_like(color)
        return torch.empty_like(x), torch.empty_like(affine), grad_color, torch.empty_like(weight)

    def setup_context(ctx, inputs, output):
        x, src, affine, color, weight, padding = inputs
        ctx.save_for_backward(x, src, affine, color, weight)
        ctx.padding = padding
        ctx.has_color = color is not None

    def backward(ctx, grad):
        x, src, affine, color, weight = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True (a gradient penalty): a backward that has a gradient itself
            return _differentiable_backward(ctx, grad, x, src, affine, color if ctx.has_color else None, weight)
        need_x, _, need_affine, need_color, need_weight, _ = ctx.needs_input_grad
        mask = [need_x, need_affine, need_color and ctx.has_color, need_weight]
        gx, gaff, gcol, gw = torch.ops.augnet.tap_mix_backward(
            grad, x, src, affine, color if ctx.has_color else None, weight, ctx.padding, mask
        )
        return (
            gx if need_x else None,
            None,
            gaff if need_affine else None,
            gcol if mask[2] else None,
            gw if need_weight else None,
            None,
        )

    torch.library.register_autograd("augnet::tap_mix", backward, setup_context=setup_context)
    _state["registered"] = True


def _differentiable_backward(ctx, grad, x, src, affine, color, weight) -> tuple:
    """The op's gradients as the reference ``tap_mix``'s, in its differentiable torch ops (the compiled backward
    kernel has no gradient of its own: a second derivative through it was 0)."""
    # Aliases: the inputs may be functions of one another (a colour map or a conditioner reading x), and a gradient
    # with respect to x itself would count the path through them a second time.
    inputs = {i: None if t is None else t.view_as(t) for i, t in {0: x, 2: affine, 3: color, 4: weight}.items()}
    wanted = [i for i, t in inputs.items() if t is not None and ctx.needs_input_grad[i]]
    out = tap_mix_reference(inputs[0], src, inputs[2], inputs[3], inputs[4], ctx.padding)
    got = torch.autograd.grad(out, [inputs[i] for i in wanted], grad, create_graph=True, allow_unused=True)
    found = dict(zip(wanted, got, strict=True))
    return tuple(found.get(i) for i in range(6))


def load_first() -> None:
    """Load the extension before a progress bar starts (its first step would hold the whole build), and before
    anything is timed; a first build (about a minute) is said in one line first."""
    if _state["tried"] or os.environ.get("AUGNET_BACKEND", "auto") not in ("auto", "cpp"):
        return
    if not extension_cached() and os.environ.get("AUGNET_NO_BUILD", "") != "1":
        print("augnet: compiling the tap_mix C++ extension first (once, about a minute)...", flush=True)
    load()


def extension_cached() -> bool:
    """Whether the extension is prebuilt or in torch's extension cache (loading it is then quick)."""
    if _prebuilt():
        return True
    try:  # with a GPU, load() first builds the CUDA kernels too, under a name of their own
        return cached_build(extension_name() + ("_cuda" if _builds_cuda() else "")).exists()
    except Exception:  # a torch without the helper: say so, to be safe
        return False
