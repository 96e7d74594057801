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

import warnings
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

__all__ = [
    "RGB_OR_GREY",
    "ChannelCheckedChoice",
    "CheckSize",
    "Pipeline",
    "RandomSharpnessRange",
    "RandomSolarizeRange",
]


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


#: The ops of an export that take tensor images of 1 or 3 channels only (torchvision's colour kernels; with others
#: they raise a TypeError of their own, or ``RandomGrayscale`` a ValueError about ``num_output_channels``).
RGB_OR_GREY = (v2.ColorJitter, v2.RandomGrayscale, v2.RandomAutocontrast, RandomSharpnessRange)


def _tensor_images(inputs: tuple) -> list[torch.Tensor]:
    """The tensor images among ``inputs``, as torchvision's transforms find them: every ``tv_tensors.Image`` and
    ``Video``, and a plain tensor (the first one) only where no image type is there."""
    from torch.utils._pytree import tree_flatten
    from torchvision import tv_tensors

    flat = tree_flatten(inputs)[0]
    typed = (tv_tensors.Image, tv_tensors.Video)
    explicit = any(isinstance(v, (*typed, PIL.Image.Image)) for v in flat)
    found, plain_seen = [], False
    for v in flat:
        if isinstance(v, typed):
            found.append(v)
        elif isinstance(v, torch.Tensor) and not isinstance(v, tv_tensors.TVTensor) and not explicit and not plain_seen:
            plain_seen = True
            found.append(v)
    return found


def _channels_of(inputs: tuple) -> list[tuple[int, tuple[int, ...]]]:
    """``(channels, shape)`` of each tensor image among ``inputs`` (see ``_tensor_images``)."""
    return [(1 if v.dim() < 3 else int(v.shape[-3]), tuple(v.shape)) for v in _tensor_images(inputs)]


class Pipeline(v2.Compose):
    """The ``v2.Compose`` that :func:`augnet.export.to_torchvision` returns: it runs its stages as ``v2.Compose``
    does, and warns (once per pipeline) when called on a batch of images.

    torchvision draws one choice and one set of parameters per call: on a batch tensor :math:`(B, Ch, H, W)`
    (a plain tensor or a ``tv_tensors.Image``, ``B > 1``; a ``tv_tensors.Video`` is one video), every sample
    gets the same augmentation, where the policy was learned with one draw per sample (a pipeline that draws
    nothing, every layer the identity, does not warn). The call's result is torchvision's, unchanged.

    Warns:
        UserWarning: at its first call on such a batch, pointing to per-image use (a ``Dataset``'s transform) or
            to :func:`~augnet.export.to_kornia` (per-sample draws on batches).
    """

    def __init__(self, transforms) -> None:
        super().__init__(transforms)
        # Until its first warning, where it draws anything (a pipeline of identities gives every sample the same)
        ops = [op for stage in transforms for op in getattr(stage, "transforms", ())]
        self.warns_on_batch = any(not isinstance(op, v2.Identity) for op in ops)

    def forward(self, *inputs: Any) -> Any:
        if getattr(self, "warns_on_batch", False):
            from torchvision import tv_tensors

            images = [v for v in _tensor_images(inputs) if not isinstance(v, tv_tensors.Video)]  # a video: one draw
            batches = [tuple(v.shape) for v in images if v.dim() >= 4 and v.shape[:-3].numel() > 1]
            if batches:
                self.warns_on_batch = False
                warnings.warn(
                    f"augnet.export: this torchvision pipeline was called on a batch of images (shape {batches[0]}): "
                    "torchvision draws one transform and one set of parameters per call, so every sample of the "
                    "batch gets the same augmentation (the policy draws per sample). Apply it per image, as a "
                    "Dataset's transform, or export the policy with to_kornia() for batches. (Warned once per "
                    "pipeline.)",
                    UserWarning,
                    stacklevel=4,  # the call of the pipeline (through nn.Module.__call__)
                )
        return super().forward(*inputs)


class ChannelCheckedChoice(v2.RandomChoice):
    """``v2.RandomChoice`` of a layer holding colour ops that take images of 1 or 3 channels (:data:`RGB_OR_GREY`):
    each call first checks the tensor images' channels, whichever op it then draws (draws as ``RandomChoice``).

    Args:
        transforms, p: as ``v2.RandomChoice``'s.
        layer: the index of the policy layer (for the message).
        needs: the names of the augnet transforms of those ops.

    Raises:
        ValueError: at a call, a tensor image whose channels are neither 1 nor 3 (torchvision's colour op raised
            its own error when drawn, at random; PIL images are left to PIL).
    """

    def __init__(self, transforms, p, layer: int, needs) -> None:
        super().__init__(transforms, p)
        self.layer, self.needs = int(layer), tuple(needs)

    def forward(self, *inputs: Any) -> Any:
        for channels, shape in _channels_of(inputs):
            if channels not in (1, 3):
                raise ValueError(
                    f"augnet.export: layer {self.layer} of this torchvision pipeline holds {', '.join(self.needs)}, "
                    f"exported to torchvision colour ops that take images of 1 or 3 channels; got an image of "
                    f"{channels} channels (shape {shape}). Drop {', '.join(self.needs)} from the policy for such "
                    "images (an entries-only policy without them) or give 1- or 3-channel images"
                )
        return super().forward(*inputs)
