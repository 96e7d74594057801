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
such (whatever its kind).

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
Posterize          exact (``RandomPosterize`` per bit count)     approximate: torchvision posterizes float
                                                                 images to multiples of 2^-bits (exact on
                                                                 uint8 and PIL images)
Equalize           approximate: kornia bins float values         exact (``RandomEqualize``)
                   differently (exact on 8-bit images)
Sharpness          approximate: clipped to [0, 1]                approximate: clipped to [0, 1]
                   (``RandomSharpness``)                         (``adjust_sharpness``, factor drawn per call)
signal and audio   none (not images)                             none
=================  ============================================  =================================================

Some arguments change the class: a warp with ``padding="border"`` or
``"reflection"`` is exact in kornia but approximate in torchvision (which
fills with 0); ranges a library cannot take (a shift over the whole image,
an additive brightness shift over 1, a contrast factor below 0, a hue
rotation over half a turn) are capped, with a warning.

kornia pipelines take float images :math:`(B, Ch, H, W)` or :math:`(Ch, H, W)`
and draw per sample. torchvision pipelines take one image per call (a tensor,
``tv_tensors.Image`` or PIL image, float or uint8): called on a batch tensor,
torchvision draws one choice and one set of parameters for the whole batch.
Both draw from torch's global generator (seed with ``torch.manual_seed``).

Examples:
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

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from augnet.layers import Policy, transform_classes
from augnet.transforms import image as T
from augnet.transforms.base import Transform

__all__ = ["LIBRARIES", "KorniaChoice", "KorniaPolicy", "export_support", "to_kornia", "to_torchvision"]

#: The libraries a policy exports to.
LIBRARIES = ("kornia", "torchvision")

EXACT, APPROXIMATE, NONE = "exact", "approximate", "none"


class _Unsupported(Exception):
    """Raised by a builder: the transform has no counterpart in the library (the message says why)."""


@dataclass
class _Export:
    """One transform of a policy, in a library.

    Attributes:
        ops: ``(probability, op)`` pairs: the library ops that together make the
            transform (usually one, with probability 1; ``Posterize`` has one per bit count).
        note: how the export differs from augnet (``None`` when exact).
    """

    ops: list[tuple[float, Any]]
    note: str | None = None


def _join(*notes: str | None) -> str | None:
    kept = [n for n in notes if n]
    return "; ".join(kept) if kept else None


def _cap(value: float, limit: float, what: str) -> tuple[float, str | None]:
    """``value`` capped at ``limit``, and a note when it was."""
    if value <= limit:
        return value, None
    return limit, f"{what} {value:.4g} is capped at {limit:g}"


# ------------------------------------------------------------------------ kornia


def _kornia_affine(t: Transform, **kwargs) -> Any:
    import kornia.augmentation as K

    return K.RandomAffine(padding_mode=t.padding, p=1.0, **{"degrees": 0.0, **kwargs})


