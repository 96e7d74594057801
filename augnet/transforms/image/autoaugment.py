"""The non-linear AutoAugment operations: Solarize, Posterize, Equalize, Sharpness.

They are not affine maps of the input, so they implement ``apply_transform``
directly (a layer that holds one runs the generic path), with their helpers
(``_posterize``, ``_equalize``, ``_smooth``) and constants (``POSTERIZE_SLACK``, ``SMOOTH``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from augnet._checks import is_int, real
from augnet.ops.constants import device_constant
from augnet.ops.precision import compute_dtype
from augnet.transforms.base import (
    Range,
    check_temperature,
    in_float32,
    positive,
    relaxed_bernoulli,
    repeat_rows,
    uniform,
)
from augnet.transforms.image._common import _ImageTransform

__all__ = ["Equalize", "Posterize", "Sharpness", "Solarize"]


class Solarize(_ImageTransform):
    """Inversion of the pixels above a threshold drawn in ``[1 - mu * (1 - min_threshold), 1]``.

    ``out = 1 - x`` where ``x > threshold``, else ``x``, per pixel and channel,
    with ``threshold = 1 - mu * (1 - min_threshold) * u``, ``u ~ U(0, 1)`` per row.
    Magnitude 1 draws thresholds down to ``min_threshold`` (default 0: near it,
    nearly every pixel is inverted, but black pixels, at 0, never are); magnitude
    0 gives threshold 1, where a row is left unchanged (also its values above 1).
    torchvision and kornia invert pixels *at* the threshold too; the two differ
    only for pixels exactly on it.

    The threshold is a step: the output's value is the hard threshold, its
    gradient in the magnitude that of the relaxation
    ``x + sigmoid((x - threshold) / temperature) * (1 - 2 x)`` (a straight-through
    estimate, alive at ``mu = 0``); its gradient in ``x`` is the exact one (+1 or -1).

    Defined on images in [0, 1]: on other values (a feature map inside a model, normalised images) the thresholds
    drawn in [0, 1] mean nothing, and a call on the CPU warns once (``UserWarning``).

    Parameters: ``threshold`` (N,).

    Args:
        min_threshold: the lowest threshold, reached at magnitude 1 (in [0, 1), default 0.0).
        temperature: the relaxation's temperature, which shapes the gradient only (> 0, default 0.1).

    Raises:
        TypeError, ValueError: a ``min_threshold`` that is not a number in [0, 1), or a ``temperature`` that is
            not a positive finite number.
    """

    def __init__(self, min_threshold: float = 0.0, temperature: float = 0.1) -> None:
        super().__init__()
        min_threshold = real("min_threshold", min_threshold)  # a 0-d tensor or array: the number it holds
        if not 0.0 <= min_threshold < 1.0:
            raise ValueError(f"min_threshold must lie in [0, 1), got {min_threshold!r}")
        self.min_threshold = float(min_threshold)
        self.temperature = check_temperature("temperature", temperature)

    def sample(self, x, magnitude, generator=None, copies=1):
        self._check_unit_range(x, "thresholds in [0, 1], 1 - x above them")
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

#: Under this many bits on average (``magnitude * max_bits``), ``Posterize.bits_distribution`` gives its two
#: probabilities in closed form: the general integral subtracts numbers near 1/2 and lost the range's digits (at
#: 1e-12 P(0) was 1.0000056, below about 1e-16 every probability was 0, and an export's choice weighed nothing).
_FEW_BITS = 1e-4


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
    """Removal of low bits of the 8-bit levels: ``r`` bits on average, ``r`` up to ``mu * max_bits`` (default 4).

    Each row draws a continuous bit count ``r = mu * max_bits * u``, ``u ~ U(0, 1)``,
    and removes ``k`` bits, ``k`` the stochastic rounding of ``r`` (``floor(r) + 1``
    with probability ``r - floor(r)``, so ``E[k] = r``); removing 0 bits is the
    identity, so ``mu = 0`` is. On images that are multiples of 1/255 this is
    torchvision's posterize of the uint8 image keeping ``8 - k`` bits. A float16
    or bfloat16 image is posterized as its values in float32 (as every transform
    computes on them): ``k / 255`` rounded to float16 may lie below level ``k``,
    by up to 0.06 levels, and then loses a step; keep 8-bit images in float32.

    Straight-through estimates: the gradient in the magnitude is that of the
    linear interpolation between the images with ``floor(r)`` and
    ``floor(r) + 1`` bits removed (alive at ``mu = 0``); the gradient in ``x`` is
    the identity (the quantisation itself is a step).

    Defined on images in [0, 1]: on other values (a feature map inside a model, normalised images) the 8-bit levels
    mean nothing, and a call on the CPU warns once (``UserWarning``).

    Parameters: ``bits`` (N,), the continuous bit count ``r``; ``dither`` (N,) in
    [0, 1), the draw of the stochastic rounding.

    Args:
        max_bits: the largest bit count ``r`` at magnitude 1 (an int in [1, 8], default 4).

    Raises:
        TypeError, ValueError: a ``max_bits`` that is not an int in [1, 8].
    """

    def __init__(self, max_bits: int = 4) -> None:
        super().__init__()
        max_bits = real("max_bits", max_bits, "an int")  # a 0-d tensor or array: the number it holds
        if not is_int(max_bits):  # a number, not a whole one (4.0 too)
            raise TypeError(f"max_bits must be an int, got {max_bits!r}")
        if not 1 <= max_bits <= 8:
            raise ValueError(f"max_bits must lie in [1, 8] (bits of an 8-bit level), got {max_bits!r}")
        self.max_bits = int(max_bits)

    def sample(self, x, magnitude, generator=None, copies=1):
        self._check_unit_range(x, "8-bit levels k / 255")
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

        Raises:
            TypeError: ``magnitude`` not a number (a 0-d tensor or array holding one is).
            ValueError: ``magnitude`` outside [0, 1] (or NaN).
        """
        magnitude = real("magnitude", magnitude)
        if not 0.0 <= magnitude <= 1.0:
            raise ValueError(f"Posterize.bits_distribution: magnitude must lie in [0, 1], got {magnitude!r}")

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
        if top < _FEW_BITS:  # r under one bit: P(0) = 1 - R / 2, P(1) = R / 2 (below(R) - 1/2 cancels R's digits)
            return {0: 1.0 - top / 2.0, 1: top / 2.0}
        return {k: (below(top - k) - below(-k)) / top for k in range(math.ceil(top) + 1)}

    def apply_transform(self, x, params):
        """Posterize each row; a float16 or bfloat16 image is posterized in float32 (as ``forward`` does: in
        float16, ``255 * x + POSTERIZE_SLACK`` lost the slack) and rounded back to its dtype."""
        dtype = x.dtype
        x = x.to(compute_dtype(x))
        r = params["bits"]
        rows = repeat_rows(x, r.shape[0])
        plain = rows.detach()
        hard = _posterize(plain, self.removed_bits(params))
        low = torch.floor(r.detach())
        below, above = _posterize(plain, low), _posterize(plain, low + 1.0)
        soft = below + (r - low).to(rows.dtype)[:, None, None, None] * (above - below)
        # The hard value; the gradient of the interpolation in r, and the identity in x.
        return (hard + (rows - plain) + (soft - soft.detach())).to(dtype)

    def natural_range(self, magnitude, size=None):
        """The range of the continuous bit count ``r``, ``[0, mu * max_bits]`` (the bits removed on average); its
        stochastic rounding removes up to ``ceil(mu * max_bits)`` whole bits (see :meth:`bits_distribution`)."""
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
    (see ``_equalize``); on images that are multiples of 1/255 it equals
    ``torchvision.transforms.v2.functional.equalize`` of the uint8 image. Each
    row is ``gate * equalize(x) + (1 - gate) * x`` with the straight-through
    relaxed Bernoulli gate of :class:`HorizontalFlip`, so ``mu = 0`` is the
    identity and the gradient in the magnitude is ``equalize(x) - x`` times the
    gate's. Equalisation is a step function of ``x``: the gradient in ``x``
    through the equalised branch is the straight-through identity.

    Defined on images in [0, 1]: on other values (a feature map inside a model, normalised images) values below 0
    are binned as level 0 and above 1 as level 255, so the output lies in [0, 1] whatever the input's scale, and a
    call on the CPU warns once (``UserWarning``).

    Parameters: ``gate`` (N,) in {0, 1}.

    Args:
        temperature: the relaxation's temperature, which shapes the gradient only (> 0, default 0.1).

    Raises:
        ValueError: a ``temperature`` that is not a positive finite number.
    """

    def __init__(self, temperature: float = 0.1) -> None:
        super().__init__()
        self.temperature = check_temperature("temperature", temperature)

    def sample(self, x, magnitude, generator=None, copies=1):
        self._check_unit_range(x, "8-bit levels: values below 0 binned as 0, above 1 as 1")
        n = x.shape[0] * copies
        return {"gate": relaxed_bernoulli((n,), x, magnitude, self.temperature, generator)}

    def apply_transform(self, x, params):
        """Equalise the gated rows; a float16 or bfloat16 image in float32 (as ``forward`` does: in float16,
        255.999 is 256 and the top 15 levels were binned one up, in bfloat16 half of them), rounded back."""
        dtype = x.dtype
        g = params["gate"]
        rows = repeat_rows(x.to(compute_dtype(x)), g.shape[0])
        equalized = _equalize(rows) + (rows - rows.detach())  # the equalised value, the identity's gradient
        g = g.to(rows.dtype)[:, None, None, None]
        return (g * equalized + (1.0 - g) * rows).to(dtype)

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
    kernel = device_constant(SMOOTH, x.dtype, x.device) / 13.0
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

    Args:
        max_delta: the largest change of the factor at magnitude 1 (in (0, 1], default 0.9).

    Raises:
        ValueError: a ``max_delta`` that is not a finite number in (0, 1] (below float32's smallest normal number,
            the factor was drawn as 1), as :class:`Contrast`'s.
    """

    def __init__(self, max_delta: float = 0.9) -> None:
        super().__init__()
        self.max_delta = positive("max_delta", max_delta)
        if self.max_delta > 1.0:
            raise ValueError(f"max_delta must be at most 1 (a factor below 0 is not a sharpness), got {max_delta!r}")
        in_float32("max_delta", self.max_delta)  # below float32's smallest normal number, every factor drawn was 1

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
