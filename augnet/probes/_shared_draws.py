"""Private helpers of the probes' paired transformations (what a shared draw of a transform keeps per input)."""

from __future__ import annotations

import torch
from torch import Tensor


def data_params(transform, x: Tensor, magnitude) -> dict[str, Tensor]:
    """The parameters of ``transform`` that each input computes from itself, per row of ``x``.

    Some transforms draw nothing for a parameter but read it off each input: a contrast's mean
    (``Contrast``), an autocontrast's range (``AutoContrast``). A draw shared by every input (one
    transformation applied to all of them) must keep those per input: image ``i`` under a contrast
    of factor ``f`` is ``f x_i + (1 - f) mean(x_i)``, not a shift towards the first image's mean.

    A parameter is read off the inputs when two draws from different generators give the same
    values (nothing random in it) and the same draw on the inputs in another order does not (it
    follows the inputs). The draws use generators of their own: the caller's are not advanced.

    Returns:
        ``{name: (N, ...) tensor}`` of those parameters, as ``transform.sample(x, magnitude)`` gives them;
        empty for fewer than 2 inputs (the first input's values are then every input's).
    """
    n = len(x)
    if n < 2:
        return {}

    def draw(inputs: Tensor, seed: int) -> dict:
        return transform.sample(inputs, magnitude, generator=torch.Generator(device=x.device).manual_seed(seed))

    first, second, moved = draw(x, 0), draw(x, 1), draw(x.roll(1, 0), 0)
    return {
        k: v
        for k, v in first.items()
        if isinstance(v, Tensor)
        and v.dim() > 0
        and v.shape[0] == n
        and isinstance(second.get(k), Tensor)
        and isinstance(moved.get(k), Tensor)
        and torch.equal(v, second[k])
        and not torch.equal(v, moved[k])
    }
