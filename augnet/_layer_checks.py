"""Checks of :class:`augnet.AugmentationLayer`'s arguments: its generator, finite values and softmax temperature.

Kept apart from :mod:`augnet.layers` for room; ``layers`` imports every name here (``check_generator`` is
still importable from there).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from augnet._checks import is_real, number
from augnet.ops import dispatch

__all__ = ["check_finite_cpu", "check_generator", "check_temperature"]


def check_generator(generator) -> None:
    """Raise a clear error for a generator that cannot be used here.

    torch.compile cannot trace ``torch.Generator`` arguments; compiled models
    draw from torch's global generator (seed it with ``torch.manual_seed``).
    """
    if generator is None:
        return
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if torch.compiler.is_compiling():
        raise TypeError(
            "torch.compile cannot trace a torch.Generator argument: call the compiled model with "
            "generator=None and seed torch's global generator (torch.manual_seed) instead"
        )


def check_finite_cpu(name: str, t: Tensor) -> None:
    """The ValueError of a tensor holding NaN or infinite values, on the host (no check on an accelerator)."""
    # A value check on an accelerator would synchronise with the host; skip it there.
    if dispatch.host_readable(t) and not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} contains NaN or infinite values: {t.detach().tolist()}")


def check_temperature(temperature) -> float:
    """A layer's softmax temperature as a float, or the error naming it: a number (a 0-d tensor or array: the
    number it holds), positive and finite, with ``1 / temperature`` finite in float32.

    The constructor and every later assignment (``layer.temperature = t``, a callback's annealing) run it: a
    negative temperature inverted the weights, and NaN, infinity or a string reached the softmax.
    """
    temperature = number("temperature", temperature)
    if not is_real(temperature):
        raise TypeError(f"temperature must be a number, got {type(temperature).__name__}: {temperature!r}")
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be positive and finite, got {temperature}")
    if 1.0 / temperature > torch.finfo(torch.float32).max:
        raise ValueError(f"temperature {temperature} is too small: logits / temperature overflows float32")
    return float(temperature)
