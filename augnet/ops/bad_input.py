"""What ``tap_mix`` does with bad values, on every device, without stopping the host.

Bad values: a warp (``affine``), colour map (``color``) or ``weight`` that is
NaN or infinite, or a ``src`` index outside ``[0, B)``. On the CPU,
:func:`~augnet.ops.tap_mix` refuses them with a ``ValueError`` before any
backend runs (reading them costs nothing there). On an accelerator the same
check would stop the host until the device has caught up, on every call; there
instead (and on the CPU where the values cannot be read: under
``torch.compile``, and taps batched by ``torch.func.vmap``):

- every backend (the Triton and CUDA kernels, and the reference backend through
  :func:`guard_reference`) returns NaN for each output row that has a bad tap,
  never reads outside ``x`` and never stops the device (no device-side assert:
  that would poison the CUDA context for the rest of the process); in the
  backward pass such a row contributes nothing (every gradient it would send is
  dropped), exactly as ``torch.where(bad_row, nan, tap_mix(good taps))``;
- the kernels record what was bad in a flag on the device (:func:`flag`, one
  ``int32`` per device, bits :data:`BITS`);
- :func:`check_bad_input` reads the flags (a synchronisation, so call it where
  you synchronise anyway), clears them and raises the ``ValueError`` the CPU
  would have raised. :func:`augnet.training.fit` calls it at every record step
  and at the end, :func:`augnet.training.accuracy` at the end. Under
  ``torch.compile`` and ``torch.func`` transforms :func:`guard_reference`
  flags nothing (the CPU's case there): the NaN rows are all that tells.
"""

from __future__ import annotations

import threading

import torch
from torch import Tensor

__all__ = ["BITS", "check_bad_input", "flag", "guard_reference", "tap_bits"]

#: The flag's bits and what each one means (the messages of the CPU's ValueError).
BITS = {
    1: "affine contains NaN or infinite values",
    2: "color contains NaN or infinite values",
    4: "weight contains NaN or infinite values",
    8: "src indices must lie in [0, B - 1]",
}

_flags: dict[torch.device, Tensor] = {}
_lock = threading.Lock()


def flag(device: torch.device) -> Tensor:
    """The bad-input flag of ``device``: a (1,) ``int32`` tensor there, 0 until a call sees bad values.

    Made on first use (a fill on the device, no copy from the host) and kept for
    the life of the process, so kernels can hold its address.
    """
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    found = _flags.get(device)
    if found is None:
        with _lock, torch.inference_mode(False), torch.no_grad():
            found = _flags.setdefault(device, torch.zeros(1, dtype=torch.int32, device=device))
    return found


def tap_bits(src: Tensor, affine: Tensor, color: Tensor | None, weight: Tensor, b: int) -> Tensor:
    """(N, K) ``int32``: for each tap, the :data:`BITS` of what is bad in it (0 for a good tap)."""
    bits = torch.where((src < 0) | (src >= b), 8, 0).to(torch.int32)
    bits = bits | torch.where(torch.isfinite(affine).flatten(2).all(2), 0, 1).to(torch.int32)
    bits = bits | torch.where(torch.isfinite(weight), 0, 4).to(torch.int32)
    if color is not None:
        bits = bits | torch.where(torch.isfinite(color).flatten(2).all(2), 0, 2).to(torch.int32)
    return bits


def guard_reference(
    x: Tensor, src: Tensor, affine: Tensor, color: Tensor | None, weight: Tensor
) -> tuple[Tensor, Tensor, Tensor | None, Tensor, Tensor]:
    """The contract above for a backend that does not check its inputs (the reference one), in torch ops.

    Returns ``(src, affine, color, weight, bad_row)``: the taps with each bad
    one replaced by a harmless tap (source 0, identity warp and colour map,
    weight 0; no gradient reaches the bad values), and the (N,) rows to set to
    NaN afterwards with ``torch.where`` (which drops their gradient). ORs what
    it found into :func:`flag`, except under ``torch.compile`` (the flag is a
    tensor outside the graph) and under a ``torch.func`` transform (``vmap``,
    ``grad``, ``jvp``...: an in-place write to a tensor outside the transform
    is an error there, and ``vmap``'s values are per sample): there the rows
    still come out NaN, but :func:`check_bad_input` has nothing to report. No
    synchronisation.
    """
    bits = tap_bits(src, affine, color, weight, x.shape[0])
    bad = bits != 0
    src = torch.where(bad, 0, src)
    eye = torch.eye(2, 3, dtype=affine.dtype, device=affine.device)
    affine = torch.where(bad[..., None, None], eye, affine)
    if color is not None:
        eye_color = torch.eye(*color.shape[2:], dtype=color.dtype, device=color.device)
        color = torch.where(bad[..., None, None], eye_color, color)
    weight = torch.where(bad, torch.zeros_like(weight), weight)
    if not torch.compiler.is_compiling() and not _in_func_transform():
        f = flag(x.device)
        f.bitwise_or_(_or_reduce(bits))
    return src, affine, color, weight, bad.any(1)


