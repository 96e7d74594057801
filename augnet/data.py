"""Small built-in synthetic data sets (nothing is downloaded).

- :func:`rotated_glyphs`: the rotation task of the AugNet paper (section 4.1):
  two asymmetric glyphs, each rotated by an angle in [-pi/4, pi/4] ("up",
  labels 0 and 1) or in [-pi, -3pi/4] U [3pi/4, pi] ("down", labels 2 and 3).
  The labels are invariant to rotations of up to ±45 degrees.
- :func:`sinusoids`: the frequency task of the AugNet paper (section 4.2):
  noisy sinusoids of 2, 4, 6 or 8 Hz (one class each), each frequency
  jittered by up to ±0.5 Hz: the labels are invariant to frequency shifts of
  up to ±0.5 Hz.

Glyphs are rendered from line segments at the drawn angle (the segments are
rotated, not the pixels), so there is no interpolation blur in the data.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["GLYPHS", "render_glyphs", "rotated_glyphs", "sinusoids"]

#: Line segments of the two base glyphs, ((x0, y0), (x1, y1)) in [-1, 1]^2,
#: y pointing down. Glyph 0 is an "F", glyph 1 a hooked "J" with a top bar:
#: neither is symmetric under any rotation or reflection.
GLYPHS: tuple[tuple[tuple[tuple[float, float], tuple[float, float]], ...], ...] = (
    (((-0.45, -0.8), (-0.45, 0.8)), ((-0.45, -0.8), (0.5, -0.8)), ((-0.45, -0.05), (0.3, -0.05))),
    (
        ((0.25, -0.8), (0.25, 0.45)),
        ((0.25, 0.45), (-0.05, 0.8)),
        ((-0.05, 0.8), (-0.45, 0.5)),
        ((-0.3, -0.8), (0.6, -0.8)),
    ),
)


def render_glyphs(glyph: Tensor, angle: Tensor, size: int = 28, width: float = 0.09, extent: float = 0.42) -> Tensor:
    """Render glyphs rotated by ``angle`` (counter-clockwise on screen).

    Args:
        glyph: (B,) int64 glyph index into :data:`GLYPHS`.
        angle: (B,) rotation angles in radians.
        size: image height and width in pixels.
        width: stroke half-width, in glyph units (the glyph box is [-1, 1]).
        extent: half the glyph box, as a fraction of the image size.

    Returns:
        (B, 1, size, size) float32 images in [0, 1].
    """
    nseg = max(len(g) for g in GLYPHS)
    segs = torch.zeros(len(GLYPHS), nseg, 2, 2)
    valid = torch.zeros(len(GLYPHS), nseg, dtype=torch.bool)
    for i, g in enumerate(GLYPHS):
        segs[i, : len(g)] = torch.tensor(g)
        valid[i, : len(g)] = True
    s = segs[glyph]  # (B, S, 2 ends, 2 coords)
    cos, sin = torch.cos(angle)[:, None, None], torch.sin(angle)[:, None, None]
    # Counter-clockwise on screen with y down: (x, y) -> (x cos + y sin, -x sin + y cos).
    x, y = s[..., 0], s[..., 1]
    s = torch.stack([x * cos + y * sin, -x * sin + y * cos], -1)
    # Pixel centres in glyph units.
    c = (torch.arange(size, dtype=torch.float32) + 0.5 - size / 2) / (extent * size)
    py, px = torch.meshgrid(c, c, indexing="ij")
    p = torch.stack([px, py], -1).reshape(1, 1, -1, 2)  # (1, 1, P, 2)
    a, b = s[:, :, None, 0], s[:, :, None, 1]  # (B, S, 1, 2)
    ab = b - a
    t = (((p - a) * ab).sum(-1) / (ab * ab).sum(-1).clamp_min(1e-12)).clamp(0, 1)
    d = (p - (a + t[..., None] * ab)).norm(dim=-1) * (extent * size)  # (B, S, P) in pixels
    ink = (width * extent * size + 0.5 - d).clamp(0.0, 1.0)  # anti-aliased stroke
    ink = torch.where(valid[glyph][:, :, None], ink, torch.zeros_like(ink)).amax(1)
    return ink.reshape(-1, 1, size, size)


def rotated_glyphs(
    n: int, size: int = 28, seed: int = 0, generator: torch.Generator | None = None, return_angle: bool = False
) -> tuple[Tensor, ...]:
    """The rotation-invariance task of the AugNet paper, generated.

    Labels: 0 / 1 for glyph 0 / 1 rotated by an angle in [-pi/4, pi/4];
    2 / 3 for glyph 0 / 1 rotated by an angle in [3pi/4, 5pi/4]. Classes are
    balanced in expectation.

    Args:
        n: number of images.
        size: image height and width.
        seed: seed of the generator used when ``generator`` is not given.
        generator: optional CPU generator.
        return_angle: also return the rotation angle of each image.

    Returns:
        ``(x, y)``: images (n, 1, size, size) in [0, 1] and labels (n,) int64;
        ``(x, y, angle)`` with ``return_angle``, angles (n,) in radians.

    Examples:
        >>> x, y = rotated_glyphs(8, size=20)
        >>> x.shape, y.shape, bool(((0 <= x) & (x <= 1)).all())
        (torch.Size([8, 1, 20, 20]), torch.Size([8]), True)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 8:
        raise ValueError(f"size must be an int >= 8, got {size!r}")
    g = generator if generator is not None else torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    glyph, down = y % 2, y // 2
    angle = (torch.rand(n, generator=g) * 2 - 1) * (math.pi / 4) + down * math.pi
    x = render_glyphs(glyph, angle, size)
    return (x, y, angle) if return_angle else (x, y)


