"""Small built-in synthetic data sets (nothing is downloaded).

- :func:`rotated_sprites`: the rotation task of the AugNet paper (section 4.1,
  its Mario & Iggy data) on generated RGB sprites: two asymmetric, filled,
  multi-coloured pixel-art figures (several distinct pairs, chosen by
  ``pair``), each rotated by an angle in [-pi/4, pi/4] ("up", labels 0 and 1)
  or in [3pi/4, 5pi/4] ("down", labels 2 and 3). The labels are invariant to
  rotations of up to ±45 degrees.
- :func:`rotated_glyphs`: the same task on two thin-stroke grey glyphs (an "F"
  and a "J"), the demo's data before the sprites.
- :func:`digits`: real handwritten digits, the 1,797 8 x 8 images that
  scikit-learn ships (the UCI optical digits' test set), upsampled; nothing is
  downloaded (needs scikit-learn: ``pip install "augnet[versus]"``).
- :func:`sinusoids`: the frequency task of the AugNet paper (section 4.2):
  noisy sinusoids of 2, 4, 6 or 8 Hz (one class each), each frequency
  jittered by up to ±0.5 Hz: the labels are invariant to frequency shifts of
  up to ±0.5 Hz.

Glyphs are rendered from line segments at the drawn angle (the segments are
rotated, not the pixels), and sprites by reading their cells through the
inverse rotation at 4 x 4 points per pixel (anti-aliased, no resampling of a
rendered image), so there is no interpolation blur in the data.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping

import torch
from torch import Tensor

from augnet._checks import as_values, check_bool, is_int, number, real

__all__ = [
    "GLYPHS",
    "digits",
    "make_sprite_pair",
    "render_glyphs",
    "render_sprites",
    "rotated_glyphs",
    "rotated_sprites",
    "sinusoids",
]

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


def _check_render(index: Tensor, angle: Tensor, count: int, size, what: str) -> tuple[Tensor, int]:
    """Refuse what ``render_glyphs`` / ``render_sprites`` cannot draw, naming it (``what``: the index's name); else
    ``index`` as int64 (a uint8 one was read as a mask, drawing other figures) and ``size`` (a 0-d one: its int)."""
    if (not isinstance(index, Tensor) or index.dim() != 1 or index.is_floating_point() or index.is_complex()
            or index.dtype == torch.bool):  # fmt: skip
        raise TypeError(f"{what} must be a (B,) integer tensor, got {getattr(index, 'shape', type(index).__name__)}")
    if not isinstance(angle, Tensor) or angle.shape != index.shape or not angle.is_floating_point():
        shape = tuple(angle.shape) if isinstance(angle, Tensor) else type(angle).__name__
        raise ValueError(f"angle must be a (B,) float tensor of radians, one per {what}, got {shape} for {len(index)}")
    if index.device.type == "meta" or angle.device.type == "meta":
        raise ValueError(f"{what} and angle must hold values (the images are drawn from them), got tensors on meta")
    index = index if index.dtype == torch.int64 else index.long()  # uint64 past int64 wraps below 0: refused below
    if len(index) and (int(index.min()) < 0 or int(index.max()) >= count):
        raise ValueError(f"{what} must hold indices in [0, {count}), got {index.tolist()[:10]}")
    if len(angle) and not bool(torch.isfinite(angle).all()):  # NaN drew NaN (glyphs) or black (sprites) images
        raise ValueError(f"angle must hold finite radians, got {angle[~torch.isfinite(angle)][:5].tolist()}")
    size = number("size", size)
    if not is_int(size) or size < 1:
        raise ValueError(f"size must be an int >= 1, got {size!r}")
    return index, size


def _check_scale(name: str, value, low: str):
    """``value`` (a 0-d tensor or array: its number) if finite and ``>= 0`` or ``> 0`` (``low``), else the error naming
    ``name`` (a negative extent drew mirrored figures, 0 or NaN blank or NaN images)."""
    value = real(name, value, f"a finite number {low}")
    if not math.isfinite(value) or value < 0 or (low == "> 0" and value == 0):
        raise ValueError(f"{name} must be a finite number {low}, got {value!r}")
    return value


def render_glyphs(glyph: Tensor, angle: Tensor, size: int = 28, width: float = 0.09, extent: float = 0.42) -> Tensor:
    """Render glyphs rotated by ``angle`` (counter-clockwise on screen).

    Args:
        glyph: (B,) glyph index into :data:`GLYPHS`, a tensor of any integer dtype.
        angle: (B,) finite rotation angles in radians, a floating-point tensor.
        size: image height and width in pixels, an int >= 1.
        width: stroke half-width, in glyph units (the glyph box is [-1, 1]), finite and >= 0.
        extent: half the glyph box, as a fraction of the image size, finite and > 0.

    Returns:
        (B, 1, size, size) images in [0, 1]: float32, float64 for float64 angles.

    Raises:
        TypeError, ValueError: an index that is not a (B,) integer tensor or out of range, angles that are not
            (B,) finite floats, tensors on meta, a ``size``, ``width`` or ``extent`` out of range.
    """
    glyph, size = _check_render(glyph, angle, len(GLYPHS), size, "glyph")
    width, extent = _check_scale("width", width, ">= 0"), _check_scale("extent", extent, "> 0")
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
    check_bool("return_angle", return_angle)
    y, glyph, angle = _rotation_labels(n, size, seed, generator)
    x = render_glyphs(glyph, angle, size)
    return (x, y, angle) if return_angle else (x, y)


try:
    from numpy import bool_ as np_bool
except ImportError:  # numpy is optional

    class np_bool:  # stands for numpy.bool_
        pass


def _is_number(value) -> bool:
    """A real number: int, float, numpy scalar or 0-d real tensor (not a bool)."""
    if isinstance(value, Tensor):
        return value.dim() == 0 and value.dtype != torch.bool and not value.dtype.is_complex
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np_bool))


def _rotation_labels(n, size, seed: int, generator: torch.Generator | None) -> tuple[Tensor, Tensor, Tensor]:
    """The rotation task's protocol: labels (n,) in 0..3, the figure (label % 2), angles (radians).

    Label // 2 says "down": the angle is uniform in [-pi/4, pi/4], plus pi for "down".
    """
    n, size = number("n", n), number("size", size)  # a 0-d integer tensor or array: the int it holds
    if not is_int(n) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    if not is_int(size) or size < 8:
        raise ValueError(f"size must be an int >= 8, got {size!r}")
    n, size = int(n), int(size)
    if 48 * max(n, 1) * size * size > 2**62:  # 3 channels of 4 x 4 points per pixel: past any memory
        raise ValueError(f"n={n} images of size {size} are too large to render")
    g = _generator(generator, seed)
    y = torch.randint(0, 4, (n,), generator=g)
    figure, down = y % 2, y // 2
    angle = (torch.rand(n, generator=g) * 2 - 1) * (math.pi / 4) + down * math.pi
    return y, figure, angle


# --------------------------------------------------------------------------- sprites

#: Cells per side of a sprite's grid.
SPRITE_GRID = 12
#: Below this fraction of differing cells, a sprite counts as (nearly) symmetric and is drawn again.
_MIN_ASYMMETRY = 0.3


def _grow_blob(canvas: Tensor, centre: tuple[int, int], cells: int, colour: int, g: torch.Generator) -> None:
    """Paint ``cells`` cells of ``colour`` on ``canvas`` by a random growth from ``centre`` (4-connected)."""
    grid = canvas.shape[0]
    blob = {centre}
    frontier = [centre]
    while len(blob) < cells and frontier:
        r, c = frontier[int(torch.randint(len(frontier), (1,), generator=g))]
        dr, dc = ((-1, 0), (1, 0), (0, -1), (0, 1))[int(torch.randint(4, (1,), generator=g))]
        nr, nc = r + dr, c + dc
        if 1 <= nr < grid - 1 and 1 <= nc < grid - 1 and (nr, nc) not in blob:
            blob.add((nr, nc))
            frontier.append((nr, nc))
    for r, c in blob:
        canvas[r, c] = colour


def _join(canvas: Tensor, start: tuple[int, int], end: tuple[int, int], colour: int) -> None:
    """Paint the empty cells of a 4-connected path from ``start`` to ``end`` (rows first): one connected figure."""
    (r, c), (r1, c1) = start, end
    while (r, c) != (r1, c1):
        if r != r1:
            r += 1 if r1 > r else -1
        else:
            c += 1 if c1 > c else -1
        if canvas[r, c] == 0:
            canvas[r, c] = colour


def _symmetries(cells: Tensor) -> list[Tensor]:
    """The grid under every rotation by 90 degrees and reflection except the identity (the dihedral group)."""
    out = [cells.rot90(k, (0, 1)) for k in (1, 2, 3)]
    flipped = cells.flip(1)
    return out + [flipped.rot90(k, (0, 1)) for k in range(4)]


def _asymmetry(cells: Tensor) -> float:
    """The smallest fraction of occupied cells that change under a rotation by 90 degrees or a reflection."""
    occupied = cells > 0
    fractions = []
    for other in _symmetries(cells):
        union = occupied | (other > 0)
        fractions.append(float(((cells != other) & union).sum()) / max(int(union.sum()), 1))
    return min(fractions)


def _palette(g: torch.Generator, colours: int) -> Tensor:
    """``colours`` saturated, bright RGB colours with hues spread around the circle (never black)."""
    start = float(torch.rand((), generator=g))
    hue = (start + torch.arange(colours) / colours + 0.1 * torch.rand(colours, generator=g)) % 1.0
    sat = 0.55 + 0.45 * torch.rand(colours, generator=g)
    val = 0.7 + 0.3 * torch.rand(colours, generator=g)
    # HSV -> RGB
    k = (torch.tensor([5.0, 3.0, 1.0])[None, :] + hue[:, None] * 6) % 6
    rgb = val[:, None] - val[:, None] * sat[:, None] * (torch.minimum(k, 4 - k).clamp(0, 1))
    return rgb


def _pair_seed(pair: int) -> int:
    """The generator seed of sprite pair ``pair``: ``7919 * pair + 17``, or a 64-bit hash of ``pair`` beyond 2^64."""
    seed = 7919 * pair + 17
    if seed < 2**64:
        return seed
    return int.from_bytes(hashlib.blake2b(str(pair).encode(), digest_size=8).digest(), "little")


def _generator(generator, seed) -> torch.Generator:
    """``generator`` (a CPU ``torch.Generator``), else a new one seeded with ``seed``; a clear error otherwise."""
    if generator is None:
        return torch.Generator().manual_seed(_seed(seed))
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}: {generator!r}")
    if generator.device.type != "cpu":
        raise ValueError(f"generator must be a CPU generator (the data are made on the CPU), got {generator.device}")
    return generator


def _seed(seed) -> int:
    """A generator seed: any int (one beyond torch's 64-bit range is reduced modulo 2^64)."""
    seed = number("seed", seed)  # a 0-d integer tensor or array: the int it holds
    if not is_int(seed):
        raise TypeError(f"seed must be an int, got {seed!r}")
    seed = int(seed)
    return seed if -(2**63) <= seed < 2**64 else seed % 2**64


def make_sprite_pair(pair: int = 0) -> tuple[Tensor, Tensor]:
    """The two sprites of ``pair``: (2, G, G) int64 cells (0 empty, k > 0 colour k) and (2, K + 1, 3) palettes.

    A sprite is a pixel-art figure of ``SPRITE_GRID`` cells per side made of
    five filled parts of different colours (a "body", a "head" off-centre at
    the top, two "limbs" and a detail), each grown at random from a cell and
    joined to the body, so the figure is one 4-connected piece, drawn from a
    generator seeded by ``pair``. A sprite that is nearly symmetric under a
    rotation by a multiple of 90 degrees or a reflection (fewer than 30 % of its
    occupied cells change) is drawn again, so that neither a flip nor a rotation
    can turn one class into another; the two sprites of a pair get different
    palettes. Entry 0 of a palette is the black background.

    Examples:
        >>> cells, palettes = make_sprite_pair(0)
        >>> cells.shape, palettes.shape, bool((cells[0] != cells[1]).any())
        (torch.Size([2, 12, 12]), torch.Size([2, 6, 3]), True)
    """
    pair = number("pair", pair)  # a 0-d integer tensor or array: the int it holds
    if not is_int(pair) or pair < 0:
        raise ValueError(f"pair must be a non-negative int, got {pair!r}")
    pair = int(pair)
    g = torch.Generator().manual_seed(_pair_seed(pair))
    grid, parts = SPRITE_GRID, 5
    sprites, palettes = [], []
    while len(sprites) < 2:
        canvas = torch.zeros(grid, grid, dtype=torch.int64)
        side = 1 if float(torch.rand((), generator=g)) < 0.5 else -1
        # (row, column, cells) of each part: body, head (off-centre, on one side), two limbs, a detail.
        layout = [
            (6, 6, 28),
            (3, 6 + 2 * side, 14),
            (9, 4, 8),
            (9, 8, 6),
            (5, 6 - 3 * side, 5),
        ]
        for p, (r, c, cells) in enumerate(layout[:parts]):
            jitter = torch.randint(-1, 2, (2,), generator=g)
            centre = (int(min(max(r + jitter[0], 1), grid - 2)), int(min(max(c + jitter[1], 1), grid - 2)))
            _grow_blob(canvas, centre, cells + int(torch.randint(0, 5, (1,), generator=g)), p + 1, g)
            _join(canvas, centre, layout[0][:2], p + 1)
        if _asymmetry(canvas) < _MIN_ASYMMETRY:
            continue
        if sprites and ((canvas > 0) == (sprites[0] > 0)).double().mean() > 0.85:
            continue  # the second sprite must have a shape of its own
        sprites.append(canvas)
        palettes.append(torch.cat([torch.zeros(1, 3), _palette(g, parts)]))
    return torch.stack(sprites), torch.stack(palettes)


def render_sprites(
    sprite: Tensor, angle: Tensor, cells: Tensor, palettes: Tensor, size: int = 32, extent: float = 0.34
) -> Tensor:
    """Render sprites rotated by ``angle`` (counter-clockwise on screen), anti-aliased.

    Each pixel is the mean colour of 4 x 4 points, each read from the sprite's
    cell under the inverse rotation (black outside the sprite).

    Args:
        sprite: (B,) index into ``cells``, a tensor of any integer dtype.
        angle: (B,) finite angles in radians, a floating-point tensor.
        cells, palettes: from :func:`make_sprite_pair`: (K, G, G) integer cells, (K, C, 3) float palettes.
        size: image height and width in pixels, an int >= 1.
        extent: half the sprite's side as a fraction of the image size, finite and > 0 (the
            default keeps every rotation inside the image).

    Returns:
        (B, 3, size, size) float32 images in [0, 1].

    Raises:
        TypeError, ValueError: an index that is not a (B,) integer tensor or out of range, angles that are not
            (B,) finite floats, ``cells`` or ``palettes`` not of those shapes (a cell past its palette), tensors
            on meta, a ``size`` or ``extent`` out of range.
    """
    cells, palettes = _check_sprites(cells, palettes)
    sprite, size = _check_render(sprite, angle, len(cells), size, "sprite")
    extent = _check_scale("extent", extent, "> 0")
    grid = cells.shape[-1]
    sub = 4
    offsets = (torch.arange(sub, dtype=torch.float32) + 0.5) / sub
    c = (torch.arange(size, dtype=torch.float32)[:, None] + offsets[None, :]).flatten()
    c = (c - size / 2) / (extent * size)  # sample points in sprite units, [-1, 1] inside the sprite
    py, px = torch.meshgrid(c, c, indexing="ij")
    out = torch.empty(len(sprite), 3, size, size)
    for start in range(0, len(sprite), 256):
        s, a = sprite[start : start + 256], angle[start : start + 256]
        cos, sin = torch.cos(a)[:, None, None], torch.sin(a)[:, None, None]
        # Inverse of the on-screen counter-clockwise rotation (y down): (x, y) -> (x cos - y sin, x sin + y cos).
        qx = px * cos - py * sin
        qy = px * sin + py * cos
        col = ((qx + 1) / 2 * grid).floor().long()
        row = ((qy + 1) / 2 * grid).floor().long()
        inside = (col >= 0) & (col < grid) & (row >= 0) & (row < grid)
        idx = cells[s[:, None, None], row.clamp(0, grid - 1), col.clamp(0, grid - 1)]
        idx = torch.where(inside, idx, torch.zeros_like(idx))
        rgb = palettes[s[:, None, None], idx]  # (b, size * sub, size * sub, 3)
        rgb = rgb.reshape(len(s), size, sub, size, sub, 3).mean((2, 4))
        out[start : start + 256] = rgb.permute(0, 3, 1, 2)
    return out


def _check_sprites(cells, palettes) -> tuple[Tensor, Tensor]:
    """``cells`` (as int64) and ``palettes`` of :func:`make_sprite_pair`'s shapes, or the error naming which is not
    (a list was an AttributeError, float cells or a palette short of a colour an IndexError, a uint8 cell grid
    read as a mask)."""
    for name, value in (("cells", cells), ("palettes", palettes)):
        if not isinstance(value, Tensor):
            raise TypeError(f"{name} must be a tensor (from make_sprite_pair), got {type(value).__name__}")
        if value.device.type == "meta":
            raise ValueError(f"{name} must hold values (the images are drawn from them), got a tensor on meta")
    if cells.dim() != 3 or cells.shape[1] != cells.shape[2] or cells.shape[1] < 1:
        raise ValueError(f"cells must have shape (K, G, G), K sprites of G x G cells, got {tuple(cells.shape)}")
    if cells.is_floating_point() or cells.is_complex() or cells.dtype == torch.bool:
        raise TypeError(f"cells must hold integer colour indices, got dtype {cells.dtype}")
    if palettes.dim() != 3 or palettes.shape[2] != 3 or len(palettes) != len(cells) or not palettes.is_floating_point():
        raise ValueError(
            f"palettes must be a float tensor of shape ({len(cells)}, C, 3), one RGB palette per sprite of cells, "
            f"got {tuple(palettes.shape)} of {palettes.dtype}"
        )
    cells = cells if cells.dtype == torch.int64 else cells.long()
    if cells.numel() and (int(cells.min()) < 0 or int(cells.max()) >= palettes.shape[1]):
        raise ValueError(f"cells must hold colour indices in [0, {palettes.shape[1]}) (the palettes' colours), "
                         f"got {int(cells.min())} to {int(cells.max())}")  # fmt: skip
    return cells, palettes


def rotated_sprites(
    n: int,
    size: int = 32,
    seed: int = 0,
    pair: int = 0,
    generator: torch.Generator | None = None,
    return_angle: bool = False,
) -> tuple[Tensor, ...]:
    """The rotation task of the AugNet paper (section 4.1) on generated RGB sprites.

    Labels: 0 / 1 for sprite 0 / 1 of ``pair`` rotated by an angle in
    [-pi/4, pi/4]; 2 / 3 for sprite 0 / 1 rotated by an angle in
    [3pi/4, 5pi/4] (upside down). Classes are balanced in expectation; the
    labels are invariant to rotations of up to ±45 degrees, and the sprites
    have no rotation or reflection symmetry (see :func:`make_sprite_pair`).

    Args:
        n: number of images.
        size: image height and width (>= 8).
        seed: seed of the generator of labels and angles when ``generator`` is not given.
        pair: which sprite pair (any non-negative int; each is a different pair of figures).
        generator: optional CPU generator.
        return_angle: also return the rotation angle of each image.

    Returns:
        ``(x, y)``: images (n, 3, size, size) in [0, 1] and labels (n,) int64;
        ``(x, y, angle)`` with ``return_angle``, angles (n,) in radians.

    Examples:
        >>> x, y = rotated_sprites(8)
        >>> x.shape, y.shape, bool(((0 <= x) & (x <= 1)).all())
        (torch.Size([8, 3, 32, 32]), torch.Size([8]), True)
    """
    check_bool("return_angle", return_angle)
    cells, palettes = make_sprite_pair(pair)  # checks pair before anything is drawn from the generator
    y, sprite, angle = _rotation_labels(n, size, seed, generator)
    x = render_sprites(sprite, angle, cells, palettes, size)
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
    n = number("n", n)  # a 0-d integer tensor or array: the int it holds
    if not is_int(n) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    n = int(n)
    # A 0-d tensor or array: the number it holds (a 0-d array was refused, a tensor on meta a RuntimeError).
    sfreq, duration, jitter, noise = (number(k, v) for k, v in (("sfreq", sfreq), ("duration", duration),
                                                                 ("jitter", jitter), ("noise", noise)))  # fmt: skip
    for name, value, positive in (("sfreq", sfreq, True), ("duration", duration, True), ("jitter", jitter, False),
                                  ("noise", noise, False)):  # fmt: skip
        if not _is_number(value):
            raise TypeError(f"{name} must be a number, got {value!r}")
        if positive and not (math.isfinite(value) and value > 0):
            raise ValueError(f"sfreq and duration must be positive and finite, got {name}={value!r}")
        if not positive and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    if isinstance(freqs, (str, bytes)) or not isinstance(freqs, Iterable) or getattr(freqs, "ndim", 1) != 1:
        raise TypeError(f"freqs must be a sequence of frequencies in Hz, got {freqs!r}")
    if isinstance(freqs, (set, frozenset, Mapping)):  # a dict's keys were read: {0: 2.0, 1: 4.0} drew 0 and 1 Hz
        raise TypeError(f"freqs must be an ordered sequence (class k is freqs[k]), got the {type(freqs).__name__} "
                        f"{freqs!r}")  # fmt: skip
    freqs = [number("freqs", f) for f in as_values(freqs, "freqs")]  # 0-d tensors among them: their numbers
    if not freqs:
        raise ValueError("freqs must hold at least one frequency (one class each)")
    if not all(_is_number(f) for f in freqs):
        raise TypeError(f"freqs must be numbers (Hz), got {list(freqs)!r}")
    freqs = [float(f) for f in freqs]
    if not all(math.isfinite(f) for f in freqs):
        raise ValueError(f"freqs must be finite, got {list(freqs)!r}")
    sfreq, duration, jitter, noise = float(sfreq), float(duration), float(jitter), float(noise)
    samples = round(sfreq * duration)
    if samples > 2**62 // max(n, 1):
        raise ValueError(f"{n} signals of {samples} samples (sfreq {sfreq} x duration {duration}) are too large")
    if samples < 1:
        raise ValueError(f"duration {duration} s at sfreq {sfreq} Hz gives {samples} samples; a signal needs >= 1")
    if len({abs(f) for f in freqs}) < len(freqs):  # sin(-2 pi f t + phase) is a sine of f with another phase
        raise ValueError(f"freqs must be distinct (f and -f are one frequency): classes would be alike, got {freqs}")
    bands = sorted(abs(f) for f in freqs)
    close = [(a, b) for a, b in itertools.pairwise(bands) if b - a < 2 * jitter]
    if close:  # a task with a Bayes error above 0 may be what is wanted: said, not refused
        warnings.warn(
            f"freqs {close[0][0]:g} and {close[0][1]:g} Hz are closer than 2 x jitter = {2 * jitter:g} Hz: their "
            "classes' frequencies overlap, and a signal there could be either label",
            UserWarning,
            stacklevel=2,
        )
    if max(abs(f) for f in freqs) + jitter >= sfreq / 2:
        raise ValueError(
            f"freqs {freqs} with jitter {jitter} reach the Nyquist frequency sfreq / 2 = {sfreq / 2:g} Hz: the "
            "signals would alias onto lower frequencies"
        )
    check_bool("return_freq", return_freq)
    g = _generator(generator, seed)
    y = torch.randint(0, len(freqs), (n,), generator=g)
    f = torch.tensor(freqs, dtype=torch.float64)[y] + (torch.rand(n, generator=g, dtype=torch.float64) * 2 - 1) * jitter
    phase = torch.rand(n, generator=g, dtype=torch.float64) * 2 * math.pi
    t = torch.arange(samples, dtype=torch.float64) / sfreq
    x = torch.sin(2 * math.pi * f[:, None] * t + phase[:, None])
    x = x + noise * torch.randn(x.shape, generator=g, dtype=torch.float64)
    x = x.float()[:, None, :]
    return (x, y, f) if return_freq else (x, y)


def digits(size: int = 16) -> tuple[Tensor, Tensor]:
    """Real handwritten digits: the 1,797 images of scikit-learn's bundled digits, as a tensor data set.

    The images (8 x 8 grey levels 0..16, the UCI optical digits' test set, which scikit-learn
    installs with itself: nothing is downloaded) are scaled to [0, 1] and upsampled bilinearly
    (antialiased) to ``size`` x ``size``, in scikit-learn's order. Their labels survive small
    rotations, shifts and shears, not flips (a flipped 2 reads as a 5).

    Args:
        size: image height and width (>= 8).

    Returns:
        ``(x, y)``: images (1797, 1, size, size) float32 in [0, 1] and labels (1797,) int64 in 0..9.

    Raises:
        ImportError: scikit-learn is not installed.

    Examples:
        >>> x, y = digits()
        >>> x.shape, y.bincount().tolist()[:3]
        (torch.Size([1797, 1, 16, 16]), [178, 182, 177])
    """
    size = number("size", size)  # a 0-d integer tensor or array: the int it holds
    if not is_int(size) or size < 8:
        raise ValueError(f"size must be an int >= 8, got {size!r}")
    size = int(size)
    try:
        from sklearn.datasets import load_digits
    except ImportError as error:  # an optional dependency
        raise ImportError(
            'digits() reads the digits that scikit-learn ships: pip install "augnet[versus]" (or scikit-learn)'
        ) from error
    bunch = load_digits()
    x = torch.as_tensor(bunch.images, dtype=torch.float32)[:, None] / 16.0
    if size != 8:
        x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return x.clamp(0.0, 1.0), torch.as_tensor(bunch.target, dtype=torch.int64)
