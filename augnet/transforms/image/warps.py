"""Geometric warps and flips: affine maps of the sampling grid, each one or two taps of ``tap_mix``.

Translations, rotation, shears and zoom (one tap each) and the left-right and
top-bottom flips (two taps, gated by a straight-through relaxed Bernoulli).
"""

from __future__ import annotations

import math

import torch

from augnet.ops.constants import device_constant
from augnet.ops.taps import Taps
from augnet.transforms._ranges import angle, drawn_range
from augnet.transforms.base import Range, check_temperature, positive, relaxed_bernoulli, uniform
from augnet.transforms.image._common import _affine, _aspect, _ImageTransform, _one_tap

__all__ = ["HorizontalFlip", "Rotate", "Scale", "ShearX", "ShearY", "TranslateX", "TranslateY", "VerticalFlip"]


# --------------------------------------------------------------------------- geometric


class TranslateX(_ImageTransform):
    """Horizontal shift by up to ``max_shift`` of the width (default a quarter of the width).

    A quarter keeps at least three quarters of the content in view at magnitude 1. The default was
    half the width until the comparison with hand-designed policies (the reproducing guide): at
    half, AugNet's selection committed the handwritten digits to shifts that move half of a digit
    out of view. Pass ``max_shift=0.5`` for the old range.

    Parameters: ``shift`` (N,), signed fraction of the width; positive moves the
    content right.

    Args:
        max_shift: the largest shift at magnitude 1, a fraction of the width (of the height for
            :class:`TranslateY`); default 0.25.
        padding: how pixels read outside the image are filled, a ``tap_mix`` padding mode: ``"zeros"``
            (default), ``"border"`` or ``"reflection"``.

    Raises:
        ValueError: a ``max_shift`` that is not a positive number within float32's range, or an unknown
            ``padding``.
    """

    axis = 0

    kink_at_zero = True
    resamples = True

    def __init__(self, max_shift: float = 0.25, padding: str = "zeros") -> None:
        super().__init__(padding)
        self.max_shift = drawn_range("max_shift", max_shift)

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
    """Vertical shift by up to ``max_shift`` of the height (default a quarter of the height).

    Parameters: ``shift`` (N,), signed fraction of the height; positive moves the
    content down. Arguments as :class:`TranslateX`'s.
    """

    axis = 1


class Rotate(_ImageTransform):
    """Rotation about the image centre by up to ``max_angle`` radians (default ±pi).

    Parameters: ``angle`` (N,) in radians, positive is counter-clockwise on
    screen; ``aspect`` (N,) the image's H / W.

    Args:
        max_angle: the largest angle at magnitude 1, in radians, not degrees (default pi: ±180 degrees; for
            ±30 degrees pass ``math.radians(30)``).
        padding: how pixels read outside the image are filled, a ``tap_mix`` padding mode: ``"zeros"``
            (default), ``"border"`` or ``"reflection"``.

    Raises:
        ValueError: a ``max_angle`` that is not a positive number within float32's range, or an unknown
            ``padding``.

    Warns:
        UserWarning: a ``max_angle`` above a full turn, ``2 * pi`` (surely meant in degrees).
    """

    kink_at_zero = True
    resamples = True

    def __init__(self, max_angle: float = math.pi, padding: str = "zeros") -> None:
        super().__init__(padding)
        self.max_angle = angle(type(self).__name__, "max_angle", max_angle)

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

    Args:
        max_shear: the largest shear coefficient at magnitude 1 (default 0.3).
        padding: how pixels read outside the image are filled, a ``tap_mix`` padding mode: ``"zeros"``
            (default), ``"border"`` or ``"reflection"``.

    Raises:
        ValueError: a ``max_shear`` that is not a positive number within float32's range, or an unknown
            ``padding``.
    """

    axis = 0

    kink_at_zero = True
    resamples = True

    def __init__(self, max_shear: float = 0.3, padding: str = "zeros") -> None:
        super().__init__(padding)
        self.max_shear = drawn_range("max_shear", max_shear)

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
    Parameters and arguments as :class:`ShearX`'s.
    """

    axis = 1


class Scale(_ImageTransform):
    """Zoom by a factor drawn log-uniformly in ``[1 / max_zoom**mu, max_zoom**mu]`` (default 2).

    Parameters: ``zoom`` (N,); a zoom above 1 magnifies the content.

    Args:
        max_zoom: the largest zoom factor at magnitude 1 (> 1, default 2.0).
        padding: how pixels read outside the image are filled, a ``tap_mix`` padding mode: ``"zeros"``
            (default), ``"border"`` or ``"reflection"``.

    Raises:
        ValueError: a ``max_zoom`` that is not a finite number > 1 within float32's range (the zoom is drawn in
            float32), or an unknown ``padding``.
    """

    kink_at_zero = True
    resamples = True

    def __init__(self, max_zoom: float = 2.0, padding: str = "zeros") -> None:
        super().__init__(padding)
        if positive("max_zoom", max_zoom) <= 1.0:
            raise ValueError(f"max_zoom must be > 1, got {max_zoom}")
        self.max_zoom = float(max_zoom)
        # The zoom max_zoom ** (mu * u) is drawn in float32 (exp of the log): past float32's range, rows zoomed by
        # inf read the centre pixel alone, and by 1e300 every call failed in tap_mix.
        if not math.isfinite(float(torch.exp(torch.tensor(math.log(self.max_zoom), dtype=torch.float32)))):
            raise ValueError(f"max_zoom ({max_zoom!r}) is beyond float32's range (below about 3.4e38): the zoom "
                             "max_zoom ** (mu * u) is drawn in float32")  # fmt: skip

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

    Args:
        temperature: the relaxation's temperature, which shapes the gradient only (> 0, default 0.1).
        padding: how pixels read outside the image are filled, a ``tap_mix`` padding mode: ``"zeros"``
            (default), ``"border"`` or ``"reflection"``.

    Raises:
        ValueError: a ``temperature`` that is not a positive finite number, or an unknown ``padding``.
    """

    flip = (-1.0, 1.0)
    resamples = True

    def __init__(self, temperature: float = 0.1, padding: str = "zeros") -> None:
        super().__init__(padding)
        self.temperature = check_temperature("temperature", temperature)

    def sample(self, x, magnitude, generator=None, copies=1):
        n = x.shape[0] * copies
        return {"gate": relaxed_bernoulli((n,), x, magnitude, self.temperature, generator)}

    def taps(self, params):
        g = params["gate"]
        n = g.shape[0]
        (sx, sy), identity = self.flip, ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
        # Made on the device: setting one element of a CUDA tensor from a number copies it from the host and waits.
        pair = device_constant((((sx, 0.0, 0.0), (0.0, sy, 0.0)), identity), g.dtype, g.device)
        affine = pair.expand(n, 2, 2, 3)
        return Taps(torch.stack([g, 1.0 - g], 1), affine)

    def natural_range(self, magnitude, size=None):
        return Range(0.0, float(magnitude), "probability")

    def extra_repr(self):
        return ", ".join(filter(None, [f"temperature={self.temperature}", super().extra_repr()]))


class VerticalFlip(HorizontalFlip):
    """Top-bottom flip with probability ``mu`` (see :class:`HorizontalFlip`, whose arguments it takes)."""

    flip = (1.0, -1.0)
