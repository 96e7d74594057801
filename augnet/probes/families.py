"""One-parameter families ``g_t`` of augnet's continuous image transforms, for the Lie derivative.

Each continuous transform of :mod:`augnet.transforms.image` is a family of transformations indexed
by one real number ``t``, with ``g_0`` the identity: the family sets one of the transform's
per-row parameters (:meth:`~augnet.transforms.base.Transform.sample`) to a function of ``t``.
``t`` is in natural units, so that a derivative per unit of ``t`` reads plainly:

=================  =========  ==========================  ======================
transform          parameter  value at ``t``              unit of ``t``
=================  =========  ==========================  ======================
TranslateX / Y     shift      ``t / W`` (or ``t / H``)    pixel (of the input)
Rotate             angle      ``t``                       radian
ShearX / Y         shear      ``t``                       shear coefficient
Scale              zoom       ``exp(t)``                  log zoom
Brightness         shift      ``t``                       brightness shift
Contrast           factor     ``1 + t``                   contrast factor - 1
Saturation         factor     ``1 + t``                   saturation factor - 1
Hue                angle      ``t``                       radian
=================  =========  ==========================  ======================

The flips and the gated colour maps (applied with a probability), and the AutoAugment maps
(Solarize, Posterize, Equalize, Sharpness) have no such family: they have no Lie derivative.
:data:`RANK_PARAMS` names, for every image transform, the per-row parameter the ranking probe of
Yan & Huang can order copies by (the family's, or the flips' gate).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from augnet._checks import is_int, is_real, number

__all__ = ["RANK_PARAMS", "Family", "family", "grid_params", "grid_values", "rank_param"]


@dataclass(frozen=True)
class Family:
    """The one-parameter family ``g_t`` of a transform.

    Attributes:
        param: the per-row parameter that ``t`` sets.
        unit: the unit of ``t``.
        value: ``value(t, like, size)`` -> the parameter's value for the (N,) ``t``, shaped as
            ``like`` (the parameter drawn by the transform), for inputs of spatial size ``size``
            (H, W).
        geometric: a warp of the sampling grid (acting on feature maps too), not a colour map.
    """

    param: str
    unit: str
    value: Callable[[Tensor, Tensor, tuple[int, int]], Tensor]
    geometric: bool


def _same(t: Tensor, like: Tensor, size) -> Tensor:
    return t.to(like.dtype).reshape(len(t), *([1] * (like.dim() - 1))).expand_as(like)


def _one_plus(t: Tensor, like: Tensor, size) -> Tensor:
    return 1.0 + _same(t, like, size)


def _exp(t: Tensor, like: Tensor, size) -> Tensor:
    return torch.exp(_same(t, like, size))


def _per_width(t: Tensor, like: Tensor, size) -> Tensor:
    return _same(t, like, size) / size[-1]


def _per_height(t: Tensor, like: Tensor, size) -> Tensor:
    return _same(t, like, size) / size[-2]


def _families() -> dict[str, Family]:
    return {
        "TranslateX": Family("shift", "px", _per_width, True),
        "TranslateY": Family("shift", "px", _per_height, True),
        "Rotate": Family("angle", "rad", _same, True),
        "ShearX": Family("shear", "shear", _same, True),
        "ShearY": Family("shear", "shear", _same, True),
        "Scale": Family("zoom", "log zoom", _exp, True),
        "Brightness": Family("shift", "shift", _same, False),
        "Contrast": Family("factor", "factor - 1", _one_plus, False),
        "Saturation": Family("factor", "factor - 1", _one_plus, False),
        "Hue": Family("angle", "rad", _same, False),
    }


#: The per-row parameter each image transform's copies can be ranked by (Yan & Huang).
RANK_PARAMS = {
    **{name: f.param for name, f in _families().items()},
    "HorizontalFlip": "gate",
    "VerticalFlip": "gate",
    "Invert": "gate",
    "Gray": "gate",
    "AutoContrast": "gate",
}


def _lookup(transform, table: dict):
    """The entry of the first class of ``transform``'s MRO that is an augnet image transform in ``table``."""
    for cls in type(transform).__mro__:
        if cls.__module__.startswith("augnet.transforms") and cls.__name__ in table:
            return table[cls.__name__]
    return None


def family(transform) -> Family | None:
    """The one-parameter family of an augnet image transform, or ``None`` (a discrete transform).

    Examples:
        >>> from augnet.transforms import image as T
        >>> family(T.Rotate()).param, family(T.TranslateY()).unit, family(T.HorizontalFlip())
        ('angle', 'px', None)
    """
    return _lookup(transform, _families())


def rank_param(transform) -> str | None:
    """The per-row parameter the ranking probe orders ``transform``'s copies by, or ``None``."""
    return _lookup(transform, RANK_PARAMS)


