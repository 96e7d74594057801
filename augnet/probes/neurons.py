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

Zaidi, Boix, et al., "Is Robustness To Transformations Driven by Invariant
Neural Representations?".
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from augnet.probes._common import forward_kwargs, summary

__all__ = ["DEFAULT_TAUS", "neuron_invariance", "select_tau", "unit_scale"]

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


def _check_activations(a, name: str) -> Tensor:
    if not isinstance(a, Tensor):
        raise TypeError(f"{name} must be a tensor, got {type(a).__name__}")
    if a.dim() != 2:
        raise ValueError(
            f"{name} must have shape (B, units), got {tuple(a.shape)}; reduce a feature map first, e.g. "
            "features(..., reduce='mean') for one unit per channel or reduce='flatten' for one per position"
        )
    if a.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch (shape {tuple(a.shape)})")
    if a.dtype == torch.bool or a.is_complex():
        raise TypeError(f"{name} must hold real numbers, got dtype {a.dtype}")
    a = a.detach().double()
    if not bool(torch.isfinite(a).all()):
        raise ValueError(f"{name} holds non-finite values (NaN or inf)")
    low = float(a.min())
    if low < 0:
        raise ValueError(
            f"{name} holds negative activations (minimum {low:.4g}); the measure needs non-negative ones: "
            "probe a layer after its ReLU, or pass a.clamp_min(0) if that is what the next layer sees"
        )
    return a


def unit_scale(a: Tensor, a_t: Tensor | None = None) -> Tensor:
    """Each unit's maximum over the clean (and transformed) inputs: the normaliser of the measure.

    Shape:
        - a, a_t: (B, units), non-negative.
        - output: (units,) float64; 0 for a unit that is never active.

    Examples:
        >>> unit_scale(torch.tensor([[1.0, 0.0], [3.0, 0.0]]), torch.tensor([[2.0, 0.0], [0.0, 0.0]]))
        tensor([3., 0.], dtype=torch.float64)
    """
    a = _check_activations(a, "a")
    m = a.amax(0)
    if a_t is not None:
        a_t = _check_activations(a_t, "a_t")
        if a_t.shape[1] != a.shape[1]:
            raise ValueError(f"a and a_t must have the same units, got shapes {tuple(a.shape)} and {tuple(a_t.shape)}")
        m = torch.maximum(m, a_t.amax(0))
    return m


