"""The kornia exporter: a policy as an ``nn.Module`` of ``kornia.augmentation`` ops, drawing per sample."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

from augnet._checks import as_values, is_int, is_real
from augnet.export._common import CLIPPED, HUE, SCALE, SHEAR, _cap, _Export, _join, build, check_size, unsupported
from augnet.transforms.base import Transform

__all__ = ["KorniaChoice", "KorniaPolicy", "builder", "to_kornia"]


def _kornia_affine(t: Transform, **kwargs) -> Any:
    import kornia.augmentation as K

    return K.RandomAffine(padding_mode=t.padding, p=1.0, **{"degrees": 0.0, **kwargs})


def builder(name: str, t: Transform, m: float) -> _Export:
    """The kornia ops of transform ``t`` (class ``name``) at magnitude ``m`` > 0."""
    import kornia.augmentation as K

    if name in ("TranslateX", "TranslateY"):
        a, note = _cap(t.max_shift * m, 1.0, "a shift (fraction of the size) of")
        translate = (a, 0.0) if name == "TranslateX" else (0.0, a)
        return _Export([(1.0, _kornia_affine(t, translate=translate))], note)
    if name == "Rotate":
        # kornia takes at most a full turn each way; past it, the angles (mod 360) are only nearly uniform anyway
        d, note = _cap(math.degrees(t.max_angle * m), 360.0, "a rotation (degrees) of")
        return _Export([(1.0, _kornia_affine(t, degrees=(-d, d)))], note)
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
        r = t.max_delta * m  # <= 1: the constructors refuse max_delta > 1 (a file's too: it is rebuilt through them)
        return _Export([(1.0, K.ColorJitter(**{name.lower(): (1.0 - r, 1.0 + r)}, p=1.0))], CLIPPED)
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
    raise unsupported(name)


def to_kornia(policy, size: tuple[int, int] | None = None) -> KorniaPolicy:
    """The policy as a :class:`KorniaPolicy` of ``kornia.augmentation`` ops, drawing per sample.

    kornia's containers choose among their ops once per batch
    (``ImageSequential(random_apply=1, random_apply_weights=...)`` applies one
    op to the whole batch), so each layer is a :class:`KorniaChoice` that draws
    one op per sample from the learned weights and runs every op on the samples
    that drew it. A layer with nothing to draw (no entries, or weights all 0) is the identity.

    Args:
        policy: a :class:`~augnet.Policy` or its ``to_json()`` dict.
        size: the (H, W) of the images the policy is for (checked on each call when given).

    Returns:
        A :class:`KorniaPolicy` (an ``nn.Module``; move it with ``.to(device)``). As kornia's own modules, it
        augments in evaluation mode too (``.eval()`` does not turn it off): apply it to training batches only.

    Raises:
        ValueError: a transform of weight above 0 has no kornia counterpart at a magnitude above 0,
            or the policy is malformed; an entries-only policy's entry whose ``range`` is not the one its ``args``
            give at its magnitude (the pipeline runs the args, not the written range). At a call: images of other
            than 3 channels for a layer holding ``Hue`` (1 or 3 for ``Saturation``), whichever op a sample draws.
        TypeError, ValueError: an entry's ``args`` its transform's constructor refuses (naming the layer and
            the entry), or ``policy`` is not a policy (a path: read it with :meth:`~augnet.policy.Policy.load` first).

    Warns:
        UserWarning: once per transform exported approximately, saying how it differs.
    """
    size = check_size(size)
    names: dict[int, str] = {}  # id(op) -> the transform it comes from

    def named(name: str, t: Transform, m: float) -> _Export:
        export = builder(name, t, m)
        names.update((id(op), name) for _, op in export.ops)
        return export

    layers = []
    for probs, ops, sources in build(policy, "kornia", named):
        layer = KorniaChoice(ops, probs, sources)
        # kornia's hue and saturation ops take images of some channel counts only: the layer checks every batch
        # (not only the samples that drew them, where kornia's own error came at random, mid-epoch)
        drawn = {names.get(id(op)) for op in ops}
        layer.channels = {name: counts for name, counts in _CHANNELS.items() if name in drawn}
        layers.append(layer)
    return KorniaPolicy(layers, size)


#: The exports whose kornia op takes images of these channel counts only (``RandomHue`` RGB, ``ColorJitter``'s
#: saturation RGB or grey); kornia's other ops take any count.
_CHANNELS = {"Hue": (3,), "Saturation": (1, 3)}


class KorniaChoice(nn.Module):
    """One layer of an exported policy: each sample draws one op from Categorical(``probs``).

    Args:
        ops: the kornia ops (each drawing its own per-sample parameters, ``p`` as learned).
        probs: their probabilities (normalised here).
        sources: for each op, the index of the policy entry (transform) it comes from (default: ``0, 1, ...``;
            -1: from no entry, the identity of a layer with nothing to draw).

    Shape:
        - input: :math:`(B, Ch, H, W)`; output: the same.

    Raises:
        TypeError: ``ops`` that are not modules, ``probs`` that are not numbers (a sequence, a 1-D tensor or
            array), ``sources`` that are not ints.
        ValueError: not as many probabilities (and sources) as ops, or no op; probabilities that are not finite
            numbers >= 0 with a sum above 0 (nothing could be drawn).

    The probabilities are a float32 buffer (normalised in float64, then rounded once; the draw samples in float32):
    they move with the module (``.to(device)``, an MPS device too, which has no float64) and stay float32 through
    dtype casts (``.half()``, ``.double()``, ``.to(torch.bfloat16)``), so that the draw stays as learned.

    Attributes:
        last_choice: (B,) the entry each sample of the last batch drew (for inspection and tests; -1 for the
            identity of a layer with nothing to draw).
        channels: ``{transform name: channel counts}`` that every input's channels (``x.shape[-3]``) must be one
            of, whichever op a sample draws (set by :func:`to_kornia` for ``Hue``, 3, and ``Saturation``, 1 or 3:
            kornia's ops take no other); a ValueError names the transform otherwise. Empty by default.
    """

    def __init__(self, ops: list[nn.Module], probs: list[float], sources: list[int] | None = None) -> None:
        super().__init__()
        ops, probs = _sequence("ops", ops), _sequence("probs", as_values(probs, "probs"))
        sources = None if sources is None else _sequence("sources", as_values(sources, "sources"))
        if not all(isinstance(op, nn.Module) for op in ops):
            raise TypeError(f"ops must be modules (kornia ops), got {[type(op).__name__ for op in ops]}")
        if not all(is_real(p) for p in probs):
            raise TypeError(f"probs must be numbers, got {probs!r:.200}")
        if sources is not None and not all(is_int(j) for j in sources):
            raise TypeError(f"sources must be ints (entry indices), got {sources!r:.200}")
        if len(ops) != len(probs) or not ops or (sources is not None and len(sources) != len(ops)):
            more = "" if sources is None else f" and {len(sources)} sources"
            raise ValueError(f"need as many probabilities (and sources) as ops, at least one: got {len(ops)} ops, "
                             f"{len(probs)} probs{more}")  # fmt: skip
        total = sum(float(p) for p in probs)
        if not all(p >= 0 for p in probs) or not (math.isfinite(total) and total > 0):  # NaN fails too
            raise ValueError(f"probs must be finite numbers >= 0 with a sum above 0, got {probs!r:.200}")
        self.ops = nn.ModuleList(ops)
        probs_t = torch.tensor([float(p) for p in probs], dtype=torch.float64)
        self.register_buffer("probs", (probs_t / probs_t.sum()).float(), persistent=False)
        self.sources = list(range(len(ops))) if sources is None else [int(j) for j in sources]
        self.last_choice: Tensor | None = None
        self.channels: dict[str, tuple[int, ...]] = {}

    def _apply(self, fn, recurse: bool = True):
        # .half(), .to(torch.bfloat16), ... cast floating buffers: the probabilities keep float32 (bfloat16 would
        # round each to 3 digits and change the learned distribution; .double() would make a tensor MPS cannot
        # hold); devices move them as any buffer. fn sees them in float32, which every device takes.
        probs = self.probs = self.probs.float()  # float32 (one pickled when they were float64 too)
        super()._apply(fn, recurse)
        if self.probs.dtype != probs.dtype:
            self.probs = probs.to(self.probs.device)
        return self

    def forward(self, x: Tensor) -> Tensor:
        got = x.shape[-3] if x.dim() >= 3 else None
        for name, counts in getattr(self, "channels", {}).items():  # (a module pickled before it had them: none)
            if got is not None and got not in counts:
                allowed = " or ".join(str(c) for c in counts)
                raise ValueError(
                    f"augnet.export: this kornia layer holds {name}, whose kornia op takes images of {allowed} "
                    f"channels; got {got} channels (shape {tuple(x.shape)}). Drop {name} from the policy for such "
                    "images (an entries-only policy without it)"
                )
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


def _sequence(name: str, value) -> list:
    """``value`` (a sequence: a list, a tuple, a ModuleList) as a list, or the TypeError naming ``name``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, nn.ModuleList)):
        raise TypeError(f"{name} must be a sequence, got {type(value).__name__}: {value!r:.80}")
    return list(value)


