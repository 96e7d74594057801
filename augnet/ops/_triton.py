"""Triton backend of :func:`augnet.ops.tap_mix`: launches the fused kernels of :mod:`augnet.ops._triton_kernels`.

The launch: one program per (output row, block of pixels) in the order the kernels
describe (copies of one source row side by side); the pixel block is sized by
:func:`_block_p`. :func:`forward_launch` and :func:`backward_launch` give a
launch's grid, arguments and compile-time constants, for the launcher and for
the ahead-of-time compile checks (:mod:`augnet.bench.gpu_compile`).

Triton is optional: importing this module never fails, :func:`unavailable_hint`
says how to install it, and :func:`supports` tells which tensors the kernels
run on (CUDA tensors, or CPU tensors under Triton's interpreter,
``TRITON_INTERPRET=1``, which must be set before triton is first imported).
"""

from __future__ import annotations

import contextlib
import os
import re

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from augnet.ops.bad_input import flag

try:  # triton is an optional dependency: pip install "augnet[triton]"
    import triton

    _IMPORT_ERROR: str | None = None
except Exception as e:  # ImportError, or a broken install
    triton = None
    _IMPORT_ERROR = f"{type(e).__name__}: {e}"

__all__ = ["interpreter_hint", "support_hint", "supports", "tap_mix_triton", "unavailable_hint"]

_PADDING_CODE = {"zeros": 0, "border": 1, "reflection": 2}
#: Fused multiply-adds, asked for by name: Triton 3.9 warns at every first compile that its default (on) turns off
#: in 3.10, which would compile the kernels with ``--fmad=false`` (slower, and other roundings than those checked).
FP_FUSION = {"enable_fp_fusion": True}
_DTYPES = (torch.float32, torch.float64)


def unavailable_hint() -> str | None:
    """``None`` when triton can be imported, else why not and how to fix it."""
    if _IMPORT_ERROR is None:
        return None
    return f'triton cannot be imported ({_IMPORT_ERROR}); install it with: pip install "augnet[triton]"'


def supports(x: Tensor) -> bool:
    """Whether the kernels run on ``x``: float32/float64 on CUDA, or on CPU under ``TRITON_INTERPRET=1``.

    CPU tensors need the interpreter switched on before this module (which
    defines the kernels) was imported; setting the variable later does not count.
    """
    if x.dtype not in _DTYPES:
        return False
    if x.is_cuda:
        return True
    return x.device.type == "cpu" and _interpreting() and _kernels_interpreted() and interpreter_hint() is None


#: The oldest triton whose CPU interpreter runs the kernels: 3.6's stops at their loops over a tensor bound
#: (``for k in range(K)``). Compiled for a GPU they run on 3.6 too (checked on an H200 with torch 2.11).
INTERPRETER_MIN_VERSION = (3, 8)


def interpreter_hint() -> str | None:
    """``None`` when Triton's interpreter can run the kernels on CPU tensors here, else why not."""
    if triton is None:
        return unavailable_hint()
    found = tuple(int(re.match(r"\d*", part).group() or 0) for part in triton.__version__.split(".")[:2])
    if found < INTERPRETER_MIN_VERSION:
        need = ".".join(map(str, INTERPRETER_MIN_VERSION))
        return f"triton {triton.__version__}'s interpreter cannot run the kernels (it needs {need} or newer)"
    return None


def support_hint(x: Tensor) -> str | None:
    """For a tensor :func:`supports` refuses: on the CPU, why the kernels do not take it and how they could."""
    return cpu_hint() if x.device.type == "cpu" else None


def cpu_hint() -> str:
    """Why the kernels do not take CPU tensors here (see :func:`supports`), and how they could."""
    if _interpreting() and _kernels_interpreted():
        return interpreter_hint() or "it does not support this tensor's dtype (float32 and float64 only)"
    return (
        "CPU tensors run only in Triton's interpreter, switched on by TRITON_INTERPRET=1 before triton is first "
        "imported (for tests: slow)"
    )


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _kernels_interpreted() -> bool:
    """Whether the kernels were defined for Triton's interpreter (TRITON_INTERPRET=1 at import)."""
    return triton is not None and not isinstance(_fwd_kernel, triton.runtime.JITFunction)


if triton is not None:
    from augnet.ops._triton_kernels import _bwd_kernel, _fwd_kernel


def _require_triton() -> None:
    hint = unavailable_hint()
    if hint is not None:
        raise RuntimeError(f"augnet tap_mix triton backend: {hint}")


