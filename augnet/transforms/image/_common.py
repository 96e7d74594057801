"""Shared pieces of the image transforms: the base classes and the tap builders.

``_ImageTransform`` (4-D image input, padding mode) and ``_RGBTransform``
(three channels), the builders of the one-tap affine warps and colour maps
(``_aspect``, ``_one_tap``, ``_affine``, ``_color``), and the grey level
(``LUMA``, ``_gray``) that several colour transforms read, and the warning of a transform that assumes images in
[0, 1] given other values (``UNIT_SLACK``, ``_ImageTransform._check_unit_range``).
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from augnet.ops.constants import device_constant
from augnet.ops.dispatch import PADDING_MODES, host_readable
from augnet.ops.taps import Taps
from augnet.transforms._replay_checks import check_aspect
from augnet.transforms.base import Transform, param_dtype

#: ITU-R BT.601 luma weights, used for grey levels (contrast, saturation).
LUMA = (0.299, 0.587, 0.114)

#: How far outside [0, 1] an input may reach before a transform that assumes images in [0, 1] warns: the rounding
#: of a warp or a colour map of such images (AutoContrast's 1.0000001) stays well within it.
UNIT_SLACK = 1e-3


def _aspect(x: Tensor, n: int) -> Tensor:
    """H / W of the images, as a per-row parameter (it enters rigid warps)."""
    return torch.full((n,), x.shape[-2] / x.shape[-1], dtype=param_dtype(x), device=x.device)


def _one_tap(affine: Tensor | None = None, color: Tensor | None = None, like: Tensor | None = None) -> Taps:
    ref = affine if affine is not None else color if color is not None else like
    weight = torch.ones(ref.shape[0], 1, dtype=ref.dtype, device=ref.device)
    return Taps(weight, None if affine is None else affine[:, None], None if color is None else color[:, None])


def _affine(a: Tensor, b: Tensor, c: Tensor, d: Tensor, tx: Tensor | None = None, ty: Tensor | None = None) -> Tensor:
    """Stack per-row entries into (N, 2, 3) matrices [[a, b, tx], [c, d, ty]]."""
    zero = torch.zeros_like(a)
    tx = zero if tx is None else tx
    ty = zero if ty is None else ty
    return torch.stack([torch.stack([a, b, tx], -1), torch.stack([c, d, ty], -1)], -2)


def _color(m: Tensor, bias: Tensor) -> Tensor:
    """(N, Ch, Ch) matrices and (N, Ch) biases -> (N, Ch, Ch + 1) colour maps."""
    return torch.cat([m, bias[..., None]], -1)


def _gray(x: Tensor) -> Tensor:
    """Grey level (B, H, W): luma for RGB, the channel mean otherwise."""
    if x.shape[1] == 3:
        w = device_constant(LUMA, x.dtype, x.device)
        return torch.einsum("c,bchw->bhw", w, x)
    return x.mean(1)


class _ImageTransform(Transform):
    input_ndim = 4

    def __init__(self, padding: str = "zeros") -> None:
        super().__init__()
        if padding not in PADDING_MODES:
            raise ValueError(f"padding must be one of {PADDING_MODES}, got {padding!r}")
        self.padding = padding

    def apply_transform(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        if isinstance(params, dict):  # a rigid warp's aspect (H / W) must be x's (on the CPU: see check_aspect)
            check_aspect(type(self).__name__, x, params)
        return super().apply_transform(x, params)

    def extra_repr(self) -> str:
        return "" if self.padding == "zeros" else f"padding={self.padding!r}"

    def _check_unit_range(self, x: Tensor, assumption: str) -> None:
        """Warn (``UserWarning``, once per transform) when ``x`` reaches outside [0, 1] by more than ``UNIT_SLACK``.

        For the transforms whose operation is defined on images in [0, 1] only (``Invert``'s ``1 - x``,
        ``Solarize``, ``Posterize``, ``Equalize``): on a feature map inside a model or on normalised images their
        result means nothing. Read on the CPU only (:func:`~augnet.ops.dispatch.host_readable`: elsewhere a read
        would wait for the device); the values and the random draws are not touched.
        """
        if getattr(self, "_range_warned", False) or x.numel() == 0 or not host_readable(x):
            return
        low, high = float(x.detach().amin()), float(x.detach().amax())
        if not (low < -UNIT_SLACK or high > 1.0 + UNIT_SLACK):  # in range (a NaN compares False: not warned)
            return
        self._range_warned = True
        warnings.warn(
            f"{type(self).__name__} assumes images with values in [0, 1] ({assumption}), got values in "
            f"[{low:.4g}, {high:.4g}] on {x.shape[1]} channels: on a feature map inside a model or on normalised "
            "images its result means nothing. Give it images in [0, 1] (normalise inside the trunk), or use "
            "transforms without a range (the warps, flips, Brightness, Contrast, Sharpness) on feature maps. "
            "Warned once per transform.",
            UserWarning,
            stacklevel=3,
        )


class _RGBTransform(_ImageTransform):
    """Colour transforms defined for three-channel (RGB) images only."""

    def check_input(self, x: Tensor) -> None:
        super().check_input(x)
        if x.shape[1] != 3:
            raise ValueError(f"{type(self).__name__}: needs RGB images with 3 channels, got {x.shape[1]}")
