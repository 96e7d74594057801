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
and every function here takes the same ``units`` argument (see ``UNITS``
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

Where the code lives: :func:`layerwise_invariance` is here; the units,
:func:`unit_scale` and :func:`neuron_invariance` in
:mod:`augnet.probes.unit_invariance`; :func:`select_tau` in
:mod:`augnet.probes.tau_selection`; :func:`plot_neuron_invariance` in
:mod:`augnet.probes.plots`. Every name of ``__all__`` can be imported from here.

Zaidi, Boix, et al., "Is Robustness To Transformations Driven by Invariant
Neural Representations?".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import Tensor, nn

from augnet._checks import check_bool
from augnet.probes._common import (
    check_draws,
    check_labels,
    check_model_input,
    check_seed,
    evaluating,
    forward_kwargs,
    rows_of,
)
from augnet.probes.features import _features
from augnet.probes.plots import PLOTTED, plot_neuron_invariance
from augnet.probes.tau_selection import (
    DEFAULT_TAUS,
    SCORES,
    _check_batch_size,
    _check_moved,
    _check_transform_inputs,
    _seen_mask,
    select_tau,
)
from augnet.probes.unit_invariance import (
    UNITS,
    UnitInvariance,
    _check_tau,
    _check_units,
    layer_units,
    neuron_invariance,
    unit_scale,
)

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


# --------------------------------------------------------------------------- several layers


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
    per_input: bool = False,
) -> dict:
    """:func:`neuron_invariance` of several layers in one call: the layer-wise invariance of Zaidi et al. (Fig. 10).

    Every layer's activity is read with forward hooks (:func:`~augnet.probes.features`),
    batch by batch, on the clean and on the transformed inputs, which share an
    AugNet's augmentation draws (``seed``; ``draws="independent"`` draws them
    afresh for the transformed inputs). The inputs are run twice: once to find
    each unit's maximum, once to score, so that only per-unit sums are held and
    any number of inputs fits in the memory of one batch. The transform's
    parameters are drawn from ``seed + 1``, as in :func:`select_tau`. Each
    layer is scored with its own ``tau`` (one value for all, or ``{layer:
    tau}``, e.g. from :func:`select_tau` with the same ``units``).

    With ``y`` and ``seen_classes`` the coefficients are also computed over
    the inputs of the seen- and of the unseen-transformed categories only
    (the rows of the paper's Fig. 10: seen, unseen, or both), each unit
    normalised over every input so that the groups share one scale.

    Args:
        model: probed in evaluation mode (its modes are restored afterwards).
        x: clean inputs.
        layers: one or several module names whose outputs are non-negative
            (``"name#k"`` for the k-th call of a reused module).
        tau: the activity threshold, or ``{layer: tau}``.
        transform: called as ``transform(x, magnitude, generator=g)``; or give ``x_t``.
        magnitude: the transform's magnitude.
        x_t: the transformed inputs, instead of ``transform``.
        units: ``"element"`` or ``"channel"``, see :func:`layer_units`.
        y: class labels ((B,) or (B, 1), any integer dtype, a NumPy array or a list; whole floats
            too), needed with ``seen_classes``.
        seen_classes: the seen-transformed categories.
        copies: for an AugNet, the copies it averages.
        seed: an AugNet's draws (``seed``) and the transform's (``seed + 1``).
        batch_size: run the model in chunks of this many rows (default 256).
        draws: ``"shared"`` or ``"independent"`` AugNet draws in the two passes
            (see :func:`~augnet.probes.invariance_curve`).
        per_input: also keep each layer's (B, units) ``"scores"`` and ``"active"``
            (9 bytes per input and unit; left out by default).

    Returns:
        ``{"layers": [...], "units": units, "tau": {layer: tau}, "groups":
        {group: {layer: neuron_invariance output, without the per-input tensors
        unless per_input}}, "mean": {group: {layer:
        mean I_k}}, "median": {group: {layer: median I_k}}}`` with groups
        ``"all"`` and, given ``seen_classes``, ``"seen"`` and ``"unseen"``.
        A layer whose units are never active has NaN mean and median, and so has a group with no
        input (no label in ``seen_classes``).

    Examples:
        >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU()).eval()
        >>> out = layerwise_invariance(net, torch.randn(16, 4), ["1", "3"], tau=0.1, x_t=torch.randn(16, 4))
        >>> sorted(out["mean"]["all"]), 0 <= out["mean"]["all"]["1"] <= 1
        (['1', '3'], True)
    """
    seed = check_seed(seed)  # before anything runs: an int in [0, 2**63 - 3], a NumPy one too
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(layers, (str, Iterable)):  # list(3) raised a TypeError naming no argument
        raise TypeError(f"layers must be a module name or a list of them, got {type(layers).__name__}: {layers!r}")
    names = [layers] if isinstance(layers, str) else list(layers)
    if not names or not all(isinstance(n, str) for n in names):
        raise ValueError(f"layers must name one or more modules, got {layers!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"layers must not repeat a layer, got {names}")
    units = _check_units(units)
    check_draws(draws)
    check_bool("per_input", per_input)  # "no" was a truthy flag: the per-input tensors were kept
    taus = _layer_taus(tau, names)
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.dim() == 0 or len(x) == 0:
        raise ValueError(f"x must be a non-empty batch, got shape {tuple(x.shape)}")
    check_model_input(model, x)
    groups: dict[str, Tensor | None] = {"all": None}
    if seen_classes is not None:
        if y is None:
            raise ValueError("seen_classes needs the labels y")
        y = check_labels(x, y)
        seen = _seen_mask(y.to(x.device), seen_classes)
        groups.update(seen=seen, unseen=~seen)
    elif y is not None:
        y = check_labels(x, y)
    step = _check_batch_size(batch_size, len(x))
    xt = _check_transform_inputs(x, transform, magnitude, x_t, seed, "layerwise_invariance")
    _check_moved(model, xt, "x_t" if x_t is not None else "transform(x, magnitude)")
    # Two passes over the inputs, batch by batch: each unit's maximum over clean and transformed
    # activity, then the scores; only per-unit sums are kept (and per-input scores with per_input).
    accs = {(group, name): UnitInvariance(taus[name], units, len(x), per_input) for group in groups for name in names}
    with evaluating(model):
        for scoring in (False, True):
            # The same augmentation draws in both passes: fresh generators, seeded alike.
            kw_clean = forward_kwargs(model, copies, seed, x.device, draws)
            kw_moved = forward_kwargs(model, copies, seed, x.device, draws, 1)
            for start in range(0, len(x), step):
                stop = min(start + step, len(x))
                clean = _features(model, x[start:stop], names, batch_size=stop - start, **kw_clean)
                moved = _features(model, rows_of(xt, start, stop), names, batch_size=stop - start, **kw_moved)
                for (group, name), acc in accs.items():
                    try:
                        if not scoring:
                            if group == "all":
                                acc.observe(clean[name], moved[name], start)
                            continue
                        if acc.scale is None:
                            acc.scale = accs[("all", name)].scale
                        mask = groups[group]
                        acc.score(start, clean[name], moved[name], None if mask is None else mask[start:stop])
                    except (ValueError, TypeError) as err:
                        raise type(err)(f"layer {name!r}: {err}") from err
    out: dict = {"layers": names, "units": units, "tau": taus, "groups": {}, "mean": {}, "median": {}}
    for group in groups:
        per_layer = {name: accs[(group, name)].result() for name in names}
        out["groups"][group] = per_layer
        out["mean"][group] = {n: r["summary"]["mean"] for n, r in per_layer.items()}
        out["median"][group] = {n: r["summary"]["median"] for n, r in per_layer.items()}
    return out