def _kornia(name: str, t: Transform, m: float) -> _Export:
    """The kornia ops of transform ``t`` (class ``name``) at magnitude ``m`` > 0."""
    import kornia.augmentation as K

    if name in ("TranslateX", "TranslateY"):
        a, note = _cap(t.max_shift * m, 1.0, "a shift (fraction of the size) of")
        translate = (a, 0.0) if name == "TranslateX" else (0.0, a)
        return _Export([(1.0, _kornia_affine(t, translate=translate))], note)
    if name == "Rotate":
        d = math.degrees(t.max_angle * m)
        return _Export([(1.0, _kornia_affine(t, degrees=(-d, d)))])
    if name in ("ShearX", "ShearY"):
        d = math.degrees(math.atan(t.max_shear * m))
        shear = (-d, d, 0.0, 0.0) if name == "ShearX" else (0.0, 0.0, -d, d)
        return _Export([(1.0, _kornia_affine(t, shear=shear))], SHEAR)
    if name == "Scale":
        z = t.max_zoom**m
        return _Export([(1.0, _kornia_affine(t, scale=(1.0 / z, z)))], SCALE)
    if name == "HorizontalFlip":
        return _Export([(1.0, K.RandomHorizontalFlip(p=m))])
    if name == "VerticalFlip":
        return _Export([(1.0, K.RandomVerticalFlip(p=m))])
    if name == "Brightness":
        s, note = _cap(t.max_shift * m, 1.0, "a brightness shift of")
        return _Export([(1.0, K.RandomBrightness(brightness=(1.0 - s, 1.0 + s), clip_output=False, p=1.0))], note)
    if name in ("Contrast", "Saturation"):
        r = t.max_delta * m
        low, note = (1.0 - r, None) if r <= 1.0 else (0.0, f"a factor of {1.0 - r:.4g} is raised to 0")
        jitter = K.ColorJitter(**{name.lower(): (low, 1.0 + r)}, p=1.0)
        return _Export([(1.0, jitter)], _join(CLIPPED, note))
    if name == "Hue":
        h, note = _cap(t.max_angle * m / (2 * math.pi), 0.5, "a hue rotation (turns) of")
        return _Export([(1.0, K.RandomHue(hue=(-h, h), p=1.0))], _join(HUE, note))
    if name == "Invert":
        return _Export([(1.0, K.RandomInvert(p=m))])
    if name == "Gray":
        return _Export([(1.0, K.RandomGrayscale(p=m))])
    if name == "AutoContrast":
        return _Export(
            [(1.0, K.RandomAutoContrast(p=m))],
            "kornia divides by max - min + 1e-6 and turns a constant channel to 0 (augnet leaves it unchanged)",
        )
    if name == "Solarize":
        low = 1.0 - m * (1.0 - t.min_threshold)
        return _Export([(1.0, K.RandomSolarize(thresholds=(low, 1.0), additions=0.0, p=1.0))])
    if name == "Posterize":
        ops = [
            (p, nn.Identity() if k == 0 else K.RandomPosterize(bits=(8 - k, 8 - k), p=1.0))
            for k, p in t.bits_distribution(m).items()
        ]
        return _Export(ops)
    if name == "Equalize":
        return _Export(
            [(1.0, K.RandomEqualize(p=m))],
            "kornia bins float values into 256 levels with a histogram of its own (the same on 8-bit images, "
            "multiples of 1/255)",
        )
    if name == "Sharpness":
        r = t.max_delta * m
        return _Export([(1.0, K.RandomSharpness(sharpness=(1.0 - r, 1.0 + r), p=1.0))], CLIPPED)
    raise _Unsupported(_why_none(name))


# ------------------------------------------------------------------- torchvision


def _torchvision(name: str, t: Transform, m: float) -> _Export:
    """The torchvision v2 transforms of transform ``t`` (class ``name``) at magnitude ``m`` > 0."""
    from torchvision.transforms import v2

    from augnet import _torchvision_ops as ops

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
        r = t.max_delta * m
        low, note = (1.0 - r, None) if r <= 1.0 else (0.0, f"a factor of {1.0 - r:.4g} is raised to 0")
        return _Export([(1.0, v2.ColorJitter(**{name.lower(): (low, 1.0 + r)}))], _join(CLIPPED, note))
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
    raise _Unsupported(_why_none(name))


# Why an export is approximate, where two cases share the reason.
SHEAR = "the shear angle is drawn uniformly, not the shear coefficient (its tangent)"
SCALE = "the zoom is drawn uniformly in [1/z, z], not log-uniformly"
CLIPPED = "the library clips the result to [0, 1]; augnet does not"
HUE = (
    "the library shifts the HSV hue (and clips to [0, 1]); augnet rotates colours about the grey axis of the RGB "
    "cube (grey levels kept)"
)


def _why_none(name: str) -> str:
    if name == "SamplePairing":
        return "it blends each sample with another sample of the batch, which a per-sample pipeline cannot see"
    if name in IMAGE_NAMES:
        return "no counterpart"
    return "it is not an image transform"


#: Builders by library.
_BUILDERS: dict[str, Callable[[str, Transform, float], _Export]] = {"kornia": _kornia, "torchvision": _torchvision}
#: augnet's image transform classes by name.
IMAGE_NAMES = frozenset(n for n in T.__all__ if isinstance(getattr(T, n), type))


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


# ----------------------------------------------------------------------- policies


