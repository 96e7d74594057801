"""Differentiable image transforms, all expressed as taps of ``tap_mix``.

Images are :math:`(B, Ch, H, W)` floating-point tensors, nominally in [0, 1]
(colour transforms do not clip, so that they stay affine and differentiable).
Every transform is the identity at magnitude 0 and reaches the range of
DESIGN.md at magnitude 1; each range is a constructor argument.

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
from torch import Tensor

from augnet.ops.dispatch import PADDING_MODES
from augnet.ops.taps import Taps
from augnet.transforms.base import Range, Transform, draw, param_dtype, positive, relaxed_bernoulli, uniform

__all__ = [
    "GEOMETRIC",
    "Brightness",
    "Contrast",
    "HorizontalFlip",
    "Hue",
    "Rotate",
    "SamplePairing",
    "Saturation",
    "Scale",
    "ShearX",
    "ShearY",
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
