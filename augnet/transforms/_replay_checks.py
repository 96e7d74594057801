"""Checks of params applied to an input other than the one they were drawn on (``params=`` replays and
``apply_transform``), as a kornia or torchvision user reuses one draw on an image and its mask.

Params hold what the draw read off its input besides the random values: the channel count of a colour map
(``Brightness``'s ``(N, Ch)`` shift, ``Contrast``'s mean, ``AutoContrast``'s range) and the images' aspect
``H / W`` of a rigid warp (``Rotate``, ``ShearX``, ``ShearY``). Applied to images of another channel count, a
colour map broadcast its channels: params of an RGB image gave a single-channel mask three channels, and those
of a grey image gave an RGB image one; applied to images of another aspect, a rotation squashed the content
(a warp in normalised coordinates is rigid at the aspect it was built for only). Both are refused here.
"""

from __future__ import annotations

from torch import Tensor

from augnet.ops.dispatch import host_readable

__all__ = ["check_aspect", "check_color_channels"]

#: Relative tolerance of the aspect check: params drawn in float32 hold ``H / W`` to float32's rounding.
ASPECT_RTOL = 1e-6


def check_color_channels(name: str, x: Tensor, color: Tensor | None) -> None:
    """The ValueError of colour maps ``color`` (N, K, Ch, Ch + 1) made for another channel count than ``x``'s.

    Reads shapes only (no synchronisation on an accelerator).
    """
    if color is None or color.dim() < 2 or color.shape[-2] == x.shape[1]:
        return
    drawn = color.shape[-2]
    raise ValueError(
        f"{name}: params were drawn for images of {drawn} channel{'s' * (drawn != 1)}, but x has {x.shape[1]} "
        f"(shape {tuple(x.shape)}): draw them for x (draw_params(x, ...)), or apply them to images of {drawn} "
        "channels"
    )


def check_aspect(name: str, x: Tensor, params: dict[str, Tensor]) -> None:
    """The ValueError of a rigid warp's params whose ``aspect`` (H / W) is not ``x``'s.

    Read on the CPU only (see :func:`~augnet.ops.dispatch.host_readable`): elsewhere a value read would
    synchronise, and the params are applied as given.
    """
    aspect = params.get("aspect")
    if not isinstance(aspect, Tensor) or not aspect.numel() or not host_readable(aspect):
        return
    h, w = x.shape[-2], x.shape[-1]
    want = h / w
    values = aspect.detach()
    bad = ~((values - want).abs() <= ASPECT_RTOL * want)  # NaN counts as bad
    if bool(bad.any()):
        got = float(values.reshape(-1)[bad.reshape(-1)][0])
        raise ValueError(
            f"{name}: params were drawn for images of aspect H / W = {got:.6g}, but x is {h} x {w} (aspect "
            f"{want:.6g}): the warp would not be rigid on x; draw the params for x (draw_params(x, ...)), or to "
            f"turn x by the same angles set params['aspect'] to torch.full_like(params['aspect'], {h} / {w})"
        )
