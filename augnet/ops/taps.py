"""Taps: the form in which transforms feed the fused op :func:`augnet.ops.tap_mix`.

A transform's :meth:`~augnet.transforms.Transform.taps` returns a
:class:`Taps` for ``N`` output rows; a layer concatenates the taps of its
transforms (:func:`concat_taps`, training: every tap weighted by its
transform's mixture weight) or keeps, per row, only the taps of the transform
that row drew (:func:`select_taps`, evaluation), then calls ``tap_mix`` once.
The flow is one way: transform -> taps -> tap_mix.

Axis legend: B samples, N output rows, K taps per row, Ch channels.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from augnet.ops.constants import device_constant
from augnet.ops.precision import compute_dtype

__all__ = ["Taps", "check_taps", "concat_taps", "identity_affine", "identity_color", "select_taps"]


class Taps(NamedTuple):
    """Taps of a transform for ``N`` output rows (see :func:`augnet.ops.tap_mix`).

    Attributes:
        weight: :math:`(N, K)` tap weights.
        affine: :math:`(N, K, 2, 3)` normalised output-to-input warps, or
            ``None`` for the identity warp.
        color: :math:`(N, K, Ch, Ch + 1)` colour maps ``[M | b]``, or ``None``
            for the identity colour map.
        src: :math:`(N, K)` int64 indices of the source rows, or ``None`` for
            each row's own source (row ``n`` reads source ``n % B``).
    """

    weight: Tensor
    affine: Tensor | None = None
    color: Tensor | None = None
    src: Tensor | None = None


def check_taps(taps, n: int, owner: str = "taps") -> None:
    """The TypeError or ValueError of ``taps`` that are not a :class:`Taps` of tensors shaped for ``n`` rows.

    A custom transform's ``taps()`` with a weight of shape (N,) rather than (N, K), a list for a tensor or
    another row count met an ``IndexError``, an ``AttributeError`` or a broadcasting error inside torch.
    Reads shapes only (no synchronisation on an accelerator); the channel count of ``color`` is checked
    against the images elsewhere.
    """
    if not isinstance(taps, Taps):
        raise TypeError(f"{owner}: taps() must return a Taps, got {type(taps).__name__}")
    for name, t in zip(Taps._fields, taps, strict=True):
        if not (t is None and name != "weight") and not isinstance(t, Tensor):
            kind = "a tensor" if name == "weight" else "a tensor or None"
            raise TypeError(f"{owner}: Taps.{name} must be {kind}, got {type(t).__name__}")
    if taps.weight.dim() != 2 or taps.weight.shape[0] != n:
        raise ValueError(
            f"{owner}: Taps.weight must have shape (N, K) with N = {n} rows, got {tuple(taps.weight.shape)}"
        )
    k = taps.weight.shape[1]
    color = taps.color
    shapes = {
        "affine": (n, k, 2, 3),
        "color": None if color is None or color.dim() != 4 else (n, k, color.shape[2], color.shape[2] + 1),
        "src": (n, k),
    }
    for name, want in shapes.items():
        t = getattr(taps, name)
        if t is not None and (want is None or tuple(t.shape) != want):
            shown = "(N, K, Ch, Ch + 1)" if name == "color" else str(want)
            raise ValueError(
                f"{owner}: Taps.{name} must have shape {shown} for the weight's N = {n} rows and K = {k} taps, "
                f"got {tuple(t.shape)}"
            )


def identity_affine(n: int, k: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """Identity warps of shape (n, k, 2, 3)."""
    eye = torch.eye(2, 3, dtype=dtype, device=device)
    return eye.expand(n, k, 2, 3)


def identity_color(n: int, k: int, ch: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """Identity colour maps ``[I | 0]`` of shape (n, k, ch, ch + 1)."""
    eye = torch.eye(ch, ch + 1, dtype=dtype, device=device)
    return eye.expand(n, k, ch, ch + 1)


def concat_taps(
    taps: list[Taps], x: Tensor, n: int, scales: list[Tensor] | None = None
) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    """Concatenate several transforms' taps into ``tap_mix`` arguments.

    Args:
        taps: taps of each transform, all for ``n`` rows.
        x: the source batch :math:`(B, Ch, H, W)`.
        n: number of output rows.
        scales: optional scalar (or :math:`(N,)`) factor per transform,
            multiplied into its tap weights (the layer's mixture weights).

    Returns:
        ``(src, affine, color, weight)`` with ``K = sum of the taps' K``, in
        :func:`~augnet.ops.precision.compute_dtype` of ``x``; ``color`` is
        ``None`` when no transform has a colour map.

    Examples:
        >>> x = torch.rand(2, 3, 4, 4)
        >>> src, affine, color, weight = concat_taps([Taps(torch.ones(4, 1)), Taps(torch.ones(4, 2))], x, 4)
        >>> src[:, 0].tolist(), affine.shape, color, weight.shape
        ([0, 1, 0, 1], torch.Size([4, 3, 2, 3]), None, torch.Size([4, 3]))
    """
    b, ch = x.shape[:2]
    dtype = compute_dtype(x)
    device = x.device
    own = torch.arange(n, device=device) % max(b, 1)
    any_color = any(t.color is not None for t in taps)
    srcs, affines, colors, weights = [], [], [], []
    for i, t in enumerate(taps):
        check_taps(t, n, f"taps {i}")  # shapes only
        k = t.weight.shape[1]
        srcs.append(own[:, None].expand(n, k) if t.src is None else t.src)
        affines.append(identity_affine(n, k, dtype, device) if t.affine is None else t.affine.to(dtype))
        if any_color:
            colors.append(identity_color(n, k, ch, dtype, device) if t.color is None else t.color.to(dtype))
        w = t.weight.to(dtype)
        if scales is not None:
            s = scales[i].to(dtype)
            w = w * (s[:, None] if s.dim() == 1 else s)
        weights.append(w)
    if len(taps) == 1:
        src, affine, weight = srcs[0], affines[0], weights[0]
        color = colors[0] if any_color else None
    else:
        src, affine, weight = torch.cat(srcs, 1), torch.cat(affines, 1), torch.cat(weights, 1)
        color = torch.cat(colors, 1) if any_color else None
    return src.contiguous(), affine.contiguous(), None if color is None else color.contiguous(), weight.contiguous()


def select_taps(
    group: list[Taps], members: list[int], q: int, choice: Tensor, x: Tensor, n: int
) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
    """Keep, for each row, only the taps of the transform it drew.

    Args:
        group: the taps of the transforms ``members`` (indices among the
            layer's ``q`` transforms) that share one padding mode.
        members: the layer indices of ``group``'s transforms.
        q: the number of transforms of the layer.
        choice: :math:`(N,)` the transform each row drew.
        x: the source batch; n: the number of rows.

    Returns:
        ``tap_mix`` arguments with ``K`` = the largest tap count in the group;
        rows whose transform is outside the group get all-zero weights.
    """
    src, affine, color, weight = concat_taps(group, x, n)
    dev = x.device
    counts = device_constant([t.weight.shape[1] for t in group], torch.long, dev)
    kmax = int(max(t.weight.shape[1] for t in group))
    offsets = torch.cumsum(counts, 0) - counts
    # Position of the drawn transform inside the group, -1 when outside it.
    pos = torch.full((q,), -1, dtype=torch.long, device=dev)
    pos[device_constant(members, torch.long, dev)] = torch.arange(len(members), device=dev)
    local = pos[choice]
    inside = local >= 0
    local = local.clamp_min(0)
    j = torch.arange(kmax, device=dev)
    valid = inside[:, None] & (j[None] < counts[local][:, None])
    idx = offsets[local][:, None] + torch.minimum(j[None], counts[local][:, None] - 1)
    src = src.gather(1, idx)
    affine = affine.gather(1, idx[:, :, None, None].expand(-1, -1, 2, 3))
    if color is not None:
        color = color.gather(1, idx[:, :, None, None].expand(-1, -1, *color.shape[2:]))
    weight = weight.gather(1, idx) * valid.to(weight.dtype)
    return src.contiguous(), affine.contiguous(), None if color is None else color.contiguous(), weight.contiguous()
