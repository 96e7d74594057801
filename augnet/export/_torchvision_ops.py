"""Small ``torchvision.transforms.v2`` transforms used by :func:`augnet.export.to_torchvision`.

torchvision's ``RandomSolarize`` and ``RandomAdjustSharpness`` take one fixed
parameter; an augnet policy draws it per sample from a range. These
transforms draw it (from torch's global generator, as torchvision's own
transforms do) and call torchvision's functional op, so the operation is
torchvision's and only the draw is augnet's. They live in a module of their
own, importable only with torchvision installed, and at module level so that
pipelines pickle (``DataLoader`` workers started by spawn pickle the dataset).
"""

from __future__ import annotations

from typing import Any

import PIL.Image
import torch
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from augnet._checks import real

__all__ = ["CheckSize", "RandomSharpnessRange", "RandomSolarizeRange"]


def _uniform(low: float, high: float) -> float:
    return float(torch.empty(()).uniform_(low, high))


#: The largest float32 (a draw is made in float32, as torchvision's own transforms draw).
_FLOAT32_MAX = torch.finfo(torch.float32).max


def _bounds(low, high, top: float, what: str) -> tuple[float, float]:
    """``(low, high)`` as floats if they are real numbers with ``0 <= low <= high <= top``, else the TypeError or
    ValueError naming them."""
    low, high = real("low", low), real("high", high)
    if not 0.0 <= low <= high <= top:
        raise ValueError(f"need {what}, got low={low!r}, high={high!r}")
    return float(low), float(high)


def _value_bound(inpt: Any) -> float:
    """The largest value of the input's range, as torchvision's kernels take it: 1 for floating-point and bool
    tensors, the dtype's largest value for integer tensors (255 for uint8, 65535 for uint16), 255 for PIL images."""
    if isinstance(inpt, torch.Tensor):
        if inpt.is_floating_point() or inpt.dtype == torch.bool:
            return 1.0
        return float(torch.iinfo(inpt.dtype).max)
    return 255.0


class RandomSolarizeRange(v2.Transform):
    """Solarize with a threshold drawn uniformly in ``[low, high]`` (fractions of the value range) per call.

    Args:
        low, high: the threshold's range, in [0, 1] (scaled by the largest value of integer images: 255 for
            uint8 and PIL images, 65535 for uint16).

    Raises:
        TypeError: ``low`` or ``high`` is not a real number (a 0-d tensor or array holding one is).
        ValueError: not ``0 <= low <= high <= 1``.
    """

    def __init__(self, low: float, high: float) -> None:
        super().__init__()
        self.low, self.high = _bounds(low, high, 1.0, "0 <= low <= high <= 1")

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return {"threshold": _uniform(self.low, self.high)}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return self._call_kernel(F.solarize, inpt, threshold=params["threshold"] * _value_bound(inpt))

    def extra_repr(self) -> str:
        return f"low={self.low:.4g}, high={self.high:.4g}"


class RandomSharpnessRange(v2.Transform):
    """Adjust sharpness by a factor drawn uniformly in ``[low, high]`` per call (``F.adjust_sharpness``).

    Raises:
        TypeError: ``low`` or ``high`` is not a real number (a 0-d tensor or array holding one is).
        ValueError: not ``0 <= low <= high``, or ``high`` is infinite (or past the largest float32).
    """

    def __init__(self, low: float, high: float) -> None:
        super().__init__()
        self.low, self.high = _bounds(low, high, _FLOAT32_MAX, "0 <= low <= high < inf")

    def make_params(self, flat_inputs: list[Any]) -> dict[str, Any]:
        return {"factor": _uniform(self.low, self.high)}

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        return self._call_kernel(F.adjust_sharpness, inpt, sharpness_factor=params["factor"])

    def extra_repr(self) -> str:
        return f"low={self.low:.4g}, high={self.high:.4g}"


class CheckSize(v2.Transform):
    """Pass images through unchanged, raising a ValueError for images whose (H, W) is not ``size``."""

    def __init__(self, size: tuple[int, int]) -> None:
        super().__init__()
        self.size = tuple(size)

    def transform(self, inpt: Any, params: dict[str, Any]) -> Any:
        if isinstance(inpt, (torch.Tensor, PIL.Image.Image)):
            got = tuple(F.get_size(inpt))
            if got != self.size:
                raise ValueError(f"this augnet policy was exported for images of size {self.size}, got {got}")
        return inpt

    def extra_repr(self) -> str:
        return f"size={self.size}"
