"""The plain-PyTorch ``tap_mix``: the ground truth of the fused backends, and the differentiable form of their
gradient (a second derivative through the C++ op runs it). Its own module, so that the backends import it
without importing the dispatch that imports them."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["tap_mix_reference"]


def tap_mix_reference(
    x: Tensor,
    src: Tensor,
    affine: Tensor,
    color: Tensor | None,
    weight: Tensor,
    padding: str = "zeros",
) -> Tensor:
    """Plain-PyTorch ``tap_mix``: one ``affine_grid`` + ``grid_sample`` per tap.

    This is the ground truth for the fused backends. It reads ``x`` once per
    tap and materialises a grid and an image per tap, which is what the fused
    kernels avoid. Arguments are as in :func:`tap_mix` and are not validated here.
    """
    n, k = src.shape
    ch, h, w = x.shape[1:]
    out = None
    for j in range(k):
        rows = x.index_select(0, src[:, j])
        grid = F.affine_grid(affine[:, j], [n, ch, h, w], align_corners=False)
        img = F.grid_sample(rows, grid, mode="bilinear", padding_mode=padding, align_corners=False)
        if color is not None:
            # (n, ch, ch) @ (n, ch, h*w) + bias
            img = torch.einsum("nij,njhw->nihw", color[:, j, :, :ch], img) + color[:, j, :, ch, None, None]
        term = weight[:, j, None, None, None] * img
        out = term if out is None else out + term
    return out
