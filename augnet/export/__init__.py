"""Export a learned augnet policy to kornia or torchvision, to train any model with it as a fixed augmentation.

:func:`to_torchvision` gives a ``torchvision.transforms.v2`` pipeline (for a
``Dataset``'s transform, one image per call); :func:`to_kornia` gives an
``nn.Module`` of ``kornia.augmentation`` ops (for batches, on any device).
Both do what an :class:`~augnet.AugmentationLayer` does in evaluation mode: for
each sample, each layer in turn draws **one** of its transforms from
Categorical(learned weights) and applies it with the learned range (the
transform's own magnitude ``m``, the policy entries' ``transform_magnitude``):
``Rotate(max_angle=a)`` turns by an angle uniform in ``±a·m``, ``TranslateX``
shifts by up to ``±max_shift·m`` of the width, a flip happens with probability
``m``, and so on. A transform at magnitude 0 is the identity and is exported as
such (whatever its kind). An entry of weight 0 is never drawn and is left out;
a layer with nothing to draw (no entries, or weights all 0) is the identity.

Each export is one of:

- **exact**: on images in [0, 1], the library op draws the same distribution of
  parameters and computes the same output as augnet (up to interpolation and
  float rounding; the tests compare outputs at equal parameters);
- **approximate**: a close op of the library, with a ``UserWarning`` that names
  the transform and says how it differs;
- **none**: no per-sample counterpart; exporting raises a ``ValueError`` that
  names the transform and the library.

For the default constructor arguments (:func:`export_support` returns this table):

=================  ============================================  =================================================
transform          kornia                                        torchvision
=================  ============================================  =================================================
TranslateX/Y       exact (``RandomAffine`` translate)            approximate: ``RandomAffine`` rounds the shift
                                                                 to whole pixels
Rotate             exact (``RandomAffine`` degrees)              exact (``RandomRotation``)
ShearX/Y           approximate: shear angle uniform, not the     approximate: the same (``RandomAffine`` shear)
                   coefficient (``RandomAffine`` shear)
Scale              approximate: zoom uniform, not log-uniform    approximate: the same (``RandomAffine`` scale)
HorizontalFlip,    exact (``RandomHorizontalFlip``,              exact (``RandomHorizontalFlip``,
VerticalFlip       ``RandomVerticalFlip``)                       ``RandomVerticalFlip``)
Brightness         exact (``RandomBrightness``, additive,        approximate: multiplicative factor (the same
                   ``clip_output=False``)                        change at grey level 0.5), clipped
Contrast           approximate: clipped to [0, 1]                approximate: clipped to [0, 1] (``ColorJitter``)
                   (``ColorJitter``)
Saturation         approximate: clipped to [0, 1]                approximate: clipped to [0, 1] (``ColorJitter``)
                   (``ColorJitter``)
Hue                approximate: a shift of the HSV hue, not a    approximate: the same (``ColorJitter`` hue)
                   rotation about the grey axis (``RandomHue``)
SamplePairing      none (blends samples of a batch)              none
Invert             exact (``RandomInvert``)                      exact (``RandomInvert``)
Gray               exact (``RandomGrayscale``)                   exact (``RandomGrayscale``; its red weight
                                                                 0.2989 moves grey by at most 1e-4)
AutoContrast       approximate: divides by ``max - min + 1e-6``  exact (``RandomAutocontrast``)
                   and zeroes constant channels
                   (``RandomAutoContrast``)
Solarize           exact (``RandomSolarize``, no addition)       exact (``RandomSolarize``'s functional op with a
                                                                 threshold drawn per call)
Posterize          exact on 8-bit images (``RandomPosterize``    approximate: torchvision posterizes float
                   per bit count; a float value within 1e-3      images to multiples of 2^-bits (exact on
                   of a level's edge may land one level apart)   uint8 and PIL images)
Equalize           approximate: kornia bins float values         exact (``RandomEqualize``)
                   differently (exact on 8-bit images)
Sharpness          approximate: clipped to [0, 1]                approximate: clipped to [0, 1]
                   (``RandomSharpness``)                         (``adjust_sharpness``, factor drawn per call)
signal and audio   none (not images)                             none
=================  ============================================  =================================================

Some arguments change the class: a warp with ``padding="border"`` or
``"reflection"`` is exact in kornia but approximate in torchvision (which
fills with 0); ranges a library cannot take (a shift over the whole image,
an additive brightness shift over 1, a hue rotation over half a turn, a
rotation over a full turn each way in kornia) are capped, with a warning.
(``Contrast`` and ``Saturation`` take ``max_delta`` up to 1: their factors
are never below 0.)

kornia pipelines take float images :math:`(B, Ch, H, W)` or :math:`(Ch, H, W)`
and draw per sample. torchvision pipelines take one image per call (a tensor,
``tv_tensors.Image`` or PIL image, float or uint8): called on a batch tensor,
torchvision draws one choice and one set of parameters for the whole batch.
Both draw from torch's global generator (seed with ``torch.manual_seed``).
torchvision's colour ops (those of ``Brightness``, ``Contrast``, ``Saturation``,
``Hue``, ``Gray``, ``AutoContrast``, ``Sharpness``) take tensor images of 1 or 3
channels, kornia's ``Hue`` 3 and ``Saturation`` 1 or 3: a layer holding one raises
a ``ValueError`` naming it for other channel counts, on every call (not only when
a sample draws it). An entries-only policy's ``range`` is not what the export
runs (the entry's ``args`` at its magnitude are): one that disagrees with them is
refused with a ``ValueError``.
Both augment whatever their mode, as kornia's and torchvision's own
augmentations do: ``.eval()`` turns neither off. Apply them to training data
only (in the training loop, or as the training set's transform).

Examples:
    >>> import torch
    >>> import augnet
    >>> from augnet.transforms import image as T
    >>> layer = augnet.AugmentationLayer([T.Rotate(), T.HorizontalFlip()], init_magnitude=0.25)
    >>> policy = augnet.AugmentationModule([layer]).policy()   # (a trained model's model.policy())
    >>> to_kornia(policy)(torch.rand(8, 3, 32, 32)).shape      # a batch, per-sample draws
    torch.Size([8, 3, 32, 32])
    >>> to_torchvision(policy)(torch.rand(3, 32, 32)).shape    # one image per call
    torch.Size([3, 32, 32])
    >>> export_support()["Rotate"]
    {'kornia': 'exact', 'torchvision': 'exact'}
"""

