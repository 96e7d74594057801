"""Affine colour maps: brightness, contrast, saturation, hue, and the gated maps Invert, Gray, AutoContrast.

Each is a colour map ``[M | b]`` applied as taps of ``tap_mix``; the gated
maps apply theirs with probability ``mu`` (two taps, the mapped and the plain image).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from augnet.ops.constants import device_constant
from augnet.ops.taps import Taps, identity_color
from augnet.transforms._ranges import angle, at_most_one, drawn_range
from augnet.transforms.base import Range, check_temperature, relaxed_bernoulli, uniform
from augnet.transforms.image._common import LUMA, _color, _gray, _ImageTransform, _one_tap, _RGBTransform

__all__ = ["AutoContrast", "Brightness", "Contrast", "Gray", "Hue", "Invert", "Saturation"]


class Brightness(_ImageTransform):
    """Additive brightness shift up to ``max_shift`` (default ±0.5 for images in [0, 1]).

    Parameters: ``shift`` (N, Ch), the same shift for every channel of a row.

    Args:
        max_shift: the largest shift at magnitude 1, in the images' units (default 0.5).

    Raises:
        ValueError: a ``max_shift`` that is not a positive number within float32's range.
    """

    def __init__(self, max_shift: float = 0.5) -> None:
        super().__init__()
        self.max_shift = drawn_range("max_shift", max_shift)

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


#: Why Contrast's and Saturation's ``max_delta`` is at most 1.
_NEGATIVE_FACTOR = (
    "at magnitude 1 the factor 1 - max_delta would be negative, which inverts the image about its grey level "
    "rather than lowering its {what} (torchvision's and kornia's factors are >= 0 too)"
)


class Contrast(_ImageTransform):
    """Contrast factor in ``[1 - max_delta * mu, 1 + max_delta * mu]`` (default [0.1, 1.9] at mu = 1).

    ``out = f * x + (1 - f) * m`` with ``m`` the image's mean grey level,
    computed at sampling time (it is a parameter, and carries a gradient to x).
    A row whose mean is not finite (an image with a NaN or infinite pixel)
    is left as it is: its bad pixels stay, and the fused op gets a finite
    map (it refuses non-finite maps as bad parameters).
    The grey level is the ITU-R BT.601 luma on 3 channels, the value on 1, and on any other channel count the
    mean over all channels (on a feature map of 64 channels, every channel is blended towards the one mean of
    all 64, not its own). Values of any range.
    Parameters: ``factor`` (N,), ``mean`` (N, Ch), the grey mean repeated per channel.

    Args:
        max_delta: the largest change of the factor at magnitude 1 (in (0, 1], default 0.9): the factor stays
            at or above 0 (0: a grey image of the mean); a negative factor would invert the image about its mean.

    Raises:
        ValueError: a ``max_delta`` that is not a number in (0, 1] (below float32's smallest normal number, the
            factor was drawn as 1).
    """

    def __init__(self, max_delta: float = 0.9) -> None:
        super().__init__()
        self.max_delta = at_most_one("max_delta", max_delta, _NEGATIVE_FACTOR.format(what="contrast"))

    def sample(self, x, magnitude, generator=None, copies=1):
        b = x.shape[0]
        n = b * copies
        factor = 1.0 + magnitude * self.max_delta * uniform(n, x, generator)
        mean = _gray(x.to(factor.dtype)).mean((1, 2))  # in the parameters' dtype: float32 for half-precision images
        return {"factor": factor, "mean": mean.repeat(copies)[:, None].expand(n, x.shape[1])}

    def taps(self, params):
        f, m = params["factor"], params["mean"]
        ch = m.shape[1]
        ok = torch.isfinite(m).all(1)  # a mean taken from data that are not finite: that row left as it is
        f, m = torch.where(ok, f, torch.ones_like(f)), torch.where(ok[:, None], m, torch.zeros_like(m))
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

    Args:
        max_delta: the largest change of the factor at magnitude 1 (in (0, 1], default 0.9): the factor stays
            at or above 0 (0: the grey image); a negative factor would turn colours to their complements.

    Raises:
        ValueError: a ``max_delta`` that is not a number in (0, 1] (below float32's smallest normal number, the
            factor was drawn as 1); at a call, an input without 3 channels.
    """

    def __init__(self, max_delta: float = 0.9) -> None:
        super().__init__()
        self.max_delta = at_most_one("max_delta", max_delta, _NEGATIVE_FACTOR.format(what="saturation"))

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"factor": 1.0 + magnitude * self.max_delta * uniform(n, x, generator)}

    def taps(self, params):
        f = params["factor"]
        eye = torch.eye(3, dtype=f.dtype, device=f.device)
        gray = device_constant(LUMA, f.dtype, f.device).expand(3, 3)  # every row = luma
        m = f[:, None, None] * eye + (1.0 - f)[:, None, None] * gray
        return _one_tap(color=_color(m, torch.zeros_like(m[..., 0])))

    def natural_range(self, magnitude, size=None):
        r = float(magnitude) * self.max_delta
        return Range(1.0 - r, 1.0 + r, "factor")

    def extra_repr(self):
        return f"max_delta={self.max_delta}"


