"""Tests of significance for the per-unit measures, in torch: Fisher's F survival function and p-value corrections.

:func:`f_sf` is computed through the regularised incomplete beta function (its continued fraction,
in float64), so that :func:`augnet.probes.measures.anova_invariance` needs no scipy; :func:`p_adjust`
corrects a layer's p-values for multiple testing (Bonferroni, Benjamini-Hochberg).
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

__all__ = ["CORRECTIONS", "f_sf", "p_adjust"]


def _betainc(a: Tensor, b: Tensor, x: Tensor, iterations: int = 5000) -> Tensor:
    """The regularised incomplete beta function ``I_x(a, b)`` (continued fraction, modified Lentz), float64.

    Stops once every entry has converged (each step changes it by less than 1e-14 relative), checked every
    16 steps; ``iterations`` caps the steps (the fraction needs about ``sqrt(max(a, b))`` of them).
    """
    a, b, x = torch.broadcast_tensors(a.double(), b.double(), x.double())
    swap = x > (a + 1) / (a + b + 2)  # the fraction converges fast below this point; use the symmetry above it
    aa, bb, xx = torch.where(swap, b, a), torch.where(swap, a, b), torch.where(swap, 1 - x, x)
    inner = (xx > 0) & (xx < 1)
    xs = torch.where(inner, xx, torch.full_like(xx, 0.5))
    log_front = (
        aa * torch.log(xs) + bb * torch.log1p(-xs) - (torch.lgamma(aa) + torch.lgamma(bb) - torch.lgamma(aa + bb))
    )
    tiny = 1e-300
    c = torch.ones_like(xs)
    d = 1 - (aa + bb) * xs / (aa + 1)
    d = torch.where(d.abs() < tiny, torch.full_like(d, tiny), d)
    d = 1 / d
    h = d.clone()
    for m in range(1, iterations + 1):
        for num in (
            m * (bb - m) * xs / ((aa + 2 * m - 1) * (aa + 2 * m)),
            -(aa + m) * (aa + bb + m) * xs / ((aa + 2 * m) * (aa + 2 * m + 1)),
        ):
            d = 1 + num * d
            d = torch.where(d.abs() < tiny, torch.full_like(d, tiny), d)
            c = 1 + num / c
            c = torch.where(c.abs() < tiny, torch.full_like(c, tiny), c)
            d = 1 / d
            step = d * c
            h = h * step
        if m % 16 == 0 and bool(((step - 1).abs() < 1e-14).all()):
            break
    value = torch.exp(log_front) * h / aa
    value = torch.where(xx <= 0, torch.zeros_like(value), torch.where(xx >= 1, torch.ones_like(value), value))
    return torch.where(swap, 1 - value, value).clamp(0, 1)


def f_sf(f: Tensor, dfn: float, dfd: float) -> Tensor:
    """The survival function ``P(F > f)`` of Fisher's F distribution with ``(dfn, dfd)`` degrees of freedom.

    Through the regularised incomplete beta function, ``P(F > f) = I_{dfd / (dfd + dfn f)}(dfd / 2, dfn / 2)``
    (computed here in float64 by its continued fraction, so that no scipy is needed). NaN stays NaN.

    Shape:
        - f: any; output: the same, float64 (no gradient: a p-value, not a loss).

    Raises:
        TypeError: ``f`` is not a tensor of real numbers (bool and complex are refused).
        ValueError: a degree of freedom is not a positive finite number.

    Examples:
        >>> f_sf(torch.tensor([0.0, 1.0, float("inf")]), 2, 2)
        tensor([1.0000, 0.5000, 0.0000], dtype=torch.float64)
    """
    if not isinstance(f, Tensor):
        raise TypeError(f"f must be a tensor, got {type(f).__name__}")
    if f.is_complex() or f.dtype == torch.bool:  # a complex f lost its imaginary part (with a warning only)
        raise TypeError(f"f must hold real F statistics, got dtype {f.dtype}")
    for name, v in (("dfn", dfn), ("dfd", dfd)):
        # An infinite one gave 0 (dfn) or NaN (dfd) where F's limit (a chi-squared over its degrees) has a value.
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0 < v < math.inf:
            raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    f = f.detach().double()  # a graph through up to 5,000 steps of the continued fraction was kept otherwise
    x = dfd / (dfd + dfn * f.clamp_min(0))
    x = torch.where(torch.isinf(f), torch.zeros_like(x), x)
    out = _betainc(
        torch.tensor(dfd / 2, dtype=torch.float64, device=f.device),
        torch.tensor(dfn / 2, dtype=torch.float64, device=f.device),
        x,
    )
    return torch.where(torch.isnan(f), f, out)


#: The multiple-testing corrections of :func:`p_adjust` and :func:`anova_invariance`.
CORRECTIONS = ("bonferroni", "bh", "none")


def p_adjust(p: Tensor, correction: str = "bonferroni") -> Tensor:
    """p-values adjusted for multiple testing: Bonferroni, Benjamini-Hochberg (``"bh"``), or ``"none"``.

    Bonferroni multiplies by the number ``m`` of finite p-values (capped at 1); Benjamini-Hochberg's
    adjusted p-value of the ``i``-th smallest is ``min_{j >= i} m p_(j) / j`` (capped at 1), so that
    rejecting where it is ``<= alpha`` controls the false discovery rate at ``alpha``
    (Benjamini & Hochberg, 1995). NaN p-values stay NaN and are not counted.

    Shape:
        - p: (M,); output: (M,), float64.

    Raises:
        TypeError: ``p`` is not a tensor of real numbers (bool and complex are refused).
        ValueError: ``p`` is not 1-D, holds values outside [0, 1], or ``correction`` is unknown.

    Examples:
        >>> p_adjust(torch.tensor([0.01, 0.04, 0.03]), "bh")
        tensor([0.0300, 0.0400, 0.0400], dtype=torch.float64)
    """
    if not isinstance(p, Tensor):
        raise TypeError(f"p must be a tensor of p-values, got {type(p).__name__}")
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}, got {correction!r}")
    if p.is_complex() or p.dtype == torch.bool:  # complex lost its imaginary part; bools read as p = 0 or 1
        raise TypeError(f"p must hold real p-values, got dtype {p.dtype}")
    p = p.detach().double()
    finite = ~torch.isnan(p)
    if p.dim() != 1:
        raise ValueError(f"p must be a 1-D tensor of p-values in [0, 1], got shape {tuple(p.shape)}")
    outside = p[finite & ((p < 0) | (p > 1))]
    if len(outside):
        raise ValueError(
            f"p must hold p-values in [0, 1] (or NaN), got {len(outside)} outside: {outside[:5].tolist()}"
            f"{' ...' if len(outside) > 5 else ''}"
        )
    m = int(finite.sum())
    if correction == "none" or m == 0:
        return p.clone()
    if correction == "bonferroni":
        return (p * m).clamp(max=1)
    vals = p[finite]
    order = torch.argsort(vals)
    ranked = vals[order] * m / torch.arange(1, m + 1, dtype=torch.float64, device=p.device)
    ranked = torch.flip(torch.cummin(torch.flip(ranked, (0,)), 0).values, (0,)).clamp(max=1)
    adjusted = torch.empty_like(vals)
    adjusted[order] = ranked
    out = p.clone()
    out[finite] = adjusted
    return out


def _check_alpha(alpha) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a level in (0, 1), got {alpha!r}")
    return float(alpha)
