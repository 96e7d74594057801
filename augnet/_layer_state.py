"""An augmentation layer's extra state: its temperature, its last input size and which transforms it holds.

The state is one int64 tensor, ``[-2, temperature's float64 bits, digest, *last_size]``: integers, so a cast
of a state dict to another float dtype leaves it exact. ``digest`` is a checksum of the layer's transform
class names in order; a state saved from a layer of other transforms (of the same count, which the weights'
shapes cannot tell) is refused instead of giving one transform's learned weight and magnitude to another
(to load it anyway, leave out its ``_extra_state`` key and load with ``strict=False``: the layer keeps its
own temperature and size).
Older states load: ``[-1, bits, *size]`` (no digest), a float ``[temperature, *size]`` and ``[*size]``
(the layer's own temperature).
"""

from __future__ import annotations

import math
import zlib

import torch
from torch import Tensor

_CURRENT, _NO_DIGEST = -2, -1


def transforms_digest(transforms) -> int:
    """A checksum (0 to 2**32 - 1) of the transforms' class names, in order."""
    return zlib.crc32(",".join(type(t).__name__ for t in transforms).encode())


def encode(temperature: float, size: tuple[int, ...] | None, transforms) -> Tensor:
    """The layer's extra state (see the module docstring)."""
    bits = torch.tensor([temperature], dtype=torch.float64).view(torch.int64)
    head = torch.tensor([_CURRENT]), bits, torch.tensor([transforms_digest(transforms)])
    return torch.cat([*head, torch.tensor(size or (), dtype=torch.long)])


def without_digest(state):
    """``state`` in the form without a digest (``[-1, bits, *size]``); any other form unchanged."""
    ints = isinstance(state, Tensor) and state.dim() == 1 and not state.is_floating_point() and not state.is_complex()
    if ints and len(state) >= 3 and int(state[0]) == _CURRENT:
        return torch.cat([torch.full_like(state[:1], _NO_DIGEST), state[1:2], state[3:]])
    return state


def decode(state, temperature: float, transforms) -> tuple[float, tuple[int, ...] | None]:
    """``(temperature, size)`` from a saved state; ``temperature`` (the layer's) where the state has none.

    Raises:
        TypeError: ``state`` is not a 1-D real tensor (a bool one: ``[True, True]`` read as the size (1, 1)).
        ValueError: the saved temperature or size is not valid, the state was saved from other transforms, or it
            is on ``meta`` (no values to read; torch's RuntimeError before).
    """
    if not isinstance(state, Tensor) or state.dim() != 1 or state.is_complex() or state.dtype == torch.bool:
        raise TypeError(f"an AugmentationLayer's saved temperature and size must be 1-D ints, got {state!r}")
    if state.device.type == "meta":
        raise ValueError("an AugmentationLayer's saved temperature and size are on meta, which holds no values: "
                         "load a state saved from a layer with values")  # fmt: skip
    if state.is_floating_point():  # a float [temperature, *size], saved for a while before the int form
        temperature, values = (state.tolist() or [math.nan])[0], state[1:]
        # Whole positive sizes that int64 holds exactly; a -1 or -2 there is a bad size, not an int form's mark.
        whole = bool(((values == values.round()) & (values >= 1) & (values <= 2**53)).all())
        if not 0 < temperature < math.inf or not whole:
            raise ValueError(f"an AugmentationLayer's saved temperature and size are not valid: {state.tolist()}")
        values, kind = values.to(torch.int64), None
    else:
        values = state.to(torch.int64)
        kind = int(values[0]) if len(values) >= 2 else None
    if kind in (_CURRENT, _NO_DIGEST):  # [-2, temperature bits, digest, *size] or [-1, temperature bits, *size]
        temperature, values = float(values[1:2].view(torch.float64)), values[2:]
        if not 0 < temperature < math.inf:
            raise ValueError(f"an AugmentationLayer's saved temperature must be > 0, got {temperature!r}")
        if kind == _CURRENT:
            if not len(values) or int(values[0]) != transforms_digest(transforms):
                names = ", ".join(type(t).__name__ for t in transforms)
                raise ValueError(
                    f"the state was saved from an augmentation layer of other transforms than this one's ({names}; "
                    "a checksum of the saved layer's transform names, in order, differs): load it into a layer "
                    "built with the same transforms in the same order"
                )
            values = values[1:]
    size = tuple(int(s) for s in values.tolist())
    if any(s < 1 for s in size):
        raise ValueError(f"an AugmentationLayer's saved input size must be positive, got {list(size)}")
    return temperature, size or None
