"""Differentiable image transforms.

Images are :math:`(B, Ch, H, W)` floating-point tensors, nominally in [0, 1]
(colour transforms do not clip, so that they stay affine and differentiable).
Every transform is the identity at magnitude 0 and reaches the range of
DESIGN.md at magnitude 1; each range is a constructor argument.

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
so rotations and shears stay rigid on non-square images.

Examples:
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

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from augnet.ops.dispatch import PADDING_MODES
from augnet.ops.taps import Taps, identity_color
from augnet.transforms.base import (
    Range,
    Transform,
    draw,
    param_dtype,
    positive,
    relaxed_bernoulli,
    repeat_rows,
    uniform,
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

#: ITU-R BT.601 luma weights, used for grey levels (contrast, saturation).
LUMA = (0.299, 0.587, 0.114)


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


class _ImageTransform(Transform):
    input_ndim = 4

    def __init__(self, padding: str = "zeros") -> None:
        super().__init__()
        if padding not in PADDING_MODES:
            raise ValueError(f"padding must be one of {PADDING_MODES}, got {padding!r}")
        self.padding = padding

    def extra_repr(self) -> str:
        return "" if self.padding == "zeros" else f"padding={self.padding!r}"


class _RGBTransform(_ImageTransform):
    """Colour transforms defined for three-channel (RGB) images only."""

    def check_input(self, x: Tensor) -> None:
        super().check_input(x)
        if x.shape[1] != 3:
            raise ValueError(f"{type(self).__name__}: needs RGB images with 3 channels, got {x.shape[1]}")


# --------------------------------------------------------------------------- geometric


class TranslateX(_ImageTransform):
    """Horizontal shift by up to ``max_shift`` of the width (default half the width).

    Parameters: ``shift`` (N,), signed fraction of the width; positive moves the
    content right.
    """

    axis = 0

    kink_at_zero = True

    def __init__(self, max_shift: float = 0.5, padding: str = "zeros") -> None:
        super().__init__(padding)
        self.max_shift = positive("max_shift", max_shift)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"shift": magnitude * self.max_shift * uniform(n, x, generator)}

    def taps(self, params):
        t = params["shift"]
        one, zero = torch.ones_like(t), torch.zeros_like(t)
        shift = -2.0 * t  # a fraction f of the size is 2f in normalised units; output reads at p - shift
        if self.axis == 0:
            return _one_tap(_affine(one, zero, zero, one, tx=shift))
        return _one_tap(_affine(one, zero, zero, one, ty=shift))

    def natural_range(self, magnitude, size=None):
        r = float(magnitude) * self.max_shift
        if size is not None:
            extent = size[-1] if self.axis == 0 else size[-2]
            return Range(-r * extent, r * extent, "px")
        return Range(-100 * r, 100 * r, "% of size")

    def extra_repr(self):
        return ", ".join(filter(None, [f"max_shift={self.max_shift}", super().extra_repr()]))


class TranslateY(TranslateX):
    """Vertical shift by up to ``max_shift`` of the height (default half the height).

    Parameters: ``shift`` (N,), signed fraction of the height; positive moves the
    content down.
    """

    axis = 1


class Rotate(_ImageTransform):
    """Rotation about the image centre by up to ``max_angle`` radians (default ±pi).

    Parameters: ``angle`` (N,) in radians, positive is counter-clockwise on
    screen; ``aspect`` (N,) the image's H / W.
    """

    kink_at_zero = True

    def __init__(self, max_angle: float = math.pi, padding: str = "zeros") -> None:
        super().__init__(padding)
        self.max_angle = positive("max_angle", max_angle)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"angle": magnitude * self.max_angle * uniform(n, x, generator), "aspect": _aspect(x, n)}

    def taps(self, params):
        a, r = params["angle"], params["aspect"]
        cos, sin = torch.cos(a), torch.sin(a)
        # Pixel units (y down): input = [[cos, -sin], [sin, cos]] @ output.
        # Normalised coordinates scale x by 2/W and y by 2/H.
        return _one_tap(_affine(cos, -sin * r, sin / r, cos))

    def natural_range(self, magnitude, size=None):
        d = math.degrees(float(magnitude) * self.max_angle)
        return Range(-d, d, "deg")

    def extra_repr(self):
        return ", ".join(filter(None, [f"max_angle={self.max_angle:.4g}", super().extra_repr()]))


class ShearX(_ImageTransform):
    """Horizontal shear with coefficient up to ``max_shear`` (default ±0.3).

    The output at pixel ``(x, y)`` (centred) reads the input at ``(x + s * y, y)``.
    Parameters: ``shear`` (N,), ``aspect`` (N,).
    """

    axis = 0

    kink_at_zero = True

    def __init__(self, max_shear: float = 0.3, padding: str = "zeros") -> None:
        super().__init__(padding)
        self.max_shear = positive("max_shear", max_shear)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"shear": magnitude * self.max_shear * uniform(n, x, generator), "aspect": _aspect(x, n)}

    def taps(self, params):
        s, r = params["shear"], params["aspect"]
        one, zero = torch.ones_like(s), torch.zeros_like(s)
        if self.axis == 0:
            return _one_tap(_affine(one, s * r, zero, one))
        return _one_tap(_affine(one, zero, s / r, one))

    def natural_range(self, magnitude, size=None):
        r = float(magnitude) * self.max_shear
        return Range(-r, r, "")

    def extra_repr(self):
        return ", ".join(filter(None, [f"max_shear={self.max_shear}", super().extra_repr()]))


class ShearY(ShearX):
    """Vertical shear with coefficient up to ``max_shear`` (default ±0.3).

    The output at pixel ``(x, y)`` (centred) reads the input at ``(x, y + s * x)``.
    """

    axis = 1


class Scale(_ImageTransform):
    """Zoom by a factor drawn log-uniformly in ``[1 / max_zoom**mu, max_zoom**mu]`` (default 2).

    Parameters: ``zoom`` (N,); a zoom above 1 magnifies the content.
    """

    kink_at_zero = True

    def __init__(self, max_zoom: float = 2.0, padding: str = "zeros") -> None:
        super().__init__(padding)
        if positive("max_zoom", max_zoom) <= 1.0:
            raise ValueError(f"max_zoom must be > 1, got {max_zoom}")
        self.max_zoom = float(max_zoom)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"zoom": torch.exp(magnitude * math.log(self.max_zoom) * uniform(n, x, generator))}

    def taps(self, params):
        inv = 1.0 / params["zoom"]
        zero = torch.zeros_like(inv)
        return _one_tap(_affine(inv, zero, zero, inv))

    def natural_range(self, magnitude, size=None):
        z = self.max_zoom ** float(magnitude)
        return Range(1.0 / z, z, "x zoom")

    def extra_repr(self):
        return ", ".join(filter(None, [f"max_zoom={self.max_zoom}", super().extra_repr()]))


# --------------------------------------------------------------------------- flips


class HorizontalFlip(_ImageTransform):
    """Left-right flip with probability ``mu`` (a straight-through relaxed Bernoulli).

    Each row draws ``u ~ U(0, 1)`` and flips when ``u < mu``. The forward value
    of the gate is that hard decision (so a copy is flipped or not, never a
    blend, and ``mu = 0`` is exactly the identity); its gradient is that of the
    relaxation ``sigmoid((mu - u) / temperature)``, which stays alive at
    ``mu = 0`` and ``mu = 1``. Two taps: flipped with weight ``gate``, plain
    with weight ``1 - gate``.

    Parameters: ``gate`` (N,) in {0, 1} (with a gradient to ``mu``).
    """

    flip = (-1.0, 1.0)

    def __init__(self, temperature: float = 0.1, padding: str = "zeros") -> None:
        super().__init__(padding)
        self.temperature = positive("temperature", temperature)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"gate": relaxed_bernoulli((n,), x, magnitude, self.temperature, generator)}

    def taps(self, params):
        g = params["gate"]
        n = g.shape[0]
        eye = torch.eye(2, 3, dtype=g.dtype, device=g.device)
        flipped = eye.clone()
        flipped[0, 0], flipped[1, 1] = self.flip
        affine = torch.stack([flipped, eye]).expand(n, 2, 2, 3)
        return Taps(torch.stack([g, 1.0 - g], 1), affine)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude), "probability")

    def extra_repr(self):
        return ", ".join(filter(None, [f"temperature={self.temperature}", super().extra_repr()]))


class VerticalFlip(HorizontalFlip):
    """Top-bottom flip with probability ``mu`` (see :class:`HorizontalFlip`)."""

    flip = (1.0, -1.0)


# --------------------------------------------------------------------------- colour


def _color(m: Tensor, bias: Tensor) -> Tensor:
    """(N, Ch, Ch) matrices and (N, Ch) biases -> (N, Ch, Ch + 1) colour maps."""
    return torch.cat([m, bias[..., None]], -1)


class Brightness(_ImageTransform):
    """Additive brightness shift up to ``max_shift`` (default ±0.5 for images in [0, 1]).

    Parameters: ``shift`` (N, Ch), the same shift for every channel of a row.
    """

    def __init__(self, max_shift: float = 0.5) -> None:
        super().__init__()
        self.max_shift = positive("max_shift", max_shift)

    def sample(self, x, magnitude, generator=None, copies=1):
        n, ch = x.shape[0] * copies, x.shape[1]
        shift = magnitude * self.max_shift * uniform(n, x, generator)
        return {"shift": shift[:, None].expand(n, ch)}

    def taps(self, params):
        s = params["shift"]
        n, ch = s.shape
        eye = torch.eye(ch, dtype=s.dtype, device=s.device).expand(n, ch, ch)
        return _one_tap(color=_color(eye, s))

    def natural_range(self, magnitude, size=None):
        r = float(magnitude) * self.max_shift
        return Range(-r, r, "shift")

    def extra_repr(self):
        return f"max_shift={self.max_shift}"


def _gray(x: Tensor) -> Tensor:
    """Grey level (B, H, W): luma for RGB, the channel mean otherwise."""
    if x.shape[1] == 3:
        w = torch.tensor(LUMA, dtype=x.dtype, device=x.device)
        return torch.einsum("c,bchw->bhw", w, x)
    return x.mean(1)


class Contrast(_ImageTransform):
    """Contrast factor in ``[1 - max_delta * mu, 1 + max_delta * mu]`` (default [0.1, 1.9] at mu = 1).

    ``out = f * x + (1 - f) * m`` with ``m`` the image's mean grey level,
    computed at sampling time (it is a parameter, and carries a gradient to x).
    Parameters: ``factor`` (N,), ``mean`` (N, Ch), the grey mean repeated per channel.
    """

    def __init__(self, max_delta: float = 0.9) -> None:
        super().__init__()
        self.max_delta = positive("max_delta", max_delta)

    def sample(self, x, magnitude, generator=None, copies=1):
        b = x.shape[0]
        n = b * copies
        factor = 1.0 + magnitude * self.max_delta * uniform(n, x, generator)
        mean = _gray(x).mean((1, 2)).to(factor.dtype)
        return {"factor": factor, "mean": mean.repeat(copies)[:, None].expand(n, x.shape[1])}

    def taps(self, params):
        f, m = params["factor"], params["mean"]
        ch = m.shape[1]
        eye = torch.eye(ch, dtype=f.dtype, device=f.device)
        return _one_tap(color=_color(f[:, None, None] * eye, (1.0 - f)[:, None] * m))

    def natural_range(self, magnitude, size=None):
        r = float(magnitude) * self.max_delta
        return Range(1.0 - r, 1.0 + r, "factor")

    def extra_repr(self):
        return f"max_delta={self.max_delta}"


class Saturation(_RGBTransform):
    """Saturation factor in ``[1 - max_delta * mu, 1 + max_delta * mu]`` (RGB only).

    ``out = f * x + (1 - f) * grey(x)`` per pixel, a 3x3 colour matrix.
    Parameters: ``factor`` (N,).
    """

    def __init__(self, max_delta: float = 0.9) -> None:
        super().__init__()
        self.max_delta = positive("max_delta", max_delta)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"factor": 1.0 + magnitude * self.max_delta * uniform(n, x, generator)}

    def taps(self, params):
        f = params["factor"]
        eye = torch.eye(3, dtype=f.dtype, device=f.device)
        gray = torch.tensor(LUMA, dtype=f.dtype, device=f.device).expand(3, 3)  # every row = luma
        m = f[:, None, None] * eye + (1.0 - f)[:, None, None] * gray
        return _one_tap(color=_color(m, torch.zeros_like(m[..., 0])))

    def natural_range(self, magnitude, size=None):
        r = float(magnitude) * self.max_delta
        return Range(1.0 - r, 1.0 + r, "factor")

    def extra_repr(self):
        return f"max_delta={self.max_delta}"


class Hue(_RGBTransform):
    """Hue rotation by up to ``max_angle`` radians (default ±pi), RGB only.

    A rotation of the RGB cube about its grey diagonal (Rodrigues' formula):
    grey levels are unchanged, and a rotation by 2*pi/3 maps red to green,
    green to blue and blue to red. Parameters: ``angle`` (N,).
    """

    def __init__(self, max_angle: float = math.pi) -> None:
        super().__init__()
        self.max_angle = positive("max_angle", max_angle)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"angle": magnitude * self.max_angle * uniform(n, x, generator)}

    def taps(self, params):
        a = params["angle"]
        dt, dev = a.dtype, a.device
        eye = torch.eye(3, dtype=dt, device=dev)
        cross = torch.tensor([[0.0, -1.0, 1.0], [1.0, 0.0, -1.0], [-1.0, 1.0, 0.0]], dtype=dt, device=dev)
        cross = cross / math.sqrt(3.0)
        outer = torch.full((3, 3), 1.0 / 3.0, dtype=dt, device=dev)
        c, s = torch.cos(a)[:, None, None], torch.sin(a)[:, None, None]
        m = c * eye + s * cross + (1.0 - c) * outer
        return _one_tap(color=_color(m, torch.zeros_like(m[..., 0])))

    def natural_range(self, magnitude, size=None):
        d = math.degrees(float(magnitude) * self.max_angle)
        return Range(-d, d, "deg")

    def extra_repr(self):
        return f"max_angle={self.max_angle:.4g}"


# --------------------------------------------------------------------------- colour maps applied with probability mu


class _GatedColor(_ImageTransform):
    """A colour map applied with probability ``mu``, gated like :class:`HorizontalFlip`.

    Each row draws ``u ~ U(0, 1)``; its gate is the hard decision ``u < mu``
    with the gradient of ``sigmoid((mu - u) / temperature)`` (straight-through
    relaxed Bernoulli). Two taps: the mapped image with weight ``gate``, the
    plain one with weight ``1 - gate``, so ``mu = 0`` is exactly the identity.
    Subclasses give the map, :meth:`_color_map`, from per-row parameters
    (:meth:`_map_params`, which may read the input).
    """

    def __init__(self, temperature: float = 0.1) -> None:
        super().__init__()
        self.temperature = positive("temperature", temperature)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        gate = relaxed_bernoulli((n,), x, magnitude, self.temperature, generator)
        return {"gate": gate, **self._map_params(x, copies, gate.dtype)}

    def _map_params(self, x: Tensor, copies: int, dtype: torch.dtype) -> dict[str, Tensor]:
        return {}

    def _color_map(self, params: dict[str, Tensor]) -> Tensor:
        """The (N, Ch, Ch + 1) colour maps ``[M | b]`` of the mapped tap."""
        raise NotImplementedError

    def taps(self, params):
        g = params["gate"]
        mapped = self._color_map(params)
        plain = identity_color(g.shape[0], 1, mapped.shape[1], mapped.dtype, mapped.device)[:, 0]
        return Taps(torch.stack([g, 1.0 - g], 1), None, torch.stack([mapped, plain], 1))

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude), "probability")

    def extra_repr(self):
        return f"temperature={self.temperature}"


class Invert(_GatedColor):
    """Inversion ``x -> 1 - x`` with probability ``mu`` (straight-through relaxed Bernoulli gate).

    Magnitude 1 inverts every image. Any channel count.

    Parameters: ``gate`` (N,) in {0, 1}; ``bias`` (N, Ch), ones (the map's constant term).
    """

    def _map_params(self, x, copies, dtype):
        return {"bias": torch.ones(x.shape[0] * copies, x.shape[1], dtype=dtype, device=x.device)}

    def _color_map(self, params):
        bias = params["bias"]
        n, ch = bias.shape
        eye = torch.eye(ch, dtype=bias.dtype, device=bias.device).expand(n, ch, ch)
        return _color(-eye, bias)


class Gray(_GatedColor, _RGBTransform):
    """Conversion to grey levels with probability ``mu``, RGB only (straight-through relaxed Bernoulli gate).

    The grey level is the ITU-R BT.601 luma ``0.299 R + 0.587 G + 0.114 B``
    (kornia's weights; torchvision's red weight is 0.2989), written to all
    three channels. Magnitude 1 turns every image grey.

    Parameters: ``gate`` (N,) in {0, 1}.
    """

    def _color_map(self, params):
        g = params["gate"]
        luma = torch.tensor(LUMA, dtype=g.dtype, device=g.device).expand(g.shape[0], 3, 3)  # every row = luma
        return _color(luma, torch.zeros_like(luma[..., 0]))


class AutoContrast(_GatedColor):
    """Per image and channel, the affine map of the range [min, max] onto [0, 1], with probability ``mu``.

    As torchvision's ``autocontrast``: ``out = (x - min) / (max - min)`` per image
    and channel, and a constant channel (``max == min``) is left unchanged. The
    minimum and maximum are computed at sampling time from ``x`` (they are
    parameters, and carry a gradient to ``x``), so the map is an affine colour
    map applied as taps. Not clipped: for images in [0, 1] the output is in [0, 1]
    anyway. Magnitude 1 stretches every image. Any channel count.

    Parameters: ``gate`` (N,) in {0, 1}; ``offset`` (N, Ch), the minimum (0 for a
    constant channel); ``scale`` (N, Ch), ``1 / (max - min)`` (1 for a constant channel).
    """

    def _map_params(self, x, copies, dtype):
        low, high = x.amin((2, 3)).to(dtype), x.amax((2, 3)).to(dtype)  # (B, Ch)
        spread = high - low
        flat = spread <= 0  # constant channels: left unchanged, as torchvision does
        # (the floor on the spread only keeps a subnormal spread from giving an infinite scale)
        scale = torch.where(flat, torch.ones_like(spread), 1.0 / spread.clamp_min(torch.finfo(dtype).tiny))
        offset = torch.where(flat, torch.zeros_like(low), low)
        return {"offset": offset.repeat(copies, 1), "scale": scale.repeat(copies, 1)}

    def _color_map(self, params):
        scale, offset = params["scale"], params["offset"]
        return _color(torch.diag_embed(scale), -offset * scale)


# --------------------------------------------------------------------------- non-affine operations


class Solarize(_ImageTransform):
    """Inversion of the pixels above a threshold drawn in ``[1 - mu * (1 - min_threshold), 1]``.

    ``out = 1 - x`` where ``x > threshold``, else ``x``, per pixel and channel,
    with ``threshold = 1 - mu * (1 - min_threshold) * u``, ``u ~ U(0, 1)`` per row.
    Magnitude 1 draws thresholds down to ``min_threshold`` (default 0, where the
    whole image is inverted); magnitude 0 gives threshold 1, where a row is left
    unchanged (also its values above 1). torchvision and kornia invert pixels *at*
    the threshold too; the two differ only for pixels exactly on it.

    The threshold is a step: the output's value is the hard threshold, its
    gradient in the magnitude that of the relaxation
    ``x + sigmoid((x - threshold) / temperature) * (1 - 2 x)`` (a straight-through
    estimate, alive at ``mu = 0``); its gradient in ``x`` is the exact one (+1 or -1).

    Parameters: ``threshold`` (N,).
    """

    def __init__(self, min_threshold: float = 0.0, temperature: float = 0.1) -> None:
        super().__init__()
        if isinstance(min_threshold, bool) or not isinstance(min_threshold, (int, float)):
            raise TypeError(f"min_threshold must be a number, got {min_threshold!r}")
        if not 0.0 <= min_threshold < 1.0:
            raise ValueError(f"min_threshold must lie in [0, 1), got {min_threshold!r}")
        self.min_threshold = float(min_threshold)
        self.temperature = positive("temperature", temperature)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        depth = magnitude * (1.0 - self.min_threshold) * uniform(n, x, generator, 0.0, 1.0)
        return {"threshold": 1.0 - depth}

    def apply_transform(self, x, params):
        t = params["threshold"]
        rows = repeat_rows(x, t.shape[0])
        t = t.to(rows.dtype)[:, None, None, None]
        hard = torch.where((rows > t) & (t < 1.0), 1.0 - rows, rows)
        plain = rows.detach()
        soft = torch.sigmoid((plain - t) / self.temperature) * (1.0 - 2.0 * plain)
        return hard + (soft - soft.detach())  # the hard value; the relaxation's gradient in the threshold

    def natural_range(self, magnitude, size=None):
        return Range(1.0 - float(magnitude) * (1.0 - self.min_threshold), 1.0, "threshold")

    def extra_repr(self):
        return f"min_threshold={self.min_threshold}, temperature={self.temperature}"


#: Slack, in 8-bit levels, under which a value counts as on a level when posterizing (float rounding of k / 255).
POSTERIZE_SLACK = 1e-3


def _posterize(x: Tensor, removed: Tensor) -> Tensor:
    """``x`` (N, Ch, H, W) with ``removed`` (N,) low bits of its 8-bit levels cleared (0: ``x`` itself).

    On 8-bit images (multiples of 1/255) this is PIL's and torchvision's uint8
    posterize, ``(255 x) & mask``, back in [0, 1]; other values round down to a
    multiple of ``2**removed / 255``.
    """
    removed = removed.to(x.dtype)[:, None, None, None]
    scale = torch.exp2(removed)
    kept = torch.floor((x * 255.0 + POSTERIZE_SLACK) / scale) * scale / 255.0
    return torch.where(removed > 0, kept, x)


class Posterize(_ImageTransform):
    """Removal of up to ``mu * max_bits`` low bits of the 8-bit levels (default up to 4 of 8 bits).

    Each row draws a continuous bit count ``r = mu * max_bits * u``, ``u ~ U(0, 1)``,
    and removes ``k`` bits, ``k`` the stochastic rounding of ``r`` (``floor(r) + 1``
    with probability ``r - floor(r)``, so ``E[k] = r``); removing 0 bits is the
    identity, so ``mu = 0`` is. On images that are multiples of 1/255 this is
    torchvision's posterize of the uint8 image keeping ``8 - k`` bits.

    Straight-through estimates: the gradient in the magnitude is that of the
    linear interpolation between the images with ``floor(r)`` and
    ``floor(r) + 1`` bits removed (alive at ``mu = 0``); the gradient in ``x`` is
    the identity (the quantisation itself is a step).

    Parameters: ``bits`` (N,), the continuous bit count ``r``; ``dither`` (N,) in
    [0, 1), the draw of the stochastic rounding.
    """

    def __init__(self, max_bits: int = 4) -> None:
        super().__init__()
        if isinstance(max_bits, bool) or not isinstance(max_bits, int):
            raise TypeError(f"max_bits must be an int, got {max_bits!r}")
        if not 1 <= max_bits <= 8:
            raise ValueError(f"max_bits must lie in [1, 8] (bits of an 8-bit level), got {max_bits!r}")
        self.max_bits = max_bits

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        bits = magnitude * self.max_bits * uniform(n, x, generator, 0.0, 1.0)
        return {"bits": bits, "dither": uniform(n, x, generator, 0.0, 1.0)}

    @staticmethod
    def removed_bits(params: dict[str, Tensor]) -> Tensor:
        """(N,) the whole number of bits each row removes (the stochastic rounding of ``bits``)."""
        r = params["bits"].detach()
        low = torch.floor(r)
        return low + (params["dither"] < r - low).to(r.dtype)

    def bits_distribution(self, magnitude: float) -> dict[int, float]:
        """The probability of removing each whole number of bits at ``magnitude``, ``{bits: probability}``.

        With ``r ~ U(0, R)``, ``R = magnitude * max_bits``, stochastic rounding
        removes ``k`` bits with probability ``max(0, 1 - |r - k|)`` given ``r``,
        so ``P(k) = (1 / R) * integral over [0, R] of max(0, 1 - |r - k|) dr``.

        Examples:
            >>> Posterize(max_bits=4).bits_distribution(0.25)  # r ~ U(0, 1)
            {0: 0.5, 1: 0.5}
        """

        def below(t: float) -> float:  # the integral of max(0, 1 - |s|) over s < t
            if t <= -1.0:
                return 0.0
            if t <= 0.0:
                return (t + 1.0) ** 2 / 2.0
            if t <= 1.0:
                return 1.0 - (1.0 - t) ** 2 / 2.0
            return 1.0

        top = float(magnitude) * self.max_bits
        if top <= 0.0:
            return {0: 1.0}
        return {k: (below(top - k) - below(-k)) / top for k in range(math.ceil(top) + 1)}

    def apply_transform(self, x, params):
        r = params["bits"]
        rows = repeat_rows(x, r.shape[0])
        plain = rows.detach()
        hard = _posterize(plain, self.removed_bits(params))
        low = torch.floor(r.detach())
        below, above = _posterize(plain, low), _posterize(plain, low + 1.0)
        soft = below + (r - low).to(rows.dtype)[:, None, None, None] * (above - below)
        # The hard value; the gradient of the interpolation in r, and the identity in x.
        return hard + (rows - plain) + (soft - soft.detach())

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude) * self.max_bits, "bits removed")

    def extra_repr(self):
        return f"max_bits={self.max_bits}"


def _equalize(x: Tensor) -> Tensor:
    """Histogram equalisation per image and channel of ``x`` (N, Ch, H, W), as torchvision's ``equalize``.

    The values are binned to 8-bit levels as torchvision converts float images
    to uint8 (``floor(255.999 x)``, clamped to [0, 255]); the look-up table is
    PIL's (``(cdf[k - 1] + step // 2) // step`` with ``step`` the pixels outside
    the highest occupied level, over 255); a channel with ``step == 0`` keeps its
    levels. The result is the looked-up level over 255. No gradient.
    """
    n, ch = x.shape[:2]
    # (NaN counts as level 0 here; the caller's straight-through term carries it to the output)
    levels = torch.floor(x.detach().nan_to_num(0.0) * 255.999).clamp(0, 255).long().flatten(2)  # (N, Ch, P)
    hist = torch.zeros(n, ch, 256, dtype=torch.long, device=x.device)
    hist = hist.scatter_add(2, levels, torch.ones_like(levels))
    cdf = hist.cumsum(2)
    top = cdf.argmax(2, keepdim=True)  # the highest occupied level (the first that reaches the total)
    step = (levels.shape[2] - hist.gather(2, top)).div(255, rounding_mode="floor")  # (N, Ch, 1)
    lut = (cdf[..., :-1] + step // 2).div(step.clamp_min(1), rounding_mode="floor").clamp(0, 255)
    lut = torch.cat([torch.zeros_like(lut[..., :1]), lut], 2)  # level 0 always maps to 0
    out = torch.where(step > 0, lut.gather(2, levels), levels)
    return (out.to(x.dtype) / 255.0).view_as(x)


class Equalize(_ImageTransform):
    """Histogram equalisation per image and channel with probability ``mu`` (relaxed Bernoulli gate).

    The equalisation is torchvision's (PIL's) on the image's 8-bit levels
    (see :func:`_equalize`); on images that are multiples of 1/255 it equals
    ``torchvision.transforms.v2.functional.equalize`` of the uint8 image. Each
    row is ``gate * equalize(x) + (1 - gate) * x`` with the straight-through
    relaxed Bernoulli gate of :class:`HorizontalFlip`, so ``mu = 0`` is the
    identity and the gradient in the magnitude is ``equalize(x) - x`` times the
    gate's. Equalisation is a step function of ``x``: the gradient in ``x``
    through the equalised branch is the straight-through identity.

    Parameters: ``gate`` (N,) in {0, 1}.
    """

    def __init__(self, temperature: float = 0.1) -> None:
        super().__init__()
        self.temperature = positive("temperature", temperature)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"gate": relaxed_bernoulli((n,), x, magnitude, self.temperature, generator)}

    def apply_transform(self, x, params):
        g = params["gate"]
        rows = repeat_rows(x, g.shape[0])
        equalized = _equalize(rows) + (rows - rows.detach())  # the equalised value, the identity's gradient
        g = g.to(rows.dtype)[:, None, None, None]
        return g * equalized + (1.0 - g) * rows

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude), "probability")

    def extra_repr(self):
        return f"temperature={self.temperature}"


#: PIL's smoothing kernel (ImageFilter.SMOOTH), used by PIL's, torchvision's and kornia's sharpness.
SMOOTH = ((1.0, 1.0, 1.0), (1.0, 5.0, 1.0), (1.0, 1.0, 1.0))


def _smooth(x: Tensor) -> Tensor:
    """``x`` (N, Ch, H, W) filtered by :data:`SMOOTH` / 13 inside, its one-pixel border kept (as PIL does)."""
    ch, h, w = x.shape[1:]
    if h < 3 or w < 3:  # no inside
        return x
    kernel = torch.tensor(SMOOTH, dtype=x.dtype, device=x.device) / 13.0
    inside = F.conv2d(x, kernel.expand(ch, 1, 3, 3), groups=ch)  # (N, Ch, H - 2, W - 2)
    mask = torch.zeros(h, w, dtype=torch.bool, device=x.device)
    mask[1:-1, 1:-1] = True
    return torch.where(mask, F.pad(inside, (1, 1, 1, 1)), x)


class Sharpness(_ImageTransform):
    """Sharpness factor in ``[1 - max_delta * mu, 1 + max_delta * mu]`` (default [0.1, 1.9] at mu = 1).

    ``out = f * x + (1 - f) * smooth(x)``, with ``smooth`` PIL's 3x3 filter
    ``[[1, 1, 1], [1, 5, 1], [1, 1, 1]] / 13`` inside the image and the one-pixel
    border kept (as PIL, torchvision and kornia do): ``f < 1`` blurs, ``f > 1``
    sharpens, ``f = 1`` (``mu = 0``) is the identity. Linear in ``x`` and in ``f``,
    fully differentiable; not clipped (torchvision and kornia clip to [0, 1]).

    Parameters: ``factor`` (N,).
    """

    def __init__(self, max_delta: float = 0.9) -> None:
        super().__init__()
        self.max_delta = positive("max_delta", max_delta)
        if self.max_delta > 1.0:
            raise ValueError(f"max_delta must be at most 1 (a factor below 0 is not a sharpness), got {max_delta!r}")

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"factor": 1.0 + magnitude * self.max_delta * uniform(n, x, generator)}

    def apply_transform(self, x, params):
        f = params["factor"]
        rows = repeat_rows(x, f.shape[0])
        f = f.to(rows.dtype)[:, None, None, None]
        return f * rows + (1.0 - f) * _smooth(rows)

    def natural_range(self, magnitude, size=None):
        r = float(magnitude) * self.max_delta
        return Range(1.0 - r, 1.0 + r, "factor")

    def extra_repr(self):
        return f"max_delta={self.max_delta}"


# --------------------------------------------------------------------------- sample pairing


class SamplePairing(_ImageTransform):
    """Blend with another sample of the batch, with weight up to ``max_blend`` (default 0.5).

    ``out = (1 - l) * x_b + l * x_partner`` with ``l = mu * max_blend * u``,
    ``u ~ U(0, 1)``, and the partner a uniformly drawn other sample of the
    batch (the sample itself when the batch has one sample).
    Parameters: ``blend`` (N,), ``partner`` (N,) int64 index into the batch.
    """

    mixes_samples = True

    def __init__(self, max_blend: float = 0.5) -> None:
        super().__init__()
        self.max_blend = positive("max_blend", max_blend)

    def sample(self, x, magnitude, generator=None, copies=1):
        b = x.shape[0]
        n = b * copies
        blend = magnitude * self.max_blend * uniform(n, x, generator, 0.0, 1.0)
        own = torch.arange(n, device=x.device) % max(b, 1)
        if b > 1:
            offset = draw(torch.randint, 1, b, (n,), generator=generator, device=x.device)
            partner = (own + offset) % b
        else:
            partner = own
        return {"blend": blend, "partner": partner, "own": own}

    def taps(self, params):
        lam = params["blend"]
        weight = torch.stack([1.0 - lam, lam], 1)
        src = torch.stack([params["own"], params["partner"]], 1)
        return Taps(weight, src=src)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude) * self.max_blend, "blend")

    def extra_repr(self):
        return f"max_blend={self.max_blend}"


#: The five geometric transforms of the AugNet paper's rotation experiment.
GEOMETRIC = (TranslateX, TranslateY, Rotate, ShearX, ShearY)