def _check_size(size) -> tuple[int, int] | None:
    if size is None:
        return None
    if (
        not isinstance(size, (tuple, list))
        or len(size) != 2
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in size)
    ):
        raise TypeError(f"size must be None or a pair of ints (H, W), got {size!r}")
    if min(size) < 1:
        raise ValueError(f"size must be positive, got {size!r}")
    return int(size[0]), int(size[1])


def _entries(policy) -> list[list[dict]]:
    """The policy's layers of entries, checked."""
    if isinstance(policy, dict):
        policy = Policy.from_json(policy)
    if not isinstance(policy, list) or isinstance(policy, str):
        raise TypeError(f"policy must be an augnet Policy (or its to_json() dict), got {type(policy).__name__}")
    if not policy:
        raise ValueError("the policy has no layers")
    for i, layer in enumerate(policy):
        if not isinstance(layer, list) or not layer:
            raise ValueError(f"policy layer {i} must be a non-empty list of entries, got {layer!r}")
        for e in layer:
            if not isinstance(e, dict) or "transform" not in e or "weight" not in e:
                raise ValueError(f"policy layer {i}: an entry needs 'transform' and 'weight', got {e!r}")
            w, m = e["weight"], e.get("transform_magnitude", e.get("magnitude"))
            if not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0:
                raise ValueError(f"policy layer {i}: {e['transform']} has weight {w!r}, not a finite number >= 0")
            if not isinstance(m, (int, float)) or not 0.0 <= m <= 1.0:
                raise ValueError(f"policy layer {i}: {e['transform']} has magnitude {m!r}, not in [0, 1]")
        if sum(e["weight"] for e in layer) <= 0:
            raise ValueError(f"policy layer {i}: the weights sum to 0")
    return policy


def _build(policy, library: str) -> list[tuple[list[float], list[Any], list[int]]]:
    """Per layer: the probabilities, the library ops and the index of the entry each op comes from."""
    classes = transform_classes()
    layers, notes = [], {}
    for i, layer in enumerate(_entries(policy)):
        probs, ops, sources = [], [], []
        for q, e in enumerate(layer):
            name = e["transform"]
            if name not in classes:
                raise ValueError(f"policy layer {i}: unknown transform {name!r}; augnet has {sorted(classes)}")
            m = float(e.get("transform_magnitude", e["magnitude"]))
            if m == 0.0:  # the identity, whatever the transform
                export = _Export([(1.0, _identity(library))])
            else:
                t = classes[name](**e.get("args", {}))
                try:
                    export = _BUILDERS[library](name, t, m)
                except _Unsupported as why:
                    raise ValueError(f"augnet.export: {name} cannot be exported to {library}: {why}") from None
                if export.note is not None:
                    notes.setdefault(name, export.note)
            for p, op in export.ops:
                probs.append(float(e["weight"]) * p)
                ops.append(op)
                sources.append(q)
        layers.append((probs, ops, sources))
    for name, note in notes.items():
        warnings.warn(f"augnet.export: {name} is exported to {library} approximately: {note}", UserWarning, 3)
    return layers


def _identity(library: str) -> Any:
    if library == "torchvision":
        from torchvision.transforms import v2

        return v2.Identity()
    return nn.Identity()


def to_torchvision(policy, size: tuple[int, int] | None = None):
    """The policy as a ``torchvision.transforms.v2`` pipeline, one image per call.

    ``v2.Compose`` of one ``v2.RandomChoice(ops, p=weights)`` per layer, in
    order, each op the transform at its learned range (bilinear interpolation,
    zero padding); see the module docstring for what is exact.

    Args:
        policy: a :class:`~augnet.Policy` (``model.policy()``, ``Policy.from_json(...)``)
            or its ``to_json()`` dict.
        size: the (H, W) of the images the policy is for; when given, the pipeline raises
            a ValueError for images of another size (the ranges themselves are fractions
            of each image's size, so any size works without it).

    Returns:
        A ``v2.Compose``, e.g. for ``torchvision.datasets.CIFAR10(..., transform=...)``
        after ``v2.ToImage()`` and ``v2.ToDtype(torch.float32, scale=True)``.

    Raises:
        ValueError: a transform has no torchvision counterpart (``SamplePairing``, signal
            and audio transforms) at a magnitude above 0, or the policy is malformed.

    Warns:
        UserWarning: once per transform exported approximately, saying how it differs.
    """
    from torchvision.transforms import v2

    from augnet import _torchvision_ops

    size = _check_size(size)
    stages = [] if size is None else [_torchvision_ops.CheckSize(size)]
    for probs, ops, _ in _build(policy, "torchvision"):
        stages.append(v2.RandomChoice(ops, p=probs))
    return v2.Compose(stages)


