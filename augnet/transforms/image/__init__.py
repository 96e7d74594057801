"""Differentiable image transforms.

Images are :math:`(B, Ch, H, W)` floating-point tensors, nominally in [0, 1]
(colour transforms do not clip, so that they stay affine and differentiable).
Every transform is the identity at magnitude 0 and reaches the range of the
transform catalogue (docs/guide/transforms.md) at magnitude 1; each range is a
constructor argument.

Warps and affine colour maps (geometric transforms, flips, ``Brightness``,
``Contrast``, ``Saturation``, ``Hue``, ``Invert``, ``Gray``, ``AutoContrast``,
``SamplePairing``) are expressed as taps of ``tap_mix``. The other operations of
Faster AutoAugment (``Solarize``, ``Posterize``, ``Equalize``, ``Sharpness``) are
not affine maps of the input: they implement ``apply_transform`` directly, and
a layer that holds one runs the generic path (each transform on the copies,
then the weighted sum). Where an operation is a step function of its
parameter, its gradient in the magnitude is a straight-through estimate.

Geometric maps are built in pixel units about the image centre and converted
to the normalised coordinates of ``F.affine_grid`` (``align_corners=False``),
so that on non-square images rotations stay rigid and a shear moves each row
(column) by its coefficient times its offset from the centre, in pixels.

The transforms live in modules by idea, all importable from here:
``warps`` (translations, rotation, shears, zoom, flips), ``color`` (brightness,
contrast, saturation, hue and the gated maps ``Invert``, ``Gray``,
``AutoContrast``), ``autoaugment`` (``Solarize``, ``Posterize``, ``Equalize``,
``Sharpness``) and ``pairing`` (``SamplePairing``); ``_common`` holds their
base classes and tap builders.

Examples:
    >>> import math
    >>> import torch
    >>> from augnet.transforms import image as T
    >>> x = torch.rand(4, 3, 16, 16)
    >>> g = torch.Generator().manual_seed(0)
    >>> rot = T.Rotate()
    >>> params = rot.sample(x, 0.25, generator=g)   # angles up to ±45 degrees
    >>> params["angle"].abs().max() <= math.pi / 4
    tensor(True)
    >>> torch.equal(rot.apply_transform(x, params), rot(x, 0.25, params=params))
    True
"""

from augnet.transforms.image._common import LUMA as LUMA
from augnet.transforms.image._common import _affine as _affine
from augnet.transforms.image._common import _aspect as _aspect
from augnet.transforms.image._common import _color as _color
from augnet.transforms.image._common import _gray as _gray
from augnet.transforms.image._common import _ImageTransform as _ImageTransform
from augnet.transforms.image._common import _one_tap as _one_tap
from augnet.transforms.image._common import _RGBTransform as _RGBTransform
from augnet.transforms.image.autoaugment import POSTERIZE_SLACK as POSTERIZE_SLACK
from augnet.transforms.image.autoaugment import SMOOTH as SMOOTH
from augnet.transforms.image.autoaugment import Equalize, Posterize, Sharpness, Solarize
from augnet.transforms.image.autoaugment import _equalize as _equalize
from augnet.transforms.image.autoaugment import _posterize as _posterize
from augnet.transforms.image.autoaugment import _smooth as _smooth
from augnet.transforms.image.color import AutoContrast, Brightness, Contrast, Gray, Hue, Invert, Saturation
from augnet.transforms.image.color import _GatedColor as _GatedColor
from augnet.transforms.image.pairing import SamplePairing
from augnet.transforms.image.warps import (
    HorizontalFlip,
    Rotate,
    Scale,
    ShearX,
    ShearY,
    TranslateX,
    TranslateY,
    VerticalFlip,
)

__all__ = [
    "GEOMETRIC",
    "AutoContrast",
    "Brightness",
    "Contrast",
    "Equalize",
    "Gray",
    "HorizontalFlip",
    "Hue",
    "Invert",
    "Posterize",
    "Rotate",
    "SamplePairing",
    "Saturation",
    "Scale",
    "Sharpness",
    "ShearX",
    "ShearY",
    "Solarize",
    "TranslateX",
    "TranslateY",
    "VerticalFlip",
]

#: The five geometric transforms of the AugNet paper's rotation experiment.
GEOMETRIC = (TranslateX, TranslateY, Rotate, ShearX, ShearY)