def _in_func_transform() -> bool:
    """Whether a ``torch.func`` transform is running (a metadata read; never called under ``torch.compile``)."""
    peek = getattr(torch._C._functorch, "peek_interpreter_stack", None)
    return peek is not None and peek() is not None


def _or_reduce(bits: Tensor) -> Tensor:
    """The bitwise OR of every entry of ``bits`` (values made of :data:`BITS`), as a (1,) tensor."""
    powers = 1 << torch.arange(len(BITS), dtype=torch.int32, device=bits.device)  # 1, 2, 4, 8
    present = ((bits.reshape(-1, 1) & powers) != 0).any(0)
    return (present.to(torch.int32) * powers).sum().reshape(1)


def check_bad_input(device: torch.device | str | int | None = None) -> None:
    """Raise the ``ValueError`` of bad ``tap_mix`` inputs seen on an accelerator since the last check.

    Reads (and clears) the flag of ``device``, or of every device that has one:
    a synchronisation with the device, so call it where you read values back
    anyway (logging a loss, the end of an epoch). A no-op where no call has
    flagged anything, and on the CPU (where the inputs were refused at once).

    A device without a flag (nothing there ever ran ``tap_mix``, such as
    ``"cuda"`` on a machine without CUDA) has nothing to report: a no-op.

    ``device`` is anything :class:`torch.device` reads: a device, a string
    (``"cuda:1"``) or a device index (``0``, a CUDA device as for torch).

    Raises:
        ValueError: naming what was bad, e.g. ``tap_mix: affine contains NaN or
            infinite values (seen on cuda:0 since the last check; those output
            rows were NaN)``; or ``device`` is a string that names no device
            or a negative index.
        TypeError: ``device`` is none of those nor ``None`` (a ``bool``, a float).
    """
    devices = list(_flags) if device is None else _flagged(_as_device(device))
    for dev in devices:
        f = _flags.get(dev)
        if f is None or dev.type in ("cpu", "meta"):  # meta has no values; the CPU refused bad input at once
            continue
        found = int(f.item())
        if found:
            f.zero_()
            raise_bad_input(found, dev)


def _flagged(device: torch.device) -> list[torch.device]:
    """The devices with a flag that ``device`` names: itself, or for ``"cuda"`` the current one (none on CPU/meta).

    Without a flag on a device of that kind, nothing ran there (``"cuda"`` on a machine without CUDA): no device
    is asked, so no driver is touched.
    """
    if device.type in ("cpu", "meta") or not any(d.type == device.type for d in _flags):
        return []
    if device.index is not None:
        return [device]
    if device.type == "cuda" and torch.cuda.is_available():
        return [torch.device("cuda", torch.cuda.current_device())]
    return [d for d in _flags if d.type == device.type]


def _as_device(device) -> torch.device:
    """``device`` as a ``torch.device`` (what ``torch.device`` reads: a string, an index), or the TypeError /
    ValueError naming it."""
    if isinstance(device, torch.device):
        return device
    if isinstance(device, bool):  # torch refuses it too, in a message of many lines
        raise TypeError(f"device must be a torch.device, a string, an index or None, got bool: {device!r}")
    try:
        return torch.device(device)
    except TypeError:
        raise TypeError(
            f"device must be a torch.device, a string, an index or None, got {type(device).__name__}: {device!r}"
        ) from None
    except (RuntimeError, ValueError) as err:  # a name no device has, a negative index, one past int64
        raise ValueError(f"device {device!r} is not a device: {str(err).splitlines()[0]}") from None


def raise_bad_input(found: int, device: torch.device) -> None:
    """Raise the ``ValueError`` for the flag value ``found`` read from ``device``."""
    what = "; ".join(message for bit, message in BITS.items() if found & bit)
    raise ValueError(f"tap_mix: {what} (seen on {device} since the last check; those output rows were NaN)")