def sinusoids(
    n: int,
    seed: int = 0,
    sfreq: float = 100.0,
    duration: float = 10.0,
    freqs: tuple[float, ...] = (2.0, 4.0, 6.0, 8.0),
    jitter: float = 0.5,
    noise: float = 0.5,
    generator: torch.Generator | None = None,
    return_freq: bool = False,
) -> tuple[Tensor, ...]:
    """The frequency task of the AugNet paper: one class per base frequency.

    Each signal is ``sin(2 pi f t + phase) + noise * N(0, 1)`` with ``f`` the
    class's base frequency plus a jitter drawn uniformly in ``[-jitter, jitter]``
    and a phase drawn uniformly in ``[0, 2 pi)``. The paper used 400 training
    and 200 test signals of 10 s.

    Args:
        n: number of signals.
        seed: seed of the generator used when ``generator`` is not given.
        sfreq: sampling rate in Hz.
        duration: length in seconds.
        freqs: the base frequency of each class, in Hz.
        jitter: half-width of the uniform frequency jitter, in Hz.
        noise: standard deviation of the additive Gaussian noise.
        generator: optional CPU generator.
        return_freq: also return each signal's frequency.

    Returns:
        ``(x, y)``: signals (n, 1, round(sfreq * duration)) float32 and labels
        (n,) int64; ``(x, y, f)`` with ``return_freq``.

    Examples:
        >>> x, y = sinusoids(8)
        >>> x.shape, int(y.max()) <= 3
        (torch.Size([8, 1, 1000]), True)
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    if not sfreq > 0 or not duration > 0:
        raise ValueError(f"sfreq and duration must be positive, got {sfreq} and {duration}")
    if jitter < 0 or noise < 0:
        raise ValueError(f"jitter and noise must be non-negative, got {jitter} and {noise}")
    g = generator if generator is not None else torch.Generator().manual_seed(seed)
    y = torch.randint(0, len(freqs), (n,), generator=g)
    f = torch.tensor(freqs, dtype=torch.float64)[y] + (torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1) * jitter
    phase = torch.rand(n, generator=g, dtype=torch.float64) * 2 * math.pi
    t = torch.arange(round(sfreq * duration), dtype=torch.float64) / sfreq
    x = torch.sin(2 * math.pi * f[:, None] * t + phase[:, None])
    x = x + noise * torch.randn(x.shape, generator=g, dtype=torch.float64)
    x = x.float()[:, None, :]
    return (x, y, f) if return_freq else (x, y)
