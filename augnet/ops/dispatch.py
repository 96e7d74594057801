"""The fused augmentation primitive ``tap_mix`` and its backend dispatch.

A *tap* reads one source image through a 2-D affine warp (bilinear sampling),
maps its colours with an affine colour map and weights the result. Every
geometric, flip, colour and sample-pairing transform of :mod:`augnet.transforms.image`
is a small sum of taps, so a whole augmentation layer, for all C copies of a
batch, is one ``tap_mix`` call.

Axis legend used in shapes below:
    B  source images            N  output rows (N = B * C copies, copy-major)
    K  taps per output row      Ch channels       H, W  height and width

Backends plug into a small registry (:func:`register_backend`); ``reference``
(plain PyTorch) is always present and is the ground truth the others are
tested against.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from augnet._stack import caller_stacklevel
from augnet.ops.bad_input import guard_reference
from augnet.ops.precision import LOW_PRECISION, compute_dtype, full_precision
from augnet.ops.reference import tap_mix_reference

__all__ = [
    "PADDING_MODES",
    "available_backends",
    "register_backend",
    "resolve_backend",
    "tap_mix",
    "tap_mix_reference",
]

PADDING_MODES = ("zeros", "border", "reflection")

#: Environment variable that overrides ``backend="auto"``.
BACKEND_ENV = "AUGNET_BACKEND"


@dataclass(frozen=True)
class _Backend:
    fn: Callable[..., Tensor]
    supports: Callable[[Tensor], bool]  # can this backend run on this tensor (device, dtype)?
    unavailable_hint: Callable[[], str | None] = lambda: None  # why it cannot run here at all
    support_hint: Callable[[Tensor], str | None] = lambda x: None  # why not on x, beyond its dtype and device


_BACKENDS: dict[str, _Backend] = {
    "reference": _Backend(tap_mix_reference, lambda x: True),
}
# Fast backends ``auto`` tries, fastest first, before falling back to the reference.
_AUTO_ORDER = {"cuda": ("triton", "cuda"), "cpu": ("cpp",)}
_warned_fallback: set[str] = set()


def register_backend(
    name: str,
    fn: Callable[..., Tensor],
    supports: Callable[[Tensor], bool],
    unavailable_hint: Callable[[], str | None] = lambda: None,
    support_hint: Callable[[Tensor], str | None] = lambda x: None,
) -> None:
    """Register a ``tap_mix`` backend.

    Args:
        name: backend name, e.g. ``"cpp"``.
        fn: callable with the signature of :func:`tap_mix_reference`.
        supports: ``supports(x)`` tells whether ``fn`` can run on input ``x``.
        unavailable_hint: returns ``None`` when the backend is usable on this
            machine, else a message saying why not and how to fix it.
        support_hint: for an ``x`` that ``supports`` refuses, what more to say
            than its dtype and device (how it could run), or ``None``.

    Raises:
        ValueError: ``name`` is empty, ``"auto"`` (the dispatcher's choice) or ``"reference"`` (the ground truth
            every backend is checked against). TypeError: ``name`` is not a string, or a callable argument is not
            callable. Nothing is registered then.
    """
    if not isinstance(name, str):
        raise TypeError(f"a backend's name must be a string, got {name!r}")
    if name in ("", "auto", "reference"):
        raise ValueError(f"a backend cannot be named {name!r}: it is empty or reserved ('auto', 'reference')")
    for arg, value in (("fn", fn), ("supports", supports), ("unavailable_hint", unavailable_hint),
                       ("support_hint", support_hint)):  # fmt: skip
        if not callable(value):
            raise TypeError(f"register_backend's {arg} must be callable, got {value!r}")
    _BACKENDS[name] = _Backend(fn, supports, unavailable_hint, support_hint)


def check_backend(backend) -> None:
    """Refuse a ``backend`` argument that is neither ``"auto"`` nor a registered backend's name (at construction)."""
    if not isinstance(backend, str) or backend not in {"auto", *_BACKENDS}:
        error = ValueError if isinstance(backend, str) else TypeError
        raise error(f"backend must be 'auto' or a tap_mix backend {sorted(_BACKENDS)}, got {backend!r}")


