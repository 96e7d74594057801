"""The torchvision exporter: a policy as a ``torchvision.transforms.v2`` pipeline, one image per call."""

from __future__ import annotations

import math

from augnet.export._common import CLIPPED, HUE, SCALE, SHEAR, _cap, _Export, _join, build, check_size, unsupported
from augnet.transforms.base import Transform

__all__ = ["builder", "to_torchvision"]


def builder(name: str, t: Transform, m: float) -> _Export:
    """The torchvision v2 transforms of transform ``t`` (class ``name``) at magnitude ``m`` > 0."""
    from torchvision.transforms import v2

    from augnet.export import _torchvision_ops as ops

    # Bilinear, outside pixels 0. fill=None, not fill=0: with a fill value torchvision also samples a mask of
    # ones and blends with the fill by it, which darkens pixels near the border a second time (out = sampled
    # * mask for fill 0); fill=None is grid_sample's zero padding alone, which is augnet's "zeros".
    bilinear = dict(interpolation=v2.InterpolationMode.BILINEAR, fill=None)
    padding = None if t.padding == "zeros" else f"torchvision pads with 0, not {t.padding!r}"
    if name in ("TranslateX", "TranslateY"):
        a, note = _cap(t.max_shift * m, 1.0, "a shift (fraction of the size) of")
        translate = (a, 0.0) if name == "TranslateX" else (0.0, a)
        affine = v2.RandomAffine(degrees=0.0, translate=translate, **bilinear)
        return _Export([(1.0, affine)], _join("RandomAffine rounds each shift to whole pixels", note, padding))
    if name == "Rotate":
        d = math.degrees(t.max_angle * m)
        return _Export([(1.0, v2.RandomRotation(degrees=(-d, d), **bilinear))], padding)
    if name in ("ShearX", "ShearY"):
        d = math.degrees(math.atan(t.max_shear * m))
        shear = (-d, d, 0.0, 0.0) if name == "ShearX" else (0.0, 0.0, -d, d)
        return _Export([(1.0, v2.RandomAffine(degrees=0.0, shear=shear, **bilinear))], _join(SHEAR, padding))
    if name == "Scale":
        z = t.max_zoom**m
        return _Export([(1.0, v2.RandomAffine(degrees=0.0, scale=(1.0 / z, z), **bilinear))], _join(SCALE, padding))
    if name == "HorizontalFlip":
        return _Export([(1.0, v2.RandomHorizontalFlip(p=m))])
    if name == "VerticalFlip":
        return _Export([(1.0, v2.RandomVerticalFlip(p=m))])
    if name == "Brightness":
        s = t.max_shift * m
        jitter = v2.ColorJitter(brightness=(max(0.0, 1.0 - 2.0 * s), 1.0 + 2.0 * s))
        note = (
            f"torchvision's brightness is a factor in [{max(0.0, 1.0 - 2.0 * s):.3g}, {1.0 + 2.0 * s:.3g}] "
            f"(the change of a grey level 0.5 by ±{s:.3g}), not an additive shift, and clipped to [0, 1]"
        )
        return _Export([(1.0, jitter)], note)
    if name in ("Contrast", "Saturation"):
        r = t.max_delta * m  # <= 1: the constructors refuse max_delta > 1 (a file's too: it is rebuilt through them)
        return _Export([(1.0, v2.ColorJitter(**{name.lower(): (1.0 - r, 1.0 + r)}))], CLIPPED)
    if name == "Hue":
        h, note = _cap(t.max_angle * m / (2 * math.pi), 0.5, "a hue rotation (turns) of")
        return _Export([(1.0, v2.ColorJitter(hue=(-h, h)))], _join(HUE, note))
    if name == "Invert":
        return _Export([(1.0, v2.RandomInvert(p=m))])
    if name == "Gray":
        return _Export([(1.0, v2.RandomGrayscale(p=m))])
    if name == "AutoContrast":
        return _Export([(1.0, v2.RandomAutocontrast(p=m))])
    if name == "Solarize":
        low = 1.0 - m * (1.0 - t.min_threshold)
        return _Export([(1.0, ops.RandomSolarizeRange(low, 1.0))])
    if name == "Posterize":
        posterize = [
            (p, v2.Identity() if k == 0 else v2.RandomPosterize(bits=8 - k, p=1.0))
            for k, p in t.bits_distribution(m).items()
        ]
        note = (
            "torchvision posterizes float images to multiples of 2^-bits, augnet (like PIL) to multiples of "
            "2^removed / 255 (exact on uint8 and PIL images)"
        )
        return _Export(posterize, note)
    if name == "Equalize":
        return _Export([(1.0, v2.RandomEqualize(p=m))])
    if name == "Sharpness":
        r = t.max_delta * m
        return _Export([(1.0, ops.RandomSharpnessRange(1.0 - r, 1.0 + r))], CLIPPED)
    raise unsupported(name)


