"""Small constant tensors made on their device, without a copy from the host.

``torch.tensor(python_data, device=device)`` is a blocking host-to-device copy:
on a GPU, every call stops the host until the device has caught up. The
augmentation code runs every training step, so its constants (grey weights,
filter kernels, index lists) are made on the device instead.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["device_constant"]


def device_constant(values, dtype: torch.dtype, device: torch.device) -> Tensor:
    """A small constant tensor of Python numbers, made on ``device`` without a copy from the host.

    ``torch.tensor(values, device=device)`` copies from host memory, a copy that
    stops the host until the device has caught up (on every call, on a GPU). This
    fills a tensor made on the device instead: the most common value first, then
    each other entry (a few tiny kernels, nothing to wait for).

    Args:
        values: a number, or nested sequences of numbers (a rectangular array).
        dtype, device: of the result.

    Examples:
        >>> device_constant(((1.0, 2.0), (2.0, 2.0)), torch.float64, torch.device("cpu"))
        tensor([[1., 2.],
                [2., 2.]], dtype=torch.float64)
    """
    shape: list[int] = []
    level = values
    while isinstance(level, (tuple, list)):
        shape.append(len(level))
        level = level[0] if level else 0.0
    flat: list = []
    stack = [values]
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(reversed(v))
        else:
            flat.append(v)
    base = max(set(flat), key=flat.count) if flat else 0
    out = torch.full((len(flat),), base, dtype=dtype, device=device)
    for i, v in enumerate(flat):
        if v != base:
            out[i].fill_(v)
    return out.view(shape)