def continuous_names() -> list[str]:
    """The names of the transforms with a family, for messages."""
    return sorted(_families())


#: Each family's reach in its natural units at magnitude 1: ``t`` spans ``[-m * reach, m * reach]`` at magnitude ``m``
#: (each transform draws its parameter as the family's value at ``m * reach * u``, ``u`` uniform in [-1, 1]).
_REACH = {
    "TranslateX": lambda t, size: t.max_shift * size[-1],
    "TranslateY": lambda t, size: t.max_shift * size[-2],
    "Rotate": lambda t, size: t.max_angle,
    "ShearX": lambda t, size: t.max_shear,
    "ShearY": lambda t, size: t.max_shear,
    "Scale": lambda t, size: math.log(t.max_zoom),
    "Brightness": lambda t, size: t.max_shift,
    "Contrast": lambda t, size: t.max_delta,
    "Saturation": lambda t, size: t.max_delta,
    "Hue": lambda t, size: t.max_angle,
}


def grid_values(transform, magnitude: float, points: int, size: tuple[int, int]) -> list[float]:
    """The fixed grid of a transform at ``magnitude``, in its family's natural units, or its gate's values.

    A continuous family (:func:`family`) gets ``points`` evenly spaced values of ``t`` over its range at
    ``magnitude`` (``linspace(-1, 1, points) * magnitude * reach``; an odd ``points`` holds the
    identity, ``t = 0``); a transform applied with a probability (a flip, ``Invert``, ...) gets its
    gate's two values, 0 (not applied) and 1 (applied), whatever the magnitude.

    Raises:
        ValueError: ``transform`` has neither a family nor a gate, ``points`` < 2, or a magnitude that is not
            finite (a TypeError for one that is not a number, or a ``size`` that is not (H, W)).

    Examples:
        >>> from augnet.transforms import image as T
        >>> [round(math.degrees(v)) for v in grid_values(T.Rotate(), 0.5, 5, (8, 8))]
        [-90, -45, 0, 45, 90]
        >>> grid_values(T.HorizontalFlip(), 1.0, 9, (8, 8))
        [0.0, 1.0]
    """
    if not is_int(points) or points < 2:
        raise ValueError(f"grid_points must be an integer >= 2, got {points!r}")
    points = int(points)
    reach = _lookup(transform, _REACH)
    if reach is not None:
        magnitude = _finite("magnitude", magnitude)  # "a" failed in float() naming nothing; NaN gave a NaN grid
        try:
            span = float(reach(transform, size))
        except (TypeError, IndexError):  # an int or an empty size, read as size[-1]
            raise TypeError(f"size must be the inputs' spatial size (H, W), got {size!r}") from None
        top = magnitude * span
        return [top * (-1 + 2 * i / (points - 1)) for i in range(points)]
    if rank_param(transform) == "gate":
        return [0.0, 1.0]
    raise ValueError(
        f"{type(transform).__name__} has no grid of parameters (a continuous family or a gate): "
        f"transformations='grid' takes {sorted({*_REACH, *(k for k, v in RANK_PARAMS.items() if v == 'gate')})}"
    )


def _finite(name: str, value) -> float:
    """``value`` (a number, a 0-d tensor or array) as a finite float, else the error naming ``name``."""
    read = number(name, value)
    if not is_real(read):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}: {value!r:.60}")
    if not math.isfinite(read):
        raise ValueError(f"{name} must be a finite number, got {read!r}")
    return float(read)


def grid_params(transform, base: dict[str, Tensor], value: float, size: tuple[int, int]) -> dict[str, Tensor]:
    """``base``, a draw of ``transform``'s parameters, with every row at the grid ``value`` (:func:`grid_values`).

    The family's parameter becomes its value at ``t = value`` (a gate becomes ``value``); the other
    parameters of the draw (a rotation's aspect, a contrast's mean) are kept.

    Raises:
        TypeError, ValueError: ``value`` is not a finite number; ``transform`` has neither a family nor a gate,
            or ``base`` lacks its parameter.
    """
    value = _finite("value", value)
    params = dict(base)
    fam = family(transform)
    param = fam.param if fam is not None else "gate" if rank_param(transform) == "gate" else None
    if param is None:  # torch's KeyError of a missing 'gate' named neither the transform nor the argument
        raise ValueError(f"{type(transform).__name__} has no grid of parameters (a continuous family or a gate)")
    if not isinstance(base.get(param), Tensor):
        name = type(transform).__name__
        raise ValueError(f"base must hold {name}'s parameter {param!r} (a draw of its parameters), got {sorted(base)}")
    if fam is not None:
        like = base[fam.param]
        t = torch.full((like.shape[0],), float(value), dtype=like.dtype, device=like.device)
        params[fam.param] = fam.value(t, like, size)
    else:
        params["gate"] = torch.full_like(base["gate"], float(value))
    return params
