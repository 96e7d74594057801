"""The eager baseline of ``augnet bench``: an augmentation layer computed the way the official AugNet code does.

The ``eager`` provider is the per-transform path of the official AugNet code
(:func:`eager_augment`): ``x.repeat(C)``, each transform applied on its own
with kornia (``translate``, ``rotate``, ``shear``), then the sum weighted by
the layer's mixture weights.
"""

from __future__ import annotations

import importlib.util

import torch
from torch import Tensor

from augnet.layers import AugmentationLayer, check_generator
from augnet.ops.precision import full_precision
from augnet.transforms import image as T
from augnet.transforms.base import Transform, check_copies

__all__ = ["EAGER", "eager_augment", "kornia_warp"]

#: Name of the eager (per-transform, kornia) provider.
EAGER = "eager"
#: The transforms the eager path warps with kornia (TranslateY and ShearY are TranslateX and ShearX subclasses).
_WARPED = (T.TranslateX, T.Rotate, T.ShearX)
_WARPED_NAMES = "TranslateX, TranslateY, Rotate, ShearX and ShearY"


def eager_augment(
    layer: AugmentationLayer, x: Tensor, copies: int = 1, generator: torch.Generator | None = None
) -> Tensor:
    """The training-time mixture of a geometric layer, computed the eager way.

    This is how the official AugNet code runs an augmentation layer: the batch
    is repeated ``copies`` times, each transform warps the whole repeated batch
    on its own with kornia, and the results are summed with the layer's
    weights. Parameters are drawn with the transforms' own ``sample`` (same
    distributions, same dependence on the magnitudes), so gradients reach the
    weights, the magnitudes and ``x``.

    Translations and rotations give the images of the augnet transforms for
    the same parameters. Shears go through ``kornia.geometry.transform.shear``,
    which shears about the top-left pixel rather than the image centre (same
    coefficient, different fixed point); the cost is that of one warp either way.

    Args:
        layer: a layer whose transforms are among TranslateX, TranslateY,
            Rotate, ShearX and ShearY.
        x: images :math:`(B, Ch, H, W)`, floating point (float16 and bfloat16
            are warped in float32 and the result rounded, as the layer does).
        copies: number of copies C (copy-major output, as the layer's): an int >= 1.
        generator: source of randomness.

    Returns:
        :math:`(B \\cdot C, Ch, H, W)` augmented images, in ``x``'s dtype.

    Raises:
        TypeError: a transform of ``layer`` the eager path does not cover, ``copies`` that is not an int, an
            ``x`` the layer refuses (not a floating-point tensor) or a ``generator`` that is not one.
        ValueError: ``copies`` below 1, or an ``x`` of another rank or with an empty image dimension.
    """
    other = [type(t).__name__ for t in layer.transforms if not isinstance(t, _WARPED)]
    if other:  # before any warp: not after the first transforms' work
        raise TypeError(f"layer: the eager path covers {_WARPED_NAMES} only, got {', '.join(other)}")
    layer.check_input(x)
    copies = check_copies(copies)
    check_generator(generator)
    with full_precision(x) as dtype:
        xd = x.to(dtype)
        xs = xd.repeat(copies, 1, 1, 1)  # row c * B + b is x[b]
        weights, mags = layer.weights, layer.magnitudes
        out = None
        for q, t in enumerate(layer.transforms):
            y = kornia_warp(t, xs, t.sample(xd, mags[q], generator=generator, copies=copies))
            term = weights[q].to(y.dtype) * y
            out = term if out is None else out + term
    return out.to(x.dtype)


def kornia_warp(transform: Transform, images: Tensor, params: dict[str, Tensor]) -> Tensor:
    """Apply one geometric augnet transform's ``params`` to ``images`` (one row each) with kornia.

    Args:
        transform: a TranslateX, TranslateY, Rotate, ShearX or ShearY.
        images: :math:`(N, Ch, H, W)`, one image per row of ``params``.
        params: as drawn by ``transform.sample`` for ``N`` rows.
    """
    try:
        from kornia.geometry.transform import rotate, shear, translate
    except ImportError as err:
        hint = 'the eager baseline of augnet bench needs kornia: pip install "augnet[bench]"'
        raise ImportError(f"{hint} ({err})") from err

    h, w = images.shape[-2:]
    if isinstance(transform, T.TranslateX):  # TranslateY included; shift is a fraction of the size
        zero = torch.zeros_like(params["shift"])
        pixels = [params["shift"] * w, zero] if transform.axis == 0 else [zero, params["shift"] * h]
        return translate(images, torch.stack(pixels, 1))
    if isinstance(transform, T.Rotate):
        return rotate(images, torch.rad2deg(params["angle"]))
    if isinstance(transform, T.ShearX):  # ShearY included
        # kornia's output at (x, y) reads its input at (x - s y, y): pass -s for augnet's direction.
        zero = torch.zeros_like(params["shear"])
        coef = [-params["shear"], zero] if transform.axis == 0 else [zero, -params["shear"]]
        return shear(images, torch.stack(coef, 1))
    raise TypeError(f"transform: the eager path covers {_WARPED_NAMES} only, got {type(transform).__name__}")


def _has_kornia() -> bool:
    return importlib.util.find_spec("kornia") is not None
