"""Magnitudes in [0, 1]: the clamp whose gradient survives at the bounds, and the inverse of calibration curves."""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
from torch import Tensor

from augnet._checks import as_values, number

__all__ = ["calibrated_change", "initial_magnitudes", "invert_change", "inward_clamp", "widened"]


class _InwardClamp(torch.autograd.Function):
    """Clamp to [0, 1] whose gradient survives at the bounds when it points inside.

    A plain clamp has zero gradient outside [0, 1], so a magnitude that reaches
    a bound can never come back. Here the gradient passes unchanged, except
    the part that would push a value already at or beyond a bound further out
    (which would let it drift away while the clamped value stays put).
    """

    # forward without ctx and a setup_context: the form torch.func (grad, jacrev, vmap) needs.
    generate_vmap_rule = True

    @staticmethod
    def forward(raw: Tensor) -> Tensor:
        return raw.clamp(0.0, 1.0)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (raw,) = ctx.saved_tensors
        # Gradient descent moves raw by -grad: outward at 0 is grad > 0, at 1 grad < 0.
        outward = ((raw <= 0.0) & (grad > 0)) | ((raw >= 1.0) & (grad < 0))
        return torch.where(outward, torch.zeros_like(grad), grad)


def inward_clamp(raw: Tensor) -> Tensor:
    """Clamp ``raw`` to [0, 1], keeping the gradient that points back inside.

    Raises:
        TypeError: ``raw`` is not a floating-point tensor.
    """
    if not isinstance(raw, Tensor) or not raw.is_floating_point():
        got = f"a {raw.dtype} tensor" if isinstance(raw, Tensor) else type(raw).__name__
        raise TypeError(f"inward_clamp: raw must be a floating-point tensor, got {got}")
    return _InwardClamp.apply(raw)


def invert_change(curves: Tensor, change: Tensor) -> Tensor:
    """Per row q, the magnitude in [0, 1] at which the monotone curve ``curves[q]`` reaches ``change[q]``.

    ``curves`` (Q, K) holds values at K evenly spaced magnitudes; the inverse is piecewise linear and
    differentiable in ``change``. A change equal to a flat stretch's value gives the stretch's first magnitude
    (so a curve that starts flat, as a gate's measured on few rows does, still gives 0 at a change of 0: the
    identity); a change just above it gives the stretch's end. The derivative at a knot is that of the rising
    segment the change enters going up (at a change of 0, the first rising segment's slope), and at the curve's
    end value that of the segment arriving there (the one-sided derivative, finite at a flat end too): a
    calibrated magnitude at 0 or at its cap takes the task's gradient, and can come back from a bound.

    Raises:
        TypeError, ValueError: ``curves`` not a floating-point (Q, K) tensor with K >= 2, ``change`` not a
            floating-point (Q,) tensor (torch's IndexError or RuntimeError before).

    Examples:
        >>> curves = torch.tensor([[0.0, 0.0, 0.5, 1.0]])  # flat from 0 to 1/3
        >>> invert_change(curves, torch.tensor([0.0])), invert_change(curves, torch.tensor([0.25]))
        (tensor([0.]), tensor([0.5000]))
    """
    _check_curves(curves, change)
    k = curves.shape[1]
    # contiguous: a column of a matrix as change made searchsorted warn (the values are the same)
    grid, at = curves.detach().contiguous(), change.detach()[:, None].contiguous()
    idx = torch.searchsorted(grid, at, right=True).clamp(1, k - 1)
    y0, y1 = curves.gather(1, idx - 1).squeeze(1), curves.gather(1, idx).squeeze(1)
    step = 1.0 / (k - 1)
    x0 = (idx.squeeze(1) - 1).to(change.dtype) * step
    slope = step / (y1 - y0).clamp_min(1e-12)
    out = x0 + (change - y0) * slope
    # On a flat stretch's value exactly (right=True lands after the stretch): its first magnitude, branch-free.
    first = torch.searchsorted(grid, at, right=False).clamp(max=k - 1)
    hit = (grid.gather(1, first) == at).squeeze(1)
    # Its derivative: the segment after the stretch; at a flat end (no rising segment after it), the one before.
    before = _arriving(curves, first, change, step)
    slope_of = torch.where(y1 > y0, out, before)
    out = torch.where(hit, first.squeeze(1).to(change.dtype) * step + (slope_of - slope_of.detach()), out)
    # [0, 1] with the derivative kept at the bounds themselves (clamp's is 0 there: magnitudes 0 and 1 stuck).
    return torch.where((out >= 0.0) & (out <= 1.0), out, out.clamp(0.0, 1.0))