def to_kornia(policy, size: tuple[int, int] | None = None) -> KorniaPolicy:
    """The policy as a :class:`KorniaPolicy` of ``kornia.augmentation`` ops, drawing per sample.

    kornia's containers choose among their ops once per batch
    (``ImageSequential(random_apply=1, random_apply_weights=...)`` applies one
    op to the whole batch), so each layer is a :class:`KorniaChoice` that draws
    one op per sample from the learned weights and runs every op on the samples
    that drew it.

    Args:
        policy: a :class:`~augnet.Policy` or its ``to_json()`` dict.
        size: the (H, W) of the images the policy is for (checked on each call when given).

    Returns:
        A :class:`KorniaPolicy` (an ``nn.Module``; move it with ``.to(device)``).

    Raises:
        ValueError: a transform has no kornia counterpart at a magnitude above 0,
            or the policy is malformed.

    Warns:
        UserWarning: once per transform exported approximately, saying how it differs.
    """
    size = _check_size(size)
    layers = [KorniaChoice(ops, probs, sources) for probs, ops, sources in _build(policy, "kornia")]
    return KorniaPolicy(layers, size)


class KorniaChoice(nn.Module):
    """One layer of an exported policy: each sample draws one op from Categorical(``probs``).

    Args:
        ops: the kornia ops (each drawing its own per-sample parameters, ``p`` as learned).
        probs: their probabilities (normalised here).
        sources: for each op, the index of the policy entry (transform) it comes from.

    Attributes:
        last_choice: (B,) the entry each sample of the last batch drew (for inspection and tests).
    """

    def __init__(self, ops: list[nn.Module], probs: list[float], sources: list[int] | None = None) -> None:
        super().__init__()
        if len(ops) != len(probs) or not ops:
            raise ValueError(f"need as many probabilities as ops (at least one), got {len(probs)} and {len(ops)}")
        self.ops = nn.ModuleList(ops)
        probs_t = torch.tensor(probs, dtype=torch.float64)
        self.register_buffer("probs", probs_t / probs_t.sum(), persistent=False)
        self.sources = list(range(len(ops))) if sources is None else list(sources)
        self.last_choice: Tensor | None = None

    def forward(self, x: Tensor) -> Tensor:
        b = x.shape[0]
        drawn = torch.multinomial(self.probs.float(), b, replacement=True) if b else self.probs.new_zeros(0).long()
        drawn = drawn.to(x.device)
        self.last_choice = torch.tensor(self.sources, device=x.device)[drawn]
        out = x.clone()
        for j, op in enumerate(self.ops):
            rows = (drawn == j).nonzero().flatten()
            if rows.numel():
                out[rows] = op(x[rows]).to(out.dtype)
        return out

    def extra_repr(self) -> str:
        return f"probs={[round(p, 4) for p in self.probs.tolist()]}"


class KorniaPolicy(nn.Module):
    """An exported policy for kornia: its layers (:class:`KorniaChoice`) applied in order.

    Shape:
        - input: float images :math:`(B, Ch, H, W)` or one image :math:`(Ch, H, W)`, in [0, 1].
        - output: the same shape and dtype.
    """

    def __init__(self, layers: list[KorniaChoice], size: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.size = size

    def forward(self, x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"expected a tensor image or batch, got {type(x).__name__}")
        if not x.is_floating_point():
            raise TypeError(f"kornia pipelines take floating-point images in [0, 1], got dtype {x.dtype}")
        if x.dim() not in (3, 4):
            raise ValueError(f"expected (B, Ch, H, W) or (Ch, H, W), got shape {tuple(x.shape)}")
        got = tuple(x.shape[-2:])
        if self.size is not None and got != self.size:
            raise ValueError(f"this augnet policy was exported for images of size {self.size}, got {got}")
        single = x.dim() == 3
        out = x[None] if single else x
        for layer in self.layers:
            out = layer(out)
        return out[0] if single else out