def to_torchvision(policy, size: tuple[int, int] | None = None):
    """The policy as a ``torchvision.transforms.v2`` pipeline, one image per call.

    ``v2.Compose`` of one ``v2.RandomChoice(ops, p=weights)`` per layer, in
    order, each op the transform at its learned range (bilinear interpolation,
    zero padding); see the module docstring for what is exact. A layer with nothing to draw (no entries, or
    weights all 0) is ``v2.RandomChoice([v2.Identity()])``.

    Args:
        policy: a :class:`~augnet.Policy` (``model.policy()``, ``Policy.from_json(...)``)
            or its ``to_json()`` dict.
        size: the (H, W) of the images the policy is for; when given, the pipeline raises
            a ValueError for images of another size (the ranges themselves are fractions
            of each image's size, so any size works without it).

    Returns:
        A ``v2.Compose`` (one that warns at its first call on a batch :math:`(B, Ch, H, W)`, which torchvision
        augments with one draw for every sample; see ``_torchvision_ops.Pipeline``), e.g. for
        ``torchvision.datasets.CIFAR10(..., transform=...)``
        after ``v2.ToImage()`` and ``v2.ToDtype(torch.float32, scale=True)``. As torchvision's own transforms
        (and the kornia export), it augments in evaluation mode too (``.eval()`` does not turn it off): give it to
        the training set only.

    Raises:
        ValueError: a transform of weight above 0 has no torchvision counterpart (``SamplePairing``, signal
            and audio transforms) at a magnitude above 0, or the policy is malformed.
        TypeError, ValueError: an entry's ``args`` its transform's constructor refuses (naming the layer and
            the entry), or ``policy`` is not a policy (a path: read it with :meth:`~augnet.policy.Policy.load` first).
        ValueError: an entries-only policy's entry whose ``range`` is not the one its ``args`` give at its
            magnitude (the pipeline runs the args, not the written range). At a call: a tensor image of other than
            1 or 3 channels given to a layer that holds a colour op (``Brightness``, ``Contrast``, ``Saturation``,
            ``Hue``, ``Gray``, ``AutoContrast``, ``Sharpness``: torchvision's take 1 or 3), whichever op it draws.

    Warns:
        UserWarning: once per transform exported approximately, saying how it differs; and at the pipeline's
            first call on a batch of more than one image (one draw for all: apply it per image, or use to_kornia).
    """
    from torchvision.transforms import v2

    from augnet.export import _torchvision_ops

    size = check_size(size)
    stages = [] if size is None else [_torchvision_ops.CheckSize(size)]
    names: dict[int, str] = {}  # id(op) -> the transform it comes from

    def named(name: str, t: Transform, m: float) -> _Export:
        export = builder(name, t, m)
        names.update((id(op), name) for _, op in export.ops)
        return export

    for i, (probs, ops, _) in enumerate(build(policy, "torchvision", named)):
        # torchvision's colour ops take images of 1 or 3 channels: a layer holding one checks every image it is
        # given (not only those that drew it, where torchvision's own error came at random, mid-epoch)
        colour = [op for op in ops if id(op) in names and isinstance(op, _torchvision_ops.RGB_OR_GREY)]
        needs = sorted({names[id(op)] for op in colour})
        if needs:
            stages.append(_torchvision_ops.ChannelCheckedChoice(ops, probs, i, needs))
        else:
            stages.append(v2.RandomChoice(ops, p=probs))
    return _torchvision_ops.Pipeline(stages)  # a v2.Compose that warns when called on a batch


