"""Shared pieces of the probes: summaries, derangements, paired transforms."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["apply_paired", "derangement", "forward_kwargs", "seeded", "summary"]

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def summary(values: Tensor, quantiles: Sequence[float] = QUANTILES) -> dict[str, float]:
    """Median, mean and percentiles of ``values``, ignoring NaN.

    Returns:
        ``{"median", "mean", "n", "p5", "p25", ...}``: ``n`` counts the values
        that are not NaN; every statistic is NaN when there are none.

    Examples:
        >>> summary(torch.tensor([1.0, 2.0, float("nan"), 3.0]))["median"]
        2.0
    """
    v = torch.as_tensor(values, dtype=torch.float64).flatten()
    v = v[~torch.isnan(v)]
    out: dict[str, float] = {"n": int(v.numel())}
    if v.numel() == 0:
        out.update({"median": math.nan, "mean": math.nan})
        out.update({f"p{round(q * 100)}": math.nan for q in quantiles})
        return out
    out["median"] = float(v.median()) if v.numel() % 2 else float(v.quantile(0.5))
    out["mean"] = float(v.mean())
    qs = v.quantile(torch.tensor(list(quantiles), dtype=torch.float64))
    out.update({f"p{round(q * 100)}": float(x) for q, x in zip(quantiles, qs, strict=True)})
    return out


def derangement(n: int, generator: torch.Generator | None = None, device=None) -> Tensor:
    """A random permutation of ``range(n)`` with no fixed point (``n >= 2``).

    Conjugating a cyclic shift by a random permutation: ``sigma(i) = pi[(pi^-1[i] + s) % n]``
    with ``s`` in ``[1, n)``, which never maps ``i`` to itself.

    Examples:
        >>> p = derangement(5, torch.Generator().manual_seed(0))
        >>> bool((p != torch.arange(5)).all()), sorted(p.tolist())
        (True, [0, 1, 2, 3, 4])
    """
    if n < 2:
        raise ValueError(f"a derangement needs at least 2 elements, got {n}")
    pi = torch.randperm(n, generator=generator)
    s = int(torch.randint(1, n, (1,), generator=generator))
    inverse = torch.argsort(pi)
    sigma = pi[(inverse + s) % n]
    return sigma.to(device) if device is not None else sigma


def apply_paired(transform, x: Tensor, magnitude, generator: torch.Generator | None = None) -> tuple[Tensor, dict]:
    """Transform ``x`` once and return the output with the parameters drawn.

    The probes pass the same parameters to every pass that must see the same
    transformation (e.g. several models, or several layers), through
    ``transform(x, magnitude, params=params)``.
    """
    magnitude = transform.check_magnitude(magnitude, x)
    params = transform.sample(x, magnitude, generator=generator)
    return transform.apply_transform(x, params), params


def seeded(seed: int | None, device=None) -> torch.Generator | None:
    """A generator seeded with ``seed`` on ``device`` (``None`` for no seed)."""
    if seed is None:
        return None
    return torch.Generator(device=device if device is not None else "cpu").manual_seed(seed)


def forward_kwargs(model, copies: int | None, seed: int | None, device=None) -> dict:
    """Keyword arguments of a probing forward pass.

    For an :class:`~augnet.AugNet`, ``copies`` and a generator seeded with
    ``seed`` (on the inputs' ``device``): passes given the same seed draw the
    same augmentations, so paired clean / transformed passes differ only by the
    probed transformation. Other models take no arguments.
    """
    from augnet.model import AugNet

    if not isinstance(model, AugNet):
        if copies is not None:
            raise ValueError("copies applies to AugNet models only")
        return {}
    return {"copies": copies, "generator": seeded(seed, device)}