def available_backends(x: Tensor | None = None) -> list[str]:
    """Names of the backends installed and working here; given ``x``, those that can run on ``x`` (its device).

    Returns a list of names such as ``["reference", "cpp"]`` (``"reference"`` always works).
    Without ``x`` the list is not per device: Triton is in it on a machine without a GPU when it is installed
    (its CPU interpreter is for tests); ask with a tensor on the device you train on.

    Raises:
        TypeError: ``x`` is neither a tensor nor ``None``.
    """
    if x is not None and not isinstance(x, Tensor):
        raise TypeError(f"available_backends: x must be a tensor or None, got {type(x).__name__}: {_brief(x)}")
    names = []
    # A snapshot: a hint may take a minute (the first build of the C++ backend), and another thread registering a
    # backend meanwhile broke the loop ("dictionary changed size during iteration").
    for name, b in list(_BACKENDS.items()):
        if b.unavailable_hint() is not None:
            continue
        if x is not None and not b.supports(x):
            continue
        names.append(name)
    return names


def resolve_backend(backend: str, x: Tensor) -> str:
    """The backend ``tap_mix`` will use for ``x``.

    ``"auto"`` (unless ``AUGNET_BACKEND`` names a backend) picks the fastest
    available backend for ``x``'s device and falls back to ``"reference"``,
    warning once per device type when a fast backend exists but cannot run.
    A backend asked for by name must be usable, else a ``RuntimeError`` says
    why and how to fix it. Meta tensors (shape inference) take the reference.

    Raises:
        TypeError: ``backend`` is not a string or ``x`` not a tensor. ValueError: an unknown backend name.
        RuntimeError: a backend asked for by name that cannot run on ``x`` here.
    """
    if not isinstance(backend, str):  # (a list would reach the registry as an unhashable key)
        raise TypeError(f"tap_mix: backend must be 'auto' or a backend name, got {type(backend).__name__}: {backend!r}")
    if not isinstance(x, Tensor):
        raise TypeError(f"resolve_backend: x must be a tensor, got {type(x).__name__}: {_brief(x)}")
    return _resolve(backend, x.device.type, x.dtype)


def _check_name(backend) -> None:
    """What :func:`resolve_backend` refuses of ``backend`` by its name alone (no backend is loaded)."""
    if not isinstance(backend, str):
        raise TypeError(f"tap_mix: backend must be 'auto' or a backend name, got {type(backend).__name__}: {backend!r}")
    if backend != "auto" and backend not in _BACKENDS:
        raise ValueError(f"unknown tap_mix backend {backend!r}; expected one of {sorted(set(_BACKENDS) | {'auto'})}")


def _check_usable(backend: str, x: Tensor) -> None:
    """The RuntimeError :func:`tap_mix` raises with rows for a ``backend`` that cannot run on ``x`` here, for
    no row (``backend="cuda"`` on a CPU-only machine returned an empty result). ``"auto"`` (unless
    ``AUGNET_BACKEND`` names a backend) and ``"reference"`` always run: nothing is loaded or warned of then."""
    if backend == "reference" or (backend == "auto" and os.environ.get(BACKEND_ENV, "").strip() in ("", "auto")):
        return
    if _functorch_active():
        _functorch_backend(backend)
    else:
        _resolve(backend, x.device.type, compute_dtype(x))


def _constant_result(fn: Callable) -> Callable:
    """``torch.compiler.assume_constant_result(fn)`` without importing ``torch._dynamo`` for it (1.3 s of the
    3.5 s that ``import augnet`` took: every command, worker process and test run paid it). That decorator only
    sets the mark below, which torch.compile reads when it traces a call of ``fn``; where dynamo is loaded
    already, its own decorator is used. ``tests/test_compile.py`` checks that the mark is still torch's (and
    that the dispatch breaks no graph)."""
    if "torch._dynamo" in sys.modules:
        return torch.compiler.assume_constant_result(fn)
    fn._dynamo_marked_constant = True  # what torch._dynamo.decorators.assume_constant_result sets
    return fn


