"""Half precision, in one place: augmentation maths runs in float32 for float16 / bfloat16 inputs.

Coordinates, spectra, blends and sums lose too much in 16 bits, and autocast
would silently lower the matmuls of warps and colour maps. Every augmentation
path (layers, tap assembly, ``tap_mix``, Augerino's warps) therefore computes
in :func:`compute_dtype` with autocast off (:func:`full_precision`) and rounds
only its result to the input's dtype.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor

__all__ = ["LOW_PRECISION", "compute_dtype", "full_precision"]

#: Floating-point dtypes that are computed in float32.
LOW_PRECISION = (torch.float16, torch.bfloat16)


def compute_dtype(x: Tensor) -> torch.dtype:
    """The dtype augmentation maths uses for ``x``: float32 for float16 / bfloat16, else ``x.dtype``.

    Examples:
        >>> compute_dtype(torch.zeros(1, dtype=torch.bfloat16)), compute_dtype(torch.zeros(1, dtype=torch.float64))
        (torch.float32, torch.float64)
    """
    return torch.float32 if x.dtype in LOW_PRECISION else x.dtype


@contextlib.contextmanager
def full_precision(x: Tensor) -> Iterator[torch.dtype]:
    """Autocast off on ``x``'s device for the block; yields :func:`compute_dtype` of ``x``."""
    if x.device.type == "meta":  # shape inference: autocast has no meta device, and nothing to turn off
        yield compute_dtype(x)
        return
    with torch.autocast(device_type=x.device.type, enabled=False):
        yield compute_dtype(x)
