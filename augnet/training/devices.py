"""Where training runs: devices, mixed-precision types and per-rank generators."""

from __future__ import annotations

import torch

from augnet._checks import is_int, number

__all__ = ["amp_dtype", "check_not_partly_meta", "model_device", "rank_generator", "resolve_device", "training_device"]


def resolve_device(device: torch.device | str | None) -> torch.device:
    """``device`` as a :class:`torch.device` (default the CPU); a ValueError for a device nothing can run on here.

    Refused: ``meta`` (it holds no values: nothing can be trained or measured
    there), and any device this machine lacks (``cuda`` without CUDA or past
    its last GPU, ``mps``, ``xpu``, ``hip``..., or an index past the last
    device of that kind, such as ``xpu:1`` on a machine with one XPU).

    Examples:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    try:
        device = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"not a device: {device!r} ({str(err).strip().splitlines()[0]})") from None
    if device.type == "cpu":
        return device
    if device.type == "meta":
        raise ValueError(f"device {device} holds no values: nothing can be trained or measured on meta")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device} was asked for, but CUDA is not available on this machine")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(f"device {device} was asked for, but this machine has {torch.cuda.device_count()} GPU(s)")
        return device
    backend = getattr(torch, device.type, None) if device.type != "mps" else getattr(torch.backends, "mps", None)
    available = getattr(backend, "is_available", None)
    if device.type == "hip" or available is None or not available():
        hint = " (PyTorch names ROCm GPUs 'cuda')" if device.type == "hip" else ""
        raise ValueError(
            f"device {device} was asked for, but this machine has no {device.type} device (or PyTorch was built "
            f"without it){hint}"
        )
    count = getattr(getattr(torch, device.type, None), "device_count", None)  # torch.mps's too (not torch.backends')
    if device.index is not None and count is not None and device.index >= count():
        raise ValueError(f"device {device} was asked for, but this machine has {count()} {device.type} device(s)")
    return device


def training_device(model: torch.nn.Module, device) -> torch.device:
    """``device`` (the model is moved there), else the device of the model's parameters, else the CPU."""
    if device is not None:
        device = resolve_device(device)
        model.to(device)
        return device
    return model_device(model)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter (or buffer), else the CPU."""
    first = next(iter(model.parameters()), None)
    if first is None:
        first = next(iter(model.buffers()), None)
    return first.device if first is not None else torch.device("cpu")


def check_not_partly_meta(model: torch.nn.Module) -> None:
    """A ValueError naming the parameters and buffers on ``meta`` of a model that has others with values.

    Such a model (a part built on meta and never loaded, or moved there) cannot run: its first pass would fail
    deep in torch ("Tensor on device meta is not on the expected device cpu"). A model wholly on meta is a dry
    run, not refused here.
    """
    named = [*model.named_parameters(), *model.named_buffers()]
    meta = [name for name, t in named if t.device.type == "meta"]
    if meta and len(meta) < len(named):
        listed = ", ".join(meta[:5]) + ", ..." * (len(meta) > 5)
        raise ValueError(
            f"the model has {len(meta)} parameters or buffers on meta, which hold no values ({listed}), and the "
            "rest on a real device: load their weights (load_state_dict(..., assign=True)) or materialise them "
            "(to_empty(device=...) and initialise them) first"
        )


def amp_dtype(amp, device: torch.device) -> torch.dtype | None:
    if amp is False or amp is None:
        return None
    if amp is True:
        return torch.float16 if device.type == "cuda" else torch.bfloat16
    if not isinstance(amp, torch.dtype) or amp not in (torch.float16, torch.bfloat16):  # an array: no truth value
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
        seed: the run's seed, the same on every rank (an int; a 0-d integer tensor or array too).
        device: where the augmentations are drawn (the inputs' device).

    Raises:
        ValueError: ``seed`` is not a non-negative int, or ``seed + rank`` is past torch's largest seed (2**64 - 1).

    Examples:
        >>> rank_generator(7).initial_seed()
        7
    """
    read = number("seed", seed)  # a 0-d integer tensor or array: the int it holds
    if not is_int(read) or read < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    seed = int(read)  # a numpy integer too
    dist = torch.distributed
    rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
    if seed + rank >= 2**64:
        raise ValueError(f"seed {seed!r} + rank {rank} is past torch's largest seed, 2**64 - 1")
    return torch.Generator(device=device if device is not None else "cpu").manual_seed(seed + rank)