@_constant_result
def _resolve(backend: str, device_type: str, dtype: torch.dtype) -> str:
    # Decided once per (backend, device, dtype) and treated as a constant by
    # torch.compile, so the dispatch never breaks a graph.
    x = torch.empty(0, device=device_type, dtype=dtype)  # a probe for supports()
    origin = ""  # where the name came from, for the errors: the caller's argument, or the environment
    if backend == "auto":
        env = os.environ.get(BACKEND_ENV, "").strip()
        if env and env != "auto":
            backend, origin = env, f" (from the environment variable {BACKEND_ENV}={env!r}, for backend='auto')"
    if backend == "auto" and device_type == "meta":
        return "reference"  # shape inference only: the reference's ops all have meta kernels
    if backend == "auto":
        fast = _AUTO_ORDER["cuda" if x.is_cuda else "cpu"]
        for name in fast:
            if _why_not(name, x) is None:
                return name
        registered = [n for n in fast if n in _BACKENDS]
        key = x.device.type
        if registered and key not in _warned_fallback:
            _warned_fallback.add(key)
            reasons = "; ".join(f"{n}: {_why_not(n, x)}" for n in registered)
            warnings.warn(
                f"augnet: no compiled tap_mix backend for {key} tensors, using the reference one ({reasons})",
                RuntimeWarning,
                stacklevel=caller_stacklevel(("augnet.", "torch.")),
            )
        return "reference"
    if backend not in _BACKENDS:
        known = sorted(set(_BACKENDS) | {"auto"})
        raise ValueError(f"unknown tap_mix backend {backend!r}{origin}; expected one of {known}")
    why = _why_not(backend, x)
    if why is not None:
        raise RuntimeError(f"tap_mix backend {backend!r}{origin} is not usable here: {why}")
    return backend


def _why_not(name: str, x: Tensor) -> str | None:
    b = _BACKENDS.get(name)
    if b is None:
        return "not part of this build of augnet"
    hint = b.unavailable_hint()
    if hint is not None:
        return hint
    if not b.supports(x):
        why, more = f"does not support {x.dtype} tensors on {x.device}", b.support_hint(x)
        return why if more is None else f"{why}: {more}"
    return None


def _check_inputs(x, src, affine, color, weight, padding) -> bool:
    """Refuse bad ``tap_mix`` arguments; returns whether every value of the taps was read here (see below)."""
    for name, t in (("x", x), ("src", src), ("affine", affine), ("color", color), ("weight", weight)):
        if not isinstance(t, Tensor) and not (name == "color" and t is None):
            kind = "a tensor or None" if name == "color" else "a tensor"
            raise TypeError(f"tap_mix: {name} must be {kind}, got {type(t).__name__}: {_brief(t)}")
        if t is not None:
            check_dense("tap_mix", name, t)
    if x.dim() != 4:
        raise ValueError(f"tap_mix: x must be a (B, Ch, H, W) tensor, got shape {_shape(x)}")
    if not x.is_floating_point():
        raise TypeError(f"tap_mix: x must be a floating-point tensor, got {x.dtype}")
    b, ch = x.shape[:2]
    if any(size == 0 for size in x.shape[1:]):
        raise ValueError(f"tap_mix: x has an empty channel or spatial dimension, shape {tuple(x.shape)}")
    if src.dim() != 2:
        raise ValueError(f"tap_mix: src must be an (N, K) tensor, got shape {_shape(src)}")
    if src.dtype != torch.int64:
        raise TypeError(f"tap_mix: src must be int64, got {src.dtype}")
    n, k = src.shape
    if k < 1:
        raise ValueError("tap_mix: need at least one tap (K >= 1), got K = 0")
    if tuple(affine.shape) != (n, k, 2, 3):
        raise ValueError(f"tap_mix: affine must have shape {(n, k, 2, 3)}, got {_shape(affine)}")
    if tuple(weight.shape) != (n, k):
        raise ValueError(f"tap_mix: weight must have shape {(n, k)}, got {_shape(weight)}")
    if color is not None and tuple(color.shape) != (n, k, ch, ch + 1):
        raise ValueError(f"tap_mix: color must be None or of shape {(n, k, ch, ch + 1)}, got {_shape(color)}")
    allowed = {x.dtype, torch.float32} if x.dtype in LOW_PRECISION else {x.dtype}
    for name, t in (("affine", affine), ("color", color), ("weight", weight)):
        if t is not None and t.dtype not in allowed:
            raise TypeError(f"tap_mix: {name} must have the dtype of x ({x.dtype}), got {t.dtype}")
    for name, t in (("src", src), ("affine", affine), ("color", color), ("weight", weight)):
        if t is not None and t.device != x.device:
            raise ValueError(f"tap_mix: {name} is on {t.device} but x is on {x.device}")
    if padding not in PADDING_MODES:
        raise ValueError(f"tap_mix: padding must be one of {PADDING_MODES}, got {padding!r}")
    if b == 0 and n > 0:
        raise ValueError(f"tap_mix: x is an empty batch but src asks for source rows (src of shape {(n, k)})")
    # Non-finite warps, colour maps or weights would give NaN in one backend and 0 in another, and a
    # NaN grid crashes grid_sample's backward with border/reflection padding: refuse them first on CPU.
    # On accelerators the check would synchronise: there the backends make each row with a bad tap NaN
    # and flag it on the device, and check_bad_input() raises this error later (see ops/bad_input.py).
    # Where the values cannot be read here (under torch.compile, vmap's batched tensors), tap_mix guards the
    # taps in torch ops instead, as on an accelerator: the caller is told by the False returned.
    read = True
    for name, t in (("affine", affine), ("color", color), ("weight", weight)):
        if t is None or not t.numel():
            continue
        if not host_readable(t):
            read = False
        elif not bool(torch.isfinite(t).all()):
            raise ValueError(f"tap_mix: {name} contains NaN or infinite values")
    # Range check of src: cheap on CPU; on accelerators it would synchronise (see above).
    if n > 0 and not host_readable(src):
        read = False
    elif n > 0:
        lo, hi = int(src.min()), int(src.max())
        if lo < 0 or hi >= b:
            raise ValueError(f"tap_mix: src indices must lie in [0, {b - 1}], got values in [{lo}, {hi}]")
    return read