def gpu_block_p(hw: int, block_c: int, dtype: torch.dtype, backward: bool = False, color: bool = False) -> int:
    """Pixels per program on a GPU: tiles of ``BLOCK_C x BLOCK_P`` of at most 2048 float32 or 1024 float64
    values in the forward kernel, half that (and at most 128 pixels) in the backward one, whose live values
    per pixel are about twice as many, and in a forward with a colour map of 33 to 64 channels; never more
    pixels than the image has, never under 16.

    With these (and the backward kernel's ``maxnreg``), neither kernel spills a register in any specialisation
    of :mod:`augnet.bench.gpu_compile`'s matrix, for sm_80 and sm_90; chosen by compiling (the backward's
    full tiles spilled 4 to 24 bytes in 12 of them, and ran fewer warps per SM; with Triton 3.9 the colour
    forward's full float32 tiles of 64 channels spilled 8 bytes on sm_90), not tuned on a GPU.
    """
    tile = (2048 if dtype == torch.float32 else 1024) // (2 if backward or (color and block_c >= 64) else 1)
    cap = 128 if backward else 256
    return max(16, min(max(16, min(cap, tile // block_c)), triton.next_power_of_2(hw)))


def _block_p(hw: int, block_c: int, dtype: torch.dtype, backward: bool, color: bool) -> int:
    """Pixels per program: :func:`gpu_block_p`, or in the interpreter whole images (fewer programs)."""
    if _interpreting():
        return max(16, min(1024, triton.next_power_of_2(hw)))
    return gpu_block_p(hw, block_c, dtype, backward, color)


def _device_ctx(x: Tensor):
    return torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext()


def _config(ch: int, hw: int, dtype: torch.dtype, block_p, backward: bool, color: bool = False) -> tuple[int, int, int]:
    """``(BLOCK_C, BLOCK_P, programs per row)`` for ``ch`` channels of ``hw`` pixels; ``block_p`` overrides
    the launcher's choice (``"gpu"``: what it picks on a GPU, also in the interpreter)."""
    block_c = triton.next_power_of_2(max(ch, 1))
    if block_p == "gpu":
        bp = gpu_block_p(hw, block_c, dtype, backward, color)
    else:
        bp = block_p if block_p is not None else _block_p(hw, block_c, dtype, backward, color)
    return block_c, bp, triton.cdiv(hw, bp)


def _layout(
    x_shape, n: int, dtype: torch.dtype, block_p, backward: bool = False, color: bool = False
) -> tuple[dict, int]:
    """The integer arguments and block sizes of a launch over ``n`` rows, and its number of programs.

    Programs are ordered so that the C copies of one source row's pixel block are neighbours (see the
    kernels): ``COPIES = N / B`` when the rows are a whole number of copies of the batch, else 1 (then
    the order is row by row, as for any ``src``; the result never depends on the order).
    """
    b, ch, h, w = x_shape
    block_c, bp, npb = _config(ch, h * w, dtype, block_p, backward, color)
    copies = n // b if b > 0 and n % b == 0 else 1
    ints = dict(B=b, CH=ch, H=h, W=w, NPB=npb, ROWS=n // copies, COPIES=copies)
    return {**ints, "BLOCK_C": block_c, "BLOCK_P": bp}, n * npb


def forward_launch(x, src, affine, color, weight, out, flag_t, padding, block_p=None):
    """``(grid, positional arguments, constexpr keywords)`` of the forward kernel for these tensors."""
    lay, programs = _layout(x.shape, src.shape[0], x.dtype, block_p, color=color is not None)
    args = (
        x,
        src,
        affine,
        color if color is not None else weight,  # a placeholder pointer, never read without colour
        weight,
        out,
        flag_t,
        *(lay[a] for a in ("B", "CH", "H", "W")),
        src.shape[1],
        *(lay[a] for a in ("NPB", "ROWS", "COPIES")),
    )
    consts = dict(
        PADDING=_PADDING_CODE[padding], HAS_COLOR=color is not None, BLOCK_C=lay["BLOCK_C"], BLOCK_P=lay["BLOCK_P"],
        **FP_FUSION,
    )
    return (programs,), args, consts


def backward_launch(grad_out, x, src, affine, color, weight, grads, padding, need_x, block_p=None):
    """``(grid, positional arguments, constexpr keywords)`` of the backward kernel; ``grads`` are
    ``(grad_x or None, grad_affine, grad_color or None, grad_weight)`` partial-sum buffers."""
    grad_x, grad_affine, grad_color, grad_weight = grads
    lay, programs = _layout(x.shape, src.shape[0], x.dtype, block_p, backward=True)
    args = (
        grad_out,
        x,
        src,
        affine,
        color if color is not None else weight,
        weight,
        grad_x if grad_x is not None else x,  # placeholder, never written when NEED_X is False
        grad_affine,
        grad_color if grad_color is not None else grad_weight,
        grad_weight,
        *(lay[a] for a in ("B", "CH", "H", "W")),
        src.shape[1],
        *(lay[a] for a in ("NPB", "ROWS", "COPIES")),
    )
    consts = dict(
        PADDING=_PADDING_CODE[padding],
        HAS_COLOR=color is not None,
        NEED_X=need_x,
        BLOCK_C=lay["BLOCK_C"],
        BLOCK_P=lay["BLOCK_P"],
        # The whole register file may be used: without this ptxas trades a few bytes of spill for occupancy
        # in some specialisations (gpu_block_p's smaller backward tiles keep the registers moderate anyway).
        maxnreg=255,
        **FP_FUSION,
    )
    return (programs,), args, consts


def _forward(x, src, affine, color, weight, padding, block_p):
    n, ch, h, w = src.shape[0], *x.shape[1:]
    out = x.new_empty((n, ch, h, w))
    if out.numel() == 0:
        return out.zero_()
    grid, args, consts = forward_launch(x, src, affine, color, weight, out, flag(x.device), padding, block_p)
    with _device_ctx(x):
        _fwd_kernel[grid](*args, **consts)
    return out


def _backward(grad_out, x, src, affine, color, weight, padding, need_x, block_p):
    ch = x.shape[1]
    n, k = src.shape
    grad_x = torch.zeros_like(x, memory_format=torch.contiguous_format) if need_x else None
    if grad_out.numel() == 0:
        grad_color = torch.zeros_like(color) if color is not None else None
        return grad_x, torch.zeros_like(affine), grad_color, torch.zeros_like(weight)
    npb = _config(ch, x.shape[2] * x.shape[3], x.dtype, block_p, backward=True)[2]
    grad_affine = x.new_empty((n, npb, k, 2, 3))
    grad_weight = x.new_empty((n, npb, k))
    grad_color = x.new_empty((n, npb, k, ch, ch + 1)) if color is not None else None
    grads = (grad_x, grad_affine, grad_color, grad_weight)
    grid, args, consts = backward_launch(grad_out, x, src, affine, color, weight, grads, padding, need_x, block_p)
    with _device_ctx(x):
        _bwd_kernel[grid](*args, **consts)
    grad_color = grad_color.sum(1) if grad_color is not None else None
    return grad_x, grad_affine.sum(1), grad_color, grad_weight.sum(1)


class _TapMix(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, src, affine, color, weight, padding, block_p):
        ctx.save_for_backward(x, src, affine, color, weight)
        ctx.padding = padding
        ctx.block_p = block_p
        return _forward(x, src, affine, color, weight, padding, block_p)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        x, src, affine, color, weight = ctx.saved_tensors
        need = ctx.needs_input_grad
        grad_x, grad_affine, grad_color, grad_weight = _backward(
            grad_out.contiguous(), x, src, affine, color, weight, ctx.padding, need[0], ctx.block_p
        )
        return (
            grad_x,
            None,
            grad_affine if need[2] else None,
            grad_color if need[3] else None,
            grad_weight if need[4] else None,
            None,
            None,
        )


def tap_mix_triton(
    x: Tensor,
    src: Tensor,
    affine: Tensor,
    color: Tensor | None,
    weight: Tensor,
    padding: str = "zeros",
    *,
    block_p: int | str | None = None,
) -> Tensor:
    """``tap_mix`` with the fused Triton kernels (same arguments and result as ``tap_mix_reference``).

    Differentiable once with respect to ``x``, ``affine``, ``color`` and
    ``weight`` (the backward pass is itself not differentiable). The gradient
    of ``x`` is accumulated with atomic adds and so is not bitwise
    deterministic on a GPU; the other gradients are. Inputs are made contiguous
    here; they must be float32 or float64 tensors of one dtype on one device,
    ``src`` int64. ``block_p`` (pixels per program, a power of two >= 16, or
    ``"gpu"`` for what the launcher picks on a GPU, in each kernel) overrides the
    launch heuristic, for tests.
    """
    _require_triton()
    if x.dtype not in _DTYPES:
        raise TypeError(f"tap_mix triton backend: x must be float32 or float64, got {x.dtype}")
    if not supports(x):
        raise RuntimeError(
            f"tap_mix triton backend: runs on CUDA tensors, or on CPU ones with TRITON_INTERPRET=1 set before "
            f"augnet is imported; got a {x.device} tensor"
        )
    for name, t in (("affine", affine), ("color", color), ("weight", weight)):
        if t is not None and t.dtype != x.dtype:
            raise TypeError(f"tap_mix triton backend: {name} must have the dtype of x ({x.dtype}), got {t.dtype}")
    if src.dtype != torch.int64:
        raise TypeError(f"tap_mix triton backend: src must be int64, got {src.dtype}")
    if padding not in _PADDING_CODE:
        raise ValueError(f"tap_mix: padding must be one of {tuple(_PADDING_CODE)}, got {padding!r}")
    if block_p is not None and block_p != "gpu" and (
        not isinstance(block_p, int) or block_p < 16 or block_p & (block_p - 1)
    ):
        raise ValueError(f"block_p must be a power of two >= 16 or 'gpu', got {block_p!r}")
    color = color.contiguous() if color is not None else None
    return _TapMix.apply(
        x.contiguous(), src.contiguous(), affine.contiguous(), color, weight.contiguous(), padding, block_p
    )
