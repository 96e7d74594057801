"""Private helpers of the probes' paired transformations (what a shared draw of a transform keeps per input)."""

from __future__ import annotations

import torch
from torch import Tensor


def _classified(transform, x: Tensor, magnitude) -> tuple[dict[str, Tensor], list[str]]:
    """The parameters read off the inputs alone (``{name: (N, ...)}``, as ``sample`` gives them) and the names
    of those that mix a random draw with each input's own values (see :func:`data_params`, :func:`shared_params`)."""
    n = len(x)
    if n < 2:
        return {}, []

    def draw(inputs: Tensor, seed: int) -> dict:
        return transform.sample(inputs, magnitude, generator=torch.Generator(device=x.device).manual_seed(seed))

    first, second, moved = draw(x, 0), draw(x, 1), draw(x.roll(1, 0), 0)
    data, mixed = {}, []
    for k, v in first.items():
        if not (isinstance(v, Tensor) and v.dim() > 0 and v.shape[0] == n):
            continue
        if not (isinstance(second.get(k), Tensor) and isinstance(moved.get(k), Tensor)):
            continue
        if torch.equal(v, moved[k]):  # the same draw on the inputs in another order: it does not follow them
            continue
        if torch.equal(v, second[k]):
            data[k] = v
        else:
            mixed.append(k)
    return data, mixed


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
    return _classified(transform, x, magnitude)[0]


def shared_params(transform, x: Tensor, magnitude, seed: int) -> dict[str, Tensor]:
    """The parameters of one draw of ``transform`` (from a generator seeded with ``seed``) shared by every row
    of ``x``, with what each input computes from itself kept per row.

    Besides :func:`data_params`, a parameter may mix the random draw with each input's own values: a signal's
    ``GaussianNoise`` draws one noise ``z`` and scales it by each signal's standard deviation, in one
    ``noise`` parameter (neither random alone, nor the input's alone: different generators give different
    values, and so do the inputs in another order). Sharing the first row's value scaled every signal's noise
    by the first signal's deviation. Such a parameter is drawn again for each row alone, from a generator in
    the same state, so that every row gets the same random draw with its own values: row ``i`` gets what
    ``transform.sample(x[i:i+1], magnitude, generator)`` gives (one call per row).

    Returns:
        ``{name: (N, ...) tensor}``: every parameter ``transform.sample(x[:1], magnitude, generator)`` returns,
        expanded to the rows, with the per-input ones in place.
    """

    def generator() -> torch.Generator:
        return torch.Generator(device=x.device).manual_seed(seed)

    params = transform.sample(x[:1], magnitude, generator=generator())
    params = {k: v.expand(len(x), *v.shape[1:]).contiguous() if isinstance(v, Tensor) else v for k, v in params.items()}
    data, mixed = _classified(transform, x, magnitude)
    params.update(data)  # (every image got the first image's mean or range)
    if mixed:  # (every signal's noise was scaled by the first signal's deviation)
        rows = [transform.sample(x[i : i + 1], magnitude, generator=generator()) for i in range(len(x))]
        params.update({k: torch.cat([row[k] for row in rows]) for k in mixed})
    return params