def check_dense(owner: str, name: str, t: Tensor) -> None:
    """The TypeError of a tensor that is not dense: a sparse or MKL-DNN layout, a nested tensor (rows of several
    lengths). The augmentations index, reshape and convolve rows of one shape; such inputs met a raw error deep
    inside torch (``reshape is not implemented for sparse tensors``, ``NestedTensorImpl doesn't support sizes``),
    or, for a few transforms, came out sparse. Reads metadata only."""
    if t.is_nested:
        raise TypeError(
            f"{owner}: {name} must be a dense tensor, got a nested tensor (layout {t.layout}): pad its rows to "
            "one length (torch.nested.to_padded_tensor) or transform each row alone"
        )
    if t.layout != torch.strided:
        raise TypeError(
            f"{owner}: {name} must be a dense (strided) tensor, got layout {t.layout}: pass {name}.to_dense()"
        )


def host_readable(t: Tensor) -> bool:
    """Whether a value check may read ``t`` on the host: on the CPU (elsewhere a read synchronises), not under
    ``torch.compile`` (a read breaks the graph) and not one of ``torch.func.vmap``'s batched tensors (whose values
    are per batch element: a read is data-dependent control flow). Metadata reads only."""
    return t.device.type == "cpu" and not _compiling() and not torch._C._functorch.is_batchedtensor(t)


def _functorch_active() -> bool:
    """Whether a ``torch.func`` transform (``grad``, ``jacrev``, ``vmap``, ``jvp``...) is running (a metadata read)."""
    peek = getattr(torch._C._functorch, "peek_interpreter_stack", None)
    return not _compiling() and peek is not None and peek() is not None


def _functorch_backend(backend: str) -> str:
    """The backend under a ``torch.func`` transform: the reference, whose plain torch ops every transform handles.

    The compiled backends' autograd formula (``torch.library``) runs under none of them.
    """
    if backend not in ("auto", "reference"):
        raise RuntimeError(
            f"tap_mix backend {backend!r} cannot run under a torch.func transform (grad, jacrev, vmap, jvp): "
            "its compiled kernel's gradient is not composable; use backend='auto' or 'reference' there"
        )
    return "reference"


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def _shape(t) -> str:
    return str(tuple(t.shape)) if isinstance(t, Tensor) else type(t).__name__


def _brief(value) -> str:
    """``repr(value)``, cut to a line (an array's repr runs to many)."""
    text = " ".join(repr(value).split())
    return text if len(text) <= 80 else text[:77] + "..."


