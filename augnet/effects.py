"""Effects: how much each candidate transform changes a trunk's outputs, the units selection compares in.

The selective regulariser rewards a layer for the transform with the largest
admissible magnitude. A magnitude in each transform's own [0, 1] units says
nothing about how much the transform does: noise of 0.1 of the signal's
standard deviation at magnitude 1 is harmless and useless, a frequency shift
of ±2 Hz at magnitude 1 changes the class. Measured in its own units, the
harmless transform wins. augnet measures instead what each transform does to
the trunk's outputs, per unit of magnitude, while training, and the
regulariser compares the transforms in those units (see
:func:`augnet.selective_regularizer`).

For a layer with transforms :math:`T_q` at magnitudes :math:`\\mu_q`, on a batch
:math:`x` and the trunk :math:`f` (in evaluation mode, without gradients),

.. math::
    e_q = \\frac{1}{m_q} \\sqrt{\\frac{\\mathbb{E}\\,\\| f(T_q(x; m_q)) - f(x) \\|^2}
                                     {\\mathbb{E}\\,\\| f(x) - \\bar f(x) \\|^2}},
    \\qquad m_q = \\max(\\mu_q, m_{\\min}),

the change of the outputs relative to their spread over the batch, per unit of
magnitude (the secant at the current magnitude, so :math:`e_q \\mu_q` is the
change the transform makes now; for a calibrated layer :math:`\\mu_q` is in the
layer's calibrated units and :math:`T_q` runs at the matching magnitude of its
own). The effects are normalised so that their mean
under the layer's weights is 1 (the selected transform's effect is then about
1, and the regulariser's push on its magnitude is the paper's) and smoothed
over the measurements by an exponential moving average.

:class:`augnet.AugNet` measures every ``effect_every`` training steps on the
batch it is given (:meth:`augnet.AugNet.measure_effects`); the effects live in
each layer's ``effect`` buffer (saved in the state dict).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from augnet._calibration import evaluating
from augnet._checks import is_int, is_real, number

__all__ = ["MIN_MAGNITUDE", "effect_of_layer", "measure_effects", "update_effect"]

#: The smallest magnitude an effect is measured at (the secant of a transform at 0 is taken at this magnitude).
MIN_MAGNITUDE = 0.05


@torch.no_grad()
def effect_of_layer(
    trunk: nn.Module, layer: nn.Module, x: Tensor, base: Tensor, generator: torch.Generator | None = None
) -> Tensor:
    """The (Q,) effects of ``layer``'s transforms on ``trunk``'s outputs (unnormalised).

    Args:
        trunk: the model whose outputs are compared (called on augmented ``x``).
        layer: an :class:`~augnet.AugmentationLayer`.
        x: the inputs, :math:`(B, ...)`.
        base: ``trunk(x)``, :math:`(B, ...)`.
        generator: draws the transforms' parameters.

    Returns:
        The change of the outputs relative to their spread, per unit of
        magnitude, for each transform; all NaN when the outputs do not vary
        over the batch (nothing to compare against) or are not finite.

    Raises:
        TypeError, ValueError: a ``trunk`` that is not callable, a ``base`` that is not a tensor shaped as the
            trunk's outputs.
    """
    _check_trunk(trunk)
    if not isinstance(base, Tensor):
        raise TypeError(f"effect_of_layer: base must be trunk(x), a tensor, got {type(base).__name__}")
    base = base.float()
    spread = (base - base.mean(0, keepdim=True)).pow(2).mean()
    at = layer.magnitudes.detach().clamp_min(MIN_MAGNITUDE)  # the layer's magnitudes, which the regulariser weighs
    run = layer.transform_magnitude_of(at)  # what each transform runs at (its own units; the same uncalibrated)
    changes = []
    for q, t in enumerate(layer.transforms):
        moved = trunk(t(x, run[q], generator=generator)).float()
        if moved.shape != base.shape:  # a base of other rows was broadcast (or failed inside torch)
            raise ValueError(f"effect_of_layer: base must be trunk(x), shaped as the trunk's outputs "
                             f"{tuple(moved.shape)}, got shape {tuple(base.shape)}")  # fmt: skip
        changes.append((moved - base).pow(2).mean())
    change = torch.stack(changes)
    effect = (change / spread).sqrt() / at.to(change)
    usable = torch.isfinite(effect).all() & (spread > 0)
    return torch.where(usable, effect, torch.full_like(effect, float("nan")))


def update_effect(layer: nn.Module, effect: Tensor, momentum: float) -> None:
    """Normalise ``effect`` (mean 1 under the layer's weights) and move ``layer.effect`` towards it.

    The first measurement replaces the initial effects (all 1); later ones
    enter a moving average. A measurement that is not finite (see
    :func:`effect_of_layer`) leaves the layer as it is. No value is read on
    the host (no device synchronisation).

    Raises:
        TypeError, ValueError: a ``momentum`` that is not a number in [0, 1] (a NaN one made the effects NaN), an
            ``effect`` that is not a tensor of one value per transform (a shorter one was broadcast over them).
    """
    momentum = _momentum(momentum)
    old, measured = layer.effect, layer.effect_measured
    if not isinstance(effect, Tensor):
        raise TypeError(
            f"update_effect: effect must be a tensor of one value per transform, got {type(effect).__name__}"
        )
    if effect.shape != old.shape:  # a (1,) effect was broadcast over every transform, a (Q, Q) one failed in torch
        raise ValueError(
            f"update_effect: effect must have shape {tuple(old.shape)}, one value per transform of the layer, got "
            f"{tuple(effect.shape)}"
        )
    if effect.device != old.device and "meta" in (effect.device.type, old.device.type):
        return  # shapes only on one side: nothing to measure into the layer
    with torch.no_grad():
        effect = effect.to(old)
        scale = (layer.weights.detach().to(old) * effect).sum()
        normalised = effect / scale
        valid = torch.isfinite(normalised).all() & (scale > 0)
        blended = torch.where(measured, (1 - momentum) * old + momentum * normalised, normalised)
        old.copy_(torch.where(valid, blended, old))
        measured.copy_(measured | valid)


def _momentum(momentum) -> float:
    """``momentum`` as a float, or the TypeError / ValueError naming it unless it is a number in [0, 1]."""
    # A 0-d tensor (as from a schedule: a host read outside any step) or a 0-d array: the number it holds.
    momentum = number("momentum", momentum)
    if not is_real(momentum):
        raise TypeError(f"momentum must be a number in [0, 1], got {momentum!r}")
    if not 0.0 <= momentum <= 1.0:  # NaN fails too
        raise ValueError(f"momentum must be a number in [0, 1], got {momentum!r}")
    return float(momentum)


def _check_trunk(trunk) -> None:
    """The TypeError of a ``trunk`` that cannot be called (``None`` raised "'NoneType' object is not callable")."""
    if not callable(trunk):
        raise TypeError(f"trunk must be a model (a callable: inputs -> outputs), got {type(trunk).__name__}")


def _layers(layers) -> list:
    """``layers`` as a list of augmentation layers, or the TypeError naming it (one layer not in a list raised
    "not iterable" after the trunk ran, a module that is no layer an AttributeError)."""
    try:
        layers = list(layers)
    except TypeError:
        one = ": pass [layer]" if hasattr(layers, "effect") else ""
        raise TypeError(
            f"measure_effects: layers must be a list of augmentation layers, got {type(layers).__name__}{one}"
        ) from None
    for layer in layers:
        if not all(hasattr(layer, name) for name in ("effect", "effect_measured", "transform_magnitude_of")):
            raise TypeError(f"measure_effects: layers must hold augmentation layers, got {type(layer).__name__}")
    return layers


@torch.no_grad()
def measure_effects(
    trunk: nn.Module,
    layers: list[nn.Module],
    x: Tensor,
    rows: int = 64,
    momentum: float = 0.3,
    generator: torch.Generator | None = None,
) -> None:
    """Measure every layer's effects on ``trunk`` with (up to ``rows`` of) the clean batch ``x``; update them.

    The trunk runs in evaluation mode (batch norm on its running statistics,
    no dropout) and every submodule is put back in the mode it was in (a batch
    norm frozen in a training model stays frozen): measuring does not change
    the model. Each layer's transforms are applied to the clean inputs
    (for a stack, every layer is measured where the first one sits).

    Args:
        trunk: the model the layers feed.
        layers: the :class:`~augnet.AugmentationLayer` instances to measure.
        x: a batch of clean inputs :math:`(B, ...)`.
        rows: how many rows of ``x`` to use (an int, or a 0-d integer tensor or array; ``None``: every row;
            fewer than 2 measure nothing).
        momentum: weight of the new measurement in the moving average.
        generator: draws the transforms' parameters (default: one seeded with 0 on x's device).

    Raises:
        TypeError, ValueError: ``rows`` not ``None`` or an int >= 0, ``momentum`` not a number in [0, 1], ``x`` not a
            tensor or not an input the layers' transforms take (type, floating-point dtype, rank, sizes: checked as a
            layer checks its input), ``layers`` not a list of augmentation layers, ``trunk`` not callable; before
            anything changes.
    """
    rows = number("rows", rows)  # a 0-d integer tensor or array: the int it holds (a float or bool one is refused)
    if rows is not None and not is_int(rows):
        raise TypeError(f"measure_effects: rows must be None or an int >= 0, got {rows!r}")
    if rows is not None and rows < 0:  # rows=-1 measured on all rows but the last
        raise ValueError(f"measure_effects: rows must be None or an int >= 0, got {rows!r}")
    momentum = _momentum(momentum)
    if not isinstance(x, Tensor):
        raise TypeError(f"measure_effects: x must be a tensor of inputs, got {type(x).__name__}")
    layers = _layers(layers)
    _check_trunk(trunk)
    for layer in layers:  # the transforms' checks (the trunk's own errors on such inputs came from inside torch)
        for t in getattr(layer, "transforms", ()):
            t.check_input(x)
    # A copy: the trunk runs on these clean rows (in training it sees only augmented ones), and one that works in
    # place on its input would write the caller's batch.
    x = x[: None if rows is None else int(rows)].detach().clone()
    if len(x) < 2:
        return
    if generator is None and x.device.type != "meta":
        generator = torch.Generator(x.device).manual_seed(0)
    try:
        with evaluating(trunk):  # every submodule back in its own mode (a frozen batch norm stays frozen)
            base = trunk(x)
            if not isinstance(base, Tensor) or base.shape[:1] != x.shape[:1]:
                return
            for layer in layers:
                update_effect(layer, effect_of_layer(trunk, layer, x, base, generator), momentum)
    finally:
        # Under autocast, torch 2.4 (not 2.11 or later) cached the weights' low-precision casts made here, without
        # grad, and handed them to the training forward that follows in the same region: the trunk's weights got
        # no gradient on a step that measured. Dropped here, they are cast again with their history.
        torch.clear_autocast_cache()