def neuron_invariance(a: Tensor, a_t: Tensor, tau: float, rows: Tensor | None = None) -> dict:
    """Per-unit invariance coefficients ``I_k`` of Zaidi et al. (eq. 1, see the module docstring).

    Args:
        a: activations on the clean inputs, ``f(x)``; non-negative (negative
            values raise a ValueError: probe the layer after its ReLU).
        a_t: activations on the transformed inputs, ``f(T(x))``, row ``i`` the
            transformed version of row ``i`` of ``a``.
        tau: activity threshold in [0, 1] on the normalised activity (see
            :func:`select_tau`).
        rows: optional (B,) bool mask of the inputs that enter the units'
            means, e.g. the samples of the seen-transformed categories; the
            normalisation still uses every row, so scores of different groups
            are on the same scale.

    Returns:
        A dict with

        - ``"invariance"``: (units,) float64, ``I_k`` in [0, 1]; NaN for a unit
          with an empty active set (never above ``tau``, e.g. a dead unit).
        - ``"scores"``: (B, units) float64, ``h_k(x)`` for every pair where the
          clean or the transformed activity is non-zero; NaN where both are 0.
        - ``"active"``: (B, units) bool, ``x in A_k`` (and in ``rows``).
        - ``"n_active"``: (units,) int64, the size of each active set.
        - ``"units_per_input"``: (B,) int64, how many units each input activates.
        - ``"scale"``: (units,) float64, each unit's maximum (the normaliser).
        - ``"summary"``: :func:`summary` of ``"invariance"`` over the units that
          are not NaN, plus ``"n_units"`` and ``"n_never_active"``.

    Shape:
        - a, a_t: (B, units), B >= 1.
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
    a = _check_activations(a, "a")
    a_t = _check_activations(a_t, "a_t")
    if a.shape != a_t.shape:
        raise ValueError(f"a and a_t must have the same shape, got {tuple(a.shape)} and {tuple(a_t.shape)}")
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
    active = (f > tau) | (f_t > tau)
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
        "scale": scale,
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
) -> dict:
    """The largest activity threshold whose ablation of sub-threshold activity costs at most ``max_drop`` accuracy.

    Zaidi et al. (section 3.2, appendix C) pick ``tau`` by a grid search: for
    each ``tau`` every activity of ``layer`` whose normalised value is at or
    below ``tau`` (the inactive units of each input) is set to 0, and the
    highest ``tau`` whose accuracy drops by at most 1% is kept. The ablation is
    a forward hook on ``layer`` that returns the masked output (the model is
    not edited; the hook is removed afterwards, also on error). As a check of
    the converse, the accuracy with the *active* activity zeroed is reported
    too (the paper expects it near chance).

    The normaliser of each activation (each element of the layer's output
    after the batch axis, i.e. each unit of a (B, units) layer) is its maximum
    over the evaluation inputs, as in :func:`neuron_invariance`. Every grid
    value is evaluated; the answer is the largest one that passes, even if
    the accuracy is not monotone in ``tau``.

    Args:
        model: a classifier returning (B, classes) logits, probed in its
            current mode (call ``.eval()`` first).
        layer: name of a submodule (``model.named_modules()``) whose output is
            a non-negative tensor, e.g. a ReLU.
        x: inputs; y: (B,) integer labels.
        taus: the grid (values in [0, 1]); default 0, 0.05, ..., 0.95.
        max_drop: largest accepted accuracy drop, a fraction (0.01 is 1%); a
            drop equal to it up to rounding passes.
        transform: optional transform; the evaluation set is then ``x`` and
            ``transform(x, magnitude)`` together (clean and transformed inputs,
            as the normalisation of the measure uses both).
        magnitude: the transform's magnitude.
        copies: for an AugNet, the copies it averages (the same augmentation
            draws, from ``seed``, in every pass).
        seed: seeds the transform's parameters and an AugNet's augmentations.
        batch_size: run the model in chunks of this many rows.

    Returns:
        ``{"tau": the chosen value, or None (with a RuntimeWarning) when no grid
        value passes, "taus": [...], "accuracy": accuracy without ablation,
        "accuracy_inactive_ablated": [...], "accuracy_active_ablated": [...],
        "drop": [...], "active_fraction": [...] (mean fraction of the layer's
        activations above tau), "max_drop": max_drop}``, lists in grid order.

    Examples:
        >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
        >>> x, y = torch.randn(32, 4), torch.randint(0, 3, (32,))
        >>> out = select_tau(net, "1", x, y, taus=[0.0, 0.5])
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
    step = _check_batch_size(batch_size, len(x))
    if transform is not None:
        if not callable(transform):
            raise TypeError(f"transform must be callable, got {type(transform).__name__}")
        xt = transform(x, magnitude, generator=torch.Generator(device=x.device).manual_seed(seed + 1))
        if xt.shape != x.shape:
            raise ValueError(f"the transform changed the input shape from {tuple(x.shape)} to {tuple(xt.shape)}")
        x, y = torch.cat([x, xt]), torch.cat([y, y])
    y = y.to(x.device)
    module = modules[layer]

    # Pass 1: each activation's maximum, and the unablated accuracy.
    state: dict = {"max": None}

    def record(mod, inputs, out):
        if not isinstance(out, Tensor):
            raise TypeError(f"layer {layer!r} must output a tensor to be ablated, got {type(out).__name__}")
        low = float(out.min()) if out.numel() else 0.0
        if low < 0:
            raise ValueError(
                f"layer {layer!r} outputs negative activations (minimum {low:.4g}); select_tau needs a "
                "non-negative layer, e.g. the ReLU after it"
            )
        m = out.detach().amax(0)
        state["max"] = m if state["max"] is None else torch.maximum(state["max"], m)

    handle = module.register_forward_hook(record)
    try:
        base = float((_predict(model, x, step, copies, seed) == y).double().mean())
    finally:
        handle.remove()
    if state["max"] is None:
        raise ValueError(f"layer {layer!r} was not called by the model's forward pass")
    scale = state["max"]
    div = torch.where(scale > 0, scale, torch.ones_like(scale))

    def ablate(tau: float, keep_active: bool, count: list):
        def hook(mod, inputs, out):
            active = (out / div) > tau
            count[0] += int(active.sum())
            count[1] += active.numel()
            return torch.where(active if keep_active else ~active, out, torch.zeros_like(out))

        return hook

    acc_inactive, acc_active, fractions = [], [], []
    for tau in grid:
        for keep_active, sink in ((True, acc_inactive), (False, acc_active)):
            count = [0, 0]
            handle = module.register_forward_hook(ablate(tau, keep_active, count))
            try:
                sink.append(float((_predict(model, x, step, copies, seed) == y).double().mean()))
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
    }