def tap_mix(
    x: Tensor,
    src: Tensor,
    affine: Tensor,
    color: Tensor | None,
    weight: Tensor,
    padding: str = "zeros",
    backend: str = "auto",
) -> Tensor:
    r"""Weighted sum of warped, colour-mapped taps of source images.

    .. math::
        \mathrm{out}_n = \sum_k \mathrm{weight}_{nk}\,
        C_{nk} \begin{bmatrix} \mathrm{bilinear}(x_{\mathrm{src}_{nk}}, A_{nk}) \\ 1 \end{bmatrix}

    Args:
        x: source images.
        src: index into ``x`` of the source image of each tap.
        affine: per-tap affine map from normalised output coordinates to
            normalised input coordinates (``F.affine_grid`` convention,
            ``align_corners=False``).
        color: per-tap colour matrix and bias ``[M | b]``, or ``None`` for the
            identity colour map.
        weight: per-tap weights.
        padding: ``"zeros"``, ``"border"`` or ``"reflection"``.
        backend: ``"auto"`` or a registered backend name (see
            :func:`available_backends`).

    Shape:
        - x: :math:`(B, Ch, H, W)`
        - src: :math:`(N, K)`, int64 in ``[0, B)``
        - affine: :math:`(N, K, 2, 3)`
        - color: :math:`(N, K, Ch, Ch + 1)` or ``None``
        - weight: :math:`(N, K)`
        - output: :math:`(N, Ch, H, W)`

    Gradients flow to ``x``, ``affine``, ``color`` and ``weight``.

    Precision: float16 / bfloat16 inputs are computed in float32 (``affine``,
    ``color`` and ``weight`` may then be float32) and the result rounded to
    the input's dtype; autocast is disabled inside, so sampling coordinates
    never drop to reduced precision.

    Returns:
        The :math:`(N, Ch, H, W)` mixture, in ``x``'s dtype.

    Raises:
        TypeError, ValueError: an argument that is not a tensor (``color``: or ``None``) or not a dense one
            (sparse, nested), inputs of the wrong shape, dtype or device, an unknown ``padding`` or ``backend``
            (also for an empty ``src``), or (on CPU) ``src`` indices out of range or maps and weights that are
            not finite. On an accelerator such rows come out NaN and :func:`check_bad_input` raises later. Where
            the CPU cannot read the values without breaking the computation (under ``torch.compile``,
            ``torch.func.vmap``'s batched tensors) it does as an accelerator, with nothing to report later: those
            rows NaN, no gradient from them.
        RuntimeError: a backend asked for by name that cannot run here (also for an empty ``src``).

    Examples:
        >>> x = torch.rand(2, 3, 8, 8)
        >>> eye = torch.tensor([[1.0, 0, 0], [0, 1, 0]]).expand(4, 1, 2, 3)
        >>> src = torch.tensor([[0], [1], [0], [1]])  # two copies of each image
        >>> out = tap_mix(x, src, eye, None, torch.ones(4, 1), backend="reference")
        >>> out.shape
        torch.Size([4, 3, 8, 8])
        >>> torch.allclose(out[2:], x, atol=1e-6)
        True
    """
    read = _check_inputs(x, src, affine, color, weight, padding)
    if src.shape[0] == 0:  # no output rows: an empty result that stays in the graph of every input
        _check_name(backend)  # refused as with rows
        _check_usable(backend, x)  # a backend asked for by name that cannot run here: refused as with rows
        touch = sum(t.sum() for t in (x, affine, color, weight) if t is not None)
        return x.new_zeros((0, *x.shape[1:])) + 0 * touch
    # float16 / bfloat16: coordinates, sampling and the mixture in float32, only the result rounded;
    # under torch.autocast the warps stay in full precision (affine_grid's matmul, the colour einsum).
    with full_precision(x) as dtype:
        if dtype != x.dtype:
            affine, color, weight = (None if t is None else t.to(dtype) for t in (affine, color, weight))
        y = x.to(dtype)
        name = resolve_backend(backend, y) if not _functorch_active() else _functorch_backend(backend)
        if (y.device.type == "cpu" and read) or name in _SELF_CHECKING:  # taps refused above, or checked in-kernel
            return _BACKENDS[name].fn(y, src, affine, color, weight, padding).to(x.dtype)
        # An accelerator, or a CPU whose taps could not be read (torch.compile, vmap), and a backend that does
        # not check its taps: the same contract in torch ops (bad rows NaN).
        src, affine, color, weight, bad_row = guard_reference(y, src, affine, color, weight)
        out = _BACKENDS[name].fn(y, src, affine, color, weight, padding)
        return torch.where(bad_row[:, None, None, None], torch.nan, out).to(x.dtype)


# ------------------------------------------------------------------ the backends

# The compiled and Triton backends register here, beside the registry; both
# modules import their compiled parts lazily, so this costs no build at import.
from augnet.ops import _cpp, _triton  # noqa: E402

_FLOATS = (torch.float32, torch.float64)
#: Backends whose kernels apply the bad-input contract themselves on accelerators (ops/bad_input.py).
_SELF_CHECKING = ("cuda", "triton")
register_backend("cpp", _cpp.tap_mix_compiled, lambda x: x.device.type == "cpu" and x.dtype in _FLOATS, _cpp.cpp_hint)
register_backend("cuda", _cpp.tap_mix_compiled, lambda x: x.is_cuda and x.dtype in _FLOATS, _cpp.cuda_hint)
register_backend("triton", _triton.tap_mix_triton, _triton.supports, _triton.unavailable_hint, _triton.support_hint)
