"""Invariance of individual neurons on the inputs that activate them (Zaidi et al., section 2.2, eq. 1).

For a unit ``k`` with non-negative activity ``a_k(x)`` (e.g. after a ReLU) on
clean inputs ``x`` and on their transformed versions ``T(x)``:

- the activity is normalised by the unit's maximum over clean and transformed
  inputs together, ``f_k = a_k / max_x max(a_k(x), a_k(T(x)))``, so that
  rescaling a unit (and dividing its outgoing weights) changes nothing;
- the unit's active set is ``A_k = {x : f_k(x) > tau or f_k(T(x)) > tau}``;
- each input scores ``h_k(x) = 1 - |f_k(T(x)) - f_k(x)| / (f_k(T(x)) + f_k(x))``
  (eq. 1): 1 when the activity does not change, 0 when it appears or vanishes;
- the unit's invariance coefficient is ``I_k``, the mean of ``h_k`` over ``A_k``
  (NaN for a unit that no input activates).

The threshold ``tau`` is chosen by ablation (Zaidi et al., section 3.2 and
appendix C): the largest ``tau`` on a grid for which zeroing every activity at
or below it costs at most 1% accuracy; see :func:`select_tau`.

What a unit is. A fully connected layer's (B, units) output has one neuron
per column. A convolutional layer's (B, C, H, W) output can be read two ways,
and every function here takes the same ``units`` argument (see :data:`UNITS`
and :func:`layer_units`), so that a ``tau`` chosen by :func:`select_tau` for
one reading is the ``tau`` that :func:`neuron_invariance` and
:func:`layerwise_invariance` apply to the same reading:

- ``units="element"`` (the default): every element after the batch axis is a
  unit, a neuron at each position (``C * H * W`` units);
- ``units="channel"``: one unit per channel, its activity the mean over the
  positions (global average pooling, as ``features(..., reduce="mean")``); the
  ablation of :func:`select_tau` then zeroes a whole channel map.

For a (B, units) layer the two are the same. The normaliser of a unit is its
maximum over clean *and* transformed inputs (the paper's ``f_k``) everywhere:
:func:`select_tau` therefore needs the transformed inputs (a ``transform`` or
``x_t``) and refuses to run on clean inputs alone.

Non-finite activity (NaN or inf) raises a ValueError everywhere: a NaN unit
would otherwise drop out of its input's scores, or turn the normaliser (and so
every score of that unit) into NaN.

Figures of the paper: :func:`layerwise_invariance` gives the mean invariance
of several layers in one call, for all inputs and separately for the
seen- and unseen-transformed categories (Fig. 10);
:func:`plot_neuron_invariance` draws the distribution of ``I_k`` among units,
one violin per layer or condition (Figs. 3-4, 8-9); ``select_tau(...,
score="within")`` scores the ablations by within-category accuracy on the
transformed images (Fig. 7).

Zaidi, Boix, et al., "Is Robustness To Transformations Driven by Invariant
Neural Representations?".
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from augnet.probes._common import check_draws, forward_kwargs, seeded, summary
from augnet.probes.features import features

__all__ = [
    "DEFAULT_TAUS",
    "PLOTTED",
    "SCORES",
    "UNITS",
    "layer_units",
    "layerwise_invariance",
    "neuron_invariance",
    "plot_neuron_invariance",
    "select_tau",
    "unit_scale",
]

#: What a unit of a layer is: each element after the batch axis, or each channel (mean over positions).
UNITS = ("element", "channel")

#: What :func:`select_tau` scores: accuracy on every evaluated input (clean and transformed, every
#: class), or within-category accuracy, on the transformed inputs of the seen-transformed classes (Fig. 7).
SCORES = ("all", "within")

#: What :func:`plot_neuron_invariance` can draw: the coefficients among units (Figs. 3b-c, 4), the size of
#: each unit's active set, or how many units each input activates (Fig. 3a).
PLOTTED = ("invariance", "n_active", "units_per_input")

#: The paper's grid, 0 to 0.95 in steps of 0.05 (``tau = 1`` leaves no unit active).
DEFAULT_TAUS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(20))

#: Accuracies are ratios of counts; a drop equal to ``max_drop`` up to this rounding passes.
_ROUNDING = 1e-9


def _check_tau(tau, name: str = "tau") -> float:
    if isinstance(tau, bool) or not isinstance(tau, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(tau).__name__}")
    tau = float(tau)
    if not 0.0 <= tau <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1] (activities are normalised to a maximum of 1), got {tau}")
    return tau


def _check_units(units) -> str:
    if units not in UNITS:
        raise ValueError(f"units must be one of {UNITS}, got {units!r}")
    return units


def _pool(a: Tensor, units: str) -> Tensor:
    """(B, ...) -> (B, units): flatten every element, or average each channel over its positions."""
    if units == "channel" and a.dim() > 2:
        return a.flatten(2).mean(2)
    return a.flatten(1)


def layer_units(a: Tensor, units: str = "element") -> Tensor:
    """A layer's activity as (B, units) under the chosen reading of a unit (see the module docstring).

    ``units="element"`` flattens every axis after the batch axis; ``units="channel"``
    averages each channel (axis 1) over the remaining axes. A (B, units) input
    is returned as is by both.

    Shape:
        - a: (B, C, ...) with B >= 1.
        - output: (B, C * ...) for ``"element"``, (B, C) for ``"channel"``.

    Examples:
        >>> a = torch.arange(8.0).reshape(1, 2, 2, 2)
        >>> layer_units(a).shape, layer_units(a, "channel").tolist()
        (torch.Size([1, 8]), [[1.5, 5.5]])
    """
    _check_units(units)
    if not isinstance(a, Tensor):
        raise TypeError(f"a must be a tensor, got {type(a).__name__}")
    if a.dim() < 2:
        raise ValueError(f"a must have shape (B, units) or (B, C, ...), got {tuple(a.shape)}")
    return _pool(a, units)


def _check_activations(a, name: str, units: str = "element") -> Tensor:
    if not isinstance(a, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(a).__name__}")
    if a.dim() < 2:
        raise ValueError(
            f"{name} must have shape (B, units) or (B, C, ...) (a layer's output, read with units='element' "
            f"or 'channel'), got {tuple(a.shape)}"
        )
    if a.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch (shape {tuple(a.shape)})")
    if a.dtype == torch.bool or a.is_complex():
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    a = a.detach().double()
    bad = ~torch.isfinite(a)
    if bool(bad.any()):
        rows = torch.nonzero(bad.flatten(1).any(1)).flatten().tolist()
        raise ValueError(
            f"{name} holds non-finite values (NaN or inf) in input(s) {rows[:10]}{' ...' if len(rows) > 10 else ''}; "
            "they would turn the scale, and so every score, of their units into NaN: drop those inputs first"
        )
    low = float(a.min())
    if low < 0:
        raise ValueError(
            f"{name} holds negative activations (minimum {low:.4g}); the measure needs non-negative ones: "
            "probe a layer after its ReLU, or pass a.clamp_min(0) if that is what the next layer sees"
        )
    return _pool(a, units)


def unit_scale(a: Tensor, a_t: Tensor | None = None, units: str = "element") -> Tensor:
    """Each unit's maximum over the clean (and transformed) inputs: the normaliser of the measure.

    Shape:
        - a, a_t: (B, units) or (B, C, ...), non-negative, read as ``units``
          (see :func:`layer_units`).
        - output: (units,) float64; 0 for a unit that is never active.

    Examples:
        >>> unit_scale(torch.tensor([[1.0, 0.0], [3.0, 0.0]]), torch.tensor([[2.0, 0.0], [0.0, 0.0]]))
        tensor([3., 0.], dtype=torch.float64)
    """
    units = _check_units(units)
    a = _check_activations(a, "a", units)
    m = a.amax(0)
    if a_t is not None:
        a_t = _check_activations(a_t, "a_t", units)
        if a_t.shape[1] != a.shape[1]:
            raise ValueError(f"a and a_t must have the same units, got shapes {tuple(a.shape)} and {tuple(a_t.shape)}")
        m = torch.maximum(m, a_t.amax(0))
    return m


def neuron_invariance(a: Tensor, a_t: Tensor, tau: float, rows: Tensor | None = None, units: str = "element") -> dict:
    """Per-unit invariance coefficients ``I_k`` of Zaidi et al. (eq. 1, see the module docstring).

    Args:
        a: activations on the clean inputs, ``f(x)``; non-negative (negative
            values raise a ValueError: probe the layer after its ReLU; NaN or
            inf raise a ValueError too).
        a_t: activations on the transformed inputs, ``f(T(x))``, row ``i`` the
            transformed version of row ``i`` of ``a``.
        tau: activity threshold in [0, 1] on the normalised activity (see
            :func:`select_tau`, which must be given the same ``units``).
        rows: optional (B,) bool mask of the inputs that enter the units'
            means, e.g. the samples of the seen-transformed categories; the
            normalisation still uses every row, so scores of different groups
            are on the same scale.
        units: what a unit is, ``"element"`` or ``"channel"`` (see
            :func:`layer_units`); the same for a (B, units) input.

    Returns:
        A dict with

        - ``"invariance"``: (units,) float64, ``I_k`` in [0, 1]; NaN for a unit
          with an empty active set (never above ``tau``, e.g. a dead unit).
        - ``"scores"``: (B, units) float64, ``h_k(x)`` for every pair where the
          clean or the transformed activity is non-zero; NaN where both are 0.
        - ``"active"``: (B, units) bool, ``x in A_k`` (and in ``rows``).
        - ``"n_active"``: (units,) int64, the size of each active set.
        - ``"units_per_input"``: (B,) int64, how many units each input activates.
        - ``"active_fraction"``: the fraction of the normalised activities, of
          every unit on every clean and every transformed input, above ``tau``
          (what :func:`select_tau` reports for the same ``tau`` and ``units``).
        - ``"scale"``: (units,) float64, each unit's maximum (the normaliser).
        - ``"units"``: the reading of a unit used.
        - ``"summary"``: :func:`summary` of ``"invariance"`` over the units that
          are not NaN, plus ``"n_units"`` and ``"n_never_active"``.

    Shape:
        - a, a_t: (B, units) or (B, C, ...), B >= 1, the same shape.
        - rows: (B,).

    Examples:
        >>> a = torch.tensor([[1.0, 0.0], [0.5, 0.0]])
        >>> out = neuron_invariance(a, torch.tensor([[1.0, 0.0], [0.0, 0.0]]), tau=0.1)
        >>> out["invariance"]
        tensor([0.5000,    nan], dtype=torch.float64)
        >>> out["summary"]["n"], out["summary"]["n_never_active"]
        (1, 1)
    """
    tau = _check_tau(tau)
    units = _check_units(units)
    if isinstance(a, Tensor) and isinstance(a_t, Tensor) and a.shape != a_t.shape:
        raise ValueError(f"a and a_t must have the same shape, got {tuple(a.shape)} and {tuple(a_t.shape)}")
    a = _check_activations(a, "a", units)
    a_t = _check_activations(a_t, "a_t", units)
    if rows is not None:
        if not isinstance(rows, Tensor) or rows.dtype != torch.bool:
            raise TypeError(f"rows must be a bool tensor, got {type(rows).__name__} {getattr(rows, 'dtype', '')}")
        if rows.shape != (a.shape[0],):
            raise ValueError(f"rows must have shape ({a.shape[0]},), got {tuple(rows.shape)}")
        rows = rows.to(a.device)
    scale = torch.maximum(a.amax(0), a_t.amax(0))
    live = scale > 0
    div = torch.where(live, scale, torch.ones_like(scale))
    f, f_t = a / div, a_t / div
    total = f + f_t
    nonzero = total > 0
    scores = torch.where(
        nonzero, 1.0 - (f_t - f).abs() / torch.where(nonzero, total, torch.ones_like(total)), torch.nan
    )
    above, above_t = f > tau, f_t > tau
    active = above | above_t
    if rows is not None:
        active = active & rows[:, None]
    n_active = active.sum(0)
    kept = torch.where(active, scores, torch.zeros_like(scores)).sum(0)
    invariance = torch.where(n_active > 0, kept / n_active.clamp_min(1), torch.nan)
    stats = summary(invariance)
    stats["n_units"] = int(invariance.numel())
    stats["n_never_active"] = int((n_active == 0).sum())
    return {
        "invariance": invariance,
        "scores": scores,
        "active": active,
        "n_active": n_active,
        "units_per_input": active.sum(1),
        "active_fraction": float((above.double().sum() + above_t.double().sum()) / (2 * above.numel())),
        "scale": scale,
        "units": units,
        "summary": stats,
    }


# --------------------------------------------------------------------------- tau by ablation


def _check_labels(x, y) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if not isinstance(y, Tensor):
        raise TypeError(f"y must be a tensor of class indices, got {type(y).__name__}")
    if y.dim() != 1 or y.dtype.is_floating_point or y.dtype == torch.bool or y.is_complex():
        raise ValueError(f"y must be a 1-D integer tensor of class indices, got shape {tuple(y.shape)} {y.dtype}")
    if len(x) != len(y):
        raise ValueError(f"x and y must have the same length, got {len(x)} and {len(y)}")
    if len(x) == 0:
        raise ValueError("x is an empty batch")


def _check_batch_size(batch_size, n: int) -> int:
    if batch_size is None:
        return n
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    return batch_size


def _predict(model: nn.Module, x: Tensor, step: int, copies, seed: int) -> Tensor:
    """Class predictions, chunk by chunk; an AugNet gets the same augmentation draws on every call."""
    kwargs = forward_kwargs(model, copies, seed, x.device)
    preds = []
    for start in range(0, len(x), step):
        out = model(x[start : start + step], **kwargs)
        if isinstance(out, (tuple, list)):
            out = out[0]
        if not isinstance(out, Tensor) or out.dim() != 2:
            raise ValueError(
                f"the model must return (B, classes) logits, got {getattr(out, 'shape', type(out).__name__)}"
            )
        preds.append(out.argmax(1))
    return torch.cat(preds)


def _check_transform_inputs(x: Tensor, transform, magnitude, x_t, seed: int, who: str) -> Tensor:
    """The transformed inputs: ``x_t`` as given, or ``transform(x, magnitude)`` drawn from ``seed + 1``."""
    if (transform is None) == (x_t is None):
        raise ValueError(
            f"{who} needs the transformed inputs, as transform= or x_t= (one of the two): the paper normalises "
            "each unit by its maximum over clean and transformed inputs; for clean inputs alone pass x_t=x"
        )
    if transform is not None:
        if not callable(transform):
            raise TypeError(f"transform must be callable, got {type(transform).__name__}")
        x_t = transform(x, magnitude, generator=seeded(seed + 1, x.device))
    if not isinstance(x_t, Tensor) or x_t.shape != x.shape:
        raise ValueError(
            f"the transformed inputs must have the inputs' shape {tuple(x.shape)}, got "
            f"{tuple(getattr(x_t, 'shape', ())) if isinstance(x_t, Tensor) else type(x_t).__name__}"
        )
    return x_t.to(x.device)


def _seen_mask(y: Tensor, seen_classes) -> Tensor:
    if seen_classes is None:
        return torch.ones(len(y), dtype=torch.bool, device=y.device)
    if isinstance(seen_classes, Tensor):
        seen_classes = seen_classes.flatten().tolist()
    if isinstance(seen_classes, (str, bytes)) or not isinstance(seen_classes, Iterable):
        raise TypeError(f"seen_classes must be an iterable of class indices, got {type(seen_classes).__name__}")
    seen = []
    for c in seen_classes:
        if isinstance(c, bool) or not isinstance(c, numbers.Integral):
            raise TypeError(f"seen_classes must hold integer class indices, got {c!r}")
        seen.append(int(c))
    return torch.isin(y, torch.tensor(seen, dtype=y.dtype, device=y.device))


@torch.no_grad()
def select_tau(
    model: nn.Module,
    layer: str,
    x: Tensor,
    y: Tensor,
    taus: Sequence[float] = DEFAULT_TAUS,
    max_drop: float = 0.01,
    transform=None,
    magnitude: float = 1.0,
    copies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    x_t: Tensor | None = None,
    units: str = "element",
    score: str = "all",
    seen_classes: Iterable[int] | None = None,
) -> dict:
    """The largest activity threshold whose ablation of sub-threshold activity costs at most ``max_drop`` accuracy.

    Zaidi et al. (section 3.2, appendix C) pick ``tau`` by a grid search: for
    each ``tau`` every unit of ``layer`` whose normalised activity is at or
    below ``tau`` (the inactive units of each input) is set to 0, and the
    highest ``tau`` whose accuracy drops by at most 1% is kept. The ablation is
    a forward hook on ``layer`` that returns the masked output (the model is
    not edited; the hook is removed afterwards, also on error). As a check of
    the converse, the accuracy with the *active* units zeroed is reported too
    (the paper expects it near chance).

    The evaluation set is the clean inputs and their transformed versions
    together, and each unit's normaliser is its maximum over both, as in
    :func:`neuron_invariance` (the paper's ``f_k``): a ``transform`` or the
    transformed inputs ``x_t`` are required. A unit is read as ``units``
    (see :func:`layer_units`): with ``"element"`` each activation is thresholded
    and zeroed on its own, with ``"channel"`` a channel's mean activity over
    the positions is thresholded and the whole channel map is zeroed. Give
    :func:`neuron_invariance` the same ``units`` for the chosen ``tau`` to
    mean the same thing. Every grid value is evaluated; the answer is the
    largest one that passes, even if the accuracy is not monotone in ``tau``.

    Args:
        model: a classifier returning (B, classes) logits, probed in its
            current mode (call ``.eval()`` first).
        layer: name of a submodule (``model.named_modules()``) whose output is
            a non-negative tensor, e.g. a ReLU (NaN or inf raise a ValueError).
        x: inputs; y: (B,) integer labels.
        taus: the grid (values in [0, 1]); default 0, 0.05, ..., 0.95.
        max_drop: largest accepted accuracy drop, a fraction (0.01 is 1%); a
            drop equal to it up to rounding passes.
        transform: the transform, called as ``transform(x, magnitude,
            generator=g)`` with ``g`` seeded with ``seed + 1``.
        magnitude: the transform's magnitude.
        copies: for an AugNet, the copies it averages (the same augmentation
            draws, from ``seed``, in every pass).
        seed: an AugNet's augmentations are drawn from ``seed``, the
            transform's parameters from ``seed + 1``.
        batch_size: run the model in chunks of this many rows.
        x_t: the transformed inputs, instead of ``transform`` (row ``i`` the
            transformed ``x[i]``); ``x_t=x`` evaluates the clean inputs alone.
        units: ``"element"`` or ``"channel"``, see :data:`UNITS`.
        score: the accuracy every ablation is scored by: ``"all"`` (every
            clean and transformed input) or ``"within"`` (within-category
            accuracy, on the transformed inputs of ``seen_classes``: the
            paper's Fig. 7). The normalisation uses every input either way.
        seen_classes: the seen-transformed categories for ``score="within"``;
            ``None`` counts every class as seen (the paper's setting where all
            categories are seen transformed).

    Returns:
        ``{"tau": the chosen value, or None (with a RuntimeWarning) when no grid
        value passes, "taus": [...], "accuracy": accuracy without ablation,
        "accuracy_inactive_ablated": [...], "accuracy_active_ablated": [...],
        "drop": [...], "active_fraction": [...] (fraction of the units'
        normalised activities, over clean and transformed inputs, above tau),
        "max_drop": max_drop, "units": units, "score": score, "n_scored":
        number of inputs scored}``, lists in grid order.

    Examples:
        >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
        >>> x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
        >>> out = select_tau(net, "1", x, y, taus=[0.0, 0.5], transform=lambda b, m, generator=None: -b)
        >>> out["tau"] in (0.0, 0.5), out["drop"][0]
        (True, 0.0)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(layer, str):
        raise TypeError(f"layer must be a module name (str), got {type(layer).__name__}")
    modules = dict(model.named_modules())
    if layer not in modules or layer == "":
        raise ValueError(f"unknown layer {layer!r}; the model's modules are {[n for n in modules if n]}")
    _check_labels(x, y)
    if isinstance(taus, (str, bytes)) or not isinstance(taus, Sequence) or len(taus) == 0:
        raise ValueError(f"taus must be a non-empty sequence of thresholds, got {taus!r}")
    grid = [_check_tau(t, "each tau") for t in taus]
    if isinstance(max_drop, bool) or not isinstance(max_drop, numbers.Real) or not 0.0 <= max_drop <= 1.0:
        raise ValueError(f"max_drop must be a fraction in [0, 1], got {max_drop!r}")
    units = _check_units(units)
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    if score == "all" and seen_classes is not None:
        raise ValueError("seen_classes only applies to score='within' (within-category accuracy)")
    step = _check_batch_size(batch_size, len(x))
    xt = _check_transform_inputs(x, transform, magnitude, x_t, seed, "select_tau")
    n = len(x)
    scored = torch.ones(2 * n, dtype=torch.bool)
    if score == "within":
        scored[:n] = False
        scored[n:] = _seen_mask(y.cpu(), seen_classes)
        if not bool(scored.any()):
            raise ValueError(f"no input of the seen classes {seen_classes!r} to score")
    x, y = torch.cat([x, xt]), torch.cat([y, y])
    y = y.to(x.device)
    scored = scored.to(x.device)
    module = modules[layer]

    def accuracy(pred: Tensor) -> float:
        return float((pred == y)[scored].double().mean())

    # Pass 1: each unit's maximum over clean and transformed inputs, and the unablated accuracy.
    state: dict = {"max": None}

    def record(mod, inputs, out):
        if not isinstance(out, Tensor):
            raise TypeError(f"layer {layer!r} must output a tensor to be ablated, got {type(out).__name__}")
        if out.dim() < 2:
            raise ValueError(f"layer {layer!r} must output (B, ...) activations, got shape {tuple(out.shape)}")
        if not bool(torch.isfinite(out).all()):
            raise ValueError(
                f"layer {layer!r} outputs non-finite activity (NaN or inf); its units' normalisers would be NaN "
                "and every ablation meaningless: fix the model or drop the inputs that cause it"
            )
        low = float(out.min()) if out.numel() else 0.0
        if low < 0:
            raise ValueError(
                f"layer {layer!r} outputs negative activations (minimum {low:.4g}); select_tau needs a "
                "non-negative layer, e.g. the ReLU after it"
            )
        m = _unit_view(out.detach(), units).amax(0)
        state["max"] = m if state["max"] is None else torch.maximum(state["max"], m)

    handle = module.register_forward_hook(record)
    try:
        base = accuracy(_predict(model, x, step, copies, seed))
    finally:
        handle.remove()
    if state["max"] is None:
        raise ValueError(f"layer {layer!r} was not called by the model's forward pass")
    scale = state["max"]
    div = torch.where(scale > 0, scale, torch.ones_like(scale))

    def ablate(tau: float, keep_active: bool, count: list):
        def hook(mod, inputs, out):
            active = (_unit_view(out, units) / div) > tau
            count[0] += int(active.sum())
            count[1] += active.numel()
            if units == "channel" and out.dim() > 2:
                active = active.reshape(*active.shape, *([1] * (out.dim() - 2)))
            return torch.where(active if keep_active else ~active, out, torch.zeros_like(out))

        return hook

    acc_inactive, acc_active, fractions = [], [], []
    for tau in grid:
        for keep_active, sink in ((True, acc_inactive), (False, acc_active)):
            count = [0, 0]
            handle = module.register_forward_hook(ablate(tau, keep_active, count))
            try:
                sink.append(accuracy(_predict(model, x, step, copies, seed)))
            finally:
                handle.remove()
            if keep_active:
                fractions.append(count[0] / max(count[1], 1))
    drops = [base - acc for acc in acc_inactive]
    passing = [t for t, d in zip(grid, drops, strict=True) if d <= max_drop + _ROUNDING]
    chosen = max(passing) if passing else None
    if chosen is None:
        warnings.warn(
            f"select_tau: no tau in {grid} keeps the accuracy drop within {max_drop} (smallest drop "
            f"{min(drops):.4g}); include 0 in the grid (ablating nothing) or raise max_drop",
            RuntimeWarning,
            stacklevel=2,
        )
    return {
        "tau": chosen,
        "taus": grid,
        "accuracy": base,
        "accuracy_inactive_ablated": acc_inactive,
        "accuracy_active_ablated": acc_active,
        "drop": drops,
        "active_fraction": fractions,
        "max_drop": float(max_drop),
        "units": units,
        "score": score,
        "n_scored": int(scored.sum()),
    }


def _unit_view(out: Tensor, units: str) -> Tensor:
    """A layer output's units, keeping the layout for elements: (N, ...) for ``"element"``, (N, C) for ``"channel"``."""
    if units == "channel" and out.dim() > 2:
        return out.flatten(2).mean(2)
    return out


# --------------------------------------------------------------------------- several layers, and plots


def _layer_taus(tau, names: Sequence[str]) -> dict[str, float]:
    if isinstance(tau, Mapping):
        missing = [n for n in names if n not in tau]
        if missing:
            raise ValueError(f"tau has no entry for layer(s) {missing}")
        return {n: _check_tau(tau[n], f"tau[{n!r}]") for n in names}
    value = _check_tau(tau)
    return dict.fromkeys(names, value)


@torch.no_grad()
def layerwise_invariance(
    model: nn.Module,
    x: Tensor,
    layers: str | Sequence[str],
    tau: float | Mapping[str, float],
    transform=None,
    magnitude: float = 1.0,
    x_t: Tensor | None = None,
    units: str = "element",
    y: Tensor | None = None,
    seen_classes: Iterable[int] | None = None,
    copies: int | None = None,
    seed: int = 0,
    batch_size: int | None = None,
    draws: str = "shared",
) -> dict:
    """:func:`neuron_invariance` of several layers in one call: the layer-wise invariance of Zaidi et al. (Fig. 10).

    Every layer's activity is read with forward hooks (:func:`~augnet.probes.features`)
    in one pass over the clean inputs and one over the transformed inputs,
    which share an AugNet's augmentation draws (``seed``; ``draws="independent"``
    draws them afresh in each pass); the transform's
    parameters are drawn from ``seed + 1``, as in :func:`select_tau`. Each
    layer is scored with its own ``tau`` (one value for all, or ``{layer:
    tau}``, e.g. from :func:`select_tau` with the same ``units``).

    With ``y`` and ``seen_classes`` the coefficients are also computed over
    the inputs of the seen- and of the unseen-transformed categories only
    (the rows of the paper's Fig. 10: seen, unseen, or both), each unit
    normalised over every input so that the groups share one scale.

    Args:
        model: probed in its current mode (call ``.eval()``).
        x: clean inputs.
        layers: one or several module names whose outputs are non-negative.
        tau: the activity threshold, or ``{layer: tau}``.
        transform: called as ``transform(x, magnitude, generator=g)``; or give ``x_t``.
        magnitude: the transform's magnitude.
        x_t: the transformed inputs, instead of ``transform``.
        units: ``"element"`` or ``"channel"``, see :func:`layer_units`.
        y: (B,) integer labels, needed with ``seen_classes``.
        seen_classes: the seen-transformed categories.
        copies: for an AugNet, the copies it averages.
        seed: an AugNet's draws (``seed``) and the transform's (``seed + 1``).
        batch_size: run the model in chunks.
        draws: ``"shared"`` or ``"independent"`` AugNet draws in the two passes
            (see :func:`~augnet.probes.invariance_curve`).

    Returns:
        ``{"layers": [...], "units": units, "tau": {layer: tau}, "groups":
        {group: {layer: neuron_invariance output}}, "mean": {group: {layer:
        mean I_k}}, "median": {group: {layer: median I_k}}}`` with groups
        ``"all"`` and, given ``seen_classes``, ``"seen"`` and ``"unseen"``.
        A layer whose units are never active has NaN mean and median.

    Examples:
        >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU()).eval()
        >>> out = layerwise_invariance(net, torch.randn(16, 4), ["1", "3"], tau=0.1, x_t=torch.randn(16, 4))
        >>> sorted(out["mean"]["all"]), 0 <= out["mean"]["all"]["1"] <= 1
        (['1', '3'], True)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    names = [layers] if isinstance(layers, str) else list(layers)
    if not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"layers must name one or more modules, got {layers!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"layers must not repeat a layer, got {names}")
    units = _check_units(units)
    check_draws(draws)
    taus = _layer_taus(tau, names)
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.dim() == 0 or len(x) == 0:
        raise ValueError(f"x must be a non-empty batch, got shape {tuple(x.shape)}")
    groups: dict[str, Tensor | None] = {"all": None}
    if seen_classes is not None:
        if y is None:
            raise ValueError("seen_classes needs the labels y")
        _check_labels(x, y)
        seen = _seen_mask(y.to(x.device), seen_classes)
        groups.update(seen=seen, unseen=~seen)
    elif y is not None:
        _check_labels(x, y)
    step = _check_batch_size(batch_size, len(x))
    xt = _check_transform_inputs(x, transform, magnitude, x_t, seed, "layerwise_invariance")
    clean = features(model, x, names, batch_size=step, **forward_kwargs(model, copies, seed, x.device, draws))
    moved = features(model, xt, names, batch_size=step, **forward_kwargs(model, copies, seed, x.device, draws, 1))
    out: dict = {"layers": names, "units": units, "tau": taus, "groups": {}, "mean": {}, "median": {}}
    for group, rows in groups.items():
        per_layer = {}
        for name in names:
            try:
                per_layer[name] = neuron_invariance(
                    clean[name], moved[name], taus[name], rows=None if rows is None else rows.cpu(), units=units
                )
            except (ValueError, TypeError) as err:
                raise type(err)(f"layer {name!r}: {err}") from err
        out["groups"][group] = per_layer
        out["mean"][group] = {n: r["summary"]["mean"] for n, r in per_layer.items()}
        out["median"][group] = {n: r["summary"]["median"] for n, r in per_layer.items()}
    return out


def plot_neuron_invariance(
    distributions: Mapping,
    path,
    quantity: str = "invariance",
    group: str = "all",
    title: str | None = None,
) -> Path:
    """Violin plots of a per-unit (or per-input) quantity, one violin per layer or condition (Zaidi et al., Figs. 3-4).

    Needs matplotlib (``pip install "augnet[viz]"``), imported only here.

    Args:
        distributions: ``{label: neuron_invariance output}`` (e.g. one per
            training condition, or seen / unseen), ``{label: values}``, or the
            output of :func:`layerwise_invariance` (one violin per layer, from
            ``group``).
        path: where to write the PNG.
        quantity: ``"invariance"`` (``I_k`` among units, NaN units left out),
            ``"n_active"`` (images that activate each unit) or
            ``"units_per_input"`` (units active per image), see :data:`PLOTTED`.
        group: for a :func:`layerwise_invariance` result, ``"all"``, ``"seen"``
            or ``"unseen"``.
        title: optional figure title.

    Returns:
        The path written.
    """
    if quantity not in PLOTTED:
        raise ValueError(f"quantity must be one of {PLOTTED}, got {quantity!r}")
    if not isinstance(distributions, Mapping) or not distributions:
        raise ValueError("distributions must be a non-empty dict {label: neuron_invariance output or values}")
    if "groups" in distributions and "layers" in distributions:
        if group not in distributions["groups"]:
            raise ValueError(f"group must be one of {sorted(distributions['groups'])}, got {group!r}")
        distributions = distributions["groups"][group]
    values = {}
    for label, entry in distributions.items():
        if isinstance(entry, Mapping):
            if quantity not in entry:
                raise ValueError(f"{label!r} has no {quantity!r}: pass neuron_invariance outputs")
            entry = entry[quantity]
        values[label] = entry
    from augnet.viz import plot_distributions

    labels = {
        "invariance": "invariance coefficient",
        "n_active": "inputs per unit",
        "units_per_input": "units per input",
    }
    ylim = (-0.02, 1.02) if quantity == "invariance" else None
    return plot_distributions(values, path, labels[quantity], kind="violin", title=title, ylim=ylim)
