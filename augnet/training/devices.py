"""Where training runs: devices, mixed-precision types and per-rank generators."""

from __future__ import annotations

import torch

__all__ = ["amp_dtype", "rank_generator", "resolve_device", "training_device"]


def resolve_device(device: torch.device | str | None) -> torch.device:
    """``device`` as a :class:`torch.device` (default the CPU); a ValueError if it is a GPU this machine lacks.

    Examples:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    try:
        device = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"not a device: {device!r} ({err})") from err
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device} was asked for, but CUDA is not available on this machine")
    return device


def training_device(model: torch.nn.Module, device) -> torch.device:
    """``device`` (the model is moved there), else the device of the model's parameters, else the CPU."""
    if device is not None:
        device = resolve_device(device)
        model.to(device)
        return device
    first = next(iter(model.parameters()), None)
    return first.device if first is not None else torch.device("cpu")


def amp_dtype(amp, device: torch.device) -> torch.dtype | None:
    if amp is False or amp is None:
        return None
    if amp is True:
        return torch.float16 if device.type == "cuda" else torch.bfloat16
    if amp not in (torch.float16, torch.bfloat16):
        raise ValueError(f"amp must be True, False, torch.float16 or torch.bfloat16, got {amp!r}")
    return amp


def rank_generator(seed: int, device: torch.device | str | None = None) -> torch.Generator:
    """A generator for one process of a distributed run, seeded with ``seed + rank``.

    Under :class:`~torch.nn.parallel.DistributedDataParallel` every rank holds
    the same augmentation parameters (DDP averages their gradients) but should
    draw *different* augmentations, as one process would for different
    samples: seed each rank's generator with ``seed + rank``. Outside a
    distributed run (or before ``init_process_group``) the rank is 0.

    Args:
        seed: the run's seed, the same on every rank.
        device: where the augmentations are drawn (the inputs' device).

    Examples:
        >>> rank_generator(7).initial_seed()
        7
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    dist = torch.distributed
    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    return torch.Generator(device=device if device is not None else "cpu").manual_seed(seed + rank)