#: The cross-product matrix of the grey diagonal (1, 1, 1) (times sqrt(3)): Hue's rotation generator.
_CROSS = ((0.0, -1.0, 1.0), (1.0, 0.0, -1.0), (-1.0, 1.0, 0.0))


class Hue(_RGBTransform):
    """Hue rotation by up to ``max_angle`` radians (default ±pi), RGB only.

    A rotation of the RGB cube about its grey diagonal (Rodrigues' formula):
    grey pixels (R = G = B) are unchanged, and every pixel keeps its channel
    mean ``(R + G + B) / 3`` and its distance to the diagonal, but not its luma
    (the grey level of :class:`Contrast` and :class:`Gray`: a turn by 2*pi/3
    takes pure red's 0.299 to 0.587). Positive angles turn red towards green; a
    rotation by 2*pi/3 maps red to green, green to blue and blue to red.
    Parameters: ``angle`` (N,).

    Args:
        max_angle: the largest angle at magnitude 1, in radians, not degrees (default pi: ±180 degrees, every
            hue; for ±30 degrees pass ``math.radians(30)``).

    Raises:
        ValueError: a ``max_angle`` that is not a positive number within float32's range; at a call, an input
            without 3 channels.

    Warns:
        UserWarning: a ``max_angle`` above a full turn, ``2 * pi`` (surely meant in degrees).
    """

    def __init__(self, max_angle: float = math.pi) -> None:
        super().__init__()
        self.max_angle = angle(type(self).__name__, "max_angle", max_angle)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"angle": magnitude * self.max_angle * uniform(n, x, generator)}

    def taps(self, params):
        a = params["angle"]
        dt, dev = a.dtype, a.device
        eye = torch.eye(3, dtype=dt, device=dev)
        cross = device_constant(_CROSS, dt, dev) / math.sqrt(3.0)
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
        self.temperature = check_temperature("temperature", temperature)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        gate = relaxed_bernoulli((n,), x, magnitude, self.temperature, generator)
        return {"gate": gate, **self._map_params(x, copies, gate.dtype)}

    def _map_params(self, x: Tensor, copies: int, dtype: torch.dtype) -> dict[str, Tensor]:
        return {}

    def _color_map(self, params: dict[str, Tensor]) -> Tensor:
        """The (N, Ch, Ch + 1) colour maps ``[M | b]`` of the mapped tap."""
        raise NotImplementedError(f"{type(self).__name__} must implement _color_map()")

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

    Magnitude 1 inverts every image. Any channel count, but values in [0, 1]: on other values (a feature map
    inside a model, normalised images) ``1 - x`` means nothing, and a call on the CPU warns once (``UserWarning``).

    Parameters: ``gate`` (N,) in {0, 1}; ``bias`` (N, Ch), ones (the map's constant term).

    Args:
        temperature: the gate relaxation's temperature, which shapes the gradient only (> 0, default 0.1).

    Raises:
        ValueError: a ``temperature`` that is not a positive finite number.
    """

    def _map_params(self, x, copies, dtype):
        self._check_unit_range(x, "1 - x")
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

    Args:
        temperature: the gate relaxation's temperature, which shapes the gradient only (> 0, default 0.1).

    Raises:
        ValueError: a ``temperature`` that is not a positive finite number; at a call, an input without 3 channels.
    """

    def _color_map(self, params):
        g = params["gate"]
        luma = device_constant(LUMA, g.dtype, g.device).expand(g.shape[0], 3, 3)  # every row = luma
        return _color(luma, torch.zeros_like(luma[..., 0]))


class AutoContrast(_GatedColor):
    """Per image and channel, the affine map of the range [min, max] onto [0, 1], with probability ``mu``.

    As torchvision's ``autocontrast``: ``out = (x - min) / (max - min)`` per image
    and channel, and a constant channel (``max == min``) is left unchanged. The
    minimum and maximum are computed at sampling time from ``x`` (they are
    parameters, and carry a gradient to ``x``), so the map is an affine colour
    map applied as taps. Not clipped: for images in [0, 1] the output is in [0, 1]
    anyway, to rounding: the map is ``x * scale - min * scale``, so a channel's
    maximum may come out one unit in the last place above 1 (1.0000001 in
    float32, 1 + 2.2e-16 in float64), and through a layer's fused warp its
    minimum a rounding below 0 (-1e-8 in float32). Magnitude 1 stretches every
    image. Any channel count.

    A channel whose range is not finite (a NaN or infinite pixel) is left as it
    is, as a constant channel is: its bad pixels stay, and the fused op gets a
    finite map.

    Parameters: ``gate`` (N,) in {0, 1}; ``offset`` (N, Ch), the minimum (0 for a
    constant channel); ``scale`` (N, Ch), ``1 / (max - min)`` (1 for a constant channel).

    Args:
        temperature: the gate relaxation's temperature, which shapes the gradient only (> 0, default 0.1).

    Raises:
        ValueError: a ``temperature`` that is not a positive finite number.
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
        ok = torch.isfinite(scale) & torch.isfinite(offset) & (scale != 0)  # a range taken from bad data: kept
        scale = torch.where(ok, scale, torch.ones_like(scale))
        offset = torch.where(ok, offset, torch.zeros_like(offset))
        return _color(torch.diag_embed(scale), -offset * scale)