from __future__ import annotations

from augnet.export import _kornia, _torchvision
from augnet.export._common import APPROXIMATE, EXACT, IMAGE_NAMES, NONE, Builder, _Unsupported
from augnet.export._kornia import KorniaChoice, KorniaPolicy, to_kornia
from augnet.export._torchvision import to_torchvision
from augnet.policy import register_exporter, transform_classes
from augnet.transforms.base import Transform

__all__ = ["LIBRARIES", "KorniaChoice", "KorniaPolicy", "export_support", "to_kornia", "to_torchvision"]

#: The libraries a policy exports to.
LIBRARIES = ("kornia", "torchvision")

#: Builders by library.
_BUILDERS: dict[str, Builder] = {"kornia": _kornia.builder, "torchvision": _torchvision.builder}

register_exporter("kornia", to_kornia)
register_exporter("torchvision", to_torchvision)


def export_support() -> dict[str, dict[str, str]]:
    """How each augnet transform exports, with its default arguments: ``{name: {library: level}}``.

    Levels: ``"exact"``, ``"approximate"``, ``"none"`` (see the module docstring).
    Requires kornia and torchvision (the ops are built to classify them).

    Examples:
        >>> export_support()["SamplePairing"]
        {'kornia': 'none', 'torchvision': 'none'}
    """
    table = {}
    for name, cls in transform_classes().items():
        if name.endswith("Transform"):  # base classes (SignalTransform)
            continue
        t = _default(cls)
        table[name] = {library: _level(library, name, t) for library in LIBRARIES}
    return table


def _default(cls: type) -> Transform | None:
    """An instance with default arguments, or None where the class needs arguments (sensor rotations...)."""
    try:
        return cls()
    except TypeError:
        return None


def _level(library: str, name: str, t: Transform | None) -> str:
    if t is None or name not in IMAGE_NAMES:
        return NONE
    try:
        export = _BUILDERS[library](name, t, 1.0)
    except _Unsupported:
        return NONE
    return EXACT if export.note is None else APPROXIMATE


