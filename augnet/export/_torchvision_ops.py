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

try:  # the bound torchvision's own colour kernels take (solarize compares its threshold with it)
    from torchvision.transforms._functional_tensor import _max_value as _torchvision_max_value
except ImportError:  # pragma: no cover - a torchvision that moved it: its table (torchvision 0.29)
    _torchvision_max_value = None

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


#: torchvision's value bounds of the integer dtypes it has one for (``_max_value``); every other dtype's is 1.
_BOUNDS = {torch.uint8: 255, torch.int8: 127, torch.int16: 32767, torch.uint16: 65535, torch.int32: 2**31 - 1,
           torch.int64: 2**63 - 1}  # fmt: skip


def _table_max_value(dtype: torch.dtype) -> int:
    """torchvision's ``_max_value`` as a table (used where that private function cannot be imported)."""
    return _BOUNDS.get(dtype, 1)


def _value_bound(inpt: Any) -> float:
    """The largest value of the input's range, as torchvision's kernels take it (its ``_max_value``): 1 for
    floating-point and bool tensors, the dtype's largest value for the integer tensors it knows (255 for uint8,
    65535 for uint16, 2**31 - 1 for int32), 1 for the others (uint32, uint64: its solarize cannot invert them, and
    refuses them for their dtype), 255 for PIL images. The dtype's own largest value, 2**32 - 1 for uint32, made a
    threshold above torchvision's bound, refused as a threshold no user gave."""
    if isinstance(inpt, torch.Tensor):
        return float((_torchvision_max_value or _table_max_value)(inpt.dtype))
    return 255.0


class RandomSolarizeRange(v2.Transform):
    """Solarize with a threshold drawn uniformly in ``[low, high]`` (fractions of the value range) per call.

    Args:
        low, high: the threshold's range, in [0, 1] (scaled by the largest value of integer images as
            torchvision's kernels take it: 255 for uint8 and PIL images, 65535 for uint16; see ``_value_bound``).

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