def _arriving(curves: Tensor, first: Tensor, change: Tensor, step: float) -> Tensor:
    """``change`` on the segment arriving at knot ``first`` (Q, 1): its derivative there (0 at a curve's first knot)."""
    b0, b1 = curves.gather(1, (first - 1).clamp_min(0)).squeeze(1), curves.gather(1, first).squeeze(1)
    rises = b1 > b0
    slope = torch.where(rises, step / (b1 - b0).clamp_min(1e-12), torch.zeros_like(b1))
    return (change - b0) * slope


def calibrated_change(mu: Tensor, curves: Tensor) -> Tensor:
    """The (Q,) changes calibrated layer magnitudes ``mu`` (Q,) ask of ``curves`` (Q, K): ``mu`` times the largest end.

    A magnitude at its cap (``end_q / max end``) asks exactly curve ``q``'s end: ``mu * max`` may round an ulp above it
    (about 1 case in 18), past the curve, where the inverse's derivative is 0 and the magnitude, stuck at its bound,
    would take no task gradient. The derivative in ``mu`` is kept; below the ends the values are ``mu * max`` as is.
    """
    end = curves[:, -1]
    change = mu * end.max()
    return torch.where(change > end, end + (change - change.detach()), change)


def _check_curves(curves, change) -> None:
    """The TypeError / ValueError naming ``curves`` or ``change`` unless they are (Q, K >= 2) and (Q,) float tensors."""
    for name, value in (("curves", curves), ("change", change)):
        if not isinstance(value, Tensor) or not value.is_floating_point():
            got = f"a {value.dtype} tensor" if isinstance(value, Tensor) else type(value).__name__
            raise TypeError(f"invert_change: {name} must be a floating-point tensor, got {got}")
    if curves.dim() != 2 or curves.shape[1] < 2:
        raise ValueError(f"invert_change: curves must have shape (Q, K) with K >= 2 magnitudes, got "
                         f"{tuple(curves.shape)}")  # fmt: skip
    if change.shape != curves.shape[:1]:
        raise ValueError(f"invert_change: change must have shape ({len(curves)},), one value per curve, got "
                         f"{tuple(change.shape)}")  # fmt: skip


def widened(t: Tensor) -> Tensor:
    """``t`` in float32 if it is floating point of a lower precision (a model cast with ``.half()`` / ``.bfloat16()``).

    A layer computes its weights, magnitudes and ranges from its parameters in at least float32: a policy
    read from a low-precision model is then the one its saved state gives when rebuilt in float32, and the
    transforms draw at float32 magnitudes, as they do under autocast.
    """
    return t.float() if t.is_floating_point() and t.dtype not in (torch.float32, torch.float64) else t


def initial_magnitudes(init, q: int) -> list[float]:
    """A layer's ``init_magnitude`` (a number, or one per transform) as ``q`` floats in [0, 1], checked.

    A tensor or a NumPy array gives its values (:func:`~augnet._checks.as_values`), and each item of a list is
    read as a number (:func:`~augnet._checks.number`: ``[torch.tensor(0.2), 0.5]`` is ``[0.2, 0.5]``).
    """
    init = as_values(init, "init_magnitude")  # a tensor, a NumPy array or scalar: its values (meta refused)
    if isinstance(init, numbers.Real) and not isinstance(init, bool):
        values = [float(init)] * q
    elif isinstance(init, Sequence) and not isinstance(init, (str, bytes, bytearray)):
        init = [number("init_magnitude", v) for v in init]
        bad = [v for v in init if isinstance(v, bool) or not isinstance(v, numbers.Real)]
        if bad:
            raise TypeError(f"init_magnitude values must be numbers, got {bad[0]!r} in {list(init)!r}")
        values = [float(v) for v in init]
        if len(values) != q:
            raise ValueError(f"init_magnitude has {len(values)} values for {q} transforms")
    else:
        raise TypeError(f"init_magnitude must be a float or a sequence of floats, got {type(init).__name__}")
    for v in values:
        if not math.isfinite(v) or not 0.0 <= v <= 1.0:
            raise ValueError(f"init_magnitude values must lie in [0, 1], got {v}")
    return values
