"""Shared pieces of the probes: summaries, derangements, paired transforms."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["DRAWS", "apply_paired", "check_draws", "derangement", "forward_kwargs", "seeded", "summary"]

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
#: The central 75 % interval of the AugNet paper's Figs. 5 and B.4 ("median ... with a 75% confidence
#: interval"): from the 12.5th to the 87.5th percentile.
INTERVAL75 = (0.125, 0.875)
#: How an AugNet's own augmentations are drawn in paired clean / transformed passes:
#: ``"shared"`` (the same draws: the passes differ only by the probed transformation) or
#: ``"independent"`` (fresh draws in every pass, as two calls of the model in use would make).
DRAWS = ("shared", "independent")


def summary(values: Tensor, quantiles: Sequence[float] = QUANTILES) -> dict[str, float]:
    """Median, mean and percentiles of ``values``, ignoring NaN.

    Returns:
        ``{"median", "mean", "n", "p5", "p25", ..., "interval75_low", "interval75_high"}``:
        ``n`` counts the values that are not NaN; ``interval75_low`` and
        ``interval75_high`` bound the central 75 % of the values (the 12.5th and
        87.5th percentiles: the "75% confidence interval" around the median of the
        AugNet paper's Figs. 5 and B.4); every statistic is NaN when there are none.

    Examples:
        >>> summary(torch.tensor([1.0, 2.0, float("nan"), 3.0]))["median"]
        2.0
        >>> s = summary(torch.arange(9.0))
        >>> s["interval75_low"], s["interval75_high"]
        (1.0, 7.0)
    """
    v = torch.as_tensor(values, dtype=torch.float64).flatten()
    v = v[~torch.isnan(v)]
    out: dict[str, float] = {"n": int(v.numel())}
    names = [f"p{round(q * 100)}" for q in quantiles] + ["interval75_low", "interval75_high"]
    if v.numel() == 0:
        out.update({"median": math.nan, "mean": math.nan})
        out.update(dict.fromkeys(names, math.nan))
        return out
    out["median"] = float(v.median()) if v.numel() % 2 else float(v.quantile(0.5))
    out["mean"] = float(v.mean())
    qs = v.quantile(torch.tensor([*quantiles, *INTERVAL75], dtype=torch.float64))
    out.update({name: float(x) for name, x in zip(names, qs, strict=True)})
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


def check_draws(draws) -> str:
    """``draws`` if it is one of :data:`DRAWS`, else a ValueError naming it."""
    if draws not in DRAWS:
        raise ValueError(f"draws must be one of {DRAWS}, got {draws!r}")
    return draws


def forward_kwargs(
    model, copies: int | None, seed: int | None, device=None, draws: str = "shared", pass_index: int = 0
) -> dict:
    """Keyword arguments of a probing forward pass.

    For an :class:`~augnet.AugNet`, ``copies`` and a generator on the inputs'
    ``device``. With ``draws="shared"`` every pass is seeded with ``seed``, so
    paired clean / transformed passes draw the same augmentations and differ
    only by the probed transformation. With ``draws="independent"`` pass
    ``pass_index`` (0 for the clean pass, 1, 2, ... for transformed ones) is
    seeded with a different seed derived from ``seed`` and ``pass_index``, so
    the passes draw independent augmentations, as two calls of the model in
    use would (the AugNet paper's Fig. B.4 measures that: its invariance grows
    with the number of copies C). Other models take no arguments.
    """
    from augnet.model import AugNet

    check_draws(draws)
    if not isinstance(model, AugNet):
        if copies is not None:
            raise ValueError("copies applies to AugNet models only")
        return {}
    if draws == "independent" and seed is not None:
        seed = (seed * 1_000_003 + 7919 * (pass_index + 1)) % (2**63)
    return {"copies": copies, "generator": seeded(seed, device)}