class KorniaPolicy(nn.Module):
    """An exported policy for kornia: its layers (:class:`KorniaChoice`) applied in order.

    Made by :func:`to_kornia`.

    Args:
        layers: the layers, one :class:`KorniaChoice` per layer of the policy.
        size: the (H, W) of the images the policy is for (two ints, as :func:`to_kornia` takes it); when given, a
            call on images of another size raises a ValueError (default ``None``: any size).

    Shape:
        - input: float images :math:`(B, Ch, H, W)` or one image :math:`(Ch, H, W)`, in [0, 1].
        - output: the same shape and dtype.

    Raises:
        TypeError, ValueError: ``size`` that is not ``None`` or two ints >= 1; at a call, an input that is not a
            floating-point tensor of that shape and size.

    Like kornia's own augmentation modules (and torchvision's transforms), it augments in training and evaluation
    mode alike: ``.eval()`` does not turn it off. To augment in training only, call it only there (``if
    model.training: x = augment(x)``), or keep it out of the model (in the training loop, or the training set's
    transform). Pickled or deep-copied, it draws what the original draws; cast (``.half()``, ``.double()``), its
    choice probabilities stay float32 (its kornia ops cast their own tensors, as kornia does).
    """

    def __init__(self, layers: list[KorniaChoice], size: tuple[int, int] | None = None) -> None:
        size = check_size(size)  # a tuple: a list [H, W] compared unequal to every image's (H, W)
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
